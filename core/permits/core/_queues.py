"""The waiting line: one FIFO queue per level, with O(1) cancellation.

Everything about *where waiters stand* lives here; *who goes next* is the
policy's (``_policies.py``) and *when* is the machine's (``_machine.py``).
Because the machine only ever takes a level's head, every policy keeps
first-in-first-out order within a level.

Cancelled and expired waiters are removed lazily: they stay in their level's
line, marked dead by no longer being the entry of their id, until they reach
the head or a *sweep* drops them. A sweep is compaction spread over time: it
starts when a level's dead entries outnumber half its live ones by more than
``SLACK / 2``, and every departure (grant, cancel or expiry) at a level that
holds dead entries takes at most :data:`SWEEP` of its steps, so no single
operation rebuilds a whole level. The entries held never exceed
``2 * waiting + SLACK`` per level (:class:`_Line` has the proof). A sweep
starts with more than a third of its entries dead and drops them all, so it
looks at fewer than three entries per entry it drops; with the dead heads,
each dropped once, that is amortised O(1) per departure.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterator
from itertools import chain
from typing import NamedTuple

__all__ = ["SLACK", "SWEEP", "Queues", "Waiter"]

#: Dead entries a level may hold beyond its number of live waiters.
SLACK = 32
#: Entries a sweep looks at per departure, at most: as much as one departure
#: can add to the debts of :class:`_Line`'s proof.
SWEEP = 6


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


class _Line:
    """One level's entries, live and dead, in push order: ``front + back``.

    Between sweeps ``front`` is empty. A sweep starts by swapping the two, so
    ``front`` holds the entries it has yet to look at; each step takes the
    last of them and puts it back at the start of ``back`` if it is live, or
    drops it. Newcomers join the end of ``back`` and heads leave from
    ``front`` while it lasts, so the order stays the push order throughout,
    and the sweep is over when ``front`` is empty.

    The bound. Write L for the live entries and D for the dead ones, of
    which D_back are in ``back``, and F = ``len(front)``. Between operations

        (a) 4 * D_back - 2 * L + F <= 2 * SLACK
        (b) 3 * (D - L) + F <= 2 * SLACK

    With F = 0, (a) reads ``2 * D <= L + SLACK``; with F > 0, (b) gives
    ``D - L < SLACK``: so ``D <= L + SLACK``, at most ``2 * L + SLACK``
    entries, always.

    Why they hold. A push only lowers the left sides, and so does dropping
    dead heads. A departure raises each by at most 6 (a dead entry more, a
    live one less) and each sweep step lowers each by at least 1 (F shrinks),
    so the SWEEP = 6 steps that follow pay for it; a departure that leaves
    no dead entry needs none (then D = 0 and F <= L: both hold outright). A
    step that finds F = 0 stops if (a) holds; otherwise (a) is over by at
    most what is left to pay, and starting the next sweep turns (b)'s left
    side into ``4 * D - 2 * L``, (a)'s, so the steps left pay for (b), while
    (a)'s drops to ``D - L``, far below.
    """

    __slots__ = ("_by_id", "back", "dead", "front")

    def __init__(self, by_id: dict[Hashable, Waiter]) -> None:
        #: Entries the current sweep has yet to look at; empty between sweeps.
        self.front: deque[Waiter] = deque()
        #: Entries the sweep kept, then those that joined since.
        self.back: deque[Waiter] = deque()
        #: Entries, in ``front`` or ``back``, that are no longer waiting.
        self.dead = 0
        self._by_id = by_id

    def __len__(self) -> int:
        return len(self.front) + len(self.back)

    def __iter__(self) -> Iterator[Waiter]:
        return chain(self.front, self.back)

    def head(self) -> Waiter:
        return (self.front or self.back)[0]

    def pop_head(self) -> Waiter:
        return (self.front or self.back).popleft()

    def append(self, waiter: Waiter) -> None:
        self.back.append(waiter)

    def drop_dead_heads(self) -> None:
        """Drop dead entries from the head, so that it is live."""
        by_id = self._by_id
        while self.dead:
            part = self.front or self.back
            if by_id.get(part[0].id) is part[0]:
                return
            part.popleft()
            self.dead -= 1

    def sweep(self) -> int:
        """Take up to SWEEP steps of the sweep; a step that finds nothing
        left to sweep starts the next sweep if one is due, or ends the
        batch. Returns the steps taken."""
        by_id = self._by_id
        for step in range(SWEEP):
            if not self.front:
                if 2 * self.dead <= len(self.back) - self.dead + SLACK:
                    return step  # no sweep due
                self.front, self.back = self.back, self.front
            waiter = self.front.pop()
            if by_id.get(waiter.id) is waiter:
                self.back.appendleft(waiter)
            else:
                self.dead -= 1
        return SWEEP


class Queues:
    """The waiters of one machine, one FIFO queue per level.

    A policy reads it through :attr:`levels`, :attr:`depths`, :meth:`head`,
    :attr:`granted` and :attr:`unit_costs`, and keeps its own state in
    :attr:`state`; only the machine changes the rest.
    """

    __slots__ = (
        "_by_id",
        "_limits",
        "_lines",
        "_sums",
        "depths",
        "granted",
        "levels",
        "state",
        "swept",
    )

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
        #: Sweep steps taken so far, over all levels: the compaction work
        #: (at most SWEEP per departure).
        self.swept = 0
        #: The policy's own state in this machine: what its ``start()``
        #: returned (``None`` for a policy without one). Changed only by the
        #: policy's ``record()``.
        self.state: object = None
        self._by_id: dict[Hashable, Waiter] = {}
        self._lines = [_Line(self._by_id) for _ in range(levels)]

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
        return self._lines[level].head()

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
        line = self._lines[level]
        waiter = line.pop_head()
        del self._by_id[waiter.id]
        self.depths[level] -= 1
        self.granted += 1
        if self._sums is not None:
            self._count(waiter, -1)
        if line.dead:
            self._tidy(line)
        return waiter

    def _remove(self, waiter: Waiter) -> bool:
        """Remove ``waiter`` if it is still waiting (cancel, expiry)."""
        by_id = self._by_id
        if by_id.get(waiter.id) is not waiter:
            return False
        del by_id[waiter.id]
        self.depths[waiter.level] -= 1
        if self._sums is not None:
            self._count(waiter, -1)
        line = self._lines[waiter.level]
        if line.head() is waiter:
            line.pop_head()
        else:
            line.dead += 1
        if line.dead:
            self._tidy(line)
        return True

    @property
    def unit_costs(self) -> bool:
        """Whether every waiter so far asked for one unit of every limit."""
        return self._sums is None

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

    def _tidy(self, line: _Line) -> None:
        """After a waiter left ``line`` (granted, cancelled or expired), which
        holds dead entries: keep its head live and sweep on."""
        line.drop_dead_heads()
        self.swept += line.sweep()

    def _check_valid(self) -> None:
        """Assert the internal invariants (for tests; O(n))."""
        by_id = self._by_id
        total = 0
        for level, line in enumerate(self._lines):
            live = sum(1 for w in line if by_id.get(w.id) is w)
            dead = len(line) - live
            dead_back = sum(1 for w in line.back if by_id.get(w.id) is not w)
            unswept = len(line.front)
            _require(live == self.depths[level], "depth counts the live entries")
            _require(dead == line.dead, "dead count is exact")
            _require(len(line) <= 2 * live + SLACK, "dead entries stay bounded")
            _require(4 * dead_back - 2 * live + unswept <= 2 * SLACK, "sweeps start in time")
            _require(3 * (dead - live) + unswept <= 2 * SLACK, "sweeps keep up")
            _require(not line or by_id.get(line.head().id) is line.head(), "heads are live")
            _require(all(w.level == level for w in line), "waiters sit at their level")
            seqs = [w.seq for w in line]
            _require(seqs == sorted(seqs), "each level is in push order")
            alive = [w for w in line if by_id.get(w.id) is w]
            asked = [sum(w.cost[i] for w in alive) for i in range(self._limits)]
            _require(asked == self.units[level], "units count the live waiters' costs")
            total += live
        _require(total == len(by_id), "every waiting id is in its level")


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(f"invariant broken: {what}")
