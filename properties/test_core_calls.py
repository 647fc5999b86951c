"""P77 to P79: what the machine's own calls promise beside its decisions.

How a float rate is read (P77), the order ``waiting(level)`` gives (P78),
and what ``Machine.queue_full`` names for a rejected push (P79), each as
SPEC.md states it, on random machines of every policy.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from permits.core import (
    SECOND,
    Charge,
    Fifo,
    Limit,
    Machine,
    PermitValueError,
    State,
    StrictPriority,
)

from configs import FLOWS, KINDS, configs
from harness import drive, spent_at_once

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


@st.composite
def waiting_scripts(draw: st.DrawFn) -> tuple[Any, list[tuple[Any, ...]]]:
    config = draw(
        configs(
            draw(st.sampled_from(KINDS)),
            charges=(Charge.AT_GRANT, Charge.AT_SPEND),
            costs=True,
            flows=True,
        )
    )
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
