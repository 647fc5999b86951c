"""Examples of the machine's API that the properties do not spell out."""

from __future__ import annotations

import copy
import enum
import math
import random
import sys
import threading
from decimal import Decimal
from fractions import Fraction

import attrs
import pytest

from permits.core import (
    MILLISECOND,
    SECOND,
    Aging,
    Charge,
    Decision,
    DuplicateId,
    Fifo,
    Limit,
    Machine,
    NotRefundable,
    PermitTypeError,
    PermitValueError,
    Policy,
    Queues,
    Shares,
    State,
    StrictPriority,
    TimeWentBackwards,
    Waiter,
    WaitHistogram,
    across_processes,
    in_seconds,
    schedule,
)


class Level(enum.IntEnum):
    INTERACTIVE = 0
    BATCH = 1


def test_intenum_levels_are_accepted() -> None:
    machine = Machine(StrictPriority(2), 100)
    [decision] = machine.push("x", Level.BATCH, 0)
    assert decision.level == 1
    assert type(decision.level) is int


class BatchFirst:
    """A user's policy that names its levels by their IntEnum: the batch
    level first while it waits."""

    levels = 2

    def choose(self, queues: Queues, now: int) -> int:
        return Level.BATCH if queues.depths[Level.BATCH] else Level.INTERACTIVE

    def ahead(self, queues: Queues, level: int, now: int) -> int:
        return queues.depths[level]


def test_a_policy_may_choose_a_level_by_its_intenum() -> None:
    """An IntEnum level is an int, from a policy as from a push: the machine
    grants the head of the level it names (and next_level names it as an
    int), not a PolicyError saying a level with waiters has none."""
    machine = Machine(BatchFirst(), 1, 1)
    machine.push("urgent", Level.INTERACTIVE, 0)  # granted at once: the bucket is full
    machine.push("later", Level.INTERACTIVE, 0)
    machine.push("batch", Level.BATCH, 0)
    [granted] = machine.tick(SECOND)
    assert (granted.id, type(granted.level)) == ("batch", int)
    supplied = Machine(BatchFirst(), 1, 1, supplied=True)
    supplied.push("urgent", Level.INTERACTIVE, 0)
    supplied.push("batch", Level.BATCH, 0)
    level = supplied.next_level()
    assert (level, type(level)) == (1, int)
    assert [d.id for d in supplied.supply(1)] == ["batch"]


def test_intenum_counts_are_kept_as_ints() -> None:
    """An ``IntEnum`` burst, count of levels or ``after_ns`` is accepted and
    kept as the ``int`` it is, as ``check_int`` normalises every count (and
    as ``Machine(policy, rate, burst)`` keeps its burst): the value's repr
    stays valid Python, and a limit given either way is the same."""
    limit, fifo, aging = Limit(1, Level.BATCH), Fifo(Level.BATCH), Aging(after_ns=Level.BATCH)
    assert (type(limit.burst), type(fifo.levels), type(aging.after_ns)) == (int, int, int)
    assert eval(repr(limit)) == limit
    assert eval(repr(fifo)) == fifo
    assert eval(repr(aging)) == aging
    by_limits = Machine(Fifo(), limits={"units": limit})
    by_rate = Machine(Fifo(), 1, Level.BATCH)
    assert by_limits.limits == by_rate.limits
    assert repr(by_limits) == repr(by_rate)


@pytest.mark.parametrize("policy", [Fifo, StrictPriority, Aging])
def test_a_builtin_policys_levels_has_no_converter(
    policy: type[Fifo | StrictPriority | Aging],
) -> None:
    """``levels`` is checked and kept as an int by a validator, not an attrs
    converter: pyright types a field with a converter as a descriptor, not
    the ``int`` that :class:`Policy`'s ``levels`` property asks for, and
    flagged ``Machine(StrictPriority(2), rate=100)`` (the README's first
    line) as an error. The checks and the ``int`` stay, on evolve too."""
    field = attrs.fields_dict(policy)["levels"]
    assert (field.converter, field.validator is not None) == (None, True)
    evolved = attrs.evolve(policy(), levels=Level.BATCH)
    assert (evolved.levels, type(evolved.levels)) == (1, int)
    with pytest.raises(PermitValueError, match=r"^levels=0: must be at least 1"):
        attrs.evolve(policy(), levels=0)


def test_reprs_are_valid_python() -> None:
    decision = Decision("x", State.GRANTED, 0, 5, 2)
    assert eval(repr(decision)) == decision
    waiter = Waiter("x", 1, 0, 5, None)
    assert eval(repr(waiter)) == waiter
    assert eval(repr(Shares((4, 1)))) == Shares((4, 1))
    assert repr(Machine(Aging(2, after_ns=SECOND), Fraction(5, 2), 3)) == (
        "Machine(policy=Aging(levels=2, after_ns=1000000000), rate=Fraction(5, 2), burst=3,"
        " max_waiting=None, settle_window_ns=1000000000, supplied=False,"
        " charge=Charge.AT_GRANT)"
    )


def test_schedule_spreads_slots() -> None:
    assert schedule((4, 1)) == (0, 0, 0, 0, 1)
    assert schedule((1, 1)) == (0, 1)
    assert schedule((3, 2)) == (0, 1, 0, 0, 1)
    assert schedule((1, 1, 2)) == (2, 0, 1, 2)


def test_next_tick_is_the_earlier_of_due_and_deadline() -> None:
    machine = Machine(StrictPriority(2), 1)
    assert machine.next_tick() is None
    assert machine.next_due() is None
    machine.push("a", 0, 0)
    assert machine.next_tick() is None  # granted at once; nobody waits
    assert machine.next_due() == SECOND
    machine.push("b", 1, 0, deadline=500 * MILLISECOND)
    assert machine.next_tick() == 500 * MILLISECOND
    [expired] = machine.tick(500 * MILLISECOND)
    assert (expired.id, expired.state, expired.waited) == ("b", State.EXPIRED, 500 * MILLISECOND)
    assert machine.next_tick() is None


def test_unit_costs_until_a_waiter_asks_for_another_cost() -> None:
    """``unit_costs``, P54's condition: ``True`` until a waiter of another
    cost joins (a unit of each limit, named or not, is none); a push of one
    refused as too long leaves it so."""
    machine = Machine(Fifo(1), 1, 4)
    assert machine.unit_costs
    machine.push("a", 0, 0)
    machine.push("b", 0, 0, cost=4, max_wait_ns=0)  # too long: three units are left
    assert machine.unit_costs
    machine.push("one", 0, 0, cost={"units": 1})  # a unit, named: a unit cost
    assert machine.unit_costs
    two = Machine(Fifo(1), limits={"requests": Limit(1, 4), "tokens": Limit(1, 4)})
    two.push("a", 0, 0, cost={"requests": 1, "tokens": 1})
    assert two.unit_costs
    two.push("b", 0, 0, cost={"requests": 1})  # no token: another cost
    assert not two.unit_costs
    machine.push("c", 0, 0, cost=2)
    assert not machine.unit_costs
    machine.push("d", 0, 0)
    assert not machine.unit_costs


def test_a_machine_s_configuration_is_read_only() -> None:
    """``policy``, ``levels``, ``charge`` and ``unit_costs`` read back what the
    machine was made with (and ``unit_costs`` what it saw), and refuse to be
    set: a policy swapped mid-run would choose from queues whose state
    another policy began, and ``levels`` or ``unit_costs`` set by hand would
    leave the machine's hot paths reading what its queues no longer are."""
    policy = StrictPriority(3)
    machine = Machine(policy, 1, 4, charge=Charge.AT_SPEND)
    assert (machine.policy, machine.levels, machine.charge, machine.unit_costs) == (
        policy,
        3,
        Charge.AT_SPEND,
        True,
    )
    machine.push("a", 0, 0)
    before = machine.snapshot()
    for name, value in [
        ("policy", Fifo(1)),
        ("levels", 1),
        ("charge", Charge.AT_GRANT),
        ("unit_costs", False),
    ]:
        with pytest.raises(AttributeError):
            setattr(machine, name, value)
    assert machine.snapshot() == before
    assert (machine.policy, machine.levels, machine.charge, machine.unit_costs) == (
        policy,
        3,
        Charge.AT_SPEND,
        True,
    )


def test_deadline_in_the_past_is_granted_only_at_once() -> None:
    """A deadline that has come means "do not wait": granted while a permit
    is left, expired at once otherwise (SPEC P11)."""
    machine = Machine(Fifo(), 1)
    [decision] = machine.push("now", 0, 10, deadline=10)
    assert decision.state is State.GRANTED
    [decision] = machine.push("late", 0, 10, deadline=5)
    assert decision.state is State.EXPIRED
    assert machine.statistics().levels[0].expired == 1
    assert len(machine) == 0


def test_max_waiting_zero_grants_only_at_once() -> None:
    """``max_waiting=0`` means "never queue": granted while a permit is left,
    rejected otherwise, even on an idle machine's first push (SPEC P11)."""
    machine = Machine(StrictPriority(2), 1, max_waiting=(None, 0))
    [decision] = machine.push("a", 1, 0)
    assert decision.state is State.GRANTED
    [decision] = machine.push("b", 1, 0)
    assert decision.state is State.REJECTED


def test_a_rejected_push_again_forgets_the_earlier_grant() -> None:
    """A re-push is a new life even when it is rejected: the id's earlier
    grant can no longer be refunded (SPEC: refund's pre-conditions)."""
    machine = Machine(StrictPriority(2), 1, 3, max_waiting=(None, 0))
    machine.push("x", 0, 0)
    machine.push("q", 0, 0)
    machine.push("r", 0, 0)  # the bucket is empty now
    [decision] = machine.push("x", 1, 5)
    assert decision.state is State.REJECTED
    with pytest.raises(NotRefundable):
        machine.refund("x", 10)


def test_a_policy_class_is_refused_with_what_to_pass() -> None:
    with pytest.raises(PermitTypeError) as refused:
        Machine(StrictPriority, 1)  # type: ignore[arg-type]
    assert refused.value.argument == "policy"
    assert "pass StrictPriority(...)" in str(refused.value)


def test_rejection_is_a_decision() -> None:
    machine = Machine(StrictPriority(2), 1, max_waiting=(None, 1))
    machine.push("a", 1, 0)  # granted
    machine.push("b", 1, 0)  # waits
    [decision] = machine.push("c", 1, 0)
    assert (decision.id, decision.state) == ("c", State.REJECTED)
    assert "c" not in machine
    assert machine.statistics().levels[1].rejected == 1


def test_duplicate_and_backwards_leave_everything_as_it_was() -> None:
    machine = Machine(Fifo(), 1)
    machine.push("a", 0, 0)
    machine.push("b", 0, 5)
    before = (machine.waiting(), machine.statistics(), machine.next_due(), machine.now)
    with pytest.raises(DuplicateId):
        machine.push("b", 0, 6)
    with pytest.raises(TimeWentBackwards) as backwards:
        machine.tick(4)
    assert backwards.value.last == 5
    assert str(backwards.value).startswith("now=4")
    assert (machine.waiting(), machine.statistics(), machine.next_due(), machine.now) == before


def test_cancel_answers() -> None:
    machine = Machine(Fifo(), 1)
    machine.push("a", 0, 0)
    machine.push("b", 0, 0)
    assert machine.cancel("b") is True
    assert machine.cancel("b") is False  # already cancelled
    assert machine.cancel("a") is False  # already granted
    assert machine.cancel("never") is False
    assert machine.statistics().levels[0].cancelled == 1


def test_statistics_shares_and_proceeded() -> None:
    machine = Machine(Shares.every(2), 1, burst=4)
    for i in range(2):
        machine.push(("hi", i), 0, 0)
        machine.push(("lo", i), 1, 0)
    machine.refund(("lo", 1), 0)
    stats = machine.statistics()
    assert [level.proceeded for level in stats.levels] == [2, 1]
    assert stats.shares() == (2 / 3, 1 / 3)
    assert stats.granted == 4
    assert stats.waiting == 0


def test_the_waits_in_seconds_are_those_in_nanoseconds() -> None:
    """``statistics()``: ``wait_p50_s``, ``wait_p99_s`` and ``wait_max_s``
    are the same waits as the fields ending in ``_ns``, in seconds (``0.0``
    before the level's first grant). At one permit a second, 100 waiters
    pushed at 0 wait 0 to 99 s: three different waits."""
    machine = Machine(StrictPriority(2), 1)
    for i in range(100):
        machine.push(i, 0, 0)
    for k in range(100):
        machine.tick(k * SECOND)
    busy, idle = machine.statistics().levels
    assert busy.wait_p50_ns is not None
    assert busy.wait_p99_ns is not None
    assert busy.wait_max_ns == 99 * SECOND
    assert (busy.wait_p50_s, busy.wait_p99_s, busy.wait_max_s) == (
        busy.wait_p50_ns / 1e9,
        busy.wait_p99_ns / 1e9,
        99.0,
    )
    assert busy.wait_p50_s < busy.wait_p99_s < busy.wait_max_s
    assert (idle.wait_p50_s, idle.wait_p99_s, idle.wait_max_s) == (0.0, 0.0, 0.0)


def test_a_wait_past_what_a_float_holds_is_infinite_in_seconds() -> None:
    """A wait of 10**400 ns (past the times SPEC promises anything of, but
    taken) is exact in ``_ns`` and ``math.inf`` in seconds (the statistics'
    ``_s`` properties and the exporters raised OverflowError), as
    :func:`in_seconds` says of any duration."""
    machine = Machine(Fifo(), 10)
    machine.push("a", 0, 0)
    machine.push("b", 0, 0)
    machine.tick(10**400)
    (level,) = machine.statistics().levels
    assert level.wait_max_ns == 10**400
    assert (level.wait_p50_s, level.wait_max_s) == (0.0, math.inf)
    assert in_seconds(10**400) == math.inf
    assert in_seconds(-(10**400)) == -math.inf
    assert in_seconds(1_500_000_000) == 1.5
    assert in_seconds(int(sys.float_info.max)) == sys.float_info.max / 1e9
    assert in_seconds(10**310) == 1e301  # (past a float in ns, not in seconds)


def test_min_wait_counts_the_waiters_ahead() -> None:
    machine = Machine(StrictPriority(2), 100)  # a permit every 10 ms
    machine.push("now", 1, 0)
    machine.push("b1", 1, 0)
    machine.push("b2", 1, 0)
    assert machine.min_wait(0) == 10 * MILLISECOND  # batch waiters are not ahead
    assert machine.min_wait(1) == 30 * MILLISECOND


def test_a_push_whose_best_case_passes_its_max_wait_is_too_long() -> None:
    """SPEC P53: refused when ``min_wait`` exceeds ``max_wait``, queued when
    it equals it; refused, the id is not waiting and may be pushed again."""
    machine = Machine(StrictPriority(2), 100)  # a permit every 10 ms
    machine.push("now", 1, 0)
    machine.push("b1", 1, 0)
    [decision] = machine.push("b2", 1, 0, max_wait_ns=20 * MILLISECOND - 1)
    assert decision == Decision("b2", State.TOO_LONG, 1, 0, 0)
    assert "b2" not in machine
    assert machine.min_wait(1) == 20 * MILLISECOND  # what the refusal compared
    assert machine.push("b2", 1, 0, max_wait_ns=20 * MILLISECOND) == []
    assert "b2" in machine
    stats = machine.statistics().levels[1]
    assert (stats.pushed, stats.too_long, stats.rejected, stats.waiting) == (4, 1, 0, 2)


def test_a_waiter_the_source_says_waits_past_its_max_wait_is_too_long() -> None:
    """SPEC P53, supplied: ``too_long(id, wait_ns, max_wait_ns)`` takes a
    waiter out as too long when the wait the source outside says exceeds
    its max_wait (``>``: an equal one stays); counted as too long, not as
    cancelled. Bad input, or a paced machine, is refused and changes
    nothing."""
    machine = Machine(Fifo(2), 1, supplied=True)
    machine.push("a", 1, 0)
    machine.push("b", 1, 0)
    before = machine.snapshot()
    assert machine.too_long("a", SECOND, SECOND) == []  # fits: stays
    assert machine.too_long("c", 2 * SECOND, SECOND) == []  # not waiting
    for args in (("a", -1, 0), ("a", 1, -1), ("a", 1.5, 0), ("a", 1, None)):
        with pytest.raises((PermitValueError, PermitTypeError)):
            machine.too_long(*args)
    assert machine.snapshot() == before
    assert machine.too_long("a", SECOND + 1, SECOND) == [Decision("a", State.TOO_LONG, 1, 0, 0)]
    assert "a" not in machine
    assert "b" in machine
    stats = machine.statistics().levels[1]
    assert (stats.pushed, stats.too_long, stats.cancelled, stats.waiting) == (2, 1, 0, 1)
    with pytest.raises(PermitValueError, match="supplied machine"):
        Machine(Fifo(1), 1).too_long("x", 2, 1)


def test_the_first_push_naming_a_flow_is_bounded_as_one_that_names_a_flow() -> None:
    """SPEC P19 and P53: a newcomer that names a flow makes the machine one
    where flows are named, so its best case counts only the waiters of its
    own flow, even when no push named a flow before it: its flow takes its
    turn in its level, ahead of older waiters of the level and of other
    levels. (It counted every level's waiters, so the first push naming a
    flow could be granted before its min_wait, or refused as too long.)"""
    machine = Machine(Fifo(2), 1, 2)  # a unit a second, two banked
    machine.push("x", 0, 0, cost=2)  # granted at once: the bucket is empty
    machine.push("z", 0, 0, cost=2)  # waits, in level 0's default flow
    machine.push("a", 1, 0, cost=2)  # waits, after it
    assert machine.min_wait(0, flow="f") == 1 * SECOND  # its own flow's only
    assert machine.min_wait(0) == 5 * SECOND  # a newcomer of no flow: every waiter
    assert machine.push("b", 0, 0, flow="f", max_wait_ns=1 * SECOND) == []  # queued
    # level 0 holds the oldest waiter, z, and serves b first: b finishes first
    assert machine.tick(1 * SECOND) == [Decision("b", State.GRANTED, 0, 1 * SECOND, 1 * SECOND)]


def test_queues_as_a_policy_reads_them() -> None:
    machine = Machine(StrictPriority(2), 10)
    machine.push("a", 0, 0)  # granted at once
    machine.push("b", 1, 0)
    queues = machine.queues
    b = queues.get("b")
    assert b is not None
    assert (b.id, b.level) == ("b", 1)
    assert queues.get("a") is None, "granted: no longer waiting"
    assert queues.head(1).id == "b"
    with pytest.raises(IndexError, match="level 0 has no waiters"):
        queues.head(0)
    assert repr(queues) == "<Queues depths=[0, 1] granted=1>"


@pytest.mark.parametrize("policy", [StrictPriority(2), Aging(2)], ids=["looked-for", "kept"])
def test_a_levels_oldest_is_its_first_pushed_whichever_flow_goes_next(policy: Policy) -> None:
    """P9: ``queues.oldest(level)``, the waiter pushed first of a level, where
    its flows serve another next; kept in order under ``Aging`` (and
    ``Fifo``), looked for through the flows under another policy."""
    machine = Machine(policy, 1, 1)
    machine.push("banked", 0, 0)  # granted at once: the rest wait
    machine.push("a1", 0, 0, flow="a", cost=1)
    machine.push("a2", 0, 0, flow="a")
    machine.push("b1", 0, 0, flow="b")  # b's turn comes before a's second
    queues = machine.queues
    assert (queues.head(0).id, queues.oldest(0).id) == ("a1", "a1")
    machine.tick(1 * SECOND)  # a1 granted: b1 goes next, a2 is the oldest
    assert (queues.head(0).id, queues.oldest(0).id) == ("b1", "a2")
    assert machine.cancel("a2")
    assert (queues.head(0).id, queues.oldest(0).id) == ("b1", "b1")
    with pytest.raises(IndexError, match="level 1 has no waiters"):
        queues.oldest(1)
    machine.check_valid()


def test_queue_full_names_the_limit_the_push_hit() -> None:
    """P79: a rejection by the level's ``max_waiting`` names it; one by the flow's
    ``max_waiting_per_flow`` names the flow and its limit; a level with no
    queue limit has nothing to report."""
    machine = Machine(Fifo(2), 1, 1, max_waiting=(2, None), max_waiting_per_flow=1)
    machine.push("banked", 0, 0)
    machine.push("a1", 0, 0, flow="a")
    [rejected] = machine.push("a2", 0, 0, flow="a")
    assert rejected.state is State.REJECTED
    error = machine.queue_full("a2", 0, "a")
    assert (error.max_waiting, error.flow, error.per_flow) == (1, "a", True)
    machine.push("b1", 0, 0, flow="b")
    [rejected] = machine.push("c1", 0, 0, flow="c")
    assert rejected.state is State.REJECTED
    error = machine.queue_full("c1", 0, "c")
    assert (error.max_waiting, error.per_flow) == (2, False)
    assert "level 0 already has 2 waiters (max_waiting=2)" in str(error)
    unlimited = Machine(Fifo(1), 1, 1)
    with pytest.raises(PermitValueError, match="no push to it is rejected"):
        unlimited.queue_full("x", 0)


@pytest.mark.usefixtures("switch_often")
def test_a_quantile_read_from_another_thread_never_fails() -> None:
    """An exporter's thread reads a histogram while the limiter's thread
    records into it: a read between a wait's count and its bucket gives a
    recorded wait, never an error (the 99th percentile of fewer than 100
    waits is the last rank, the one such a read may not find)."""
    histogram = WaitHistogram()
    failures: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                value = histogram.quantile(1.0)
                assert value is None or 0 <= value < 50_000, value
            except BaseException as error:
                failures.append(error)
                return

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for wait in range(50_000):
            histogram.record(wait)
    finally:
        done.set()
        reader.join()
    assert failures == []


def test_a_merged_histogram_is_one_that_recorded_both() -> None:
    """``merge`` counts another histogram's waits as if recorded here (the
    simulator merges its tenants' into their workload's)."""
    waits = [0, 1, 255, 256, 1_000, 999_999, 3 * 10**9, 12]
    both, first, second = WaitHistogram(), WaitHistogram(), WaitHistogram()
    for wait in waits:
        both.record(wait)
    for wait in waits[:3]:
        first.record(wait)
    for wait in waits[3:]:
        second.record(wait)
    first.merge(second)
    first.merge(WaitHistogram())
    got = (first.count, first.total, first.max, first.items(), first.quantile(0.5))
    want = (both.count, both.total, both.max, both.items(), both.quantile(0.5))
    assert got == want, (got, want)


def test_equal_snapshots_decide_alike() -> None:
    """A snapshot holds everything the machine's future decisions depend on:
    two machines that differ only in what decides a ``max_wait`` push (a push
    that once named a flow: only a newcomer's own level surely goes first
    then) or a refund (a permit spent to be settled later is no longer
    refundable) have snapshots that differ too."""
    flowed = Machine(Fifo(2), 1, 1, settle_window_ns=None)
    plain = Machine(Fifo(2), 1, 1, settle_window_ns=None)
    flowed.push("first", 0, 0, flow="tenant")  # granted at once, its flow gone with it
    plain.push("first", 0, 0)
    assert flowed.snapshot() != plain.snapshot()
    flowed.push("a", 0, 1)
    plain.push("a", 0, 1)
    assert flowed.push("b", 1, 2, max_wait_ns=SECOND) == []  # only level 1 surely goes first
    [too_long] = plain.push("b", 1, 2, max_wait_ns=SECOND)  # "a" goes first too
    assert too_long.state is State.TOO_LONG

    spent = Machine(Fifo(), 1, 1)
    kept = Machine(Fifo(), 1, 1)
    spent.push("p", 0, 0)
    kept.push("p", 0, 0)
    spent.spend("p", 0, settle_later=True)
    assert spent.snapshot() != kept.snapshot()
    with pytest.raises(NotRefundable):
        spent.refund("p", 1)
    assert kept.refund("p", 1) == []


def test_a_policy_says_how_processes_share_a_limit() -> None:
    """P49's rule comes from the policy (the core), not from the adapter:
    ``Shares`` gives its weights over the limit it shares (by name, or the
    first), and a policy of its own may give weights too; the others keep
    strict order across processes."""
    assert Shares((3, 1)).across_processes(("requests",)) == ((3, 1), 0)
    assert Shares((3, 1), limit="tokens").across_processes(("requests", "tokens")) == ((3, 1), 1)
    with pytest.raises(PermitValueError, match="'tokens'"):
        Shares((3, 1), limit="tokens").across_processes(("requests",))
    assert not hasattr(StrictPriority(2), "across_processes")
    assert across_processes(StrictPriority(2), ("requests",)) is None  # strict order
    assert across_processes(Shares((3, 1)), ("a", "b")) == ((3, 1), 0)

    class Dealing:
        """Strict priority in a process, dealing ``dealt`` across processes."""

        levels = 2

        def __init__(self, dealt: object) -> None:
            self.dealt = dealt

        def choose(self, queues: Queues, now: int) -> int:
            return StrictPriority(2).choose(queues, now)

        def ahead(self, queues: Queues, level: int, now: int) -> int:
            return StrictPriority(2).ahead(queues, level, now)

        def across_processes(self, limits: object) -> object:
            return self.dealt

    for dealt in [((3, 1, 1), 0), ((3, 0), 0), ((3, 1), 1), ((3, 1), -1), (3, 1), "x", None]:
        policy = Dealing(dealt)
        with pytest.raises(PermitValueError, match="across_processes") as error:
            across_processes(policy, ("requests",))
        assert (error.value.argument, error.value.value) == ("policy", policy), dealt


@pytest.mark.parametrize("seed", range(20))
def test_the_leading_waiters_are_the_first_of_the_order(seed: int) -> None:
    """``Queues.leading(level, n)`` is the first ``n`` waiters in the order
    they would be granted in (a copy's grants, a permit at a time), without
    ordering the rest: over pushes of
    several costs into one flow or several of different weights, grants
    and cancels."""
    rng = random.Random(seed)
    machine = Machine(
        Fifo(1),
        limits={"a": Limit(1, burst=3), "b": Limit(1, burst=3)},
        supplied=True,
        flow_weights=lambda flow: 1 + hash(flow) % 3,
        flow_limit=rng.choice(["a", "b"]),
    )
    options: list[list[str | None]] = [[None], ["x", "y"], ["x", "y", "z", "w"]]
    flows = rng.choice(options)
    waiting: list[int] = []
    for id in range(200):
        action = rng.random()
        if action < 0.6 or not waiting:
            cost = {"a": rng.randint(0, 3), "b": rng.randint(1, 3)}
            machine.push(id, 0, id, cost=cost, flow=rng.choice(flows))
            waiting.append(id)
        elif action < 0.8:
            for decision in machine.supply(id):
                waiting.remove(decision.id)  # type: ignore[arg-type]
        else:
            gone = waiting.pop(rng.randrange(len(waiting)))
            machine.cancel(gone)
        if id % 10:
            continue
        # the order, found apart: the grants a copy makes, handed a permit at a time
        ahead, order = copy.deepcopy(machine), []
        while len(ahead):
            order += [d.id for d in ahead.supply(id) if d.state is State.GRANTED]
        for n in (0, 1, 2, 5, 16, len(order), len(order) + 3):
            leading = [w.id for w in machine.queues.leading(0, n)]
            assert leading == order[:n], (seed, id, n)


def test_a_cost_dict_asked_again_is_checked_as_the_first_time() -> None:
    # The machine keeps the units of the dicts it was asked for lately; one
    # equal to such a dict but for a value that is no int (True == 1, 1.0
    # == 1) is refused all the same, leaving the machine as it was.
    limits = {"requests": Limit(1, 10), "tokens": Limit(1, 5)}
    machine = Machine(Fifo(), limits=limits)
    machine.push("a", 0, 0, cost={"requests": 1, "tokens": 5})  # granted
    for bad in [True, 1.0, Fraction(1)]:
        with pytest.raises(PermitTypeError, match="requests"):
            machine.push("b", 0, 0, cost={"requests": bad, "tokens": 5})  # type: ignore[dict-item]
    with pytest.raises(PermitValueError) as unknown:
        machine.push("b", 0, 0, cost={"requests": 1, "token": 5})
    assert str(unknown.value).endswith(": 'token' is not one of the limits ['requests', 'tokens']")
    machine.push("b", 0, 0, cost={"requests": Level.BATCH, "tokens": 5})
    machine.push("c", 0, 0, cost={"requests": 1, "tokens": 5})
    assert [w.cost for w in machine.waiting(0)] == [(1, 5), (1, 5)]
    assert machine.waiting(0)[0].cost is machine.waiting(0)[1].cost  # shared
    assert machine.statistics().levels[0].units_granted == (1, 5)


def test_a_grant_spent_to_be_settled_is_forgotten_with_its_log() -> None:
    # A permit spent with settle_later stays settleable within the window;
    # once the log is pruned past it, it is forgotten, its spend too.
    machine = Machine(Fifo(), 1, 1, settle_window_ns=SECOND, charge=Charge.AT_SPEND)
    machine.push("a", 0, 0)  # granted at once, in flight
    machine.spend("a", 0, settle_later=True)
    for i in range(1, 5):  # charges over more than two windows: the log is pruned
        machine.push(i, 0, i * SECOND)
        machine.spend(i, i * SECOND)
        machine.check_valid()
    with pytest.raises(NotRefundable):
        machine.settle("a", 1, 4 * SECOND)


def test_a_spend_whose_tick_grants_the_id_spends_that_grant() -> None:
    # spend ticks first: a waiter the tick grants is spent at once, in the
    # same call (held after the tick), not left in flight.
    machine = Machine(Fifo(), 1, 1, settle_window_ns=0, charge=Charge.AT_SPEND)
    machine.push("a", 0, 0)  # granted at once, in flight
    machine.spend("a", 0)
    assert machine.push("b", 0, 1) == []  # waits for the next unit
    decisions = machine.spend("b", SECOND)
    assert [(d.id, d.state) for d in decisions] == [("b", State.GRANTED)]
    assert machine.in_flight == 0
    with pytest.raises(NotRefundable):
        machine.refund("b", SECOND)
    machine.check_valid()


def test_a_permit_spent_counts_against_the_quota() -> None:
    # Charged at its spend, a permit in flight takes its unit of the
    # upstream's quota then: with the two units left spent, the next waits
    # for the quota's reset, however much the bucket holds.
    machine = Machine(Fifo(), 1000, 10, settle_window_ns=0, charge=Charge.AT_SPEND)
    machine.quota(2, SECOND, 0)
    for i, id in enumerate("ac"):
        assert [d.id for d in machine.push(id, 0, 2 * i)] == [id]  # in flight
        machine.spend(id, 2 * i + 1)
    assert machine.push("b", 0, 4) == []
    assert machine.next_tick() == SECOND
    machine.check_valid()


def test_a_cost_asked_for_before_a_burst_was_lowered_is_refused_above_it() -> None:
    """A dict cost the machine has read before is checked again once a
    burst changes: above the lowered burst, it is refused at push (P18)."""
    m = Machine(Fifo(), limits={"requests": Limit(10, 10), "tokens": Limit(100, 100)})
    cost = {"requests": 1, "tokens": 50}
    assert [d.id for d in m.push("a", 0, 0, cost=dict(cost))] == ["a"]
    m.set_limit(1, burst=40, limit="tokens")
    with pytest.raises(PermitValueError) as refused:
        m.push("b", 0, 2, cost=dict(cost))
    assert (refused.value.argument, refused.value.value) == ("cost['tokens']", 50)
    assert "b" not in m


def test_a_settle_far_past_the_burst_is_charged_whole() -> None:
    """A settle reports what the call used, after the fact: more than any
    burst (10**30 units on a limit of 10 a second, burst 5) is charged
    whole, a debt the later grants wait out (P29), never cut to the burst
    nor refused (the upstream counted those units). Only a Redis limiter,
    whose times are bounded, refuses a debt past 1e9 s."""
    machine = Machine(Fifo(), 10, 5)
    machine.push("used", 0, now=0)
    assert machine.settle("used", 10**30, now=1) == []
    assert machine.push("next", 0, now=2) == []
    # the bucket of 5 owes 10**30 - 5 units, and "next" needs one more: at 10 a second
    assert machine.next_tick() == (10**30 - 5 + 1) * SECOND // 10
    assert machine.statistics().levels[0].units_granted == (10**30,)


def test_the_cost_cache_cleared_when_full_decides_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine keeps the costs it has read (up to ``COSTS_SHARED``),
    clearing them all when full. A machine that clears them after every
    few distinct costs decides exactly as one that never does: the same
    decisions, due times and snapshots, over pushes of 18 costs asked again
    and again against two limits, ticks, cancels, settles and changes of a
    burst (after which a cost kept must be checked again)."""
    from permits.core import _machine

    def run() -> list[object]:
        machine = Machine(
            StrictPriority(2),
            limits={"requests": Limit(100, 10), "tokens": Limit(50_000, 5_000)},
            settle_window_ns=SECOND,
        )
        rng = random.Random(7)
        seen: list[object] = []
        now = 0
        for i in range(3_000):
            now += rng.randrange(0, 10 * MILLISECOND)
            step = rng.random()
            if step < 0.6:
                # (18 costs, each asked again and again: read or found kept)
                tokens = rng.choice((1, 40, 150, 299, 350, 400))
                cost = {"requests": rng.randint(0, 2), "tokens": tokens}
                try:
                    seen.append(machine.push(i, rng.randrange(2), now, cost=cost))
                except PermitValueError as error:  # over the burst now: refused alike
                    seen.append(str(error))
            elif step < 0.75 and len(machine):
                seen.append(machine.cancel(rng.randrange(i)))
            elif step < 0.8:  # a lower or higher burst: costs asked before are read again
                burst = rng.choice([300, 5_000])
                try:
                    seen.append(machine.set_limit(now, burst=burst, limit="tokens"))
                except PermitValueError as error:  # a waiter asks for more: refused alike
                    seen.append(str(error))
            elif step < 0.9:
                held = [grant.waiter.id for grant in machine.snapshot().grants]
                if held:
                    try:
                        seen.append(machine.settle(rng.choice(held), {"tokens": 1}, now))
                    except NotRefundable as error:  # past its window: refused alike
                        seen.append(str(error))
            seen.append(machine.tick(now))
            seen.append((machine.next_tick(), len(machine)))
        seen.append(machine.snapshot())
        return seen

    kept = run()
    monkeypatch.setattr(_machine, "COSTS_SHARED", 3)
    assert run() == kept


def test_a_machines_repr_names_its_flow_options() -> None:
    """A machine's repr names every option it was made with that is not the
    default, its flows' too (it read as a machine without them: one whose
    flows are capped at 3 waiters as one with no cap)."""
    two = {"requests": Limit(2, 3), "tokens": Limit(100, 50)}
    machine = Machine(
        Fifo(),
        limits=two,
        flow_weights={"acme": 2},
        max_waiting_per_flow=3,
        flow_limit="tokens",
        keep_waits=False,
    )
    assert repr(machine) == (
        f"Machine(policy=Fifo(levels=1), limits={two!r}, max_waiting=None, "
        "settle_window_ns=1000000000, supplied=False, charge=Charge.AT_GRANT, "
        "flow_weights={'acme': 2}, max_waiting_per_flow=3, flow_limit='tokens', keep_waits=False)"
    )
    assert repr(Machine(Fifo(), 1, max_waiting_per_flow=0)) == (
        "Machine(policy=Fifo(levels=1), rate=Fraction(1, 1), burst=1, max_waiting=None, "
        "settle_window_ns=1000000000, supplied=False, charge=Charge.AT_GRANT, "
        "max_waiting_per_flow=0)"
    )


def test_the_schedule_is_the_order_of_the_fractions() -> None:
    """``schedule`` orders the slots by ``j / w`` exactly, the more urgent
    level first on a tie, as the exact fractions sort them: it sorts
    integer keys (10**6 Fractions took seconds), which must neither tie two
    slots that differ (``1/3`` and ``1/2``) nor part two that are equal."""
    rng = random.Random(97)
    for weights in [
        (2, 3),
        (4, 1),
        (1, 1, 1),
        (6, 4, 3),
        (999, 1000),
        *[
            tuple(rng.randint(1, rng.choice([3, 50, 1000])) for _ in range(rng.randint(1, 8)))
            for _ in range(300)
        ],
    ]:
        slots = sorted(
            (Fraction(j, weight), level)
            for level, weight in enumerate(weights)
            for j in range(1, weight + 1)
        )
        assert schedule(weights) == tuple(level for _, level in slots), weights


def test_a_shallow_copy_keeps_the_callers_ids_and_flows() -> None:
    """``copy.copy`` of a machine (P98) copies its state but not the
    caller's own values in it: a waiter's id and flow, objects that hash
    by identity (an adapter's waiter), are the very objects in the copy,
    so the copy answers to them: a cancel, a refund, its busiest flows.
    (Copied, the copy knew none of them: ``cancel`` said ``False``.)
    ``copy.deepcopy`` copies them, as it copies everything."""
    a, b, c, tenant = object(), object(), object(), object()
    machine = Machine(Fifo(), 1, 1, settle_window_ns=10 * SECOND)
    machine.push(a, 0, 0, flow=tenant)  # granted at once
    machine.push(b, 0, 0, flow=tenant)
    machine.push(c, 0, 0)
    twin = copy.copy(machine)
    assert [w.id for w in twin.waiting()] == [b, c]
    assert [f.flow for f in twin.busiest_flows(0)] == [tenant]
    assert twin.cancel(b) is True
    assert [d.id for d in twin.refund(a, 1)] == [c]  # its permit goes to c at once
    assert [w.id for w in machine.waiting()] == [b, c]  # the original is as it was
    twin.check_valid()
    deep = copy.deepcopy(machine)
    assert deep.cancel(b) is False  # deepcopy copied b, as it copies everything
    assert len(deep.waiting()) == 2


def test_a_shallow_copy_keeps_the_ids_of_granted_waiters_its_lines_keep() -> None:
    """``copy.copy`` of a machine (P98) shares every id and flow the caller
    gave it, those of granted waiters a flow's line still keeps (stepped
    over in its first chunk until the chunk is let go) too: copied, an id
    that cannot be deep-copied (it holds a lock) failed the copy with a
    TypeError, the waiter long granted and spent."""

    class Holder:
        """An id that hashes by identity and cannot be copied."""

        def __init__(self) -> None:
            self.lock = threading.Lock()

    ids = [Holder() for _ in range(3)]
    machine = Machine(Fifo(), 1, 1)
    for waiter in ids:
        machine.push(waiter, 0, 0, flow="acme")  # the first granted at once
    machine.spend(ids[0], 0)
    machine.tick(SECOND)
    machine.spend(ids[1], SECOND)
    twin = copy.copy(machine)
    assert [w.id for w in twin.waiting()] == [ids[2]]
    assert twin.cancel(ids[2]) is True
    assert [w.id for w in machine.waiting()] == [ids[2]]  # the original is as it was
    twin.check_valid()
    machine.check_valid()


@pytest.mark.parametrize("rate", ["0E-20000", "-1E+20000", "-1E-20000", "-0E+99999"])
def test_a_decimal_rate_at_or_below_zero_is_refused_as_such_whatever_its_exponent(
    rate: str,
) -> None:
    """A Decimal rate of 0 or below is refused as one (``must be greater
    than 0``), whatever its exponent (P18: the fault the user can mend): it
    was refused for its exponent past 10,000 (P97), which a rate of 0 or
    below has nothing to do with."""
    with pytest.raises(PermitValueError) as refused:
        Machine(Fifo(), Decimal(rate))
    assert str(refused.value) == f"rate={Decimal(rate)!r}: must be greater than 0"
