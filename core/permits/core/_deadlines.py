"""The waiters' deadlines: a heap whose dead entries are dropped lazily.

A waiter with a deadline that leaves other than by expiring (granted,
cancelled) leaves a dead entry; the heap is rebuilt when the dead ones
outnumber the live ones by more than :data:`~._queues.SLACK`, so it holds at
most ``2 * live + SLACK`` entries, at amortised O(1) per departure.
"""

from __future__ import annotations

import heapq

from ._queues import SLACK, Queues, Waiter

__all__ = ["Deadlines"]


class Deadlines:
    """The deadlines of one machine's waiters."""

    __slots__ = ("_dead", "heap")

    def __init__(self) -> None:
        #: ``(deadline, seq, waiter)`` entries, a heap; read-only outside
        #: this class, and always the same list (rebuilt in place).
        self.heap: list[tuple[int, int, Waiter]] = []
        self._dead = 0

    def add(self, waiter: Waiter, deadline: int) -> None:
        """``waiter`` (just queued) expires at ``deadline``."""
        heapq.heappush(self.heap, (deadline, waiter.seq, waiter))

    def first(self, queues: Queues) -> int | None:
        """The earliest deadline of a waiter still waiting, or ``None``."""
        heap = self.heap
        while heap and queues.get(heap[0][2].id) is not heap[0][2]:
            heapq.heappop(heap)
            self._dead -= 1
        return heap[0][0] if heap else None

    def expire(self, now: int, queues: Queues) -> list[Waiter]:
        """Take every waiter whose deadline is ``<= now`` out of ``queues``;
        return them in deadline order."""
        heap = self.heap
        expired = []
        while heap and heap[0][0] <= now:
            waiter = heapq.heappop(heap)[2]
            if queues._remove(waiter):
                expired.append(waiter)
            else:
                self._dead -= 1
        self._tidy(queues)
        return expired

    def left(self, queues: Queues) -> None:
        """A waiter with a deadline left other than by expiring."""
        self._dead += 1
        self._tidy(queues)

    def _tidy(self, queues: Queues) -> None:
        heap = self.heap
        if self._dead > len(heap) - self._dead + SLACK:
            heap[:] = [e for e in heap if queues.get(e[2].id) is e[2]]
            heapq.heapify(heap)
            self._dead = 0

    def sorted(self) -> list[tuple[int, int, Waiter]]:
        """Every entry, live or dead, in deadline order (a snapshot)."""
        return sorted(self.heap)

    def check(self, queues: Queues, now: int | None) -> None:
        """Assert the invariants at the machine's time ``now`` (for tests;
        O(n); changes nothing)."""
        live = [e for e in self.heap if queues.get(e[2].id) is e[2]]
        dead = len(self.heap) - len(live)
        if dead != self._dead:
            raise AssertionError(f"invariant broken: deadline dead count {self._dead} != {dead}")
        if len(self.heap) > 2 * len(live) + SLACK:
            raise AssertionError("invariant broken: deadline heap holds too many dead entries")
        with_deadline = sum(1 for w in queues._by_id.values() if w.deadline is not None)
        if len(live) != with_deadline:
            raise AssertionError("invariant broken: every waiter with a deadline is in the heap")
        if now is not None and any(deadline <= now for deadline, _, _ in live):
            raise AssertionError("invariant broken: a waiter is past its deadline")
