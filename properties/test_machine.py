"""The main contract: the machine beside the naive reference model.

One ``RuleBasedStateMachine`` drives a :class:`permits.core.Machine` and the
:class:`reference.Reference` model side by side through push, cancel, tick
(on time, and late as a lagging event loop would), refund, spend, queries,
and every kind of bad input. It runs once per policy kind, a user's policy
included, on machines that charge permits at their grant and at their spend;
for the latter the callers take their permits at once, or are held (a
stalled event loop) and resume together.

Each rule first checks the SPEC properties on the *core's* decisions, using
the waiting set verified at the previous step, and only then compares the
core with the model (P13); so a broken core reports the property it broke.
Property ids (P1...) are SPEC.md's.
"""

from __future__ import annotations

import collections
import math
import os
from collections.abc import Callable, Hashable
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import event, note
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from permits.core import (
    RELATIVE_ERROR,
    SECOND,
    Charge,
    Deal,
    Decision,
    DuplicateId,
    Machine,
    NotRefundable,
    PermitTypeError,
    PermitValueError,
    State,
    TimeWentBackwards,
)

from configs import FLOWS, NAMES, Config, configs
from harness import fingerprint, rows
from reference import NS, Reference, RefWaiter, nearest_rank


class Charged:
    """A permit charged and not refunded, for the limit's check (P1, P29)."""

    def __init__(self, at: int, id: Hashable, asked: tuple[int, ...], order: int) -> None:
        self.at = at
        self.id = id
        self.asked = asked
        self.actual = asked
        #: the order of events, to tell charges after a change of a limit
        self.order = order

    def counted(self, i: int) -> int:
        """The units P1 bounds: the lesser of asked and actual (P29)."""
        return min(self.asked[i], self.actual[i])


STEPS = st.integers(0, 48)  # sixteenths of a permit interval

#: Set by ``mutants.py`` to see which properties catch a bug on their own.
WITH_MODEL = not os.environ.get("PERMITS_PROPERTIES_WITHOUT_MODEL")


def _refused(call: Callable[[], object], expected: type[Exception], what: str) -> Exception:
    """The error ``call`` raises, which must be an ``expected`` one; a P18
    failure if it raises none."""
    try:
        call()
    except expected as error:
        return error
    raise AssertionError(f"P18: {what} was accepted")


class PolicyMachine(RuleBasedStateMachine):
    ids = Bundle("ids")

    core: Machine
    model: Reference
    config: Config

    def _setup(self, config: Config) -> None:
        note(f"config: {config!r}")
        self.config = config
        self.core = config.machine()
        self.model = config.reference()
        self.model.follow = not WITH_MODEL
        self.interval = config.interval
        self.intervals = [SECOND / rate for rate, _ in config.limits]
        self.now = config.origin
        self.next_id = 0
        # the state each pushed id was last seen in (P3)
        self.fate: dict[Hashable, State] = {}
        # permits charged and not refunded (P1, P5): at their grant, or at
        # their spend (Charge.AT_SPEND); by id, those that may still settle
        self.charges: list[Charged] = []
        self.charged: dict[Hashable, Charged] = {}
        self.order = 0
        # per limit, the order of its latest change (P30: P1 from then on)
        self.changed = [-1] * len(config.limits)
        # P24: per limit, whether a change ever lowered the most units it
        # lets be in flight (burst + floor(rate * 1 ns)); a raise keeps P24
        self.lowered = [False] * len(config.limits)
        # P31: nothing is granted before the pause ends
        self.paused_until: int | None = None
        # P32: units charged since the upstream's word, and what it allowed
        # the upstream's words: (property, limit, order, remaining, reset)
        self.adopted: list[tuple[str, int, int, int, int]] = []
        # the order of each grant not yet charged (Charge.AT_SPEND)
        self.granted_order: dict[Hashable, int] = {}
        # Charge.AT_SPEND: callers that settle their cost later spend so
        self.settle_later = config.costs
        self.at_grant = config.charge is Charge.AT_GRANT
        # Charge.AT_SPEND: whether callers hold their permits (the loop is
        # stalled) rather than take them at once
        self.holding = False
        # P8: per level, whether it received each grant of its current streak
        self.streaks: list[collections.deque[bool]] = [
            collections.deque() for _ in range(config.spec.levels)
        ]
        # P33: per level, the units of the shared limit of each grant of its
        # current streak, and whether it received them; the largest cost
        self.unit_streaks: list[list[tuple[bool, int]]] = [[] for _ in range(config.spec.levels)]
        self.largest = 1
        # P10 and P12: bounds that hold while ticks come on time
        self.level0_bound: dict[Hashable, int] = {}
        self.drain_bound: int | None = None
        # P19: min_wait lower bound, voided by cancels, expiries and refunds
        self.disturbances = 0
        self.late_ticks = 0
        self.min_wait_at_push: dict[Hashable, tuple[int, int, int]] = {}

    # -- the per-decision checks, on the core's output ------------------------

    def ceil_intervals(self, n: int) -> int:
        return math.ceil(n * self.interval)

    def time_for(self, units: list[int]) -> int:
        """Nanoseconds for ``units`` (one entry per limit) to accrue."""
        return max(math.ceil(n * i) for n, i in zip(units, self.intervals, strict=True))

    def uncharge(self, id: Hashable) -> None:
        """``id``'s permit was refunded: as if it had never been charged."""
        charged = self.charged.pop(id, None)
        self.charges = [c for c in self.charges if c is not charged]

    def charge(self, at: int, id: Hashable, cost: tuple[int, ...]) -> None:
        """``id``'s permit is charged at ``at`` (P1). It counts under a limit
        changed since its grant only if it was granted after the change: a
        permit in flight at the change was admitted under the old limit."""
        self.order += 1
        charged = Charged(at, id, cost, self.granted_order.pop(id, self.order))
        self.charges.append(charged)
        self.charged[id] = charged
        self.check_limit()

    def check_decisions(
        self, out: list[Decision], now: int, newcomer: RefWaiter | None = None
    ) -> None:
        """Check each decision against the waiting set it was made from."""
        waiting = {w.id: w for w in self.model.waiting}
        for d in out:
            if newcomer is not None and d.id == newcomer.id:
                waiting[newcomer.id] = newcomer
            note(f"decision {d!r}")
            assert d.at == now, (d.at, now)
            if d.state is State.REJECTED:
                # P11: a push over max_waiting is rejected, and only then.
                assert newcomer is not None, ("P11: rejected outside a push", d)
                assert d.id == newcomer.id, ("P11: rejected another id", d)
                limits = self.config.max_waiting
                limit = None if limits is None else limits[d.level]
                depth = sum(1 for w in waiting.values() if w.level == d.level and w is not newcomer)
                per_flow = self.config.max_waiting_per_flow if self.config.flows else None
                mine = sum(
                    1
                    for w in waiting.values()
                    if (w.level, w.flow) == (d.level, newcomer.flow) and w is not newcomer
                )
                level_full = limit is not None and depth >= limit
                flow_full = per_flow is not None and mine >= per_flow
                assert level_full or flow_full, ("P11: rejected below the limits", d, depth, mine)
                self.fate[d.id] = State.REJECTED
                continue
            if d.state is State.TOO_LONG:
                # P53: only a newcomer is refused for its max_wait (do_push
                # checks the wait it compared).
                assert newcomer is not None, ("P53: too long outside a push", d)
                assert d.id == newcomer.id, ("P53: too long another id", d)
                assert (d.level, d.waited) == (newcomer.level, 0), ("P53", d)
                self.fate[d.id] = State.TOO_LONG
                continue
            waiter = waiting.pop(d.id, None)
            # P3: only waiting ids are decided, each once.
            assert waiter is not None, ("P3: decided an id that was not waiting", d)
            assert self.fate.get(d.id) is State.WAITING, ("P3", d, self.fate.get(d.id))
            assert d.level == waiter.level, ("P13", d)
            assert d.waited == now - waiter.pushed_at, ("P13", d)
            if d.state is State.EXPIRED:
                # P11: expiry exactly at the deadline.
                assert waiter.deadline is not None, ("P11: expired with no deadline", d)
                assert waiter.deadline <= now, ("P11: expired early", d)
                self.fate[d.id] = State.EXPIRED
                self.disturbances += 1
                self.forget(d.id)
                continue
            assert d.state is State.GRANTED, d
            # P11: nobody that waited is granted at or after its deadline (a
            # newcomer whose deadline is now is granted only at once).
            at_once = newcomer is not None and d.id == newcomer.id and d.waited == 0
            assert waiter.deadline is None or now < waiter.deadline or at_once, ("P11", d, waiter)
            assert not any(
                w.deadline is not None and w.deadline <= now for w in waiting.values()
            ), ("P11: granted while an expired waiter still waited", d)
            # P31: nothing is granted before a pause ends.
            assert self.paused_until is None or now >= self.paused_until, ("P31", d)
            self.check_grant(waiter, list(waiting.values()), now)
            self.fate[d.id] = State.GRANTED
            self.forget(d.id)
            self.order += 1
            self.granted_order[d.id] = self.order
            if self.at_grant:
                self.charge(now, d.id, waiter.cost)

    def forget(self, id: Hashable) -> None:
        """The per-waiter bounds end with the waiter (its id may come back)."""
        self.level0_bound.pop(id, None)
        self.min_wait_at_push.pop(id, None)

    def check_grant(self, w: RefWaiter, others: list[RefWaiter], now: int) -> None:
        spec = self.config.spec
        # P6: FIFO within a flow of a level, under every policy; push order
        # under FIFO (with flows, between the levels' heads: the model's part).
        flows = self.config.flows
        earlier = [
            x
            for x in others
            if x.seq < w.seq
            and ((x.level, x.flow) == (w.level, w.flow) or (spec.kind == "fifo" and not flows))
        ]
        assert not earlier, ("P6: overtaken in its own flow", w, earlier)
        if spec.kind == "strict":
            # P7: no more urgent waiter was waiting.
            urgent = [x for x in others if x.level < w.level]
            assert not urgent, ("P7: a more urgent waiter was waiting", w, urgent)
        if spec.kind == "aging" and not flows:
            # P9: the best (level - age/after, push order) is served ...
            def key(x: RefWaiter) -> tuple[Fraction, int]:
                return (x.level - Fraction(now - x.pushed_at, spec.after), x.seq)

            better = [x for x in others if key(x) < key(w)]
            assert not better, ("P9: a waiter with a better effective priority waited", w, better)
            # ... hence nobody pushed after t + level * after overtakes a waiter pushed at t.
            late = [x for x in others if w.pushed_at > x.pushed_at + x.level * spec.after]
            assert not late, ("P9: overtook a waiter past its aging bound", w, late)
        if spec.kind == "shares":
            self.check_shares(w, others)
        self.check_timely(w, now)

    def check_shares(self, w: RefWaiter, others: list[RefWaiter]) -> None:
        spec = self.config.spec
        cycle = sum(spec.weights)
        waiting_levels = {x.level for x in others} | {w.level}
        # P33: over any run of grants throughout which level i waited, of U
        # units in all, it received at least w_i * U / W - (L * w_i / W + 1) * C,
        # C the largest cost: counted in the units of the shared limit.
        self.largest = max([self.largest, *(x.cost[spec.shared] for x in [w, *others])])
        levels = spec.levels
        for level, run in enumerate(self.unit_streaks):
            if level not in waiting_levels:
                run.clear()
                continue
            run.append((level == w.level, w.cost[spec.shared]))
            got = total = 0
            weight = spec.weights[level]
            slack = Fraction(levels * weight, cycle) + 1
            for mine, units in reversed(run):
                total += units
                got += units if mine else 0
                bound = Fraction(weight * total, cycle) - slack * self.largest
                assert got >= bound, ("P33", level, got, total, spec.weights, self.largest)
        if self.core.unit_costs:
            # P8: in any run of sum(weights) consecutive grants throughout which a
            # level waited, it received at least its weight (while every cost
            # is one unit: also across settles, pauses, changes of limit and
            # the upstream's word, which only a config with costs makes).
            for level, streak in enumerate(self.streaks):
                if level not in waiting_levels:
                    streak.clear()
                    continue
                streak.append(level == w.level)
                if len(streak) > cycle:
                    streak.popleft()
                if len(streak) == cycle:
                    got = sum(streak)
                    assert got >= spec.weights[level], ("P8", level, got, spec.weights)

    def check_timely(self, w: RefWaiter, now: int) -> None:
        spec = self.config.spec
        if spec.kind == "strict" and w.id in self.level0_bound:
            # P10: granted within k+1 intervals of its push.
            assert now <= self.level0_bound[w.id], ("P10", w, now, self.level0_bound[w.id])
        if w.id in self.min_wait_at_push:
            # P19: never granted before its min_wait, unless someone left early;
            # where the policy's ahead() is exact (FIFO, level 0 under strict
            # priority) and ticks came on time, granted exactly then.
            at, (wait, seen, late_then) = w.pushed_at, self.min_wait_at_push[w.id]
            if seen == self.disturbances:
                assert now >= at + wait, ("P19", w, now, at, wait)
                exact = spec.kind == "fifo" or (spec.kind == "strict" and w.level == 0)
                # under several limits, one may fill while another is short
                exact = exact and len(self.config.limits) == 1
                # a newcomer in another flow may go first
                exact = exact and not self.config.flows
                if exact and late_then == self.late_ticks and not self.holding:
                    assert now == at + wait, repr(
                        (
                            "P19: min_wait is exact here",
                            w,
                            now,
                            at,
                            wait,
                            self.config,
                            self.model.events,
                            self.model.paused_until,
                        )
                    )

    def check_limit(self) -> None:
        """P1 (and P5, P28, P29, P30): for every limit, over every window of
        d ns ending at the latest charge, at most
        burst + floor(rate * (d + 1 ns)) units of permits that were not
        refunded were charged (P24: at their spend, for Charge.AT_SPEND),
        each counted as the lesser of what it asked for and what it settled
        at; under a limit changed since, those granted after the change."""
        for i, (rate, burst) in enumerate(self.model.limits):
            charges = [c for c in self.charges if c.order > self.changed[i]]
            if not charges:
                continue
            end = charges[-1].at
            units = 0
            for c in reversed(charges):
                units += c.counted(i)
                allowed = burst + math.floor(rate * Fraction(end - c.at + 1, NS))
                assert units <= allowed, repr(
                    (
                        "P1",
                        i,
                        c.at,
                        end,
                        units,
                        allowed,
                        [(c.at, c.asked, c.actual) for c in charges],
                        self.model.events,
                        self.changed,
                    )
                )
        # P32, P52: since the upstream said `remaining` were left until
        # `reset`, no more than that were charged before `reset` (a bucket's
        # view only while the limit is not changed; a quota's in any case).
        # The units counted are those charged as each permit was granted: a
        # permit settled above its cost later may take a quota past what it
        # said was left (the units were used before anyone knew), and the
        # quota counts the difference against the grants after it (P52,
        # checked through the model and by hand).
        for pid, i, order, remaining, reset in self.adopted:
            if pid == "P32" and self.changed[i] > order:
                continue
            units = sum(c.counted(i) for c in self.charges if c.order > order and c.at < reset)
            assert units <= remaining, (pid, i, units, remaining, reset)

    # -- comparison with the model (P13) -------------------------------------

    def follow(self, out: list[Decision]) -> None:
        """Without the model's own choices (``mutants.py``), it grants whoever
        the core granted."""
        self.model.followed = [d.id for d in out if d.state is State.GRANTED]

    def compare(self, out: list[Decision], expected: list[Any]) -> None:
        """P13: the core decides exactly what the naive model decides."""
        if not WITH_MODEL:
            return
        assert rows(out) == expected, ("P13", rows(out), expected)

    # -- time ---------------------------------------------------------------

    def tick_at(self, at: int) -> None:
        out = self.core.tick(at)
        self.check_decisions(out, at)
        self.follow(out)
        self.compare(out, self.model.settle(at))
        self.now = at
        self.take_at_once()

    # -- spending -------------------------------------------------------------

    def spend_at(self, id: Hashable, now: int, settle_later: bool = False) -> None:
        """The caller of ``id`` proceeds at ``now`` (P23, P24)."""
        held = self.model.held.get(id)
        in_flight = held is not None and held.charge is None
        waiter = next((w for w in self.model.waiting if w.id == id), None)
        out = self.core.spend(id, now, settle_later=settle_later)
        self.check_decisions(out, now)
        self.follow(out)
        self.compare(out, self.model.spend(id, now, settle_later))
        self.now = now
        if in_flight:
            assert held is not None
            self.charge(now, id, held.cost)
        elif waiter is not None and not self.at_grant and self.fate[id] is State.GRANTED:
            # the spend's own (late) tick granted it: it holds that permit
            # after the tick, and the spend charges it at once
            self.charge(now, id, waiter.cost)
        snapshot = self.core.snapshot()
        log = snapshot.logged
        assert not log or any(grant is log[0] for grant in snapshot.grants), (
            "P23: a spend left a record no refund can reach at the head of the log"
        )

    def take_at_once(self) -> None:
        """Charge.AT_SPEND, callers not held: every permit in flight is
        spent now, as its caller proceeds at once."""
        while not self.at_grant and not self.holding and (flying := self.flying()):
            self.spend_at(flying[0], self.now, self.settle_later)

    def flying(self) -> list[Hashable]:
        """The ids whose permits are in flight, as the model holds them."""
        return [id for id, held in self.model.held.items() if held.charge is None]

    def disturb(self) -> None:
        """Something changed what waiters are owed (a settle, a new limit):
        P10, P12 and P19 are off. (A pause and the upstream's word only
        delay: they void P10, P12 and P19's exactness, not its bound.)"""
        self.disturbances += 1
        self.void_on_time_bounds()

    def void_on_time_bounds(self) -> None:
        """Ticks or takes came late: P10, P12 and P19's exactness are off."""
        self.late_ticks += 1
        self.level0_bound.clear()
        self.drain_bound = None

    def advance(self, steps: int) -> None:
        """Move time forward ``steps`` sixteenths of an interval, ticking at
        every next_tick on the way (an adapter with a perfect timer)."""
        target = self.now + self.ceil_intervals(steps) // 16
        while (at := self.core.next_tick()) is not None and at <= target:
            self.tick_at(at)
            after = self.core.next_tick()
            # P12: a tick at next_tick() makes progress, or nothing could drain.
            assert after is None or after > at, ("P12: a tick at next_tick() changed nothing", at)
        if target > self.now:
            self.tick_at(target)

    # -- rules ---------------------------------------------------------------

    @rule(steps=STEPS)
    def tick_on_time(self, steps: int) -> None:
        self.advance(steps)

    @rule(steps=st.integers(1, 200))
    def tick_late(self, steps: int) -> None:
        """One late tick, as when the event loop lags."""
        target = self.now + self.ceil_intervals(steps) // 16
        self.void_on_time_bounds()
        self.tick_at(target)

    def drain_time(self, waiters: list[RefWaiter]) -> int:
        """P10, P12: with ticks on time, the most time ``waiters`` take to be
        granted one after the other, from a bucket in no debt: their units'
        time under one limit; under several, each head's slowest limit in
        turn (one limit may fill while another is short)."""
        if len(self.intervals) == 1:
            return self.time_for([sum(w.cost[0] for w in waiters)])
        return sum(self.time_for(list(w.cost)) for w in waiters)

    def do_push(
        self,
        id: int,
        level: int,
        steps: int,
        deadline: int | None,
        units: tuple[int, ...],
        flow: Hashable = None,
        patience: int | None = None,
    ) -> list[Decision]:
        """Push ``id``; with ``patience``, a ``max_wait`` that far (ns) from
        its min_wait, so that P53's bound is tried on both sides."""
        self.advance(steps)
        now = self.now
        level %= self.config.spec.levels
        at_deadline = None if deadline is None else now + self.ceil_intervals(deadline) // 8
        cost = self.config.cost(units)
        wait = self.core.min_wait(level, cost=cost, flow=flow)
        if WITH_MODEL:
            assert wait == self.model.min_wait(level, units, flow), ("P13: min_wait", wait)
        depth = self.core.queues.depths[level]  # already settled at now
        in_flow = self.core.queues.flow_depth(level, flow)
        # a permit is left now (the bucket starts full)
        free = self.core.now is None or self.core.next_due() == now
        tick_before, anyone = self.core.next_tick(), len(self.core) > 0
        max_wait = None if patience is None else max(0, wait + patience)
        if max_wait is not None:
            out = self.core.push(
                id, level, now, deadline=at_deadline, cost=cost, flow=flow, max_wait_ns=max_wait
            )
        elif flow is not None:
            out = self.core.push(id, level, now, deadline=at_deadline, cost=cost, flow=flow)
        elif units == self.model.unit:
            out = self.core.push(id, level, now, deadline=at_deadline)
        else:
            out = self.core.push(id, level, now, deadline=at_deadline, cost=cost)
        if self.core.unit_costs and at_deadline is None and anyone and not out:
            # P54: a quiet push keeps the next tick
            assert self.core.next_tick() == tick_before, ("P54", tick_before, self.core.next_tick())
        limit = None if self.config.max_waiting is None else self.config.max_waiting[level]
        per_flow = self.config.max_waiting_per_flow if self.config.flows else None
        rejected = any(d.id == id and d.state is State.REJECTED for d in out)
        expired = any(d.id == id and d.state is State.EXPIRED for d in out)
        at_once = any(d.id == id and d.state is State.GRANTED for d in out)
        too_long = any(d.id == id and d.state is State.TOO_LONG for d in out)
        # P53: refused for its max_wait if and only if its min_wait (after
        # the push's tick: the tick it just had) exceeds it; then not
        # queued, and min_wait still says what was compared.
        assert too_long == (max_wait is not None and wait > max_wait), ("P53", wait, max_wait)
        if too_long:
            assert out[-1].id == id, ("P53: decided after the refusal", out)
            assert id not in self.core, ("P53: queued", out)
            assert self.core.min_wait(level, cost=cost, flow=flow) == wait, "P53"
        # P11: rejected if and only if the level was full and the newcomer
        # was not granted at once; expired at once if and only if its
        # deadline had come and it was not granted at once. With every cost
        # 1, granted at once if and only if a permit was left.
        full = limit is not None and depth >= limit
        # ... or its flow was (P34: max_waiting_per_flow)
        full = full or (per_flow is not None and in_flow >= per_flow)
        assert rejected == (full and not at_once and not too_long), ("P11", depth, limit, out)
        late = at_deadline is not None and at_deadline <= now
        assert expired == (late and not at_once and not rejected and not too_long), (
            "P11",
            at_deadline,
            out,
        )
        if not self.config.costs:
            assert at_once == free, ("P11: a permit was left", free, out)
        if flow is not None:
            # P19: the first flow named may head another level and let an
            # earlier newcomer under FIFO pass that level's older waiters
            self.disturbances += 1
        newcomer = RefWaiter(id, level, self.model.seq, now, at_deadline, units, flow)
        self.fate[id] = State.WAITING
        self.check_decisions(out, now, newcomer)
        self.follow(out)
        self.compare(out, self.model.push(id, level, now, at_deadline, units, flow, max_wait))
        # P10 and P12 bound waits from a bucket in no debt (a settle above
        # the cost asked, or the upstream's word, can leave it owing), and
        # not paused.
        owing = any(self.model.tokens(i) < 0 for i in range(len(self.config.limits)))
        flows = self.config.flows
        paused = self.paused_until is not None and now < self.paused_until
        # (a quota in force may hold the waiters until its end, as a pause)
        paused = paused or any(self.model.quotas(i) for i in range(len(self.config.limits)))
        bounded = not self.holding and not owing and not paused
        if self.fate[id] is State.WAITING:
            # min_wait is exact only from a bucket that can fill: not paused
            late_then = self.late_ticks if not paused else -1
            self.min_wait_at_push[id] = (wait, self.disturbances, late_then)
            # (a later flow at level 0 may go first: P10 is for one flow)
            if self.config.spec.kind == "strict" and level == 0 and bounded and not flows:
                first = [w for w in self.model.waiting if w.level == 0]
                self.level0_bound[id] = now + self.drain_time(first)
        self.drain_bound = now + self.drain_time(self.model.waiting) if bounded else None
        self.take_at_once()
        return out

    def draw_flow(self, data: st.DataObject) -> Hashable:
        """The flow a waiter names: the default unless the config has flows."""
        if not self.config.flows:
            return None
        return data.draw(st.sampled_from(FLOWS), label="flow")

    def draw_units(self, data: st.DataObject) -> tuple[int, ...]:
        """A cost, one entry per limit: 1 each unless the config has costs."""
        if not self.config.costs:
            return self.model.unit
        bursts = [burst for _, burst in self.model.limits]
        units = tuple(data.draw(st.integers(0, burst), label="units") for burst in bursts)
        return units if any(units) else self.model.unit

    @rule(
        target=ids,
        level=st.integers(0, 2),
        steps=STEPS,
        deadline=st.none() | st.integers(0, 40),
        patience=st.none() | st.integers(-2, 1),
        data=st.data(),
    )
    def push(
        self,
        level: int,
        steps: int,
        deadline: int | None,
        patience: int | None,
        data: st.DataObject,
    ) -> int:
        id = self.next_id
        self.next_id += 1
        units, flow = self.draw_units(data), self.draw_flow(data)
        self.do_push(id, level, steps, deadline, units, flow, patience)
        return id

    @precondition(
        lambda self: (
            hasattr(self, "core")
            and self.config.costs
            and any(burst < 6 for _, burst in self.model.limits)
        )
    )
    @rule(data=st.data())
    def push_above_a_burst(self, data: st.DataObject) -> None:
        """P18 with costs: a cost above a limit's burst as it stands is
        refused at push, and nothing changes; the same cost asked for while
        that burst was higher (set_limit draws bursts up to 6) included."""
        bursts = [burst for _, burst in self.model.limits]
        above = data.draw(st.sampled_from([i for i, burst in enumerate(bursts) if burst < 6]))
        units = tuple(
            data.draw(st.integers(burst + 1, 6) if i == above else st.integers(0, 6))
            for i, burst in enumerate(bursts)
        )
        before = fingerprint(self.core)
        error = _refused(
            lambda: self.core.push(
                ("above", self.next_id), 0, self.now, cost=self.config.cost(units)
            ),
            PermitValueError,
            "a cost above a burst",
        )
        assert isinstance(error, PermitValueError), "P18"
        # a mapping's entry over its burst is named by its entry (the first, in the limits' order)
        over = next(i for i, (n, burst) in enumerate(zip(units, bursts, strict=True)) if n > burst)
        cost = self.config.cost(units)
        named = ("cost", cost) if isinstance(cost, int) else (f"cost[{NAMES[over]!r}]", units[over])
        assert (error.argument, error.value) == named, ("P18", error.argument, named)
        assert fingerprint(self.core) == before, "P18: a refused push changed the state"

    @rule(
        target=ids,
        levels=st.lists(st.integers(0, 2), min_size=2, max_size=8),
        steps=STEPS,
        deadline=st.none() | st.integers(0, 40),
        data=st.data(),
    )
    def push_batch(
        self, levels: list[int], steps: int, deadline: int | None, data: st.DataObject
    ) -> Any:
        """Several waiters at the same time, as a batch job queues its work."""
        pushed = []
        for i, level in enumerate(levels):
            id = self.next_id
            self.next_id += 1
            units, flow = self.draw_units(data), self.draw_flow(data)
            self.do_push(id, level, steps if i == 0 else 0, deadline, units, flow)
            pushed.append(id)
        return multiple(*pushed)

    @precondition(lambda self: hasattr(self, "core") and len(self.core) > 0)
    @rule(data=st.data())
    def cancel_waiting(self, data: st.DataObject) -> None:
        id = data.draw(st.sampled_from([w.id for w in self.model.waiting]))
        self.cancel(id)

    @rule(id=ids, level=st.integers(0, 2), steps=STEPS, patience=st.none() | st.integers(-2, 1))
    def push_again(self, id: int, level: int, steps: int, patience: int | None) -> None:
        """An id pushed before: refused while it waits, a new life otherwise
        (with ``patience``, a ``max_wait`` about its min_wait, as in
        :meth:`do_push`)."""
        self.advance(steps)
        if self.fate[id] is State.WAITING or id in self.flying():
            before = fingerprint(self.core)
            with pytest.raises(DuplicateId) as refused:
                self.core.push(id, level % self.config.spec.levels, self.now)
            assert refused.value.id == id, "P18"
            assert refused.value.argument == "id", "P18"
            assert fingerprint(self.core) == before, "P18: a refused push changed the state"
            return
        self.new_life(id, level, patience)

    @precondition(
        lambda self: (
            hasattr(self, "core")
            and self.config.max_waiting is not None
            and 0 in self.config.max_waiting
        )
    )
    @rule(id=ids)
    def push_again_never_to_queue(self, id: int) -> None:
        """An id pushed before, again, to a level that never queues
        (``max_waiting`` 0): granted at once, or rejected."""
        if self.fate[id] is State.WAITING or id in self.flying():
            return
        assert self.config.max_waiting is not None
        self.new_life(id, self.config.max_waiting.index(0))

    def new_life(self, id: int, level: int, patience: int | None = None) -> None:
        self.do_push(id, level, 0, None, self.model.unit, patience=patience)
        if self.fate[id] in (State.REJECTED, State.TOO_LONG):
            # P5, P53: a push again is a new life, even one refused at once
            # (a full level, or too long): the id's earlier grant can no
            # longer be refunded.
            before = fingerprint(self.core)
            with pytest.raises(NotRefundable):
                self.core.refund(id, self.now)
            assert fingerprint(self.core) == before, "P18: a refused refund changed the state"

    @rule(id=ids)
    def cancel(self, id: int) -> None:
        was_waiting = self.fate[id] is State.WAITING
        assert self.core.cancel(id) is was_waiting, ("P3", id, self.fate[id])
        assert self.model.cancel(id) is was_waiting
        if was_waiting:
            self.fate[id] = State.CANCELLED
            self.disturbances += 1
            self.forget(id)
        if self.core.next_tick() == self.now and self.core.now is not None:
            # P2 holds after every timed operation; a cancel takes no time,
            # and the next waiter may fit at once (a smaller cost): the
            # adapter ticks now, as next_tick() says. Not with every cost 1.
            assert not self.core.unit_costs, ("P2: a cancel left a permit available", id)
            self.tick_at(self.now)

    @rule(id=ids, steps=STEPS, data=st.data())
    def refund(self, id: int, steps: int, data: st.DataObject) -> None:
        """P5: a refund of a permit held (half the time one the model holds)
        or of one that is not, refused then."""
        self.advance(steps)
        id = self.held_or(id, data)
        now = self.now
        # P23: a permit spent is refused here, as the model knows; P24: one in
        # flight hands back its place (the model frees it).
        if not self.model.can_refund(id, now):
            before = fingerprint(self.core)
            with pytest.raises(NotRefundable) as refused:
                self.core.refund(id, now)
            assert refused.value.id == id, "P5"
            assert fingerprint(self.core) == before, "P18: a refused refund changed the state"
            return
        # P5: a refund creates at most the one permit it returns.
        out = self.core.refund(id, now)
        self.uncharge(id)
        self.fate[id] = State.REFUNDED
        self.disturbances += 1
        self.check_decisions(out, now)
        grants = [d for d in out if d.state is State.GRANTED]
        if not self.config.costs:
            # with costs, the units it returns may serve several smaller ones
            assert len(grants) <= 1, ("P5: a refund made more than one permit", out)
        self.follow(out)
        self.compare(out, self.model.refund(id, now))
        self.take_at_once()

    def held_or(self, id: int, data: st.DataObject, spent: bool = True) -> int:
        """``id``, or, half the time, an id whose permit the model holds (one
        not spent yet, unless ``spent``): ids drawn from all those pushed
        rarely hold a permit still within a settle window (P23, P29)."""
        held = [
            i for i, h in self.model.held.items() if isinstance(i, int) and (spent or not h.spent)
        ]
        if not held or not data.draw(st.booleans(), label="a held permit"):
            return id
        return data.draw(st.sampled_from(held), label="held")

    @rule(id=ids, steps=STEPS, settle_later=st.booleans(), data=st.data())
    def spend(self, id: int, steps: int, settle_later: bool, data: st.DataObject) -> None:
        """P23: a spent permit is no longer refundable (the refund rule then
        expects NotRefundable, as the model does), spending decides only
        what its tick decides (P13 compares everything with the model), and
        the machine forgets every grant before the oldest one still
        refundable. P24: a permit in flight counts from its spend. P29: one
        spent with ``settle_later`` can still be settled (the settle rule
        tries it, as the model allows), under either charge."""
        self.advance(steps)
        self.spend_at(self.held_or(id, data, spent=False), self.now, settle_later)
        self.take_at_once()

    @rule(id=ids, steps=st.integers(1, 200), settle_later=st.booleans())
    def spend_late(self, id: int, steps: int, settle_later: bool) -> None:
        """P23 with a late tick, as when the event loop lags: the spend's own
        tick may grant ``id``, which then holds a permit, and the spend
        spends it (refused as a refund from then on, not left in flight)."""
        target = self.now + self.ceil_intervals(steps) // 16
        self.void_on_time_bounds()
        self.spend_at(id, target, settle_later)
        self.take_at_once()

    @precondition(lambda self: hasattr(self, "core") and not self.at_grant and not self.holding)
    @rule()
    def hold(self) -> None:
        """The event loop stalls: the callers granted from now on do not
        resume, and their permits stay in flight (P24)."""
        self.holding = True
        self.void_on_time_bounds()

    @precondition(lambda self: hasattr(self, "holding") and self.holding)
    @rule(steps=st.integers(0, 200))
    def release(self, steps: int) -> None:
        """The stall ends ``steps`` sixteenths of an interval later, with no
        tick in between: every held caller resumes then, together (P24: the
        limit holds at the moment they proceed)."""
        target = self.now + self.ceil_intervals(steps) // 16
        self.void_on_time_bounds()
        for id in self.flying():
            self.spend_at(id, target, self.settle_later)
        self.holding = False
        self.take_at_once()

    # -- costs settled, limits changed, the upstream's word (P29-P32) --------

    @precondition(lambda self: hasattr(self, "core") and self.config.costs)
    @rule(id=ids, steps=STEPS, data=st.data())
    def settle(self, id: int, steps: int, data: st.DataObject) -> None:
        """P29: a grant settled at its actual cost, more or less than it
        asked: from then on the machine decides as if it had asked for that
        (P13), and P1 holds over the lesser of the two."""
        self.advance(steps)
        id = self.held_or(id, data)
        now = self.now
        drawn = tuple(
            data.draw(st.integers(0, burst + 2), label="actual") for _, burst in self.config.limits
        )
        actual: int | dict[str, int]
        if len(drawn) == 1:
            named, actual = {0: drawn[0]}, drawn[0]
        else:
            # The limits it names; a limit it leaves out keeps its cost.
            named = {i: n for i, n in enumerate(drawn) if data.draw(st.booleans(), label="named")}
            actual = self.config.settle(named)
        if not self.model.can_settle(id, now):
            before = fingerprint(self.core)
            with pytest.raises(NotRefundable) as refused:
                self.core.settle(id, actual, now)
            assert refused.value.id == id, "P18"
            assert fingerprint(self.core) == before, "P18: a refused settle changed the state"
            return
        held = self.model.held[id]
        out = self.core.settle(id, actual, now)
        self.disturb()
        if held.charge is None:
            self.charge(now, id, held.cost)  # spent now, for what it cost
        self.charged.pop(id).actual = tuple(named.get(i, n) for i, n in enumerate(held.cost))
        self.check_decisions(out, now)  # what the settle gave back, granted
        self.follow(out)
        self.compare(out, self.model.settle_cost(id, named, now))
        self.check_limit()
        self.take_at_once()

    @precondition(
        lambda self: (
            hasattr(self, "core")
            and self.config.costs
            and any(isinstance(i, int) and not h.spent for i, h in self.model.held.items())
        )
    )
    @rule(data=st.data())
    def spend_then_settle(self, data: st.DataObject) -> None:
        """P29 (and P23): a permit its caller spends with ``settle_later``
        can no longer be refunded but can still be settled, under either
        charge; the settle rule alone seldom finds such a permit."""
        held = [i for i, h in self.model.held.items() if isinstance(i, int) and not h.spent]
        id = data.draw(st.sampled_from(held), label="held")
        self.spend_at(id, self.now, settle_later=True)
        self.settle(id, 0, data)

    @precondition(lambda self: hasattr(self, "core") and self.config.costs)
    @rule(
        limit=st.integers(0, 1),
        rate=st.sampled_from([1, 3, Fraction(7, 2), 100, 1000]),
        burst=st.integers(1, 6),
        steps=STEPS,
    )
    def set_limit(self, limit: int, rate: Any, burst: int, steps: int) -> None:
        """P30: a limit changed at now: the units in the bucket carry over,
        never more than the new burst (the model replays it), and from then
        on P1 holds under the new limit. A burst below a waiting cost is
        refused, and nothing changes; ``waiting_above`` names the waiters
        such a burst would leave waiting for nothing, in push order."""
        self.advance(steps)
        i = limit % len(self.config.limits)
        name = None if self.config.second is None else NAMES[i]
        asked = max(
            (
                w.cost[i]
                for w in self.model.waiting
                if w.deadline is None or w.deadline > self.now  # (the change expires these)
            ),
            default=0,
        )
        above = [w.id for w in self.model.waiting if w.cost[i] > burst]
        assert [w.id for w in self.core.waiting_above(burst, limit=name)] == above, "P30"
        if burst < asked:
            before = fingerprint(self.core)
            error = _refused(
                lambda: self.core.set_limit(self.now, rate=rate, burst=burst, limit=name),
                PermitValueError,
                "a burst below a waiting cost",
            )
            assert isinstance(error, PermitValueError), "P18"
            assert error.argument == "burst", "P18"
            assert fingerprint(self.core) == before, "P18: a refused change changed the state"
            return
        out = self.core.set_limit(self.now, rate=rate, burst=burst, limit=name)
        self.disturb()
        self.order += 1
        self.changed[i] = self.order
        old_rate, old_burst = self.model.limits[i]
        most = burst + math.floor(Fraction(rate) / NS)
        self.lowered[i] |= most < old_burst + math.floor(old_rate / NS)
        self.check_decisions(out, self.now)
        self.follow(out)
        self.compare(out, self.model.set_limit(self.now, i, Fraction(rate), burst))
        self.intervals[i] = SECOND / Fraction(rate)
        if i == 0:
            self.interval = self.intervals[0]
        self.take_at_once()

    @precondition(lambda self: hasattr(self, "core") and self.config.costs)
    @rule(steps=STEPS, length=st.integers(0, 64))
    def pause(self, steps: int, length: int) -> None:
        """P31: after pause_until(t), nothing is granted before t (checked at
        every grant), and then the backlog resumes as the model does."""
        self.advance(steps)
        until = self.now + self.ceil_intervals(length) // 8
        out = self.core.pause_until(until, self.now)
        self.void_on_time_bounds()  # (P19's bound holds: it only delays)
        self.paused_until = max(until, self.paused_until or until)
        self.check_decisions(out, self.now)
        self.follow(out)
        self.compare(out, self.model.pause_until(until, self.now))
        stats = self.core.statistics()
        assert (stats.pauses, stats.paused_ns) == (
            self.model.pauses,
            self.model.paused_ns(),
        ), ("P46", stats.pauses, stats.paused_ns, self.model.pause_spans)

    @precondition(lambda self: hasattr(self, "core") and self.config.costs)
    @rule(limit=st.integers(0, 1), remaining=st.integers(0, 6), length=st.integers(0, 64))
    def adopt(self, limit: int, remaining: int, length: int) -> None:
        """P32: the upstream says `remaining` units are left until `reset`:
        nothing falls due earlier because of it (next_due and min_wait only
        grow), and until `reset` no more than `remaining` are charged."""
        self.upstream_word("P32", self.core.adopt, self.model.adopt, limit, remaining, length)

    @precondition(lambda self: hasattr(self, "core") and self.config.costs)
    @rule(limit=st.integers(0, 1), remaining=st.integers(0, 6), length=st.integers(0, 64))
    def quota(self, limit: int, remaining: int, length: int) -> None:
        """P52: the upstream's quota, `remaining` units until `reset`, as
        P32 says of adopt; and (P13) the model's rule: within the quota the
        bucket paces as before."""
        self.upstream_word("P52", self.core.quota, self.model.limit_quota, limit, remaining, length)

    def upstream_word(
        self,
        pid: str,
        word: Callable[..., list[Decision]],
        model_word: Callable[..., list[Any]],
        limit: int,
        remaining: int,
        length: int,
    ) -> None:
        """The upstream's ``word`` (``adopt``, P32, or ``quota``, P52) at the
        current time, checked, and the model's ``model_word`` beside it."""
        i = limit % len(self.config.limits)
        name = None if self.config.second is None else NAMES[i]
        now = self.now
        if self.core.now is not None:
            self.tick_at(now)  # after a cancel, the next waiter may fit now
        reset = now + self.ceil_intervals(length) // 8
        due_before = self.core.next_due()
        waits = self.every_min_wait()
        out = word(remaining, reset, now, limit=name)
        assert not any(d.state is State.GRANTED for d in out), (pid, "granted", out)
        due = self.core.next_due()
        if due_before is not None and self.core.now is not None:
            assert due is None or due >= due_before, (pid, "a permit due sooner", due)
        after = self.every_min_wait()
        assert all(a >= b for a, b in zip(after, waits, strict=True)), (pid, waits, after)
        self.void_on_time_bounds()  # (P19's bound holds: it only delays)
        self.order += 1
        self.adopted.append((pid, i, self.order, remaining, reset))
        self.check_decisions(out, now)
        self.follow(out)
        self.compare(out, model_word(remaining, reset, now, i))

    def every_min_wait(self) -> list[int]:
        """``min_wait`` at every level, for a cost of one unit and for the
        largest cost each limit admits now, in the default flow and in each
        named one (P32, P52: the upstream's word raises none of them)."""
        largest = self.config.cost(tuple(burst for _, burst in self.model.limits))
        flows = FLOWS if self.config.flows else (None,)
        return [
            self.core.min_wait(level, cost=cost, flow=flow)
            for level in range(self.config.spec.levels)
            for cost in (1, largest)
            for flow in flows
        ]

    # -- bad input: a documented error, and nothing changes (P18) -------------

    @rule(
        bad=st.sampled_from(
            [
                "level-bool",
                "level-float",
                "level-negative",
                "level-high",
                "level-str",
                "now-float",
                "now-back",
                "deadline-float",
                "max_wait_ns-negative",
                "max_wait_ns-float",
                "max_wait_ns-bool",
                "id-unhashable",
                "flow-unhashable",
            ]
        )
    )
    def push_bad(self, bad: str) -> None:
        """P18: every bad push raises a documented error naming the argument
        (a ``max_wait_ns`` too: P53)."""
        levels = self.config.spec.levels
        args: dict[str, Any] = {"id": ("bad", self.next_id), "level": 0, "now": self.now}
        deadline: Any = None
        max_wait: Any = None
        expected: type[Exception] = PermitValueError
        argument = bad.split("-")[0]
        if bad == "level-bool":
            args["level"], expected = True, PermitTypeError
        elif bad == "level-float":
            args["level"], expected = 0.0, PermitTypeError
        elif bad == "level-negative":
            args["level"] = -1
        elif bad == "level-high":
            args["level"] = levels
        elif bad == "level-str":
            args["level"], expected = "0", PermitTypeError
        elif bad == "now-float":
            args["now"], expected = float(self.now), PermitTypeError
        elif bad == "now-back":
            if self.core.now is None:
                return
            args["now"], expected = self.now - 1, TimeWentBackwards
        elif bad == "deadline-float":
            deadline, expected = self.now + 0.5, PermitTypeError
        elif bad == "max_wait_ns-negative":
            max_wait = -1
        elif bad == "max_wait_ns-float":
            max_wait, expected = 0.5, PermitTypeError
        elif bad == "max_wait_ns-bool":
            max_wait, expected = True, PermitTypeError
        elif bad == "id-unhashable":
            args["id"], expected = ["unhashable"], PermitTypeError
        flow: Any = None
        if bad == "flow-unhashable":
            flow, expected = {"tenant": 1}, PermitTypeError
        before = fingerprint(self.core)
        error = _refused(
            lambda: self.core.push(
                args["id"],
                args["level"],
                args["now"],
                deadline=deadline,
                flow=flow,
                max_wait_ns=max_wait,
            ),
            expected,
            f"a push with {bad}",
        )
        assert isinstance(error, (PermitValueError, PermitTypeError)), "P18"
        assert error.argument == argument, ("P18", error.argument, argument)
        assert f"{argument}=" in str(error), ("P18", str(error))
        assert fingerprint(self.core) == before, ("P18: a refused push changed the state", bad)

    @rule(back=st.integers(1, 10**9), refund=st.booleans())
    def tick_or_cancel_bad(self, back: int, refund: bool) -> None:
        """P18: time never goes backwards; cancelling or refunding an id that
        was never pushed is a clear answer; none of it changes anything."""
        before = fingerprint(self.core)
        if self.core.now is not None:
            operation = self.core.refund if refund else self.core.tick
            args = (0, self.now - back) if refund else (self.now - back,)
            with pytest.raises(TimeWentBackwards) as backwards:
                operation(*args)
            assert backwards.value.last == self.now, "P18"
            assert backwards.value.argument == "now", "P18"
        assert self.core.cancel(("never", "pushed")) is False
        with pytest.raises(NotRefundable):
            self.core.refund(("never", "pushed"), self.now)
        assert fingerprint(self.core) == before

    @rule(
        bad=st.sampled_from(
            [
                "tick-now-float",
                "tick-now-str",
                "refund-now-float",
                "refund-id-unhashable",
                "cancel-id-unhashable",
                "spend-id-unhashable",
                "spend-now-float",
                "min_wait-level-bool",
                "min_wait-level-high",
                "min_wait-cost-negative",
                "push-cost-negative",
                "push-cost-float",
                "push-cost-bool",
                "push-cost-zero",
                "push-cost-burst",
                "push-cost-unknown",
                "settle-actual-negative",
                "settle-actual-float",
                "settle-id-unhashable",
                "spend-settle_later-int",
                "take-settle_later-int",
                "take-cost-negative",
                "take-level-high",
                "take-now-float",
                "take-id-unhashable",
                "take-flow-unhashable",
                "set_limit-rate-nothing",
                "set_limit-rate-zero",
                "set_limit-rate-nan",
                "set_limit-burst-zero",
                "set_limit-limit-unknown",
                "waiting_above-units-negative",
                "waiting_above-units-float",
                "waiting_above-limit-unknown",
                "pause_until-until-past",
                "pause_until-until-float",
                "adopt-remaining-negative",
                "adopt-reset-past",
                "adopt-limit-int",
                "min_wait-flow-unhashable",
                "busiest_flows-n-negative",
                "busiest_flows-level-high",
            ]
        )
    )
    def other_bad(self, bad: str) -> None:
        """P18: the other operations' bad input, as for push: the documented
        error naming the argument, and nothing changes."""
        core, now, levels = self.core, self.now, self.config.spec.levels
        unhashable: Any = ["unhashable"]
        fresh = ("bad", self.next_id)
        name = None if self.config.second is None else NAMES[0]
        big = self.config.cost(tuple(burst + 1 for _, burst in self.model.limits))
        calls: dict[str, tuple[Any, type[Exception]]] = {
            "tick-now-float": (lambda: core.tick(float(now)), PermitTypeError),  # type: ignore[arg-type]
            "tick-now-str": (lambda: core.tick(str(now)), PermitTypeError),  # type: ignore[arg-type]
            "refund-now-float": (lambda: core.refund(0, float(now)), PermitTypeError),  # type: ignore[arg-type]
            "refund-id-unhashable": (lambda: core.refund(unhashable, now), PermitTypeError),
            "cancel-id-unhashable": (lambda: core.cancel(unhashable), PermitTypeError),
            "spend-id-unhashable": (lambda: core.spend(unhashable, now), PermitTypeError),
            "spend-now-float": (lambda: core.spend(0, float(now)), PermitTypeError),  # type: ignore[arg-type]
            "min_wait-level-bool": (lambda: core.min_wait(True), PermitTypeError),
            "min_wait-flow-unhashable": (
                lambda: core.min_wait(0, flow=unhashable),
                PermitTypeError,
            ),
            "busiest_flows-n-negative": (lambda: core.busiest_flows(0, -1), PermitValueError),
            "busiest_flows-level-high": (
                lambda: core.busiest_flows(levels),
                PermitValueError,
            ),
            "min_wait-level-high": (lambda: core.min_wait(levels), PermitValueError),
            "min_wait-cost-negative": (lambda: core.min_wait(0, cost=-1), PermitValueError),
            "push-cost-negative": (lambda: core.push(fresh, 0, now, cost=-1), PermitValueError),
            "push-cost-float": (lambda: core.push(fresh, 0, now, cost=1.5), PermitTypeError),  # type: ignore[arg-type]
            "push-cost-bool": (lambda: core.push(fresh, 0, now, cost=True), PermitTypeError),
            "push-cost-zero": (lambda: core.push(fresh, 0, now, cost=0), PermitValueError),
            # P28: a cost beyond a limit's burst could never be granted
            "push-cost-burst": (lambda: core.push(fresh, 0, now, cost=big), PermitValueError),
            "push-cost-unknown": (
                lambda: core.push(fresh, 0, now, cost={"x": 1}),
                PermitValueError,
            ),
            "settle-actual-negative": (lambda: core.settle(0, -1, now), PermitValueError),
            "settle-actual-float": (lambda: core.settle(0, 0.5, now), PermitTypeError),  # type: ignore[arg-type]
            "settle-id-unhashable": (lambda: core.settle(unhashable, {}, now), PermitTypeError),
            "spend-settle_later-int": (lambda: core.spend(0, now, settle_later=1), PermitTypeError),  # type: ignore[arg-type]
            "take-settle_later-int": (
                lambda: core.take(fresh, 0, now, settle_later=1),  # type: ignore[arg-type]
                PermitTypeError,
            ),
            "take-cost-negative": (lambda: core.take(fresh, 0, now, cost=-1), PermitValueError),
            "take-level-high": (lambda: core.take(fresh, levels, now), PermitValueError),
            "take-now-float": (lambda: core.take(fresh, 0, float(now)), PermitTypeError),  # type: ignore[arg-type]
            "take-id-unhashable": (lambda: core.take(unhashable, 0, now), PermitTypeError),
            "take-flow-unhashable": (
                lambda: core.take(fresh, 0, now, flow=unhashable),
                PermitTypeError,
            ),
            "set_limit-rate-nothing": (lambda: core.set_limit(now, limit=name), PermitTypeError),
            "set_limit-rate-zero": (
                lambda: core.set_limit(now, rate=0, limit=name),
                PermitValueError,
            ),
            "set_limit-rate-nan": (
                lambda: core.set_limit(now, rate=float("nan"), limit=name),
                PermitValueError,
            ),
            "set_limit-burst-zero": (
                lambda: core.set_limit(now, burst=0, limit=name),
                PermitValueError,
            ),
            "set_limit-limit-unknown": (lambda: core.set_limit(now, limit="x"), PermitValueError),
            "waiting_above-units-negative": (
                lambda: core.waiting_above(-1, limit=name),
                PermitValueError,
            ),
            "waiting_above-units-float": (
                lambda: core.waiting_above(1.5, limit=name),  # type: ignore[arg-type]
                PermitTypeError,
            ),
            "waiting_above-limit-unknown": (
                lambda: core.waiting_above(1, limit="x"),
                PermitValueError,
            ),
            "pause_until-until-past": (lambda: core.pause_until(now - 1, now), PermitValueError),
            "pause_until-until-float": (lambda: core.pause_until(now + 0.5, now), PermitTypeError),  # type: ignore[arg-type]
            "adopt-remaining-negative": (
                lambda: core.adopt(-1, now, now, limit=name),
                PermitValueError,
            ),
            "adopt-reset-past": (lambda: core.adopt(1, now - 1, now, limit=name), PermitValueError),
            "adopt-limit-int": (lambda: core.adopt(1, now, now, limit=0), PermitTypeError),  # type: ignore[arg-type]
        }
        call, expected = calls[bad]
        argument = bad.split("-")[1]
        if bad == "push-cost-burst" and isinstance(big, dict):  # named by its entry: the first
            argument = f"cost[{next(iter(big))!r}]"
        before = fingerprint(core)
        error = _refused(call, expected, bad)
        assert isinstance(error, (PermitValueError, PermitTypeError)), "P18"
        assert error.argument == argument, ("P18", error.argument, argument)
        assert f"{argument}=" in str(error), ("P18", str(error))
        assert unhashable not in core, "P18: an unhashable id is simply not waiting"
        assert fingerprint(core) == before, ("P18: a refused call changed the state", bad)

    # -- invariants -----------------------------------------------------------

    @invariant()
    def check_internals(self) -> None:
        """P15 (bounded queues and heaps), P37 (a flow is kept only while it has
        waiters) and every other internal invariant."""
        if hasattr(self, "core"):
            self.core.check_valid()

    @invariant()
    def check_work_conservation(self) -> None:
        """P2: after every operation, if anyone waits, no permit is available
        (none falls due at all while those in flight fill the bucket)."""
        if hasattr(self, "core") and len(self.core) and self.core.now is not None:
            due = self.core.next_due()
            assert due is not None or self.core.in_flight, "P2"
            assert due is None or due > self.core.now, ("P2", due, self.core.now)

    @invariant()
    def check_in_flight(self) -> None:
        """P24: per limit, at most burst + floor(rate * 1 ns) units are in
        flight, the ones the model holds; none when charged at the grant."""
        if not hasattr(self, "core"):
            return
        count = self.core.in_flight
        pacing = self.core.snapshot().pacing
        assert pacing is not None
        if self.at_grant:
            assert count == 0, ("P24", count)
            assert all(bucket[5] == 0 for bucket in pacing), ("P24", pacing)
            return
        for i, ((rate, burst), bucket) in enumerate(zip(self.model.limits, pacing, strict=True)):
            held = bucket[5]
            assert isinstance(held, int)
            most = burst + math.floor(rate / NS)
            assert held <= most or self.lowered[i], ("P24: too much in flight", held, most)
            if WITH_MODEL:
                assert held == self.model.in_flight(i), ("P24", i, held, self.model.in_flight(i))
        if WITH_MODEL:
            assert count == len(self.flying()), ("P24", count, self.flying())

    @invariant()
    def check_conservation(self) -> None:
        """P3: every pushed id is in exactly one state, and the counters add up."""
        if not hasattr(self, "core"):
            return
        waiting = {id for id, fate in self.fate.items() if fate is State.WAITING}
        assert {w.id for w in self.core.waiting()} == waiting, "P3"
        for level in self.core.statistics().levels:
            assert level.pushed == (
                level.waiting
                + level.granted
                + level.cancelled
                + level.rejected
                + level.expired
                + level.too_long
            ), ("P3", level)
            assert 0 <= level.refunded <= level.granted, ("P3", level)

    @invariant()
    def check_bounds_on_time(self) -> None:
        """P10 and P12, while ticks come on time: no level-0 waiter under strict
        priority is still waiting past its bound, and nobody at all past the
        drain bound set by the last push."""
        if not hasattr(self, "core"):
            return
        now = self.now
        for id, bound in self.level0_bound.items():
            if self.fate[id] is State.WAITING:
                assert now < bound, ("P10", id, now, bound)
        if self.drain_bound is not None and now >= self.drain_bound:
            assert len(self.core) == 0, (
                "P12",
                now,
                self.drain_bound,
                len(self.core),
                self.model.events,
                [(w.id, w.pushed_at, w.cost) for w in self.model.waiting],
            )

    @invariant()
    def check_same_as_model(self) -> None:
        """P13: the same waiters in the same order, the same times, the same
        counters; quantiles within RELATIVE_ERROR of exact, maximum exact.
        P27 with it: the model grants only the waiter its policy chooses;
        P34 too: the model serves a level's flows by SPEC's literal rule;
        P96: the model holds a waiter only by the limits it takes from."""
        if not hasattr(self, "core") or not WITH_MODEL:
            return
        model = self.model
        assert [w.id for w in self.core.waiting()] == [w.id for w in model.waiting], "P13"
        due, tick = self.core.next_due(), self.core.next_tick()
        assert due == model.next_due(), ("P13: next_due", due, model.next_due())
        assert tick == model.next_tick(), (
            "P13: next_tick",
            tick,
            model.next_tick(),
            self.core.snapshot().pacing,
            model.events,
            [(w.id, w.level, w.cost) for w in model.waiting],
            model.paused_until,
        )
        assert self.core.queues.depths == model.depths(), "P13"
        if self.config.spec.kind == "shares" and not model.follow:
            # the deal so far: slots dealt, and each level's credit
            deal = self.core.snapshot().policy_state
            assert isinstance(deal, Deal)
            assert (deal.position, list(deal.credits)) == (model.dealt, model.credits), "P13"
        for level in range(self.config.spec.levels):
            assert self.core.min_wait(level) == model.min_wait(level), ("P13: min_wait", level)
        statistics = self.core.statistics()
        snapshot = self.core.snapshot()
        assert (snapshot.now, snapshot.in_flight, snapshot.statistics) == (
            self.core.now,
            self.core.in_flight,
            statistics,
        ), "P13: the snapshot says what the readers say"
        assert snapshot.granted == statistics.granted, "P13"
        due = self.core.next_due()
        assert due is None or due == max(snapshot.due, self.now), ("P13", due, snapshot.due)
        waiting = [list(lv) for lv in snapshot.waiting]
        assert waiting == [self.core.waiting(lv) for lv in range(self.config.spec.levels)], "P13"
        assert snapshot.seq == model.seq, "P13: the push counter"
        assert len(snapshot.flows) == self.config.spec.levels, "P13"
        assert snapshot.pacing is not None
        assert len(snapshot.pacing) == len(self.config.limits), "P13"
        proceeded = [ref.granted - ref.refunded for ref in model.stats]
        total = sum(proceeded)
        assert statistics.shares() == tuple(n / total if total else 0.0 for n in proceeded), "P13"
        for stats, ref in zip(statistics.levels, model.stats, strict=True):
            counts = (
                stats.pushed,
                stats.granted,
                stats.cancelled,
                stats.refunded,
                stats.rejected,
                stats.expired,
                stats.too_long,
            )
            assert counts == (
                ref.pushed,
                ref.granted,
                ref.cancelled,
                ref.refunded,
                ref.rejected,
                ref.expired,
                ref.too_long,
            ), ("P13", stats, ref)
            assert stats.wait_max_ns == (max(ref.waits) if ref.waits else None), "P13"
            # P17: the sum of the waits, exact
            assert stats.wait_total_ns == sum(ref.waits), ("P17", stats.wait_total_ns, ref.waits)
            assert stats.wait_max_s == (max(ref.waits) / 1e9 if ref.waits else 0.0), "P13"
            # P3 in units: net of refunds and settles, as the model counts them
            assert list(stats.units_granted) == (ref.units or [0] * len(self.config.limits)), (
                "P13: units granted",
                stats.units_granted,
                ref.units,
            )
            seconds = (stats.wait_p50_s, stats.wait_p99_s)
            assert seconds == tuple(
                0.0 if ns is None else ns / 1e9 for ns in (stats.wait_p50_ns, stats.wait_p99_ns)
            ), "P13"
            for got, q in ((stats.wait_p50_ns, 0.5), (stats.wait_p99_ns, 0.99)):
                exact = nearest_rank(ref.waits, q)
                if exact is None:
                    assert got is None
                else:
                    assert got is not None, ("P17", q)
                    assert abs(got - exact) <= RELATIVE_ERROR * exact, ("P17", q, got, exact)

    def teardown(self) -> None:
        if not hasattr(self, "core"):
            return
        stats = self.core.statistics()
        for name in ("granted", "refunded", "expired", "rejected", "too_long", "cancelled"):
            total = sum(getattr(level, name) for level in stats.levels)
            event(f"{name}: {'0' if not total else '1-4' if total < 5 else '5+'}")


def machine_for(kind: str) -> type[PolicyMachine]:
    class Machine_(PolicyMachine):
        @initialize(
            config=configs(kind, charges=(Charge.AT_GRANT, Charge.AT_SPEND), costs=True, flows=True)
        )
        def setup(self, config: Config) -> None:
            self._setup(config)

    Machine_.__name__ = Machine_.__qualname__ = f"{kind.title()}Machine"
    return Machine_


TestFifo = machine_for("fifo").TestCase
TestStrictPriority = machine_for("strict").TestCase
TestShares = machine_for("shares").TestCase
TestAging = machine_for("aging").TestCase
TestUserPolicy = machine_for("user").TestCase
