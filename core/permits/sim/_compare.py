"""One workload under every policy family: which policy meets its requirements.

:func:`compare` runs a scenario once per policy of a grid (by default
:func:`default_grid`: FIFO, strict priority, shares and aging with a few
parameters each), checks each run against the scenario's
:class:`~permits.sim.Requirement` s, and recommends one policy by a stated
rule (:attr:`Comparison.recommended`). Pure, like the rest of the
simulator: the same scenario gives the same comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction

import attrs

from permits.core import (
    SECOND,
    Aging,
    Fifo,
    PermitTypeError,
    PermitValueError,
    Policy,
    Shares,
    StrictPriority,
)
from permits.core.checks import check_int, check_policy

from ._require import Measure, Requirement, offered_quantile
from ._run import MAX_ARRIVALS, Result, WorkloadResult, check_arrivals, check_scenario, simulate
from ._scenario import Scenario, describe
from ._trace import Call, replay

__all__ = [
    "AGING_AFTER",
    "SHARES_EVERY",
    "Comparison",
    "Outcome",
    "compare",
    "default_grid",
    "every_nth",
]

#: The default grid's :class:`~permits.core.Shares`: every n-th permit to
#: the lowest level, for each n here.
SHARES_EVERY = tuple(range(2, 11))
#: The default grid's :class:`~permits.core.Aging` ``after``, in seconds.
AGING_AFTER = (Fraction(1, 2), Fraction(1), Fraction(2), Fraction(5), Fraction(10))


def every_nth(n: int, levels: int) -> Shares:
    """Every ``n``-th permit to the lowest of ``levels`` levels (two or
    more): :meth:`Shares.every <permits.core.Shares.every>` on two; on more,
    weights ``(n-1)**k`` from the lowest up, each level ``n - 1`` times the
    next. Raises :class:`~permits.core.PermitValueError` where ``n`` is
    below 2 or the weights add up past a million (a cycle's length)."""
    levels = check_int("levels", levels, 2)
    if levels == 2:
        return Shares.every(n)
    n = check_int("n", n, 2)
    try:
        return Shares(tuple((n - 1) ** (levels - 1 - k) for k in range(levels)))
    except PermitValueError as refused:  # (named by the weights: a thousand of them)
        raise PermitValueError(
            "n", n, f"on {levels} levels, its weights (n-1)**k: {refused.reason}"
        ) from None


def default_grid(levels: int) -> tuple[Policy, ...]:
    """FIFO; strict priority; shares, every n-th permit (n in
    :data:`SHARES_EVERY`) to the lowest level (:func:`every_nth`, for the
    n whose weights add up to at most a million: n = 2 alone from 20 levels
    on); aging after each of :data:`AGING_AFTER`. One level: FIFO alone
    (every policy is FIFO then)."""
    levels = check_int("levels", levels, 1)  # ("2" raised a raw TypeError; True was 1)
    if levels == 1:
        return (Fifo(1),)
    shares = []
    for n in SHARES_EVERY:
        try:
            shares.append(every_nth(n, levels))
        except PermitValueError:  # weights past a schedule's length: a larger n too
            break
    aging = [Aging(levels, after_ns=int(after * SECOND)) for after in AGING_AFTER]
    return (Fifo(levels), StrictPriority(levels), *shares, *aging)


_P99, _P50 = Fraction(99, 100), Fraction(1, 2)


@attrs.frozen
class Outcome:
    """The scenario's run under one policy, and the requirements it misses."""

    policy: Policy
    result: Result
    #: The scenario's requirements this run does not meet, in their order.
    missed: tuple[Requirement, ...]

    @property
    def meets_all(self) -> bool:
        """Whether this run meets every requirement."""
        return not self.missed


@attrs.frozen
class Comparison:
    """A scenario's :class:`Outcome` under each policy of a grid, in grid order."""

    scenario: Scenario
    outcomes: tuple[Outcome, ...]

    #: How :attr:`recommended` chooses, for people.
    RULE = (
        "of the policies that meet every requirement, the one whose most urgent "
        "workload has the lowest p99 wait (counting callers not granted as waiting "
        "past the end); on a tie (as when each leaves more than 1% of them not "
        "granted), the one that leaves the fewest not granted, then the lowest p50 "
        "wait, then the earliest in the grid; if none meets them all, the same among "
        "those that miss the fewest"
    )

    @property
    def urgent(self) -> str:
        """The most urgent workload: the first of the lowest level among
        those of the runs that callers came to (a replay's: one per level,
        ``level N`` for a level the scenario names no workload of; the same
        callers come under every policy), or among all if none came."""
        return min(self._came(), key=lambda w: w.level).name

    @property
    def least_urgent(self) -> str:
        """The least urgent workload: the first of the highest level among
        those that callers came to, chosen as :attr:`urgent` is."""
        return max(self._came(), key=lambda w: w.level).name

    def _came(self) -> Sequence[WorkloadResult]:
        """The workloads of the runs that callers came to, or all if none
        came."""
        run = self.outcomes[0].result.workloads
        return [w for w in run if w.offered] or run

    @property
    def any_meets_all(self) -> bool:
        """Whether some policy meets every requirement."""
        return any(outcome.meets_all for outcome in self.outcomes)

    @property
    def recommended(self) -> Outcome:
        """The outcome :attr:`RULE` picks."""
        urgent = self.urgent
        fewest = min(len(outcome.missed) for outcome in self.outcomes)

        def rank(outcome: Outcome) -> tuple[float, int, float]:
            w = outcome.result[urgent]

            def wait(q: Fraction) -> float:
                at = offered_quantile(w.waits_ns, w.offered, q)
                return float("inf") if at is None else at

            return wait(_P99), w.offered - w.granted, wait(_P50)

        # (min keeps the first of equals: the earliest in the grid)
        return min((o for o in self.outcomes if len(o.missed) == fewest), key=rank)


def compare(
    scenario: Scenario,
    policies: Iterable[Policy] | None = None,
    *,
    max_arrivals: int | None = MAX_ARRIVALS,
    calls: Callable[[], Iterable[Call]] | None = None,
) -> Comparison:
    """Run ``scenario`` under each of ``policies`` (default:
    :func:`default_grid` of its policy's levels) in place of its own, and
    check each run against its requirements. ``max_arrivals`` bounds each
    run (:func:`~permits.sim.check_arrivals`), checked before the first.

    With ``calls``, each run replays the calls it returns (the same calls,
    as a fresh iterable per run: for instance a function that opens a trace
    file and reads it with :func:`~permits.sim.read_trace`) in place of the
    workloads' arrivals (:func:`~permits.sim.replay`); every policy must
    then order the scenario's levels, as the calls of each level count as
    its workload.

    Raises :class:`~permits.core.PermitValueError` for an empty grid, for
    a policy of fewer levels than the workloads use, for
    a requirement on the tenants of a workload whose callers name none
    (with ``calls``: whose level's calls within the run name none, though
    some came), and for ``calls`` that gave a run other calls within it
    than the first run's (an iterator given again, spent)."""
    check_scenario(scenario)
    if policies is None:
        grid = default_grid(scenario.policy.levels)
    else:
        if isinstance(policies, (str, bytes)) or not isinstance(policies, Iterable):
            raise PermitTypeError("policies", policies, "policies, such as [Fifo(2), Aging(2)]")
        grid = tuple(policies)
        if not grid:
            raise PermitValueError(
                "policies", policies, "give at least one policy (or None: the default grid)"
            )
        for i, policy in enumerate(grid):
            check_policy(policy, f"policies[{i}]")
    if calls is None:
        used = 1 + max(w.level for w in scenario.workloads)
        for policy in grid:
            if policy.levels < used:
                raise PermitValueError(
                    "policies",
                    policy,
                    f"orders {policy.levels} level{'' if policy.levels == 1 else 's'}, and the "
                    f"scenario's workloads use {used}: give each policy at least {used}",
                )
        check_arrivals(scenario, max_arrivals)
        _check_tenants(scenario)
    else:  # each run's result has a workload per level of its policy: the same for all
        if not callable(calls):
            raise PermitTypeError(
                "calls",
                calls,
                "a function giving the calls afresh for each run, such as "
                "lambda: read_trace(open(path, newline='')) (not the calls themselves)",
            )
        levels = scenario.policy.levels
        for policy in grid:
            if policy.levels != levels:
                raise PermitValueError(
                    "policies",
                    policy,
                    f"orders {policy.levels} levels, and the scenario {levels}: a trace's "
                    "calls count as a workload of their level, the same under every policy",
                )
    outcomes: list[Outcome] = []
    for policy in grid:
        run = attrs.evolve(scenario, policy=policy)
        result = simulate(run, max_arrivals=None) if calls is None else replay(run, calls())
        if outcomes and calls is not None:
            _check_same_calls(calls, outcomes[0], policy, result)
        elif calls is not None:  # the first run: the calls name the same tenants in every run
            _check_traced_tenants(scenario, result)
        missed = tuple(r for r in scenario.requirements if not r.met(result))
        outcomes.append(Outcome(policy, result, missed))
    return Comparison(scenario, tuple(outcomes))


def _check_same_calls(
    calls: Callable[[], Iterable[Call]], first: Outcome, policy: Policy, result: Result
) -> None:
    """Raise unless ``result``, a run under ``policy``, was offered the same
    callers as ``first`` (the policy decides what they get, not who comes):
    a ``calls`` function that gave its first run's iterator again, spent."""
    before = [w.offered for w in first.result.workloads]
    now = [w.offered for w in result.workloads]
    if now != before:
        raise PermitValueError(
            "calls",
            calls,
            f"gave {_calls(sum(now))} within the run under {describe(policy)}, and "
            f"{_calls(sum(before))} under {describe(first.policy)}, the first: return a "
            "fresh iterable of the same calls for each run (an iterator is spent by the first)",
        )


def _check_traced_tenants(scenario: Scenario, result: Result) -> None:
    """Raise for a requirement on the tenants of a workload of ``result``, a
    replay, that calls came to and none of which named a tenant (a flow):
    no run could judge it, as without calls (:func:`_check_tenants`); every
    policy missed it, ``never``."""
    for i, requirement in enumerate(scenario.requirements):
        if requirement.measure not in _ON_TENANTS:
            continue
        workload = result[requirement.workload]
        if workload.offered and not workload.tenants:
            raise PermitValueError(
                f"requirements[{i}]",
                requirement.text,
                f"no call of {workload.name!r} (level {workload.level}) in the trace names "
                "a tenant: give its calls a flow",
            )


def _calls(count: int) -> str:
    return f"{count:,} call{'' if count == 1 else 's'}"


_ON_TENANTS = (Measure.WORST_TENANT_P99, Measure.MEDIAN_TENANT_P99, Measure.TENANTS_STARVED)


def _check_tenants(scenario: Scenario) -> None:
    """Raise for a requirement on the tenants of a workload whose callers
    name none (neither a flow nor tenants): no run could judge it (a
    trace's calls name their own, so a replay is not checked)."""
    workloads = {workload.name: workload for workload in scenario.workloads}
    for i, requirement in enumerate(scenario.requirements):
        workload = workloads[requirement.workload]
        if (
            requirement.measure in _ON_TENANTS
            and workload.flow is None
            and workload.tenants is None
        ):
            raise PermitValueError(
                f"requirements[{i}]",
                requirement.text,
                f"no caller of {workload.name!r} names a tenant: give it tenants or a flow",
            )
