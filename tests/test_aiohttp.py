"""permits.aiohttp against the real HTTP server on loopback of
``http_upstream`` (its own token bucket, 429 with Retry-After,
remaining/reset headers). Real time, so the checks are counts and orders a
loaded machine cannot change."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import aiohttp
import pytest
from http_upstream import (
    Hangup,
    Parts,
    Script,
    Upstream_,
    closed_port,
    serve,
    serve_hangup,
    serve_parts,
    serve_script,
)

from permits import testing
from permits.adapters import asyncio as asyncio_adapter
from permits.adapters import level, threads
from permits.adapters import redis as redis_adapter
from permits.aiohttp import PermitsMiddleware
from permits.core import Fifo, Limit, PermitTypeError, PermitValueError, StrictPriority

from redis_server import RedisServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def server() -> Iterator[tuple[str, Upstream_]]:
    limit = Upstream_(rate=10, burst=2)
    with serve(limit) as url:
        yield url, limit


def test_a_middlewares_options_are_fixed_once_made() -> None:
    """Its arguments are checked when it is made; one set later was taken
    unchecked (``retries = -1`` then broke every request): each is refused,
    naming it, and the middleware is as it was. Its upstream's jitter and
    max_pause are checked as they are set."""

    async def main() -> None:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter:
            middleware = PermitsMiddleware(limiter, retries=2)
            for name, value in [("retries", -1), ("timeout", "soon"), ("cost", 5)]:
                with pytest.raises(AttributeError, match=rf"^{name}: a PermitsMiddleware is fixed"):
                    setattr(middleware, name, value)
            assert (middleware.retries, middleware.timeout, middleware.cost) == (2, None, None)
            with pytest.raises(PermitTypeError, match=r"^jitter="):
                middleware.upstream.jitter = 5  # type: ignore[assignment]

    asyncio.run(main())


def after_one_get(
    answer: tuple[int, dict[str, Any]], **options: Any
) -> tuple[bool, float, PermitsMiddleware]:
    """One GET through the middleware of a limiter opened with ``options``
    (Fifo, rate 100 and burst 10 unless given) from a server that answers
    ``answer`` (status, headers): whether a permit is free then, the pause
    left then, and the middleware (its ``upstream``'s counts)."""
    options = options or {"rate": 100, "burst": 10}

    async def main() -> tuple[bool, float, PermitsMiddleware]:
        async with asyncio_adapter.open_limiter(Fifo(), **options) as limiter:
            permits = PermitsMiddleware(limiter)
            async with (
                aiohttp.ClientSession(middlewares=(permits,)) as session,
                session.get(url) as response,
            ):
                assert response.status == answer[0]
            return limiter.try_acquire(), limiter.pause_left(), permits

    with serve_script(Script(answer)) as url:
        return asyncio.run(main())


def test_a_429_pauses_everyone_and_the_request_is_retried(
    server: tuple[str, Upstream_],
) -> None:
    """A limiter configured twice as fast as the server: the first 429 pauses
    every task for its Retry-After, the remaining/reset headers keep the
    limiter from sending what the server would refuse, every request ends
    in a 200, and each 429 cost one pause."""
    url, upstream = server

    async def main() -> list[int]:
        async with asyncio_adapter.open_limiter(
            Fifo(), limits={"requests": Limit(20, burst=2)}
        ) as limiter:
            permits = PermitsMiddleware(limiter, retries=5)
            async with aiohttp.ClientSession(middlewares=(permits,)) as session:

                async def get() -> int:
                    async with session.get(url) as response:
                        await response.read()
                        return response.status

                statuses = await asyncio.gather(*(get() for _ in range(12)))
            assert permits.upstream.pauses == upstream.rejected
            return list(statuses)

    assert asyncio.run(main()) == [200] * 12
    assert upstream.served == 12
    # the headers cap what the limiter sends: far fewer 429s than requests
    assert upstream.rejected <= 4, upstream.rejected


def test_the_permit_is_settled_from_the_body_and_levels_come_from_the_context(
    server: tuple[str, Upstream_],
) -> None:
    url, upstream = server
    # the server's x-ratelimit-*-requests headers reach the first limit,
    # "calls" (none is named "requests"), not the tokens: only the settle
    # moves those
    limits = {"calls": Limit(100, burst=10), "tokens": Limit(1000, burst=100)}
    seen: list[tuple[int, bytes]] = []

    def settle(response: aiohttp.ClientResponse, body: bytes) -> dict[str, int]:
        seen.append((response.status, body))
        return {"calls": 1, "tokens": 7}

    async def main() -> tuple[Any, bool, int]:
        async with asyncio_adapter.open_limiter(
            StrictPriority(2), limits=limits, settle_window=60.0
        ) as limiter:
            permits = PermitsMiddleware(
                limiter, cost=lambda request: {"calls": 1, "tokens": 100}, settle=settle
            )
            async with aiohttp.ClientSession(middlewares=(permits,)) as session:
                with level(1):
                    async with session.post(url, json={"prompt": "hi"}) as response:
                        body = await response.json()  # the body read for settle, again
            granted = limiter.statistics().levels[1].granted
            # settled at 7 of the 100 asked: 93 back at once (only 7 accrue in 7 ms)
            return body, limiter.try_acquire(cost={"tokens": 90}), granted

    body, refunded, granted = asyncio.run(main())
    assert body == {"usage": {"total_tokens": 7}}
    assert refunded, "the 93 tokens not used came back"
    assert granted == 1, "the request took its permit at the context's level"
    assert seen == [(200, b'{"usage": {"total_tokens": 7}}')]
    assert upstream.served == 1


def test_a_throttled_response_is_not_settled() -> None:
    """A 429 the retries did not get past is not settled (it was not
    served): ``settle`` is not called on it, and the caller gets it."""
    seen: list[int] = []

    def settle(response: aiohttp.ClientResponse, body: bytes) -> int:
        seen.append(response.status)
        return 0

    async def main() -> tuple[int, tuple[int, ...]]:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10, settle_window=60.0) as limiter:
            permits = PermitsMiddleware(limiter, settle=settle, retries=1, cost=lambda r: 3)
            async with (
                aiohttp.ClientSession(middlewares=(permits,)) as session,
                session.get(url) as response,
            ):
                status = response.status
            return status, limiter.statistics().levels[0].units_granted

    with serve_script(Script((429, {"Retry-After": "0"}))) as url:
        assert asyncio.run(main()) == (429, (6,))  # two tries at 3, unsettled
    assert seen == []


@pytest.mark.parametrize(
    ("said", "error", "argument"),
    [
        ({"tokens": 2.5}, PermitTypeError, "settle['tokens']"),
        ({"tokenz": 1}, PermitValueError, "settle"),
    ],
)
def test_a_settle_that_returns_a_bad_cost_is_named(
    said: Any, error: type[Exception], argument: str
) -> None:
    """What ``settle`` returns is refused naming ``settle``, the function
    the caller gave (the error named the limiter's own ``actual``, which
    the caller never wrote), or the entry of its mapping at fault."""

    async def main() -> None:
        async with asyncio_adapter.open_limiter(
            Fifo(), limits={"tokens": Limit(100, burst=10)}, settle_window=60.0
        ) as limiter:
            permits = PermitsMiddleware(limiter, settle=lambda response, body: said)
            async with (
                aiohttp.ClientSession(middlewares=(permits,)) as session,
                session.get(url) as response,
            ):
                await response.read()

    with serve_script(Script((200, {}))) as url, pytest.raises(error) as refused:
        asyncio.run(main())
    assert refused.value.argument == argument  # type: ignore[attr-defined]
    assert str(refused.value).startswith(f"{argument}=")
    assert "'tokens'" in str(refused.value)  # the limit it got wrong, or those there are


def test_a_field_sent_on_several_lines_is_read_whole() -> None:
    """A ``RateLimit`` list split over two lines: the second line's policy,
    out of units for 5 s, holds the limiter back (aiohttp's ``get`` would
    give the first line only)."""

    lines = ['"hour";r=500;t=1', '"burst";r=0;t=5']
    free, _, permits = after_one_get((200, {"RateLimit": lines}))
    assert permits.upstream.malformed == 0
    assert free is False


def test_x_ratelimit_headers_for_a_name_no_limit_has_are_ignored_and_counted() -> None:
    """As the httpx transports: the ``-tokens`` pair (in the case the
    server wrote it) under a limiter of requests only is one item in
    ``ignored``; the ``-requests`` pair still holds the limiter back."""

    headers = {
        "X-RateLimit-Remaining-Requests": "0",
        "X-RateLimit-Reset-Requests": "30s",
        "X-RateLimit-Remaining-Tokens": "0",
        "X-RateLimit-Reset-Tokens": "1m0s",
    }
    free, _, permits = after_one_get((200, headers), limits={"requests": Limit(1, burst=10)})
    assert (free, permits.upstream.ignored, permits.upstream.malformed) == (False, 1, 0)


@pytest.mark.parametrize(
    "wire",
    [
        "500\u00b5s",  # Go's micro sign, sent as Latin-1 (one byte, not UTF-8)
        "500\u00c2\u00b5s",  # ... and as UTF-8
        "1.5\u00ce\u00bcs",  # the Greek mu, as UTF-8
    ],
)
def test_a_reset_in_microseconds_is_heeded_however_its_micro_sign_is_sent(wire: str) -> None:
    """As the httpx transports: a reset of ``500\u00b5s`` holds the
    limiter back, its micro sign sent as one Latin-1 byte too (a server
    that writes its headers in Latin-1, as Python's http.server does).
    aiohttp reads a value that is not UTF-8 with that byte escaped (a
    lone surrogate): the reset was counted malformed, and the upstream's
    word that nothing is left lost, where httpx heeds it."""

    headers = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": wire}
    free, _, permits = after_one_get((200, headers), limits={"requests": Limit(1, burst=5)})
    assert (free, permits.upstream.malformed) == (False, 0)  # nothing left, refilling at 1/s


def test_a_retry_after_sent_twice_pauses_for_the_longest() -> None:
    """As the httpx transports: a ``Retry-After`` on two lines was read as
    ``10, 30``, malformed, and paused nothing; the longest pauses now."""

    _, left, permits = after_one_get((429, {"Retry-After": ["10", "30"]}))
    assert permits.upstream.malformed == 0
    assert left > 20.0


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"retries": -1}, "retries"),
        ({"retries": 1.5}, "retries"),
        ({"max_pause": 0}, "max_pause"),
        ({"timeout": -1}, "timeout"),
        ({"settle": 1}, "settle"),  # was called once the upstream had served the request
        ({"cost": 2}, "cost"),
        ({"level": 0}, "level"),
        ({"flow": "acme"}, "flow"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], argument: str) -> None:
    async def main() -> None:
        async with asyncio_adapter.open_limiter(Fifo(), 10, settle_window=60.0) as limiter:
            with pytest.raises((PermitValueError, PermitTypeError)) as refused:
                PermitsMiddleware(limiter, **options)
            assert f"{argument}=" in str(refused.value)

    asyncio.run(main())


def test_settle_needs_a_settle_window() -> None:
    """Refused when the middleware is made, not after a request went out."""

    async def main() -> None:
        async with asyncio_adapter.open_limiter(Fifo(), 10) as limiter:
            with pytest.raises(PermitValueError, match="settle_window"):
                PermitsMiddleware(limiter, settle=lambda response, body: 1)

    asyncio.run(main())


def test_a_threads_limiter_is_refused() -> None:
    """Over a threads limiter, acquire took a permit and then failed to be
    awaited: the permit was spent and the request never sent. Refused when
    the middleware is made, naming the limiter."""
    with threads.open_limiter(Fifo(), 1, 1) as limiter:
        with pytest.raises(PermitTypeError, match=r"^limiter=") as refused:
            PermitsMiddleware(limiter)  # type: ignore[arg-type]
        assert refused.value.value is limiter
        assert limiter.try_acquire(), "no permit was taken"


def test_a_streamed_body_is_sent_again_whole() -> None:
    """With retries, a body from an async iterator was sent once: the retry
    after the 429 went out empty (httpx's transports read such a body
    first). Now it is read first, and each try sends it whole."""

    async def body() -> AsyncIterator[bytes]:
        yield b"hello "
        yield b"world"

    async def main(url: str) -> int:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter:
            permits = PermitsMiddleware(limiter, retries=1)
            async with (
                aiohttp.ClientSession(middlewares=(permits,)) as session,
                session.post(url, data=body()) as response,
            ):
                return response.status

    script = Script((429, {"Retry-After": "0"}), (200, {}))
    with serve_script(script) as url:
        assert asyncio.run(main(url)) == 200
    assert script.bodies == [b"hello world", b"hello world"]


@pytest.mark.parametrize(("said", "status", "sends"), [("false", 429, 1), ("true", 200, 2)])
def test_a_throttled_response_that_says_not_to_retry_is_returned(
    said: str, status: int, sends: int
) -> None:
    """``x-should-retry: false`` on a 429 (the OpenAI and Anthropic APIs'
    word that another try cannot succeed): returned, not sent again."""

    async def main(url: str) -> int:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter:
            permits = PermitsMiddleware(limiter, retries=2)
            async with (
                aiohttp.ClientSession(middlewares=(permits,)) as session,
                session.get(url) as response,
            ):
                return response.status

    script = Script((429, {"x-should-retry": said, "Retry-After": "0"}), (200, {}))
    with serve_script(script) as url:
        assert asyncio.run(main(url)) == status
    assert len(script.bodies) == sends


def _pipe(data: bytes) -> io.BufferedReader:
    """A file reading ``data`` from a pipe: it cannot seek back."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return open(read, "rb")


async def _parts() -> AsyncIterator[bytes]:
    yield b"hello "
    yield b"world"


def _multipart() -> aiohttp.MultipartWriter:
    """A multipart body of one part from an async iterator."""
    writer = aiohttp.MultipartWriter()
    writer.append(_parts())
    return writer


@pytest.mark.parametrize("body", ["pipe", "multipart"])
def test_a_body_that_cannot_be_sent_again_is_sent_again_whole(body: str) -> None:
    """With retries, a file that cannot seek back (a pipe) or a multipart
    body with a part from an async iterator was sent once whole: the retry
    after the 429 went out with an empty body (or an empty part). Now any
    body not in memory is read first, as httpx's transports read it, and
    each try sends it whole."""

    async def main(url: str) -> int:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter:
            permits = PermitsMiddleware(limiter, retries=1)
            with contextlib.ExitStack() as files:
                data: object = _multipart()
                if body == "pipe":
                    data = files.enter_context(_pipe(b"hello world"))
                async with (
                    aiohttp.ClientSession(middlewares=(permits,)) as session,
                    session.post(url, data=data) as response,
                ):
                    return response.status

    script = Script((429, {"Retry-After": "0"}), (200, {}))
    with serve_script(script) as url:
        assert asyncio.run(main(url)) == 200
    first, again = script.bodies
    assert b"hello world" in first
    assert again == first


def test_settle_on_a_redis_limiter_needs_its_settle_window(redis_server: RedisServer) -> None:
    """As the httpx transports: the Redis limiter's settle window is checked,
    not its ``refund_window`` (which its machine keeps): ``settle`` is
    refused without one, and taken with ``refund_window=0``."""

    async def main() -> None:
        url, name = redis_server.url, f"test-aiohttp-{time.monotonic_ns()}"
        async with redis_adapter.open_limiter(Fifo(), url, name=name, rate=1, burst=10) as limiter:
            with pytest.raises(PermitValueError, match="settle_window"):
                PermitsMiddleware(limiter, settle=lambda response, body: 3)
        async with redis_adapter.open_limiter(
            Fifo(), url, name=name + "-2", rate=1, burst=10, settle_window=60.0, refund_window=0.0
        ) as limiter:
            PermitsMiddleware(limiter, settle=lambda response, body: 3)

    asyncio.run(main())


def test_a_pause_past_aiohttps_own_timeout_returns_the_429_given_a_timeout_below_it() -> None:
    """aiohttp's ``ClientTimeout(total=...)`` runs around the middleware: a
    retry waiting out a pause longer than it raises ``TimeoutError``, the
    429 lost; with the middleware's ``timeout`` below it, that 429 is
    returned (as the README says)."""

    async def main(url: str, timeout: float | None) -> int:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter:
            permits = PermitsMiddleware(limiter, retries=1, timeout=timeout)
            async with (
                aiohttp.ClientSession(
                    middlewares=(permits,), timeout=aiohttp.ClientTimeout(total=1.0)
                ) as session,
                session.get(url) as response,
            ):
                return response.status

    with (
        serve_script(Script((429, {"Retry-After": "30"}), (200, {}))) as url,
        pytest.raises(asyncio.TimeoutError),  # (not yet the built-in one on Python 3.10)
    ):
        asyncio.run(main(url, None))
    with serve_script(Script((429, {"Retry-After": "30"}), (200, {}))) as url:
        assert asyncio.run(main(url, 0.5)) == 429


def test_a_permit_not_within_the_timeout_raises_acquire_timeout_through_aiohttp() -> None:
    """A request whose permit does not come within the middleware's
    ``timeout`` raises the limiter's ``AcquireTimeout``, as the httpx
    transports do. aiohttp turns an ``OSError`` out of a middleware into
    its ``ClientOSError`` unless it is asyncio's ``TimeoutError``: on
    Python 3.10, where that is not yet the built-in one, the caller got a
    ``ClientOSError`` (a ``ClientError`` a retry loop would retry), which
    ``except AcquireTimeout`` did not catch."""
    from permits.adapters import AcquireTimeout

    async def main(url: str) -> None:
        async with asyncio_adapter.open_limiter(Fifo(), 1, 1) as limiter:
            await limiter.acquire()  # the one permit: the next comes in a second
            permits = PermitsMiddleware(limiter, timeout=0.1)
            async with aiohttp.ClientSession(middlewares=(permits,)) as session:
                with pytest.raises(AcquireTimeout):
                    await session.get(url)
            assert limiter.statistics().levels[0].expired == 1

    with serve_script(Script((200, {}))) as url:
        asyncio.run(main(url))
    assert issubclass(AcquireTimeout, asyncio.TimeoutError)  # (asyncio's, on Python 3.10 too)


def _served_while_closing(
    url: str,
    script: Script,
    opened: AbstractAsyncContextManager[asyncio_adapter.Limiter],
    **options: Any,
) -> tuple[int, bytes]:
    """A GET through a middleware (of ``options``) on the limiter ``opened``,
    which closes once the request is at the upstream (``script``'s
    server): what the caller gets."""

    async def main() -> tuple[int, bytes]:
        async with opened as limiter:
            permits = PermitsMiddleware(limiter, **options)
            async with aiohttp.ClientSession(middlewares=(permits,)) as session:

                async def get() -> tuple[int, bytes]:
                    async with session.get(url) as response:
                        return response.status, await response.read()

                task = asyncio.create_task(get())
                while not script.bodies:  # the request is at the upstream
                    await asyncio.sleep(0.01)
                await limiter.aclose()
                return await task

    return asyncio.run(main())


def test_a_response_served_while_the_limiter_closed_reaches_the_caller() -> None:
    """The limiter closes (a shutdown) while a request is at the upstream:
    the response it serves reaches the caller; its settle raised
    ``LimiterClosed`` and the response was lost."""
    script = Script((200, {}), delay=0.3)
    with serve_script(script) as url:
        opened = asyncio_adapter.open_limiter(Fifo(), 100, 10, settle_window=60.0)
        served = _served_while_closing(url, script, opened, settle=lambda response, body: 0)
    assert served == (200, b'{"ok": true}')


def test_a_429_whose_retry_finds_the_limiter_closed_reaches_the_caller() -> None:
    """As the httpx transports: the limiter closes (a shutdown) while the
    retry of a 429 waits out its pause; the 429 reaches the caller, whole.
    (It raised ``LimiterClosed``, and the response was lost.)"""

    async def main(url: str) -> tuple[int, bytes]:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter:
            permits = PermitsMiddleware(limiter, retries=1, timeout=60.0)
            async with aiohttp.ClientSession(middlewares=(permits,)) as session:

                async def get() -> tuple[int, bytes]:
                    async with session.get(url) as response:
                        return response.status, await response.read()

                task = asyncio.create_task(get())
                while not permits.upstream.pauses:  # the 429 is in, its pause taken
                    await asyncio.sleep(0.01)
                await limiter.aclose()
                return await task

    script = Script((429, {"Retry-After": "30"}), (200, {}))
    with serve_script(script) as url:
        assert asyncio.run(main(url)) == (429, b'{"ok": true}')
    assert len(script.bodies) == 1, "not sent again"


def test_a_retry_held_back_past_the_timeout_returns_the_429() -> None:
    """As the httpx transports: a 429 whose pause is short but whose quota
    holds the next permit back past the ``timeout`` is returned, whole; the
    retry raised ``WouldWaitTooLong`` and the 429 was lost. It is returned
    at once, the retry refused as too long (``max_wait``), not after
    waiting out the timeout for a permit that could not come."""

    async def main(url: str) -> tuple[int, bytes, tuple[int, int, int]]:
        async with asyncio_adapter.open_limiter(
            Fifo(), limits={"requests": Limit(1, burst=10)}
        ) as limiter:
            permits = PermitsMiddleware(limiter, retries=1, timeout=0.5)
            async with (
                aiohttp.ClientSession(middlewares=(permits,)) as session,
                session.get(url) as response,
            ):
                stats = limiter.statistics().levels[0]
                counts = (stats.granted, stats.too_long, stats.expired)
                return response.status, await response.read(), counts

    script = Script((429, {"Retry-After": "0", "RateLimit": '"default";r=0;t=30'}), (200, {}))
    with serve_script(script) as url:
        assert asyncio.run(main(url)) == (429, b'{"ok": true}', (1, 1, 0))
    assert len(script.bodies) == 1


def test_a_retry_cancelled_while_it_waits_out_the_pause_costs_no_permit() -> None:
    """As the httpx transports: the retry cancelled while it waits for its
    permit (a 30 s pause) takes none, and sends nothing."""

    async def main(url: str) -> tuple[int, int, tuple[int, ...]]:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter:
            permits = PermitsMiddleware(limiter, retries=1)
            async with aiohttp.ClientSession(middlewares=(permits,)) as session:
                task = asyncio.create_task(session.get(url).__aenter__())
                for _ in range(1000):  # 10 s at most
                    if limiter.statistics().levels[0].waiting:  # the retry
                        break
                    await asyncio.sleep(0.01)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            level = limiter.statistics().levels[0]
            return level.granted, level.cancelled, level.units_granted

    script = Script((429, {"Retry-After": "30"}), (200, {}))
    with serve_script(script) as url:
        assert asyncio.run(main(url)) == (1, 1, (1,))
    assert len(script.bodies) == 1


def test_limit_headers_served_while_the_limiter_closed_reach_the_caller() -> None:
    """As the httpx transports: the limiter closes while a request is at
    the upstream, whose response says what is left of the limit; learning
    it raised ``LimiterClosed`` and the served response was lost."""
    headers = {"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "1s"}
    script = Script((200, headers), delay=0.3)
    with serve_script(script) as url:
        opened = asyncio_adapter.open_limiter(Fifo(), limits={"requests": Limit(100, burst=10)})
        assert _served_while_closing(url, script, opened) == (200, b'{"ok": true}')


@pytest.mark.parametrize("where", ["refused", "hung up"])
def test_a_request_that_fails_before_its_response_keeps_its_permit(where: str) -> None:
    """As the httpx transports: the connection refused, or the upstream
    hung up once it had the request: the error reaches the caller, the
    permit keeps the cost asked for, ``settle`` is not called, and the
    request is not sent again."""
    settled: list[int] = []

    def settle(response: aiohttp.ClientResponse, body: bytes) -> int:
        settled.append(1)
        return 1

    async def main(url: str) -> tuple[int, tuple[int, ...], int]:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10, settle_window=60.0) as limiter:
            permits = PermitsMiddleware(
                limiter,
                cost=lambda r: 5,
                settle=settle,
                retries=2,
            )
            async with aiohttp.ClientSession(middlewares=(permits,)) as session:
                with pytest.raises(aiohttp.ClientConnectionError):
                    await session.post(url, data=b"x")
            level = limiter.statistics().levels[0]
            return level.granted, level.units_granted, level.refunded

    if where == "refused":
        assert asyncio.run(main(closed_port())) == (1, (5,), 0)
    else:
        hangup = Hangup()
        with serve_hangup(hangup) as url:
            assert asyncio.run(main(url)) == (1, (5,), 0)
        assert hangup.bodies == [b"x"]
    assert settled == []


@pytest.mark.parametrize("settles", [False, True])
def test_a_streamed_response_is_read_whole_first_only_to_be_settled(settles: bool) -> None:
    """As README says: with ``settle``, the body is read whole before the
    response reaches the caller (the server had sent its last part), to be
    given to ``settle``; without, the response comes as its headers do, and
    its body streams. Either way ``response.content`` reads the body: read
    whole, its stream was spent, and an event stream's lines came as none."""

    async def main(url: str, parts: Parts) -> tuple[bool, bytes, tuple[int, ...]]:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 100, settle_window=60.0) as limiter:
            permits = PermitsMiddleware(
                limiter,
                cost=lambda r: 50,
                settle=(lambda response, body: int(body)) if settles else None,
            )
            async with (
                aiohttp.ClientSession(middlewares=(permits,)) as session,
                session.get(url) as response,
            ):
                ended = parts.waited_out  # the server had sent its last part
                parts.go.set()
                body = b"".join([line async for line in response.content])
                if settles:
                    assert await response.read() == body  # and read() gives it again
            return ended, body, limiter.statistics().levels[0].units_granted

    parts = Parts(b"1", b"2", wait=1.0 if settles else 30.0)
    with serve_parts(parts) as url:
        assert asyncio.run(main(url, parts)) == (settles, b"12", (12,) if settles else (50,))


@pytest.mark.parametrize("status", [429, 503])
def test_a_throttled_response_without_retry_after_is_retried_after_a_backoff(
    status: int,
) -> None:
    """As the httpx transports: a 429 or 503 with no Retry-After (here one
    that does not parse, counted) is sent again after a backoff of 0.5 s,
    then 1 s, each a pause of the whole limiter, up to ``retries``. On
    virtual time (aiohttp's own timeouts off: only the limiter sets
    timers), the server on a real socket."""

    async def main(url: str) -> tuple[int, float, int, int, int, int]:
        async with asyncio_adapter.open_limiter(
            Fifo(), limits={"requests": Limit(10, burst=1)}
        ) as limiter:
            permits = PermitsMiddleware(limiter, retries=2)
            permits.upstream.jitter = lambda: 0.0
            async with aiohttp.ClientSession(
                middlewares=(permits,), timeout=aiohttp.ClientTimeout(total=None)
            ) as session:
                start = asyncio.get_running_loop().time()
                async with session.get(url) as response:
                    took = asyncio.get_running_loop().time() - start
                    stats = limiter.statistics().levels[0]
                    upstream = permits.upstream
                    return (
                        response.status,
                        took,
                        upstream.backoffs,
                        upstream.malformed,
                        stats.granted - stats.refunded,
                        len(script.bodies),
                    )

    script = Script((status, {"Retry-After": "soon"}), (status, {}), (200, {}))
    with serve_script(script) as url:
        got, took, backoffs, malformed, kept, sent = testing.run(main(url))
    assert (got, backoffs, malformed) == (200, 2, 1)
    assert took == pytest.approx(1.5, abs=1e-6)
    assert kept == sent == 3, "each try took a permit, and kept it"


def test_a_body_that_cannot_be_sent_again_takes_no_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 429 with no Retry-After to a request whose body was sent and
    cannot be sent again (one that cannot be read first: here, every body,
    on purpose) is returned, not retried, and pauses nothing: a backoff is
    only for a retry to wait out."""
    import permits.aiohttp

    monkeypatch.setattr(permits.aiohttp, "_spent", lambda request: True)

    async def main(url: str) -> tuple[int, int, int, float]:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter:
            permits = PermitsMiddleware(limiter, retries=2)
            async with (
                aiohttp.ClientSession(middlewares=(permits,)) as session,
                session.post(url, data=b"hello") as response,
            ):
                upstream = permits.upstream
                return response.status, upstream.throttled, upstream.pauses, limiter.pause_left()

    script = Script((429, {}), (200, {}))
    with serve_script(script) as url:
        assert asyncio.run(main(url)) == (429, 1, 0, 0.0)
    assert script.bodies == [b"hello"]


def test_x_ratelimit_requests_reach_the_limit_they_count() -> None:
    """As the httpx transports: under a limiter opened with ``rate=`` (its
    one limit ``units``, which counts requests), OpenAI's
    ``x-ratelimit-*-requests`` pair was ignored, counted in ``ignored``; it
    reaches that limit now."""

    headers = {"X-RateLimit-Remaining-Requests": "0", "X-RateLimit-Reset-Requests": "30s"}
    free, _, permits = after_one_get((200, headers), rate=1, burst=10)
    assert (free, permits.upstream.ignored, permits.upstream.malformed) == (False, 0, 0)


def test_a_429_saying_a_limit_the_request_does_not_cost_is_used_up_is_backed_off() -> None:
    """As the httpx transports: a 429 with no Retry-After whose headers
    say the tokens are used up for 30 s, to a request that costs requests
    only, was sent again at once, each try (its permit, of no token, held
    back by nothing); it is backed off now, 0.5 s then 1 s. On virtual
    time (aiohttp's own timeouts off), the server on a real socket."""

    async def main(url: str) -> tuple[int, float, int, int]:
        async with asyncio_adapter.open_limiter(
            Fifo(), limits={"requests": Limit(100, burst=10), "tokens": Limit(1000, burst=1000)}
        ) as limiter:
            permits = PermitsMiddleware(limiter, retries=2, cost=lambda request: {"requests": 1})
            permits.upstream.jitter = lambda: 0.0
            async with aiohttp.ClientSession(
                middlewares=(permits,), timeout=aiohttp.ClientTimeout(total=None)
            ) as session:
                start = asyncio.get_running_loop().time()
                async with session.get(url) as response:
                    took = asyncio.get_running_loop().time() - start
                    upstream = permits.upstream
                    return response.status, took, upstream.pauses, upstream.backoffs

    headers = {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "30s"}
    script = Script((429, headers), (429, headers), (200, {}))
    with serve_script(script) as url:
        status, took, pauses, backoffs = testing.run(main(url))
    assert (status, pauses, backoffs, len(script.bodies)) == (200, 2, 2, 3)
    assert took == pytest.approx(1.5, abs=1e-6)


async def _async_function(*args: object) -> int:
    return 1


@pytest.mark.parametrize("argument", ["level", "flow", "cost", "settle"])
def test_an_async_function_as_an_option_is_refused_naming_it(argument: str) -> None:
    """As the httpx transports: an ``async def`` (natural under aiohttp)
    given as ``settle`` was taken, and made every response the upstream
    served raise (its coroutine never awaited, the 200 lost); ``cost``,
    ``level`` and ``flow`` every request. The middleware calls them, never
    awaits them: such a one is refused when it is made, naming it."""

    options: dict[str, Any] = {argument: _async_function}

    async def main() -> None:
        async with asyncio_adapter.open_limiter(Fifo(), 10, settle_window=60.0) as limiter:
            with pytest.raises(
                PermitTypeError,
                match=rf"^{argument}=.*: expected a plain function \(called, not awaited\), "
                "or None, got an async function$",
            ) as refused:
                PermitsMiddleware(limiter, **options)
            assert refused.value.argument == argument

    asyncio.run(main())
