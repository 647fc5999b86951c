"""What does fairness between tenants cost, per grant and per waiter?

    python bench/flows.py [--before REV] [--also REV] [--no-valgrind]
    python bench/flows.py --aging [--before REV] [--no-valgrind]
    python bench/flows.py --weights [--before REV]

One level under strict priority, 10^4 waiting; each iteration pushes one
waiter and ticks at each next due time until one is granted, so the queue
stays at 10^4. The waiters belong to:

- no flow named, on the machine of commit ``REV`` (``--before``, default
  ``c1a3ccb``: the core just before flows), extracted with ``git archive``;
- no flow named, on this machine (the level's default flow);
- one named flow for all (a flow alone is served without virtual times);
- 10, then 1,000 flows, waiters dealt to them in turn (every flow waits);
- a flow per waiter: every key new, as when an attacker cycles keys;
- with ``--also REV``, each loop with named flows again on the machine of
  commit ``REV``, before this checkout's: a change and what it was before,
  in the same run.

``--aging``: instead, two levels under ``Aging`` (waiters dealt to them in
turn), with no flow named and with 10 and 1,000 flows, on this machine
beside the one of ``REV`` (default ``9ce55ad``, which ranked a level by the
waiter its flows serve next): what ranking each level by its oldest waiter
costs where flows reorder a level.

``--weights``: instead, 6,000 distinct random weights from 1 to 10^6
waiting in one level that never empties, one flow each: CPU time per push
and the bits of the level's virtual-time scale, this machine beside the one
of ``REV``.

Instructions per grant by callgrind (loops of 2N minus N grants, so set-up
cancels out; ``--one KIND N`` runs one loop of N grants, ``KIND`` one of
none, one, 10, 1000, each, or aging- before one of the first three), ns
per grant the best of three runs. Memory: bytes allocated
per waiting waiter, with a flow per waiter and with no flow named.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Hashable

from _options import check_options
from costs import compare, extract

WAITING = 10_000
RATE = 1000
#: This checkout's core.
HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "core")

#: loop name -> the flow of the i-th waiter (None: name none)
FLOWS: dict[str, Callable[[int], Hashable] | None] = {
    "none": None,
    "one": lambda i: "tenant",
    "10": lambda i: i % 10,
    "1000": lambda i: i % 1000,
    "each": lambda i: i,
}


def machine_loop(kind: str, waiting: int, grants: int) -> float:
    """Seconds per grant. ``aging-KIND``: two levels under ``Aging``,
    the i-th waiter at level ``i % 2``."""
    from permits.core import Aging, Machine, StrictPriority  # the copy on sys.path

    aging = kind.startswith("aging-")
    flow_of = FLOWS[kind.removeprefix("aging-")]
    levels = 2 if aging else 1
    machine = Machine(Aging(levels) if aging else StrictPriority(1), RATE)
    now = 0
    machine.tick(now)
    machine.push(-1, 0, now)
    for id in range(waiting):
        if flow_of is None:
            machine.push(id, id % levels, now)
        else:
            machine.push(id, id % levels, now, flow=flow_of(id))
    push, tick, next_due = machine.push, machine.tick, machine.next_due
    gc.collect()
    start = time.perf_counter()
    for id in range(waiting, waiting + grants):
        if flow_of is None:
            push(id, id % levels, now)
        else:
            push(id, id % levels, now, flow=flow_of(id))
        while True:
            now = next_due()  # type: ignore[assignment]
            if tick(now):
                break
    elapsed = time.perf_counter() - start
    assert abs(len(machine) - waiting) <= 2, len(machine)
    return elapsed / grants


def bytes_per_waiter(kind: str, waiting: int) -> float:
    from permits.core import Machine, StrictPriority

    flow_of = FLOWS[kind]
    machine = Machine(StrictPriority(1), RATE)
    machine.push(-1, 0, 0)
    ids = list(range(waiting))
    keys = [None if flow_of is None else flow_of(i) for i in ids]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for id in ids:
        machine.push(id, 0, 0, flow=keys[id])
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(machine) == waiting
    return (after - before) / waiting


def aging(before: str, valgrind: bool) -> None:
    """``--aging``: the loops under ``Aging``, this machine beside ``before``'s."""
    with tempfile.TemporaryDirectory() as tmp:
        old = extract(before, tmp)
        loops = []
        for name, kind in (("no flow named", "none"), ("10 flows", "10"), ("1,000 flows", "1000")):
            loops.append((f"{name}, machine at {before}", f"aging-{kind}", old))
            loops.append((name, f"aging-{kind}", HERE))
        print(f"Aging, two levels, {WAITING:,} waiting; Python {sys.version.split()[0]}")
        print()
        compare("waiters' flows", loops, valgrind, script=__file__)


def main() -> None:
    valgrind = shutil.which("valgrind") is not None and "--no-valgrind" not in sys.argv
    if "--aging" in sys.argv:  # (the core before flows has no flows to rank by)
        aging(
            sys.argv[sys.argv.index("--before") + 1] if "--before" in sys.argv else "9ce55ad",
            valgrind,
        )
        return
    before = sys.argv[sys.argv.index("--before") + 1] if "--before" in sys.argv else "c1a3ccb"
    also = sys.argv[sys.argv.index("--also") + 1] if "--also" in sys.argv else None
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as tmp_also:
        old = extract(before, tmp)
        other = None if also is None else extract(also, tmp_also)
        loops = [
            (f"machine at {before}, no flow named", "none", old),
            ("this machine, no flow named", "none", HERE),
        ]
        for name, kind in (
            ("one named flow", "one"),
            ("10 flows", "10"),
            ("1,000 flows", "1000"),
            ("a flow per waiter (10,000)", "each"),
        ):
            if other is not None:
                loops.append((f"{name}, machine at {also}", kind, other))
            loops.append((name, kind, HERE))
        print(f"Strict priority, one level, {WAITING:,} waiting; Python {sys.version.split()[0]}")
        print()
        compare("waiters' flows", loops, valgrind, script=__file__)
    print()
    print("| waiters' flows | bytes per waiting waiter (100,000 waiting) |")
    print("| --- | ---: |")
    for name, kind in (("no flow named", "none"), ("a flow per waiter", "each")):
        print(f"| {name} | {bytes_per_waiter(kind, 100_000):.0f} |")


def weights_loop() -> str:
    """CPU per push, and the scale's bits, for 6,000 distinct random weights."""
    import random

    from permits.core import Machine, StrictPriority  # the copy on sys.path

    rng = random.Random(1)
    weights = [rng.randint(1, 10**6) for _ in range(6000)]

    def weight_of(flow: Hashable) -> int:  # a flow is named by its weight
        return flow if isinstance(flow, int) else 1

    machine = Machine(StrictPriority(1), 1, 1, flow_weights=weight_of)
    machine.push("banked", 0, 0)  # granted at once: the rest wait
    start = time.process_time()
    for n, weight in enumerate(weights):
        machine.push(n, 0, 0, flow=weight)
    per = (time.process_time() - start) / len(weights)
    scale = machine.queues.fairness()[0][1]
    assert isinstance(scale, int)
    return f"{per * 1e6:,.1f} µs per push; a {scale.bit_length():,}-bit scale"


if __name__ == "__main__":
    check_options(
        __doc__,
        "--before",
        "--also",
        "--no-valgrind",
        "--aging",
        "--weights",
        "--weights-of",
        "--one",
    )
    if "--weights-of" in sys.argv:
        print(weights_loop())
    elif "--weights" in sys.argv:
        import subprocess

        rev = sys.argv[sys.argv.index("--before") + 1] if "--before" in sys.argv else "c1a3ccb"
        with tempfile.TemporaryDirectory() as tmp:
            for name, core in (("this machine", None), (f"machine at {rev}", extract(rev, tmp))):
                env = dict(os.environ, **({"PYTHONPATH": core} if core else {}))
                out = subprocess.run(
                    [sys.executable, __file__, "--weights-of"],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.strip()
                print(f"{name}: {out}")
    elif "--one" in sys.argv:
        at = sys.argv.index("--one")
        print(machine_loop(sys.argv[at + 1], WAITING, int(sys.argv[at + 2])))
    else:
        main()
