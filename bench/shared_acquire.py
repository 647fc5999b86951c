"""What one uncontended acquire through Redis costs, in instructions: the
client's, or with ``--server`` the Redis server's.

    .venv/bin/python bench/shared_acquire.py           # permits alone; needs valgrind
    /tmp/bench-venv/bin/python bench/shared_acquire.py # with the peers installed there
    .venv/bin/python bench/shared_acquire.py --server  # in redis-server

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

Redis's own work is not counted (another process), but with ``--server``
it alone is: for each number of operations a redis-server of its own runs
under callgrind, from its start to a clean ``SHUTDOWN NOSAVE``, while a
client process does them (the takes alone and redis-py's client left out:
the same script call in Redis), the median of three servers for each.
That server runs ``--hz 1``: what Redis does between calls
(``serverCron``) grows with the time the calls take, which a loaded host
stretches, and at the default ten times a second it moved the figure by
about 1 % from run to run.

An instruction count comes out nearly the same on every run, however busy
the host.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from importlib.metadata import version
from pathlib import Path

from _options import check_options

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "properties"))

import redis.asyncio
from _callgrind import callgrind, instructions, totals
from _common import importable
from shared_peers import PEERS, before

from permits.adapters.redis import SCRIPT, RedisLimit, open_limiter
from permits.core import Fifo

from redis_server import RedisServer, need_redis_server

RATE = 10**6
FEW, MANY = 300, 1300
#: Servers counted per figure in Redis, the median kept.
ROUNDS = 3
KINDS = {
    "acquire": "one acquire of the Redis limiter",
    "acquire-redis-py": "the same, on redis-py's asyncio client",
    "asend": "the same take alone, RedisLimit.asend (reply timeout)",
    "redis-py": "the same take alone on redis-py's asyncio client, no reply timeout",
}
#: Left out of ``--server``: the same script call in Redis as ``acquire``.
SAME_IN_REDIS = {"acquire-redis-py", "asend", "redis-py"}
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
        keys = [limit.key, limit.live_key, limit.audit_key, limit.demand_key]
        keys += [limit.line_key, limit.shares_key]
        keys = keys[: take.keys]  # the keys the limiter names with it
        for _ in range(n):
            await script(keys=keys, args=take.args)
        await client.aclose()
    limit.close()


def main(rev: str | None, tmp: str, server_side: bool) -> None:
    binary = need_redis_server()
    kinds = dict(KINDS)
    path = None if rev is None else before(rev, tmp)[0].path  # --before's code
    for name, peer in OTHERS.items():
        if importable(peer.module):
            kinds[name] = f"one permit, {name} {version(peer.dist)}"
        else:
            print(f"({name} is not installed: left out)\n")
    if server_side:  # each count has a server of its own
        kinds = {kind: label for kind, label in kinds.items() if kind not in SAME_IN_REDIS}
        where = "in redis-server, from its start to SHUTDOWN NOSAVE"
        table(kinds, rev, path, where, partial(in_server, binary=binary))
        return
    server = RedisServer(binary)
    server.start()
    try:
        table(kinds, rev, path, "in the client", partial(in_client, url=server.url))
    finally:
        server.stop()


def table(
    kinds: dict[str, str],
    rev: str | None,
    path: str | None,
    where: str,
    count: Callable[[str, str | None, int], int],
) -> None:
    """Instructions per operation of each kind (the acquires again with
    ``path``'s code, as of ``rev``), ``count(kind, path, n)`` counting
    those of ``n``."""
    print(f"Instructions per operation {where} ({MANY:,} minus {FEW:,}, callgrind)\n")
    print("| operation | instructions |")
    print("| --- | --- |")
    for kind, label in kinds.items():
        versions: list[tuple[str, str | None]] = [(label, None)]
        if path is not None and kind.startswith("acquire"):
            versions.append((f"{label}, as of {rev}", path))
        for shown, code in versions:
            print(f"| {shown} | {per_operation(partial(count, kind, code)):,} |")


def per_operation(count: Callable[[int], int]) -> int:
    """Instructions per operation: ``count(n)`` counts those of ``n``."""
    return (count(MANY) - count(FEW)) // (MANY - FEW)


def on_path(path: str | None) -> dict[str, str]:
    """The environment of a child process, ``path`` first on its path."""
    return dict(os.environ) if path is None else {**os.environ, "PYTHONPATH": path}


def in_client(kind: str, path: str | None, n: int, *, url: str) -> int:
    """Instructions of a client doing ``n`` operations of ``kind``."""
    return instructions(__file__, "--loop", kind, url, str(n), env=on_path(path))


def in_server(kind: str, path: str | None, n: int, *, binary: str) -> int:
    """Instructions of a redis-server of its own, run under callgrind from
    its start to a clean shutdown, while a client does ``n`` operations of
    ``kind``: the median of ``ROUNDS`` servers."""
    return int(statistics.median(one_server(kind, path, n, binary) for _ in range(ROUNDS)))


def one_server(kind: str, path: str | None, n: int, binary: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "callgrind.out")
        server = RedisServer(binary, "--hz", "1", under=callgrind(out))
        server.start()
        try:
            loop_args = ["--loop", kind, server.url, str(n)]
            subprocess.run([sys.executable, __file__, *loop_args], env=on_path(path), check=True)
            server.shutdown()
        finally:
            server.stop()
        return totals(out)


if __name__ == "__main__":
    check_options(__doc__, "--before", "--server", "--hz", "--loop")
    if sys.argv[1:2] == ["--loop"]:
        kind, url, n = sys.argv[2:5]
        asyncio.run(loop(kind, url, int(n)))
    else:
        rev = sys.argv[sys.argv.index("--before") + 1] if "--before" in sys.argv else None
        with tempfile.TemporaryDirectory() as tmp:
            main(rev, tmp, "--server" in sys.argv)
