"""P25: spending at once is charging at the grant, over every operation.

Two machines made alike but for their charge, A at the grant
(``Charge.AT_GRANT``) and B at the spend (``Charge.AT_SPEND``), receive the
same operations, and every permit either grants is spent at once, at its
grant's time (maybe to be settled later). They must decide alike, and say
alike when the next permit falls due, when they next need a tick and how
long a newcomer would wait at least; B never holds a permit in flight.
The operations are every one the core has for a paced machine: pushes
(costs, several limits, flows, deadlines, a ``max_wait``), ticks on time
and late, cancels, refunds (refused: each permit is spent), settles,
changes of a limit, pauses, the upstream's word and its quota; the last
three at a time the machines were ticked to, as P25 says: one whose own
tick grants a permit finds that permit in flight on B, to be charged after
it (the quota then counts it, the word's bucket charges it on top, and a
change's rounding to a whole nanosecond comes before it), where A charged
it before.
(``test_laws.py::test_spending_at_once_is_charging_at_the_grant`` runs
the same law on scripts of unit costs under one limit.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from fractions import Fraction
from typing import Any

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from permits.core import (
    Charge,
    Decision,
    Machine,
    NotRefundable,
    PermitValueError,
    State,
)

from configs import FLOWS, KINDS, NAMES, Config, configs
from harness import rows, spent_at_once


class SpendingAtOnce(RuleBasedStateMachine):
    a: Machine
    b: Machine

    @initialize(
        config=st.sampled_from(KINDS).flatmap(lambda kind: configs(kind, costs=True, flows=True)),
        settle_later=st.booleans(),
    )
    def setup(self, config: Config, settle_later: bool) -> None:
        note(repr(config))
        self.config = config
        self.a = dataclasses.replace(config, charge=Charge.AT_GRANT).machine()
        self.b = dataclasses.replace(config, charge=Charge.AT_SPEND).machine()
        self.settle_later = settle_later
        self.levels = config.spec.levels
        self.step = config.interval
        self.now = config.origin
        self.next_id = 0
        #: the ids granted so far, to refund or settle
        self.granted: list[Hashable] = []

    def spent(self, machine: Machine, decisions: list[Decision]) -> list[Decision]:
        """``decisions``, each permit granted among them spent at its grant
        (and those that spending grants, in turn), the ids granted noted."""
        out = spent_at_once(machine, decisions, settle_later=self.settle_later)
        self.granted += [d.id for d in out if d.state is State.GRANTED]
        return out

    def both(self, operation: str, *args: Any, **kwargs: Any) -> None:
        """``operation`` on A and on B: the same decisions, or the same error."""
        answers: list[object] = []
        for machine in (self.a, self.b):
            try:
                answers.append(
                    rows(self.spent(machine, getattr(machine, operation)(*args, **kwargs)))
                )
            except (NotRefundable, PermitValueError) as error:
                answers.append((type(error).__name__, error.argument))
        note(f"{operation}{args} {kwargs} -> {answers[1]}")
        assert answers[0] == answers[1], ("P25", operation, args, kwargs, answers)

    def units(self, data: st.DataObject, least: int = 1, more: int = 0) -> Any:
        """A cost as a push says it (with ``least`` 0, maybe none; with
        ``more``, up to that many units past each burst, as a settle may)."""
        if not self.config.costs:
            return 1
        bursts = [burst for _, burst in self.config.limits]
        units = tuple(data.draw(st.integers(0, burst + more)) for burst in bursts)
        if not any(units):
            return 0 if least == 0 else 1
        return self.config.cost(units)

    def later(self, eighths: int) -> int:
        return self.now + int(self.step * eighths) // 8

    @rule(
        level=st.integers(0, 2),
        steps=st.integers(0, 16),
        deadline=st.none() | st.integers(0, 24),
        max_wait=st.none() | st.integers(0, 24),
        data=st.data(),
    )
    def push(
        self,
        level: int,
        steps: int,
        deadline: int | None,
        max_wait: int | None,
        data: st.DataObject,
    ) -> None:
        self.now = self.later(steps)
        flow = data.draw(st.sampled_from(FLOWS)) if self.config.flows else None
        self.both(
            "push",
            self.next_id,
            level % self.levels,
            self.now,
            deadline=None if deadline is None else self.later(deadline),
            cost=self.units(data),
            flow=flow,
            max_wait_ns=None if max_wait is None else int(self.step * max_wait) // 8,
        )
        self.next_id += 1

    @rule(data=st.data())
    def tick_on_time(self, data: st.DataObject) -> None:
        """A tick at the next tick the machines ask for, if any."""
        at = self.b.next_tick()
        assert at == self.a.next_tick(), "P25: next_tick"
        if at is not None and at >= self.now:
            self.now = at
            self.both("tick", self.now)

    @rule(steps=st.integers(0, 64))
    def tick(self, steps: int) -> None:
        self.now = self.later(steps)
        self.both("tick", self.now)

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        waiting = [w.id for w in self.b.waiting()]
        if waiting:
            id = data.draw(st.sampled_from(waiting))
            note(f"cancel({id!r})")
            assert self.a.cancel(id) is self.b.cancel(id) is True, "P25: cancel"

    @rule(data=st.data(), refund=st.booleans(), steps=st.integers(0, 8))
    def refund_or_settle(self, data: st.DataObject, refund: bool, steps: int) -> None:
        """A permit granted (and spent) is refunded, refused alike on both,
        or settled for another cost, within its window or past it."""
        if not self.granted:
            return
        self.now = self.later(steps)
        id = data.draw(st.sampled_from(self.granted))
        if refund:
            self.both("refund", id, self.now)
        else:
            self.both("settle", id, self.units(data, least=0, more=2), self.now)

    @rule(
        limit=st.integers(0, 1),
        rate=st.sampled_from([1, 3, Fraction(7, 2), 100, 1000]),
        burst=st.integers(1, 6),
        steps=st.integers(0, 16),
    )
    def set_limit(self, limit: int, rate: Any, burst: int, steps: int) -> None:
        """A change of limit (refused alike for a burst below a waiting cost),
        at a time the machines were ticked to (P25's condition)."""
        self.now = self.later(steps)
        self.both("tick", self.now)
        name = None if self.config.second is None else NAMES[limit % 2]
        self.both("set_limit", self.now, rate=rate, burst=burst, limit=name)

    @rule(steps=st.integers(0, 64))
    def pause(self, steps: int) -> None:
        self.both("pause_until", self.later(steps), self.now)

    @rule(
        quota=st.booleans(),
        limit=st.integers(0, 1),
        remaining=st.integers(0, 6),
        steps=st.integers(0, 64),
    )
    def upstream(self, quota: bool, limit: int, remaining: int, steps: int) -> None:
        """The upstream's word (``adopt``) or its quota, at a time the
        machines were ticked to: a permit its own tick granted would be in
        flight across it on B, and charged after it (P25's condition)."""
        self.both("tick", self.now)
        name = None if self.config.second is None else NAMES[limit % 2]
        word = "quota" if quota else "adopt"
        self.both(word, remaining, self.later(steps), self.now, limit=name)

    @invariant()
    def same_answers(self) -> None:
        """P25: the same due time, next tick and ``min_wait`` (for one unit
        and for the largest cost, in every flow); nothing in flight."""
        if not hasattr(self, "a"):
            return
        assert self.b.in_flight == 0, ("P25: a permit left in flight", self.b.in_flight)
        assert self.a.next_due() == self.b.next_due(), ("P25: next_due", self.a.next_due())
        assert self.a.next_tick() == self.b.next_tick(), ("P25: next_tick", self.a.next_tick())
        largest = self.config.cost(tuple(limit.burst for limit in self.b.limits.values()))
        flows = FLOWS if self.config.flows else (None,)
        for level in range(self.levels):
            for cost in (1, largest):
                for flow in flows:
                    waits = [m.min_wait(level, cost=cost, flow=flow) for m in (self.a, self.b)]
                    assert waits[0] == waits[1], ("P25: min_wait", level, cost, flow, waits)
        assert [w.id for w in self.a.waiting()] == [w.id for w in self.b.waiting()], "P25"


TestSpendingAtOnce = SpendingAtOnce.TestCase
