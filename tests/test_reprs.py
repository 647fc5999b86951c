"""What a user printing the objects of the public API while debugging sees:
what each one is and holds, in a line (``<... object at 0x7f...>`` told
nothing). The machine's and the limiters' own reprs are tested with them."""

from __future__ import annotations

import asyncio

import httpx
import pytest

import permits.testing
from permits.adapters import level, threads
from permits.adapters.asyncio import open_limiter
from permits.aiohttp import PermitsMiddleware
from permits.core import Fifo
from permits.httpx import AsyncPermitsTransport, PermitsTransport

from redis_server import RedisServer

LIMITER = "limits={'units': Limit(rate=Fraction(10, 1), burst=1)} waiting=0>"


def test_a_level_block_reads_as_the_call_that_made_it() -> None:
    assert repr(level(1)) == "level(1)"


def test_a_block_not_entered_says_how_to_enter_it() -> None:
    opening = threads.open_limiter(Fifo(), rate=10)
    assert repr(opening) == "<open_limiter(...) not entered: `with open_limiter(...) as limiter:`>"
    with opening as limiter:
        assert repr(opening) == "<open_limiter(...) entered>"
        assert repr(limiter.permit()) == (
            "<limiter.permit(...) not entered: `with limiter.permit(...) as permit:`>"
        )

    async def main() -> str:
        opening = open_limiter(Fifo(), rate=10)
        async with opening:
            pass
        return repr(open_limiter(Fifo(), rate=10))

    said = permits.testing.run(main())
    assert said == "<open_limiter(...) not entered: `async with open_limiter(...) as limiter:`>"


def test_a_recording_shows_its_counts() -> None:
    with threads.open_limiter(Fifo(), rate=10) as limiter:
        recording = limiter.record(max_calls=1)
        limiter.try_acquire()
        limiter.try_acquire()
        assert repr(recording) == "<Recording calls=1 dropped=1 max_calls=1 limits=('units',)>"
        recording.stop()
        assert repr(recording).endswith(" stopped>")


def test_a_transport_shows_its_limiter_and_options_and_its_upstream_the_counts() -> None:
    def throttled(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"RateLimit-Policy": '"day";q=1000;w=86400'})

    with threads.open_limiter(Fifo(), rate=10) as limiter:
        transport = PermitsTransport(limiter, httpx.MockTransport(throttled), timeout=5.0)
        assert repr(transport) == (
            f"<PermitsTransport limiter=<permits.adapters.threads.Limiter policy=Fifo(levels=1) "
            f"{LIMITER} retries=0 timeout=5.0>"
        )
        with httpx.Client(transport=transport) as client:
            client.get("https://api.example/")
        assert repr(transport.upstream) == (
            "<Upstream throttled=1 pauses=0 backoffs=0 malformed=0 ignored=0 policies=['day']>"
        )

    async def main() -> tuple[str, str]:
        async with open_limiter(Fifo(), rate=10) as limiter:
            transport = AsyncPermitsTransport(limiter, retries=2)
            middleware = PermitsMiddleware(limiter, timeout=60.0)
            return repr(transport), repr(middleware)

    async_transport, middleware = asyncio.run(main())
    kind = "<permits.adapters.asyncio.Limiter policy=Fifo(levels=1) "
    assert async_transport == (
        f"<AsyncPermitsTransport limiter={kind}{LIMITER} retries=2 timeout=None>"
    )
    assert middleware == f"<PermitsMiddleware limiter={kind}{LIMITER} retries=0 timeout=60.0>"


def test_a_redis_limiter_shows_how_many_wait_and_whether_it_is_closed(
    redis_server: RedisServer,
) -> None:
    """The Redis limiter's repr reads as the other limiters' do (their
    ``<module.Class policy=... waiting=N>``, ``closed`` once closed), with
    what is its own: the shared limit, the reserve and the fallback. It
    said neither how many waited nor whether it was closed."""
    import anyio

    pytest.importorskip("redis")
    from permits.adapters.redis import open_limiter
    from permits.core import StrictPriority

    async def main() -> tuple[str, str, str]:
        async with open_limiter(
            StrictPriority(2), redis_server.url, name="reprs", rate=1, burst=1, reserve=(0, 0)
        ) as limiter:
            await limiter.acquire(0)  # the bucket is empty now

            async def wait() -> None:
                await limiter.acquire(1)

            async with anyio.create_task_group() as group:
                group.start_soon(wait)
                await anyio.sleep(0.05)
                waiting = repr(limiter)
                group.cancel_scope.cancel()
            idle = repr(limiter)
        return waiting, idle, repr(limiter)

    waiting, idle, closed = anyio.run(main)
    shared = (
        "<permits.adapters.redis.RedisLimiter policy=StrictPriority(levels=2) "
        f"limit=RedisLimit(url={redis_server.url!r}, key='permits:{{reprs}}', "
        "rate=Fraction(1, 1), burst=1) reserve=(0, 0) on_unavailable='closed'"
    )
    assert waiting == f"{shared} waiting=1>"
    assert idle == f"{shared} waiting=0>"
    assert closed == f"{shared} closed>"


class _Hidden(Exception):
    """An error whose repr hides its message, as redis-py's do
    (``server:ResponseError``)."""

    def __repr__(self) -> str:
        return f"server:{type(self).__name__}"


def test_a_limiter_closed_says_its_causes_type_and_message() -> None:
    """``LimiterClosed`` says why the limiter broke: the cause's type and
    message, whatever the cause's repr shows (redis-py's shows neither the
    message nor Redis's reply: ``the limiter broke: server:ResponseError``)."""
    from permits.adapters import LimiterClosed

    assert str(LimiterClosed(_Hidden("WRONGTYPE on the key"))) == (
        "the limiter broke: _Hidden: WRONGTYPE on the key"
    )
    assert str(LimiterClosed(ValueError())) == "the limiter broke: ValueError"
    assert str(LimiterClosed()) == "the limiter is closed"
