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

import heapq
import math
from collections import deque
from collections.abc import Hashable, Iterator
from itertools import chain
from typing import NamedTuple

__all__ = ["MAX_SCALE", "SLACK", "SWEEP", "Queues", "Waiter"]

#: Dead entries a level may hold beyond its number of live waiters.
SLACK = 32

#: The ``front`` of every line between sweeps: one empty deque, never
#: changed (a sweep gives its line a deque of its own), so that a flow of
#: one waiter costs one deque, not two.
_NONE: deque[Waiter] = deque(maxlen=0)
#: Entries a sweep looks at per departure, at most: as much as one departure
#: can add to the debts of :class:`_Line`'s proof.
SWEEP = 6

#: A level's virtual-time scale grows to the lcm of the weights that wait in
#: it, but not beyond this: past it, a flow's step rounds up (see
#: :meth:`_Flow.step`), so that many distinct weights in a level that never
#: empties cost neither ever larger numbers nor ever more rescaling.
MAX_SCALE = 2**64


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
    #: The flow it belongs to within its level (a tenant, an API key);
    #: ``None`` is the level's default flow.
    flow: Hashable = None


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
        self.front: deque[Waiter] = _NONE
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

    def drop_dead_heads(self) -> None:
        """Drop dead entries from the head, so that it is live."""
        by_id = self._by_id
        while self.dead:
            part = self.front or self.back
            if by_id.get(part[0].id) is part[0]:
                return
            part.popleft()
            self.dead -= 1

    def tidy(self) -> int:
        """After a departure from a line that holds dead entries: keep its
        head live and sweep on. Returns the sweep steps taken."""
        self.drop_dead_heads()
        return self.sweep()

    def sweep(self) -> int:
        """Take up to SWEEP steps of the sweep; a step that finds nothing
        left to sweep starts the next sweep if one is due, or ends the
        batch. Returns the steps taken."""
        by_id = self._by_id
        for step in range(SWEEP):
            if not self.front:
                if 2 * self.dead <= len(self.back) - self.dead + SLACK:
                    self.front = _NONE
                    return step  # no sweep due
                self.front, self.back = self.back, deque()
            waiter = self.front.pop()
            if by_id.get(waiter.id) is waiter:
                self.back.appendleft(waiter)
            else:
                self.dead -= 1
        return SWEEP


class _Flow:
    """One flow's waiters at one level, and where it stands in the level's
    virtual time: its head's ``start``, and the ``finish`` of its latest grant."""

    __slots__ = ("depth", "finish", "key", "line", "start", "units", "weight")

    def __init__(self, key: Hashable, by_id: dict[Hashable, Waiter], weight: int) -> None:
        self.key = key
        self.line = _Line(by_id)
        self.depth = 0
        self.weight = weight
        self.start = 0
        self.finish = 0
        #: Units asked for by its waiters, one per limit, once costs differ.
        self.units: list[int] | None = None

    def step(self, scale: int) -> int:
        """The virtual time a unit of its cost takes, in ``1 / scale`` units:
        ``scale / weight`` exactly while ``scale`` is a multiple of the
        weight, rounded up once the level's scale stopped at MAX_SCALE."""
        return -(-scale // self.weight)

    def tag(self, index: int, scale: int) -> int:
        """Its head's virtual finish time, ``start + cost * step`` (the cost
        counted in the units of limit ``index``), in ``1 / scale`` units."""
        return self.start + self.line.head().cost[index] * self.step(scale)


class _Level:
    """The waiting flows of one level, served by self-clocked fair queueing.

    Each waiting flow's head has a virtual ``start`` and finishes at
    ``start + cost / weight``; the head with the least finish (then the
    earliest push) is the level's head. A grant sets the level's ``clock``
    to its finish, which becomes its flow's ``finish``; a waiter that becomes
    its flow's head starts at ``max(flow.finish, clock)``, so a flow that
    joins starts at the clock, and nothing is kept for a flow without
    waiters. With one flow, the order is its push order and no time is
    computed: while ``synced`` is false the flow's start, finish and the
    clock are equal (they are made so when a second flow joins).
    """

    __slots__ = (
        "_by_id",
        "_spare",
        "clock",
        "flows",
        "heap",
        "index",
        "only",
        "scale",
        "stale",
        "swept",
        "synced",
    )

    def __init__(self, by_id: dict[Hashable, Waiter], index: int) -> None:
        self._by_id = by_id
        #: The limit whose units the flows share.
        self.index = index
        #: The flows with waiters, by key.
        self.flows: dict[Hashable, _Flow] = {}
        #: The one flow with waiters, while there is exactly one.
        self.only: _Flow | None = None
        #: With two flows or more: ``(finish, seq, key, head)`` per flow head,
        #: a heap; stale entries (a head gone other than by its grant) are
        #: dropped at the top, and all at once when they outnumber the rest.
        self.heap: list[tuple[int, int, Hashable, Waiter]] = []
        self.stale = 0
        self.clock = 0
        #: Virtual times count ``1 / scale``: the lcm of the weights that
        #: waited here since the level was last empty, so that they are exact
        #: integers, but at most MAX_SCALE (then a flow's step rounds up).
        self.scale = 1
        self.synced = True
        #: Sweep steps taken so far (at most SWEEP per departure).
        self.swept = 0
        #: The default flow's object, kept for reuse while it has no waiters.
        self._spare: _Flow | None = _Flow(None, by_id, 1)

    def head(self) -> _Flow:
        """The flow whose head is the level's head (dropping stale entries)."""
        only = self.only
        if only is not None:
            return only
        heap, flows = self.heap, self.flows
        while True:
            _, _, key, waiter = heap[0]
            flow = flows.get(key)
            if flow is not None and flow.line.head() is waiter:
                return flow
            heapq.heappop(heap)
            self.stale -= 1

    def append(self, waiter: Waiter, weight: int) -> _Flow:
        """``waiter`` joins the back of its flow (new flows weigh ``weight``)."""
        flow = self.flows.get(waiter.flow)
        if flow is not None:
            flow.line.back.append(waiter)  # newcomers join the end of back
            flow.depth += 1
            return flow
        spare = self._spare
        if spare is not None:
            self._spare = None
            flow = spare
            flow.key = waiter.flow
            flow.weight = weight
        else:
            flow = _Flow(waiter.flow, self._by_id, weight)
        if self.scale % weight:
            self._rescale(weight)
        flow.line.back.append(waiter)
        flow.depth = 1
        flow.start = flow.finish = self.clock
        alone = self.only
        self.flows[waiter.flow] = flow
        if len(self.flows) == 1:
            self.only, self.synced = flow, True
            return flow
        if alone is not None:  # a second flow: the first one's head gets its entry
            self.only = None
            if not self.synced:
                alone.start = alone.finish = self.clock
            self._enter(alone)
        self._enter(flow)
        return flow

    def granted(self, flow: _Flow) -> Waiter:
        """``flow``'s head leaves with a permit; returns it."""
        line = flow.line
        waiter = (line.front or line.back).popleft()
        flow.depth -= 1
        if self.only is not None:
            self.synced = False
            if flow.depth and not line.dead:
                return waiter  # alone, and its next head is live: nothing else changes
        else:
            finish, _, _, _ = self.heap[0]  # its entry, which head() found live
            self.clock = flow.finish = flow.start = finish
        self._after_departure(flow, top=self.only is None)
        return waiter

    def removed(self, waiter: Waiter, flow: _Flow) -> None:
        """``waiter`` (still waiting, in ``flow``) leaves ungranted."""
        line = flow.line
        head = line.head() is waiter
        if head:
            (line.front or line.back).popleft()
        else:
            line.dead += 1
        flow.depth -= 1
        if head and self.only is None:
            self.stale += 1  # its entry
        if head and flow.depth and (self.only is None or self.synced):
            flow.start = max(flow.finish, self.clock)
        self._after_departure(flow, rehead=head and self.only is None)

    def _after_departure(self, flow: _Flow, rehead: bool = False, top: bool = False) -> None:
        """A waiter left ``flow``: its line is tidied, and its new head gets
        an entry if ``rehead``; ``top``: its entry is the heap's top, which
        its new head's replaces (or which goes, with the flow's last waiter)."""
        if flow.line.dead:
            self.swept += flow.line.tidy()
        if flow.depth:
            if top:
                heapq.heapreplace(self.heap, self._entry(flow))
            elif rehead:
                self._enter(flow)
            return
        if top:
            heapq.heappop(self.heap)
        # the flow has no waiters: nothing of it is kept
        del self.flows[flow.key]
        flow.key = None  # kept as the spare, it keeps no trace of its key
        self._spare = flow  # its line is empty: every entry left was dead
        if self.only is not None:
            # the level is empty: virtual time starts again (only differences
            # count), and the level is as it was made
            self.only = None
            self.clock, self.scale, self.synced = 0, 1, True
        elif len(self.flows) == 1:
            (self.only,) = self.flows.values()
            self.heap.clear()
            self.stale = 0
            self.synced = True
        elif self.stale > len(self.heap) - self.stale + SLACK:
            self._rebuild()

    def _entry(self, flow: _Flow) -> tuple[int, int, Hashable, Waiter]:
        """``flow``'s heap entry: its head's finish, push order, key, head."""
        head = flow.line.head()
        return (flow.tag(self.index, self.scale), head.seq, flow.key, head)

    def _enter(self, flow: _Flow) -> None:
        heapq.heappush(self.heap, self._entry(flow))
        if self.stale > len(self.heap) - self.stale + SLACK:
            self._rebuild()

    def _rescale(self, weight: int) -> None:
        """A ``weight`` that does not divide the scale starts waiting: count
        virtual time in units fine enough for it (the lcm), unless that is
        beyond MAX_SCALE, where the scale stays as it is. Keeps every order."""
        scale = math.lcm(self.scale, weight)
        if scale > MAX_SCALE:
            return
        factor = scale // self.scale
        self.scale = scale
        self.clock *= factor
        for flow in self.flows.values():
            flow.start *= factor
            flow.finish *= factor
        self.heap[:] = [(tag * factor, seq, key, w) for tag, seq, key, w in self.heap]

    def _rebuild(self) -> None:
        flows = self.flows
        self.heap[:] = [
            e for e in self.heap if (f := flows.get(e[2])) is not None and f.line.head() is e[3]
        ]
        heapq.heapify(self.heap)
        self.stale = 0

    def order(self) -> list[Waiter]:
        """The waiters, in the order they would be granted were nobody to
        join or leave."""
        if self.only is not None:
            return [w for w in self.only.line if self._by_id.get(w.id) is w]
        by_id, index = self._by_id, self.index
        tagged = []
        for flow in self.flows.values():
            finish = flow.start
            for w in (w for w in flow.line if by_id.get(w.id) is w):
                finish += w.cost[index] * flow.step(self.scale)
                tagged.append((finish, w.seq, w))
        return [w for _, _, w in sorted(tagged, key=lambda t: (t[0], t[1]))]


class Queues:
    """The waiters of one machine: per level, FIFO queues per flow.

    A policy reads it through :attr:`levels`, :attr:`depths`, :meth:`head`,
    :attr:`granted` and :attr:`unit_costs`, and keeps its own state in
    :attr:`state`; only the machine changes the rest.
    """

    __slots__ = (
        "_by_id",
        "_levels",
        "_limits",
        "_sums",
        "depths",
        "flow_limit",
        "granted",
        "levels",
        "state",
    )

    def __init__(self, levels: int, limits: int = 1, flow_limit: int = 0) -> None:
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
        #: The policy's own state in this machine: what its ``start()``
        #: returned (``None`` for a policy without one). Changed only by the
        #: policy's ``record()``.
        self.state: object = None
        #: The limit whose units the flows of a level share (its index).
        self.flow_limit = flow_limit
        self._by_id: dict[Hashable, Waiter] = {}
        self._levels = [_Level(self._by_id, flow_limit) for _ in range(levels)]

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, id: object) -> bool:
        return id in self._by_id

    def __repr__(self) -> str:
        return f"<Queues depths={self.depths!r} granted={self.granted}>"

    @property
    def swept(self) -> int:
        """Sweep steps taken so far, over all levels: the compaction work (at
        most SWEEP per departure)."""
        return sum(lv.swept for lv in self._levels)

    @property
    def entries(self) -> int:
        """Entries held over all levels, live and dead: the memory of the
        lazy removal (at most ``2 * waiting + SLACK`` per flow)."""
        return sum(len(f.line) for lv in self._levels for f in lv.flows.values())

    def head(self, level: int) -> Waiter:
        """The waiter granted next at ``level`` (which must not be empty):
        the head of the flow whose turn it is."""
        if not self.depths[level]:
            raise IndexError(f"level {level} has no waiters")
        lv = self._levels[level]
        line = (lv.only or lv.head()).line
        return (line.front or line.back)[0]  # hot: _Line.head(), by hand

    def get(self, id: Hashable) -> Waiter | None:
        """The waiter with this id, or ``None`` if it is not waiting."""
        return self._by_id.get(id)

    def waiters(self, level: int) -> list[Waiter]:
        """The waiters of ``level``, in the order they would be granted were
        nobody to join or leave."""
        return self._levels[level].order()

    def flows(self, level: int) -> int:
        """The number of flows with waiters at ``level``."""
        return len(self._levels[level].flows)

    def flow_depth(self, level: int, flow: Hashable) -> int:
        """The waiters of ``flow`` at ``level``."""
        found = self._levels[level].flows.get(flow)
        return 0 if found is None else found.depth

    def flow_units(self, level: int, flow: Hashable) -> list[int]:
        """Units asked for by the waiters of ``flow`` at ``level``, one entry
        per limit."""
        found = self._levels[level].flows.get(flow)
        if found is None:
            return [0] * self._limits
        return list(found.units) if found.units is not None else [found.depth] * self._limits

    def flow_table(self, level: int) -> list[tuple[Hashable, int, int]]:
        """``(flow, waiters, units of the flows' limit)`` for every flow with
        waiters at ``level``."""
        lv = self._levels[level]
        return [
            (key, f.depth, f.units[lv.index] if f.units is not None else f.depth)
            for key, f in lv.flows.items()
        ]

    def fairness(self) -> tuple[tuple[object, ...], ...]:
        """Per level, its virtual clock, the scale it counts in, and each
        waiting flow's ``(flow, weight, start, finish)``, as values (for
        snapshots)."""
        return tuple(
            (
                lv.clock,
                lv.scale,
                lv.synced,
                *((k, f.weight, f.start, f.finish) for k, f in lv.flows.items()),
            )
            for lv in self._levels
        )

    # -- changes, made by the machine only ---------------------------------

    def _append(self, waiter: Waiter, weight: int = 1) -> None:
        """``waiter`` joins the back of its flow, at its level; a flow that
        starts waiting weighs ``weight``."""
        self._by_id[waiter.id] = waiter
        flow = self._levels[waiter.level].append(waiter, weight)
        self.depths[waiter.level] += 1
        if self._sums is not None:
            self._count(waiter, flow, 1)

    def _take_head(self, level: int) -> Waiter:
        """The head of ``level`` leaves with a permit (which must not be empty)."""
        lv = self._levels[level]
        flow = lv.only or lv.head()
        waiter = lv.granted(flow)
        del self._by_id[waiter.id]
        self.depths[level] -= 1
        self.granted += 1
        if self._sums is not None:
            self._count(waiter, flow, -1)
        return waiter

    def _pass(self, waiter: Waiter) -> None:
        """``waiter`` is granted as it arrives at its empty level, never
        queued: counted as granted. (What :meth:`_append` then
        :meth:`_take_head` leave behind on an empty level: its flows start
        again from nothing when it empties.)"""
        assert not self.depths[waiter.level]
        self.granted += 1

    def _remove(self, waiter: Waiter) -> bool:
        """Remove ``waiter`` if it is still waiting (cancel, expiry)."""
        by_id = self._by_id
        if by_id.get(waiter.id) is not waiter:
            return False
        del by_id[waiter.id]
        self.depths[waiter.level] -= 1
        lv = self._levels[waiter.level]
        flow = lv.flows[waiter.flow]
        if self._sums is not None:
            self._count(waiter, flow, -1)
        lv.removed(waiter, flow)
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
        """Costs differ from now on: keep their sums per level and per flow."""
        if self._sums is None:
            self._sums = [[0] * self._limits for _ in range(self.levels)]
            for lv in self._levels:
                for flow in lv.flows.values():
                    flow.units = [0] * self._limits
                    for waiter in flow.line:
                        if self._by_id.get(waiter.id) is waiter:
                            self._count(waiter, flow, 1)

    def _count(self, waiter: Waiter, flow: _Flow, sign: int) -> None:
        assert self._sums is not None
        units = self._sums[waiter.level]
        if flow.units is None:
            flow.units = [0] * self._limits
        mine = flow.units
        for i, n in enumerate(waiter.cost):
            units[i] += sign * n
            mine[i] += sign * n

    def _check_valid(self) -> None:
        """Assert the internal invariants (for tests; O(n))."""
        by_id = self._by_id
        total = 0
        for level, lv in enumerate(self._levels):
            live_level = 0
            for key, flow in lv.flows.items():
                line = flow.line
                live = sum(1 for w in line if by_id.get(w.id) is w)
                dead = len(line) - live
                dead_back = sum(1 for w in line.back if by_id.get(w.id) is not w)
                unswept = len(line.front)
                _require(live == flow.depth > 0, "a flow is kept only while it has waiters")
                _require(dead == line.dead, "dead count is exact")
                _require(len(line) <= 2 * live + SLACK, "dead entries stay bounded")
                _require(4 * dead_back - 2 * live + unswept <= 2 * SLACK, "sweeps start in time")
                _require(3 * (dead - live) + unswept <= 2 * SLACK, "sweeps keep up")
                _require(by_id.get(line.head().id) is line.head(), "heads are live")
                _require(all(w.level == level and w.flow == key for w in line), "in its flow")
                seqs = [w.seq for w in line]
                _require(seqs == sorted(seqs), "each flow is in push order")
                if self._sums is not None:
                    alive = [w for w in line if by_id.get(w.id) is w]
                    asked = [sum(w.cost[i] for w in alive) for i in range(self._limits)]
                    _require(asked == flow.units, "units count the flow's waiters' costs")
                live_level += live
            _require(live_level == self.depths[level], "depth counts the live entries")
            _require((lv.only is None) == (len(lv.flows) != 1), "one flow alone is the only one")
            _require(not lv.heap or len(lv.flows) > 1, "a heap only for two flows or more")
            live_entries = len(lv.heap) - lv.stale
            _require(live_entries == (len(lv.flows) if lv.only is None else 0), "one entry each")
            _require(lv.stale <= live_entries + SLACK, "stale entries stay bounded")
            alive = [w for f in lv.flows.values() for w in f.line if by_id.get(w.id) is w]
            asked = [sum(w.cost[i] for w in alive) for i in range(self._limits)]
            _require(asked == self.units[level], "units count the live waiters' costs")
            total += live_level
        _require(total == len(by_id), "every waiting id is in its level")


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(f"invariant broken: {what}")
