"""Running a scenario in virtual time, and what a run reports.

:func:`simulate` is a discrete-event loop over the same
:class:`~permits.core.Machine` the adapters drive: it pushes each arrival,
cancels each caller whose ``timeout`` runs out, and ticks at each time the
machine names (:meth:`~permits.core.Machine.next_tick`). No second model of
any policy exists here. :class:`Tally` turns what happened to each caller into
a :class:`WorkloadResult`; the live runner (``permits.cli._live``) feeds
the same tally from a real event loop, so both are reported alike.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Iterator
from fractions import Fraction

import attrs

from permits.core import Decision, Machine, PermitValueError, State, WaitHistogram
from permits.core.checks import check_int, check_rate

from ._scenario import Batch, Scenario, Workload, nanoseconds

__all__ = [
    "BINS",
    "MAX_ARRIVALS",
    "Result",
    "Tally",
    "WorkloadResult",
    "arrivals",
    "check_arrivals",
    "simulate",
]

#: Number of equal time bins in a result's timeline.
BINS = 200

#: The most callers a run may ask for unless told otherwise (``max_arrivals``;
#: ``--max-arrivals`` on the command line): about two minutes of simulation
#: on one core. A run's work is proportional to its callers: each arrives
#: once, is granted, gives up or expires at most once.
MAX_ARRIVALS = 10_000_000

_GRANTED = State.GRANTED
_EXPIRED = State.EXPIRED


@attrs.frozen
class WorkloadResult:
    """What one workload got in one run. Times in nanoseconds.

    Every caller offered ends in exactly one of ``granted``, ``waiting``
    (still waiting at the end), ``cancelled`` (gave up after its
    ``timeout``), ``rejected`` (its level was full) or ``expired`` (reached
    its ``deadline``). Wait quantiles are over the granted callers, within
    :data:`~permits.core.RELATIVE_ERROR` (the core's histogram); ``wait_max``
    is exact.
    """

    name: str
    level: int
    #: Callers that arrived before the end of the run.
    offered: int
    #: Permits this workload received.
    granted: int
    waiting: int
    cancelled: int
    rejected: int
    expired: int
    wait_p50: int | None
    wait_p99: int | None
    wait_max: int | None
    #: Units granted (each caller's cost: one each unless a trace says otherwise).
    units: int
    #: This workload's fraction of all units granted in the run.
    share: float
    #: When its last waiter left, if none was waiting at the end; else ``None``.
    cleared_at: int | None
    #: Permits granted in each of :data:`BINS` equal slices of the run.
    timeline: tuple[int, ...] = attrs.field(repr=False)
    #: The wait histogram: ``(wait, count)`` pairs, by wait.
    waits: tuple[tuple[int, int], ...] = attrs.field(repr=False)


@attrs.frozen
class Result:
    """A run of one :class:`Scenario`: a :class:`WorkloadResult` per workload."""

    scenario: Scenario
    #: The run's length in nanoseconds.
    duration: int
    workloads: tuple[WorkloadResult, ...]

    @property
    def granted(self) -> int:
        """Permits granted over all workloads."""
        return sum(w.granted for w in self.workloads)

    def __getitem__(self, name: str) -> WorkloadResult:
        """The result of the workload called ``name``."""
        for workload in self.workloads:
            if workload.name == name:
                return workload
        raise KeyError(name)


class Tally:
    """Counts what happens to each workload's callers during a run.

    Callers are numbered per run; :meth:`id` packs the workload's index into
    the number so a decision's id tells its workload without a lookup.
    """

    def __init__(self, scenario: Scenario, duration: int) -> None:
        n = len(scenario.workloads)
        self.scenario = scenario
        self.duration = duration
        self.count = n
        self.offered = [0] * n
        self.granted = [0] * n
        self.units = [0] * n
        self.waiting = [0] * n
        self.cancelled = [0] * n
        self.rejected = [0] * n
        self.expired = [0] * n
        self.left_at: list[int | None] = [None] * n
        self.hists = [WaitHistogram() for _ in range(n)]
        self.bins = [[0] * BINS for _ in range(n)]

    def on_arrive(self, w: int) -> None:
        """A caller of workload ``w`` arrived and asks for a permit."""
        self.offered[w] += 1
        self.waiting[w] += 1

    def on_reject(self, w: int) -> None:
        """A caller of workload ``w`` was refused at once: its level was full."""
        self.waiting[w] -= 1
        self.rejected[w] += 1

    def on_grant(self, w: int, at: int, waited: int, cost: int = 1) -> None:
        """A caller of workload ``w`` was granted ``cost`` units at ``at``
        after ``waited``."""
        self.granted[w] += 1
        self.units[w] += cost
        self.waiting[w] -= 1
        self.left_at[w] = at
        self.hists[w].record(waited)
        self.bins[w][min(BINS - 1, at // (self.duration // BINS + 1))] += 1

    def on_leave(self, w: int, at: int, state: State) -> None:
        """A waiting caller of workload ``w`` left at ``at`` without a permit:
        ``CANCELLED`` or ``EXPIRED``."""
        self.waiting[w] -= 1
        self.left_at[w] = at
        if state is State.CANCELLED:
            self.cancelled[w] += 1
        else:
            self.expired[w] += 1

    def result(self) -> Result:
        """The run's :class:`Result`; call once the run is over."""
        total = sum(self.units)
        workloads = []
        for w, workload in enumerate(self.scenario.workloads):
            hist = self.hists[w]
            workloads.append(
                WorkloadResult(
                    name=workload.name,
                    level=workload.level,
                    offered=self.offered[w],
                    granted=self.granted[w],
                    waiting=self.waiting[w],
                    cancelled=self.cancelled[w],
                    rejected=self.rejected[w],
                    expired=self.expired[w],
                    wait_p50=hist.quantile(0.5),
                    wait_p99=hist.quantile(0.99),
                    wait_max=hist.max,
                    units=self.units[w],
                    share=self.units[w] / total if total else 0.0,
                    cleared_at=self.left_at[w] if self.waiting[w] == 0 else None,
                    timeline=tuple(self.bins[w]),
                    waits=tuple(hist.items()),
                )
            )
        return Result(self.scenario, self.duration, tuple(workloads))


def arrivals(scenario: Scenario, duration: int) -> Iterator[tuple[int, int]]:
    """Every arrival before ``duration`` ns as ``(time, workload index)``, in
    time order; simultaneous arrivals in workload order."""
    streams = [
        _stream(w, workload, scenario.seed, duration)
        for w, workload in enumerate(scenario.workloads)
    ]
    return heapq.merge(*streams)


def _stream(w: int, workload: Workload, seed: int, duration: int) -> Iterator[tuple[int, int]]:
    for t in workload.arrivals.times(seed * 1_000_003 + w):
        if t >= duration:
            return
        yield t, w


def check_arrivals(scenario: Scenario, max_arrivals: int | None = MAX_ARRIVALS) -> int:
    """How many callers ``scenario`` asks for (a Poisson workload: on
    average); raises :class:`~permits.core.PermitValueError` naming the
    workload's ``size`` or ``rate`` that asks for the most if the total is
    over ``max_arrivals`` (``None``: no limit)."""
    duration = nanoseconds("seconds", scenario.seconds)
    asked = [w.arrivals.asked(duration) for w in scenario.workloads]
    total = sum(asked, Fraction(0))
    if max_arrivals is not None and total > check_int("max_arrivals", max_arrivals, 0):
        j = max(range(len(asked)), key=asked.__getitem__)
        arrivals = scenario.workloads[j].arrivals
        how = f"asks for {float(total):,.4g} callers in all"
        if not isinstance(arrivals, Batch):
            how = f"for seconds={scenario.seconds!r} {how}"
        raise PermitValueError(
            f"workloads[{j}].{'size' if isinstance(arrivals, Batch) else 'rate'}",
            arrivals.size if isinstance(arrivals, Batch) else arrivals.rate,
            f"{how}, over the {max_arrivals:,} a run may ask for "
            "(raise the limit with max_arrivals, or --max-arrivals on the command line)",
        )
    return math.ceil(total)


def simulate(scenario: Scenario, *, max_arrivals: int | None = MAX_ARRIVALS) -> Result:
    """Run ``scenario`` in virtual time on the core and report per workload.

    Refuses a scenario that asks for more than ``max_arrivals`` callers
    (:func:`check_arrivals`) before it starts.

    Deterministic: the same scenario gives the same result. Events at the
    same time happen in this order: the machine ticks (permits due and
    deadlines reached), then callers whose timeout ran out cancel, then new
    callers arrive (each push ticks first, as the core's push does).
    """
    check_arrivals(scenario, max_arrivals)
    duration = nanoseconds("seconds", scenario.seconds)
    timeouts = [
        None if w.timeout is None else nanoseconds("timeout", w.timeout) for w in scenario.workloads
    ]
    return _run(scenario, duration, _generated(scenario, duration, timeouts))


#: An arrival: (time, workload index, cost, flow, give up after; ns).
_Arrival = tuple[int, int, int, Hashable, "int | None"]


def _generated(scenario: Scenario, duration: int, timeouts: list[int | None]) -> Iterator[_Arrival]:
    """The workloads' arrivals before ``duration``, merged in time order
    (simultaneous ones in workload order)."""
    streams = [
        iter(wl.arrivals.times(scenario.seed * 1_000_003 + w))
        for w, wl in enumerate(scenario.workloads)
    ]
    heads = []
    for w, stream in enumerate(streams):
        first = next(stream, duration)
        if first < duration:
            heads.append((first, w))
    heapq.heapify(heads)
    heappop, heapreplace = heapq.heappop, heapq.heapreplace
    while heads:
        t, w = heads[0]
        yield t, w, 1, None, timeouts[w]
        following = next(streams[w], duration)
        if following < duration:
            heapreplace(heads, (following, w))
        else:
            heappop(heads)


def _run(scenario: Scenario, duration: int, source: Iterator[_Arrival]) -> Result:
    """The discrete-event loop: each arrival of ``source`` (in time order,
    all before ``duration``) pushed, ticks at the machine's times, give-ups
    at theirs."""
    tally = Tally(scenario, duration)
    workloads = scenario.workloads
    count = len(workloads)
    deadlines = [
        None if wl.deadline is None else nanoseconds("deadline", wl.deadline) for wl in workloads
    ]
    levels = [wl.level for wl in workloads]
    machine = Machine(
        scenario.policy,
        check_rate(scenario.rate),
        scenario.burst,
        max_waiting=scenario.max_waiting,
    )
    push, tick, cancel, next_tick = machine.push, machine.tick, machine.cancel, machine.next_tick
    on_leave = tally.on_leave
    heappop, heappush = heapq.heappop, heapq.heappush
    offered, waiting, rejected = tally.offered, tally.waiting, tally.rejected
    pending: list[tuple[int, int]] = []  # (give-up time, id), a heap
    never = duration  # no event at or after the end counts
    upcoming = next(source, None)
    upcoming_at = never if upcoming is None else upcoming[0]
    serial = 0
    # Tally.on_arrive, on_grant and on_reject, inlined: this loop is the
    # simulator's hot path.
    granted, units, left_at, bins = tally.granted, tally.units, tally.left_at, tally.bins
    costs: dict[int, int] = {}  # the costs other than 1 of those waiting, by id
    record = [hist.record for hist in tally.hists]
    per_bin = duration // BINS + 1  # grants at t fall in bin t // per_bin < BINS

    def decide(decisions: list[Decision]) -> None:
        for id, state, _, at, waited in decisions:
            w = id % count  # type: ignore[operator]
            waiting[w] -= 1
            if state is _GRANTED:
                granted[w] += 1
                units[w] += costs.pop(id, 1) if costs else 1  # type: ignore[call-overload]
                left_at[w] = at
                record[w](waited)
                bins[w][at // per_bin] += 1
            else:
                if costs:
                    costs.pop(id, None)  # type: ignore[call-overload]
                if state is _EXPIRED:
                    waiting[w] += 1  # on_leave counts it
                    on_leave(w, at, state)
                else:  # REJECTED, at push: it never waited
                    rejected[w] += 1

    while True:
        due = next_tick()
        t = never if due is None else due
        if upcoming_at < t:
            t = upcoming_at
        if pending and pending[0][0] < t:
            t = pending[0][0]
        if t >= never:
            break
        if due is not None and due <= t:
            decide(tick(t))
        while pending and pending[0][0] <= t:
            id = heappop(pending)[1]
            if cancel(id):
                costs.pop(id, None)
                on_leave(id % count, t, State.CANCELLED)
        while upcoming_at <= t:
            _, w, cost, flow, patience = upcoming  # type: ignore[misc]
            id = serial * count + w
            serial += 1
            offered[w] += 1
            waiting[w] += 1
            if cost != 1:
                costs[id] = cost
            deadline = deadlines[w]
            if deadline is not None:
                deadline += t
            if cost == 1 and flow is None:  # the core's quicker path
                decisions = push(id, levels[w], t, deadline=deadline)
            else:
                decisions = push(id, levels[w], t, deadline=deadline, cost=cost, flow=flow)
            if decisions:
                decide(decisions)
                if decisions[-1][0] == id:  # decided at once: nothing to give up on
                    patience = None
            if patience is not None:
                heappush(pending, (t + patience, id))
            upcoming = next(source, None)
            upcoming_at = never if upcoming is None else upcoming[0]
    return tally.result()
