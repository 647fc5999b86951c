"""Speed and memory of the policy core, beside a bare heapq floor, in one run.

    python bench/core.py [--quick] [--no-valgrind] [--cancels-only]

Grants per second: the machine holds N waiters (two levels, pushed
alternately); each iteration pushes one waiter and ticks at the next due
time, which grants exactly one permit, so the queue stays at N. The floor is
the same loop over a bare ``heapq`` of ``(priority, seq, id)`` tuples: one
push, one pop. Each figure is the best of three runs of the loop.

Memory: bytes the machine allocates per waiting waiter (tracemalloc), ids
created beforehand so that only the machine's own memory counts.

Worst single cancel (``--cancels-only`` prints only this table): 10^6
waiters at one level, then a sequence of cancels long enough to thin the
level's chunks out until they merge (more than half of them), each timed
alone in the thread's CPU time (so that other load on the host does not
count) with the collector off; the slowest is the core's part of an
event-loop stall. Four orders: random, and push order behind a head that
stays, then the head (the worst case while cancelled waiters stayed in the
line as dead entries: the head's cancel dropped them all at once); random
again with a deadline for each waiter (the worst case while the deadlines
were a heap that dropped its dead entries by rebuilding it); and random
again with each waiter in a flow of its own (every cancel takes a flow's
head: the worst case while the level's heap of flow heads dropped its
stale entries by rebuilding it).

Instructions (when valgrind is on the machine, unless ``--no-valgrind``): the
loops at 10^4 waiting once more, and the strict one with a deadline for
every waiter, in instructions per grant counted by callgrind, which unlike
time come out nearly the same on every run. ``--count-one LOOP N`` runs only the
loop ``LOOP`` (``heapq``, ``fifo``, ``strict``, ``shares 4:1``, ``aging 2 s``
or ``strict, every waiter with a deadline``) for ``N`` grants at 10^4
waiting and prints nothing: the process callgrind counts, one per figure
(run it under valgrind to count one loop by hand).
"""

from __future__ import annotations

import functools
import gc
import heapq
import platform
import random
import shutil
import sys
import time
import tracemalloc
from collections.abc import Callable

from _callgrind import instructions as instructions_of
from _options import check_options

from permits.core import SECOND, Aging, Fifo, Machine, Policy, Shares, StrictPriority

POLICIES: dict[str, Callable[[], Policy]] = {
    "fifo": lambda: Fifo(2),
    "strict": lambda: StrictPriority(2),
    "shares 4:1": lambda: Shares((4, 1)),
    "aging 2 s": lambda: Aging(2, after_ns=2 * SECOND),
}
RATE = 1000  # permits per second: a permit every 1 ms of virtual time
#: The instruction count's row of the strict loop with a deadline for every waiter.
DEADLINES = "strict, every waiter with a deadline"


def machine_loop(policy: Policy, waiting: int, grants: int, deadlines: bool = False) -> float:
    """Seconds per grant; with ``deadlines``, every waiter has one, far off
    and in another order than the pushes."""
    machine = Machine(policy, RATE)
    now = 0
    machine.tick(now)
    machine.push(-1, 0, now)  # spend the banked permit
    far = 10**15
    for id in range(waiting):
        machine.push(id, id % 2, now, deadline=far + id * 7_919 % waiting if deadlines else None)
    push, tick, next_due = machine.push, machine.tick, machine.next_due
    ids = range(waiting, waiting + grants)
    gc.collect()
    start = time.perf_counter()
    for id in ids:
        push(id, id & 1, now, deadline=far + id * 7_919 % waiting if deadlines else None)
        now = next_due()  # type: ignore[assignment]
        tick(now)
    elapsed = time.perf_counter() - start
    assert len(machine) == waiting
    return elapsed / grants


def heapq_loop(waiting: int, grants: int) -> float:
    heap = [(id % 2, id, id) for id in range(waiting)]
    heapq.heapify(heap)
    push, pop = heapq.heappush, heapq.heappop
    ids = range(waiting, waiting + grants)
    gc.collect()
    start = time.perf_counter()
    for id in ids:
        push(heap, (id & 1, id, id))
        pop(heap)
    return (time.perf_counter() - start) / grants


def best(run: Callable[[], float], repeat: int = 3) -> float:
    return min(run() for _ in range(repeat))


def bytes_per_waiter(policy: Policy, waiting: int) -> float:
    ids = list(range(waiting))
    machine = Machine(policy, RATE)
    machine.push(-1, 0, 0)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for id in ids:
        machine.push(id, id & 1, 0)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(machine) == waiting
    return (after - before) / waiting


def cancel_times(
    waiting: int, order: list[int], deadlines: bool = False, flows: bool = False
) -> list[int]:
    """Nanoseconds of each cancel, in ``order``, from a machine holding
    ``waiting`` waiters (ids ``0 .. waiting - 1`` in push order) at one level,
    each with a deadline of its own (far off, in another order than the
    pushes) if ``deadlines``, each in a flow of its own if ``flows``."""
    machine = Machine(Fifo(1), RATE)
    machine.push(-1, 0, 0)  # spend the banked permit
    for id in range(waiting):
        deadline = 10**15 + id * 7_919 % waiting if deadlines else None
        machine.push(id, 0, 0, deadline=deadline, flow=id if flows else None)
    cancel, clock = machine.cancel, time.thread_time_ns
    times = []
    gc.collect()
    gc.disable()
    try:
        for id in order:
            start = clock()
            cancel(id)
            times.append(clock() - start)
    finally:
        gc.enable()
    assert len(machine) == waiting - len(order)
    return times


def worst_cancels(waiting: int) -> None:
    cancels = waiting * 6 // 10
    shuffled = random.Random(0).sample(range(waiting), cancels)
    orders = {
        "random order": (shuffled, False, False),
        "push order behind the head, then the head": ([*range(1, cancels), 0], False, False),
        "random order, each waiter with a deadline": (shuffled, True, False),
        "random order, each waiter in a flow of its own": (shuffled, False, True),
    }
    print(f"Single cancels at {waiting:,} waiting at one level, {cancels:,} of them (CPU time):")
    print()
    print("| order | median | 99.9th percentile | worst |")
    print("| --- | ---: | ---: | ---: |")
    for name, (order, deadlines, flows) in orders.items():
        times = sorted(cancel_times(waiting, order, deadlines, flows))
        cells = [times[len(times) // 2], times[len(times) * 999 // 1000], times[-1]]
        print(f"| {name} | " + " | ".join(f"{t / 1000:,.1f} µs" for t in cells) + " |")


def main() -> None:
    quick = "--quick" in sys.argv
    if "--cancels-only" in sys.argv:
        worst_cancels(10_000 if quick else 1_000_000)
        return
    sizes = [100, 10_000] if quick else [100, 10_000, 1_000_000]
    grants = 20_000 if quick else 200_000
    print(
        f"Python {platform.python_version()} on {platform.machine()}, "
        f"{platform.processor() or platform.platform()}; {grants:,} grants per cell, best of 3"
    )
    print()
    header = "| policy | " + " | ".join(f"{n:,} waiting" for n in sizes) + " |"
    print(header)
    print("|" + " --- |" * (len(sizes) + 1))
    floor = {n: best(functools.partial(heapq_loop, n, grants)) for n in sizes}
    rows = {
        name: {n: best(lambda n=n, make=make: machine_loop(make(), n, grants)) for n in sizes}  # type: ignore[misc]
        for name, make in POLICIES.items()
    }
    for name, cells in rows.items():
        print(
            f"| {name} | "
            + " | ".join(
                f"{1 / cells[n] / 1e6:.2f} M/s ({cells[n] * 1e9:.0f} ns, "
                f"{cells[n] / floor[n]:.1f}x floor)"
                for n in sizes
            )
            + " |"
        )
    print(
        "| bare heapq push+pop (floor) | "
        + " | ".join(f"{1 / floor[n] / 1e6:.2f} M/s ({floor[n] * 1e9:.0f} ns)" for n in sizes)
        + " |"
    )
    print()
    print(
        "| policy | per-grant cost at largest / at 100 waiting"
        " | bytes per waiting waiter (100,000 waiting) |"
    )
    print("| --- | --- | --- |")
    for name, make in POLICIES.items():
        ratio = rows[name][sizes[-1]] / rows[name][100]
        print(f"| {name} | {ratio:.2f}x | {bytes_per_waiter(make(), 100_000):.0f} |")
    print()
    worst_cancels(sizes[-1])

    if shutil.which("valgrind") is not None and "--no-valgrind" not in sys.argv:
        print()
        instructions()


def _count(which: str, grants: int) -> int:
    """Instructions (callgrind) of a process that runs one loop of ``grants``."""
    return instructions_of(__file__, "--count-one", which, str(grants))


def instructions(waiting: int = 10_000, grants: int = 20_000) -> None:
    """The same loops at 10^4 waiting, in instructions per grant (callgrind):
    the difference between loops of ``2 * grants`` and ``grants``, so set-up
    cancels out. Unlike time, nearly the same on every run."""
    print(
        f"Instructions per grant at {waiting:,} waiting (valgrind --tool=callgrind; "
        f"loops of {2 * grants:,} minus {grants:,} grants):"
    )
    print()
    print("| loop | instructions per grant | x floor |")
    print("| --- | ---: | ---: |")
    per = {
        which: (_count(which, 2 * grants) - _count(which, grants)) / grants
        for which in ["heapq", *POLICIES, DEADLINES]
    }
    for which in [*POLICIES, DEADLINES]:
        print(f"| {which} | {per[which]:,.0f} | {per[which] / per['heapq']:.2f}x |")
    print(f"| bare heapq push+pop (floor) | {per['heapq']:,.0f} | |")


if __name__ == "__main__":
    check_options(__doc__, "--quick", "--no-valgrind", "--cancels-only", "--count-one")
    if "--count-one" in sys.argv:
        at = sys.argv.index("--count-one")
        which, count = sys.argv[at + 1], int(sys.argv[at + 2])
        if which == "heapq":
            heapq_loop(10_000, count)
        elif which == DEADLINES:
            machine_loop(StrictPriority(2), 10_000, count, deadlines=True)
        else:
            machine_loop(POLICIES[which](), 10_000, count)
    else:
        main()
