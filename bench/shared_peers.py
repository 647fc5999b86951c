"""The shared limit beside its peers, on one redis-server, in one run.

    /tmp/bench-venv/bin/python bench/shared_peers.py      # the peers installed there
    .venv/bin/python bench/shared_peers.py                # permits alone

``--quick``: 1 s runs, one of each. ``--before REV``: two more columns,
``permits`` as of commit ``REV`` (both configurations; its ``core`` and
``adapters`` extracted with ``git archive`` and put first on the workers'
path), in the same run, alternating with the others.

Starts its own redis-server (loopback, persistence off) and runs, for each
limiter, a limit that never binds (10**6 permits/s, burst 10**6, one key
shared by every process), every caller acquiring back to back for 3 s:

- permits/s for 1 process x 1 caller, 1 x 200 callers, and 4 x 200 (real
  processes, started together; their permits over the longest run);
- one acquire's p50 and p99 at 1 x 1 (every acquire of that run, timed);
- client CPU per permit at 1 x 1 (the process's CPU time over its permits);
- script calls per permit and Redis's time per call at 1 x 1 (``INFO
  commandstats``, counting the warm-up's calls too).

The limiters, each as it is used by default on asyncio:

- ``permits``: ``permits.adapters.redis.open_limiter(Fifo(1), url, ...)``,
  the default configuration (one request in flight per process, leases of
  up to 16 permits for the waiters of one level while half the burst stays
  free, no booking ahead); and beside it with ``lease=1`` (one permit per
  request);
- throttled-py: ``throttled.asyncio.Throttled`` with its GCRA over its
  asyncio ``RedisStore`` (redis-py's asyncio client), ``timeout=1`` so a
  refused call waits as an acquire would;
- limits: ``limits.aio.strategies.MovingWindowRateLimiter`` over its async
  ``RedisStorage`` with ``implementation="redispy"`` (the same client);
  ``hit`` does not wait, so a refused call sleeps 1 ms and asks again.

Both peers send each caller's request on a connection of its own: their
pools are given ``max_connections=1000`` (redis-py's asyncio default of
100 fails the 200 callers with "Too many connections").

A limit that never binds refuses nothing; the table says how many were
refused all the same (0 expected). Every cell is the median of 3 runs; the
runs of the limiters alternate, each round starting with the next one, so
a busy host slows each alike. A peer that is not installed is left out,
and the script says so.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from _options import check_options

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "properties"))

import redis
from _common import QUICK, footer, header, importable

from permits.adapters.redis import open_limiter
from permits.core import Fifo

from redis_server import RedisServer, need_redis_server

ROOT = Path(__file__).resolve().parent.parent
SECONDS = 1.0 if QUICK else 3.0
RUNS = 1 if QUICK else 3
RATE = 10**6  # permits per second, and the burst: never binds
POOL = 1000  # the peers' connections per process
#: (processes, callers per process), as the table's rows name them.
SHAPES = ((1, 1), (1, 200), (4, 200))

Acquire = Callable[[], Awaitable[bool]]  # True: granted; False: refused for now


@asynccontextmanager
async def _permits(url: str, name: str, lease: int = 16) -> AsyncIterator[Acquire]:
    async with open_limiter(Fifo(1), url, name=name, rate=RATE, burst=RATE, lease=lease) as limiter:

        async def acquire() -> bool:
            await limiter.acquire(0)
            return True

        yield acquire


@asynccontextmanager
async def _throttled(url: str, name: str) -> AsyncIterator[Acquire]:
    throttled = importlib.import_module("throttled.asyncio")
    options = {"CONNECTION_POOL_KWARGS": {"max_connections": POOL}}
    store = throttled.RedisStore(server=url, options=options)
    throttle = throttled.Throttled(
        key=name,
        using=throttled.RateLimiterType.GCRA.value,
        quota=throttled.per_sec(RATE, burst=RATE),
        store=store,
        timeout=1,
    )

    async def acquire() -> bool:
        return not (await throttle.limit()).limited

    yield acquire


@asynccontextmanager
async def _limits(url: str, name: str) -> AsyncIterator[Acquire]:
    limits = importlib.import_module("limits")
    aio = importlib.import_module("limits.aio")
    storage = limits.storage.storage_from_string(
        f"async+{url}", implementation="redispy", max_connections=POOL
    )
    limiter = aio.strategies.MovingWindowRateLimiter(storage)
    item = limits.RateLimitItemPerSecond(RATE)

    async def acquire() -> bool:
        if await limiter.hit(item, name):
            return True
        await asyncio.sleep(0.001)
        return False

    yield acquire


@dataclass(frozen=True)
class Peer:
    name: str
    module: str  # the import that must succeed
    dist: str  # the distribution, for its version
    open: Callable[[str, str], AbstractAsyncContextManager[Acquire]]
    #: Put first on the workers' path (``--before``: an older permits).
    path: str | None = None


PEERS = (
    Peer("permits", "permits.adapters.redis", "permits", _permits),
    Peer("permits, lease=1", "permits.adapters.redis", "permits", partial(_permits, lease=1)),
    Peer("throttled-py GCRA", "throttled.asyncio", "throttled-py", _throttled),
    Peer("limits moving window", "limits.aio", "limits", _limits),
)


async def flood(peer: Peer, url: str, name: str, callers: int, seconds: float) -> dict[str, Any]:
    """``callers`` tasks acquiring back to back for ``seconds``; with one
    caller, every acquire timed."""
    granted = refused = 0
    times: list[float] = []
    async with peer.open(url, name) as acquire:
        # Connected, scripts loaded, and as many connections open as callers
        # (the peers open one per request in flight), before the clock runs.
        await asyncio.gather(*(acquire() for _ in range(callers)))

        async def caller() -> None:
            nonlocal granted, refused
            clock = time.perf_counter
            while clock() < end:
                start = clock()
                if await acquire():
                    granted += 1
                    if callers == 1:
                        times.append(clock() - start)
                else:
                    refused += 1

        # Every caller stops after its acquire that ends past the run
        # (redis-py's asyncio client may swallow a cancel, so none is sent).
        start, cpu = time.perf_counter(), time.process_time()
        end = start + seconds
        await asyncio.gather(*(caller() for _ in range(callers)))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    report: dict[str, Any] = {
        "granted": granted,
        "refused": refused,
        "seconds": elapsed,
        "cpu": cpu,
    }
    if times:
        times.sort()
        report["p50"] = times[len(times) // 2]
        report["p99"] = times[min(len(times) - 1, int(len(times) * 0.99))]
    return report


def before(rev: str, into: str) -> list[Peer]:
    """``permits`` as of commit ``rev``, both configurations, its code
    extracted into ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "core", "adapters"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    path = os.pathsep.join(str(Path(into) / part) for part in ("core", "adapters"))
    return [
        Peer(f"{peer.name} at {rev}", peer.module, peer.dist, peer.open, path)
        for peer in PEERS
        if peer.name.startswith("permits")
    ]


def worker(argv: list[str]) -> None:
    peer_name, url, name, callers, seconds, start_at = argv
    if peer_name not in {p.name for p in PEERS}:  # --before's: the path gives the version
        peer_name = peer_name.split(" at ")[0]
    peer = next(p for p in PEERS if p.name == peer_name)
    time.sleep(max(0.0, float(start_at) - time.time()))
    print(json.dumps(asyncio.run(flood(peer, url, name, int(callers), float(seconds)))))


def run(peer: Peer, url: str, name: str, processes: int, callers: int) -> dict[str, Any]:
    """``processes`` real processes flooding one key, started together; and
    what Redis counted meanwhile (``INFO commandstats``, reset first)."""
    server = redis.Redis.from_url(url)
    server.config_resetstat()
    start_at = time.time() + 1.0 + 0.2 * processes
    argv = [sys.executable, __file__, "--worker", peer.name, url, name, str(callers)]
    argv += [str(SECONDS), str(start_at)]
    env = dict(os.environ, PYTHONPATH=peer.path) if peer.path else None
    started = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env) for _ in range(processes)
    ]
    reports = [json.loads(p.communicate()[0]) for p in started]
    if any(p.returncode for p in started):
        raise RuntimeError(f"a worker of {peer.name} failed")
    scripts = server.info("commandstats").get("cmdstat_evalsha", {"calls": 0, "usec": 0})
    server.close()
    granted = sum(r["granted"] for r in reports)
    out = {
        "rate": granted / max(r["seconds"] for r in reports),
        "calls": scripts["calls"] / granted,
        "usec": scripts["usec"] / max(1, scripts["calls"]),
        "refused": sum(r["refused"] for r in reports),
        "cpu": sum(r["cpu"] for r in reports) / granted,
    }
    if processes == 1 and callers == 1:
        out["p50"], out["p99"] = reports[0]["p50"], reports[0]["p99"]
    return out


def main(older: list[Peer]) -> None:
    started = header()
    peers = [peer for peer in PEERS if importable(peer.module)]
    peers[2:2] = older  # beside the permits of this checkout
    missing = [peer for peer in PEERS if peer not in peers]
    if missing:
        print(
            "Not installed, skipped: "
            + ", ".join(f"{p.name} (pip install {p.dist})" for p in missing)
            + "; see BENCHMARKS.md's set-up."
        )
        print()
    server = RedisServer(need_redis_server())
    server.start()
    try:
        version = server.version()
        print(f"{version}, loopback; asyncio; {SECONDS:g} s runs, medians of {RUNS}")
        print()
        results: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
        for i in range(RUNS):
            for processes, callers in SHAPES:
                # each round starts with the next limiter, so none always goes first
                for peer in peers[i % len(peers) :] + peers[: i % len(peers)]:
                    name = f"peers-{peers.index(peer)}-{processes}-{callers}-{i}"
                    got = run(peer, server.url, name, processes, callers)
                    results.setdefault((peer.name, processes, callers), []).append(got)

        def median(peer: Peer, shape: tuple[int, int], key: str) -> float:
            return float(statistics.median(r[key] for r in results[(peer.name, *shape)]))

        names = [
            p.name if p.path else f"{p.name} {importlib.metadata.version(p.dist)}" for p in peers
        ]
        print("| processes x callers | " + " | ".join(names) + " |")
        print("| --- |" + " --- |" * len(peers))
        for shape in SHAPES:
            cells = [f"{median(p, shape, 'rate'):,.0f}" for p in peers]
            print(f"| {shape[0]} x {shape[1]}: permits/s | " + " | ".join(cells) + " |")
        one = SHAPES[0]
        cells = [
            f"{median(p, one, 'p50') * 1e6:.0f} / {median(p, one, 'p99') * 1e6:.0f} µs"
            for p in peers
        ]
        print("| 1 x 1: acquire p50 / p99 | " + " | ".join(cells) + " |")
        cells = [f"{median(p, one, 'cpu') * 1e6:.0f} µs" for p in peers]
        print("| client CPU per permit (1 x 1) | " + " | ".join(cells) + " |")
        cells = [f"{median(p, one, 'calls'):.2f}" for p in peers]
        print("| script calls per permit (1 x 1) | " + " | ".join(cells) + " |")
        cells = [f"{median(p, one, 'usec'):.1f} µs" for p in peers]
        print("| Redis time per script call (1 x 1) | " + " | ".join(cells) + " |")
        refused = [
            sum(r["refused"] for k, v in results.items() if k[0] == p.name for r in v)
            for p in peers
        ]
        print(
            "| refused (all runs; the limit never binds) | " + " | ".join(map(str, refused)) + " |"
        )
        print()
    finally:
        server.stop()
    footer(started)


if __name__ == "__main__":
    check_options(__doc__, "--quick", "--before", "--worker")
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2:])
    elif "--before" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            main(before(sys.argv[sys.argv.index("--before") + 1], tmp))
    else:
        main([])
