"""Running a scenario in virtual time, and what a run reports.

:func:`simulate` is a discrete-event loop over the same
:class:`~permits.core.Machine` the adapters drive: it pushes each arrival,
withdraws each caller whose ``give_up_after`` (cancelled) or ``timeout``
(expired) runs out, and ticks at each time the
machine names (:meth:`~permits.core.Machine.next_tick`). No second model of
any policy exists here. :class:`Tally` turns what happened to each caller into
a :class:`WorkloadResult`; the live runner (``permits.cli._live``) feeds
the same tally from a real event loop, so both are reported alike.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable, Iterator
from decimal import Context
from fractions import Fraction
from typing import Any

import attrs

from permits.core import (
    SECOND,
    Decision,
    Machine,
    PermitTypeError,
    PermitValueError,
    State,
    WaitHistogram,
)
from permits.core.checks import check_int

from ._require import Measure
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
#: How a waiting caller leaves, in the order of those leaving at one time:
#: it gives up (cancelled), then its timeout runs out (expired, as the core
#: expires a deadline in a tick).
_GIVES_UP, _TIMES_OUT = 0, 1
_LEAVES_AS = (State.CANCELLED, _EXPIRED)
_TOO_LONG = State.TOO_LONG


@attrs.frozen
class WorkloadResult:
    """What one workload got in one run.

    Every caller offered ends in exactly one of ``granted``, ``waiting``
    (still waiting at the end), ``cancelled`` (gave up on its own after
    its ``give_up_after``), ``rejected`` (refused on arrival: its level was
    full), ``too_long`` (refused on arrival: its wait would pass its
    ``max_wait``) or ``expired`` (its ``timeout`` passed, as
    ``acquire(timeout=...)`` expires a caller). The fields ending in
    ``_ns`` are times in the core's exact nanoseconds; the properties ending
    in ``_s`` are the same in seconds, as a user reads them (``None`` as
    for the field: no caller granted, or a backlog never cleared). Wait
    quantiles are over the granted callers, within
    :data:`~permits.core.RELATIVE_ERROR` (the core's histogram);
    ``wait_max_ns`` is exact.
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
    #: Median wait of the callers granted, in nanoseconds; ``None``: none granted.
    wait_p50_ns: int | None
    #: 99th percentile wait of the callers granted, in nanoseconds.
    wait_p99_ns: int | None
    #: Longest wait of the callers granted, in nanoseconds, exact.
    wait_max_ns: int | None
    #: Units of the first limit granted (each caller's cost: one each unless
    #: its workload or trace says otherwise).
    units: int
    #: This workload's fraction of all units of the first limit granted in
    #: the run; ``None`` if none was granted at all (a share of nothing).
    share: float | None
    #: When its last caller left (with a permit or without: refused, gave up
    #: or expired), in nanoseconds from the start, if none was waiting at
    #: the end; else ``None``.
    cleared_at_ns: int | None
    #: Permits granted in each of :data:`BINS` equal slices of the run.
    timeline: tuple[int, ...] = attrs.field(repr=False)
    #: The wait histogram: ``(wait in nanoseconds, count)`` pairs, by wait.
    waits_ns: tuple[tuple[int, int], ...] = attrs.field(repr=False)
    #: Callers refused on arrival because even their best case would wait
    #: longer than their ``max_wait`` (the core's
    #: :attr:`~permits.core.State.TOO_LONG`; not counted in ``rejected``,
    #: as the core's statistics count them).
    too_long: int = attrs.field(kw_only=True)
    #: Units granted of each limit, in the scenario's order (:attr:`Result.limits`).
    units_per_limit: tuple[int, ...] = attrs.field(kw_only=True)
    #: This workload's fraction of all units granted of each limit
    #: (``None`` for a limit none of whose units was granted).
    shares: tuple[float | None, ...] = attrs.field(kw_only=True)
    #: Its tenants (the flows its callers named) with a caller offered.
    tenants: int = attrs.field(kw_only=True)
    #: Its tenants with callers offered and none granted within the run.
    tenants_starved: int = attrs.field(kw_only=True)
    #: The longest of its tenants' p99 waits (each over its granted callers),
    #: in nanoseconds; ``None`` without a tenant granted.
    tenant_wait_p99_max_ns: int | None = attrs.field(kw_only=True)
    #: The tenant with that wait.
    worst_tenant: str | None = attrs.field(kw_only=True)
    #: The median of its granted tenants' p99 waits (nearest rank): how the
    #: typical tenant fares beside the worst; in nanoseconds.
    tenant_wait_p99_median_ns: int | None = attrs.field(kw_only=True)
    #: For each bound of a requirement on its p50 or p99 wait, how many of
    #: its callers were granted within it, exactly: ``(bound in
    #: nanoseconds, count)``.
    within_ns: tuple[tuple[int, int], ...] = attrs.field(default=(), kw_only=True, repr=False)
    #: For each bound of a requirement on its tenants' p99 waits, how many
    #: of its granted tenants have a p99 within it, exactly: ``(bound in
    #: nanoseconds, count)``.
    tenants_within_ns: tuple[tuple[int, int], ...] = attrs.field(
        default=(), kw_only=True, repr=False
    )

    @property
    def wait_p50_s(self) -> float | None:
        """Median wait in seconds; ``None``: no caller granted."""
        return _seconds(self.wait_p50_ns)

    @property
    def wait_p99_s(self) -> float | None:
        """99th percentile wait in seconds; ``None``: no caller granted."""
        return _seconds(self.wait_p99_ns)

    @property
    def wait_max_s(self) -> float | None:
        """Longest wait in seconds; ``None``: no caller granted."""
        return _seconds(self.wait_max_ns)

    @property
    def cleared_at_s(self) -> float | None:
        """When its last caller left, in seconds from the start; ``None``:
        one was waiting at the end."""
        return _seconds(self.cleared_at_ns)

    @property
    def tenant_wait_p99_max_s(self) -> float | None:
        """The longest of its tenants' p99 waits in seconds; ``None``:
        no tenant granted."""
        return _seconds(self.tenant_wait_p99_max_ns)

    @property
    def tenant_wait_p99_median_s(self) -> float | None:
        """The median of its tenants' p99 waits in seconds; ``None``:
        no tenant granted."""
        return _seconds(self.tenant_wait_p99_median_ns)


def _seconds(ns: int | None) -> float | None:
    """Nanoseconds as seconds (``None`` stays ``None``; past a float's
    range of nanoseconds too: an int divided by an int)."""
    return None if ns is None else ns / SECOND


@attrs.frozen
class Result:
    """A run of one :class:`Scenario`: a :class:`WorkloadResult` per workload."""

    scenario: Scenario
    #: The run's length (its scenario's ``seconds``) in nanoseconds.
    duration_ns: int
    workloads: tuple[WorkloadResult, ...]

    @property
    def limits(self) -> tuple[str, ...]:
        """The names of the limits, in the order of :attr:`WorkloadResult.shares`."""
        return tuple(self.scenario.named_limits)

    @property
    def granted(self) -> int:
        """Permits granted over all workloads."""
        return sum(w.granted for w in self.workloads)

    def __getitem__(self, name: str) -> WorkloadResult:
        """The result of the workload called ``name``; a :class:`KeyError`
        naming the workloads there are if none is."""
        for workload in self.workloads:
            if workload.name == name:
                return workload
        names = ", ".join(repr(workload.name) for workload in self.workloads)
        raise KeyError(f"no workload is called {name!r} (the workloads: {names})")


class _Within:
    """A histogram's ``record`` that also counts, exactly, the waits at
    most each of ``bounds`` (ns): a requirement on a wait quantile is judged
    on these counts, not on the histogram's approximate values."""

    __slots__ = ("_record", "bounds", "counts")

    def __init__(self, hist: WaitHistogram, bounds: tuple[int, ...]) -> None:
        self._record = hist._add
        self.bounds = bounds
        self.counts = [0] * len(bounds)

    def record(self, wait: int) -> None:
        self._record(wait)
        counts = self.counts
        for i, bound in enumerate(self.bounds):
            if wait <= bound:
                counts[i] += 1


def _both(first: Callable[[int], None], second: Callable[[int], None]) -> Callable[[int], None]:
    """A record that records with ``first``, then with ``second``."""

    def record(wait: int) -> None:
        first(wait)
        second(wait)

    return record


def _bounds(scenario: Scenario, measures: tuple[Measure, ...]) -> list[tuple[int, ...]]:
    """Per workload, the bounds (ns, whole: a wait is within ``b`` seconds
    if it is within ``floor(b)`` ns) of its requirements on ``measures``."""
    index = {workload.name: w for w, workload in enumerate(scenario.workloads)}
    bounds: list[set[int]] = [set() for _ in scenario.workloads]
    for requirement in scenario.requirements:
        if requirement.measure in measures:
            bounds[index[requirement.workload]].add(math.floor(requirement.bound * SECOND))
    return [tuple(sorted(b)) for b in bounds]


class Tally:
    """Counts what happens to each workload's callers during a run.

    Callers are numbered per run, each id packing its workload's index
    (``serial * workloads + index``), so a decision's id tells its workload
    without a lookup. A caller that names a flow counts for its tenant too
    (:meth:`tenant`). Each grant is one unit of every limit unless
    :meth:`charge` says what it cost. Its times are the core's nanoseconds
    from the start of the run.
    """

    def __init__(self, scenario: Scenario, duration_ns: int) -> None:
        n = len(scenario.workloads)
        self.scenario = scenario
        #: The run's length (its scenario's ``seconds``) in nanoseconds.
        self.duration_ns = duration_ns
        self.count = n
        self.offered: list[int] = [0] * n
        self.granted: list[int] = [0] * n
        #: Units of the costs given as one number, each of every limit.
        self.units: list[int] = [0] * n
        #: Units of the costs given per limit.
        self.units_per_limit: list[list[int]] = [[0] * len(scenario.named_limits) for _ in range(n)]
        self.cancelled: list[int] = [0] * n
        #: Refused for a full level; those refused for their ``max_wait``
        #: are counted apart (``too_long``), not here.
        self.rejected: list[int] = [0] * n
        self.too_long: list[int] = [0] * n
        self.expired: list[int] = [0] * n
        self.left_at: list[int | None] = [None] * n
        self.hists: list[WaitHistogram] = [WaitHistogram() for _ in range(n)]
        self.wait_bounds: list[tuple[int, ...]] = _bounds(
            scenario, (Measure.WAIT_P50, Measure.WAIT_P99)
        )
        self.tenant_bounds: list[tuple[int, ...]] = _bounds(
            scenario, (Measure.WORST_TENANT_P99, Measure.MEDIAN_TENANT_P99)
        )
        #: Per workload, the exact counts within its bounds, if it has any.
        self.within: list[_Within | None] = [
            _Within(hist, bounds) if bounds else None
            for hist, bounds in zip(self.hists, self.wait_bounds, strict=True)
        ]
        #: Per workload, what records a granted caller's wait (one of no
        #: tenant: a tenant's record stands for its workload's, below).
        self.records: list[Callable[[int], None]] = [
            hist._add if within is None else within.record
            for hist, within in zip(self.hists, self.within, strict=True)
        ]
        self.bins: list[list[int]] = [[0] * BINS for _ in range(n)]
        #: Per workload, its grants of another cost than one unit of every
        #: limit (:meth:`charge`): the others count one each, at the end.
        self.charged = [0] * n
        #: Per workload, its tenants' flows: the index of each in the lists
        #: below (a tenant's callers granted are its histogram's count). A
        #: tenant's record records for its workload too: its histogram is
        #: merged into the workload's at the end, or, for a workload that
        #: counts waits within bounds, its record records there as well.
        self.tenants: list[dict[Hashable, int]] = [{} for _ in range(n)]
        self.tenant_flows: list[Hashable] = []
        self.tenant_hists: list[WaitHistogram] = []
        self.tenant_records: list[Callable[[int], None]] = []
        self.tenant_within: list[_Within | None] = []

    def on_arrive(self, w: int) -> None:
        """A caller of workload ``w`` arrived and asks for a permit."""
        self.offered[w] += 1

    def tenant(self, w: int, flow: Hashable) -> int:
        """A caller of workload ``w`` that arrived names ``flow``: its
        tenant's index, for :meth:`on_grant`."""
        index = self.tenants[w].setdefault(flow, len(self.tenant_flows))
        if index == len(self.tenant_flows):
            self.tenant_flows.append(flow)
            hist = WaitHistogram()
            within = _Within(hist, self.tenant_bounds[w]) if self.tenant_bounds[w] else None
            self.tenant_hists.append(hist)
            self.tenant_within.append(within)
            record: Callable[[int], None] = hist._add if within is None else within.record
            if self.within[w] is not None:
                record = _both(record, self.records[w])
            self.tenant_records.append(record)
        return index

    def on_reject(self, w: int, at_ns: int, state: State = State.REJECTED) -> None:
        """A caller of workload ``w`` was refused at once, at ``at_ns``: its
        level was full (:attr:`~permits.core.State.REJECTED`, counted in
        ``rejected``), or it would have waited past its ``max_wait``
        (``State.TOO_LONG``, counted in ``too_long``)."""
        if state is _TOO_LONG:
            self.too_long[w] += 1
        else:
            self.rejected[w] += 1
        self.left_at[w] = at_ns

    def on_grant(self, w: int, at_ns: int, waited_ns: int, *, tenant: int | None = None) -> None:
        """A caller of workload ``w`` (of ``tenant``) was granted at
        ``at_ns``, before the run's end, after ``waited_ns``: one unit of
        every limit, unless :meth:`charge` says otherwise."""
        self.granted[w] += 1
        self.left_at[w] = at_ns
        if tenant is None:
            self.records[w](waited_ns)
        else:
            self.tenant_records[tenant](waited_ns)
        self.bins[w][at_ns * BINS // self.duration_ns] += 1  # slice i: [i, i + 1) * duration / BINS

    def charge(self, w: int, cost: int | tuple[int, ...]) -> None:
        """A grant to workload ``w`` cost ``cost``, not one unit of every
        limit."""
        self.charged[w] += 1
        if isinstance(cost, int):
            self.units[w] += cost
        else:
            per_limit = self.units_per_limit[w]
            for j, n in enumerate(cost):
                per_limit[j] += n

    def on_leave(self, w: int, at_ns: int, state: State) -> None:
        """A waiting caller of workload ``w`` left at ``at_ns`` without a
        permit: ``CANCELLED`` or ``EXPIRED``."""
        self.left_at[w] = at_ns
        if state is State.CANCELLED:
            self.cancelled[w] += 1
        else:
            self.expired[w] += 1

    def _hist(self, w: int) -> WaitHistogram:
        """Workload ``w``'s waits: its own histogram's, and its tenants'
        unless they were recorded there too."""
        if self.within[w] is not None or not self.tenants[w]:
            return self.hists[w]
        merged = WaitHistogram()
        merged.merge(self.hists[w])
        for tenant in self.tenants[w].values():
            merged.merge(self.tenant_hists[tenant])
        return merged

    def _tenant_figures(self, w: int) -> dict[str, Any]:
        """Workload ``w``'s tenants, those starved, the longest p99 and
        whose, and the median p99."""
        indexes = list(self.tenants[w].values())
        p99s = sorted(
            (p99, i) for i in indexes if (p99 := self.tenant_hists[i].quantile(0.99)) is not None
        )
        return {
            "tenants": len(indexes),
            "tenants_starved": sum(1 for i in indexes if not self.tenant_hists[i].count),
            "tenant_wait_p99_max_ns": p99s[-1][0] if p99s else None,
            "worst_tenant": str(self.tenant_flows[p99s[-1][1]]) if p99s else None,
            "tenant_wait_p99_median_ns": p99s[(len(p99s) - 1) // 2][0] if p99s else None,
            "tenants_within_ns": tuple(
                (bound, sum(1 for i in indexes if self._p99_within(i, k)))
                for k, bound in enumerate(self.tenant_bounds[w])
            ),
        }

    def _p99_within(self, tenant: int, k: int) -> bool:
        """Whether ``tenant`` was granted and its p99 (nearest rank, over its
        granted callers) is within its workload's ``k``-th tenant bound."""
        granted = self.tenant_hists[tenant].count
        within = self.tenant_within[tenant]
        assert within is not None
        return granted > 0 and within.counts[k] >= max(1, math.ceil(granted * 99 / 100))

    def _within(self, w: int) -> tuple[tuple[int, int], ...]:
        """Workload ``w``'s ``(bound, waits granted within it)``."""
        within = self.within[w]
        return () if within is None else tuple(zip(within.bounds, within.counts, strict=True))

    def result(self) -> Result:
        """The run's :class:`Result`; call once the run is over."""
        n = len(self.scenario.named_limits)
        units = [
            [
                self.units[w] + self.granted[w] - self.charged[w] + self.units_per_limit[w][j]
                for j in range(n)
            ]
            for w in range(self.count)
        ]
        totals = [sum(per_limit[j] for per_limit in units) for j in range(n)]
        workloads = []
        for w, workload in enumerate(self.scenario.workloads):
            hist = self._hist(w)
            # every caller offered and not decided (nor granted past the end)
            waiting = (
                self.offered[w]
                - self.granted[w]
                - self.rejected[w]
                - self.too_long[w]
                - self.cancelled[w]
                - self.expired[w]
            )
            shares = tuple(
                u / total if total else None for u, total in zip(units[w], totals, strict=True)
            )
            workloads.append(
                WorkloadResult(
                    name=workload.name,
                    level=workload.level,
                    offered=self.offered[w],
                    granted=self.granted[w],
                    waiting=waiting,
                    cancelled=self.cancelled[w],
                    rejected=self.rejected[w],
                    too_long=self.too_long[w],
                    expired=self.expired[w],
                    wait_p50_ns=hist.quantile(0.5),
                    wait_p99_ns=hist.quantile(0.99),
                    wait_max_ns=hist.max,
                    units=units[w][0],
                    share=shares[0],
                    cleared_at_ns=self.left_at[w] if waiting == 0 else None,
                    timeline=tuple(self.bins[w]),
                    waits_ns=tuple(hist.items()),
                    units_per_limit=tuple(units[w]),
                    shares=shares,
                    within_ns=self._within(w),
                    **self._tenant_figures(w),
                )
            )
        return Result(self.scenario, self.duration_ns, tuple(workloads))


def arrivals(scenario: Scenario, duration_ns: int) -> Iterator[tuple[int, int]]:
    """Every arrival before ``duration_ns`` as ``(time in nanoseconds,
    workload index)``, in time order; simultaneous arrivals in workload order."""
    check_scenario(scenario)
    check_int("duration_ns", duration_ns, 0)
    streams = [
        _stream(w, workload, scenario.seed, duration_ns)
        for w, workload in enumerate(scenario.workloads)
    ]
    return heapq.merge(*streams)


def _stream(w: int, workload: Workload, seed: int, duration_ns: int) -> Iterator[tuple[int, int]]:
    for t in workload.arrivals.times(seed * 1_000_003 + w):
        if t >= duration_ns:
            return
        yield t, w


def check_scenario(scenario: object) -> Scenario:
    """``scenario``, if it is a :class:`Scenario`; else a
    :class:`~permits.core.PermitTypeError` naming it."""
    if not isinstance(scenario, Scenario):
        raise PermitTypeError("scenario", scenario, "a Scenario (permits.sim.Scenario)")
    return scenario


def check_arrivals(scenario: Scenario, max_arrivals: int | None = MAX_ARRIVALS) -> int:
    """How many callers ``scenario`` asks for (a Poisson workload: on
    average); raises :class:`~permits.core.PermitValueError` naming the
    workload's ``size`` or ``rate`` that asks for the most if the total is
    over ``max_arrivals`` (``None``: no limit)."""
    check_scenario(scenario)
    duration = nanoseconds("seconds", scenario.seconds)
    asked = [w.arrivals.asked(duration) for w in scenario.workloads]
    total = sum(asked, Fraction(0))
    if max_arrivals is not None and total > check_int("max_arrivals", max_arrivals, 0):
        j = max(range(len(asked)), key=asked.__getitem__)
        arrivals = scenario.workloads[j].arrivals
        how = f"asks for {_about(total)} caller{'' if total == 1 else 's'} in all"
        if not isinstance(arrivals, Batch):
            how = f"for seconds={scenario.seconds!r} {how}"
        raise PermitValueError(
            f"workloads[{j}].{'size' if isinstance(arrivals, Batch) else 'rate'}",
            arrivals.size if isinstance(arrivals, Batch) else arrivals.rate,
            f"{how}, over the {max_arrivals:,} a run may ask for "
            "(raise the limit with max_arrivals, or --max-arrivals on the command line)",
        )
    return math.ceil(total)


def _about(count: Fraction) -> str:
    """``count`` to four digits, past a float too (1e+600: a rate of 1e300
    for 1e300 s)."""
    try:
        return f"{float(count):,.4g}"
    except OverflowError:
        return f"{Context(prec=4).divide(count.numerator, count.denominator).normalize():,g}"


def simulate(scenario: Scenario, *, max_arrivals: int | None = MAX_ARRIVALS) -> Result:
    """Run ``scenario`` in virtual time on the core and report per workload.

    Refuses a scenario that asks for more than ``max_arrivals`` callers
    (:func:`check_arrivals`) before it starts.

    Deterministic: the same scenario gives the same result. Events at the
    same time happen in this order: callers who give up cancel, then those
    whose timeout ran out expire (as the core expires a deadline in a
    tick), then the machine grants the permits due, then new callers arrive
    (each push ticks first, as the core's push does); a caller of timeout 0
    not granted on arrival expires then, before the next arrives (as a
    try_acquire that finds no permit does).
    """
    check_arrivals(scenario, max_arrivals)
    duration = nanoseconds("seconds", scenario.seconds)
    return _run(scenario, duration, _generated(scenario, duration))


#: An arrival, shaped as a trace's :class:`~permits.sim.Call`: (time,
#: workload index, cost, flow, timeout, its line in a trace (0: none),
#: the longest wait it asks at all, when it gives up; ns). ``None`` for the
#: timeout, the longest wait or the give-up: its workload's. The cost is
#: units of every limit (an ``int``) or per limit, in order (a trace's
#: mapping by name: as its ``admit`` makes it).
_Arrival = tuple[
    int, int, "int | tuple[int, ...]", Hashable, "int | None", int, "int | None", "int | None"
]

#: A trace's check of an arrival the loop cannot take as it is (a workload
#: index past the last, or a cost other than one unit): its cost as an
#: arrival's, from its line, workload index and cost; raises for one the
#: machine could never take.
_Admit = Callable[[int, int, Any], "int | tuple[int, ...]"]


def _ns(workload: Workload, field: str) -> int | None:
    """A workload's ``field`` (seconds) in nanoseconds (``None``: none)."""
    seconds = getattr(workload, field)
    return None if seconds is None else nanoseconds(field, seconds)


def _generated(scenario: Scenario, duration: int) -> Iterator[_Arrival]:
    """The workloads' arrivals before ``duration``, merged in time order
    (simultaneous ones in workload order)."""
    limits = tuple(scenario.named_limits)
    seeds = [scenario.seed * 1_000_003 + w for w in range(len(scenario.workloads))]
    streams = [
        iter(wl.arrivals.times(seed)) for wl, seed in zip(scenario.workloads, seeds, strict=True)
    ]
    callers = [
        None if wl.plain else wl.callers(limits, seed)
        for wl, seed in zip(scenario.workloads, seeds, strict=True)
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
        drawn = callers[w]
        if drawn is None:
            yield t, w, 1, None, None, 0, None, None
        else:
            cost, flow = next(drawn)
            yield t, w, cost, flow, None, 0, None, None
        following = next(streams[w], duration)
        if following < duration:
            heapreplace(heads, (following, w))
        else:
            heappop(heads)


def _back_in_time(arrival: _Arrival, t: int) -> PermitValueError:
    """The error for a replay's call at a time before ``t``, the call
    before's, or at no time (NaN)."""
    at = arrival[0]
    if isinstance(at, bool) or not isinstance(at, int):
        return PermitValueError("calls", arrival, "its at_ns must be an int of nanoseconds")
    before = "the start (0)" if t == 0 else f"the call before it ({t} ns)"
    return PermitValueError(
        "calls", arrival, f"its at_ns is earlier than {before}: give them in time order"
    )


def _run(
    scenario: Scenario,
    duration: int,
    source: Iterator[_Arrival],
    admit: _Admit | None = None,
    *,
    ask_every_turn: bool = False,
) -> Result:
    """The discrete-event loop: each arrival of ``source`` (in time order)
    before ``duration`` pushed, ticks at the machine's times, give-ups at
    theirs. ``source`` is not read past its first arrival from ``duration``
    on. ``admit``: a trace's check of an arrival that is not of one unit, or
    not of a workload of ``scenario`` (``None``: every arrival is one of its
    own). ``ask_every_turn``: ask the machine for its next tick after every
    turn, not only after one that could change it (to test that skipping
    the others changes nothing: SPEC P54)."""
    tally = Tally(scenario, duration)
    workloads = scenario.workloads
    count = len(workloads)
    levels = [wl.level for wl in workloads]
    fair = [wl.fair for wl in workloads]
    # An arrival's timeout and max_wait, unless it has its own; its give-up.
    timeouts = [_ns(wl, "timeout") for wl in workloads]
    max_waits = [_ns(wl, "max_wait") for wl in workloads]
    give_ups = [_ns(wl, "give_up_after") for wl in workloads]
    limits = scenario.named_limits
    names = tuple(limits)
    # A run never refunds or settles a permit: the machine need keep no
    # grant for it (settle_window_ns=None), which saves it logging them; and
    # the tally keeps the waits, so the machine keeps no histogram of them.
    machine = Machine(
        scenario.policy,
        limits=limits,
        max_waiting=scenario.max_waiting,
        settle_window_ns=None,
        keep_waits=False,
        **scenario.flow_options(),
    )
    push, tick, cancel, next_tick = machine.push, machine.tick, machine.cancel, machine.next_tick
    on_arrive, on_grant, on_reject = tally.on_arrive, tally.on_grant, tally.on_reject
    on_leave, charge = tally.on_leave, tally.charge
    tenant_ids, new_tenant = tally.tenants, tally.tenant
    heappop, heappush = heapq.heappop, heapq.heappush
    # (time, how it leaves, id), a heap, in _GIVES_UP, _TIMES_OUT order at
    # each time. (The machine's own deadlines would decide alike; these cost
    # less.)
    pending: list[tuple[int, int, int]] = []
    never = duration  # no event at or after the end counts
    upcoming = next(source, None)
    upcoming_at = never if upcoming is None else upcoming[0]
    if not upcoming_at >= 0:  # (not <: a NaN fails this, and would stall the loop)
        raise _back_in_time(upcoming, 0)  # type: ignore[arg-type]
    serial = 0
    # Of those waiting, by id: the costs other than one unit of every limit;
    # and the tenants of those that name a flow or may give up (``None``:
    # none named), so that a give-up whose caller has gone is dropped
    # without asking the machine.
    costs: dict[int, int | tuple[int, ...]] = {}
    tenants: dict[int, int | None] = {}

    def decide(decisions: list[Decision]) -> None:
        for id, state, _, at, waited in decisions:
            w = id % count  # type: ignore[operator]
            if state is _GRANTED:
                if costs and id in costs:
                    charge(w, costs.pop(id))
                tenant = tenants.pop(id, None) if tenants else None  # type: ignore[call-overload]
                on_grant(w, at, waited, tenant=tenant)
            else:
                if costs:
                    costs.pop(id, None)  # type: ignore[call-overload]
                if tenants:
                    tenants.pop(id, None)  # type: ignore[call-overload]
                if state is _EXPIRED:
                    on_leave(w, at, state)
                else:  # REJECTED or TOO_LONG, at push: it never waited
                    on_reject(w, at, state)

    def give_up(id: int, t: int, how: int) -> bool:
        """The waiting caller ``id`` leaves at ``t``: withdrawn and counted
        as ``how`` says (``_GIVES_UP``: cancelled, ``_TIMES_OUT``: expired)
        (``False``: it no longer waited)."""
        if not cancel(id):
            return False
        costs.pop(id, None)
        del tenants[id]
        on_leave(id % count, t, _LEAVES_AS[how])
        return True

    # The machine's next tick, asked again after a turn unless nothing
    # changed it: a turn whose only calls were pushes, each of one unit
    # with no deadline and deciding nothing, into a machine where someone
    # waited, with every cost so far one unit (SPEC P54).
    due = next_tick()
    # Whether to ask after every turn: an arrival asked for another cost
    # than one unit (or the caller said so).
    varied = ask_every_turn
    while True:
        t = never if due is None else due
        if upcoming_at < t:
            t = upcoming_at
        gives_up = never  # the first timeout or give-up, from t on, of one still waiting
        while pending:
            gives_up, _, id = pending[0]
            if gives_up >= t:
                break
            if id in tenants:
                t = gives_up
                break
            heappop(pending)  # granted or gone before it would leave
            gives_up = never
        if t >= never:
            break
        ask = due is None or varied  # whether to ask for the next tick after this turn
        # Timeouts and give-ups first: a caller whose patience runs out at
        # t is not granted at t (as the core expires a deadline reached
        # before it grants, and as a recorded acquire(timeout=...) was).
        gave_up = False
        while gives_up == t and pending and pending[0][0] <= t:
            _, how, id = heappop(pending)
            if id in tenants and give_up(id, t, how):
                gave_up = True
        if gave_up:
            # One who gave up may have stood before a waiter whose units
            # were there before t (a cost or a limit it did not share): that
            # waiter is granted now, at t, never at the earlier time the
            # machine names (a cancel takes no time).
            ask = True
            due = next_tick()
        if due is not None and due <= t:
            decide(tick(t))
            ask = True
        while upcoming_at <= t:
            _, w, cost, flow, timeout, line, limit, give = upcoming  # type: ignore[misc]
            if admit is not None and (
                cost != 1
                or cost.__class__ is not int
                or w.__class__ is not int
                or not 0 <= w < count
            ):
                cost = admit(line, w, cost)
            if timeout is None:
                timeout = timeouts[w]
            if limit is None:
                limit = max_waits[w]
            if give is None:
                give = give_ups[w]
            on_arrive(w)
            id = serial * count + w
            serial += 1
            leaves = timeout is not None or give is not None  # may leave waiting
            if leaves and ((timeout or 0) < 0 or (give or 0) < 0):  # (a call made in code)
                field = "timeout_ns" if (timeout or 0) < 0 else "give_up_after_ns"
                raise PermitValueError("calls", upcoming, f"its {field} must be at least 0")
            decisions: list[Decision] | None = None
            if give == 0:
                # It gave up as it came (a trace's call cancelled at its
                # arrival, or granted then and cancelled before it ran, its
                # permit handed back): nothing is decided for it, as a
                # caller whose patience runs out at t is not granted at t.
                if flow is not None and flow not in tenant_ids[w]:
                    new_tenant(w, flow)
                on_leave(w, t, _LEAVES_AS[_GIVES_UP])
            elif cost == 1 and flow is None:  # the core's quicker path
                if leaves:
                    tenants[id] = None
                decisions = push(id, levels[w], t, max_wait_ns=limit)
            else:
                asked: int | dict[str, int] = 1  # its cost as the machine takes it
                if cost != 1:
                    costs[id] = cost
                    ask = varied = True
                    asked = cost if isinstance(cost, int) else dict(zip(names, cost, strict=True))
                if flow is not None:
                    tenant = tenant_ids[w].get(flow)
                    tenants[id] = new_tenant(w, flow) if tenant is None else tenant
                elif leaves:
                    tenants[id] = None
                decisions = push(
                    id,
                    levels[w],
                    t,
                    cost=asked,
                    flow=flow if fair[w] else None,
                    max_wait_ns=limit,
                )
            if decisions:
                ask = True
                decide(decisions)
            if leaves and id in tenants:  # not decided at once
                if give is not None:
                    heappush(pending, (t + give, _GIVES_UP, id))
                if timeout == 0 and id in tenants:
                    # expires at once, as a try_acquire does: no later arrival sees it
                    give_up(id, t, _TIMES_OUT)
                    ask = True
                elif timeout is not None:
                    heappush(pending, (t + timeout, _TIMES_OUT, id))
            upcoming = next(source, None)
            upcoming_at = never if upcoming is None else upcoming[0]
            if not upcoming_at >= t:  # a replay's calls made in code (read_trace refuses such
                # rows); not <: a NaN fails this, and would stall the loop, every later call dropped
                raise _back_in_time(upcoming, t)  # type: ignore[arg-type]
        if ask:
            due = next_tick()
    return tally.result()
