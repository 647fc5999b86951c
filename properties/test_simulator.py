"""The simulator's properties (SPEC.md, *The simulator*: P56-P61, P99, P106, P107), each
against a naive computation: a loop over the machine, one event at a time
(``naive_figures`` and the replay's loop, beside the simulator's example
tests in ``tests/``), or the rule written out."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import attrs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_sim import (  # (tests/: the simulator's example tests and their naive loop)
    assert_waits,
    conserved,
    dear_costs,
    naive_figures,
    near,
    nearest_rank,
    patient_workloads,
    policies,
    tenants,
    workloads,
)
from test_trace import _QUARTERS, _naive_replay

from permits.core import (
    SECOND,
    Aging,
    Fifo,
    Limit,
    PermitValueError,
    Policy,
    Shares,
    StrictPriority,
)
from permits.sim import (
    Batch,
    Call,
    Constant,
    Requirement,
    Scenario,
    Tenants,
    Workload,
    compare,
    default_grid,
    load_policy,
    load_scenarios,
    offered_quantile,
    read_trace,
    replay,
    simulate,
    trace_lines,
)
from permits.sim._scenario import SECONDS_EXPONENT, nanoseconds

from configs import EXPONENT, decimals_about_the_bound


def offered_rank(waits: Sequence[tuple[int, int]], offered: int, q: Fraction) -> float:
    """The nearest-rank ``q``-quantile over ``offered`` callers: the waits
    ``(wait, count)`` written out, and the callers not granted after them
    as waiting forever."""
    spelled: list[float] = [w for w, n in waits for _ in range(n)]
    return nearest_rank(spelled + [math.inf] * (offered - len(spelled)), q)


@settings(deadline=None)
@given(
    policy=policies,
    rate=st.sampled_from([3, 25, Fraction(100, 3)]),
    burst=st.integers(1, 4),
    seed=st.integers(0, 2**70),
    loads=st.lists(workloads, min_size=1, max_size=4),
)
def test_any_scenario_is_accounted_for_and_within_the_limit(
    policy: Fifo, rate: int, burst: int, seed: int, loads: list[Workload]
) -> None:
    """P56, P57: Whatever the scenario: every caller is accounted for exactly once, the
    permits of the run stay within the limit over its length, the timeline
    adds up, and the run is deterministic."""
    loads = [attrs.evolve(w, name=f"w{i}") for i, w in enumerate(loads)]
    scenario = Scenario("any", policy, rate, 2, loads, burst=burst, seed=seed)
    result = simulate(scenario)
    conserved(result)
    assert result.granted <= burst + math.floor(Fraction(rate) * 2)
    for w, load in zip(result.workloads, loads, strict=True):
        assert sum(w.timeline) == w.granted
        assert sum(count for _, count in w.waits_ns) == w.granted
        for patience in (load.timeout, load.give_up_after):
            if patience is not None and w.wait_max_ns is not None:
                assert w.wait_max_ns <= Fraction(patience) * SECOND
    assert simulate(scenario) == result


@settings(deadline=None)
@example(  # a caller of one unit behind a dear one that gives up: granted when it leaves
    policy=Fifo(3),
    seed=0,
    loads=[
        (Workload("w", 0, Batch(1)), 4, None),
        (Workload("w", 0, Batch(1), give_up_after=0.4), 4, None),
        (Workload("w", 0, Batch(1)), 1, None),
    ],
    two_limits=False,
    max_waiting=None,
    flow_weights=None,
    max_waiting_per_flow=None,
)
@given(
    policy=policies,
    seed=st.integers(0, 2**70),
    loads=st.lists(st.tuples(patient_workloads, dear_costs, tenants), min_size=1, max_size=4),
    two_limits=st.booleans(),
    max_waiting=st.sampled_from([None, 0, 2, (None, 3, 1)]),
    flow_weights=st.sampled_from([None, {"w0#1": 3, "w1#2": 2}]),
    max_waiting_per_flow=st.sampled_from([None, 1, 3]),
)
def test_every_figure_is_a_naive_run_of_the_machines(
    policy: Fifo,
    seed: int,
    loads: list[tuple[Workload, object, Tenants | None]],
    two_limits: bool,
    max_waiting: int | tuple[int | None, ...] | None,
    flow_weights: dict[str, int] | None,
    max_waiting_per_flow: int | None,
) -> None:
    """P57: Every figure of a run, as a naive loop over the machine gives it
    (:func:`naive_figures`): the counts, units, shares, the time it
    cleared and the timeline exactly, the wait quantiles and the tenants'
    within the histogram's error. (The run's machine keeps no waits, the
    naive loop's does: P55.)"""
    built = [
        attrs.evolve(w, name=f"w{i}", cost=cost, tenants=tenants)
        for i, (w, cost, tenants) in enumerate(loads)
    ]
    if two_limits:
        limits = {"a": Limit(3, 4), "b": Limit(2, 5)}
        scenario = Scenario("any", policy, None, 3, built, seed=seed, limits=limits)
    else:  # one limit: a cost per limit becomes one of every limit
        built = [attrs.evolve(w, cost=1) if isinstance(w.cost, tuple) else w for w in built]
        scenario = Scenario("any", policy, 2, Fraction(5, 2), built, burst=4, seed=seed)
    scenario = attrs.evolve(
        scenario,
        max_waiting=max_waiting,
        flow_weights=flow_weights,
        max_waiting_per_flow=max_waiting_per_flow,
    )
    result = simulate(scenario)
    figures = naive_figures(scenario)
    totals = [sum(f["units_per_limit"][j] for f in figures) for j in range(len(result.limits))]
    for got, want in zip(result.workloads, figures, strict=True):
        for name in (
            "offered",
            "granted",
            "waiting",
            "cancelled",
            "rejected",
            "too_long",
            "expired",
            "units_per_limit",
            "cleared_at_ns",
            "timeline",
            "tenants",
            "tenants_starved",
        ):
            assert getattr(got, name) == want[name], (got.name, name)
        units = want["units_per_limit"]
        assert got.shares == tuple(u / t if t else None for u, t in zip(units, totals, strict=True))
        waits: list[int] = want["waits"]
        if waits:
            assert_waits(got, waits)
        else:
            assert (got.wait_p50_ns, got.wait_p99_ns, got.wait_max_ns) == (None, None, None)
        p99s: list[int] = want["tenant_p99s"]
        assert near(got.tenant_wait_p99_max_ns, p99s[-1] if p99s else None)
        assert near(got.tenant_wait_p99_median_ns, p99s[(len(p99s) - 1) // 2] if p99s else None)


@given(
    seconds=st.fractions(min_value=0, max_value=10**6, max_denominator=10**13)
    | st.decimals(min_value=0, max_value=10**6, places=12).map(Decimal)
    | st.floats(min_value=0, max_value=10**6)
)
@example(seconds=2.5e-9)  # the decimal 2.5 ns: 2 (its binary value is above: 3)
@example(seconds=3.5e-9)  # 4 (its binary value is below: 3)
@example(seconds=0.5117479805)  # 511,747,980 (its binary value rounds to ...981)
def test_any_time_is_the_nearest_nanosecond_ties_to_even(
    seconds: Fraction | Decimal | float,
) -> None:
    """P58: any time in seconds is the nearest whole nanosecond: at most half
    a nanosecond away, and at exactly half, the even one; a float is the
    decimal it prints as (P77's rule), not its binary value."""
    ns = nanoseconds("seconds", seconds)
    exact = Fraction(repr(seconds)) if isinstance(seconds, float) else Fraction(seconds)
    off = abs(Fraction(ns) - exact * SECOND)
    assert off <= Fraction(1, 2), (seconds, ns)
    assert off < Fraction(1, 2) or ns % 2 == 0, (seconds, ns)


@settings(deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from([0, 0, SECOND // 8, SECOND // 4]),
            st.integers(0, 1),
            _QUARTERS,
            _QUARTERS,
            st.sampled_from([None, None, 0, SECOND // 4]),
            st.sampled_from([1, 1, 2, 3, {"a": 1}, {"b": 2}, {"a": 2, "b": 1}]),
            st.sampled_from([None, None, "x", "y", "z"]),
        ),
        max_size=30,
    ),
    policy=st.sampled_from(
        [Fifo(2), StrictPriority(2), Shares((2, 1)), Aging(2, after_ns=SECOND // 2)]
    ),
    max_waiting=st.sampled_from([None, 0, 2]),
    two_limits=st.booleans(),
    fair=st.tuples(st.booleans(), st.booleans()),
    flows=st.sampled_from([{}, {"max_waiting_per_flow": 1}, {"flow_weights": {"x": 3}}]),
    burst=st.sampled_from([1, 3]),
)
def test_a_replay_of_timeouts_and_give_ups_of_any_length_is_a_naive_run_of_the_machine(
    rows: list[tuple[int, int, int | None, int | None, int | None, Any, str | None]],
    policy: Policy,
    max_waiting: int | None,
    two_limits: bool,
    fair: tuple[bool, bool],
    flows: dict[str, Any],
    burst: int,
) -> None:
    """P59: A trace's calls with a timeout, a give-up, both (the earlier wins; at
    one instant the give-up), either of 0, and a ``max_wait``, at times that
    fall on a permit's due time and on each other's, of any cost (per limit
    too) and flow (named to the limiter or not): each level's counts,
    units, tenants, longest wait and the time it cleared are a naive loop's
    over the machine, where a timeout is the machine's own deadline."""
    calls = []
    at = 0
    for gap, level, timeout, give, max_wait, cost, flow in rows:
        at += gap
        if not two_limits and not (isinstance(cost, int) and cost <= burst):
            cost = 1
        calls.append(Call(at, level, cost, flow, timeout, 0, max_wait, give))
    levels = [Workload("w0", 0, Batch(0), fair=fair[0]), Workload("w1", 1, Batch(0), fair=fair[1])]
    if two_limits:
        limits = {"a": Limit(8, 3), "b": Limit(5, 4)}
        scenario = Scenario("r", policy, None, 3, levels, max_waiting=max_waiting, limits=limits)
    else:
        scenario = Scenario("r", policy, 8, 3, levels, burst=burst, max_waiting=max_waiting)
    scenario = attrs.evolve(scenario, **flows)
    result = replay(scenario, calls)
    for got, want in zip(result.workloads, _naive_replay(scenario, calls), strict=True):
        for name, value in want.items():
            assert getattr(got, name) == value, (got.name, name)


@given(
    counts=st.dictionaries(st.integers(0, 10**9), st.integers(1, 5), max_size=8),
    ungranted=st.integers(0, 10),
    percent=st.integers(1, 100),
)
def test_offered_quantile_is_the_nearest_rank(
    counts: dict[int, int], ungranted: int, percent: int
) -> None:
    """P60: for any waits, and any callers not granted beside them, the
    quantile is the naive nearest rank over every caller offered (``None``
    for a rank among those not granted)."""
    waits = tuple(sorted(counts.items()))
    offered = sum(counts.values()) + ungranted
    if offered == 0:
        return
    q = Fraction(percent, 100)
    got = offered_quantile(waits, offered, q)
    assert (math.inf if got is None else got) == offered_rank(waits, offered, q)


@settings(deadline=None, max_examples=25)
@given(
    urgent=st.integers(1, 40),
    batch=st.integers(1, 60),
    rate=st.integers(5, 40),
    grid=st.lists(st.sampled_from(default_grid(2)), min_size=1, max_size=5),
    p99_ms=st.integers(1, 2000),
    share=st.integers(0, 60),
    urgent_first=st.booleans(),
)
def test_the_recommendation_follows_its_rule(
    urgent: int,
    batch: int,
    rate: int,
    grid: list[Any],
    p99_ms: int,
    share: int,
    urgent_first: bool,
) -> None:
    """P61: for any small scenario and grid, the recommendation is the
    outcome of least (requirements missed, urgent p99 over the callers
    offered, urgent callers not granted, urgent p50), the earliest in the
    grid on a tie: each figure computed here naively from the waits. The
    most urgent workload is the lowest level's, whichever is listed first
    (the first listed passed every run that listed it first)."""
    workloads = [Workload("urgent", 0, Constant(urgent)), Workload("batch", 1, Batch(batch))]
    scenario = Scenario(
        "any",
        StrictPriority(2),
        rate=rate,
        burst=2,
        seconds=3,
        workloads=workloads if urgent_first else workloads[::-1],
        requirements=[
            Requirement.parse(f"urgent p99 <= {p99_ms} ms"),
            Requirement.parse(f"batch share >= {share}%"),
        ],
    )
    comparison = compare(scenario, grid)
    assert comparison.urgent == "urgent", "P61"

    def key(i: int) -> tuple[int, float, int, float, int]:
        outcome = comparison.outcomes[i]
        w = outcome.result["urgent"]
        return (
            len(outcome.missed),
            offered_rank(w.waits_ns, w.offered, Fraction(99, 100)),
            w.offered - w.granted,
            offered_rank(w.waits_ns, w.offered, Fraction(1, 2)),
            i,
        )

    best = min(range(len(grid)), key=key)
    assert comparison.recommended is comparison.outcomes[best], [key(i) for i in range(len(grid))]


@settings(deadline=None, max_examples=50)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 3 * SECOND),
            st.integers(0, 1),
            st.none() | st.sampled_from(["acme", "bulk"]),
        ),
        max_size=12,
    ),
    level=st.integers(0, 1),
    measure=st.sampled_from(
        ["worst tenant p99 <= 1 s", "median tenant p99 <= 100 ms", "tenants starved <= 0"]
    ),
)
def test_a_replay_judges_a_tenants_requirement_only_where_its_calls_name_tenants(
    rows: list[tuple[int, int, str | None]], level: int, measure: str
) -> None:
    """P99: compare with calls refuses a requirement on the tenants of a
    workload whose level's calls within the run name none (a
    ``PermitValueError`` naming the requirement), as it refuses one on a
    workload whose callers name none without calls; where some name one,
    or none came, it judges it, on each tenant the calls named."""
    calls = sorted((Call(at, lv, flow=flow) for at, lv, flow in rows), key=lambda c: c.at_ns)
    name = ("urgent", "batch")[level]
    scenario = Scenario(
        "tenants",
        StrictPriority(2),
        rate=4,
        burst=1,
        seconds=2,
        workloads=[Workload("urgent", 0, Batch(0)), Workload("batch", 1, Batch(0))],
        requirements=[Requirement.parse(f"{name} {measure}")],
    )
    within = [c for c in calls if c.at_ns < 2 * SECOND and c.level == level]
    named = {c.flow for c in within if c.flow is not None}
    grid: list[Policy] = [Fifo(2), StrictPriority(2)]
    if within and not named:
        with pytest.raises(PermitValueError) as refused:
            compare(scenario, grid, calls=lambda: calls)
        assert refused.value.argument == "requirements[0]"
        assert refused.value.value == f"{name} {measure}"
        return
    comparison = compare(scenario, grid, calls=lambda: calls)
    for outcome in comparison.outcomes:
        assert outcome.result[name].tenants == len(named)


# -- P106: a Decimal time past an exponent of 10,000 is refused at once -----------

decimal_times = decimals_about_the_bound


def _file(seconds: Decimal) -> object:
    """A scenario file's data (TOML read with ``parse_float=Decimal``) of ``seconds``."""
    workload = {"name": "w", "level": 0, "arrivals": "batch", "size": 1}
    return load_scenarios(
        {"scenario": [{"name": "s", "rate": 1, "seconds": seconds, "workload": [workload]}]}
    )


_ONE = Scenario("s", Fifo(1), 1, 1, [Workload("w", 0, Batch(1))])

#: Each place the simulator takes a time in seconds (and a scale factor,
#: bounded as a rate), by the argument its refusal names.
TIMES: dict[str, Callable[[Decimal], object]] = {
    "seconds": lambda s: Scenario("s", Fifo(1), 1, s, [Workload("w", 0, Batch(1))]),
    "at": lambda s: Batch(1, s),
    "start": lambda s: Constant(1, s),
    "stop": lambda s: Constant(1, 0, s),
    "timeout": lambda s: Workload("w", 0, Batch(1), s),
    "give_up_after": lambda s: Workload("w", 0, Batch(1), give_up_after=s),
    "max_wait": lambda s: Workload("w", 0, Batch(1), max_wait=s),
    "value": lambda s: nanoseconds("value", s),
    "policy.after": lambda s: load_policy({"kind": "aging", "after": s}, 2),
    "scenario[0].seconds": _file,
    "factor": lambda s: _ONE.scaled(s),
}


@given(seconds=decimal_times(), argument=st.sampled_from(sorted(TIMES)))
@example(seconds=Decimal("1e-999999999"), argument="seconds")
@example(seconds=Decimal("1e999999999"), argument="timeout")
@example(seconds=Decimal("1e10001"), argument="at")
@example(seconds=Decimal("9.9e10000"), argument="at")
@example(seconds=Decimal("1e-10001"), argument="policy.after")
@example(seconds=Decimal("1e-10000"), argument="at")
def test_a_decimal_time_past_an_exponent_of_10000_is_refused_at_once(
    seconds: Decimal, argument: str
) -> None:
    """P106: a Decimal time whose exponent of ten is past 10,000 either way
    (``1e999999999``: its exact fraction did not return) is refused within
    a second, with a PermitValueError naming the argument and the value and
    saying the bound and what to write, wherever the simulator takes one
    (a scenario, its arrivals, a workload, an aging policy, a scenario
    file's data; a scale factor as a rate, P97). One within is read
    exactly: taken, or refused by another rule (a run past 1e308 s)."""
    inside = abs(seconds.adjusted()) <= EXPONENT
    began = time.perf_counter()
    try:
        TIMES[argument](seconds)
    except PermitValueError as error:
        refused: PermitValueError | None = error
    else:
        refused = None
    took = time.perf_counter() - began
    reason = (
        f"its exponent of ten must be from -{EXPONENT} to {EXPONENT}"
        if argument == "factor"
        else SECONDS_EXPONENT
    )
    if inside:
        assert refused is None or reason not in str(refused), ("P106", argument, refused)
        return
    assert refused is not None, ("P106", argument, "taken")
    assert took < 30, (
        "P106",
        argument,
        took,
    )  # (a hang guard, room for a loaded host: it did not return at all)
    assert (refused.argument, refused.value) == (argument, seconds), "P106"
    assert str(refused) == f"{argument}={seconds!r}: {reason}", "P106"


# -- P107: every flow a trace writes reads back as itself -----------------------


@given(
    flows=st.lists(
        st.none()
        | st.sampled_from(["", "'", "''", "'''", "''a", "a", "acme"])
        | st.text(max_size=6)
        | st.integers(0, 99),
        max_size=12,
    ),
    levels=st.lists(st.integers(0, 1), min_size=12, max_size=12),
)
@example(flows=["", None, "acme", "", "''"], levels=[0] * 12)
def test_every_flow_a_trace_writes_reads_back_as_itself(
    flows: list[object], levels: list[int]
) -> None:
    """P107: the calls ``trace_lines`` writes read back (``read_trace``)
    with each flow as its str, the empty string and names of apostrophes
    alone included (an empty cell is no flow: the empty string is written
    ``''``, and a name of apostrophes alone with two more), and replay as
    the calls written do; none is refused (the empty string was)."""
    if sys.version_info < (3, 11) and any("\0" in str(f) for f in flows):
        return  # (Python 3.10's csv can neither write nor read a NUL)
    calls = [Call(i * SECOND // 4, levels[i], flow=flow) for i, flow in enumerate(flows)]
    named = [c._replace(flow=None if c.flow is None else str(c.flow)) for c in calls]
    back = [c._replace(line=0) for c in read_trace(list(trace_lines(calls)))]
    assert back == named, "P107"
    scenario = Scenario(
        "flows",
        StrictPriority(2),
        2,
        4,
        [Workload("urgent", 0, Batch(0)), Workload("batch", 1, Batch(0))],
    )
    assert replay(scenario, back) == replay(scenario, named), "P107"
