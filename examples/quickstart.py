"""The seed's problem in ten simulated seconds, under each policy.

A batch job queues its calls at time zero; interactive calls arrive at a
steady rate; the shared limit is 100 permits per second. The core is driven
in virtual time (no sleeping), so all five runs take well under a second.

    python examples/quickstart.py
"""

from __future__ import annotations

from permits.core import (
    MILLISECOND,
    SECOND,
    Aging,
    Fifo,
    Machine,
    Policy,
    Shares,
    Statistics,
    StrictPriority,
)

INTERACTIVE, BATCH = 0, 1


def simulate(
    policy: Policy,
    *,
    rate: int = 100,
    burst: int = 1,
    batch: int = 1_000,
    interactive_per_second: int = 20,
    seconds: int = 10,
) -> Statistics:
    """Run the scenario and return the machine's statistics at the end."""
    machine = Machine(policy, rate, burst)
    for i in range(batch):
        machine.push(("batch", i), BATCH, 0)
    # Interactive calls arrive half-way between two of their slots, so they
    # are not in phase with the permits (which fall due every 10 ms).
    gap = SECOND // interactive_per_second
    arrivals = [gap // 2 + i * gap for i in range(interactive_per_second * seconds)]
    end = seconds * SECOND
    for i, at in enumerate(arrivals):
        while (due := machine.next_tick()) is not None and due < at:
            machine.tick(due)
        machine.push(("user", i), INTERACTIVE, at)
    while (due := machine.next_tick()) is not None and due <= end:
        machine.tick(due)
    machine.tick(end)
    return machine.statistics()


SCENARIOS: list[tuple[str, Policy, int, int]] = [
    # name, policy, interactive calls per second, batch size
    ("FIFO", Fifo(2), 20, 1_000),
    ("strict priority", StrictPriority(2), 20, 1_000),
    ("strict priority", StrictPriority(2), 90, 1_000),
    ("every 5th to batch", Shares.every(5), 90, 1_000),
    ("aging after 2 s", Aging(2, after=2 * SECOND), 90, 300),
]


def main() -> None:
    print("100 permits/s, batch queued at 0 s, 10 simulated seconds")
    print(
        f"{'policy':<20} {'load':>5} {'batch':>6} {'interactive served':>19}"
        f" {'p50':>10} {'p99':>10} {'batch permits':>14}"
    )
    for name, policy, load, batch in SCENARIOS:
        stats = simulate(policy, interactive_per_second=load, batch=batch)
        user, work = stats.levels[INTERACTIVE], stats.levels[BATCH]
        p50 = (user.wait_p50 or 0) / MILLISECOND
        p99 = (user.wait_p99 or 0) / MILLISECOND
        print(
            f"{name:<20} {load:>3}/s {batch:>6} {user.granted:>11} of {user.pushed:<5}"
            f" {p50:>8.1f}ms {p99:>8.1f}ms {work.granted:>14}"
        )


if __name__ == "__main__":
    main()
