"""Pacing: a token bucket as GCRA, in exact integer arithmetic.

Everything about *when* units are available lives here (the model is Go's
``x/time/rate``: one small type, explicit times). A :class:`Bucket` holds
``burst`` units and refills at ``rate``; it is kept as a theoretical arrival
time ``TAT = anchor + k * interval``, with ``interval = 10**9 / rate = P / Q``
nanoseconds per unit exactly, so the due time of the n-th unit of a backlog is
exact however long it runs. Units *held* are in flight: granted, not yet
charged (SPEC.md, Pacing).

A cost is a tuple of units, one entry per limit of the machine; each bucket
reads its own entry (``cost[index]``). :class:`Buckets` puts several limits
together, so that a cost is admitted only when every one admits it and then
charged to all at once. A machine whose permits come from outside uses
:class:`Outside` instead.
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

from ._errors import PermitValueError
from ._limits import Limit

__all__ = [
    "MAX_QUOTAS",
    "NEVER",
    "Adopt",
    "Bucket",
    "Buckets",
    "Change",
    "Mark",
    "Outside",
    "Quota",
    "Rerate",
]

#: A due time no clock reaches (about 5e51 years of nanoseconds).
NEVER = 1 << 200

#: The most quotas of the upstream's a limit keeps in force (``quota``):
#: beyond, the two that end first become one (see :func:`in_force`).
MAX_QUOTAS = 16

#: One bucket's charged state at one moment, to return to (a refund):
#: ``(anchor, k, quotas)``, the quotas in force as each one's units left and
#: its end (see :class:`Quota`). A plain tuple, not a NamedTuple: one is made
#: for every grant a refund may reach, and the garbage collector stops
#: tracking a plain tuple of ints (never an instance of a tuple's subclass),
#: and a plain tuple costs no call to make.
Mark = tuple[int, int, tuple[tuple[int, int], ...]]


class Rerate(NamedTuple):
    """A limit's rate or burst changed at ``at`` (logged, so that a refund
    that replays the charges after it applies the change again)."""

    at: int
    limit: int
    P: int
    Q: int
    b1: int
    #: ``(P, Q, b1)`` before the change.
    old: tuple[int, int, int]


class Adopt(NamedTuple):
    """At ``at``, the upstream said ``remaining`` units are left until ``reset``."""

    at: int
    limit: int
    remaining: int
    reset: int


class Quota(NamedTuple):
    """At ``at``, the upstream said ``remaining`` units are left until
    ``reset``, a count (an IETF ``RateLimit`` quota): until then, at most
    that many more are charged."""

    at: int
    limit: int
    remaining: int
    reset: int


#: A change to a limit, kept in the grant log between the charges.
Change = Rerate | Adopt | Quota


def interval_of(rate: Fraction) -> tuple[int, int]:
    """``10**9 / rate`` as ``(P, Q)``: nanoseconds per unit is ``P / Q``."""
    return 1_000_000_000 * rate.denominator, rate.numerator


def in_force(quotas: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """The quotas ``(left, until)`` to keep in force: all but those another
    makes redundant (no more left than it, lasting no shorter), by end; so
    each one kept ends later and leaves more than the one before. At most
    :data:`MAX_QUOTAS`: beyond, the two that end first become one, the first's
    units left until the second's end, which allows no more than either did
    (an upstream whose word slides on with every response, more left each
    time, would otherwise keep one per response of its reset's span).
    O(n log n)."""
    kept: list[tuple[int, int]] = []
    for left, until in sorted(quotas, key=lambda q: (-q[1], q[0])):
        if not kept or left < kept[-1][0]:  # less left than any lasting as long
            kept.append((left, until))
    kept.reverse()
    while len(kept) > MAX_QUOTAS:
        kept[0:2] = [(kept[0][0], kept[1][1])]
    return tuple(kept)


class Bucket:
    """``burst`` units, refilled at ``rate`` per second.

    :ivar due: when the cost the machine wants next (:meth:`want`) is
        available (ns): ``NEVER`` while the units held leave no room for it.
        Kept up to date by every change, so that reading it costs nothing.
    :ivar held: units in flight.
    :ivar until: nothing is available before this time (a pause).
    :ivar quotas: the upstream's quotas, each ``(left, until)``: units that
        may still be charged before ``until``; a cost beyond one waits for
        its end. None made redundant by another (no more left, lasting no
        shorter); one past its end may linger, holding nothing.
    """

    __slots__ = (
        "P",
        "Q",
        "anchor",
        "b1",
        "due",
        "held",
        "index",
        "k",
        "n",
        "quotas",
        "until",
    )

    def __init__(self, rate: Fraction, burst: int, index: int = 0) -> None:
        self.P, self.Q = interval_of(rate)
        self.b1 = burst - 1
        self.index = index
        self.anchor = 0
        self.k = 0
        self.held = 0
        self.n = 1
        self.until = -NEVER
        self.quotas: tuple[tuple[int, int], ...] = ()
        self.due = 0

    def start(self, now: int) -> None:
        """The clock starts at ``now`` with a full bucket."""
        self.anchor = now
        self.k = 0
        self._set_due()

    def want(self, cost: tuple[int, ...]) -> bool:
        """The next grant asks for ``cost``: :attr:`due` is when it fits.
        Returns whether that changed what it waits for."""
        n = cost[self.index]
        if n == self.n:
            return False
        self.n = n
        self._set_due()
        return True

    def unplan(self) -> None:
        """The cost wanted next is not known (the policy failed to say whose
        turn it is): due as for a cost of nothing (as soon as no pause holds
        it), so that the next tick asks again."""
        self.n = 0
        self._set_due()

    def charge(
        self, now: int, cost: tuple[int, ...], mark: bool = True, spent: bool = False
    ) -> Mark | None:
        """Charge ``cost`` at ``now``: ``TAT = max(TAT, now - 1) + n * interval``.
        Returns the charged state before it (for a refund's replay), or
        ``None`` without ``mark`` (a charge no replay can reach). With
        ``spent``, the cost was in flight until now, and no longer is
        (:meth:`spend`).

        A ``TAT`` more than a nanosecond in the past means a full bucket; the
        schedule restarts at ``now - 1``, so the bucket holds ``burst`` units
        plus one nanosecond of refill. That nanosecond is what lets a tick at
        a permit's rounded-up due time be on time: without it, ``burst = 1``
        would lose up to a nanosecond per permit to rounding.
        """
        anchor, k = self.anchor, self.k
        before = (anchor, k, self.quotas) if mark else None
        n = cost[self.index]
        if k * self.P < (now - 1 - anchor) * self.Q:
            self.anchor = now - 1
            k = 0
        elif spent and not self.quotas and self.due != NEVER:
            # It takes the place it held (held - n, k + n): the due time
            # stays, unless the schedule restarts, a quota counts it, or the
            # units held left no room (due never: now there may be).
            self.k = k + n
            return before
        self.k = k + n
        if self.quotas:
            self.quotas = tuple((left - n, until) for left, until in self.quotas if until > now)
        self._set_due()
        return before

    def hold(self, cost: tuple[int, ...]) -> None:
        """``cost`` in flight: it keeps its place, charged later."""
        self.held += cost[self.index]
        self._set_due()

    def release(self, cost: tuple[int, ...]) -> None:
        """``cost`` no longer in flight (refunded; spent: :meth:`spend`)."""
        self.held -= cost[self.index]
        self._set_due()

    def spend(self, now: int, cost: tuple[int, ...], mark: bool = True) -> Mark | None:
        """``cost``, in flight, is spent at ``now``: no longer held, and
        charged (:meth:`charge`, which sets :attr:`due` once for both, if
        it moves)."""
        self.held -= cost[self.index]
        return self.charge(now, cost, mark, spent=True)

    def pause(self, until: int) -> None:
        """Nothing is available before ``until``."""
        if until > self.until:
            self.until = until
            self._set_due()

    def rerate(self, now: int, rate: Fraction, burst: int, index: int = 0) -> Rerate:
        """From ``now`` on, ``rate`` and ``burst``; the units in the bucket
        carry over (never more than the new burst), with ``TAT`` rounded up
        to the next whole nanosecond. Returns the change, for the log."""
        P, Q = interval_of(rate)
        change = Rerate(now, self.index, P, Q, burst - 1, (self.P, self.Q, self.b1))
        self._apply(change)
        return change

    def adopt(self, now: int, remaining: int, reset: int, index: int = 0) -> Adopt:
        """The upstream says ``remaining`` units are left until ``reset``:
        from now until ``reset`` the bucket holds no more than that (it
        never holds more because of it). Returns the change, for the log."""
        change = Adopt(now, self.index, remaining, reset)
        self._apply(change)
        return change

    def limit_quota(self, now: int, remaining: int, reset: int, index: int = 0) -> Quota:
        """The upstream says ``remaining`` units are left until ``reset``, a
        count: until then at most that many more are charged. Each quota
        holds until its own end, beside the others in force. Returns the
        change, for the log."""
        change = Quota(now, self.index, remaining, reset)
        self._apply(change)
        return change

    def replay(self, mark: Mark, records: list[object], now: int) -> list[Mark | None]:
        """Return to ``mark``, and go through ``records`` (later grants and
        changes, oldest first) again: charge each grant's cost at its time,
        apply each change of this limit. The marks before each grant
        (``None`` for a change), for the log."""
        for record in records:
            if isinstance(record, Rerate) and record.limit == self.index:
                self.P, self.Q, self.b1 = record.old  # the limit as it was at the mark
                break
        self.anchor, self.k, self.quotas = mark
        marks: list[Mark | None] = []
        for record in records:
            if isinstance(record, (Rerate, Adopt, Quota)):
                if record.limit == self.index:
                    self._apply(record)
                marks.append(None)
            else:
                marks.append(self.charge(record.at, record.cost))  # type: ignore[attr-defined]
        self._set_due()
        return marks

    def discard(self) -> None:
        """Units of the bucket's own that found nobody: they stay banked."""

    def available_after(self, cost: tuple[int, ...], now: int) -> int:
        """The least time (ns) from ``now`` until ``cost`` more is available,
        at best: the units held charged now."""
        if not cost[self.index]:  # (it takes nothing of this limit: only a pause holds it)
            return max(0, self.until - now)
        anchor, k = self.anchor, self.k
        if k * self.P < (now - 1 - anchor) * self.Q:
            anchor, k = now - 1, 0
        n = self.held + cost[self.index]
        due = anchor - ((self.b1 - k - n + 1) * self.P // self.Q)
        ends = [until for left, until in self.quotas if until > now and n > left]
        return max(0, due - now, self.until - now, *(until - now for until in ends))

    def check(self) -> None:
        """Assert the bucket's invariants (for tests)."""
        if self.held < 0:
            raise AssertionError("invariant broken: negative units in flight")
        if len(self.quotas) > MAX_QUOTAS:
            raise AssertionError("invariant broken: more than MAX_QUOTAS quotas in force")

    def _apply(self, change: Change) -> None:
        now = change.at
        if isinstance(change, Quota):
            quotas = [q for q in self.quotas if q[1] > now]
            if change.reset > now:
                quotas.append((change.remaining, change.reset))
            self.quotas = in_force(quotas)
            self._set_due()
            return
        P, Q = self.P, self.Q
        tat = self.anchor + Fraction(self.k * P, Q)
        if tat < now - 1:
            tat = Fraction(now - 1)  # a full bucket, and its nanosecond
        if isinstance(change, Rerate):
            # The units in the bucket stay: burst - (tat - now) / interval.
            units = self.b1 + 1 - (tat - now) * Q / P
            self.P, self.Q, self.b1 = change.P, change.Q, change.b1
            tat = max(Fraction(now - 1), now + (self.b1 + 1 - units) * change.P / change.Q)
            self.anchor, self.k = -((-tat.numerator) // tat.denominator), 0
        else:
            # At reset, at most `remaining` units: TAT >= reset + (burst - remaining) * interval.
            floor = change.reset + Fraction((self.b1 + 1 - change.remaining) * P, Q)
            if floor > tat:
                self.anchor, self.k = change.reset, self.b1 + 1 - change.remaining
        self._set_due()

    def _set_due(self) -> None:
        # ceil(TAT + (held + n - burst) * interval), or never while the held
        # units leave no room for n, not even with the nanosecond of refill.
        # A cost that takes nothing from this limit waits only for a pause.
        if not self.n:
            self.due = self.until
            return
        excess = self.held + self.n - 1 - self.b1
        if excess > 0 and excess * self.P > self.Q:
            self.due = NEVER
        else:
            due = self.anchor - ((-excess - self.k) * self.P // self.Q)
            if due < self.until:
                due = self.until
            if self.quotas:  # (the common case, none, costs one test)
                for left, until in self.quotas:
                    if until > due and self.held + self.n > left:
                        due = until  # a quota holds it until its end
            self.due = due


class Buckets:
    """Several limits, each a :class:`Bucket`: a cost is available when every
    bucket has its part, and charged to all at once (never one without the
    others). Its marks are tuples of the buckets' marks."""

    __slots__ = ("buckets", "due", "wanted")

    def __init__(self, buckets: list[Bucket]) -> None:
        self.buckets = buckets
        self.due = 0
        #: The cost last wanted (each bucket wants its part of it).
        self.wanted: tuple[int, ...] | None = None

    def start(self, now: int) -> None:
        for bucket in self.buckets:
            bucket.start(now)
        self._set_due()

    def want(self, cost: tuple[int, ...]) -> bool:
        if cost is self.wanted:
            return False  # the same cost again (waiters that ask alike share one)
        self.wanted = cost
        changed = False
        for bucket in self.buckets:
            changed = bucket.want(cost) or changed
        if changed:
            self._set_due()
        return changed

    def unplan(self) -> None:
        self.wanted = None
        for bucket in self.buckets:
            bucket.unplan()
        self._set_due()

    def charge(
        self, now: int, cost: tuple[int, ...], mark: bool = True
    ) -> tuple[Mark | None, ...] | None:
        marks = []  # (a loop: a comprehension is a call of its own)
        for bucket in self.buckets:
            marks.append(bucket.charge(now, cost, mark))
        self._set_due()
        return tuple(marks) if mark else None

    def hold(self, cost: tuple[int, ...]) -> None:
        for bucket in self.buckets:
            bucket.hold(cost)
        self._set_due()

    def release(self, cost: tuple[int, ...]) -> None:
        for bucket in self.buckets:
            bucket.release(cost)
        self._set_due()

    def spend(
        self, now: int, cost: tuple[int, ...], mark: bool = True
    ) -> tuple[Mark | None, ...] | None:
        marks = []  # (a loop: a comprehension is a call of its own)
        for bucket in self.buckets:
            marks.append(bucket.spend(now, cost, mark))
        self._set_due()
        return tuple(marks) if mark else None

    def pause(self, until: int) -> None:
        for bucket in self.buckets:
            bucket.pause(until)
        self._set_due()

    def rerate(self, now: int, rate: Fraction, burst: int, index: int) -> Rerate:
        change = self.buckets[index].rerate(now, rate, burst, index)
        self._set_due()
        return change

    def adopt(self, now: int, remaining: int, reset: int, index: int) -> Adopt:
        change = self.buckets[index].adopt(now, remaining, reset, index)
        self._set_due()
        return change

    def limit_quota(self, now: int, remaining: int, reset: int, index: int) -> Quota:
        change = self.buckets[index].limit_quota(now, remaining, reset)
        self._set_due()
        return change

    def replay(
        self, mark: tuple[Mark, ...], records: list[object], now: int
    ) -> list[tuple[Mark, ...] | None]:
        each = [
            bucket.replay(part, records, now)
            for bucket, part in zip(self.buckets, mark, strict=True)
        ]
        self._set_due()
        return [None if marks[0] is None else tuple(marks) for marks in zip(*each, strict=True)]

    def discard(self) -> None:
        """Units of the buckets's own that found nobody: they stay banked."""

    def available_after(self, cost: tuple[int, ...], now: int) -> int:
        return max(bucket.available_after(cost, now) for bucket in self.buckets)

    def check(self) -> None:
        for bucket in self.buckets:
            bucket.check()

    def _set_due(self) -> None:
        due = -NEVER
        for bucket in self.buckets:
            if bucket.due > due:
                due = bucket.due
        self.due = due


class Outside:
    """The permits of a supplied machine: they come from a source outside it
    (limits shared through Redis), which paces and charges them. None falls
    due here; each is *offered* as it arrives, and one not taken at once is
    not kept. ``limits`` (each with a ``rate`` and a ``burst``) describe the
    outside limits, for :meth:`available_after`'s estimate only.
    """

    __slots__ = ("due", "limits")

    def __init__(self, limits: list[Limit]) -> None:
        #: ``(P, Q, burst)`` of each limit, in the machine's order.
        self.limits = [(*interval_of(limit.rate), limit.burst) for limit in limits]
        self.due = NEVER

    def start(self, now: int) -> None:
        """Nothing to start: the source outside keeps the time."""

    def want(self, cost: tuple[int, ...]) -> bool:
        """Whatever the cost, the permit offered serves it: the source charged
        it. Nothing changes."""
        return False

    def charge(self, now: int, cost: tuple[int, ...], mark: bool = True) -> Mark | None:
        """The permit offered was granted: none is at hand any more."""
        self.due = NEVER
        return _NO_MARK if mark else None

    def hold(self, cost: tuple[int, ...]) -> None:
        raise AssertionError("a supplied machine holds no permit in flight")

    release = hold

    def spend(self, now: int, cost: tuple[int, ...], mark: bool = True) -> Mark | None:
        raise AssertionError("a supplied machine holds no permit in flight")

    def unplan(self) -> None:
        """Nothing is planned here: the source outside offers permits."""

    def offer(self, now: int) -> None:
        """A permit from outside, at hand at ``now``."""
        self.due = now

    def discard(self) -> None:
        """The permit offered found nobody: it is not kept."""
        self.due = NEVER

    def replay(self, mark: Mark, records: list[object], now: int) -> list[Mark | None]:
        """A refund: the permit is offered again, at ``now``."""
        self.offer(now)
        return [_NO_MARK] * len(records)

    def available_after(self, cost: tuple[int, ...], now: int) -> int:
        """At best the outside buckets are full: ``burst`` of each at once,
        then one per interval."""
        return max(0, *((n - b) * P // Q for n, (P, Q, b) in zip(cost, self.limits, strict=True)))

    def check(self) -> None:
        """Nothing to check."""


_NO_MARK: Mark = (0, 0, ())


def refuse_outside(argument: str, value: object, what: str) -> PermitValueError:
    """The error for an operation only a paced machine has."""
    return PermitValueError(argument, value, f"{what} is for a paced machine, not supplied=True")


def refuse_paced(argument: str, value: object, what: str) -> PermitValueError:
    """The error for an operation only a supplied machine has."""
    return PermitValueError(
        argument, value, f"{what} is for a supplied machine (supplied=True), not a paced one"
    )
