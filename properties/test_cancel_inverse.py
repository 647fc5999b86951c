"""P4: cancel is an exact inverse.

Two machines, A and B, receive the same operations, except that A also gets
a *ghost*: a waiter pushed into A only and later cancelled while it still
waits. From that cancel on, A must behave exactly like B, which never saw
it: same decisions, same waiters, same pacing, same policy counter.

While the ghost waits the two may legitimately part ways (it may be granted,
expire, or fill its level so that A rejects a push B accepts); the test then
re-synchronises B from A and tries again with a new ghost.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import event, note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from permits.core import Machine, State

from configs import KINDS, Config, configs
from harness import drive, rows

GHOST = "ghost"


class CancelInverse(RuleBasedStateMachine):
    a: Machine
    b: Machine

    @initialize(config=st.sampled_from(KINDS).flatmap(configs), cost=st.integers(1, 3))
    def setup(self, config: Config, cost: int) -> None:
        note(repr(config))
        # every cost equal: one unit under Shares (SPEC.md, P4), else up to
        # the burst
        self.cost = 1 if config.spec.kind == "shares" else min(cost, config.burst)
        note(f"every cost {self.cost}")
        self.a = config.machine()
        self.b = config.machine()
        self.levels = config.spec.levels
        self.step = config.interval
        self.now = 0
        self.next_id = 0
        self.ghost = False
        self.cancelled_ghosts = 0
        self.a.tick(0)  # both clocks start together
        self.b.tick(0)

    def both(self, operation: str, *args: Any, **kwargs: Any) -> None:
        out_a = getattr(self.a, operation)(*args, **kwargs)
        out_b = getattr(self.b, operation)(*args, **kwargs)
        if self.ghost:
            if any(d.id == GHOST for d in out_a) or rows(out_a) != rows(out_b):
                # The ghost was decided, or its presence changed an admission:
                # a legitimate difference while it waits. Start again.
                note("ghost decided or changed an admission; re-synchronising")
                self.ghost = GHOST in self.a
                if self.ghost:
                    self.a.cancel(GHOST)
                    self.ghost = False
                self.b = copy.deepcopy(self.a)
            return
        assert rows(out_a) == rows(out_b), ("P4", operation, rows(out_a), rows(out_b))

    @rule(levels=st.lists(st.integers(0, 2), min_size=1, max_size=4), steps=st.integers(0, 8))
    def push(self, levels: list[int], steps: int) -> None:
        self.tick(steps)
        for level in levels:
            self.both("push", self.next_id, level % self.levels, self.now, cost=self.cost)
            self.next_id += 1

    @rule(steps=st.integers(0, 12))
    def tick(self, steps: int) -> None:
        self.now += int(self.step * steps) // 8
        if self.ghost:
            self.both("tick", self.now)
        else:
            out_a, out_b = drive(self.a, self.now), drive(self.b, self.now)
            assert rows(out_a) == rows(out_b), ("P4", rows(out_a), rows(out_b))

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        waiting = [w.id for w in self.b.waiting() if w.id != GHOST]
        if waiting:
            id = data.draw(st.sampled_from(waiting))
            assert self.a.cancel(id) == self.b.cancel(id)

    @rule(data=st.data())
    def refund(self, data: st.DataObject) -> None:
        held = [{g.waiter.id: g for g in m.snapshot().grants} for m in (self.a, self.b)]
        granted = [id for id in held[1] if id in held[0]]
        if not granted:
            return
        id = data.draw(st.sampled_from(granted))
        # (without a settle window a machine holds only permits in flight:
        # refundable until spent)
        refundable = [
            window is None or grants[id].at >= self.now - window
            for grants, window in zip(
                held, (self.a.settle_window_ns, self.b.settle_window_ns), strict=True
            )
        ]
        if refundable[0] != refundable[1]:
            assert self.ghost, "P4: refundability differs"
            self.b = copy.deepcopy(self.a)
        elif refundable[0]:
            self.both("refund", id, self.now)

    @precondition(lambda self: not self.ghost and len(self.a) > 0 and GHOST not in self.a)
    @rule(level=st.integers(0, 2))
    def ghost_push(self, level: int) -> None:
        """A ghost joins A behind a backlog, so it waits."""
        out = self.a.push(GHOST, level % self.levels, self.now, cost=self.cost)
        if out and out[-1].id == GHOST and out[-1].state is not State.GRANTED:
            return  # rejected or expired at once: nothing to undo
        if any(d.id == GHOST for d in out):
            self.b = copy.deepcopy(self.a)  # granted at once: no ghost
            return
        assert not out, "the ghost's push decided for others"
        self.ghost = True

    @precondition(lambda self: self.ghost)
    @rule()
    def ghost_cancel(self) -> None:
        if self.ghost:
            assert self.a.cancel(GHOST)
            self.ghost = False
            self.cancelled_ghosts += 1

    @invariant()
    def check_same(self) -> None:
        """P4: with the ghost cancelled, A is B."""
        if not hasattr(self, "a") or self.ghost:
            return
        a, b = self.a, self.b
        assert a.waiting() == b.waiting() or [
            (w.id, w.level, w.pushed_at) for w in a.waiting()
        ] == [(w.id, w.level, w.pushed_at) for w in b.waiting()], "P4: waiters"
        assert a.next_due() == b.next_due(), ("P4: pacing", a.next_due(), b.next_due())
        assert a.next_tick() == b.next_tick(), "P4: next tick"
        assert a.queues.granted == b.queues.granted, "P4: policy counter"
        assert a.snapshot().policy_state == b.snapshot().policy_state, "P4: the policy's state"
        for level in range(self.levels):
            assert a.min_wait(level, cost=self.cost) == b.min_wait(level, cost=self.cost), (
                "P4: min_wait"
            )

    @precondition(lambda self: not self.ghost)
    @rule(
        backlog=st.lists(st.integers(0, 2), min_size=1, max_size=4),
        level=st.integers(0, 2),
        between=st.lists(st.tuples(st.booleans(), st.integers(0, 6)), max_size=4),
    )
    def ghost_episode(
        self, backlog: list[int], level: int, between: list[tuple[bool, int]]
    ) -> None:
        """A whole episode: a backlog, a ghost behind it, a few pushes and
        ticks while it waits, then its cancel."""
        self.push(backlog, 0)
        if self.ghost or not len(self.a):
            return
        self.ghost_push(level)
        for is_push, n in between:
            if is_push:
                self.push([n], 0)
            else:
                self.tick(n)
        if self.ghost:
            self.ghost_cancel()

    def teardown(self) -> None:
        if hasattr(self, "a"):
            event(f"ghosts cancelled: {min(self.cancelled_ghosts, 3)}")


TestCancelInverse = CancelInverse.TestCase
