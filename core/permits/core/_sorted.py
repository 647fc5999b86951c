"""Entries kept in key order, each deleted at once: the one copy of the
sorted chunks that the deadlines (``_deadlines.py``) and each level's flow
heads (``_queues.py``) are kept in.

An entry is ``(key, item)``, its key a value and then a push order in one
int, ``(value << SHIFT) + seq`` (``seq`` is unique and below ``2 ** SHIFT``:
no two keys tie, and ints compare faster than tuples). The entries are kept
sorted in chunks of at most ``2 * CHUNK``, with each chunk's first key
beside them to bisect. An entry is deleted as soon as its item leaves: no
dead entry is left for a later operation to drop, and no operation rebuilds
the whole. Any two neighbouring chunks hold at least ``CHUNK`` entries
together, so ``n`` entries take fewer than ``2n / CHUNK + 2`` chunks, and
an insert or a delete costs O(log n) comparisons, a move of at most
``2 * CHUNK`` entries and, when a chunk splits, is let go or merged, a move
of one pointer per chunk.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import pairwise
from operator import itemgetter
from typing import Generic, TypeVar

__all__ = ["CHUNK", "SHIFT", "Sorted"]

#: The most waiters a chunk of a line holds (``_queues._Line``); a chunk of
#: sorted entries holds at most twice that.
CHUNK = 64

#: A key's bits below its value: ``key >> SHIFT`` is the value.
SHIFT = 64

T = TypeVar("T")

_key_of = itemgetter(0)


class Sorted(Generic[T]):
    """``(key, item)`` entries in key order, in chunks."""

    __slots__ = ("chunks", "firsts")

    def __init__(self) -> None:
        #: The entries, sorted by key, in chunks (none empty).
        self.chunks: list[list[tuple[int, T]]] = []
        #: Each chunk's first key: ``firsts[0]`` is the least. Read-only
        #: outside this class.
        self.firsts: list[int] = []

    def insert(self, key: int, item: T) -> None:
        """Add ``item`` under ``key``, which no entry has."""
        chunks, firsts = self.chunks, self.firsts
        if not chunks:
            chunks.append([(key, item)])
            firsts.append(key)
            return
        i = bisect_right(firsts, key, 1) - 1  # (0 for a key below them all)
        chunk = chunks[i]
        j = bisect_left(chunk, key, key=_key_of)
        chunk.insert(j, (key, item))
        if not j:
            firsts[i] = key
        if len(chunk) > 2 * CHUNK:  # split in two halves
            chunks.insert(i + 1, chunk[CHUNK:])
            firsts.insert(i + 1, chunk[CHUNK][0])
            del chunk[CHUNK:]

    def delete(self, key: int) -> None:
        """Delete the entry under ``key``, which is there."""
        i = bisect_right(self.firsts, key) - 1
        self._delete_at(i, bisect_left(self.chunks[i], key, key=_key_of))

    def delete_first(self) -> None:
        """Delete the entry under the least key."""
        self._delete_at(0, 0)

    def _delete_at(self, i: int, j: int) -> None:
        """Delete entry ``j`` of chunk ``i``."""
        chunks = self.chunks
        chunk = chunks[i]
        del chunk[j]
        if not chunk or (len(chunk) < CHUNK and len(chunks) > 1):
            self._mend(i)
        elif not j:  # (it merges with no neighbour)
            self.firsts[i] = chunk[0][0]

    def pop_below(self, key: int) -> list[T]:
        """Delete every entry under a key below ``key``; return their items
        in key order."""
        chunks, firsts = self.chunks, self.firsts
        items: list[T] = []
        while firsts and firsts[0] < key:
            chunk = chunks[0]
            j = bisect_left(chunk, key, key=_key_of)  # the entries below key
            items += [item for _, item in chunk[:j]]
            del chunk[:j]
            self._mend(0)
        return items

    def clear(self) -> None:
        self.chunks.clear()
        self.firsts.clear()

    def entries(self) -> list[tuple[int, T]]:
        """Every entry, in key order (a snapshot)."""
        return [entry for chunk in self.chunks for entry in chunk]

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

    def check_chunks(self, name: str) -> None:
        """Assert the invariants of the chunks of ``name`` entries (for tests;
        O(n); changes nothing)."""
        chunks, firsts = self.chunks, self.firsts
        if len(firsts) != len(chunks) or any(
            not chunk or first != chunk[0][0] for chunk, first in zip(chunks, firsts, strict=False)
        ):
            raise AssertionError(f"invariant broken: a {name} chunk's first key is wrong")
        keys = [key for chunk in chunks for key, _ in chunk]
        if any(a >= b for a, b in pairwise(keys)):
            raise AssertionError(f"invariant broken: the {name}s are out of order")
        if any(len(chunk) > 2 * CHUNK for chunk in chunks) or any(
            len(a) + len(b) < CHUNK for a, b in pairwise(chunks)
        ):
            raise AssertionError(f"invariant broken: a {name} chunk is too large or too thin")
