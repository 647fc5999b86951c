"""Helpers shared by the property tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from permits.core import Decision, Machine, Snapshot, State


def rows(decisions: list[Decision]) -> list[tuple[Any, str, int, int, int]]:
    """Decisions in the reference model's form."""
    return [(d.id, d.state.name, d.level, d.at, d.waited) for d in decisions]


def fingerprint(machine: Machine) -> Snapshot:
    """Everything a machine's future behaviour depends on (its public
    snapshot), to check that a refused operation left it exactly as it was."""
    return machine.snapshot()


def drive(
    machine: Machine,
    until: int,
    then: Callable[[list[Decision]], list[Decision]] | None = None,
) -> list[Decision]:
    """Tick ``machine`` on time up to ``until``: at every ``next_tick`` on the
    way (as an adapter with a perfect timer would), then at ``until``. Each
    tick's decisions go through ``then``, if given, before the next tick (to
    spend the permits granted, as callers would)."""
    out: list[Decision] = []
    while (at := machine.next_tick()) is not None and at <= until:
        out += machine.tick(at) if then is None else then(machine.tick(at))
        after = machine.next_tick()
        # P12: a tick at next_tick() makes progress, or nothing could drain.
        assert after is None or after > at, ("P12: a tick at next_tick() changed nothing", at)
    return out + (machine.tick(until) if then is None else then(machine.tick(until)))


def spent_at_once(
    machine: Machine, decisions: list[Decision], *, settle_later: bool = False
) -> list[Decision]:
    """``decisions``, with every permit granted among them spent at its grant
    (and those that spending grants, in turn)."""
    out: list[Decision] = []
    todo = list(decisions)
    while todo:
        decision = todo.pop(0)
        out.append(decision)
        if decision.state is State.GRANTED:
            todo += machine.spend(decision.id, decision.at, settle_later=settle_later)
    return out
