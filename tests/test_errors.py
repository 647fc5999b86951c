"""Bad input at construction: a clear error naming the argument and the value."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from permits.core import (
    Aging,
    Charge,
    Fifo,
    Limit,
    Machine,
    PermitError,
    PermitTypeError,
    PermitValueError,
    PolicyError,
    Queues,
    Shares,
    State,
    StrictPriority,
)


@pytest.mark.parametrize(
    ("rate", "error"),
    [
        (0, PermitValueError),
        (-1, PermitValueError),
        (math.nan, PermitValueError),
        (math.inf, PermitValueError),
        (-math.inf, PermitValueError),
        (Decimal("NaN"), PermitValueError),
        (Fraction(0), PermitValueError),
        (True, PermitTypeError),
        ("100", PermitTypeError),
        (None, PermitTypeError),
    ],
)
def test_rate_refused(rate: Any, error: type[PermitError]) -> None:
    with pytest.raises(error) as refused:
        Machine(StrictPriority(), rate)
    assert refused.value.argument == "rate"  # type: ignore[attr-defined]
    assert str(refused.value).startswith(f"rate={rate!r}")
    assert isinstance(refused.value, (ValueError, TypeError))


@pytest.mark.parametrize("rate", [100, 2.5, Fraction(7, 3), Decimal("0.5"), 0.1])
def test_rate_accepted_exactly(rate: Any) -> None:
    machine = Machine(StrictPriority(), rate)
    expected = Fraction(repr(rate)) if isinstance(rate, float) else Fraction(rate)
    assert machine.rate == expected
    assert machine.interval == Fraction(10**9) / expected


def test_float_rate_is_the_decimal_it_prints_as() -> None:
    """P77: ``0.1`` is 1/10, not the binary fraction the float holds."""
    assert Machine(Fifo(), 0.1).rate == Fraction(1, 10)


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"burst": 0}, "burst"),
        ({"burst": 1.5}, "burst"),
        ({"burst": True}, "burst"),
        ({"max_waiting": -1}, "max_waiting"),
        ({"max_waiting": (1,)}, "max_waiting"),
        ({"max_waiting": (1, -1)}, "max_waiting[1]"),  # named by its entry
        ({"max_waiting": (1, 1.5)}, "max_waiting[1]"),
        ({"max_waiting": "10"}, "max_waiting"),
        ({"settle_window_ns": -1}, "settle_window_ns"),
        ({"settle_window_ns": 0.5}, "settle_window_ns"),
        ({"supplied": 1}, "supplied"),
        ({"supplied": "yes"}, "supplied"),
        ({"charge": "at spend"}, "charge"),
        ({"supplied": True, "charge": Charge.AT_SPEND}, "charge"),
    ],
)
def test_machine_arguments_refused(kwargs: dict[str, Any], argument: str) -> None:
    with pytest.raises(PermitError) as refused:
        Machine(StrictPriority(2), 100, **kwargs)
    assert isinstance(refused.value, (PermitValueError, PermitTypeError))
    assert refused.value.argument == argument
    assert str(refused.value).startswith(f"{argument}=")


def test_policy_refused() -> None:
    with pytest.raises(PermitTypeError) as refused:
        Machine("strict", 100)  # type: ignore[arg-type]
    assert refused.value.argument == "policy"


def test_a_user_policy_with_absurd_levels_names_the_policy() -> None:
    """The caller wrote ``policy``, so the error names it (not
    ``policy.levels``), and an absurd size is refused before any memory is
    taken for it."""

    class Huge:
        levels = 10**30

        def choose(self, queues: Queues, now: int) -> int:
            return 0

        def ahead(self, queues: Queues, level: int, now: int) -> int:
            return 0

    with pytest.raises(PermitValueError) as refused:
        Machine(Huge(), 100)
    assert refused.value.argument == "policy"
    assert "levels=1000000000000000000000000000000" in str(refused.value)


def test_a_float_subclass_rate_is_read_as_the_float_it_is() -> None:
    """numpy.float64 is a float subclass whose repr is not a number's."""

    class Float64(float):
        def __repr__(self) -> str:
            return f"Float64({float(self)!r})"

    assert Machine(Fifo(), Float64(2.5)).rate == Fraction(5, 2)


@pytest.mark.parametrize(
    ("make", "argument"),
    [
        (lambda: StrictPriority(0), "levels"),
        (lambda: StrictPriority(True), "levels"),
        (lambda: Fifo(1.0), "levels"),  # type: ignore[arg-type]
        (lambda: Aging(2, after_ns=0), "after_ns"),
        (lambda: Aging(2, after_ns=-5), "after_ns"),
        (lambda: Aging(2, after_ns=1.5), "after_ns"),  # type: ignore[arg-type]
        (lambda: Shares(()), "weights"),
        (lambda: Shares((4, 0)), "weights[1]"),  # a bad weight named by its entry
        (lambda: Shares((4, -1)), "weights[1]"),
        (lambda: Shares((4, True)), "weights[1]"),
        (lambda: Shares((4.0, 1)), "weights[0]"),
        (lambda: Shares("41"), "weights"),
        (lambda: Shares((10**6, 1)), "weights"),
        (lambda: Shares.every(1), "n"),
        (lambda: Shares.every(10**30), "n"),
        (lambda: StrictPriority(10**30), "levels"),
        (lambda: Fifo(1001), "levels"),
    ],
)
def test_policy_arguments_refused(make: Any, argument: str) -> None:
    with pytest.raises(PermitError) as refused:
        make()
    assert isinstance(refused.value, (PermitValueError, PermitTypeError))
    assert refused.value.argument == argument


def test_every_is_weights() -> None:
    assert Shares.every(5) == Shares((4, 1))
    assert Shares.every(5).levels == 2


class _Broken:
    """A policy that names an empty level for its fourth grant."""

    levels = 2

    def choose(self, queues: Queues, now: int) -> int:
        return 1 if queues.granted == 3 else 0

    def ahead(self, queues: Queues, level: int, now: int) -> int:
        return queues.depths[level]


def test_broken_policy_raises_and_keeps_earlier_decisions() -> None:
    machine = Machine(_Broken(), 1, burst=2)
    for id in ("w", "x", "y", "z"):
        machine.push(id, 0, 0)  # w and x take the two banked permits
    with pytest.raises(PolicyError) as refused:
        machine.tick(3 * 10**9)  # two permits: y is granted, then the policy fails
    assert [(d.id, d.state) for d in refused.value.decisions] == [  # type: ignore[attr-defined]
        ("y", State.GRANTED)
    ]
    assert [w.id for w in machine.waiting()] == ["z"]
    assert machine.statistics().granted == 3


def test_supply_is_for_a_supplied_machine() -> None:
    machine = Machine(StrictPriority(2), 100)
    machine.push("a", 0, 0)
    machine.push("b", 0, 0)
    with pytest.raises(PermitValueError) as refused:
        machine.supply(0)
    assert refused.value.argument == "supplied"
    assert str(refused.value).startswith("supplied=False")
    assert [w.id for w in machine.waiting()] == ["b"], "nothing granted, nothing lost"


@pytest.mark.parametrize(
    ("make", "argument"),
    [
        (lambda: Limit(0), "rate"),
        (lambda: Limit(float("nan")), "rate"),
        (lambda: Limit(10, burst=0), "burst"),
        (lambda: Limit(10, burst=True), "burst"),
        (lambda: Limit.per_minute(-1), "count"),
        (lambda: Limit.per_minute(2.5), "burst"),  # no whole-number default
        (lambda: Machine(Fifo()), "rate"),
        (lambda: Machine(Fifo(), 10, limits=Limit(10)), "limits"),
        (lambda: Machine(Fifo(), limits={}), "limits"),
        (lambda: Machine(Fifo(), limits={"": Limit(1)}), "limits"),
        (lambda: Machine(Fifo(), limits={"tokens": 100}), "limits['tokens']"),  # type: ignore[dict-item]
        (lambda: Machine(Fifo(), 10, flow_weights=3), "flow_weights"),  # type: ignore[arg-type]
        (lambda: Machine(Fifo(), 10, flow_weights={"a": 0}), "flow_weights['a']"),
        (lambda: Machine(Fifo(), 10, flow_weights={"a": 1.5}), "flow_weights['a']"),  # type: ignore[dict-item]
        (lambda: Machine(Fifo(), 10, max_waiting_per_flow=-1), "max_waiting_per_flow"),
        (lambda: Machine(Fifo(), 10, flow_limit="tokens"), "flow_limit"),
        (lambda: Machine(Shares((1, 1), limit="tokens"), 10), "policy"),
    ],
)
def test_limits_refused(make: Any, argument: str) -> None:
    with pytest.raises((PermitValueError, PermitTypeError)) as refused:
        make()
    error = refused.value
    assert isinstance(error, (PermitValueError, PermitTypeError))
    assert error.argument == argument, error
    assert f"{argument}=" in str(error)


def test_limits_per_minute_and_hour_are_exact() -> None:
    assert Limit.per_minute(500) == Limit(Fraction(500, 60), 500)
    assert Limit.per_hour(90_000, burst=1_500) == Limit(25, 1_500)
    machine = Machine(Fifo(), limits={"requests": Limit.per_minute(500)})
    assert machine.limits == {"requests": Limit(Fraction(25, 3), 500)}
    assert machine.rate == Fraction(25, 3)
    assert Machine(Fifo(), limits=Limit(3, burst=2)).limits == {"units": Limit(3, 2)}


@pytest.mark.parametrize("weight", [0, -2, 2.5, True, 10**7, "2"])
def test_a_bad_flow_weight_is_refused_at_push_and_changes_nothing(weight: Any) -> None:
    """P18 for flow weights read from a function: the push is refused, naming
    ``flow_weights`` and the flow, and the machine is as it was."""
    machine = Machine(Fifo(), 1, 1, flow_weights=lambda flow: weight if flow == "x" else 1)
    machine.push("a", 0, 0, flow="y")
    machine.push("b", 0, 0, flow="y")
    before = machine.snapshot()
    with pytest.raises((PermitValueError, PermitTypeError)) as refused:
        machine.push("c", 0, 10, flow="x")
    error = refused.value
    assert isinstance(error, (PermitValueError, PermitTypeError))
    assert error.argument == "flow_weights('x')"  # the flow's entry, not the whole argument
    assert str(error).startswith(f"flow_weights('x')={weight!r}: ")
    assert machine.snapshot() == before


def test_a_flow_weight_function_that_raises_is_bad_input() -> None:
    """A weight function that raises (an unknown tenant) refuses the push as
    bad input, naming flow_weights, and changes nothing: it is not a broken
    machine."""
    known: dict[Hashable, int] = {"a": 2}
    machine = Machine(Fifo(), 1, 1, flow_weights=lambda flow: known[flow])
    machine.push("x", 0, 0, flow="a")
    before = machine.snapshot()
    with pytest.raises(PermitValueError) as refused:
        machine.push("y", 0, 5, flow="unknown")
    assert refused.value.argument == "flow_weights"
    assert "KeyError" in str(refused.value)
    assert machine.snapshot() == before


NO_UNIT = "must take at least one unit of some limit"


@pytest.mark.parametrize("cost", [0, -1, -(10**30), {"tokens": 0}, {}])
def test_a_cost_of_no_unit_is_refused_in_one_rule_whatever_its_sign(cost: Any) -> None:
    """A cost takes at least one unit of some limit: ``cost=-1`` is refused
    with the words ``cost=0`` is (it said "must be at least 0", and then 0
    was refused too), by push, take and every adapter's acquire."""
    import asyncio

    from permits.adapters import threads
    from permits.adapters.asyncio import open_limiter

    two = {"requests": Limit.per_second(10), "tokens": Limit.per_second(100)}
    machine = Machine(Fifo(), limits=two)
    for operation in (machine.push, machine.take):
        with pytest.raises(PermitValueError) as refused:
            operation("x", 0, 0, cost=cost)
        assert str(refused.value) == f"cost={cost!r}: {NO_UNIT}"
    with threads.open_limiter(Fifo(), limits=two) as limiter:
        with pytest.raises(PermitValueError, match=f"^cost=.*: {NO_UNIT}$"):
            limiter.acquire(cost=cost)
        with pytest.raises(PermitValueError, match=f"^cost=.*: {NO_UNIT}$"):
            limiter.try_acquire(cost=cost)

    async def main() -> None:
        async with open_limiter(Fifo(), limits=two) as limiter:
            with pytest.raises(PermitValueError, match=f"^cost=.*: {NO_UNIT}$"):
                await limiter.acquire(cost=cost)

    asyncio.run(main())


def test_a_scenarios_and_a_traces_cost_of_no_unit_is_refused_in_the_same_words() -> None:
    """The simulator's workloads and trace rows refuse ``cost=-1`` as they
    refuse ``cost=0``, in the core's words (a trace said "expected a whole
    number >= 1" and "must be at least 1")."""
    import io

    from permits.sim import Batch, TraceError, Workload, read_trace

    for cost in (0, -1):
        with pytest.raises(PermitValueError, match=f"^cost={cost}: {NO_UNIT}"):
            Workload("w", 0, Batch(1), cost=cost)
        with pytest.raises(TraceError) as refused:
            list(read_trace(io.StringIO(f"at,level,cost\n0,0,{cost}\n")))
        assert str(refused.value) == f"line 2: cost={cost}: {NO_UNIT}"


@pytest.mark.parametrize(
    "make",
    [
        lambda: Aging(2, after_ns=2.0),  # type: ignore[arg-type]
        lambda: Machine(Fifo(), 10).push("a", 0, 0, max_wait_ns=0.5),  # type: ignore[arg-type]
    ],
)
def test_a_duration_in_ns_given_as_a_float_is_told_its_unit(make: Any) -> None:
    """A user of an adapter (seconds) who writes a policy's ``after_ns=2.0``
    meant seconds; the error said only "expected an int", not what to do:
    it names the unit, and the way from seconds."""
    with pytest.raises(PermitTypeError) as refused:
        make()
    assert str(refused.value).endswith(
        ": expected an int of nanoseconds (seconds * SECOND, from permits.core), got float"
    )


def test_a_negative_duration_in_seconds_is_refused_in_the_words_of_every_other_bound() -> None:
    """An adapter's seconds (``timeout``, ``max_wait``, ``pause_for``) below
    0 said "must be >= 0", where every other bound of the package says
    "must be at least 0" (``adopt(remaining=-5)``, a level, a burst)."""
    from permits.adapters import threads

    with threads.open_limiter(Fifo(), rate=10) as limiter:
        refusals: list[tuple[Callable[[], object], str]] = [
            (lambda: limiter.acquire(timeout=-1), "timeout"),
            (lambda: limiter.acquire(max_wait=-1), "max_wait"),
            (lambda: limiter.pause_for(-1), "seconds"),
            (lambda: limiter.adopt(1, -1), "reset_after"),
        ]
        for refuse, argument in refusals:
            with pytest.raises(PermitValueError) as refused:
                refuse()
            assert str(refused.value) == f"{argument}=-1: must be at least 0", argument


def test_a_type_error_names_a_value_whose_comparison_raises() -> None:
    """A value whose ``==`` raises (a numpy array's truth is ambiguous) is
    named by its type: the error is built without comparing it."""

    class Ambiguous:
        def __eq__(self, other: object) -> bool:
            raise ValueError("the truth value is ambiguous")

        __hash__ = object.__hash__

    error = PermitTypeError("cost", Ambiguous(), "an int")
    assert error.got == "Ambiguous"
    assert PermitTypeError("name", "", "a non-empty str").got == "an empty str"
