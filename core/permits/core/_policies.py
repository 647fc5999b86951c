"""Policies: who gets the next permit.

This file owns that one decision. A policy is a small object that, given the
:class:`~permits.core.Queues`, names the *level* whose head is granted next.
The machine takes that level's head, so first-in-first-out within a level
holds under every policy, a user's included. The built-in policies are
immutable values: their choice depends only on what they are shown, so one
policy object may serve any number of machines.

To write your own, implement :class:`Policy`: a ``levels`` attribute, a
``choose`` method that returns a non-empty level, and an ``ahead`` method that
returns a lower bound on how many of the current waiters go before a newcomer
(``queues.depths[level]`` is always a safe answer).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Protocol, runtime_checkable

import attrs

from ._errors import PermitTypeError, PermitValueError
from ._queues import Queues
from .checks import check_int

__all__ = ["Aging", "Fifo", "Policy", "Shares", "StrictPriority"]

#: Largest sum of :class:`Shares` weights (the length of its schedule).
MAX_SCHEDULE = 1_000_000
#: The most levels a built-in policy takes: far more than priorities anyone
#: tells apart, and few enough that per-level state stays small.
MAX_LEVELS = 1_000


@runtime_checkable
class Policy(Protocol):
    """What the machine asks of a policy."""

    @property
    def levels(self) -> int:
        """Number of levels, at least 1; level 0 is the most urgent."""
        ...

    def choose(self, queues: Queues, now: int) -> int:
        """The level whose head gets the permit granted at ``now``.

        Called once per grant, only when someone waits; must return a level
        with ``queues.depths[level] > 0``.
        """
        ...

    def ahead(self, queues: Queues, level: int, now: int) -> int:
        """A lower bound on the current waiters granted before a newcomer at ``level``.

        Used for fail-fast admission (:meth:`Machine.min_wait`). It must not
        exceed the truth; ``queues.depths[level]`` is always safe.
        """
        ...


def _levels(instance: object, attribute: attrs.Attribute[int], value: object) -> None:
    if check_int("levels", value, 1) > MAX_LEVELS:
        raise PermitValueError("levels", value, f"must be at most {MAX_LEVELS}")


def _first_waiting(depths: Sequence[int]) -> int:
    for level, depth in enumerate(depths):
        if depth:
            return level
    raise AssertionError("choose() called with nobody waiting")  # pragma: no cover


@attrs.frozen
class Fifo:
    """First in, first out: push order, levels ignored (kept for statistics)."""

    levels: int = attrs.field(default=1, validator=_levels)

    def choose(self, queues: Queues, now: int) -> int:
        best, best_seq = -1, 0
        for level, depth in enumerate(queues.depths):
            if depth:
                seq = queues.head(level).seq
                if best < 0 or seq < best_seq:
                    best, best_seq = level, seq
        return best

    def ahead(self, queues: Queues, level: int, now: int) -> int:
        return sum(queues.depths)


@attrs.frozen
class StrictPriority:
    """The most urgent waiting level first (0 before 1), FIFO within a level."""

    levels: int = attrs.field(default=2, validator=_levels)

    def choose(self, queues: Queues, now: int) -> int:
        for level, depth in enumerate(queues.depths):
            if depth:
                return level
        raise AssertionError("choose() called with nobody waiting")  # pragma: no cover

    def ahead(self, queues: Queues, level: int, now: int) -> int:
        return sum(queues.depths[: level + 1])


def _weights(value: object) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise PermitTypeError("weights", value, "a sequence of ints")
    if not value:
        raise PermitValueError("weights", value, "needs at least one level")
    weights = []
    for weight in value:
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise PermitTypeError("weights", value, "a sequence of ints")
        if weight < 1:
            raise PermitValueError("weights", value, "every weight must be at least 1")
        weights.append(int(weight))
    if sum(weights) > MAX_SCHEDULE:
        raise PermitValueError("weights", value, f"weights must add up to at most {MAX_SCHEDULE}")
    return tuple(weights)


def schedule(weights: Sequence[int]) -> tuple[int, ...]:
    """The cycle of slot owners for ``weights``: level ``i`` owns ``weights[i]`` slots.

    Level ``i``'s ``j``-th slot (``j = 1..w_i``) stands at ``j / w_i`` of the
    cycle; slots are taken in that order, the more urgent level first on a tie.
    So ``(4, 1)`` gives ``(0, 0, 0, 0, 1)``: every 5th permit to level 1.
    """
    slots = sorted(
        (Fraction(j, weight), level)
        for level, weight in enumerate(weights)
        for j in range(1, weight + 1)
    )
    return tuple(level for _, level in slots)


@attrs.frozen
class Shares:
    """Minimum shares by weight, work-conserving.

    Permits are dealt from a fixed cycle of ``sum(weights)`` slots (see
    :func:`schedule`); the ``n``-th permit granted goes to the owner of slot
    ``n mod sum(weights)`` if that level waits, and otherwise to the most
    urgent level that waits. So a level that waits throughout any
    ``sum(weights)`` consecutive grants receives at least its weight of them,
    and a share its level leaves unused goes to whoever waits.

    ``Shares.every(5)`` is the seed's "every 5th permit to the lower level":
    weights ``(4, 1)``.
    """

    weights: tuple[int, ...] = attrs.field(converter=_weights)
    _cycle: tuple[int, ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_cycle", schedule(self.weights))

    @classmethod
    def every(cls, n: int) -> Shares:
        """Two levels; every ``n``-th permit goes to level 1 while it waits."""
        n = check_int("n", n, 2)
        if n > MAX_SCHEDULE:
            raise PermitValueError("n", n, f"must be at most {MAX_SCHEDULE} (one cycle of permits)")
        return cls((n - 1, 1))

    @property
    def levels(self) -> int:
        return len(self.weights)

    def choose(self, queues: Queues, now: int) -> int:
        cycle = self._cycle
        owner = cycle[queues.granted % len(cycle)]
        depths = queues.depths
        if depths[owner]:
            return owner
        return _first_waiting(depths)

    def ahead(self, queues: Queues, level: int, now: int) -> int:
        return queues.depths[level]


def _after(instance: object, attribute: attrs.Attribute[int], value: object) -> None:
    check_int("after_ns", value, 1)


@attrs.frozen
class Aging:
    """Effective priority improves as a waiter waits.

    A waiter's effective priority at time ``t`` is
    ``level - (t - pushed_at) / after_ns``; the smallest is served first,
    ties by push order. Since ``t`` is common to all, that is the order of the
    static key ``level * after_ns + pushed_at``, computed exactly in integers.
    With ``Aging(2, after_ns=2 * SECOND)``, a level-1 waiter that has waited
    2 s outranks a new level-0 one. ``after_ns`` is in nanoseconds, the
    core's unit of time, and keyword-only so that every call names its unit.
    """

    levels: int = attrs.field(default=2, validator=_levels)
    #: Nanoseconds of waiting worth one level.
    after_ns: int = attrs.field(default=2_000_000_000, validator=_after, kw_only=True)

    def choose(self, queues: Queues, now: int) -> int:
        after = self.after_ns
        best, best_key = -1, (0, 0)
        for level, depth in enumerate(queues.depths):
            if depth:
                head = queues.head(level)
                key = (level * after + head.pushed_at, head.seq)
                if best < 0 or key < best_key:
                    best, best_key = level, key
        return best

    def ahead(self, queues: Queues, level: int, now: int) -> int:
        # Every waiter at this level or a more urgent one has a smaller key.
        return sum(queues.depths[: level + 1])
