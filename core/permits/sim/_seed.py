"""The five scenarios of the article the project grew from, with its figures.

100 permits per second, burst 1, 10-second runs; a batch queued at time zero
(level 1) and interactive calls at a constant rate (level 0). The
interactive calls start 5 ms into the run, half a permit interval out of
phase with the permits (which fall due every 10 ms from time zero).
"""

from __future__ import annotations

from permits.core import SECOND, Aging, Fifo, Shares, StrictPriority

from ._scenario import Batch, Constant, Published, Scenario, Workload

__all__ = ["SEED"]

INTERACTIVE, BATCH = 0, 1
_START = 0.005  # the first interactive call: 5 ms in, half a permit interval


def _seed(
    name: str,
    policy: Fifo | StrictPriority | Shares | Aging,
    load: int,
    batch: int,
    interactive: Published,
    background: Published,
) -> Scenario:
    return Scenario(
        name,
        policy,
        rate=100,
        seconds=10,
        workloads=(
            Workload(
                "interactive", INTERACTIVE, Constant(load, start=_START), published=interactive
            ),
            Workload("batch", BATCH, Batch(batch), published=background),
        ),
    )


#: The article's five scenarios, in its order, with its published figures.
SEED: tuple[Scenario, ...] = (
    _seed(
        "FIFO, interactive 20/s",
        Fifo(2),
        20,
        1_000,
        Published(
            granted=96,
            offered=200,
            wait_p50=8.1,
            wait_p99=9.99,
            note="with the batch's 996 that is 1,092 permits, over the 1,000 that 10 s allow",
        ),
        Published(granted=996),
    ),
    _seed(
        "strict priority, interactive 20/s",
        StrictPriority(2),
        20,
        1_000,
        Published(granted=200, offered=200, wait_p50=0.0012, wait_p99=0.0103),
        Published(granted=797),
    ),
    _seed(
        "strict priority, interactive 90/s",
        StrictPriority(2),
        90,
        300,
        Published(wait_p50=0.0062, wait_p99=0.0107),
        Published(granted=101),
    ),
    _seed(
        "every 5th permit to batch, interactive 90/s",
        Shares.every(5),
        90,
        300,
        Published(wait_p50=0.617, wait_p99=1.215),
        Published(granted=200),
    ),
    _seed(
        "aging after 2 s, interactive 90/s",
        Aging(2, after_ns=2 * SECOND),
        90,
        300,
        Published(wait_p50=2.4, wait_p99=2.79),
        Published(granted=300, cleared_at=4.8),
    ),
)
