"""Counterexamples the property suite found, kept as named tests."""

from __future__ import annotations

from permits.core import SECOND, Fifo, Machine, State, StrictPriority


def test_refund_after_the_bucket_refilled_gives_nothing_extra() -> None:
    """P1/P5, found by the window check: rate 1/s, burst 1. A grant at 0 s,
    another at 1 s, then the first is refunded at 1 s. The bucket had already
    refilled between them, so that refund must not hand out a second permit
    at 1 s; the naive rule ``TAT -= interval`` did."""
    machine = Machine(Fifo(), 1, settle_window_ns=SECOND)
    assert [d.id for d in machine.push(0, 0, 0)] == [0]
    assert [d.id for d in machine.push(1, 0, SECOND)] == [1]
    machine.push(2, 0, SECOND)
    assert machine.refund(0, SECOND) == []
    assert [d.id for d in machine.tick(2 * SECOND)] == [2]


def test_refund_of_a_prompt_grant_returns_its_permit() -> None:
    """The cancel-after-grant race: the permit goes to the next waiter at once."""
    machine = Machine(StrictPriority(2), 1)
    machine.push("a", 1, 0)
    machine.push("b", 1, 0)
    [grant] = machine.tick(SECOND)
    assert grant.id == "b"
    machine.push("c", 1, SECOND)
    [again] = machine.refund("b", SECOND)
    assert (again.id, again.state, again.at) == ("c", State.GRANTED, SECOND)
    assert machine.next_due() == 2 * SECOND


def test_burst_one_ticks_at_rounded_due_times_do_not_drift() -> None:
    """P10/P16, found by the delay bound: at 3/s the due times are fractional
    nanoseconds; a tick at the rounded-up time must not restart the schedule,
    or every permit slips by up to a nanosecond."""
    machine = Machine(StrictPriority(1), 3)
    for id in range(4):
        machine.push(id, 0, 0)
    times = []
    while (at := machine.next_tick()) is not None:
        times += [d.at for d in machine.tick(at)]
    assert times == [333_333_334, 666_666_667, 1_000_000_000]
