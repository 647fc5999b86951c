"""Requirements a workload's result must meet, as a person writes them.

``"interactive p99 <= 50 ms"``, ``"batch share >= 20%"``, ``"batch cleared
by 60 s"``, ``"checkout granted >= 99%"``: a workload's name, a measure, a
bound. Wait quantiles count every caller offered, those not granted within
the run as waiting past its end: a p99 is met only if 99% of the callers
were granted within the bound.
"""

from __future__ import annotations

import enum
import math
import re
from fractions import Fraction
from typing import TYPE_CHECKING

import attrs

from permits.core import SECOND, PermitTypeError, PermitValueError

if TYPE_CHECKING:
    from ._run import WorkloadResult

__all__ = ["Measure", "Requirement", "offered_quantile"]


class Measure(enum.Enum):
    """What a :class:`Requirement` bounds."""

    #: The median wait of the callers offered (ungranted: past the end).
    WAIT_P50 = "p50"
    #: The 99th-percentile wait of the callers offered (ungranted: past the end).
    WAIT_P99 = "p99"
    #: The workload's fraction of all permits granted in the run.
    SHARE = "share"
    #: The fraction of its callers offered that were granted.
    GRANTED = "granted"
    #: When its last waiter left (never, if one was waiting at the end).
    CLEARED = "cleared by"


_QUANTILES = {Measure.WAIT_P50: Fraction(1, 2), Measure.WAIT_P99: Fraction(99, 100)}
_TIMES = (Measure.WAIT_P50, Measure.WAIT_P99, Measure.CLEARED)
_UNITS = {"ms": Fraction(1, 1000), "s": Fraction(1), "%": Fraction(1, 100), "": Fraction(1)}
_PATTERN = re.compile(
    r"\s*(?P<workload>\S.*?)\s+(?P<measure>p50|p99|share|granted|cleared\s+by)"
    r"\s*(?P<op><=|>=)?\s*(?P<value>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)"
    r"\s*(?P<unit>ms|s|%)?\s*"
)
_FORMAT = (
    "expected '<workload> p50|p99 <= <n> ms|s', '<workload> share|granted >= <n>%' "
    "or '<workload> cleared by <n> s'"
)


def offered_quantile(waits: tuple[tuple[int, int], ...], offered: int, q: Fraction) -> int | None:
    """The ``q``-quantile (nearest rank) of the waits of ``offered`` callers,
    of which those in ``waits`` (``(wait, count)`` by wait) were granted and
    the rest waited past the end: ``None`` if the rank falls among the rest
    (or nothing was offered)."""
    rank = max(1, math.ceil(q * offered))
    seen = 0
    for wait, count in waits:
        seen += count
        if seen >= rank:
            return wait
    return None


@attrs.frozen
class Requirement:
    """``workload``'s ``measure`` is at most (waits, cleared) or at least
    (share, granted) ``bound``: seconds for times, a fraction (0.2 for 20%)
    otherwise. :meth:`parse` reads the written form, kept as ``text``."""

    workload: str
    measure: Measure
    bound: Fraction
    text: str = attrs.field(eq=False)

    @property
    def at_most(self) -> bool:
        """Whether ``bound`` is an upper bound (times) or a lower one."""
        return self.measure in _TIMES

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
        op, unit = match["op"], match["unit"] or ""
        times = measure in _TIMES
        if measure is Measure.CLEARED:
            if op is not None:
                raise PermitValueError(argument, text, "write 'cleared by <n> s', without <= or >=")
        elif op != ("<=" if times else ">="):
            want = "<=" if times else ">="
            raise PermitValueError(argument, text, f"a {measure.value} bound is written {want}")
        if times and unit not in ("ms", "s"):
            raise PermitValueError(argument, text, "a time needs its unit: ms or s")
        if not times and unit not in ("%", ""):
            raise PermitValueError(argument, text, f"a {measure.value} is a fraction: 20% or 0.2")
        bound = Fraction(match["value"]) * _UNITS[unit]
        if not times and bound > 1:
            raise PermitValueError(argument, text, f"a {measure.value} is at most 100%")
        return cls(match["workload"], measure, bound, text.strip())

    def measured(self, result: WorkloadResult) -> Fraction | None:
        """The measure of ``result``, in seconds or as a fraction; ``None``:
        never reached (a quantile among the ungranted, a backlog not cleared)."""
        if self.measure in _QUANTILES:
            wait = offered_quantile(result.waits, result.offered, _QUANTILES[self.measure])
            return None if wait is None else Fraction(wait, SECOND)
        if self.measure is Measure.CLEARED:
            at = result.cleared_at
            return None if at is None else Fraction(at, SECOND)
        if self.measure is Measure.SHARE:
            return Fraction(repr(result.share))  # the fraction as it prints
        return Fraction(result.granted, result.offered) if result.offered else Fraction(1)

    def met_by(self, measured: Fraction | None) -> bool:
        """Whether ``measured`` (from :meth:`measured`) meets the bound."""
        if measured is None:
            return False
        return measured <= self.bound if self.at_most else measured >= self.bound
