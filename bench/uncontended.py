"""What does an acquire cost when a permit is free and nobody waits?

    python bench/uncontended.py [--before REV] [--no-valgrind]

One caller acquires in a loop at a limit that never binds (10^9/s, burst
10^6), so every acquire finds a permit free: what it costs is the adapter's
and the core's bookkeeping. In one run, each loop in a child process:

- this tree's adapters (asyncio, trio, anyio on asyncio, threads) and the
  same adapters at commit ``REV`` (``--before``, default ``bd2570e``: every
  acquire pushed a waiter and spent it), extracted with ``git archive``;
- the peers that are installed (aiolimiter, asynciolimiter), built as in
  ``_common.PEERS``;
- the floors: an asyncio future created, resolved and awaited; trio's
  ``checkpoint()``, which trio asks of any operation that may block; a
  ``threading.Lock`` acquire/release with a ``time.monotonic_ns()`` read.

Instructions per acquire are counted by callgrind (loops of 2N minus N, so
set-up cancels out; nearly the same on every run); ns per acquire are the best of
three runs of N, wall clock.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _options import check_options

ROOT = Path(__file__).resolve().parent.parent
N = 20_000
UNLIMITED = 10**9
BURST = 10**6


async def _timed(acquire: Callable[[], Awaitable[object]], count: int) -> float:
    """Seconds for ``count`` acquires in a loop, after 1,000 to warm up."""
    for _ in range(1000):
        await acquire()
    start = time.perf_counter()
    for _ in range(count):
        await acquire()
    return time.perf_counter() - start


def _asyncio_loop(make: Callable[[], Any], count: int) -> float:
    async def body() -> float:
        acquire, close = make()
        elapsed = await _timed(acquire, count)
        result = close()
        if isinstance(result, Awaitable):
            await result
        return elapsed

    return asyncio.run(body())


def _permits(module: str) -> Callable[[], Any]:
    def make() -> Any:
        from permits.core import Fifo

        adapter = __import__(f"permits.adapters.{module}", fromlist=["Limiter"])
        limiter = adapter.Limiter(Fifo(), UNLIMITED, BURST)
        return limiter.acquire, limiter.aclose

    return make


def _peer(name: str) -> Callable[[], Any]:
    def make() -> Any:
        sys.path.insert(0, str(ROOT / "bench"))
        from _common import PEERS

        (peer,) = [p for p in PEERS if p.name == name]
        assert peer.make is not None
        return peer.make(UNLIMITED, BURST)

    return make


def asyncio_floor(count: int) -> float:
    async def body() -> float:
        create = asyncio.get_running_loop().create_future
        start = time.perf_counter()
        for _ in range(count):
            future: asyncio.Future[None] = create()
            future.set_result(None)
            await future
        return time.perf_counter() - start

    return asyncio.run(body())


def trio_loop(count: int, floor: bool = False) -> float:
    import trio
    import trio.lowlevel

    from permits.core import Fifo

    async def body() -> float:
        if floor:
            checkpoint = trio.lowlevel.checkpoint
            start = time.perf_counter()
            for _ in range(count):
                await checkpoint()
            return time.perf_counter() - start
        from permits.adapters.trio import open_limiter

        async with open_limiter(Fifo(), UNLIMITED, BURST) as limiter:
            return await _timed(limiter.acquire, count)

    return trio.run(body)


def anyio_loop(count: int) -> float:
    import anyio

    from permits.adapters.anyio import open_limiter
    from permits.core import Fifo

    async def body() -> float:
        async with open_limiter(Fifo(), UNLIMITED, BURST) as limiter:
            return await _timed(limiter.acquire, count)

    result: float = anyio.run(body)
    return result


def threads_loop(count: int, floor: bool = False) -> float:
    if floor:
        lock = threading.Lock()
        clock = time.monotonic_ns
        start = time.perf_counter()
        for _ in range(count):
            with lock:
                clock()
        return time.perf_counter() - start
    from permits.adapters.threads import open_limiter
    from permits.core import Fifo

    with open_limiter(Fifo(), UNLIMITED, BURST) as limiter:
        acquire = limiter.acquire
        for _ in range(1000):
            acquire()
        start = time.perf_counter()
        for _ in range(count):
            acquire()
        return time.perf_counter() - start


LOOPS: dict[str, Callable[[int], float]] = {
    "asyncio": lambda n: _asyncio_loop(_permits("asyncio"), n),
    "aiolimiter": lambda n: _asyncio_loop(_peer("aiolimiter"), n),
    "asynciolimiter": lambda n: _asyncio_loop(_peer("asynciolimiter"), n),
    "asyncio floor": asyncio_floor,
    "trio": trio_loop,
    "trio floor": lambda n: trio_loop(n, floor=True),
    "anyio": anyio_loop,
    "threads": threads_loop,
    "threads floor": lambda n: threads_loop(n, floor=True),
}


def run_child(loop: str, count: int, path: str, valgrind: bool) -> float:
    """Seconds of ``loop`` over ``count`` acquires, or (``valgrind``) its
    process's instructions, in a child with ``path`` first on its path."""
    env = dict(os.environ, PYTHONPATH=path)
    command = [sys.executable, __file__, "--one", loop, str(count)]
    if valgrind:
        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    if valgrind:
        for line in result.stderr.splitlines():
            if "refs:" in line:
                return float(line.split("refs:")[1].replace(",", ""))
        raise AssertionError(result.stderr)
    return float(result.stdout)


def extract(rev: str, into: str) -> str:
    """The ``core`` and ``adapters`` of ``rev``, as one import path."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "core", "adapters"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", into], input=archive.stdout, check=True)
    return f"{into}/core{os.pathsep}{into}/adapters"


def main() -> None:
    from _common import importable

    before = sys.argv[sys.argv.index("--before") + 1] if "--before" in sys.argv else "bd2570e"
    valgrind = shutil.which("valgrind") is not None and "--no-valgrind" not in sys.argv
    here = f"{ROOT / 'core'}{os.pathsep}{ROOT / 'adapters'}"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"One caller, a permit always free; Python {sys.version.split()[0]}, load {load}")
    print()
    with tempfile.TemporaryDirectory() as tmp:
        old = extract(before, tmp)
        rows: list[tuple[str, str, str]] = []
        for loop in LOOPS:
            if loop in ("aiolimiter", "asynciolimiter") and not importable(loop):
                print(f"{loop} is not installed here: left out (see BENCHMARKS.md's set-up)")
                continue
            if loop in ("asyncio", "anyio", "trio", "threads"):
                rows.append((f"{loop} at {before}", loop, old))
            rows.append((loop, loop, here))
        print()
        print("| loop | instructions per acquire | ns per acquire (best of 3) |")
        print("| --- | ---: | ---: |")
        for name, loop, path in rows:
            ns = min(run_child(loop, N, path, False) for _ in range(3)) / N * 1e9
            counted = "-"
            if valgrind:
                per = (run_child(loop, 2 * N, path, True) - run_child(loop, N, path, True)) / N
                counted = f"{per:,.0f}"
            print(f"| {name} | {counted} | {ns:,.0f} |", flush=True)


if __name__ == "__main__":
    check_options(__doc__, "--before", "--no-valgrind", "--one")
    if "--one" in sys.argv:
        at = sys.argv.index("--one")
        print(LOOPS[sys.argv[at + 1]](int(sys.argv[at + 2])))
    else:
        main()
