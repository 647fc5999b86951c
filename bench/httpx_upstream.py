"""Against a real server that enforces its own limit, how close does each client get?

    python bench/httpx_upstream.py [--seconds S] [--quick]

A server on loopback (a child process, so that it does not share the
clients' interpreter) serves ``RATE`` requests a second from a token bucket
of ``BURST``; a request over the limit gets a 429 with ``Retry-After: 1``,
every answer the ``x-ratelimit-remaining-requests`` and
``x-ratelimit-reset-requests`` headers. Three clients, each against a fresh
server for ``S`` seconds (default 10), ``TASKS`` tasks each sending one
request after another, one task in ten interactive:

- *naive*: no limiter;
- *aiolimiter*: ``AsyncLimiter`` at the nominal rate, 20% above the true
  one (what a user configures from the docs);
- *permits.httpx*: ``AsyncPermitsTransport`` over an asyncio limiter at the
  same nominal rate, strict priority (interactive first), retries on: it
  pauses on a 429 for its ``Retry-After`` and adopts the remaining/reset
  headers.

Per client: the 429s received (all, and after the first), the requests
completed (200s) per second against the server's true rate, and the p99 of
an interactive request from its first send to its 200 (retries included).
aiolimiter is compared only if installed.
"""

from __future__ import annotations

import asyncio
import importlib
import math
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from _options import check_options

from permits.adapters import asyncio as asyncio_adapter
from permits.core import Limit, StrictPriority
from permits.httpx import AsyncPermitsTransport

RATE = 50  # the server's true rate, requests/s
BURST = 5
NOMINAL = RATE * 1.2  # what the clients are told
TASKS = 20
INTERACTIVE_EVERY = 10  # one task in ten is interactive


def serve(rate: float, burst: int) -> None:
    """The server: prints its port, serves until stdin closes."""
    lock = threading.Lock()
    state = {"tokens": float(burst), "then": time.monotonic()}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            with lock:
                now = time.monotonic()
                state["tokens"] = min(burst, state["tokens"] + (now - state["then"]) * rate)
                state["then"] = now
                ok = state["tokens"] >= 1
                if ok:
                    state["tokens"] -= 1
                left = state["tokens"]
            status = 200 if ok else 429
            self.send_response(status)
            if not ok:
                self.send_header("Retry-After", "1")
            self.send_header("x-ratelimit-remaining-requests", str(int(left)))
            reset = (burst - left) / rate  # until the bucket is full again
            self.send_header("x-ratelimit-reset-requests", f"{reset:.3f}s")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    print(httpd.server_address[1], flush=True)
    sys.stdin.read()
    httpd.shutdown()


class Tally:
    """What one client saw."""

    def __init__(self) -> None:
        #: When each 429 reached the caller (s into the run).
        self.throttled: list[float] = []
        #: 429s the client received in all, when its transport retries them
        #: itself (the caller never sees those).
        self.retried: int | None = None
        #: When each request completed with its 200.
        self.completed: list[float] = []
        #: Each interactive request's time from first send to its 200.
        self.interactive: list[float] = []


async def drive(
    seconds: float,
    send: Callable[[httpx.AsyncClient, bool], Coroutine[Any, Any, httpx.Response]],
    client: httpx.AsyncClient,
    tally: Tally,
) -> None:
    start = time.monotonic()
    stop = start + seconds

    async def task(interactive: bool) -> None:
        while time.monotonic() < stop:
            began = time.monotonic()
            while True:
                response = await send(client, interactive)
                now = time.monotonic()
                if response.status_code != 429:
                    break
                tally.throttled.append(now - start)
                if now >= stop:
                    return
            if now < stop:
                tally.completed.append(now - start)
                if interactive:
                    tally.interactive.append(now - began)

    await asyncio.gather(*(task(i % INTERACTIVE_EVERY == 0) for i in range(TASKS)))


def run(name: str, seconds: float) -> Tally:
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(RATE), str(BURST)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}/"
        tally = Tally()
        asyncio.run(CLIENTS[name](url, seconds, tally))
        return tally
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)


async def naive(url: str, seconds: float, tally: Tally) -> None:
    async def send(client: httpx.AsyncClient, interactive: bool) -> httpx.Response:
        return await client.get(url)

    async with httpx.AsyncClient() as client:
        await drive(seconds, send, client, tally)


async def with_aiolimiter(url: str, seconds: float, tally: Tally) -> None:
    limiter = importlib.import_module("aiolimiter").AsyncLimiter(NOMINAL, 1)

    async def send(client: httpx.AsyncClient, interactive: bool) -> httpx.Response:
        async with limiter:
            return await client.get(url)

    async with httpx.AsyncClient() as client:
        await drive(seconds, send, client, tally)


async def with_permits(url: str, seconds: float, tally: Tally) -> None:
    limits = {"requests": Limit(NOMINAL, burst=BURST)}
    async with asyncio_adapter.open_limiter(StrictPriority(2), limits=limits) as limiter:
        transport = AsyncPermitsTransport(limiter, retries=10)

        async def send(client: httpx.AsyncClient, interactive: bool) -> httpx.Response:
            return await client.get(url, extensions={"permits.level": 0 if interactive else 1})

        async with httpx.AsyncClient(transport=transport) as client:
            await drive(seconds, send, client, tally)
        tally.retried = transport.upstream.throttled


CLIENTS: dict[str, Callable[[str, float, Tally], Coroutine[Any, Any, None]]] = {
    "naive (no limiter)": naive,
    f"aiolimiter at {NOMINAL:g}/s": with_aiolimiter,
    f"permits.httpx at {NOMINAL:g}/s": with_permits,
}


def p99(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)] * 1000:,.0f}"


def main() -> None:
    seconds = 3.0 if "--quick" in sys.argv else 10.0
    if "--seconds" in sys.argv:
        seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
    print(
        f"Server: {RATE} requests/s, burst {BURST}, Retry-After 1 s; {TASKS} tasks for "
        f"{seconds:g} s each; Python {sys.version.split()[0]}, httpx {httpx.__version__}"
    )
    print()
    print(
        "| client | 429s received | 429s after the first | completed/s | "
        "x true rate | interactive p99 (ms) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in CLIENTS:
        try:
            if "aiolimiter" in name:
                importlib.import_module("aiolimiter")
        except ImportError:
            print(f"| {name} | not installed | | | | |")
            continue
        tally = run(name, seconds)
        throttled = len(tally.throttled) if tally.retried is None else tally.retried
        rate = len(tally.completed) / seconds
        print(
            f"| {name} | {throttled:,} | {max(0, throttled - 1):,} | {rate:,.1f} | "
            f"{rate / RATE:.3f} | {p99(tally.interactive)} |"
        )


if __name__ == "__main__":
    check_options(__doc__, "--quick", "--seconds", "--serve")
    if "--serve" in sys.argv:
        at = sys.argv.index("--serve")
        serve(float(sys.argv[at + 1]), int(sys.argv[at + 2]))
    else:
        main()
