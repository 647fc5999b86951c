"""P77 to P79, P86, P97 and P98: what the machine's own calls promise beside its decisions.

How a float rate is read (P77), the order ``waiting(level)`` gives (P78),
what ``Machine.queue_full`` names for a rejected push (P79), that
machines with equal snapshots decide alike (P86), the bound on a
Decimal rate's exponent (P97), and that a copy of a machine is one of its
own (P98), each as SPEC.md states it, on random machines of every policy.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import event, example, given, note
from hypothesis import strategies as st

from permits.core import (
    SECOND,
    Charge,
    Fifo,
    Limit,
    Machine,
    PermitError,
    PermitValueError,
    State,
    StrictPriority,
)

from configs import EXPONENT, FLOWS, KINDS, NAMES, RATES, Config, configs, decimals_about_the_bound
from harness import drive, rows, spent_at_once
from reference import PolicySpec

# -- P77: a float rate is read as the decimal it prints as ----------------------

#: Positive finite floats, with the decimals a user types among them.
FLOAT_RATES = st.floats(min_value=0, exclude_min=True, allow_infinity=False) | st.builds(
    lambda n, e: n / 10**e, st.integers(1, 10**6), st.integers(0, 12)
)


@given(rate=FLOAT_RATES, burst=st.integers(1, 5), per=st.sampled_from([1, 60, 3600]))
def test_a_float_rate_is_the_decimal_it_prints_as(rate: float, burst: int, per: int) -> None:
    """P77: a float rate is read as the decimal it prints as (``0.1`` is
    1/10), not as the binary fraction it holds: by the machine (``rate=``,
    ``limits=``, ``set_limit``) and by ``Limit`` (``Limit(rate, burst)``,
    ``per_second``, ``per_minute``, ``per_hour``, each of those over its
    period); and the machine paces by it: from a bucket full at its first
    operation, the permit after the burst is due one exact interval
    (``ceil(10**9 / rate)`` ns) later."""
    exact = Fraction(repr(rate))
    note(f"exact {exact}")
    per_period = {1: Limit.per_second, 60: Limit.per_minute, 3600: Limit.per_hour}[per]
    assert per_period(rate, burst=burst).rate == exact / per
    assert Limit(rate, burst).rate == exact
    machine = Machine(Fifo(), rate, burst)
    assert machine.rate == exact
    assert Machine(Fifo(), limits={"units": Limit(rate, burst)}).limits["units"].rate == exact
    other = Machine(Fifo(), 1, burst)
    other.set_limit(0, rate=rate)
    assert other.limits["units"].rate == exact
    assert other.rate == exact
    # the pacing follows it: the burst at 0, then the next at one interval
    for i in range(burst):
        (granted,) = machine.take(i, 0, 0)
        assert granted.state is State.GRANTED
    assert machine.next_due() == math.ceil(SECOND / exact)


# -- P78: the order waiting(level) gives ----------------------------------------


def any_config(draw: st.DrawFn) -> Any:
    """A machine's config: any policy, either charge, costs and flows."""
    kind = draw(st.sampled_from(KINDS))
    return draw(configs(kind, charges=(Charge.AT_GRANT, Charge.AT_SPEND), costs=True, flows=True))


@st.composite
def waiting_scripts(draw: st.DrawFn) -> tuple[Any, list[tuple[Any, ...]]]:
    config = any_config(draw)
    if not config.flows and draw(st.booleans()):
        config = dataclasses.replace(config, flows=True)  # (flows order a level most)
    ops: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 16))):
        op = draw(st.sampled_from(["push"] * 5 + ["tick", "cancel", "pause"]))
        if op == "push":
            units = [draw(st.integers(0, burst)) for _, burst in config.limits]
            if not any(units):
                units[0] = 1
            if not config.costs:
                units = [1] * len(units)
            level = draw(st.integers(0, config.spec.levels - 1))
            flow = draw(st.sampled_from(FLOWS)) if config.flows else None
            ops.append(("push", level, tuple(units), flow))
        elif op == "tick":
            ops.append(("tick", draw(st.integers(0, 3 * SECOND))))
        elif op == "cancel":
            ops.append(("cancel", draw(st.integers(0, 15))))
        else:
            ops.append(("pause", draw(st.integers(0, 2 * SECOND))))
    return config, ops


@given(script=waiting_scripts())
def test_waiting_is_the_order_the_waiters_would_be_granted(
    script: tuple[Any, list[tuple[Any, ...]]],
) -> None:
    """P78: ``waiting(level)`` gives the waiters of the level in the order
    they would be granted were nobody to join or leave (flows taking turns
    by cost and weight, P34), and ``waiting()`` those of every level in push
    order: under every policy, with costs, one limit or two, flows and
    either charge, after pushes, ticks, cancels and pauses, the grants that
    drain the machine (ticked on time, each permit spent as granted) give
    each level's waiters in the order ``waiting(level)`` gave."""
    config, ops = script
    machine = config.machine()
    now = config.origin
    spend = config.charge is Charge.AT_SPEND

    def spent(decisions: list[Any]) -> list[Any]:
        return spent_at_once(machine, decisions) if spend else decisions

    for i, op in enumerate(ops):
        if op[0] == "push":
            _, level, units, flow = op
            spent(machine.push(i, level, now, cost=config.cost(units), flow=flow))
        elif op[0] == "tick":
            now += op[1]
            spent(machine.tick(now))
        elif op[0] == "cancel":
            machine.cancel(op[1])
        else:
            spent(machine.pause_until(now + op[1], now))
    levels = config.spec.levels
    orders = {lv: [w.id for w in machine.waiting(lv)] for lv in range(levels)}
    everyone = machine.waiting()
    note(f"waiting {orders}")
    assert [w.seq for w in everyone] == sorted(w.seq for w in everyone)
    assert sorted(w.id for w in everyone) == sorted(i for o in orders.values() for i in o)
    assert all(w.level == lv for lv in range(levels) for w in machine.waiting(lv))
    # nobody joins or leaves: drain it on time
    grants = [
        d for d in drive(machine, now + 10**5 * SECOND, then=spent) if d.state is State.GRANTED
    ]
    assert not machine.waiting()
    for lv in range(levels):
        assert [d.id for d in grants if d.level == lv] == orders[lv], lv


# -- P79: what QueueFull names ---------------------------------------------------


@given(
    levels=st.integers(1, 3),
    max_waiting=st.lists(st.none() | st.integers(0, 3), min_size=3, max_size=3),
    per_flow=st.none() | st.integers(0, 3),
    pushes=st.lists(
        st.tuples(st.integers(0, 2), st.sampled_from(FLOWS), st.booleans()), max_size=14
    ),
)
def test_queue_full_names_the_limit_the_rejected_push_found_reached(
    levels: int,
    max_waiting: list[int | None],
    per_flow: int | None,
    pushes: list[tuple[int, Any, bool]],
) -> None:
    """P79: for a push of ``id`` at ``level`` in ``flow`` just rejected,
    ``Machine.queue_full(id, level, flow)`` is the ``QueueFull`` naming the
    level's ``max_waiting`` (``.max_waiting`` it, ``.per_flow`` false,
    ``.flow`` ``None``) if the level holds that many waiters, and otherwise
    its flow's ``max_waiting_per_flow`` (``.max_waiting`` it, ``.per_flow``
    true, ``.flow`` the flow), which the flow then holds; ``.id`` and
    ``.level`` the push's. Asked of a level that has neither, it is refused
    with a ``PermitValueError`` naming ``level``. It changes nothing."""
    caps = tuple(max_waiting[:levels])
    machine = Machine(StrictPriority(levels), 1, 1, max_waiting=caps, max_waiting_per_flow=per_flow)
    machine.take("first", 0, 0)  # the bucket is empty: pushes wait
    for i, (level, flow, named) in enumerate(pushes):
        level %= levels
        flow = flow if named else None
        depth = len(machine.waiting(level))
        in_flow = sum(1 for w in machine.waiting(level) if w.flow == flow)
        decisions = machine.push(i, level, 0, flow=flow)
        if not decisions:  # it waits
            continue
        (decision,) = decisions
        assert decision.state is State.REJECTED
        before = machine.snapshot()
        error = machine.queue_full(i, level, flow)
        assert machine.snapshot() == before
        assert (error.id, error.level) == (i, level)
        cap = caps[level]
        if cap is not None and depth >= cap:
            assert (error.max_waiting, error.per_flow, error.flow) == (cap, False, None)
        else:
            assert per_flow is not None
            assert in_flow >= per_flow
            assert (error.max_waiting, error.per_flow, error.flow) == (per_flow, True, flow)
    for level in range(levels):
        if caps[level] is None and per_flow is None:
            with pytest.raises(PermitValueError) as refused:
                machine.queue_full("x", level)
            assert refused.value.argument == "level"


# -- P86: equal snapshots decide alike -------------------------------------------

#: How far an operation moves the clock on: mostly not at all, so that two
#: routes meet at one instant.
STEPS = st.sampled_from([0, 0, 0, 1, SECOND // 3, SECOND, 5 * SECOND])
#: How long the upstream's word or quota holds: mostly long enough to
#: hold back the operations after it.
RESETS = [0, SECOND, 10 * SECOND, 100 * SECOND]
#: The ids an operation names: those the scripts push, and one never pushed.
KNOWN = st.integers(0, 11) | st.just("never")

Op = tuple[Any, ...]


#: Every kind of operation, pushes the most.
EVERY = (
    ["push"] * 4
    + ["take", "tick", "tick", "cancel", "spend", "refund", "settle"]
    + ["pause", "adopt", "quota", "set_limit", "min_wait", "bad_push"]
)
#: What follows two routes: more pushes and takes, which the state decides.
THEN = ["push", "take"] * 3 + EVERY
#: Operations that often change nothing a snapshot shows but what one
#: part holds, or nothing at all: a second route's detours.
DETOURS = ["tick", "min_wait", "bad_push", "cancel", "refund", "spend", "pause"] + [
    "adopt",
    "quota",
] * 2


def costs(draw: st.DrawFn, config: Any) -> tuple[int, ...]:
    """Units per limit: mostly within the bursts; now and then none, or
    above a burst (refused)."""
    if not config.costs:
        return (1,) * len(config.limits)
    return tuple(
        draw(st.integers(1, burst) | st.sampled_from([0, burst + 1])) for _, burst in config.limits
    )


@st.composite
def core_ops(
    draw: st.DrawFn,
    config: Any,
    ids: Any,
    palette: list[tuple[int, ...]],
    kinds: list[str] = EVERY,
) -> Op:
    """One operation of a kind in ``kinds``, good or bad (a refused one,
    too, is a route: it changes nothing), pushing ids drawn from ``ids``,
    its costs from ``palette`` (a few, so that costs recur, as the
    machine's cache of costs read lately sees them)."""
    kind = draw(st.sampled_from(kinds))
    step = draw(STEPS)
    levels = config.spec.levels
    index = draw(st.integers(0, len(config.limits) - 1))
    units = draw(st.sampled_from(palette))
    flow = draw(st.sampled_from(FLOWS)) if config.flows else None
    if kind in ("push", "take"):
        id = draw(ids)
        deadline = draw(st.none() | STEPS)
        max_wait = draw(st.none() | STEPS)
        later = draw(st.booleans())
        return (
            kind,
            step,
            id,
            draw(st.integers(0, levels - 1)),
            units,
            flow,
            deadline,
            max_wait,
            later,
        )
    if kind == "bad_push":  # a duplicate id, or a bad max_wait_ns: refused
        return (kind, step, draw(KNOWN), draw(st.integers(0, levels - 1)), units, flow)
    if kind in ("cancel", "refund"):
        return (kind, step, draw(KNOWN))
    if kind == "spend":
        return (kind, step, draw(KNOWN), draw(st.booleans()))
    if kind == "settle":
        return (kind, step, draw(KNOWN), index, draw(st.integers(0, 3)))
    if kind in ("pause", "tick"):
        return (kind, step, draw(STEPS))
    if kind in ("adopt", "quota"):
        return (kind, step, index, draw(st.integers(0, 4)), draw(st.sampled_from(RESETS)))
    if kind == "set_limit":
        return (kind, step, index, draw(st.sampled_from(RATES)), draw(st.integers(1, 4)))
    return (kind, step, draw(st.integers(0, levels - 1)), units, flow)  # min_wait


def timed(ops: list[Op], start: int = 0) -> list[Op]:
    """``ops`` with each one's step from the one before made its time
    from the origin, the first's from ``start``."""
    out = []
    for op in ops:
        start += op[1]
        out.append((op[0], start, *op[2:]))
    return out


def apply(config: Any, machine: Machine, op: Op) -> Any:
    """``op`` on ``machine`` at its time (from the origin; the machine's,
    if later): what it returned (decisions as rows), or the error it
    raised, by kind and argument."""
    kind, at = op[0], config.origin + op[1]
    now = at if machine.now is None else max(at, machine.now)
    name = (
        None
        if config.second is None
        else NAMES[op[2]]
        if kind in ("adopt", "quota", "set_limit")
        else None
    )
    try:
        if kind in ("push", "take"):
            _, _, id, level, units, flow, deadline, max_wait, later = op
            cost = config.cost(units)
            if kind == "take":
                return rows(machine.take(id, level, now, cost=cost, flow=flow, settle_later=later))
            return rows(
                machine.push(
                    id,
                    level,
                    now,
                    deadline=None if deadline is None else now + deadline,
                    cost=cost,
                    flow=flow,
                    max_wait_ns=max_wait,
                )
            )
        if kind == "bad_push":
            _, _, id, level, units, flow = op
            return rows(
                machine.push(id, level, now, cost=config.cost(units), flow=flow, max_wait_ns=-1)
            )
        if kind == "tick":
            return rows(machine.tick(now + op[2]))
        if kind == "cancel":
            return machine.cancel(op[2])
        if kind == "spend":
            return rows(machine.spend(op[2], now, settle_later=op[3]))
        if kind == "refund":
            return rows(machine.refund(op[2], now))
        if kind == "settle":
            _, _, id, index, n = op
            actual = n if config.second is None else config.settle({index: n})
            return rows(machine.settle(id, actual, now))
        if kind == "pause":
            return rows(machine.pause_until(now + op[2], now))
        if kind in ("adopt", "quota"):
            _, _, _, remaining, reset = op
            call = machine.adopt if kind == "adopt" else machine.quota
            return rows(call(remaining, now + reset, now, limit=name))
        if kind == "set_limit":
            _, _, _, rate, burst = op
            return rows(machine.set_limit(now, rate=rate, burst=burst, limit=name))
        _, _, level, units, flow = op
        return machine.min_wait(level, cost=config.cost(units), flow=flow)
    except PermitError as error:
        return ("refused", type(error).__name__, getattr(error, "argument", None))


@st.composite
def two_routes(draw: st.DrawFn) -> tuple[Any, list[Op], list[Op], list[Op]]:
    """A configuration, a script, another made from it, and the
    operations that follow both.

    A third of the time the second script wanders: some operations left
    out, others put in (ticks and refusals that change nothing, the
    upstream's word, spends, ...). Otherwise it is the first with one
    operation more at its end, so that the two meet with what tells them
    apart left behind: a quota in force, of fewer units than the burst
    (which only a snapshot shows), or a refused push of the largest cost
    (every burst's units), which has read its cost (which no snapshot
    shows), most often followed by a lower burst. The largest cost is
    asked for again in what follows, not in the first script: two limits
    take a cost as a dict, which the machine reads once and keeps, and
    must check again against a lower burst."""
    config = any_config(draw)
    if config.second is None and draw(st.booleans()):  # a cost as a dict
        second = (draw(st.sampled_from(RATES)), draw(st.integers(1, 6)))
        config = dataclasses.replace(config, costs=True, second=second)
    pushed = st.integers(0, 11)
    palette = [costs(draw, config) for _ in range(draw(st.integers(1, 3)))]
    bursts = [burst for _, burst in config.limits]
    largest = tuple(bursts) if config.costs else (1,) * len(bursts)
    # the limit the ending and the opening name: one whose burst can be lowered
    index = draw(st.sampled_from([i for i, n in enumerate(bursts) if n > 1] or [0]))
    below = st.integers(1, max(1, bursts[index] - 1))  # units below its burst
    first = timed(draw(st.lists(core_ops(config, pushed, palette), min_size=1, max_size=12)))
    end = first[-1][1]
    first.append(("tick", end, 0))  # both at its last instant, were that operation refused
    opening: list[Op] = []
    if draw(st.integers(0, 2)) == 0:  # it wanders
        detour = st.lists(core_ops(config, pushed, [*palette, largest], DETOURS), max_size=3)
        other: list[Op] = []
        for op in [*first, ("end", end)]:
            other += [(d[0], op[1], *d[2:]) for d in draw(detour)]  # at that op's instant
            if op[0] != "end" and draw(st.integers(0, 3)):
                other.append(op)
    elif draw(st.booleans()):  # a lasting quota of a unit or more (none shows at once)
        other = [*first, ("quota", end, index, draw(below), draw(st.sampled_from(RESETS[1:])))]
    else:  # a refused push more (it reads its cost), and most often a lower burst next
        refused = draw(core_ops(config, pushed, [largest], ["bad_push"]))
        other = [*first, (refused[0], end, *refused[2:])]
        if draw(st.integers(0, 3)):
            opening = [("set_limit", 0, index, draw(st.sampled_from(RATES)), draw(below))]
    ops = core_ops(config, st.integers(100, 111) | pushed, [*palette, largest, largest], THEN)
    then = timed(opening + draw(st.lists(ops, min_size=1, max_size=20)), end)
    return config, first, other, then


#: One level under Fifo, a unit a second, a burst of 3.
ONE_LIMIT = Config(PolicySpec("fifo", 1, (), 0, 0), 1, 3, None, None)
#: The same, with a second limit beside it: costs are dicts.
TWO_LIMITS = dataclasses.replace(ONE_LIMIT, second=(1, 3), costs=True)
#: Strict priority over two levels, a unit a second, a burst of 1.
STRICT_TWO = Config(PolicySpec("strict", 2, (), 0, 0), 1, 1, None, None)


@given(routes=two_routes())
# a refused push reads the largest cost; a lower burst must refuse it on both
@example(
    routes=(
        TWO_LIMITS,
        [("tick", 0, 0)],
        [("tick", 0, 0), ("bad_push", 0, "never", 0, (3, 3), None)],
        [("set_limit", 0, 0, 1, 2), ("push", 0, 1, 0, (3, 3), None, None, None, False)],
    )
)
# a quota of one unit, which no snapshot may leave out
@example(
    routes=(
        ONE_LIMIT,
        [("tick", 0, 0)],
        [("tick", 0, 0), ("quota", 0, 0, 1, 10 * SECOND)],
        [("take", 0, 1, 0, (1,), None, None, None, False)] * 2,
    )
)
# a push that once named a flow: min_wait counts only a newcomer's own
# level from then on, which no snapshot may leave out
@example(
    routes=(
        STRICT_TWO,
        [("push", 0, "x", 0, (1,), "t", None, None, False), ("spend", 0, "x", False)],
        [("push", 0, "x", 0, (1,), None, None, None, False), ("spend", 0, "x", False)],
        [
            ("push", 0, "y", 0, (1,), None, None, None, False),
            ("push", 0, "z", 1, (1,), None, None, None, False),
            ("push", 0, "w", 1, (1,), None, None, 5 * SECOND // 2, False),
        ],
    )
)
def test_machines_with_equal_snapshots_decide_alike(
    routes: tuple[Any, list[Op], list[Op], list[Op]],
) -> None:
    """P86: two machines made alike (the same policy and options) that
    reach equal snapshots by different routes (one given operations the
    other was not: ticks, refused calls, questions such as ``min_wait``,
    the upstream's word, spends, pushes) decide alike from then on: the
    same operations give the same decisions, refusals and answers, and
    ``next_due``, ``next_tick``, ``waiting()`` and the ``min_wait`` of
    every cost asked for at every level are the same after each. So a
    machine whose decisions depend on state its snapshot omits is
    caught."""
    config, first, other, then = routes
    a, b = config.machine(), config.machine()
    for op in first:
        apply(config, a, op)
    for op in other:
        apply(config, b, op)
    equal = a.snapshot() == b.snapshot()
    event(f"equal snapshots: {equal}")
    if not equal:
        return
    # questions that change nothing, asked after each operation: how long
    # a push of each cost the scripts ask for would wait, at each level
    asked = {op[4] for op in [*other, *then] if op[0] in ("push", "take", "bad_push")}
    levels = range(config.spec.levels)
    questions = [("min_wait", 0, lv, units, None) for lv in levels for units in sorted(asked)]
    for op in then:
        note(f"{op}")
        got = apply(config, a, op), apply(config, b, op)
        assert got[0] == got[1], ("P86", op, got)
        assert (a.next_due(), a.next_tick()) == (b.next_due(), b.next_tick()), ("P86", op)
        assert a.waiting() == b.waiting(), ("P86", op)
        answers = [apply(config, a, q) for q in questions], [apply(config, b, q) for q in questions]
        assert answers[0] == answers[1], ("P86", op, answers)


def test_supplied_machines_that_decide_a_pause_apart_have_other_snapshots() -> None:
    """P86 for supplied machines: one told of a pause from 5 to 10, and
    one told of it again at 7 (which lengthens nothing), decide a pause
    told at 6 apart (in the past of one, not of the other), so their
    snapshots must differ: a snapshot that left out when the last pause
    was told would make them equal."""
    told, again = (Machine(Fifo(), 1, 1, supplied=True) for _ in range(2))
    for machine in (told, again):
        machine.tick(0)
        machine.paused(10, 5)
    again.paused(10, 7)
    outcomes = []
    for machine in (told, again):
        try:
            copy.deepcopy(machine).paused(20, 6)
            outcomes.append("accepted")
        except PermitError as error:
            outcomes.append(type(error).__name__)
    assert outcomes == ["accepted", "TimeWentBackwards"], outcomes
    assert told.snapshot() != again.snapshot(), "P86"


# -- P97: a Decimal rate past an exponent of 10,000 is refused -------------------

decimal_rates = decimals_about_the_bound


@given(rate=decimal_rates(), per=st.sampled_from([1, 60, 3600]))
@example(rate=Decimal("9.9e10000"), per=1)
@example(rate=Decimal("1e-10000"), per=3600)
@example(rate=Decimal("1e-10001"), per=60)
@example(rate=Decimal("9.99e10001"), per=1)
@example(rate=Decimal("1e-999999999"), per=1)
@example(rate=Decimal("1e999999999"), per=60)
def test_a_decimal_rate_past_an_exponent_of_10000_is_refused(rate: Decimal, per: int) -> None:
    """P97: a Decimal rate whose exponent of ten is past 10,000 either way
    (``1e-999999999``, whose exact fraction has a billion digits: it did
    not return) is refused with a PermitValueError naming the argument and
    the value, by the machine (``rate=``, ``set_limit``, the machine's
    limits as they were), by ``Limit`` and by ``per_second``, ``per_minute``
    and ``per_hour`` (``count``); one within is taken exactly."""
    inside = abs(rate.adjusted()) <= EXPONENT
    event(f"inside: {inside}")
    per_period = {1: Limit.per_second, 60: Limit.per_minute, 3600: Limit.per_hour}[per]
    machine = Machine(Fifo(), 1, 2)
    machine.push("a", 0, 0)
    before = machine.snapshot()
    calls: list[tuple[str, Any]] = [
        ("rate", lambda: Machine(Fifo(), rate).rate),
        ("rate", lambda: Limit(rate).rate),
        ("count", lambda: per_period(rate, burst=1).rate * per),
        ("rate", lambda: (machine.set_limit(0, rate=rate), machine.rate)[1]),
    ]
    for argument, call in calls:
        if inside:
            assert call() == Fraction(rate), ("P97", argument)
            continue
        with pytest.raises(PermitValueError) as refused:
            call()
        assert (refused.value.argument, refused.value.value) == (argument, rate), "P97"
        assert str(refused.value) == (
            f"{argument}={rate!r}: its exponent of ten must be from -{EXPONENT} to {EXPONENT}"
        ), "P97"
        assert machine.snapshot() == before, "P97"
    machine.check_valid()


# -- P98: a copy of a machine is a machine of its own ----------------------------

#: The ways to copy a machine, by name.
COPIES: dict[str, Callable[[Machine], Machine]] = {
    "copy.copy": copy.copy,
    "copy.deepcopy": copy.deepcopy,
    "pickle": lambda machine: pickle.loads(pickle.dumps(machine)),
}


@st.composite
def copied_scripts(draw: st.DrawFn) -> tuple[Any, str, list[Op], list[Op]]:
    """A configuration, a way to copy, the script before the copy and the
    one after it."""
    config = any_config(draw)
    pushed = st.integers(0, 11)
    palette = [costs(draw, config) for _ in range(draw(st.integers(1, 3)))]
    first = timed(draw(st.lists(core_ops(config, pushed, palette), max_size=12)))
    end = first[-1][1] if first else 0
    ops = core_ops(config, st.integers(100, 111) | pushed, palette, THEN)
    then = timed(draw(st.lists(ops, min_size=1, max_size=12)), end)
    return config, draw(st.sampled_from(sorted(COPIES))), first, then


@given(script=copied_scripts())
@example(
    script=(
        ONE_LIMIT,
        "copy.copy",
        [("push", 0, 1, 0, (1,), None, None, None, False)],
        [("push", 0, 2, 0, (1,), None, None, None, False)],
    )
)
def test_a_copy_of_a_machine_is_a_machine_of_its_own(
    script: tuple[Any, str, list[Op], list[Op]],
) -> None:
    """P98: ``copy.copy``, ``copy.deepcopy`` and a pickle of a machine give
    a machine of its own: its snapshot is the original's, the operations
    given to it leave the original's snapshot as it was, and given the same
    operations the two decide alike (the same decisions, refusals and
    answers, and the same snapshots after each), under every policy, with
    costs, one limit or two, flows and either charge. (``copy.copy`` shared
    the queues, counters and buckets with the original: a push to the copy
    queued in the original too.)"""
    config, how, first, then = script
    machine = config.machine()
    for op in first:
        apply(config, machine, op)
    before = machine.snapshot()
    twin = COPIES[how](machine)
    assert twin.snapshot() == before, ("P98", how)
    results = [apply(config, twin, op) for op in then]
    assert machine.snapshot() == before, ("P98: the copy changed the original", how)
    twin.check_valid()
    machine.check_valid()
    again = COPIES[how](machine)
    for op, result in zip(then, results, strict=True):
        note(f"{op}")
        assert apply(config, machine, op) == result, ("P98", how, op)
    assert machine.snapshot() == twin.snapshot(), ("P98", how)
    assert again.snapshot() == before, ("P98: the original changed its copy", how)


def test_a_shallow_copy_shares_the_policy_and_the_busiest_flows_keys() -> None:
    """P98: ``copy.copy`` of a machine shares what is the caller's: the
    policy object itself, and the flow objects its busiest-flow counters
    name (a copy that made its own lost a flow that hashes by identity)."""

    class Key:  # hashes by identity
        pass

    machine = Machine(Fifo(1), rate=1, burst=2)
    assert copy.copy(machine).policy is machine.policy, "P98"
    key = Key()
    machine.push("a", 0, 0, flow=key)
    machine.spend("a", 0)
    assert copy.copy(machine).busiest_flows(0)[0].flow is key, "P98"
