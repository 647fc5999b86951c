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

from bisect import bisect_left
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs

from ._errors import PermitTypeError, PermitValueError
from ._queues import Queues, Waiter
from .checks import check_int

__all__ = ["Aging", "Deal", "Fifo", "Policy", "Shares", "StrictPriority", "across_processes"]

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

        Called only when someone waits: before each grant, and also to
        plan one (the cost of the waiter it would choose, with costs that
        differ) or to answer :meth:`Machine.next_level`, so it may be
        called several times per grant and must change nothing (a policy
        that keeps count does so in ``record``). Must return a level with
        ``queues.depths[level] > 0``.
        """
        ...

    def ahead(self, queues: Queues, level: int, now: int) -> int:
        """A lower bound on the current waiters granted before a newcomer at ``level``.

        Used for fail-fast admission (:meth:`Machine.min_wait`). It must not
        exceed the truth; ``queues.depths[level]`` is always safe.
        """
        ...


def _levels(policy: object, attribute: attrs.Attribute[int], value: int) -> None:
    """A policy's ``levels``, checked and kept as an ``int`` (an ``IntEnum``'s
    too). A validator, not a converter: pyright types a field with a
    converter as a descriptor, which no ``levels`` property of
    :class:`Policy` accepts, so ``Machine(Fifo(), ...)`` was an error there."""
    levels = check_int("levels", value, 1)
    if levels > MAX_LEVELS:
        raise PermitValueError("levels", value, f"must be at most {MAX_LEVELS}")
    object.__setattr__(policy, attribute.name, levels)  # (frozen: as attrs's own __init__ sets it)


def _first_waiting(depths: Sequence[int]) -> int:
    for level, depth in enumerate(depths):
        if depth:
            return level
    raise AssertionError("choose() called with nobody waiting")  # pragma: no cover


@attrs.frozen
class Fifo:
    """First in, first out: push order, levels ignored (kept for statistics).
    With flows, the level of the oldest waiter serves the waiter its flows
    choose."""

    levels: int = attrs.field(default=1, validator=_levels)

    def choose(self, queues: Queues, now: int) -> int:
        """The level of the waiter pushed first."""
        best = -1
        for level, depth in enumerate(queues.depths):
            if depth and (best < 0 or queues.oldest(level).seq < queues.oldest(best).seq):
                best = level
        return best

    def ahead(self, queues: Queues, level: int, now: int) -> int:
        """Every waiter: all were pushed before a newcomer."""
        return sum(queues.depths)


@attrs.frozen
class StrictPriority:
    """The most urgent waiting level first (0 before 1), FIFO within a level."""

    levels: int = attrs.field(default=2, validator=_levels)

    def choose(self, queues: Queues, now: int) -> int:
        """The most urgent level that has a waiter."""
        for level, depth in enumerate(queues.depths):
            if depth:
                return level
        raise AssertionError("choose() called with nobody waiting")  # pragma: no cover

    def ahead(self, queues: Queues, level: int, now: int) -> int:
        """The waiters at ``level`` and at every more urgent one."""
        return sum(queues.depths[: level + 1])


def _weights(value: object) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise PermitTypeError("weights", value, "a sequence of ints")
    if not value:
        raise PermitValueError("weights", value, "needs at least one level")
    weights = []
    for i, weight in enumerate(value):  # a bad one named by its entry: weights[1]=0
        weights.append(check_int(f"weights[{i}]", weight, 1))
    if sum(weights) > MAX_SCHEDULE:
        raise PermitValueError("weights", value, f"weights must add up to at most {MAX_SCHEDULE}")
    return tuple(weights)


def _limit_name(instance: object, attribute: attrs.Attribute[str | None], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise PermitTypeError("limit", value, "the name of a limit (a str), or None for the first")


def schedule(weights: Sequence[int]) -> tuple[int, ...]:
    """The cycle of slot owners for ``weights``: level ``i`` owns ``weights[i]`` slots.

    Level ``i``'s ``j``-th slot (``j = 1..w_i``) stands at ``j / w_i`` of the
    cycle; slots are taken in that order, the more urgent level first on a tie.
    So ``(4, 1)`` gives ``(0, 0, 0, 0, 1)``: every 5th permit to level 1.
    ``weights`` are checked as :class:`Shares` checks them.
    """
    weights = _weights(weights)
    # j / w in integers: floor(j * K / w) with K = max(w)**2 orders the
    # slots exactly as the fractions do (two that differ, differ by at
    # least 1 / K), ties equal; the level breaks them, in the key's last
    # digits (sorting 10**6 Fractions took seconds).
    scale, n = max(weights) ** 2, len(weights)
    keys = sorted(
        j * scale // weight * n + level
        for level, weight in enumerate(weights)
        for j in range(1, weight + 1)
    )
    return tuple(key % n for key in keys)


@attrs.define(eq=True)
class Deal:
    """How far one machine's :class:`Shares` cycle has been dealt: the
    policy's state in that machine (``queues.state``). Mutable, small."""

    #: The index of the limit whose units are shared.
    limit: int
    #: Slots dealt so far, over every cycle. Equal to the grants made while
    #: every cost was one unit.
    position: int = 0
    #: Per level, the units dealt to it that its grants have not used yet.
    credits: tuple[int, ...] = ()


@attrs.frozen
class Shares:
    """Minimum shares by weight, of units, work-conserving.

    Units are dealt from a fixed cycle of ``sum(weights)`` slots (see
    :func:`schedule`), one unit per slot, in order: a slot goes to its owner
    if that level waits, and otherwise to the most urgent level that waits.
    A level's head is granted at the slot where the units dealt to its level
    cover its cost (a level whose credit already covers its head's cost goes
    first). Units dealt and not used stay with the level while it waits and
    are dropped at a grant that finds it not waiting, so no level banks
    credit while idle. With every cost one unit, each slot is one grant: the
    ``n``-th grant goes to the owner of slot ``n mod sum(weights)`` if it
    waits, otherwise to the most urgent waiting level.

    So a level that waits throughout receives at least its weight's fraction
    of the units granted, less a bound set by the largest cost (SPEC.md,
    P33), and a share its level leaves unused goes to whoever waits.

    ``limit`` names the limit whose units are shared (the machine's first by
    default). ``Shares.every(5)`` is the article's "every 5th permit to the
    lower level": weights ``(4, 1)``.
    """

    weights: tuple[int, ...] = attrs.field(converter=_weights)
    #: The name of the limit whose units are shared; ``None``: the machine's first.
    limit: str | None = attrs.field(default=None, kw_only=True, validator=_limit_name)
    _cycle: tuple[int, ...] = attrs.field(init=False, repr=False, eq=False)
    #: Per level, the positions of its slots in the cycle, ascending.
    _slots: tuple[tuple[int, ...], ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        cycle = schedule(self.weights)
        # one pass over the cycle (a pass per level took 46 s for 1,000
        # levels of weight 1,000, a cycle of 10**6 slots)
        positions: list[list[int]] = [[] for _ in self.weights]
        for p, owner in enumerate(cycle):
            positions[owner].append(p)
        object.__setattr__(self, "_cycle", cycle)
        object.__setattr__(self, "_slots", tuple(map(tuple, positions)))

    @classmethod
    def every(cls, n: int, *, limit: str | None = None) -> Shares:
        """Two levels; every ``n``-th unit goes to level 1 while it waits."""
        n = check_int("n", n, 2)
        if n > MAX_SCHEDULE:
            raise PermitValueError("n", n, f"must be at most {MAX_SCHEDULE} (one cycle of permits)")
        return cls((n - 1, 1), limit=limit)

    @property
    def levels(self) -> int:
        """One level per weight."""
        return len(self.weights)

    def start(self, limits: Sequence[str]) -> Deal:
        """A machine with these limits starts: its fresh :class:`Deal`."""
        if self.limit is None:
            index = 0
        elif self.limit in limits:
            index = list(limits).index(self.limit)
        else:
            raise PermitValueError(
                "policy",
                self,
                f"shares the units of limit {self.limit!r}, which the machine does not have "
                f"(its limits: {', '.join(map(repr, limits))})",
            )
        return Deal(index, 0, (0,) * self.levels)

    def across_processes(self, limits: Sequence[str]) -> tuple[tuple[int, ...], int]:
        """How processes that keep these limits together deal their units
        among levels (a shared limit's global priority): by these weights,
        over the limit whose units are shared (its index in ``limits``). A
        policy without this method orders its levels strictly across
        processes."""
        return self.weights, self.start(limits).limit

    def choose(self, queues: Queues, now: int) -> int:
        """The level the cycle of weights owes the next unit, or the most
        urgent waiting level when that one has no waiter; with costs above
        1, the waiting head that its level's slots cover first."""
        deal = _deal(queues)
        depths = queues.depths
        if queues.unit_costs:
            owner = self._cycle[deal.position % len(self._cycle)]
            return owner if depths[owner] else _first_waiting(depths)
        waiting = [level for level, depth in enumerate(depths) if depth]
        needs = [queues.head(level).cost[deal.limit] - deal.credits[level] for level in waiting]
        for level, need in zip(waiting, needs, strict=True):
            if need <= 0:
                return level
        return min(
            zip(waiting, needs, strict=True),
            key=lambda pair: self._covered_at(pair[0], pair[1], deal.position, waiting),
        )[0]

    def record(self, queues: Queues, waiter: Waiter) -> None:
        """``waiter``'s grant was made (the machine calls this after each):
        deal the slots up to the one that covered it."""
        deal = _deal(queues)
        if queues.unit_costs:
            deal.position += 1
            return
        depths = queues.depths
        level = waiter.level
        waiting = [lv for lv, depth in enumerate(depths) if depth or lv == level]
        credits = list(deal.credits)
        need = waiter.cost[deal.limit] - credits[level]
        if need > 0:
            start = deal.position
            end = self._covered_at(level, need, start, waiting) + 1
            for lv in waiting:
                credits[lv] += self._dealt(lv, start, end, waiting)
            deal.position = end
        credits[level] -= waiter.cost[deal.limit]
        deal.credits = tuple(c if depths[lv] else 0 for lv, c in enumerate(credits))

    def ahead(self, queues: Queues, level: int, now: int) -> int:
        """The waiters at ``level`` (a lower bound: other levels' turns come
        between them)."""
        return queues.depths[level]

    # -- dealing the cycle ----------------------------------------------------

    def _before(self, level: int, x: int) -> int:
        """``level``'s slots at positions before ``x`` (counted over every cycle)."""
        slots = self._slots[level]
        cycles, offset = divmod(x, len(self._cycle))
        return cycles * len(slots) + bisect_left(slots, offset)

    def _dealt(self, level: int, start: int, end: int, waiting: Sequence[int]) -> int:
        """Units dealt to ``level`` by the slots from ``start`` to ``end``
        (excluded) while ``waiting`` wait: its own slots, and, for the most
        urgent of them, those whose owner does not wait."""
        if level != waiting[0]:
            return self._before(level, end) - self._before(level, start)
        others = waiting[1:]
        return (end - start) - sum(self._before(o, end) - self._before(o, start) for o in others)

    def _covered_at(self, level: int, need: int, start: int, waiting: Sequence[int]) -> int:
        """The slot, from ``start`` on, that deals ``level`` its ``need``-th unit."""
        if level != waiting[0]:
            slots = self._slots[level]
            cycles, index = divmod(self._before(level, start) + need - 1, len(slots))
            return cycles * len(self._cycle) + slots[index]
        # The most urgent waiting level gets every slot the others do not own:
        # at least one per cycle, so the first n/free + 1 cycles hold its need.
        size = len(self._cycle)
        free = size - sum(self.weights[o] for o in waiting[1:])
        lo, hi = start, start + (need // free + 1) * size
        while hi - lo > 1:  # the least end with `need` units dealt in [start, end)
            mid = (lo + hi) // 2
            if self._dealt(level, start, mid, waiting) >= need:
                hi = mid
            else:
                lo = mid
        return hi - 1


def _deal(queues: Queues) -> Deal:
    deal = queues.state
    if not isinstance(deal, Deal):
        raise AssertionError("Shares needs the Deal its start() made (run it in a Machine)")
    return deal


def _after(value: int) -> int:
    return check_int("after_ns", value, 1)


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
    after_ns: int = attrs.field(default=2_000_000_000, converter=_after, kw_only=True)

    def choose(self, queues: Queues, now: int) -> int:
        """The level whose oldest waiter has the smallest ``level * after_ns
        + pushed_at``, ties by push order (the level then serves the waiter
        its flows choose)."""
        after = self.after_ns
        best, best_key = -1, (0, 0)
        for level, depth in enumerate(queues.depths):
            if depth:
                head = queues.oldest(level)
                key = (level * after + head.pushed_at, head.seq)
                if best < 0 or key < best_key:
                    best, best_key = level, key
        return best

    def ahead(self, queues: Queues, level: int, now: int) -> int:
        """The waiters at ``level`` and at every more urgent one."""
        # Every waiter at this level or a more urgent one has a smaller key.
        return sum(queues.depths[: level + 1])


def across_processes(policy: Policy, limits: Sequence[str]) -> tuple[tuple[int, ...], int] | None:
    """How processes that keep ``limits`` together deal their units among
    ``policy``'s levels (a shared limit's global priority): what its
    ``across_processes(limits)`` gives, checked (one weight ``>= 1`` per
    level, and the index of one of ``limits``), or ``None`` for a policy
    without that method, which orders its levels strictly across
    processes. Raises :class:`PermitValueError` naming the policy."""
    deal = getattr(policy, "across_processes", None)
    if deal is None:
        return None
    dealt = deal(tuple(limits))
    what = (
        f"across_processes() must give (weights, index): an int >= 1 per level "
        f"({policy.levels}) and the index of a limit (< {len(limits)}), not {dealt!r}"
    )
    if not isinstance(dealt, tuple) or len(dealt) != 2:
        raise PermitValueError("policy", policy, what)
    weights, index = dealt
    try:
        if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence):
            raise PermitValueError("policy", policy, what)
        weights = tuple(check_int("policy", w, 1) for w in weights)
        index = check_int("policy", index, 0)
    except (PermitTypeError, PermitValueError):
        raise PermitValueError("policy", policy, what) from None
    if len(weights) != policy.levels or index >= len(limits):
        raise PermitValueError("policy", policy, what)
    return weights, index
