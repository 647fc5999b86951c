"""P47: take is push then spend when a permit is free, and a tick otherwise;
P101: try_take is take without its decisions; P55: a machine that keeps no
waits decides as one that does.

Two machines, A and B, receive the same operations, except for the
acquires that try for a permit free at once: A calls ``take``; B tries the
same push on a copy of itself and, if nobody was waiting and the push granted
the newcomer at once, keeps the copy and spends the permit at the same time;
if not, B only ticks. A also calls ``try_take`` where B calls ``take``.
After every step the two must be the same machine: equal decisions and
equal snapshots (waiters, pacing, ledger and log, flows, the policy's
state, statistics).

The same driver checks P55: there A keeps its waits and B, made with
``keep_waits=False``, does not, and both receive every operation alike
(``take`` included). They must decide alike, keep the same state, and count
alike; only B's statistics of waits are ``None``, and B refuses to read
the histograms it does not keep.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable
from typing import Any

import attrs
import pytest
from hypothesis import event, note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from permits.core import (
    Charge,
    DuplicateId,
    Fifo,
    Machine,
    NotRefundable,
    PermitValueError,
    State,
)

from configs import FLOWS, KINDS, Config, configs
from harness import fingerprint, rows


class TakeIsPushThenSpend(RuleBasedStateMachine):
    a: Machine
    b: Machine
    #: The promise the two machines are held to.
    promise = "P47"

    @initialize(
        config=st.sampled_from(KINDS).flatmap(
            lambda kind: configs(
                kind, charges=(Charge.AT_GRANT, Charge.AT_SPEND), costs=True, flows=True
            )
        )
    )
    def setup(self, config: Config) -> None:
        note(repr(config))
        self.config = config
        self.a = config.machine()
        self.b = config.machine(keep_waits=self.promise != "P55")
        self.levels = config.spec.levels
        self.step = config.interval
        self.now = config.origin
        self.next_id = 0
        self.taken = 0
        self.declined = 0

    def both(self, operation: str, *args: Any, **kwargs: Any) -> None:
        out_a = getattr(self.a, operation)(*args, **kwargs)
        out_b = getattr(self.b, operation)(*args, **kwargs)
        assert rows(out_a) == rows(out_b), (self.promise, operation, rows(out_a), rows(out_b))

    def draw_cost(self, data: st.DataObject) -> Any:
        if not self.config.costs:
            return 1
        bursts = [burst for _, burst in self.config.limits]
        units = tuple(data.draw(st.integers(0, burst)) for burst in bursts)
        if not any(units):
            units = (1, *units[1:])
        return self.config.cost(units)

    def draw_flow(self, data: st.DataObject) -> Hashable:
        return data.draw(st.sampled_from(FLOWS)) if self.config.flows else None

    @rule(
        level=st.integers(0, 2),
        settle_later=st.booleans(),
        steps=st.integers(0, 24),
        data=st.data(),
    )
    def take(
        self, level: int, settle_later: bool, steps: int, data: st.DataObject, id: Any = None
    ) -> None:
        """``steps`` eighths of an interval later, A's take against B's
        push-then-spend, tried on a copy: the machines ticked to that time
        first, or not (as an adapter's take comes: its own tick grants what
        fell due, and expires what is past its deadline, before it looks)."""
        if data.draw(st.booleans()):
            self.tick(steps)
        else:
            self.now += int(self.step * steps) // 8
        if id is None:
            id = self.next_id
            self.next_id += 1
        level = level % self.levels
        cost, flow = self.draw_cost(data), self.draw_flow(data)
        if cost == 1 and flow is None and not settle_later and data.draw(st.booleans()):
            out_a = self.a.take(id, level, self.now)  # the defaults: cost 1, no flow, no settle
        else:
            out_a = self.a.take(
                id, level, self.now, cost=cost, flow=flow, settle_later=settle_later
            )
        trial = copy.deepcopy(self.b)
        out_b = trial.tick(self.now)
        if not len(trial):  # nobody waits: push, and see whether it is granted at once
            pushed = trial.push(id, level, self.now, cost=cost, flow=flow)
            if pushed and pushed[-1].id == id and pushed[-1].state is State.GRANTED:
                trial.spend(id, self.now, settle_later=settle_later)
                self.b = trial
                out_b += pushed
                self.taken += 1
                assert out_a, "P47: take declined a permit that was free"
                assert out_a[-1].id == id, "P47: take declined a permit that was free"
                assert rows(out_a) == rows(out_b), ("P47", rows(out_a), rows(out_b))
                return
        out_b = self.b.tick(self.now)
        self.declined += 1
        assert all(d.id != id for d in out_a), "P47: take decided for a permit not free"
        assert rows(out_a) == rows(out_b), ("P47", rows(out_a), rows(out_b))

    @rule(
        level=st.integers(0, 2),
        settle_later=st.booleans(),
        steps=st.integers(0, 24),
        data=st.data(),
    )
    def try_take(self, level: int, settle_later: bool, steps: int, data: st.DataObject) -> None:
        """P101: ``steps`` eighths of an interval later, A's ``try_take``
        against B's ``take``: while nobody waits, ``True`` exactly when the
        take grants (and then the same machine); while someone waits,
        ``False``, and A is left exactly as it was, its time included (no
        tick: that would decide the waiters, and nobody would hear of it)."""
        self.now += int(self.step * steps) // 8
        id = self.next_id
        self.next_id += 1
        level = level % self.levels
        cost, flow = self.draw_cost(data), self.draw_flow(data)
        if len(self.a):
            before = fingerprint(self.a)
            granted = self.a.try_take(
                id, level, self.now, cost=cost, flow=flow, settle_later=settle_later
            )
            assert granted is False, "P101: try_take granted while someone waits"
            assert fingerprint(self.a) == before, "P101: try_take changed a machine with waiters"
            self.declined += 1
            return
        granted = self.a.try_take(
            id, level, self.now, cost=cost, flow=flow, settle_later=settle_later
        )
        out = self.b.take(id, level, self.now, cost=cost, flow=flow, settle_later=settle_later)
        assert granted is bool(out), ("P101: try_take and take disagree", granted, rows(out))
        assert all(d.id == id for d in out), ("P101: take decided others", rows(out))
        self.taken += granted
        self.declined += not granted

    @rule(level=st.integers(0, 2), early=st.integers(0, 1), data=st.data())
    def take_at_the_edge(self, level: int, early: int, data: st.DataObject) -> None:
        """P47 with P1 at its edge: a take a nanosecond before the next
        permit falls due (declined: granted then, it would put one unit
        more in a window than P1 allows), or just as it does."""
        due = self.b.next_due()
        if due is not None and due - early > self.now:  # (time never goes back)
            self.now = due - early
            self.take(level, False, 0, data)

    @rule(level=st.integers(0, 2), settle_later=st.booleans(), data=st.data())
    def take_when_idle(self, level: int, settle_later: bool, data: st.DataObject) -> None:
        """Every waiter served and the bucket full again (each permit in
        flight spent), then a take: a permit free, unless a pause or the
        upstream's word holds it back."""
        for _ in range(64):
            for grant in self.b.snapshot().grants:
                if grant.before is None:  # in flight
                    self.both("spend", grant.waiter.id, self.now)
            at = self.b.next_tick()
            if at is None:
                break
            self.now = max(self.now, at)
            self.both("tick", self.now)
        self.tick(64)
        self.take(level, settle_later, 0, data)

    @rule(level=st.integers(0, 2), settle_later=st.booleans(), data=st.data())
    def take_again(self, level: int, settle_later: bool, data: st.DataObject) -> None:
        """A take by an id whose earlier permit is still held (charged, and
        refundable or to be settled): a new life, as its push would start."""
        charged = [g.waiter.id for g in self.b.snapshot().grants if g.before is not None]
        if charged:
            self.take(level, settle_later, 0, data, id=data.draw(st.sampled_from(charged)))

    @rule(data=st.data())
    def take_a_duplicate(self, data: st.DataObject) -> None:
        """P47 with P18: a take of an id that waits, or whose permit is in
        flight, is refused as its push would be, and changes nothing."""
        snapshot = self.b.snapshot()
        busy = [w.id for w in self.b.waiting()]
        busy += [g.waiter.id for g in snapshot.grants if g.before is None]
        if not busy:
            return
        id = data.draw(st.sampled_from(busy))
        for machine in (self.a, self.b):
            with pytest.raises(DuplicateId):
                machine.take(id, 0, self.now)

    @rule(
        level=st.integers(0, 2),
        deadline=st.none() | st.integers(0, 8),
        max_wait=st.none() | st.integers(0, 8),
        data=st.data(),
    )
    def push(
        self, level: int, deadline: int | None, max_wait: int | None, data: st.DataObject
    ) -> None:
        """A waiter queues (or is granted at once; its permit then stays in
        flight or held, to be spent, refunded or settled), or is refused as
        too long for its ``max_wait_ns`` (quarters of an interval)."""
        at = None if deadline is None else self.now + int(self.step * deadline) // 4
        limit = None if max_wait is None else int(self.step * max_wait) // 4
        cost, flow = self.draw_cost(data), self.draw_flow(data)
        self.both(
            "push",
            self.next_id,
            level % self.levels,
            self.now,
            deadline=at,
            cost=cost,
            flow=flow,
            max_wait_ns=limit,
        )
        self.next_id += 1

    @rule(steps=st.integers(0, 64))
    def tick(self, steps: int) -> None:
        self.now += int(self.step * steps) // 8
        self.both("tick", self.now)

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        waiting = [w.id for w in self.b.waiting()]
        if waiting:
            id = data.draw(st.sampled_from(waiting))
            assert self.a.cancel(id) == self.b.cancel(id)

    def held(self) -> list[Hashable]:
        return [g.waiter.id for g in self.b.snapshot().grants]

    @precondition(lambda self: hasattr(self, "b"))
    @rule(data=st.data(), settle_later=st.booleans())
    def spend(self, data: st.DataObject, settle_later: bool) -> None:
        held = self.held()
        if held:
            self.both(
                "spend", data.draw(st.sampled_from(held)), self.now, settle_later=settle_later
            )

    @precondition(lambda self: hasattr(self, "b"))
    @rule(data=st.data(), refund=st.booleans())
    def refund_or_settle(self, data: st.DataObject, refund: bool) -> None:
        """A held grant (a taken one kept to be settled among them) is
        refunded, or settled for another cost: both machines answer alike,
        the same error included."""
        held = self.held()
        if not held:
            return
        id = data.draw(st.sampled_from(held))
        actual = self.draw_cost(data)
        answers: list[object] = []
        for machine in (self.a, self.b):
            try:
                if refund:
                    answers.append(rows(machine.refund(id, self.now)))
                else:
                    answers.append(rows(machine.settle(id, actual, self.now)))
            except NotRefundable:
                answers.append("not refundable")
        assert answers[0] == answers[1], ("P47", answers)

    @rule(steps=st.integers(1, 16))
    def pause(self, steps: int) -> None:
        self.both("pause_until", self.now + int(self.step * steps) // 4, self.now)

    @invariant()
    def same_machine(self) -> None:
        """P47: A is B."""
        if hasattr(self, "a"):
            assert fingerprint(self.a) == fingerprint(self.b), "P47: the machines differ"
            for level in range(self.levels):
                assert self.a.min_wait(level) == self.b.min_wait(level), "P47: min_wait"
                assert self.a.busiest_flows(level) == self.b.busiest_flows(level), (
                    "P47: the flows' counts (not in the snapshot)"
                )

    def teardown(self) -> None:
        if hasattr(self, "a"):
            event(f"taken: {min(self.taken, 3)}; declined: {min(self.declined, 3)}")


TestTakeIsPushThenSpend = TakeIsPushThenSpend.TestCase


class KeepingNoWaitsDecidesAlike(TakeIsPushThenSpend):
    """P55: A keeps its waits, B (``keep_waits=False``) does not."""

    promise = "P55"

    @rule(
        level=st.integers(0, 2),
        settle_later=st.booleans(),
        steps=st.integers(0, 24),
        data=st.data(),
    )
    def take(
        self, level: int, settle_later: bool, steps: int, data: st.DataObject, id: Any = None
    ) -> None:
        """``steps`` eighths of an interval later, the same take on both."""
        self.now += int(self.step * steps) // 8
        if id is None:
            id = self.next_id
            self.next_id += 1
        cost, flow = self.draw_cost(data), self.draw_flow(data)
        out = [
            machine.take(
                id, level % self.levels, self.now, cost=cost, flow=flow, settle_later=settle_later
            )
            for machine in (self.a, self.b)
        ]
        assert rows(out[0]) == rows(out[1]), ("P55", rows(out[0]), rows(out[1]))
        if out[0] and out[0][-1].id == id:
            self.taken += 1
        else:
            self.declined += 1

    @invariant()
    def same_machine(self) -> None:
        """P55: A is B, but for B's statistics of waits."""
        if not hasattr(self, "a"):
            return
        keeping, keeping_none = fingerprint(self.a), fingerprint(self.b)
        expected = attrs.evolve(
            keeping.statistics,
            levels=tuple(
                attrs.evolve(
                    level, wait_p50_ns=None, wait_p99_ns=None, wait_max_ns=None, wait_total_ns=None
                )
                for level in keeping.statistics.levels
            ),
        )
        assert keeping_none.statistics == expected, "P55: the counts differ"
        assert keeping._replace(statistics=expected) == keeping_none, "P55: the machines differ"
        for level in range(self.levels):
            assert self.a.min_wait(level) == self.b.min_wait(level), "P55: min_wait"
            with pytest.raises(PermitValueError, match="keep_waits=True"):
                self.b.busiest_flows(level)
            with pytest.raises(PermitValueError, match="keep_waits=True"):
                self.b.waits_at_most(level, [0, SECOND])
        assert fingerprint(self.b) == keeping_none, "P55: a refusal changed the machine"


TestKeepingNoWaitsDecidesAlike = KeepingNoWaitsDecidesAlike.TestCase


SECOND = 1_000_000_000


def test_takes_by_hand() -> None:
    """P47 on the cases ten random examples seldom reach, beside the same
    pushes and spends on a second machine: a take of a larger cost than
    is left (nothing), a unit take just after it (granted at once: the
    pacing wants one unit again), a take again of an id whose earlier
    permit was kept to settle (a new life: that permit is gone), and a
    take that names a flow (counted: ``min_wait`` no longer counts other
    levels' waiters as surely first), and a take while no grant is held but
    the log still holds one (its id pushed again, then cancelled): the log
    is let go, as a push would; and a take that names no flow on a machine
    whose flow weights come from a function that refuses the default flow:
    refused, as the push is; and the first take of another cost than one
    unit once the clock runs, nothing held: charged its own cost, not one
    unit."""
    a, b = (Machine(Fifo(), rate=1, burst=3) for _ in range(2))
    assert rows(a.take("big", 0, 0, cost=3)) == rows(b.push("big", 0, 0, cost=3))
    b.spend("big", 0)
    # one unit back at 1 s: a take of 2 finds too little, a push of 1 enough
    assert a.take("two", 0, SECOND, cost=2) == []
    assert b.tick(SECOND) == []
    assert rows(a.take("one", 0, SECOND)) == rows(b.push("one", 0, SECOND))
    b.spend("one", SECOND)
    assert a.take("none left", 0, SECOND) == []
    assert fingerprint(a) == fingerprint(b)

    a, b = (Machine(Fifo(), rate=1, burst=3) for _ in range(2))
    for machine in (a, b):  # the second take within the settle window
        machine.take("x", 0, 0, settle_later=True)
        machine.take("x", 0, SECOND // 10)
    with pytest.raises(NotRefundable):
        a.settle("x", 0, SECOND // 10)
    assert fingerprint(a) == fingerprint(b)

    # under FIFO, min_wait counts every level's waiters until a flow is named
    a, b = (Machine(Fifo(2), rate=1, burst=1) for _ in range(2))
    a.take("t", 0, 0, flow="tenant")
    b.push("t", 0, 0, flow="tenant")
    b.spend("t", 0)
    for machine in (a, b):
        machine.push("w", 0, 0)
    assert fingerprint(a) == fingerprint(b)
    assert a.min_wait(1) == b.min_wait(1) == SECOND

    a, b = (Machine(Fifo(), rate=1, burst=1) for _ in range(2))
    for machine in (a, b):
        machine.push("old", 0, 0)  # granted, refundable: logged
        machine.push("old", 0, 1)  # a new life: the grant is forgotten, not its record
        machine.cancel("old")
    assert a.snapshot().logged
    assert not a.snapshot().grants
    assert rows(a.take("new", 0, SECOND)) == rows(b.push("new", 0, SECOND))
    b.spend("new", SECOND)
    assert fingerprint(a) == fingerprint(b), "P47: a take at once keeps what a push lets go"
    assert not a.snapshot().logged

    def weights(flow: object) -> int:
        return len(flow)  # type: ignore[arg-type]  # None has no length: refused

    a, b = (Machine(Fifo(), rate=1, burst=5, flow_weights=weights) for _ in range(2))
    for machine in (a, b):
        machine.tick(0)
    with pytest.raises(PermitValueError, match="flow_weights") as pushed:
        b.push("p", 0, SECOND)
    with pytest.raises(PermitValueError, match="flow_weights") as taken:
        a.take("p", 0, SECOND)
    assert str(taken.value) == str(pushed.value), "P47: a take refuses what its push refuses"
    assert fingerprint(a) == fingerprint(b), "P47: a refused take changes nothing"

    a, b = (Machine(Fifo(), rate=1, burst=3, settle_window_ns=None) for _ in range(2))
    for machine in (a, b):
        machine.tick(0)
    assert rows(a.take("two", 0, 1, cost=2)) == rows(b.push("two", 0, 1, cost=2))
    b.spend("two", 1)
    assert not a.unit_costs
    assert fingerprint(a) == fingerprint(b), "P47: a take of two units charged one"
