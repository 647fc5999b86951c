"""``permits.sim``'s comparison: requirements, the grid, the bound on a run's work."""

from __future__ import annotations

from fractions import Fraction

import attrs
import pytest

from permits.core import (
    SECOND,
    Aging,
    Fifo,
    PermitTypeError,
    PermitValueError,
    Shares,
    StrictPriority,
)
from permits.sim import (
    SEED,
    Batch,
    Constant,
    Measure,
    Poisson,
    Requirement,
    Scenario,
    Workload,
    check_arrivals,
    compare,
    default_grid,
    offered_quantile,
    simulate,
)

ARTICLE = SEED[2]  # strict priority, interactive 90/s, a batch of 300


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("interactive p99 <= 50 ms", ("interactive", Measure.WAIT_P99, Fraction(1, 20))),
        ("batch share >= 20%", ("batch", Measure.SHARE, Fraction(1, 5))),
        ("batch share >= 0.2", ("batch", Measure.SHARE, Fraction(1, 5))),
        ("nightly export cleared by 60 s", ("nightly export", Measure.CLEARED, Fraction(60))),
        ("  users p50<=1.5s ", ("users", Measure.WAIT_P50, Fraction(3, 2))),
        ("users granted >= 99.5%", ("users", Measure.GRANTED, Fraction(995, 1000))),
    ],
)
def test_requirements_read_as_written(text: str, want: tuple[str, Measure, Fraction]) -> None:
    requirement = Requirement.parse(text)
    assert (requirement.workload, requirement.measure, requirement.bound) == want
    assert requirement.text == text.strip()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("interactive p99 >= 50 ms", "a p99 bound is written <="),
        ("interactive p99 <= 50", "a time needs its unit: ms or s"),
        ("batch share <= 20%", "a share bound is written >="),
        ("batch share >= 20 ms", "a share is a fraction: 20% or 0.2"),
        ("batch share >= 120%", "a share is at most 100%"),
        ("batch cleared by <= 6 s", "write 'cleared by <n> s', without <= or >="),
        ("batch p98 <= 5 s", "expected '<workload> p50|p99 <= <n> ms|s'"),
        ("p99 <= 5 s", "expected '<workload> p50|p99 <= <n> ms|s'"),
    ],
)
def test_bad_requirements_say_how_to_write_them(text: str, says: str) -> None:
    with pytest.raises(PermitValueError) as raised:
        Requirement.parse(text)
    assert (raised.value.argument, raised.value.value) == ("require", text)
    assert says in str(raised.value)
    with pytest.raises(PermitTypeError):
        Requirement.parse(50)


def test_offered_quantile_counts_the_ungranted_as_waiting_past_the_end() -> None:
    waits = ((10, 60), (20, 30))  # 90 granted of 100 offered
    assert offered_quantile(waits, 100, Fraction(1, 2)) == 10
    assert offered_quantile(waits, 100, Fraction(90, 100)) == 20
    assert offered_quantile(waits, 100, Fraction(91, 100)) is None
    assert offered_quantile(waits, 90, Fraction(99, 100)) == 20
    assert offered_quantile((), 0, Fraction(1, 2)) is None


def test_requirements_are_measured_on_the_result() -> None:
    result = simulate(ARTICLE)  # interactive 899 of 900 within 9.44 ms; batch 101
    interactive, batch = result["interactive"], result["batch"]

    def measured(text: str, w: object) -> Fraction | None:
        return Requirement.parse(text).measured(w)  # type: ignore[arg-type]

    assert measured("interactive p99 <= 10 ms", interactive) == Fraction(
        interactive.wait_p99 or 0, SECOND
    )
    assert measured("batch p50 <= 10 s", batch) is None  # 199 of 300 never granted
    assert measured("batch share >= 10%", batch) == Fraction(101, 1000)
    assert measured("batch granted >= 10%", batch) == Fraction(101, 300)
    assert measured("batch cleared by 10 s", batch) is None
    assert Requirement.parse("batch share >= 10.1%").met_by(Fraction(101, 1000))
    assert not Requirement.parse("batch share >= 10.2%").met_by(Fraction(101, 1000))
    assert not Requirement.parse("batch p99 <= 5 s").met_by(None)


def test_a_requirement_names_a_workload_of_its_scenario() -> None:
    with pytest.raises(PermitValueError) as raised:
        attrs.evolve(ARTICLE, requirements=[Requirement.parse("users p99 <= 1 s")])
    assert raised.value.argument == "requirements[0]"
    assert "no workload is called 'users'" in str(raised.value)


def test_default_grid() -> None:
    two = default_grid(2)
    assert two[:2] == (Fifo(2), StrictPriority(2))
    assert two[2:11] == tuple(Shares.every(n) for n in range(2, 11))
    assert two[11:] == tuple(Aging(2, after_ns=int(after * SECOND)) for after in (0.5, 1, 2, 5, 10))
    assert default_grid(3)[4] == Shares((9, 3, 1))  # every 4th: each level 3x the next
    assert default_grid(1) == (Fifo(1),)


def test_compare_runs_each_policy_in_place_of_the_scenarios() -> None:
    scenario = attrs.evolve(
        ARTICLE,
        requirements=[
            Requirement.parse("interactive p50 <= 1 s"),
            Requirement.parse("batch share >= 15%"),
        ],
    )
    comparison = compare(scenario)
    assert [o.policy for o in comparison.outcomes] == list(default_grid(2))
    for outcome in comparison.outcomes:
        want = simulate(attrs.evolve(scenario, policy=outcome.policy))
        assert outcome.result == want
        share = want["batch"].share
        assert (scenario.requirements[1] in outcome.missed) == (share < 0.15)
    # Every 5th and every 6th to the batch and aging after 5 s meet both; each leaves more
    # than 1% of the interactive calls ungranted (101, 67, 200), so their
    # p99s tie at "past the end": the earliest in the grid.
    meeting = [o.policy for o in comparison.outcomes if o.meets_all]
    assert meeting == [Shares.every(5), Shares.every(6), Aging(2, after_ns=5 * SECOND)]
    assert comparison.any_meets_all
    assert comparison.recommended.policy == Shares.every(5)


def test_recommendation_when_none_meets_all_is_among_the_fewest_misses() -> None:
    scenario = attrs.evolve(
        ARTICLE,
        requirements=[
            Requirement.parse("interactive p99 <= 20 ms"),
            Requirement.parse("batch share >= 29%"),
        ],
    )
    comparison = compare(scenario, [StrictPriority(2), Fifo(2), Shares.every(10)])
    assert not comparison.any_meets_all
    assert [len(o.missed) for o in comparison.outcomes] == [1, 1, 1]
    # all miss one: the lowest interactive p99 counting the ungranted:
    # strict (9.44 ms) over every 10th (17.2 ms) and FIFO (never)
    assert comparison.recommended.policy == StrictPriority(2)


def test_a_run_may_ask_for_a_bounded_number_of_callers() -> None:
    scenario = Scenario(
        "s",
        Fifo(2),
        rate=100,
        seconds=10,
        workloads=[
            Workload("a", 0, Constant(20)),  # 200 (+1 for rounding)
            Workload("b", 1, Poisson(30, start=5)),  # 150 on average
            Workload("c", 1, Batch(50, at=11)),  # after the end: none
        ],
    )
    assert check_arrivals(scenario) == 351
    assert check_arrivals(scenario, 351) == 351
    with pytest.raises(PermitValueError) as raised:
        check_arrivals(scenario, 350)
    assert (raised.value.argument, raised.value.value) == ("workloads[0].rate", 20)
    with pytest.raises(PermitValueError) as raised:
        simulate(attrs.evolve(scenario, seconds=1e30))
    assert raised.value.argument == "workloads[1].rate"
    assert "for seconds=1e+30 asks for 5e+31 callers in all" in str(raised.value)
    with pytest.raises(PermitValueError):
        simulate(scenario, max_arrivals=300)
    result = simulate(scenario, max_arrivals=None)
    assert (result["a"].offered, result["c"].offered) == (200, 0)
