"""P18 for what makes a machine: every bad argument of a constructor is
refused with the documented error, which names the argument the caller
wrote, carries the value, and says what to give instead; and the values
just inside every bound are accepted, as what they say.

The stateful tests (``test_machine.py``) feed bad input to the operations of
a running machine and check that its state stays as it was; the
constructors have no state to keep, so here each refusal is checked for its
exact words: the message is what a user reads to fix the call.
"""

from __future__ import annotations

import enum
import functools
import math
import re
from collections.abc import Callable, Hashable, Iterator, Mapping
from decimal import Decimal
from fractions import Fraction
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from permits.core import (
    SECOND,
    Aging,
    Charge,
    DuplicateId,
    Fifo,
    Limit,
    Machine,
    NotRefundable,
    PermitError,
    PermitTypeError,
    PermitValueError,
    PolicyError,
    QueueFull,
    Shares,
    State,
    StrictPriority,
    TimeWentBackwards,
    WaitHistogram,
    in_seconds,
)
from permits.core import _policies as policies
from permits.core.checks import MAX_SHOWN, check_int, check_rate
from permits.sim import every_nth

#: The error's value is the caller's own object (not compared); the message
#: given is then the words after its repr.
THEIRS = object()
NAN = float("nan")
INF = float("inf")
LEVELS = 1_000  # the most levels a policy may have
SCHEDULE = 1_000_000  # the longest cycle of shares
WEIGHT = 1_000_000  # the largest flow weight


class Tier(enum.IntEnum):
    ZERO = 0
    GOLD = 3


class NoLevels:
    """Not a policy: no levels, choose() or ahead()."""


class BadLevels:
    """A policy in shape whose levels are not a sensible count."""

    def __init__(self, levels: object) -> None:
        self.levels = levels

    def choose(self, queues: object, now: int) -> int:
        return 0

    def ahead(self, queues: object, level: int, now: int) -> int:
        return 0


def typed(argument: str, value: object, expected: str) -> tuple[type, str, object, str]:
    """A PermitTypeError's words."""
    got = type(value).__name__
    return PermitTypeError, argument, value, f"{argument}={value!r}: expected {expected}, got {got}"


def valued(argument: str, value: object, reason: str) -> tuple[type, str, object, str]:
    """A PermitValueError's words."""
    return PermitValueError, argument, value, f"{argument}={value!r}: {reason}"


def named_by_key(limits: object, key: str) -> tuple[type, str, object, str]:
    """The words of limits refused for a key that is no name: the key, not
    the mapping's type ("got dict")."""
    expected = "limit names that are non-empty strings"
    return PermitTypeError, "limits", limits, f"limits={limits!r}: expected {expected}, got {key}"


two_names = "['requests', 'tokens']"
#: Why a flow's weight below 1 is refused (the error names the flow's entry).
FLOW_WEIGHT = "must be from 1 to 1000000 (to serve the flow less, weigh the others more)"
#: What an argument in nanoseconds (``..._ns``) expects, saying the way from seconds.
NANOSECONDS = "an int of nanoseconds (seconds * SECOND, from permits.core)"
two = {"requests": Limit(10, 10), "tokens": Limit(1000, 500)}
others = {"requests": Limit(10, 10), "cost": Limit(1000, 500)}
#: Policies whose levels are no count, and one sharing a limit few machines have.
bad_levels = {value: BadLevels(value) for value in (0, LEVELS + 1, True, 2.0)}
shares_tokens = Shares((4, 1), limit="tokens")
not_a_policy = NoLevels()

#: (what, the call, (error type, argument, value, message))
REFUSED: list[tuple[str, Callable[[], object], tuple[type, str, object, str]]] = [
    # the policy
    (
        "policy class",
        lambda: Machine(Fifo, 1),  # type: ignore[arg-type]
        typed("policy", Fifo, "a policy instance: pass Fifo(...), not the class"),
    ),
    (
        "not a policy",
        lambda: Machine(not_a_policy, 1),  # type: ignore[arg-type]
        typed("policy", not_a_policy, "a Policy (levels, choose() and ahead())"),
    ),
    (
        "levels 0",
        lambda: Machine(bad_levels[0], 1),  # type: ignore[arg-type]
        valued("policy", bad_levels[0], "its levels=0 must be an int from 1 to 1000"),
    ),
    (
        "levels too many",
        lambda: Machine(bad_levels[LEVELS + 1], 1),  # type: ignore[arg-type]
        valued("policy", bad_levels[LEVELS + 1], "its levels=1001 must be an int from 1 to 1000"),
    ),
    (
        "levels bool",
        lambda: Machine(bad_levels[True], 1),  # type: ignore[arg-type]
        valued("policy", bad_levels[True], "its levels=True must be an int from 1 to 1000"),
    ),
    (
        "levels float",
        lambda: Machine(bad_levels[2.0], 1),  # type: ignore[arg-type]
        valued("policy", bad_levels[2.0], "its levels=2.0 must be an int from 1 to 1000"),
    ),
    ("Fifo(0)", lambda: Fifo(0), valued("levels", 0, "must be at least 1")),
    ("Fifo(1001)", lambda: Fifo(LEVELS + 1), valued("levels", 1001, "must be at most 1000")),
    ("Fifo('2')", lambda: Fifo("2"), typed("levels", "2", "an int")),  # type: ignore[arg-type]
    ("StrictPriority(0)", lambda: StrictPriority(0), valued("levels", 0, "must be at least 1")),
    ("Aging after 0", lambda: Aging(2, after_ns=0), valued("after_ns", 0, "must be at least 1")),
    (
        "Aging after float",
        lambda: Aging(2, after_ns=1.5),  # type: ignore[arg-type]
        typed("after_ns", 1.5, NANOSECONDS),
    ),
    (
        "Aging levels 0",
        lambda: Aging(0, after_ns=SECOND),
        valued("levels", 0, "must be at least 1"),
    ),
    # shares
    ("weights str", lambda: Shares("41"), typed("weights", "41", "a sequence of ints")),
    ("weights int", lambda: Shares(4), typed("weights", 4, "a sequence of ints")),
    ("weights empty", lambda: Shares(()), valued("weights", (), "needs at least one level")),
    (
        "weights float",
        lambda: Shares((4.0, 1)),
        typed("weights[0]", 4.0, "an int"),
    ),
    (
        "weights bool",
        lambda: Shares((True, 1)),
        typed("weights[0]", True, "an int"),
    ),
    (
        "weight 0",
        lambda: Shares((4, 0)),
        valued("weights[1]", 0, "must be at least 1"),
    ),
    (
        "weights too long a cycle",
        lambda: Shares((SCHEDULE, 1)),
        valued("weights", (SCHEDULE, 1), "weights must add up to at most 1000000"),
    ),
    # schedule, public beside Shares, checks its weights as Shares does
    # (it took a bool, a weight of 0 or below, and built a cycle of 10**30)
    ("schedule int", lambda: policies.schedule(4), typed("weights", 4, "a sequence of ints")),  # type: ignore[arg-type]
    (
        "schedule bool",
        lambda: policies.schedule((1, True)),
        typed("weights[1]", True, "an int"),
    ),
    (
        "schedule weight 0",
        lambda: policies.schedule((1, 0)),
        valued("weights[1]", 0, "must be at least 1"),
    ),
    (
        "schedule too long a cycle",
        lambda: policies.schedule((10**30,)),
        valued("weights", (10**30,), "weights must add up to at most 1000000"),
    ),
    (
        "limit not a str",
        lambda: Shares((4, 1), limit=3),  # type: ignore[arg-type]
        typed("limit", 3, "the name of a limit (a str), or None for the first"),
    ),
    ("every 1", lambda: Shares.every(1), valued("n", 1, "must be at least 2")),
    (
        "every too many",
        lambda: Shares.every(SCHEDULE + 1),
        valued("n", SCHEDULE + 1, "must be at most 1000000 (one cycle of permits)"),
    ),
    (
        "shares of a limit the machine lacks",
        lambda: Machine(shares_tokens, limits=others),
        valued(
            "policy",
            shares_tokens,
            "shares the units of limit 'tokens', which the machine does not have "
            "(its limits: 'requests', 'cost')",
        ),
    ),
    # rate and burst
    (
        "rate None",
        lambda: Machine(Fifo(), None),
        typed("rate", None, "a rate (units per second), or give limits="),
    ),
    ("rate 0", lambda: Machine(Fifo(), 0), valued("rate", 0, "must be greater than 0")),
    ("rate -1", lambda: Machine(Fifo(), -1), valued("rate", -1, "must be greater than 0")),
    ("rate -0.5", lambda: Machine(Fifo(), -0.5), valued("rate", -0.5, "must be greater than 0")),
    (
        "rate nan",
        lambda: Machine(Fifo(), NAN),
        (PermitValueError, "rate", THEIRS, "rate=nan: must be finite"),
    ),
    ("rate inf", lambda: Machine(Fifo(), INF), valued("rate", INF, "must be finite")),
    (
        "rate Decimal nan",
        lambda: Machine(Fifo(), Decimal("NaN")),
        (PermitValueError, "rate", THEIRS, "rate=Decimal('NaN'): must be finite"),
    ),
    (
        "rate Decimal -1",
        lambda: Machine(Fifo(), Decimal(-1)),
        valued("rate", Decimal(-1), "must be greater than 0"),
    ),
    (
        "rate bool",
        lambda: Machine(Fifo(), True),
        typed("rate", True, "an int, float, Fraction or Decimal"),
    ),
    (
        "rate str",
        lambda: Machine(Fifo(), "10"),  # type: ignore[arg-type]
        typed("rate", "10", "an int, float, Fraction or Decimal"),
    ),
    ("burst 0", lambda: Machine(Fifo(), 1, 0), valued("burst", 0, "must be at least 1")),
    ("burst float", lambda: Machine(Fifo(), 1, 1.5), typed("burst", 1.5, "an int")),  # type: ignore[arg-type]
    ("burst bool", lambda: Machine(Fifo(), 1, True), typed("burst", True, "an int")),
    # limits
    (
        "rate and limits",
        lambda: Machine(Fifo(), 1, limits=two),
        valued("limits", two, "give rate and burst, or limits, not both (each Limit has its own)"),
    ),
    (
        "burst and limits",
        lambda: Machine(Fifo(), burst=2, limits=two),
        valued("limits", two, "give rate and burst, or limits, not both (each Limit has its own)"),
    ),
    (
        "burst True and limits",  # (True == 1: once taken for the default)
        lambda: Machine(Fifo(), burst=True, limits=two),
        valued("limits", two, "give rate and burst, or limits, not both (each Limit has its own)"),
    ),
    (
        "limits empty",
        lambda: Machine(Fifo(), limits={}),
        valued("limits", {}, "names no limit: give at least one"),
    ),
    (
        "limits a list",
        lambda: Machine(Fifo(), limits=[Limit(1)]),  # type: ignore[arg-type]
        typed("limits", [Limit(1)], "a Limit, or a non-empty mapping of names to Limits"),
    ),
    (  # a str, the wrong one: a value's error, not "expected ... non-empty strings"
        "limit name empty",
        lambda: Machine(Fifo(), limits={"": Limit(1)}),
        valued(
            "limits",
            {"": Limit(1)},
            "names a limit '' (the empty string): give each limit a name of one character or more",
        ),
    ),
    (
        "limit name an int",
        lambda: Machine(Fifo(), limits={1: Limit(1)}),  # type: ignore[dict-item]
        named_by_key({1: Limit(1)}, "1"),
    ),
    (
        "limit not a Limit",
        lambda: Machine(Fifo(), limits={"rpm": 500}),  # type: ignore[dict-item]
        typed("limits['rpm']", 500, "a Limit"),
    ),
    ("Limit rate 0", lambda: Limit(0), valued("rate", 0, "must be greater than 0")),
    ("Limit burst 0", lambda: Limit(1, 0), valued("burst", 0, "must be at least 1")),
    (
        "per_minute count 0",
        lambda: Limit.per_minute(0),
        valued("count", 0, "must be greater than 0"),
    ),
    (
        "per_minute fractional count",
        lambda: Limit.per_minute(2.5),
        valued("burst", None, "give a burst: count=2.5 is not a whole number"),
    ),
    # queue limits, window, charge, supplied
    (
        "max_waiting -1",
        lambda: Machine(Fifo(2), 1, max_waiting=-1),
        valued("max_waiting", -1, "must be at least 0"),
    ),
    (
        "max_waiting str",
        lambda: Machine(Fifo(2), 1, max_waiting="3"),  # type: ignore[arg-type]
        typed("max_waiting", "3", "an int, a sequence or None"),
    ),
    (
        "max_waiting float",
        lambda: Machine(Fifo(2), 1, max_waiting=3.0),  # type: ignore[arg-type]
        typed("max_waiting", 3.0, "an int, a sequence or None"),
    ),
    (
        "max_waiting bool",
        lambda: Machine(Fifo(2), 1, max_waiting=True),
        typed("max_waiting", True, "an int, a sequence or None"),
    ),
    (
        "max_waiting too short",
        lambda: Machine(Fifo(2), 1, max_waiting=(3,)),
        valued("max_waiting", (3,), "needs one entry per level (2)"),
    ),
    (
        "max_waiting entry -1",
        lambda: Machine(Fifo(2), 1, max_waiting=(3, -1)),
        valued("max_waiting[1]", -1, "must be at least 0"),
    ),
    (
        "max_waiting entry bool",
        lambda: Machine(Fifo(2), 1, max_waiting=(3, False)),
        typed("max_waiting[1]", False, "an int >= 0, or None (no bound)"),
    ),
    (
        "max_waiting entry float",
        lambda: Machine(Fifo(2), 1, max_waiting=(3, 1.0)),  # type: ignore[arg-type]
        typed("max_waiting[1]", 1.0, "an int >= 0, or None (no bound)"),
    ),
    (
        "settle window -1",
        lambda: Machine(Fifo(), 1, settle_window_ns=-1),
        valued("settle_window_ns", -1, "must be at least 0"),
    ),
    (
        "settle window float",
        lambda: Machine(Fifo(), 1, settle_window_ns=0.5),  # type: ignore[arg-type]
        typed("settle_window_ns", 0.5, "an int (ns) or None (never refundable)"),
    ),
    (
        "supplied 1",
        lambda: Machine(Fifo(), 1, supplied=1),  # type: ignore[arg-type]
        typed("supplied", 1, "a bool"),
    ),
    (
        "keep_waits 0",
        lambda: Machine(Fifo(), 1, keep_waits=0),  # type: ignore[arg-type]
        typed("keep_waits", 0, "a bool"),
    ),
    (
        "charge str",
        lambda: Machine(Fifo(), 1, charge="at grant"),  # type: ignore[arg-type]
        typed("charge", "at grant", "Charge.AT_GRANT or Charge.AT_SPEND"),
    ),
    (
        "supplied at spend",
        lambda: Machine(Fifo(), 1, supplied=True, charge=Charge.AT_SPEND),
        valued(
            "charge", Charge.AT_SPEND, "a supplied machine's permits are charged by their source"
        ),
    ),
    # flows
    (
        "flow_weights a list",
        lambda: Machine(Fifo(), 1, flow_weights=[1, 2]),  # type: ignore[arg-type]
        typed("flow_weights", [1, 2], "a mapping or a function from flow to weight"),
    ),
    (
        "flow weight 0",
        lambda: Machine(Fifo(), 1, flow_weights={"a": 0}),
        valued("flow_weights['a']", 0, FLOW_WEIGHT),
    ),
    (
        "flow weight too large",
        lambda: Machine(Fifo(), 1, flow_weights={"a": WEIGHT + 1}),
        valued("flow_weights['a']", WEIGHT + 1, "must be at most 1000000"),
    ),
    (
        "flow weight float",
        lambda: Machine(Fifo(), 1, flow_weights={"a": 2.0}),  # type: ignore[dict-item]
        typed("flow_weights['a']", 2.0, "an int weight"),
    ),
    (
        "flow weight bool",
        lambda: Machine(Fifo(), 1, flow_weights={"a": True}),
        typed("flow_weights['a']", True, "an int weight"),
    ),
    (
        "max_waiting_per_flow -1",
        lambda: Machine(Fifo(), 1, max_waiting_per_flow=-1),
        valued("max_waiting_per_flow", -1, "must be at least 0"),
    ),
    (
        "flow_limit unknown",
        lambda: Machine(Fifo(), limits=two, flow_limit="seconds"),
        valued("flow_limit", "seconds", "is not one of the limits ['requests', 'tokens']"),
    ),
    (
        "flow_limit a list",
        lambda: Machine(Fifo(), limits=two, flow_limit=["tokens"]),  # type: ignore[arg-type]
        typed("flow_limit", ["tokens"], "a limit's name (str)"),
    ),
    # a push's max_wait_ns (P53)
    (
        "max_wait_ns negative",
        lambda: Machine(Fifo(), 1).push("x", 0, 0, max_wait_ns=-1),
        valued("max_wait_ns", -1, "must be at least 0"),
    ),
    (
        "max_wait_ns float",
        lambda: Machine(Fifo(), 1).push("x", 0, 0, max_wait_ns=0.5),  # type: ignore[arg-type]
        typed("max_wait_ns", 0.5, NANOSECONDS),
    ),
    (
        "max_wait_ns bool",
        lambda: Machine(Fifo(), 1).push("x", 0, 0, max_wait_ns=True),
        typed("max_wait_ns", True, NANOSECONDS),
    ),
    # the checks other packages use
    ("check_int str", lambda: check_int("n", "1"), typed("n", "1", "an int")),
    ("check_int below", lambda: check_int("n", 2, 3), valued("n", 2, "must be at least 3")),
    (
        "check_rate named",
        lambda: check_rate(-2, "count"),
        valued("count", -2, "must be greater than 0"),
    ),
]


def refused(
    call: Callable[[], object], kind: type, argument: str, value: object, message: str
) -> None:
    with pytest.raises(PermitError) as info:
        call()
    error = info.value
    assert type(error) is kind, ("P18", type(error), kind)
    assert isinstance(error, PermitTypeError | PermitValueError)
    assert error.argument == argument, ("P18", error.argument)
    if value is THEIRS:
        assert str(error).startswith(f"{argument}="), ("P18", str(error))
        assert str(error).endswith(message), ("P18", str(error))
    else:
        assert error.value == value, ("P18", error.value)
        assert str(error) == message, ("P18", str(error))
    if isinstance(error, PermitTypeError):  # what it expected, on its own
        assert f": expected {error.expected}, got " in str(error), ("P18", error.expected)


@pytest.mark.parametrize(("what", "call", "refusal"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_bad_argument_is_refused_in_words(
    what: str, call: Callable[[], object], refusal: tuple[type, str, object, str]
) -> None:
    """P18: the error type, the argument named as the caller wrote it, the
    value, and the whole message."""
    refused(call, *refusal)


def test_the_bounds_are_inclusive(monkeypatch: pytest.MonkeyPatch) -> None:
    """P18's other half: the values just inside every bound are accepted, as
    what they say."""
    monkeypatch.setattr(policies, "MAX_SCHEDULE", 10)  # a cycle of 10^6 is slow to build
    assert Shares((9, 1)).weights == (9, 1)
    assert Shares.every(10).weights == (9, 1)
    with pytest.raises(PermitValueError, match="at most 10"):
        Shares((10, 1))
    with pytest.raises(PermitValueError, match="at most 10"):
        Shares.every(11)
    assert Machine(StrictPriority(LEVELS), 1).levels == LEVELS
    assert Machine(BadLevels(1), 1).levels == 1  # type: ignore[arg-type]
    assert Machine(BadLevels(Tier.GOLD), 1).levels == 3  # type: ignore[arg-type]
    assert Fifo(LEVELS).levels == LEVELS
    assert Aging(1, after_ns=1).after_ns == 1
    assert Shares((Tier.GOLD, 1)).weights == (3, 1)
    assert Shares([2, 1]).weights == (2, 1)
    assert Shares.every(2).weights == (1, 1)
    assert Shares.every(3, limit="tokens").limit == "tokens"
    machine = Machine(Fifo(2), Fraction(1, 3), 1, max_waiting=0, settle_window_ns=0)
    assert (machine.rate, machine.burst, machine.max_waiting) == (Fraction(1, 3), 1, (0, 0))
    assert machine.settle_window_ns == 0
    assert Machine(Fifo(2), 1, max_waiting=(None, 0)).max_waiting == (None, 0)
    assert Machine(Fifo(2), 1, max_waiting=[Tier.GOLD, None]).max_waiting == (3, None)
    assert Machine(Fifo(2), 1, max_waiting=Tier.GOLD).max_waiting == (3, 3)
    assert Machine(Fifo(), 0.1).rate == Fraction(1, 10)
    assert Machine(Fifo(), Decimal("0.25")).rate == Fraction(1, 4)
    assert Machine(Fifo(), Tier.GOLD, Tier.GOLD).burst == 3
    assert Machine(Fifo(), limits=Limit(2, 3)).limits == {"units": Limit(2, 3)}
    assert Machine(Fifo(), 2, 3).limits == {"units": Limit(2, 3)}  # one limit's name
    machine = Machine(Fifo(), limits=two, flow_limit="tokens", max_waiting_per_flow=0)
    assert machine.limits == two
    assert machine.queues.flow_limit == 1  # the flows share tokens
    assert Machine(Fifo(), 1, supplied=True).supplied
    assert Machine(Fifo(), 1, charge=Charge.AT_SPEND).charge is Charge.AT_SPEND
    weights = Machine(Fifo(), 1, flow_weights={"a": 1, "b": WEIGHT, "c": Tier.GOLD})
    weights.push("banked", 0, 0)  # granted at once: "x" waits
    weights.push("x", 0, 0, flow="b")
    assert weights.queues.fairness()[0][1] == WEIGHT  # its weight, read
    assert Limit.per_minute(500) == Limit(Fraction(500, 60), 500)
    assert Limit.per_minute(600, burst=10) == Limit(10, 10)
    assert Limit.per_hour(3600, burst=2) == Limit(1, 2)
    assert Limit.per_second(2.5, burst=3) == Limit(Fraction(5, 2), 3)
    assert check_rate(numpy_like(2.5)) == Fraction(5, 2)
    assert check_int("n", Tier.GOLD, 3) == 3
    assert repr(Machine(Fifo(2), 3, 2, max_waiting=4, charge=Charge.AT_SPEND)) == (
        "Machine(policy=Fifo(levels=2), rate=Fraction(3, 1), burst=2, max_waiting=(4, 4), "
        "settle_window_ns=1000000000, supplied=False, charge=Charge.AT_SPEND)"
    )
    assert repr(Machine(Fifo(), limits=two, settle_window_ns=5)) == (
        f"Machine(policy=Fifo(levels=1), limits={two!r}, max_waiting=None, "
        "settle_window_ns=5, supplied=False, charge=Charge.AT_GRANT)"
    )
    assert type(check_int("n", Tier.GOLD)) is int


class numpy_like(float):
    """A float subclass whose repr is not a number's, as numpy.float64's is not."""

    def __repr__(self) -> str:
        return f"numpy_like({float(self)!r})"


@given(
    rate=st.one_of(
        st.integers(max_value=0),
        st.floats(max_value=0),
        st.sampled_from([NAN, INF, -INF]),
        st.fractions(max_value=0),
    )
)
def test_no_rate_at_or_below_zero_or_unbounded(rate: Any) -> None:
    """P18: a rate that is not a finite number above 0 is refused, naming
    ``rate``, whatever its type."""
    with pytest.raises(PermitValueError) as info:
        Machine(Fifo(), rate)
    assert info.value.argument == "rate"
    assert str(info.value).startswith("rate="), "P18"
    reason = "must be finite" if isinstance(rate, float) and not math.isfinite(rate) else None
    assert info.value.reason == (reason or "must be greater than 0"), "P18"


class Stuck:
    """A policy that names a level nobody waits at."""

    levels = 2

    def choose(self, queues: object, now: int) -> int:
        return 1

    def ahead(self, queues: object, level: int, now: int) -> int:
        return 0

    def __repr__(self) -> str:
        return "Stuck()"


def _fields(full: QueueFull) -> tuple[object, ...]:
    return (full.id, full.level, full.max_waiting, full.flow, full.per_flow)


def test_the_operations_errors_in_words() -> None:
    """P18 for the errors of a running machine: each carries what it is
    about, and says it in these words."""
    machine = Machine(Fifo(2), 1, 1, max_waiting=(1, None), max_waiting_per_flow=1)
    machine.push("banked", 0, 0)  # granted at once
    machine.push("x", 0, 0)  # waits: level 0 is full now
    with pytest.raises(DuplicateId) as duplicate:
        machine.push("x", 1, 0)
    assert (duplicate.value.id, duplicate.value.argument, duplicate.value.value) == ("x", "id", "x")
    assert str(duplicate.value) == "id='x': this id is already waiting, or its permit is in flight"
    with pytest.raises(DuplicateId):
        machine.take("x", 1, 0)  # a take refuses it as a push does
    with pytest.raises(PermitTypeError) as not_bool:
        machine.take("t", 0, 0, settle_later=1)  # type: ignore[arg-type]
    assert (not_bool.value.argument, not_bool.value.value) == ("settle_later", 1)
    assert str(not_bool.value) == "settle_later=1: expected a bool, got int"
    for operation in (machine.push, machine.take):
        with pytest.raises(PermitTypeError) as unhashable:
            operation(["x"], 0, 0)  # type: ignore[arg-type]
        assert (unhashable.value.argument, unhashable.value.value) == ("id", ["x"])
        assert str(unhashable.value) == "id=['x']: expected a hashable value, got list"
    with pytest.raises(NotRefundable) as refused:
        machine.refund("y", 0)
    assert (refused.value.id, refused.value.argument) == ("y", "id")
    assert str(refused.value) == (
        "id='y': holds no permit to refund or settle (never granted, already refunded or "
        "settled, spent, pushed again, or charged longer ago than settle_window_ns)"
    )
    machine.tick(5)
    with pytest.raises(TimeWentBackwards) as back:
        machine.tick(3)
    assert (back.value.last, back.value.argument, back.value.value) == (5, "now", 3)
    assert str(back.value) == "now=3: time went backwards (the machine is at 5)"
    machine.push("z", 1, 5, flow="f")  # waits: flow f of level 1 is full now
    full = machine.queue_full("w", 0)
    assert _fields(full) == ("w", 0, 1, None, False)
    assert str(full) == "id='w' rejected: level 0 already has 1 waiter (max_waiting=1)"
    full = machine.queue_full("v", 1, "f")
    assert _fields(full) == ("v", 1, 1, "f", True)
    assert str(full) == (
        "id='v' rejected: flow 'f' of level 1 already has 1 waiter (max_waiting_per_flow=1)"
    )
    none = QueueFull(None, 2, 0, flow="f", per_flow=True)  # an acquire's, max_waiting 0
    assert str(none) == "rejected: flow 'f' of level 2 takes no waiters (max_waiting_per_flow=0)"
    stuck = Machine(Stuck(), 1, 1)
    with pytest.raises(PolicyError) as broken:
        stuck.push("a", 0, 0)  # the policy names level 1, where nobody waits
    assert str(broken.value) == (
        "Stuck().choose() returned 1, not a level with waiters (depths [1, 0])"
    )
    assert tuple(broken.value.decisions) == ()


def test_shares_outside_a_machine_says_so() -> None:
    """A Shares policy asked to choose by hand, without the deal a machine
    keeps for it, says where to run it."""
    from permits.core import Queues

    with pytest.raises(AssertionError) as outside:
        Shares((1, 1)).choose(Queues(2), 0)
    assert str(outside.value) == "Shares needs the Deal its start() made (run it in a Machine)"


def test_the_head_of_an_empty_level_says_so() -> None:
    """A policy of one's own that asks ``queues.head(level)`` of a level
    nobody waits at is told which level, not handed a bare IndexError."""
    from permits.core import Queues

    with pytest.raises(IndexError) as empty:
        Queues(2).head(1)
    assert str(empty.value) == "level 1 has no waiters"


class Answers:
    """A policy of two levels that answers ``answer`` when it is set (the
    first waiting level otherwise), and notes the time each choice is asked at."""

    levels = 2

    def __init__(self) -> None:
        self.answer: object = None
        self.asked_at: list[object] = []

    def choose(self, queues: Any, now: int) -> int:
        self.asked_at.append(now)
        if self.answer is None:
            return next(level for level, depth in enumerate(queues.depths) if depth)
        return self.answer  # type: ignore[return-value]

    def ahead(self, queues: object, level: int, now: int) -> int:
        self.asked_at.append(now)
        return 0

    def __repr__(self) -> str:
        return "Answers()"


def test_a_histogram_and_in_seconds_refuse_what_is_no_wait() -> None:
    """P18 for the public ``WaitHistogram`` and ``in_seconds``: a wait is a
    whole number of ns ``>= 0`` and a quantile's ``q`` a number from 0 to
    1. A negative wait was counted (its total and count corrupted), a
    float raised ``AttributeError``, a ``bool`` was a nanosecond; each is
    refused in words, the histogram as it was."""
    histogram = WaitHistogram()
    histogram.record(5)
    before = (histogram.count, histogram.total, histogram.max, histogram.items())
    for bad, refusal in [
        (-1, valued("wait", -1, "must be at least 0")),
        (1.5, typed("wait", 1.5, "an int")),
        (True, typed("wait", True, "an int")),
        ("3", typed("wait", "3", "an int")),
    ]:
        refused(functools.partial(histogram.record, bad), *refusal)  # type: ignore[arg-type]
        assert (histogram.count, histogram.total, histogram.max, histogram.items()) == before
    for q, refusal in [
        (1.5, valued("q", 1.5, "must be between 0 and 1")),
        (-0.5, valued("q", -0.5, "must be between 0 and 1")),
        ("0.5", typed("q", "0.5", "a number between 0 and 1")),
        (True, typed("q", True, "a number between 0 and 1")),
    ]:
        refused(functools.partial(histogram.quantile, q), *refusal)  # type: ignore[arg-type]
    assert histogram.quantile(0.5) == histogram.quantile(Decimal("0.5")) == 5
    not_ns: list[Any] = [1.5, True]
    for ns in not_ns:
        refused(functools.partial(in_seconds, ns), *typed("ns", ns, "an int"))


def test_the_queries_errors_in_words() -> None:
    """P18 for the queries, and for what only a paced or only a supplied
    machine does: each refusal in its words, the state as it was."""
    plain = Machine(Fifo(2), 1, 1)
    refused(
        lambda: plain.queue_full("w", 0),
        *valued(
            "level",
            0,
            "has no max_waiting, nor its flows a max_waiting_per_flow: no push to it is rejected",
        ),
    )
    full = Machine(Fifo(2), 1, 1, max_waiting_per_flow=1).queue_full("w", 1, "f")
    assert _fields(full) == ("w", 1, 1, "f", True)
    roomy = Machine(Fifo(2), 1, 1, max_waiting=2, max_waiting_per_flow=1)
    roomy.push("banked", 0, 0)  # granted at once
    roomy.push("x", 0, 0, flow="f")  # waits: its level has room, flow f has not
    full = roomy.queue_full("y", 0, "f")
    assert _fields(full) == ("y", 0, 1, "f", True)

    sequence = "a sequence of ints (nanoseconds)"
    for bad, refusal in [
        ("12", typed("bounds_ns", "12", sequence)),
        (5, typed("bounds_ns", 5, sequence)),
        # a bad entry named by its entry (P18), as max_waiting[1]=-1 is
        ([1, -1], valued("bounds_ns[1]", -1, "must be at least 0")),
        ([1.0], typed("bounds_ns[0]", 1.0, NANOSECONDS)),
        ([0, True], typed("bounds_ns[1]", True, NANOSECONDS)),
        ([2, 1], valued("bounds_ns", [2, 1], "must be in ascending order")),
    ]:
        refused(functools.partial(plain.waits_at_most, 0, bad), *refusal)  # type: ignore[arg-type]
    refused(
        lambda: plain.waits_at_most(2, [1]),
        *valued("level", 2, "must be 0 or 1 (the policy has 2 levels)"),
    )
    assert plain.waits_at_most(1, []) == ()

    plain.tick(5)
    before = plain.snapshot()
    refused(
        functools.partial(plain.pause_until, 3, 5), *valued("until", 3, "is in the past (now is 5)")
    )
    refused(
        functools.partial(plain.adopt, 1, 4, 5), *valued("reset", 4, "is in the past (now is 5)")
    )
    assert plain.snapshot() == before, "P18"
    for paced in (plain, Machine(Fifo(), limits=two)):
        before = paced.snapshot()
        for owed in (None, 0):
            refused(
                functools.partial(paced.supply, 5, owed),
                *valued(
                    "supplied",
                    False,
                    "supply() is for a supplied machine (supplied=True), not a paced one",
                ),
            )
            assert paced.snapshot() == before, "P18"
        refused(
            functools.partial(paced.next_level, 0),
            *valued(
                "owed",
                0,
                "next_level(owed=...) is for a supplied machine (supplied=True), not a paced one",
            ),
        )
        refused(
            functools.partial(paced.settled, 0, 1, {}),  # an actual that fits both
            *valued(
                "supplied",
                False,
                "settled() is for a supplied machine (supplied=True), not a paced one",
            ),
        )
        refused(
            functools.partial(paced.paused, 10, 5),  # (at its time, 5)
            *valued(
                "supplied",
                False,
                "paused() is for a supplied machine (supplied=True), not a paced one",
            ),
        )
        refused(
            functools.partial(paced.too_long, 0, 2, 1),
            *valued(
                "supplied",
                False,
                "too_long() is for a supplied machine (supplied=True), not a paced one",
            ),
        )
        assert paced.snapshot() == before, "P18"
    supplied = Machine(Fifo(), 1, 1, supplied=True)
    supplied.push("a", 0, 0)  # waits for a permit from outside
    before = supplied.snapshot()
    for call, argument, value, what in [
        (lambda: supplied.settle("a", 1, 0), "id", "a", "settle()"),
        (lambda: supplied.pause_until(5, 0), "until", 5, "pause_until()"),
        (lambda: supplied.adopt(1, 5, 0), "remaining", 1, "adopt()"),
    ]:
        refusal = valued(argument, value, f"{what} is for a paced machine, not supplied=True")
        refused(call, *refusal)
        assert supplied.snapshot() == before, "P18"
    for owing in (functools.partial(supplied.supply, 0), supplied.next_level):
        for bad, refusal in [
            (1, valued("owed", 1, "must be 0 (the policy has one level)")),
            (-1, valued("owed", -1, "must be 0 (the policy has one level)")),
            ("0", typed("owed", "0", "an int")),
            (True, typed("owed", True, "an int")),
        ]:
            refused(functools.partial(owing, owed=bad), *refusal)  # type: ignore[arg-type]
            assert supplied.snapshot() == before, "P18"
    ints = "an int, or a mapping of limit names to ints"
    settled: Any = supplied.settled  # called with bad types on purpose
    for told, refusal in [
        (
            lambda: settled(1, 1, 0),
            valued("level", 1, "must be 0 (the policy has one level)"),
        ),
        (lambda: settled("0", 1, 0), typed("level", "0", "an int")),
        (lambda: settled(0, -1, 0), valued("cost", -1, "must be at least 0")),
        (lambda: settled(0, 1, 1.5), typed("actual", 1.5, ints)),
        (
            lambda: settled(0, 1, {"tokens": 2}),
            valued(
                "actual",
                {"tokens": 2},
                "'tokens' is not one of the limits ['units']",
            ),
        ),
    ]:
        refused(told, *refusal)
        assert supplied.snapshot() == before, "P18"
    paused: Any = supplied.paused  # called with bad types on purpose
    at = supplied.snapshot().now
    assert at is not None
    went = f"now={at - 1}: time went backwards (the machine is at {at})"
    for told, refusal in [
        (lambda: paused(at + 5, at - 1), (TimeWentBackwards, "now", at - 1, went)),
        (lambda: paused(5.0, at), typed("until", 5.0, "an int")),
        (lambda: paused(at - 1, at), valued("until", at - 1, f"is in the past (now is {at})")),
    ]:
        refused(told, *refusal)
        assert supplied.snapshot() == before, "P18"
    too_long: Any = supplied.too_long  # called with bad types on purpose
    ns_int = "an int of nanoseconds (seconds * SECOND, from permits.core)"
    for told, refusal in [
        (lambda: too_long("a", -1, 0), valued("wait_ns", -1, "must be at least 0")),
        (lambda: too_long("a", 2, -1), valued("max_wait_ns", -1, "must be at least 0")),
        (lambda: too_long("a", 1.5, 0), typed("wait_ns", 1.5, ns_int)),
        (lambda: too_long("a", 2, None), typed("max_wait_ns", None, ns_int)),
    ]:
        refused(told, *refusal)
        assert supplied.snapshot() == before, "P18"


def test_the_source_outside_tells_only_of_permits_the_machine_granted() -> None:
    """P18, P20: ``refunded()`` and ``settled()`` tell a supplied machine of
    a permit it granted; one of a permit it never granted (more permits
    than it holds granted, or more units) is refused, and changes nothing:
    the statistics went negative on it."""
    machine = Machine(Fifo(), limits={"requests": Limit(1), "tokens": Limit(1, 100)}, supplied=True)

    def told(call: str, cost: object, held: int, requests: int, tokens: int) -> tuple[Any, ...]:
        return valued(
            "cost",
            cost,
            f"is more than level 0 holds granted ({held} permits not given back, of "
            f"requests={requests}, tokens={tokens}): {call}() tells of a permit this "
            "machine granted there",
        )

    before = machine.snapshot()
    refused(lambda: machine.refunded(0, 1), *told("refunded", 1, 0, 0, 0))
    refused(lambda: machine.settled(0, 1, {"tokens": 0}), *told("settled", 1, 0, 0, 0))
    assert machine.snapshot() == before, "P18"
    machine.push("a", 0, 0, cost={"requests": 1, "tokens": 40})
    assert [d.id for d in machine.supply(0)] == ["a"]
    before = machine.snapshot()
    more = {"requests": 1, "tokens": 41}
    refused(lambda: machine.refunded(0, more), *told("refunded", more, 1, 1, 40))
    refused(lambda: machine.settled(0, more, {"tokens": 0}), *told("settled", more, 1, 1, 40))
    assert machine.snapshot() == before, "P18"
    machine.refunded(0, {"requests": 1, "tokens": 40})
    (level,) = machine.statistics().levels
    assert (level.granted, level.refunded, level.units_granted) == (1, 1, (0, 0))
    refused(
        lambda: machine.refunded(0, {"requests": 0, "tokens": 0}),
        *told("refunded", {"requests": 0, "tokens": 0}, 0, 0, 0),
    )


def test_a_policy_that_breaks_its_protocol_says_so() -> None:
    """P18 for a policy's answers: one that names no level with waiters (one
    without, one out of range, not an int) raises PolicyError in these words,
    before any grant, from every call that asks it (``next_level``, and a
    cancel that re-plans), with the decisions made before it (none here)."""
    for answer in (1, 2, -1, 5, "0", 0.0, True):
        policy = Answers()
        supplied = Machine(policy, 1, 1, supplied=True)
        supplied.push("a", 0, 0)  # waits: the policy is asked nothing yet
        policy.answer = answer
        with pytest.raises(PolicyError) as broken:
            supplied.next_level()
        assert str(broken.value) == (
            f"Answers().choose() returned {answer!r}, not a level with waiters (depths [1, 0])"
        ), ("P18", answer)
        assert broken.value.decisions == (), ("P18", answer)
        assert supplied.tick(SECOND) == []  # a tick asks nothing: no permit at hand
        with pytest.raises(PolicyError):
            supplied.supply(SECOND)

        policy = Answers()
        paced = Machine(policy, 1, 3)
        paced.push("a", 0, 0, cost=3)  # granted at once: the bucket is empty
        paced.push("b", 0, 0, cost=2)
        paced.push("c", 0, 0)
        policy.answer = answer
        with pytest.raises(PolicyError) as broken:
            paced.cancel("b")  # c is next: the policy is asked who heads the line
        assert str(broken.value) == (
            f"Answers().choose() returned {answer!r}, not a level with waiters (depths [1, 0])"
        ), ("P18", answer)
        assert broken.value.decisions == (), ("P18", answer)

        policy = Answers()
        paced = Machine(policy, 1, 1)
        paced.push("a", 0, 0)  # granted at once
        paced.push("b", 0, 0, deadline=5)
        paced.push("c", 0, 0)
        policy.answer = answer
        with pytest.raises(PolicyError) as broken:
            paced.tick(SECOND)  # b expires, then the policy is asked who gets c's permit
        expired = [(d.id, d.state) for d in broken.value.decisions]  # type: ignore[attr-defined]
        assert expired == [("b", State.EXPIRED)], ("P18", answer, expired)


class Ahead:
    """A policy of one level whose ``ahead`` answers ``answer``."""

    levels = 1

    def __init__(self, answer: object) -> None:
        self.answer = answer

    def choose(self, queues: object, now: int) -> int:
        return 0

    def ahead(self, queues: object, level: int, now: int) -> int:
        return self.answer  # type: ignore[return-value]

    def __repr__(self) -> str:
        return "Ahead()"


def test_a_policy_whose_ahead_is_no_count_says_so() -> None:
    """P18 for ``ahead``: an answer that is no count of waiters (an int >= 0)
    raises PolicyError in these words from ``min_wait``, and from a push with
    ``max_wait_ns``, which asks it after its tick, with the decisions that
    tick made (a raw TypeError lost them: a waiter granted, never told)."""
    for answer in (None, "1", 1.5, True, -1):
        machine = Machine(Ahead(answer), 1, 1)
        machine.push("a", 0, 0)  # granted at once
        machine.push("b", 0, 0)  # due at 1 s
        words = f"Ahead().ahead() returned {answer!r}, not a count of waiters (an int >= 0)"
        with pytest.raises(PolicyError) as broken:
            machine.min_wait(0)
        assert (str(broken.value), broken.value.decisions) == (words, ()), ("P18", answer)
        with pytest.raises(PolicyError) as broken:
            machine.push("c", 0, SECOND, max_wait_ns=0)
        assert str(broken.value) == words, ("P18", answer)
        granted = [(d.id, d.state) for d in broken.value.decisions]  # type: ignore[attr-defined]
        assert granted == [("b", State.GRANTED)], ("P18", answer, granted)


def test_a_policy_is_asked_at_the_machines_time() -> None:
    """A policy's ``choose`` is given the machine's latest time whoever asks
    it: a grant, ``next_level``, or a cancel that re-plans the next cost;
    after that cancel the next permit is due when the new head's cost fits
    (P2, P13: ``next_due`` is the chosen waiter's). ``next_level`` is
    ``None`` while nobody waits."""
    policy = Answers()
    machine = Machine(policy, 1, 3)
    assert machine.next_level() is None
    machine.push("a", 0, 0, cost=3)  # granted at once: the bucket is empty
    machine.push("b", 0, 10, cost=1)
    machine.push("c", 1, 20, cost=2)
    machine.tick(30)
    assert machine.next_level() == 0
    assert set(policy.asked_at) <= {0, 10, 20, 30}, policy.asked_at
    assert policy.asked_at[-1] == 30, policy.asked_at
    machine.cancel("b")
    assert policy.asked_at[-1] == 30, policy.asked_at
    assert machine.next_level() == 1
    machine.min_wait(1)
    assert policy.asked_at[-1] == 30, policy.asked_at
    # 3 units charged at 0 from the full bucket: c's 2 are back at 2 s (1 unit at 1 s)
    assert machine.next_due() == 2 * SECOND, ("P13", machine.next_due())
    assert [d.id for d in machine.tick(2 * SECOND - 1)] == [], "P13"
    granted = [d.id for d in machine.tick(2 * SECOND) if d.state is State.GRANTED]
    assert granted == ["c"], "P2"
    machine.tick(3 * SECOND)
    assert machine.next_level() is None


def test_the_changes_of_a_limit_in_words() -> None:
    """P18 for ``set_limit``, ``adopt`` and ``quota``: the limit named (required when
    there are several), a burst no smaller than a waiting cost, every refusal
    in its words and the state as it was; P30 for what is accepted: a burst
    equal to the waiting cost, and either of rate and burst kept when not given."""
    names = "['requests', 'tokens']"
    both = Machine(Fifo(), limits=two)
    both.tick(0)
    before = both.snapshot()
    for call, refusal in [
        (
            functools.partial(both.set_limit, 0, rate=5),
            valued("limit", None, f"name one of the machine's limits ({names})"),
        ),
        (
            functools.partial(both.adopt, 1, 5, 0),
            valued("limit", None, f"name one of the machine's limits ({names})"),
        ),
        (
            functools.partial(both.quota, 1, 5, 0),
            valued("limit", None, f"name one of the machine's limits ({names})"),
        ),
        (
            functools.partial(both.quota, -1, 5, 0, limit="tokens"),
            valued("remaining", -1, "must be at least 0"),
        ),
        (
            functools.partial(both.set_limit, 0, rate=5, limit=3),  # type: ignore[arg-type]
            typed("limit", 3, "a limit's name (str)"),
        ),
        (
            functools.partial(both.set_limit, 0, rate=5, limit="seconds"),
            valued("limit", "seconds", f"is not one of the limits {names}"),
        ),
    ]:
        refused(call, *refusal)
        assert both.snapshot() == before, "P18"
    one = Machine(Fifo(), 1, 3)
    one.push("a", 0, 0, cost=3)  # granted at once: the bucket is empty
    one.push("b", 0, 0, cost=3)  # waits
    before = one.snapshot()
    for call, refusal in [
        (
            functools.partial(one.set_limit, 0, burst=2),
            valued(
                "burst",
                2,
                "a waiter asks for 3 units of 'units'; it could never fit: "
                "give a burst of at least 3, or cancel it first",
            ),
        ),
        (functools.partial(one.set_limit, 0, burst=0), valued("burst", 0, "must be at least 1")),
        (functools.partial(one.adopt, 1, "5", 0), typed("reset", "5", "an int")),  # type: ignore[arg-type]
        (functools.partial(one.quota, 1, "5", 0), typed("reset", "5", "an int")),  # type: ignore[arg-type]
    ]:
        refused(call, *refusal)
        assert one.snapshot() == before, "P18"
    assert one.set_limit(0, burst=3) == []  # as large as the waiting cost: it fits
    assert one.limits == {"units": Limit(1, 3)}, "P30"
    assert one.set_limit(0, rate=2) == []
    assert one.limits == {"units": Limit(2, 3)}, "P30"
    # A waiter whose deadline is the change's time does not count: the
    # change's tick expires it before the new burst holds.
    late = Machine(Fifo(), 1, 3)
    late.push("a", 0, 0, cost=3)  # granted at once: the bucket is empty
    late.push("b", 0, 0, cost=3, deadline=SECOND // 2)
    refused(
        functools.partial(late.set_limit, SECOND // 2 - 1, burst=2),
        *valued(
            "burst",
            2,
            "a waiter asks for 3 units of 'units'; it could never fit: "
            "give a burst of at least 3, or cancel it first",
        ),
    )
    (expired,) = late.set_limit(SECOND // 2, burst=2)
    assert (expired.id, expired.state) == ("b", State.EXPIRED), "P30"
    assert late.limits == {"units": Limit(1, 2)}, "P30"


def test_a_raised_rate_paces_the_waiter_from_where_it_stands() -> None:
    """P30 by hand: half a unit accrued at rate 1 is carried over to rate 2,
    so the waiter's unit is due a quarter of a second later, not a whole one."""
    machine = Machine(Fifo(), 1, 1)
    machine.push("a", 0, 0)  # granted at once
    machine.push("b", 0, 0)  # due at 1 s at rate 1
    assert machine.set_limit(SECOND // 2, rate=2) == []
    assert machine.next_due() == SECOND * 3 // 4, ("P30", machine.next_due())
    assert [d.id for d in machine.tick(SECOND * 3 // 4)] == ["b"], "P30"


def test_spend_and_refund_by_hand() -> None:
    """P18, P23 and P3 at chosen times: ``settle_later`` must be a bool; a
    permit spent (without ``settle_later``, the default) can no longer be
    settled; one spent to be settled later cannot be refunded, and a second
    spend of it changes nothing, so it can still be settled; refunds are
    counted one by one."""
    machine = Machine(Fifo(), 1, 3)
    for id in "abcd":
        machine.push(id, 0, 0)  # a, b, c granted at once; d waits
    before = machine.snapshot()
    refused(
        functools.partial(machine.spend, "a", 0, settle_later=1),  # type: ignore[arg-type]
        *typed("settle_later", 1, "a bool"),
    )
    assert machine.snapshot() == before, "P18"
    unhashable: Any = ["a"]
    refused(
        functools.partial(machine.spend, unhashable, 0), *typed("id", ["a"], "a hashable value")
    )
    machine.push("e", Tier.ZERO, 0)  # an int subclass as level 0
    assert [w.id for w in machine.waiting(0)] == ["d", "e"], "P18"
    assert machine.cancel("e")
    machine.spend("a", 0)
    with pytest.raises(NotRefundable):
        machine.settle("a", 1, 0)
    machine.spend("b", 0, settle_later=True)
    with pytest.raises(NotRefundable):
        machine.refund("b", 0)
    machine.spend("b", 0)  # spent already: nothing changes
    machine.settle("b", 1, 0)
    machine.refund("c", 0)  # d takes c's unit
    machine.refund("d", 0)
    assert machine.statistics().levels[0].refunded == 2, "P3"


class LazyWeights(Mapping[Hashable, Any]):
    """A mapping of flow weights computed as they are read: it lists no flow,
    so the machine can check a weight only when a push reads it."""

    def __init__(self, weights: dict[Hashable, Any]) -> None:
        self.weights = weights

    def __getitem__(self, flow: Hashable) -> Any:
        return self.weights[flow]

    def __iter__(self) -> Iterator[Hashable]:
        return iter(())

    def __len__(self) -> int:
        return 0


def test_the_costs_and_weights_errors_in_words() -> None:
    """P18 for what a push asks for: every bad cost (none of any limit, more
    than a burst, a limit the machine lacks, units below 0 or not ints, not
    an int nor a mapping) refused by push, take, min_wait and settle in its
    words (settle names ``actual``; min_wait refuses more than a burst too,
    settle not: that is a debt), and a flow's weight checked as it is
    read (a function's, or a mapping's that computes it), naming the flow
    and keeping what the function raised; the state as it was. A mapping
    that is not a dict is a cost like a dict; a flow the weights do not
    name weighs 1."""
    machine = Machine(Fifo(), limits=two)
    machine.push("banked", 0, 0, cost={"requests": 10, "tokens": 500})  # granted at once
    machine.push("x", 0, 0, cost={"tokens": 5})  # waits
    before = machine.snapshot()
    nothing = "must take at least one unit of some limit"
    unknown = {"cost": 1}
    bads: list[tuple[Any, tuple[type, str, object, str]]] = [
        (0, valued("cost", 0, nothing)),
        ({"tokens": 0}, valued("cost", {"tokens": 0}, nothing)),
        ({}, valued("cost", {}, nothing)),
        (
            {"tokens": 501},
            valued("cost['tokens']", 501, "exceeds the burst (500): it could never be granted"),
        ),
        (
            11,
            valued(
                "cost",
                11,
                "exceeds the burst of limit 'requests' (10): it could never be granted",
            ),
        ),
        (
            unknown,
            valued("cost", unknown, f"'cost' is not one of the limits {two_names}"),
        ),
        # a mapping's bad entry is named by its limit, as a flow's weight is
        ({"tokens": -1}, valued("cost['tokens']", -1, "must be at least 0")),
        (-1, valued("cost", -1, nothing)),  # refused as 0 is, by one rule
        ({"tokens": 1.0}, typed("cost['tokens']", 1.0, "an int of units")),
        ("3", typed("cost", "3", "an int, or a mapping of limit names to ints")),
        (True, typed("cost", True, "an int, or a mapping of limit names to ints")),
        (2.0, typed("cost", 2.0, "an int, or a mapping of limit names to ints")),
    ]
    for bad, refusal in bads:
        for operation in (machine.push, machine.take):
            refused(functools.partial(operation, "y", 0, 0, cost=bad), *refusal)
            assert machine.snapshot() == before, ("P18", bad)
        if refusal[3].endswith("it could never be granted"):
            # no wait to tell for a push that would be refused (an acquire
            # with max_wait said it "would wait too long")
            refused(functools.partial(machine.min_wait, 0, cost=bad), *refusal)
        elif nothing not in refusal[3]:  # a bad number, type or name: refused by all
            refused(functools.partial(machine.min_wait, 0, cost=bad), *refusal)
            kind, argument, value, message = refusal
            actual = (
                kind,
                argument.replace("cost", "actual", 1),
                value,
                message.replace("cost", "actual", 1),
            )
            refused(functools.partial(machine.settle, "banked", bad, 0), *actual)
            assert machine.snapshot() == before, ("P18", bad)
    one_number = valued(
        "actual",
        900,
        f"is one number for several limits ({two_names}): name the units of each limit it "
        "settles, such as {'tokens': 900} (a limit left out keeps the units its permit asked for)",
    )
    refused(functools.partial(machine.settle, "banked", 900, 0), *one_number)
    # min_wait and settle take a cost of 0 (nothing ahead; a call that used
    # nothing), so a negative one is below their least, 0
    negative = valued("cost", -1, "must be at least 0")
    refused(functools.partial(machine.min_wait, 0, cost=-1), *negative)
    refused(
        functools.partial(machine.settle, "banked", -1, 0),
        *valued("actual", -1, "must be at least 0"),
    )
    assert machine.snapshot() == before, "P18"
    assert machine.snapshot() == before, "P18: which limit would one number settle?"
    assert machine.min_wait(0, cost={"tokens": 0}) == machine.min_wait(0, cost=0), "P18"
    proxied = Machine(Fifo(), limits=two)
    proxied.push("banked", 0, 0, cost=MappingProxyType({"requests": 10, "tokens": 500}))
    proxied.push("x", 0, 0, cost=MappingProxyType({"tokens": 5}))
    assert proxied.snapshot() == before, "P18: a mapping that is not a dict"

    bad_weights: dict[Hashable, Any] = {"zero": 0, "half": 0.5}

    def weigh(flow: Hashable) -> Any:
        if flow == "boom":
            raise KeyError(flow)
        return bad_weights.get(flow, 2)

    lazy = LazyWeights({"zero": 0, "half": 0.5, "boom": "9"})
    every: tuple[Any, ...] = (weigh, lazy)
    for weights in every:
        weighted = Machine(Fifo(), 1, 1, flow_weights=weights)
        weighted.push("banked", 0, 0)  # granted at once
        weighted.push("x", 0, 0, flow="two")  # waits
        before = weighted.snapshot()
        entry = "flow_weights({!r})" if weights is weigh else "flow_weights[{!r}]"
        refusals = [
            ("zero", valued(entry.format("zero"), 0, FLOW_WEIGHT)),
            ("half", typed(entry.format("half"), 0.5, "an int weight")),
        ]
        if weights is weigh:
            raised = f"flow_weights={weigh!r}: raised KeyError('boom') for flow 'boom'"
            refusals.append(("boom", (PermitValueError, "flow_weights", weigh, raised)))
        else:
            refusals.append(("boom", typed("flow_weights['boom']", "9", "an int weight")))
        for flow, refusal in refusals:
            for operation in (weighted.push, weighted.take):
                with pytest.raises(PermitError) as info:
                    operation("y", 0, 0, flow=flow)
                refused(functools.partial(operation, "y", 0, 0, flow=flow), *refusal)
                assert weighted.snapshot() == before, ("P18", flow)
                if flow == "boom" and weights is weigh:
                    assert isinstance(info.value.__cause__, KeyError), ("P18", info.value.__cause__)
        weighted.push("y", 0, 0, flow="unnamed")
        expected = 2 if weights is weigh else 1  # the lazy mapping names no such flow
        level: Any = weighted.queues.fairness()[0]
        assert level[3][:2] == ("unnamed", expected), ("P18", level)


def test_the_levels_times_and_ids_errors_in_words() -> None:
    """P18 for the arguments every operation shares: a level that is no int
    or outside the policy's, a ``now`` that is no int, an id or flow that is
    not hashable, refused in their words by each operation that takes them,
    carrying the value the caller gave; the state as it was."""
    machine = Machine(Fifo(2), 1, 1)
    machine.push("banked", 0, 0)  # granted at once
    machine.push("x", 1, 0)  # waits
    before = machine.snapshot()
    below = "must be 0 or 1 (the policy has 2 levels)"
    levels: list[tuple[Any, tuple[type, str, object, str]]] = [
        (0.0, typed("level", 0.0, "an int")),
        (1.0, typed("level", 1.0, "an int")),
        ("0", typed("level", "0", "an int")),
        (True, typed("level", True, "an int")),
        (2, valued("level", 2, below)),
        (-1, valued("level", -1, below)),
    ]
    for bad, refusal in levels:
        for call in (
            functools.partial(machine.push, "y", bad, 0),
            functools.partial(machine.take, "y", bad, 0),
            functools.partial(machine.waiting, bad),
            functools.partial(machine.min_wait, bad),
            functools.partial(machine.waits_at_most, bad, [1]),
        ):
            refused(call, *refusal)
            assert machine.snapshot() == before, ("P18", bad)
    # A take's quickest case (the clock running, nobody waiting, nothing
    # held) refuses them in the same words.
    idle = Machine(Fifo(2), 1, 1, settle_window_ns=None)
    idle.tick(0)
    idle_before = idle.snapshot()
    for bad, refusal in levels:
        refused(functools.partial(idle.take, "y", bad, 0), *refusal)
        assert idle.snapshot() == idle_before, ("P18", bad)
    times: tuple[Any, ...] = (5.0, "5", None)
    for bad in times:
        for call in (
            functools.partial(machine.tick, bad),
            functools.partial(machine.push, "y", 0, bad),
            functools.partial(machine.refund, "banked", bad),
            functools.partial(machine.spend, "banked", bad),
        ):
            refused(call, *typed("now", bad, "an int"))
            assert machine.snapshot() == before, ("P18", bad)
        refused(functools.partial(idle.take, "y", 0, bad), *typed("now", bad, "an int"))
        assert idle.snapshot() == idle_before, ("P18", bad)
    unhashable: Any = ["x"]
    refused(functools.partial(machine.cancel, unhashable), *typed("id", ["x"], "a hashable value"))
    tenant: Any = {"tenant": 1}
    flow = "a hashable value (a tenant's name, a key)"
    for call in (
        functools.partial(machine.push, "y", 0, 0, flow=tenant),
        functools.partial(machine.take, "y", 0, 0, flow=tenant),
        functools.partial(machine.min_wait, 0, flow=tenant),
    ):
        refused(call, *typed("flow", tenant, flow))
    assert machine.snapshot() == before, "P18"
    # A flow whose own __hash__ fails otherwise: bad input too, not a broken
    # machine (an adapter would close the limiter for every caller).
    broken: Any = BrokenHash()
    for call in (
        functools.partial(machine.push, "y", 0, 0, flow=broken),
        functools.partial(machine.take, "y", 0, 0, flow=broken),
        functools.partial(machine.min_wait, 0, flow=broken),
    ):
        refused(call, *typed("flow", broken, f"{flow}; hashing it raised ValueError('no')"))
    assert machine.snapshot() == before, "P18"
    # So is an id whose own __hash__ fails, by every operation that takes an
    # id, the take's quickest case too.
    by_id: Callable[[], object]
    for by_id in (
        functools.partial(machine.push, broken, 0, 0),
        functools.partial(machine.take, broken, 0, 0),
        functools.partial(idle.take, broken, 0, 0),
        functools.partial(machine.cancel, broken),
        functools.partial(machine.refund, broken, 0),
        functools.partial(machine.spend, broken, 0),
        functools.partial(machine.settle, broken, 1, 0),
    ):
        refused(by_id, *typed("id", broken, "a hashable value; hashing it raised ValueError('no')"))
    assert machine.snapshot() == before, "P18"
    assert idle.snapshot() == idle_before, "P18"
    # Neither is waiting: asking says so, as for an unhashable id.
    assert broken not in machine
    assert unhashable not in machine


class BrokenHash:
    """A flow whose ``__hash__`` raises something other than TypeError."""

    def __hash__(self) -> int:
        raise ValueError("no")

    def __repr__(self) -> str:
        return "BrokenHash()"


def test_the_settle_window_by_hand() -> None:
    """P5 at the window's edges, while the machine forgets the charges older
    than it: a permit granted ``settle_window_ns`` ago (to the nanosecond) is
    still refunded, one granted a nanosecond earlier is refused, and a grant
    just made is refunded however much older the log's first charge was."""
    machine = Machine(Fifo(), 1000, 10, settle_window_ns=10)
    for id, now in [("a", 0), ("b", 11), ("c", 21)]:
        machine.push(id, 0, now)  # granted at once: the bucket has units
    with pytest.raises(NotRefundable):
        machine.refund("a", 21)  # granted 21 ns ago
    assert machine.refund("b", 21) == [], "P5: granted exactly the window ago"
    with pytest.raises(NotRefundable):
        machine.refund("b", 21)  # refunded already
    machine = Machine(Fifo(), 1000, 10, settle_window_ns=10)
    for id, now in [("a", 0), ("b", 20), ("c", 21)]:
        machine.push(id, 0, now)  # c's charge forgets what is older than 11 ns
    assert machine.refund("b", 22) == [], "P5: granted 2 ns ago"
    assert machine.refund("c", 22) == [], "P5"
    assert machine.statistics().levels[0].refunded == 2, "P3"
    # a nanosecond past the window, its charge still logged: refused
    machine = Machine(Fifo(), 1000, 10, settle_window_ns=10)
    machine.push("a", 0, 0)
    machine.push("b", 0, 5)  # (keeps the log from forgetting a's charge)
    with pytest.raises(NotRefundable):
        machine.refund("a", 11)
    with pytest.raises(NotRefundable):
        machine.settle("a", 0, 11)
    assert machine.refund("b", 15) == [], "P5: granted exactly the window ago"


def test_no_settle_window() -> None:
    """P5 without a window (``settle_window_ns=None``): a charged permit is
    refused a refund and a settle at the very nanosecond of its grant, and
    the machine holds no grant; a permit in flight (``AT_SPEND``) is still
    refunded until spent."""
    machine = Machine(Fifo(), 1000, 10, settle_window_ns=None)
    assert machine.settle_window_ns is None
    machine.push("a", 0, 5)  # granted at once: the bucket has units
    with pytest.raises(NotRefundable):
        machine.refund("a", 5)
    with pytest.raises(NotRefundable):
        machine.settle("a", 0, 5)
    assert machine.snapshot().grants == ()
    assert machine.snapshot().logged == ()
    machine = Machine(Fifo(), 1000, 10, settle_window_ns=None, charge=Charge.AT_SPEND)
    machine.push("a", 0, 5)
    machine.push("b", 0, 5)
    assert machine.refund("a", 6) == [], "P5: in flight"
    machine.spend("b", 7, settle_later=True)
    with pytest.raises(NotRefundable):
        machine.settle("b", 0, 7)
    assert machine.snapshot().grants == ()
    assert machine.in_flight == 0


class Raises:
    """A policy of one level whose ``choose`` (from its ``fail_at``-th call),
    ``ahead`` or ``record`` raises when told to: a policy with a bug."""

    levels = 1

    def __init__(self) -> None:
        self.calls = 0
        self.fail_at: int | None = None
        self.fail_record = False
        self.fail_ahead = False

    def choose(self, queues: object, now: int) -> int:
        self.calls += 1
        if self.calls == self.fail_at:
            raise ZeroDivisionError("choose")
        return 0

    def ahead(self, queues: object, level: int, now: int) -> int:
        if self.fail_ahead:
            raise ZeroDivisionError("ahead")
        return 0

    def record(self, queues: object, waiter: object) -> None:
        if self.fail_record:
            raise KeyError("record")

    def __repr__(self) -> str:
        return "Raises()"


def test_a_policy_that_raises_says_so_with_the_decisions_made() -> None:
    """P18 for a policy whose ``choose``, ``ahead`` or ``record`` raises: a
    PolicyError in these words (the policy's error its cause), carrying the
    decisions the call made before it, the grant ``record`` was told of
    included. (A raw error lost them: a waiter taken from its queue and
    charged, never told, its grant not even counted.)"""
    policy = Raises()
    machine = Machine(policy, 1, 2)
    for id in "abcd":
        machine.push(id, 0, 0)  # a and b granted at once
    policy.calls, policy.fail_at = 0, 2
    with pytest.raises(PolicyError) as broken:
        machine.tick(2 * SECOND)  # c is granted, then choose raises
    assert str(broken.value) == "Raises().choose() raised ZeroDivisionError('choose')"
    assert isinstance(broken.value.__cause__, ZeroDivisionError)
    assert [(d.id, d.state) for d in broken.value.decisions] == [("c", State.GRANTED)]  # type: ignore[attr-defined]
    assert [w.id for w in machine.waiting()] == ["d"]
    policy.fail_at, policy.fail_record = None, True
    with pytest.raises(PolicyError) as broken:
        machine.tick(3 * SECOND)  # d is granted, then record raises
    assert str(broken.value) == "Raises().record() raised KeyError('record')"
    assert [(d.id, d.state) for d in broken.value.decisions] == [("d", State.GRANTED)]  # type: ignore[attr-defined]
    assert machine.statistics().levels[0].granted == 4  # d counted
    policy.fail_record, policy.fail_ahead = False, True
    with pytest.raises(PolicyError) as broken:
        machine.min_wait(0)
    assert str(broken.value) == "Raises().ahead() raised ZeroDivisionError('ahead')"
    machine.check_valid()


class FailsWhenArmed:
    """A policy of two levels, strict priority, whose ``choose`` raises
    while ``armed``: a policy with a bug that comes and goes."""

    levels = 2

    def __init__(self) -> None:
        self.armed = False

    def choose(self, queues: Any, now: int) -> int:
        if self.armed:
            raise ZeroDivisionError("choose")
        return next(level for level, depth in enumerate(queues.depths) if depth)

    def ahead(self, queues: Any, level: int, now: int) -> int:
        return int(queues.depths[level])


def test_a_waiter_that_leaves_under_a_failing_policy_leaves_it_to_ask_again() -> None:
    """P18 for a cancel (and a supplied machine's ``too_long``) whose next
    choice the policy fails to make: the waiter is gone all the same (a
    ``too_long``'s decision in the PolicyError), and the machine asks the
    policy again at its next tick, due at once: the next permit is then
    planned as on a machine the waiter never joined. (The due time stayed
    planned for the cost of the one that left, 2 s late.)"""
    policy = FailsWhenArmed()
    machine = Machine(policy, 1, 3)
    machine.push("a", 0, 0, cost=3)  # granted: the bucket is empty
    machine.push("b", 0, 0, cost=3)
    machine.push("c", 1, 0)
    policy.armed = True
    with pytest.raises(PolicyError) as broken:
        machine.cancel("b")
    assert broken.value.decisions == ()
    assert ("b" not in machine, machine.statistics().levels[0].cancelled) == (True, 1)
    assert machine.next_tick() == 0  # ask again, now
    with pytest.raises(PolicyError):
        machine.tick(0)  # still failing: nothing granted
    policy.armed = False
    assert (machine.tick(0), machine.next_tick()) == ([], SECOND)  # c's one unit
    never = Machine(FailsWhenArmed(), 1, 3)
    never.push("a", 0, 0, cost=3)
    never.push("c", 1, 0)
    assert never.next_tick() == SECOND
    assert [d.id for d in machine.tick(SECOND)] == ["c"]
    machine.check_valid()

    supplied = Machine(policy, 1, 3, supplied=True)
    supplied.push("a", 0, 0, cost=3)
    supplied.push("b", 0, 0)
    policy.armed = True
    with pytest.raises(PolicyError) as broken:
        supplied.too_long("a", 5, 1)
    decided = [(d.id, d.state) for d in broken.value.decisions]  # type: ignore[attr-defined]
    assert decided == [("a", State.TOO_LONG)]
    assert ("a" not in supplied, supplied.statistics().levels[0].too_long) == (True, 1)
    policy.armed = False
    assert [d.id for d in supplied.supply(0)] == ["b"]
    supplied.check_valid()


def test_a_push_whose_grant_the_policy_fails_leaves_it_to_ask_again() -> None:
    """P2, P18: a push whose grant the policy fails to choose keeps its
    waiter, with a permit available: the one state in which a permit
    idles, and ``check_valid`` says so. The next tick is due at once, and
    grants it once the policy chooses again."""
    policy = FailsWhenArmed()
    machine = Machine(policy, 1, 1)
    policy.armed = True
    with pytest.raises(PolicyError) as broken:
        machine.push("a", 0, 5)
    assert broken.value.decisions == ()
    assert ([w.id for w in machine.waiting()], machine.next_tick()) == (["a"], 5)
    with pytest.raises(AssertionError, match="a permit is available while someone waits"):
        machine.check_valid()
    policy.armed = False
    assert [(d.id, d.at) for d in machine.tick(5)] == [("a", 5)]
    machine.check_valid()


def test_a_newcomer_that_may_not_queue_does_not_under_a_broken_policy() -> None:
    """P18 under a broken policy: a push at ``max_waiting`` or with a
    deadline of ``now`` grants at once or never queues, even when the policy
    breaks as it is asked whom to grant: the newcomer is rejected or expired, that decision in the
    PolicyError. (It was left waiting: past its level's ``max_waiting``, or
    with no deadline at all, and granted later.)"""
    for kind, state in (("full", State.REJECTED), ("late", State.EXPIRED)):
        policy = Answers()
        machine = Machine(policy, 1, 1, max_waiting=0 if kind == "full" else None)
        machine.tick(0)
        policy.answer = 5
        with pytest.raises(PolicyError) as broken:
            machine.push("c", 0, 0, deadline=0 if kind == "late" else None)
        decided = [(d.id, d.state) for d in broken.value.decisions]  # type: ignore[attr-defined]
        assert decided == [("c", state)], (kind, decided)
        assert "c" not in machine, kind
        policy.answer = None
        assert machine.tick(SECOND) == [], kind
        levels = machine.statistics().levels
        assert (levels[0].pushed, levels[0].rejected + levels[0].expired) == (1, 1), kind
        machine.check_valid()


class StartRaises(Raises):
    """A policy that keeps state per machine, whose ``start`` raises: a bug
    in it, or its own refusal of the machine's limits."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def start(self, limits: object) -> object:
        raise self.error


def test_a_policy_whose_start_raises_says_so() -> None:
    """P18 for a policy whose ``start`` raises as the machine is made: a
    bug in it is a PolicyError in the words of the other hooks', the
    policy's error its cause (it left the machine's constructor as a bare
    ZeroDivisionError, none of the errors documented); its own refusal of
    the machine's limits (a PermitError, as ``Shares`` naming a limit the
    machine lacks) leaves as itself."""
    with pytest.raises(PolicyError) as broken:
        Machine(StartRaises(ZeroDivisionError("start")), 1)
    assert str(broken.value) == "Raises().start() raised ZeroDivisionError('start')"
    assert isinstance(broken.value.__cause__, ZeroDivisionError)
    assert broken.value.decisions == ()
    refusal = PermitValueError("policy", "theirs", "not these limits")
    with pytest.raises(PermitValueError) as refused:
        Machine(StartRaises(refusal), 1)
    assert refused.value is refusal


@given(wait=st.integers(0, 10), most=st.integers(0, 10))
def test_too_long_refuses_an_unhashable_id_whatever_the_wait(wait: int, most: int) -> None:
    """P18 for ``too_long``: an unhashable id is refused with a
    PermitTypeError naming ``id``, whether or not the wait it is told of
    exceeds ``max_wait_ns`` (one that did not returned nothing, as for a
    good id not waiting), and the machine is as it was."""
    machine = Machine(Fifo(), 1, supplied=True)
    machine.push("a", 0, 0)
    before = machine.snapshot()
    with pytest.raises(PermitTypeError) as refused:
        machine.too_long(["a"], wait, most)  # type: ignore[arg-type]
    assert (refused.value.argument, refused.value.value) == ("id", ["a"]), "P18"
    assert str(refused.value) == "id=['a']: expected a hashable value, got list", "P18"
    assert machine.snapshot() == before, "P18"


@given(
    digits=st.integers(4_301, 20_000),
    lead=st.integers(1, 9),
    sign=st.sampled_from([1, -1]),
    where=st.sampled_from(["level", "now", "cost", "max_wait_ns", "Limit", "Machine"]),
)
def test_an_error_names_an_int_too_long_for_repr_by_its_digits(
    digits: int, lead: int, sign: int, where: str
) -> None:
    """P108: an argument refused for an int of more digits than Python's
    ``repr`` gives (4,300 by default: ``10**10000``) is refused with the
    documented error naming it, its message showing ``<int of about N
    digits>`` (N within one of the int's digits); the error raised a
    ``ValueError`` of its own message, and the machine is as it was."""
    value = sign * lead * 10 ** (digits - 1)
    machine = Machine(Fifo(2), 1, 1)
    machine.push("a", 0, 0)
    before = machine.snapshot()
    calls: dict[str, tuple[str, Callable[[], object]]] = {
        "level": ("level", lambda: machine.push("b", value, 0)),
        "now": ("now", lambda: machine.push("b", 0, -abs(value))),
        "cost": ("cost", lambda: machine.push("b", 0, 0, cost=value)),
        "max_wait_ns": ("max_wait_ns", lambda: machine.push("b", 0, 0, max_wait_ns=-abs(value))),
        "Limit": ("burst", lambda: Limit(1, -abs(value))),
        "Machine": ("burst", lambda: Machine(Fifo(), 1, -abs(value))),
    }
    argument, call = calls[where]
    with pytest.raises(PermitValueError) as refused:
        call()
    assert refused.value.argument == argument, "P108"
    assert refused.value.value in (value, -abs(value)), "P108"
    shown = re.match(
        rf"^{re.escape(argument)}=<int of about ([\d,]+) digits>: ", str(refused.value)
    )
    assert shown is not None, ("P108", str(refused.value)[:120])
    assert abs(int(shown[1].replace(",", "")) - digits) <= 1, "P108"
    assert machine.snapshot() == before, "P108"


class HugeLevels:
    """A policy whose ``levels`` is an int too long for ``repr``."""

    levels = 10**5000

    def choose(self, queues: object, now: int) -> int:
        return 0

    def ahead(self, queues: object, level: int, now: int) -> int:
        return 0


class ChoosesHuge(HugeLevels):
    """A policy of one level whose ``choose`` and ``ahead`` answer an int too
    long for ``repr`` once ``armed``."""

    levels = 1
    armed = False

    def choose(self, queues: object, now: int) -> int:
        return 10**5000 if self.armed else 0

    def ahead(self, queues: object, level: int, now: int) -> int:
        return -(10**5000) if self.armed else 0


def test_an_error_cuts_a_value_too_long_to_read() -> None:
    """P108: a value whose ``repr`` runs past ``MAX_SHOWN`` characters (the
    weights of a thousand levels, 303,231 characters from
    ``permits.sim.every_nth(5, 1000)``) is cut there in the message, which
    says how long it was; the error keeps the whole value."""
    weights = (3,) * 400_000
    with pytest.raises(PermitValueError) as refused:
        Shares(weights)
    assert refused.value.value == weights
    message = str(refused.value)
    assert len(message) <= MAX_SHOWN + 100
    assert message.startswith("weights=(3, 3, 3, ")
    assert message.endswith(
        "... <1,200,000 characters in all>: weights must add up to at most 1000000"
    )
    with pytest.raises(PermitValueError) as refused:
        every_nth(5, 1000)
    assert str(refused.value) == (
        "n=5: on 1000 levels, its weights (n-1)**k: weights must add up to at most 1000000"
    )
    near = (999_999,) * 110  # (879 characters: shown whole)
    with pytest.raises(PermitValueError) as refused:
        Shares(near)
    assert str(refused.value) == f"weights={near!r}: weights must add up to at most 1000000"


def test_an_error_shows_an_int_too_long_for_repr_where_its_message_names_it() -> None:
    """P108 where such an int is named in the message rather than as the
    refused value: a cost's or a settle's key, a flow refused its weight, a
    rejected id, a count whose burst cannot be told, a policy's levels or
    answers. Each raised a ``ValueError`` of its own message instead."""
    big = 10**5000
    two = Machine(Fifo(1), limits={"a": Limit(1, 2), "b": Limit(1, 2)})
    two.push("x", 0, 0)
    called = Machine(Fifo(1), 1, flow_weights=lambda flow: 0)
    full = Machine(Fifo(1), 1, max_waiting=0)
    chooses = ChoosesHuge()
    policy = Machine(chooses, 1, 1)
    policy.push("x", 0, 0)
    policy.push("y", 0, 0)
    chooses.armed = True
    machines = (two, called, full, policy)
    before = [machine.snapshot() for machine in machines]
    calls: list[tuple[type[Exception], Callable[[], object]]] = [
        (PermitValueError, lambda: two.push("y", 0, 0, cost={big: 1})),  # type: ignore[dict-item]
        (PermitValueError, lambda: two.settle("x", {big: 1}, 0)),  # type: ignore[dict-item]
        (PermitValueError, lambda: Machine(Fifo(1), 1, flow_weights={big: 0})),
        (PermitValueError, lambda: called.push("y", 0, 0, flow=big)),
        (QueueFull, lambda: (_ for _ in ()).throw(full.queue_full(big, 0, big))),
        (PermitValueError, lambda: Limit.per_second(Fraction(big + 1, 2))),
        (PermitValueError, lambda: Machine(HugeLevels(), 1)),
        (PolicyError, lambda: policy.tick(2 * SECOND)),
        (PolicyError, lambda: policy.min_wait(0)),
    ]
    for kind, call in calls:
        with pytest.raises(kind) as refused:
            call()
        message = str(refused.value)
        assert re.search(
            r"<(int of about 5,001 digits|\w+ holding a number too long to show)>", message
        ), (
            "P108",
            message,
        )
    assert [machine.snapshot() for machine in machines[:-1]] == before[:-1], "P108"


def test_a_value_of_exactly_max_shown_characters_is_shown_whole() -> None:
    """P108: only a repr *past* ``MAX_SHOWN`` characters is cut; one of
    exactly that many is shown whole."""
    value = "a" * (MAX_SHOWN - 2)  # its repr: MAX_SHOWN characters, quotes and all
    assert len(repr(value)) == MAX_SHOWN
    assert str(PermitValueError("x", value, "r")) == f"x={value!r}: r", "P108"
    past = "a" * (MAX_SHOWN - 1)
    assert "characters in all" in str(PermitValueError("x", past, "r")), "P108"


@pytest.mark.parametrize("waiting", [False, True])
def test_try_take_refuses_a_settle_later_that_is_no_bool(waiting: bool) -> None:
    """P101 and P18: ``try_take`` refuses ``settle_later=1`` as ``take``
    does, whether or not someone waits (while someone waits it takes
    nothing, and still refuses)."""
    machine = Machine(StrictPriority(2), rate=1, burst=1)
    machine.push("a", 0, 0)
    if waiting:
        machine.push("b", 0, 0)
    before = machine.snapshot()
    refused(
        lambda: machine.try_take("c", 0, 0, settle_later=1),  # type: ignore[arg-type]
        *typed("settle_later", 1, "a bool"),
    )
    assert machine.snapshot() == before, "P18"
