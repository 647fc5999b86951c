"""What one uncontended acquire through Redis costs the client, in instructions.

    .venv/bin/python bench/shared_acquire.py           # permits alone; needs valgrind
    /tmp/bench-venv/bin/python bench/shared_acquire.py # with the peers installed there

Starts its own redis-server (loopback, persistence off), then counts, under
valgrind's callgrind, the instructions of the client process for 1,300 and
for 300 back-to-back operations and prints the difference over 1,000:

- an ``acquire`` of the asyncio Redis limiter (one caller, a limit that never
  binds: 10**6 permits/s, burst 10**6), the default configuration, on the
  limiter's own small client (``permits.adapters._resp``);
- the same acquire on redis-py's asyncio client (the URL given a query
  string, which the small client leaves to redis-py);
- the same take alone (``RedisLimit.asend``, with its reply timeout), and
  alone on redis-py's asyncio client without a timeout: what the limiter
  adds to a round trip is the difference;
- one permit from each peer of ``bench/shared_peers.py`` that is installed
  (throttled-py's GCRA, limits' moving window), as that script takes them.

``--before REV``: the two acquires again as of commit ``REV`` (its ``core``
and ``adapters`` extracted with ``git archive``, first on the path).

Redis's own work is not counted (another process). An instruction count
comes out nearly the same on every run, however busy the host.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "properties"))

import redis.asyncio
from _callgrind import instructions
from _common import importable
from shared_peers import PEERS, before

from permits.adapters.redis import SCRIPT, RedisLimit, open_limiter
from permits.core import Fifo

from redis_server import RedisServer, need_redis_server

RATE = 10**6
FEW, MANY = 300, 1300
KINDS = {
    "acquire": "one acquire of the Redis limiter",
    "acquire-redis-py": "the same, on redis-py's asyncio client",
    "asend": "the same take alone, RedisLimit.asend (reply timeout)",
    "redis-py": "the same take alone on redis-py's asyncio client, no reply timeout",
}
#: A query string sends the limiter to redis-py's client (see _resp.speaks).
REDIS_PY = "?client_name=bench"


#: The peers, by the name the table gives them.
OTHERS = {peer.name: peer for peer in PEERS if not peer.name.startswith("permits")}


async def loop(kind: str, url: str, n: int) -> None:
    if kind in OTHERS:
        async with OTHERS[kind].open(url, "peer") as acquire:
            for _ in range(n):
                assert await acquire()
        return
    if kind.startswith("acquire"):
        if kind == "acquire-redis-py":
            url += REDIS_PY
        async with open_limiter(Fifo(1), url, name="acquire", rate=RATE, burst=RATE) as limiter:
            for _ in range(n):
                await limiter.acquire(0)
        return
    limit = RedisLimit(url, name=kind, rate=RATE, burst=RATE)
    take = limit.ask_take()
    if kind == "asend":
        limit.open_async()
        for _ in range(n):
            await limit.asend(take)
        await limit.aclose()
    else:
        client = redis.asyncio.Redis.from_url(url)
        script = client.register_script(SCRIPT)
        keys = [limit.key, limit.audit_key, limit.live_key, limit.demand_key]
        keys += [limit.line_key, limit.shares_key]
        for _ in range(n):
            await script(keys=keys, args=take.args)
        await client.aclose()
    limit.close()


def main(rev: str | None, tmp: str) -> None:
    server = RedisServer(need_redis_server())
    server.start()
    try:
        kinds = dict(KINDS)
        path = None if rev is None else before(rev, tmp)[0].path  # --before's code
        for name, peer in OTHERS.items():
            if importable(peer.module):
                kinds[name] = f"one permit, {name} {version(peer.dist)}"
            else:
                print(f"({name} is not installed: left out)\n")
        print(f"Instructions per operation in the client ({MANY:,} minus {FEW:,}, callgrind)\n")
        print("| operation | instructions |")
        print("| --- | --- |")
        for kind, label in kinds.items():
            print(f"| {label} | {counted(kind, server.url):,} |")
            if path is not None and kind.startswith("acquire"):
                print(f"| {label}, as of {rev} | {counted(kind, server.url, path):,} |")
    finally:
        server.stop()


def counted(kind: str, url: str, path: str | None = None) -> int:
    """Instructions per operation of ``kind`` (``path`` first on the child's path)."""
    if path is not None:
        os.environ["PYTHONPATH"] = path
    try:
        few = instructions(__file__, "--loop", kind, url, str(FEW))
        many = instructions(__file__, "--loop", kind, url, str(MANY))
    finally:
        if path is not None:
            del os.environ["PYTHONPATH"]
    return (many - few) // (MANY - FEW)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--loop"]:
        kind, url, n = sys.argv[2:5]
        asyncio.run(loop(kind, url, int(n)))
    else:
        rev = sys.argv[sys.argv.index("--before") + 1] if "--before" in sys.argv else None
        with tempfile.TemporaryDirectory() as tmp:
            main(rev, tmp)
