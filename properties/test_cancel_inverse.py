"""P4: cancel is an exact inverse.

Two machines, A and B, receive the same operations, except that A also gets
a *ghost*: a waiter pushed into A only and later cancelled while it still
waits. From that cancel on, A must behave exactly like B, which never saw
it: same decisions, same waiters, same pacing, same policy counter.

While the ghost waits the two may legitimately part ways (it may be granted,
expire, or fill its level so that A rejects a push B accepts); the test then
re-synchronises B from A and tries again with a new ghost.

Two runs: a focused one (one limit, charged at the grant; pushes, ticks,
cancels and refunds) and a broad one, where the machines have one limit or
two, charge at the grant or at the spend, give waiters deadlines, and see
everything else a machine does: spends, settles in either direction, changes
of a limit and pauses. With the ghost cancelled, the snapshots are equal but
for push counters and statistics.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import event, note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from permits.core import Charge, Decision, Machine, PermitError, Snapshot, State, Waiter

from configs import KINDS, NAMES, RATES, Config, configs
from harness import drive, rows

GHOST = "ghost"
#: The operations besides pushes, ticks, cancels and refunds, as methods.
CHANGES = ("spend", "settle", "set_limit", "pause")


class CancelInverse(RuleBasedStateMachine):
    """The focused run: one limit, charged at the grant; pushes, ticks,
    cancels and refunds."""

    a: Machine
    b: Machine
    #: Whether machines have one limit or two, charge at the grant or the
    #: spend, and see the CHANGES too (CancelInverseEverywhere).
    broad = False

    @initialize(data=st.data(), cost=st.tuples(st.integers(1, 3), st.integers(1, 6)))
    def setup(self, data: st.DataObject, cost: tuple[int, int]) -> None:
        if self.broad:
            config: Config = data.draw(
                st.sampled_from(KINDS).flatmap(
                    lambda kind: configs(kind, charges=tuple(Charge), costs=True)
                )
            )
        else:
            config = data.draw(st.sampled_from(KINDS).flatmap(configs))
        note(repr(config))
        # every cost equal: one unit under Shares (SPEC.md, P4), else up to
        # each limit's burst
        units = tuple(
            1 if config.spec.kind == "shares" else min(n, burst)
            for n, (_, burst) in zip(cost, config.limits, strict=False)
        )
        self.units = units
        self.cost = config.cost(units)
        note(f"every cost {self.cost}")
        self.config = config
        self.a = config.machine()
        self.b = config.machine()
        self.levels = config.spec.levels
        self.step = config.interval
        self.now = 0
        self.next_id = 0
        #: the waiting ghost's id, or None
        self.ghost: tuple[str, int] | None = None
        self.ghosts = 0
        self.cancelled_ghosts = 0
        self.a.tick(0)  # both clocks start together
        self.b.tick(0)

    def both(self, operation: str, *args: Any, **kwargs: Any) -> None:
        out_a = getattr(self.a, operation)(*args, **kwargs)
        out_b = getattr(self.b, operation)(*args, **kwargs)
        self.compare(operation, out_a, out_b)

    def compare(self, operation: str, out_a: list[Decision], out_b: list[Decision]) -> None:
        """The decisions of one operation on both machines: equal once the
        ghost is gone; while it waits, a difference starts again."""
        if self.ghost:
            if any(d.id == self.ghost for d in out_a) or rows(out_a) != rows(out_b):
                # The ghost was decided, or its presence changed an admission:
                # a legitimate difference while it waits. Start again.
                note("ghost decided or changed an admission; re-synchronising")
                self.resync()
            return
        assert rows(out_a) == rows(out_b), ("P4", operation, rows(out_a), rows(out_b))

    @rule(
        levels=st.lists(st.integers(0, 2), min_size=1, max_size=4),
        steps=st.integers(0, 8),
        patience=st.none() | st.integers(0, 24),
    )
    def push(self, levels: list[int], steps: int, patience: int | None = None) -> None:
        self.tick(steps)
        deadline = self.deadline(patience)
        for level in levels:
            self.both(
                "push",
                self.next_id,
                level % self.levels,
                self.now,
                cost=self.cost,
                deadline=deadline,
            )
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
        waiting = [w.id for w in self.b.waiting() if w.id != self.ghost]
        if waiting:
            id = data.draw(st.sampled_from(waiting))
            assert self.a.cancel(id) == self.b.cancel(id)

    @rule(data=st.data())
    def refund(self, data: st.DataObject) -> None:
        held = self.held()
        if held:
            # refused alike when charged outside the settle window, or spent
            self.both_or_neither("refund", data.draw(st.sampled_from(held)), self.now)

    def deadline(self, patience: int | None) -> int | None:
        """A push's deadline, ``patience`` eighths of an interval away (the
        broad run only)."""
        if patience is None or not self.broad:
            return None
        return self.now + int(self.step * patience) // 8

    def held(self) -> list[Any]:
        """The ids whose permits both machines hold, oldest first."""
        ids = [{g.waiter.id for g in m.snapshot().grants} for m in (self.a, self.b)]
        return [g.waiter.id for g in self.b.snapshot().grants if g.waiter.id in ids[0]]

    def both_or_neither(self, operation: str, *args: Any, **kwargs: Any) -> None:
        """An operation that may be refused: both machines refuse it alike
        (and stay as they were), or both take it."""
        refused: list[type[PermitError] | None] = []
        outs: list[list[Decision]] = []
        for machine in (self.a, self.b):
            try:
                outs.append(getattr(machine, operation)(*args, **kwargs))
            except PermitError as error:
                refused.append(type(error))
            else:
                refused.append(None)
        if refused[0] != refused[1]:
            assert self.ghost, ("P4", operation, refused)
            note(f"{operation} refused on one machine while the ghost waits")
            self.resync()
        elif refused[0] is None:
            self.compare(operation, *outs)

    def resync(self) -> None:
        """Cancel the ghost if it still waits, and make B a copy of A."""
        if self.ghost and self.ghost in self.a:
            self.a.cancel(self.ghost)
        self.ghost = None
        self.b = copy.deepcopy(self.a)

    def spend(self, data: st.DataObject) -> None:
        held = self.held()
        if held:
            id = data.draw(st.sampled_from(held))
            self.both("spend", id, self.now, settle_later=data.draw(st.booleans()))

    def settle(self, data: st.DataObject) -> None:
        """A settle for more or less than asked, or nothing."""
        held = self.held()
        if not held:
            return
        id = data.draw(st.sampled_from(held))
        actual = data.draw(st.tuples(st.integers(0, 8), st.integers(0, 8)))
        if self.config.second is None:
            cost: Any = actual[0]
        else:
            cost = self.config.settle(dict(enumerate(actual)))
        self.both_or_neither("settle", id, cost, self.now)

    def set_limit(self, data: st.DataObject) -> None:
        which = data.draw(st.integers(0, len(self.units) - 1))
        name = NAMES[which] if self.config.second is not None else None
        rate = data.draw(st.sampled_from(RATES) | st.none())
        burst = self.units[which] + data.draw(st.integers(0, 3))
        self.both_or_neither("set_limit", self.now, rate=rate, burst=burst, limit=name)

    def pause(self, data: st.DataObject) -> None:
        until = self.now + int(self.step * data.draw(st.integers(0, 16))) // 8
        self.both_or_neither("pause_until", until, self.now)

    @precondition(lambda self: self.broad)
    @rule(data=st.data(), kind=st.sampled_from(CHANGES))
    def change(self, data: st.DataObject, kind: str) -> None:
        """Anything else a machine does: on both, the same."""
        getattr(self, kind)(data)

    @precondition(lambda self: not self.ghost and len(self.a) > 0)
    @rule(level=st.integers(0, 2), patience=st.none() | st.integers(0, 24))
    def ghost_push(self, level: int, patience: int | None = None) -> None:
        """A ghost joins A behind a backlog, so it waits (with a deadline, it
        leaves one behind when cancelled)."""
        deadline = self.deadline(patience)
        ghost = (GHOST, self.ghosts)  # a new id each time: an old one may be held
        self.ghosts += 1
        out = self.a.push(ghost, level % self.levels, self.now, cost=self.cost, deadline=deadline)
        if out and out[-1].id == ghost and out[-1].state is not State.GRANTED:
            return  # rejected or expired at once: nothing to undo
        if any(d.id == ghost for d in out):
            self.b = copy.deepcopy(self.a)  # granted at once: no ghost
            return
        assert not out, "the ghost's push decided for others"
        self.ghost = ghost

    @precondition(lambda self: self.ghost)
    @rule()
    def ghost_cancel(self) -> None:
        if self.ghost:
            assert self.a.cancel(self.ghost)
            self.ghost = None
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
        assert comparable(a.snapshot()) == comparable(b.snapshot()), "P4: the snapshots"
        for level in range(self.levels):
            assert a.min_wait(level, cost=self.cost) == b.min_wait(level, cost=self.cost), (
                "P4: min_wait"
            )

    @precondition(lambda self: not self.ghost)
    @rule(
        data=st.data(),
        backlog=st.lists(st.integers(0, 2), min_size=1, max_size=4),
        level=st.integers(0, 2),
        between=st.lists(
            st.tuples(st.sampled_from(("push", "tick", "refund", *CHANGES)), st.integers(0, 6)),
            max_size=4,
        ),
    )
    def ghost_episode(
        self,
        data: st.DataObject,
        backlog: list[int],
        level: int,
        between: list[tuple[str, int]],
    ) -> None:
        """A whole episode: a backlog, a ghost behind it, a few other
        operations while it waits, then its cancel."""
        self.push(backlog, 0)
        if self.ghost or not len(self.a):
            return
        self.ghost_push(level)
        for kind, n in between:
            if kind == "push":
                self.push([n], 0)
            elif kind == "refund":
                self.refund(data)
            elif kind == "tick" or not self.broad:
                self.tick(n)
            else:
                self.change(data, kind)
        if self.ghost:
            self.ghost_cancel()

    def teardown(self) -> None:
        if hasattr(self, "a"):
            event(f"ghosts cancelled: {min(self.cancelled_ghosts, 3)}")


def comparable(snapshot: Snapshot) -> dict[str, Any]:
    """``snapshot`` without what a cancelled ghost may leave in it and no
    decision reads: the push counter (``seq`` of every later waiter is one
    more in A, their order the same), its dead deadline entry, and the
    statistics, which count its push and its cancel."""

    def plain(value: Any) -> Any:
        if isinstance(value, Waiter):
            return value._replace(seq=0)
        if isinstance(value, tuple):
            items = map(plain, value)
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        return value

    left_out = ("seq", "deadlines", "statistics")
    return {
        field: plain(getattr(snapshot, field))
        for field in Snapshot._fields
        if field not in left_out
    }


class CancelInverseEverywhere(CancelInverse):
    """The broad run: one limit or two, either charge, deadlines, and every
    other operation of a machine, before and while the ghost waits."""

    broad = True


TestCancelInverse = CancelInverse.TestCase
TestCancelInverseEverywhere = CancelInverseEverywhere.TestCase
