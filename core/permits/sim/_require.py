"""Requirements a workload's result must meet, as a person writes them.

``"interactive p99 <= 50 ms"``, ``"batch share >= 20%"``, ``"batch share of
tokens >= 20%"``, ``"batch cleared by 60 s"``, ``"checkout granted >= 99%"``,
``"api worst tenant p99 <= 2 s"``, ``"api median tenant p99 <= 100 ms"``,
``"api tenants starved <= 0"``: a workload's name, a measure, a bound. Wait
quantiles count every caller offered, those not granted within the run as
waiting past its end: a p99 is met only if 99% of the callers were granted
within the bound. A tenant's p99 is over its granted callers (as the
simulator reports it); the tenants granted nothing are those starved.
"""

from __future__ import annotations

import enum
import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

import attrs

from permits.core import SECOND, PermitTypeError, PermitValueError

if TYPE_CHECKING:
    from ._run import Result

__all__ = ["Measure", "Requirement", "offered_quantile"]


class Measure(enum.Enum):
    """What a :class:`Requirement` bounds."""

    #: The median wait of the callers offered (ungranted: past the end).
    WAIT_P50 = "p50"
    #: The 99th-percentile wait of the callers offered (ungranted: past the end).
    WAIT_P99 = "p99"
    #: The workload's fraction of all units granted in the run of the
    #: scenario's first limit, or of the limit the requirement names (of
    #: the permits, at one unit each).
    SHARE = "share"
    #: The fraction of its callers offered that were granted.
    GRANTED = "granted"
    #: When its last waiter left (never, if one was waiting at the end).
    CLEARED = "cleared by"
    #: The longest of its tenants' p99 waits (each over its granted callers).
    WORST_TENANT_P99 = "worst tenant p99"
    #: The median of its tenants' p99 waits (each over its granted callers).
    MEDIAN_TENANT_P99 = "median tenant p99"
    #: How many of its tenants were offered callers and granted none.
    TENANTS_STARVED = "tenants starved"


_QUANTILES = {Measure.WAIT_P50: Fraction(1, 2), Measure.WAIT_P99: Fraction(99, 100)}
_TIMES = (
    Measure.WAIT_P50,
    Measure.WAIT_P99,
    Measure.CLEARED,
    Measure.WORST_TENANT_P99,
    Measure.MEDIAN_TENANT_P99,
)
#: The other times, by the field of :class:`~permits.sim.WorkloadResult` that holds each.
_TIME_FIELDS = {
    Measure.CLEARED: "cleared_at_ns",
    Measure.WORST_TENANT_P99: "tenant_wait_p99_max_ns",
    Measure.MEDIAN_TENANT_P99: "tenant_wait_p99_median_ns",
}
#: The largest power of ten a bound may be written with (an exponent of
#: millions makes a Fraction of as many digits: it would not return; and
#: ``--json`` and ``--plot`` give the bound as a float).
_EXPONENT = 300
_UNITS = {"ms": Fraction(1, 1000), "s": Fraction(1), "%": Fraction(1, 100), "": Fraction(1)}
_PATTERN = re.compile(
    r"\s*(?P<workload>\S.*?)\s+"
    r"(?P<measure>p50|p99|share|granted|cleared\s+by|worst\s+tenant\s+p99|median\s+tenant\s+p99"
    r"|tenants\s+starved)(?:\s+of\s+(?P<limit>[^\s<>=](?:[^<>=]*?[^\s<>=])?))?"
    r"\s*(?P<op><=|>=)?\s*(?P<value>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)"
    r"\s*(?P<unit>ms|s|%)?\s*"
)
_FORMAT = (
    "expected '<workload> p50|p99 <= <n> ms|s', '<workload> share|granted >= <n>%', "
    "'<workload> share of <limit> >= <n>%', '<workload> cleared by <n> s', "
    "'<workload> worst|median tenant p99 <= <n> ms|s' or '<workload> tenants starved <= <n>'"
)


def offered_quantile(waits: tuple[tuple[int, int], ...], offered: int, q: Fraction) -> int | None:
    """The ``q``-quantile (nearest rank) of the waits of ``offered`` callers,
    of which those in ``waits`` (``(wait, count)`` by wait, as a result's
    :attr:`~permits.sim.WorkloadResult.waits_ns`) were granted and the rest
    waited past the end, in the unit of ``waits`` (nanoseconds, from a
    result): ``None`` if the rank falls among the rest (or nothing was
    offered)."""
    rank = max(1, math.ceil(q * offered))
    seen = 0
    for wait, count in waits:
        seen += count
        if seen >= rank:
            return wait
    return None


@attrs.frozen
class Requirement:
    """``workload``'s ``measure`` is at most (times, tenants starved) or at
    least (share, granted) ``bound``: seconds for times, a count of tenants
    for those starved, a fraction (0.2 for 20%) otherwise; a share is of
    ``limit`` (``None``: the scenario's first). :meth:`parse` reads the
    written form, kept as ``text``."""

    workload: str
    measure: Measure
    bound: Fraction
    text: str = attrs.field(eq=False)
    limit: str | None = attrs.field(default=None, kw_only=True)

    @property
    def at_most(self) -> bool:
        """Whether ``bound`` is an upper bound (times, tenants starved) or a lower one."""
        return self.measure in _TIMES or self.measure is Measure.TENANTS_STARVED

    @property
    def unit(self) -> str:
        """What ``bound`` counts: ``"s"``, ``"count"`` (tenants) or ``"fraction"``."""
        if self.measure in _TIMES:
            return "s"
        return "count" if self.measure is Measure.TENANTS_STARVED else "fraction"

    @classmethod
    def parse(cls, text: object, argument: str = "require") -> Requirement:
        """Read ``"interactive p99 <= 50 ms"`` and the like; a
        :class:`~permits.core.PermitValueError` naming ``argument`` if it
        does not read."""
        if not isinstance(text, str):
            raise PermitTypeError(argument, text, "a str such as 'interactive p99 <= 50 ms'")
        match = _PATTERN.fullmatch(text)
        if match is None:
            raise PermitValueError(argument, text, _FORMAT)
        measure = Measure(" ".join(match["measure"].split()))
        op, unit, limit = match["op"], match["unit"] or "", match["limit"]
        if limit is not None and measure is not Measure.SHARE:
            raise PermitValueError(
                argument, text, f"only a share names a limit, not a {measure.value}"
            )
        requirement = cls(match["workload"], measure, Fraction(0), text.strip(), limit=limit)
        if measure is Measure.CLEARED:
            if op is not None:
                raise PermitValueError(argument, text, "write 'cleared by <n> s', without <= or >=")
        elif op != ("<=" if requirement.at_most else ">="):
            want = "<=" if requirement.at_most else ">="
            raise PermitValueError(argument, text, f"a {measure.value} bound is written {want}")
        kind = requirement.unit
        if kind == "s" and unit not in ("ms", "s"):
            raise PermitValueError(argument, text, "a time needs its unit: ms or s")
        # (a share; the granted fraction: "a granted" is no noun)
        what = f"{measure.value} fraction" if measure is Measure.GRANTED else measure.value
        if kind == "fraction" and unit not in ("%", ""):
            raise PermitValueError(argument, text, f"a {what} is a fraction: 20% or 0.2")
        if abs(Decimal(match["value"]).adjusted()) > _EXPONENT:  # 1e999999999: no Fraction
            raise PermitValueError(
                argument, text, f"a bound's exponent must be from -{_EXPONENT} to {_EXPONENT}"
            )
        bound = Fraction(match["value"]) * _UNITS[unit]
        if kind == "count" and (unit or bound.denominator != 1):
            raise PermitValueError(argument, text, "a count of tenants is a whole number, no unit")
        if kind == "fraction" and bound > 1:
            raise PermitValueError(argument, text, f"a {what} is at most 100%")
        return attrs.evolve(requirement, bound=bound)

    def measured(self, run: Result) -> Fraction | None:
        """The measure of its workload in ``run``: in seconds, as a count or
        as a fraction; ``None``: never reached (a quantile among the
        ungranted, a backlog not cleared, no tenant granted), or a share
        of nothing (no unit of its limit granted at all), which is not
        met."""
        result = run[self.workload]
        measure = self.measure
        if measure in _QUANTILES:
            wait = offered_quantile(result.waits_ns, result.offered, _QUANTILES[measure])
            return None if wait is None else Fraction(wait, SECOND)
        if measure in _TIMES:
            at: int | None = getattr(result, _TIME_FIELDS[measure])
            return None if at is None else Fraction(at, SECOND)
        if measure is Measure.TENANTS_STARVED:
            return Fraction(result.tenants_starved)
        if measure is Measure.SHARE:
            share = result.shares[0 if self.limit is None else run.limits.index(self.limit)]
            return None if share is None else Fraction(repr(share))  # the fraction as it prints
        return Fraction(result.granted, result.offered) if result.offered else Fraction(1)

    def met(self, run: Result) -> bool:
        """Whether ``run`` meets it. A wait quantile is judged exactly, on
        how many callers were granted within the bound (the run counts them
        for the bounds of its scenario's requirements), not on the
        histogram's value, which is within 1/256 of exact: ``p50 <= 1 s``
        is met by waits of 0, 1 and 2 s. A wait or ``cleared by`` of a
        workload no caller came to is met (as ``granted`` is). Otherwise as
        :meth:`met_by`."""
        result = run[self.workload]
        if not result.offered and (self.measure in _QUANTILES or self.measure is Measure.CLEARED):
            return True  # no caller came: none waited past the bound, none is left
        bound = math.floor(self.bound * SECOND)
        if self.measure in _QUANTILES:
            within = dict(result.within_ns).get(bound)
            if within is not None:
                return within >= max(1, math.ceil(_QUANTILES[self.measure] * result.offered))
        elif self.measure in (Measure.WORST_TENANT_P99, Measure.MEDIAN_TENANT_P99):
            within = dict(result.tenants_within_ns).get(bound)
            if within is not None:
                granted = result.tenants - result.tenants_starved
                if self.measure is Measure.WORST_TENANT_P99:
                    return granted > 0 and within == granted
                return granted > 0 and within >= (granted - 1) // 2 + 1
        return self.met_by(self.measured(run))

    def met_by(self, measured: Fraction | None) -> bool:
        """Whether ``measured`` (from :meth:`measured`) meets the bound."""
        if measured is None:
            return False
        return measured <= self.bound if self.at_most else measured >= self.bound
