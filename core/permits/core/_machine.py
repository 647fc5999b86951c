"""The permit machine: a pure, clock-free state machine.

Everything that decides *when* a permit is due and *what happens to whom* at a
given time lives here; *who is next* is the policy's. The machine never reads
a clock: every operation that depends on time takes ``now``, an ``int`` of
nanoseconds on any monotonic clock, and the same calls always give the same
decisions.

Each timed operation (:meth:`Machine.push`, :meth:`Machine.tick`,
:meth:`Machine.refund`) first advances the machine to ``now`` (a *tick*):
waiters whose deadline is ``<= now`` expire, then every permit available at
``now`` is granted, one at a time, to the waiter the policy chooses. Then it
does its own work and grants again if it can. It returns the
:class:`Decision` s it made, in order.

Pacing is GCRA, i.e. a token bucket of ``burst`` permits refilled at ``rate``
per second, in exact integer arithmetic: the theoretical arrival time is kept
as ``anchor + k * interval`` with ``interval = 10**9 / rate`` an exact
fraction, so the due time of the n-th permit of a backlog is exact to the
nanosecond however long it runs.
"""

from __future__ import annotations

import enum
import heapq
from collections import deque
from collections.abc import Hashable, Sequence
from fractions import Fraction
from typing import NamedTuple

from ._checks import check_int, check_rate
from ._errors import (
    DuplicateId,
    NotRefundable,
    PermitTypeError,
    PermitValueError,
    PolicyError,
    TimeWentBackwards,
)
from ._policies import MAX_LEVELS, Policy
from ._queues import SLACK, Queues, Waiter
from ._stats import _BITS, LevelStatistics, Statistics, WaitHistogram

__all__ = [
    "MICROSECOND",
    "MILLISECOND",
    "SECOND",
    "Charge",
    "Decision",
    "Machine",
    "State",
]

#: Nanoseconds in a second: the core's unit of time is the nanosecond.
SECOND = 1_000_000_000
#: Nanoseconds in a millisecond.
MILLISECOND = 1_000_000
#: Nanoseconds in a microsecond.
MICROSECOND = 1_000

_new = tuple.__new__


class State(enum.Enum):
    """Where a pushed id stands."""

    #: In its level's queue, waiting for a permit.
    WAITING = "waiting"
    #: Holds a permit.
    GRANTED = "granted"
    #: Withdrew while waiting (:meth:`Machine.cancel`); never granted.
    CANCELLED = "cancelled"
    #: Refused at push because its level was full (``max_waiting``); never granted.
    REJECTED = "rejected"
    #: Still waiting at its deadline; never granted.
    EXPIRED = "expired"
    #: Was granted, and handed the permit back unused (:meth:`Machine.refund`).
    REFUNDED = "refunded"

    def __repr__(self) -> str:
        return f"State.{self.name}"


class Charge(enum.Enum):
    """When a granted permit counts against the limit."""

    #: At its grant: the permit counts from the moment it is decided (for a
    #: caller that proceeds at once, as in a simulation).
    AT_GRANT = "at grant"
    #: When its caller spends it (:meth:`Machine.spend`), that is, when the
    #: caller proceeds. Until then the permit is *in flight*: it holds its
    #: place in the bucket (no refill beyond ``burst`` is banked for it), and
    #: a refund only frees that place. The limit then holds at the moments
    #: callers proceed, however late they resume (an adapter's case).
    AT_SPEND = "at spend"

    def __repr__(self) -> str:
        return f"Charge.{self.name}"


class Decision(NamedTuple):
    """What the machine decided for one id: granted, expired or rejected."""

    id: Hashable
    #: :attr:`State.GRANTED`, :attr:`State.EXPIRED` or :attr:`State.REJECTED`.
    state: State
    level: int
    #: The time (ns) of the decision: the ``now`` of the operation.
    at: int
    #: How long (ns) the id waited: ``at - pushed_at``.
    waited: int


#: A due time no clock reaches (about 5e51 years of nanoseconds).
_NEVER = 1 << 200

_GRANTED = State.GRANTED
_EXPIRED = State.EXPIRED
_REJECTED = State.REJECTED


def _limits(value: object, levels: int) -> tuple[int | None, ...] | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return (check_int("max_waiting", value, 0),) * levels
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise PermitTypeError("max_waiting", value, "an int, a sequence or None")
    if len(value) != levels:
        raise PermitValueError("max_waiting", value, f"needs one entry per level ({levels})")
    limits: list[int | None] = []
    for limit in value:
        if limit is None:
            limits.append(None)
        elif isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0:
            limits.append(int(limit))
        else:
            raise PermitValueError("max_waiting", value, "every entry must be None or an int >= 0")
    return tuple(limits)


#: A logged grant: the waiter, its time, and the pacing state just before it.
_Entry = tuple[Waiter, int, int, int]


def _restart(anchor: int, k: int, now: int, P: int, Q: int) -> tuple[int, int]:
    """The pacing state ``(anchor, k)`` as seen at ``now``.

    The theoretical arrival time is ``anchor + k * P / Q``. If it lies more
    than a nanosecond in the past the bucket is full; the schedule restarts
    at ``now - 1``, so the bucket holds ``burst`` permits plus one
    nanosecond of refill. That nanosecond is what lets a tick at a permit's
    rounded-up due time be on time: without it, ``burst = 1`` would lose up
    to a nanosecond per permit to rounding (see SPEC.md, Pacing).
    """
    if k * P < (now - 1 - anchor) * Q:
        return now - 1, 0
    return anchor, k


class Machine:
    """Permits at ``rate`` per second, ``burst`` at most at once, by ``policy``.

    :param policy: who goes next (:class:`~permits.core.Fifo`,
        :class:`~permits.core.StrictPriority`, :class:`~permits.core.Shares`,
        :class:`~permits.core.Aging` or your own :class:`~permits.core.Policy`).
    :param rate: permits per second: an ``int``, ``float``, ``Fraction`` or
        ``Decimal``, finite and ``> 0``; a float is read as the decimal it
        prints as.
    :param burst: permits that may be banked while nobody waits, ``>= 1``.
        Over any window of ``d`` nanoseconds at most
        ``burst + floor(rate * (d + 1) / 10**9)`` permits are granted
        (refunded ones not counted): the limit, exact on the nanosecond grid.
    :param max_waiting: ``None`` (no limit), an ``int`` for every level, or one
        ``int | None`` per level: a push to a level that already has that many
        waiters is rejected.
    :param refund_window_ns: nanoseconds after its grant during which a
        permit charged at its grant may be refunded; the machine remembers
        grants up to twice that long, so its memory stays bounded by
        ``2 * rate * refund_window_ns + burst`` grants, and by the grants in
        flight when each is spent (:meth:`spend`) as its caller goes ahead.
    :param charge: when a permit counts against the limit:
        :attr:`Charge.AT_GRANT` (the default) or :attr:`Charge.AT_SPEND`, for
        a user (an adapter) whose callers proceed some time after their grant
        and who spends each permit as its caller proceeds. Then at most
        ``burst`` permits are in flight (granted, not yet spent or refunded;
        ``burst + floor(rate / 10**9)`` at rates of 10**9/s and more),
        the limit holds over the spend times, and a permit in flight can be
        refunded whenever it is, however long after its grant.
    :param supplied: ``True`` when the permits come from a source outside
        the machine (a limit shared through Redis): the machine then paces
        nothing, and grants only the permits handed to it by :meth:`supply`,
        each to the waiter the policy chooses. ``rate`` and ``burst`` describe
        that outside limit and serve only :meth:`min_wait`'s estimate.
    """

    __slots__ = (
        "_P",
        "_Q",
        "_anchor",
        "_at_grant",
        "_b1",
        "_cancelled",
        "_deadlines",
        "_dl_dead",
        "_due",
        "_expired",
        "_grant_log",
        "_hists",
        "_in_flight",
        "_k",
        "_limits",
        "_now",
        "_pushed",
        "_queues",
        "_refundable",
        "_refunded",
        "_rejected",
        "_seq",
        "_supplied",
        "burst",
        "charge",
        "levels",
        "policy",
        "rate",
        "refund_window_ns",
    )

    def __init__(
        self,
        policy: Policy,
        rate: int | float | Fraction,
        burst: int = 1,
        *,
        max_waiting: int | Sequence[int | None] | None = None,
        refund_window_ns: int = SECOND,
        supplied: bool = False,
        charge: Charge = Charge.AT_GRANT,
    ) -> None:
        if isinstance(policy, type):
            raise PermitTypeError(
                "policy", policy, f"a policy instance: pass {policy.__name__}(...), not the class"
            )
        if not isinstance(policy, Policy):
            raise PermitTypeError("policy", policy, "a Policy (levels, choose() and ahead())")
        levels = policy.levels
        if isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= MAX_LEVELS:
            raise PermitValueError(
                "policy", policy, f"its levels={levels!r} must be an int from 1 to {MAX_LEVELS}"
            )
        levels = int(levels)
        self.rate: Fraction = check_rate(rate)
        self.burst: int = check_int("burst", burst, 1)
        self._limits = _limits(max_waiting, levels)
        self.refund_window_ns: int = check_int("refund_window_ns", refund_window_ns, 0)
        if not isinstance(charge, Charge):
            raise PermitTypeError("charge", charge, "Charge.AT_GRANT or Charge.AT_SPEND")
        if supplied and charge is not Charge.AT_GRANT:
            raise PermitValueError(
                "charge", charge, "a supplied machine's permits are charged by their source"
            )
        self.charge = charge
        self._at_grant = charge is Charge.AT_GRANT
        # Permits granted and not yet spent or refunded (Charge.AT_SPEND).
        self._in_flight = 0
        self.policy = policy
        self.levels = levels
        # interval = 10**9 / rate = _P / _Q nanoseconds, exactly.
        self._P = SECOND * self.rate.denominator
        self._Q = self.rate.numerator
        self._b1 = self.burst - 1
        self._now: int | None = None
        self._anchor = 0
        self._k = 0
        if not isinstance(supplied, bool):
            raise PermitTypeError("supplied", supplied, "a bool")
        self._supplied = supplied
        # Supplied: no permit ever falls due here (a time no clock reaches).
        self._due = _NEVER if supplied else 0
        self._queues = Queues(levels)
        self._seq = 0
        self._deadlines: list[tuple[int, int, Waiter]] = []
        self._dl_dead = 0
        # Grants of the last refund_window_ns, oldest first, each as
        # (waiter, at, anchor, k): the pacing state just before it, so that a
        # refund can replay the later grants as if it had never happened.
        self._grant_log: deque[_Entry] = deque()
        self._refundable: dict[Hashable, _Entry] = {}
        self._pushed = [0] * levels
        self._cancelled = [0] * levels
        self._refunded = [0] * levels
        self._rejected = [0] * levels
        self._expired = [0] * levels
        self._hists = [WaitHistogram() for _ in range(levels)]

    def __repr__(self) -> str:
        return (
            f"Machine(policy={self.policy!r}, rate={self.rate!r}, "
            f"burst={self.burst!r}, max_waiting={self._limits!r}, "
            f"refund_window_ns={self.refund_window_ns!r}, supplied={self._supplied!r}, "
            f"charge={self.charge!r})"
        )

    # -- reading ------------------------------------------------------------

    @property
    def queues(self) -> Queues:
        """The waiting line, as policies see it (read-only)."""
        return self._queues

    @property
    def now(self) -> int | None:
        """The latest time the machine has seen, ``None`` before the first."""
        return self._now

    @property
    def max_waiting(self) -> tuple[int | None, ...] | None:
        """The per-level queue limits, or ``None`` for none."""
        return self._limits

    @property
    def interval(self) -> Fraction:
        """Nanoseconds between permits, exactly: ``10**9 / rate``."""
        return Fraction(self._P, self._Q)

    def __len__(self) -> int:
        """Number of waiters."""
        return len(self._queues)

    def __contains__(self, id: object) -> bool:
        """Whether ``id`` is waiting."""
        try:
            return id in self._queues
        except TypeError:
            return False

    def waiting(self, level: int | None = None) -> list[Waiter]:
        """The waiters of ``level`` in the order they will be served among
        themselves, or of every level in push order."""
        if level is None:
            everyone = [w for lv in range(self.levels) for w in self._queues.waiters(lv)]
            return sorted(everyone, key=lambda w: w.seq)
        return self._queues.waiters(self._check_level(level))

    @property
    def supplied(self) -> bool:
        """Whether permits come from outside, through :meth:`supply`."""
        return self._supplied

    def next_due(self) -> int | None:
        """The earliest time (ns), not before the machine's latest time, at
        which a permit is available; equal to that latest time if one is
        available now (which happens only while nobody waits). ``None``
        before the first operation, always when ``supplied`` (the source
        outside knows), and while the permits in flight fill the bucket
        (none falls due before one of them is spent or refunded)."""
        if self._now is None or self._due == _NEVER:
            return None
        return max(self._due, self._now)

    @property
    def in_flight(self) -> int:
        """Permits granted and not yet spent or refunded (:attr:`Charge.AT_SPEND`;
        always 0 when permits are charged at their grant)."""
        return self._in_flight

    def next_tick(self) -> int | None:
        """When the machine next needs a :meth:`tick`: the earlier of the next
        permit's due time and the next waiter's deadline; ``None`` while
        nobody waits (nothing can happen until the next push). When
        ``supplied``, the next deadline, or ``None`` if no waiter has one."""
        by_id = self._queues._by_id
        if not by_id:
            return None
        deadlines = self._deadlines
        while deadlines and by_id.get(deadlines[0][2].id) is not deadlines[0][2]:
            heapq.heappop(deadlines)
            self._dl_dead -= 1
        if deadlines and deadlines[0][0] < self._due:
            return deadlines[0][0]
        return None if self._due == _NEVER else self._due

    def min_wait(self, level: int) -> int:
        """The least time (ns) a waiter pushed at ``level`` now would wait.

        "Now" is the machine's latest time (tick it first). The bound holds
        unless a waiter ahead cancels or expires, or a permit is refunded, in
        between: it counts the waiters the policy's :meth:`Policy.ahead` puts
        first and the pacing of the permits they take.
        """
        level = self._check_level(level)
        now = self._now
        if now is None:
            return 0
        queues = self._queues
        ahead = max(queues.depths[level], self.policy.ahead(queues, level, now))
        if self._supplied:
            # At best the outside bucket is full: burst permits at once, then
            # one per interval.
            return max(0, (ahead + 1 - self.burst) * self._P // self._Q)
        anchor, k = _restart(self._anchor, self._k, now, self._P, self._Q)
        # due time of the (ahead + 1)-th permit from now, at best: the
        # permits in flight spent now
        due = anchor - ((self._b1 - k - self._in_flight - ahead) * self._P // self._Q)
        return max(0, due - now)

    def next_level(self) -> int | None:
        """The level whose head the next permit would go to, as the policy
        chooses it at the machine's latest time; ``None`` while nobody waits.

        Asks :meth:`Policy.choose` without granting: for a permit source that
        must know who it is asking for (a shared limit that keeps headroom for
        urgent levels). Tick first, so that expired waiters are gone.
        """
        now = self._now
        if now is None or not self._queues._by_id:
            return None
        return self._choose(now, [])

    def statistics(self) -> Statistics:
        """A frozen snapshot of every level's counters and wait quantiles."""
        depths = self._queues.depths
        return Statistics(
            tuple(
                LevelStatistics(
                    level=level,
                    waiting=depths[level],
                    pushed=self._pushed[level],
                    granted=self._hists[level].count,
                    cancelled=self._cancelled[level],
                    refunded=self._refunded[level],
                    rejected=self._rejected[level],
                    expired=self._expired[level],
                    wait_p50_ns=self._hists[level].quantile(0.5),
                    wait_p99_ns=self._hists[level].quantile(0.99),
                    wait_max_ns=self._hists[level].max,
                )
                for level in range(self.levels)
            )
        )

    # -- operations ---------------------------------------------------------

    def push(
        self, id: Hashable, level: int, now: int, *, deadline: int | None = None
    ) -> list[Decision]:
        """A waiter ``id`` joins ``level`` at ``now``.

        Ticks to ``now`` first (the waiters already there take what fell due),
        then queues the newcomer and grants it a permit at once if one is
        left. Unless a permit is left, a level at its ``max_waiting`` rejects
        the newcomer instead (a :attr:`State.REJECTED` decision), and a
        ``deadline <= now`` expires it at once: ``max_waiting=0`` and a
        deadline of ``now`` both mean "grant only at once, never queue".
        Raises :class:`DuplicateId` if ``id`` is waiting.
        """
        # The hot path: validation and the tick are inlined (see _check_now
        # and _settle for the same steps spelled out).
        if level.__class__ is not int or not 0 <= level < self.levels:
            level = self._check_level(level)
        if now.__class__ is not int:
            now = check_int("now", now)
        last = self._now
        if last is not None and now < last:
            raise TimeWentBackwards(now, last)
        if deadline is not None:
            deadline = check_int("deadline", deadline)
        queues = self._queues
        by_id = queues._by_id
        try:
            duplicate = id in by_id
        except TypeError:
            raise PermitTypeError("id", id, "a hashable value") from None
        if duplicate or (not self._at_grant and id in self._refundable):
            raise DuplicateId(id)  # waiting, or its permit in flight

        out: list[Decision] = []
        if (
            last is None
            or (self._deadlines and self._deadlines[0][0] <= now)
            or (by_id and now >= self._due)
        ):
            self._settle(now, out)
        else:
            self._now = now
        self._pushed[level] += 1
        # A permit is left at once only while nobody waits (P2): the
        # newcomer then takes it, whatever its queue limit or deadline.
        free = now >= self._due
        limits = self._limits
        if limits is not None and not free:
            limit = limits[level]
            if limit is not None and queues.depths[level] >= limit:
                self._refundable.pop(id, None)  # a new life, if a short one
                self._rejected[level] += 1
                out.append(_new(Decision, (id, _REJECTED, level, now, 0)))
                return out
        self._refundable.pop(id, None)  # a new life: the old grant is no longer refundable
        seq = self._seq
        self._seq = seq + 1
        if deadline is not None and deadline <= now:
            if not free:
                self._expired[level] += 1
                out.append(_new(Decision, (id, _EXPIRED, level, now, 0)))
                return out
            deadline = None  # granted below, before any deadline could matter
        waiter = _new(Waiter, (id, level, seq, now, deadline))
        if deadline is not None:
            heapq.heappush(self._deadlines, (deadline, seq, waiter))
        by_id[id] = waiter
        queues._lines[level].append(waiter)
        queues.depths[level] += 1
        if free:
            self._grant(now, out)
        return out

    def cancel(self, id: Hashable) -> bool:
        """Withdraw a waiting ``id``; ``True`` if it was waiting, ``False`` if
        not (never pushed, or already granted, cancelled, rejected or
        expired). A cancelled waiter is never granted and costs no permit."""
        try:
            waiter = self._queues._by_id.get(id)
        except TypeError:
            raise PermitTypeError("id", id, "a hashable value") from None
        if waiter is None:
            return False
        self._queues._remove(waiter)
        self._cancelled[waiter.level] += 1
        if waiter.deadline is not None:
            self._deadline_left()
        return True

    def tick(self, now: int) -> list[Decision]:
        """Advance to ``now``: expire waiters whose deadline is ``<= now``,
        then grant every permit available at ``now``."""
        if now.__class__ is not int:
            now = check_int("now", now)
        last = self._now
        if last is not None and now < last:
            raise TimeWentBackwards(now, last)
        out: list[Decision] = []
        if last is None or (self._deadlines and self._deadlines[0][0] <= now):
            self._settle(now, out)
            return out
        # The hot path: _settle with a clock already started and no expiry.
        self._now = now
        if self._queues._by_id and now >= self._due:
            self._grant(now, out)
        return out

    def refund(self, id: Hashable, now: int) -> list[Decision]:
        """Hand back, at ``now``, the permit granted to ``id``, unused.

        Ticks to ``now``, then returns the permit: the next waiter gets it at
        once, or it is banked (never beyond ``burst``). Raises
        :class:`NotRefundable` unless ``id``'s permit is in flight
        (:attr:`Charge.AT_SPEND`), or was granted within the last
        ``refund_window_ns`` and not refunded, spent or pushed again since.
        """
        now = self._check_now(now)
        try:
            entry = self._refundable.get(id)
        except TypeError:
            raise PermitTypeError("id", id, "a hashable value") from None
        if entry is None or (self._at_grant and entry[1] < now - self.refund_window_ns):
            raise NotRefundable(id)
        out: list[Decision] = []
        self._settle(now, out)
        del self._refundable[id]
        self._refunded[entry[0].level] += 1
        if not self._at_grant:
            # In flight: it only held a place in the bucket; free it.
            self._in_flight -= 1
            due = self._set_due()
            if self._queues._by_id and now >= due:
                self._grant(now, out)
            return out
        if self._supplied:
            # The permit came from outside: the next waiter gets it at once;
            # with nobody waiting it is spent (never banked, never returned).
            self._log_remove(entry)
            if self._queues._by_id:
                self._take(self._choose(now, out), now, out)
            return out
        self._unwind(entry)
        if self._queues._by_id and now >= self._due:
            self._grant(now, out)
        return out

    def spend(self, id: Hashable, now: int) -> list[Decision]:
        """At ``now``, the caller holding ``id``'s permit proceeded: the permit
        is spent and can no longer be refunded.

        Ticks to ``now`` first. Under :attr:`Charge.AT_SPEND` the permit
        counts against the limit from ``now`` (it was in flight until then).
        Under :attr:`Charge.AT_GRANT` it changes no pacing and only lets the
        machine forget the grant, so that it remembers only the grants that
        may still be refunded and those made after the oldest of them (an
        adapter spends each permit as its caller resumes, and the memory
        stays that of the grants in flight). An id whose permit is not held
        (never granted, refunded or spent already, pushed again since, or
        outside ``refund_window_ns``) changes nothing but the tick.
        """
        now = self._check_now(now)
        refundable = self._refundable
        try:
            entry = refundable.get(id)  # get() hashes even on an empty dict (pop() does not)
        except TypeError:
            raise PermitTypeError("id", id, "a hashable value") from None
        out: list[Decision] = []
        self._settle(now, out)
        held = entry is not None and refundable.get(id) is entry
        if held:
            del refundable[id]
        if self._at_grant:
            # Forget the grants no refund can reach: those before the oldest
            # grant still refundable (refund replays only the grants after its own).
            log = self._grant_log
            while log and refundable.get(log[0][0].id) is not log[0]:
                log.popleft()
            return out
        if not held:
            return out
        # Charge the bucket now: TAT = max(TAT, now - 1) + interval.
        anchor, k = _restart(self._anchor, self._k, now, self._P, self._Q)
        self._anchor, self._k = anchor, k + 1
        self._in_flight -= 1
        due = self._set_due()
        if self._queues._by_id and now >= due:
            self._grant(now, out)
        return out

    def supply(self, now: int) -> list[Decision]:
        """A permit from outside, at ``now``: tick to ``now``, then grant it to
        the waiter the policy chooses. Returns the decisions made (any
        expiries, then the grant); without a grant if nobody waits, and the
        permit is then not kept. Only for a ``supplied`` machine.
        """
        now = self._check_now(now)
        if not self._supplied:
            raise PermitValueError(
                "supplied", False, "supply() is for a machine made with supplied=True"
            )
        out: list[Decision] = []
        self._settle(now, out)
        if self._queues._by_id:
            self._take(self._choose(now, out), now, out)
        return out

    # -- internals ----------------------------------------------------------

    def _check_level(self, level: object) -> int:
        level = check_int("level", level, 0)
        if level >= self.levels:
            raise PermitValueError(
                "level", level, f"must be below {self.levels}, the policy's levels"
            )
        return level

    def _check_now(self, now: object) -> int:
        checked = now if type(now) is int else check_int("now", now)
        last = self._now
        if last is not None and checked < last:
            raise TimeWentBackwards(checked, last)
        return checked

    def _settle(self, now: int, out: list[Decision]) -> None:
        if self._now is None and not self._supplied:
            # The clock starts at the first operation, with a full bucket.
            self._anchor = now
            self._due = now - (self._b1 * self._P // self._Q)
        self._now = now
        deadlines = self._deadlines
        if deadlines and deadlines[0][0] <= now:
            self._expire(now, out)
        if self._queues._by_id and now >= self._due:
            self._grant(now, out)

    def _expire(self, now: int, out: list[Decision]) -> None:
        deadlines = self._deadlines
        queues = self._queues
        while deadlines and deadlines[0][0] <= now:
            waiter = heapq.heappop(deadlines)[2]
            if queues._remove(waiter):
                self._expired[waiter.level] += 1
                out.append(
                    _new(
                        Decision,
                        (waiter.id, _EXPIRED, waiter.level, now, now - waiter.pushed_at),
                    )
                )
            else:
                self._dl_dead -= 1
        self._tidy_deadlines()

    def _grant(self, now: int, out: list[Decision]) -> None:
        """Grant permits available at ``now`` while anyone waits.

        The hot path: taking a level's head and _restart are inlined here.
        """
        queues = self._queues
        by_id = queues._by_id
        depths = queues.depths
        log = self._grant_log
        if log and log[0][1] < now - 2 * self.refund_window_ns:
            # Prune in batches: the log may hold up to two windows of grants;
            # refund() checks each grant's age exactly.
            self._prune(now)
        refundable = self._refundable
        choose = self.policy.choose
        hists = self._hists
        P, Q = self._P, self._Q
        at_grant = self._at_grant
        while True:
            level = choose(queues, now)
            if level.__class__ is not int or not 0 <= level < self.levels or not depths[level]:
                raise PolicyError(
                    f"{self.policy!r}.choose() returned {level!r}, not a level "
                    f"with waiters (depths {depths!r})",
                    out,
                )
            # Take the level's head.
            waiter = queues._lines[level].popleft()
            id = waiter.id
            del by_id[id]
            depths[level] -= 1
            queues.granted += 1
            if queues._dead[level]:
                queues._tidy(level)
            if at_grant:
                # Charge the bucket: TAT = max(TAT, now - 1) + interval (_restart).
                k = self._k
                anchor = self._anchor
                entry = (waiter, now, anchor, k)
                if k * P < (now - 1 - anchor) * Q:
                    anchor = self._anchor = now - 1
                    k = 0
                k += 1
                self._k = k
                due = self._due = anchor - ((self._b1 - k) * P // Q)
                log.append(entry)
            else:
                # In flight: it holds a place in the bucket until spent.
                entry = (waiter, now, 0, 0)
                self._in_flight += 1
                due = self._set_due()
            wait = now - waiter.pushed_at
            # WaitHistogram.record, inlined; its count is the level's grants.
            hist = hists[level]
            hist.count += 1
            if wait > hist._max:
                hist._max = wait
            shift = wait.bit_length() - _BITS
            bucket = wait >> shift << shift if shift > 0 else wait
            counts = hist._counts
            counts[bucket] = counts.get(bucket, 0) + 1
            refundable[id] = entry
            if waiter.deadline is not None:
                self._deadline_left()
            out.append(_new(Decision, (id, _GRANTED, level, now, wait)))
            if now < due or not by_id:
                return

    def _choose(self, now: int, out: list[Decision]) -> int:
        """The policy's choice, checked (the same check as in _grant)."""
        level = self.policy.choose(self._queues, now)
        if level.__class__ is not int or not 0 <= level < self.levels:
            level = -1
        if level < 0 or not self._queues.depths[level]:
            raise PolicyError(
                f"{self.policy!r}.choose() returned {level!r}, not a level "
                f"with waiters (depths {self._queues.depths!r})",
                out,
            )
        return level

    def _take(self, level: int, now: int, out: list[Decision]) -> None:
        """Grant a supplied permit to ``level``'s head: _grant's steps without
        the pacing (which is the source's)."""
        queues = self._queues
        waiter = queues._lines[level].popleft()
        id = waiter.id
        del queues._by_id[id]
        queues.depths[level] -= 1
        queues.granted += 1
        if queues._dead[level]:
            queues._tidy(level)
        log = self._grant_log
        if log and log[0][1] < now - 2 * self.refund_window_ns:
            self._prune(now)
        entry = (waiter, now, 0, 0)
        wait = now - waiter.pushed_at
        self._hists[level].record(wait)
        self._refundable[id] = entry
        log.append(entry)
        if waiter.deadline is not None:
            self._deadline_left()
        out.append(_new(Decision, (id, _GRANTED, level, now, wait)))

    def _log_remove(self, entry: _Entry) -> int:
        """Take ``entry`` out of the grant log; the index it had."""
        log = self._grant_log
        i = len(log) - 1
        while log[i] is not entry:
            i -= 1
        del log[i]
        return i

    def _prune(self, now: int) -> None:
        """Forget grants older than ``refund_window_ns``: no longer refundable."""
        log = self._grant_log
        refundable = self._refundable
        horizon = now - self.refund_window_ns
        while log and log[0][1] < horizon:
            old = log.popleft()
            if refundable.get(old[0].id) is old:
                del refundable[old[0].id]

    def _unwind(self, entry: _Entry) -> None:
        """Make the pacing state what it would be had ``entry``'s grant never
        happened: replay the grants logged after it from the state before it.

        Exact, so the grants not refunded keep the limit over every window
        (P1, P5). Costs O(grants logged after it): O(1) for a refund that
        follows its grant promptly, as a cancelled caller's does.
        """
        log = self._grant_log
        later: list[_Entry] = []
        while (last := log.pop()) is not entry:
            later.append(last)
        anchor, k = entry[2], entry[3]
        P, Q = self._P, self._Q
        refundable = self._refundable
        for old in reversed(later):
            waiter, at = old[0], old[1]
            replayed = (waiter, at, anchor, k)  # the state before it, replayed
            if refundable.get(waiter.id) is old:
                refundable[waiter.id] = replayed
            log.append(replayed)
            anchor, k = _restart(anchor, k, at, P, Q)
            k += 1
        self._anchor, self._k = anchor, k
        self._due = anchor - ((self._b1 - k) * P // Q)

    def _set_due(self) -> int:
        """Set and return the next permit's due time from the pacing state
        and the permits in flight: ``ceil(TAT + (in_flight - burst + 1) *
        interval)``, or never while those in flight fill the bucket plus its
        nanosecond of refill (SPEC.md, Pacing)."""
        excess = self._in_flight - self._b1
        if excess > 0 and excess * self._P > self._Q:
            self._due = _NEVER
        else:
            self._due = self._anchor - ((-excess - self._k) * self._P // self._Q)
        return self._due

    def _deadline_left(self) -> None:
        """A waiter with a deadline left other than by expiring: its heap
        entry is now dead."""
        self._dl_dead += 1
        self._tidy_deadlines()

    def _tidy_deadlines(self) -> None:
        """Rebuild the deadline heap when its dead entries outnumber the live
        ones by more than SLACK (amortised O(1) per departure)."""
        deadlines = self._deadlines
        if self._dl_dead > len(deadlines) - self._dl_dead + SLACK:
            by_id = self._queues._by_id
            self._deadlines = [e for e in deadlines if by_id.get(e[2].id) is e[2]]
            heapq.heapify(self._deadlines)
            self._dl_dead = 0

    def check_valid(self) -> None:
        """Assert every internal invariant; raises ``AssertionError`` if one
        is broken. O(waiters): for tests, not for production paths."""
        self._queues._check_valid()
        by_id = self._queues._by_id
        live = [e for e in self._deadlines if by_id.get(e[2].id) is e[2]]
        dead = len(self._deadlines) - len(live)
        if dead != self._dl_dead:
            raise AssertionError(f"invariant broken: deadline dead count {self._dl_dead} != {dead}")
        if len(self._deadlines) > 2 * len(live) + SLACK:
            raise AssertionError("invariant broken: deadline heap holds too many dead entries")
        with_deadline = sum(1 for w in by_id.values() if w.deadline is not None)
        if len(live) != with_deadline:
            raise AssertionError("invariant broken: every waiter with a deadline is in the heap")
        logged = {id(entry) for entry in self._grant_log}
        if self._at_grant and not all(id(e) in logged for e in self._refundable.values()):
            raise AssertionError("invariant broken: a refundable grant is not in the grant log")
        if not self._at_grant:
            if self._grant_log or len(self._refundable) != self._in_flight:
                raise AssertionError("invariant broken: in flight count != refundable grants")
        elif self._in_flight:
            raise AssertionError("invariant broken: in flight while charged at grant")
        if self._now is not None and by_id and self._now >= self._due:
            raise AssertionError("invariant broken: a permit is available while someone waits")
        if self._now is not None and any(e[0] <= self._now for e in live):
            raise AssertionError("invariant broken: a waiter is past its deadline")
