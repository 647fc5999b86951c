"""The simulator: its figures against the rules, derived by hand, and its accounting.

Each seed scenario's figures are worked out here from the limit and the
policy's rule alone (closed forms over the permit slots, which fall every
10 ms from time zero at 100 permits/s), never copied from the output.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any, TypeVar

import attrs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from permits.core import (
    MILLISECOND,
    RELATIVE_ERROR,
    SECOND,
    Aging,
    Decision,
    Fifo,
    Limit,
    Machine,
    PermitTypeError,
    PermitValueError,
    Shares,
    State,
    StrictPriority,
)
from permits.sim import (
    BINS,
    MAX_TENANTS,
    SEED,
    Batch,
    Call,
    Choice,
    Constant,
    Poisson,
    Result,
    Scenario,
    Tenants,
    Uniform,
    Workload,
    WorkloadResult,
    check_arrivals,
    compare,
    describe,
    load_policy,
    nanoseconds,
    replay,
    simulate,
)
from permits.sim import arrivals as arrivals_before
from permits.sim._run import _generated, _run

SLOT = 10 * MILLISECOND  # 100 permits/s, burst 1: permit k falls due at k * SLOT
SLOTS = 1_000  # permits in [0 s, 10 s)
START = 5 * MILLISECOND  # the first interactive arrival


def interactive_arrival(j: int, load: int) -> int:
    """The j-th interactive call at ``load`` per second: 5 ms + j / load s."""
    return START + j * SECOND // load


def next_slot(t: int) -> int:
    """The first permit strictly after ``t``: arrivals never fall on a slot
    here (5 ms + j/20 s and 5 ms + j/90 s are never multiples of 10 ms), and
    a newcomer at a slot would not get it anyway (the tick comes first)."""
    assert t % SLOT
    return t + (-t % SLOT)


_Wait = TypeVar("_Wait", int, float)


def nearest_rank(waits: Sequence[_Wait], q: float | Fraction) -> _Wait:
    """The nearest-rank ``q``-quantile of ``waits``, naively."""
    ordered = sorted(waits)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def assert_waits(got: WorkloadResult, waits: list[int]) -> None:
    """Counts exact; the maximum exact; quantiles within the histogram's error."""
    assert got.granted == len(waits)
    assert got.wait_max_ns == max(waits)
    for q, value in ((0.5, got.wait_p50_ns), (0.99, got.wait_p99_ns)):
        want = nearest_rank(waits, q)
        assert value is not None
        assert abs(value - want) <= want * RELATIVE_ERROR, (q, value, want)


def conserved(result: Result) -> None:
    for w in result.workloads:
        ends = w.granted + w.waiting + w.cancelled + w.rejected + w.too_long + w.expired
        assert w.offered == ends, w


def test_fifo_20() -> None:
    """The batch of 1,000 was first in line: it takes all 1,000 permits of
    [0, 10 s); none of the 200 interactive calls gets one."""
    result = simulate(SEED[0])
    batch, user = result["batch"], result["interactive"]
    assert_waits(batch, [k * SLOT for k in range(SLOTS)])
    assert batch.cleared_at_ns == (SLOTS - 1) * SLOT
    assert user.offered == 200  # 5 ms + j * 50 ms < 10 s
    assert (user.granted, user.waiting) == (0, 200)
    conserved(result)


def test_strict_20() -> None:
    """Every interactive call overtakes the batch and takes the next permit,
    5 ms after it arrives; the batch gets the other 800 permits."""
    result = simulate(SEED[1])
    user = result["interactive"]
    waits = [next_slot(a) - a for a in (interactive_arrival(j, 20) for j in range(200))]
    assert set(waits) == {5 * MILLISECOND}
    assert_waits(user, waits)
    assert result["batch"].granted == SLOTS - 200
    assert result["batch"].share == pytest.approx(0.8)
    conserved(result)


def test_strict_90() -> None:
    """At 90/s the calls are 11.1 ms apart, more than a slot, so each takes the
    first permit after it arrives; the batch gets the slots left over."""
    result = simulate(SEED[2])
    arrivals = [interactive_arrival(j, 90) for j in range(900)]
    served = [a for a in arrivals if next_slot(a) < SLOTS * SLOT]
    assert_waits(result["interactive"], [next_slot(a) - a for a in served])
    assert result["interactive"].waiting == 900 - len(served)
    assert result["batch"].granted == SLOTS - len(served)
    conserved(result)


def test_every_5th_90() -> None:
    """Shares 4:1 gives slot k to the batch when k % 5 == 4, and slot 0 too
    (nobody else waits at time zero); the interactive calls, arriving faster
    (90/s) than they are served (80/s), are always waiting at theirs, so the
    j-th takes slot j + 1 + (j + 1) // 4."""
    result = simulate(SEED[3])
    slots = [j + 1 + (j + 1) // 4 for j in range(900)]
    assert all(interactive_arrival(j, 90) < slots[j] * SLOT for j in range(900))
    waits = [k * SLOT - interactive_arrival(j, 90) for j, k in enumerate(slots) if k < SLOTS]
    assert_waits(result["interactive"], waits)
    assert result["batch"].granted == 1 + SLOTS // 5
    conserved(result)


def test_aging_90() -> None:
    """Aging after 2 s orders by level * 2 s + arrival: the batch (key 2 s)
    yields to the interactive calls that arrive before 2 s and outranks those
    after. Up to the permit at 2.0 s the calls j < 180 each take the first
    permit after them and the batch the other 21 of slots 0..200; the batch
    then takes slots 201..479 (cleared at 4.79 s); the calls j >= 180 follow
    in order, the j-th at slot j + 300."""
    result = simulate(SEED[4])
    early = [interactive_arrival(j, 90) for j in range(180)]
    assert next_slot(early[-1]) == 2 * SECOND < interactive_arrival(180, 90)
    batch = result["batch"]
    assert batch.granted == 300
    assert batch.cleared_at_ns == 479 * SLOT
    late = [(j + 300) * SLOT - interactive_arrival(j, 90) for j in range(180, SLOTS - 300)]
    assert_waits(result["interactive"], [next_slot(a) - a for a in early] + late)
    assert result["interactive"].wait_max_ns == 4_800 * MILLISECOND - interactive_arrival(180, 90)
    conserved(result)


def test_deterministic() -> None:
    """P56: a run is a function of its scenario: the same result each time,
    another for another seed."""
    scenario = Scenario(
        "poisson",
        StrictPriority(2),
        rate=50,
        seconds=20,
        seed=7,
        workloads=[
            Workload("users", 0, Poisson(30), give_up_after=0.2),
            Workload("jobs", 1, Poisson(40), timeout=1.5),
        ],
    )
    assert simulate(scenario) == simulate(scenario)
    # the figures, not the result: a result holds its scenario, and so its seed
    assert simulate(scenario).workloads != simulate(attrs.evolve(scenario, seed=8)).workloads


def test_poisson_rate_and_independent_streams() -> None:
    scenario = Scenario(
        "p",
        Fifo(2),
        rate=1_000,
        seconds=100,
        workloads=[Workload("a", 0, Poisson(50)), Workload("b", 1, Poisson(50))],
    )
    a, b = simulate(scenario).workloads
    for w in (a, b):  # 5,000 expected each: 3 sigma is about 212
        assert abs(w.offered - 5_000) < 3 * math.sqrt(5_000), w.offered
    assert a.offered != b.offered  # not the same stream twice


def test_a_seed_fixes_the_poisson_arrivals_everywhere() -> None:
    """P56: A scenario's seed fixes its Poisson arrivals on every platform and
    Python version (the gaps are drawn by splitmix64, each rounded down to
    the nanosecond): these times, once and for all. (A draw rounded to the
    nearest nanosecond, or another generator, moves them.)"""
    times = list(itertools.islice(Poisson(10).times(7), 6))
    assert times == [49401725, 51094806, 282116903, 369567093, 429795762, 458488200]
    from_one = list(itertools.islice(Poisson(10, start=1).times(0), 3))
    assert from_one == [1214824135, 1271304456, 1273983398]


def test_arrivals_are_those_before_the_end() -> None:
    """P58: ``arrivals`` (what the live runner paces its callers by) gives every
    arrival before the run's end and none at it, as a run offers them: one
    a second for 10 s arrives 10 times, the last at 9 s."""
    workload = Workload("w", 0, Constant(1))
    scenario = Scenario("s", Fifo(1), rate=1, seconds=10, workloads=[workload])
    got = list(arrivals_before(scenario, 10 * SECOND))
    assert got == [(k * SECOND, 0) for k in range(10)]
    assert simulate(scenario)["w"].offered == 10


def test_a_grant_due_at_the_end_is_not_counted() -> None:
    """P58: a run counts what happens in ``[0, seconds)``: a backlog of 20
    at one a second (burst 1) for 10 s is granted at 0, 1, ..., 9 s, ten
    permits; the eleventh, due at 10 s, is the run's end, not in it."""
    workload = Workload("w", 0, Batch(20))
    result = simulate(Scenario("s", Fifo(1), rate=1, seconds=10, workloads=[workload]))
    assert (result["w"].granted, result["w"].waiting) == (10, 10)
    assert result["w"].wait_max_ns == 9 * SECOND


@pytest.mark.parametrize(
    "arrivals",
    [
        Constant(20),
        Constant(4, start=0.25),
        Constant(3, start=0.1),
        Constant(Fraction(7, 3), start=Fraction(1, 3), stop=1.7),
        Constant(0.5, stop=4),
        Constant(1e-3),
        Constant(1000, start=0.0005),
    ],
    ids=repr,
)
def test_a_constant_stream_asks_for_exactly_the_callers_it_brings(arrivals: Constant) -> None:
    """A run that asks for ``max_arrivals`` callers exactly is not refused: a
    constant stream's count before the end is whole (its i-th caller is at
    ``start + i / rate`` rounded down, before the end exactly when ``i <
    rate * (end - start)``), not one more "for rounding" (a scenario of
    1,200 callers was refused under ``--max-arrivals 1200``, saying 1,201)."""
    scenario = Scenario("s", Fifo(1), rate=1, seconds=10, workloads=[Workload("w", 0, arrivals)])
    brought = sum(1 for _ in arrivals_before(scenario, 10 * SECOND))
    assert arrivals.asked(10 * SECOND) == brought
    assert check_arrivals(scenario, brought) == brought
    with pytest.raises(PermitValueError):
        check_arrivals(scenario, brought - 1)


def test_seconds_are_the_nearest_nanosecond_ties_to_even() -> None:
    """P58: A scenario's seconds become the nearest whole nanosecond, ties to
    even (not truncated): 2/3 s is 666,666,667 ns, 2.5 ns is 2 and 3.5 ns
    is 4; and a run keeps them so: a caller with a timeout of 2/3 s, behind
    one granted at 0 under one permit a second, expires at 666,666,667 ns."""
    assert nanoseconds("timeout", Fraction(2, 3)) == 666_666_667
    assert nanoseconds("timeout", Fraction(1, 3)) == 333_333_333
    assert nanoseconds("timeout", Fraction(5, 2 * SECOND)) == 2
    assert nanoseconds("timeout", Fraction(7, 2 * SECOND)) == 4
    workload = Workload("w", 0, Batch(2), timeout=Fraction(2, 3))
    result = simulate(Scenario("s", Fifo(1), rate=1, seconds=10, workloads=[workload]))["w"]
    assert (result.granted, result.expired) == (1, 1)
    assert result.cleared_at_ns == 666_666_667


@pytest.mark.parametrize("rate", [1e-300, 5e-324, Fraction(1, 10**400)])
def test_poisson_arrivals_too_rare_for_a_float_gap_arrive_past_the_run(rate: object) -> None:
    """A mean gap of 1e309 ns or more is past a float: it overflowed
    (OverflowError) or divided by zero; drawn exactly, no caller arrives."""
    workload = Workload("rare", 0, Poisson(rate))  # type: ignore[arg-type]
    scenario = Scenario("p", Fifo(1), rate=1, seconds=10**6, workloads=[workload])
    assert simulate(scenario)["rare"].offered == 0
    first, second = itertools.islice(Poisson(1e-300).times(0), 2)
    assert 10**300 < first < second  # ns: the exact gaps, about 1e309 each


def test_give_ups_cancel_and_timeouts_expire() -> None:
    """Behind a FIFO batch of 100 at 10/s, a caller waits about 10 s: those
    that give up after 1 s all cancel, those with a 2 s timeout all expire."""
    scenario = Scenario(
        "patience",
        Fifo(3),
        rate=10,
        seconds=8,
        workloads=[
            Workload("batch", 2, Batch(100)),
            Workload("impatient", 0, Constant(2, start=0.05), give_up_after=1),
            Workload("bounded", 1, Constant(2, start=0.05), timeout=2),
        ],
    )
    result = simulate(scenario)
    impatient, bounded = result["impatient"], result["bounded"]
    assert impatient.granted == bounded.granted == 0
    # arrivals at 0.05 + j/2 s < 8 s: 16; gave up 1 s later (before 8 s): 14
    assert (impatient.offered, impatient.cancelled, impatient.waiting) == (16, 14, 2)
    assert (bounded.offered, bounded.expired, bounded.waiting) == (16, 12, 4)
    assert impatient.cleared_at_ns is None
    conserved(result)


def test_a_timeout_of_0_takes_only_a_permit_free_on_arrival() -> None:
    """``timeout=0`` is ``acquire(timeout=0)``: "do not wait". At 10/s,
    burst 2, a batch of 5 at 0 s and one of 3 at 0.25 s: the first takes
    the burst and the rest expire at once; the second finds the two
    permits refilled since, and its third expires. Nobody is left
    waiting, and nobody else waits behind them."""
    scenario = Scenario(
        "try",
        Fifo(2),
        rate=10,
        seconds=1,
        burst=2,
        workloads=[
            Workload("first", 0, Batch(5), timeout=0),
            Workload("second", 0, Batch(3, at=0.25), timeout=0),
            Workload("later", 1, Batch(1, at=0.5)),
        ],
    )
    result = simulate(scenario)
    first, second, later = result["first"], result["second"], result["later"]
    assert (first.granted, first.expired, first.waiting) == (2, 3, 0)
    assert (second.granted, second.expired, second.waiting) == (2, 1, 0)
    assert (later.granted, later.wait_max_ns) == (1, 0)
    conserved(result)
    # a give-up after 0 s would have every caller leave as it came: refused,
    # pointing here
    with pytest.raises(PermitValueError, match=r"^give_up_after=0\.0: .* timeout=0$"):
        Workload("never", 0, Batch(1), give_up_after=0.0)


def test_a_caller_behind_one_that_gives_up_is_granted_when_it_gives_up() -> None:
    """1 permit/s, burst 3, FIFO: ``a`` takes the 3 units at time zero; ``b``
    asks for 3 and gives up at 1.5 s; ``c``, behind it, asks for 1, there
    since 1 s. ``c`` is granted at 1.5 s, when ``b`` leaves, not at 1 s
    while ``b`` still stood before it; so also in a replay of the same calls."""
    workloads = [
        Workload("a", 0, Batch(1), cost=3),
        Workload("b", 0, Batch(1), cost=3, give_up_after=1.5),
        Workload("c", 0, Batch(1)),
    ]
    scenario = Scenario("gives up", Fifo(1), 1, 10, workloads, burst=3)
    calls = [Call(0, 0, cost=3), Call(0, 0, cost=3, give_up_after_ns=3 * SECOND // 2), Call(0, 0)]
    got = simulate(scenario)["c"]
    assert (got.granted, got.wait_max_ns, got.cleared_at_ns) == (1, 1_500_000_000, 1_500_000_000)
    replayed = replay(scenario, calls)["a"]  # a replay's calls of level 0 count as "a"
    assert (replayed.granted, replayed.cancelled, replayed.wait_max_ns) == (2, 1, 1_500_000_000)
    assert replayed.cleared_at_ns == 1_500_000_000


def test_queue_limit_rejects() -> None:
    scenario = Scenario(
        "full",
        StrictPriority(2),
        rate=1,
        seconds=1,
        max_waiting=(None, 10),
        workloads=[Workload("batch", 1, Batch(25))],
    )
    batch = simulate(scenario)["batch"]
    # the first is granted at once (a full bucket), 10 wait, 14 are rejected
    assert (batch.granted, batch.waiting, batch.rejected) == (1, 10, 14)
    assert batch.too_long == 0  # none for a max_wait: it has none


def test_max_wait_refuses_on_arrival_what_would_wait_longer() -> None:
    """``max_wait`` is ``acquire(max_wait=...)``: a caller the limiter
    expects to wait longer is refused at once (the core's ``TOO_LONG``),
    counted as too long, not as rejected (as the core's statistics count
    it), and never queued, so it delays
    nobody. At 10/s, burst 1, a batch of 10 with
    ``max_wait = 0.35``: waits of 0, 0.1, 0.2 and 0.3 s are taken, the six
    behind them refused; a later caller with a bound of 0 takes a permit
    only if one is free when it comes."""
    scenario = Scenario(
        "bounded",
        Fifo(2),
        rate=10,
        seconds=2,
        workloads=[
            Workload("batch", 1, Batch(10), max_wait=0.35),
            Workload("now or never", 0, Batch(2, at=0.32), max_wait=0),
            Workload("later", 0, Batch(1, at=1), max_wait=0),
        ],
    )
    result = simulate(scenario)
    batch, now, later = result["batch"], result["now or never"], result["later"]
    assert (batch.offered, batch.granted, batch.too_long, batch.waiting) == (10, 4, 6, 0)
    assert (batch.rejected, now.rejected, later.rejected) == (0, 0, 0)
    assert (now.too_long, later.too_long) == (2, 0)
    assert batch.wait_max_ns == 300 * MILLISECOND
    # at 0.32 s the permit of 0.3 s is gone, the next falls due at 0.4 s;
    # nobody of it waits from then on: cleared then
    assert (now.granted, now.too_long, now.cleared_at_ns) == (0, 2, 320 * MILLISECOND)
    assert (later.granted, later.too_long, later.wait_max_ns) == (1, 0, 0)
    conserved(result)
    assert simulate(scenario.scaled(Fraction(1, 2)))["batch"].granted == 4  # bound scales too


def test_the_figures_in_seconds_are_those_in_nanoseconds() -> None:
    """Each ``_s`` property of a workload's result is its ``_ns`` field in
    seconds, and ``None`` where the field is: no caller granted, a backlog
    not cleared. At 1 permit/s under strict priority the export takes the
    permit of time zero; the two api callers of 0.5 s take those of 1 and
    2 s (waits of 0.5 and 1.5 s, cleared at 2 s); the late caller, behind
    the export's four, gets none within the 3 s."""
    scenario = Scenario(
        "units",
        StrictPriority(2),
        rate=1,
        seconds=3,
        workloads=[
            Workload("api", 0, Batch(2, at=0.5), flow="acme"),
            Workload("export", 1, Batch(5)),
            Workload("late", 1, Batch(1, at=0.1)),
        ],
    )
    result = simulate(scenario)
    api, late = result["api"], result["late"]
    assert (api.wait_max_s, api.cleared_at_s) == (1.5, 2.0)  # (the quantiles: within 1/256)
    assert api.tenant_wait_p99_max_s is not None
    assert late.granted == 0
    names = ["wait_p50", "wait_p99", "wait_max", "cleared_at"]
    assert [getattr(late, f"{name}_s") for name in names] == [None] * 4
    assert (late.tenant_wait_p99_max_s, late.tenant_wait_p99_median_s) == (None, None)
    names += ["tenant_wait_p99_max", "tenant_wait_p99_median"]
    for w in result.workloads:
        for name in names:
            ns = getattr(w, f"{name}_ns")
            assert getattr(w, f"{name}_s") == (None if ns is None else ns / SECOND), (w.name, name)


def test_scaled_keeps_counts_and_divides_waits() -> None:
    for scenario in SEED:
        base, fast = simulate(scenario), simulate(scenario.scaled(5))
        for slow, quick in zip(base.workloads, fast.workloads, strict=True):
            assert (slow.offered, slow.granted, slow.waiting) == (
                quick.offered,
                quick.granted,
                quick.waiting,
            )
            if slow.wait_max_ns is not None:
                assert quick.wait_max_ns is not None
                assert abs(quick.wait_max_ns * 5 - slow.wait_max_ns) <= 5 * 5  # ns rounding
    assert SEED[4].scaled(5).policy == Aging(2, after_ns=400 * MILLISECOND)


@pytest.mark.parametrize(
    ("make", "argument"),
    [
        (lambda: Batch(-1), "size"),
        (lambda: Batch(3, at=-0.5), "at"),
        (lambda: Constant(0), "rate"),
        (lambda: Constant(-5), "rate"),
        (lambda: Poisson(float("nan")), "rate"),
        (lambda: Constant(5, stop=0), "stop"),
        (lambda: Workload("", 0, Batch(1)), "name"),
        (lambda: Workload("w", -1, Batch(1)), "level"),
        (lambda: Workload("w", 0, Batch(1), timeout=-1), "timeout"),
        (lambda: Workload("w", 0, Batch(1), give_up_after=0), "give_up_after"),
        (lambda: Scenario("s", Fifo(2), 0, 10, [Workload("w", 0, Batch(1))]), "rate"),
        (lambda: Scenario("s", Fifo(2), 10, 0, [Workload("w", 0, Batch(1))]), "seconds"),
        (lambda: Scenario("s", Fifo(2), 10, 1, []), "workloads"),
        (lambda: Scenario("s", Fifo(2), 10, 1, [Workload("w", 2, Batch(1))]), "workloads[0].level"),
        (
            lambda: Scenario("s", Fifo(2), 10, 1, [Workload("w", 0, Batch(1))] * 2),
            "workloads[1].name",
        ),
        (
            lambda: Scenario("s", Fifo(2), 10, 1, [Workload("w", 0, Batch(1))], burst=0),
            "burst",
        ),
        (
            lambda: Scenario("s", Fifo(2), 10, 1, [Workload("w", 0, Batch(1))], max_waiting=(1,)),
            "max_waiting",
        ),
        (lambda: Batch(3, at="0"), "at"),  # type: ignore[arg-type]
        (lambda: Batch(3, at=True), "at"),
        (lambda: Constant(5, stop=float("inf")), "stop"),
        (lambda: Poisson(Decimal("NaN")), "rate"),
        (lambda: Workload(7, 0, Batch(1)), "name"),  # type: ignore[arg-type]
        (lambda: Workload("w", 0, [1, 2]), "arrivals"),  # type: ignore[arg-type]
        (lambda: Scenario("", Fifo(2), 10, 1, [Workload("w", 0, Batch(1))]), "name"),
        (lambda: Scenario("s", "fifo", 10, 1, [Workload("w", 0, Batch(1))]), "policy"),  # type: ignore[arg-type]
        (lambda: Scenario("s", Fifo(2), 10, 1, ["w"]), "workloads[0]"),  # type: ignore[list-item]
        (
            lambda: Scenario("s", Fifo(2), 10, 1, [Workload("w", 0, Batch(1))]).scaled(Fraction(0)),
            "factor",
        ),
        # a scenario's name (or anything but a Scenario) was an AttributeError
        (lambda: simulate("seed"), "scenario"),  # type: ignore[arg-type]
        (lambda: replay("seed", []), "scenario"),  # type: ignore[arg-type]
        (lambda: compare("seed"), "scenario"),  # type: ignore[arg-type]
        (lambda: check_arrivals(None), "scenario"),  # type: ignore[arg-type]
    ],
)
def test_bad_arguments_name_themselves(make: Callable[[], object], argument: str) -> None:
    with pytest.raises((PermitValueError, PermitTypeError)) as error:
        make()
    assert isinstance(error.value, (PermitValueError, PermitTypeError))
    assert error.value.argument == argument
    assert str(error.value).startswith(f"{argument}=")


@pytest.mark.parametrize("policy", [5, "fifo", None, Fifo])
def test_describe_refuses_what_is_no_policy(policy: object) -> None:
    """``describe`` names a policy; anything else (a number, a policy's
    name, its class) is refused as a ``PermitTypeError`` naming
    ``policy``, not described by its ``repr``."""
    with pytest.raises(PermitTypeError, match=f"^policy={policy!r}: expected") as refused:
        describe(policy)  # type: ignore[arg-type]
    assert (refused.value.argument, refused.value.value) == ("policy", policy)
    assert describe(Fifo(2)) == "FIFO"


@pytest.mark.parametrize(
    ("make", "argument"),
    [
        (lambda: Scenario("s", Fifo(1), 10, 1e-10, [Workload("w", 0, Batch(1))]), "seconds"),
        (  # exactly half a nanosecond: 0 ns, ties to even
            lambda: Scenario(
                "s", Fifo(1), 10, Fraction(1, 2 * 10**9), [Workload("w", 0, Batch(1))]
            ),
            "seconds",
        ),
        (lambda: Workload("w", 0, Batch(1), timeout=Fraction(1, 10**10)), "timeout"),
        (lambda: Workload("w", 0, Batch(1), give_up_after=1e-10), "give_up_after"),
        (lambda: load_policy({"kind": "aging", "after": 1e-10}, 2), "policy.after"),
        (
            lambda: Scenario("s", Fifo(1), 10, 1, [Workload("w", 0, Batch(1))]).scaled(10**12),
            "seconds",
        ),
    ],
)
def test_a_time_above_0_that_is_no_whole_nanosecond_says_so(
    make: Callable[[], object], argument: str
) -> None:
    """A time greater than 0 that rounds to no nanosecond is refused saying
    so, not as "must be greater than 0", which it is (``demo --scale 1e12``
    said that of seconds=Fraction(1, 1000000000000))."""
    with pytest.raises(PermitValueError) as error:
        make()
    assert error.value.argument == argument
    assert str(error.value).endswith(
        ": is half a nanosecond or less, and times are whole nanoseconds "
        "(the nearest, ties to even): give 1e-09 s or more"
    ), str(error.value)


arrivals = st.one_of(
    st.builds(Batch, st.integers(0, 40), st.sampled_from([0, 0.25, 1])),
    st.builds(Constant, st.sampled_from([1, 7, 20, 55.5]), st.sampled_from([0, 0.003])),
    st.builds(Poisson, st.sampled_from([2, 15, 60])),
)


def workloads_of(
    arrivals: st.SearchStrategy[object], **more: st.SearchStrategy[object]
) -> st.SearchStrategy[Workload]:
    """Workloads of ``arrivals`` at any of three levels, with or without a
    give-up and a timeout, and ``more`` of their fields drawn."""
    return st.builds(
        Workload,
        name=st.just("w"),
        level=st.integers(0, 2),
        arrivals=arrivals,
        give_up_after=st.sampled_from([None, 0.05, 0.1, 0.4]),
        timeout=st.sampled_from([None, 0, 0.05, 0.1, 0.7]),
        **more,
    )


workloads = workloads_of(arrivals)
policies = st.sampled_from(
    [Fifo(3), StrictPriority(3), Shares((3, 2, 1)), Aging(3, after_ns=SECOND // 4)]
)


def test_draws_stay_within_their_bounds_and_the_heaviest_tenant_gets_its_share() -> None:
    """A uniform cost takes every value of its bounds and no other; a choice
    only its values; a tenant generator names tenants 1 to count, the
    heaviest its fraction of the callers, and under Zipf the first most."""
    workload = Workload(
        "w",
        0,
        Batch(1),
        cost={"a": Uniform(2, 5), "b": Choice([7, 9]), "c": 3},
        tenants=Tenants(10, heaviest=0.5),
    )
    callers = list(itertools.islice(workload.callers(("b", "c", "a", "d"), seed=1), 4000))
    costs = [cost for cost, _ in callers]
    assert {c[0] for c in costs} == {7, 9}  # type: ignore[index]
    assert {c[1] for c in costs} == {3}  # type: ignore[index]
    assert {c[2] for c in costs} == {2, 3, 4, 5}  # type: ignore[index]
    assert {c[3] for c in costs} == {0}  # type: ignore[index]  # a limit it does not name
    flows = Counter(flow for _, flow in callers)
    assert set(flows) == {f"w#{k}" for k in range(1, 11)}
    assert 1900 < flows["w#1"] < 2100, flows
    zipf = Workload("z", 0, Batch(1), cost=Uniform(1, 1), tenants=Tenants(100, zipf=1.0))
    picked = Counter(flow for _, flow in itertools.islice(zipf.callers(("units",), seed=2), 20_000))
    assert picked.most_common(1)[0][0] == "z#1"
    assert picked["z#1"] > 2 * picked["z#2"] > picked["z#10"]
    assert {cost for cost, _ in itertools.islice(zipf.callers(("units",), 3), 50)} == {1}


def test_the_steepest_zipf_over_the_most_tenants_picks_the_first() -> None:
    """zipf = 100.0 (a float, the most allowed) over 100,000 tenants: k ** 100.0
    is past a float from k = 1,200 on, which raised OverflowError; those
    tenants weigh nothing, and tenant 1 is picked nearly always."""
    tenants = Tenants(MAX_TENANTS, zipf=100.0)
    assert set(itertools.islice(tenants.picks(seed=1), 1000)) == {0}
    scenario = Scenario(
        "z", Fifo(1), rate=10, seconds=1, workloads=[Workload("z", 0, Batch(5), tenants=tenants)]
    )
    assert simulate(scenario)["z"].tenants == 1


@pytest.mark.parametrize(
    ("make", "argument"),
    [
        (lambda: Uniform(5, 2), "high"),
        (lambda: Choice([]), "values"),
        (lambda: Choice(3), "values"),
        (lambda: Tenants(0), "count"),
        (lambda: Tenants(2, zipf=float("nan")), "zipf"),
        (lambda: Tenants(2, zipf=1, heaviest=0.5), "heaviest"),
        (lambda: Workload("w", 0, Batch(1), cost=0), "cost"),
        (lambda: Workload("w", 0, Batch(1), cost=True), "cost"),
        (lambda: Workload("w", 0, Batch(1), cost={"a": -1}), "cost['a']"),  # named by its entry
        (lambda: Workload("w", 0, Batch(1), flow=""), "flow"),
        (lambda: Workload("w", 0, Batch(1), fair=0), "fair"),  # type: ignore[arg-type]
        (lambda: Workload("w", 0, Batch(1), flow="a", tenants=Tenants(2)), "tenants"),
        (lambda: Scenario("s", Fifo(1), None, 1, [Workload("w", 0, Batch(1))]), "rate"),
        (
            lambda: Scenario(
                "s", Fifo(1), 5, 1, [Workload("w", 0, Batch(1))], limits={"a": Limit(1, 1)}
            ),
            "limits",
        ),
        (
            lambda: Scenario(
                "s",
                Fifo(1),
                None,
                1,
                [Workload("w", 0, Batch(1), cost={"b": 1})],
                limits={"a": Limit(1)},
            ),
            "workloads[0].cost",
        ),
        (
            lambda: Scenario(
                "s",
                Fifo(1),
                None,
                1,
                [Workload("w", 0, Batch(1), cost=Choice([1, 3]))],
                limits={"a": Limit(1, 2)},
            ),
            "workloads[0].cost",
        ),
    ],
)
def test_bad_costs_limits_and_tenants_name_themselves(
    make: Callable[[], object], argument: str
) -> None:
    with pytest.raises((PermitValueError, PermitTypeError)) as error:
        make()
    assert isinstance(error.value, (PermitValueError, PermitTypeError))
    assert error.value.argument == argument


def test_a_scenarios_bad_arguments_are_refused_in_words() -> None:
    """A scenario's bad argument is refused as a machine's is, naming the
    argument and the value and saying what to give: a policy class (not
    an instance) as the machine says it (it raised a raw ``TypeError``
    comparing a level with a descriptor), one workload not in a list (a
    raw "not iterable"), and a bad entry of a cost, a choice or
    ``max_waiting`` by its entry, not the whole argument, as the core
    names them."""
    one = [Workload("w", 0, Batch(1))]
    tokens = {"tokens": Limit(10, 10)}
    bads: list[tuple[Callable[[], object], str]] = [
        (
            lambda: Scenario("s", Fifo, 5, 1, one),  # type: ignore[arg-type]
            "policy=<class 'permits.core._policies.Fifo'>: expected a policy instance: "
            "pass Fifo(...), not the class, got type",
        ),
        (
            lambda: Scenario("s", Fifo(), 5, 1, one[0]),  # type: ignore[arg-type]
            f"workloads={one[0]!r}: expected a sequence of Workloads (a list: [Workload(...)]), "
            "got Workload",
        ),
        (
            lambda: Scenario("s", Fifo(2), 5, 1, one, max_waiting=(1, -1)),
            "max_waiting[1]=-1: must be at least 0",
        ),
        (lambda: Choice([1, -1]), "values[1]=-1: must be at least 0"),
        (
            lambda: Workload("w", 0, Batch(1), cost={"tokens": -1}),
            "cost['tokens']=-1: must be at least 0",
        ),
        (
            lambda: Scenario(
                "s",
                Fifo(),
                None,
                1,
                [Workload("w", 0, Batch(1), cost={"tokens": 11})],
                limits=tokens,
            ),
            "workloads[0].cost['tokens']=11: exceeds the burst (10): such a caller could never be "
            "granted",
        ),
        (
            lambda: Scenario("s", Fifo(), 5, 1, [Workload("w", 0, Batch(1), cost=2)]),
            "workloads[0].cost=2: exceeds the burst (1): such a caller could never be granted",
        ),
        # an empty name: not "expected a non-empty str, got str"
        (lambda: Workload("", 0, Batch(1)), "name='': expected a non-empty str, got an empty str"),
        (
            lambda: Scenario("", Fifo(), 5, 1, [Workload("w", 0, Batch(1))]),
            "name='': expected a non-empty str, got an empty str",
        ),
    ]
    for make, words in bads:
        with pytest.raises((PermitValueError, PermitTypeError)) as error:
            make()
        assert str(error.value) == words
        assert isinstance(error.value, (PermitValueError, PermitTypeError))
        assert words.startswith(f"{error.value.argument}=")


def test_the_simulators_helpers_refuse_bad_arguments_by_name() -> None:
    """``arrivals`` and ``default_grid`` refuse a bad argument naming it,
    as ``simulate`` does: they raised a raw ``TypeError`` or
    ``AttributeError``, or took a float or a bool for an int (``arrivals``
    of 1.5 ns; ``default_grid(True)``, one level)."""
    from permits.sim import default_grid

    scenario = Scenario("s", Fifo(), 10, 1, [Workload("w", 0, Batch(1))])
    bads: list[tuple[Callable[[], object], str]] = [
        (lambda: list(arrivals_before(scenario, "1")), "duration_ns='1': expected an int of"),  # type: ignore[arg-type]
        (lambda: list(arrivals_before(scenario, 1.5)), "duration_ns=1.5: expected an int of"),  # type: ignore[arg-type]
        (lambda: list(arrivals_before(scenario, -1)), "duration_ns=-1: must be at least 0"),
        (lambda: list(arrivals_before(5, 1)), "scenario=5: expected a Scenario"),  # type: ignore[arg-type]
        (lambda: default_grid("2"), "levels='2': expected an int, got str"),  # type: ignore[arg-type]
        (lambda: default_grid(True), "levels=True: expected an int, got bool"),
        (lambda: default_grid(0), "levels=0: must be at least 1"),
    ]
    for make, words in bads:
        with pytest.raises((PermitValueError, PermitTypeError)) as error:
            make()
        assert str(error.value).startswith(words), (str(error.value), words)
    assert list(arrivals_before(scenario, SECOND)) == [(0, 0)]


costs = st.one_of(
    st.just(1),
    st.integers(1, 3),
    st.builds(Uniform, st.integers(1, 2), st.integers(2, 4)),
    st.fixed_dictionaries(
        {"a": st.sampled_from([0, 1, Uniform(1, 3)]), "b": st.sampled_from([1, 2, Choice([1, 4])])}
    ),
)
tenants = st.one_of(
    st.none(),
    st.builds(Tenants, st.integers(1, 30), st.sampled_from([0, 1.2])),
    st.builds(Tenants, st.integers(1, 30), heaviest=st.sampled_from([0.3, 1])),
)


@settings(deadline=None)
@given(
    policy=policies,
    seed=st.integers(0, 2**70),
    loads=st.lists(st.tuples(workloads, costs, tenants), min_size=1, max_size=4),
    rates=st.tuples(st.sampled_from([5, 25, Fraction(100, 3)]), st.sampled_from([3, 40])),
)
def test_any_scenario_with_costs_limits_and_tenants_is_within_each_limit(
    policy: Fifo,
    seed: int,
    loads: list[tuple[Workload, object, Tenants | None]],
    rates: tuple[int, int],
) -> None:
    """With several limits, drawn costs and tenants: every caller is accounted
    for once, each limit's units stay within it over the run, each limit's
    shares add up, every tenant's callers are its workload's, and the run
    is deterministic."""
    limits = {"a": Limit(rates[0], 4), "b": Limit(rates[1], 5)}
    built = [
        attrs.evolve(w, name=f"w{i}", cost=cost, tenants=tenants)
        for i, (w, cost, tenants) in enumerate(loads)
    ]
    scenario = Scenario("any", policy, None, 2, built, seed=seed, limits=limits)
    result = simulate(scenario)
    conserved(result)
    assert result.limits == ("a", "b")
    for j, limit in enumerate(limits.values()):
        used = sum(w.units_per_limit[j] for w in result.workloads)
        assert used <= limit.burst + math.floor(limit.rate * 2)
        if used:
            assert math.isclose(sum(w.shares[j] or 0.0 for w in result.workloads), 1)
        else:  # a share of nothing
            assert all(w.shares[j] is None for w in result.workloads)
    for w, load in zip(result.workloads, built, strict=True):
        assert w.units == w.units_per_limit[0]
        assert w.tenants_starved <= w.tenants <= (0 if load.tenants is None else load.tenants.count)
        assert (w.tenant_wait_p99_max_ns is None) == (w.tenants == w.tenants_starved)
        if w.tenant_wait_p99_max_ns is not None:
            assert w.tenant_wait_p99_median_ns is not None
            assert w.tenant_wait_p99_median_ns <= w.tenant_wait_p99_max_ns
            assert w.worst_tenant is not None
            assert w.worst_tenant.startswith(f"{w.name}#")
    assert simulate(scenario) == result


def test_a_scenario_of_plain_callers_is_the_same_under_its_limit_named() -> None:
    """rate and burst are one limit called units: the same run either way."""
    for scenario in SEED:
        limit = Limit(scenario.rate, scenario.burst)
        named = attrs.evolve(scenario, rate=None, burst=1, limits={"units": limit})
        assert simulate(named).workloads == simulate(scenario).workloads


def test_callers_not_fair_are_counted_by_tenant_and_queue_in_arrival_order() -> None:
    """fair=False: each tenant is counted, and the level serves its callers
    in the order they came (as with no flow named); fair: the tenants take
    turns, so a light tenant behind a heavy one's backlog goes first."""
    heavy = Workload("heavy", 0, Batch(20), flow="big")
    light = Workload("light", 0, Constant(1, start=0.5, stop=1), flow="small")
    runs = {}
    for fair in (True, False):
        loads = [attrs.evolve(w, fair=fair) for w in (heavy, light)]
        result = simulate(Scenario("s", Fifo(1), 10, 3, loads))
        assert [(w.tenants, w.worst_tenant) for w in result.workloads] == [
            (1, "big"),
            (1, "small"),
        ]
        runs[fair] = result["light"].wait_max_ns
    # at 0.5 s, 6 of the backlog were granted: in one line it is granted
    # after the other 14; taking turns, after the one whose turn ties with its
    assert runs[False] == 1_500 * MILLISECOND
    assert runs[True] == 200 * MILLISECOND


# Few callers a second against a slow limit: a line that forms, and
# callers that join it one turn at a time.
few_arrivals = st.one_of(
    st.builds(Batch, st.integers(0, 12), st.sampled_from([0, 0.25, 1])),
    st.builds(Constant, st.sampled_from([1, 3, 7]), st.sampled_from([0, 0.003, 0.5])),
    st.builds(Poisson, st.sampled_from([2, 8])),
)
# Costs of up to the whole burst (4), so that a cheap caller may be due
# before a dear head.
dear_costs = st.one_of(
    st.integers(1, 4),
    st.builds(Uniform, st.just(1), st.integers(2, 4)),
    st.fixed_dictionaries(
        {"a": st.sampled_from([1, 4, Uniform(1, 4)]), "b": st.sampled_from([0, 1, 3])}
    ),
)
patient_workloads = workloads_of(
    few_arrivals, max_wait=st.sampled_from([None, 0, 0.02, 0.3]), fair=st.booleans()
)


@settings(deadline=None)
@example(  # a caller with a deadline joins the line alone: the next tick is its deadline
    policy=Fifo(3),
    seed=0,
    loads=[
        (Workload("w", 0, Batch(12)), 1, None),
        (Workload("w", 1, Constant(1, start=0.5), give_up_after=0.4, timeout=0.1), 1, None),
    ],
    varied=False,
    two_limits=False,
    rate=1,
    max_waiting=None,
)
@example(  # a caller of one unit joins a line whose head waits for four: due sooner
    policy=StrictPriority(3),
    seed=0,
    loads=[
        (Workload("w", 1, Batch(3)), 4, None),
        (Workload("w", 0, Constant(1, start=0.5)), 1, None),
    ],
    varied=True,
    two_limits=False,
    rate=1,
    max_waiting=None,
)
@given(
    policy=policies,
    seed=st.integers(0, 2**70),
    loads=st.lists(st.tuples(patient_workloads, dear_costs, tenants), min_size=2, max_size=4),
    varied=st.booleans(),
    two_limits=st.booleans(),
    rate=st.sampled_from([1, 3, Fraction(10, 3)]),
    max_waiting=st.sampled_from([None, 0, 2, (None, 3, 1)]),
)
def test_asking_for_the_next_tick_only_after_a_turn_that_could_move_it_changes_nothing(
    policy: Fifo,
    seed: int,
    loads: list[tuple[Workload, object, Tenants | None]],
    varied: bool,
    two_limits: bool,
    rate: int,
    max_waiting: int | tuple[int | None, ...] | None,
) -> None:
    """P54: the run loop asks the machine for its next tick again only
    after a turn that could have moved it (a cancel, a tick, a push with a
    deadline or a decision, any cost other than one unit). The same runs
    asking again after every turn give the same result, every figure of it.
    (Costs other than one unit, ``varied``, make the loop ask after every
    turn from the first such arrival on.)"""
    built = [
        attrs.evolve(w, name=f"w{i}", cost=cost if varied else 1, tenants=tenants)
        for i, (w, cost, tenants) in enumerate(loads)
    ]
    if two_limits:
        limits = {"a": Limit(rate, 4), "b": Limit(2, 5)}
        scenario = Scenario("any", policy, None, 3, built, seed=seed, limits=limits)
    else:  # one limit: a cost per limit becomes one of every limit
        built = [attrs.evolve(w, cost=1) if isinstance(w.cost, tuple) else w for w in built]
        scenario = Scenario("any", policy, rate, 3, built, burst=4, seed=seed)
    scenario = attrs.evolve(scenario, max_waiting=max_waiting)
    duration = 3 * SECOND
    asked_when_moved = _run(scenario, duration, _generated(scenario, duration))
    asked_every_turn = _run(scenario, duration, _generated(scenario, duration), ask_every_turn=True)
    assert asked_when_moved == asked_every_turn


@settings(deadline=None)
@given(
    size=st.integers(0, 400),
    rate=st.sampled_from([1, 3, 7, 100, Fraction(10, 3)]),
    burst=st.integers(1, 5),
    seconds=st.sampled_from([1, 2, 3, 200, Fraction(7, 3), Decimal("2.5")]),
)
@example(size=200, rate=1, burst=1, seconds=200)
def test_the_timeline_counts_the_grants_of_each_equal_slice_of_the_run(
    size: int, rate: int | Fraction, burst: int, seconds: int | Fraction | Decimal
) -> None:
    """A batch of ``size`` at time zero: permit k (from 1) falls due at
    ``ceil((k - burst) / rate)`` s; slice i of the timeline counts those in
    ``[i * seconds / BINS, (i + 1) * seconds / BINS)``. (A run of 200 s at
    1 permit/s grants one in each slice: a grant at the first instant of a
    slice is not the slice before's.)"""
    scenario = Scenario("slices", Fifo(1), rate, seconds, [Workload("w", 0, Batch(size))])
    scenario = attrs.evolve(scenario, burst=burst)
    result = simulate(scenario)["w"]
    duration = round(Fraction(seconds) * SECOND)
    interval = Fraction(SECOND) / Fraction(rate)
    times = [max(0, math.ceil((k - burst) * interval)) for k in range(1, size + 1)]
    times = [t for t in times if t < duration]
    want = [0] * BINS
    for t in times:
        want[next(i for i in range(BINS) if t < Fraction((i + 1) * duration, BINS))] += 1
    assert result.granted == len(times)
    assert result.timeline == tuple(want)


def naive_figures(scenario: Scenario) -> list[dict[str, Any]]:
    """Every figure of ``scenario``'s run, from a naive loop over the
    machine: one event at a time (the next of a tick, an arrival and a
    give-up; at one time give-ups, then the tick, then arrivals), the next
    tick asked after every step, and each caller's fate kept whole."""
    duration = round(Fraction(scenario.seconds) * SECOND)
    limits = scenario.named_limits
    names = tuple(limits)
    machine = Machine(
        scenario.policy,
        limits=limits,
        max_waiting=scenario.max_waiting,
        **scenario.flow_options(),
    )
    arriving = []
    for w, workload in enumerate(scenario.workloads):
        seed = scenario.seed * 1_000_003 + w
        drawn = workload.callers(names, seed)
        before_end = itertools.takewhile(lambda t: t < duration, workload.arrivals.times(seed))
        arriving += [(t, w, *next(drawn)) for t in before_end]
    arriving.sort(key=lambda arrival: arrival[:2])
    callers: list[dict[str, Any]] = []
    gives_up: dict[int, int] = {}

    def seconds_ns(value: object) -> int:
        return round(Fraction(str(value)) * SECOND)

    def decide(decisions: list[Decision]) -> None:
        for d in decisions:
            assert isinstance(d.id, int)
            callers[d.id]["end"] = (d.state, d.at, d.waited)
            gives_up.pop(d.id, None)

    while True:
        times = [machine.next_tick(), *(a[0] for a in arriving[:1]), *gives_up.values()]
        t = min((time for time in times if time is not None), default=duration)
        if t >= duration:
            break
        for id in sorted(id for id, at in gives_up.items() if at == t):
            del gives_up[id]
            if machine.cancel(id):
                callers[id]["end"] = (State.CANCELLED, t, None)
        due = machine.next_tick()
        if due is not None and due <= t:
            decide(machine.tick(t))
        while arriving and arriving[0][0] == t:
            _, w, cost, flow = arriving.pop(0)
            workload = scenario.workloads[w]
            id = len(callers)
            callers.append({"w": w, "cost": cost, "flow": flow, "end": None})
            if workload.give_up_after is not None:
                gives_up[id] = t + seconds_ns(workload.give_up_after)
            deadline = workload.timeout
            longest = workload.max_wait
            decide(
                machine.push(
                    id,
                    workload.level,
                    t,
                    deadline=None if deadline is None else t + seconds_ns(deadline),
                    cost=cost if isinstance(cost, int) else dict(zip(names, cost, strict=True)),
                    flow=flow if workload.fair else None,
                    max_wait_ns=None if longest is None else seconds_ns(longest),
                )
            )
    figures = []
    for w in range(len(scenario.workloads)):
        mine = [c for c in callers if c["w"] == w]
        ends = [c["end"] for c in mine if c["end"] is not None]
        granted = [c for c in mine if c["end"] is not None and c["end"][0] is State.GRANTED]
        units = [0] * len(names)
        timeline = [0] * BINS
        for c in granted:
            cost = c["cost"]
            for j in range(len(names)):
                units[j] += cost if isinstance(cost, int) else cost[j]
            timeline[c["end"][1] * BINS // duration] += 1
        tenant_p99s = []
        flows = {c["flow"] for c in mine if c["flow"] is not None}
        for flow in flows:
            waits = [c["end"][2] for c in granted if c["flow"] == flow]
            if waits:
                tenant_p99s.append(nearest_rank(waits, 0.99))
        count = Counter(end[0] for end in ends)
        figures.append(
            {
                "offered": len(mine),
                "granted": len(granted),
                "waiting": len(mine) - len(ends),
                "cancelled": count[State.CANCELLED],
                "rejected": count[State.REJECTED],
                "too_long": count[State.TOO_LONG],
                "expired": count[State.EXPIRED],
                "waits": [c["end"][2] for c in granted],
                "units_per_limit": tuple(units),
                "cleared_at_ns": max((end[1] for end in ends), default=None)
                if len(ends) == len(mine)
                else None,
                "timeline": tuple(timeline),
                "tenants": len(flows),
                "tenants_starved": len(flows) - len(tenant_p99s),
                "tenant_p99s": sorted(tenant_p99s),
            }
        )
    return figures


def near(got: int | None, exact: int | None) -> bool:
    """``got`` is ``exact`` within the histogram's error (both ``None``: none)."""
    if exact is None or got is None:
        return got is exact
    return abs(got - exact) <= exact * RELATIVE_ERROR


def test_the_flows_take_turns_by_the_scenario_s_weights() -> None:
    """A scenario's flow options are its machine's: two batches of 40 at one
    level, one in flow "a" (weight 3) and one in flow "b", 40 permits in
    the run: three of "a" to one of "b" within one grant (20 each without
    the weights). A flow at its ``max_waiting_per_flow`` rejects the rest:
    "a" has its first granted at once, then 25 queue."""
    workloads = [
        Workload("a", 0, Batch(40), flow="a"),
        Workload("b", 0, Batch(40), flow="b"),
    ]
    weighted = Scenario("flows", Fifo(), 100, 0.4, workloads, flow_weights={"a": 3})
    a, b = simulate(weighted).workloads
    assert a.granted + b.granted == 40
    assert abs(a.granted - 30) <= 1, (a.granted, b.granted)
    a, b = simulate(attrs.evolve(weighted, flow_weights=None)).workloads
    assert abs(a.granted - 20) <= 1, (a.granted, b.granted)
    assert weighted.flow_options()["flow_weights"] == {"a": 3}

    bounded = attrs.evolve(weighted, max_waiting_per_flow=25)
    a, b = simulate(bounded).workloads
    assert (a.rejected, b.rejected) == (14, 15)

    with pytest.raises(PermitValueError, match="flow_weights"):
        Scenario("flows", Fifo(), 100, 0.4, workloads, flow_weights={"a": 0})
    with pytest.raises(PermitValueError, match="flow_limit"):
        Scenario("flows", Fifo(), 100, 0.4, workloads, flow_limit="tokens")
    with pytest.raises(PermitTypeError, match="flow_weights"):
        Scenario("flows", Fifo(), 100, 0.4, workloads, flow_weights=(3,))


def test_a_result_asked_for_a_workload_it_has_not_names_those_it_has() -> None:
    """``result["nope"]`` said only ``KeyError: 'nope'``: it names the
    workloads there are, so a typo is found at once."""
    result = simulate(SEED[0])
    with pytest.raises(KeyError) as missing:
        result["interactiv"]
    assert missing.value.args == (
        "no workload is called 'interactiv' (the workloads: 'interactive', 'batch')",
    )


def test_a_time_or_level_of_any_size_is_refused_or_run_at_once() -> None:
    """P106, P108: no time or level the simulator takes makes it hang or fail
    other than by a refusal naming it: an int of 10,001 digits (whose
    repr Python refuses: the error shows how many digits), an infinite or
    NaN float or Decimal; a huge timeout is simply never reached."""
    huge = 10**10000
    one = Scenario("s", Fifo(1), 1, 1, [Workload("w", 0, Batch(1))])
    refusals: list[tuple[str, Callable[[], object], str]] = [
        ("seconds", lambda: attrs.evolve(one, seconds=huge), "must be at most 1e+308"),
        ("seconds", lambda: attrs.evolve(one, seconds=math.inf), "must be finite"),
        ("at", lambda: Batch(1, math.nan), "must be finite"),
        ("stop", lambda: Constant(1, 0, Decimal("-Infinity")), "must be finite"),
        ("timeout", lambda: Workload("w", 0, Batch(1), Decimal("NaN")), "must be finite"),
        (
            "workloads[0].level",
            lambda: attrs.evolve(one, workloads=[Workload("w", huge, Batch(1))]),
            "must be 0 (the policy has one level); a policy has at most 1,000 levels",
        ),
        ("seconds", lambda: one.scaled(huge), "is half a nanosecond or less"),
        ("level", lambda: replay(one, [Call(0, huge)]), "a policy has at most 1,000 levels"),
    ]
    for argument, call, reason in refusals:
        began = time.perf_counter()
        with pytest.raises(PermitValueError) as refused:
            call()
        assert time.perf_counter() - began < 30, argument  # (a hang guard, room for a loaded host)
        assert refused.value.argument == argument
        assert reason in str(refused.value), str(refused.value)
    shown = str(PermitValueError("seconds", huge, "too long"))
    assert shown == "seconds=<int of about 10,001 digits>: too long"
    began = time.perf_counter()
    patient = Workload("w", 0, Batch(3), huge, give_up_after=huge, max_wait=huge)
    result = simulate(attrs.evolve(one, workloads=[patient], seconds=10))
    assert time.perf_counter() - began < 30  # (a hang guard, room for a loaded host)
    assert (result["w"].granted, result["w"].expired, result["w"].cancelled) == (3, 0, 0)


def test_a_limit_named_with_the_empty_string_is_a_bad_value() -> None:
    """A limit named ``""``, of a scenario's limits or a workload's cost,
    is a str, the wrong one: a ``PermitValueError`` naming the argument
    and saying what to do, as the core's ``Machine(limits=...)`` refuses
    it (it was a ``PermitTypeError``, "expected non-empty strings"); a
    name that is no str is still a type's error."""
    reason = "names a limit '' (the empty string): give each limit a name of one character or more"
    one = [Workload("w", 0, Batch(1))]
    limits = {"tokens": Limit(10, 10), "": Limit(1)}
    with pytest.raises(PermitValueError) as refused:
        Scenario("s", Fifo(), None, 1, one, limits=limits)
    assert (refused.value.argument, refused.value.value) == ("limits", limits)
    assert str(refused.value) == f"limits={limits!r}: {reason}"
    with pytest.raises(PermitValueError) as refused:
        Workload("w", 0, Batch(1), cost={"tokens": 1, "": 1})
    assert str(refused.value) == f"cost={{'tokens': 1, '': 1}}: {reason}"
    with pytest.raises(PermitTypeError, match="non-empty strings, got int"):
        Workload("w", 0, Batch(1), cost={3: 1})


def test_a_scale_factor_is_checked_as_a_rate() -> None:
    """P106: ``Scenario.scaled``'s factor is read as a rate is: a Decimal
    past an exponent of 10,000 is refused at once, naming ``factor``."""
    scenario = Scenario("r", StrictPriority(1), 1, 1, [Workload("w0", 0, Batch(0))], burst=1)
    with pytest.raises(PermitValueError) as refused:
        scenario.scaled(Decimal("1e10001"))
    assert refused.value.argument == "factor", "P106"
