"""One process sharing a Redis limit: a batch backlog and interactive calls.

Run by ``test_redis.py`` (several at once, each a real process):

    python tests/redis_worker.py URL NAME --backend trio --reserve 0,2 \
        [--global-priority] [--book-ahead 0.1] [--demand-ttl 1] [--announce] ...

Waits until ``--start-at`` (wall clock, so that all processes start
together), queues ``--batch`` batch calls, makes interactive calls at Poisson
times (``--interactive`` per second) for ``--seconds``, and prints one line
of JSON: the interactive waits, what was granted, the round trips made.
With ``--announce`` it first prints one line of JSON naming its process as
the demand hash and the line name it, once the limiter is open, and a
second with the time (wall clock) it starts, which a loaded host may make
later than ``--start-at``.
"""

from __future__ import annotations

import argparse
import json
import time

import anyio

from permits.adapters.redis import open_limiter
from permits.core import StrictPriority
from permits.sim import Poisson, nanoseconds

INTERACTIVE, BATCH = 0, 1


async def work(args: argparse.Namespace) -> dict[str, object]:
    reserve = tuple(int(r) for r in args.reserve.split(","))
    waits: list[float] = []
    granted = {"interactive": 0, "batch": 0}
    async with open_limiter(
        StrictPriority(2),
        args.url,
        name=args.name,
        rate=args.rate,
        burst=args.burst,
        reserve=reserve,
        global_priority=args.global_priority,
        book_ahead=args.book_ahead,
        demand_ttl=args.demand_ttl,
        audit=True,
    ) as limiter:
        if args.announce:
            print(json.dumps({"process": limiter.limit.process}), flush=True)

        async def batch() -> None:
            await limiter.acquire(BATCH)
            granted["batch"] += 1

        async def interactive() -> None:
            start = anyio.current_time()
            await limiter.acquire(INTERACTIVE)
            waits.append(anyio.current_time() - start)
            granted["interactive"] += 1

        await anyio.sleep(max(0.0, args.start_at - time.time()))
        t0 = anyio.current_time()
        if args.announce:  # when it starts (wall clock): late on a busy host
            print(json.dumps({"started": time.time()}), flush=True)
        offered = 0
        async with anyio.create_task_group() as tg:
            for _ in range(args.batch):
                tg.start_soon(batch)
            # the last interactive call 0.2 s before the end: time to serve it
            end = nanoseconds("seconds", args.seconds - 0.2)
            for at in Poisson(args.interactive).times(args.seed):
                if at >= end:
                    break
                await anyio.sleep_until(t0 + at / 1e9)
                tg.start_soon(interactive)
                offered += 1
            await anyio.sleep_until(t0 + args.seconds)
            tg.cancel_scope.cancel()
        round_trips, given_back = limiter.round_trips, limiter.given_back
    return {
        "given_back": given_back,
        "waits": waits,
        "offered": offered,
        "granted": granted,
        "round_trips": round_trips,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("name")
    parser.add_argument("--backend", default="asyncio")
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--burst", type=int, default=10)
    parser.add_argument("--reserve", default="0,0")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--interactive", type=float, default=10)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start-at", type=float, default=0.0)
    parser.add_argument("--global-priority", action="store_true")
    parser.add_argument("--book-ahead", type=float, default=0.0)
    parser.add_argument("--demand-ttl", type=float, default=2.0)
    parser.add_argument("--announce", action="store_true")
    args = parser.parse_args()
    print(json.dumps(anyio.run(work, args, backend=args.backend)))


if __name__ == "__main__":
    main()
