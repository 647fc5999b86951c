"""The waiters' deadlines, in deadline order, deleted at once.

Each waiter with a deadline has an entry ``(key, waiter)``, its key the
deadline and then its push order in one int, ``(deadline << SHIFT) + seq``,
kept in the sorted chunks of ``_sorted.py``: a waiter that leaves (granted,
cancelled, expired) deletes its entry at once, so no dead entry is left for
a later operation to drop, and no operation rebuilds the whole; ``n``
entries take fewer than ``2n / CHUNK + 2`` chunks.
"""

from __future__ import annotations

from ._queues import Queues, Waiter
from ._sorted import SHIFT, Sorted

__all__ = ["SHIFT", "Deadlines"]


class Deadlines(Sorted[Waiter]):
    """The deadlines of one machine's waiters: ``firsts[0] >> SHIFT`` is the
    earliest."""

    __slots__ = ()

    def add(self, waiter: Waiter, deadline: int) -> None:
        """``waiter`` (just queued) expires at ``deadline``."""
        self.insert((deadline << SHIFT) + waiter.seq, waiter)

    def remove(self, waiter: Waiter) -> None:
        """``waiter``, which has a deadline, left other than by expiring."""
        self.delete((waiter.deadline << SHIFT) + waiter.seq)  # type: ignore[operator]

    def expire(self, now: int, queues: Queues) -> list[Waiter]:
        """Take every waiter whose deadline is ``<= now`` out of ``queues``;
        return them in deadline order."""
        past = (now + 1) << SHIFT  # the first key of a deadline after now
        expired = self.pop_below(past)
        for waiter in expired:
            queues._remove(waiter)
        return expired

    def sorted(self) -> list[tuple[int, int, Waiter]]:
        """Every entry as ``(deadline, seq, waiter)``, in deadline order (a
        snapshot)."""
        return [(key >> SHIFT, w.seq, w) for key, w in self.entries()]

    def check(self, queues: Queues, now: int | None) -> None:
        """Assert the invariants at the machine's time ``now`` (for tests;
        O(n); changes nothing)."""
        self.check_chunks("deadline")
        keys = [key for key, _ in self.entries()]
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
