"""Scenarios: who arrives when, under which limit and policy.

Plain immutable values. Durations and times are in seconds (``int``,
``float``, ``Fraction`` or ``Decimal``; a float is read as the decimal it
prints as), turned into the core's integer nanoseconds exactly when a run
starts. Every argument is checked at construction, and a bad one raises
:class:`~permits.core.PermitValueError` or
:class:`~permits.core.PermitTypeError` naming it.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import attrs

from permits.core import (
    MAX_LEVELS,
    SECOND,
    Aging,
    Fifo,
    Limit,
    Machine,
    PermitTypeError,
    PermitValueError,
    Policy,
    Shares,
    StrictPriority,
)
from permits.core.checks import (
    EMPTY_LIMIT_NAME,
    NO_UNIT,
    RATE_EXPONENT,
    check_int,
    check_policy,
    check_rate,
    level_range,
    no_limit,
)

from ._require import Requirement

__all__ = [
    "MAX_CHOICES",
    "MAX_LIMITS",
    "MAX_TENANTS",
    "Arrivals",
    "Batch",
    "Choice",
    "Constant",
    "Cost",
    "Poisson",
    "Published",
    "Scenario",
    "Tenants",
    "Uniform",
    "Workload",
    "describe",
    "nanoseconds",
]

#: The most tenants a workload may name (a run keeps a few figures per tenant).
MAX_TENANTS = 100_000
#: The most values a :class:`Choice` may choose among.
MAX_CHOICES = 10_000
#: The most limits a scenario may name (each arrival's cost names each).
MAX_LIMITS = 32

#: A time or a duration in seconds.
Seconds = int | float | Fraction | Decimal
#: A rate, per second: arrivals, or a limit's permits.
PerSecond = int | float | Fraction | Decimal
_Times = Iterator[int]


def _exact(argument: str, value: object) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction, Decimal)):
        raise PermitTypeError(argument, value, "a number of seconds")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PermitValueError(argument, value, "must be finite")
        return Fraction(repr(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise PermitValueError(argument, value, "must be finite")
        if value and abs(value.adjusted()) > RATE_EXPONENT:  # 1e999999999: no Fraction of it
            raise PermitValueError(argument, value, SECONDS_EXPONENT)
    return Fraction(value)


#: Why a ``Decimal`` of seconds past ``RATE_EXPONENT`` either way is refused
#: (as a rate is): its exact fraction has as many digits as its exponent.
SECONDS_EXPONENT = (
    f"its exponent of ten must be from -{RATE_EXPONENT} to {RATE_EXPONENT}: write a number "
    f"of seconds from 1e-{RATE_EXPONENT} to 1e+{RATE_EXPONENT} (under half a nanosecond is 0)"
)


def nanoseconds(argument: str, value: object) -> int:
    """``value`` seconds as a whole number of nanoseconds (nearest, ties to
    even), checked to be a finite number ``>= 0``."""
    ns = round(_exact(argument, value) * SECOND)
    if ns < 0:
        raise PermitValueError(argument, value, "must be at least 0")
    return ns


def _seconds(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    nanoseconds(attribute.name, value)


#: Why a time greater than 0 that rounds to no nanosecond is refused.
UNDER_A_NANOSECOND = (
    "is half a nanosecond or less, and times are whole nanoseconds (the nearest, ties to even): "
    "give 1e-09 s or more"
)


def _optional_seconds(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # (a negative value is refused in these words too: "at least 0" would not do)
    if value is not None and round((exact := _exact(attribute.name, value)) * SECOND) <= 0:
        reason = UNDER_A_NANOSECOND if exact > 0 else "must be greater than 0 (or None)"
        raise PermitValueError(attribute.name, value, reason)


def _give_up_after(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # 0 is a trace's word for a call cancelled as it came (recorded so); a
    # workload's callers would all be, and none would ask: refused, naming
    # what is likely meant.
    if value is not None and _exact(attribute.name, value) == 0:
        raise PermitValueError(
            attribute.name,
            value,
            "must be greater than 0 (or None): at 0 every caller would give up as it "
            "came; for callers that take only a permit free on arrival, timeout=0",
        )
    _optional_seconds(instance, attribute, value)


def _optional_timeout(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # A caller's timeout: None (never), 0 (only a permit free at its
    # arrival, as acquire(timeout=0) takes), or a nanosecond or more (a
    # positive time that rounds to none is no 0 meant: it says so).
    if value is not None and (exact := _exact(attribute.name, value)) != 0:
        if exact < 0:
            raise PermitValueError(attribute.name, value, "must be at least 0 (or None)")
        if round(exact * SECOND) <= 0:
            raise PermitValueError(attribute.name, value, UNDER_A_NANOSECOND)


def _after_start(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    start = instance.start  # type: ignore[attr-defined]
    if value is not None and nanoseconds("stop", value) <= nanoseconds("start", start):
        raise PermitValueError(
            attribute.name, value, f"must be after start ({start!r} s), or no caller would arrive"
        )


#: The longest run, in seconds: a wait in it is reported in seconds, as a float.
_LONGEST = 10**308


def _positive_seconds(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    exact = _exact(attribute.name, value)
    if round(exact * SECOND) <= 0:
        reason = UNDER_A_NANOSECOND if exact > 0 else "must be greater than 0"
        raise PermitValueError(attribute.name, value, reason)
    if exact > _LONGEST:  # a wait of 1e309 s: an OverflowError writing it
        raise PermitValueError(attribute.name, value, "must be at most 1e+308")


def _rate(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_rate(value)  # every rate here is called "rate"


def _optional_rate(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_rate(value)


def _limit_pairs(value: object) -> object:
    if value is None or isinstance(value, tuple):
        return value
    if not isinstance(value, Mapping):
        raise PermitTypeError("limits", value, "a mapping of names to Limits")
    return tuple(value.items())


_Validator = Callable[[object, "attrs.Attribute[Any]", object], None]


def _int(minimum: int) -> _Validator:
    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        check_int(attribute.name, value, minimum)

    return check


def _scaled(value: Seconds | None, factor: Fraction) -> Fraction | None:
    return None if value is None else _exact("value", value) / factor


@attrs.frozen
class Batch:
    """``size`` callers that all arrive at ``at`` seconds (a queued backlog).

    ``Batch(0)`` is a workload of no callers, as a replay's workloads are
    (:func:`~permits.sim.traced`: the trace's calls stand in for them); run,
    it reports nothing offered, its waits ``None`` (``-``)."""

    size: int = attrs.field(validator=_int(0))
    at: Seconds = attrs.field(default=0, validator=_seconds)

    def times(self, seed: int) -> Iterator[int]:
        """Arrival times in nanoseconds, in order."""
        return itertools.repeat(nanoseconds("at", self.at), self.size)

    def asked(self, duration_ns: int) -> Fraction:
        """How many callers arrive before ``duration_ns``."""
        return Fraction(self.size if nanoseconds("at", self.at) < duration_ns else 0)

    def scaled(self, factor: Fraction) -> Batch:
        """The same batch ``factor`` times faster: queued at ``at / factor``."""
        return Batch(self.size, _exact("at", self.at) / factor)


@attrs.frozen
class Constant:
    """Arrivals at a constant ``rate`` per second: the ``i``-th at
    ``start + i / rate`` seconds (rounded down to the nanosecond), before
    ``stop`` (``None``: until the end of the run)."""

    rate: PerSecond = attrs.field(validator=_rate)
    start: Seconds = attrs.field(default=0, validator=_seconds)
    stop: Seconds | None = attrs.field(default=None, validator=[_optional_seconds, _after_start])

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

    def asked(self, duration_ns: int) -> Fraction:
        """How many callers arrive before ``duration_ns``, exactly: the
        ``i``-th, at ``start + i / rate`` rounded down to a whole
        nanosecond, is before a whole nanosecond ``end`` if and only if
        ``i / rate`` is before ``end - start``."""
        return Fraction(math.ceil(_asked(self.rate, self.start, self.stop, duration_ns)))

    def scaled(self, factor: Fraction) -> Constant:
        """The same arrivals ``factor`` times faster: the rate times
        ``factor``, ``start`` and ``stop`` divided by it."""
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

    rate: PerSecond = attrs.field(validator=_rate)
    start: Seconds = attrs.field(default=0, validator=_seconds)
    stop: Seconds | None = attrs.field(default=None, validator=[_optional_seconds, _after_start])

    def times(self, seed: int) -> _Times:
        """Arrival times in nanoseconds, in order (unbounded without ``stop``)."""
        rate = check_rate(self.rate)
        t = nanoseconds("start", self.start)
        stop = None if self.stop is None else nanoseconds("stop", self.stop)
        log1p = math.log1p
        if rate < _SLOWEST:  # a gap in ns may be past a float's range: exact
            scale = SECOND / rate
            for u in _uniforms(seed):
                t += int(Fraction(-log1p(-u)) * scale)
                if stop is not None and t >= stop:
                    return
                yield t
        mean = SECOND / float(rate)
        for u in _uniforms(seed):
            t += int(-log1p(-u) * mean)
            if stop is not None and t >= stop:
                return
            yield t

    def asked(self, duration_ns: int) -> Fraction:
        """How many callers arrive before ``duration_ns``, on average."""
        return _asked(self.rate, self.start, self.stop, duration_ns)

    def scaled(self, factor: Fraction) -> Poisson:
        """The same arrivals ``factor`` times faster: the rate times
        ``factor``, ``start`` and ``stop`` divided by it."""
        return Poisson(
            check_rate(self.rate) * factor,
            _exact("start", self.start) / factor,
            _scaled(self.stop, factor),
        )


def _asked(rate: PerSecond, start: Seconds, stop: Seconds | None, duration_ns: int) -> Fraction:
    """Arrivals at ``rate`` per second from ``start`` until ``stop`` or
    ``duration_ns``, whichever is first."""
    end = duration_ns if stop is None else min(duration_ns, nanoseconds("stop", stop))
    window = max(0, end - nanoseconds("start", start))
    return check_rate(rate) * Fraction(window, SECOND)


#: Below this rate (per second), a Poisson gap in nanoseconds (the mean
#: times at most 37) may be past a float's range: drawn exactly instead.
_SLOWEST = Fraction(1, 10**290)
_MASK = (1 << 64) - 1
_UNIT = 2.0**-53


def _uniforms(seed: int) -> Iterator[float]:
    """Numbers uniform in ``[0, 1)`` from ``seed``, without end: splitmix64,
    a tiny generator whose output is the same on every platform and Python
    version (a scenario's seed fixes its run everywhere)."""
    state = seed & _MASK
    while True:
        state = (state + 0x9E3779B97F4A7C15) & _MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        yield ((z ^ (z >> 31)) >> 11) * _UNIT


Arrivals = Batch | Constant | Poisson


def _whole_numbers(value: object) -> tuple[int, ...]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise PermitTypeError("values", value, "a sequence of whole numbers")
    return tuple(value)


@attrs.frozen
class Uniform:
    """A cost drawn for each caller, every whole number from ``low`` to
    ``high`` (both included) as likely."""

    low: int = attrs.field(validator=_int(0))
    high: int = attrs.field(validator=_int(0))

    def __attrs_post_init__(self) -> None:
        if self.high < self.low:
            raise PermitValueError("high", self.high, f"must be at least low ({self.low})")

    @property
    def least(self) -> int:
        """The fewest units a draw gives: ``low``."""
        return self.low

    @property
    def most(self) -> int:
        """The most units a draw gives: ``high``."""
        return self.high

    def draw(self, u: float) -> int:
        """The cost for ``u``, uniform in ``[0, 1)``."""
        return min(self.high, self.low + int(u * (self.high - self.low + 1)))


@attrs.frozen
class Choice:
    """A cost drawn for each caller among ``values``, each as likely (a
    value written twice is twice as likely)."""

    values: tuple[int, ...] = attrs.field(converter=_whole_numbers)

    @values.validator
    def _values(self, attribute: attrs.Attribute[Any], value: tuple[int, ...]) -> None:
        if not value or len(value) > MAX_CHOICES:
            raise PermitValueError("values", value, f"needs 1 to {MAX_CHOICES:,} values")
        for i, n in enumerate(value):  # a bad one named by its entry: values[1]=-1
            check_int(f"values[{i}]", n, 0)

    @property
    def least(self) -> int:
        """The fewest units a draw gives: the smallest of ``values``."""
        return min(self.values)

    @property
    def most(self) -> int:
        """The most units a draw gives: the largest of ``values``."""
        return max(self.values)

    def draw(self, u: float) -> int:
        """The cost for ``u``, uniform in ``[0, 1)``."""
        values = self.values
        return values[min(len(values) - 1, int(u * len(values)))]


#: The cost of one limit: a constant, or drawn for each caller.
Units = int | Uniform | Choice
#: A workload's cost: units of every limit, or per limit by name (the
#: limits it does not name: 0).
Cost = Units | Mapping[str, Units]
_Costs = Units | tuple[tuple[str, Units], ...]


def _cost_value(value: object) -> _Costs:
    """A cost as kept: a mapping becomes its (limit, units) pairs."""
    if isinstance(value, Mapping):
        return tuple(value.items())
    return value  # type: ignore[return-value]  # checked by the validator


def _check_units(argument: str, value: object) -> None:
    if isinstance(value, (Uniform, Choice)):
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise PermitTypeError(argument, value, "an int, Uniform or Choice")
    check_int(argument, value, 0)


def _least(units: Units) -> int:
    return units if isinstance(units, int) else units.least


def _most(units: Units) -> int:
    return units if isinstance(units, int) else units.most


def _draw(units: Units, u: Iterator[float]) -> int:
    return units if isinstance(units, int) else units.draw(next(u))


@attrs.frozen
class Tenants:
    """``count`` tenants: each caller names one of them as its flow, at
    random (a seeded draw). Tenant ``k`` (1, the heaviest, to ``count``) is
    drawn with weight ``1 / k ** zipf`` (``zipf = 0``: all alike); or, given
    ``heaviest``, tenant 1 that fraction of the callers and the others alike.
    """

    count: int = attrs.field(validator=_int(1))
    zipf: float | int = attrs.field(default=0)
    heaviest: float | Fraction | None = attrs.field(default=None)

    @count.validator
    def _count(self, attribute: attrs.Attribute[Any], value: int) -> None:
        if value > MAX_TENANTS:
            raise PermitValueError("tenants", value, f"must be at most {MAX_TENANTS:,}")

    @zipf.validator
    def _zipf(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PermitTypeError("zipf", value, "a number")
        if not math.isfinite(value) or not 0 <= value <= 100:
            raise PermitValueError("zipf", value, "must be from 0 to 100")

    @heaviest.validator
    def _heaviest(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
            raise PermitTypeError("heaviest", value, "a fraction of the callers (0.5 for half)")
        if not 0 < value <= 1:
            raise PermitValueError("heaviest", value, "must be greater than 0 and at most 1")
        if self.zipf:
            raise PermitValueError("heaviest", value, "give zipf or heaviest, not both")

    def picks(self, seed: int) -> Iterator[int]:
        """Each caller's tenant, 0 (the heaviest) to ``count - 1``, without end."""
        count, last = self.count, self.count - 1
        if self.heaviest is not None:
            h = float(self.heaviest)
            rest = (count - 1) / (1 - h) if h < 1 else 0.0
            for u in _uniforms(seed):
                yield 0 if u < h else min(last, 1 + int((u - h) * rest))
        else:
            cdf = list(itertools.accumulate(_weight(k, self.zipf) for k in range(1, count + 1)))
            total, find = cdf[-1], bisect.bisect_right
            for u in _uniforms(seed):
                yield min(last, find(cdf, u * total))


def _weight(k: int, zipf: float) -> float:
    """Tenant ``k``'s weight, ``1 / k ** zipf``: 0 where ``k ** zipf`` is
    past a float (1200 ** 100.0)."""
    try:
        weight: float = 1 / k**zipf
    except OverflowError:
        return 0.0
    return weight


def _check_name(value: object, why: str) -> None:
    """A workload's or a scenario's name: a non-empty str of one line of
    printable text (a newline broke its table's row; a terminal's escape
    sequence, its colours)."""
    if not isinstance(value, str) or not value:
        raise PermitTypeError("name", value, "a non-empty str")
    if not value.isprintable():
        raise PermitValueError("name", value, f"must be one line of printable text ({why})")


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

    :param timeout: seconds after its arrival at which the limiter expires
        a caller still waiting, as ``acquire(timeout=...)`` does (counted
        as ``expired``; the core's ``push(deadline=...)`` is the absolute
        time in nanoseconds it becomes); ``None`` for never; 0 for a
        caller that takes only a permit free as it arrives.
    :param give_up_after: seconds after its arrival at which a caller still
        waiting gives up on its own: it cancels (its task cancelled, an
        ``asyncio.wait_for`` around the acquire), counted as
        ``cancelled``; more than 0 (at 0 all would give up as they came:
        ``timeout=0`` takes only a permit free on arrival); ``None`` for
        never.
    :param cost: what each caller asks for: an ``int`` (that many units of
        every limit), a :class:`Uniform` or :class:`Choice` drawn for each
        caller, or a mapping from limit names to those (the limits it does
        not name: none). A mapping is kept as its ``(limit, units)`` pairs.
    :param flow: the flow (a tenant) every caller names, or ``None``.
    :param tenants: :class:`Tenants` whose flows the callers name, one
        each, drawn at random; not with ``flow``.
    :param fair: ``False``: its callers are counted by tenant but name no
        flow to the limiter, so they wait in one line in their level, in
        the order they came (what the level does without flows).
    :param max_wait: seconds: a caller whose wait the limiter estimates
        (:meth:`~permits.core.Machine.min_wait`) longer than this on its
        arrival is refused at once, never queued (``acquire(max_wait=...)``,
        the core's ``push(max_wait_ns=...)``: counted as ``too_long``, apart
        from those ``rejected`` for a full level); ``None`` for no bound.
    """

    name: str = attrs.field()
    level: int = attrs.field(validator=_int(0))
    arrivals: Arrivals = attrs.field()
    timeout: Seconds | None = attrs.field(default=None, validator=_optional_timeout)
    published: Published | None = attrs.field(default=None, eq=False)
    cost: _Costs = attrs.field(default=1, converter=_cost_value, kw_only=True)
    flow: str | None = attrs.field(default=None, kw_only=True)
    tenants: Tenants | None = attrs.field(default=None, kw_only=True)
    fair: bool = attrs.field(default=True, kw_only=True)
    max_wait: Seconds | None = attrs.field(
        default=None, validator=attrs.validators.optional(_seconds), kw_only=True
    )
    give_up_after: Seconds | None = attrs.field(
        default=None, validator=_give_up_after, kw_only=True
    )

    @fair.validator
    def _fair(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, bool):
            raise PermitTypeError("fair", value, "a bool")

    @cost.validator
    def _cost(self, attribute: attrs.Attribute[Any], value: _Costs) -> None:
        if isinstance(value, tuple):
            if not value:
                raise PermitValueError("cost", {}, "names no limit")
            for name, units in value:
                if not isinstance(name, str):
                    raise PermitTypeError("cost", name, "limit names that are non-empty strings")
                if not name:
                    raise PermitValueError("cost", self.written_cost, EMPTY_LIMIT_NAME)
                _check_units(f"cost[{name!r}]", units)  # named by its entry
        elif isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise PermitValueError("cost", value, NO_UNIT)  # as 0 is: one rule
        else:
            _check_units("cost", value)
        if self.least_cost() == 0:
            raise PermitValueError(
                "cost",
                self.written_cost,
                f"{NO_UNIT}, in every draw",
            )

    @flow.validator
    def _flow(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and (not isinstance(value, str) or not value):
            raise PermitTypeError("flow", value, "a non-empty str (a tenant's name)")

    @tenants.validator
    def _tenants(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and not isinstance(value, Tenants):
            raise PermitTypeError("tenants", value, "a Tenants")
        if value is not None and self.flow is not None:
            raise PermitValueError("tenants", value, "give flow or tenants, not both")

    @name.validator
    def _name(self, attribute: attrs.Attribute[Any], value: object) -> None:
        _check_name(value, "it heads a table's row, and a requirement names it")

    @arrivals.validator
    def _arrivals(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, (Batch, Constant, Poisson)):
            raise PermitTypeError("arrivals", value, "Batch, Constant or Poisson")

    @property
    def written_cost(self) -> Cost:
        """``cost`` as it was given (a mapping as a ``dict``)."""
        return dict(self.cost) if isinstance(self.cost, tuple) else self.cost

    def least_cost(self) -> int:
        """The most units of any one limit its cheapest draw takes (0: a
        draw may take nothing)."""
        if isinstance(self.cost, tuple):
            return max(_least(units) for _, units in self.cost)
        return _least(self.cost)

    def most_cost(self, limit: str) -> int:
        """The most units of ``limit`` one caller may ask for."""
        if isinstance(self.cost, tuple):
            return max((_most(units) for name, units in self.cost if name == limit), default=0)
        return _most(self.cost)

    @property
    def plain(self) -> bool:
        """Whether every caller asks for one unit of every limit and names no flow."""
        return self.cost == 1 and self.flow is None and self.tenants is None

    def callers(
        self, limits: Sequence[str], seed: int
    ) -> Iterator[tuple[int | tuple[int, ...], str | None]]:
        """Each caller's cost (units of every limit, or per limit in the
        order of ``limits``) and flow, without end; ``seed`` fixes the draws."""
        cost = self.cost
        if isinstance(cost, tuple):
            named = dict(cost)
            units: list[Units] = [named.get(name, 0) for name in limits]
        else:
            units = [cost]
        draws = _uniforms(seed ^ 0x5EED_C057)
        tenants = self.tenants
        if tenants is None:
            flows: Iterator[str | None] = itertools.repeat(self.flow)
        else:
            names = [f"{self.name}#{k}" for k in range(1, tenants.count + 1)]
            flows = (names[k] for k in tenants.picks(seed ^ 0x7E4A_4775))
        per_limit = isinstance(cost, tuple)
        if all(isinstance(u, int) for u in units):
            fixed = tuple(units) if per_limit else units[0]
            for flow in flows:
                yield fixed, flow  # type: ignore[misc]
        else:
            for flow in flows:
                drawn = tuple(_draw(u, draws) for u in units)
                yield (drawn if per_limit else drawn[0]), flow

    def scaled(self, factor: Fraction) -> Workload:
        """The same workload ``factor`` times faster (see
        :meth:`Scenario.scaled`): its arrivals scaled, its ``timeout``,
        ``give_up_after`` and ``max_wait`` divided by ``factor``; published
        figures dropped."""
        return attrs.evolve(
            self,
            arrivals=self.arrivals.scaled(factor),
            timeout=_scaled(self.timeout, factor),
            give_up_after=_scaled(self.give_up_after, factor),
            max_wait=_scaled(self.max_wait, factor),
            published=None,
        )


def _workload_tuple(value: Iterable[Workload]) -> tuple[Workload, ...]:
    if isinstance(value, (Workload, str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise PermitTypeError(
            "workloads", value, "a sequence of Workloads (a list: [Workload(...)])"
        )
    return tuple(value)


def _requirement_tuple(value: Iterable[Requirement]) -> tuple[Requirement, ...]:
    return tuple(value)


def _flow_weight_pairs(value: object) -> object:
    """A mapping of flows to weights as ``(flow, weight)`` pairs (a frozen
    scenario's fields are values; pairs already are); the core checks the
    weights."""
    if value is None:
        return value
    if isinstance(value, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        return value
    if not isinstance(value, Mapping):
        raise PermitTypeError("flow_weights", value, "a mapping of flows to weights")
    return tuple(value.items())


@attrs.frozen
class Scenario:
    """A run: ``workloads`` sharing ``rate`` permits per second (``burst``
    banked at most) under ``policy``, for ``seconds`` of virtual time.

    Permits granted at times in ``[0, seconds)`` count; arrivals at or after
    ``seconds`` are not offered. ``seed`` fixes Poisson arrivals.
    """

    name: str = attrs.field()
    policy: Policy = attrs.field()
    rate: PerSecond | None = attrs.field(validator=_optional_rate)
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
    #: Several named limits in place of ``rate`` and ``burst`` (then
    #: ``None`` and 1), kept as ``(name, Limit)`` pairs; a workload's cost
    #: names what it takes from each.
    limits: tuple[tuple[str, Limit], ...] | None = attrs.field(
        default=None, converter=_limit_pairs, kw_only=True
    )
    #: The flows' weights (a flow not named weighs 1), kept as ``(flow,
    #: weight)`` pairs; the flows of a level take turns by them, as the
    #: core's ``flow_weights``.
    flow_weights: tuple[tuple[Hashable, int], ...] | None = attrs.field(
        default=None, converter=_flow_weight_pairs, kw_only=True
    )
    #: The most waiters one flow of a level may have queued (the core's
    #: ``max_waiting_per_flow``; ``None``: no limit).
    max_waiting_per_flow: int | None = attrs.field(default=None, kw_only=True)
    #: The limit whose units the flows of a level share (the core's
    #: ``flow_limit``; ``None``: the first).
    flow_limit: str | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.limits is None:
            if self.rate is None:
                raise PermitTypeError("rate", None, "a rate (permits per second), or give limits")
        else:
            if self.rate is not None or self.burst != 1:
                raise PermitValueError(
                    "limits", dict(self.limits), "give rate and burst, or limits, not both"
                )
            if not self.limits or len(self.limits) > MAX_LIMITS:
                raise PermitValueError(
                    "limits", dict(self.limits), f"needs 1 to {MAX_LIMITS} limits"
                )
            for name, limit in self.limits:
                if not isinstance(name, str):
                    raise PermitTypeError("limits", name, "limit names that are non-empty strings")
                if not name:
                    raise PermitValueError("limits", dict(self.limits), EMPTY_LIMIT_NAME)
                if not isinstance(limit, Limit):
                    raise PermitTypeError(f"limits[{name!r}]", limit, "a Limit")
        limits = self.named_limits
        for i, workload in enumerate(self.workloads):
            entries = dict(workload.cost) if isinstance(workload.cost, tuple) else None
            for name in entries or ():
                if name not in limits:
                    raise no_limit(
                        f"workloads[{i}].cost", workload.written_cost, name, list(limits)
                    )
            for name, limit in limits.items():
                most = workload.most_cost(name)
                if most > limit.burst:
                    # a mapping's entry named by its entry, as the core names it
                    argument, value = f"workloads[{i}].cost", workload.written_cost
                    if entries is not None:
                        argument, value = f"{argument}[{name!r}]", entries[name]
                    burst = "the burst"
                    if len(limits) > 1 and entries is None:
                        burst = f"the burst of limit {name!r}"
                    burst = f"{burst} ({limit.burst:,})"
                    why = (
                        f"exceeds {burst}"
                        if isinstance(value, int)
                        else f"draws up to {most:,} units, over {burst}"
                    )
                    raise PermitValueError(
                        argument, value, f"{why}: such a caller could never be granted"
                    )
        options = self.flow_options()
        if any(value is not None for value in options.values()):
            Machine(self.policy, limits=limits, **options)  # the core checks them, naming each

    def flow_options(self) -> dict[str, Any]:
        """The options of the flows, as a machine or a limiter takes them."""
        return {
            "flow_weights": None if self.flow_weights is None else dict(self.flow_weights),
            "max_waiting_per_flow": self.max_waiting_per_flow,
            "flow_limit": self.flow_limit,
        }

    @property
    def named_limits(self) -> dict[str, Limit]:
        """The limits by name: ``limits``, or ``rate`` and ``burst`` as one
        limit called ``units`` (the core's name for it)."""
        if self.limits is None:
            return {"units": Limit(check_rate(self.rate), self.burst)}
        return dict(self.limits)

    @name.validator
    def _name(self, attribute: attrs.Attribute[Any], value: object) -> None:
        _check_name(value, "it heads its tables")

    @policy.validator
    def _policy(self, attribute: attrs.Attribute[Any], value: object) -> None:
        check_policy(value)  # as a machine checks it (the class Fifo raised a raw TypeError)

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
                    more_levels(self.policy.levels, workload.level),
                )
            if workload.name in names:
                raise PermitValueError(f"workloads[{i}].name", workload.name, "is used twice")
            names.add(workload.name)

    @max_waiting.validator
    def _max_waiting(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None:
            return
        if not isinstance(value, tuple):
            check_int("max_waiting", value, 0)
        for level, entry in enumerate(value if isinstance(value, tuple) else ()):
            if entry is not None:  # a bad one named by its entry: max_waiting[1]=-1
                check_int(f"max_waiting[{level}]", entry, 0)
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
                raise PermitTypeError(
                    f"requirements[{i}]",
                    requirement,
                    "a Requirement (Requirement.parse(text) reads one as the TOML writes it)",
                )
            if requirement.workload not in names:
                known = ", ".join(repr(w.name) for w in self.workloads)
                raise PermitValueError(
                    f"requirements[{i}]",
                    requirement.text,
                    f"no workload is called {requirement.workload!r} (the workloads: {known})",
                )
            if requirement.limit is not None and requirement.limit not in (
                limits := self.named_limits
            ):
                known = ", ".join(map(repr, limits))
                raise PermitValueError(
                    f"requirements[{i}]",
                    requirement.text,
                    f"no limit is called {requirement.limit!r} (the limits: {known})",
                )

    def scaled(self, factor: PerSecond) -> Scenario:
        """The same scenario ``factor`` times faster: rates times ``factor``,
        every time and duration divided by it (an :class:`Aging` policy's
        ``after`` too). The counts of a run stay the same and its waits
        shrink by ``factor``, where the times stay whole nanoseconds (5 times
        faster at 100 permits/s); otherwise each is rounded, and two events
        of one time, or one at the end of the run, may fall apart (3 times
        faster, an arrival every 0.2 s from 0.6 s to the end at 5 s: 23
        callers offered, not 22). Published figures and requirements are
        dropped: they describe the original.
        """
        factor = check_rate(factor, "factor")  # (a Decimal's exponent bounded as a rate's)
        policy = self.policy
        if isinstance(policy, Aging):
            policy = Aging(policy.levels, after_ns=max(1, round(policy.after_ns / factor)))
        return attrs.evolve(
            self,
            name=f"{self.name} ({_short(factor)}x faster)",
            policy=policy,
            rate=None if self.rate is None else check_rate(self.rate) * factor,
            limits=None
            if self.limits is None
            else tuple(
                (name, Limit(limit.rate * factor, limit.burst)) for name, limit in self.limits
            ),
            seconds=_exact("seconds", self.seconds) / factor,
            workloads=tuple(self._scaled_workloads(factor)),
            requirements=(),
        )

    def _scaled_workloads(self, factor: Fraction) -> Iterator[Workload]:
        """Each workload ``factor`` times faster; one whose times would fall
        below a nanosecond raises naming it (``workloads[1].timeout``)."""
        for i, workload in enumerate(self.workloads):
            try:
                yield workload.scaled(factor)
            except PermitValueError as error:
                raise PermitValueError(
                    f"workloads[{i}].{error.argument}", error.value, error.reason
                ) from None


def describe(policy: Policy) -> str:
    """A short name for a policy: ``FIFO``, ``strict priority``, ``shares 4:1``,
    ``aging after 2 s``; the ``repr`` for others. Anything but a policy
    is refused (:class:`~permits.core.PermitTypeError`)."""
    check_policy(policy)
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
    if value.denominator == 1 and value < 10**18:
        return str(value.numerator)
    try:
        return f"{float(value):g}"
    except OverflowError:  # (a factor that scales every time below a nanosecond)
        return "over 1e+308"


def more_levels(levels: int, level: int) -> str:
    """Why ``level`` is refused under a scenario's policy of ``levels``
    levels, and what to do: give it a policy of more (where a policy may
    have that many)."""
    if level >= MAX_LEVELS:  # (10**10000: no policy has that many)
        return f"{level_range(levels)}; a policy has at most {MAX_LEVELS:,} levels"
    return f"{level_range(levels)}, or give the scenario a policy of {level + 1} levels or more"
