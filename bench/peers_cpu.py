"""CPU per permit of each limiter on a virtual clock, beside two reference limiters.

    python bench/peers_cpu.py [--quick] [--no-valgrind]

The job of ``bench/peers.py`` (``CALLERS`` tasks acquiring continuously,
burst ``PEER_BURST``) on an asyncio loop whose clock is virtual: it never
sleeps, every timer fires exactly on time, and no system call waits, so what
is left is the Python each limiter runs per permit, with asyncio's own.
*CPU*: process time per permit, best of three runs. *Instructions* (when
valgrind is on the machine, unless ``--no-valgrind``): counted by callgrind,
the difference between runs of ``2 * PERMITS`` and ``PERMITS`` permits, per
permit, so start-up cancels out; nearly the same count on every run
(``--count-one NAME RATE N``: the process callgrind counts, one limiter's
run of ``N`` permits at ``RATE``, printing nothing; run it under valgrind
to count one limiter by hand). Only the
limiters that read the loop's clock can run here: the asyncio adapter,
``aiolimiter`` and ``asynciolimiter`` (those installed), and the anyio
adapter on the same asyncio loop (opened for the run, its task group
around the callers: the anyio adapter within 1.3x of the asyncio one is
a target). Two rows from
``_reference.py`` follow: the flat limiter (only the steps this library's
promises need) and the bare pacer (only asyncio's part of a permit).
"""

from __future__ import annotations

import asyncio
import math
import selectors
import shutil
import sys
import time
from typing import Any

from _callgrind import instructions as instructions_of
from _common import (
    CALLERS,
    PEER_BURST,
    PEER_RATES,
    PEERS,
    QUICK,
    REPEAT,
    Acquire,
    Make,
    close_limiter,
    footer,
    header,
    installed,
    skipped,
    version,
)
from _options import check_options
from _reference import make_bare_pacer, make_flat

import permits.adapters.anyio as permits_anyio
from permits.core import Fifo


class _NeverSleeps(selectors.DefaultSelector):
    """A selector that never blocks: a wait of ``t`` seconds moves the virtual
    clock on by ``t`` (whole nanoseconds, at least one, so that time always
    moves, as a real clock does between two passes of the loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.ns = 0

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout is None:
            raise RuntimeError("nothing is scheduled: the job would never end")
        self.ns += max(1, math.ceil(timeout * 1e9))
        return super().select(0)


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An asyncio loop on a virtual clock: no sleeping, no timer lateness."""

    def __init__(self) -> None:
        self._never_sleeps = _NeverSleeps()
        super().__init__(self._never_sleeps)

    def time(self) -> float:
        return self._never_sleeps.ns / 1e9


#: Reference rows, run after the peers: (name, make).
REFERENCES: tuple[tuple[str, Make], ...] = (
    ("reference: flat limiter (the promises' steps, nothing else)", make_flat),
    ("floor: bare pacer (a future and a timer per permit, no limiter)", make_bare_pacer),
)


#: Peers that read the loop's clock (pyrate-limiter reads the system clock and
#: cannot run on a virtual one; aiometer has no acquire).
ON_VIRTUAL_CLOCK = ("permits (asyncio adapter)", "aiolimiter", "asynciolimiter")
PERMITS = 5_000 if QUICK else 20_000


#: The anyio adapter's row: opened (its task group running) for the run.
ANYIO = "permits (anyio adapter on asyncio)"


def virtual_run(make: Make | None, rate: int, permits: int) -> tuple[float, int]:
    """``CALLERS`` tasks acquire until ``permits`` are granted, on a virtual
    clock: (process CPU seconds, permits granted). ``make=None``: the
    anyio adapter's."""

    async def job(acquire: Acquire) -> tuple[float, int]:
        granted = [0]

        async def caller() -> None:
            while granted[0] < permits:
                await acquire()
                granted[0] += 1

        cpu = time.process_time()
        await asyncio.gather(*(caller() for _ in range(CALLERS)))
        return time.process_time() - cpu, granted[0]

    async def body() -> tuple[float, int]:
        if make is None:
            async with permits_anyio.open_limiter(Fifo(1), rate, PEER_BURST) as limiter:
                return await job(limiter.acquire)
        acquire, close = make(rate, PEER_BURST)
        result = await job(acquire)
        await close_limiter(close)
        return result

    loop = VirtualClockLoop()
    try:
        return loop.run_until_complete(body())
    finally:
        loop.close()


def _instructions(name: str, rate: int, permits: int) -> int:
    """Instructions (callgrind) of one process that runs ``virtual_run``."""
    return instructions_of(__file__, "--count-one", name, str(rate), str(permits))


def main() -> None:
    print(
        f"CPU per permit on a virtual clock: {CALLERS} callers acquiring "
        f"continuously, burst {PEER_BURST}"
    )
    print()
    print(
        "The job of bench/peers.py on an asyncio loop whose clock is virtual: it never "
        "sleeps, every timer fires exactly on time, and no system call waits, so what "
        "is left is the Python each limiter runs per permit, with asyncio's own. "
        f"*CPU*: process time per permit, best of {REPEAT} runs of "
        f"{PERMITS:,} permits. *Instructions*: counted by valgrind's callgrind, "
        f"the difference between runs of {2 * PERMITS:,} and "
        f"{PERMITS:,} permits per permit, so start-up cancels out; the same "
        "count on every run, whatever else the machine does. Two reference rows "
        "follow the peers: a *flat limiter*, an ideal one doing only the steps this "
        "library's promises need (strict priority, exact pacing, the wait histogram, "
        "the refund log and the spend), and the *floor*, a bare pacer doing only "
        "asyncio's part (a future and a timer per permit)."
    )
    print()
    counting = shutil.which("valgrind") is not None and "--no-valgrind" not in sys.argv
    print("| limiter | rate/s | CPU µs/permit | instructions/permit |")
    print("| --- | ---: | ---: | ---: |")
    rows: list[tuple[str, str, Make | None]] = []
    missing: list[str] = []
    for peer in PEERS:
        if peer.name not in ON_VIRTUAL_CLOCK or peer.make is None:
            continue
        if not installed(peer):
            missing.append(peer.name)
            continue
        rows.append((version(peer), peer.name, peer.make))
    rows.insert(1, (ANYIO, ANYIO, None))
    rows += [(name, name, make) for name, make in REFERENCES]
    for label, key, make in rows:
        for rate in PEER_RATES:
            runs = [virtual_run(make, rate, PERMITS) for _ in range(REPEAT)]
            cpu = min(spent / granted for spent, granted in runs)
            count = "not counted (no valgrind)"
            if counting:
                small = _instructions(key, rate, PERMITS)
                large = _instructions(key, rate, 2 * PERMITS)
                count = f"{(large - small) / PERMITS:,.0f}"
            print(f"| {label} | {rate:,} | {cpu * 1e6:.2f} | {count} |")
    print()
    skipped(missing)


if __name__ == "__main__":
    check_options(__doc__, "--quick", "--no-valgrind", "--count-one")
    if "--count-one" in sys.argv:
        at = sys.argv.index("--count-one")
        name, rate, count = sys.argv[at + 1], int(sys.argv[at + 2]), int(sys.argv[at + 3])
        makers = [(p.name, p.make) for p in PEERS] + [*REFERENCES, (ANYIO, None)]
        make = next(m for n, m in makers if n == name)
        virtual_run(make, rate, count)
        raise SystemExit(0)
    started = header()
    main()
    footer(started)
