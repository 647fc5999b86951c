"""Argument checks, shared by the machine, the policies and the adapters, so
that every surface refuses bad input alike.

Each check raises :class:`~permits.core.PermitTypeError` or
:class:`~permits.core.PermitValueError` naming the argument and the value,
and returns the value normalised.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

from ._errors import MAX_SHOWN, PermitTypeError, PermitValueError, shown

if TYPE_CHECKING:
    from ._limits import Limit

__all__ = [
    "EMPTY_LIMIT_NAME",
    "MAX_SHOWN",
    "NO_UNIT",
    "RATE_EXPONENT",
    "check_actual",
    "check_change",
    "check_hashable",
    "check_int",
    "check_limits",
    "check_policy",
    "check_rate",
    "check_units",
    "level_range",
    "no_limit",
    "over_burst",
    "settled_units",
]

#: Why a cost of no unit is refused, whatever its sign (``cost=0``,
#: ``cost=-1``, ``{"tokens": 0}``): the one rule, in the words of every
#: surface that takes a cost (push, take, acquire, a scenario, a trace).
NO_UNIT = "must take at least one unit of some limit"

#: Why a limit named ``""`` is refused, wherever limits are named (a
#: machine's, a scenario's, a cost's).
EMPTY_LIMIT_NAME = (
    "names a limit '' (the empty string): give each limit a name of one character or more"
)

#: The largest exponent of ten, either way, of a ``Decimal`` rate: the
#: exact fraction of one past it has as many digits as its exponent
#: (``Decimal('1e-999999999')``: a billion), which no call would finish
#: making. An ``int``, ``float`` or ``Fraction`` is already that number.
RATE_EXPONENT = 10_000

#: What an argument named ``..._ns`` takes: the core's unit of time.
_NANOSECONDS = "an int of nanoseconds (seconds * SECOND, from permits.core)"


def check_int(argument: str, value: object, minimum: int | None = None) -> int:
    """An ``int`` (``bool`` refused; ``IntEnum`` members accepted) >= ``minimum``."""
    if type(value) is not int:
        if not isinstance(value, int) or isinstance(value, bool):
            if argument.partition("[")[0].endswith("_ns"):  # seconds meant, likely: say the way
                raise PermitTypeError(argument, value, _NANOSECONDS)
            raise PermitTypeError(argument, value, "an int")
        value = int(value)
    if minimum is not None and value < minimum:
        raise PermitValueError(argument, value, f"must be at least {minimum}")
    return value


def level_range(levels: int) -> str:
    """What a level must be under a policy of ``levels`` levels, in the
    words of every surface that takes a level (a push's, an extension's, a
    workload's, a trace's)."""
    if levels == 1:
        return "must be 0 (the policy has one level)"
    allowed = "0 or 1" if levels == 2 else f"from 0 to {levels - 1}"
    return f"must be {allowed} (the policy has {levels} levels)"


def over_burst(limits: Mapping[str, Limit], name: str, entry: bool = False) -> str:
    """Why a cost above the burst of limit ``name`` (of ``limits``) is
    refused: the burst, and the limit's name where the error does not say
    it already (one number for several limits; not a mapping's ``entry``,
    which names its limit: ``cost['tokens']=501``)."""
    burst = f"{limits[name].burst:,}"
    which = f" of limit {name!r}" if len(limits) > 1 and not entry else ""
    return f"exceeds the burst{which} ({burst}): it could never be granted"


def check_hashable(argument: str, value: object, expected: str = "a hashable value") -> None:
    """``value`` hashes; otherwise a :class:`PermitTypeError` naming
    ``argument``, also when its own ``__hash__`` raises something else than
    a ``TypeError`` (bad input, not a broken machine: an adapter would close
    the limiter for every caller)."""
    try:
        hash(value)
    except TypeError:
        raise PermitTypeError(argument, value, expected) from None
    except Exception as error:
        raise PermitTypeError(argument, value, f"{expected}; hashing it raised {error!r}") from None


def check_units(argument: str, name: str, units: object) -> int:
    """A cost's (or an actual cost's) units of limit ``name``, the entry
    ``name`` of the mapping ``argument``: an ``int`` >= 0, refused naming
    the entry (``cost['tokens']=-1``), as a flow's weight is, not the
    whole mapping."""
    entry = f"{argument}[{shown(name)}]"
    if isinstance(units, bool) or not isinstance(units, int):
        raise PermitTypeError(entry, units, "an int of units")
    if units < 0:
        raise PermitValueError(entry, units, "must be at least 0")
    return int(units)


def no_limit(
    argument: str, mapping: object, name: object, names: Sequence[str]
) -> PermitValueError:
    """The refusal of a mapping ``argument`` (a cost, an actual cost) whose
    key ``name`` is none of the limits ``names``: it says which key, and
    the limits there are."""
    return PermitValueError(
        argument, mapping, f"{shown(name)} is not one of the limits {list(names)}"
    )


def check_actual(actual: object, names: Sequence[str]) -> dict[int, int]:
    """A settle's ``actual`` cost: the units of each limit it settles, by
    the limit's index in ``names`` (the limits there are, in order).

    A mapping settles the limits it names; a limit it leaves out keeps the
    units its permit asked for (settling ``{"tokens": 900}`` keeps the
    request). An ``int`` settles the one limit, and is refused where there
    are several: which would it be?
    """
    if isinstance(actual, Mapping):
        settled: dict[int, int] = {}
        for name, units in actual.items():
            if name not in names:
                raise no_limit("actual", actual, name, names)
            settled[names.index(name)] = check_units("actual", name, units)
        return settled
    if isinstance(actual, bool) or not isinstance(actual, int):
        raise PermitTypeError("actual", actual, "an int, or a mapping of limit names to ints")
    units = check_int("actual", actual, 0)
    if len(names) > 1:
        raise PermitValueError(
            "actual",
            actual,
            f"is one number for several limits ({list(names)}): name the units of each limit "
            f"it settles, such as {{{names[-1]!r}: {units}}} (a limit left out keeps the units "
            "its permit asked for)",
        )
    return {0: units}


def settled_units(asked: tuple[int, ...], settled: dict[int, int]) -> tuple[int, ...]:
    """The units, one per limit, of a permit that asked ``asked``, settled
    as ``settled`` (from :func:`check_actual`) says: the limits it names,
    the others as asked."""
    return tuple(settled.get(i, units) for i, units in enumerate(asked))


def check_change(rate: object, burst: object) -> None:
    """A limit's change gives a rate, a burst or both."""
    if rate is None and burst is None:
        raise PermitTypeError(
            "rate",
            rate,
            "a rate, a burst or both (a change of a limit with neither changes nothing)",
        )


def check_rate(value: object, argument: str = "rate") -> Fraction:
    """Units per second as an exact positive finite :class:`Fraction` (a
    ``Decimal`` one with an exponent of ten within ``RATE_EXPONENT``).

    A float is read as the decimal it prints as (``0.1`` is exactly 1/10), so
    that the rate a user types is the rate the machine keeps.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction, Decimal)):
        raise PermitTypeError(argument, value, "an int, float, Fraction or Decimal")
    if (isinstance(value, float) and not math.isfinite(value)) or (
        isinstance(value, Decimal) and not value.is_finite()
    ):
        raise PermitValueError(argument, value, "must be finite")
    if value <= 0:
        raise PermitValueError(argument, value, "must be greater than 0")
    if isinstance(value, Decimal) and abs(value.adjusted()) > RATE_EXPONENT:
        # 1e-999999999: no Fraction of it would return
        raise PermitValueError(
            argument, value, f"its exponent of ten must be from -{RATE_EXPONENT} to {RATE_EXPONENT}"
        )
    if isinstance(value, float):
        return Fraction(repr(float(value)))  # a subclass (numpy.float64) reprs otherwise
    return Fraction(value)


def check_policy(policy: object, argument: str = "policy") -> int:
    """A policy object (not its class, not a name) whose ``levels`` is a
    count the core takes; returns the count."""
    from ._policies import MAX_LEVELS, Policy  # (which imports these checks)

    if isinstance(policy, type):
        raise PermitTypeError(
            argument, policy, f"a policy instance: pass {policy.__name__}(...), not the class"
        )
    if not isinstance(policy, Policy):
        raise PermitTypeError(argument, policy, "a Policy (levels, choose() and ahead())")
    levels = policy.levels
    if isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= MAX_LEVELS:
        raise PermitValueError(
            argument, policy, f"its levels={shown(levels)} must be an int from 1 to {MAX_LEVELS}"
        )
    return int(levels)


def check_limits(rate: object, burst: object, limits: object) -> dict[str, Limit]:
    """A machine's (or limiter's) limits by name, from its ``rate`` and
    ``burst`` (the one limit ``"units"``) or its ``limits`` (a
    :class:`~permits.core.Limit`, named ``"units"``, or a mapping of names
    to them), whichever was given."""
    from ._limits import Limit  # (which imports these checks)

    if limits is None:
        if rate is None:
            raise PermitTypeError("rate", rate, "a rate (units per second), or give limits=")
        return {"units": Limit(check_rate(rate), check_int("burst", burst, 1))}
    if rate is not None or burst.__class__ is not int or burst != 1:  # (True == 1)
        raise PermitValueError(
            "limits", limits, "give rate and burst, or limits, not both (each Limit has its own)"
        )
    if isinstance(limits, Limit):
        return {"units": limits}
    if not isinstance(limits, Mapping):
        raise PermitTypeError(
            "limits", limits, "a Limit, or a non-empty mapping of names to Limits"
        )
    if not limits:  # the right type, no limit in it
        raise PermitValueError("limits", limits, "names no limit: give at least one")
    named: dict[str, Limit] = {}
    for name, limit in limits.items():
        if not isinstance(name, str):
            raise PermitTypeError(  # (got the key, not "got dict")
                "limits", limits, "limit names that are non-empty strings", got=repr(name)
            )
        if not name:  # a str, the wrong one: a value's error
            raise PermitValueError("limits", limits, EMPTY_LIMIT_NAME)
        if not isinstance(limit, Limit):
            raise PermitTypeError(f"limits[{name!r}]", limit, "a Limit")
        named[name] = limit
    return named
