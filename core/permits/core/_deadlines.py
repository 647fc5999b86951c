"""The waiters' deadlines, in deadline order, deleted at once.

Each waiter with a deadline has an entry ``(key, waiter)``, its key the
deadline and then its push order in one int, ``(deadline << SHIFT) + seq``
(``seq`` is unique and below ``2 ** SHIFT``: no two keys tie, and ints
compare faster than tuples). The entries are kept sorted in chunks of at
most ``2 * CHUNK``, with each chunk's first key beside them to bisect. A
waiter that leaves (granted, cancelled, expired) is deleted from its chunk
at once: no dead entry is left for a later operation to drop, and no
operation rebuilds the whole. Any two neighbouring chunks hold at least
``CHUNK`` entries together, so ``n`` entries take fewer than
``2n / CHUNK + 2`` chunks.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import pairwise
from operator import itemgetter

from ._queues import CHUNK, Queues, Waiter

__all__ = ["SHIFT", "Deadlines"]

#: A key's bits below its deadline: ``key >> SHIFT`` is the deadline.
SHIFT = 64

_Entry = tuple[int, Waiter]
_key_of = itemgetter(0)


class Deadlines:
    """The deadlines of one machine's waiters."""

    __slots__ = ("chunks", "firsts")

    def __init__(self) -> None:
        #: The entries, sorted by key, in chunks (none empty).
        self.chunks: list[list[_Entry]] = []
        #: Each chunk's first key: ``firsts[0] >> SHIFT`` is the earliest
        #: deadline. Read-only outside this class.
        self.firsts: list[int] = []

    def add(self, waiter: Waiter, deadline: int) -> None:
        """``waiter`` (just queued) expires at ``deadline``."""
        key = (deadline << SHIFT) + waiter.seq
        chunks, firsts = self.chunks, self.firsts
        if not chunks:
            chunks.append([(key, waiter)])
            firsts.append(key)
            return
        i = max(0, bisect_right(firsts, key) - 1)
        chunk = chunks[i]
        j = bisect_left(chunk, key, key=_key_of)
        chunk.insert(j, (key, waiter))
        if not j:
            firsts[i] = key
        if len(chunk) > 2 * CHUNK:  # split in two halves
            chunks.insert(i + 1, chunk[CHUNK:])
            firsts.insert(i + 1, chunk[CHUNK][0])
            del chunk[CHUNK:]

    def remove(self, waiter: Waiter) -> None:
        """``waiter``, which has a deadline, left other than by expiring."""
        key = (waiter.deadline << SHIFT) + waiter.seq  # type: ignore[operator]
        i = bisect_right(self.firsts, key) - 1
        chunk = self.chunks[i]
        j = bisect_left(chunk, key, key=_key_of)
        del chunk[j]
        if len(chunk) < CHUNK:
            self._mend(i)
        elif not j:  # (a chunk this full can merge with none)
            self.firsts[i] = chunk[0][0]

    def expire(self, now: int, queues: Queues) -> list[Waiter]:
        """Take every waiter whose deadline is ``<= now`` out of ``queues``;
        return them in deadline order."""
        chunks, firsts = self.chunks, self.firsts
        past = (now + 1) << SHIFT  # the first key of a deadline after now
        expired: list[Waiter] = []
        while firsts and firsts[0] < past:
            chunk = chunks[0]
            j = bisect_left(chunk, past, key=_key_of)  # the entries due by now
            for _, waiter in chunk[:j]:
                queues._remove(waiter)
                expired.append(waiter)
            del chunk[:j]
            self._mend(0)
        return expired

    def _mend(self, i: int) -> None:
        """Chunk ``i`` lost entries: let it go if it is empty, or merge it
        with a neighbour if the two hold fewer than ``CHUNK`` together; and
        keep its first key."""
        chunks, firsts = self.chunks, self.firsts
        chunk = chunks[i]
        if not chunk:
            del chunks[i]
            del firsts[i]
        elif i + 1 < len(chunks) and len(chunk) + len(chunks[i + 1]) < CHUNK:
            chunk += chunks.pop(i + 1)
            del firsts[i + 1]
            firsts[i] = chunk[0][0]
        elif i > 0 and len(chunks[i - 1]) + len(chunk) < CHUNK:
            chunks[i - 1] += chunks.pop(i)
            del firsts[i]
        else:
            firsts[i] = chunk[0][0]

    def sorted(self) -> list[tuple[int, int, Waiter]]:
        """Every entry as ``(deadline, seq, waiter)``, in deadline order (a
        snapshot)."""
        return [(key >> SHIFT, w.seq, w) for chunk in self.chunks for key, w in chunk]

    def check(self, queues: Queues, now: int | None) -> None:
        """Assert the invariants at the machine's time ``now`` (for tests;
        O(n); changes nothing)."""
        chunks, firsts = self.chunks, self.firsts
        if len(firsts) != len(chunks) or any(
            not chunk or first != chunk[0][0] for chunk, first in zip(chunks, firsts, strict=False)
        ):
            raise AssertionError("invariant broken: a deadline chunk's first key is wrong")
        keys = [key for chunk in chunks for key, _ in chunk]
        if any(a >= b for a, b in pairwise(keys)):
            raise AssertionError("invariant broken: the deadlines are out of order")
        if any(len(chunk) > 2 * CHUNK for chunk in chunks) or any(
            len(a) + len(b) < CHUNK for a, b in pairwise(chunks)
        ):
            raise AssertionError("invariant broken: a deadline chunk is too large or too thin")
        entries = self.sorted()
        if any(
            queues.get(w.id) is not w or (w.deadline, w.seq) != (d, s) for d, s, w in entries
        ) or any(key != (d << SHIFT) + s for key, (d, s, _) in zip(keys, entries, strict=True)):
            raise AssertionError("invariant broken: a deadline entry of a waiter that left")
        with_deadline = sum(1 for w in queues._by_id.values() if w.deadline is not None)
        if len(entries) != with_deadline:
            raise AssertionError("invariant broken: every waiter with a deadline has an entry")
        if now is not None and entries and entries[0][0] <= now:
            raise AssertionError("invariant broken: a waiter is past its deadline")
