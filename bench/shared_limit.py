"""The Redis permit source: throughput, added latency, round trips; one run.

    python bench/shared_limit.py

Starts its own redis-server (loopback, persistence off), then:

1. Throughput with unlimited demand: a limit far above what one Redis can
   serve (10**6 permits/s, burst 10**6), 200 callers always waiting per
   process; permits per second for one process and for four processes
   together (real processes), asyncio backend, counted while every process
   runs.
2. Added latency of one uncontended ``acquire`` (one caller, a free permit
   every time): the Redis limiter against the local pacer (the anyio
   adapter), p50 and p99, same backend.
3. Round trips per permit, in (1), and at a saturated 200 permits/s shared
   by four and by sixteen processes (each process waits for its turn in
   the line, not for the next permit).
   Also with booking ahead (``book_ahead=0.1``), with one permit per
   request (``lease=1``; the default takes up to 16 while half the burst
   stays free), and the client CPU per permit (each process's own, threads
   included).
4. Priority across processes: four processes at a saturated 200 permits/s,
   burst 10, each with a backlog of 500 batch calls and Poisson interactive
   calls (10/s per process); the interactive p50 and p99 over all processes
   with neither a reserve nor global priority, a batch reserve of 3, global
   priority, both, and a reserve with booking; medians of three runs.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from _options import check_options

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "properties"))

from permits.adapters.anyio import open_limiter as open_local
from permits.adapters.redis import open_limiter as open_redis
from permits.core import Fifo, StrictPriority
from permits.sim import Poisson

from redis_server import RedisServer, need_redis_server

SECONDS = 3.0
CALLERS = 200
#: Runs of each priority scenario (the median is printed).
RUNS = 3


async def flood(
    url: str, name: str, rate: float, burst: int, book: float, lease: int, seconds: float
) -> dict[str, Any]:
    """``CALLERS`` callers acquiring back to back for ``seconds``; the wall
    time of each grant."""
    times: list[float] = []
    async with open_redis(
        Fifo(1), url, name=name, rate=rate, burst=burst, book_ahead=book, lease=lease
    ) as limiter:

        async def caller() -> None:
            while True:
                await limiter.acquire(0)
                times.append(time.time())

        async with anyio.create_task_group() as tg:
            start, cpu = time.time(), time.process_time()
            for _ in range(CALLERS):
                tg.start_soon(caller)
            await anyio.sleep(seconds)
            tg.cancel_scope.cancel()
        end, cpu = time.time(), time.process_time() - cpu
        return {
            "times": times,
            "start": start,
            "end": end,
            "cpu": cpu,
            "round_trips": limiter.round_trips,
        }


async def mixed(
    url: str, name: str, reserve: tuple[int, int], global_priority: bool, book: float, seed: int
) -> dict[str, Any]:
    """A batch backlog and Poisson interactive calls, for ``SECONDS``."""
    waits: list[float] = []
    granted = 0
    async with open_redis(
        StrictPriority(2),
        url,
        name=name,
        rate=200,
        burst=10,
        reserve=reserve,
        global_priority=global_priority,
        book_ahead=book,
    ) as limiter:

        async def batch() -> None:
            nonlocal granted
            await limiter.acquire(1)
            granted += 1

        async def interactive() -> None:
            nonlocal granted
            start = anyio.current_time()
            await limiter.acquire(0)
            waits.append(anyio.current_time() - start)
            granted += 1

        t0 = anyio.current_time()
        async with anyio.create_task_group() as tg:
            for _ in range(500):
                tg.start_soon(batch)
            for at in Poisson(10).times(seed):
                if at >= SECONDS * 1e9:
                    break
                await anyio.sleep_until(t0 + at / 1e9)
                tg.start_soon(interactive)
            await anyio.sleep_until(t0 + SECONDS)
            tg.cancel_scope.cancel()
        return {"waits": waits, "granted": granted, "round_trips": limiter.round_trips}


def worker(argv: list[str]) -> None:
    kind, url, name, start_at = argv[:4]
    time.sleep(max(0.0, float(start_at) - time.time()))
    if kind == "flood":
        rate, burst, book, lease = argv[4:8]
        options = (float(rate), int(burst), float(book), int(lease), SECONDS)
        report = anyio.run(flood, url, name, *options)
    else:
        reserve, global_priority, book, seed = argv[4:8]
        pair = (0, int(reserve))
        first = global_priority == "1"
        report = anyio.run(mixed, url, name, pair, first, float(book), int(seed))
    print(json.dumps(report))


def processes(url: str, name: str, count: int, kind: str, *args: object) -> list[dict[str, Any]]:
    """``count`` real processes running ``kind`` ("flood" or "mixed", with
    ``args``), started together; each one's report. A mixed process also
    gets its index, as the seed of its interactive calls."""
    start_at = time.time() + 2.0 + count * 0.1
    argv = [sys.executable, __file__, "--worker", kind, url, name, str(start_at), *map(str, args)]
    seeds = [[str(i)] if kind == "mixed" else [] for i in range(count)]
    runs = [subprocess.Popen([*argv, *seed], stdout=subprocess.PIPE, text=True) for seed in seeds]
    return [json.loads(run.communicate()[0]) for run in runs]


def flooded(
    url: str, name: str, count: int, rate: float, burst: int, book: float, lease: int
) -> dict[str, float]:
    """Permits granted while every process ran (sixteen processes on a busy
    host do not all start at once), and the CPU and round trips per permit
    over the whole runs."""
    reports = processes(url, name, count, "flood", rate, burst, book, lease)
    start, end = max(r["start"] for r in reports), min(r["end"] for r in reports)
    granted = sum(len(r["times"]) for r in reports)
    return {
        "granted": sum(start <= t <= end for r in reports for t in r["times"]),
        "seconds": end - start,
        "cpu per permit": sum(r["cpu"] for r in reports) / granted,
        "round trips per permit": sum(r["round_trips"] for r in reports) / granted,
    }


async def latency(url: str, samples: int = 3000) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"local pacer (anyio adapter)": [], "Redis": []}
    async with open_local(Fifo(1), rate=10**6, burst=10**6) as local:
        for _ in range(samples):
            start = time.perf_counter()
            await local.acquire(0)
            out["local pacer (anyio adapter)"].append(time.perf_counter() - start)
    async with open_redis(Fifo(1), url, name="latency", rate=10**6, burst=10**6) as remote:
        for _ in range(samples):
            start = time.perf_counter()
            await remote.acquire(0)
            out["Redis"].append(time.perf_counter() - start)
    return out


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(q * len(ordered) + 0.999999) - 1)]


def main() -> None:
    server = RedisServer(need_redis_server())
    server.start()
    try:
        version = server.version()
        print(f"Python {sys.version.split()[0]}, {version}, loopback; asyncio backend\n")
        print(
            "| scenario | permits | seconds | permits/s | client CPU per permit "
            "| round trips per permit |"
        )
        print("| --- | --- | --- | --- | --- | --- |")
        for label, count, rate, burst, book, lease in (
            ("1 process, unlimited demand", 1, 10**6, 10**6, 0, 16),
            ("4 processes, unlimited demand", 4, 10**6, 10**6, 0, 16),
            ("16 processes, unlimited demand", 16, 10**6, 10**6, 0, 16),
            ("1 process, unlimited demand, lease 1", 1, 10**6, 10**6, 0, 1),
            ("4 processes, unlimited demand, lease 1", 4, 10**6, 10**6, 0, 1),
            ("4 processes, 200/s saturated", 4, 200, 10, 0, 16),
            ("16 processes, 200/s saturated", 16, 200, 10, 0, 16),
            ("4 processes, 200/s saturated, booking 0.1 s ahead", 4, 200, 10, 0.1, 16),
            ("16 processes, 200/s saturated, booking 0.1 s ahead", 16, 200, 10, 0.1, 16),
        ):
            name = f"bench-{count}-{rate}-{book}-{lease}"
            run = flooded(server.url, name, count, rate, burst, book, lease)
            print(
                f"| {label} | {run['granted']:,} | {run['seconds']:.2f} | "
                f"{run['granted'] / run['seconds']:,.0f} | "
                f"{run['cpu per permit'] * 1e6:,.0f} µs | "
                f"{run['round trips per permit']:.2f} |"
            )
        print("\n| one uncontended acquire | p50 | p99 |")
        print("| --- | --- | --- |")
        results = anyio.run(latency, server.url)
        for label, values in results.items():
            print(
                f"| {label} | {statistics.median(values) * 1e6:.0f} µs | "
                f"{quantile(values, 0.99) * 1e6:.0f} µs |"
            )
        print(
            f"\n| 4 processes at 200/s, batch backlog (median of {RUNS} runs) "
            "| interactive p50 | p99 | served | permits/s | round trips per permit |"
        )
        print("| --- | --- | --- | --- | --- | --- |")
        for label, reserve, global_priority, book in (
            ("neither", 0, 0, 0),
            ("batch reserve 3", 3, 0, 0),
            ("global priority", 0, 1, 0),
            ("global priority and reserve 3", 3, 1, 0),
            ("reserve 3, booking 0.1 s ahead", 3, 0, 0.1),
        ):
            rows = []
            for i in range(RUNS):
                name = f"bench-mixed-{reserve}-{global_priority}-{book}-{i}"
                reports = processes(server.url, name, 4, "mixed", reserve, global_priority, book)
                waits = [w for r in reports for w in r["waits"]]
                granted = sum(r["granted"] for r in reports)
                trips = sum(r["round_trips"] for r in reports)
                rows.append(
                    (
                        statistics.median(waits),
                        quantile(waits, 0.99),
                        len(waits),
                        granted / SECONDS,
                        trips / granted,
                    )
                )
            p50, p99, served, rate, trips = (
                statistics.median(col) for col in zip(*rows, strict=True)
            )
            print(
                f"| {label} | {p50 * 1e3:.1f} ms | {p99 * 1e3:.1f} ms | {served:.0f} | "
                f"{rate:.0f} | {trips:.2f} |"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    check_options(__doc__, "--worker")
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2:])
    else:
        main()
