"""The waiting line: one FIFO queue per level, with cancellation in place.

Everything about *where waiters stand* lives here; *who goes next* is the
policy's (``_policies.py``) and *when* is the machine's (``_machine.py``).
Because the machine only ever takes a level's head, every policy keeps
first-in-first-out order within a level.

Each flow's waiters stand in a :class:`_Line`: short lists (*chunks*) of at
most :data:`CHUNK` entries, in push order. A waiter cancelled or expired is
deleted from its chunk there and then, and a granted one is stepped over at
the head (its chunk is let go once used up), so a line holds the waiters
that wait and, at most, CHUNK - 1 granted ones: no departure leaves work
for a later one. A cancel finds its waiter by its push order (``seq``),
bisecting the chunks and then one chunk, so it costs O(log n) comparisons
and moves at most CHUNK pointers, plus one step that grows with the line:
a chunk let go, or merged into a neighbour, is deleted from the line's list
of chunks, a move of one pointer per chunk (at 10^6 waiting and CHUNK = 64,
some 125 KB); a grant makes that move only when it uses up its chunk. The
chunks stay full enough that a line of n waiters has fewer than
``4 * n / CHUNK + 2``.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Iterator
from itertools import chain, islice, pairwise
from operator import attrgetter
from typing import NamedTuple

from ._sorted import CHUNK, SHIFT, Sorted

__all__ = ["CHUNK", "MAX_SCALE", "Queues", "Waiter"]

#: A chunk that holds this many or fewer together with a neighbour merges
#: into it: so neighbours always hold more.
_HALF = CHUNK // 2

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


_seq = attrgetter("seq")

#: A key's push order: ``key & _SEQ`` (see ``_sorted.py``).
_SEQ = (1 << SHIFT) - 1


class _Line:
    """One flow's waiters in push order, in ``chunks``: lists of at most
    CHUNK entries. The first ``start`` entries of the first chunk are waiters
    already granted, let go with their chunk once it is used up; the head
    is ``chunks[0][start]``, and every entry past it is a waiter. An empty
    line keeps its first chunk, empty, so that a flow of one waiter at a
    time allocates nothing per waiter but the list's own room.

    The two steps of every grant are taken by :class:`_Level`, once each,
    where the machine's hot path is: a newcomer joins the last chunk, or
    one of its own (:meth:`open`) if that one is full (:meth:`_Level.append`);
    a granted head moves ``start`` on (:meth:`_Level.granted`). A cancelled
    or expired waiter is found by its push order and deleted from its chunk
    there and then (:meth:`take`). After either departure, :meth:`_mend`
    lets go of a chunk left with no waiter, or merges a chunk into a
    neighbour when the two hold ``CHUNK // 2`` waiters or fewer.

    The bound. Any two neighbouring chunks but the first hold more than
    ``CHUNK // 2`` waiters together. A push keeps it (a new chunk follows a
    full one). So does a departure from the first chunk (it is dropped
    once empty: its neighbour becomes first), and one from another chunk:
    a chunk emptied held one waiter, so its left neighbour, unless first,
    held ``CHUNK // 2`` or more; a merged chunk holds all of two, each of
    which, with the departed waiter, held more than ``CHUNK // 2`` beside
    its other neighbour. Pairing off all chunks but the first, a line of
    ``n`` waiters has fewer than ``4 * n / CHUNK + 2`` chunks.
    """

    __slots__ = ("chunks", "firsts", "start")

    def __init__(self) -> None:
        self.chunks: list[list[Waiter]] = [[]]
        #: Per chunk, the push order (``seq``) of its first entry when it
        #: was made: at most that of its first entry now, and more than that
        #: of the chunk before's last. A cancel bisects these to find its
        #: chunk (plain ints: no key function, one object read per step);
        #: the first chunk's is never read.
        self.firsts: list[int] = [0]
        #: Entries of the first chunk already granted.
        self.start = 0

    def __len__(self) -> int:
        """The waiters (the granted entries aside)."""
        return sum(map(len, self.chunks)) - self.start

    def __iter__(self) -> Iterator[Waiter]:
        return islice(chain.from_iterable(self.chunks), self.start, None)

    def head(self) -> Waiter:
        return self.chunks[0][self.start]

    def open(self, waiter: Waiter) -> None:
        """``waiter`` joins in a chunk of its own: the last one is full."""
        self.chunks.append([waiter])
        self.firsts.append(waiter.seq)

    def take(self, waiter: Waiter) -> None:
        """``waiter``, in the line, leaves: found by its push order."""
        i = bisect_right(self.firsts, waiter.seq, 1) - 1
        chunk = self.chunks[i]
        del chunk[bisect_left(chunk, waiter.seq, key=_seq)]
        self._mend(i)

    def _mend(self, i: int) -> None:
        """Chunk ``i`` lost a waiter: let it go if it holds none (the last
        one left is emptied instead), or merge it with a neighbour (not the
        first chunk) it is too small beside: merging with one restores the
        bound above."""
        chunks, firsts = self.chunks, self.firsts
        chunk = chunks[i]
        if not i:
            if len(chunk) == self.start:
                if len(chunks) > 1:
                    del chunks[0], firsts[0]
                else:
                    chunk.clear()
                self.start = 0
        elif not chunk:
            del chunks[i], firsts[i]
        elif i + 1 < len(chunks) and len(chunk) + len(chunks[i + 1]) <= _HALF:
            chunk += chunks.pop(i + 1)
            del firsts[i + 1]
        elif i > 1 and len(chunks[i - 1]) + len(chunk) <= _HALF:
            chunks[i - 1] += chunks.pop(i)
            del firsts[i]


class _Flow:
    """One flow's waiters at one level, and where it stands in the level's
    virtual time: its head's ``start``, and the ``finish`` of its latest grant."""

    __slots__ = ("depth", "entry", "finish", "key", "line", "start", "units", "weight")

    def __init__(self, key: Hashable, weight: int) -> None:
        self.key = key
        self.line = _Line()
        self.depth = 0
        self.weight = weight
        self.start = 0
        self.finish = 0
        #: Units asked for by its waiters, one per limit, once costs differ.
        self.units: list[int] | None = None
        #: The key of its head's entry in its level's ``heads``, while it has
        #: one: the head's finish and push order, ``(finish << SHIFT) + seq``.
        self.entry = 0

    def step(self, scale: int) -> int:
        """The virtual time a unit of its cost takes, in ``1 / scale`` units:
        ``scale / weight`` exactly while ``scale`` is a multiple of the
        weight, rounded up once the level's scale stopped at MAX_SCALE."""
        return -(-scale // self.weight)


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

    With two flows or more, each flow's head has an entry in ``heads``, the
    sorted chunks of ``_sorted.py`` keyed by its finish and push order, so
    the level's head is the first entry, and, for a policy that ranks the
    levels by age (``ages``), one in ``firsts``, keyed by its push order
    alone, so the level's oldest waiter (a flow's line is in push order) is
    the first entry there. A head that leaves, granted, cancelled or
    expired, deletes its entries there and then, and its successor's enter:
    no entry outlives its head, and no departure leaves work for a later
    operation.
    """

    __slots__ = (
        "_spare",
        "clock",
        "firsts",
        "flows",
        "heads",
        "index",
        "only",
        "scale",
        "synced",
    )

    def __init__(self, index: int, ages: bool) -> None:
        #: The limit whose units the flows share.
        self.index = index
        #: The flows with waiters, by key.
        self.flows: dict[Hashable, _Flow] = {}
        #: The one flow with waiters, while there is exactly one.
        self.only: _Flow | None = None
        #: With two flows or more: one entry per flow, its head's key (see
        #: :attr:`_Flow.entry`) and the flow; empty otherwise.
        self.heads: Sorted[_Flow] = Sorted()
        #: With ``ages`` (else ``None``) and two flows or more: one entry per
        #: flow, its head's push order (``seq``) and the flow; empty otherwise.
        self.firsts: Sorted[_Flow] | None = Sorted() if ages else None
        self.clock = 0
        #: Virtual times count ``1 / scale``: the lcm of the weights that
        #: waited here since the level was last empty, so that they are exact
        #: integers, but at most MAX_SCALE (then a flow's step rounds up).
        self.scale = 1
        self.synced = True
        #: A flow object with no waiters (the last flow emptied here, or the
        #: default flow's at first), kept for reuse: its line is empty.
        self._spare: _Flow | None = _Flow(None, 1)

    def fairness(self) -> tuple[object, ...]:
        """See :meth:`Queues.fairness`."""
        only = self.only
        if only is not None and not self.synced:  # its start and finish are the clock
            return (self.clock, self.scale, (only.key, only.weight, self.clock, self.clock))
        return (
            self.clock,
            self.scale,
            *((k, f.weight, f.start, f.finish) for k, f in self.flows.items()),
        )

    def head(self) -> _Flow:
        """The flow whose head is the level's head."""
        only = self.only
        if only is not None:
            return only
        return self.heads.chunks[0][0][1]

    def oldest(self) -> _Flow:
        """The flow whose head is the level's oldest waiter."""
        only = self.only
        if only is not None:
            return only
        if self.firsts is None:  # not kept for the machine's policy: looked for
            return min(self.flows.values(), key=lambda flow: flow.line.head().seq)
        return self.firsts.chunks[0][0][1]

    def append(self, waiter: Waiter, weight: int) -> _Flow:
        """``waiter`` joins the back of its flow (new flows weigh ``weight``)."""
        flow = self.flows.get(waiter.flow)
        if flow is not None:
            last = flow.line.chunks[-1]  # hot: see _Line
            if len(last) < CHUNK:
                last.append(waiter)
            else:
                flow.line.open(waiter)
            flow.depth += 1
            return flow
        spare = self._spare
        if spare is not None:
            self._spare = None
            flow = spare
            flow.key = waiter.flow
            flow.weight = weight
        else:
            flow = _Flow(waiter.flow, weight)
        if self.scale % weight:
            self._rescale(weight)
        flow.line.chunks[0].append(waiter)  # its line is empty: one empty chunk
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
        line = flow.line  # hot: see _Line
        chunk, start = line.chunks[0], line.start
        waiter = chunk[start]
        line.start = start = start + 1
        if start == len(chunk):
            line._mend(0)  # used up
        flow.depth -= 1
        if self.only is not None:
            self.synced = False
            if flow.depth:
                return waiter  # alone, and others wait behind it: nothing else changes
        else:
            self.heads.delete_first()  # its head's entry, the least
            if self.firsts is not None:
                self.firsts.delete(waiter.seq)
            self.clock = flow.finish = flow.start = flow.entry >> SHIFT  # its head's finish
        self._after_departure(flow, rehead=self.only is None)
        return waiter

    def removed(self, waiter: Waiter, flow: _Flow) -> None:
        """``waiter`` (still waiting, in ``flow``) leaves ungranted."""
        line = flow.line
        head = line.head() is waiter
        line.take(waiter)
        flow.depth -= 1
        rehead = head and self.only is None
        if rehead:
            self.heads.delete(flow.entry)  # at once: no entry outlives its head
            if self.firsts is not None:
                self.firsts.delete(waiter.seq)
        if head and flow.depth and (self.only is None or self.synced):
            flow.start = max(flow.finish, self.clock)
        self._after_departure(flow, rehead)

    def _after_departure(self, flow: _Flow, rehead: bool) -> None:
        """A waiter left ``flow``; if ``rehead``, it was the head, whose entry
        is gone, and its new head's, if any, enters."""
        if flow.depth:
            if rehead:
                self._enter(flow)
            return
        # the flow has no waiters: nothing of it is kept
        del self.flows[flow.key]
        flow.key = None  # kept as the spare, it keeps no trace of its key
        self._spare = flow  # its line is empty
        if self.only is not None:
            # the level is empty: virtual time starts again (only differences
            # count), and the level is as it was made
            self.only = None
            self.clock, self.scale, self.synced = 0, 1, True
        elif len(self.flows) == 1:
            (self.only,) = self.flows.values()
            self.heads.clear()
            if self.firsts is not None:
                self.firsts.clear()
            self.synced = True

    def _enter(self, flow: _Flow, first: bool = True) -> None:
        """``flow``'s head enters ``heads``, keyed by its virtual finish time,
        ``start + cost * step`` (the cost counted in the units of the level's
        limit), and its push order; and, unless ``first`` is false (it is
        there already), ``firsts``."""
        line = flow.line
        head = line.chunks[0][line.start]  # hot: _Line.head(), by hand
        finish = flow.start + head.cost[self.index] * flow.step(self.scale)
        flow.entry = (finish << SHIFT) + head.seq
        self.heads.insert(flow.entry, flow)
        if first and self.firsts is not None:
            self.firsts.insert(head.seq, flow)

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
        # Each head's finish anew, at the new step: a finish rounded up at
        # a scale its weight does not divide (one stopped at MAX_SCALE),
        # times factor, could end later than the same finish made now, and
        # a flow pushed first then lost its tie (P78).
        heads = self.heads.entries()
        self.heads.clear()
        for _, flow in heads:
            self._enter(flow, first=False)

    def leading(self, n: int | None) -> list[Waiter]:
        """The first ``n`` waiters of :meth:`order` (``None``: all), the
        others not ordered: with one flow, the first ``n`` of its line; with
        several, the flows' lines merged by finish (rising along each line),
        then push order."""
        if self.only is not None:
            return list(islice(self.only.line, n))
        index, scale = self.index, self.scale

        def tagged(flow: _Flow) -> Iterator[tuple[int, int, Waiter]]:
            finish, step = flow.start, flow.step(scale)
            for w in flow.line:
                finish += w.cost[index] * step
                yield finish, w.seq, w

        merged = heapq.merge(*(tagged(flow) for flow in self.flows.values()))
        return [w for _, _, w in islice(merged, n)]

    def order(self) -> list[Waiter]:
        """The waiters, in the order they would be granted were nobody to
        join or leave."""
        return self.leading(None)


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

    def __init__(
        self, levels: int, limits: int = 1, flow_limit: int = 0, *, ages: bool = False
    ) -> None:
        """``ages``: the policy ranks the levels by their oldest waiters
        (:meth:`oldest`), which are then kept in order, as the heads are;
        without, :meth:`oldest` looks through the flows of a level."""
        #: Number of levels; level 0 is the most urgent.
        self.levels: int = levels
        #: Waiters per level (the queue depths). Read-only for policies.
        self.depths: list[int] = [0] * levels
        #: Permits granted so far, over all levels (refunds do not subtract).
        self.granted: int = 0
        self._limits = limits
        #: Units asked for by the waiters of each level, one entry per limit;
        #: kept once costs differ (:meth:`_sum_costs`), ``None`` until then.
        self._sums: list[list[int]] | None = None
        #: The policy's own state in this machine: what its ``start()``
        #: returned (``None`` for a policy without one). Changed only by the
        #: policy's ``record()``.
        self.state: object = None
        #: The limit whose units the flows of a level share (its index).
        self.flow_limit: int = flow_limit
        self._by_id: dict[Hashable, Waiter] = {}
        self._levels = [_Level(flow_limit, ages) for _ in range(levels)]

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, id: object) -> bool:
        return id in self._by_id

    def __repr__(self) -> str:
        return f"<Queues depths={self.depths!r} granted={self.granted}>"

    @property
    def entries(self) -> int:
        """Waiters held in the lines over all levels: exactly the waiters (a
        cancelled or expired one leaves its line at once; a granted one is
        stepped over, and let go with its chunk)."""
        return sum(len(f.line) for lv in self._levels for f in lv.flows.values())

    @property
    def heads(self) -> int:
        """Entries of flow heads over all levels: exactly one per flow at a
        level with two flows or more (a head that leaves takes its entry
        with it at once)."""
        return sum(len(chunk) for lv in self._levels for chunk in lv.heads.chunks)

    @property
    def firsts(self) -> int:
        """Entries of flow heads by push order over all levels: as many as
        :attr:`heads`, one per flow at a level with two flows or more."""
        return sum(
            len(chunk) for lv in self._levels if lv.firsts is not None for chunk in lv.firsts.chunks
        )

    @property
    def chunks(self) -> int:
        """Chunks the lines hold over all levels: fewer than
        ``4 * waiting / CHUNK + 2`` per flow."""
        return sum(len(f.line.chunks) for lv in self._levels for f in lv.flows.values())

    def head(self, level: int) -> Waiter:
        """The waiter granted next at ``level`` (which must not be empty):
        the head of the flow whose turn it is."""
        if not self.depths[level]:
            raise IndexError(f"level {level} has no waiters")
        lv = self._levels[level]
        line = (lv.only or lv.head()).line
        return line.chunks[0][line.start]  # hot: _Line.head(), by hand

    def oldest(self, level: int) -> Waiter:
        """The waiter pushed first of those at ``level`` (which must not be
        empty): its :meth:`head` with one flow; with several, the oldest of
        their heads (each flow is in push order). For a policy that ranks
        the levels by age: a level is as old as its oldest call, whichever
        of its flows' calls it serves next."""
        if not self.depths[level]:
            raise IndexError(f"level {level} has no waiters")
        lv = self._levels[level]
        line = (lv.only or lv.oldest()).line
        return line.chunks[0][line.start]  # hot: _Line.head(), by hand

    def get(self, id: Hashable) -> Waiter | None:
        """The waiter with this id, or ``None`` if it is not waiting."""
        return self._by_id.get(id)

    def waiters(self, level: int) -> list[Waiter]:
        """The waiters of ``level``, in the order they would be granted were
        nobody to join or leave."""
        return self._levels[level].order()

    def kept(self) -> list[Waiter]:
        """The granted waiters the lines still keep, stepped over in their
        flows' first chunks until those are let go (a copy of the machine
        shares their ids and flows too)."""
        return [
            w
            for lv in self._levels
            for f in lv.flows.values()
            for w in f.line.chunks[0][: f.line.start]
        ]

    def leading(self, level: int, n: int) -> list[Waiter]:
        """The first ``n`` of :meth:`waiters`, without ordering the rest of
        the level: O(n) with one flow, O(flows + n log flows) with several
        (a lease counts the callers its permits would go to)."""
        return self._levels[level].leading(n)

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
        snapshots). Levels that decide alike give equal values: a lone flow
        whose times are not computed (they equal the clock) reads as one
        whose times were."""
        return tuple(lv.fairness() for lv in self._levels)

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

    def _pass(self, level: int) -> None:
        """A newcomer is granted as it arrives at its empty ``level``, never
        queued: counted as granted. (What :meth:`_append` then
        :meth:`_take_head` leave behind on an empty level: its flows start
        again from nothing when it empties.)"""
        assert not self.depths[level]
        self.granted += 1

    def _remove(self, waiter: Waiter) -> None:
        """Remove ``waiter``, which waits (cancel, expiry)."""
        del self._by_id[waiter.id]
        self.depths[waiter.level] -= 1
        lv = self._levels[waiter.level]
        flow = lv.flows[waiter.flow]
        if self._sums is not None:
            self._count(waiter, flow, -1)
        lv.removed(waiter, flow)

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
                for flow in lv.flows.values():  # (each flow's units start at its first count)
                    for waiter in flow.line:
                        self._count(waiter, flow, 1)

    def _count(self, waiter: Waiter, flow: _Flow, sign: int) -> None:
        assert self._sums is not None
        units = self._sums[waiter.level]
        if flow.units is None:
            flow.units = [0] * self._limits
        mine = flow.units
        for i, n in enumerate(waiter.cost):
            n *= sign
            units[i] += n
            mine[i] += n

    def _check_valid(self) -> None:
        """Assert the internal invariants (for tests; O(n))."""
        by_id = self._by_id
        total = 0
        for level, lv in enumerate(self._levels):
            live_level = 0
            for key, flow in lv.flows.items():
                line = flow.line
                live = len(line)
                _require(live == flow.depth > 0, "a flow is kept only while it has waiters")
                _require(all(by_id.get(w.id) is w for w in line), "every entry is waiting")
                held = [len(chunk) for chunk in line.chunks]
                waiters = [held[0] - line.start, *held[1:]]
                _require(line.start >= 0 and max(held) <= CHUNK, "chunks hold at most CHUNK")
                _require(min(waiters) > 0, "every chunk holds a waiter")
                pairs = [a + b for a, b in pairwise(waiters[1:])]  # the first chunk aside
                _require(all(n > _HALF for n in pairs), "neighbouring chunks hold over CHUNK // 2")
                _require(all(w.level == level and w.flow == key for w in line), "in its flow")
                entries = list(chain.from_iterable(line.chunks))  # the granted ones too
                seqs = [w.seq for w in entries]
                _require(seqs == sorted(seqs), "each flow is in push order")
                lasts = [chunk[-1].seq for chunk in line.chunks]
                _require(len(line.firsts) == len(held), "one first seq per chunk")
                parted = zip(lasts[:-1], line.firsts[1:], line.chunks[1:], strict=True)
                _require(all(a < f <= c[0].seq for a, f, c in parted), "first seqs part the chunks")
                if self._sums is not None:
                    asked = [sum(w.cost[i] for w in line) for i in range(self._limits)]
                    _require(asked == flow.units, "units count the flow's waiters' costs")
                live_level += live
            _require(live_level == self.depths[level], "depth counts the live entries")
            _require((lv.only is None) == (len(lv.flows) != 1), "one flow alone is the only one")
            heads = lv.heads.entries()
            _require(not heads or len(lv.flows) > 1, "flow heads kept for two flows or more")
            _require(len(heads) == (len(lv.flows) if lv.only is None else 0), "one entry each")
            _require(
                all(
                    lv.flows.get(f.key) is f and f.entry == key and key & _SEQ == f.line.head().seq
                    for key, f in heads
                ),
                "every flow-head entry is a waiting head's",
            )
            _require(
                all(key >> SHIFT >= f.start for key, f in heads),
                "no flow head finishes before it starts",
            )
            lv.heads.check_chunks("flow head")
            if lv.firsts is not None:
                firsts = lv.firsts.entries()
                _require(
                    sorted(f.entry & _SEQ for _, f in heads) == [key for key, _ in firsts]
                    and all(key == f.line.head().seq for key, f in firsts),
                    "every flow head's push order is kept, once, and no other",
                )
                lv.firsts.check_chunks("flow head by push order")
            spare = lv._spare
            if spare is not None:
                empty = spare.line.chunks == [[]] and spare.line.start == 0
                _require(empty and len(spare.line.firsts) == 1, "the spare flow's line is empty")
            alive = [w for f in lv.flows.values() for w in f.line]
            asked = [sum(w.cost[i] for w in alive) for i in range(self._limits)]
            _require(asked == self.units[level], "units count the live waiters' costs")
            total += live_level
        _require(total == len(by_id), "every waiting id is in its level")


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(f"invariant broken: {what}")
