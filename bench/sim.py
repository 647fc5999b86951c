"""Speed of the simulator, in one run.

    python bench/sim.py

1. The article's five scenarios together (what ``permits simulate`` runs),
   wall time, best of 5 runs.
2. Long runs: simulated grants per second of CPU time (``process_time``),
   on workloads that keep the limiter saturated for a long simulated time:
   a big batch behind constant-rate interactive traffic, and three Poisson
   classes with timeouts and a deadline, under each built-in policy.
"""

from __future__ import annotations

import gc
import platform
import sys
import time

from _options import check_options

from permits.core import SECOND, Aging, Fifo, Policy, Shares, StrictPriority
from permits.sim import SEED, Batch, Constant, Poisson, Scenario, Workload, simulate

POLICIES: dict[str, Policy] = {
    "fifo": Fifo(3),
    "strict": StrictPriority(3),
    "shares 3:2:1": Shares((3, 2, 1)),
    "aging 2 s": Aging(3, after_ns=2 * SECOND),
}


def seed_wall() -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for scenario in SEED:
            simulate(scenario)
        best = min(best, time.perf_counter() - start)
    return best


def long_runs(policy: Policy) -> dict[str, Scenario]:
    return {
        "batch + constant": Scenario(
            "batch",
            policy,
            rate=1_000,
            seconds=400,
            workloads=[
                Workload("interactive", 0, Constant(600, start=0.0005)),
                Workload("batch", 2, Batch(400_000)),
            ],
        ),
        "3 Poisson + timeouts": Scenario(
            "poisson",
            policy,
            rate=1_000,
            seconds=400,
            seed=1,
            workloads=[
                Workload("users", 0, Poisson(400), timeout=0.5),
                Workload("api", 1, Poisson(400), timeout=2),
                Workload("jobs", 2, Poisson(300), timeout=30),
            ],
        ),
    }


def main() -> None:
    print(f"Python {platform.python_version()} on {platform.machine()}, {platform.platform()}")
    wall = seed_wall()
    print(f"\nThe article's five scenarios together: {wall * 1e3:.1f} ms wall (best of 5)\n")
    print("| policy | workload | grants | CPU s | grants per CPU second |")
    print("| --- | --- | --- | --- | --- |")
    for name, policy in POLICIES.items():
        for label, scenario in long_runs(policy).items():
            gc.collect()
            start = time.process_time()
            result = simulate(scenario)
            cpu = time.process_time() - start
            print(
                f"| {name} | {label} | {result.granted:,} | {cpu:.2f} | "
                f"{result.granted / cpu:,.0f} |"
            )
            sys.stdout.flush()


if __name__ == "__main__":
    check_options(__doc__)
    main()
