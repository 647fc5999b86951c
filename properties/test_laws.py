"""Properties stated over whole runs rather than step by step.

Each test names its SPEC.md property id in its docstring.
"""

from __future__ import annotations

import copy
import gc
import itertools
import math
import weakref
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from fractions import Fraction
from random import Random
from typing import Any

import pytest
from hypothesis import event as tally
from hypothesis import example, given, note, settings
from hypothesis import strategies as st

from permits.core import (
    CHUNK,
    MAX_QUOTAS,
    MAX_SCALE,
    MILLISECOND,
    RELATIVE_ERROR,
    SECOND,
    Aging,
    Charge,
    Deal,
    Decision,
    Fifo,
    FlowStatistics,
    Limit,
    Machine,
    NotRefundable,
    PermitError,
    Policy,
    Shares,
    State,
    StrictPriority,
    TimeWentBackwards,
    WaitHistogram,
)

from configs import BIG_WEIGHTS, KINDS, NAMES, RATES, Config, RoundRobin, configs, exact_rate
from harness import drive, rows, spent_at_once
from reference import PolicySpec, Reference, nearest_rank

Op = tuple[str, int, int]

#: One policy of each kind, on two levels.
TWO_LEVELS: dict[str, Policy] = {
    "fifo": Fifo(2),
    "strict": StrictPriority(2),
    "shares": Shares((4, 1)),
    "aging": Aging(2, after_ns=SECOND),
}

rates = st.sampled_from([1, 3, 100, Fraction(7, 3), 2.5, 1000])


def ops(levels: int) -> st.SearchStrategy[list[Op]]:
    """Operation scripts: (kind, level or index, time step in eighths of a second)."""
    return st.lists(
        st.one_of(
            st.tuples(st.just("push"), st.integers(0, levels - 1), st.integers(0, 8)),
            st.tuples(st.just("cancel"), st.integers(0, 50), st.just(0)),
            st.tuples(st.just("tick"), st.just(0), st.integers(0, 16)),
            st.tuples(st.just("refund"), st.integers(0, 50), st.just(0)),
        ),
        max_size=60,
    )


#: A policy kind of TWO_LEVELS, a machine's rate and burst, ticks on time or
#: late, and a script: the arguments of the laws that run every kind.
EVERY_KIND: dict[str, st.SearchStrategy[Any]] = {
    "kind": st.sampled_from(sorted(TWO_LEVELS)),
    "rate": rates,
    "burst": st.integers(1, 3),
    "on_time": st.booleans(),
    "script": ops(2),
}


def run(
    machine: Machine,
    script: Sequence[Op],
    on_time: bool = True,
    spend: bool = False,
    flow: Callable[[int], Hashable] | None = None,
) -> list[Any]:
    """Apply ``script``; return everything observable, in order. With
    ``spend``, every permit is spent the moment it is granted, and
    ``min_wait`` is observed too (policies' ``ahead`` may differ where their
    grants agree, so the other laws leave it out). With ``flow``, each push
    names the flow ``flow(level)``."""
    log: list[Any] = []
    now, pushed = 0, 0

    def taken(decisions: list[Decision]) -> list[Decision]:
        return spent_at_once(machine, decisions) if spend else decisions

    def advance(until: int) -> list[Decision]:
        if not on_time:
            return taken(machine.tick(until))
        out: list[Decision] = []
        while (at := machine.next_tick()) is not None and at <= until:
            out += taken(machine.tick(at))
        return out + taken(machine.tick(until))

    for kind, arg, step in script:
        now += step * SECOND // 8
        if kind == "push":
            out = advance(now)
            if flow is None:
                out += taken(machine.push(pushed, arg, now))
            else:
                out += taken(machine.push(pushed, arg, now, flow=flow(arg)))
            pushed += 1
            log.append(rows(out))
        elif kind == "tick":
            log.append(rows(advance(now)))
        elif kind == "cancel":
            log.append(("cancel", arg, machine.cancel(arg)))
        else:
            try:
                log.append(rows(taken(machine.refund(arg, now))))
            except NotRefundable:
                log.append(("not refundable", arg))
        log.append((machine.next_due(), machine.next_tick(), tuple(machine.queues.depths)))
        if spend:
            log.append(tuple(machine.min_wait(level) for level in range(machine.levels)))
    return log


@given(rate=rates, burst=st.integers(1, 3), script=ops(1))
def test_one_level_all_policies_agree(rate: Any, burst: int, script: list[Op]) -> None:
    """P14: with one level, FIFO, strict priority, shares and aging grant alike."""
    policies: list[Policy] = [Fifo(1), StrictPriority(1), Shares((3,)), Aging(1, after_ns=1)]
    logs = [run(Machine(policy, rate, burst), script) for policy in policies]
    for policy, log in zip(policies[1:], logs[1:], strict=True):
        assert log == logs[0], ("P14", policy)


@given(**EVERY_KIND)
def test_spending_at_once_is_charging_at_the_grant(
    kind: str, rate: Any, burst: int, on_time: bool, script: list[Op]
) -> None:
    """P25: a machine that charges each permit at its spend, whose permits are
    all spent the moment they are granted, decides exactly as one that
    charges them at the grant: same decisions, due times, ticks and
    ``min_wait``."""
    policy = TWO_LEVELS[kind]
    at_grant = run(Machine(policy, rate, burst), script, on_time, spend=True)
    at_spend = Machine(policy, rate, burst, charge=Charge.AT_SPEND)
    assert run(at_spend, script, on_time, spend=True) == at_grant, "P25"
    assert at_spend.in_flight == 0


def test_spending_at_once_is_charging_at_the_grant_under_a_quota() -> None:
    """P25 by hand, where a quota meets permits in flight: a quota of one
    unit left, made while a pause holds two waiters; at its end one tick
    may grant only one of them, under either charge."""

    def run(charge: Charge) -> list[tuple[Hashable, State, int]]:
        machine = Machine(Fifo(), 1, 5, charge=charge)
        out = machine.pause_until(SECOND, 0)
        out += machine.push("a", 0, 0) + machine.push("b", 0, 0)
        out += machine.quota(1, 10 * SECOND, 0)
        out += machine.tick(SECOND)
        for decision in list(out):
            if charge is Charge.AT_SPEND and decision.state is State.GRANTED:
                out += machine.spend(decision.id, SECOND)
        return [(d.id, d.state, d.at) for d in out]

    assert run(Charge.AT_GRANT) == [("a", State.GRANTED, SECOND)]
    assert run(Charge.AT_SPEND) == run(Charge.AT_GRANT), "P25"


@given(rate=rates, burst=st.integers(1, 3), levels=st.integers(2, 3), data=st.data())
def test_aging_with_huge_after_is_strict(
    rate: Any, burst: int, levels: int, data: st.DataObject
) -> None:
    """P14: aging with ``after`` longer than any wait is strict priority."""
    script = data.draw(ops(levels))
    horizon = 1 + sum(step for _, _, step in script) * SECOND // 8
    strict = run(Machine(StrictPriority(levels), rate, burst), script)
    aging = run(Machine(Aging(levels, after_ns=horizon), rate, burst), script)
    assert aging == strict, "P14"


@given(
    rate=rates,
    burst=st.integers(1, 3),
    weights=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    script=ops(1),
)
def test_shares_without_lower_level_is_strict(
    rate: Any, burst: int, weights: tuple[int, int], script: list[Op]
) -> None:
    """P14: shares where the lower level never waits is strict priority."""
    strict = run(Machine(StrictPriority(2), rate, burst), script)
    shares = run(Machine(Shares(weights), rate, burst), script)
    assert shares == strict, "P14"


# -- the laws on every machine ----------------------------------------------------

#: A move of a broad script: an operation's name, then its arguments.
Move = tuple[Any, ...]


@st.composite
def moves(
    draw: st.DrawFn, config: Config, levels: Sequence[int], max_wait: bool = True
) -> list[Move]:
    """A broad script for ``config``'s machines: pushes and takes at
    ``levels`` (with ``config.costs``, costs of 0 to each limit's burst, at
    least one unit), with deadlines and (with ``max_wait``) a
    ``max_wait_ns``; ticks; cancels; refunds, spends and settles (for less or
    more) of the permits granted; pauses; changes of a limit; the upstream's
    word and quota. Times count in eighths of the first limit's interval."""
    bursts = [burst for _, burst in config.limits]
    units: st.SearchStrategy[tuple[int, ...]] = (
        st.tuples(*(st.integers(0, b) for b in bursts)).map(lambda u: u if any(u) else (1, *u[1:]))
        if config.costs
        else st.just((1,) * len(bursts))
    )
    level = st.sampled_from(list(levels))
    later = st.integers(0, 24)
    index = st.integers(0, 30)
    limit = st.integers(0, len(bursts) - 1)
    waiter = st.tuples(
        level,
        units,
        st.none() | st.integers(0, 24),
        (st.none() | st.integers(0, 24)) if max_wait else st.none(),
    )
    # pushes in batches, at once: queues build at several levels
    push = st.tuples(st.just("push"), later, st.lists(waiter, min_size=1, max_size=4))
    tick = st.tuples(st.just("tick"), st.integers(0, 64))
    move = st.one_of(
        push,
        push,
        push,
        st.tuples(st.just("take"), later, level, units, st.booleans()),
        tick,
        tick,
        st.tuples(st.just("cancel"), index),
        st.tuples(st.just("refund"), index),
        st.tuples(st.just("spend"), index, st.booleans()),
        st.tuples(st.just("settle"), index, st.tuples(*(st.integers(0, 2 * b) for b in bursts))),
        st.tuples(st.just("pause"), st.integers(0, 24)),
        st.tuples(st.just("limit"), limit, st.sampled_from(RATES), st.none() | st.integers(1, 5)),
        st.tuples(
            st.just("word"),
            st.sampled_from(["adopt", "quota"]),
            limit,
            st.integers(0, 5),
            st.integers(0, 48),
        ),
    )
    return draw(st.lists(move, min_size=16, max_size=48))


def later_by(config: Config, move: Move) -> int:
    """How far ``move`` moves the clock, in ns."""
    eighths = move[1] if move[0] in ("push", "take", "tick") else 0
    return int(config.interval * eighths) // 8


def lockstep(
    machines: Sequence[Machine],
    config: Config,
    script: Sequence[Move],
    promise: str,
    *,
    on_time: bool,
    prompt: bool,
    watch: Sequence[int] = (),
    flows: Sequence[Callable[[int], Hashable] | None] | None = None,
) -> None:
    """Apply ``script`` to every machine (made from ``config``) alike, and
    hold them to the same decisions, due times, depths, units in flight and
    (at the levels ``watch``) ``min_wait`` after every move. With
    ``on_time``, each machine is ticked at every ``next_tick`` on the way to
    a move's time, else only at it; with ``prompt``, each permit is spent
    the moment it is granted (with ``settle_later``: an adapter's callers).
    ``flows[i](level)``, if given, is the flow machine ``i``'s pushes name at
    ``level``."""
    names = NAMES[: len(config.limits)]
    step = config.interval
    now = config.origin
    for machine in machines:
        machine.tick(now)  # their clocks start together
    pushed = 0
    #: the ids granted, but those refunded, settled or spent for good since
    granted: list[Hashable] = []
    count = 0  # grants

    def held(index: int) -> Hashable:
        return granted[index % len(granted)] if granted else "nobody"

    def flow(i: int, level: int) -> Hashable:
        named = None if flows is None else flows[i]
        return None if named is None else named(level)

    def play(i: int, machine: Machine, move: Move) -> list[Any]:
        def taken(decisions: list[Decision]) -> list[Decision]:
            return spent_at_once(machine, decisions, settle_later=True) if prompt else decisions

        def advance() -> list[Decision]:
            return drive(machine, now, taken) if on_time else taken(machine.tick(now))

        kind = move[0]
        out: list[Decision] = []
        refused: list[tuple[Hashable, str, str | None]] = []
        try:
            if kind == "take":
                _, _, level, units, settle_later = move
                out = advance()
                out += taken(
                    machine.take(
                        pushed,
                        level,
                        now,
                        cost=config.cost(units),
                        flow=flow(i, level),
                        settle_later=settle_later,
                    )
                )
            elif kind == "push":
                out = advance()
                for n, (level, units, patience, max_wait) in enumerate(move[2]):
                    try:
                        out += taken(
                            machine.push(
                                pushed + n,
                                level,
                                now,
                                cost=config.cost(units),
                                flow=flow(i, level),
                                deadline=None
                                if patience is None
                                else now + int(step * patience) // 4,
                                max_wait_ns=None if max_wait is None else int(step * max_wait) // 4,
                            )
                        )
                    except PermitError as error:  # a cost above a burst lowered since
                        argument = getattr(error, "argument", None)
                        refused.append((pushed + n, type(error).__name__, argument))
            elif kind == "tick":
                out = advance()
            elif kind == "cancel":
                return ["cancel", machine.cancel(move[1] % max(pushed, 1))]
            elif kind == "refund":
                out = taken(machine.refund(held(move[1]), now))
            elif kind == "spend":
                out = taken(machine.spend(held(move[1]), now, settle_later=move[2]))
            elif kind == "settle":
                actual = move[2]
                settled = actual[0] if len(names) == 1 else config.settle(dict(enumerate(actual)))
                out = taken(machine.settle(held(move[1]), settled, now))
            elif kind == "pause":
                out = taken(machine.pause_until(now + int(step * move[1]) // 4, now))
            elif kind == "limit":
                _, which, rate, burst = move
                out = taken(machine.set_limit(now, rate=rate, burst=burst, limit=names[which]))
            else:
                _, word, which, remaining, eighths = move
                reset = now + int(step * eighths) // 8
                out = taken(getattr(machine, word)(remaining, reset, now, limit=names[which]))
        except PermitError as error:
            return [kind, "refused", type(error).__name__, getattr(error, "argument", None)]
        return [
            rows(out),
            refused,
            machine.next_due(),
            machine.next_tick(),
            tuple(machine.queues.depths),
            machine.in_flight,
            tuple(machine.min_wait(level) for level in watch),
        ]

    for n, move in enumerate(script):
        now += later_by(config, move)
        seen = [play(i, machine, move) for i, machine in enumerate(machines)]
        for machine, saw in zip(machines[1:], seen[1:], strict=True):
            assert saw == seen[0], (promise, n, move, machine.policy, saw, seen[0])
        pushed += len(move[2]) if move[0] == "push" else move[0] == "take"
        if move[0] != "cancel" and "refused" not in seen[0]:
            if move[0] in ("refund", "settle") or (move[0] == "spend" and not move[2]):
                # no longer held (a permit spent to settle later still is)
                granted = [id for id in granted if id != held(move[1])]
            grants = [id for id, state, *_ in seen[0][0] if state == "GRANTED"]
            granted += grants
            count += len(grants)
            if move[0] not in ("push", "take", "tick"):
                tally(f"{move[0]} done")
        if "refused" in seen[0]:
            tally(f"{move[0]} refused {seen[0][2]}")
    tally(f"grants: {min(count, 10)}, moves {len(script) // 10 * 10}+")
    tally(f"costs {config.costs}, second {config.second is not None}, {config.charge.name}")


@given(data=st.data(), on_time=st.booleans(), prompt=st.booleans())
def test_one_level_all_policies_agree_on_every_machine(
    data: st.DataObject, on_time: bool, prompt: bool
) -> None:
    """P14 on every machine: with one level, FIFO, strict priority, shares
    (of either limit), aging and a user's policy decide alike, and so have
    the same ``min_wait``, under costs, two limits, either charge, deadlines,
    a ``max_wait_ns``, takes, spends, refunds, settles, pauses, changes of a
    limit and the upstream's word."""
    config: Config = data.draw(configs("strict", 1, charges=tuple(Charge), costs=True))
    shared = "tokens" if config.second is not None and data.draw(st.booleans()) else None
    policies: list[Policy] = [
        Fifo(1),
        StrictPriority(1),
        Shares((3,), limit=shared),
        Aging(1, after_ns=1),
        RoundRobin(1),
    ]
    script = data.draw(moves(config, [0]))
    machines = [config.machine(policy=policy) for policy in policies]
    lockstep(machines, config, script, "P14", on_time=on_time, prompt=prompt, watch=[0])


@given(data=st.data(), levels=st.integers(2, 3), on_time=st.booleans(), prompt=st.booleans())
def test_aging_with_huge_after_is_strict_on_every_machine(
    data: st.DataObject, levels: int, on_time: bool, prompt: bool
) -> None:
    """P14 on every machine: aging with ``after`` longer than the whole run
    decides as strict priority, with the same ``min_wait`` at every level,
    whatever else the machine is given (as above)."""
    config: Config = data.draw(configs("strict", levels, charges=tuple(Charge), costs=True))
    script = data.draw(moves(config, range(levels)))
    horizon = 1 + sum(later_by(config, move) for move in script)
    machines = [config.machine(), config.machine(policy=Aging(levels, after_ns=horizon))]
    watch = range(levels)
    lockstep(machines, config, script, "P14", on_time=on_time, prompt=prompt, watch=watch)


@given(data=st.data(), levels=st.integers(2, 3), on_time=st.booleans(), prompt=st.booleans())
def test_shares_without_lower_level_is_strict_on_every_machine(
    data: st.DataObject, levels: int, on_time: bool, prompt: bool
) -> None:
    """P14 on every machine: shares (any weights, of either limit) where
    only level 0 ever waits decide as strict priority, with the same
    ``min_wait`` at level 0, whatever else the machine is given (as above)."""
    config: Config = data.draw(configs("shares", levels, charges=tuple(Charge), costs=True))
    script = data.draw(moves(config, [0]))
    machines = [config.machine(), config.machine(policy=StrictPriority(levels))]
    lockstep(machines, config, script, "P14", on_time=on_time, prompt=prompt, watch=[0])


@given(**EVERY_KIND)
def test_determinism(kind: str, rate: Any, burst: int, on_time: bool, script: list[Op]) -> None:
    """P13: the same calls always give the same decisions (two fresh machines)."""
    policy = TWO_LEVELS[kind]
    first = run(Machine(policy, rate, burst), script, on_time)
    again = run(Machine(policy, rate, burst), script, on_time)
    assert first == again, "P13"


@given(
    rate=st.one_of(
        st.integers(1, 10**6),
        st.fractions(min_value=Fraction(1, 100), max_value=10**6).filter(lambda f: f > 0),
        st.floats(min_value=0.01, max_value=1e6),
    ),
    burst=st.integers(1, 4),
    n=st.integers(1, 200),
    start=st.integers(-(10**12), 10**12),
    idle=st.none() | st.integers(2, 10**10),
)
def test_pacing_is_exact(rate: Any, burst: int, n: int, start: int, idle: int | None) -> None:
    """P16: with ticks on time, the k-th permit of a backlog that starts with
    a full bucket at ``start`` is granted at exactly
    ``start + ceil((k - burst) * 10**9 / rate)`` ns for ``k > burst`` (the
    first ``burst`` at ``start``): no drift, however long. A bucket full since
    the machine's first operation is exactly full; one that has stood full
    (``idle`` ns, at least 2) also holds its nanosecond of refill, so from
    ``start - 1 ns`` instead (SPEC.md, Pacing)."""
    machine = Machine(StrictPriority(1), rate, burst)
    if idle is not None:
        machine.tick(start - idle)
    origin = start if idle is None else start - 1
    exact = exact_rate(rate)
    granted: list[int] = []
    for id in range(n):
        granted += [d.at for d in machine.push(id, 0, start)]
    granted += [d.at for d in drive(machine, start + math.ceil(n * SECOND / exact))]
    assert len(granted) == n
    for k, at in enumerate(granted, start=1):
        expected = start if k <= burst else origin + math.ceil((k - burst) * SECOND / exact)
        assert at == expected, ("P16", k, at, expected)


def test_pacing_after_a_million_permits() -> None:
    """P16: after 10**6 permits at 3/s, the last is due exactly on time
    (exactly, not merely within a microsecond)."""
    machine = Machine(StrictPriority(1), 3, 1)
    machine.push(-1, 0, 0)  # takes the bucket's permit at t = 0
    at = 0
    for k in range(1, 10**6 + 1):
        machine.push(k, 0, at)
        out = machine.tick(machine.next_due() or 0)
        at = out[0].at
    exact = Fraction(10**6 * SECOND, 3)
    assert at == math.ceil(exact), ("P16", at, exact)
    assert abs(at - exact) < 1, "P16"


@given(
    waits=st.lists(
        st.integers(0, 10**13) | st.integers(0, 300) | st.integers(2**126, 2**140),
        min_size=1,
        max_size=400,
    ),
    q=st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]),
)
def test_histogram_quantiles(waits: list[int], q: float) -> None:
    """P17: quantiles within RELATIVE_ERROR of the exact nearest-rank value;
    the maximum and the sum exact; cumulative counts at any bounds exact but
    for waits within RELATIVE_ERROR of a bound; memory bounded by the
    logarithm of the largest wait."""
    histogram = WaitHistogram()
    for wait in waits:
        histogram.record(wait)
    exact = nearest_rank(waits, q)
    got = histogram.quantile(q)
    assert exact is not None
    assert got is not None
    assert abs(got - exact) <= RELATIVE_ERROR * exact, ("P17", got, exact)
    assert histogram.max == max(waits)
    assert histogram.buckets <= 256 + 128 * max(0, max(waits).bit_length() - 8), "P17"
    # the sum exact; the histogram's counts at any bounds off only by waits
    # within RELATIVE_ERROR of a bound
    assert histogram.total == sum(waits), "P17"
    bounds = sorted({0, *waits[:5], *(w + 1 for w in waits[:5]), max(waits)})
    for bound, count in zip(bounds, histogram.at_most(bounds), strict=True):
        exact_count = sum(1 for w in waits if w <= bound)
        # (a wait below 2**8 has a bucket of its own: exact)
        near = sum(
            1 for w in waits if w >= 256 and abs(w - bound) <= RELATIVE_ERROR * max(bound, w)
        )
        assert abs(count - exact_count) <= near, ("P17", bound, count, exact_count)


@given(
    n=st.integers(1, 400),
    levels=st.integers(1, 3),
    deadlines=st.booleans(),
    data=st.data(),
)
def test_dead_entries_stay_bounded(
    n: int, levels: int, deadlines: bool, data: st.DataObject
) -> None:
    """P15: whatever leaves (cancelled, granted, expired), the queues hold
    exactly the waiters, in fewer than ``4 * waiting / CHUNK + 2`` chunks per
    level (one flow each here), and the deadlines exactly theirs, in fewer
    than ``2 * waiting / CHUNK + 2`` chunks. P6 through the chunks so
    thinned and mended: each level grants its waiters in push order."""
    machine = Machine(StrictPriority(levels), 1, 1)
    machine.push("first", 0, 0)  # takes the bucket's permit; the rest wait
    for id in range(n):
        deadline = (n - id) * SECOND // 2 if deadlines else None  # later pushes expire first
        machine.push(id, id % levels, 0, deadline=deadline)
    order = data.draw(st.permutations(range(n)))
    cancels = order[: data.draw(st.integers(0, n))]

    def check() -> None:
        held, chunks = machine.queues.entries, machine.queues.chunks
        assert held == len(machine), ("P15", held, len(machine))
        assert chunks * CHUNK < 4 * held + 2 * CHUNK * levels, ("P15: chunks", chunks, held)
        entries = len(machine.snapshot().deadlines)
        assert entries == (held if deadlines else 0), ("P15: deadlines", entries, held)
        dchunks = len(machine._deadlines.chunks)
        assert dchunks * CHUNK < 2 * held + 2 * CHUNK, ("P15: deadline chunks", dchunks, held)

    for id in cancels:  # cancels thin the chunks out ...
        machine.cancel(id)
        check()
    last = [-1] * levels  # the latest granted id of each level
    while (at := machine.next_tick()) is not None:  # ... then the live ones leave
        for decision in machine.tick(at):  # a grant or an expiry
            granted = decision.id
            if decision.state is State.GRANTED and isinstance(granted, int):
                level = decision.level
                assert granted > last[level], ("P6", granted, last[level])
                last[level] = granted
        after = machine.next_tick()
        assert after is None or after > at, ("P12: a tick at next_tick() changed nothing", at)
        check()
    machine.check_valid()


@given(
    n=st.integers(40, 200),
    levels=st.integers(1, 2),
    flows=st.sampled_from([1, 3, 2 * CHUNK + 1]),
    weights=st.tuples(st.integers(1, 4), st.integers(0, 2), st.integers(0, 2)),
    random=st.randoms(use_true_random=True),
)
def test_no_departure_leaves_work_behind(
    n: int, levels: int, flows: int, weights: tuple[int, int, int], random: Random
) -> None:
    """P15: whatever the order of pushes, cancels, grants and expiries, each
    waiter that leaves takes its queue entry with it, and a flow's head its
    flow-head entry: after every operation the queues hold exactly the
    waiters and one entry per flow head (nothing is left for a later
    operation to compact), in fewer than ``4 * waiting / CHUNK + 2`` chunks
    per flow."""
    machine = Machine(StrictPriority(levels), 1, 1)
    machine.push("first", 0, 0)  # takes the bucket's permit; the rest wait
    for id in range(n):
        machine.push(id, id % levels, 0, flow=random.randrange(flows))
    queues = machine.queues
    kinds = random.choices(["cancel", "tick", "push"], weights, k=2 * n + 50)
    for id, kind in enumerate(kinds, start=n):
        before = len(machine)
        if kind == "push":  # at the machine's time, where nothing is due: it joins
            now = machine.now
            assert now is not None
            deadline = random.choice([None, now + random.randint(1, 4) * SECOND])
            flow = random.randrange(flows)
            machine.push(id, random.randrange(levels), now, deadline=deadline, flow=flow)
        elif kind == "cancel" and before:
            machine.cancel(random.choice(machine.waiting()).id)
        elif (at := machine.next_tick()) is not None:
            machine.tick(at)  # grants and expiries
        note(f"{kind}: {before - len(machine)} left, {queues.chunks} chunks")
        assert queues.entries == len(machine), ("P15", kind, queues.entries, len(machine))
        waiting = [queues.flows(level) for level in range(levels)]
        heads = sum(k for k in waiting if k > 1)
        assert queues.heads == heads, ("P15: flow heads", kind, queues.heads, waiting)
        bound = 4 * len(machine) + 2 * CHUNK * max(levels, sum(waiting))
        assert queues.chunks * CHUNK < bound, ("P15: chunks", kind, queues.chunks)
        machine.check_valid()  # the bound, and the invariants that prove it


@given(
    kind=st.sampled_from(["fifo", "strict", "shares", "aging"]),
    rate=rates,
    burst=st.integers(1, 3),
    pushes=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 4)), min_size=1, max_size=40),
)
def test_drain(kind: str, rate: Any, burst: int, pushes: list[tuple[int, int]]) -> None:
    """P12: with no more pushes and ticks on time, everyone waiting at the
    last push is granted within (number waiting) permit intervals."""
    policies: dict[str, Policy] = {
        "fifo": Fifo(3),
        "strict": StrictPriority(3),
        "shares": Shares((2, 1, 1)),
        "aging": Aging(3, after_ns=SECOND),
    }
    policy = policies[kind]
    machine = Machine(policy, rate, burst)
    exact = exact_rate(rate)
    now = 0
    for id, (level, step) in enumerate(pushes):
        now += step * SECOND // 4
        drive(machine, now)
        machine.push(id, level, now)
    waiting = len(machine)
    bound = now + math.ceil(waiting * SECOND / exact)
    out = drive(machine, bound)
    note(f"{waiting} waiting at {now}; bound {bound}")
    assert len(machine) == 0, ("P12", len(machine))
    assert all(d.state is State.GRANTED and d.at <= bound for d in out), "P12"


# -- costs, several limits, settle, changes of a limit -------------------------


@pytest.mark.parametrize(
    ("policy", "ranks_by_oldest"),
    [
        (Fifo(2), True),
        (Aging(2, after_ns=SECOND), True),
        (Fifo(1), False),
        (StrictPriority(2), False),
        (Shares((1, 1)), False),
    ],
    ids=["fifo", "aging", "fifo-one-level", "strict", "shares"],
)
def test_the_heads_are_kept_by_push_order_where_levels_are_ranked_by_them(
    policy: Policy, ranks_by_oldest: bool
) -> None:
    """P15: under ``Aging`` and a ``Fifo`` of several levels, which rank the
    levels by their oldest waiters, each flow's head is kept by push order
    too (``Queues.firsts``, as many as the heads), so that a choice does
    not look at every flow; under the other policies, none is."""
    machine = Machine(policy, 1, 1)
    machine.push("first", 0, 0)
    for id, flow in enumerate(["f1", "f2", "f3", "f1"]):
        machine.push(id, 0, 0, flow=flow)
    queues = machine.queues
    while len(machine):
        assert queues.firsts == (queues.heads if ranks_by_oldest else 0), ("P15", queues.firsts)
        machine.tick(machine.next_tick())  # type: ignore[arg-type]
    assert queues.firsts == queues.heads == 0


def test_too_long_is_judged_after_the_pushs_own_tick() -> None:
    """P53 by hand: at 100/s, ``a`` granted at 0 and ``b`` due at 10 ms; a
    push at 15 ms with ``max_wait_ns`` 12 ms comes after its own tick grants
    ``b``: its best case is 10 ms then, and it waits. Judged from before the
    tick (``b`` still ahead, from 0), it would be refused."""
    machine = Machine(Fifo(1), 100)
    machine.push("a", 0, 0)
    machine.push("b", 0, 0)
    out = machine.push("c", 0, 15 * MILLISECOND, max_wait_ns=12 * MILLISECOND)
    assert [(d.id, d.state) for d in out] == [("b", State.GRANTED)], ("P53", rows(out))
    assert "c" in machine
    assert machine.next_due() == 25 * MILLISECOND - 1  # c's, 10 ms after b's late grant


def test_fifo_holds_through_chunks_mended_after_cancels() -> None:
    """P6 by hand: 256 waiters of one flow fill four chunks; cancels thin
    the second and third, which are mended into the chunks before them. The
    level still grants in push order."""
    machine = Machine(Fifo(), rate=1000, burst=1)
    machine.push("first", 0, 0)
    for id in range(4 * CHUNK):
        machine.push(id, 0, 0)
    for id in [*range(CHUNK, CHUNK + 54), *range(2 * CHUNK, 2 * CHUNK + 44)]:
        machine.cancel(id)
    granted = drive(machine, SECOND)
    ids = [d.id for d in granted if d.state is State.GRANTED]
    assert ids == sorted(ids), ("P6", ids)  # type: ignore[type-var]
    assert len(ids) == 4 * CHUNK - 98, len(ids)


@given(n=st.integers(2, 12), burst=st.integers(1, 4), rounds=st.integers(1, 6))
def test_shares_every_n_serves_level_1_once_in_any_n_grants(
    n: int, burst: int, rounds: int
) -> None:
    """P8 for ``Shares.every(N)``: in any ``N`` consecutive grants throughout
    which level 1 waited, it received at least one (both levels wait
    throughout here: more of each wait than the grants looked at)."""
    machine = Machine(Shares.every(n), rate=1, burst=burst)
    grants = n * rounds
    for id in range(burst + 2 * grants):  # the first burst granted as pushed
        machine.push(("batch", id), 0, 0)
        machine.push(("user", id), 1, 0)
    levels: list[int] = []
    while len(levels) < grants:
        at = machine.next_tick()
        assert at is not None
        levels += [d.level for d in machine.tick(at) if d.state is State.GRANTED]
    for start in range(len(levels) - n + 1):
        assert 1 in levels[start : start + n], ("P8: every(N)", n, levels)


@given(
    kind=st.sampled_from(sorted(TWO_LEVELS)),
    rate=rates,
    big=st.integers(2, 8),
    smalls=st.lists(st.integers(0, 4), min_size=1, max_size=30),
)
def test_small_costs_never_pass_a_large_one(
    kind: str, rate: Any, big: int, smalls: list[int]
) -> None:
    """P27: a waiter of cost ``big`` that reaches the head of the one waiting
    level is granted before any cost-1 waiter pushed after it, and within
    ``ceil(big * interval)`` of becoming head (ticks on time, the bucket in
    no debt), however many small ones arrive meanwhile."""
    machine = Machine(TWO_LEVELS[kind], rate, big)
    interval = SECOND / exact_rate(rate)
    machine.push("drain", 1, 0, cost=big)  # the full bucket goes to it
    out = machine.push("large", 1, 0, cost=big)
    assert not out, out
    granted: list[Decision] = []
    now = 0
    for i, gap in enumerate(smalls):
        now += math.ceil(gap * interval / 4)
        granted += drive(machine, now)
        granted += machine.push(i, 1, now)
    granted += drive(machine, now + math.ceil((big + len(smalls)) * interval) + 1)
    order = [d.id for d in granted if d.state is State.GRANTED]
    note(f"{order}")
    assert order[0] == "large", ("P27: a small cost passed the large one", order)
    assert granted[0].at <= math.ceil(big * interval), ("P27", granted[0], interval)


@given(
    costs=st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 5), st.integers(0, 8)), min_size=1, max_size=30
    )
)
def test_several_limits_charge_together(costs: list[tuple[int, int, int]]) -> None:
    """P28: under requests and tokens at once, every grant charges both its
    parts: the requests granted and the tokens granted each stay within
    their own limit over every window, and a grant waits for the tighter."""
    limits = {"requests": Limit(10, burst=2), "tokens": Limit(100, burst=5)}
    machine = Machine(Fifo(1), limits=limits)
    now, out = 0, []
    cost_of: dict[int, tuple[int, int]] = {}
    for i, (requests, tokens, step) in enumerate(costs):
        now += step * 10_000_000
        out += drive(machine, now)
        cost = {"requests": requests, "tokens": tokens}
        if not requests and not tokens:
            cost = {"requests": 1}
        cost_of[i] = (cost.get("requests", 0), cost.get("tokens", 0))
        out += machine.push(i, 0, now, cost=cost)
    out += drive(machine, now + 10 * SECOND)
    granted = [d for d in out if d.state is State.GRANTED]
    assert len(granted) == len(costs), "P12: every waiter is granted in the end"
    for index, (name, limit) in enumerate(limits.items()):
        times = [(d.at, cost_of[d.id][index]) for d in granted]  # type: ignore[index]
        for start in range(len(times)):
            for end in range(start, len(times)):
                units = sum(n for _, n in times[start : end + 1])
                window = times[end][0] - times[start][0]
                allowed = limit.burst + math.floor(limit.rate * Fraction(window + 1, SECOND))
                assert units <= allowed, ("P28", name, times[start : end + 1], allowed)


#: What the upstream may say of a limit, or do to it: (what, units, ns).
_tokens_word = st.tuples(
    st.sampled_from(["adopt", "quota", "rerate", "pause"]),
    st.integers(0, 50),
    st.integers(0, 400 * SECOND),
)


@given(
    policy=st.sampled_from([Fifo(2), StrictPriority(2), Shares((2, 1))]),
    rate=rates,
    burst=st.integers(1, 3),
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("push"), st.integers(0, 1), st.integers(1, 3), st.integers(0, 300)),
            st.tuples(st.just("tokens"), _tokens_word),
        ),
        max_size=30,
    ),
)
def test_a_limit_a_cost_takes_nothing_from_holds_it_in_no_way(
    policy: Policy, rate: Any, burst: int, steps: list[Any]
) -> None:
    """P96: a machine of requests and tokens whose every waiter asks for
    requests only decides exactly as one of requests alone, whatever the
    tokens limit says: the upstream's word that none are left until a
    reset minutes away, a quota of none, a change of its rate. Only a
    pause, which holds every waiter, holds them."""
    requests = Limit(rate, burst=burst)
    both = Machine(policy, limits={"requests": requests, "tokens": Limit(100, burst=50)})
    alone = Machine(policy, limits={"requests": requests})
    now, out, expected = 0, both.tick(0), alone.tick(0)  # (both start full at 0)
    paused_until = 0
    for i, step in enumerate(steps):
        if step[0] == "push":
            _, level, units, gap_ms = step
            units = min(units, burst)
            now += gap_ms * MILLISECOND
            out += both.push(i, level, now, cost={"requests": units})
            expected += alone.push(i, level, now, cost={"requests": units})
        else:
            what, units, ns = step[1]
            if what == "adopt":
                out += both.adopt(units, now + ns, now, limit="tokens")
            elif what == "quota":
                out += both.quota(units, now + ns, now, limit="tokens")
            elif what == "rerate":
                out += both.set_limit(now, rate=units + 1, burst=units + 1, limit="tokens")
            else:
                out += both.pause_until(now + ns // 100, now)
                expected += alone.pause_until(now + ns // 100, now)
                paused_until = max(paused_until, now + ns // 100)
        assert rows(out) == rows(expected), ("P96", rows(out), rows(expected))
        assert both.next_tick() == alone.next_tick(), ("P96", both.next_tick(), alone.next_tick())
        for level in range(2):
            cost = {"requests": 1}
            assert both.min_wait(level, cost=cost) == alone.min_wait(level, cost=cost), "P96"
            # a cost of nothing at all is held by the pause alone
            assert both.min_wait(level, cost=0) >= paused_until - now, ("P96", paused_until)
    out += drive(both, now + 1000 * SECOND)
    expected += drive(alone, now + 1000 * SECOND)
    assert rows(out) == rows(expected), ("P96", rows(out), rows(expected))


@given(rate=rates, asked=st.integers(1, 6), actual=st.integers(0, 12))
def test_settle_gives_back_and_charges(rate: Any, asked: int, actual: int) -> None:
    """P29: settling a grant of ``asked`` at ``actual`` leaves the machine
    exactly as one where the grant had asked for ``actual``: the next
    waiter's due time and every later decision are the same. P2 after a
    settle: units given back go at once to a waiter they let fit."""
    burst = max(asked, actual, 1)
    settled = Machine(Fifo(1), rate, burst)
    direct = Machine(Fifo(1), rate, burst)
    settled.push("a", 0, 0, cost=asked)
    if actual:
        direct.push("a", 0, 0, cost=actual)
    else:
        direct.tick(0)
    out = settled.push("b", 0, 0, cost=burst)
    out += settled.settle("a", actual, 0)
    if len(settled):  # b still waits: it does not fit now
        assert settled.next_due() != 0, ("P2: b fits, and waits", rows(out))
    expected = direct.push("b", 0, 0, cost=burst)
    assert settled.next_due() == direct.next_due(), ("P29", settled.next_due(), direct.next_due())
    out += drive(settled, 100 * SECOND)
    expected += drive(direct, 100 * SECOND)
    assert rows(out) == rows(expected), ("P29", rows(out), rows(expected))


@pytest.mark.parametrize("policy", [Aging(2, after_ns=2 * SECOND), Fifo(2)], ids=["aging", "fifo"])
def test_flows_do_not_make_a_level_younger(policy: Policy) -> None:
    """P9 with flows: a level is as old as its oldest waiter, whichever of
    its flows' waiters it serves next. A backlog of one tenant's calls,
    then one of batch calls, all queued at 0, and a quiet tenant's call
    every 100 ms: the tenants' backlog is older than the batch's (under
    ``Aging``, by more than the 2 s the batch's level costs), so the
    interactive level keeps every permit while the first tenant's backlog
    lasts, flows named or not (but one, without flows under ``Fifo``: the
    batch's first call is older than the quiet tenant's); named, the
    tenants take turns. (Ranked by the call it serves next, the quiet
    tenant's fresh one, the level lost 160 of 200 permits to the batch
    under ``Aging``, 198 under ``Fifo``.)"""

    def permits_in_20_s(name_flows: bool) -> Counter[str]:
        machine = Machine(policy, rate=10, burst=1)
        for n in range(200):
            machine.push(("noisy", n), 0, 0, flow="noisy" if name_flows else None)
        for n in range(200):
            machine.push(("batch", n), 1, 0)
        granted: list[Decision] = []
        for t in range(100 * MILLISECOND, 20 * SECOND + 1, 100 * MILLISECOND):
            granted += machine.push(("quiet", t), 0, t, flow="quiet" if name_flows else None)
        machine.check_valid()
        ids: list[Any] = [d.id for d in granted]
        return Counter(kind for kind, _ in ids)

    named, plain = permits_in_20_s(True), permits_in_20_s(False)
    assert plain["noisy"] == 199, ("P9: the oldest backlog first", plain)
    assert named["batch"] == 0, ("P9: flows made the level younger", named)
    assert abs(named["noisy"] - named["quiet"]) <= 2, ("P35: the tenants take turns", named)


@given(requests=st.integers(0, 3), tokens=st.integers(0, 200), used=st.integers(0, 200))
def test_a_settle_keeps_the_limits_it_leaves_out(requests: int, tokens: int, used: int) -> None:
    """P29: a settle that names only ``tokens`` keeps the units asked of
    ``requests``; the machine decides as one where the call had asked for
    its requests and the tokens it used, and counts those units."""
    if not requests and not tokens:
        tokens = 1  # a cost takes at least one unit
    limits = {"requests": Limit(1, 3), "tokens": Limit(100, 200)}
    settled, direct = Machine(Fifo(1), limits=limits), Machine(Fifo(1), limits=limits)
    settled.push("a", 0, 0, cost={"requests": requests, "tokens": tokens})
    if requests or used:
        direct.push("a", 0, 0, cost={"requests": requests, "tokens": used})
    else:
        direct.tick(0)
    out = settled.push("b", 0, 0, cost={"requests": 3, "tokens": 200})
    out += settled.settle("a", {"tokens": used}, 0)
    expected = direct.push("b", 0, 0, cost={"requests": 3, "tokens": 200})
    out += drive(settled, 100 * SECOND)
    expected += drive(direct, 100 * SECOND)
    assert rows(out) == rows(expected), ("P29", rows(out), rows(expected))
    granted = settled.statistics().levels[0].units_granted
    assert granted == (requests + 3, used + 200), ("P29", granted)


@given(
    rate=rates,
    burst=st.integers(1, 4),
    new_rate=rates,
    new_burst=st.integers(1, 4),
    step=st.integers(0, 16),
)
def test_set_limit_continues(
    rate: Any, burst: int, new_rate: Any, new_burst: int, step: int
) -> None:
    """P30: a change of limit carries the units in the bucket over: a
    bucket drained at 0 and changed at ``t`` grants its first permit at
    ``t`` if a unit had accrued by then, else when the rest of that unit
    accrues at the new rate; the units never exceed the new burst."""
    machine = Machine(Fifo(1), rate, burst)
    machine.push("drain", 0, 0, cost=burst)
    at = math.ceil(step * SECOND / exact_rate(rate) / 4)
    machine.set_limit(at, rate=new_rate, burst=new_burst)
    # drained at 0, the machine's first operation (a full bucket, no nanosecond)
    accrued = min(burst + exact_rate(rate) / SECOND, exact_rate(rate) * Fraction(at, SECOND))
    accrued = min(accrued, new_burst + exact_rate(new_rate) / SECOND)
    tat = max(Fraction(at - 1), at + (new_burst - accrued) * SECOND / exact_rate(new_rate))
    anchor = math.ceil(tat)
    expected = max(at, anchor + math.ceil((1 - new_burst) * SECOND / exact_rate(new_rate)))
    assert machine.next_due() == expected, ("P30", machine.next_due(), expected)
    for n in range(new_burst + 2):
        machine.push(n, 0, expected)
    granted = [d for d in machine.tick(expected) if d.state is State.GRANTED]
    assert len(granted) <= new_burst + 1, ("P30: more than the new burst at once", granted)


#: Rates from one unit a second to several a nanosecond (an interval of 1 ns
#: and below is where a unit charged at ``now`` is already refilled at ``now``).
FAST_AND_SLOW = st.sampled_from([1, 7, Fraction(7, 3), 1000, 10**9, 3 * 10**9])


@given(
    kind=st.sampled_from(sorted(TWO_LEVELS)),
    two=st.booleans(),
    at_spend=st.booleans(),
    rates=st.tuples(FAST_AND_SLOW, FAST_AND_SLOW),
    bursts=st.tuples(st.integers(1, 4), st.integers(4, 6)),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["push", "push", "spend", "set_limit", "refund"]),
            st.integers(0, 3),
            st.sampled_from([0, 0, 1, 400, SECOND // 3]),
        ),
        max_size=40,
    ),
    changes=st.lists(st.tuples(FAST_AND_SLOW, st.integers(4, 6)), min_size=1, max_size=5),
)
# a refund of a grant charged more than the settle window (1 s) before: none
@example(
    kind="aging",
    two=False,
    at_spend=False,
    rates=(1, 1),
    bursts=(1, 4),
    steps=[("push", 0, 0), *[("push", 0, SECOND // 3)] * 3, ("refund", 0, 400)],
    changes=[(1, 4)],
)
def test_spends_and_changes_of_limit_grant_nothing_by_themselves(
    kind: str,
    two: bool,
    at_spend: bool,
    rates: tuple[Any, Any],
    bursts: tuple[int, int],
    steps: list[tuple[str, int, int]],
    changes: list[tuple[Any, int]],
) -> None:
    """P2, P24, P30: a spend or a change of limit never makes a waiter fit
    sooner than it already did. After a tick at ``now``, a ``spend`` or a
    ``set_limit`` at ``now`` decides nothing: a permit in flight becomes a
    charged one in the same place, and the units in the bucket carry over
    (never more than the new burst). A raised rate brings the next due time
    forward; the grant comes at that time's tick."""
    charge = Charge.AT_SPEND if at_spend else Charge.AT_GRANT
    policy = TWO_LEVELS[kind]
    if two:
        limits = {"a": Limit(rates[0], bursts[0]), "b": Limit(rates[1], bursts[1])}
        machine = Machine(policy, limits=limits, charge=charge)
    else:
        machine = Machine(policy, rates[0], bursts[1], charge=charge)
    held: list[tuple[int, int]] = []  # (id, granted at)
    now = 0
    for n, (op, arg, step) in enumerate(steps):
        now += step
        out = machine.tick(now)
        if op == "push":
            cost: int | dict[str, int] = {"a": arg % 2, "b": arg + 1} if two else arg + 1
            out += machine.push(n, arg % 2, now, cost=cost)
        elif op == "refund" and held:
            id, at = held.pop(arg % len(held))
            # in flight, or charged within the settle window (1 s): refundable
            if at_spend or at >= now - SECOND:
                out += machine.refund(id, now)
        elif op == "spend" and held:
            spent = machine.spend(held.pop(arg % len(held))[0], now, settle_later=arg == 3)
            assert spent == [], ("a spend decided something by itself", spent)
        elif op == "set_limit":
            rate, burst = changes[arg % len(changes)]
            changed = machine.set_limit(now, rate=rate, burst=burst, limit="b" if two else None)
            assert changed == [], ("a change of limit decided something by itself", changed)
        held += [(d.id, d.at) for d in out if d.state is State.GRANTED]  # type: ignore[misc]


@given(
    weights=st.lists(st.integers(1, 5), min_size=2, max_size=3),
    costs=st.lists(st.lists(st.integers(1, 40), min_size=1, max_size=6), min_size=3, max_size=3),
    depth=st.integers(5, 40),
    tokens=st.booleans(),
)
# a level one unit short of its head's cost while another's credit covers
# its head: the covered one goes first
@example(weights=[1, 1], costs=[[4, 1], [1], [1]], depth=5, tokens=False)
def test_shares_divide_units(
    weights: list[int], costs: list[list[int]], depth: int, tokens: bool
) -> None:
    """P33: while every level waits, over any run of grants of ``U`` units
    in all, level ``i`` receives at least ``w_i * U / W - (L * w_i / W + 1) * C``
    units, ``C`` the largest cost: shares count units, whatever each costs.
    And P13 on the way: every grant and the deal after it (slots dealt, each
    level's credit) are the model's, which deals the cycle one slot at a time.
    With ``tokens``, the shares count the machine's second limit (each
    grant takes one unit of the first, requests, and its cost of tokens)."""
    levels = len(weights)
    largest = max(max(c) for c in costs[:levels])

    def asked(n: int) -> int | dict[str, int]:
        return {"requests": 1, "tokens": n} if tokens else n

    if tokens:
        limits = {"requests": Limit(1000, largest), "tokens": Limit(1000, largest)}
        machine = Machine(Shares(weights, limit="tokens"), limits=limits)
    else:
        machine = Machine(Shares(weights), 1000, largest)
    machine.push("drain", 0, 0, cost=asked(largest))  # the full bucket goes to it
    for n in range(depth):
        for level in range(levels):
            mine = costs[level]
            machine.push((level, n), level, 0, cost=asked(mine[n % len(mine)]))
    model = Reference(
        PolicySpec("shares", levels, tuple(weights), shared=int(tokens)),
        [(Fraction(1000), largest)] * (2 if tokens else 1),
        None,
        SECOND,
    )

    def as_units(n: int) -> tuple[int, ...]:
        return (1, n) if tokens else (n,)

    model.push("drain", 0, 0, None, as_units(largest))
    for n in range(depth):
        for level in range(levels):
            mine = costs[level]
            model.push((level, n), level, 0, None, as_units(mine[n % len(mine)]))
    run: list[tuple[int, int]] = []  # (level, units) of each grant while all wait
    cost_of: dict[Hashable, int] = {
        (lv, n): costs[lv][n % len(costs[lv])] for lv in range(levels) for n in range(depth)
    }
    left = [depth] * levels
    while any(left):  # on to the end, as levels stop waiting and drop their credit
        at = machine.next_tick()
        assert at is not None
        decisions = machine.tick(at)
        # P13: slot by slot, the deal SPEC states (the model's) grants the same
        assert rows(decisions) == model.settle(at), ("P13", at)
        deal = machine.snapshot().policy_state
        assert isinstance(deal, Deal)
        assert (deal.position, list(deal.credits)) == (model.dealt, model.credits), "P13"
        for d in decisions:
            if all(left):  # everyone waited at this grant
                run.append((d.level, cost_of[d.id]))
            left[d.level] -= 1
    note(f"{run}")
    total_weight = sum(weights)
    for level, weight in enumerate(weights):
        slack = (Fraction(levels * weight, total_weight) + 1) * largest
        for start in range(len(run)):
            got = units = 0
            for granted, cost in run[start:]:
                units += cost
                got += cost if granted == level else 0
                bound = Fraction(weight * units, total_weight) - slack
                assert got >= bound, ("P33", level, start, got, units, weights)


# -- flows within a level -------------------------------------------------------


@given(**EVERY_KIND, named=st.booleans())
def test_one_flow_is_today(
    kind: str, rate: Any, burst: int, on_time: bool, script: list[Op], named: bool
) -> None:
    """P36: with one flow per level (every push names its level's flow, or
    one flow shared by all levels), the decisions, due times and depths are
    exactly those of the machine without flows."""
    policy = TWO_LEVELS[kind]
    today = run(Machine(policy, rate, burst), script, on_time)
    flow: Callable[[int], Hashable] = (lambda level: f"tenant-{level}") if named else (lambda _: 7)
    assert run(Machine(policy, rate, burst), script, on_time, flow=flow) == today, "P36"


@given(
    data=st.data(),
    kind=st.sampled_from(KINDS),
    named=st.booleans(),
    on_time=st.booleans(),
    prompt=st.booleans(),
)
def test_one_flow_is_today_on_every_machine(
    data: st.DataObject, kind: str, named: bool, on_time: bool, prompt: bool
) -> None:
    """P36 on every machine: with one flow per level (or one for all), the
    decisions, due times, depths and units in flight are those of the
    machine without flows, under every policy, with costs, two limits,
    either charge, flow weights and a cap per flow, deadlines, takes,
    spends, refunds, settles, pauses, changes of a limit and the upstream's
    word."""
    config: Config = data.draw(configs(kind, charges=tuple(Charge), costs=True, flows=True))
    levels = range(config.spec.levels)
    script = data.draw(moves(config, levels, max_wait=False))
    flow: Callable[[int], Hashable] = (lambda level: f"tenant-{level}") if named else (lambda _: 7)
    machines = [config.machine(), config.machine()]
    lockstep(machines, config, script, "P36", on_time=on_time, prompt=prompt, flows=[None, flow])


def backlog(
    weights: Sequence[int],
    costs: Sequence[Sequence[int]],
    depth: int,
    order: str,
    burst: int = 1,
    more_weights: Mapping[Hashable, int] | None = None,
) -> tuple[Machine, dict[Hashable, tuple[int, int]]]:
    """A one-level machine whose flows ``0..n-1`` (weights ``weights``) each
    queue ``depth`` waiters of the costs ``costs[f]`` (in turn), pushed flow
    by flow or interleaved; returns it and each id's (flow, cost). Flows
    pushed later weigh ``more_weights`` (1 by default)."""
    largest = max(burst, *(max(c) for c in costs))
    flow_weights: dict[Hashable, int] = {**dict(enumerate(weights)), **(more_weights or {})}
    machine = Machine(StrictPriority(1), 1000, largest, flow_weights=flow_weights)
    machine.push("drain", 0, 0, cost=largest)  # the full bucket goes to it
    ids = [(f, n) for f in range(len(weights)) for n in range(depth)]
    if order == "interleaved":
        ids.sort(key=lambda fn: (fn[1], fn[0]))
    of: dict[Hashable, tuple[int, int]] = {}
    for f, n in ids:
        cost = costs[f][n % len(costs[f])]
        of[(f, n)] = (f, cost)
        machine.push((f, n), 0, 0, cost=cost, flow=f)
    return machine, of


def counted(machine: Machine, weights: Sequence[int]) -> list[Fraction]:
    """The weights as level 0 counts them: ``S / ceil(S / w)``, ``S`` its
    virtual-time scale; ``w`` itself while ``S`` is a multiple of it."""
    scale = machine.queues.fairness()[0][1]
    assert isinstance(scale, int)
    assert scale <= MAX_SCALE, scale
    return [Fraction(scale, -(-scale // w)) for w in weights]


flows_setup: dict[str, st.SearchStrategy[Any]] = {
    # four of the big weights take the level's scale past MAX_SCALE
    "weights": st.lists(st.integers(1, 4) | BIG_WEIGHTS, min_size=2, max_size=4),
    "costs": st.lists(st.lists(st.integers(1, 20), min_size=1, max_size=5), min_size=4, max_size=4),
    "depth": st.integers(2, 25),
    "order": st.sampled_from(["by flow", "interleaved"]),
}


@given(**flows_setup)
def test_flows_share_a_level_fairly(
    weights: list[int], costs: list[list[int]], depth: int, order: str
) -> None:
    """P34: over any run of grants throughout which flows f and g of a level
    both wait (none of theirs cancelled or expired), the units granted to
    them, each divided by its weight, differ by at most
    ``C_f / w_f + C_g / w_g``, ``C`` a flow's largest cost: every pair, over
    every run while both wait, other flows waiting or not."""
    machine, of = backlog(weights, costs, depth, order)
    weight = counted(machine, weights)
    flows = range(len(weights))
    left = [depth] * len(weights)
    # each grant of the drain, with the flows that waited when it was made
    run: list[tuple[int, int, frozenset[int]]] = []
    while any(left):  # on to the end: a pair waits on after a third flow empties
        at = machine.next_tick()
        assert at is not None
        for d in machine.tick(at):
            flow, cost = of[d.id]
            run.append((flow, cost, frozenset(f for f in flows if left[f])))
            left[flow] -= 1
        machine.check_valid()
    note(f"{run}")
    largest = [max(costs[f][: min(depth, len(costs[f]))]) for f in flows]
    for f, g in itertools.combinations(flows, 2):
        both = [(flow, cost) for flow, cost, waiting in run if {f, g} <= waiting]
        bound = largest[f] / weight[f] + largest[g] / weight[g]
        for start in range(len(both)):
            got = dict.fromkeys((f, g), 0)
            for flow, cost in both[start:]:
                if flow in got:
                    got[flow] += cost
                gap = abs(got[f] / weight[f] - got[g] / weight[g])
                assert gap <= bound, ("P34", f, g, got, weights)


#: A script of flows coming and going in one level: ("push", flow and how
#: many, cost, units of the other limit), ("cancel", index, 0, 0) or ("tick", 0, 0, 0);
#: long enough for a flow to empty while others are served, and come back.
FLOW_SCRIPT = st.lists(
    st.sampled_from(["push", "push", "push", "tick", "tick", "cancel"]).flatmap(
        lambda op: st.tuples(st.just(op), st.integers(0, 50), st.integers(1, 5), st.integers(0, 5))
    ),
    min_size=20,
    max_size=120,
)


@given(
    weights=st.lists(st.integers(1, 4), min_size=4, max_size=4),
    two=st.booleans(),
    script=FLOW_SCRIPT,
)
def test_flows_share_a_level_fairly_as_they_come_and_go(
    weights: list[int], two: bool, script: list[tuple[str, int, int, int]]
) -> None:
    """P34 where flows join late, empty and join again, after cancels, and
    under two limits of which the second is the flow limit: over any run of
    grants throughout which flows f and g both wait, with no cancel of
    theirs in it, the units of the flow limit granted to them, each over
    its weight, differ by at most ``C_f / w_f + C_g / w_g`` (``C`` the
    largest cost each asked for)."""
    flow_weights: dict[Hashable, int] = dict(enumerate(weights))
    if two:
        limits = {"requests": Limit(1000, 5), "tokens": Limit(1000, 5)}
        machine = Machine(
            StrictPriority(1), limits=limits, flow_weights=flow_weights, flow_limit="tokens"
        )
    else:
        machine = Machine(StrictPriority(1), 1000, 5, flow_weights=flow_weights)
    now = 0
    of: dict[Hashable, tuple[int, int]] = {}
    largest = [0] * len(weights)
    # ("cancel", flow) or ("grant", flow, units, flows waiting before it, after it)
    events: list[tuple[Any, ...]] = []
    for n, (op, arg, units, other) in enumerate(script):
        out: list[Decision] = []
        if op == "push":
            cost: int | dict[str, int] = {"requests": other, "tokens": units} if two else units
            flow = arg % len(weights)  # and a batch of 1 to 6 waiters
            largest[flow] = max(largest[flow], units)
            for k in range(1 + arg // len(weights) % 6):
                of[(n, k)] = (flow, units)
                out += machine.push((n, k), 0, now, cost=cost, flow=flow)
        elif op == "cancel" and len(machine):
            waiters = machine.waiting()
            leaving = waiters[arg % len(waiters)].id
            assert machine.cancel(leaving)
            events.append(("cancel", of[leaving][0]))
        else:
            now = machine.next_tick() or now + SECOND
            out = machine.tick(now)
        for d in out:
            if d.state is State.GRANTED:
                after = frozenset(w.flow for w in machine.waiting())
                flow, units = of[d.id]
                events.append(("grant", flow, units, after | {flow}, after))
    note(f"{events}")
    for f, g in itertools.combinations(range(len(weights)), 2):
        bound = Fraction(largest[f], weights[f]) + Fraction(largest[g], weights[g])
        for start in range(len(events)):
            got = dict.fromkeys((f, g), 0)
            for event in events[start:]:
                if event[0] == "cancel":
                    if event[1] in got:
                        break
                    continue
                _, flow, units, before, after = event
                if not {f, g} <= before:
                    break
                if flow in got:
                    got[flow] += units
                gap = abs(Fraction(got[f], weights[f]) - Fraction(got[g], weights[g]))
                assert gap <= bound, ("P34", f, g, got, weights, start)
                if not {f, g} <= after:
                    break


@given(
    **flows_setup,
    big=st.integers(1, 20),
    joins=st.integers(0, 5),
    heavy=st.integers(1, 4) | BIG_WEIGHTS,
)
def test_no_flow_starves_inside_a_level(
    weights: list[int],
    costs: list[list[int]],
    depth: int,
    order: str,
    big: int,
    joins: int,
    heavy: int,
) -> None:
    """P35: once a waiter of cost ``c`` heads its flow f (of weight
    ``heavy``), every other flow g of its level is granted at most
    ``w_g * c / w_f + C_g`` units before it, whatever joins meanwhile
    (``C_g`` the largest cost g asks for)."""
    victim = len(weights)
    machine, of = backlog(weights, costs, depth, order, burst=big, more_weights={victim: heavy})
    machine.push("victim", 0, 0, cost=big, flow=victim)  # a flow of one
    weight = dict(enumerate(counted(machine, [*weights, heavy])))
    largest = {f: max(costs[f][: min(depth, len(costs[f]))]) for f in range(len(weights))}
    got: dict[int, int] = {}
    now, pushed = 0, 0
    while "victim" in machine:
        now = machine.next_tick() or now
        for d in machine.tick(now):
            if d.id == "victim":
                break
            flow, cost = of[d.id]
            got[flow] = got.get(flow, 0) + cost
        if pushed < joins:  # a new flow joins while the victim waits
            flow = 100 + pushed
            of[("late", pushed)] = (flow, 1)
            weight[flow], largest[flow] = Fraction(1), 1
            machine.push(("late", pushed), 0, now, flow=flow)
            pushed += 1
    note(f"{got}")
    for flow, units in got.items():
        bound = weight[flow] * big / weight[victim] + largest[flow]
        assert units <= bound, ("P35", flow, units, bound)


def test_a_flow_that_joins_after_the_clock_moved_is_held_to_the_bound() -> None:
    """P35's "whatever joins meanwhile", by hand: two flows share a level
    for 20 grants, so its clock moves on; then a new flow joins with 10
    waiters while the other flow's head waits. The newcomer starts at the
    clock, not before it, and is granted at most ``1 * 1 / 1 + 1`` units
    before that head (a newcomer started at 0 took all 10 first, and the
    drawn runs, whose victim was new as well, could not tell). Also where
    the newcomer's weight raises the level's scale: its clock is rescaled
    with the flows."""
    machine = Machine(StrictPriority(1), 1000, 1)
    machine.push("banked", 0, 0)  # granted at once: the rest wait
    for n in range(40):
        machine.push(("g", n), 0, 0, flow="g")
        machine.push(("v", n), 0, 0, flow="v")
    granted = [d.id for d in drive(machine, 20 * MILLISECOND)]
    assert len(granted) == 20
    victim = next(w.id for w in machine.waiting(0) if w.flow == "v")  # v's head now
    for n in range(10):
        machine.push(("late", n), 0, 20 * MILLISECOND, flow="late")
    order = [d.id for d in drive(machine, SECOND)]
    before = order[: order.index(victim)]
    late = sum(1 for id in before if isinstance(id, tuple) and id[0] == "late")
    assert late <= 2, ("P35", late, before)
    # The same where the newcomer's weight (2) raised the level's scale: the
    # clock is rescaled with the flows, and it starts at it, not behind:
    # at most 2 * 1 / 1 + 1 units before the head of a.
    machine = Machine(StrictPriority(1), 1, 1, flow_weights={"c": 2})
    machine.push("banked", 0, 0)
    for n in range(30):
        machine.push(("a", n), 0, 0, flow="a")
        machine.push(("b", n), 0, 0, flow="b")
    granted = [d.id for d in drive(machine, 20 * SECOND)]
    assert len(granted) == 20
    head = next(w.id for w in machine.waiting(0) if w.flow == "a")
    for n in range(30):
        machine.push(("c", n), 0, 20 * SECOND, flow="c")
    order = [d.id for d in drive(machine, 40 * SECOND)]
    before = order[: order.index(head)]
    joined = sum(1 for id in before if isinstance(id, tuple) and id[0] == "c")
    assert joined <= 3, ("P35: after a rescale", joined, before)


@given(keys=st.integers(1, 3000), per=st.integers(1, 3))
def test_nothing_is_kept_for_a_flow_without_waiters(keys: int, per: int) -> None:
    """P37: a level keeps state only for flows that wait: cycling through
    many keys (a tenant per request, as an attacker would) leaves as many
    flows as have waiters, and none once all are granted or cancelled."""
    machine = Machine(StrictPriority(1), 10**6, 1, max_waiting_per_flow=per)
    now = 0
    for key in range(keys):
        now += 1000
        machine.push(("a", key), 0, now, flow=key)
        if key % 3 == 0:
            machine.cancel(("a", key))
        assert machine.queues.flows(0) <= len(machine)
    assert machine.statistics().levels[0].flows == machine.queues.flows(0)
    machine.check_valid()
    for at in range(now, now + keys * 1000 + 1, 1000):
        machine.tick(at)
    assert len(machine) == 0, "P37"
    assert machine.queues.flows(0) == 0, "P37"
    assert machine.queues.entries == 0, "P37"


@given(weights=st.lists(st.integers(1, 10**6), min_size=1, max_size=40))
def test_a_levels_scale_stays_bounded(weights: list[int]) -> None:
    """P37: however many distinct weights wait in a level that never empties,
    each makes its virtual-time scale the lcm of the scale and the weight
    while that is at most MAX_SCALE, and leaves it where it was otherwise:
    the numbers of its virtual time and the rescaling work stay bounded."""

    def weight_of(flow: Hashable) -> int:  # a flow is named by its weight
        return flow if isinstance(flow, int) else 1

    machine = Machine(StrictPriority(1), 1, 1, flow_weights=weight_of)
    machine.push("banked", 0, 0)  # granted at once
    expected = 1
    for n, weight in enumerate(weights):
        machine.push(n, 0, 0, flow=weight)
        lcm = math.lcm(expected, weight)
        expected = lcm if lcm <= MAX_SCALE else expected
        assert machine.queues.fairness()[0][1] == expected, ("P37", weights[: n + 1])
    machine.check_valid()


def test_a_flow_leaves_no_trace_and_an_emptied_level_starts_its_scale_again() -> None:
    """P37 by hand, where the drawn runs could not tell: a flow's key is
    not kept once its last waiter leaves (the spare flow kept for the next
    one forgets it: a tenant's key object is freed); a level that empties
    starts its scale at 1 again, so the weights that waited before count
    no more; and a weight that changes the scale of a level whose clock
    has moved rescales the flows waiting there (each decision and
    ``waiting()``'s order the model's)."""

    class Key:  # a tenant's key: hashable, and freed once nothing holds it
        pass

    machine = Machine(StrictPriority(1), 1000, 1)
    machine.push("banked", 0, 0)  # granted at once: the rest wait
    key = Key()
    freed = weakref.ref(key)
    machine.push("a", 0, 0, flow=key)
    machine.push("b", 0, 0, flow="other")
    machine.cancel("a")
    del key
    gc.collect()
    assert freed() is None, "P37: the key of a flow without waiters is kept"

    machine = Machine(StrictPriority(1), 1, 1, flow_weights={"two": 2, "three": 3})
    machine.push("banked", 0, 0)
    machine.push("x", 0, 0, flow="two")
    machine.push("y", 0, 0, flow="three")
    assert machine.queues.fairness()[0][1] == 6, "P37"
    drive(machine, 2 * SECOND)
    assert not len(machine)
    machine.push("z", 0, 2 * SECOND, flow="one")  # weight 1, into an empty level
    assert machine.queues.fairness()[0][1] == 1, ("P37", machine.queues.fairness())

    line = FairLine({"b": 2})
    for n in range(4):
        line.push(("a", n), "a", 1)
    line.push(("c", 0), "c", 1)  # a second flow: virtual times count
    line.serve(2)  # the clock moves on
    line.push(("b", 0), "b", 1)  # weight 2: the scale doubles, a and c rescaled
    line.push(("b", 1), "b", 1)
    line.serve(10)
    assert not len(line.machine), "P12"


def test_aging_by_hand() -> None:
    """P9 at one chosen moment: a level-1 waiter pushed ``after`` and more
    before a level-0 one outranks it; one pushed later does not; one whose
    key ties goes by push order."""
    machine = Machine(Aging(2, after_ns=100), 1, 1)
    machine.push("banked", 0, 0)  # granted at once: the bucket is empty
    machine.push("old", 1, 10)
    machine.push("new", 0, 150)  # its key 150 is behind old's 100 + 10
    machine.push("newer", 1, 200)
    granted = [d.id for d in drive(machine, 3 * SECOND) if d.state is State.GRANTED]
    assert granted == ["old", "new", "newer"], ("P9", granted)
    # An exact tie of keys (b's 0 * 10 + 10 against a's 1 * 10 + 0) goes by
    # push order, to the less urgent level's older waiter: a tie broken by
    # level instead passed every drawn run, whose times never tie exactly.
    tied = Machine(Aging(2, after_ns=10), 1, 1)
    tied.push("x", 0, 0)  # granted at once: the bucket is empty
    tied.push("a", 1, 0)
    tied.push("b", 0, 10)
    granted = [d.id for d in drive(tied, 3 * SECOND) if d.state is State.GRANTED]
    assert granted == ["a", "b"], ("P9", granted)
    # Exact at any age: past 2**53 afters a float's age / after would round
    # B's key 0 and A's 1 alike, and the tie go to A, pushed first.
    late = Machine(Aging(2, after_ns=1), 1, 1)
    late.push("x", 0, 0)  # granted at once: the bucket is empty
    late.push("A", 1, 0)
    late.push("B", 0, 0)
    granted = [d.id for d in late.tick(2**55) if d.state is State.GRANTED]
    assert granted == ["B"], ("P9: ages past 2**53", granted)


def test_many_flows_cancelled_at_their_heads() -> None:
    """P15 and P37 when most flows of a level lose their heads to cancels
    (more flows than two chunks of flow heads hold, thinned out until they
    merge): after each cancel the queues hold exactly the waiters and one
    entry per flow head (the cancelled head's went at once), and the flows
    left are served exactly as if the cancelled waiters had never come."""
    flows, gone = 3 * CHUNK, 2 * CHUNK
    machine = Machine(StrictPriority(1), 1000, 1)
    fresh = Machine(StrictPriority(1), 1000, 1)
    for m in (machine, fresh):
        m.push("banked", 0, 0)  # granted at once: the rest wait
    for flow in range(flows):
        for n in range(2):
            machine.push((flow, n), 0, 0, flow=flow)
            if flow >= gone:
                fresh.push((flow, n), 0, 0, flow=flow)
    queues = machine.queues
    for flow in range(gone):
        for n in range(2):
            assert machine.cancel((flow, n))
            assert queues.heads == queues.flows(0), ("P15: flow heads", queues.heads, flow, n)
            assert queues.entries == len(machine), ("P15", queues.entries, len(machine))
            machine.check_valid()
    served = [d.id for d in drive(machine, 10 * SECOND)]
    assert served == [d.id for d in drive(fresh, 10 * SECOND)], "P37"
    assert len(served) == 2 * (flows - gone)


Step = tuple[str, int, int, int]


@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["push", "push", "tick", "rerate", "adopt", "refund", "settle"]),
            st.integers(0, 3),
            st.integers(0, 3),
            st.integers(1, 40),
        ),
        max_size=30,
    )
)
# two grants, a change of rate, and both refunded: the second refund replays
# the change the first one logged again
@example(
    [
        ("push", 1, 1, 1),
        ("push", 1, 1, 1),
        ("rerate", 0, 2, 1),
        ("refund", 0, 0, 1),
        ("refund", 0, 0, 2),
    ]
)
# a refund of a grant made before a change of rate, with a waiter behind it
@example(
    [
        ("push", 1, 1, 1),
        ("push", 1, 1, 1),
        ("rerate", 0, 0, 1),
        ("push", 1, 1, 1),
        ("refund", 0, 0, 1),
        ("tick", 0, 0, 40),
        ("settle", 2, 1, 2),
    ]
)
# a refund of a grant made before two changes of the same limit: the replay
# starts from the limit as it stood at the grant, before the first change
@example(
    [
        ("push", 3, 1, 0),
        ("tick", 0, 0, 30),
        ("push", 1, 1, 0),
        ("rerate", 0, 0, 0),
        ("rerate", 0, 3, 2),
        ("refund", 0, 0, 1),
    ]
)
def test_refunds_and_settles_replay_the_changes_of_a_limit(steps: list[Step]) -> None:
    """P29, P30 and P32 through P13: on two limits, refunds and settles of
    permits charged before a change of a limit (its rate and burst, or the
    upstream's word) decide exactly as the model, which replays every charge
    and change from the start in exact fractions."""
    names = ("requests", "tokens")
    start = [(Fraction(10), 3), (Fraction(4), 2)]
    machine = Machine(
        Fifo(), limits={n: Limit(r, b) for n, (r, b) in zip(names, start, strict=True)}
    )
    model = Reference(PolicySpec("fifo", 1), start, None, SECOND)
    now, pushed = 0, 0
    granted: list[Hashable] = []
    for kind, x, y, k in steps:
        if kind == "push":
            cost = (min(x, model.limits[0][1]), min(y, model.limits[1][1]))
            if not any(cost):
                continue
            out = machine.push(pushed, 0, now, cost=dict(zip(names, cost, strict=True)))
            expected = model.push(pushed, 0, now, None, cost)
            pushed += 1
        elif kind == "tick":
            now += k * 10**7
            out, expected = machine.tick(now), model.settle(now)
        elif kind == "rerate":
            i, rate = x % 2, (1, 4, 10, 25)[y]
            burst = max([2 + k % 3, *(w.cost[i] for w in model.waiting)])
            out = machine.set_limit(now, rate=rate, burst=burst, limit=names[i])
            expected = model.set_limit(now, i, Fraction(rate), burst)
        elif kind == "adopt":
            out = machine.adopt(y, now + k * 10**7, now, limit=names[x % 2])
            expected = model.adopt(y, now + k * 10**7, now, x % 2)
        else:
            if not granted:
                continue
            id = granted[k % len(granted)]
            if not model.can_settle(id, now):
                continue
            if kind == "refund":
                out, expected = machine.refund(id, now), model.refund(id, now)
            else:
                actual = (x, y)
                out = machine.settle(id, dict(zip(names, actual, strict=True)), now)
                expected = model.settle_cost(id, dict(enumerate(actual)), now)
        assert rows(out) == expected, ("P13", kind, rows(out), expected)
        granted += [d.id for d in out if d.state is State.GRANTED]
        assert machine.next_due() == model.next_due(), ("P13", kind)
        machine.check_valid()


@given(**flows_setup, unnamed=st.integers(0, 3), n=st.integers(0, 5))
def test_busiest_flows_count_what_they_were_granted(
    weights: list[int], costs: list[list[int]], depth: int, order: str, unnamed: int, n: int
) -> None:
    """P50: at every step of a drain, ``busiest_flows`` gives each named
    flow's waiters and their units exactly, and its granted units at least
    the true count and at most ``granted_error`` above it (exact here: fewer
    flows than counters), most granted first: the ``n`` first of them and
    the ``n`` with the most units waiting, each once; the default flow is
    none of them."""
    machine, of = backlog(weights, costs, depth, order)
    for k in range(unnamed):  # waiters of the level's default flow
        machine.push(("unnamed", k), 0, 0)
        of[("unnamed", k)] = (-1, 1)
    got: dict[Hashable, int] = {}
    while len(machine):
        waiting: dict[Hashable, list[int]] = {}
        for w in machine.waiting(0):
            if w.flow is not None:
                waiting.setdefault(w.flow, []).append(w.cost[0])
        every = machine.busiest_flows(0, len(weights) + 1)
        named = set(waiting) | set(got)
        assert {row.flow for row in every} == named, ("P50", every, named)
        for row in every:
            units = waiting.get(row.flow, [])
            assert (row.waiting, row.waiting_units) == (len(units), sum(units)), ("P50", row)
            true = got.get(row.flow, 0)
            assert true <= row.granted_units <= true + row.granted_error, ("P50", row, true)
            assert row.granted_error == 0, ("P50", row)
        keys = [(row.granted_units, row.waiting_units) for row in every]
        assert keys == sorted(keys, reverse=True), ("P50", every)
        first = machine.busiest_flows(0, n)  # (which of a tie, either)
        firsts = [(row.granted_units, row.waiting_units) for row in first]
        assert firsts == sorted(firsts, reverse=True), ("P50", first)
        assert firsts[:n] == keys[:n], ("P50: the n most granted", first)
        most_waiting = sorted((row.waiting_units for row in every), reverse=True)[:n]
        listed = sorted((row.waiting_units for row in first), reverse=True)[:n]
        assert listed == most_waiting, ("P50: the n most waiting", first)
        assert len(first) <= 2 * n, ("P50", first)
        assert set(first) <= set(every), ("P50", first, every)
        at = machine.next_tick()
        assert at is not None
        for d in machine.tick(at):
            flow, cost = of[d.id]
            if flow >= 0:
                got[flow] = got.get(flow, 0) + cost


def test_busiest_flows_are_ten_by_default() -> None:
    """P50 with SPEC's default ``n=10``: of twelve flows waiting, ten are listed."""
    machine = Machine(Fifo(), 1, 1)
    machine.push("banked", 0, 0)  # granted at once: the rest wait
    for flow in range(12):
        machine.push(flow, 0, 0, flow=flow)
    assert len(machine.busiest_flows(0)) == 10, "P50"


def test_pauses_by_hand() -> None:
    """P46 at chosen times: a pause counts only when it ends later than now
    and than every earlier pause; the time paused is the union of the pauses."""
    machine = Machine(Fifo(), 1, 1)
    machine.pause_until(10, 0)
    machine.pause_until(10, 5)  # ends with the first: not counted
    machine.pause_until(8, 6)  # inside it
    machine.pause_until(20, 20)  # ends now
    machine.pause_until(30, 25)
    stats = machine.statistics()
    assert (stats.pauses, stats.paused_ns) == (2, 15), ("P46", stats.pauses, stats.paused_ns)


def test_a_supplied_machine_is_told_of_pauses_as_they_come() -> None:
    """P46 on a supplied machine, whose ``paused`` moves no time: a pause
    told at a ``now`` before an earlier one's is refused, and counts
    nothing (the union of [50, 100) and [10, 200) was counted as 150, the
    span before 50 lost). And P86: where the pauses end, and when the
    last was told, are in the snapshot (two machines with equal snapshots
    but for them counted the next pause differently)."""
    machine = Machine(Fifo(), 1, 1, supplied=True)
    machine.tick(0)
    machine.paused(100, 50)
    before = machine.snapshot()
    with pytest.raises(TimeWentBackwards) as refused:
        machine.paused(200, 10)
    assert (refused.value.value, refused.value.last) == (10, 50), "P46"
    assert machine.snapshot() == before, "P46"
    machine.paused(200, 60)
    stats = machine.statistics()
    assert (stats.pauses, stats.paused_ns) == (2, 150), ("P46", stats.pauses, stats.paused_ns)
    one, other = (Machine(Fifo(), 1, 1, supplied=True) for _ in range(2))
    one.paused(100, 0)
    other.paused(150, 50)
    assert one.statistics() == other.statistics()  # one pause of 100 ns each
    assert one.snapshot() != other.snapshot(), "P86"


@given(
    origin=st.sampled_from([-(2**62), -SECOND, -1, 2**62]) | st.integers(-(2**64), 2**64),
    pauses=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12)), max_size=6),
)
@example(origin=-100, pauses=[(0, 10)])
@example(origin=-10, pauses=[(0, 10), (0, 5), (0, 8)])
def test_pauses_are_counted_wherever_the_clock_starts(
    origin: int, pauses: list[tuple[int, int]]
) -> None:
    """P46 on a clock that starts anywhere (*Time*: any monotonic clock, its
    times negative or past 2**62): the pauses and the time paused are those
    of the same pauses on a clock that starts at 0, and the model's (the
    union of the spans), the model given either clock's times. A count that
    started from time 0 missed a pause that ends before it, and counted one
    that ends after it from 0; the model took a pause that ended at time 0
    for none, and counted a shorter one after it."""
    machine = Machine(Fifo(), 1, 1)
    model = Reference(PolicySpec("fifo", 1), [(Fraction(1), 1)], None, SECOND)
    shifted = Reference(PolicySpec("fifo", 1), [(Fraction(1), 1)], None, SECOND)
    now = 0
    for step, length in pauses:
        now += step
        machine.pause_until(origin + now + length, origin + now)
        model.pause_until(now + length, now)
        shifted.pause_until(origin + now + length, origin + now)
        note(f"pause_until({now + length}, {now}) from {origin}")
    stats = machine.statistics()
    expected = (model.pauses, model.paused_ns())
    assert (stats.pauses, stats.paused_ns) == expected, ("P46", stats.pauses, expected)
    assert (shifted.pauses, shifted.paused_ns()) == expected, ("P46", "the model", origin)


def test_weights_that_rescale_a_level_keep_the_literal_order() -> None:
    """P34 (the model's literal rule), by hand where the level's scale
    changes while flows wait: a flow of weight 2 joins one of weight 1 that
    is part served, then one of weight 3 (the scale goes 1, 2, 6), then one
    of weight 4 (12), with costs that differ; every grant is the model's,
    and so is ``waiting()``'s order, the grants to come were nobody to join."""
    weights: dict[Hashable, int] = {"one": 1, "two": 2, "three": 3, "four": 4}
    costs = [3, 1, 2, 5, 1, 4]
    machine = Machine(StrictPriority(1), 1000, 5, flow_weights=weights)
    model = Reference(
        PolicySpec("strict", 1), [(Fraction(1000), 5)], None, SECOND, flow_weights=weights
    )
    machine.push("drain", 0, 0, cost=5)  # the full bucket goes to it
    model.push("drain", 0, 0, None, (5,))
    now, n = 0, 0
    granted: list[Hashable] = []

    def drained() -> list[Hashable]:
        """The model's grants to come, were nobody to join or leave."""
        ahead, at, out = copy.deepcopy(model), now, []
        while ahead.waiting:  # a second on, the burst is full: its head fits
            at += SECOND
            out += [id for id, state, *_ in ahead.settle(at) if state == "GRANTED"]
        return out

    def join(flow: str, count: int) -> None:
        nonlocal n
        for _ in range(count):
            cost = costs[n % len(costs)]
            machine.push((flow, n), 0, now, cost=cost, flow=flow)
            model.push((flow, n), 0, now, None, (cost,), flow)
            n += 1
        assert [w.id for w in machine.waiting(0)] == drained(), ("P34", granted)

    def serve(grants: int) -> None:
        nonlocal now
        while grants > 0 and len(machine):
            at = machine.next_tick()
            assert at is not None
            now = at
            decisions = machine.tick(now)
            assert rows(decisions) == model.settle(now), ("P34", granted)
            granted.extend(d.id for d in decisions)
            grants -= len(decisions)
            machine.check_valid()
            assert [w.id for w in machine.waiting(0)] == drained(), ("P34", granted)

    join("one", 6)
    serve(2)
    join("two", 6)
    serve(3)
    join("three", 6)
    assert machine.queues.fairness()[0][1] == 6, "P37"
    serve(4)
    join("four", 4)
    join("one", 2)
    serve(10**6)
    assert len(granted) == 24, granted


def test_the_first_other_cost_counts_the_units_already_waiting() -> None:
    """P50 (and the queues' own counts) at the moment costs start to differ:
    flows already waiting at one unit each, some cancelled inside their
    lines, at two levels, are counted exactly when the first push of
    another cost comes, and stay exact through the drain."""
    machine = Machine(StrictPriority(2), 1000, 4)
    for k in range(4):
        machine.push(("banked", k), 0, 0)  # the full bucket: the rest wait
    waiting: dict[Hashable, tuple[int, Hashable, int]] = {}  # id -> level, flow, cost
    for k in range(12):
        id, level, flow = ("w", k), k % 2, ("a", "b", None)[k % 3]
        machine.push(id, level, 0, flow=flow)
        waiting[id] = (level, flow, 1)
    for k in (3, 4, 7):  # cancelled inside their flows' lines
        assert machine.cancel(("w", k))
        del waiting[("w", k)]
    machine.push("big", 1, 0, cost=4, flow="b")  # the first cost other than 1
    waiting["big"] = (1, "b", 4)
    now = 0
    while True:
        machine.check_valid()  # the units per level and per flow count the waiters
        for level in (0, 1):
            rows = {row.flow: row for row in machine.busiest_flows(level)}
            for flow in ("a", "b"):
                mine = [c for lv, f, c in waiting.values() if lv == level and f == flow]
                row = rows.get(flow)
                got = (0, 0) if row is None else (row.waiting, row.waiting_units)
                assert got == (len(mine), sum(mine)), ("P50", level, flow, got, mine)
            expected = sum(c for lv, _, c in waiting.values() if lv == level)
            assert machine.queues.units[level][0] == expected, ("units", level)
        if not len(machine):
            break
        at = machine.next_tick()
        assert at is not None
        now = at
        for d in machine.tick(now):
            del waiting[d.id]


def test_shares_drop_the_credit_of_a_level_that_stops_waiting() -> None:
    """P13 (the deal SPEC states) by hand where a level stops waiting with
    units dealt to it and unused (its waiters cancelled): the next grant
    drops them, so it banks no credit while idle, and when it waits again
    it starts from none. Every grant, slot and credit is the model's."""
    machine = Machine(Shares((1, 1)), 1000, 4)
    model = Reference(PolicySpec("shares", 2, (1, 1)), [(Fraction(1000), 4)], None, SECOND)

    def push(id: Hashable, level: int, now: int, cost: int) -> None:
        machine.push(id, level, now, cost=cost)
        model.push(id, level, now, None, (cost,))

    def step() -> int:
        at = machine.next_tick()
        assert at is not None
        assert rows(machine.tick(at)) == model.settle(at), ("P13", at)
        return at

    def credits() -> list[int]:
        deal = machine.snapshot().policy_state
        assert isinstance(deal, Deal)
        assert (deal.position, list(deal.credits)) == (model.dealt, model.credits), "P13"
        return list(deal.credits)

    push("drain", 0, 0, 4)  # the full bucket goes to it
    for n in range(4):
        push(("big", n), 0, 0, 3)
        push(("small", n), 1, 0, 1)
    now = 0
    while credits()[0] == 0:  # until the big costs' level holds units unused
        now = step()
    left = [("big", n) for n in range(4) if ("big", n) in machine]
    assert left, "level 0 still waits, with credit"
    assert machine.waiting(1), "and level 1 waits, to be granted next"
    for id in left:  # level 0 stops waiting, its credit unused
        assert machine.cancel(id) == model.cancel(id)
    now = step()  # a grant that finds level 0 not waiting
    assert credits()[0] == 0, ("P13", "the idle level's credit is dropped")
    for n in range(3):  # it waits again: from no credit
        push(("again", n), 0, now, 3)
    while len(machine):
        now = step()
        credits()


class FairLine:
    """One level of flows, the machine beside the model: each push, grant and
    cancel compared (P13), and ``waiting()`` after each step compared with
    the model's grants to come, were nobody to join or leave (P34)."""

    def __init__(self, weights: dict[Hashable, int] | None = None) -> None:
        self.machine = Machine(StrictPriority(1), 1000, 5, flow_weights=weights)
        self.model = Reference(
            PolicySpec("strict", 1), [(Fraction(1000), 5)], None, SECOND, flow_weights=weights
        )
        self.now = 0
        self.push("drain", None, 5)  # the full bucket goes to it
        self.granted: list[Hashable] = ["drain"]

    def drained(self) -> list[Hashable]:
        ahead, at, out = copy.deepcopy(self.model), self.now, []
        while ahead.waiting:  # a second on, the burst is full: its head fits
            at += SECOND
            out += [id for id, state, *_ in ahead.settle(at) if state == "GRANTED"]
        return out

    def check(self, what: object) -> None:
        self.machine.check_valid()
        order = [w.id for w in self.machine.waiting(0)]
        assert order == self.drained(), ("P34", what, order, self.drained())

    def push(self, id: Hashable, flow: Hashable, cost: int) -> None:
        decisions = self.machine.push(id, 0, self.now, cost=cost, flow=flow)
        assert rows(decisions) == self.model.push(id, 0, self.now, None, (cost,), flow), "P13"
        if id != "drain":
            self.check(("push", id))

    def serve(self, grants: int) -> None:
        """The next ``grants`` grants (or all), each at its ``next_tick``."""
        for _ in range(grants):
            if not len(self.machine):
                return
            at = self.machine.next_tick()
            assert at is not None
            self.now = at
            decisions = self.machine.tick(at)
            assert rows(decisions) == self.model.settle(at), ("P13", self.granted)
            self.granted += [d.id for d in decisions]
            self.check(("grant", self.granted[-1]))

    def cancel(self, id: Hashable) -> None:
        assert self.machine.cancel(id) == self.model.cancel(id) is True, ("P13", id)
        self.check(("cancel", id))


def test_a_scale_that_grows_after_it_stopped_keeps_ties_to_the_first_pushed() -> None:
    """P78 and P13 by hand, where a level's scale of virtual time stopped
    at MAX_SCALE (a weight it cannot take in: x's) and then grows again (a
    weight of 2): the heads' finishes are made anew at the new scale, so x
    and z, of the same weight, cost and start, tie, and x, pushed first,
    goes first, as ``waiting()`` says and the model decides. x's finish,
    rounded up at the old scale and then doubled, came out later than z's:
    z went first, and ``waiting()`` said x."""
    primes = [999_983, 999_979, 999_961, 999_959]
    weights: dict[Hashable, int] = {"a": primes[0], "b": primes[1], "c": primes[2], "y": 2}
    line = FairLine({**weights, "x": primes[3], "z": primes[3]})
    for flow in "abc":
        line.push(flow, flow, 4)
    line.push("x", "x", 2)  # the scale would pass MAX_SCALE: it stays
    line.push("y", "y", 4)  # it doubles
    line.push("z", "z", 2)
    line.serve(6)
    assert line.granted[1:3] == ["x", "z"], ("P78", line.granted)


def test_flows_that_leave_and_join_again_by_hand() -> None:
    """P34 and P13 by hand, where the virtual times a level keeps for one
    flow alone matter when another joins: a flow left alone behind the
    clock (its head started before the other flow's grants), a flow served
    alone, a head cancelled after the clock moved on with two flows
    waiting, a waiter cancelled behind a head that started before the
    clock, and the head cancelled of a flow another's cancel left alone:
    every decision is the model's, and so is ``waiting()``'s order."""
    # a flow left alone keeps its head's start, behind the clock
    line = FairLine()
    line.push("a1", "a", 2)
    line.push("b1", "b", 1)
    line.serve(1)  # b1: the clock is at 1; a is alone, its head started at 0
    assert line.granted[-1] == "b1"
    line.push("b2", "b", 1)  # b2 finishes at 2, as a1 does, pushed later
    line.serve(2)
    assert line.granted[-2:] == ["a1", "b2"], ("P34", line.granted)

    # a flow served alone catches up with the clock when another joins
    line = FairLine()
    for id, flow, cost in [("a1", "a", 2), ("a2", "a", 2), ("a3", "a", 2), ("b1", "b", 1)]:
        line.push(id, flow, cost)
    line.serve(2)  # b1 (finish 1), then a1 alone
    assert line.granted[-2:] == ["b1", "a1"], ("P34", line.granted)
    line.push("b2", "b", 1)  # starts at the clock, ahead of a2
    line.push("b3", "b", 1)
    line.serve(1)
    assert line.granted[-1] == "b2", ("P34", line.granted)
    line.cancel("a2")  # a's head, after the clock moved on: a3 starts at the clock
    line.serve(4)

    # a waiter cancelled behind a head that started before the clock
    line = FairLine()
    line.push("a1", "a", 5)
    line.push("a2", "a", 1)
    line.push("a3", "a", 1)
    for n in range(7):
        line.push(("b", n), "b", 1)
    line.serve(2)  # b's first two: the clock is at 2, a1 started at 0
    line.cancel("a2")
    line.serve(10)
    assert not len(line.machine), "P12"

    # a flow left alone by another's cancel, its head cancelled before any
    # grant: its next head starts at the clock, not at the cancelled head's
    # start (it gained by the cancel: a then went four ahead of c, who joins)
    line = FairLine()
    line.push("a_big", "a", 4)
    for n in range(1, 5):
        line.push(f"a{n}", "a", 1)
    for n in range(1, 5):
        line.push(f"b{n}", "b", 1)
    line.serve(3)
    assert line.granted[-3:] == ["b1", "b2", "b3"], ("P34", line.granted)
    line.cancel("b4")  # a is alone, no grant since
    line.cancel("a_big")
    for n in range(1, 5):
        line.push(f"c{n}", "c", 1)
    line.serve(8)
    assert line.granted[-8:] == ["a1", "c1", "a2", "c2", "a3", "c3", "a4", "c4"], (
        "P34",
        line.granted,
    )


class ByTheClock:
    """A policy that reads the time: level 0 first until ``switch``, then
    level 1 first (the first level with waiters otherwise)."""

    levels = 2

    def __init__(self, switch: int) -> None:
        self.switch = switch

    def choose(self, queues: Any, now: int) -> int:
        first = 0 if now < self.switch else 1
        return first if queues.depths[first] else 1 - first

    def ahead(self, queues: Any, level: int, now: int) -> int:
        return 0

    def __repr__(self) -> str:
        return f"ByTheClock({self.switch})"


def test_a_policy_that_reads_the_clock_is_asked_as_time_passes() -> None:
    """P2 and P13 for a policy whose choice changes with time alone, costs
    differing: a tick at a later time asks it again, and grants the waiter
    it now chooses if that one fits, though the one it chose before is not
    due yet; at the same time nothing changes."""
    machine = Machine(ByTheClock(2 * SECOND), 1, 3)
    machine.push("a", 0, 0, cost=3)  # granted at once: the bucket is empty
    machine.push("b", 0, 0, cost=3)  # chosen until 2 s, due at 3 s
    machine.push("c", 1, 0, cost=1)  # its unit is back at 1 s
    assert machine.next_due() == 3 * SECOND, ("P13", machine.next_due())
    assert machine.tick(SECOND) == [], "P2: b is chosen, and not due"
    assert machine.tick(SECOND) == [], "P2"
    granted = [(d.id, d.at) for d in machine.tick(2 * SECOND)]
    assert granted == [("c", 2 * SECOND)], ("P2: c is chosen now, and fits", granted)
    assert machine.next_due() == 4 * SECOND, ("P13: b's 3 units, 1 left at 2 s", machine.next_due())


def test_after_a_cancel_the_next_tick_is_now() -> None:
    """P2 and P13: a cancel that leaves next a waiter whose cost was back
    before the machine's time makes ``next_due`` and ``next_tick`` that time,
    not the past; the tick there grants it, and the counters of each level
    are what happened, exactly."""
    machine = Machine(StrictPriority(2), 1, 3, flow_weights={"f": 2})
    machine.push("a", 0, 0, cost=3)  # granted at once: the bucket is empty
    machine.push("b", 0, 0, cost=3)  # due at 3 s
    machine.push("c", 1, 0, flow="f")  # its unit is back at 1 s
    machine.push("d", 1, 0, flow="g", deadline=SECOND // 2)
    assert [(d.id, d.state) for d in machine.tick(2 * SECOND)] == [("d", State.EXPIRED)]
    assert machine.next_tick() == 3 * SECOND, ("P13", machine.next_tick())
    assert machine.cancel("b")
    assert (machine.next_due(), machine.next_tick()) == (2 * SECOND, 2 * SECOND), "P2"
    assert [(d.id, d.at) for d in machine.tick(2 * SECOND)] == [("c", 2 * SECOND)], "P2"
    machine.push("e", 1, 2 * SECOND, cost=3, flow="f")  # waits: one unit is left
    levels = machine.statistics().levels
    assert [(s.level, s.waiting, s.flows) for s in levels] == [(0, 0, 0), (1, 1, 1)], "P3"
    assert [(s.pushed, s.granted, s.cancelled, s.expired) for s in levels] == [
        (2, 1, 1, 0),
        (3, 1, 0, 1),
    ], "P3"
    assert [(s.wait_total_ns, s.wait_max_ns, s.units_granted) for s in levels] == [
        (0, 0, (3,)),
        (2 * SECOND, 2 * SECOND, (1,)),
    ], "P3"


def test_a_change_of_limit_is_logged_only_where_a_replay_could_need_it() -> None:
    """P15, the log: a change of a limit (set_limit, adopt, quota) is kept
    only while a grant is held and a settle window keeps charges, so that a
    refund or settle replays it; a machine that has granted nothing, or
    keeps no window (a permit in flight held), logs none of them."""
    idle = Machine(Fifo(), rate=10, burst=2)  # a window, nothing granted yet
    flying = Machine(Fifo(), rate=10, burst=2, settle_window_ns=None, charge=Charge.AT_SPEND)
    flying.push("flying", 0, 0)  # granted at once, in flight: held
    for machine in (idle, flying):
        machine.set_limit(0, rate=20)
        machine.adopt(1, SECOND, 0)
        machine.quota(1, SECOND, 0)
        assert machine.snapshot().logged == (), ("P15", machine.snapshot().logged)
        machine.check_valid()


def test_a_quota_over_as_it_is_given_changes_nothing_and_a_quota_of_none_holds_to_its_end() -> None:
    """P32 by hand: a quota whose reset is ``now`` is over as it is given:
    it changes nothing, not even with ``MAX_QUOTAS`` quotas in force (kept,
    it was merged into the earliest of them, whose units left fell to its
    0); and after a quota of no unit, ``min_wait`` is its end exactly."""
    machine = Machine(Fifo(), rate=1000, burst=10)
    for i in range(MAX_QUOTAS):  # each ending later and leaving more
        machine.quota(i + 1, (i + 1) * SECOND, 0)
    machine.quota(0, 0, 0)  # over at once
    granted = [d.id for d in machine.push("a", 0, 0) if d.state is State.GRANTED]
    assert granted == ["a"], ("P32: the first quota leaves 1 unit until 1 s", granted)
    fresh = Machine(Fifo(), rate=1000, burst=10)
    fresh.quota(0, SECOND, 0)
    assert fresh.min_wait(0) == SECOND, ("P32", fresh.min_wait(0))


def test_the_quotas_in_force_stay_bounded() -> None:
    """P52, P15: an upstream whose word comes on every response, its reset
    sliding on and more left each time (a window refilling faster than it is
    used), keeps at most MAX_QUOTAS quotas in force per limit, not one per
    response of the reset's span; the two that end first became one, the
    lesser count until the later end, so no word is raised: the machine
    grants no sooner than each word allows."""
    machine = Machine(Fifo(), rate=1000, burst=10)
    sizes = []
    for i in range(1, 301):
        now = i * MILLISECOND
        machine.push(i, 0, now)
        machine.tick(now)
        machine.quota(100 + 2 * i, now + 60 * SECOND, now)
        sizes.append(len(machine.snapshot().pacing[0][7]))  # type: ignore[index, arg-type]
    assert max(sizes) == MAX_QUOTAS, ("P15", max(sizes))
    machine.check_valid()
    # each word said at most 100 + 2i more until its end: the first's 102
    # (after the one permit granted before it) hold for 60 s, merged or not
    granted = machine.statistics().levels[0].granted
    assert granted == 1 + 102, ("P52", granted)


def test_a_quota_counts_a_settle_above_the_cost_by_hand() -> None:
    """P52 at chosen times: 5 units left for 10 s under 1000/s, burst 10. A
    permit of one unit settled at 4 leaves the quota 1, not 4: a take of 2
    waits for the reset, though the bucket holds it; one of 1 is granted.
    A permit settled below its cost counts at what it settled for."""
    machine = Machine(Fifo(), rate=1000, burst=10)
    machine.quota(5, 10 * SECOND, 0)
    assert [d.id for d in machine.push("a", 0, 0)] == ["a"]
    assert machine.settle("a", 4, 0) == []
    assert machine.push("b", 0, 0, cost=2) == [], "P52: the settle's extra units not counted"
    assert machine.next_due() == 10 * SECOND, ("P52", machine.next_due())
    assert machine.cancel("b")
    assert [d.id for d in machine.push("c", 0, 0)] == ["c"], "P52"
    assert machine.settle("c", 0, 0) == []  # given back: 1 left again
    assert [d.id for d in machine.push("d", 0, 0)] == ["d"], "P52"
    assert machine.push("e", 0, 0) == [], "P52"


@settings(max_examples=20)
@given(st.randoms(use_true_random=False))
def test_merged_quotas_decide_as_the_model(random: Random) -> None:
    """P52, P13 past MAX_QUOTAS: words that slide on with every response,
    some with more left and some with less, interleaved with grants,
    refunds (which replay the words since, merges and all) and settles:
    every decision, ``next_due`` and the quotas' effect are the model's,
    which merges by SPEC's rule written from it. (Without the settles, a
    core whose quotas did not count a settle's extra units passed.)"""
    machine = Machine(Fifo(), rate=1000, burst=10)
    model = Reference(PolicySpec("fifo", 1), [(Fraction(1000), 10)], None, SECOND)
    now, n, words, most = 0, 0, 0, 0
    held: list[tuple[Hashable, int]] = []
    for _ in range(160):
        now += random.randint(0, 3) * MILLISECOND
        step = random.random()
        if step < 0.4:
            words += 1  # more left each time, mostly, and the reset sliding on
            remaining = words // 2 + random.randint(0, 3)
            reset = now + random.randint(280, 320) * MILLISECOND
            out = machine.quota(remaining, reset, now)
            expected = model.limit_quota(remaining, reset, now, 0)
        elif step < 0.75 or not held:
            n += 1
            out, expected = machine.push(n, 0, now), model.push(n, 0, now, None, (1,))
        else:
            id, at = held.pop(random.randrange(len(held)))
            if at < now - SECOND:
                continue  # (no longer refundable)
            if step < 0.875:
                out, expected = machine.refund(id, now), model.refund(id, now)
            else:  # settled for less or more: the quotas count what it settled for
                actual = random.randint(0, 4)
                out = machine.settle(id, actual, now)
                expected = model.settle_cost(id, {0: actual}, now)
        assert rows(out) == expected, ("P13", now, rows(out), expected)
        held += [(d.id, d.at) for d in out if d.state is State.GRANTED]
        assert machine.next_due() == model.next_due(), ("P13", now)
        most = max(most, len(machine.snapshot().pacing[0][7]))  # type: ignore[index, arg-type]
    assert most <= MAX_QUOTAS, ("P15", most)
    machine.check_valid()


def test_a_deadline_expires_at_its_nanosecond() -> None:
    """P11 at the nanosecond: of two waiters whose deadlines are a
    nanosecond apart, a tick at the first expires the first alone, and a
    tick a nanosecond before it expires neither; each expires at the tick
    at its deadline, having waited until then."""
    machine = Machine(Fifo(), rate=1, burst=1)
    machine.push("banked", 0, 0)  # granted at once: the bucket is empty
    machine.push("v", 0, 0, deadline=SECOND // 2)
    machine.push("w", 0, 0, deadline=SECOND // 2 + 1)
    assert machine.next_tick() == SECOND // 2, "P11"
    assert machine.tick(SECOND // 2 - 1) == [], "P11: expired a nanosecond early"
    decisions = rows(machine.tick(SECOND // 2))
    assert decisions == [("v", "EXPIRED", 0, SECOND // 2, SECOND // 2)], ("P11", decisions)
    assert [w.id for w in machine.waiting(0)] == ["w"], "P11: expired a nanosecond early"
    decisions = rows(machine.tick(SECOND // 2 + 1))
    assert decisions == [("w", "EXPIRED", 0, SECOND // 2 + 1, SECOND // 2 + 1)], ("P11", decisions)


def test_late_and_full_pushes_by_hand() -> None:
    """P11 and P3 at chosen times, with every cost 1 and with costs that
    differ: a push with ``deadline <= now`` that cannot be granted expires
    at once, having waited 0, and one to a full level is rejected; each is
    counted once at its level; one that can be granted is, late or not."""
    for costs in (1, 2):
        machine = Machine(Fifo(2), 1, costs, max_waiting=(None, 1))
        machine.push("banked", 0, 0, cost=costs)  # granted at once: the bucket is empty
        machine.push("x", 1, 0, cost=costs)  # waits: level 1 is full now
        decisions = []
        for id, level, deadline in [("l1", 0, 0), ("l2", 0, -5), ("f1", 1, None), ("f2", 1, 9)]:
            decisions += rows(machine.push(id, level, 0, deadline=deadline, cost=costs))
        assert decisions == [
            ("l1", "EXPIRED", 0, 0, 0),
            ("l2", "EXPIRED", 0, 0, 0),
            ("f1", "REJECTED", 1, 0, 0),
            ("f2", "REJECTED", 1, 0, 0),
        ], ("P11", costs, decisions)
        levels = machine.statistics().levels
        counts = [(s.pushed, s.expired, s.rejected, s.waiting) for s in levels]
        assert counts == [(3, 2, 0, 0), (3, 0, 2, 1)], ("P3", costs, counts)
        decisions = rows(machine.push("now", 0, 3 * SECOND, deadline=3 * SECOND, cost=costs))
        assert decisions == [
            ("x", "GRANTED", 1, 3 * SECOND, 3 * SECOND),
            ("now", "EXPIRED", 0, 3 * SECOND, 0),  # x took the burst
        ], ("P11", costs, decisions)
        decisions = rows(machine.push("later", 0, 9 * SECOND, deadline=SECOND, cost=costs))
        assert decisions == [("later", "GRANTED", 0, 9 * SECOND, 0)], ("P11", costs, decisions)
        assert machine.statistics().levels[0].expired == 3, "P3"


def test_busiest_flows_beyond_the_counters() -> None:
    """P50 with more flows granted than the 64 counters: a flow granted more
    than a 64th of all units is listed, every listed flow's granted units are
    at least its true count and at most ``granted_error`` above it (exact
    when the error is 0), and no more than 64 flows are listed once none
    waits. Flows come back after losing their counters."""
    machine = Machine(Fifo(), 1000, 1000)
    granted: dict[Hashable, int] = {}
    now = 0
    for k in range(400):
        flow, units = (0, 40) if k % 5 == 0 else (1 + (k * 37) % 90, 1 + k % 7)
        now += SECOND  # the bucket is full again: granted at once
        decisions = machine.push(("w", k), 0, now, cost=units, flow=flow)
        assert [d.state for d in decisions] == [State.GRANTED], ("P50", k)
        granted[flow] = granted.get(flow, 0) + units
        listed = machine.busiest_flows(0, 100)
        assert len(listed) <= 64, ("P50: 64 counters", len(listed))
        for row in listed:
            true = granted[row.flow]
            assert true <= row.granted_units <= true + row.granted_error, ("P50", k, row, true)
            if row.granted_error == 0:
                assert row.granted_units == true, ("P50", k, row)
        total = sum(granted.values())
        heavy = {flow for flow, n in granted.items() if 64 * n > total}
        assert heavy <= {row.flow for row in listed}, ("P50", k, heavy)
    assert len(granted) > 64, ("more flows than counters", len(granted))
    # A flow listed for its waiters after it lost its counter: its granted
    # units are not known, only bounded by the smallest count, which it is
    # listed with as both its count and its error.
    lost = next(f for f in granted if f not in {row.flow for row in machine.busiest_flows(0, 100)})
    now += SECOND
    machine.push("empties", 0, now, cost=1000)
    machine.push("waits", 0, now, cost=3, flow=lost)
    by_flow = {row.flow: row for row in machine.busiest_flows(0, 100)}
    row = by_flow[lost]
    true = granted[lost]
    assert (row.waiting, row.waiting_units) == (1, 3), ("P50", row)
    assert true <= row.granted_units <= true + row.granted_error, ("P50", row, true)
    counted = [r.granted_units for flow, r in by_flow.items() if flow != lost]
    assert len(counted) == 64, ("P50: every counter listed", len(counted))
    smallest = min(counted)
    assert (row.granted_units, row.granted_error) == (smallest, smallest), ("P50", row, smallest)


def test_busiest_flows_count_the_flow_limit() -> None:
    """P50 on a machine whose flows share its second limit (``flow_limit``):
    the units waiting and granted are that limit's, not the first's (every
    other P50 test has one limit, where the two are one)."""
    limits = {"requests": Limit(1000, 10), "tokens": Limit(1000, 100)}
    machine = Machine(Fifo(), limits=limits, flow_limit="tokens")
    machine.push("a0", 0, 0, cost={"requests": 1, "tokens": 30}, flow="a")  # granted at once
    machine.push("b0", 0, 0, cost={"requests": 2, "tokens": 60}, flow="b")  # granted at once
    machine.push("a1", 0, 0, cost={"requests": 3, "tokens": 50}, flow="a")  # waits
    rows = {row.flow: row for row in machine.busiest_flows(0)}
    assert rows["a"] == FlowStatistics("a", 1, 50, 30, 0), ("P50", rows)
    assert rows["b"] == FlowStatistics("b", 0, 0, 60, 0), ("P50", rows)
    assert list(rows) == ["b", "a"], ("P50: most granted first", rows)


def test_histogram_by_hand() -> None:
    """P17 at chosen waits: a bucket reports its middle, an int, unless the
    largest wait is below it (then that wait, exact); a q outside 0 to 1 is
    refused in words."""
    histogram = WaitHistogram()
    assert histogram.quantile(0.5) is None, "P17"
    histogram.record(2**20)  # its bucket spans 2**20 to 2**20 + 2**13 - 1
    assert histogram.items() == [(2**20, 1)], ("P17: capped at the largest", histogram.items())
    assert histogram.quantile(0.5) == 2**20, "P17"
    histogram.record(2**20 + 8000)  # the same bucket, its middle now below the largest
    middle = histogram.quantile(1.0)
    assert type(middle) is int, ("P17", middle)
    assert middle == 2**20 + 4095, ("P17", middle)
    for q in (1.5, -0.5):
        with pytest.raises(ValueError, match="must be between 0 and 1") as info:
            histogram.quantile(q)
        assert str(info.value) == f"q={q!r}: must be between 0 and 1", "P17"
    # From 2**127 ns on a bucket is computed, not looked up: the same buckets.
    histogram = WaitHistogram()
    waits = (2**126 + 1, 2**127 + 3, 2**127 + 2**119, 2**130 + 5, 2**130 + 2**122, 2**130 + 2**123)
    for wait in waits:
        histogram.record(wait)
    assert [count for _, count in histogram.items()] == [1, 2, 2, 1], ("P17", histogram.items())


def test_waits_at_most_counts_each_level_apart() -> None:
    """P17 through the machine: ``waits_at_most(level, bounds)`` counts that
    level's waits, each level its own (every level counted as level 0's
    passed the histogram's own tests)."""
    machine = Machine(StrictPriority(2), 1, 1)
    machine.push("now", 0, 0)  # granted at once: a wait of 0
    machine.push("later", 1, 0)  # waits a second
    drive(machine, 2 * SECOND)
    assert machine.waits_at_most(0, [0, SECOND]) == (1, 1), "P17"
    assert machine.waits_at_most(1, [0, SECOND]) == (0, 1), "P17"


def test_expiries_after_many_cancels() -> None:
    """P11 and P15: waiters with deadlines, most of them cancelled, then the
    rest expire together: each expires at its deadline, in deadline order,
    and each cancel takes its waiter's deadline entry with it at once (the
    chunks of deadlines split and merge as they grow and thin out)."""
    machine = Machine(Fifo(), 1, 1)
    machine.push("banked", 0, 0)  # granted at once: the rest wait
    gone = 3 * CHUNK
    for k in range(gone):
        machine.push(("gone", k), 0, 0, deadline=20 * SECOND - k)
    for k in range(10):
        machine.push(("late", k), 0, 0, deadline=5 * SECOND - k)
    for k in range(gone):
        assert machine.cancel(("gone", k))
        machine.check_valid()
        entries = len(machine.snapshot().deadlines)
        assert entries == gone - 1 - k + 10, ("P15: a cancel leaves its deadline behind", entries)
    decisions = rows(machine.tick(5 * SECOND))  # each at the tick at or after its deadline
    expected = [(("late", k), "EXPIRED", 0, 5 * SECOND, 5 * SECOND) for k in range(9, -1, -1)]
    assert decisions == expected, ("P11: in deadline order", decisions)
    machine.check_valid()
    assert machine.next_tick() is None, "P15: nobody waits, no deadline is left"


def test_spends_forget_what_no_refund_can_reach() -> None:
    """P23 on the public snapshot: the charges a refund would replay are
    logged in order, with their costs; once the oldest grant still
    refundable is spent, nothing before the next one is remembered."""
    machine = Machine(Fifo(), 1000, 10)
    for id, now, cost in [("a", 0, 2), ("b", 1, 1), ("c", 2, 3)]:
        machine.push(id, 0, now, cost=cost)  # granted at once: the bucket has units
    logged = [(g.waiter.id, g.at, g.cost) for g in machine.snapshot().logged]  # type: ignore[attr-defined]
    assert logged == [("a", 0, (2,)), ("b", 1, (1,)), ("c", 2, (3,))], ("P23", logged)
    machine.spend("b", 3)  # a is still refundable: the log keeps b for a's replay
    assert len(machine.snapshot().logged) == 3, "P23"
    machine.spend("a", 3)
    left = [g.waiter.id for g in machine.snapshot().logged]  # type: ignore[attr-defined]
    assert left == ["c"], ("P23: nothing before c, the oldest still refundable", left)


def test_shares_serve_the_most_urgent_head_already_covered() -> None:
    """P13 (the deal SPEC states) by hand where heads at two levels ask for
    none of the shared limit's units, so the credit of each covers its cost
    at once: the most urgent level is served first, as the model deals."""
    limits = {"requests": Limit(1000, 2), "tokens": Limit(1000, 2)}
    machine = Machine(Shares((1, 1), limit="tokens"), limits=limits)
    model = Reference(
        PolicySpec("shares", 2, (1, 1), shared=1),
        [(Fraction(1000), 2), (Fraction(1000), 2)],
        None,
        SECOND,
    )
    for id, level, cost in [("drain", 0, (2, 2)), ("x", 0, (1, 0)), ("y", 1, (1, 0))]:
        decisions = machine.push(id, level, 0, cost=dict(zip(limits, cost, strict=True)))
        assert rows(decisions) == model.push(id, level, 0, None, cost), ("P13", id)
    at = machine.next_tick()
    assert at == model.next_tick() == SECOND // 1000, ("P13", at)
    granted = rows(machine.tick(at))
    assert granted == model.settle(at) == [("x", "GRANTED", 0, at, at)], ("P13", granted)


@pytest.mark.parametrize("charge", [Charge.AT_GRANT, Charge.AT_SPEND])
def test_a_spend_spends_the_permit_its_own_tick_grants(charge: Charge) -> None:
    """P23 where the spend's tick is late: the permit that tick grants is
    held after it, so the spend spends it, as SPEC's "tick to now; if id
    holds a permit" says and the model does: refused as a refund then, and
    under AT_SPEND charged at the spend, nothing left in flight."""
    machine = Machine(Fifo(), rate=1, burst=1, charge=charge)
    machine.push("a", 0, 0)  # granted at once
    machine.spend("a", 0)
    machine.push("b", 0, 0)  # waits a second
    decisions = machine.spend("b", 2 * SECOND)  # no tick came at 1 s
    assert rows(decisions) == [("b", "GRANTED", 0, 2 * SECOND, 2 * SECOND)], decisions
    assert machine.in_flight == 0, ("P23: the spend left b's permit in flight", machine.in_flight)
    with pytest.raises(NotRefundable):
        machine.refund("b", 2 * SECOND)


def test_the_model_refunds_its_own_charge_beside_an_equal_one() -> None:
    """P13 and P29 where two charges are equal (the same time and cost): a
    refund takes back its own, so that a settle of the other still reaches
    the model's log. (The model once removed the first equal charge, then
    settled one no longer in its log, and disagreed with a right core.)"""
    machine = Machine(Fifo(), 1000, 3)
    model = Reference(PolicySpec("fifo", 1), [(Fraction(1000), 3)], None, SECOND)
    for id in ("a", "b"):
        assert rows(machine.push(id, 0, 0)) == model.push(id, 0, 0, None, (1,)), "P13"
    assert rows(machine.refund("b", 0)) == model.refund("b", 0), "P13"
    assert rows(machine.settle("a", 3, 0)) == model.settle_cost("a", {0: 3}, 0), "P13"
    due = (machine.next_due(), model.next_due())
    assert due == (1_000_000, 1_000_000), ("P13: a settled to the whole burst", due)
