"""Scenarios: who arrives when, under which limit and policy.

Plain immutable values. Durations and times are in seconds (``int``,
``float``, ``Fraction`` or ``Decimal``; a float is read as the decimal it
prints as), turned into the core's integer nanoseconds exactly when a run
starts. Every argument is checked at construction, and a bad one raises
:class:`~permits.core.PermitValueError` or
:class:`~permits.core.PermitTypeError` naming it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from fractions import Fraction
from typing import Any

import attrs

from permits.core import (
    SECOND,
    Aging,
    Fifo,
    PermitTypeError,
    PermitValueError,
    Policy,
    Shares,
    StrictPriority,
)
from permits.core.checks import check_int, check_rate

from ._require import Requirement

__all__ = [
    "Arrivals",
    "Batch",
    "Constant",
    "Poisson",
    "Published",
    "Scenario",
    "Workload",
    "describe",
    "nanoseconds",
]

Seconds = int | float | Fraction | Decimal
_Times = Iterator[int]


def _exact(argument: str, value: object) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction, Decimal)):
        raise PermitTypeError(argument, value, "a number of seconds")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PermitValueError(argument, value, "must be finite")
        return Fraction(repr(value))
    if isinstance(value, Decimal) and not value.is_finite():
        raise PermitValueError(argument, value, "must be finite")
    return Fraction(value)


def nanoseconds(argument: str, value: object) -> int:
    """``value`` seconds as a whole number of nanoseconds (nearest, ties to
    even), checked to be a finite number ``>= 0``."""
    ns = round(_exact(argument, value) * SECOND)
    if ns < 0:
        raise PermitValueError(argument, value, "must be at least 0")
    return ns


def _seconds(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    nanoseconds(attribute.name, value)


def _optional_seconds(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and nanoseconds(attribute.name, value) == 0:
        raise PermitValueError(attribute.name, value, "must be greater than 0 (or None)")


def _positive_seconds(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if nanoseconds(attribute.name, value) == 0:
        raise PermitValueError(attribute.name, value, "must be greater than 0")


def _rate(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_rate(value)  # every rate here is called "rate"


_Validator = Callable[[object, "attrs.Attribute[Any]", object], None]


def _int(minimum: int) -> _Validator:
    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        check_int(attribute.name, value, minimum)

    return check


def _scaled(value: Seconds | None, factor: Fraction) -> Fraction | None:
    return None if value is None else _exact("value", value) / factor


@attrs.frozen
class Batch:
    """``size`` callers that all arrive at ``at`` seconds (a queued backlog)."""

    size: int = attrs.field(validator=_int(0))
    at: Seconds = attrs.field(default=0, validator=_seconds)

    def times(self, seed: int) -> Iterator[int]:
        """Arrival times in nanoseconds, in order."""
        return itertools.repeat(nanoseconds("at", self.at), self.size)

    def asked(self, duration: int) -> Fraction:
        """How many callers arrive before ``duration`` ns."""
        return Fraction(self.size if nanoseconds("at", self.at) < duration else 0)

    def scaled(self, factor: Fraction) -> Batch:
        return Batch(self.size, _exact("at", self.at) / factor)


@attrs.frozen
class Constant:
    """Arrivals at a constant ``rate`` per second: the ``i``-th at
    ``start + i / rate`` seconds (rounded down to the nanosecond), before
    ``stop`` (``None``: until the end of the run)."""

    rate: Seconds = attrs.field(validator=_rate)
    start: Seconds = attrs.field(default=0, validator=_seconds)
    stop: Seconds | None = attrs.field(default=None, validator=_optional_seconds)

    def times(self, seed: int) -> _Times:
        """Arrival times in nanoseconds, in order (unbounded without ``stop``)."""
        rate = check_rate(self.rate)
        P, Q = SECOND * rate.denominator, rate.numerator  # interval = P/Q ns
        start = nanoseconds("start", self.start)
        stop = None if self.stop is None else nanoseconds("stop", self.stop)
        i = 0
        while True:
            t = start + i * P // Q
            if stop is not None and t >= stop:
                return
            yield t
            i += 1

    def asked(self, duration: int) -> Fraction:
        """How many callers arrive before ``duration`` ns (at most one more)."""
        asked = _asked(self.rate, self.start, self.stop, duration)
        return asked + 1 if asked else asked

    def scaled(self, factor: Fraction) -> Constant:
        return Constant(
            check_rate(self.rate) * factor,
            _exact("start", self.start) / factor,
            _scaled(self.stop, factor),
        )


@attrs.frozen
class Poisson:
    """Poisson arrivals at a mean ``rate`` per second from ``start``, before
    ``stop``; the gaps come from a seeded generator, so a scenario's seed
    fixes them on every platform and Python version."""

    rate: Seconds = attrs.field(validator=_rate)
    start: Seconds = attrs.field(default=0, validator=_seconds)
    stop: Seconds | None = attrs.field(default=None, validator=_optional_seconds)

    def times(self, seed: int) -> _Times:
        """Arrival times in nanoseconds, in order (unbounded without ``stop``)."""
        mean = SECOND / float(check_rate(self.rate))
        t = nanoseconds("start", self.start)
        stop = None if self.stop is None else nanoseconds("stop", self.stop)
        state = seed & _MASK
        log1p = math.log1p
        while True:
            # splitmix64: a tiny generator whose output is the same everywhere.
            state = (state + 0x9E3779B97F4A7C15) & _MASK
            z = state
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
            u = ((z ^ (z >> 31)) >> 11) * _UNIT  # uniform in [0, 1)
            t += int(-log1p(-u) * mean)
            if stop is not None and t >= stop:
                return
            yield t

    def asked(self, duration: int) -> Fraction:
        """How many callers arrive before ``duration`` ns, on average."""
        return _asked(self.rate, self.start, self.stop, duration)

    def scaled(self, factor: Fraction) -> Poisson:
        return Poisson(
            check_rate(self.rate) * factor,
            _exact("start", self.start) / factor,
            _scaled(self.stop, factor),
        )


def _asked(rate: Seconds, start: Seconds, stop: Seconds | None, duration: int) -> Fraction:
    """Arrivals at ``rate`` per second from ``start`` until ``stop`` or
    ``duration`` ns, whichever is first."""
    end = duration if stop is None else min(duration, nanoseconds("stop", stop))
    window = max(0, end - nanoseconds("start", start))
    return check_rate(rate) * Fraction(window, SECOND)


_MASK = (1 << 64) - 1
_UNIT = 2.0**-53

Arrivals = Batch | Constant | Poisson


@attrs.frozen
class Published:
    """Figures a source published for a workload, to print beside the
    simulated ones. Times in seconds; ``None`` where nothing was published."""

    granted: int | None = None
    offered: int | None = None
    wait_p50: float | None = None
    wait_p99: float | None = None
    cleared_at: float | None = None
    #: A remark printed with them (for example why they cannot be reproduced).
    note: str = ""


@attrs.frozen
class Workload:
    """One class of callers: its ``level``, its arrivals, and how patient it is.

    :param timeout: seconds after which a caller still waiting gives up (it
        cancels: counted as ``cancelled``); ``None`` for never.
    :param deadline: seconds after its arrival at which the core expires a
        caller still waiting (counted as ``expired``); ``None`` for none.
    """

    name: str = attrs.field()
    level: int = attrs.field(validator=_int(0))
    arrivals: Arrivals = attrs.field()
    timeout: Seconds | None = attrs.field(default=None, validator=_optional_seconds)
    deadline: Seconds | None = attrs.field(default=None, validator=_optional_seconds)
    published: Published | None = attrs.field(default=None, eq=False)

    @name.validator
    def _name(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, str) or not value:
            raise PermitTypeError("name", value, "a non-empty str")

    @arrivals.validator
    def _arrivals(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, (Batch, Constant, Poisson)):
            raise PermitTypeError("arrivals", value, "Batch, Constant or Poisson")

    def scaled(self, factor: Fraction) -> Workload:
        return attrs.evolve(
            self,
            arrivals=self.arrivals.scaled(factor),
            timeout=_scaled(self.timeout, factor),
            deadline=_scaled(self.deadline, factor),
            published=None,
        )


def _workload_tuple(value: Iterable[Workload]) -> tuple[Workload, ...]:
    return tuple(value)


def _requirement_tuple(value: Iterable[Requirement]) -> tuple[Requirement, ...]:
    return tuple(value)


@attrs.frozen
class Scenario:
    """A run: ``workloads`` sharing ``rate`` permits per second (``burst``
    banked at most) under ``policy``, for ``seconds`` of virtual time.

    Permits granted at times in ``[0, seconds)`` count; arrivals at or after
    ``seconds`` are not offered. ``seed`` fixes Poisson arrivals.
    """

    name: str = attrs.field()
    policy: Policy = attrs.field()
    rate: Seconds = attrs.field(validator=_rate)
    seconds: Seconds = attrs.field(validator=_positive_seconds)
    workloads: tuple[Workload, ...] = attrs.field(converter=_workload_tuple)
    burst: int = attrs.field(default=1, validator=_int(1))
    max_waiting: int | tuple[int | None, ...] | None = attrs.field(default=None)
    seed: int = attrs.field(default=0, validator=_int(0))
    #: What the workloads' results must meet (``permits compare`` marks the
    #: policies that meet them all).
    requirements: tuple[Requirement, ...] = attrs.field(
        default=(), converter=_requirement_tuple, kw_only=True
    )

    @name.validator
    def _name(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, str) or not value:
            raise PermitTypeError("name", value, "a non-empty str")

    @policy.validator
    def _policy(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, Policy):
            raise PermitTypeError("policy", value, "a Policy")

    @workloads.validator
    def _workloads(self, attribute: attrs.Attribute[Any], value: object) -> None:
        assert isinstance(value, tuple)
        if not value:
            raise PermitValueError("workloads", value, "needs at least one workload")
        names = set()
        for i, workload in enumerate(value):
            if not isinstance(workload, Workload):
                raise PermitTypeError(f"workloads[{i}]", workload, "a Workload")
            if workload.level >= self.policy.levels:
                raise PermitValueError(
                    f"workloads[{i}].level",
                    workload.level,
                    f"must be below {self.policy.levels}, the policy's levels",
                )
            if workload.name in names:
                raise PermitValueError(f"workloads[{i}].name", workload.name, "is used twice")
            names.add(workload.name)

    @max_waiting.validator
    def _max_waiting(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None:
            return
        entries = value if isinstance(value, tuple) else (value,)
        for entry in entries:
            if entry is not None:
                check_int("max_waiting", entry, 0)
        if isinstance(value, tuple) and len(value) != self.policy.levels:
            raise PermitValueError(
                "max_waiting", value, f"needs one entry per level ({self.policy.levels})"
            )

    @requirements.validator
    def _requirements(self, attribute: attrs.Attribute[Any], value: object) -> None:
        assert isinstance(value, tuple)
        names = {w.name for w in self.workloads}
        for i, requirement in enumerate(value):
            if not isinstance(requirement, Requirement):
                raise PermitTypeError(f"requirements[{i}]", requirement, "a Requirement")
            if requirement.workload not in names:
                known = ", ".join(repr(w.name) for w in self.workloads)
                raise PermitValueError(
                    f"requirements[{i}]",
                    requirement.text,
                    f"no workload is called {requirement.workload!r} (the workloads: {known})",
                )

    def scaled(self, factor: int | Fraction) -> Scenario:
        """The same scenario ``factor`` times faster: rates times ``factor``,
        every time and duration divided by it (an :class:`Aging` policy's
        ``after`` too). The counts of a run stay the same; its waits shrink by
        ``factor``. Published figures and requirements are dropped: they
        describe the original.
        """
        factor = Fraction(factor)
        if factor <= 0:
            raise PermitValueError("factor", factor, "must be greater than 0")
        policy = self.policy
        if isinstance(policy, Aging):
            policy = Aging(policy.levels, after_ns=max(1, round(policy.after_ns / factor)))
        return attrs.evolve(
            self,
            name=f"{self.name} ({_short(factor)}x faster)",
            policy=policy,
            rate=check_rate(self.rate) * factor,
            seconds=_exact("seconds", self.seconds) / factor,
            workloads=tuple(w.scaled(factor) for w in self.workloads),
            requirements=(),
        )


def describe(policy: Policy) -> str:
    """A short name for a policy: ``FIFO``, ``strict priority``, ``shares 4:1``,
    ``aging after 2 s``; the ``repr`` for others."""
    if isinstance(policy, Fifo):
        return "FIFO"
    if isinstance(policy, StrictPriority):
        return "strict priority"
    if isinstance(policy, Shares):
        return "shares " + ":".join(str(w) for w in policy.weights)
    if isinstance(policy, Aging):
        return f"aging after {_short(Fraction(policy.after_ns, SECOND))} s"
    return repr(policy)


def _short(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"
