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

import copy
import enum
import heapq
from collections.abc import Callable, Hashable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import NamedTuple

from ._bucket import NEVER, Bucket, Buckets, Outside, interval_of, refuse_outside, refuse_paced
from ._deadlines import SHIFT, Deadlines
from ._errors import (
    DuplicateId,
    NotRefundable,
    PermitError,
    PermitTypeError,
    PermitValueError,
    PolicyError,
    QueueFull,
    TimeWentBackwards,
    shown,
)
from ._ledger import Grant, Ledger
from ._limits import Limit
from ._policies import Aging, Fifo, Policy
from ._queues import Queues, Waiter
from ._stats import Busiest, FlowStatistics, LevelStatistics, Statistics, WaitHistogram
from .checks import (
    NO_UNIT,
    check_actual,
    check_change,
    check_hashable,
    check_int,
    check_limits,
    check_policy,
    check_rate,
    check_units,
    level_range,
    no_limit,
    over_burst,
    settled_units,
)

#: The largest weight of a flow.
MAX_WEIGHT = 1_000_000
#: Distinct costs a machine keeps to share between waiters (then it starts
#: again): memory, not behaviour.
COSTS_SHARED = 4096

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
    #: Refused at push because even its best case (:meth:`Machine.min_wait`)
    #: would wait longer than its ``max_wait_ns``; never granted.
    TOO_LONG = "too long"
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
    """What the machine decided for one id: granted, expired, rejected or
    too long."""

    id: Hashable
    #: :attr:`State.GRANTED`, :attr:`State.EXPIRED`, :attr:`State.REJECTED`
    #: or :attr:`State.TOO_LONG`.
    state: State
    level: int
    #: The time (ns) of the decision: the ``now`` of the operation.
    at: int
    #: How long (ns) the id waited: ``at - pushed_at``.
    waited: int


_GRANTED = State.GRANTED
_EXPIRED = State.EXPIRED
_REJECTED = State.REJECTED
_TOO_LONG = State.TOO_LONG


class Machine:
    """Permits by ``policy`` under one limit (``rate``, ``burst``) or several
    (``limits``).

    :param policy: who goes next (:class:`~permits.core.Fifo`,
        :class:`~permits.core.StrictPriority`, :class:`~permits.core.Shares`,
        :class:`~permits.core.Aging` or your own :class:`~permits.core.Policy`).
    :param rate: units per second of the one limit (named ``"units"``): an
        ``int``, ``float``, ``Fraction`` or ``Decimal``, finite and ``> 0``; a
        float is read as the decimal it prints as, and a Decimal's exponent
        of ten is at most 10,000 either way. Give ``rate`` (and ``burst``)
        or ``limits``, not both.
    :param burst: units that may be banked while nobody waits, ``>= 1``.
        Over any window of ``d`` nanoseconds at most
        ``burst + floor(rate * (d + 1) / 10**9)`` units are charged
        (refunded ones not counted): the limit, exact on the nanosecond grid.
    :param limits: several named limits at once, each a
        :class:`~permits.core.Limit` (``{"requests": Limit.per_minute(500),
        "tokens": Limit.per_minute(90_000)}``), or one :class:`Limit`. A
        waiter's cost names what it takes from each; it is granted only when
        every limit admits it, and then charged to all at once.
    :param max_waiting: ``None`` (no limit), an ``int`` for every level, or one
        ``int | None`` per level: a push to a level that already has that many
        waiters is rejected.
    :param settle_window_ns: nanoseconds after its charge during which a
        permit may be refunded or settled; the machine remembers charges up
        to twice that long, so its memory stays bounded by the charges of
        that span (P1: at most ``burst + rate * (2 * settle_window_ns + 1) /
        10**9`` units of each limit, ``rate`` in units per second), and by the
        grants in flight when each is spent (:meth:`spend`) as its caller
        goes ahead, unless it is to be settled later. ``None``: a charged
        permit is never refunded or settled, and the machine keeps none
        (a simulation's machine); a permit in flight still may be, until
        spent.
    :param charge: when a permit counts against the limit:
        :attr:`Charge.AT_GRANT` (the default) or :attr:`Charge.AT_SPEND`, for
        a user (an adapter) whose callers proceed some time after their grant
        and who spends each permit as its caller proceeds. Then at most
        ``burst`` units are in flight (granted, not yet spent or refunded;
        ``burst + floor(rate / 10**9)`` at rates of 10**9/s and more),
        the limit holds over the spend times, and a permit in flight can be
        refunded whenever it is, however long after its grant.
    :param supplied: ``True`` when the permits come from a source outside
        the machine (a limit shared through Redis): the machine then paces
        nothing, and grants only the permits handed to it by :meth:`supply`,
        each to the waiter the policy chooses. ``rate`` and ``burst`` describe
        that outside limit and serve only :meth:`min_wait`'s estimate.
    :param keep_waits: ``False``: keep no statistics of the waits (their
        histogram and sum) and no count of the flows granted the most, for a
        user that tallies its own (the simulator): a grant then costs less.
        :meth:`statistics` still counts every grant, with each wait field
        ``None``; :meth:`waits_at_most` and :meth:`busiest_flows` refuse. No
        decision changes (P55).
    """

    __slots__ = (
        "_asks",
        "_at_grant",
        "_busiest",
        "_cancelled",
        "_charge",
        "_costs",
        "_deadlines",
        "_expired",
        "_flow_weights",
        "_flowed",
        "_flying",
        "_hists",
        "_ids",
        "_index",
        "_ledger",
        "_levels",
        "_limits",
        "_max_waiting",
        "_none",
        "_now",
        "_paused_at",
        "_paused_ns",
        "_paused_until",
        "_pauses",
        "_per_flow",
        "_policy",
        "_pushed",
        "_queues",
        "_record",
        "_refunded",
        "_rejected",
        "_seq",
        "_source",
        "_too_long",
        "_unit",
        "_unit_costs",
        "_units",
    )

    def __init__(
        self,
        policy: Policy,
        rate: int | float | Fraction | Decimal | None = None,
        burst: int = 1,
        *,
        limits: Mapping[str, Limit] | Limit | None = None,
        max_waiting: int | Sequence[int | None] | None = None,
        settle_window_ns: int | None = SECOND,
        supplied: bool = False,
        charge: Charge = Charge.AT_GRANT,
        flow_weights: Mapping[Hashable, int] | Callable[[Hashable], int] | None = None,
        max_waiting_per_flow: int | None = None,
        flow_limit: str | None = None,
        keep_waits: bool = True,
    ) -> None:
        levels = check_policy(policy)
        named = check_limits(rate, burst, limits)
        max_waiting_ = _max_waiting(max_waiting, levels)
        window = None
        if settle_window_ns is not None:
            if isinstance(settle_window_ns, bool) or not isinstance(settle_window_ns, int):
                raise PermitTypeError(
                    "settle_window_ns", settle_window_ns, "an int (ns) or None (never refundable)"
                )
            window = check_int("settle_window_ns", settle_window_ns, 0)
        if not isinstance(supplied, bool):
            raise PermitTypeError("supplied", supplied, "a bool")
        if not isinstance(keep_waits, bool):
            raise PermitTypeError("keep_waits", keep_waits, "a bool")
        if not isinstance(charge, Charge):
            raise PermitTypeError("charge", charge, "Charge.AT_GRANT or Charge.AT_SPEND")
        if supplied and charge is not Charge.AT_GRANT:
            raise PermitValueError(
                "charge", charge, "a supplied machine's permits are charged by their source"
            )
        if flow_weights is not None and not (
            isinstance(flow_weights, Mapping) or callable(flow_weights)
        ):
            raise PermitTypeError(
                "flow_weights", flow_weights, "a mapping or a function from flow to weight"
            )
        if isinstance(flow_weights, Mapping):
            for flow, weight in flow_weights.items():
                _flow_weight(flow, weight)
        per_flow = (
            None
            if max_waiting_per_flow is None
            else check_int("max_waiting_per_flow", max_waiting_per_flow, 0)
        )
        if flow_limit is not None and not isinstance(flow_limit, str):
            raise PermitTypeError("flow_limit", flow_limit, "a limit's name (str)")
        if flow_limit is not None and flow_limit not in named:
            raise PermitValueError(
                "flow_limit", flow_limit, f"is not one of the limits {list(named)}"
            )
        self._policy = policy
        self._levels = levels
        self._charge = charge
        self._flow_weights = flow_weights
        self._per_flow = per_flow
        #: Whether a push ever named a flow.
        self._flowed = False
        self._at_grant = charge is Charge.AT_GRANT
        self._limits = named
        self._index = {name: i for i, name in enumerate(named)}
        self._max_waiting = max_waiting_
        #: The cost of a push that names none: one unit of every limit.
        self._unit = (1,) * len(named)
        #: The costs waiters asked for lately, each kept once and shared by
        #: the waiters that ask for it (a waiter's memory is then its own
        #: record only); at most COSTS_SHARED of them.
        self._costs: dict[tuple[int, ...], tuple[int, ...]] = {}
        #: The dicts those costs were asked as, by their names then units
        #: (a dict asked again is not read again): cleared with them, and
        #: by set_limit (read again against the bursts as they stand).
        self._asks: dict[tuple[object, ...], tuple[int, ...]] = {}
        #: :attr:`unit_costs` (once ``False``, the next grant's due time
        #: depends on who the policy chooses): the queues' ``unit_costs``,
        #: kept here as an attribute for the hot paths (a property reading
        #: theirs costs 2,465 instructions a grant, +4.6 %); ``check_valid``
        #: holds the two equal.
        self._unit_costs = True
        #: Where the permits come from: the machine's own buckets, or outside.
        buckets = [Bucket(limit.rate, limit.burst, i) for i, limit in enumerate(named.values())]
        self._source: Bucket | Buckets | Outside = (
            Outside(list(named.values()))
            if supplied
            else buckets[0]
            if len(buckets) == 1
            else Buckets(buckets)
        )
        self._ledger = Ledger(window)
        flow_index = 0 if flow_limit is None else list(named).index(flow_limit)
        # Fifo and Aging rank the levels by their oldest waiters: keep them
        # in order, but for a Fifo of one level (it compares only two).
        ages = isinstance(policy, Aging) or (isinstance(policy, Fifo) and levels > 1)
        self._queues = Queues(levels, len(named), flow_index, ages=ages)
        start = getattr(policy, "start", None)
        if start is not None:
            try:
                self._queues.state = start(tuple(named))
            except PermitError:
                raise  # its own refusal of these limits (Shares naming none of them)
            except Exception as error:  # a bug in it, as in the other hooks
                raise _raised(policy, "start", error, []) from error
        #: The policy's hook told of every grant, if it keeps state.
        self._record: Callable[[Queues, Waiter], None] | None = getattr(policy, "record", None)
        #: The waiting ids (the queues' own dict, read here for speed).
        self._ids = self._queues._by_id
        self._deadlines = Deadlines()
        self._now: int | None = None
        self._seq = 0
        self._flying = 0
        self._pushed = [0] * levels
        self._cancelled = [0] * levels
        self._refunded = [0] * levels
        self._rejected = [0] * levels
        self._expired = [0] * levels
        self._too_long = [0] * levels
        #: Per level, the histogram of waits and the flows granted the most;
        #: none with keep_waits=False.
        self._hists = [WaitHistogram() for _ in range(levels)] if keep_waits else None
        self._busiest = [Busiest() for _ in range(levels)] if keep_waits else []
        #: Per level, the units granted of each limit, net of refunds and
        #: settles; while every cost is one unit, only the corrections (the
        #: grants are counted by _granted_at).
        self._units = [[0] * len(named) for _ in range(levels)]
        self._none = (0,) * len(named)
        #: Pauses that lengthened the pause, the time they cover, and when
        #: the latest ends (before the first, a time no clock reaches: the
        #: clock may start anywhere, at a negative time too).
        self._pauses = 0
        self._paused_ns = 0
        self._paused_until = -NEVER
        #: The latest ``now`` a supplied machine was told a pause at.
        self._paused_at = -NEVER

    def __copy__(self) -> Machine:
        """A machine of its own, in the state this one is in (P98): its
        queues, buckets, ledger and counts copied, not shared (a shallow
        copy's, shared, changed with the other's); the policy and
        ``flow_weights`` (its configuration) shared, and so are the
        caller's own values in it, the waiters' ids and flows: the copy
        answers to the very objects the original does. O(waiters + grants
        held)."""
        shared: list[object] = [self._policy, self._flow_weights]
        waiters = [w for lv in range(self._levels) for w in self._queues.waiters(lv)]
        waiters += self._queues.kept()  # granted, still in their lines' first chunks
        waiters += [g.waiter for g in self._ledger]
        waiters += [g.waiter for g in self._ledger.logged if isinstance(g, Grant)]
        for waiter in waiters:
            shared += (waiter.id, waiter.flow)
        for busiest in self._busiest:
            shared += busiest.flows()
        twin: Machine = copy.deepcopy(self, {id(value): value for value in shared})
        return twin

    def __repr__(self) -> str:
        limits = self._limits
        if list(limits) == ["units"]:
            pacing = f"rate={self.rate!r}, burst={self.burst!r}"
        else:
            pacing = f"limits={limits!r}"
        flows = ""  # the flows' options, where not the defaults
        if self._flow_weights is not None:
            flows += f", flow_weights={self._flow_weights!r}"
        if self._per_flow is not None:
            flows += f", max_waiting_per_flow={self._per_flow!r}"
        if self._queues.flow_limit:
            flows += f", flow_limit={list(limits)[self._queues.flow_limit]!r}"
        return (
            f"Machine(policy={self._policy!r}, {pacing}, "
            f"max_waiting={self._max_waiting!r}, "
            f"settle_window_ns={self.settle_window_ns!r}, supplied={self.supplied!r}, "
            f"charge={self._charge!r}{flows}{'' if self.keep_waits else ', keep_waits=False'})"
        )

    # -- reading ------------------------------------------------------------

    @property
    def policy(self) -> Policy:
        """The policy, as given (read-only: a machine keeps its policy's
        state in its queues, begun by that policy)."""
        return self._policy

    @property
    def levels(self) -> int:
        """The number of levels, the policy's (level 0 the most urgent)."""
        return self._levels

    @property
    def charge(self) -> Charge:
        """When a permit counts against the limit, as given."""
        return self._charge

    @property
    def unit_costs(self) -> bool:
        """Whether every waiter so far asked for one unit of every limit:
        ``False`` for good from the first push of another cost that is not
        refused as too long, or take of another cost that is granted. While
        ``True``, a push that names no deadline, into a machine where
        someone waits, and returns no decision leaves :meth:`next_tick` as
        it was (SPEC P54): its user may skip asking again."""
        return self._unit_costs

    @property
    def limits(self) -> dict[str, Limit]:
        """The limits as they stand now (:meth:`set_limit` changes them), by name."""
        return dict(self._limits)

    @property
    def rate(self) -> Fraction:
        """Units per second of the first limit."""
        return next(iter(self._limits.values())).rate

    @property
    def burst(self) -> int:
        """Burst of the first limit."""
        return next(iter(self._limits.values())).burst

    @property
    def interval(self) -> Fraction:
        """Nanoseconds per unit of the first limit, exactly: ``10**9 / rate``."""
        return SECOND / self.rate

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
        return self._max_waiting

    @property
    def settle_window_ns(self) -> int | None:
        """Nanoseconds after its charge during which a permit may be refunded
        or settled; ``None``: never."""
        return self._ledger.window

    @property
    def keep_waits(self) -> bool:
        """Whether the machine keeps a histogram of each level's waits and
        the flows granted the most (``keep_waits``)."""
        return self._hists is not None

    @property
    def supplied(self) -> bool:
        """Whether permits come from outside, through :meth:`supply`."""
        return isinstance(self._source, Outside)

    @property
    def in_flight(self) -> int:
        """Permits granted and not yet spent or refunded (:attr:`Charge.AT_SPEND`;
        always 0 when permits are charged at their grant)."""
        return self._flying

    def __len__(self) -> int:
        """Number of waiters."""
        return len(self._ids)

    def __contains__(self, id: object) -> bool:
        """Whether ``id`` is waiting (one that does not hash is not)."""
        try:
            return id in self._queues
        except Exception:
            try:
                hash(id)
            except Exception:
                return False  # no waiter's id fails to hash
            raise

    def waiting(self, level: int | None = None) -> list[Waiter]:
        """The waiters of ``level`` in the order they will be served among
        themselves, or of every level in push order."""
        if level is None:
            everyone = [w for lv in range(self._levels) for w in self._queues.waiters(lv)]
            return sorted(everyone, key=lambda w: w.seq)
        return self._queues.waiters(self._check_level(level))

    def waiting_above(self, units: int, *, limit: str | None = None) -> list[Waiter]:
        """The waiters asking for more than ``units`` of ``limit`` (the only
        one, if the machine has one), in push order: those a burst of
        ``units`` could never grant (lowered so, they wait for nothing)."""
        units = check_int("units", units, 0)
        index, _ = self._limit_named(limit)
        queues = self._queues
        above = [
            w for lv in range(self._levels) for w in queues.waiters(lv) if w.cost[index] > units
        ]
        return sorted(above, key=lambda w: w.seq)

    def next_due(self) -> int | None:
        """The earliest time (ns), not before the machine's latest time, at
        which the waiter the policy chooses next can be granted (while nobody
        waits, one unit of every limit); equal to that latest time if it can
        now (which happens only while nobody waits, or after a cancel).
        ``None`` before the first operation, always when ``supplied`` (the
        source outside knows), and while the units in flight leave no room
        for it (none falls due before some are spent or refunded)."""
        due, now = self._source.due, self._now
        if now is None or due == NEVER:
            return None
        return due if due > now else now

    def next_tick(self) -> int | None:
        """When the machine next needs a :meth:`tick`: the earlier of the next
        permit's due time and the next waiter's deadline; ``None`` while
        nobody waits (nothing can happen until the next push). When
        ``supplied``, the next deadline, or ``None`` if no waiter has one."""
        if not self._ids:
            return None
        due = self._source.due
        firsts = self._deadlines.firsts
        if firsts and firsts[0] >> SHIFT < due:
            return firsts[0] >> SHIFT  # the next deadline
        if due == NEVER:
            return None
        now = self._now
        return due if now is None or due > now else now  # after a cancel, now

    def min_wait(
        self, level: int, *, cost: int | Mapping[str, int] = 1, flow: Hashable = None
    ) -> int:
        """The least time (ns) a waiter pushed at ``level`` (and ``flow``)
        now, asking for ``cost``, would wait.

        "Now" is the machine's latest time (tick it first). The bound holds
        unless a waiter ahead cancels or expires, or a permit is refunded or
        settled, or a limit changes, or the first push that names a flow
        comes, in between: it counts the costs of the waiters that certainly
        go first (its own level's, or only its own flow's when other flows
        wait there; and every other level's too when the policy's
        :meth:`Policy.ahead` puts every waiter first and neither ``flow`` nor
        any push so far has named a flow) and the pacing of those units (and
        of those in flight, at best spent now). A cost above a limit's burst
        is refused as :meth:`push` refuses it: such a waiter would never
        wait, nor be granted.
        """
        level = self._check_level(level)
        units = self._within_bursts(cost)
        _check_flow(flow)
        now = self._now
        if now is None:
            return 0
        return self._least_wait(level, units, flow, now, [])

    def _least_wait(
        self, level: int, units: tuple[int, ...], flow: Hashable, now: int, out: list[Decision]
    ) -> int:
        """:meth:`min_wait` at ``now``, the machine's time, its arguments
        checked; a policy whose ``ahead`` is no count raises a
        :class:`PolicyError` carrying the decisions ``out`` made before it."""
        queues = self._queues
        try:
            ahead = self._policy.ahead(queues, level, now)
        except Exception as error:
            raise _raised(self._policy, "ahead", error, out) from error
        if isinstance(ahead, bool) or not isinstance(ahead, int) or ahead < 0:
            raise PolicyError(
                f"{self._policy!r}.ahead() returned {shown(ahead)}, "
                "not a count of waiters (an int >= 0)",
                out,
            )
        units_waiting = queues.units
        if queues.flows(level) > (1 if queues.flow_depth(level, flow) else 0):
            # another flow waits at its level: only its own flow surely goes first
            units_waiting[level] = queues.flow_units(level, flow)
        # once flows are named (this newcomer's own too), a newcomer's flow
        # may head another level and let this one pass its older waiters:
        # only its own level is sure
        everyone = ahead >= len(queues) and not self._flowed and flow is None
        before = units_waiting if everyone else [units_waiting[level]]
        need = tuple(sum(col) + units[i] for i, col in enumerate(zip(*before, strict=True)))
        return self._source.available_after(need, now)

    def next_level(self, owed: int | None = None) -> int | None:
        """The level whose head the next permit would go to, as the policy
        chooses it at the machine's latest time (``owed``, while it has
        waiters: see :meth:`supply`; a supplied machine only); ``None`` while
        nobody waits.

        Asks :meth:`Policy.choose` without granting: for a permit source that
        must know who it is asking for (a shared limit that keeps headroom for
        urgent levels). Tick first, so that expired waiters are gone.
        """
        if owed is not None:
            owed = self._check_level(owed, "owed")
            if not isinstance(self._source, Outside):
                raise refuse_paced("owed", owed, "next_level(owed=...)")
        now = self._now
        if now is None or not self._queues:
            return None
        if owed is not None and self._queues.depths[owed]:
            return owed
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
                    granted=self._granted_at(level),
                    cancelled=self._cancelled[level],
                    refunded=self._refunded[level],
                    rejected=self._rejected[level],
                    expired=self._expired[level],
                    too_long=self._too_long[level],
                    flows=self._queues.flows(level),
                    units_granted=self._units_granted(level),
                    **self._waits(level),
                )
                for level in range(self._levels)
            ),
            pauses=self._pauses,
            paused_ns=self._paused_ns,
        )

    def waits_at_most(self, level: int, bounds_ns: Sequence[int]) -> tuple[int, ...]:
        """For each bound (nanoseconds, ascending), how many of ``level``'s
        granted waiters waited at most that long: a histogram's cumulative
        counts, each within :data:`RELATIVE_ERROR` of its bound (P17)."""
        level = self._check_level(level)
        if isinstance(bounds_ns, (str, bytes)) or not isinstance(bounds_ns, Sequence):
            raise PermitTypeError("bounds_ns", bounds_ns, "a sequence of ints (nanoseconds)")
        bounds = [check_int(f"bounds_ns[{i}]", b, 0) for i, b in enumerate(bounds_ns)]
        if bounds != sorted(bounds):
            raise PermitValueError("bounds_ns", bounds_ns, "must be in ascending order")
        if self._hists is None:
            raise _no_histograms("waits_at_most", "bounds_ns", bounds_ns)
        return tuple(self._hists[level].at_most(bounds))

    def busiest_flows(self, level: int, n: int = 10) -> tuple[FlowStatistics, ...]:
        """The busiest named flows of ``level``: the ``n`` granted the most
        units (counted in bounded memory, so within ``granted_error``) and
        the ``n`` with the most units waiting (a starved tenant among
        them), each once: at most ``2 * n``, most granted first, then most
        waiting. O(flows waiting at the level); for monitoring, not for
        every request."""
        level = self._check_level(level)
        n = check_int("n", n, 0)
        if self._hists is None:
            raise _no_histograms("busiest_flows", "n", n, "the counts of the busiest flows")
        queues = self._queues
        busiest = self._busiest[level]
        waiting = {flow: (depth, units) for flow, depth, units in queues.flow_table(level)}
        waiting.pop(None, None)
        most_waiting = heapq.nlargest(n, waiting, key=lambda flow: waiting[flow][1])
        candidates = dict.fromkeys([*busiest.flows(), *most_waiting])
        rows = [
            FlowStatistics(flow, *waiting.get(flow, (0, 0)), *busiest.get(flow))
            for flow in candidates
        ]
        rows.sort(key=lambda r: (r.granted_units, r.waiting_units), reverse=True)
        kept = {*most_waiting, *(r.flow for r in rows[:n])}
        return tuple(r for r in rows if r.flow in kept)

    def queue_full(self, id: Hashable, level: int, flow: Hashable = None) -> QueueFull:
        """The error for a push of ``id`` to ``level`` and ``flow`` that was
        just rejected (a :attr:`State.REJECTED` decision): it names the most
        waiters allowed that the push found reached, the level's ``max_waiting`` if the
        level is at it, the flow's ``max_waiting_per_flow`` otherwise."""
        level = self._check_level(level)
        most = None if self._max_waiting is None else self._max_waiting[level]
        per_flow = self._per_flow
        if most is not None and (per_flow is None or self._queues.depths[level] >= most):
            return QueueFull(id, level, most)
        if per_flow is not None:
            return QueueFull(id, level, per_flow, flow=flow, per_flow=True)
        raise PermitValueError(
            "level",
            level,
            "has no max_waiting, nor its flows a max_waiting_per_flow: no push to it is rejected",
        )

    def snapshot(self) -> Snapshot:
        """Everything the machine's future decisions depend on, as values:
        two machines with equal snapshots (and equal policies) decide alike.
        For tests and debugging; O(waiters + grants held)."""
        source = self._source
        buckets = [source] if isinstance(source, Bucket) else getattr(source, "buckets", [])
        pacing = (
            tuple((b.anchor, b.k, b.P, b.Q, b.b1, b.held, b.until, b.quotas) for b in buckets)
            or None
        )
        return Snapshot(
            now=self._now,
            due=source.due,
            pacing=pacing,
            in_flight=self._flying,
            seq=self._seq,
            granted=self._queues.granted,
            policy_state=copy.copy(self._queues.state),
            flows=self._queues.fairness(),
            flowed=self._flowed,
            waiting=tuple(tuple(self._queues.waiters(lv)) for lv in range(self._levels)),
            grants=tuple(self._ledger),
            spent=tuple(g.waiter.id for g in self._ledger if self._ledger.is_spent(g.waiter.id)),
            logged=self._ledger.logged,
            deadlines=tuple((d, w.id) for d, _, w in self._deadlines.sorted()),
            statistics=self.statistics(),
            paused=(self._paused_at, self._paused_until),
        )

    # -- operations ---------------------------------------------------------

    def push(
        self,
        id: Hashable,
        level: int,
        now: int,
        *,
        deadline: int | None = None,
        cost: int | Mapping[str, int] = 1,
        flow: Hashable = None,
        max_wait_ns: int | None = None,
    ) -> list[Decision]:
        """A waiter ``id`` joins ``level`` at ``now``, asking for ``cost``.

        ``cost`` is an ``int`` (that many units of every limit; 1 by default)
        or a mapping from limit names to units (a limit it does not name, 0).
        ``flow`` (any hashable: a tenant, an API key) names the flow it
        belongs to within its level; the flows of a level take turns by cost
        and weight, FIFO within each, and ``None`` is the level's default
        flow. A flow at its ``max_waiting_per_flow`` rejects the newcomer as
        a full level does.
        Ticks to ``now`` first (the waiters already there take what fell
        due), then queues the newcomer, and grants it at once if the policy
        chooses it and its cost is available. Otherwise a level at its
        ``max_waiting`` rejects the newcomer (a :attr:`State.REJECTED`
        decision), and a ``deadline <= now`` expires it at once:
        ``max_waiting=0`` and a deadline of ``now`` both mean "grant only at
        once, never queue".
        With ``max_wait_ns`` (``>= 0``), a newcomer whose best case would
        wait longer, that is, whose :meth:`min_wait` after the tick exceeds
        ``max_wait_ns``, is refused before it joins (a :attr:`State.TOO_LONG`
        decision): never queued, never granted, and the machine stays as the
        tick left it but for its counts (and :meth:`min_wait` still says
        what the refusal compared). While nobody waits and its cost fits,
        that best case is 0: such a newcomer is never refused.
        Raises :class:`DuplicateId` if ``id`` is waiting
        or its permit is in flight, and :class:`PermitValueError` for a cost
        larger than a limit's burst (it could never be granted).
        """
        level, now, deadline, units, weight = self._arrival(id, level, now, deadline, cost, flow)
        if max_wait_ns is not None:
            max_wait_ns = check_int("max_wait_ns", max_wait_ns, 0)
        out = self.tick(now)
        if max_wait_ns is not None and self._least_wait(level, units, flow, now, out) > max_wait_ns:
            self._count(id, level)
            self._too_long[level] += 1
            out.append(_new(Decision, (id, _TOO_LONG, level, now, 0)))
            return out
        self._arrive(id, level, units, flow)
        queues = self._queues
        ids = self._ids
        max_waiting = self._max_waiting
        limit = None if max_waiting is None else max_waiting[level]
        full = limit is not None and queues.depths[level] >= limit
        if self._per_flow is not None and not full:
            full = queues.flow_depth(level, flow) >= self._per_flow
        late = deadline is not None and deadline <= now
        waiter = _new(Waiter, (id, level, self._seq, now, None if late else deadline, units, flow))
        self._seq += 1
        if ids and self._unit_costs:
            # Every waiter asks for the same cost, and none is available (P2):
            # the newcomer cannot be granted at once.
            if full:
                self._rejected[level] += 1
                out.append(_new(Decision, (id, _REJECTED, level, now, 0)))
            elif late:
                self._expired[level] += 1
                out.append(_new(Decision, (id, _EXPIRED, level, now, 0)))
            else:
                queues._append(waiter, weight)
                if deadline is not None:
                    self._deadlines.add(waiter, deadline)
            return out
        queues._append(waiter, weight)
        if waiter.deadline is not None:
            self._deadlines.add(waiter, waiter.deadline)
        try:
            self._grant(now, out)
        except PolicyError as error:
            if (full or late) and queues.get(id) is waiter:
                # it may not queue, whatever the broken policy answered
                self._turn_away(waiter, full, out)
                error.decisions = tuple(out)
            raise
        if (full or late) and queues.get(id) is waiter:
            # Not granted at once, and it may not queue.
            self._turn_away(waiter, full, out)
            self._grant(now, out)
        return out

    def _turn_away(self, waiter: Waiter, full: bool, out: list[Decision]) -> None:
        """A newcomer not granted at once that may not queue leaves: rejected
        if its queue is ``full``, otherwise expired."""
        self._withdraw(waiter)
        id, level, now = waiter.id, waiter.level, waiter.pushed_at
        if full:
            self._rejected[level] += 1
            out.append(_new(Decision, (id, _REJECTED, level, now, 0)))
        else:
            self._expired[level] += 1
            out.append(_new(Decision, (id, _EXPIRED, level, now, 0)))

    def take(
        self,
        id: Hashable,
        level: int,
        now: int,
        *,
        cost: int | Mapping[str, int] = 1,
        flow: Hashable = None,
        settle_later: bool = False,
    ) -> list[Decision]:
        """Push ``id`` and spend its permit in one step, if one is free at ``now``.

        When nobody waits (after the tick to ``now``) and ``cost`` is
        available, this is exactly :meth:`push` then :meth:`spend` at
        ``now``: the permit is granted and charged at ``now``, and the last
        decision returned is ``id``'s :attr:`State.GRANTED`, with no waiter
        queued and no permit in flight. Otherwise it is :meth:`tick`: the
        decisions returned are the tick's, none of them ``id``'s, and ``id``
        was not pushed (push it to wait). For a caller that proceeds the
        moment a permit is free: an acquire that finds one. Raises as
        :meth:`push` does, and :class:`PermitTypeError` for a
        ``settle_later`` that is not a bool. It takes no ``max_wait_ns``: what
        it grants waited 0, within any.
        """
        granted = self._free(id, level, now, cost, flow, settle_later)
        if granted is None:
            return self._take(id, level, now, cost, flow, settle_later)
        return [_new(Decision, (id, _GRANTED, level, now, 0))] if granted else []

    def try_take(
        self,
        id: Hashable,
        level: int,
        now: int,
        *,
        cost: int | Mapping[str, int] = 1,
        flow: Hashable = None,
        settle_later: bool = False,
    ) -> bool:
        """:meth:`take`, for a caller that needs only to know whether it got
        the permit: ``True`` when it did (granted and spent at ``now``,
        exactly as :meth:`take` grants). ``False`` when someone waits, and
        then nothing changed (:meth:`tick` decides them), or when ``cost``
        is not available at ``now``, and then the machine ticked to ``now``,
        which decides nothing while nobody waits. Raises as :meth:`take`
        does. With no decision to make, it is the cheapest way to take a
        free permit: an adapter's acquire that finds one.
        """
        granted = self._free(id, level, now, cost, flow, settle_later)
        if granted is not None:
            return granted
        if self._ids:
            self._arrival(id, level, now, None, cost, flow)  # (bad input is refused all the same)
            if settle_later.__class__ is not bool:
                raise PermitTypeError("settle_later", settle_later, "a bool")
            return False
        return bool(self._take(id, level, now, cost, flow, settle_later))

    def _free(
        self,
        id: Hashable,
        level: int,
        now: int,
        cost: int | Mapping[str, int],
        flow: Hashable,
        settle_later: bool,
    ) -> bool | None:
        """A take's hot case: one unit while nobody waits (so no deadline
        can be due either: only waiters have one), nothing is held, no flow
        weight is asked for and time moves on. Whether the permit was
        granted; ``None`` if this is not the hot case (:meth:`_take` decides
        it). It takes only the steps of the general case that do something
        then, and makes neither a waiter record nor a decision unless the
        policy keeps a record of grants; P47 holds the two to the same
        decisions and the same state."""
        last = self._now
        if not (
            cost.__class__ is int
            and cost == 1
            and flow is None
            and settle_later is False
            and level.__class__ is int
            and 0 <= level < self._levels
            and now.__class__ is int
            and last is not None
            and now >= last
            and not self._ids
            and not self._ledger.held
            and self._unit_costs
            and self._flow_weights is None
        ):
            return None
        try:
            hash(id)
        except Exception:
            return None  # (the general case refuses it)
        self._now = now
        source = self._source
        if now < source.due:
            return False
        self._pushed[level] += 1
        self._queues._pass(level)
        source.charge(now, self._unit, False)
        self._ledger.trim()
        seq = self._seq
        self._seq += 1
        if self._record is not None:
            self._granted(_new(Waiter, (id, level, seq, now, None, self._unit, None)), now, [])
        elif self._hists is not None:  # (_granted's one step that does something here)
            self._hists[level]._add(0)
        return True

    def _take(
        self,
        id: Hashable,
        level: int,
        now: int,
        cost: int | Mapping[str, int],
        flow: Hashable,
        settle_later: bool,
    ) -> list[Decision]:
        """:meth:`take`, every case."""
        level, now, _, units, _ = self._arrival(id, level, now, None, cost, flow)
        if settle_later.__class__ is not bool:
            raise PermitTypeError("settle_later", settle_later, "a bool")
        out = self.tick(now)
        if self._ids:
            return out  # a permit is free only while nobody waits (P2)
        # Nobody waits: the source wants one unit (the due time _grant and
        # _plan leave), unless this cost differs.
        source = self._source
        unit = units is self._unit
        if not unit:
            source.want(units)
        if now < source.due:
            if not unit:
                source.want(self._unit)
            return out
        self._arrive(id, level, units, flow)
        waiter = _new(Waiter, (id, level, self._seq, now, None, units, flow))
        self._seq += 1
        self._queues._pass(level)
        self._charge_spent(waiter, now, settle_later)
        self._ledger.trim()
        self._granted(waiter, now, out)
        if not unit:
            source.want(self._unit)
        return out

    def cancel(self, id: Hashable) -> bool:
        """Withdraw a waiting ``id``; ``True`` if it was waiting, ``False`` if
        not (never pushed, or already granted, cancelled, rejected, expired
        or too long). A cancelled waiter is never granted and costs no permit.

        Cancel takes no time and grants nothing; when the waiter it removes
        was the one the policy had chosen, the next one may fit at once, and
        :meth:`next_tick` then says the machine's time: tick then."""
        if self._leave(id, self._cancelled) is None:
            return False
        if not self._unit_costs:
            self._plan([])  # (the plan was made with it)
        return True

    def tick(self, now: int) -> list[Decision]:
        """Advance to ``now``: expire waiters whose deadline is ``<= now``,
        then grant every permit available at ``now``. (Every operation with
        a ``now`` starts here; the clock starts at the first one, with a full
        bucket.)"""
        last = self._now
        if now.__class__ is not int or last is None or now < last:
            now = self._check_now(now)
            if last is None:
                self._source.start(now)
        self._now = now
        out: list[Decision] = []
        firsts = self._deadlines.firsts
        expired = False
        if firsts and firsts[0] >> SHIFT <= now:
            for waiter in self._deadlines.expire(now, self._queues):
                expired = True
                self._expired[waiter.level] += 1
                out.append(
                    _new(
                        Decision,
                        (waiter.id, _EXPIRED, waiter.level, now, now - waiter.pushed_at),
                    )
                )
        # _grant's own test, hot. Every operation leaves the next grant
        # planned at its time: at the same time with nobody gone, and the
        # planned cost not due, nothing can be granted.
        if (self._ids and now >= self._source.due) or (
            not self._unit_costs and (now != last or expired)
        ):
            self._grant(now, out)
        return out

    def refund(self, id: Hashable, now: int) -> list[Decision]:
        """Hand back, at ``now``, the permit granted to ``id``, unused.

        Ticks to ``now``, then returns the permit's units: the next waiter
        gets them at once, or they are banked (never beyond ``burst``).
        Raises :class:`NotRefundable` unless ``id``'s permit is in flight
        (:attr:`Charge.AT_SPEND`), or was charged within the last
        ``settle_window_ns`` and not refunded, settled, spent or pushed again
        since.
        """
        now = self._check_now(now)
        grant = self._ledger.refundable(id, now)
        if grant is None:
            raise NotRefundable(id)
        out = self.tick(now)
        self._refunded[grant.waiter.level] += 1
        self._reprice(grant, None, now)
        self._grant(now, out)
        self._source.discard()
        return out

    def settle(self, id: Hashable, actual: int | Mapping[str, int], now: int) -> list[Decision]:
        """At ``now``, ``id``'s call turned out to cost ``actual``: a mapping
        from limit names to units (a limit it leaves out keeps the units the
        permit asked for), or, on a machine with one limit, an ``int``.

        Ticks to ``now``, then charges the permit ``actual`` instead of what
        it asked for, exactly as if it had asked for ``actual`` (the later
        charges are replayed): less gives the difference back (the next
        waiter may get it at once), more charges the difference (later
        grants wait for it). A permit still in flight is spent at ``now``,
        for ``actual``. Raises :class:`NotRefundable` unless ``id``'s permit
        is in flight, or was charged within the last ``settle_window_ns``
        and not refunded, settled or pushed again since (spent with
        ``settle_later=True``, or not spent).
        """
        now = self._check_now(now)
        settled = check_actual(actual, list(self._index))
        if isinstance(self._source, Outside):
            raise refuse_outside("id", id, "settle()")
        grant = self._ledger.settleable(id, now)
        if grant is None:
            raise NotRefundable(id)
        out = self.tick(now)
        self._reprice(grant, settled_units(grant.cost, settled), now)
        self._grant(now, out)
        return out

    def spend(self, id: Hashable, now: int, *, settle_later: bool = False) -> list[Decision]:
        """At ``now``, the caller holding ``id``'s permit proceeded: the permit
        is spent and can no longer be refunded.

        Ticks to ``now`` first. Under :attr:`Charge.AT_SPEND` the permit
        counts against the limit from ``now`` (it was in flight until then).
        Under :attr:`Charge.AT_GRANT` it changes no pacing. With
        ``settle_later``, the permit can still be settled (:meth:`settle`)
        within ``settle_window_ns`` of its charge; without, the machine
        forgets it, so that it remembers only the grants that may still be
        refunded or settled and those made after the oldest of them. An id
        whose permit is not held (never granted, refunded, settled or spent
        already, pushed again since, or outside ``settle_window_ns``) changes
        nothing but the tick.
        """
        last = self._now
        if now.__class__ is not int or last is None or now < last:
            now = self._check_now(now)
        if not isinstance(settle_later, bool):
            raise PermitTypeError("settle_later", settle_later, "a bool")
        ledger = self._ledger
        grant = ledger.get(id)  # (an unhashable id is refused before the tick)
        out = self.tick(now)
        if out:  # held after the tick: one it granted too (and none it forgot)
            grant = ledger.get(id)
        if grant is not None and grant.before is None:
            # In flight until now (so not spent yet): charged now, as its
            # caller proceeds.
            ledger.forget(id)
            self._flying -= 1
            self._charge_spent(grant.waiter, now, settle_later, held=True)
        elif grant is not None and not ledger.is_spent(id):
            if settle_later:
                ledger.add_spent(grant)
            else:
                ledger.forget(id)
        ledger.trim()
        self._grant(now, out)
        return out

    def set_limit(
        self,
        now: int,
        *,
        rate: int | float | Fraction | Decimal | None = None,
        burst: int | None = None,
        limit: str | None = None,
    ) -> list[Decision]:
        """From ``now`` on, ``limit`` (the only one, if the machine has one)
        has ``rate`` and ``burst`` (either left as it is when not given).

        Ticks to ``now`` first, under the old limit. The units in the bucket
        carry over (never more than the new burst), so pacing continues from
        where it stands; the time of the next unit is rounded up to a whole
        nanosecond. Waiters re-plan at once: a raised rate grants at once
        what is now due. A burst below the cost of a waiter is refused,
        unless its deadline is ``now`` or earlier (the tick expires it). The
        refusal is judged before the tick, so that a refused call changes
        nothing: a waiter the tick would grant still refuses it (tick to
        ``now`` first to let it go).
        """
        now = self._check_now(now)
        index, name = self._limit_named(limit)
        check_change(rate, burst)
        old = self._limits[name]
        new_rate = old.rate if rate is None else check_rate(rate)
        new_burst = old.burst if burst is None else check_int("burst", burst, 1)
        above = [
            w.cost[index]
            for w in self.waiting_above(new_burst, limit=name)
            if w.deadline is None or w.deadline > now  # (the tick expires the others)
        ]
        if above:
            largest = max(above)
            raise PermitValueError(
                "burst",
                burst,
                f"a waiter asks for {largest} units of {name!r}; it could never fit: "
                f"give a burst of at least {largest}, or cancel it first",
            )
        out = self.tick(now)
        self._limits = {**self._limits, name: Limit(new_rate, new_burst)}
        self._asks.clear()  # read again: checked against the bursts as they stand
        source = self._source
        if isinstance(source, Outside):
            source.limits[index] = (*interval_of(new_rate), new_burst)
        else:
            self._ledger.log(source.rerate(now, new_rate, new_burst, index))
        self._grant(now, out)
        return out

    def pause_until(self, until: int, now: int) -> list[Decision]:
        """Grant nothing before ``until`` (ns), at any level: the upstream
        said to wait (a 429 with ``Retry-After``). Ticks to ``now`` first;
        from ``until`` on, the backlog resumes in policy order at the limit.
        A later pause never shortens an earlier one."""
        now = self._check_now(now)
        until = check_int("until", until)
        if until < now:
            raise PermitValueError("until", until, f"is in the past (now is {now})")
        if isinstance(self._source, Outside):
            raise refuse_outside("until", until, "pause_until()")
        out = self.tick(now)
        self._source.pause(until)
        self._count_pause(until, now)
        return out

    def paused(self, until: int, now: int) -> None:
        """The source outside grants nothing before ``until`` (a limit shared
        through Redis, paused there at ``now``): the statistics count the
        pause as :meth:`pause_until` counts its own (P46). Changes nothing
        else: no time passes, nothing is granted. Only for a ``supplied``
        machine (a paced one pauses itself: :meth:`pause_until`). Raises
        :class:`TimeWentBackwards` for a ``now`` before the machine's time or
        that of an earlier pause (the pauses are counted as they come)."""
        now = self._check_now(now)
        until = check_int("until", until)
        if until < now:
            raise PermitValueError("until", until, f"is in the past (now is {now})")
        if not isinstance(self._source, Outside):
            raise refuse_paced("supplied", False, "paused()")
        if now < self._paused_at:
            raise TimeWentBackwards(now, self._paused_at)
        self._paused_at = now
        self._count_pause(until, now)

    def _count_pause(self, until: int, now: int) -> None:
        """A pause at ``now`` until ``until``, counted if it lengthens the
        pause in force (P46)."""
        end = self._paused_until
        if until > now and until > end:
            self._pauses += 1
            self._paused_ns += until - max(now, end)
            self._paused_until = until

    def adopt(
        self, remaining: int, reset: int, now: int, *, limit: str | None = None
    ) -> list[Decision]:
        """The upstream says ``remaining`` units of ``limit`` are left until
        ``reset`` (ns; the ``x-ratelimit-remaining-*`` and ``-reset`` headers,
        or IETF ``RateLimit``): from ``now`` until ``reset`` the bucket holds
        no more than that. It only ever lowers what is available: an
        upstream that says more is left than the bucket could grant by
        ``reset`` changes nothing, and one that says less makes nothing
        available before ``reset - remaining * interval`` (a ``reset`` far
        off keeps what is left for the end of its window). Ticks to ``now``
        first."""
        source, now, remaining, reset, index = self._word(remaining, reset, now, limit, "adopt()")
        out = self.tick(now)
        self._ledger.log(source.adopt(now, remaining, reset, index))
        return out

    def quota(
        self, remaining: int, reset: int, now: int, *, limit: str | None = None
    ) -> list[Decision]:
        """The upstream says ``remaining`` units of ``limit`` are left until
        ``reset`` (ns), as a count (the IETF ``RateLimit`` field's quota):
        until ``reset``, at most ``remaining`` more units of it are charged,
        and a cost the quota left cannot cover waits for ``reset``; within
        it, the bucket paces as before (unlike :meth:`adopt`, which keeps
        what is left for the end of the window). Each quota holds until its
        own reset, beside the others in force (an upstream's several
        policies, or an old window's word and a new one's). It never raises
        what is available. Ticks to ``now`` first."""
        source, now, remaining, reset, index = self._word(remaining, reset, now, limit, "quota()")
        out = self.tick(now)
        self._ledger.log(source.limit_quota(now, remaining, reset, index))
        return out

    def _word(
        self, remaining: object, reset: object, now: object, limit: str | None, what: str
    ) -> tuple[Bucket | Buckets, int, int, int, int]:
        """The upstream's word (``what``: adopt or quota), checked, changing
        nothing: the machine's buckets, the time, ``remaining``, ``reset``
        and the limit's index."""
        now = self._check_now(now)
        remaining = check_int("remaining", remaining, 0)
        reset = check_int("reset", reset)
        if reset < now:
            raise PermitValueError("reset", reset, f"is in the past (now is {now})")
        index, _ = self._limit_named(limit)
        source = self._source
        if isinstance(source, Outside):
            raise refuse_outside("remaining", remaining, what)
        return source, now, remaining, reset, index

    def supply(self, now: int, owed: int | None = None) -> list[Decision]:
        """A permit from outside, at ``now``: tick to ``now``, then grant it to
        the waiter the policy chooses, or, with ``owed``, to the head of that
        level while it has waiters (the source decided whose turn it is: a
        shared limit whose shares count every process's levels). Returns the
        decisions made (any expiries, then the grant); without a grant if
        nobody waits, and the permit is then not kept. Only for a
        ``supplied`` machine.
        """
        now = self._check_now(now)
        if owed is not None:
            owed = self._check_level(owed, "owed")
        source = self._source
        if not isinstance(source, Outside):
            raise refuse_paced("supplied", False, "supply()")
        out = self.tick(now)  # expiries only: no permit is at hand yet
        source.offer(now)
        self._grant(now, out, owed)
        source.discard()
        return out

    def too_long(self, id: Hashable, wait_ns: int, max_wait_ns: int) -> list[Decision]:
        """The source outside says the waiting ``id`` waits at least
        ``wait_ns`` in all (from its push; a limit shared through Redis
        answered "not before" for it): if that exceeds ``max_wait_ns``, the
        rule of :meth:`push` (``>``), it leaves ungranted as too long, a
        :attr:`State.TOO_LONG` decision counted at its level's ``too_long``
        (not ``cancelled``); otherwise nothing changes. Returns that
        decision, or nothing (``id`` not waiting, or its wait fits). Only
        for a ``supplied`` machine (a paced one compares at the push)."""
        check_hashable("id", id)  # (whatever the wait: not only where it leaves)
        wait_ns = check_int("wait_ns", wait_ns, 0)
        max_wait_ns = check_int("max_wait_ns", max_wait_ns, 0)
        if not isinstance(self._source, Outside):
            raise refuse_paced("supplied", False, "too_long()")
        if wait_ns <= max_wait_ns:
            return []
        waiter = self._leave(id, self._too_long)
        if waiter is None:
            return []
        now = self._now if self._now is not None else waiter.pushed_at
        out = [_new(Decision, (id, _TOO_LONG, waiter.level, now, 0))]
        if not self._unit_costs:
            self._plan(out)  # (a policy that fails says so, this decision made)
        return out

    def settled(
        self, level: int, cost: int | Mapping[str, int], actual: int | Mapping[str, int]
    ) -> None:
        """A permit granted at ``level`` for ``cost`` was settled at ``actual``
        (as :meth:`settle` reads it: a limit it leaves out keeps its ``cost``)
        by the source outside, which charges or gives back the difference
        (a limit shared through Redis): the statistics count ``actual``
        units for it from now on (``units_granted``, P20). Changes nothing
        else: no permit is at hand, none is granted. Only for a
        ``supplied`` machine (a paced one settles its own: :meth:`settle`)."""
        level = self._check_level(level)
        asked = self._cost("cost", cost)
        units = settled_units(asked, check_actual(actual, list(self._index)))
        if not isinstance(self._source, Outside):
            raise refuse_paced("supplied", False, "settled()")
        self._check_granted("settled", level, cost, asked)
        granted = self._units[level]
        for i, (before, after) in enumerate(zip(asked, units, strict=True)):
            granted[i] += after - before

    def refunded(self, level: int, cost: int | Mapping[str, int]) -> None:
        """A permit granted at ``level`` for ``cost`` went back unused to the
        source outside (a limit shared through Redis: its caller left before
        it proceeded, and no waiter here took it): the statistics count it
        refunded, its units no longer granted, as :meth:`refund` counts one
        (P20). Changes nothing else: no permit is at hand, none is granted.
        Only for a ``supplied`` machine (a paced one banks its own:
        :meth:`refund`)."""
        level = self._check_level(level)
        asked = self._cost("cost", cost)
        if not isinstance(self._source, Outside):
            raise refuse_paced("supplied", False, "refunded()")
        self._check_granted("refunded", level, cost, asked)
        self._refunded[level] += 1
        granted = self._units[level]
        for i, n in enumerate(asked):
            granted[i] -= n

    def _check_granted(
        self, call: str, level: int, cost: int | Mapping[str, int], asked: tuple[int, ...]
    ) -> None:
        """Refuse a ``call`` (``settled``, ``refunded``) of the source outside
        that tells of a permit ``level`` was never granted: one more than it
        holds not given back, or more units of a limit than it was granted.
        The statistics went negative on it."""
        held = self._granted_at(level) - self._refunded[level]
        granted = self._units_granted(level)
        if held > 0 and all(n <= g for n, g in zip(asked, granted, strict=True)):
            return
        units = ", ".join(f"{name}={g}" for name, g in zip(self._limits, granted, strict=True))
        raise PermitValueError(
            "cost",
            cost,
            f"is more than level {level} holds granted ({held} permits not given back, "
            f"of {units}): {call}() tells of a permit this machine granted there",
        )

    # -- the steps ----------------------------------------------------------

    def _arrival(
        self,
        id: Hashable,
        level: int,
        now: int,
        deadline: int | None,
        cost: int | Mapping[str, int],
        flow: Hashable,
    ) -> tuple[int, int, int | None, tuple[int, ...], int]:
        """A newcomer's arguments, checked (changing nothing but the costs
        read lately, kept to be found again): its level,
        ``now``, deadline, units and flow's weight. Raises as :meth:`push`
        documents."""
        if level.__class__ is not int or not 0 <= level < self._levels:
            level = self._check_level(level)
        last = self._now
        if now.__class__ is not int or last is None or now < last:
            now = self._check_now(now)
        if deadline is not None:
            deadline = check_int("deadline", deadline)
        units = self._unit if cost.__class__ is int and cost == 1 else self._asked(cost)
        weight = 1
        if self._flow_weights is not None:
            weight = self._weight(flow)
        elif flow is not None and flow.__class__ is not str:  # (a str hashes)
            _check_flow(flow)
        try:
            waiting = id in self._ids
        except Exception:
            check_hashable("id", id)
            raise
        if waiting or (not self._at_grant and self._ledger.held and self._in_flight(id)):
            raise DuplicateId(id)
        return level, now, deadline, units, weight

    def _arrive(self, id: Hashable, level: int, units: tuple[int, ...], flow: Hashable) -> None:
        """A newcomer, checked, is counted at its level, and what it asks for
        noted."""
        if units is not self._unit and self._unit_costs and units != self._unit:
            self._unit_costs = False
            self._queues._sum_costs()
            # the grants so far took one unit of every limit each
            for other, granted in enumerate(self._units):
                granted[:] = [n + self._granted_at(other) for n in granted]
        self._count(id, level)
        if flow is not None:
            self._flowed = True

    def _count(self, id: Hashable, level: int) -> None:
        """A push of ``id``, checked, is counted at its level: a new life."""
        self._pushed[level] += 1
        if id in self._ledger.held:
            self._ledger.forget(id)  # a new life: the old grant is no longer refundable

    def _check_level(self, level: object, argument: str = "level") -> int:
        """``level``, checked: a level of the policy (``argument`` names it)."""
        if level.__class__ is int and 0 <= level < self._levels:
            return level
        level = check_int(argument, level)
        if not 0 <= level < self._levels:
            raise PermitValueError(argument, level, level_range(self._levels))
        return level

    def _check_now(self, now: object) -> int:
        checked = now if now.__class__ is int else check_int("now", now)
        last = self._now
        if last is not None and checked < last:
            raise TimeWentBackwards(checked, last)
        return checked

    def _cost(self, argument: str, value: object) -> tuple[int, ...]:
        """A cost as units per limit, each ``>= 0``."""
        if value.__class__ is dict or isinstance(value, Mapping):
            units = [0] * len(self._unit)
            for name, n in value.items():
                if name not in self._index:
                    raise no_limit(argument, value, name, list(self._index))
                units[self._index[name]] = check_units(argument, name, n)
            return tuple(units)
        if isinstance(value, bool) or not isinstance(value, int):
            raise PermitTypeError(argument, value, "an int, or a mapping of limit names to ints")
        return (check_int(argument, value, 0),) * len(self._unit)

    def _asked(self, cost: object) -> tuple[int, ...]:
        """A push's cost: some units, none beyond a limit's burst. A dict
        asked for lately is read and checked once: its units are kept."""
        items = _int_items(cost)
        if items is not None:
            units = self._asks.get(items)
            if units is not None:
                return units
        if isinstance(cost, int) and not isinstance(cost, bool) and cost < 0:
            # (refused as 0 is, by the one rule, not as a negative count)
            raise PermitValueError("cost", cost, NO_UNIT)
        units = self._within_bursts(cost)
        if not any(units):
            raise PermitValueError("cost", cost, NO_UNIT)
        costs = self._costs
        if len(costs) >= COSTS_SHARED:
            costs.clear()
            self._asks.clear()
        units = costs.setdefault(units, units)
        if items is not None:
            self._asks[items] = units
        return units

    def _within_bursts(self, cost: object) -> tuple[int, ...]:
        """A cost as units per limit, none beyond a limit's burst (such a
        cost could never be granted)."""
        units = self._cost("cost", cost)
        for (name, limit), n in zip(self._limits.items(), units, strict=True):
            if n > limit.burst:
                if isinstance(cost, Mapping):  # named by its entry, as a bad entry is
                    raise PermitValueError(
                        f"cost[{name!r}]", n, over_burst(self._limits, name, entry=True)
                    )
                raise PermitValueError("cost", cost, over_burst(self._limits, name))
        return units

    def _units_granted(self, level: int) -> tuple[int, ...]:
        """Units granted at ``level`` per limit, net of refunds and settles:
        while every cost is one unit, one per grant, beside the corrections."""
        units = self._units[level]
        if not self._unit_costs:
            return tuple(units)
        return tuple(n + self._granted_at(level) for n in units)

    def _waits(self, level: int) -> dict[str, int | None]:
        """``level``'s statistics of waits (each ``None`` with keep_waits=False)."""
        hist = None if self._hists is None else self._hists[level]
        return {
            "wait_p50_ns": None if hist is None else hist.quantile(0.5),
            "wait_p99_ns": None if hist is None else hist.quantile(0.99),
            "wait_max_ns": None if hist is None else hist.max,
            "wait_total_ns": None if hist is None else hist.total,
        }

    def _granted_at(self, level: int) -> int:
        """Permits granted at ``level``, refunded ones included: its
        histogram's count, or every push that did not end otherwise (P3:
        between operations, not while a push is being counted)."""
        if self._hists is not None:
            return self._hists[level].count
        return (
            self._pushed[level]
            - self._queues.depths[level]
            - self._cancelled[level]
            - self._rejected[level]
            - self._expired[level]
            - self._too_long[level]
        )

    def _weight(self, flow: Hashable) -> int:
        """``flow``'s weight, from ``flow_weights`` (1 if it names none)."""
        _check_flow(flow)
        weights = self._flow_weights
        if weights is None:
            return 1
        if isinstance(weights, Mapping):
            return _flow_weight(flow, weights.get(flow, 1))
        try:
            weight = weights(flow)
        except Exception as error:  # the user's function: bad input, not a broken machine
            raise PermitValueError(
                "flow_weights", weights, f"raised {error!r} for flow {shown(flow)}"
            ) from error
        return _flow_weight(flow, weight, "({})")

    def _limit_named(self, limit: str | None) -> tuple[int, str]:
        if limit is None:
            if len(self._limits) > 1:
                raise PermitValueError(
                    "limit", limit, f"name one of the machine's limits ({list(self._index)})"
                )
            return 0, next(iter(self._limits))
        if not isinstance(limit, str):
            raise PermitTypeError("limit", limit, "a limit's name (str)")
        if limit not in self._index:
            raise PermitValueError("limit", limit, f"is not one of the limits {list(self._index)}")
        return self._index[limit], limit

    def _grant(self, now: int, out: list[Decision], owed: int | None = None) -> None:
        """Grant while anyone waits and the head of the level the policy
        chooses (first ``owed``, while it has waiters) fits: nothing is
        granted past it while its units accrue."""
        ids = self._ids
        source = self._source
        varied = not self._unit_costs
        if not ids:
            if varied:
                source.want(self._unit)  # nobody waits: the due time of one unit
            return
        if not varied and now < source.due:
            return
        queues = self._queues
        ledger = self._ledger
        depths = queues.depths
        while True:
            if owed is not None and depths[owed]:
                level, owed = owed, None
            else:
                try:
                    level = self._policy.choose(queues, now)
                except Exception as error:
                    raise _raised(self._policy, "choose", error, out) from error
            if level.__class__ is not int or not 0 <= level < self._levels or not depths[level]:
                level = self._chosen(level, out)  # (an IntEnum), or a PolicyError
            if varied:
                source.want(queues.head(level).cost)
                if now < source.due:
                    return
            waiter = queues._take_head(level)
            cost = waiter.cost
            if not self._at_grant:
                self._flying += 1
                source.hold(cost)  # in flight: charged when spent
                ledger.add(_new(Grant, (waiter, now, cost, None)))
            elif ledger.window is not None:  # a charged grant is held
                ledger.add(_new(Grant, (waiter, now, cost, source.charge(now, cost))))
            else:
                source.charge(now, cost, False)  # no mark: nothing will replay it
            if waiter.deadline is not None:
                self._deadlines.remove(waiter)
            self._granted(waiter, now, out)
            if not ids:
                if varied:
                    source.want(self._unit)
                return
            if not varied and now < source.due:
                return

    def _granted(self, waiter: Waiter, now: int, out: list[Decision]) -> None:
        """``waiter``'s grant at ``now`` (out of its queue, and charged or in
        flight) is counted and decided: the policy's hook, the statistics,
        the decision."""
        # (unpacked at once: a named tuple's field read by name costs more)
        id, level, _, pushed_at, _, cost, flow = waiter
        wait = now - pushed_at
        hists = self._hists
        if hists is not None:  # (none with keep_waits=False)
            hists[level]._add(wait)
            if flow is not None:
                self._busiest[level].add(flow, cost[self._queues.flow_limit])
        if not self._unit_costs:  # (at unit cost, the grants counted are the units)
            granted = self._units[level]
            for i, n in enumerate(cost):
                granted[i] += n
        out.append(_new(Decision, (id, _GRANTED, level, now, wait)))
        if self._record is not None:
            # told last: a hook that raises leaves this grant counted and decided
            try:
                self._record(self._queues, waiter)
            except Exception as error:
                raise _raised(self._policy, "record", error, out) from error

    def _charge_spent(
        self, waiter: Waiter, now: int, settle_later: bool, held: bool = False
    ) -> None:
        """``waiter``'s permit is charged its cost at ``now`` as its caller
        proceeds (one in flight was never settled: a settle spends it), and
        no longer ``held`` in flight if it was: logged, and kept to be
        settled if ``settle_later``."""
        cost = waiter.cost
        ledger = self._ledger
        charge = self._source.spend if held else self._source.charge
        if (not settle_later and not ledger.held) or ledger.window is None:
            # No grant is held (or none charged ever is), so no refund or
            # settle will replay this charge: nothing to log, no mark to keep.
            charge(now, cost, False)  # no mark
            return
        charged = _new(Grant, (waiter, now, cost, charge(now, cost)))
        if settle_later:
            ledger.add_spent(charged)
        else:
            ledger.log(charged)

    def _plan(self, out: list[Decision]) -> None:
        """A waiter left ungranted, maybe the one the policy had chosen, with
        costs that differ (with every cost alike, the plan stands): the due
        time is that of the cost of its next choice. Grants nothing. A
        policy that fails to choose raises (carrying ``out``, the decisions
        made before it), and leaves the due time at the machine's time: the
        next tick asks it again."""
        source = self._source
        now = self._now
        if self._ids and now is not None:
            try:
                level = self._choose(now, out)
            except PolicyError:
                source.unplan()
                raise
            source.want(self._queues.head(level).cost)
        else:
            source.want(self._unit)

    def _in_flight(self, id: Hashable) -> bool:
        """Whether ``id`` (hashable: checked) holds a permit in flight."""
        grant = self._ledger.held.get(id)
        return grant is not None and grant.before is None

    def _leave(self, id: Hashable, counts: list[int]) -> Waiter | None:
        """The waiting ``id`` leaves ungranted, counted in ``counts`` at its
        level (cancelled, too long); ``None`` if it was not waiting. Raises
        for an unhashable ``id``. (The caller then plans the next choice.)"""
        try:
            waiter = self._queues.get(id)
        except Exception:
            check_hashable("id", id)
            raise
        if waiter is None:
            return None
        self._withdraw(waiter)
        counts[waiter.level] += 1
        return waiter

    def _withdraw(self, waiter: Waiter) -> None:
        """``waiter`` leaves its queue ungranted."""
        self._queues._remove(waiter)
        if waiter.deadline is not None:
            self._deadlines.remove(waiter)

    def _reprice(self, grant: Grant, units: tuple[int, ...] | None, now: int) -> None:
        """``grant`` costs ``units`` after all (``None``: refunded, nothing),
        and can no longer be refunded or settled."""
        ledger = self._ledger
        source = self._source
        ledger.forget(grant.waiter.id)
        granted = self._units[grant.waiter.level]
        for i, (before, after) in enumerate(zip(grant.cost, units or self._none, strict=True)):
            granted[i] += after - before
        if grant.before is None:
            # In flight: it only held a place in the bucket.
            self._flying -= 1
            source.release(grant.cost)
            if units is not None:
                ledger.log(_new(Grant, (grant.waiter, now, units, source.charge(now, units))))
                ledger.trim()
            return
        # Charged: the state becomes what it would be had the grant cost
        # `units` (or never happened), what came after replayed (P1, P5).
        later = ledger.unlog(grant)
        records = later if units is None else [grant._replace(cost=units), *later]
        ledger.relog(records, source.replay(grant.before, records, now))  # type: ignore[arg-type]
        ledger.trim()

    def _choose(self, now: int, out: list[Decision]) -> int:
        """The policy's choice of a level with waiters, checked (as the
        grant loop checks it)."""
        try:
            level = self._policy.choose(self._queues, now)
        except Exception as error:
            raise _raised(self._policy, "choose", error, out) from error
        return self._chosen(level, out)

    def _chosen(self, level: object, out: list[Decision]) -> int:
        """The level the policy chose, checked: an ``int`` (an ``IntEnum``
        too, as a push's level may be) naming a level with waiters;
        otherwise a :class:`PolicyError` carrying the decisions ``out``
        made before it."""
        if (
            isinstance(level, int)
            and not isinstance(level, bool)
            and 0 <= level < self._levels
            and self._queues.depths[level]
        ):
            return int(level)
        raise PolicyError(
            f"{self._policy!r}.choose() returned {shown(level)}, not a level "
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
        self._source.check()
        if self._unit_costs != queues.unit_costs:  # (kept beside them for the hot paths)
            raise AssertionError("invariant broken: unit_costs is not the queues' own")
        flying = [grant for grant in self._ledger if grant.before is None]
        if len(flying) != self._flying:
            raise AssertionError("invariant broken: in flight count != grants in flight")
        if self._at_grant and flying:
            raise AssertionError("invariant broken: in flight while charged at grant")
        source = self._source
        for bucket in [source] if isinstance(source, Bucket) else getattr(source, "buckets", []):
            if bucket.held != sum(grant.cost[bucket.index] for grant in flying):
                raise AssertionError("invariant broken: units held != costs in flight")
        now = self._now
        if now is not None and queues and self._unit_costs and now >= source.due:
            raise AssertionError("invariant broken: a permit is available while someone waits")


def _raised(policy: object, hook: str, error: Exception, out: list[Decision]) -> PolicyError:
    """The error for a policy whose ``hook`` raised ``error`` (a bug in it):
    a :class:`PolicyError` carrying the decisions ``out`` made before it."""
    return PolicyError(f"{policy!r}.{hook}() raised {error!r}", out)


def _no_histograms(
    operation: str, argument: str, value: object, kept: str = "the waits' histograms"
) -> PermitValueError:
    """The error for ``operation``, which reads what a machine made with
    ``keep_waits=False`` does not keep (``kept``: its waits' histograms, by
    default)."""
    return PermitValueError(
        argument,
        value,
        f"{operation}() reads {kept}, which this machine does not keep: "
        "make it with keep_waits=True (the default)",
    )


def _int_items(cost: object) -> tuple[object, ...] | None:
    """A cost's names then units if it is a dict of ints, to find it by
    (one flat tuple: the smallest key); else ``None`` (not an int subclass
    either: ``True == 1``, but ``True`` is no cost)."""
    if type(cost) is not dict:
        return None
    units = tuple(cost.values())
    for n in units:
        if n.__class__ is not int:
            return None
    return (*cost, *units)


def _check_flow(flow: object) -> None:
    check_hashable("flow", flow, "a hashable value (a tenant's name, a key)")


def _flow_weight(flow: object, weight: object, given: str = "[{}]") -> int:
    """``flow``'s ``weight``, checked; refused naming the entry that gave it
    (``given`` formats the flow: ``flow_weights['acme']`` for a mapping's,
    ``flow_weights('acme')`` for a function's), not ``flow_weights=0`` as
    if the whole argument were 0."""
    if isinstance(weight, bool) or not isinstance(weight, int):
        raise PermitTypeError("flow_weights" + given.format(shown(flow)), weight, "an int weight")
    if not 1 <= weight <= MAX_WEIGHT:
        raise PermitValueError(
            "flow_weights" + given.format(shown(flow)),
            weight,
            f"must be at most {MAX_WEIGHT}"
            if weight > 0
            else f"must be from 1 to {MAX_WEIGHT} (to serve the flow less, weigh the others more)",
        )
    return int(weight)


def _max_waiting(value: object, levels: int) -> tuple[int | None, ...] | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return (check_int("max_waiting", value, 0),) * levels
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise PermitTypeError("max_waiting", value, "an int, a sequence or None")
    if len(value) != levels:
        raise PermitValueError("max_waiting", value, f"needs one entry per level ({levels})")
    limits: list[int | None] = []
    for level, limit in enumerate(value):  # a bad one named by its entry: max_waiting[1]=-1
        if limit is None:
            limits.append(None)
        elif isinstance(limit, bool) or not isinstance(limit, int):
            raise PermitTypeError(f"max_waiting[{level}]", limit, "an int >= 0, or None (no bound)")
        else:
            limits.append(check_int(f"max_waiting[{level}]", limit, 0))
    return tuple(limits)


class Snapshot(NamedTuple):
    """What :meth:`Machine.snapshot` returns: the machine's state as values."""

    now: int | None
    #: The next permit's due time (ns), or a time no clock reaches.
    due: int
    #: Per limit, the bucket's ``(anchor, k, P, Q, burst - 1, held, until,
    #: quotas)``: ``TAT = anchor + k * P / Q``, and the quotas in force as
    #: ``(left, until)`` pairs; ``None`` for a supplied machine.
    pacing: tuple[tuple[object, ...], ...] | None
    in_flight: int
    #: The push counter.
    seq: int
    #: Permits granted so far, all levels.
    granted: int
    #: A copy of the policy's own state (``Queues.state``), or ``None``.
    policy_state: object
    #: Per level, its flows' virtual times (*Flows* in SPEC.md).
    flows: tuple[tuple[object, ...], ...]
    #: Whether a push ever named a flow (then :meth:`Machine.min_wait`
    #: counts only a newcomer's own level as surely going first).
    flowed: bool
    waiting: tuple[tuple[Waiter, ...], ...]
    #: The grants that may still be refunded or spent, oldest first.
    grants: tuple[Grant, ...]
    #: The ids of those spent to be settled later, oldest first: no longer
    #: refundable.
    spent: tuple[Hashable, ...]
    #: The log a refund replays: grants, and changes of a limit.
    logged: tuple[object, ...]
    #: ``(deadline, id)`` of every deadline entry, live or dead.
    deadlines: tuple[tuple[int, Hashable], ...]
    statistics: Statistics
    #: The latest ``now`` a supplied machine was told a pause at, and the
    #: end of the pauses counted (P46).
    paused: tuple[int, int]
