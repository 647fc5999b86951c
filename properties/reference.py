"""A naive reference model of :class:`permits.core.Machine`: obviously right, slow.

It shares no code with the core. Waiters are a plain list in push order and
every choice is a scan over it; pacing is a literal token bucket whose token
count is an exact :class:`~fractions.Fraction`, refilled by
``elapsed * rate / 10**9`` and capped at ``burst``. A permit charged when
spent (``Charge.AT_SPEND``) is *in flight* until then: it is a token that
stays in the bucket, counted against what a grant may take. Each policy's rule is
written as the SPEC states it (aging literally as
``level - (now - pushed_at) / after``). Where the core and this model
differ, that is the bug report.

For a policy the model does not know (a user's), the model cannot say which
level goes next; it offers every level head as a candidate and lets the test
check the core's pick is one of them, so the generic properties still apply.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

NS = 10**9

#: (id, state name, level, at, waited): the model's form of a Decision.
Row = tuple[Hashable, str, int, int, int]


@dataclass
class RefWaiter:
    id: Hashable
    level: int
    seq: int
    pushed_at: int
    deadline: int | None


@dataclass
class RefLevel:
    pushed: int = 0
    granted: int = 0
    cancelled: int = 0
    refunded: int = 0
    rejected: int = 0
    expired: int = 0
    waits: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class PolicySpec:
    """A policy as the model knows it: ``kind`` is fifo, strict, shares,
    aging, or ``user`` (a policy the model cannot predict)."""

    kind: str
    levels: int
    weights: tuple[int, ...] = ()
    after: int = 0


def nearest_rank(values: Sequence[int], q: float) -> int | None:
    """The exact nearest-rank ``q``-quantile, as SPEC.md defines it."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


class Reference:
    def __init__(
        self,
        policy: PolicySpec,
        rate: Fraction,
        burst: int,
        max_waiting: Sequence[int | None] | None,
        refund_window: int,
        at_grant: bool = True,
    ) -> None:
        self.policy = policy
        self.rate = rate
        self.burst = burst
        self.max_waiting = max_waiting
        self.refund_window = refund_window
        self.at_grant = at_grant
        self.first: int | None = None
        self.last: int | None = None
        # every permit ever charged and not refunded: (time, id); charged at
        # its grant, or at its spend when not at_grant
        self.grants: list[tuple[int, Hashable]] = []
        # not at_grant: permits granted and not yet spent or refunded, id -> level
        self.in_flight: dict[Hashable, int] = {}
        self.waiting: list[RefWaiter] = []
        self.seq = 0
        self.total_granted = 0
        self.refundable: dict[Hashable, tuple[int, int]] = {}  # id -> (level, at)
        self.stats = [RefLevel() for _ in range(policy.levels)]
        #: Follow the core's choices instead of making its own (see candidates).
        self.follow = False

    # -- the policies, as SPEC.md states them --------------------------------

    def cycle(self) -> list[int]:
        slots = []
        for level, weight in enumerate(self.policy.weights):
            for j in range(1, weight + 1):
                slots.append((Fraction(j, weight), level))
        return [level for _, level in sorted(slots)]

    def candidates(self, now: int) -> list[RefWaiter]:
        """Who may be granted next: exactly one waiter for a known policy.

        With ``follow`` set, every waiter: the model then only keeps count of
        who waits and how the bucket stands, and the tests judge the core's
        choices by the properties alone (``mutants.py`` uses this)."""
        kind = self.policy.kind
        waiting = self.waiting
        if self.follow:
            return list(waiting)
        if kind == "fifo":
            return [min(waiting, key=lambda w: w.seq)]
        if kind == "strict":
            return [min(waiting, key=lambda w: (w.level, w.seq))]
        if kind == "aging":
            after = self.policy.after
            return [
                min(
                    waiting,
                    key=lambda w: (w.level - Fraction(now - w.pushed_at, after), w.seq),
                )
            ]
        if kind == "shares":
            cycle = self.cycle()
            owner = cycle[self.total_granted % len(cycle)]
            mine = [w for w in waiting if w.level == owner]
            if mine:
                return [min(mine, key=lambda w: w.seq)]
            return [min(waiting, key=lambda w: (w.level, w.seq))]
        # A user's policy: any level's head.
        heads: dict[int, RefWaiter] = {}
        for w in sorted(waiting, key=lambda w: w.seq):
            heads.setdefault(w.level, w)
        return list(heads.values())

    def ahead(self, level: int) -> int:
        kind = self.policy.kind
        if kind == "fifo":
            return len(self.waiting)
        if kind in ("strict", "aging"):
            return sum(1 for w in self.waiting if w.level <= level)
        return sum(1 for w in self.waiting if w.level == level)

    # -- time and the bucket --------------------------------------------------

    def refill(self, now: int) -> None:
        if self.first is None:
            self.first = now
        assert self.last is None or now >= self.last
        self.last = now

    @property
    def cap(self) -> Fraction:
        """The most tokens the bucket holds: ``burst`` and a nanosecond of refill."""
        return self.burst + self.rate / NS

    @property
    def tokens(self) -> Fraction:
        """The token bucket at ``last``, replayed from the first operation over
        every grant not refunded: a refunded grant is as if it never was.

        It starts with ``burst`` tokens and holds at most ``burst`` plus one
        nanosecond of refill (SPEC.md, Pacing)."""
        assert self.first is not None
        assert self.last is not None
        cap = self.cap
        tokens, then = Fraction(self.burst), self.first
        for at, _ in self.grants:
            tokens = min(cap, tokens + (at - then) * self.rate / NS) - 1
            then = at
            assert tokens >= 0
        return min(cap, tokens + (self.last - then) * self.rate / NS)

    def settle(self, now: int, pick: Callable[[list[RefWaiter]], RefWaiter]) -> list[Row]:
        self.refill(now)
        out: list[Row] = []
        for w in sorted(
            (w for w in self.waiting if w.deadline is not None and w.deadline <= now),
            key=lambda w: (w.deadline, w.seq),
        ):
            self.waiting.remove(w)
            self.stats[w.level].expired += 1
            out.append((w.id, "EXPIRED", w.level, now, now - w.pushed_at))
        while self.waiting and self.free():
            w = pick(self.candidates(now))
            self.waiting.remove(w)
            if self.at_grant:
                self.grants.append((now, w.id))
                self.refundable[w.id] = (w.level, now)
            else:
                self.in_flight[w.id] = w.level
            self.total_granted += 1
            level = self.stats[w.level]
            level.granted += 1
            level.waits.append(now - w.pushed_at)
            out.append((w.id, "GRANTED", w.level, now, now - w.pushed_at))
        return out

    def free(self) -> bool:
        """Whether a permit is left at ``last``: a token not held in flight."""
        return self.tokens - len(self.in_flight) >= 1

    # -- operations -----------------------------------------------------------

    def push(
        self,
        id: Hashable,
        level: int,
        now: int,
        deadline: int | None,
        pick: Callable[[list[RefWaiter]], RefWaiter],
    ) -> list[Row]:
        out = self.settle(now, pick)
        self.stats[level].pushed += 1
        self.refundable.pop(id, None)  # a new life
        # A permit left now goes to the newcomer, whatever its limit or deadline.
        free = self.free()
        limit = None if self.max_waiting is None else self.max_waiting[level]
        full = limit is not None and sum(1 for w in self.waiting if w.level == level) >= limit
        if full and not free:
            self.stats[level].rejected += 1
            return [*out, (id, "REJECTED", level, now, 0)]
        waiter = RefWaiter(id, level, self.seq, now, deadline)
        self.seq += 1
        if deadline is not None and deadline <= now:
            if not free:
                self.stats[level].expired += 1
                return [*out, (id, "EXPIRED", level, now, 0)]
            waiter.deadline = None
        self.waiting.append(waiter)
        return out + self.settle(now, pick)

    def cancel(self, id: Hashable) -> bool:
        for w in self.waiting:
            if w.id == id:
                self.waiting.remove(w)
                self.stats[w.level].cancelled += 1
                return True
        return False

    def can_refund(self, id: Hashable, now: int) -> bool:
        if not self.at_grant:
            return id in self.in_flight
        entry = self.refundable.get(id)
        return entry is not None and entry[1] >= now - self.refund_window

    def spend(
        self, id: Hashable, now: int, pick: Callable[[list[RefWaiter]], RefWaiter]
    ) -> list[Row]:
        """At ``now`` the permit of ``id`` is spent: charged now if it was in
        flight, no longer refundable either way."""
        out = self.settle(now, pick)
        self.refundable.pop(id, None)
        if id in self.in_flight:
            del self.in_flight[id]
            self.grants.append((now, id))
        return out + self.settle(now, pick)

    def refund(
        self, id: Hashable, now: int, pick: Callable[[list[RefWaiter]], RefWaiter]
    ) -> list[Row]:
        out = self.settle(now, pick)
        if self.at_grant:
            level, at = self.refundable.pop(id)
            self.grants.remove((at, id))
        else:
            level = self.in_flight.pop(id)
        self.stats[level].refunded += 1
        return out + self.settle(now, pick)

    # -- queries --------------------------------------------------------------

    def wait_for_tokens(self, n: int) -> int:
        """Nanoseconds from ``last`` until ``n`` tokens have accrued in all."""
        tokens = self.tokens
        if tokens >= n:
            return 0
        return math.ceil((n - tokens) * NS / self.rate)

    def next_due(self) -> int | None:
        if self.last is None:
            return None
        need = len(self.in_flight) + 1
        if need > self.cap:
            return None  # those in flight fill the bucket: none falls due
        return self.last + self.wait_for_tokens(need)

    def next_tick(self) -> int | None:
        if not self.waiting:
            return None
        due = self.next_due()
        deadlines = [w.deadline for w in self.waiting if w.deadline is not None]
        times = [*deadlines] if due is None else [due, *deadlines]
        return min(times) if times else None

    def min_wait(self, level: int) -> int:
        if self.last is None:
            return 0
        # at best, those in flight are spent now
        return self.wait_for_tokens(len(self.in_flight) + self.ahead(level) + 1)

    def depths(self) -> list[int]:
        return [sum(1 for w in self.waiting if w.level == lv) for lv in range(self.policy.levels)]
