"""permits.httpx against a real HTTP server on loopback that enforces its own
token bucket, answers 429 with Retry-After and sends remaining/reset headers.

The server runs in a thread of the test process (``http.server``); requests
go through a real socket. Real time, so the checks are counts and orders a
loaded machine cannot change.
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import gzip
import logging
import math
import re
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import anyio
import attrs
import httpx
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
from permits._upstream import BACKOFF, MAX_BACKOFF, MAX_POLICIES, backoff, retry
from permits.adapters import AcquireTimeout, LimiterClosed, level, threads
from permits.adapters import asyncio as asyncio_adapter
from permits.adapters import redis as redis_adapter
from permits.core import (
    SECOND,
    Fifo,
    Limit,
    PermitError,
    PermitTypeError,
    PermitValueError,
    PolicyError,
    StrictPriority,
)
from permits.httpx import (
    AsyncPermitsTransport,
    PermitsTransport,
    QuotaPolicy,
    Upstream,
    parse_duration,
)

from redis_server import RedisServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def anyio_backend() -> str:
    """The real clock (the server is real): asyncio, no virtual time."""
    return "asyncio"


@pytest.fixture
def server() -> Iterator[tuple[str, Upstream_]]:
    limit = Upstream_(rate=10, burst=2)
    with serve(limit) as url:
        yield url, limit


@contextlib.contextmanager
def answered(
    headers: dict[str, str], limits: Mapping[str, Limit]
) -> Iterator[tuple[threads.Limiter, PermitsTransport]]:
    """A thread limiter of ``limits`` and its transport, once one request
    went through it to a server answering 200 with ``headers``."""
    with (
        serve_script(Script((200, headers))) as url,
        threads.open_limiter(Fifo(), limits=limits) as limiter,
    ):
        transport = PermitsTransport(limiter)
        with httpx.Client(transport=transport) as client:
            assert client.get(url).status_code == 200
        yield limiter, transport


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        *[("6m0s", 360.0), ("1.5s", 1.5), ("20ms", 0.02), ("1h2m3s", 3723.0), ("2", 2.0)],
        *[("500us", 0.0005), ("500\u00b5s", 0.0005), ("1.5\u03bcs", 0.0000015)],
        *[("100ns", 0.0000001), ("1s250us", 1.00025), ("1m0.5\u00b5s", 60.0000005)],
    ],
)
def test_durations_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "wire",
    [
        "500us",
        "500\u00b5s",  # Go's micro sign, sent as Latin-1
        "500\u00c2\u00b5s",  # ... and as UTF-8
        "1.5\u00ce\u00bcs",  # the Greek mu, as UTF-8
        "100ns",
    ],
)
def test_a_reset_in_go_durations_below_a_millisecond_is_heeded(wire: str) -> None:
    """A reset written as Go writes a duration (the OpenAI style's
    ``6m0s``): below a millisecond in micro- or nanoseconds (``500\u00b5s``,
    ``100ns``; Go reads ``us`` too). They were malformed: the upstream's
    word that nothing is left was lost, and counted as garbage."""
    headers = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": wire}
    with answered(headers, {"requests": Limit(1, burst=5)}) as (limiter, transport):
        assert transport.upstream.malformed == 0
        assert not limiter.try_acquire()  # nothing left now, refilling at 1 a second


def test_a_reset_in_utf_8_is_heeded_beside_a_header_that_is_not() -> None:
    """httpx decodes every value of a response in one encoding, Latin-1 if
    any is not UTF-8: a ``500µs`` reset sent in UTF-8 then read as
    ``500Âµs``, malformed, when another header (here ``café`` in Latin-1)
    was not UTF-8. Each value is read on its own, as the aiohttp
    middleware reads it."""
    headers = {
        "x-server-note": "caf\u00e9",  # one byte, 0xE9: not UTF-8
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "500\u00c2\u00b5s",  # 500µs in UTF-8
    }
    with answered(headers, {"requests": Limit(1, burst=5)}) as (limiter, transport):
        assert transport.upstream.malformed == 0
        assert not limiter.try_acquire()  # nothing left now, refilling at 1 a second


@pytest.mark.parametrize(
    "text",
    [
        *("", "-5", "1e300x", "soon", "5 s", "nan", "inf", "9" * 400 + "h", "\u0663s", "\u0663"),
        *("1_0", "1e3", "+5", "5.", ".5", "0x10", "infinity"),  # Python's float reads these
    ],
)
def test_malformed_durations_are_none(text: str) -> None:
    assert parse_duration(text) is None


@pytest.mark.parametrize("text", [5, 1.5, b"5s", None])
def test_a_duration_that_is_no_text_is_refused_naming_it(text: object) -> None:
    """A header's duration is text: a number (read already) or bytes (not
    yet decoded) is a caller's mistake, refused as such, not ``None`` (a
    malformed header) nor an ``AttributeError``."""
    expected = r"^text=.*: expected a str, as a header writes a duration"
    with pytest.raises(PermitTypeError, match=expected):
        parse_duration(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "headers",
    [
        {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1_0"},
        {"RateLimit": '"default";r=0;t=1e3'},
        {"RateLimit": "limit=100, remaining=0, reset=+5"},
    ],
)
def test_a_reset_that_only_pythons_float_reads_is_malformed(headers: dict[str, str]) -> None:
    """A reset is digits (a decimal fraction at most) and units: ``1_0``,
    ``1e3`` and ``+5`` were read as ``float`` reads them (10 s, 1,000 s,
    5 s), holding every request back that long on garbage. Each is
    malformed now, counted, and holds nothing back."""
    with answered(headers, {"requests": Limit(1, burst=10)}) as (limiter, transport):
        assert transport.upstream.malformed == 1
        assert limiter.try_acquire(), "nothing held back"


def test_headers_are_learned_and_garbage_counted() -> None:
    """Retry-After (seconds, a date, garbage, an absurd length), the OpenAI
    headers and the IETF field, on a threads limiter; nothing raises, and
    the 429s are counted as throttled, the 503 not."""
    limits = {"requests": Limit(100, burst=100), "tokens": Limit(1000, burst=1000)}
    with threads.open_limiter(Fifo(), limits=limits) as limiter:
        upstream = Upstream(limiter, max_pause=5.0)

        def response(status: int, **headers: str) -> tuple[int, httpx.Headers]:
            return status, httpx.Headers({k.replace("_", "-"): v for k, v in headers.items()})

        assert upstream.learn(*response(429, retry_after="2")) == pytest.approx(2.0, abs=0.5)
        assert upstream.learn(*response(429, retry_after="-5")) is None
        assert upstream.learn(*response(429, retry_after="1e300")) is None  # not delay-seconds
        cut = upstream.learn(*response(429, retry_after="99999999"))  # to max_pause
        assert cut == pytest.approx(5.0, abs=0.5)
        # a date past: no pause of its own, and the 5 s one set above still in force
        past = upstream.learn(*response(503, retry_after="Wed, 21 Oct 2015 07:28:00 GMT"))
        assert past is not None
        assert 4.0 < past <= 5.0
        assert upstream.learn(*response(200, retry_after="30")) is None  # only on 429 and 503
        upstream.learn(
            *response(200, x_ratelimit_remaining_tokens="0", x_ratelimit_reset_tokens="6m0s")
        )
        upstream.learn(*response(200, ratelimit="limit=100, remaining=garbage"))
        upstream.learn(
            *response(200, x_ratelimit_remaining_requests="x", x_ratelimit_reset_requests="1s")
        )
        assert upstream.pauses == 3
        assert upstream.malformed == 4  # "-5", "1e300", the RateLimit field, the remaining "x"
        assert upstream.throttled == 4  # the 429s: a 503 pauses too, but exceeded no limit
        assert not limiter.try_acquire(cost={"tokens": 1}), "paused, and no tokens left"


@pytest.mark.anyio
async def test_a_429_pauses_everyone_and_the_request_is_retried(
    server: tuple[str, Upstream_],
) -> None:
    """A limiter configured twice as fast as the server: the first 429 pauses
    every task for its Retry-After, the remaining/reset headers keep the
    limiter from sending what the server would refuse, every request ends
    in a 200, and each 429 cost one pause."""
    url, upstream = server
    async with asyncio_adapter.open_limiter(
        Fifo(), limits={"requests": Limit(20, burst=2)}, settle_window=60.0
    ) as limiter:
        transport = AsyncPermitsTransport(
            limiter,
            retries=5,
            settle=lambda r: {"requests": 1} if r.json()["usage"]["total_tokens"] else None,
        )
        async with httpx.AsyncClient(transport=transport) as client:
            statuses: list[int] = []

            async def get() -> None:
                statuses.append((await client.get(url)).status_code)

            async with anyio.create_task_group() as tg:
                for _ in range(12):
                    tg.start_soon(get)
    assert statuses == [200] * 12
    assert upstream.served == 12
    assert transport.upstream.pauses == upstream.rejected
    # the headers cap what the limiter sends: far fewer 429s than requests
    assert upstream.rejected <= 4, upstream.rejected


def test_the_sync_transport_settles_from_the_body(server: tuple[str, Upstream_]) -> None:
    url, upstream = server
    # the server's x-ratelimit-*-requests headers reach the first limit,
    # "calls" (none is named "requests"), not the tokens: only the settle
    # moves those
    limits = {"calls": Limit(100, burst=10), "tokens": Limit(1000, burst=100)}
    with threads.open_limiter(Fifo(), limits=limits, settle_window=60.0) as limiter:
        transport = PermitsTransport(
            limiter,
            cost=lambda request: {"calls": 1, "tokens": 100},
            settle=lambda r: {"calls": 1, "tokens": r.json()["usage"]["total_tokens"]},
        )
        with httpx.Client(transport=transport) as client:
            response = client.get(url, extensions={"permits.flow": "acme"})
        assert response.json() == {"usage": {"total_tokens": 7}}
        # settled at 7 of the 100 asked: 93 back at once (only 7 accrue in 7 ms)
        assert limiter.try_acquire(cost={"tokens": 90})
    assert upstream.served == 1


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"retries": -1}, "retries"),
        ({"retries": 1.5}, "retries"),
        ({"max_pause": 0}, "max_pause"),
        ({"timeout": -1}, "timeout"),  # (refused at each request, before)
        ({"timeout": "1"}, "timeout"),
    ],
)
def test_bad_transport_options_are_refused(options: dict[str, Any], argument: str) -> None:
    with threads.open_limiter(Fifo(), 10) as limiter:
        with pytest.raises((PermitValueError, PermitTypeError)) as refused:
            PermitsTransport(limiter, **options)
        assert f"{argument}=" in str(refused.value)


@pytest.mark.anyio
async def test_an_unknown_option_names_the_transport_and_its_options() -> None:
    """A misspelt option (``retry=3``) is refused naming the transport and
    the options it has, not the private class that holds them."""
    known = "limiter, transport, level, flow, cost, settle, retries, timeout, max_pause"
    with threads.open_limiter(Fifo(), 10) as limiter:
        with pytest.raises(TypeError) as refused:
            PermitsTransport(limiter, retry=3)  # type: ignore[call-arg]
        assert str(refused.value) == (
            f"PermitsTransport() got an unexpected keyword argument 'retry' (it takes {known})"
        )
    async with asyncio_adapter.open_limiter(Fifo(), 10) as async_limiter:
        with pytest.raises(TypeError, match=r"^AsyncPermitsTransport\(\) got an unexpected"):
            AsyncPermitsTransport(async_limiter, retry=3)  # type: ignore[call-arg]


@pytest.mark.parametrize("argument", ["level", "flow", "cost", "settle"])
def test_an_option_that_is_no_function_is_refused(argument: str) -> None:
    """``settle=1`` (a cost, not a function of the response) was taken, and
    failed only once the upstream had served and charged the request; the
    others failed at each request with a TypeError naming no argument. Each
    is refused when the transport is made, naming it."""
    with threads.open_limiter(Fifo(), 10, settle_window=60.0) as limiter:
        with pytest.raises(PermitTypeError, match=rf"^{argument}=1: ") as refused:
            PermitsTransport(limiter, **{argument: 1})  # type: ignore[arg-type]
        assert refused.value.argument == argument


@pytest.mark.parametrize("max_pause", ["60", None, True])
def test_a_max_pause_that_is_no_number_is_a_type_error(max_pause: Any) -> None:
    """``max_pause="60"`` (or ``None``, or ``True``) is the wrong type, as
    ``timeout="1"`` is: a ``PermitTypeError`` (a ``TypeError``), where it
    was a ``PermitValueError``, which ``except TypeError`` missed."""
    with threads.open_limiter(Fifo(), 10) as limiter:
        for make in (Upstream, PermitsTransport):
            with pytest.raises(PermitTypeError, match=r"^max_pause=") as refused:
                make(limiter, max_pause=max_pause)
            assert refused.value.argument == "max_pause"


@pytest.mark.parametrize("max_pause", [-1.0, 0, float("nan")])
def test_an_upstream_refuses_a_bad_max_pause(max_pause: Any) -> None:
    """``Upstream`` (public beside the transports) took any ``max_pause``:
    -1 cut every Retry-After to -1, and the PermitValueError of
    ``pause_for(-1)`` came out of each 429's ``learn``; NaN cut none. It is
    refused when the Upstream is made, as the transports refuse it."""
    with (
        threads.open_limiter(Fifo(), 10) as limiter,
        pytest.raises(PermitValueError, match=r"^max_pause="),
    ):
        Upstream(limiter, max_pause=max_pause)


@pytest.mark.parametrize("max_pause", [1e300, 10**400], ids=["1e300", "10**400"])
def test_a_max_pause_too_long_for_a_pause_is_refused(max_pause: float) -> None:
    """A ``max_pause`` finite in seconds but not in nanoseconds (the
    limiter's unit; past about 1e299 s) was taken, and a ``Retry-After``
    that long raised ``PermitValueError`` naming ``seconds`` out of the
    transport: the 429 was lost. It is refused when the transport is made."""
    with threads.open_limiter(Fifo(), 10) as limiter:
        with pytest.raises(PermitValueError, match=r"^max_pause="):
            PermitsTransport(limiter, max_pause=max_pause)
        with pytest.raises(PermitValueError, match=r"^max_pause="):
            Upstream(limiter, max_pause=max_pause)
        upstream = Upstream(limiter, max_pause=1e299)  # the longest kind still taken
        paused = upstream.learn(429, httpx.Headers({"Retry-After": "9" * 400}))
        assert paused is not None
        assert paused > 1e298


def test_settle_needs_a_settle_window() -> None:
    """Refused when the transport is made, not after a request went out."""
    with (
        threads.open_limiter(Fifo(), 10) as limiter,
        pytest.raises(PermitValueError, match="settle_window"),
    ):
        PermitsTransport(limiter, settle=lambda response: 1)


@pytest.mark.anyio
async def test_a_limiter_of_the_other_kind_is_refused() -> None:
    """The sync transport over an async limiter called acquire without
    awaiting it: every request went out with no permit (5 at once through a
    limit of 1 a second). The async transport over a threads limiter took a
    permit, then failed to await it, the request never sent. Both are
    refused when the transport is made, naming the limiter."""
    sent: list[httpx.Request] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200)

    async with asyncio_adapter.open_limiter(Fifo(), 1, 1) as async_limiter:
        with pytest.raises(PermitTypeError, match=r"^limiter=") as refused:
            PermitsTransport(async_limiter, httpx.MockTransport(upstream))  # type: ignore[arg-type]
        assert refused.value.value is async_limiter
    with threads.open_limiter(Fifo(), 1, 1) as limiter:
        with pytest.raises(PermitTypeError, match=r"^limiter=") as refused:
            AsyncPermitsTransport(limiter, httpx.MockTransport(upstream))  # type: ignore[arg-type]
        assert refused.value.value is limiter
        assert limiter.try_acquire(), "no permit was taken"
    assert sent == []


@pytest.mark.anyio
async def test_a_transport_of_the_other_kind_is_refused() -> None:
    """The sync transport given an async inner transport (or an
    ``httpx.Client``, a common slip) took a permit for each request, then
    failed with an ``AttributeError`` naming no argument: the permit spent,
    nothing sent. The async transport given a sync one did the same. Both
    are refused when the transport is made, naming the transport; one of
    both kinds (``httpx.MockTransport``) is taken by both."""
    mock = httpx.MockTransport(lambda request: httpx.Response(200))
    with threads.open_limiter(Fifo(), 1, 1) as limiter:
        with httpx.Client() as client:
            for wrong in (httpx.AsyncHTTPTransport(), client):
                with pytest.raises(PermitTypeError, match=r"^transport=") as refused:
                    PermitsTransport(limiter, wrong)  # type: ignore[arg-type]
                assert refused.value.value is wrong
        assert limiter.try_acquire(), "no permit was taken"
        assert PermitsTransport(limiter, mock).transport is mock
    async with asyncio_adapter.open_limiter(Fifo(), 1, 1) as async_limiter:
        async with httpx.AsyncClient() as async_client:
            for other in (httpx.HTTPTransport(), async_client):
                with pytest.raises(PermitTypeError, match=r"^transport=") as refused:
                    AsyncPermitsTransport(async_limiter, other)  # type: ignore[arg-type]
                assert refused.value.value is other
        assert AsyncPermitsTransport(async_limiter, mock).transport is mock


def test_a_response_is_closed_when_learning_from_it_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Learning from a response fails (here, on purpose): the error goes
    to the caller, and the response is closed, not leaked. (A 429 that
    comes after the limiter closed teaches nothing and reaches the caller:
    test_a_429_answered_while_the_limiter_closed_reaches_the_caller.)"""
    closed: list[bool] = []

    class Stream(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield b""

        def close(self) -> None:
            closed.append(True)

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": "1"}, stream=Stream())

    def fails(*answer: Any, **options: Any) -> None:
        raise LimiterClosed()

    with threads.open_limiter(Fifo(), 10) as limiter:
        transport = PermitsTransport(limiter, httpx.MockTransport(upstream))
        monkeypatch.setattr(transport.upstream, "again", fails)
        with httpx.Client(transport=transport) as client, pytest.raises(LimiterClosed):
            client.get("http://upstream.example/")
    assert closed == [True]


@pytest.mark.parametrize(
    "headers",
    [
        {"x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "1e300"},
        {"x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "9" * 300 + "h"},
        {"x-ratelimit-remaining-requests": "\u00b2", "x-ratelimit-reset-requests": "1s"},
        {"x-ratelimit-remaining-requests": "-", "x-ratelimit-reset-requests": "1s"},
        {"x-ratelimit-remaining-requests": "--5", "x-ratelimit-reset-requests": "1s"},
        {"x-ratelimit-remaining-requests": "- 5", "x-ratelimit-reset-requests": "1s"},
        {
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "1s",
            "x-ratelimit-limit-requests": "ten",
        },
    ],
)
def test_an_unreadable_remaining_or_reset_is_counted_not_raised(headers: dict[str, str]) -> None:
    """A reset too long to be a time (infinite once in nanoseconds), a
    remaining of a digit that is no number (a Latin-1 superscript) or a size
    that is no number is malformed: counted, and the response goes to the
    caller."""
    with answered(headers, {"requests": Limit(100, burst=10)}) as (limiter, transport):
        assert transport.upstream.malformed == 1
        assert not limiter.closed


@pytest.mark.parametrize(
    ("headers", "malformed"),
    [
        ({"x-ratelimit-remaining-requests": "9" * 5000, "x-ratelimit-reset-requests": "1s"}, 1),
        ({"ratelimit": f"r={'9' * 5000};t=1"}, 1),
        ({"ratelimit-policy": f'"day";q={"9" * 5000};w=86400'}, 1),
        (
            {
                "x-ratelimit-remaining-requests": "3",
                "x-ratelimit-reset-requests": "5s",
                "x-ratelimit-limit-requests": "9" * 400,
            },
            0,
        ),
    ],
)
def test_a_number_too_long_for_int_or_float_is_not_fatal(
    headers: dict[str, str], malformed: int
) -> None:
    """A count of more digits than ``int`` reads (4,300) raised ValueError
    out of the transport, and a bucket size too big for a float
    OverflowError: the response was lost. Now the first is malformed
    (counted), and the second is read as the bucket as big as it says."""
    with answered(headers, {"requests": Limit(100, burst=10)}) as (limiter, transport):
        assert transport.upstream.malformed == malformed
        assert not limiter.closed


def test_a_settled_response_reads_as_any_other(server: tuple[str, Upstream_]) -> None:
    """With ``settle``, the client still reads and closes the response as
    usual, so its ``elapsed`` is known."""
    url, _ = server
    with threads.open_limiter(Fifo(), 100, 10, settle_window=60.0) as limiter:
        transport = PermitsTransport(limiter, settle=lambda response: 1)
        with httpx.Client(transport=transport) as client:
            response = client.get(url)
        assert response.json() == {"usage": {"total_tokens": 7}}
        assert response.elapsed.total_seconds() >= 0


@pytest.mark.anyio
async def test_a_settled_response_reads_as_any_other_async(
    server: tuple[str, Upstream_],
) -> None:
    url, _ = server
    async with asyncio_adapter.open_limiter(Fifo(), 100, 10, settle_window=60.0) as limiter:
        transport = AsyncPermitsTransport(limiter, settle=lambda response: 1)
        async with httpx.AsyncClient(transport=transport) as client:
            response = await client.get(url)
        assert response.json() == {"usage": {"total_tokens": 7}}
        assert response.elapsed.total_seconds() >= 0


def test_a_streamed_response_streams_and_is_settled_at_its_end() -> None:
    """With ``settle``, a streamed body reaches the caller as it comes: its
    first part while the server holds the rest back (it was read whole
    first, so the caller saw nothing until the end). The permit is settled
    once the body is read to its end, from the whole of it; a response
    closed before its end keeps the cost asked for."""
    parts = Parts(b"1", b"2")  # the body says the call cost 12
    with (
        serve_parts(parts) as url,
        threads.open_limiter(Fifo(), 100, 100, settle_window=60.0) as limiter,
    ):

        def units() -> tuple[int, ...]:
            return limiter.statistics().levels[0].units_granted

        transport = PermitsTransport(limiter, cost=lambda r: 50, settle=lambda r: int(r.text))
        with httpx.Client(transport=transport) as client:
            with client.stream("GET", url) as response:
                raw = response.iter_raw()
                assert next(raw) == b"1", "the first part, the rest held back"
                assert units() == (50,), "not settled before the end"
                parts.go.set()
                assert b"".join(raw) == b"2"
            assert units() == (12,)
            parts.go.clear()
            with client.stream("GET", url) as response:
                assert next(response.iter_raw()) == b"1"
            parts.go.set()
            assert units() == (12 + 50,), "closed before its end: as asked"
    assert not parts.waited_out


def test_a_stream_that_ends_after_the_limiter_closed_still_ends() -> None:
    """The limiter closes (a shutdown) while a served response streams: the
    rest of the body reaches the caller and the stream ends as any other;
    its end raised ``LimiterClosed`` (from the settle), after the whole
    body had been read, and ``client.get`` lost the response."""
    parts = Parts(b"1", b"2")
    with (
        serve_parts(parts) as url,
        threads.open_limiter(Fifo(), 100, 100, settle_window=60.0) as limiter,
        httpx.Client(
            transport=PermitsTransport(limiter, cost=lambda r: 50, settle=lambda r: int(r.text))
        ) as client,
        client.stream("GET", url) as response,
    ):
        raw = response.iter_raw()
        assert next(raw) == b"1"
        limiter.close()
        parts.go.set()
        assert b"".join(raw) == b"2"
    assert not parts.waited_out


@pytest.mark.anyio
async def test_a_streamed_response_streams_and_is_settled_at_its_end_async() -> None:
    parts = Parts(b"1", b"2")
    async with asyncio_adapter.open_limiter(Fifo(), 100, 100, settle_window=60.0) as limiter:
        transport = AsyncPermitsTransport(limiter, cost=lambda r: 50, settle=lambda r: int(r.text))
        with serve_parts(parts) as url:
            async with (
                httpx.AsyncClient(transport=transport) as client,
                client.stream("GET", url) as response,
            ):
                raw = response.aiter_raw()
                assert await raw.__anext__() == b"1", "the first part, the rest held back"
                assert limiter.statistics().levels[0].units_granted == (50,)
                parts.go.set()
                assert b"".join([part async for part in raw]) == b"2"
        assert limiter.statistics().levels[0].units_granted == (12,)
    assert not parts.waited_out


@pytest.mark.parametrize("digits", [8, 400])
def test_a_retry_after_too_long_for_a_float_is_cut_to_max_pause(digits: int) -> None:
    """``Retry-After: 999...9`` is delay-seconds whatever its length: past
    308 digits, a number too long for a float, it was malformed (no pause,
    the request sent again at once) where 308 digits paused for
    ``max_pause``. Now both pause for ``max_pause``."""
    with (
        serve_script(Script((429, {"Retry-After": "9" * digits}))) as url,
        threads.open_limiter(Fifo(), 100, 10) as limiter,
    ):
        transport = PermitsTransport(limiter, max_pause=30.0)
        with httpx.Client(transport=transport) as client:
            assert client.get(url).status_code == 429
        assert (transport.upstream.pauses, transport.upstream.malformed) == (1, 0)
        assert 20.0 < limiter.pause_left() <= 30.0


@pytest.mark.parametrize("form", ["%a %b %d %H:%M:%S %Y", "%a, %d %b %Y %H:%M:%S -0000"])
def test_a_retry_after_date_without_a_zone_is_utc(
    form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An HTTP date in asctime form (RFC 9110 has recipients accept it) or
    with ``-0000`` is in UTC, wherever the client runs (here UTC+9): a
    Retry-After a minute ahead pauses for a minute, not nine hours less."""
    monkeypatch.setenv("TZ", "JST-9")
    time.tzset()
    try:
        when = time.strftime(form, time.gmtime(time.time() + 60))
        with (
            serve_script(Script((429, {"Retry-After": when}))) as url,
            threads.open_limiter(Fifo(), 100, 10) as limiter,
        ):
            transport = PermitsTransport(limiter)
            with httpx.Client(transport=transport) as client:
                assert client.get(url).status_code == 429
            paused = limiter.statistics().paused_ns / 1e9
            assert 50 < paused <= 60, paused
    finally:
        monkeypatch.undo()
        time.tzset()


def test_each_item_of_a_ratelimit_field_is_heeded() -> None:
    """The IETF draft's ``RateLimit`` is a list, one item per policy: one
    out of units holds the limiter back, whichever comes last; an item
    that does not parse (``r=5x``) is counted, not read as ``5``."""
    field = '"hour";r=5x;t=1, "burst";r=0;t=5, "day";r=100;t=0'
    with answered({"RateLimit": field}, {"requests": Limit(100, burst=10)}) as (limiter, transport):
        assert not limiter.try_acquire(), "the burst policy is out of units for 5 s"
        assert transport.upstream.malformed == 1


def test_a_ratelimit_item_holds_back_the_limit_counting_its_unit() -> None:
    """A ``RateLimit`` item counts in its policy's unit: ``requests`` unless
    ``RateLimit-Policy`` says otherwise. It goes to the limit of that name,
    not to the first one (here ``tokens``): 3 until the reset in 1 s, all
    3 now (9 are left in the bucket)."""
    headers = {"RateLimit-Policy": '"minute";q=60;w=60', "RateLimit": '"minute";r=3;t=1'}
    limits = {"tokens": Limit(1000, burst=1000), "requests": Limit(1, burst=10)}
    with answered(headers, limits) as (limiter, transport):
        assert [limiter.try_acquire() for _ in range(4)] == [True, True, True, False]
        assert transport.upstream.policies == {"minute": QuotaPolicy(60, 60.0, "requests")}


@pytest.mark.parametrize(
    ("limits", "held"),
    [
        ({"units": Limit(1000, burst=10)}, True),  # rate=: its one limit counts requests
        ({"Requests": Limit(1000, burst=10)}, True),  # in any case
        ({"tokens": Limit(1000, burst=10)}, False),  # not requests
        ({"tokens": Limit(1000, burst=10), "calls": Limit(1000, burst=10)}, False),
    ],
)
def test_a_ratelimit_item_in_requests_reaches_only_a_limit_of_requests(
    limits: dict[str, Limit], held: bool
) -> None:
    """A ``RateLimit`` item with no policy counts requests: it reaches a
    limit so named (in any case) or a ``rate=`` limiter's one limit,
    ``units``, as ``x-ratelimit-*-requests`` does, and no other, counted
    ignored. It went to the first limit: a limiter of tokens alone took 3
    requests left for 3 tokens left, and held every request that cost more
    for the whole reset."""
    headers = {"RateLimit": '"minute";r=3;t=5'}
    with answered(headers, limits) as (limiter, transport):
        granted = [limiter.try_acquire() for _ in range(5)]
        assert granted == ([True] * 3 + [False] * 2 if held else [True] * 5)
        assert transport.upstream.ignored == (0 if held else 1)


def test_the_policies_remembered_stay_bounded() -> None:
    """An upstream that names a new policy on every response (a key or a
    request id in the name) leaves at most MAX_POLICIES remembered, the
    latest named: one per response, for weeks, was one entry each."""
    with threads.open_limiter(Fifo(), rate=1000, burst=10) as limiter:
        upstream = Upstream(limiter)
        for i in range(3 * MAX_POLICIES):
            upstream.learn(200, {"ratelimit-policy": f'"key{i}";q=100000;w=60'})
        assert len(upstream.policies) == MAX_POLICIES
        assert f"key{3 * MAX_POLICIES - 1}" in upstream.policies, "the latest is kept"
        assert "key0" not in upstream.policies


def test_a_policy_named_again_in_one_thread_is_known_to_another_thread_s_item() -> None:
    """A transport shared by threads: one thread's response names a policy
    again (``RateLimit-Policy``, on every response) while another's reads
    an item of it (``RateLimit``). The policy was taken out and put back,
    so the reader could find none between, and count the item in the unit
    of no policy, requests: a tokens quota of 0 held every request back
    for its 5 s. A new dict of policies replaces the old now, whole."""
    limits = {"requests": Limit(1000, burst=1000), "tokens": Limit(10**6, burst=10**6)}
    policy = {"ratelimit-policy": '"tok";q=1000000;w=60;qu="tokens"'}
    item = {"ratelimit": '"tok";r=0;t=5'}
    interval = sys.getswitchinterval()
    with threads.open_limiter(Fifo(), limits=limits) as limiter:
        upstream = Upstream(limiter)
        upstream.learn(200, policy)
        end = time.monotonic() + 1.5

        def learn(headers: dict[str, str]) -> None:
            while time.monotonic() < end:
                upstream.learn(200, headers)

        sys.setswitchinterval(1e-6)  # threads switch as often as they can
        try:
            workers = [threading.Thread(target=learn, args=(h,)) for h in (policy, item)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        finally:
            sys.setswitchinterval(interval)
        assert not limiter.try_acquire(cost={"requests": 0, "tokens": 1}), "tokens: 0 left"
        assert limiter.try_acquire(cost={"requests": 1, "tokens": 0}), "requests: not held"


def test_the_earlier_drafts_policy_is_a_policy_not_a_malformed_header() -> None:
    """The draft's 7th version (express-rate-limit's ``draft-7`` headers)
    writes a policy as its quota, ``100;w=60``, beside the dictionary
    ``RateLimit`` this module reads: it is remembered, named by its quota,
    where each response counted it malformed (it has no ``q``)."""
    headers = {"RateLimit-Policy": "100;w=60", "RateLimit": "limit=100, remaining=99, reset=60"}
    with answered(headers, {"requests": Limit(100, burst=10)}) as (_, transport):
        assert transport.upstream.policies == {"100": QuotaPolicy(100, 60.0, "requests")}
        assert transport.upstream.malformed == 0


@pytest.mark.parametrize(
    ("headers", "malformed", "held"),
    [
        ({"RateLimit-Limit": "100", "RateLimit-Remaining": "0", "RateLimit-Reset": "30"}, 0, True),
        ({"RateLimit-Remaining": "0"}, 1, False),  # and no reset: how long is not said
        ({"RateLimit-Remaining": "0", "RateLimit-Reset": "soon"}, 1, False),
    ],
)
def test_the_drafts_own_fields_before_the_7th_are_a_quota(
    headers: dict[str, str], malformed: int, held: bool
) -> None:
    """The draft to its 6th version (express-rate-limit's ``draft-6``
    headers, its ``standardHeaders: true``) sends what is left and the
    reset in fields of their own, ``RateLimit-Remaining`` and
    ``RateLimit-Reset``, beside the policy ``100;w=60``: the policy was
    remembered and warned about, and the count ignored, so the limiter went
    on into the upstream's 429s. They are the quota the later ``RateLimit``
    field says, and malformed ones are counted."""
    headers = {"RateLimit-Policy": "100;w=60", **headers}
    with answered(headers, {"requests": Limit(1, burst=10)}) as (limiter, transport):
        assert transport.upstream.policies == {"100": QuotaPolicy(100, 60.0, "requests")}
        assert transport.upstream.malformed == malformed
        assert limiter.try_acquire() is not held


def test_a_parameter_with_no_value_does_not_rename_the_policy() -> None:
    """A structured field's parameter with no value is a boolean (``;x``
    for ``;x=?1``), which the draft lets an upstream add. It was read as the
    member's name: the policy ``"tokens"`` was remembered as ``"x"``, so the
    item naming it fell to the first limit, and its 0 left held back the
    requests for 30 s instead of the tokens."""
    headers = {
        "RateLimit-Policy": '"tokens";q=1000;w=60;qu="tokens";x',
        "RateLimit": '"tokens";r=0;t=30;x',
    }
    limits = {"requests": Limit(1, burst=10), "tokens": Limit(1000, burst=1000)}
    with answered(headers, limits) as (limiter, transport):
        assert transport.upstream.policies == {"tokens": QuotaPolicy(1000, 60.0, "tokens")}
        assert not limiter.try_acquire(cost={"requests": 1, "tokens": 1}), "no tokens left"
        assert limiter.try_acquire(cost={"requests": 1, "tokens": 0}), "the requests are not held"
        assert transport.upstream.malformed == 0


@pytest.mark.parametrize(
    ("written", "name"),
    [('tokens, eu;west \\"b\\"', 'tokens, eu;west "b"'), ("tokens=eu", "tokens=eu")],
)
def test_a_quoted_policy_name_may_hold_what_separates_a_field(written: str, name: str) -> None:
    """A policy's name is a structured field's string: ``"tokens, eu;west"``
    is one name (it was split into members at its comma and semicolon),
    an escaped quote stays in it, and ``"tokens=eu"`` is a name too (it was
    read as a parameter, the policy malformed). Each time its item fell to
    the first limit, holding back the requests and not the tokens."""
    headers = {
        "RateLimit-Policy": f'"{written}";q=1000;w=60;qu="tokens"',
        "RateLimit": f'"{written}";r=0;t=30',
    }
    limits = {"requests": Limit(1, burst=10), "tokens": Limit(1000, burst=1000)}
    with answered(headers, limits) as (limiter, transport):
        assert transport.upstream.policies == {name: QuotaPolicy(1000, 60.0, "tokens")}
        assert not limiter.try_acquire(cost={"requests": 1, "tokens": 1}), "no tokens left"
        assert limiter.try_acquire(cost={"requests": 1, "tokens": 0}), "the requests are not held"
        assert transport.upstream.malformed == 0


def test_a_ratelimit_item_in_a_unit_no_limit_counts_is_ignored() -> None:
    """A policy counting ``content-bytes`` says nothing about a limit of
    requests: its item is counted in ``ignored`` and holds nothing back,
    while one in ``requests`` is read for the limit of that name (3 until
    the reset in 1 s: 3 now)."""
    headers = {
        "RateLimit-Policy": '"bytes";q=1000000;qu="content-bytes", calls;q=10;w=1',
        "RateLimit": '"bytes";r=0;t=50, "calls";r=3;t=1',
    }
    with answered(headers, {"requests": Limit(1, burst=10)}) as (limiter, transport):
        assert [limiter.try_acquire() for _ in range(4)] == [True, True, True, False]
        assert transport.upstream.ignored == 1
        assert transport.upstream.malformed == 0


def test_x_ratelimit_headers_for_a_name_no_limit_has_are_ignored_and_counted() -> None:
    """OpenAI's ``-tokens`` pair (and a lone ``-rpm``) under a limiter of
    requests only: each name is one item in ``ignored``, as a ``RateLimit``
    item in a unit no limit counts is (they were skipped, counted nowhere),
    while the ``-requests`` pair still holds the limiter back."""
    headers = {
        "x-ratelimit-limit-requests": "10",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "30s",
        "x-ratelimit-limit-tokens": "1000",
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "1m0s",
        "x-ratelimit-remaining-rpm": "5",
    }
    with answered(headers, {"requests": Limit(1, burst=10)}) as (limiter, transport):
        assert not limiter.try_acquire()
        assert transport.upstream.ignored == 2
        assert transport.upstream.malformed == 0


def test_a_policy_tighter_than_the_limit_is_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An upstream that declares 10 a minute, under a limit of 1 a second:
    one warning, however many responses repeat the policy. A policy that
    does not parse is counted (an empty member is none)."""
    policy = '"minute";q=10;w=60, "broken";q=ten, '
    with (
        serve_script(Script((200, {"RateLimit-Policy": policy}))) as url,
        threads.open_limiter(Fifo(), limits={"requests": Limit(1, burst=10)}) as limiter,
    ):
        transport = PermitsTransport(limiter)
        with httpx.Client(transport=transport) as client:
            for _ in range(3):
                assert client.get(url).status_code == 200
    warnings = [r for r in caplog.records if "'minute'" in r.getMessage()]
    assert len(warnings) == 1, caplog.text
    assert transport.upstream.malformed == 3


def test_a_field_sent_on_several_lines_is_read_whole() -> None:
    """A ``RateLimit`` list split over two lines: the second line's policy,
    out of units for 5 s, holds the limiter back."""
    lines = ['"hour";r=500;t=1', '"burst";r=0;t=5']
    with (
        serve_script(Script((200, {"RateLimit": lines}))) as url,
        threads.open_limiter(Fifo(), 100, 10) as limiter,
    ):
        with httpx.Client(transport=PermitsTransport(limiter)) as client:
            assert client.get(url).status_code == 200
        assert limiter.try_acquire() is False


@pytest.mark.usefixtures("switch_often")
def test_the_counters_count_every_response_from_many_threads() -> None:
    """One transport's counters, bumped by eight threads at once, miss none."""
    with threads.open_limiter(Fifo(), limits={"requests": Limit(1000, burst=10)}) as limiter:
        upstream = Upstream(limiter)
        with ThreadPoolExecutor(8) as pool:
            for _ in pool.map(lambda _: upstream.learn(429, {}), range(40_000)):
                pass
        assert upstream.throttled == 40_000


def _chunks() -> Iterator[bytes]:
    yield b"ab"
    yield b"c"


def _throttled_once() -> Any:
    """An upstream for ``httpx.MockTransport``: a 429 with ``Retry-After:
    0``, then 200s. Its responses come built whole, their bodies read."""
    sent: list[int] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        sent.append(1)
        if len(sent) == 1:
            return httpx.Response(429, headers={"Retry-After": "0"}, text="slow down")
        return httpx.Response(200, json={"n": len(sent)})

    return upstream


def test_a_mock_transports_429_is_retried() -> None:
    """A 429 from a transport whose responses come read already
    (``httpx.MockTransport``, as in tests; a caching transport) is retried
    like one from the network: not refused by httpx (``StreamConsumed``,
    its body read a second time)."""
    with threads.open_limiter(Fifo(), 100, 10) as limiter:
        transport = PermitsTransport(limiter, httpx.MockTransport(_throttled_once()), retries=1)
        with httpx.Client(transport=transport) as client:
            response = client.get("http://upstream.test/")
        assert (response.status_code, response.json()) == (200, {"n": 2})
        assert (transport.upstream.throttled, limiter.statistics().levels[0].granted) == (1, 2)


@pytest.mark.anyio
async def test_a_mock_transports_429_is_retried_async() -> None:
    async with asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter:
        upstream = httpx.MockTransport(_throttled_once())
        transport = AsyncPermitsTransport(limiter, upstream, retries=1)
        async with httpx.AsyncClient(transport=transport) as client:
            response = await client.get("http://upstream.test/")
        assert (response.status_code, response.json()) == (200, {"n": 2})
        assert (transport.upstream.throttled, limiter.statistics().levels[0].granted) == (1, 2)


@pytest.mark.parametrize("body", [_chunks, lambda: iter([b"ab", b"c"])])
def test_a_streamed_body_is_sent_again_whole(body: Any) -> None:
    """A request whose body is streamed (a generator, an iterator) is sent
    again after a 429 as it was the first time: not refused by httpx
    (``StreamConsumed``), not sent empty."""
    script = Script((429, {"Retry-After": "0"}), (200, {}))
    with (
        serve_script(script) as url,
        threads.open_limiter(Fifo(), 100, 10) as limiter,
    ):
        transport = PermitsTransport(limiter, retries=1)
        with httpx.Client(transport=transport) as client:
            assert client.post(url, content=body()).status_code == 200
    assert script.bodies == [b"abc", b"abc"]


@pytest.mark.anyio
async def test_a_streamed_body_is_sent_again_whole_async() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"ab"
        yield b"c"

    script = Script((429, {"Retry-After": "0"}), (200, {}))
    with serve_script(script) as url:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter:
            transport = AsyncPermitsTransport(limiter, retries=1)
            async with httpx.AsyncClient(transport=transport) as client:
                assert (await client.post(url, content=chunks())).status_code == 200
    assert script.bodies == [b"abc", b"abc"]


def test_a_throttled_response_is_not_settled() -> None:
    """A 429 the retries did not get past reaches the caller as it is: the
    ``settle`` that reads a served response's usage is not called on it
    (it was not served), and the permit keeps the cost asked for."""
    settled: list[int] = []

    def settle(response: httpx.Response) -> int:
        settled.append(response.status_code)
        return int(response.json()["usage"]["total_tokens"])

    script = Script((429, {"Retry-After": "0"}))
    with (
        serve_script(script) as url,
        threads.open_limiter(Fifo(), 100, 10, settle_window=60.0) as limiter,
    ):
        transport = PermitsTransport(limiter, settle=settle, retries=1, cost=lambda request: 3)
        with httpx.Client(transport=transport) as client:
            assert client.get(url).status_code == 429
        assert settled == []
        assert limiter.statistics().levels[0].granted == 2  # the first try and the retry
        assert limiter.statistics().levels[0].units_granted == (6,)  # unsettled


@pytest.mark.anyio
async def test_a_throttled_response_is_not_settled_async() -> None:
    script = Script((503, {"Retry-After": "0"}))
    with serve_script(script) as url:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10, settle_window=60.0) as limiter:
            transport = AsyncPermitsTransport(
                limiter, settle=lambda response: response.json()["usage"], retries=2
            )
            async with httpx.AsyncClient(transport=transport) as client:
                assert (await client.get(url)).status_code == 503
            assert limiter.statistics().levels[0].granted == 3


def test_a_pause_in_force_counts_for_a_retry() -> None:
    """A 429 whose own Retry-After is short, while an earlier 429's longer
    pause (or one other code set) is in force, is not retried within a
    shorter timeout: what the next try would wait is the pause in force."""
    with threads.open_limiter(Fifo(), 100, 10) as limiter:
        upstream = Upstream(limiter)
        first = upstream.learn(429, httpx.Headers({"Retry-After": "30"}))
        second = upstream.learn(429, httpx.Headers({"Retry-After": "0.1"}))
        assert first is not None
        assert second is not None
        assert 29.0 < second <= first <= 30.0
        assert not retry(second, 0, 2, timeout=0.5)
        assert retry(second, 0, 2, timeout=None)
        limiter.pause_for(60.0)  # set by other code: it counts too
        third = upstream.learn(429, httpx.Headers({"Retry-After": "0.1"}))
        assert third is not None
        assert 59.0 < third <= 60.0


def test_no_retry_outlasts_the_timeout() -> None:
    """A 429 whose pause is longer than the transport's ``timeout`` is
    returned, not sent again: the retry's wait for a permit could only time
    out, and the response saying why would be lost. A pause within the
    timeout is retried."""

    def sent(retry_after: str) -> tuple[int, str | None, int]:
        """The status and Retry-After the caller gets, and the sends made."""
        script = Script((429, {"Retry-After": retry_after}), (200, {}))
        with (
            serve_script(script) as url,
            threads.open_limiter(Fifo(), 100, 10) as limiter,
        ):
            transport = PermitsTransport(limiter, retries=2, timeout=0.5)
            with httpx.Client(transport=transport) as client:
                response = client.get(url)
        return response.status_code, response.headers.get("retry-after"), len(script.bodies)

    assert sent("30") == (429, "30", 1)
    assert sent("0") == (200, None, 2)


@pytest.mark.parametrize(
    ("headers", "sends"),
    [
        ({"x-should-retry": "false"}, 1),  # no Retry-After: no backoff either
        ({"x-should-retry": "False", "Retry-After": "0"}, 1),
        ({"x-should-retry": "true"}, 2),  # sent again after a backoff, as without it
        ({"x-should-retry": "true", "Retry-After": "0"}, 2),
        ({"Retry-After": "0"}, 2),
    ],
)
@pytest.mark.parametrize("status", [429, 503])
def test_a_throttled_response_that_says_not_to_retry_is_returned(
    headers: dict[str, str], sends: int, status: int
) -> None:
    """A 429 or 503 whose ``x-should-retry`` says ``false`` (the OpenAI and
    Anthropic APIs' word that another try cannot succeed: a quota used up)
    is returned at once, not sent again, and nothing pauses for a backoff;
    ``true`` changes nothing."""
    script = Script((status, headers), (200, {}))
    with serve_script(script) as url, threads.open_limiter(Fifo(), 100, 10) as limiter:
        transport = PermitsTransport(limiter, retries=2)
        transport.upstream.jitter = lambda: 1.0  # the shortest backoff: 0.375 s
        with httpx.Client(transport=transport) as client:
            response = client.get(url)
        assert response.status_code == (status if sends == 1 else 200)
        assert len(script.bodies) == sends
        assert transport.upstream.backoffs == (sends - 1 if "Retry-After" not in headers else 0)
        assert limiter.statistics().levels[0].granted == sends


@pytest.mark.anyio
async def test_a_throttled_response_that_says_not_to_retry_is_returned_async() -> None:
    script = Script((429, {"x-should-retry": "false", "Retry-After": "0"}), (200, {}))
    with serve_script(script) as url:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter:
            transport = AsyncPermitsTransport(limiter, retries=2)
            async with httpx.AsyncClient(transport=transport) as client:
                response = await client.get(url)
    assert (response.status_code, len(script.bodies)) == (429, 1)


#: A 429 whose own pause is short, while the upstream's quota holds every
#: request for 30 s: a retry's permit cannot come within a short timeout.
HELD_BACK = (429, {"Retry-After": "0", "RateLimit": '"default";r=0;t=30'})


def test_a_retry_held_back_past_the_timeout_returns_the_429() -> None:
    """A 429 whose pause is short but whose other headers (the quota) hold
    the next permit back longer than the ``timeout``: the retry raised
    ``AcquireTimeout`` (``WouldWaitTooLong``), and the 429 saying why was
    lost. That 429 is returned, whole, as one returned without a retry; at
    once, the retry refused as too long (``max_wait``), not after waiting
    out the timeout for a permit that could not come."""
    script = Script(HELD_BACK, (200, {}))
    with (
        serve_script(script) as url,
        threads.open_limiter(Fifo(), limits={"requests": Limit(1, burst=10)}) as limiter,
    ):
        transport = PermitsTransport(limiter, retries=1, timeout=0.5)
        with httpx.Client(transport=transport) as client:
            response = client.get(url)
        assert (response.status_code, response.json()) == (429, {"ok": True})
        assert response.headers["retry-after"] == "0"
        assert response.elapsed.total_seconds() >= 0
        stats = limiter.statistics().levels[0]
        assert (stats.granted, stats.too_long, stats.expired) == (1, 1, 0)
    assert len(script.bodies) == 1


def test_a_retry_that_cannot_queue_returns_the_429() -> None:
    """A level that takes no waiter (``max_waiting=0``: granted at once or
    ``QueueFull``): the retry after a pause cannot wait for it, and the 429
    is returned; ``QueueFull`` was raised, the 429 lost."""
    script = Script((429, {"Retry-After": "5"}), (200, {}))
    with (
        serve_script(script) as url,
        threads.open_limiter(Fifo(), 100, 10, max_waiting=0) as limiter,
        httpx.Client(transport=PermitsTransport(limiter, retries=1)) as client,
    ):
        assert client.get(url).status_code == 429
    assert len(script.bodies) == 1


@pytest.mark.anyio
async def test_a_retry_held_back_past_the_timeout_returns_the_429_async() -> None:
    script = Script(HELD_BACK, (200, {}))
    with serve_script(script) as url:
        async with asyncio_adapter.open_limiter(
            Fifo(), limits={"requests": Limit(1, burst=10)}
        ) as limiter:
            transport = AsyncPermitsTransport(limiter, retries=1, timeout=0.5)
            async with httpx.AsyncClient(transport=transport) as client:
                response = await client.get(url)
            assert (response.status_code, response.json()) == (429, {"ok": True})
            assert response.elapsed.total_seconds() >= 0
            # refused at once as too long, not waited out to the timeout
            stats = limiter.statistics().levels[0]
            assert (stats.granted, stats.too_long, stats.expired) == (1, 1, 0)
    assert len(script.bodies) == 1


def test_the_openai_headers_are_a_bucket_that_refills() -> None:
    """``x-ratelimit-remaining-*`` is what is left now, and
    ``x-ratelimit-reset-*`` when the bucket is full again: 5 of 10 left,
    full in 5 s at 1/s, lets 5 calls go at once (not none until the
    reset nears, as a quota of 5 until then would), and no sixth."""
    with (
        serve_script(
            Script(
                (200, {"x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "5s"})
            )
        ) as url,
        threads.open_limiter(Fifo(), limits={"requests": Limit(1, burst=10)}) as limiter,
    ):
        with httpx.Client(transport=PermitsTransport(limiter)) as client:
            assert client.get(url).status_code == 200
        assert [limiter.try_acquire() for _ in range(6)] == [True] * 5 + [False]


def test_the_openai_headers_keep_the_bucket_from_filling_before_the_reset() -> None:
    """A limit configured faster than the upstream's: nothing left, full
    again in 1 s, holds the limiter back until the upstream's bucket has
    refilled as much as the limiter's own would (0.9 s for a burst of 10
    at 100/s), not one interval."""
    headers = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"}
    with answered(headers, {"requests": Limit(100, burst=10)}) as (limiter, _):
        machine = limiter.machine
        due = machine.next_due()
        assert due is not None
        assert machine.now is not None
        assert due - machine.now >= 850_000_000  # ns: 0.9 s, less the time the call took


def test_the_ietf_field_is_a_quota_until_the_reset() -> None:
    """``RateLimit: r=5;t=50`` is 5 until the reset, a count: at 1/s with a
    burst of 10 (9 left after the call), the 5 go at once and the sixth
    waits for the reset, not for the bucket (the window is not idled
    away, as reading it as the bucket's word would: nothing for 45 s)."""
    with answered({"RateLimit": '"default";r=5;t=50'}, {"requests": Limit(1, burst=10)}) as (
        limiter,
        _,
    ):
        assert [limiter.try_acquire() for _ in range(6)] == [True] * 5 + [False]
        wait = limiter.machine.min_wait(0)
        assert 49 * SECOND < wait <= 50 * SECOND, wait


@pytest.mark.parametrize(
    "headers",
    [
        {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "9999999h"},
        {"RateLimit": '"default";r=0;t=99999999'},
    ],
    ids=["x-ratelimit", "RateLimit"],
)
def test_a_reset_past_max_pause_holds_back_no_longer(
    headers: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing left until a reset years off (garbage, or an upstream's
    mistake) held every request back that long: ``max_pause`` cuts it, as
    it cuts a ``Retry-After``, with a warning said once (a day's quota
    comes on every response); the next response teaches the limiter again."""
    with threads.open_limiter(Fifo(), limits={"requests": Limit(100, burst=10)}) as limiter:
        upstream = Upstream(limiter, max_pause=5.0)
        with caplog.at_level(logging.WARNING, logger="permits"):
            upstream.learn(200, httpx.Headers(headers))
            upstream.learn(200, httpx.Headers(headers))  # (a day's window: on every response)
        assert upstream.malformed == 0
        assert caplog.text.count("cut to max_pause=5.0") == 1, "said once"
        assert limiter.try_acquire() is False, "nothing left until the (cut) reset"
        assert 4 * SECOND < limiter.machine.min_wait(0) <= 5 * SECOND


def test_each_policy_of_the_ietf_field_holds_until_its_own_reset() -> None:
    """``"burst";r=0;t=1, "day";r=50;t=3600``: nothing for a second, then
    up to 50 until the hour's end; the day's count is not held to the
    burst's 0 for the hour."""
    field = '"burst";r=0;t=1, "day";r=50;t=3600'
    with answered({"RateLimit": field}, {"requests": Limit(100, burst=10)}) as (limiter, _):
        assert limiter.try_acquire() is False
        assert 0 < limiter.machine.min_wait(0) <= SECOND
        assert limiter.machine.min_wait(0, cost=10) <= SECOND  # 10 of the day's 50


def _learned(headers: dict[str, str], limit: Limit, tries: int) -> list[bool]:
    """Whether each of ``tries`` calls may go at once after one answer
    carrying ``headers`` (and the call that brought it), under ``limit``."""
    with answered(headers, {"requests": limit}) as (limiter, _):
        return [limiter.try_acquire() for _ in range(tries)]


def test_the_openai_headers_teach_nothing_when_more_is_left_than_the_bucket_holds() -> None:
    """50 left of an upstream bucket full in 5 s, under a burst of 10: all
    9 left here go at once (the upstream's reset is of its own, bigger
    bucket). So do 10 left, as many as the bucket holds (the README: "unless
    its burst or more is left"), where taking the reset as this bucket's
    would hold half of them back."""
    headers = {"x-ratelimit-remaining-requests": "50", "x-ratelimit-reset-requests": "5s"}
    assert _learned(headers, Limit(1, burst=10), 10) == [True] * 9 + [False]
    headers["x-ratelimit-remaining-requests"] = "10"
    assert _learned(headers, Limit(1, burst=10), 10) == [True] * 9 + [False]


def test_the_openai_headers_scale_the_reset_by_the_upstreams_size() -> None:
    """4 left of an upstream bucket of 1,000 full again in 99.6 s (10/s, as
    here): with its size sent, this bucket of 10 may refill from those 4
    at once, as the upstream does; without it, the reset is taken as this
    bucket's, and nothing goes until it nears."""
    headers = {"x-ratelimit-remaining-requests": "4", "x-ratelimit-reset-requests": "99.6s"}
    sized = {**headers, "x-ratelimit-limit-requests": "1000"}
    assert _learned(sized, Limit(10, burst=10), 5) == [True] * 4 + [False]
    assert _learned(headers, Limit(10, burst=10), 1) == [False]


def test_the_openai_headers_never_fill_past_a_smaller_upstream() -> None:
    """An upstream bucket of 10, empty, full again in 1 s, under a burst of
    100 at 100/s: at the reset this bucket holds no more than the
    upstream's 10, so its first unit comes after 0.9 s, not one interval."""
    headers = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-limit-requests": "10",
    }
    with answered(headers, {"requests": Limit(100, burst=100)}) as (limiter, _):
        due, now = limiter.machine.next_due(), limiter.machine.now
        assert due is not None
        assert now is not None
        assert due - now >= 850_000_000  # ns: 0.9 s, less the time the call took


def test_a_response_after_the_settle_window_still_reaches_the_caller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A call slower than the limiter's ``settle_window`` cannot be settled
    any more: its permit keeps the cost asked for, a warning says why, and
    the response goes to the caller as any other (it was served)."""
    script = Script((200, {}), delay=0.3)
    with (
        serve_script(script) as url,
        threads.open_limiter(Fifo(), 100, 10, settle_window=0.05) as limiter,
    ):
        transport = PermitsTransport(limiter, settle=lambda response: 0, cost=lambda r: 3)
        with httpx.Client(transport=transport) as client:
            assert client.get(url).status_code == 200
        assert limiter.statistics().levels[0].units_granted == (3,)  # unsettled
    assert "settle_window" in caplog.text


def test_a_retry_asks_what_the_first_try_asked() -> None:
    """The level, flow and cost functions run once a request: its retries
    ask for the same permit (as the aiohttp middleware does), so a cost
    estimate with a side effect, or one that varies, is not asked again."""
    script = Script((429, {"Retry-After": "0"}), (429, {"Retry-After": "0"}), (200, {}))
    asked: list[str] = []

    def cost(request: httpx.Request) -> int:
        asked.append(str(request.url))
        return 1

    with serve_script(script) as url, threads.open_limiter(Fifo(), 100, 10) as limiter:
        transport = PermitsTransport(limiter, cost=cost, retries=2)
        with httpx.Client(transport=transport) as client:
            assert client.get(url).status_code == 200
        assert limiter.statistics().levels[0].granted == 3  # a permit each try
    assert len(asked) == 1


@pytest.mark.anyio
async def test_settle_on_a_redis_limiter_needs_its_settle_window(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The Redis limiter keeps its ``refund_window`` (1 s by default) where
    the others keep their settle window: ``settle`` was taken on one opened
    without a ``settle_window``, and each response then warned that it came
    after the window and kept the cost asked for; one opened with
    ``settle_window=60.0, refund_window=0`` had ``settle`` refused. Now the
    settle window is what is checked: the first is refused, the second
    settles (7 of the 10 asked come back)."""
    url = redis_server.url
    async with redis_adapter.open_limiter(Fifo(), url, name=_fresh(), rate=1, burst=10) as limiter:
        with pytest.raises(PermitValueError, match="settle_window"):
            AsyncPermitsTransport(limiter, settle=lambda response: 3)
    async with redis_adapter.open_limiter(
        Fifo(), url, name=_fresh(), rate=1, burst=10, settle_window=60.0, refund_window=0.0
    ) as limiter:
        transport = AsyncPermitsTransport(
            limiter,
            httpx.MockTransport(lambda request: httpx.Response(200)),
            cost=lambda request: 10,
            settle=lambda response: 3,
        )
        async with httpx.AsyncClient(transport=transport) as client:
            assert (await client.get("http://upstream.example/")).status_code == 200
        # settled at 3 of the 10 asked: 7 back at once (unsettled: 7 s away)
        await limiter.acquire(cost=7, timeout=2.0)
    assert "settle_window" not in caplog.text


@pytest.mark.anyio
@pytest.mark.parametrize(
    "headers",
    [
        {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "99999999999"},
        {"RateLimit": '"day";r=0;t=99999999999'},
    ],
)
async def test_a_reset_longer_than_a_redis_limiter_holds_is_malformed_not_fatal(
    redis_server: RedisServer, headers: dict[str, str]
) -> None:
    """A Redis limiter holds the upstream's word for at most 1e9 s (about
    31 years): a reset past that (a header's garbage: three thousand years)
    made ``adopt`` or ``quota`` raise ``PermitValueError`` out of the
    transport, and the served response was lost. The limiter's refusal is
    counted as malformed, and the response reaches the caller. (With the
    default ``max_pause``, an hour, such a reset is cut to it first.)"""
    script = Script((200, headers))
    with serve_script(script) as url:
        async with redis_adapter.open_limiter(
            Fifo(), redis_server.url, name=_fresh(), limits={"requests": Limit(100, burst=10)}
        ) as limiter:
            transport = AsyncPermitsTransport(limiter, max_pause=1e12)
            async with httpx.AsyncClient(transport=transport) as client:
                response = await client.get(url)
            assert (response.status_code, response.content) == (200, b'{"ok": true}')
            assert transport.upstream.malformed == 1
            assert not limiter.closed


@pytest.mark.anyio
@pytest.mark.parametrize("retries", [0, 1])
async def test_a_retry_after_longer_than_a_redis_limiter_holds_is_malformed_not_fatal(
    redis_server: RedisServer, retries: int
) -> None:
    """The same of a ``Retry-After`` (with a ``max_pause`` past 1e9 s): a
    pause past what the Redis limiter holds made ``pause_for`` raise
    ``PermitValueError`` (naming ``seconds``) out of the transport, and
    the 429 was lost. The limiter's refusal is counted as malformed,
    nothing pauses, and the 429 reaches the caller, not sent again."""
    script = Script((429, {"Retry-After": "99999999999"}), (200, {}))
    with serve_script(script) as url:
        async with redis_adapter.open_limiter(
            Fifo(), redis_server.url, name=_fresh(), limits={"requests": Limit(100, burst=10)}
        ) as limiter:
            transport = AsyncPermitsTransport(limiter, max_pause=1e12, retries=retries)
            async with httpx.AsyncClient(transport=transport) as client:
                response = await client.get(url)
            assert response.status_code == 429
            assert (transport.upstream.malformed, transport.upstream.pauses) == (1, 0)
            assert (limiter.pause_left(), len(script.bodies)) == (0.0, 1)
            assert not limiter.closed


@pytest.mark.anyio
async def test_a_quota_too_big_for_redis_holds_nothing_back(redis_server: RedisServer) -> None:
    """A ``RateLimit`` whose ``r`` is 2**63 or more (twenty digits: plenty
    left) was written by the Redis script as a 64-bit integer, the least
    one, a quota far below nothing: every process was held back until its
    reset (here 30 s; up to 1e9 s). More than Redis counts exactly, it
    counts as 2**53 units: no garbage, it holds nothing back."""
    script = Script((200, {"RateLimit": f'"day";r={"9" * 20};t=30'}))
    with serve_script(script) as url:
        async with redis_adapter.open_limiter(
            Fifo(), redis_server.url, name=_fresh(), limits={"requests": Limit(100, burst=10)}
        ) as limiter:
            transport = AsyncPermitsTransport(limiter)
            async with httpx.AsyncClient(transport=transport) as client:
                assert (await client.get(url)).status_code == 200
            await limiter.acquire(timeout=5.0)  # 10 ms at most, unless held back for 30 s
            assert transport.upstream.malformed == 0


def _fresh() -> str:
    """A Redis key name no other test uses."""
    return f"test-httpx-{time.monotonic_ns()}"


@pytest.mark.anyio
async def test_a_retry_cancelled_while_it_waits_out_the_pause_costs_no_permit() -> None:
    """A 429 pauses the limiter for 30 s; its retry waits for a new permit,
    and is cancelled while it waits: the first try's permit is the only
    one taken, and the request is not sent again."""
    script = Script((429, {"Retry-After": "30"}), (200, {}))
    with serve_script(script) as url:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter:
            transport = AsyncPermitsTransport(limiter, retries=1)
            async with (
                httpx.AsyncClient(transport=transport) as client,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(client.get, url)
                with anyio.fail_after(10):
                    while limiter.statistics().levels[0].waiting == 0:  # the retry
                        await anyio.sleep(0.01)
                tg.cancel_scope.cancel()
            level = limiter.statistics().levels[0]
            assert (level.granted, level.cancelled, level.units_granted) == (1, 1, (1,))
    assert len(script.bodies) == 1


@pytest.mark.parametrize(
    "headers",
    [
        {"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "1s"},
        {"RateLimit": '"default";r=3;t=1'},
    ],
)
def test_a_response_with_limit_headers_served_while_the_limiter_closed_reaches_the_caller(
    headers: dict[str, str],
) -> None:
    """The limiter closes (a shutdown) while a request is at the upstream,
    and the response says what is left of the limit, as OpenAI's say on
    every response: learning it raised ``LimiterClosed`` and the served
    response was lost. A closed limiter has nothing left to learn: the
    response goes to the caller, as it does when it is settled."""
    script = Script((200, headers), delay=0.3)
    response, transport = _closed_while_out(script)
    assert (response.status_code, response.content) == (200, b'{"ok": true}')
    assert transport.upstream.malformed == 0


def _closed_while_out(script: Script, retries: int = 0) -> tuple[httpx.Response, PermitsTransport]:
    """A request sent to ``script`` through a limiter that closes while the
    request is at the upstream: its response, and the transport."""
    with (
        serve_script(script) as url,
        threads.open_limiter(Fifo(), limits={"requests": Limit(100, burst=10)}) as limiter,
    ):
        transport = PermitsTransport(limiter, retries=retries)
        with httpx.Client(transport=transport) as client, ThreadPoolExecutor(1) as pool:
            sent = pool.submit(client.get, url)
            while not script.bodies:  # the request is at the upstream
                time.sleep(0.01)
            limiter.close()
            return sent.result(), transport


def test_settle_naming_the_tokens_alone_keeps_the_request() -> None:
    """As README says: under several limits, ``settle`` returning only the
    tokens used keeps the request the call asked for (it counts against
    the requests a minute); returning the token count as one number, which
    names no limit, is refused naming ``settle`` (it once settled every
    limit at it: 900 requests, every call held back 48 s, silently)."""

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"usage": {"total_tokens": 900}})

    limits = {"requests": Limit.per_minute(500), "tokens": Limit.per_minute(90_000)}
    with threads.open_limiter(Fifo(), limits=limits, settle_window=60.0) as limiter:
        for settle in [
            lambda r: {"tokens": r.json()["usage"]["total_tokens"]},
            lambda r: {"requests": 1, "tokens": r.json()["usage"]["total_tokens"]},
        ]:
            transport = PermitsTransport(
                limiter,
                httpx.MockTransport(upstream),
                cost=lambda r: {"requests": 1, "tokens": 1000},
                settle=settle,
            )
            with httpx.Client(transport=transport) as client:
                client.get("http://upstream.example/")
        assert limiter.statistics().levels[0].units_granted == (2, 1800)
        transport = PermitsTransport(
            limiter,
            httpx.MockTransport(upstream),
            cost=lambda r: {"requests": 1, "tokens": 1000},
            settle=lambda r: r.json()["usage"]["total_tokens"],
        )
        with httpx.Client(transport=transport) as client, pytest.raises(PermitValueError) as one:
            client.get("http://upstream.example/")
        assert str(one.value).startswith("settle=900: is one number for several limits"), one
        assert limiter.statistics().levels[0].units_granted == (3, 2800)  # as asked


@pytest.mark.parametrize(
    ("said", "error", "words"),
    [
        (
            {"tokens": 2.5},
            PermitTypeError,
            "settle['tokens']=2.5: expected an int of units, got float",
        ),
        ({"tokens": -1}, PermitValueError, "settle['tokens']=-1: must be at least 0"),
        (
            {"tokenz": 1},
            PermitValueError,
            "settle={'tokenz': 1}: 'tokenz' is not one of the limits ['tokens']",
        ),
    ],
)
def test_a_settle_that_returns_a_bad_cost_is_named(
    said: Any, error: type[Exception], words: str
) -> None:
    """What ``settle`` returns is refused naming ``settle``, the function
    the caller gave (the error named the limiter's own ``actual``, which
    the caller never wrote), or the entry of its mapping at fault."""

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"usage": {"total_tokens": 7}})

    limits = {"tokens": Limit(100, burst=10)}
    with threads.open_limiter(Fifo(), limits=limits, settle_window=60.0) as limiter:
        transport = PermitsTransport(
            limiter, httpx.MockTransport(upstream), settle=lambda response: said
        )
        with httpx.Client(transport=transport) as client, pytest.raises(error) as refused:
            client.get("http://upstream.example/")
    assert refused.value.argument == words.partition("=")[0]  # type: ignore[attr-defined]
    assert str(refused.value) == words


def test_a_request_whose_permit_does_not_come_within_the_timeout_raises_acquire_timeout() -> None:
    """As README says: the transport's ``timeout`` bounds the wait for a
    permit, and running out raises the limiter's ``AcquireTimeout``, a
    ``TimeoutError`` and not an ``httpx.HTTPError``; nothing is sent."""
    sent: list[httpx.Request] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200)

    with threads.open_limiter(Fifo(), 0.01) as limiter:  # a permit per 100 s
        transport = PermitsTransport(limiter, httpx.MockTransport(upstream), timeout=0.05)
        with httpx.Client(transport=transport) as client:
            assert client.get("http://upstream.example/").status_code == 200
            with pytest.raises(AcquireTimeout) as waited:
                client.get("http://upstream.example/")
    assert isinstance(waited.value, TimeoutError)
    assert not isinstance(waited.value, httpx.HTTPError)
    assert len(sent) == 1


@pytest.mark.parametrize("retries", [0, 2])
def test_a_429_answered_while_the_limiter_closed_reaches_the_caller(retries: int) -> None:
    """The limiter closes (a shutdown) while a request is at the upstream,
    which answers 429 with ``Retry-After``: the pause it asked for raised
    ``LimiterClosed`` and the response was lost, where a 200 with the same
    limit headers reached the caller (README: a response that comes after
    the limiter closed reaches the caller, its rate-limit headers teaching
    nothing). Nothing is retried: the limiter is closed."""
    script = Script((429, {"Retry-After": "1", "x-ratelimit-remaining-requests": "0"}), delay=0.3)
    response, transport = _closed_while_out(script, retries)
    assert (response.status_code, response.headers["retry-after"]) == (429, "1")
    assert len(script.bodies) == 1, "not sent again"
    assert transport.upstream.throttled == 1


def test_a_429_whose_retry_finds_the_limiter_closed_reaches_the_caller() -> None:
    """The limiter closes (a shutdown) after a 429 came back, while its
    retry waits out the pause it asked for: the retry's permit never comes,
    and the 429 reaches the caller, as it does when the limiter closes a
    moment sooner, while the request is out. (It raised ``LimiterClosed``,
    and the response was lost.)"""
    script = Script((429, {"Retry-After": "30"}), (200, {}))
    with (
        serve_script(script) as url,
        threads.open_limiter(Fifo(), limits={"requests": Limit(100, burst=10)}) as limiter,
    ):
        transport = PermitsTransport(limiter, retries=1, timeout=60.0)
        with httpx.Client(transport=transport) as client, ThreadPoolExecutor(1) as pool:
            sent = pool.submit(client.get, url)
            while not transport.upstream.pauses:  # the 429 is in, its pause taken
                time.sleep(0.01)
            limiter.close()
            response = sent.result(timeout=10)
    assert (response.status_code, response.headers["retry-after"]) == (429, "30")
    assert len(script.bodies) == 1, "not sent again"


class _RaisingPolicy:
    """A policy with a bug: it raises whenever it is asked to choose (never
    while nobody waits: a permit free is taken without asking)."""

    levels = 1

    def choose(self, queues: Any, now: int) -> int:
        raise KeyError("bug")

    def ahead(self, queues: Any, lv: int, now: int) -> int:
        return int(queues.depths[lv])


def test_a_limiter_that_breaks_as_a_retry_waits_is_not_taken_for_closed() -> None:
    """A limiter that breaks as the retry of a 429 waits (its policy raises
    once a caller must queue) is a fault, not a shutdown: the caller gets
    ``LimiterClosed`` naming its cause, not the 429 as if the limiter had
    been closed. (The policy is first asked as the pause of a second ends.)"""
    script = Script((429, {"Retry-After": "1"}), (200, {}))
    with (
        serve_script(script) as url,
        threads.open_limiter(cast(Any, _RaisingPolicy()), 100, 10) as limiter,
        httpx.Client(transport=PermitsTransport(limiter, retries=1, timeout=60.0)) as client,
        pytest.raises(LimiterClosed) as broken,
    ):
        client.get(url)
    assert isinstance(broken.value.cause, PolicyError), repr(broken.value.cause)
    assert len(script.bodies) == 1, "not sent again"


@pytest.mark.anyio
async def test_a_429_whose_retry_finds_the_limiter_closed_reaches_the_caller_async() -> None:
    """As above, through the async transport."""
    script = Script((429, {"Retry-After": "30"}), (200, {}))
    with serve_script(script) as url:
        async with (
            asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter,
            httpx.AsyncClient(
                transport=AsyncPermitsTransport(limiter, retries=1, timeout=60.0)
            ) as client,
            anyio.create_task_group() as tasks,
        ):
            transport = client._transport
            assert isinstance(transport, AsyncPermitsTransport)
            responses: list[httpx.Response] = []

            async def send() -> None:
                responses.append(await client.get(url))

            tasks.start_soon(send)
            while not transport.upstream.pauses:  # the 429 is in, its pause taken
                await anyio.sleep(0.01)
            await limiter.aclose()
        assert [r.status_code for r in responses] == [429]
        assert len(script.bodies) == 1, "not sent again"


@pytest.mark.parametrize("status", [429, 503])
def test_a_throttle_without_retry_after_answered_while_the_limiter_closed_reaches_the_caller(
    status: int,
) -> None:
    """As above, for a 429 or 503 that says no time (``retries`` would back
    off, pausing the limiter for a backoff of its own): the backoff's pause
    finds the limiter closed, and the response reaches the caller, not sent
    again."""
    script = Script((status, {}), delay=0.3)
    response, transport = _closed_while_out(script, retries=2)
    assert response.status_code == status
    assert len(script.bodies) == 1, "not sent again"
    assert transport.upstream.backoffs == 0, "no backoff taken: the limiter closed"


@pytest.mark.anyio
async def test_a_429_answered_while_the_limiter_closed_reaches_the_caller_async() -> None:
    """As above, through the async transport."""
    script = Script((429, {"Retry-After": "1"}), delay=0.3)
    with serve_script(script) as url:
        async with (
            asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter,
            httpx.AsyncClient(transport=AsyncPermitsTransport(limiter, retries=1)) as client,
            anyio.create_task_group() as tasks,
        ):
            responses: list[httpx.Response] = []

            async def send() -> None:
                responses.append(await client.get(url))

            tasks.start_soon(send)
            while not script.bodies:  # the request is at the upstream
                await anyio.sleep(0.01)
            await limiter.aclose()
        assert [r.status_code for r in responses] == [429]
        assert len(script.bodies) == 1, "not sent again"


@pytest.mark.parametrize("lines", [["30", "30"], ["10", "30"]])
def test_a_retry_after_sent_twice_pauses_for_the_longest(lines: list[str]) -> None:
    """A ``Retry-After`` sent on two lines (a proxy that repeats it) is read
    as one value, ``30, 30``, which was malformed: nothing was paused, and
    the next request went at once into the upstream's refusal. Each value
    is read now, and the longest pauses."""
    with (
        serve_script(Script((429, {"Retry-After": lines}))) as url,
        threads.open_limiter(Fifo(), 100, 10) as limiter,
    ):
        transport = PermitsTransport(limiter)
        with httpx.Client(transport=transport) as client:
            assert client.get(url).status_code == 429
        assert transport.upstream.malformed == 0
        assert limiter.pause_left() > 20.0


@pytest.mark.parametrize("lines", [["30", "soon"], ["-5", "30"], ["30", "nan"]])
def test_a_retry_after_line_that_does_not_parse_leaves_the_others_heeded(
    lines: list[str],
) -> None:
    """A ``Retry-After`` on two lines, one of which does not parse (a proxy
    adding its own garbage beside the upstream's ``30``): the whole was
    malformed, nothing paused, and the next request went at once into the
    upstream's refusal. The line that parses pauses; the other is counted
    as malformed."""
    with (
        serve_script(Script((429, {"Retry-After": lines}))) as url,
        threads.open_limiter(Fifo(), 100, 10) as limiter,
    ):
        transport = PermitsTransport(limiter)
        with httpx.Client(transport=transport) as client:
            assert client.get(url).status_code == 429
        assert (transport.upstream.malformed, transport.upstream.pauses) == (1, 1)
        assert limiter.pause_left() > 20.0


def _http_date(ahead: float) -> str:
    """The HTTP date ``ahead`` seconds from now."""
    return email.utils.formatdate(time.time() + ahead, usegmt=True)


@pytest.mark.parametrize(
    "lines",
    [
        lambda: [_http_date(10), _http_date(60)],
        lambda: ["10", _http_date(60)],
        lambda: [_http_date(60), "10"],
    ],
    ids=["two dates", "seconds then a date", "a date then seconds"],
)
def test_a_retry_after_sent_twice_as_dates_pauses_for_the_longest(
    lines: Callable[[], list[str]],
) -> None:
    """Two HTTP dates on two lines (a proxy's and the origin's) come joined,
    and the first date was read, its time zone dropped with the comma after
    it: the longer pause was lost. A date beside seconds was malformed.
    Each value is read now, and the longest pauses, as for seconds."""
    with (
        serve_script(Script((429, {"Retry-After": lines()}))) as url,
        threads.open_limiter(Fifo(), 100, 10) as limiter,
    ):
        transport = PermitsTransport(limiter)
        with httpx.Client(transport=transport) as client:
            assert client.get(url).status_code == 429
        assert transport.upstream.malformed == 0
        assert limiter.pause_left() > 50.0


def test_rate_limit_headers_sent_twice_are_read_cautiously() -> None:
    """``x-ratelimit-*`` headers sent on two lines (a proxy that repeats
    them, or two upstreams' views) come joined, ``5, 3``, and were counted
    malformed: nothing was learned. The least left, the longest reset and
    the smallest size are read now."""
    headers: dict[str, str | list[str]] = {
        "x-ratelimit-remaining-requests": ["5", "3"],
        "x-ratelimit-reset-requests": ["1s", "6s"],
        "x-ratelimit-limit-requests": ["10", "10"],
    }
    with (
        serve_script(Script((200, headers))) as url,
        threads.open_limiter(Fifo(), limits={"requests": Limit(1, burst=10)}) as limiter,
    ):
        transport = PermitsTransport(limiter)
        with httpx.Client(transport=transport) as client:
            assert client.get(url).status_code == 200
        assert transport.upstream.malformed == 0
        assert [limiter.try_acquire() for _ in range(4)] == [True, True, True, False]


def test_a_returned_429_with_a_compressed_body_reads_as_sent() -> None:
    """A 429 kept for a retry whose permit cannot come in time is returned:
    it was kept decoded, under its ``Content-Encoding: gzip``, and the
    client, decoding it again, raised ``DecodingError``. It is kept as it
    came, and the client decodes it once."""
    script = Script(
        (429, {"Retry-After": "0", "RateLimit": '"default";r=0;t=30', "Content-Encoding": "gzip"}),
        content=gzip.compress(b"slow down"),
    )
    with (
        serve_script(script) as url,
        threads.open_limiter(Fifo(), limits={"requests": Limit(1, burst=10)}) as limiter,
    ):
        transport = PermitsTransport(limiter, retries=1, timeout=0.5)
        with httpx.Client(transport=transport) as client:
            response = client.get(url)
        assert (response.status_code, response.content) == (429, b"slow down")


@pytest.mark.anyio
async def test_a_returned_429_with_a_compressed_body_reads_as_sent_async() -> None:
    """As the sync transport: the 429 returned reads as the upstream sent it."""
    script = Script(
        (429, {"Retry-After": "0", "RateLimit": '"default";r=0;t=30', "Content-Encoding": "gzip"}),
        content=gzip.compress(b"slow down"),
    )
    with serve_script(script) as url:
        async with asyncio_adapter.open_limiter(
            Fifo(), limits={"requests": Limit(1, burst=10)}
        ) as limiter:
            transport = AsyncPermitsTransport(limiter, retries=1, timeout=0.5)
            async with httpx.AsyncClient(transport=transport) as client:
                response = await client.get(url)
    assert (response.status_code, response.content) == (429, b"slow down")


def test_a_retry_after_is_cut_to_an_hour_by_default() -> None:
    """A ``Retry-After`` pauses the limiter at most ``max_pause``, an hour
    unless the transport (or ``Upstream``) is told otherwise (README)."""
    with threads.open_limiter(Fifo(), 100, 10) as limiter:
        assert Upstream(limiter).max_pause == 3600.0
        upstream = PermitsTransport(limiter).upstream
        paused = upstream.learn(429, httpx.Headers({"Retry-After": "7200"}))
        assert paused is not None
        assert 3590.0 < paused <= 3600.0, paused


@pytest.mark.parametrize(
    "headers",
    [
        {"x-ratelimit-remaining-tokens": "-27689", "x-ratelimit-reset-tokens": "64"},
        {"RateLimit-Policy": '"t";q=90000;w=60;qu="tokens"', "RateLimit": '"t";r=-5;t=64'},
    ],
)
def test_a_negative_remaining_is_nothing_left(headers: dict[str, str]) -> None:
    """Azure OpenAI sends a negative ``x-ratelimit-remaining-tokens`` once
    the window is oversubscribed (``-27689``, with its reset): it was
    counted as malformed and ignored, the strongest word to hold back lost,
    and the limiter went on into the upstream's refusals. A negative count
    is read as nothing left, until the reset."""
    limits = {"requests": Limit(100, burst=10), "tokens": Limit(1000, burst=1000)}
    with answered(headers, limits) as (limiter, transport):
        assert transport.upstream.malformed == 0
        assert not limiter.try_acquire(cost={"requests": 1, "tokens": 1}), "no tokens left"


@pytest.mark.parametrize("left", ["0", "-27689"])
def test_a_remaining_sent_without_its_reset_is_heeded(left: str) -> None:
    """Azure OpenAI sends ``x-ratelimit-remaining-tokens`` and ``-requests``
    with no ``x-ratelimit-reset-*``: they taught nothing, and were not
    counted (neither malformed nor ignored). What is left now is heeded,
    the bucket refilling from there at the limit's own rate: nothing left,
    nothing now (the next unit in a second, at 1 a second), 3 left, 3 now."""
    headers = {"x-ratelimit-remaining-requests": left}
    with answered(headers, {"requests": Limit(1, burst=5)}) as (limiter, transport):
        assert transport.upstream.malformed == 0
        assert not limiter.try_acquire()
    headers = {"x-ratelimit-remaining-requests": "3"}
    with answered(headers, {"requests": Limit(1, burst=5)}) as (limiter, transport):
        assert [limiter.try_acquire() for _ in range(4)] == [True] * 3 + [False]


def test_a_remaining_in_other_digits_than_ascii_is_malformed() -> None:
    """A remaining written in digits ``int`` reads but HTTP does not write
    (Arabic-Indic three, as a UTF-8 header decodes) is malformed: counted,
    and the bucket left as it was."""
    with threads.open_limiter(Fifo(), limits={"requests": Limit(100, burst=10)}) as limiter:
        upstream = Upstream(limiter)
        headers = {"x-ratelimit-remaining-requests": "\u0663", "x-ratelimit-reset-requests": "1s"}
        assert upstream.learn(200, headers) is None
        assert upstream.malformed == 1
        assert all(limiter.try_acquire() for _ in range(10)), "the bucket as it was"


@pytest.mark.parametrize(
    ("headers", "malformed"),
    [
        ({"x-ratelimit-reset-tokens": "soon"}, 1),  # a reset alone
        ({"x-ratelimit-reset-tokens": "1s"}, 0),  # alone, and reads: nothing to learn
        ({"ratelimit-reset": "soon"}, 1),  # the draft's own field, alone
        ({"ratelimit-reset": "5"}, 0),
        # a bucket size that does not parse, beside a remaining of the burst or more
        (
            {
                "x-ratelimit-remaining-tokens": "5000",
                "x-ratelimit-reset-tokens": "1s",
                "x-ratelimit-limit-tokens": "lots",
            },
            1,
        ),
        (
            {
                "x-ratelimit-remaining-tokens": "5000",
                "x-ratelimit-reset-tokens": "1s",
                "x-ratelimit-limit-tokens": "9000",
            },
            0,
        ),
    ],
)
def test_a_header_that_does_not_parse_is_counted_even_with_nothing_to_learn(
    headers: dict[str, str], malformed: int
) -> None:
    """As README says: a header that does not parse is ignored and counted
    in ``malformed``, also where the headers beside it leave nothing to
    learn (a reset without its remaining; a size beside a remaining of the
    whole burst). These were ignored uncounted."""
    limits = {"requests": Limit(10, burst=10), "tokens": Limit(1000, burst=1000)}
    with threads.open_limiter(Fifo(), limits=limits) as limiter:
        upstream = Upstream(limiter)
        upstream.learn(200, headers)
        assert upstream.malformed == malformed
        assert all(limiter.try_acquire() for _ in range(10)), "nothing learned"


def test_a_policy_whose_window_does_not_parse_is_malformed() -> None:
    """A ``RateLimit-Policy`` member whose ``w`` is no duration is
    malformed: counted, and not remembered as a policy."""
    with threads.open_limiter(Fifo(), 100, 10) as limiter:
        upstream = Upstream(limiter)
        upstream.learn(200, {"ratelimit-policy": '"day";q=100;w=soon, "hour";q=10;w=3600'})
        assert upstream.malformed == 1
        assert list(upstream.policies) == ["hour"]


def test_a_ratelimit_field_mixing_the_list_and_the_earlier_dictionary_heeds_both() -> None:
    """A ``RateLimit`` field holding a list item and the earlier draft's
    dictionary (two proxies' lines, joined by a comma) is read as both:
    the dictionary's ``remaining=0`` holds the limit back too."""
    with threads.open_limiter(Fifo(), 100, 10) as limiter:
        upstream = Upstream(limiter)
        upstream.learn(200, {"ratelimit": '"day";r=50;t=3600, remaining=0, reset=5'})
        assert upstream.malformed == 0
        assert not limiter.try_acquire(), "nothing is left for 5 s"


@contextlib.contextmanager
def _failing_upstream(where: str) -> Iterator[tuple[str, Hangup | None]]:
    """The URL of an upstream whose request fails before any response: a
    refused connection (nothing listens), or a hang-up once the request
    reached it (and the :class:`Hangup` that saw it)."""
    if where == "refused":
        yield closed_port(), None
    else:
        hangup = Hangup()
        with serve_hangup(hangup) as url:
            yield url, hangup


@pytest.mark.parametrize("where", ["refused", "hung up"])
def test_a_request_that_fails_before_its_response_keeps_its_permit(where: str) -> None:
    """As README says: the transport below raises before any response
    (the connection refused; the upstream hung up once it had the
    request): the error reaches the caller, the permit keeps the cost
    asked for (the request may have reached the upstream, which counts it:
    the transport cannot tell), ``settle`` is not called, and the request
    is not sent again (only a 429's or 503's ``Retry-After`` is)."""
    settled: list[int] = []

    def settle(response: httpx.Response) -> int:
        settled.append(1)
        return 1

    with (
        _failing_upstream(where) as (url, hangup),
        threads.open_limiter(Fifo(), 100, 10, settle_window=60.0) as limiter,
    ):
        transport = PermitsTransport(limiter, cost=lambda r: 5, settle=settle, retries=2)
        with httpx.Client(transport=transport) as client, pytest.raises(httpx.TransportError):
            client.post(url, content=b"x")
        level = limiter.statistics().levels[0]
        assert (level.granted, level.units_granted, level.refunded) == (1, (5,), 0)
    assert settled == []
    assert hangup is None or hangup.bodies == [b"x"]


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["refused", "hung up"])
async def test_a_request_that_fails_before_its_response_keeps_its_permit_async(
    where: str,
) -> None:
    settled: list[int] = []

    def settle(response: httpx.Response) -> int:
        settled.append(1)
        return 1

    with _failing_upstream(where) as (url, hangup):
        async with asyncio_adapter.open_limiter(Fifo(), 100, 10, settle_window=60.0) as limiter:
            transport = AsyncPermitsTransport(limiter, cost=lambda r: 5, settle=settle, retries=2)
            async with httpx.AsyncClient(transport=transport) as client:
                with pytest.raises(httpx.TransportError):
                    await client.post(url, content=b"x")
            level = limiter.statistics().levels[0]
            assert (level.granted, level.units_granted, level.refunded) == (1, (5,), 0)
    assert settled == []
    assert hangup is None or hangup.bodies == [b"x"]


@pytest.mark.anyio
async def test_a_stream_left_at_its_done_event_keeps_the_cost_asked_for() -> None:
    """As README warns: a loop that breaks at an event stream's ``data:
    [DONE]`` leaves the body before its end (which the server sends right
    after), and the permit keeps the estimate, its usage unread; read on
    to the end, the permit is settled at the usage."""
    parts = Parts(b'data: {"tokens": 7}\n\ndata: [DONE]\n\n', b"")
    parts.go.set()  # the end of the body right after [DONE]

    def settle(response: httpx.Response) -> int:
        return int(response.text.split('"tokens": ')[1].split("}")[0])

    async def units(stop_at_done: bool) -> tuple[int, ...]:
        async with asyncio_adapter.open_limiter(Fifo(), 100, 100, settle_window=60.0) as limiter:
            transport = AsyncPermitsTransport(limiter, cost=lambda r: 50, settle=settle)
            async with (
                httpx.AsyncClient(transport=transport) as client,
                client.stream("GET", url) as response,
            ):
                async for line in response.aiter_lines():
                    if line == "data: [DONE]" and stop_at_done:
                        break
            return limiter.statistics().levels[0].units_granted

    with serve_parts(parts) as url:
        assert await units(stop_at_done=True) == (50,)
        assert await units(stop_at_done=False) == (7,)


@pytest.mark.anyio
async def test_the_level_and_flow_come_from_the_extensions_then_functions_then_context() -> None:
    """As README says: a request's ``extensions`` name its level and flow
    first, then the transport's functions of the request (a ``None`` from
    them passing on), then the ``with level(...)`` block (inherited by a
    task created in it, even one that runs after the block), then
    ``default_level``."""
    import asyncio

    async with asyncio_adapter.open_limiter(
        StrictPriority(4), 100, 100, default_level=3
    ) as limiter:
        recording = limiter.record()
        transport = AsyncPermitsTransport(
            limiter,
            level=lambda request: 2 if request.url.path == "/fn" else None,
            flow=lambda request: "fn" if request.url.path == "/fn" else None,
        )
        with serve_script(Script((200, {}))) as url:
            async with httpx.AsyncClient(transport=transport, base_url=url) as client:
                await client.get("/")
                with level(1):
                    await client.get("/")
                    await client.get("/fn")
                    await client.get("/fn", extensions={"permits.level": 0, "permits.flow": "x"})
                    await asyncio.create_task(client.get("/"))
                    task = asyncio.create_task(client.get("/"))
                await task
        seen = [(call.level, call.flow) for call in recording.calls]
    assert seen == [(3, None), (1, None), (2, "fn"), (0, "x"), (1, None), (1, None)]


# A 429 or 503 that says no Retry-After: sent again after the reset its
# rate-limit headers say, else after a backoff that pauses the whole limiter.
# The limiter runs on virtual time (permits.testing.run), the server on a
# real socket: the client's own timeouts are off, so that only the limiter
# sets timers and the clock jumps only to them.


def _sent_on_virtual_time(
    script: Script,
    jitter: float = 0.0,
    limits: Mapping[str, Limit] | None = None,
    **options: Any,
) -> tuple[httpx.Response, float, Upstream, asyncio_adapter.Limiter]:
    """The response the caller gets for one GET through an
    ``AsyncPermitsTransport`` (``options``, each backoff's jitter
    ``jitter``) over an asyncio limiter of ``limits`` (10 requests a
    second, burst 1, unless given) on virtual time, to a server answering
    as ``script`` says; the virtual seconds it took, the transport's
    upstream and the limiter (closed)."""

    async def main(url: str) -> tuple[httpx.Response, float, Upstream, asyncio_adapter.Limiter]:
        async with asyncio_adapter.open_limiter(
            Fifo(), limits=limits or {"requests": Limit(10, burst=1)}
        ) as limiter:
            transport = AsyncPermitsTransport(limiter, **options)
            transport.upstream.jitter = lambda: jitter
            async with httpx.AsyncClient(transport=transport, timeout=None) as client:
                start = anyio.current_time()
                response = await client.get(url)
                return response, anyio.current_time() - start, transport.upstream, limiter

    with serve_script(script) as url:
        return testing.run(main(url))


def _balance(limiter: asyncio_adapter.Limiter | threads.Limiter, script: Script) -> None:
    """The permits granted, less those given back, are the requests that
    reached the upstream: each try took one, and kept it."""
    stats = limiter.statistics().levels[0]
    assert stats.granted - stats.refunded == len(script.bodies)


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize(("jitter", "factor"), [(0.0, 1.0), (0.5, 0.875)])
def test_a_throttled_response_without_retry_after_is_retried_after_a_backoff(
    status: int, jitter: float, factor: float
) -> None:
    """A 429 or 503 with no Retry-After, twice: the request is sent again
    after 0.5 s, then 1 s (less up to a quarter by the jitter), each a
    pause of the whole limiter, and the third try is served."""
    script = Script((status, {}), (status, {}), (200, {}))
    response, took, upstream, limiter = _sent_on_virtual_time(script, jitter, retries=3)
    assert response.status_code == 200
    assert took == pytest.approx((0.5 + 1.0) * factor, abs=1e-6)
    assert (upstream.pauses, upstream.backoffs, upstream.malformed) == (2, 2, 0)
    assert len(script.bodies) == 3
    _balance(limiter, script)


def test_a_backoff_is_bounded_by_retries() -> None:
    """An upstream that answers 429 with no Retry-After to every try: two
    retries after 0.5 s and 1 s, and the third 429 is returned, pausing
    nothing (no retry is left to wait for)."""
    script = Script((429, {}))
    response, took, upstream, limiter = _sent_on_virtual_time(script, retries=2)
    assert response.status_code == 429
    assert took == pytest.approx(1.5, abs=1e-6)
    assert (upstream.throttled, upstream.backoffs) == (3, 2)
    assert len(script.bodies) == 3
    _balance(limiter, script)


def test_a_backoff_is_bounded_by_the_timeout() -> None:
    """With ``timeout=1.5``: the backoffs of 0.5 s and 1 s fit, the next
    (2 s) does not: that 429 is returned at once, and the limiter is not
    paused for it."""
    script = Script((429, {}))
    response, took, upstream, limiter = _sent_on_virtual_time(script, retries=5, timeout=1.5)
    assert response.status_code == 429
    assert took == pytest.approx(1.5, abs=1e-6)
    assert (upstream.pauses, upstream.backoffs, len(script.bodies)) == (2, 2, 3)
    _balance(limiter, script)


@pytest.mark.parametrize("headers", [{"Retry-After": "1"}, {}])
def test_a_pause_as_long_as_the_timeout_returns_the_429_at_once(headers: dict[str, str]) -> None:
    """A pause (here 1 s of ``Retry-After``, or a first backoff of 0.5 s)
    exactly as long as the ``timeout`` (1 s, 0.5 s): the retry's permit
    would come at the instant its wait times out, and the timeout wins.
    The transport waited the whole pause, then returned the 429 anyway;
    it returns it at once, and no backoff pauses the limiter."""
    timeout = 1.0 if headers else 0.5
    script = Script((429, headers), (200, {}))
    response, took, upstream, limiter = _sent_on_virtual_time(script, retries=1, timeout=timeout)
    assert response.status_code == 429
    assert took == 0
    assert (upstream.backoffs, len(script.bodies)) == (0, 1)
    _balance(limiter, script)


def test_a_retry_after_that_does_not_parse_is_counted_and_backed_off() -> None:
    """A Retry-After that is neither seconds nor a date is counted in
    ``malformed``, never fatal, and the 429 is retried after a backoff as
    one without it."""
    script = Script((429, {"Retry-After": "soon"}), (200, {}))
    response, took, upstream, limiter = _sent_on_virtual_time(script, retries=1)
    assert response.status_code == 200
    assert took == pytest.approx(0.5, abs=1e-6)
    assert (upstream.malformed, upstream.backoffs) == (1, 1)
    _balance(limiter, script)


@pytest.mark.parametrize(
    "headers",
    [
        {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "3s"},
        {"RateLimit": '"default";r=0;t=3'},
    ],
)
@pytest.mark.parametrize("name", ["requests", "units"])
def test_a_429_whose_headers_say_nothing_is_left_is_retried_at_their_reset(
    headers: dict[str, str], name: str
) -> None:
    """A 429 with no Retry-After whose rate-limit headers say nothing is
    left until a reset 3 s off: the limiter takes their word, and the
    retry waits for it, not for a backoff on top. Their ``requests`` reach
    the first limit when none is so named (``units``, the one limit of
    ``open_limiter(policy, rate, burst)``): the ``x-ratelimit-*-requests``
    pair was ignored there, and the retry went after a backoff."""
    script = Script((429, headers), (200, {}))
    limits = {name: Limit(10, burst=1)}
    response, took, upstream, limiter = _sent_on_virtual_time(script, limits=limits, retries=1)
    assert response.status_code == 200
    assert took == pytest.approx(3.0, abs=1e-6)
    assert (upstream.pauses, upstream.backoffs, upstream.ignored) == (0, 0, 0)
    _balance(limiter, script)


@pytest.mark.parametrize(
    ("headers", "seconds", "malformed"),
    [
        ({"retry-after-ms": "250"}, 0.25, 0),
        ({"retry-after-ms": "250", "Retry-After": "1"}, 0.25, 0),
        ({"retry-after-ms": "soon", "Retry-After": "1"}, 1.0, 1),
    ],
)
def test_retry_after_ms_is_heeded_before_retry_after(
    headers: dict[str, str], seconds: float, malformed: int
) -> None:
    """The OpenAI clients' ``retry-after-ms``, in milliseconds, pauses as a
    Retry-After does, and counts before it; one that does not parse is
    counted, and the Retry-After heeded."""
    script = Script((429, headers), (200, {}))
    response, took, upstream, limiter = _sent_on_virtual_time(script, retries=1)
    assert response.status_code == 200
    assert took == pytest.approx(seconds, abs=1e-6)
    assert (upstream.pauses, upstream.backoffs, upstream.malformed) == (1, 0, malformed)
    _balance(limiter, script)


def test_the_backoff_doubles_to_its_cap_less_its_jitter() -> None:
    """0.5 s doubling each try, at most 8 s; a jitter in [0, 1) takes off
    up to a quarter; a try far along neither overflows nor exceeds it."""
    assert [backoff(n, 0.0) for n in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert (BACKOFF, MAX_BACKOFF) == (0.5, 8.0)
    assert backoff(0, 0.5) == 0.4375
    assert backoff(10_000, 0.999) == pytest.approx(8.0 * 0.75, rel=1e-3)


def test_a_backoff_pauses_everyone_and_only_before_a_retry() -> None:
    """The backoff is a pause of the whole limiter (the upstream's limit
    is every task's), set only when a retry follows: a 429 with no
    Retry-After and no retry left pauses nothing, as before; a backoff is
    cut to ``max_pause``."""
    with threads.open_limiter(Fifo(), 100, 10) as limiter:
        upstream = Upstream(limiter, jitter=lambda: 0.0)
        assert not upstream.again(429, httpx.Headers({}), 0, 0, None)
        assert limiter.pause_left() == 0.0
        assert upstream.again(429, httpx.Headers({}), 1, 2, None)
        assert 0.9 < limiter.pause_left() <= 1.0
        assert not limiter.try_acquire(), "paused for every caller"
        assert (upstream.pauses, upstream.backoffs) == (1, 1)
    with threads.open_limiter(Fifo(), 100, 10) as limiter:
        upstream = Upstream(limiter, max_pause=0.25, jitter=lambda: 0.0)
        assert upstream.again(503, httpx.Headers({}), 3, 5, None)
        assert 0.2 < limiter.pause_left() <= 0.25


def test_an_upstreams_jitter_must_be_a_function() -> None:
    with threads.open_limiter(Fifo(), 100, 10) as limiter, pytest.raises(PermitTypeError):
        Upstream(limiter, jitter=0.5)  # type: ignore[arg-type]


def test_a_transports_options_are_fixed_once_made() -> None:
    """A transport's options are checked when it is made; one set later
    was taken unchecked (``options.retries = -1``: an AssertionError, and
    no request sent): each is refused, and the options are as they were."""
    with threads.open_limiter(Fifo(), 100, 10) as limiter:
        transport = PermitsTransport(limiter, retries=2)
        for name, value in [("retries", -1), ("timeout", "soon"), ("cost", 5)]:
            with pytest.raises(attrs.exceptions.FrozenInstanceError):
                setattr(transport.options, name, value)
        options = transport.options
        assert (options.retries, options.timeout, options.cost) == (2, None, None)


def test_an_upstreams_jitter_and_max_pause_set_later_are_checked_as_given() -> None:
    """``transport.upstream.jitter = 5`` was taken, and the next 429 with
    no Retry-After raised a raw TypeError (``'int' object is not
    callable``); a ``max_pause`` set later was not checked either. Each is
    refused when set, naming it, and the one before stays."""
    with threads.open_limiter(Fifo(), 100, 10) as limiter:
        upstream = Upstream(limiter, max_pause=5.0, jitter=lambda: 0.0)
        jitter = upstream.jitter
        with pytest.raises(PermitTypeError, match=r"^jitter=5: expected a function"):
            upstream.jitter = 5  # type: ignore[assignment]
        for bad in (-1.0, math.nan, math.inf):
            with pytest.raises(PermitValueError, match=r"^max_pause="):
                upstream.max_pause = bad
        assert (upstream.jitter, upstream.max_pause) == (jitter, 5.0)
        upstream.max_pause = 0.25  # taken, and cuts the next backoff (1 s)
        assert upstream.again(429, httpx.Headers({}), 1, 2, None)
        assert 0.2 < limiter.pause_left() <= 0.25


@pytest.mark.parametrize(
    ("drawn", "error"),
    [
        (1.5, PermitValueError),
        (-0.5, PermitValueError),
        (math.nan, PermitValueError),
        ("0.5", PermitTypeError),
        (True, PermitTypeError),
    ],
)
def test_a_jitter_that_draws_no_number_in_0_1_is_refused_naming_it(
    drawn: Any, error: type[Exception]
) -> None:
    """A jitter function of the user's that draws outside [0, 1] made the
    backoff negative (``seconds=-0.125`` refused by ``pause_for``, an
    argument the user never wrote), NaN or a ``TypeError`` of
    arithmetic, or quietly longer than the cap (a draw below 0): the draw
    is refused naming ``jitter`` and the value drawn, and nothing is
    paused."""
    with threads.open_limiter(Fifo(), 100, 10) as limiter:
        transport = PermitsTransport(
            limiter, httpx.MockTransport(lambda r: httpx.Response(429)), retries=1
        )
        transport.upstream.jitter = lambda: drawn
        with httpx.Client(transport=transport) as client, pytest.raises(error) as refused:
            client.get("http://upstream.test/")
        assert refused.value.argument == "jitter"  # type: ignore[attr-defined]
        assert refused.value.value is drawn  # type: ignore[attr-defined]
        assert (limiter.pause_left(), limiter.statistics().pauses) == (0.0, 0)


def test_the_sync_transport_backs_off_too() -> None:
    """``PermitsTransport`` (threads, real time): a 429 with no
    Retry-After is sent again once the 0.5 s backoff has passed."""
    script = Script((429, {}), (200, {}))
    with (
        serve_script(script) as url,
        threads.open_limiter(Fifo(), 100, 10) as limiter,
    ):
        transport = PermitsTransport(limiter, retries=1)
        transport.upstream.jitter = lambda: 0.0
        with httpx.Client(transport=transport) as client:
            start = time.monotonic()
            assert client.get(url).status_code == 200
            assert time.monotonic() - start >= 0.5
        assert transport.upstream.backoffs == 1
        _balance(limiter, script)


@pytest.mark.parametrize("key", ["permits.levle", "permits.Level", "permits.cost"])
def test_a_misspelt_permits_extension_is_refused_before_a_permit_is_taken(key: str) -> None:
    """A request extension ``permits.<something>`` the transport does not
    read (``permits.levle``) was ignored: the request went at the default
    level. It is refused, naming it and the two it reads, and takes no
    permit; httpx's own extensions pass as before."""

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200)

    with threads.open_limiter(StrictPriority(2), 100, 10) as limiter:
        transport = PermitsTransport(limiter, httpx.MockTransport(upstream))
        with httpx.Client(transport=transport) as client:
            with pytest.raises(PermitValueError) as refused:
                client.get("http://upstream.test/", extensions={key: 1})
            assert str(refused.value) == (
                f"extensions={key!r}: no such extension: the request's permit reads "
                "'permits.level' and 'permits.flow'"
            )
            assert limiter.statistics().levels[1].pushed == 0
            response = client.get(
                "http://upstream.test/", extensions={"permits.level": 1, "sni_hostname": "a.test"}
            )
        assert response.status_code == 200
        assert limiter.statistics().levels[1].granted == 1


@pytest.mark.parametrize(
    ("extensions", "error", "said"),
    [
        (
            {"permits.level": 5},
            PermitValueError,
            "extensions['permits.level']=5: must be 0 or 1 (the policy has 2 levels)",
        ),
        (
            {"permits.level": -1},
            PermitValueError,
            "extensions['permits.level']=-1: must be 0 or 1 (the policy has 2 levels)",
        ),
        (
            {"permits.level": "1"},
            PermitTypeError,
            "extensions['permits.level']='1': expected an int, got str",
        ),
        (
            {"permits.flow": ["acme"]},
            PermitTypeError,
            "extensions['permits.flow']=['acme']: expected a hashable value (a tenant's name, "
            "a key), got list",
        ),
    ],
)
def test_a_bad_level_or_flow_extension_is_refused_naming_the_extension(
    extensions: dict[str, Any], error: type[Exception], said: str
) -> None:
    """A level or flow a request's extensions name, which the limiter
    refuses, is refused naming the extension the caller wrote (the error
    named the acquire's ``level=5``), and takes no permit."""
    with threads.open_limiter(StrictPriority(2), 100, 10) as limiter:
        transport = PermitsTransport(limiter, httpx.MockTransport(lambda r: httpx.Response(200)))
        with httpx.Client(transport=transport) as client, pytest.raises(error) as refused:
            client.get("http://upstream.test/", extensions=extensions)
        assert str(refused.value) == said
        assert sum(level.pushed for level in limiter.statistics().levels) == 0


@pytest.mark.parametrize(
    ("extensions", "said"),
    [
        ({"permits.level": None}, "level=7: must be 0 or 1 (the policy has 2 levels)"),
        (
            {"permits.level": 1, "permits.flow": None},
            "flow=[]: expected a hashable value (a tenant's name, a key), got list",
        ),
    ],
)
def test_a_bad_level_or_flow_from_the_transports_function_is_named_as_such(
    extensions: dict[str, Any], said: str
) -> None:
    """An extension set to ``None`` names nothing (the transport's
    function of the request gives the value): a bad value the function
    gives is refused naming the function's option, not the extension the
    caller left at ``None``."""
    unhashable: Any = []
    with threads.open_limiter(StrictPriority(2), 100, 10) as limiter:
        transport = PermitsTransport(
            limiter,
            httpx.MockTransport(lambda r: httpx.Response(200)),
            level=lambda request: 7,
            flow=lambda request: unhashable,
        )
        with httpx.Client(transport=transport) as client, pytest.raises(PermitError) as refused:
            client.get("http://upstream.test/", extensions=extensions)
        assert str(refused.value) == said
        assert sum(level.pushed for level in limiter.statistics().levels) == 0


async def refused_async(limiter: Any, extensions: dict[str, Any]) -> PermitValueError:
    """What the async transport over ``limiter`` refuses a request with
    ``extensions`` with (a :class:`PermitValueError`, or the test fails)."""
    transport = AsyncPermitsTransport(limiter, httpx.MockTransport(lambda r: httpx.Response(200)))
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(PermitValueError) as refused:
            await client.get("http://upstream.test/", extensions=extensions)
    return refused.value


@pytest.mark.anyio
async def test_a_level_extension_past_a_single_level_policy_is_refused_async() -> None:
    """The async transport names the extension too; a ``Fifo`` has one level."""
    async with asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter:
        refused = await refused_async(limiter, {"permits.level": 1})
        assert str(refused) == "extensions['permits.level']=1: must be 0 (the policy has one level)"
        assert limiter.statistics().levels[0].pushed == 0


@pytest.mark.anyio
async def test_a_misspelt_permits_extension_is_refused_async() -> None:
    async with asyncio_adapter.open_limiter(Fifo(), 100, 10) as limiter:
        refused = await refused_async(limiter, {"permits.flw": "acme"})
        assert re.search(r"^extensions='permits\.flw': no such", str(refused)), str(refused)
        assert limiter.statistics().levels[0].pushed == 0


@pytest.mark.parametrize(
    "headers",
    [
        {
            "Retry-After": "30",
            "X-RateLimit-Remaining-Tokens": "0",
            "X-RateLimit-Reset-Tokens": "1m",
        },
        {
            "retry-after": "30",
            "x-ratelimit-remaining-tokens": "0",
            "x-ratelimit-reset-tokens": "1m",
        },
        httpx.Headers({"RETRY-AFTER": "30", "x-ratelimit-remaining-TOKENS": "0"}),
    ],
)
def test_an_upstream_reads_a_dicts_headers_in_any_case(headers: Mapping[str, str]) -> None:
    """``Upstream.learn`` given a plain ``dict`` of headers as the server
    wrote them (``Retry-After``) ignored them: it looked up lower-case
    names only, as a case-insensitive mapping finds them. It reads a
    ``dict``'s names in any case, and a limit's name too ("Tokens")."""
    with threads.open_limiter(Fifo(), limits={"Tokens": Limit(100, burst=100)}) as limiter:
        upstream = Upstream(limiter)
        assert upstream.learn(200, headers) is None  # a 200 pauses nothing
        assert (upstream.malformed, upstream.ignored) == (0, 0)
        assert not limiter.try_acquire(cost=1), "the remaining 0 was adopted"
        paused = upstream.learn(429, headers)
        assert paused is not None
        assert 29.0 < paused <= 30.0
    with threads.open_limiter(Fifo(), 100, 10) as limiter:
        upstream = Upstream(limiter)
        assert not upstream.again(429, {"X-Should-Retry": "false"}, 0, 2, None)
        assert (upstream.backoffs, limiter.pause_left()) == (0, 0.0)


@pytest.mark.parametrize(
    ("limits", "held"),
    [
        ({"units": Limit(1, burst=5)}, "units"),  # open_limiter(policy, rate, burst): "units"
        ({"Requests": Limit(1, burst=5), "calls": Limit(1, burst=5)}, "Requests"),  # any case
        ({"calls": Limit(1, burst=5), "tokens": Limit(100, burst=100)}, None),
        ({"tokens": Limit(100, burst=100)}, None),  # no requests left read as tokens left
    ],
    ids=["units", "Requests-first", "calls-and-tokens", "tokens-only"],
)
def test_x_ratelimit_requests_reach_the_limit_they_count(
    limits: dict[str, Limit], held: str | None
) -> None:
    """OpenAI's ``x-ratelimit-*-requests`` pair under a limiter with no
    limit named ``requests`` was ignored, counted in ``ignored``, even by a
    limiter opened with ``rate=``, whose one limit, ``units``, counts
    requests. It reaches the limit of that name (in any case) and that
    ``units``; under limits named otherwise (``calls``, ``tokens``) it is
    still ignored: a first limit of tokens must not take the requests left
    for tokens left. A name no limit has (``-rpm``) is ignored too, and the
    limits it does not reach are held back by nothing."""
    headers = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "20s",
        "x-ratelimit-remaining-rpm": "0",
    }
    with answered(headers, limits) as (limiter, transport):
        ignored = 1 if held is not None else 2
        assert (transport.upstream.ignored, transport.upstream.malformed) == (ignored, 0)
        if held is not None:
            assert not limiter.try_acquire(cost={held: 1})
        for name in set(limits) - {held}:
            assert limiter.try_acquire(cost={name: 1}), name


@pytest.mark.parametrize(
    ("cost", "took", "backoffs"),
    [({"requests": 1}, 0.5 + 1.0, 2), ({"requests": 1, "tokens": 100}, 2 * 29.1, 0)],
    ids=["requests-only", "tokens-too"],
)
def test_a_429_saying_a_limit_the_request_does_not_cost_is_used_up_is_backed_off(
    cost: dict[str, int], took: float, backoffs: int
) -> None:
    """A 429 with no Retry-After whose headers say the tokens are used up
    for 30 s, to a request that costs requests only: its retry was taken
    for one the reset holds back, so no backoff paused the limiter, and the
    retry's permit (of no token) came at once: every try went at once (six
    within a millisecond, at ``retries=5``). Such a 429 is backed off now,
    as one that says nothing; a request that costs tokens waits for them,
    with no backoff on top (29.1 s each time: the bucket is full at the
    reset, refilling at 1,000 tokens a second, so it holds 100 from 0.9 s
    before)."""
    headers = {
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "30s",
        "x-ratelimit-limit-tokens": "1000",
        "x-ratelimit-remaining-requests": "499",
        "x-ratelimit-reset-requests": "120ms",
    }
    script = Script((429, headers), (429, headers), (200, {}))
    limits = {"requests": Limit(100, burst=10), "tokens": Limit(1000, burst=1000)}
    response, seconds, upstream, limiter = _sent_on_virtual_time(
        script, limits=limits, retries=2, cost=lambda request: cost
    )
    assert response.status_code == 200
    assert seconds == pytest.approx(took, abs=1e-6)
    assert (upstream.pauses, upstream.backoffs, upstream.throttled) == (backoffs, backoffs, 2)
    _balance(limiter, script)


async def _async_function(*args: object) -> int:
    return 1


class _AsyncCall:
    async def __call__(self, *args: object) -> int:
        return 1


@pytest.mark.anyio
@pytest.mark.parametrize("argument", ["level", "flow", "cost", "settle"])
@pytest.mark.parametrize(
    "function",
    [_async_function, _AsyncCall(), functools.partial(_async_function, 1)],
    ids=["async-def", "async-call", "partial"],
)
async def test_an_async_function_as_an_option_is_refused_naming_it(
    argument: str, function: Any
) -> None:
    """An ``async def`` given as ``settle`` (natural beside
    ``httpx.AsyncClient``), ``cost``, ``level`` or ``flow`` was taken,
    and each call returned a coroutine, never awaited: ``settle``'s made
    every response the upstream served raise (the 200 lost), the others'
    every request. The transports call these functions, never await them:
    such a one is refused when the transport is made, naming it."""
    expected = (
        rf"^{argument}=.*: expected a plain function \(called, not awaited\), or None, "
        "got an async function$"
    )
    async with asyncio_adapter.open_limiter(Fifo(), 10, settle_window=60.0) as limiter:
        with pytest.raises(PermitTypeError, match=expected) as refused:
            AsyncPermitsTransport(limiter, **{argument: function})
        assert (refused.value.argument, refused.value.value) == (argument, function)
    with (
        threads.open_limiter(Fifo(), 10, settle_window=60.0) as thread_limiter,
        pytest.raises(PermitTypeError, match=expected),
    ):
        PermitsTransport(thread_limiter, **{argument: function})


class _PausedWhileOut(Script):
    """A script whose server, before each answer, pauses ``limiter`` for
    ``seconds``: another request's ``Retry-After``, learned while this one
    was out."""

    def __init__(
        self, limiter: threads.Limiter, seconds: float, *answers: tuple[int, dict[str, str]]
    ) -> None:
        super().__init__(*answers)
        self.limiter = limiter
        self.seconds = seconds

    def next(self, body: bytes) -> tuple[int, Mapping[str, str | list[str]]]:
        self.limiter.pause_for(self.seconds)
        return super().next(body)


def test_a_backoff_not_taken_for_a_longer_pause_past_the_timeout_is_not_counted() -> None:
    """A 429 with no Retry-After that comes back while a pause of 30 s is
    in force (set while it was out), with ``timeout=5``: no retry can come
    within the timeout, and the 429 is returned at once, as it was; but a
    backoff was counted (in ``pauses`` and ``backoffs``) that paused
    nothing and preceded no retry. Nothing is counted now."""
    with threads.open_limiter(Fifo(), limits={"requests": Limit(10, burst=5)}) as limiter:
        script = _PausedWhileOut(limiter, 30.0, (429, {}), (200, {}))
        with serve_script(script) as url:
            transport = PermitsTransport(limiter, retries=1, timeout=5.0)
            transport.upstream.jitter = lambda: 0.0
            with httpx.Client(transport=transport) as client:
                assert client.get(url).status_code == 429
        upstream = transport.upstream
        assert (upstream.throttled, upstream.pauses, upstream.backoffs) == (1, 0, 0)
        assert len(script.bodies) == 1
        assert limiter.statistics().pauses == 1, "the pause of 30 s alone"


def _bad_learn_and_again() -> list[tuple[str, Callable[[Upstream, Any], object], str, type]]:
    """Bad arguments of ``Upstream.learn`` and ``again``, each beside a
    real response's headers (``h``): (id, the call, the argument it
    names, the error)."""
    return [
        ("headers-None", lambda u, h: u.learn(429, None), "headers", PermitTypeError),
        ("headers-pairs", lambda u, h: u.learn(429, list(h.items())), "headers", PermitTypeError),
        ("name-int", lambda u, h: u.learn(429, {1: "30", **h}), "headers", PermitTypeError),
        (
            "value-int",
            lambda u, h: u.learn(429, {**h, "retry-after": 30}),
            "headers['retry-after']",
            PermitTypeError,
        ),
        ("status-str", lambda u, h: u.learn("429", h), "status", PermitTypeError),
        ("status-bool", lambda u, h: u.again(True, h, 0, 1, None), "status", PermitTypeError),
        ("attempt-below-0", lambda u, h: u.again(429, h, -1, 1, None), "attempt", PermitValueError),
        ("attempt-float", lambda u, h: u.again(429, h, 0.0, 1, None), "attempt", PermitTypeError),
        ("retries-below-0", lambda u, h: u.again(429, h, 0, -1, None), "retries", PermitValueError),
        ("timeout-below-0", lambda u, h: u.again(429, h, 0, 1, -5), "timeout", PermitValueError),
        ("timeout-str", lambda u, h: u.again(429, h, 0, 1, "1"), "timeout", PermitTypeError),
        ("cost-str", lambda u, h: u.again(429, h, 0, 1, None, cost="1"), "cost", PermitTypeError),
        (
            "cost-entry-below-0",
            lambda u, h: u.again(429, h, 0, 1, None, cost={"requests": -1}),
            "cost['requests']",
            PermitValueError,
        ),
        # no unit of any limit: refused by the one rule, as an acquire refuses it
        ("cost-0", lambda u, h: u.again(429, h, 0, 1, None, cost=0), "cost", PermitValueError),
        (
            "cost-no-unit",
            lambda u, h: u.again(429, h, 0, 1, None, cost={"requests": 0}),
            "cost",
            PermitValueError,
        ),
    ]


@pytest.mark.parametrize(
    ("call", "argument", "error"),
    [case[1:] for case in _bad_learn_and_again()],
    ids=[case[0] for case in _bad_learn_and_again()],
)
def test_bad_input_to_learn_or_again_is_refused_naming_it_and_changes_nothing(
    call: Callable[[Upstream, Any], object], argument: str, error: type[Exception]
) -> None:
    """``Upstream.learn`` and ``again`` (public, for a client of one's
    own) raised a bare ``TypeError`` or ``AttributeError`` for headers that
    are no mapping of strings, read a status ``"429"`` as no 429, and took
    a try ``-1``; and the 429 was counted before the refusal. Each bad
    argument is refused naming it, the counters, the pause and the limits
    as they were; beside it, the real response's headers are learned."""
    wire = {
        "Retry-After": "30",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "20s",
    }
    with (
        serve_script(Script((429, wire))) as url,
        threads.open_limiter(Fifo(), limits={"requests": Limit(10, burst=5)}) as limiter,
    ):
        headers = httpx.get(url).headers
        upstream = Upstream(limiter)
        before = repr(upstream)
        with pytest.raises(error) as refused:
            call(upstream, dict(headers))
        assert refused.value.argument == argument  # type: ignore[attr-defined]
        assert str(refused.value).startswith(f"{argument}=")
        assert repr(upstream) == before
        assert (limiter.pause_left(), limiter.statistics().pauses) == (0.0, 0)
        assert limiter.try_acquire(), "nothing adopted"
        paused = upstream.learn(429, headers)
        assert paused is not None
        assert 29.0 < paused <= 30.0
