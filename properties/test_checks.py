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
from collections.abc import Callable
from typing import TypeVar

import pytest

from permits.core import Charge, Fifo, Limit, Machine, StrictPriority
from permits.core._bucket import Bucket, Buckets
from permits.core._deadlines import SHIFT
from permits.core._queues import CHUNK, Queues, Waiter, _Flow
from permits.core._sorted import Sorted

SECOND = 1_000_000_000

T = TypeVar("T")
M = TypeVar("M")


def broken(what: str) -> re.Pattern[str]:
    """The words a check reports ``what`` in, exactly."""
    return re.compile(rf"^invariant broken: {re.escape(what)}$")


# -- the queues ------------------------------------------------------------


def one_line(*sizes: int, granted: int = 0) -> Queues:
    """Queues of one level whose one flow's line is built by hand as chunks
    of ``sizes`` waiters, in push order, the first chunk led by ``granted``
    entries already granted. Every count (depths, the flow's waiters) is
    kept exact."""
    queues = Queues(1)
    for n in range(granted + sum(sizes)):
        queues._append(Waiter(n, 0, n, 0, None))
    flow = queues._levels[0].flows[None]
    waiters = list(flow.line)
    for waiter in waiters[:granted]:
        del queues._by_id[waiter.id]
    queues.depths[0] -= granted
    flow.depth -= granted
    entries = iter(waiters)
    sizes = (granted + sizes[0], *sizes[1:])
    flow.line.chunks = [[next(entries) for _ in range(n)] for n in sizes]
    flow.line.firsts = [chunk[0].seq if chunk else 0 for chunk in flow.line.chunks]
    flow.line.start = granted
    return queues


def test_a_line_built_by_hand_is_valid() -> None:
    """The states below are built by ``one_line``; built right, they pass."""
    one_line(3)._check_valid()
    one_line(CHUNK, 1, CHUNK)._check_valid()
    one_line(1, 1, CHUNK // 2, CHUNK)._check_valid()  # the first chunk aside
    one_line(2, CHUNK, granted=CHUNK - 2)._check_valid()


@pytest.mark.parametrize(
    ("sizes", "granted", "what"),
    [
        # an empty chunk, one with only granted entries, and one past CHUNK
        ((1, 0, CHUNK), 0, "every chunk holds a waiter"),
        ((0, CHUNK), 3, "every chunk holds a waiter"),
        ((CHUNK + 1,), 0, "chunks hold at most CHUNK"),
        ((2, CHUNK), CHUNK - 1, "chunks hold at most CHUNK"),
        # neighbours past the first that hold CHUNK // 2 together, one too few
        ((1, CHUNK // 2 - 1, 1, CHUNK), 0, "neighbouring chunks hold over CHUNK // 2"),
    ],
)
def test_the_line_checks_report_each_broken_bound(
    sizes: tuple[int, ...], granted: int, what: str
) -> None:
    with pytest.raises(AssertionError, match=broken(what)):
        one_line(*sizes, granted=granted)._check_valid()


def test_the_line_checks_hold_at_their_bounds() -> None:
    """Exactly at a bound is within it: CHUNK entries in a chunk, and
    neighbours past the first that hold CHUNK // 2 + 1 together (so a line
    of ``k`` chunks holds more than ``(k - 2) * CHUNK / 4`` waiters)."""
    assert CHUNK // 2 == 32
    one_line(CHUNK, CHUNK)._check_valid()
    one_line(1, granted=CHUNK - 1)._check_valid()
    one_line(1, 1, CHUNK // 2, 1, CHUNK // 2)._check_valid()


def test_the_chunks_first_seqs_are_checked() -> None:
    """The first seqs a cancel bisects: one per chunk, each past the chunk
    before's last and at most its own chunk's first."""
    queues = one_line(1, CHUNK, 1)
    queues._levels[0].flows[None].line.firsts.pop()
    with pytest.raises(AssertionError, match=broken("one first seq per chunk")):
        queues._check_valid()
    for shift in (1, -1):  # past its chunk's first; at the chunk before's last
        queues = one_line(1, CHUNK, 1)
        queues._levels[0].flows[None].line.firsts[2] += shift
        with pytest.raises(AssertionError, match=broken("first seqs part the chunks")):
            queues._check_valid()
    queues = one_line(1, CHUNK, 1)
    queues._levels[0].flows[None].line.firsts[0] = 10**9  # never read
    queues._check_valid()


def test_a_dead_entry_is_reported() -> None:
    """A waiter gone from the ids (as after a cancel) but left in its line,
    every count right but the line's."""
    queues = one_line(2, CHUNK)
    del queues._by_id[1]
    queues.depths[0] -= 1
    with pytest.raises(AssertionError, match=broken("every entry is waiting")):
        queues._check_valid()


def test_a_flow_without_waiters_is_reported() -> None:
    queues = one_line(1)
    queues._levels[0].flows["ghost"] = _Flow("ghost", 1)
    with pytest.raises(AssertionError, match=broken("a flow is kept only while it has waiters")):
        queues._check_valid()


def test_a_spare_flow_with_a_line_is_reported() -> None:
    """The flow object a level keeps for reuse holds no waiter: neither an
    entry in its one chunk, nor a start past it, nor a second chunk's first
    seq; each broken alone is reported."""
    for broken_part in ("entry", "start", "firsts"):
        queues = Queues(1)
        spare = queues._levels[0]._spare
        assert spare is not None
        queues._check_valid()
        if broken_part == "entry":
            spare.line.chunks[0].append(Waiter("gone", 0, 0, 0, None))
        elif broken_part == "start":
            spare.line.start = 1
        else:
            spare.line.firsts.append(5)
        with pytest.raises(AssertionError, match=broken("the spare flow's line is empty")):
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
    stray = line.chunks[0][1]._replace(flow="b")
    line.chunks[0][1] = queues._by_id[stray.id] = stray
    with pytest.raises(AssertionError, match=broken("in its flow")):
        queues._check_valid()

    queues = two_flows()
    line = queues._levels[0].flows["a"].line
    line.chunks[0].reverse()
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

    queues = one_line(2)
    queues._levels[0].only = None
    with pytest.raises(AssertionError, match=broken("one flow alone is the only one")):
        queues._check_valid()

    # the one flow's head entered, as if a second flow waited
    queues = one_line(2)
    level = queues._levels[0]
    level.heads.insert(level.flows[None].entry, level.flows[None])
    with pytest.raises(AssertionError, match=broken("flow heads kept for two flows or more")):
        queues._check_valid()

    # a second entry for flow a, its next waiter's
    queues = two_flows()
    level = queues._levels[0]
    level.heads.insert((SECOND << SHIFT) + 2, level.flows["a"])
    with pytest.raises(AssertionError, match=broken("one entry each")):
        queues._check_valid()

    # an entry of a flow gone (in place of flow a's), and one keyed by a
    # waiter behind its flow's head
    queues = two_flows()
    chunk = queues._levels[0].heads.chunks[0]
    chunk[0] = (chunk[0][0], _Flow(chunk[0][1].key, 1))
    with pytest.raises(AssertionError, match=broken("every flow-head entry is a waiting head's")):
        queues._check_valid()
    queues = two_flows()
    level = queues._levels[0]
    a = level.flows["a"]
    level.heads.delete(a.entry)
    a.entry += 2  # the seq of a's second waiter
    level.heads.insert(a.entry, a)
    with pytest.raises(AssertionError, match=broken("every flow-head entry is a waiting head's")):
        queues._check_valid()

    # a head's finish at its flow's start (a cost of no unit of the level's
    # limit) is within the bound; one past it is not
    queues = two_flows()
    a = queues._levels[0].flows["a"]
    a.start = a.entry >> SHIFT
    queues._check_valid()
    a.start += 1
    with pytest.raises(AssertionError, match=broken("no flow head finishes before it starts")):
        queues._check_valid()

    sums = two_flows()
    assert sums._sums is not None
    sums._sums[0][0] += 1
    with pytest.raises(AssertionError, match=broken("units count the live waiters' costs")):
        sums._check_valid()

    queues = one_line(2)
    queues._by_id["ghost"] = Waiter("ghost", 0, 99, 0, None)
    with pytest.raises(AssertionError, match=broken("every waiting id is in its level")):
        queues._check_valid()


def laid_out(entries: Sorted[T], *sizes: int) -> None:
    """Lay ``entries`` out in chunks of ``sizes`` (whatever the splits and
    merges would have made), their first keys beside them."""
    flat = entries.entries()
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    entries.chunks[:] = [flat[at : at + n] for at, n in zip(starts, sizes, strict=True)]
    entries.firsts[:] = [chunk[0][0] for chunk in entries.chunks]


def at_the_bounds(make: Callable[..., M], check: Callable[[M], None], name: str) -> None:
    """``check`` passes on what ``make`` lays out at the bounds of sorted
    chunks (neighbours holding CHUNK together, a chunk of 2 * CHUNK), and
    fails, naming the ``name`` chunks, one past each."""
    for sizes, valid in (
        ((1, CHUNK - 1), True),
        ((1, CHUNK - 2), False),
        ((2 * CHUNK,), True),
        ((2 * CHUNK + 1,), False),
    ):
        made = make(*sizes)
        if valid:
            check(made)
        else:
            with pytest.raises(
                AssertionError, match=broken(f"a {name} chunk is too large or too thin")
            ):
                check(made)


def with_head_chunks(*sizes: int) -> Queues:
    """Queues of one level whose flows (one waiter each) have their heads'
    entries laid out in chunks of ``sizes``."""
    queues = Queues(1)
    for n in range(sum(sizes)):
        queues._append(Waiter(n, 0, n, 0, None, (1,), n))
    laid_out(queues._levels[0].heads, *sizes)
    return queues


def test_the_flow_head_chunks_are_checked_at_their_bounds() -> None:
    """P15: one entry per flow head, none left by a head that is gone, in
    chunks like the deadlines': neighbours holding CHUNK together, and a
    chunk of 2 * CHUNK, are within the bounds; one fewer, one more are not."""
    queues = with_head_chunks(3)
    queues._levels[0].heads.firsts[0] = 0
    with pytest.raises(AssertionError, match=broken("a flow head chunk's first key is wrong")):
        queues._check_valid()

    queues = with_head_chunks(3)
    chunk = queues._levels[0].heads.chunks[0]
    chunk.append(chunk.pop(0))
    queues._levels[0].heads.firsts[0] = chunk[0][0]
    with pytest.raises(AssertionError, match=broken("the flow heads are out of order")):
        queues._check_valid()

    at_the_bounds(with_head_chunks, Queues._check_valid, "flow head")


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


def with_deadline_chunks(*sizes: int) -> Machine:
    """A machine whose waiters' deadlines are laid out in chunks of ``sizes``
    (whatever the splits and merges would have made)."""
    machine = Machine(Fifo(), rate=1, burst=1)
    machine.push("banked", 0, 0)
    for k in range(sum(sizes)):
        machine.push(k, 0, 0, deadline=SECOND + k)
    laid_out(machine._deadlines, *sizes)
    return machine


def test_the_deadline_checks_report_what_they_guard() -> None:
    machine = waiting()
    machine.push("c", 1, 0, deadline=2 * SECOND)
    deadlines = machine._deadlines
    deadlines.firsts[0] = 0
    with pytest.raises(AssertionError, match=broken("a deadline chunk's first key is wrong")):
        machine.check_valid()

    machine = waiting()
    machine.push("c", 1, 0, deadline=2 * SECOND)
    chunk = machine._deadlines.chunks[0]
    chunk.append(chunk.pop(0))
    machine._deadlines.firsts[0] = chunk[0][0]
    with pytest.raises(AssertionError, match=broken("the deadlines are out of order")):
        machine.check_valid()

    machine = waiting()  # two equal keys are out of order too: each key is unique
    machine.push("c", 1, 0, deadline=2 * SECOND)
    chunk = machine._deadlines.chunks[0]
    chunk[1] = (chunk[0][0], chunk[1][1])
    with pytest.raises(AssertionError, match=broken("the deadlines are out of order")):
        machine.check_valid()

    machine = waiting()
    machine.push("c", 1, 0, deadline=2 * SECOND)
    deadlines = machine._deadlines
    (chunk,) = deadlines.chunks
    deadlines.chunks[:] = [chunk[:1], chunk[1:]]  # two neighbours, far fewer than CHUNK
    deadlines.firsts[:] = [chunk[0][0], chunk[1][0]]
    with pytest.raises(AssertionError, match=broken("a deadline chunk is too large or too thin")):
        machine.check_valid()

    at_the_bounds(with_deadline_chunks, Machine.check_valid, "deadline")

    machine = waiting()
    gone = Waiter("gone", 1, 99, 0, 2 * SECOND)
    machine._deadlines.chunks[0].append(((2 * SECOND << SHIFT) + 99, gone))
    with pytest.raises(AssertionError, match=broken("a deadline entry of a waiter that left")):
        machine.check_valid()

    machine = waiting()
    machine._deadlines.chunks.clear()
    machine._deadlines.firsts.clear()
    with pytest.raises(AssertionError, match=broken("every waiter with a deadline has an entry")):
        machine.check_valid()


def test_the_grant_checks_report_what_they_guard() -> None:
    machine = waiting()
    machine._unit_costs = False  # the queues still count every cost as one unit
    with pytest.raises(AssertionError, match=broken("unit_costs is not the queues' own")):
        machine.check_valid()

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

    # without a window, neither a logged record nor a charged grant held
    for keep in ("logged", "held"):
        machine = Machine(Fifo(), rate=10, burst=2, settle_window_ns=None)
        machine.push("granted", 0, 0)
        machine.check_valid()
        grant = waiting(charge=Charge.AT_GRANT)._ledger.held["granted"]
        if keep == "logged":
            machine._ledger._log.append(grant)
        else:
            machine._ledger.held["kept"] = grant
        with pytest.raises(AssertionError, match=broken("a charge kept without a settle window")):
            machine.check_valid()


def test_the_log_spans_at_most_two_settle_windows() -> None:
    """P15: the log of charges is pruned once it spans two settle windows:
    records two windows apart pass the check, a nanosecond more does not."""
    machine = Machine(Fifo(), rate=1000, burst=10, settle_window_ns=10)
    machine.push("a", 0, 0)
    machine.push("b", 0, 20)  # not pruned: the log spans 20 ns, two windows
    assert [g.at for g in machine.snapshot().logged] == [0, 20]  # type: ignore[attr-defined]
    machine.check_valid()
    ledger = machine._ledger
    older = ledger.held["a"]._replace(at=-1)
    ledger._log[0] = ledger.held["a"] = older
    with pytest.raises(AssertionError, match=broken("the log spans more than two settle windows")):
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
