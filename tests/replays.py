"""The guard that a live limiter's recording replays as its run went: each
level's grants, refusals, expiries and cancels in the replay are the live
statistics' (tests/test_adapters.py, tests/test_trace.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from permits.sim import Batch, Call, Scenario, Workload, WorkloadResult, replay


def replayed_as_live(
    policy: Any, live: Sequence[Any], calls: Iterable[Call]
) -> list[tuple[Any, WorkloadResult]]:
    """Replay ``calls`` (recorded at 8 permits/s, burst 2, at most 5
    waiting a level, two levels) under ``policy`` and assert each level's
    counts are ``live``'s (the limiter's ``statistics().levels``); return
    each level's live statistics beside its replayed result."""
    scenario = Scenario(
        "replay",
        policy,
        rate=8,
        burst=2,
        seconds=60,
        max_waiting=5,
        workloads=[Workload("w0", 0, Batch(0)), Workload("w1", 1, Batch(0))],
    )
    pairs = list(zip(live, replay(scenario, calls).workloads, strict=True))
    for stats, replayed in pairs:
        # (a caller granted and cancelled before it ran is refunded live,
        # and gives up at its grant in the replay)
        assert (
            replayed.granted,
            replayed.rejected,
            replayed.too_long,
            replayed.expired,
            replayed.cancelled,
        ) == (
            stats.granted - stats.refunded,
            stats.rejected,
            stats.too_long,
            stats.expired,
            stats.cancelled + stats.refunded,
        )
    return pairs
