"""The Redis permit source: throughput, added latency, round trips; one run.

    python bench/shared_limit.py

Starts its own redis-server (loopback, persistence off), then:

1. Throughput with unlimited demand: a limit far above what one Redis can
   serve (10**6 permits/s, burst 10**6), 200 callers always waiting per
   process; permits per second for one process and for four processes
   together (real processes), asyncio backend.
2. Added latency of one uncontended ``acquire`` (one caller, a free permit
   every time): the Redis limiter against the local pacer (the anyio
   adapter), p50 and p99, same backend.
3. Round trips per permit, in (1), and at a saturated 200 permits/s shared
   by four processes (where every process asks when a permit falls due and
   only one gets it).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "properties"))

from permits.adapters.anyio import open_limiter as open_local
from permits.adapters.redis import open_limiter as open_redis
from permits.core import Fifo

from redis_server import RedisServer, need_redis_server

SECONDS = 3.0
CALLERS = 200


async def flood(url: str, name: str, rate: float, burst: int, seconds: float) -> dict[str, float]:
    """``CALLERS`` callers acquiring back to back for ``seconds``."""
    granted = 0
    async with open_redis(Fifo(1), url, name=name, rate=rate, burst=burst) as limiter:

        async def caller() -> None:
            nonlocal granted
            while True:
                await limiter.acquire(0)
                granted += 1

        async with anyio.create_task_group() as tg:
            start = time.perf_counter()
            for _ in range(CALLERS):
                tg.start_soon(caller)
            await anyio.sleep(seconds)
            tg.cancel_scope.cancel()
        elapsed = time.perf_counter() - start
        return {"granted": granted, "seconds": elapsed, "round_trips": limiter.round_trips}


def worker(url: str, name: str, rate: float, burst: int, start_at: float) -> None:
    time.sleep(max(0.0, start_at - time.time()))
    print(json.dumps(anyio.run(flood, url, name, rate, burst, SECONDS)))


def processes(url: str, name: str, count: int, rate: float, burst: int) -> dict[str, float]:
    start_at = time.time() + 2.0
    argv = [sys.executable, __file__, "--worker", url, name, str(rate), str(burst), str(start_at)]
    runs = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(count)]
    reports = [json.loads(run.communicate()[0]) for run in runs]
    return {
        "granted": sum(r["granted"] for r in reports),
        "seconds": max(r["seconds"] for r in reports),
        "round_trips": sum(r["round_trips"] for r in reports),
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
        version = subprocess.run(
            [server.binary, "--version"], capture_output=True, text=True, check=True
        ).stdout.split()[2]
        print(f"Python {sys.version.split()[0]}, {version}, loopback; asyncio backend\n")
        print("| scenario | permits | seconds | permits/s | round trips per permit |")
        print("| --- | --- | --- | --- | --- |")
        for label, count, rate, burst in (
            ("1 process, unlimited demand", 1, 10**6, 10**6),
            ("4 processes, unlimited demand", 4, 10**6, 10**6),
            ("4 processes, 200/s saturated", 4, 200, 10),
        ):
            run = processes(server.url, f"bench-{count}-{rate}", count, rate, burst)
            print(
                f"| {label} | {run['granted']:,} | {run['seconds']:.2f} | "
                f"{run['granted'] / run['seconds']:,.0f} | "
                f"{run['round_trips'] / run['granted']:.2f} |"
            )
        print("\n| one uncontended acquire | p50 | p99 |")
        print("| --- | --- | --- |")
        results = anyio.run(latency, server.url)
        for label, values in results.items():
            print(
                f"| {label} | {statistics.median(values) * 1e6:.0f} µs | "
                f"{quantile(values, 0.99) * 1e6:.0f} µs |"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        url, name, rate, burst, start_at = sys.argv[2:7]
        worker(url, name, float(rate), int(burst), float(start_at))
    else:
        main()
