"""What ``permits compare`` and a trace replay cost, and the simulator per grant.

    python bench/compare.py [--quick] [--no-valgrind] [--large]

1. ``compare`` on the article's workload (the shipped example ``article``)
   across the default grid (16 policies): in process, best of 5; and the
   command end to end (``permits compare``, a process of its own, its
   interpreter's start included), best of 3. Wall time.
2. A trace of 10^6 rows (two levels, Poisson at 1,100 calls/s against 1,000
   permits/s, a timeout on level 0, a flow on every row), written as CSV and
   as JSON lines, replayed under strict priority for the trace's 909 s:
   reading alone, then reading and replaying. CPU time (``process_time``).
3. The simulator per grant against the core's own loop (when valgrind is on
   the machine, unless ``--no-valgrind``): instructions per grant, counted by
   callgrind, of ``simulate`` on a scenario that holds 10,000 waiting
   throughout (a backlog of 10,000 and arrivals at exactly the rate), and of
   the same pushes and ticks made on a bare ``Machine`` (``bench/core.py``'s
   loop). Each per-grant figure is the difference between a run of 30,000
   grants and one of 10,000, divided by 20,000, so start-up cancels out.
   Then the trace of 2. (as CSV) the same way: instructions per row to read
   it, and to read and replay it, from traces of 30,000 and 10,000 rows.
4. A cost per limit: the same rows (10^6; ``--quick``: 10^5) as a CSV trace
   with ``cost.requests`` and ``cost.tokens`` columns (1 request, 100 to
   2,000 tokens a row), replayed against two limits (1,000 requests/s,
   burst 10; 1,050,000 tokens/s, burst 20,000: both bind) beside the one
   cost trace of 2. as CSV and the same rows' times and levels alone (a
   plain trace: no flow, no timeout): CPU time as in 2., and (valgrind)
   instructions per row as in 3.
5. ``--large``: one scenario of 10^7 grants (10,000 s at 1,000 permits/s,
   three Poisson levels, each with a timeout), grants per CPU second.
"""

from __future__ import annotations

import gc
import pickle
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _callgrind import instructions
from _options import check_options

from core import machine_loop  # bench/core.py's loop: one push and one tick per grant
from permits.cli import scenarios
from permits.core import Limit, Machine, StrictPriority
from permits.sim import (
    Batch,
    Constant,
    Poisson,
    Scenario,
    Workload,
    compare,
    read_trace,
    replay,
    simulate,
)

ROWS = 10**6
TRACE_RATE = 1_100  # calls per second, against 1,000 permits per second
WAITING = 10_000
LONG, SHORT = 30_000, 10_000


def compare_in_process(repeat: int) -> tuple[float, int]:
    (article,) = scenarios(None, "article")
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        comparison = compare(article)
        best = min(best, time.perf_counter() - start)
    return best, len(comparison.outcomes)


def compare_command(repeat: int) -> float:
    command = [str(Path(sys.executable).parent / "permits"), "compare"]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=False)
        best = min(best, time.perf_counter() - start)
    return best


def trace_rows(rows: int) -> Iterator[tuple[float, int, str]]:
    """Each row's time (s), level and flow: Poisson at TRACE_RATE, the
    levels in turn, one of 50 flows."""
    rng = random.Random(1)
    at = 0.0
    for n in range(rows):
        at += rng.expovariate(TRACE_RATE)
        yield at, n % 2, f"tenant-{rng.randrange(50)}"


def write_traces(directory: Path, rows: int) -> tuple[Path, Path]:
    csv_path, jsonl_path = directory / "trace.csv", directory / "trace.jsonl"
    with csv_path.open("w") as csv_file, jsonl_path.open("w") as jsonl_file:
        csv_file.write("at,level,cost,flow,timeout\n")
        for at, level, flow in trace_rows(rows):
            if level == 0:
                csv_file.write(f"{at:.6f},0,1,{flow},0.5\n")
                jsonl_file.write(
                    f'{{"at": {at:.6f}, "level": 0, "flow": "{flow}", "timeout": 0.5}}\n'
                )
            else:
                csv_file.write(f"{at:.6f},1,1,{flow},\n")
                jsonl_file.write(f'{{"at": {at:.6f}, "level": 1, "flow": "{flow}"}}\n')
    return csv_path, jsonl_path


def write_per_limit_trace(directory: Path, rows: int) -> Path:
    """The rows of :func:`write_traces` with a cost per limit: one request
    and 100 to 2,000 tokens each."""
    tokens = random.Random(2)
    path = directory / "per-limit.csv"
    with path.open("w") as file:
        file.write("at,level,cost.requests,cost.tokens,flow,timeout\n")
        for at, level, flow in trace_rows(rows):
            timeout = "0.5" if level == 0 else ""
            file.write(f"{at:.6f},{level},1,{tokens.randint(100, 2_000)},{flow},{timeout}\n")
    return path


def write_plain_trace(directory: Path, rows: int) -> Path:
    """The times and levels of :func:`write_traces`'s rows alone: no flow,
    no timeout, every cost 1."""
    path = directory / "plain.csv"
    with path.open("w") as file:
        file.write("at,level\n")
        for at, level, _ in trace_rows(rows):
            file.write(f"{at:.6f},{level}\n")
    return path


def trace_scenario(rows: int, per_limit: bool = False) -> Scenario:
    """The scenario a trace of ``rows`` is replayed against: 1,000 permits/s,
    or (``per_limit``) 1,000 requests/s and 1,050,000 tokens/s, about as
    many calls a second at the rows' 1,050 tokens on average."""
    seconds = -(-rows // TRACE_RATE)  # the trace's length, in whole seconds
    workloads = [Workload("interactive", 0, Batch(0)), Workload("batch", 1, Batch(0))]
    if per_limit:
        limits = {"requests": Limit(1_000, 10), "tokens": Limit(1_050_000, 20_000)}
        return Scenario(
            "trace",
            StrictPriority(2),
            rate=None,
            seconds=seconds,
            limits=limits,
            workloads=workloads,
        )
    return Scenario(
        "trace", StrictPriority(2), rate=1_000, burst=10, seconds=seconds, workloads=workloads
    )


def replay_times(path: Path, scenario: Scenario) -> tuple[float, float, int]:
    """(CPU s reading alone, CPU s reading and replaying, permits granted)."""
    limits = scenario.named_limits
    gc.collect()
    start = time.process_time()
    with path.open(newline="") as file:
        for _ in read_trace(file, limits=limits):
            pass
    reading = time.process_time() - start
    gc.collect()
    start = time.process_time()
    with path.open(newline="") as file:
        result = replay(scenario, read_trace(file, limits=limits))
    return reading, time.process_time() - start, result.granted


def held_scenario(grants: int) -> Scenario:
    """10,000 waiting throughout: a backlog of 10,000 at time zero and one
    arrival per permit after it, alternating levels as bench/core.py does."""
    rate = 1_000
    seconds = grants / rate
    return Scenario(
        "held",
        StrictPriority(2),
        rate=rate,
        seconds=seconds,
        workloads=[
            Workload("backlog", 1, Batch(WAITING)),
            Workload("even", 0, Constant(rate / 2, start=0.0005)),
            Workload("odd", 1, Constant(rate / 2, start=0.0010)),
        ],
    )


def large_scenario() -> Scenario:
    return Scenario(
        "large",
        StrictPriority(3),
        rate=1_000,
        seconds=10_000,
        seed=1,
        workloads=[
            Workload("users", 0, Poisson(400), timeout=0.5),
            Workload("api", 1, Poisson(400), timeout=2),
            Workload("jobs", 2, Poisson(300), timeout=30),
        ],
    )


#: The machine's operations a simulation calls.
OPERATIONS = ("push", "tick", "cancel", "next_tick")

#: A machine call a replay made: the method, its arguments, its keywords.
MachineCall = tuple[str, tuple[Any, ...], dict[str, Any]]


def machine_calls(scenario: Scenario, path: Path) -> tuple[MachineCall, list[MachineCall]]:
    """The machine a replay of the trace at ``path`` builds (its arguments)
    and every call the replay makes on it, in order: what the core alone is
    asked to do. (Recorded by wrapping ``Machine``'s methods for the run;
    a push's own tick is the push's.)"""
    built: list[MachineCall] = []
    calls: list[MachineCall] = []
    inside = [False]
    saved = {name: getattr(Machine, name) for name in ("__init__", *OPERATIONS)}

    def recording(name: str) -> Callable[..., Any]:
        method = saved[name]

        def record(self: Machine, *args: Any, **kwargs: Any) -> Any:
            if inside[0]:
                return method(self, *args, **kwargs)
            (built if name == "__init__" else calls).append((name, args, kwargs))
            inside[0] = True
            try:
                return method(self, *args, **kwargs)
            finally:
                inside[0] = False

        return record

    for name in saved:
        setattr(Machine, name, recording(name))
    try:
        with path.open(newline="") as file:
            replay(scenario, read_trace(file, limits=scenario.named_limits))
    finally:
        for name, method in saved.items():
            setattr(Machine, name, method)
    return built[0], calls


def replay_calls(path: str, bare: bool) -> None:
    """Make the machine calls pickled at ``path`` on a new machine, or
    (``bare``) on functions that do nothing, to count what making the calls
    alone costs."""
    with open(path, "rb") as file:
        (_, args, kwargs), calls = pickle.load(file)
    machine = Machine(*args, **kwargs)
    operations: dict[str, Callable[..., Any]] = (
        dict.fromkeys(OPERATIONS, _nothing)
        if bare
        else {name: getattr(machine, name) for name in OPERATIONS}
    )
    for name, args, kwargs in calls:
        operations[name](*args, **kwargs)


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def child(which: str, count: int, path: str = "") -> None:
    """Run under callgrind: one loop, then exit."""
    if which in ("core-calls", "bare-calls"):
        replay_calls(path, bare=which == "bare-calls")
    elif which == "sim":
        simulate(held_scenario(count), max_arrivals=None)
    elif which == "core":
        machine_loop(StrictPriority(2), WAITING, count)
    else:  # read or replay the trace of ``count`` rows at ``path``
        scenario = trace_scenario(count, per_limit=which.endswith("per-limit"))
        with open(path, newline="") as file:
            if which.startswith("read"):
                for _ in read_trace(file, limits=scenario.named_limits):
                    pass
            else:
                replay(scenario, read_trace(file, limits=scenario.named_limits))


def per_row(which: str, directory: Path) -> float:
    """Instructions per row to read (``which="read"``) or read and replay
    (``"replay"``) a CSV trace, the one-cost trace or (``"read-per-limit"``,
    ``"replay-per-limit"``) the trace of a cost per limit, or (``"read-plain"``,
    ``"replay-plain"``) the plain trace: the difference between traces of
    LONG and SHORT rows."""
    script = str(Path(__file__).resolve())
    kind = which.partition("-")[2]  # "", "per-limit" or "plain"
    counts = []
    for rows in (LONG, SHORT):
        path = directory / (f"{rows}-{kind}.csv" if kind else f"{rows}.csv")
        if not path.exists():
            if kind == "per-limit":
                write_per_limit_trace(directory, rows).rename(path)
            elif kind == "plain":
                write_plain_trace(directory, rows).rename(path)
            else:
                write_traces(directory, rows)[0].rename(path)
        counts.append(instructions(script, "--child", which, str(rows), str(path)))
    return (counts[0] - counts[1]) / (LONG - SHORT)


def core_per_row(directory: Path) -> float:
    """Instructions per row of the core alone in a replay of the one-cost
    CSV trace: its machine calls (:func:`machine_calls`) made on a bare
    machine, less the same calls made on functions that do nothing; the
    difference between traces of LONG and SHORT rows."""
    script = str(Path(__file__).resolve())
    counts = []
    for rows in (LONG, SHORT):
        trace = directory / f"{rows}.csv"
        if not trace.exists():
            write_traces(directory, rows)[0].rename(trace)
        calls = directory / f"{rows}.calls"
        with calls.open("wb") as file:
            pickle.dump(machine_calls(trace_scenario(rows), trace), file)
        core, bare = (
            instructions(script, "--child", which, str(rows), str(calls))
            for which in ("core-calls", "bare-calls")
        )
        counts.append(core - bare)
    return (counts[0] - counts[1]) / (LONG - SHORT)


def per_grant(which: str) -> float:
    script = str(Path(__file__).resolve())
    long = instructions(script, "--child", which, str(LONG))
    short = instructions(script, "--child", which, str(SHORT))
    return (long - short) / (LONG - SHORT)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]), *sys.argv[4:5])
        return
    quick = "--quick" in sys.argv
    print(f"Python {platform.python_version()} on {platform.machine()}, {platform.platform()}")
    wall, policies = compare_in_process(2 if quick else 5)
    command = compare_command(1 if quick else 3)
    print("\n| compare, the article's workload | policies | wall s |")
    print("| --- | --- | --- |")
    print(f"| in process (`permits.sim.compare`) | {policies} | {wall:.3f} |")
    print(f"| the command (`permits compare`, its own process) | {policies} | {command:.3f} |")
    sys.stdout.flush()

    rows = ROWS // 10 if quick else ROWS
    scenario = trace_scenario(rows)
    print(
        f"\n| trace of {rows:,} rows, strict priority, {scenario.seconds} s | read CPU s | "
        "read + replay CPU s | rows per CPU second | permits |"
    )
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as directory:
        csv_path, jsonl_path = write_traces(Path(directory), rows)
        for path in (csv_path, jsonl_path):
            reading, total, granted = replay_times(path, scenario)
            print(
                f"| {path.suffix[1:].upper()} | {reading:.2f} | {total:.2f} | "
                f"{rows / total:,.0f} | {granted:,} |"
            )
            sys.stdout.flush()
        print(
            f"\n| trace of {rows:,} rows, CSV, strict priority | read CPU s | "
            "read + replay CPU s | rows per CPU second | permits |"
        )
        print("| --- | --- | --- | --- | --- |")
        per_limit = write_per_limit_trace(Path(directory), rows)
        plain = write_plain_trace(Path(directory), rows)
        for label, path, limits in (
            ("a cost per limit, two limits", per_limit, True),
            ("one cost, one limit (the CSV above, again)", csv_path, False),
            ("the same times and levels alone (no flow, no timeout)", plain, False),
        ):
            reading, total, granted = replay_times(path, trace_scenario(rows, limits))
            print(f"| {label} | {reading:.2f} | {total:.2f} | {rows / total:,.0f} | {granted:,} |")
            sys.stdout.flush()

    if "--no-valgrind" not in sys.argv and shutil.which("valgrind"):
        sim, core = per_grant("sim"), per_grant("core")
        print("\n| instructions per grant, 10,000 waiting | simulator | core's own loop | ratio |")
        print("| --- | --- | --- | --- |")
        print(f"| strict priority | {sim:,.0f} | {core:,.0f} | {sim / core:.2f}x |")
        sys.stdout.flush()
        print("\n| instructions per row, the CSV trace above | read | read + replay |")
        print("| --- | --- | --- |")
        per_kind = {}
        for label, kind in (
            ("strict priority, 50 flows", ""),
            ("the same rows, a cost per limit, two limits", "-per-limit"),
            ("the same times and levels alone", "-plain"),
        ):
            with tempfile.TemporaryDirectory() as directory:
                read = per_row("read" + kind, Path(directory))
                replayed = per_row("replay" + kind, Path(directory))
            per_kind[kind] = read, replayed
            print(f"| {label} | {read:,.0f} | {replayed:,.0f} |")
            sys.stdout.flush()
        with tempfile.TemporaryDirectory() as directory:
            core_alone = core_per_row(Path(directory))
        read, replayed = per_kind[""]
        print(
            f"\n| where a row's {replayed:,.0f} instructions go, 50 flows | reading | "
            "the core alone (its calls made on a bare machine) | the simulator (the rest) |"
        )
        print("| --- | --- | --- | --- |")
        parts = (read, core_alone, replayed - read - core_alone)
        shown = " | ".join(f"{part:,.0f} ({part / replayed:.0%})" for part in parts)
        print(f"| strict priority | {shown} |")

    if "--large" in sys.argv:
        scenario = large_scenario()
        gc.collect()
        start = time.process_time()
        result = simulate(scenario, max_arrivals=None)
        cpu = time.process_time() - start
        print("\n| one large scenario | grants | CPU s | grants per CPU second |")
        print("| --- | --- | --- | --- |")
        print(
            f"| 3 Poisson levels, 10,000 s | {result.granted:,} | {cpu:.1f} | "
            f"{result.granted / cpu:,.0f} |"
        )


if __name__ == "__main__":
    check_options(__doc__, "--quick", "--large", "--no-valgrind", "--child")
    main()
