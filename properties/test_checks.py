"""The invariant checks, checked.

Every stateful property calls ``Machine.check_valid()`` after each step, and
leans on it: a machine that breaks an invariant without a visible effect is
caught only there. So the checks are tested like code: each invariant is
broken on purpose, on a state the machine reached, and must be reported in
its own words; where an invariant is a bound, a state exactly at the bound
must pass it and one just past it must not.

This file alone reaches into the machine's private fields, and only to break
them: the checks read the internals, so only broken internals can show
what they catch. The properties themselves read the public snapshot.
"""

from __future__ import annotations

import re
from collections import deque

import pytest

from permits.core import Charge, Fifo, Limit, Machine, StrictPriority
from permits.core._bucket import Bucket, Buckets
from permits.core._queues import SLACK, Queues, Waiter, _Flow

SECOND = 1_000_000_000


def broken(what: str) -> re.Pattern[str]:
    """The words a check reports ``what`` in, exactly."""
    return re.compile(rf"^invariant broken: {re.escape(what)}$")


# -- the queues ------------------------------------------------------------


def one_line(pattern: str, front: int = 0) -> Queues:
    """Queues of one level whose one flow's line is ``pattern``: ``L`` a
    live entry, ``D`` a dead one (its waiter gone, as after a cancel), in
    push order; the first ``front`` entries are the part a sweep has yet to
    look at. Every count (depths, the line's dead entries) is kept exact."""
    queues = Queues(1)
    waiters = [Waiter(n, 0, n, 0, None) for n in range(len(pattern))]
    for waiter in waiters:
        queues._append(waiter)
    line = queues._levels[0].flows[None].line
    for waiter, kind in zip(waiters, pattern, strict=True):
        if kind == "D":
            del queues._by_id[waiter.id]
            queues._levels[0].flows[None].depth -= 1
            queues.depths[0] -= 1
            line.dead += 1
    line.front, line.back = deque(waiters[:front]), deque(waiters[front:])
    return queues


def test_a_line_built_by_hand_is_valid() -> None:
    """The states below are built by ``one_line``; built right, they pass."""
    one_line("LLL")._check_valid()
    one_line("LDL")._check_valid()
    one_line("L" + "D" * 18 + "LL", front=19)._check_valid()


@pytest.mark.parametrize(
    ("pattern", "front", "what"),
    [
        # the dead count is exact
        ("LDL", 0, None),
        # at most 2 L + SLACK entries: one over (L = 1: SLACK + 2 dead)
        ("L" + "D" * (SLACK + 2), 0, "dead entries stay bounded"),
        # (a) 4 D_back - 2 L + F <= 2 SLACK, one over through each term:
        # L = 100 in front, 5 dead in front, 40 dead in back: 160 - 200 + 105
        ("L" * 100 + "D" * 5 + "D" * 40, 105, "sweeps start in time"),
        # (b) 3 (D - L) + F <= 2 SLACK, one over: L = 1, 17 dead in front
        ("D" * 17 + "L", 17, "sweeps keep up"),
        # a head that is dead, every count right
        ("DL", 0, "heads are live"),
    ],
)
def test_the_line_checks_report_each_broken_bound(
    pattern: str, front: int, what: str | None
) -> None:
    queues = one_line(pattern, front)
    if what is None:  # the dead count: one more than there are
        queues._levels[0].flows[None].line.dead += 1
        what = "dead count is exact"
    with pytest.raises(AssertionError, match=broken(what)):
        queues._check_valid()


def test_the_line_checks_hold_at_their_bounds() -> None:
    """Exactly at a bound is within it: (b) at 2 SLACK, with the head live
    (L = 3, 18 dead in front: 3 * 15 + 19 = 64); and (a) at 2 SLACK."""
    assert 2 * SLACK == 64
    one_line("L" + "D" * 18 + "LL", front=19)._check_valid()
    # (a): 4 D_back - 2 L + F = 64 with 40 dead in back, 100 live and 4 dead in front
    one_line("L" * 100 + "D" * 4 + "D" * 40, front=104)._check_valid()
    # entries: at most 2 L + SLACK is never reached without breaking (a) or
    # (b) (see _Line): just past it, the bound is what is reported
    with pytest.raises(AssertionError, match=broken("sweeps start in time")):
        one_line("L" * 2 + "D" * (SLACK + 2))._check_valid()


def test_a_flow_without_waiters_is_reported() -> None:
    queues = one_line("L")
    queues._levels[0].flows["ghost"] = _Flow("ghost", queues._by_id, 1)
    with pytest.raises(AssertionError, match=broken("a flow is kept only while it has waiters")):
        queues._check_valid()


def two_flows() -> Queues:
    """Queues of one level with two flows, ``a`` and ``b``, two waiters each,
    and costs counted per level and per flow."""
    queues = Queues(1)
    for n in range(4):
        queues._append(Waiter(n, 0, n, 0, None, (1 + n,), "ab"[n % 2]))
    queues._sum_costs()
    queues._check_valid()
    return queues


def test_the_flow_checks_report_what_they_guard() -> None:
    queues = two_flows()
    line = queues._levels[0].flows["a"].line
    # a waiter of the right level but another flow, in this flow's line
    stray = line.back[1]._replace(flow="b")
    line.back[1] = queues._by_id[stray.id] = stray
    with pytest.raises(AssertionError, match=broken("in its flow")):
        queues._check_valid()

    queues = two_flows()
    line = queues._levels[0].flows["a"].line
    line.back.reverse()
    with pytest.raises(AssertionError, match=broken("each flow is in push order")):
        queues._check_valid()

    queues = two_flows()
    units = queues._levels[0].flows["a"].units
    assert units is not None
    units[0] += 1
    with pytest.raises(AssertionError, match=broken("units count the flow's waiters' costs")):
        queues._check_valid()


def test_the_level_checks_report_what_they_guard() -> None:
    queues = two_flows()
    queues.depths[0] += 1
    with pytest.raises(AssertionError, match=broken("depth counts the live entries")):
        queues._check_valid()

    queues = one_line("LL")
    queues._levels[0].only = None
    with pytest.raises(AssertionError, match=broken("one flow alone is the only one")):
        queues._check_valid()

    # a heap with one flow, even if its entry is counted stale
    queues = one_line("LL")
    queues._levels[0].heap.append((0, 0, None, queues._by_id[0]))
    queues._levels[0].stale += 1
    with pytest.raises(AssertionError, match=broken("a heap only for two flows or more")):
        queues._check_valid()

    queues = two_flows()
    queues._levels[0].heap.append((SECOND, 9, "a", queues._by_id[0]))  # not counted stale
    with pytest.raises(AssertionError, match=broken("one entry each")):
        queues._check_valid()

    sums = two_flows()
    assert sums._sums is not None
    sums._sums[0][0] += 1
    with pytest.raises(AssertionError, match=broken("units count the live waiters' costs")):
        sums._check_valid()

    queues = one_line("LL")
    queues._by_id["ghost"] = Waiter("ghost", 0, 99, 0, None)
    with pytest.raises(AssertionError, match=broken("every waiting id is in its level")):
        queues._check_valid()


def test_stale_heap_entries_are_bounded_at_live_plus_slack() -> None:
    for stale, valid in ((SLACK + 2, True), (SLACK + 3, False)):
        queues = two_flows()
        level = queues._levels[0]
        assert len(level.heap) - level.stale == 2
        for n in range(stale):
            level.heap.append((SECOND + n, 100 + n, "a", queues._by_id[0]))
        level.stale += stale
        if valid:  # stale == live entries + SLACK
            queues._check_valid()
        else:
            with pytest.raises(AssertionError, match=broken("stale entries stay bounded")):
                queues._check_valid()


# -- the machine -----------------------------------------------------------


def waiting(charge: Charge = Charge.AT_SPEND) -> Machine:
    """A machine with one permit granted (in flight, unless charged at its
    grant) and two waiting, the second with a deadline at 1 s."""
    machine = Machine(StrictPriority(2), rate=10, burst=1, charge=charge)
    machine.push("granted", 0, 0)
    machine.push("a", 1, 0)
    machine.push("b", 1, 0, deadline=SECOND)
    machine.check_valid()
    return machine


def test_a_waiter_past_its_deadline_is_reported_from_the_deadline_on() -> None:
    machine = waiting()
    machine._now = SECOND - 1
    machine._source.due = 2 * SECOND
    machine.check_valid()
    machine._now = SECOND
    with pytest.raises(AssertionError, match=broken("a waiter is past its deadline")):
        machine.check_valid()


def test_a_permit_due_while_someone_waits_is_reported_from_its_due_time() -> None:
    machine = waiting()
    machine._now = SECOND // 2 - 1
    machine._source.due = SECOND // 2
    machine.check_valid()
    machine._now = SECOND // 2
    with pytest.raises(AssertionError, match=broken("a permit is available while someone waits")):
        machine.check_valid()


def test_the_deadline_heap_checks_report_what_they_guard() -> None:
    machine = waiting()
    deadlines = machine._deadlines
    deadlines._dead += 1
    with pytest.raises(AssertionError, match=r"^invariant broken: deadline dead count 1 != 0$"):
        machine.check_valid()

    machine = waiting()
    deadlines = machine._deadlines
    gone = Waiter("gone", 1, 99, 0, SECOND)
    deadlines.heap.extend([(SECOND, 99, gone)] * (2 + SLACK))  # 2 * 1 live + SLACK + 1
    deadlines._dead += 2 + SLACK
    with pytest.raises(AssertionError, match=broken("deadline heap holds too many dead entries")):
        machine.check_valid()

    machine = waiting()
    machine._deadlines.heap.clear()
    with pytest.raises(AssertionError, match=broken("every waiter with a deadline is in the heap")):
        machine.check_valid()


def test_the_grant_checks_report_what_they_guard() -> None:
    machine = waiting()
    machine._flying += 1
    with pytest.raises(AssertionError, match=broken("in flight count != grants in flight")):
        machine.check_valid()

    machine = waiting()
    machine._at_grant = True
    with pytest.raises(AssertionError, match=broken("in flight while charged at grant")):
        machine.check_valid()

    machine = waiting()
    machine._ledger._spent.add("nobody")
    with pytest.raises(AssertionError, match=broken("a spent grant is not held")):
        machine.check_valid()

    machine = waiting(charge=Charge.AT_GRANT)
    machine._ledger._log.clear()
    with pytest.raises(AssertionError, match=broken("a held charged grant is not in the log")):
        machine.check_valid()


def bucket_of(machine: Machine, index: int) -> Bucket:
    """The machine's bucket of its ``index``-th limit."""
    source = machine._source
    if isinstance(source, Bucket):
        return source
    assert isinstance(source, Buckets)
    return source.buckets[index]


@pytest.mark.parametrize(
    "limits",
    [None, {"requests": Limit(10, 1), "tokens": Limit(100, 10)}],
    ids=["one limit", "two limits"],
)
def test_units_held_are_checked_against_the_permits_in_flight(
    limits: dict[str, Limit] | None,
) -> None:
    def machine() -> Machine:
        if limits is None:
            return waiting()
        built = Machine(Fifo(), limits=limits, charge=Charge.AT_SPEND)
        built.push("granted", 0, 0)
        built.check_valid()
        return built

    broken_machine = machine()
    bucket = bucket_of(broken_machine, 0)
    bucket.held += 1
    with pytest.raises(AssertionError, match=broken("units held != costs in flight")):
        broken_machine.check_valid()

    broken_machine = machine()
    bucket = bucket_of(broken_machine, 1)
    bucket.held = -1
    with pytest.raises(AssertionError, match=broken("negative units in flight")):
        broken_machine.check_valid()
