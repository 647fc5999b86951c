"""Global shares across processes: does each level get its weight's share,
and what does counting them in Redis cost? One run.

    python bench/global_shares.py

Starts its own redis-server (loopback, persistence off), then runs real
processes sharing one limit at a saturated 200 permits/s (burst 5), each
with a backlog of callers at the levels it is given, for 3 s (asyncio
backend). Per scenario: each level's share of the permits granted beside
its weight's share, permits per second (from the first process's start
to the last one's end, so a little under the rate), and script calls per
permit over all processes. Every scenario runs with global priority and without (each
process then counts the shares of its own waiters only).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from _options import check_options

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "properties"))

from permits.adapters.redis import open_limiter
from permits.core import Shares

from redis_server import RedisServer, need_redis_server

SECONDS = 3.0
RATE = 200
BURST = 5
#: Callers kept waiting at each of a process's levels.
CALLERS = 20

#: label -> (weights, each process's levels)
SCENARIOS: dict[str, tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]] = {
    "Shares((3, 1)): one process at each level": ((3, 1), ((0,), (1,))),
    "Shares((1, 6, 1)): levels 0 and 2 in one process, 1 in another": (
        (1, 6, 1),
        ((0, 2), (1,)),
    ),
    "Shares((1, 1)): four processes, each at both levels": ((1, 1), ((0, 1),) * 4),
    "Shares((4, 1)): levels 0 and 1 in one process, 1 in three more": (
        (4, 1),
        ((0, 1), (1,), (1,), (1,)),
    ),
}


async def backlog(
    url: str, name: str, weights: tuple[int, ...], levels: tuple[int, ...], global_priority: bool
) -> dict[str, Any]:
    """``CALLERS`` callers at each of ``levels``, acquiring back to back for
    ``SECONDS``: the permits each level got and the script calls made."""
    granted = [0] * len(weights)
    async with open_limiter(
        Shares(weights),
        url,
        name=name,
        rate=RATE,
        burst=BURST,
        global_priority=global_priority,
    ) as limiter:

        async def caller(level: int) -> None:
            while True:
                await limiter.acquire(level)
                granted[level] += 1

        async with anyio.create_task_group() as tg:
            start = time.time()
            for level in levels:
                for _ in range(CALLERS):
                    tg.start_soon(caller, level)
            await anyio.sleep(SECONDS)
            tg.cancel_scope.cancel()
        end = time.time()
        return {"granted": granted, "round_trips": limiter.round_trips, "start": start, "end": end}


def worker(argv: list[str]) -> None:
    url, name, start_at, weights, levels, global_priority = argv
    time.sleep(max(0.0, float(start_at) - time.time()))
    report = anyio.run(
        backlog,
        url,
        name,
        tuple(map(int, weights.split(","))),
        tuple(map(int, levels.split(","))),
        global_priority == "1",
    )
    print(json.dumps(report))


def run(
    url: str, name: str, weights: tuple[int, ...], each: tuple[tuple[int, ...], ...], first: bool
) -> tuple[list[int], int, float]:
    """One scenario in real processes started together: the permits per
    level over all of them, their script calls, and the seconds from the
    first one's start to the last one's end."""
    start_at = time.time() + 2.0 + len(each) * 0.1
    argv = [sys.executable, __file__, "--worker", url, name, str(start_at)]
    runs = [
        subprocess.Popen(
            [*argv, ",".join(map(str, weights)), ",".join(map(str, levels)), str(int(first))],
            stdout=subprocess.PIPE,
            text=True,
        )
        for levels in each
    ]
    reports = [json.loads(r.communicate()[0]) for r in runs]
    granted = [sum(r["granted"][level] for r in reports) for level in range(len(weights))]
    span = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    return granted, sum(r["round_trips"] for r in reports), span


def percent(values: list[float]) -> str:
    return " / ".join(f"{v:.0%}" for v in values)


def main() -> None:
    server = RedisServer(need_redis_server())
    server.start()
    try:
        print(f"Python {sys.version.split()[0]}, {server.version()}, loopback; asyncio backend")
        print(f"{RATE} permits/s, burst {BURST}, {SECONDS:.0f} s, {CALLERS} callers per level\n")
        print(
            "| scenario | global priority | share per level | weights' share "
            "| permits/s | script calls per permit |"
        )
        print("| --- | --- | --- | --- | --- | --- |")
        for i, (label, (weights, each)) in enumerate(SCENARIOS.items()):
            for first in (True, False):
                name = f"bench-shares-{i}-{first}"
                granted, trips, span = run(server.url, name, weights, each, first)
                total = sum(granted)
                ideal = [w / sum(weights) for w in weights]
                print(
                    f"| {label} | {'yes' if first else 'no'} "
                    f"| {percent([g / total for g in granted])} | {percent(ideal)} "
                    f"| {total / span:,.0f} | {trips / total:.2f} |"
                )
    finally:
        server.stop()


if __name__ == "__main__":
    check_options(__doc__, "--worker")
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2:])
    else:
        main()
