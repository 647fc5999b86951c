"""The asyncio adapter beside the peers, in real time: rate kept, CPU, FIFO order.

    python bench/peers.py [--quick]
    python bench/peers.py --cpu-repeats N [--quick]

The peers (``aiolimiter``, ``asynciolimiter``, ``pyrate-limiter``,
``aiometer``) are compared only if installed; a missing one gets a row that
says so. Every limiter does one job: ``CALLERS`` tasks acquiring
continuously at 1,000 and 10,000 permits/s for ``PEER_SECONDS``, each
configured for the same sustained rate and a burst of ``PEER_BURST``.
*Achieved* is the steady rate (the grants after the first 10% of the run);
*CPU* is process time (``time.process_time()``) per permit. *FIFO*:
``FIFO_ARRIVALS`` tasks start waiting one after another, faster than the
limiter serves them; each takes a ticket as it calls acquire, and a grant is
*overtaken* if its caller resumed after one with a later ticket.

``--cpu-repeats N``: the CPU per permit only, N runs per limiter and rate,
the limiters taking turns; median, min and max.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import statistics
import sys
import time

import anyio
from _common import (
    CALLERS,
    PEER_BURST,
    PEER_RATES,
    PEERS,
    QUICK,
    Make,
    Run,
    achieved,
    close_limiter,
    footer,
    header,
    installed,
    ns,
    skipped,
    version,
)
from _options import check_options

PEER_SECONDS = 1.0 if QUICK else 3.0
FIFO_RATE = 1_000
FIFO_ARRIVALS = 300


def peer_run(make: Make, rate: int, seconds: float) -> Run:
    async def body() -> Run:
        acquire, close = make(rate, PEER_BURST)
        loop = asyncio.get_running_loop()
        grants: list[tuple[int, int]] = []
        permits = [0]
        start = ns(loop.time())
        end = start + round(seconds * 1e9)
        cpu = time.process_time()

        async def caller() -> None:
            while True:
                asked = ns(loop.time())
                await acquire()
                permits[0] += 1
                resumed = ns(loop.time())
                if resumed >= end:
                    return
                grants.append((resumed, asked))

        await asyncio.gather(*(caller() for _ in range(CALLERS)))
        cpu = time.process_time() - cpu
        await close_limiter(close)
        return Run(start, end, grants, cpu, permits[0])

    return asyncio.run(body())


def aiometer_run(rate: int, seconds: float) -> Run:
    """aiometer has no acquire(): it starts a list of jobs, max_per_second at most."""
    aiometer = importlib.import_module("aiometer")

    async def body() -> Run:
        loop = asyncio.get_running_loop()
        grants: list[tuple[int, int]] = []
        permits = [0]
        start = ns(loop.time())
        end = start + round(seconds * 1e9)

        async def job(_: int) -> None:
            permits[0] += 1
            resumed = ns(loop.time())
            if resumed < end:
                grants.append((resumed, start))

        cpu = time.process_time()
        with anyio.move_on_after(seconds + 0.05):
            jobs = range(int(rate * seconds * 2) + 100)
            await aiometer.run_on_each(job, jobs, max_per_second=rate)
        cpu = time.process_time() - cpu
        return Run(start, end, grants, cpu, permits[0])

    return asyncio.run(body())


def fifo_run(make: Make) -> tuple[int, int]:
    """FIFO_ARRIVALS tasks start waiting one after another, faster than the
    rate serves them, each acquiring once: (grants overtaken, grants).

    A task takes its ticket as it calls acquire (each starts, and waits or is
    granted, before the next is created); a grant is overtaken if its caller
    resumed after a caller with a later ticket."""

    async def body() -> tuple[int, int]:
        acquire, close = make(FIFO_RATE, PEER_BURST)
        served: list[int] = []

        async def one(ticket: int) -> None:
            await acquire()
            served.append(ticket)

        tasks = []
        for ticket in range(FIFO_ARRIVALS):
            tasks.append(asyncio.create_task(one(ticket)))
            # about 3 arrivals per millisecond against FIFO_RATE permits per second
            await asyncio.sleep(0.001 if ticket % 3 == 2 else 0)
        await asyncio.gather(*tasks)
        await close_limiter(close)
        highest = -1
        overtaken = 0
        for ticket in served:
            if ticket < highest:
                overtaken += 1
            highest = max(highest, ticket)
        return overtaken, len(served)

    return asyncio.run(body())


def main() -> None:
    print(
        f"Peers under asyncio: {CALLERS} callers acquiring continuously, "
        f"{PEER_SECONDS:g} s per rate, burst {PEER_BURST}"
    )
    print()
    print(
        f"*FIFO*: {FIFO_ARRIVALS} tasks start waiting one after another, about 3 per ms, "
        f"at {FIFO_RATE:,}/s; each acquires once; *overtaken* = grants whose caller "
        "resumed after one that started waiting later."
    )
    print()
    print("| limiter | configured as | rate/s | achieved/s | error | CPU µs/permit | FIFO |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    missing: list[str] = []
    for peer in PEERS:
        config = peer.config.format(burst=PEER_BURST)
        if not installed(peer):
            missing.append(peer.name)
            print(f"| {peer.name} | not installed | | | | | |")
            continue
        name = version(peer)
        if peer.make is None:
            fifo = "n/a: no acquire(); one loop starts the jobs in list order"
        else:
            overtaken, total = fifo_run(peer.make)
            fifo = "held" if not overtaken else f"broken: {overtaken} of {total} overtaken"
        for rate in PEER_RATES:
            gc.collect()
            try:
                if peer.make is None:
                    run = aiometer_run(rate, PEER_SECONDS)
                else:
                    run = peer_run(peer.make, rate, PEER_SECONDS)
            except Exception as error:
                print(f"| {name} | {config} | {rate:,} | failed: {error!r} | | | |")
                continue
            got = achieved(run)
            print(
                f"| {name} | {config} | {rate:,} | {got:,.1f} "
                f"| {(got / rate - 1) * 100:+.2f}% "
                f"| {run.cpu / max(run.permits, 1) * 1e6:.1f} | {fifo} |"
            )
    print()
    skipped(missing)


def cpu_repeats(repeats: int, seconds: float = PEER_SECONDS / 2) -> None:
    """``--cpu-repeats N``: the peers' CPU time per permit only, N times over,
    the limiters taking turns, so that the noise of a shared machine (one run
    can cost twice another) falls on all of them alike; median, min, max."""
    available = [(p.name, p.make) for p in PEERS if p.make is not None and installed(p)]
    runs: dict[tuple[str, int], list[float]] = {}
    for repeat in range(repeats):
        # Rotate who goes first: the first run after a pause tends to cost more.
        turn = repeat % len(available)
        for name, make in available[turn:] + available[:turn]:
            assert make is not None
            for rate in PEER_RATES:
                gc.collect()
                run = peer_run(make, rate, seconds)
                runs.setdefault((name, rate), []).append(run.cpu / max(run.permits, 1) * 1e6)
    print(
        f"CPU µs per permit, {CALLERS} callers, burst {PEER_BURST}, {seconds:g} s a run, "
        f"{repeats} runs each, the limiters taking turns (who goes first rotates)"
    )
    print()
    print("| limiter | rate/s | median | min | max |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for (name, rate), values in runs.items():
        print(
            f"| {name} | {rate:,} | {statistics.median(values):.1f} | "
            f"{min(values):.1f} | {max(values):.1f} |"
        )
    print()


if __name__ == "__main__":
    check_options(__doc__, "--quick", "--cpu-repeats")
    started = header()
    if "--cpu-repeats" in sys.argv:
        cpu_repeats(int(sys.argv[sys.argv.index("--cpu-repeats") + 1]))
    else:
        main()
    footer(started)
