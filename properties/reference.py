"""A naive reference model of :class:`permits.core.Machine`: obviously right, slow.

It shares no code with the core. Waiters are a plain list in push order and
every choice is a scan over it; pacing is, per limit, a literal token bucket
whose token count is an exact :class:`~fractions.Fraction`, refilled by
``elapsed * rate / 10**9`` and capped at ``burst``, and recomputed from the
first operation over every event (charge, change of a limit, the upstream's
word) each time it is read: a refund deletes its charge, a settle rewrites
its cost. A permit charged when spent (``Charge.AT_SPEND``) is *in flight*
until then: its units stay in the bucket, counted against what a grant may
take. The next grant goes to the waiter the policy chooses, once every limit
holds its cost: nothing is granted past it. Each policy's rule is
written as the SPEC states it (aging literally as
``level - (now - pushed_at) / after``). Where the core and this model
differ, that is the bug report.

The user's policy of ``configs.RoundRobin`` is written out here as its
docstring states it. With ``follow`` set (``mutants.py``, to see which
properties catch a bug on their own), the model grants whoever the core
granted, as long as the bucket holds its cost.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

NS = 10**9
#: SPEC's bound on a level's virtual-time scale (Flows).
MAX_SCALE = 2**64

#: (id, state name, level, at, waited): the model's form of a Decision.
Row = tuple[Hashable, str, int, int, int]


@dataclass
class RefWaiter:
    id: Hashable
    level: int
    seq: int
    pushed_at: int
    deadline: int | None
    cost: tuple[int, ...] = (1,)
    flow: Hashable = None


@dataclass
class FlowTime:
    """A waiting flow's place in its level's virtual time."""

    #: when its head's service starts
    start: Fraction
    #: the finish of its latest grant (where it joined, before one)
    finish: Fraction
    weight: int


@dataclass
class Charge:
    """Units charged to every limit at ``at``; ``cost`` is rewritten by a settle."""

    at: int
    cost: tuple[int, ...]


@dataclass
class Held:
    """A grant that may still be refunded or settled."""

    level: int
    #: its charge (None while in flight)
    charge: Charge | None
    cost: tuple[int, ...]
    spent: bool = False


@dataclass
class RefLevel:
    pushed: int = 0
    granted: int = 0
    cancelled: int = 0
    refunded: int = 0
    rejected: int = 0
    expired: int = 0
    too_long: int = 0
    waits: list[int] = field(default_factory=list)
    #: units granted per limit, net of refunds and settles
    units: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class PolicySpec:
    """A policy as the model knows it: ``kind`` is fifo, strict, shares,
    aging, or ``user`` (a policy the model cannot predict)."""

    kind: str
    levels: int
    weights: tuple[int, ...] = ()
    after: int = 0
    #: for shares: the index of the limit whose units are shared
    shared: int = 0


def nearest_rank(values: Sequence[int], q: float) -> int | None:
    """The exact nearest-rank ``q``-quantile, as SPEC.md defines it."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


#: SPEC P52: the most quotas a limit keeps in force (the core's MAX_QUOTAS).
MAX_QUOTAS = 16


def quotas_kept(counts: list[list[int]], remaining: int, reset: int, now: int) -> list[list[int]]:
    """The quotas ``[left, until]`` in force after a new one at ``now``,
    written from SPEC P52: those that last past ``now`` and the new one,
    less each that another makes redundant (no more left, lasting no
    shorter; of equal ones, the first kept); while more than ``MAX_QUOTAS``,
    the two that end first become one, the lesser left until the later end."""
    alive = [c for c in counts if c[1] > now] + ([[remaining, reset]] if reset > now else [])
    kept = [
        c
        for j, c in enumerate(alive)
        if not any(
            o[0] <= c[0] and o[1] >= c[1] and (o != c or k < j)
            for k, o in enumerate(alive)
            if k != j
        )
    ]
    while len(kept) > MAX_QUOTAS:
        first, second = sorted(kept, key=lambda c: c[1])[:2]
        kept = [c for c in kept if c is not first and c is not second]
        kept.append([min(first[0], second[0]), max(first[1], second[1])])
    return kept


class Reference:
    def __init__(
        self,
        policy: PolicySpec,
        limits: Sequence[tuple[Fraction, int]],
        max_waiting: Sequence[int | None] | None,
        settle_window: int | None,
        at_grant: bool = True,
        flow_weights: dict[Hashable, int] | None = None,
        max_waiting_per_flow: int | None = None,
        flow_limit: int = 0,
    ) -> None:
        self.policy = policy
        self.flow_weights = flow_weights or {}
        self.max_waiting_per_flow = max_waiting_per_flow
        self.flow_limit = flow_limit
        #: per level, the finish of its latest grant; per (level, flow) with waiters, its time
        self.clock = [Fraction(0)] * policy.levels
        #: per level, the lcm of the weights that waited in it since it was
        #: last empty, while that is at most MAX_SCALE (then it stays)
        self.scale = [1] * policy.levels
        self.flow_times: dict[tuple[int, Hashable], FlowTime] = {}
        #: whether a push ever named a flow
        self.flowed = False
        #: the limits as first given: (rate, burst) each
        self.initial = list(limits)
        #: and as they stand now
        self.limits = list(limits)
        self.max_waiting = max_waiting
        self.settle_window = settle_window
        self.at_grant = at_grant
        self.first: int | None = None
        self.last: int | None = None
        #: every charge not refunded and every change of a limit, in order:
        #: Charge, ("rerate", at, limit, rate, burst), ("adopt", at, limit, remaining, reset)
        self.events: list[Any] = []
        #: per limit, where its last replay of the events stopped (tokens):
        #: (first, the events replayed as values, limits, tokens, then)
        self.replays: dict[
            int, tuple[int, list[Any], list[tuple[Fraction, int]], Fraction, int]
        ] = {}
        #: grants that may still be refunded or settled, by id
        self.held: dict[Hashable, Held] = {}
        self.paused_until: int | None = None
        #: P46: the pauses that lengthened the pause, and every pause's span
        self.pauses = 0
        self.pause_spans: list[tuple[int, int]] = []
        self.waiting: list[RefWaiter] = []
        self.seq = 0
        self.total_granted = 0
        #: shares: slots dealt so far, and each level's units dealt and not used
        self.dealt = 0
        self.credits = [0] * policy.levels
        self.stats = [RefLevel() for _ in range(policy.levels)]
        #: Grant whoever the core granted (see the module docstring).
        self.follow = False
        self.followed: list[Hashable] = []

    @property
    def unit(self) -> tuple[int, ...]:
        return (1,) * len(self.limits)

    # -- the policies, as SPEC.md states them --------------------------------

    def cycle(self) -> list[int]:
        slots = []
        for level, weight in enumerate(self.policy.weights):
            for j in range(1, weight + 1):
                slots.append((Fraction(j, weight), level))
        return [level for _, level in sorted(slots)]

    def chosen(self, now: int) -> RefWaiter | None:
        """The waiter the policy gives the next permit to."""
        kind = self.policy.kind
        waiting = self.waiting
        if not waiting:
            return None
        if self.follow:
            want = self.followed[0] if self.followed else None
            return next((w for w in waiting if w.id == want), None)
        heads = self.heads()
        # FIFO and aging rank the levels by their waiters, whichever of them
        # the level's flows serve next: the level of the first waiter in
        # that rank serves its head.
        if kind == "fifo":
            return heads[min(waiting, key=lambda w: w.seq).level]
        if kind == "strict":
            return heads[min(heads)]
        if kind == "aging":
            after = self.policy.after
            return heads[
                min(
                    waiting, key=lambda w: (w.level - Fraction(now - w.pushed_at, after), w.seq)
                ).level
            ]
        if kind == "shares":
            return self.deal()[0]
        # the user's RoundRobin: the levels take turns, skipping empty ones
        levels = self.policy.levels
        for step in range(levels):
            level = (self.total_granted + step) % levels
            if level in heads:
                return heads[level]
        raise AssertionError("unreachable")

    # -- flows: self-clocked fair queueing within each level -------------------

    def flow_head(self, level: int, flow: Hashable) -> RefWaiter | None:
        mine = [w for w in self.waiting if w.level == level and w.flow == flow]
        return min(mine, key=lambda w: w.seq) if mine else None

    def finish(self, head: RefWaiter) -> Fraction:
        """The virtual time at which ``head`` (the head of its flow) finishes."""
        time = self.flow_times[(head.level, head.flow)]
        scale = self.scale[head.level]
        # cost / weight, the weight rounded down to scale / ceil(scale / weight)
        return time.start + Fraction(
            head.cost[self.flow_limit] * math.ceil(Fraction(scale, time.weight)), scale
        )

    def heads(self) -> dict[int, RefWaiter]:
        """Per waiting level, its head: of its flows' heads, the one that
        finishes first, then the one pushed first."""
        out: dict[int, RefWaiter] = {}
        for level in sorted({w.level for w in self.waiting}):
            flows = {w.flow for w in self.waiting if w.level == level}
            firsts = [self.flow_head(level, f) for f in flows]
            out[level] = min(
                (h for h in firsts if h is not None), key=lambda h: (self.finish(h), h.seq)
            )
        return out

    def join(self, waiter: RefWaiter) -> None:
        key = (waiter.level, waiter.flow)
        if key not in self.flow_times:
            clock = self.clock[waiter.level]
            weight = self.flow_weights.get(waiter.flow, 1)
            self.flow_times[key] = FlowTime(clock, clock, weight)
            scale = math.lcm(self.scale[waiter.level], weight)
            if scale <= MAX_SCALE:
                self.scale[waiter.level] = scale
        self.waiting.append(waiter)

    def leave(self, waiter: RefWaiter, granted: bool = False) -> None:
        """``waiter`` leaves (granted, or not); a new head of its flow starts
        at the later of its flow's finish and the level's clock."""
        key = (waiter.level, waiter.flow)
        was_head = self.flow_head(*key) is waiter
        time = self.flow_times[key]
        if granted:
            self.clock[waiter.level] = time.finish = self.finish(waiter)
        self.waiting.remove(waiter)
        if self.flow_head(*key) is None:
            del self.flow_times[key]
            if not any(w.level == waiter.level for w in self.waiting):
                self.scale[waiter.level] = 1
        elif was_head:
            time.start = max(time.finish, self.clock[waiter.level])

    def deal(self, level: int | None = None) -> tuple[RefWaiter, int, list[int]]:
        """Shares, one slot at a time: the head the cycle's units cover first
        (or the head of ``level``, once covered), the slots dealt until then,
        and the levels' credits after them."""
        cycle, i = self.cycle(), self.policy.shared
        credits = list(self.credits)
        heads = self.heads()
        covered = [lv for lv in sorted(heads) if credits[lv] >= heads[lv].cost[i]]
        if covered and level in (None, *covered):
            first = covered[0] if level is None else level
            return heads[first], 0, credits
        slots = 0
        while True:
            owner = cycle[(self.dealt + slots) % len(cycle)]
            to = owner if owner in heads else min(heads)
            credits[to] += 1
            slots += 1
            if credits[to] >= heads[to].cost[i] and level in (None, to):
                return heads[to], slots, credits

    def ahead(self, level: int) -> int:
        kind = self.policy.kind
        if kind == "fifo":
            return len(self.waiting)
        if kind in ("strict", "aging"):
            return sum(1 for w in self.waiting if w.level <= level)
        return sum(1 for w in self.waiting if w.level == level)

    # -- time and the buckets -------------------------------------------------

    def refill(self, now: int) -> None:
        if self.first is None:
            self.first = now
        assert self.last is None or now >= self.last
        self.last = now

    def cap(self, i: int, limits: list[tuple[Fraction, int]] | None = None) -> Fraction:
        """The most tokens limit ``i`` holds: ``burst`` and a nanosecond of refill."""
        rate, burst = (limits or self.limits)[i]
        return burst + rate / NS

    def tokens(self, i: int) -> Fraction:
        """Limit ``i``'s bucket at ``last``, replayed from the first operation
        over every event: it starts with ``burst`` tokens, refills at the rate
        of the moment and holds at most ``burst`` plus one nanosecond of
        refill (SPEC.md, Pacing).

        The replay resumes where the last one for ``i`` stopped when the
        events it replayed are still the first events, as they were (a
        refund removes a charge, a settle rewrites one: then it starts
        again); so a long run replays each event about once, not once a
        query."""
        assert self.first is not None
        assert self.last is not None
        # the events as values: a Charge's cost is rewritten by a settle
        events: list[Any] = [
            ("charge", e.at, e.cost) if isinstance(e, Charge) else e for e in self.events
        ]
        done, limits = 0, list(self.initial)
        tokens, then = Fraction(limits[i][1]), self.first
        kept = self.replays.get(i)
        if kept is not None and kept[0] == self.first and kept[1] == events[: len(kept[1])]:
            done, limits, tokens, then = len(kept[1]), list(kept[2]), kept[3], kept[4]

        def refill(at: int) -> Fraction:
            rate, _ = limits[i]
            return min(self.cap(i, limits), tokens + (at - then) * rate / NS)

        for event in events[done:]:
            kind, at = event[:2]
            if kind == "charge":
                tokens, then = refill(at) - event[2][i], at
                continue
            limit = event[2]
            tokens, then = refill(at), at
            if limit != i:
                continue
            if kind == "rerate":
                # The tokens carry over, capped at the new burst; the next
                # unit's time is rounded up to a whole nanosecond.
                _, _, _, rate, burst = event
                limits[i] = (rate, burst)
                tat = max(Fraction(at - 1), at + (burst - tokens) * NS / rate)
                tokens = burst - (math.ceil(tat) - at) * rate / NS
            elif kind == "adopt":
                # At reset, at most `remaining` tokens.
                _, _, _, remaining, reset = event
                rate, _ = limits[i]
                tokens = min(tokens, remaining - (reset - at) * rate / NS)
        self.replays[i] = (self.first, events, list(limits), tokens, then)
        return refill(self.last)

    def in_flight(self, i: int) -> int:
        return sum(h.cost[i] for h in self.held.values() if h.charge is None)

    def quotas(self, i: int) -> list[tuple[int, int]]:
        """Limit ``i``'s quotas in force at ``last``: each one's units left
        and its end, replayed over every event (each quota counts the
        charges made from it until its reset, beside the others)."""
        assert self.last is not None
        counts: list[list[int]] = []  # [left, until]
        for event in self.events:
            if isinstance(event, Charge):
                for count in counts:
                    if event.at < count[1]:
                        count[0] -= event.cost[i]
            elif event[0] == "quota" and event[2] == i:
                counts = quotas_kept(counts, event[3], event[4], event[1])
        return [(left, until) for left, until in counts if until > self.last]

    def fits(self, cost: tuple[int, ...]) -> bool:
        """Whether every limit ``cost`` takes from holds it at ``last``, beside
        the units in flight, within its quota, and no pause holds."""
        assert self.last is not None
        if self.paused_until is not None and self.last < self.paused_until:
            return False
        # a limit the cost takes nothing from holds it in no way
        drawn = [i for i in range(len(self.limits)) if cost[i] > 0]
        for i in drawn:
            if any(self.in_flight(i) + cost[i] > left for left, _ in self.quotas(i)):
                return False
        return all(self.tokens(i) - self.in_flight(i) >= cost[i] for i in drawn)

    def settle(self, now: int) -> list[Row]:
        """A tick: expiries, then grants to the chosen waiter while it fits."""
        self.refill(now)
        out: list[Row] = []
        for w in sorted(
            (w for w in self.waiting if w.deadline is not None and w.deadline <= now),
            key=lambda w: (w.deadline, w.seq),
        ):
            self.leave(w)
            self.stats[w.level].expired += 1
            out.append((w.id, "EXPIRED", w.level, now, now - w.pushed_at))
        while (head := self.chosen(now)) is not None and self.fits(head.cost):
            if self.policy.kind == "shares":
                _, slots, credits = self.deal(head.level)
                self.dealt += slots
                credits[head.level] -= head.cost[self.policy.shared]
            self.leave(head, granted=True)
            if self.follow:
                self.followed.pop(0)
            charge = None
            if self.at_grant:
                charge = Charge(now, head.cost)
                self.events.append(charge)
            self.held[head.id] = Held(head.level, charge, head.cost)
            self.total_granted += 1
            if self.policy.kind == "shares":
                # A level that no longer waits keeps no credit.
                left = {w.level for w in self.waiting}
                self.credits = [c if lv in left else 0 for lv, c in enumerate(credits)]
            level = self.stats[head.level]
            level.granted += 1
            level.waits.append(now - head.pushed_at)
            before = level.units or [0] * len(head.cost)
            level.units = [a + b for a, b in zip(before, head.cost, strict=True)]
            out.append((head.id, "GRANTED", head.level, now, now - head.pushed_at))
        return out

    # -- operations -----------------------------------------------------------

    def push(
        self,
        id: Hashable,
        level: int,
        now: int,
        deadline: int | None,
        cost: tuple[int, ...] | None = None,
        flow: Hashable = None,
        max_wait: int | None = None,
    ) -> list[Row]:
        out = self.settle(now)
        self.stats[level].pushed += 1
        self.held.pop(id, None)  # a new life
        if max_wait is not None and self.min_wait(level, cost, flow) > max_wait:
            # even its best case would wait too long: refused, never queued
            self.stats[level].too_long += 1
            out.append((id, "TOO_LONG", level, now, 0))
            return out
        limit = None if self.max_waiting is None else self.max_waiting[level]
        full = limit is not None and sum(1 for w in self.waiting if w.level == level) >= limit
        per_flow = self.max_waiting_per_flow
        mine = sum(1 for w in self.waiting if w.level == level and w.flow == flow)
        full = full or (per_flow is not None and mine >= per_flow)
        late = deadline is not None and deadline <= now
        waiter = RefWaiter(
            id, level, self.seq, now, None if late else deadline, cost or self.unit, flow
        )
        self.seq += 1
        self.flowed = self.flowed or flow is not None
        # Granted at once if the policy chooses it and it fits, whatever its
        # queue limit or deadline; otherwise it may not queue when full or late.
        self.join(waiter)
        out += self.settle(now)
        if (full or late) and waiter in self.waiting:
            self.leave(waiter)
            if full:
                self.stats[level].rejected += 1
                out.append((id, "REJECTED", level, now, 0))
            else:
                self.stats[level].expired += 1
                out.append((id, "EXPIRED", level, now, 0))
            out += self.settle(now)
        return out

    def cancel(self, id: Hashable) -> bool:
        for w in self.waiting:
            if w.id == id:
                self.leave(w)
                self.stats[w.level].cancelled += 1
                return True
        return False

    def can_settle(self, id: Hashable, now: int) -> bool:
        held = self.held.get(id)
        if held is None:
            return False
        window = self.settle_window  # None: never, once charged
        return held.charge is None or (window is not None and held.charge.at >= now - window)

    def can_refund(self, id: Hashable, now: int) -> bool:
        return self.can_settle(id, now) and not self.held[id].spent

    def spend(self, id: Hashable, now: int, settle_later: bool = False) -> list[Row]:
        """At ``now`` the permit of ``id`` is spent: charged now if it was in
        flight, no longer refundable either way; settleable still if
        ``settle_later``."""
        out = self.settle(now)
        held = self.held.get(id)
        if held is not None and not held.spent and self.can_settle(id, now):
            if held.charge is None:
                held.charge = Charge(now, held.cost)
                self.events.append(held.charge)
            if settle_later:
                held.spent = True
            else:
                del self.held[id]
        return out + self.settle(now)

    def refund(self, id: Hashable, now: int) -> list[Row]:
        out = self.settle(now)
        held = self.held.pop(id)
        if held.charge is not None:
            # this very charge: another of the same time and cost is equal to it
            self.events = [event for event in self.events if event is not held.charge]
        stats = self.stats[held.level]
        stats.refunded += 1
        stats.units = [a - b for a, b in zip(stats.units, held.cost, strict=True)]
        return out + self.settle(now)

    def settle_cost(self, id: Hashable, named: Mapping[int, int], now: int) -> list[Row]:
        """``id``'s grant cost ``named`` (units by limit index) after all, as
        if it had asked for it; a limit ``named`` leaves out, what it asked."""
        out = self.settle(now)
        held = self.held.pop(id)
        actual = tuple(named.get(i, asked) for i, asked in enumerate(held.cost))
        stats = self.stats[held.level]
        stats.units = [u + a - c for u, a, c in zip(stats.units, actual, held.cost, strict=True)]
        if held.charge is None:
            self.events.append(Charge(now, actual))  # spent now, for actual
        else:
            held.charge.cost = actual
        return out + self.settle(now)

    def set_limit(self, now: int, i: int, rate: Fraction, burst: int) -> list[Row]:
        out = self.settle(now)
        self.events.append(("rerate", now, i, rate, burst))
        self.limits[i] = (rate, burst)
        return out + self.settle(now)

    def pause_until(self, until: int, now: int) -> list[Row]:
        out = self.settle(now)
        if until > now and (self.paused_until is None or until > self.paused_until):
            self.pauses += 1
        self.paused_until = until if self.paused_until is None else max(until, self.paused_until)
        self.pause_spans.append((now, until))
        return out

    def paused_ns(self) -> int:
        """The length of the union of the pauses' ``[now, until)``."""
        covered, end = 0, None
        for start, stop in sorted(s for s in self.pause_spans if s[1] > s[0]):
            if end is None or start > end:
                covered, end = covered + stop - start, stop
            elif stop > end:
                covered, end = covered + stop - end, stop
        return covered

    def adopt(self, remaining: int, reset: int, now: int, i: int) -> list[Row]:
        out = self.settle(now)
        self.events.append(("adopt", now, i, remaining, reset))
        return out + self.settle(now)

    def limit_quota(self, remaining: int, reset: int, now: int, i: int) -> list[Row]:
        out = self.settle(now)
        self.events.append(("quota", now, i, remaining, reset))
        return out + self.settle(now)

    # -- queries --------------------------------------------------------------

    def wait_for(self, i: int, n: int) -> int:
        """Nanoseconds from ``last`` until limit ``i`` has ``n`` tokens."""
        tokens = self.tokens(i)
        if tokens >= n:
            return 0
        return math.ceil((n - tokens) * NS / self.limits[i][0])

    def due_for(self, cost: tuple[int, ...]) -> int | None:
        """When ``cost`` fits beside the units in flight; None if it cannot
        until some are spent or refunded."""
        assert self.last is not None
        at = self.last
        for i in range(len(self.limits)):
            if cost[i] == 0:
                continue  # (a limit it takes nothing from)
            need = self.in_flight(i) + cost[i]
            if need > self.cap(i):
                return None
            at = max(at, self.last + self.wait_for(i, need))
            at = max([at, *(until for left, until in self.quotas(i) if need > left)])
        if self.paused_until is not None:
            at = max(at, self.paused_until)
        return at

    def next_due(self) -> int | None:
        if self.last is None:
            return None
        chosen = self.chosen(self.last)
        return self.due_for(self.unit if chosen is None else chosen.cost)

    def next_tick(self) -> int | None:
        if not self.waiting:
            return None
        due = self.next_due()
        deadlines = [w.deadline for w in self.waiting if w.deadline is not None]
        times = [*deadlines] if due is None else [due, *deadlines]
        return min(times) if times else None

    def min_wait(
        self, level: int, cost: tuple[int, ...] | None = None, flow: Hashable = None
    ) -> int:
        if self.last is None:
            return 0
        cost = cost or self.unit
        # the waiters that certainly go first: everyone's when the policy
        # puts everyone first, else the newcomer's own level; at its level,
        # only its own flow's when another flow waits there
        # (once a flow was named, this newcomer's too, a newcomer's flow may
        # head another level and let this one pass that level's older waiters)
        everyone = self.ahead(level) >= len(self.waiting) and not self.flowed and flow is None
        others = {w.flow for w in self.waiting if w.level == level} - {flow}
        first = [
            w
            for w in self.waiting
            if (everyone and w.level != level)
            or (w.level == level and (not others or w.flow == flow))
        ]
        wait = 0
        for i in range(len(self.limits)):
            drawn = sum(w.cost[i] for w in first) + cost[i]
            if drawn == 0:
                continue  # none of them takes from this limit
            # at best, those in flight are spent now
            need = self.in_flight(i) + drawn
            wait = max(wait, self.wait_for(i, need))
            ends = [until - self.last for left, until in self.quotas(i) if need > left]
            wait = max([wait, *ends])
        if self.paused_until is not None:
            wait = max(wait, self.paused_until - self.last)
        return wait

    def depths(self) -> list[int]:
        return [sum(1 for w in self.waiting if w.level == lv) for lv in range(self.policy.levels)]
