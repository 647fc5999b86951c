"""Argument checks, shared by the machine, the policies and the adapters, so
that every surface refuses bad input alike.

Each check raises :class:`~permits.core.PermitTypeError` or
:class:`~permits.core.PermitValueError` naming the argument and the value,
and returns the value normalised.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

from ._errors import PermitTypeError, PermitValueError

__all__ = ["check_int", "check_rate"]


def check_int(argument: str, value: object, minimum: int | None = None) -> int:
    """An ``int`` (``bool`` refused; ``IntEnum`` members accepted) >= ``minimum``."""
    if type(value) is not int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise PermitTypeError(argument, value, "an int")
        value = int(value)
    if minimum is not None and value < minimum:
        raise PermitValueError(argument, value, f"must be at least {minimum}")
    return value


def check_rate(value: object, argument: str = "rate") -> Fraction:
    """Units per second as an exact positive finite :class:`Fraction`.

    A float is read as the decimal it prints as (``0.1`` is exactly 1/10), so
    that the rate a user types is the rate the machine keeps.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction, Decimal)):
        raise PermitTypeError(argument, value, "an int, float, Fraction or Decimal")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PermitValueError(argument, value, "must be finite")
        exact = Fraction(repr(float(value)))  # a subclass (numpy.float64) reprs otherwise
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise PermitValueError(argument, value, "must be finite")
        exact = Fraction(value)
    else:
        exact = Fraction(value)
    if exact <= 0:
        raise PermitValueError(argument, value, "must be greater than 0")
    return exact
