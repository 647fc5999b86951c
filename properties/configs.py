"""Machine configurations for the property tests, and a user's policy.

``RoundRobin`` is written only against the public :class:`permits.core.Policy`
protocol, the way a user would write one; the generic properties run against
it as they do against the built-in policies.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import attrs
from hypothesis import strategies as st

from permits.core import (
    SECOND,
    Aging,
    Charge,
    Fifo,
    Limit,
    Machine,
    Policy,
    Queues,
    Shares,
    StrictPriority,
)

from reference import PolicySpec, Reference


@attrs.frozen
class RoundRobin:
    """A user's policy: the levels take turns, skipping empty ones."""

    levels: int

    def choose(self, queues: Queues, now: int) -> int:
        start = queues.granted % self.levels
        for step in range(self.levels):
            level = (start + step) % self.levels
            if queues.depths[level]:
                return level
        raise AssertionError("choose() called with nobody waiting")

    def ahead(self, queues: Queues, level: int, now: int) -> int:
        return queues.depths[level]


KINDS = ("fifo", "strict", "shares", "aging", "user")

#: Rates per second; 10**9 and above (an interval of a nanosecond or less)
#: reach the bucket's nanosecond of refill, where one more permit can be in
#: flight than the burst.
RATES: tuple[Any, ...] = (
    1,
    3,
    100,
    Fraction(1, 3),
    Fraction(7, 2),
    2.5,
    0.3,
    1000,
    10**9,
    3 * 10**9,
)


def exact_rate(rate: Any) -> Fraction:
    """The rate the tests expect the machine to keep: a float as the decimal
    it prints as (SPEC.md, Pacing), anything else exactly."""
    return Fraction(repr(rate)) if isinstance(rate, float) else Fraction(rate)


def interval_ns(rate: Any) -> Fraction:
    return SECOND / exact_rate(rate)


#: The names of a machine's limits, in order.
NAMES = ("units", "tokens")
#: The flows waiters name, when they name one (None: the default flow).
FLOWS = (None, "a", "b", "c")
#: Primes near the largest weight: four of them waiting in one level take its
#: virtual-time scale past MAX_SCALE, where steps round up.
BIG_WEIGHTS = st.sampled_from([999_983, 999_979, 999_961, 999_959])


#: Times of a machine's first operation: mostly 0, also a clock that reads
#: negative times and one past 2**62 ns.
ORIGINS = st.sampled_from([0, 0, -(10**15), 2**62 + 7])


@dataclass(frozen=True)
class Config:
    spec: PolicySpec
    rate: Any
    burst: int
    max_waiting: tuple[int | None, ...] | None
    settle_window: int | None
    charge: Charge = Charge.AT_GRANT
    #: a second limit beside the first, as (rate, burst)
    second: tuple[Any, int] | None = None
    #: whether waiters ask for costs other than 1
    costs: bool = False
    #: whether waiters name flows within their levels, and the flows' set-up
    flows: bool = False
    flow_weights: dict[Any, int] | None = None
    max_waiting_per_flow: int | None = None
    flow_limit: int = 0
    #: the time of the first operation: a clock may start anywhere (SPEC.md,
    #: *Time*), negative or far past 0
    origin: int = 0

    @property
    def exact_rate(self) -> Fraction:
        return exact_rate(self.rate)

    @property
    def limits(self) -> list[tuple[Fraction, int]]:
        """Every limit as an exact (rate, burst), in order."""
        first = (self.exact_rate, self.burst)
        return (
            [first]
            if self.second is None
            else [first, (exact_rate(self.second[0]), self.second[1])]
        )

    def cost(self, units: tuple[int, ...]) -> int | dict[str, int]:
        """``units`` (one per limit) as a push says it: an int for one limit,
        a mapping of the limits it takes from for several."""
        if self.second is None:
            return units[0]
        return {name: n for name, n in zip(NAMES, units, strict=False) if n}

    def settle(self, named: dict[int, int]) -> dict[str, int]:
        """A settle's actual cost naming the limits in ``named`` (units by
        limit index), as a caller writes it."""
        return {NAMES[i]: n for i, n in named.items()}

    @property
    def interval(self) -> Fraction:
        return SECOND / self.exact_rate

    def policy(self) -> Policy:
        spec = self.spec
        if spec.kind == "fifo":
            return Fifo(spec.levels)
        if spec.kind == "strict":
            return StrictPriority(spec.levels)
        if spec.kind == "shares":
            return Shares(spec.weights, limit=NAMES[spec.shared] if spec.shared else None)
        if spec.kind == "aging":
            return Aging(spec.levels, after_ns=spec.after)
        return RoundRobin(spec.levels)

    def machine(self, keep_waits: bool = True, policy: Policy | None = None) -> Machine:
        """This configuration's machine; under ``policy`` instead of its own
        (the metamorphic laws compare policies on machines otherwise alike)."""
        if policy is None:
            policy = self.policy()
        if self.second is not None:
            return Machine(
                policy,
                limits={
                    "units": Limit(self.rate, self.burst),
                    "tokens": Limit(self.second[0], self.second[1]),
                },
                max_waiting=self.max_waiting,
                settle_window_ns=self.settle_window,
                charge=self.charge,
                keep_waits=keep_waits,
                **self.flow_options(),
            )
        return Machine(
            policy,
            self.rate,
            self.burst,
            max_waiting=self.max_waiting,
            settle_window_ns=self.settle_window,
            charge=self.charge,
            keep_waits=keep_waits,
            **self.flow_options(),
        )

    def flow_options(self) -> dict[str, Any]:
        if not self.flows:
            return {}
        return {
            "flow_weights": self.flow_weights,
            "max_waiting_per_flow": self.max_waiting_per_flow,
            "flow_limit": NAMES[self.flow_limit] if self.flow_limit else None,
        }

    def reference(self) -> Reference:
        return Reference(
            self.spec,
            self.limits,
            self.max_waiting,
            self.settle_window,
            at_grant=self.charge is Charge.AT_GRANT,
            flow_weights=self.flow_weights,
            max_waiting_per_flow=self.max_waiting_per_flow,
            flow_limit=self.flow_limit,
        )


@st.composite
def configs(
    draw: st.DrawFn,
    kind: str,
    levels: int | None = None,
    charges: tuple[Charge, ...] = (Charge.AT_GRANT,),
    costs: bool = False,
    flows: bool = False,
) -> Config:
    """A small machine configuration for policy ``kind``, charging its
    permits as one of ``charges`` says; with ``costs``, maybe costs other
    than 1 and a second limit."""
    if levels is None:
        levels = draw(st.integers(1, 3))
    rate = draw(st.sampled_from(RATES))
    interval = interval_ns(rate)
    weights: tuple[int, ...] = ()
    after = 0
    if kind == "shares":
        weights = tuple(draw(st.lists(st.integers(1, 4), min_size=levels, max_size=levels)))
    if kind == "aging":
        factor: Fraction = draw(
            st.sampled_from([Fraction(1, 2), Fraction(1), Fraction(3), Fraction(10)])
        )
        after = max(1, int(interval * factor))
    max_waiting = draw(
        st.one_of(
            st.none(),
            st.tuples(*[st.sampled_from([None, 0, 1, 2, 3])] * levels),
        )
    )
    settle_window = draw(st.sampled_from([0, int(interval), 100 * SECOND, None]))
    with_costs = costs and draw(st.booleans())
    second = None
    if with_costs and draw(st.booleans()):
        second = (draw(st.sampled_from(RATES)), draw(st.integers(1, 6)))
    # shares count the units of the first limit, or of the named second
    shared = int(kind == "shares" and second is not None and draw(st.booleans()))
    with_flows = flows and draw(st.booleans())
    flow_weights = None
    per_flow = None
    flow_limit = 0
    if with_flows:
        flow_weights = draw(
            st.none()
            | st.dictionaries(st.sampled_from(FLOWS), st.integers(1, 3) | BIG_WEIGHTS, max_size=4)
        )
        per_flow = draw(st.none() | st.integers(0, 3))
        flow_limit = int(second is not None and draw(st.booleans()))
    return Config(
        spec=PolicySpec(kind, levels, weights, after, shared),
        rate=rate,
        burst=draw(st.integers(1, 4 if with_costs else 3)),
        max_waiting=max_waiting,
        settle_window=settle_window,
        charge=draw(st.sampled_from(charges)),
        second=second,
        costs=with_costs,
        flows=with_flows,
        flow_weights=flow_weights,
        max_waiting_per_flow=per_flow,
        flow_limit=flow_limit,
        origin=draw(ORIGINS),
    )


#: The largest exponent of ten a ``Decimal`` rate or time may have, either
#: sign (P97, P106).
EXPONENT = 10_000


@st.composite
def decimals_about_the_bound(draw: st.DrawFn) -> Decimal:
    """A positive Decimal whose exponent of ten is near :data:`EXPONENT` on
    either side, or far past it (``1e-999999999``, whose exact fraction has
    a billion digits), or anywhere within."""
    digits = draw(st.integers(1, 10**6))
    adjusted = draw(
        st.integers(EXPONENT - 3, EXPONENT + 3)
        | st.integers(EXPONENT + 1, 10**9)
        | st.integers(-EXPONENT, EXPONENT)
    )
    if draw(st.booleans()):
        adjusted = -adjusted
    return Decimal(f"{digits}E{adjusted - (len(str(digits)) - 1)}")
