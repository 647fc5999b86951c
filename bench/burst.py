"""Achieved rate against burst on a real event loop (the asyncio adapter).

    python bench/burst.py

One caller acquires continuously for one second per cell. Event-loop timers
fire late (asyncio's epoll selector rounds timeouts up to whole
milliseconds); with burst 1, strict pacing loses each lateness, so the
achieved rate falls short. A burst that covers the lateness keeps the rate.
"""

from __future__ import annotations

import asyncio
import time

from _options import check_options

from permits.adapters.asyncio import open_limiter
from permits.core import Fifo

RATES = (500, 2_000, 10_000)
BURSTS = (1, 2, 4, 16)


async def achieved(rate: int, burst: int, seconds: float = 1.0) -> float:
    async with open_limiter(Fifo(), rate, burst) as limiter:
        count, start = 0, time.monotonic()
        while time.monotonic() - start < seconds:
            await limiter.acquire()
            count += 1
        return count / (time.monotonic() - start)


async def main() -> None:
    print("| configured | " + " | ".join(f"burst {b}" for b in BURSTS) + " |")
    print("|" + " --- |" * (len(BURSTS) + 1))
    for rate in RATES:
        cells = []
        for burst in BURSTS:
            got = await achieved(rate, burst)
            cells.append(f"{got:,.0f}/s ({(got / rate - 1) * 100:+.1f}%)")
        print(f"| {rate:,}/s | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    check_options(__doc__)
    asyncio.run(main())
