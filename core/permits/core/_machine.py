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
from collections.abc import Hashable, Sequence
from fractions import Fraction
from typing import NamedTuple

from ._bucket import NEVER, Bucket, Mark, Outside
from ._deadlines import Deadlines
from ._errors import (
    DuplicateId,
    NotRefundable,
    PermitTypeError,
    PermitValueError,
    PolicyError,
    TimeWentBackwards,
)
from ._ledger import Grant, Ledger
from ._policies import MAX_LEVELS, Policy
from ._queues import Queues, Waiter
from ._stats import LevelStatistics, Statistics, WaitHistogram
from .checks import check_int, check_rate

__all__ = [
    "MICROSECOND",
    "MILLISECOND",
    "SECOND",
    "Charge",
    "Decision",
    "Machine",
    "Snapshot",
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
        "_at_grant",
        "_cancelled",
        "_deadlines",
        "_expired",
        "_hists",
        "_ids",
        "_ledger",
        "_limits",
        "_now",
        "_pushed",
        "_queues",
        "_refunded",
        "_rejected",
        "_seq",
        "_source",
        "burst",
        "charge",
        "levels",
        "policy",
        "rate",
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
        window = check_int("refund_window_ns", refund_window_ns, 0)
        if not isinstance(supplied, bool):
            raise PermitTypeError("supplied", supplied, "a bool")
        if not isinstance(charge, Charge):
            raise PermitTypeError("charge", charge, "Charge.AT_GRANT or Charge.AT_SPEND")
        if supplied and charge is not Charge.AT_GRANT:
            raise PermitValueError(
                "charge", charge, "a supplied machine's permits are charged by their source"
            )
        self.policy = policy
        self.levels = levels
        self.charge = charge
        self._at_grant = charge is Charge.AT_GRANT
        #: Where the permits come from: the machine's own bucket, or outside.
        self._source: Bucket | Outside = (
            Outside(self.rate, self.burst) if supplied else Bucket(self.rate, self.burst)
        )
        self._ledger = Ledger(window)
        self._queues = Queues(levels)
        #: The waiting ids (the queues' own dict, read here for speed).
        self._ids = self._queues._by_id
        self._deadlines = Deadlines()
        self._now: int | None = None
        self._seq = 0
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
            f"refund_window_ns={self.refund_window_ns!r}, supplied={self.supplied!r}, "
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
    def refund_window_ns(self) -> int:
        """Nanoseconds after its grant during which a permit charged at its
        grant may be refunded."""
        return self._ledger.window

    @property
    def interval(self) -> Fraction:
        """Nanoseconds between permits, exactly: ``10**9 / rate``."""
        return SECOND / self.rate

    @property
    def supplied(self) -> bool:
        """Whether permits come from outside, through :meth:`supply`."""
        return isinstance(self._source, Outside)

    @property
    def in_flight(self) -> int:
        """Permits granted and not yet spent or refunded (:attr:`Charge.AT_SPEND`;
        always 0 when permits are charged at their grant)."""
        return self._source.held

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

    def next_due(self) -> int | None:
        """The earliest time (ns), not before the machine's latest time, at
        which a permit is available; equal to that latest time if one is
        available now (which happens only while nobody waits). ``None``
        before the first operation, always when ``supplied`` (the source
        outside knows), and while the permits in flight fill the bucket
        (none falls due before one of them is spent or refunded)."""
        due, now = self._source.due, self._now
        if now is None or due == NEVER:
            return None
        return due if due > now else now

    def next_tick(self) -> int | None:
        """When the machine next needs a :meth:`tick`: the earlier of the next
        permit's due time and the next waiter's deadline; ``None`` while
        nobody waits (nothing can happen until the next push). When
        ``supplied``, the next deadline, or ``None`` if no waiter has one."""
        if not self._queues:
            return None
        due = self._source.due
        deadline = self._deadlines.first(self._queues)
        if deadline is not None and deadline < due:
            return deadline
        return None if due == NEVER else due

    def min_wait(self, level: int) -> int:
        """The least time (ns) a waiter pushed at ``level`` now would wait.

        "Now" is the machine's latest time (tick it first). The bound holds
        unless a waiter ahead cancels or expires, or a permit is refunded, in
        between: it counts the waiters the policy's :meth:`Policy.ahead` puts
        first and the pacing of the permits they take (and of those in
        flight, at best spent now).
        """
        level = self._check_level(level)
        now = self._now
        if now is None:
            return 0
        queues = self._queues
        ahead = max(queues.depths[level], self.policy.ahead(queues, level, now))
        return self._source.available_after(ahead + 1, now)

    def next_level(self) -> int | None:
        """The level whose head the next permit would go to, as the policy
        chooses it at the machine's latest time; ``None`` while nobody waits.

        Asks :meth:`Policy.choose` without granting: for a permit source that
        must know who it is asking for (a shared limit that keeps headroom for
        urgent levels). Tick first, so that expired waiters are gone.
        """
        now = self._now
        if now is None or not self._queues:
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

    def snapshot(self) -> Snapshot:
        """Everything the machine's future decisions depend on, as values:
        two machines with equal snapshots (and equal policies) decide alike.
        For tests and debugging; O(waiters + grants held)."""
        source = self._source
        pacing = (source.anchor, source.k) if isinstance(source, Bucket) else None
        return Snapshot(
            now=self._now,
            due=source.due,
            pacing=pacing,
            in_flight=source.held,
            seq=self._seq,
            granted=self._queues.granted,
            waiting=tuple(tuple(self._queues.waiters(lv)) for lv in range(self.levels)),
            grants=tuple(self._ledger),
            logged=self._ledger.logged,
            deadlines=tuple((d, w.id) for d, _, w in self._deadlines.sorted()),
            statistics=self.statistics(),
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
        Raises :class:`DuplicateId` if ``id`` is waiting or its permit is in
        flight.
        """
        if level.__class__ is not int or not 0 <= level < self.levels:
            level = self._check_level(level)
        last = self._now
        if now.__class__ is not int or last is None or now < last:
            now = self._check_now(now)
        if deadline is not None:
            deadline = check_int("deadline", deadline)
        queues = self._queues
        try:
            waiting = id in self._ids
        except TypeError:
            raise PermitTypeError("id", id, "a hashable value") from None
        if waiting or (not self._at_grant and self._ledger.get(id) is not None):
            raise DuplicateId(id)
        out: list[Decision] = []
        self._settle(now, out)
        self._pushed[level] += 1
        self._ledger.forget(id)  # a new life: the old grant is no longer refundable
        # A permit is left at once only while nobody waits (P2): the
        # newcomer then takes it, whatever its queue limit or deadline.
        free = now >= self._source.due
        if not free:
            limits = self._limits
            limit = None if limits is None else limits[level]
            if limit is not None and queues.depths[level] >= limit:
                self._rejected[level] += 1
                out.append(_new(Decision, (id, _REJECTED, level, now, 0)))
                return out
            if deadline is not None and deadline <= now:
                self._seq += 1
                self._expired[level] += 1
                out.append(_new(Decision, (id, _EXPIRED, level, now, 0)))
                return out
        elif deadline is not None and deadline <= now:
            deadline = None  # granted below, before any deadline could matter
        waiter = _new(Waiter, (id, level, self._seq, now, deadline))
        self._seq += 1
        queues._append(waiter)
        if deadline is not None:
            self._deadlines.add(waiter, deadline)
        if free:
            self._grant(now, out)
        return out

    def cancel(self, id: Hashable) -> bool:
        """Withdraw a waiting ``id``; ``True`` if it was waiting, ``False`` if
        not (never pushed, or already granted, cancelled, rejected or
        expired). A cancelled waiter is never granted and costs no permit."""
        try:
            waiter = self._queues.get(id)
        except TypeError:
            raise PermitTypeError("id", id, "a hashable value") from None
        if waiter is None:
            return False
        self._queues._remove(waiter)
        self._cancelled[waiter.level] += 1
        if waiter.deadline is not None:
            self._deadlines.left(self._queues)
        return True

    def tick(self, now: int) -> list[Decision]:
        """Advance to ``now``: expire waiters whose deadline is ``<= now``,
        then grant every permit available at ``now``."""
        last = self._now
        if now.__class__ is not int or last is None or now < last:
            now = self._check_now(now)
        out: list[Decision] = []
        self._settle(now, out)
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
        ledger = self._ledger
        grant = ledger.refundable(id, now)
        if grant is None:
            raise NotRefundable(id)
        out: list[Decision] = []
        self._settle(now, out)
        ledger.forget(id)
        self._refunded[grant.waiter.level] += 1
        source = self._source
        if grant.before is None:
            source.release()  # in flight: it only held a place in the bucket
        else:
            # Charged at its grant: the state becomes what it would be had the
            # grant never happened, the later grants replayed (exact: P1, P5).
            later = ledger.unlog(grant)
            ledger.relog(later, source.replay(grant.before, [g.at for g in later], now))
        if self._queues and now >= source.due:
            self._grant(now, out)
        source.discard()
        return out

    def spend(self, id: Hashable, now: int) -> list[Decision]:
        """At ``now``, the caller holding ``id``'s permit proceeded: the permit
        is spent and can no longer be refunded.

        Ticks to ``now`` first. Under :attr:`Charge.AT_SPEND` the permit
        counts against the limit from ``now`` (it was in flight until then).
        Under :attr:`Charge.AT_GRANT` it changes no pacing and only lets the
        machine forget the grant, so that it remembers only the grants that
        may still be refunded and those made after the oldest of them. An id
        whose permit is not held (never granted, refunded or spent already,
        pushed again since, or outside ``refund_window_ns``) changes nothing
        but the tick.
        """
        now = self._check_now(now)
        ledger = self._ledger
        grant = ledger.get(id)
        out: list[Decision] = []
        self._settle(now, out)
        if grant is not None and ledger.get(id) is grant:
            ledger.forget(id)
            if grant.before is None:
                source = self._source
                source.release()
                source.take(now)  # charged now, as its caller proceeds
        ledger.trim()
        if self._queues and now >= self._source.due:
            self._grant(now, out)
        return out

    def supply(self, now: int) -> list[Decision]:
        """A permit from outside, at ``now``: tick to ``now``, then grant it to
        the waiter the policy chooses. Returns the decisions made (any
        expiries, then the grant); without a grant if nobody waits, and the
        permit is then not kept. Only for a ``supplied`` machine.
        """
        now = self._check_now(now)
        source = self._source
        source.offer(now)  # a paced machine refuses, and nothing has changed
        out: list[Decision] = []
        self._settle(now, out)
        source.discard()
        return out

    # -- the steps ----------------------------------------------------------

    def _check_level(self, level: object) -> int:
        if level.__class__ is int and 0 <= level < self.levels:
            return level
        level = check_int("level", level, 0)
        if level >= self.levels:
            raise PermitValueError(
                "level", level, f"must be below {self.levels}, the policy's levels"
            )
        return level

    def _check_now(self, now: object) -> int:
        checked = now if now.__class__ is int else check_int("now", now)
        last = self._now
        if last is not None and checked < last:
            raise TimeWentBackwards(checked, last)
        return checked

    def _settle(self, now: int, out: list[Decision]) -> None:
        """Advance to ``now``: the clock starts at the first operation (with
        a full bucket), waiters whose deadline has come expire, then every
        permit available is granted."""
        if self._now is None:
            self._source.start(now)
        self._now = now
        heap = self._deadlines.heap
        if heap and heap[0][0] <= now:
            for waiter in self._deadlines.expire(now, self._queues):
                self._expired[waiter.level] += 1
                out.append(
                    _new(
                        Decision,
                        (waiter.id, _EXPIRED, waiter.level, now, now - waiter.pushed_at),
                    )
                )
        if self._ids and now >= self._source.due:
            self._grant(now, out)

    def _grant(self, now: int, out: list[Decision]) -> None:
        """Grant permits available at ``now`` while anyone waits, each to the
        head of the level the policy chooses."""
        queues = self._queues
        depths = queues.depths
        ids = self._ids
        source = self._source
        ledger = self._ledger
        at_grant = self._at_grant
        choose = self.policy.choose
        levels = self.levels
        hists = self._hists
        while True:
            level = choose(queues, now)
            if level.__class__ is not int or not 0 <= level < levels or not depths[level]:
                raise self._policy_error(level, out)
            waiter = queues._take_head(level)
            if at_grant:
                before: Mark | None = source.take(now)
            else:
                before = None
                source.hold()  # in flight: charged when spent
            ledger.add(_new(Grant, (waiter, now, before)))
            wait = now - waiter.pushed_at
            hists[level].record(wait)
            if waiter.deadline is not None:
                self._deadlines.left(queues)
            out.append(_new(Decision, (waiter.id, _GRANTED, level, now, wait)))
            if now < source.due or not ids:
                return

    def _choose(self, now: int, out: list[Decision]) -> int:
        """The policy's choice of a level with waiters, checked (as the
        grant loop checks it)."""
        level = self.policy.choose(self._queues, now)
        if (
            level.__class__ is not int
            or not 0 <= level < self.levels
            or not self._queues.depths[level]
        ):
            raise self._policy_error(level, out)
        return level

    def _policy_error(self, level: object, out: list[Decision]) -> PolicyError:
        """The policy named ``level``, which has no waiters."""
        return PolicyError(
            f"{self.policy!r}.choose() returned {level!r}, not a level "
            f"with waiters (depths {self._queues.depths!r})",
            out,
        )

    def check_valid(self) -> None:
        """Assert every internal invariant; raises ``AssertionError`` if one
        is broken. O(waiters): for tests, not for production paths."""
        queues = self._queues
        queues._check_valid()
        self._deadlines.check(queues, self._now)
        self._ledger.check()
        if not self._at_grant:
            if self._ledger.logged or len(self._ledger) != self._source.held:
                raise AssertionError("invariant broken: in flight count != refundable grants")
        elif self._source.held:
            raise AssertionError("invariant broken: in flight while charged at grant")
        now = self._now
        if now is not None and queues and now >= self._source.due:
            raise AssertionError("invariant broken: a permit is available while someone waits")


class Snapshot(NamedTuple):
    """What :meth:`Machine.snapshot` returns: the machine's state as values."""

    now: int | None
    #: The next permit's due time (ns), or a time no clock reaches.
    due: int
    #: The bucket's ``(anchor, k)``: ``TAT = anchor + k * interval``; ``None``
    #: for a supplied machine.
    pacing: tuple[int, int] | None
    in_flight: int
    #: The push counter.
    seq: int
    #: Permits granted so far, all levels.
    granted: int
    waiting: tuple[tuple[Waiter, ...], ...]
    #: The grants that may still be refunded or spent, oldest first.
    grants: tuple[Grant, ...]
    #: The grant log a refund replays.
    logged: tuple[Grant, ...]
    #: ``(deadline, id)`` of every deadline entry, live or dead.
    deadlines: tuple[tuple[int, Hashable], ...]
    statistics: Statistics
