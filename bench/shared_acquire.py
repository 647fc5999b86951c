"""What one uncontended acquire through Redis costs the client, in instructions.

    .venv/bin/python bench/shared_acquire.py      # needs valgrind

Starts its own redis-server (loopback, persistence off), then counts, under
valgrind's callgrind, the instructions of the client process for 1,300 and
for 300 back-to-back operations and prints the difference over 1,000:

- an ``acquire`` of the asyncio Redis limiter (one caller, a limit that never
  binds: 10**6 permits/s, burst 10**6), the default configuration;
- the same take alone on redis-py's asyncio client (``RedisLimit.asend``,
  with its reply timeout), and without the timeout: what the limiter adds
  is the difference.

Redis's own work is not counted (another process). An instruction count
comes out nearly the same on every run, however busy the host.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "properties"))

from _callgrind import instructions

from permits.adapters.redis import RedisLimit, open_limiter
from permits.core import Fifo

from redis_server import RedisServer, need_redis_server

RATE = 10**6
FEW, MANY = 300, 1300
KINDS = {
    "acquire": "one acquire of the Redis limiter",
    "asend": "the same take alone, RedisLimit.asend (reply timeout)",
    "bare": "the same take alone, no reply timeout",
}


async def loop(kind: str, url: str, n: int) -> None:
    if kind == "acquire":
        async with open_limiter(Fifo(1), url, name="acquire", rate=RATE, burst=RATE) as limiter:
            for _ in range(n):
                await limiter.acquire(0)
        return
    limit = RedisLimit(url, name=kind, rate=RATE, burst=RATE)
    limit.open_async()
    take = limit.ask_take()
    script = limit._ascript
    for _ in range(n):
        if kind == "asend":
            await limit.asend(take)
        else:
            await script(keys=limit._keys, args=take.args)
    await limit.aclose()
    limit.close()


def main() -> None:
    server = RedisServer(need_redis_server())
    server.start()
    try:
        print(f"Instructions per operation in the client ({MANY:,} minus {FEW:,}, callgrind)\n")
        print("| operation | instructions |")
        print("| --- | --- |")
        for kind, label in KINDS.items():
            few = instructions(__file__, "--loop", kind, server.url, str(FEW))
            many = instructions(__file__, "--loop", kind, server.url, str(MANY))
            print(f"| {label} | {(many - few) // (MANY - FEW):,} |")
    finally:
        server.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--loop"]:
        kind, url, n = sys.argv[2:5]
        asyncio.run(loop(kind, url, int(n)))
    else:
        main()
