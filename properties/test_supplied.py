"""P20: a supplied machine chooses exactly as a paced one does.

Two machines receive the same pushes, cancels and passage of time, under the
same policy: A paces its own permits; B is ``supplied=True`` and is handed a
permit (``supply``) at each time A grants one. B must then make exactly A's
decisions: the same ids granted, in the same order, at the same times, the
same expiries and rejections. So a machine whose permits come from outside
(a limit shared through Redis) keeps every ordering property the paced one
is proved to have (P2, P3, P6-P11, P13), and never grants a cancelled waiter.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from permits.core import SECOND, Decision, Machine, NotRefundable, Queues, State, Waiter

from configs import FLOWS, KINDS, Config, configs
from harness import drive, rows


class Supplied(RuleBasedStateMachine):
    a: Machine
    b: Machine

    @initialize(config=st.sampled_from(KINDS).flatmap(lambda kind: configs(kind, costs=True)))
    def setup(self, config: Config) -> None:
        note(repr(config))
        self.config = config
        self.a = config.machine()
        self.b = Machine(
            config.policy(),
            limits=self.a.limits,  # the outside limits: for min_wait, and counted per limit
            max_waiting=config.max_waiting,
            settle_window_ns=config.settle_window,
            supplied=True,
        )
        self.levels = config.spec.levels
        self.step = int(config.interval)
        self.now = config.origin
        self.next_id = 0
        #: Each id's level and cost, as last pushed.
        self.asked: dict[int, tuple[int, Any]] = {}
        #: Per level, B's waiters the source outside said wait too long
        #: (``too_long``), A's cancelled.
        self.too_long = [0] * self.levels
        self.a.tick(self.now)
        self.b.tick(self.now)

    def mirror(self, decided: list[Decision]) -> list[Decision]:
        """B's decisions when handed a permit at each of A's grants, and
        ticked at each of A's other decisions, in A's order."""
        out: list[Decision] = []
        for decision in decided:
            if decision.state is State.GRANTED:
                out += self.b.supply(decision.at)
            else:
                out += self.b.tick(decision.at)
        return out

    def draw_cost(self, data: st.DataObject) -> Any:
        """A cost: 1, unless the config has costs (units of one limit or two)."""
        if not self.config.costs:
            return 1
        units = tuple(data.draw(st.integers(0, burst)) for _, burst in self.config.limits)
        return self.config.cost(units if any(units) else (1, *units[1:]))

    @rule(level=st.integers(0, 2), patience=st.none() | st.integers(0, 3), data=st.data())
    def push(self, level: int, patience: int | None, data: st.DataObject) -> None:
        level %= self.levels
        cost = self.draw_cost(data)
        id = self.next_id
        self.next_id += 1
        deadline = None if patience is None else self.now + patience * self.step
        limits = self.a.max_waiting
        limit = None if limits is None else limits[level]
        full = limit is not None and self.a.queues.depths[level] >= limit
        late = deadline is not None and deadline <= self.now
        trial = copy.deepcopy(self.a).push(id, level, self.now, deadline=deadline, cost=cost)
        if (full or late) and trial and trial[-1].id == id and trial[-1].state is State.GRANTED:
            # Only a permit at hand serves this push: the paced machine has
            # one for its cost, the supplied machine never has (it asks its
            # source), and refuses the push instead.
            refused = copy.deepcopy(self.b).push(id, level, self.now, deadline=deadline, cost=cost)
            assert refused, "P20"
            assert refused[-1].id == id, "P20"
            assert refused[-1].state in (State.REJECTED, State.EXPIRED), ("P20", refused)
            return
        out_a = self.a.push(id, level, self.now, deadline=deadline, cost=cost)
        self.asked[id] = (level, cost)
        # A's grants before its newcomer joined came from the tick its push
        # starts with; the newcomer's own decision, if any, is the last.
        own = out_a[-1] if out_a and out_a[-1].id == id else None
        before = out_a[:-1] if own is not None else out_a
        out_b = self.mirror(before)
        pushed = self.b.push(id, level, self.now, deadline=deadline, cost=cost)
        out_b += pushed
        if own is not None and own.state is State.GRANTED:
            out_b += self.b.supply(self.now)
        assert rows(out_b) == rows(out_a), "P20"

    @precondition(lambda self: self.next_id > 0)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        id = data.draw(st.integers(0, self.next_id - 1))
        assert self.a.cancel(id) == self.b.cancel(id), "P20"

    @precondition(lambda self: self.next_id > 0)
    @rule(data=st.data(), wait=st.integers(0, 4), by=st.sampled_from([-1, 0, 1]))
    def outwaited(self, data: st.DataObject, wait: int, by: int) -> None:
        """B's source says a waiter waits ``wait`` in all: past its
        ``max_wait`` (``>``, P53's rule), it leaves as too long, as A's
        cancelled leaves, counted as too long; otherwise nothing changes."""
        max_wait = max(0, wait + by)  # (one equal to the wait fits: P53's rule)
        id = data.draw(st.sampled_from([w.id for w in self.b.waiting()] or [0]))
        waiter = self.b.queues.get(id)
        before = self.b.snapshot()
        # in ns: a step of 0 ns (a rate of more than 10**9/s) makes every wait fit
        wait_ns, max_wait_ns = wait * self.step, max_wait * self.step
        out = self.b.too_long(id, wait_ns, max_wait_ns)
        if waiter is None or wait_ns <= max_wait_ns:
            assert out == [], "P53"
            assert self.b.snapshot() == before, "P53"
            return
        assert rows(out) == rows([Decision(id, State.TOO_LONG, waiter.level, self.now, 0)]), "P53"
        assert self.a.cancel(id), "P53"
        self.too_long[waiter.level] += 1

    @rule(steps=st.sampled_from([0, 1, 2, 5]), extra=st.integers(0, 3))
    def advance(self, steps: int, extra: int) -> None:
        self.now += steps * self.step + extra
        out_a = drive(self.a, self.now)
        out_b = self.mirror(out_a) + self.b.tick(self.now)
        assert rows(out_b) == rows(out_a), "P20"

    @precondition(lambda self: self.asked)
    @rule(data=st.data())
    def settle(self, data: st.DataObject) -> None:
        """A's permit settled by A itself; B's by the source outside, which
        tells B (``settled``): each counts the same units for it."""
        id = data.draw(st.sampled_from(sorted(self.asked)))
        level, cost = self.asked[id]
        actual = self.config.cost(
            tuple(data.draw(st.integers(0, 2 * burst)) for _, burst in self.config.limits)
        )
        try:
            out_a = self.a.settle(id, actual, self.now)
        except NotRefundable:
            return
        del self.asked[id]
        note(f"settled {id!r} at {actual!r}")
        assert rows(self.mirror(out_a) + self.b.tick(self.now)) == rows(out_a), "P20"
        self.b.settled(level, cost, actual)

    @precondition(lambda self: self.asked)
    @rule(data=st.data())
    def give_back(self, data: st.DataObject) -> None:
        """A's permit refunded while nobody waits there, banked; B's given
        back to the source outside, which tells B (``refunded``): each
        counts it refunded, and the same units granted."""
        id = data.draw(st.sampled_from(sorted(self.asked)))
        level, cost = self.asked[id]
        if len(self.a) or id in self.a:
            return  # (someone would take it; or it still waits: nothing to refund)
        try:
            out_a = self.a.refund(id, self.now)
        except NotRefundable:
            return
        del self.asked[id]
        note(f"gave back {id!r}")
        assert rows(self.mirror(out_a) + self.b.tick(self.now)) == rows(out_a), "P20"
        self.b.refunded(level, cost)

    @rule(steps=st.sampled_from([0, 1, 3]), extra=st.integers(0, 3))
    def pause(self, steps: int, extra: int) -> None:
        """A paused by itself; B's source outside paused, which tells B
        (``paused``): each counts the same pauses (P46)."""
        until = self.now + steps * self.step + extra
        out_a = self.a.pause_until(until, self.now)
        assert rows(self.mirror(out_a) + self.b.tick(self.now)) == rows(out_a), "P20"
        self.b.paused(until, self.now)

    @invariant()
    def same_line(self) -> None:
        for level in range(self.levels):
            assert self.a.waiting(level) == self.b.waiting(level), "P20"
        a = self.a.statistics()
        moved = self.too_long  # A's cancelled, B's too long (P53)
        a = attrs.evolve(
            a,
            levels=tuple(
                attrs.evolve(
                    stats,
                    cancelled=stats.cancelled - moved[level],
                    too_long=stats.too_long + moved[level],
                )
                for level, stats in enumerate(a.levels)
            ),
        )
        assert a == self.b.statistics(), "P20"
        self.b.check_valid()


TestSupplied = Supplied.TestCase


@attrs.define
class Owing:
    """The rule a permit owed to a level follows (P51), as a policy: the
    head of ``owed`` while that level waits, otherwise ``inner``'s choice;
    every grant told to ``inner`` as it would be."""

    inner: Any
    owed: int | None = None

    @property
    def levels(self) -> int:
        return int(self.inner.levels)

    def choose(self, queues: Queues, now: int) -> int:
        if self.owed is not None and queues.depths[self.owed]:
            return self.owed
        return int(self.inner.choose(queues, now))

    def ahead(self, queues: Queues, level: int, now: int) -> int:
        return int(self.inner.ahead(queues, level, now))

    def start(self, limits: tuple[str, ...]) -> object:
        start = getattr(self.inner, "start", None)
        return None if start is None else start(limits)

    def record(self, queues: Queues, waiter: Waiter) -> None:
        record = getattr(self.inner, "record", None)
        if record is not None:
            record(queues, waiter)


class Owed(RuleBasedStateMachine):
    """P51: machine B is handed permits owed to chosen levels
    (``supply(now, owed=L)``); machine A, with the same pushes, cancels and
    ticks, is handed plain permits under a policy that chooses ``L`` while
    it waits and otherwise as B's policy does (``Owing``). They decide
    alike, down to the statistics and each level's order."""

    a: Machine
    b: Machine

    @initialize(config=st.sampled_from(KINDS).flatmap(lambda k: configs(k, flows=True)))
    def setup(self, config: Config) -> None:
        note(repr(config))
        self.owing = Owing(config.policy())
        options = dict(
            max_waiting=config.max_waiting,
            settle_window_ns=config.settle_window,
            supplied=True,
            **config.flow_options(),
        )
        self.a = Machine(self.owing, config.rate, config.burst, **options)
        self.b = Machine(config.policy(), config.rate, config.burst, **options)
        self.levels = config.spec.levels
        self.burst = config.burst
        self.step = int(config.interval)
        self.now = config.origin
        self.next_id = 0

    @rule(
        level=st.integers(0, 2),
        patience=st.none() | st.integers(0, 3),
        cost=st.integers(1, 3),
        flow=st.sampled_from(FLOWS),
    )
    def push(self, level: int, patience: int | None, cost: int, flow: Any) -> None:
        level %= self.levels
        id = self.next_id
        self.next_id += 1
        deadline = None if patience is None else self.now + patience * self.step
        cost = min(cost, self.burst)
        out = [
            rows(m.push(id, level, self.now, deadline=deadline, cost=cost, flow=flow))
            for m in (self.a, self.b)
        ]
        assert out[0] == out[1], "P51"

    @precondition(lambda self: self.next_id > 0)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        id = data.draw(st.integers(0, self.next_id - 1))
        assert self.a.cancel(id) == self.b.cancel(id), "P51"

    @rule(steps=st.sampled_from([0, 1, 2]), extra=st.integers(0, 3))
    def tick(self, steps: int, extra: int) -> None:
        self.now += steps * self.step + extra
        assert rows(self.a.tick(self.now)) == rows(self.b.tick(self.now)), "P51"

    @rule(data=st.data(), extra=st.integers(0, 3))
    def supply(self, data: st.DataObject, extra: int) -> None:
        self.now += extra
        # mostly a level with waiters, which the policy may not choose
        waiting = [lv for lv, depth in enumerate(self.b.queues.depths) if depth]
        owed = data.draw(
            st.sampled_from(waiting) | st.none() | st.integers(0, self.levels - 1)
            if waiting
            else st.none() | st.integers(0, self.levels - 1)
        )
        self.owing.owed = owed
        want = rows(self.a.supply(self.now))
        self.owing.owed = None
        depths = list(self.b.queues.depths)
        got = rows(self.b.supply(self.now, owed))
        assert got == want, ("P51", got, want)
        granted = [row for row in got if row[1] == "GRANTED"]
        assert len(granted) <= 1, "P51"
        if granted and owed is not None and depths[owed]:
            # (unless every waiter of the owed level expired first)
            expired = sum(1 for row in got if row[1] == "EXPIRED" and row[2] == owed)
            assert granted[0][2] == owed or expired == depths[owed], ("P51", got)

    @invariant()
    def same_line(self) -> None:
        for level in range(self.levels):
            assert self.a.waiting(level) == self.b.waiting(level), "P51"
            self.owing.owed = level
            assert self.a.next_level() == self.b.next_level(level), "P51"
            self.owing.owed = None
        assert self.a.next_level() == self.b.next_level(), "P51"
        assert self.a.statistics() == self.b.statistics(), "P51"
        self.b.check_valid()


TestOwed = Owed.TestCase


def test_supplied_refund_goes_to_the_next_waiter() -> None:
    """P20: a supplied permit handed back goes to the policy's choice at once,
    and with nobody waiting it is spent, not banked."""
    from permits.core import StrictPriority

    machine = Machine(StrictPriority(2), 10, supplied=True)
    assert machine.push("a", 1, 0) == []
    assert machine.next_level() == 1
    machine.push("b", 0, 1)
    assert machine.next_level() == 0
    assert [d.id for d in machine.supply(2)] == ["b"]
    assert [d.id for d in machine.refund("b", 3)] == ["a"]
    assert machine.refund("a", 4) == []
    assert machine.supply(5) == []
    assert machine.push("c", 1, 6) == []  # nothing banked
    assert machine.next_due() is None
    assert machine.next_tick() is None
    assert machine.min_wait(1) == SECOND // 10  # c first; at best the outside bucket is full
    machine.push("d", 1, 7, deadline=7 + SECOND)
    assert machine.next_tick() == 7 + SECOND
    # handed back with nobody waiting and nothing supplied since: not banked
    other = Machine(StrictPriority(2), 1, supplied=True)
    other.push("a", 0, 0)
    assert [d.id for d in other.supply(0)] == ["a"]
    assert other.refund("a", 1) == []
    assert other.push("b", 0, 2 * SECOND) == [], "P20: a refunded permit was banked"


def test_supplied_min_wait_is_a_full_outside_bucket() -> None:
    """P19 for a supplied machine: ``min_wait`` is the best case of the
    outside limit, a full bucket: ``max(0, ahead + cost - burst)``
    intervals, in whole nanoseconds (rounded down: a lower bound)."""
    from permits.core import Fifo

    machine = Machine(Fifo(), 3, 2, supplied=True)
    machine.tick(0)
    assert machine.min_wait(0) == 0, "P19"  # one unit of the full bucket's two
    machine.push("a", 0, 0)
    machine.push("b", 0, 0)
    assert machine.min_wait(0) == SECOND // 3, "P19"  # 333,333,333.3 ns
    assert machine.min_wait(0, cost=2) == 2 * SECOND // 3, "P19"
    assert type(machine.min_wait(0)) is int, "P19"
    machine.set_limit(0, rate=1, burst=1)  # the outside limit changed: so does the estimate
    assert machine.min_wait(0) == 2 * SECOND, "P19"


def test_supplied_min_wait_counts_every_outside_limit() -> None:
    """P19 for a supplied machine with two limits: the best case of each
    outside bucket, full, and the slower one decides."""
    from permits.core import Fifo, Limit

    limits = {"requests": Limit(3, burst=2), "tokens": Limit(10, burst=10)}
    machine = Machine(Fifo(), limits=limits, supplied=True)
    machine.tick(0)
    asks = {"requests": 1, "tokens": 6}
    assert machine.min_wait(0, cost=asks) == 0, "P19"
    machine.push("a", 0, 0, cost=asks)
    machine.push("b", 0, 0, cost=asks)
    # requests: 3 asked of a bucket of 2, 1/3 s; tokens: 18 of 10, 0.8 s
    assert machine.min_wait(0, cost=asks) == 8 * SECOND // 10, "P19"
    assert machine.min_wait(0, cost={"requests": 1}) == SECOND // 3, "P19"
    machine.set_limit(0, rate=20, limit="tokens")  # 8 tokens short: 0.4 s
    assert machine.min_wait(0, cost=asks) == 4 * SECOND // 10, "P19"
    assert [d.id for d in machine.supply(1)] == ["a"]
    assert machine.statistics().levels[0].units_granted == (1, 6)
