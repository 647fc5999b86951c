"""The waiting line: one FIFO queue per level, with O(1) cancellation.

Everything about *where waiters stand* lives here; *who goes next* is the
policy's (``_policies.py``) and *when* is the machine's (``_machine.py``).
Because the machine only ever takes a level's head, every policy keeps
first-in-first-out order within a level.

Cancelled and expired waiters are removed lazily: they stay in their level's
deque, marked dead by no longer being the entry of their id, until they reach
the head or the level is compacted. A level is compacted when its dead entries
outnumber its live ones by more than :data:`SLACK`, checked after every
departure (grant, cancel or expiry), so the entries held never exceed
``2 * waiting + SLACK`` per level, and each entry is dropped once (amortised
O(1) per departure).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import NamedTuple

__all__ = ["SLACK", "Queues", "Waiter"]

#: Dead entries a level may hold beyond its number of live waiters.
SLACK = 32


class Waiter(NamedTuple):
    """One waiter, as a policy sees it. Immutable."""

    #: The caller's id, unique among waiting ids.
    id: Hashable
    #: Its level; 0 is the most urgent.
    level: int
    #: Push order: a counter over all pushes, smaller is earlier.
    seq: int
    #: The time (ns) it was pushed.
    pushed_at: int
    #: The time (ns) at which it expires if still waiting, or ``None``.
    deadline: int | None
    #: The units it asks for, one per limit of the machine (in the order the
    #: limits were given).
    cost: tuple[int, ...] = (1,)


class Queues:
    """The waiters of one machine, one FIFO queue per level.

    A policy reads it through :attr:`levels`, :attr:`depths`, :meth:`head`
    and :attr:`granted`; only the machine changes it.
    """

    __slots__ = ("_by_id", "_dead", "_limits", "_lines", "_sums", "depths", "granted", "levels")

    def __init__(self, levels: int, limits: int = 1) -> None:
        #: Number of levels; level 0 is the most urgent.
        self.levels = levels
        #: Waiters per level (the queue depths). Read-only for policies.
        self.depths = [0] * levels
        #: Permits granted so far, over all levels (refunds do not subtract).
        self.granted = 0
        self._limits = limits
        #: Units asked for by the waiters of each level, one entry per limit;
        #: kept once costs differ (:meth:`_sum_costs`), ``None`` until then.
        self._sums: list[list[int]] | None = None
        self._lines: list[deque[Waiter]] = [deque() for _ in range(levels)]
        self._dead = [0] * levels
        self._by_id: dict[Hashable, Waiter] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, id: object) -> bool:
        return id in self._by_id

    def __repr__(self) -> str:
        return f"<Queues depths={self.depths!r} granted={self.granted}>"

    @property
    def entries(self) -> int:
        """Entries held over all levels, live and dead: the memory of the
        lazy removal (at most ``2 * waiting + SLACK`` per level)."""
        return sum(len(line) for line in self._lines)

    def head(self, level: int) -> Waiter:
        """The waiter that has waited longest at ``level`` (which must not be empty)."""
        if not self.depths[level]:
            raise IndexError(f"level {level} has no waiters")
        return self._lines[level][0]

    def get(self, id: Hashable) -> Waiter | None:
        """The waiter with this id, or ``None`` if it is not waiting."""
        return self._by_id.get(id)

    def waiters(self, level: int) -> list[Waiter]:
        """The waiters of ``level``, first to be served first."""
        by_id = self._by_id
        return [w for w in self._lines[level] if by_id.get(w.id) is w]

    # -- changes, made by the machine only ---------------------------------

    def _append(self, waiter: Waiter) -> None:
        """``waiter`` joins the back of its level."""
        self._by_id[waiter.id] = waiter
        self._lines[waiter.level].append(waiter)
        self.depths[waiter.level] += 1
        if self._sums is not None:
            self._count(waiter, 1)

    def _take_head(self, level: int) -> Waiter:
        """The head of ``level`` leaves with a permit (which must not be empty)."""
        waiter = self._lines[level].popleft()
        del self._by_id[waiter.id]
        self.depths[level] -= 1
        self.granted += 1
        if self._sums is not None:
            self._count(waiter, -1)
        if self._dead[level]:
            self._tidy(level)
        return waiter

    def _remove(self, waiter: Waiter) -> bool:
        """Remove ``waiter`` if it is still waiting (cancel, expiry)."""
        by_id = self._by_id
        if by_id.get(waiter.id) is not waiter:
            return False
        del by_id[waiter.id]
        level = waiter.level
        self.depths[level] -= 1
        if self._sums is not None:
            self._count(waiter, -1)
        line = self._lines[level]
        if line[0] is waiter:
            line.popleft()
        else:
            self._dead[level] += 1
        if self._dead[level]:
            self._tidy(level)
        return True

    @property
    def units(self) -> list[list[int]]:
        """Units asked for by the waiters of each level, one entry per limit."""
        if self._sums is not None:
            return [list(units) for units in self._sums]
        return [[depth] * self._limits for depth in self.depths]  # every cost is 1

    def _sum_costs(self) -> None:
        """Costs differ from now on: keep their sums per level."""
        if self._sums is None:
            self._sums = [[0] * self._limits for _ in range(self.levels)]
            for level in range(self.levels):
                for waiter in self.waiters(level):
                    self._count(waiter, 1)

    def _count(self, waiter: Waiter, sign: int) -> None:
        assert self._sums is not None
        units = self._sums[waiter.level]
        for i, n in enumerate(waiter.cost):
            units[i] += sign * n

    def _tidy(self, level: int) -> None:
        """After a waiter left ``level`` (granted, cancelled or expired): drop
        dead entries from the head, and compact the level if its dead entries
        outnumber its live ones by more than SLACK. Each dead entry is dropped
        once, so this is amortised O(1) per departure."""
        self._drop_dead_heads(level)
        if self._dead[level] > self.depths[level] + SLACK:
            self._compact(level)

    def _drop_dead_heads(self, level: int) -> None:
        line = self._lines[level]
        by_id = self._by_id
        dead = self._dead[level]
        while dead and line and by_id.get(line[0].id) is not line[0]:
            line.popleft()
            dead -= 1
        self._dead[level] = dead

    def _compact(self, level: int) -> None:
        by_id = self._by_id
        self._lines[level] = deque(w for w in self._lines[level] if by_id.get(w.id) is w)
        self._dead[level] = 0

    def _check_valid(self) -> None:
        """Assert the internal invariants (for tests; O(n))."""
        by_id = self._by_id
        total = 0
        for level, line in enumerate(self._lines):
            live = [w for w in line if by_id.get(w.id) is w]
            _require(len(live) == self.depths[level], "depth counts the live entries")
            _require(len(line) - len(live) == self._dead[level], "dead count is exact")
            _require(len(line) <= 2 * len(live) + SLACK, "dead entries stay bounded")
            _require(not line or by_id.get(line[0].id) is line[0], "heads are live")
            _require(all(w.level == level for w in line), "waiters sit at their level")
            seqs = [w.seq for w in line]
            _require(seqs == sorted(seqs), "each level is in push order")
            asked = [sum(w.cost[i] for w in live) for i in range(self._limits)]
            _require(asked == self.units[level], "units count the live waiters' costs")
            total += len(live)
        _require(total == len(by_id), "every waiting id is in its level")


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(f"invariant broken: {what}")
