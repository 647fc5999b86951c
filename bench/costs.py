"""What do costs and several limits cost the core, beside the machine before them?

    python bench/costs.py [--before REV] [--also REV] [--no-valgrind]
    python bench/costs.py --bytecodes [--before REV]

Strict priority, 10^4 waiting (two levels, pushed alternately); each
iteration pushes one waiter and ticks at each next due time until one is
granted, so the queue stays at 10^4. Four loops, in one run:

- the machine of commit ``REV`` (``--before``, default ``197dc54``: one limit,
  unit costs, before the core was made of parts and learned costs),
  extracted with ``git archive`` and imported from there;
- this machine, one limit, every cost 1;
- this machine, two limits (requests 1,000/s burst 1,000 and tokens
  500,000/s burst 100,000), each waiter asking for 1 request and 1 to 1,000
  tokens (a fixed pseudo-random sequence);
- a bare ``heapq`` push and pop, the floor;
- with ``--also REV``, the two loops of this machine again on the machine of
  commit ``REV`` (one that has costs and limits), before this checkout's:
  a change and what it was before, in the same run.

``--bytecodes`` prints instead the Python bytecodes each loop executes per
grant (``sys.settrace`` opcode events over 2,000 grants), in all and for the
functions that execute most of them: where a grant's work goes.

Instructions per grant are counted by callgrind (loops of 2N minus N grants,
so set-up cancels out; nearly the same on every run), ns per grant are the best of
three runs. Memory: bytes the machine allocates per waiting waiter, with
the two limits and costs, ids and costs created beforehand.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from _callgrind import instructions as instructions_of
from _options import check_options

from core import heapq_loop  # the same floor as bench/core.py

ROOT = Path(__file__).resolve().parent.parent
WAITING = 10_000
RATE = 1000


def tokens(i: int) -> int:
    """The i-th waiter's tokens: 1 to 1,000, spread."""
    return (i * 7919) % 1000 + 1


def machine_loop(kind: str, waiting: int, grants: int, trace: Any = None) -> float:
    """Seconds per grant."""
    from permits.core import Machine, StrictPriority  # the copy on sys.path

    costs = kind == "two limits, costs"
    if costs:
        from permits.core import Limit

        limits = {"requests": Limit(RATE, 1000), "tokens": Limit(500_000, 100_000)}
        machine = Machine(StrictPriority(2), limits=limits)
        asks = [{"requests": 1, "tokens": tokens(i)} for i in range(waiting + grants + 1)]
    else:
        machine = Machine(StrictPriority(2), RATE)
    now = 0
    machine.tick(now)
    machine.push(-1, 0, now, **({"cost": {"requests": 1000}} if costs else {}))  # type: ignore[arg-type]
    for id in range(waiting):
        if costs:
            machine.push(id, id % 2, now, cost=asks[id])
        else:
            machine.push(id, id % 2, now)
    push, tick, next_due = machine.push, machine.tick, machine.next_due
    gc.collect()
    start = time.perf_counter()
    sys.settrace(trace)
    for id in range(waiting, waiting + grants):
        if costs:
            push(id, id & 1, now, cost=asks[id])
        else:
            push(id, id & 1, now)
        while True:
            now = next_due()  # type: ignore[assignment]
            if tick(now):
                break
    sys.settrace(None)
    elapsed = time.perf_counter() - start
    assert abs(len(machine) - waiting) <= 2, len(machine)
    return elapsed / grants


def bytecodes(kind: str, grants: int = 2000) -> None:
    """Print the bytecodes per grant of loop ``kind``, in all and by function."""
    import collections

    counts: collections.Counter[str] = collections.Counter()

    def trace(frame: Any, event: str, arg: object) -> Any:
        frame.f_trace_opcodes, frame.f_trace_lines = True, False

        def opcode(frame: Any, event: str, arg: object) -> Any:
            if event == "opcode":
                counts[frame.f_code.co_name] += 1
            return opcode

        return opcode

    machine_loop(kind, WAITING, grants, trace=trace)
    counts.pop("machine_loop", None)  # the benchmark's own loop
    top = ", ".join(f"{name} {n / grants:,.0f}" for name, n in counts.most_common(6))
    print(f"{sum(counts.values()) / grants:,.0f} bytecodes per grant ({top})")


def bytes_per_waiter(waiting: int) -> float:
    from permits.core import Limit, Machine, StrictPriority

    limits = {"requests": Limit(RATE, 1000), "tokens": Limit(500_000, 100_000)}
    machine = Machine(StrictPriority(2), limits=limits)
    machine.push(-1, 0, 0, cost={"requests": 1000})
    ids = list(range(waiting))
    asks = [{"requests": 1, "tokens": tokens(i)} for i in ids]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for id in ids:
        machine.push(id, id & 1, 0, cost=asks[id])
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(machine) == waiting
    return (after - before) / waiting


def extract(rev: str, into: str) -> str:
    """The core of commit ``rev``, as a directory to put on ``sys.path``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "core"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return str(Path(into) / "core")


def run_child(
    loop: str, grants: int, core: str | None, count: bool, script: str = __file__
) -> float:
    """Run one loop of ``script`` in a child process (with ``core`` first on
    its path): instructions of the whole process when ``count``, else s per
    grant."""
    args = [script, "--one", loop, str(grants)]
    env = dict(os.environ)
    if core is not None:
        env["PYTHONPATH"] = core
    if count:
        os.environ["PYTHONPATH"] = env.get("PYTHONPATH", "")
        try:
            return instructions_of(*args)
        finally:
            os.environ.pop("PYTHONPATH")
    result = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, check=True
    )
    return float(result.stdout.split()[-1])


def compare(
    column: str, loops: list[tuple[str, str, str]], valgrind: bool, script: str = __file__
) -> None:
    """Print, for each ``(name, loop, core)``, its instructions per grant (when
    ``valgrind``: a run of 40,000 grants minus one of 20,000, so set-up
    cancels out), the ratio to the first, and ns per grant (best of 3)."""
    print(f"| {column} | instructions per grant | x first | ns per grant (best of 3) |")
    print("| --- | ---: | ---: | ---: |")
    first = None
    for name, loop, core in loops:
        ns = min(run_child(loop, 20_000, core, count=False, script=script) for _ in range(3)) * 1e9
        per = None
        if valgrind:
            per = (
                run_child(loop, 40_000, core, count=True, script=script)
                - run_child(loop, 20_000, core, count=True, script=script)
            ) / 20_000
            first = first or per
        counted = "-" if per is None else f"{per:,.0f}"
        ratio = "-" if per is None or first is None else f"{per / first:.2f}x"
        print(f"| {name} | {counted} | {ratio} | {ns:,.0f} |")


def bytecodes_report(rev: str) -> str:
    """Each loop's bytecodes per grant, the machine of ``rev`` first (each
    in a child process, with its core first on the path)."""
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        old = extract(rev, tmp)
        for name, loop, core in [
            (f"machine at {rev}, one limit, cost 1", "one limit", old),
            ("this machine, one limit, cost 1", "one limit", str(ROOT / "core")),
            ("this machine, two limits, costs 1-1,000", "two limits, costs", str(ROOT / "core")),
        ]:
            env = dict(os.environ, PYTHONPATH=core)
            result = subprocess.run(
                [sys.executable, __file__, "--bytecodes-of", loop],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            lines.append(f"{name}: {result.stdout.strip()}")
    return "\n".join(lines)


def main() -> None:
    before = sys.argv[sys.argv.index("--before") + 1] if "--before" in sys.argv else "197dc54"
    also = sys.argv[sys.argv.index("--also") + 1] if "--also" in sys.argv else None
    valgrind = shutil.which("valgrind") is not None and "--no-valgrind" not in sys.argv
    here = str(ROOT / "core")
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as tmp_also:
        old = extract(before, tmp)
        loops = [(f"machine at {before}, one limit, cost 1", "one limit", old)]
        if also is not None:
            then = extract(also, tmp_also)
            loops += [
                (f"machine at {also}, one limit, cost 1", "one limit", then),
                (f"machine at {also}, two limits, costs 1-1,000", "two limits, costs", then),
            ]
        loops += [
            ("this machine, one limit, cost 1", "one limit", here),
            ("this machine, two limits, costs 1-1,000", "two limits, costs", here),
            ("bare heapq push+pop (floor)", "heapq", here),
        ]
        print(f"Strict priority, {WAITING:,} waiting; Python {sys.version.split()[0]}")
        print()
        compare("loop", loops, valgrind)
    print()
    print(
        f"Bytes per waiting waiter, two limits and costs (100,000 waiting): "
        f"{bytes_per_waiter(100_000):.1f}"
    )


if __name__ == "__main__":
    check_options(
        __doc__, "--before", "--also", "--bytecodes", "--bytecodes-of", "--no-valgrind", "--one"
    )
    if "--bytecodes-of" in sys.argv:
        bytecodes(sys.argv[sys.argv.index("--bytecodes-of") + 1])
    elif "--bytecodes" in sys.argv:
        rev = sys.argv[sys.argv.index("--before") + 1] if "--before" in sys.argv else "197dc54"
        print(bytecodes_report(rev))
    elif "--one" in sys.argv:
        at = sys.argv.index("--one")
        loop, count = sys.argv[at + 1], int(sys.argv[at + 2])
        if loop == "heapq":
            print(heapq_loop(WAITING, count))
        else:
            print(machine_loop(loop, WAITING, count))
    else:
        main()
