"""Limits: a rate and a burst, easy to say per second, minute or hour."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import attrs

from ._errors import PermitValueError, shown
from .checks import check_int, check_rate

__all__ = ["Limit"]


def _burst(value: int) -> int:
    return check_int("burst", value, 1)


@attrs.frozen
class Limit:
    """``rate`` units per second, at most ``burst`` at once.

    ``Limit(100, burst=10)`` is 100 units a second, 10 at once. The upstream's
    own words are easier to copy with :meth:`per_minute` and :meth:`per_hour`:
    ``Limit.per_minute(500)`` is 500 units a minute, 500 at once, as an API
    that allows "500 requests per minute" counts them.
    """

    #: Units per second, exact.
    rate: Fraction = attrs.field(converter=check_rate)
    #: Units that may be banked while nobody waits; the largest cost it admits.
    burst: int = attrs.field(default=1, converter=_burst)

    @classmethod
    def per_second(
        cls, count: int | float | Fraction | Decimal, *, burst: int | None = None
    ) -> Limit:
        """``count`` units a second; ``burst`` defaults to ``count``."""
        return cls._per(count, 1, burst)

    @classmethod
    def per_minute(
        cls, count: int | float | Fraction | Decimal, *, burst: int | None = None
    ) -> Limit:
        """``count`` units a minute; ``burst`` defaults to ``count``."""
        return cls._per(count, 60, burst)

    @classmethod
    def per_hour(
        cls, count: int | float | Fraction | Decimal, *, burst: int | None = None
    ) -> Limit:
        """``count`` units an hour; ``burst`` defaults to ``count``."""
        return cls._per(count, 3600, burst)

    @classmethod
    def _per(cls, count: object, seconds: int, burst: int | None) -> Limit:
        rate = check_rate(count, "count")
        if burst is None:
            if rate.denominator != 1:
                raise PermitValueError(
                    "burst", burst, f"give a burst: count={shown(count)} is not a whole number"
                )
            burst = int(rate)
        return cls(rate / seconds, burst)
