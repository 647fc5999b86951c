"""An aiohttp client middleware that takes a permit per request and learns
from the upstream (extra ``permits[aiohttp]``; aiohttp 3.12.2 or newer).

    from permits.adapters.asyncio import open_limiter
    from permits.aiohttp import PermitsMiddleware

    async with open_limiter(Fifo(), limits=..., settle_window=600.0) as limiter:
        permits = PermitsMiddleware(limiter, cost=estimate, settle=tokens_used)
        async with aiohttp.ClientSession(middlewares=(permits,)) as session:
            with level(INTERACTIVE):
                async with session.post(url, json=...) as response:
                    ...

The same as :mod:`permits.httpx`'s transports, for ``aiohttp.ClientSession``:
each request takes a permit first, at the level and in the flow the
middleware's functions of the request give (else the limiter's current
level, :func:`permits.adapters.level`), asking for ``cost(request)`` (1 by
default); the response then teaches the limiter what the upstream knows (a
429 or 503 with ``Retry-After`` pauses the whole limiter, and is sent again
after the pause up to ``retries`` times; one without, after the reset its
rate-limit headers say, else after a backoff that pauses the limiter as
well; the ``x-ratelimit-*`` headers
adopt the upstream's bucket, and the IETF ``RateLimit`` field is its
quota); and
``settle(response, body)``, if given, says what the call cost after all,
from the response and its body (read whole first, before the caller gets
the response, which then does not stream: ``response.read()`` returns it
again, and ``response.content`` reads it again), unless it is a 429 or 503
(not served: the cost asked for stays).
A request that fails before its response (a refused connection, a
timeout, a hang-up) raises aiohttp's error and keeps its permit, as one
that may have reached the upstream; it is not sent again. A header that
does not parse is ignored and counted in ``upstream.malformed``, never
fatal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterator, Mapping

from permits._upstream import (
    BACKOFF,
    LATE,
    MAX_BACKOFF,
    MAX_PAUSE,
    MAX_POLICIES,
    THROTTLED,
    Cost,
    QuotaPolicy,
    Upstream,
    check_options,
    check_settle,
    header_text,
    raise_if_broken,
    settle_in_time,
)
from permits.adapters import BaseLimiter
from permits.adapters._requires import requires_extra
from permits.core import PermitTypeError

with requires_extra(__name__, "aiohttp", "aiohttp"):
    import aiohttp

__all__ = [
    "BACKOFF",
    "MAX_BACKOFF",
    "MAX_PAUSE",
    "MAX_POLICIES",
    "PermitsMiddleware",
    "QuotaPolicy",
    "Upstream",
]


def _content_again(response: aiohttp.ClientResponse, body: bytes) -> None:
    """Give ``response``, read whole, a ``content`` stream of ``body`` again:
    reading spent it, and ``async for line in response.content`` (an event
    stream's lines) yielded nothing while ``read()`` gave the body."""
    from aiohttp.base_protocol import BaseProtocol

    loop = asyncio.get_running_loop()
    # (fed whole: never past its limit, so the stream never asks the
    # protocol, which has no connection, to pause)
    stream = aiohttp.StreamReader(BaseProtocol(loop), len(body) + 1, loop=loop)
    stream.feed_data(body)
    stream.feed_eof()
    response.content = stream


class _Fields(Mapping[str, str]):
    """aiohttp's headers read as httpx's are: a field sent on several lines
    is one value, its lines joined by commas (RFC 9110, section 5.3), so
    that a ``RateLimit`` list split over lines is read whole; and a value
    that is not UTF-8 is read as Latin-1 (aiohttp escapes its bytes as lone
    surrogates: a reset's ``µs`` sent as one byte, 0xB5, was garbage)."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = headers

    def __getitem__(self, name: str) -> str:
        value = ", ".join(self._headers.getall(name))  # type: ignore[attr-defined]
        if value.isascii():
            return value
        # (aiohttp escaped the bytes that are not UTF-8: the bytes as sent)
        return header_text(value.encode("utf-8", "surrogateescape"))

    def __iter__(self) -> Iterator[str]:
        return iter({name.lower(): None for name in self._headers})

    def __len__(self) -> int:
        return len(set(self))


async def _in_memory(request: aiohttp.ClientRequest) -> None:
    """``request``'s body, if it is not in memory (a stream, an async
    iterator, a file, a multipart body of such parts), read whole, to be
    sent whole each time: sent again as it was, one that cannot seek back
    went out empty. A body that cannot be read so (a part forwarded from a
    response) stays as it is, sent once (:func:`_spent`)."""
    body = request.body
    if isinstance(body, aiohttp.payload.Payload) and not isinstance(
        body, aiohttp.payload.BytesPayload
    ):
        try:
            content = await body.as_bytes()
        except TypeError:
            return
        await request.update_body(content)


def _spent(request: aiohttp.ClientRequest) -> bool:
    """Whether ``request``'s body was sent and cannot be sent again (a
    retry would send it empty)."""
    return bool(getattr(request.body, "consumed", False))


class PermitsMiddleware:
    """A permit per request for ``aiohttp.ClientSession(middlewares=...)``.

    :param limiter: an asyncio or anyio limiter (aiohttp runs on asyncio).
    :param level: the level of a request (default: the limiter's current level).
    :param flow: the flow (tenant) of a request (default: none).
    :param cost: what a request asks for (1 by default).
    :param settle: what a response and its body say the call cost (as
        :meth:`Permit.settle <permits.adapters.Permit.settle>` takes it: a
        limit a mapping leaves out keeps its cost; ``None`` keeps the whole
        cost asked for); the
        limiter needs a ``settle_window``. Not called for a 429 or 503; a
        response later than ``settle_window`` keeps the cost asked for,
        with a warning (and one that comes after the limiter closed reaches
        the caller, unsettled).
    :param retries: how many times a 429/503 is sent again, each with a
        new permit, after the pause its ``Retry-After`` sets (without one:
        after the reset its rate-limit headers say, else after a backoff
        that pauses the whole limiter, as the httpx transports; with
        retries, a request body not in memory, a stream, a file or a
        multipart body, is read first, to be sent whole each time); never
        one whose ``x-should-retry`` says ``false``; not
        when the pause in force (``limiter.pause_left()``) or the backoff
        lasts ``timeout`` or longer, nor when the retry's permit cannot come
        within it (the upstream's other headers hold it back longer, say),
        nor when the body was sent and
        cannot be sent again (one that cannot be read first, a part
        forwarded from a response): that response is returned.
    :param timeout: seconds a request waits for its permit at most.
        aiohttp's own ``ClientTimeout(total=...)`` (5 minutes by default)
        runs around the middleware, so it counts that wait too, and the
        pause before a retry: a pause longer than what is left of it raises
        ``TimeoutError``, and the 429 saying why is lost. Give ``timeout``
        below it, and such a 429 is returned instead.
    :param max_pause: seconds: the longest pause a ``Retry-After`` (or a backoff) may set,
        and the furthest reset a rate-limit header may hold the limiter
        back to (an hour by default; a longer one is cut to it).
    """

    def __init__(
        self,
        limiter: BaseLimiter,
        *,
        level: Callable[[aiohttp.ClientRequest], int | None] | None = None,
        flow: Callable[[aiohttp.ClientRequest], Hashable] | None = None,
        cost: Callable[[aiohttp.ClientRequest], Cost] | None = None,
        settle: Callable[[aiohttp.ClientResponse, bytes], Cost | None] | None = None,
        retries: int = 0,
        timeout: float | None = None,
        max_pause: float = MAX_PAUSE,
    ) -> None:
        if not isinstance(limiter, BaseLimiter):  # a threads limiter's acquire does not wait
            raise PermitTypeError("limiter", limiter, "an asyncio or anyio limiter")
        check_options(retries, max_pause, timeout, level=level, flow=flow, cost=cost, settle=settle)
        check_settle(limiter, settle)
        self.limiter = limiter
        self.level: Callable[[aiohttp.ClientRequest], int | None] | None = level
        self.flow: Callable[[aiohttp.ClientRequest], Hashable] | None = flow
        self.cost: Callable[[aiohttp.ClientRequest], Cost] | None = cost
        self.settle: Callable[[aiohttp.ClientResponse, bytes], Cost | None] | None = settle
        self.retries = retries
        self.timeout = timeout
        self.upstream: Upstream = Upstream(limiter, max_pause)

    def __setattr__(self, name: str, value: object) -> None:
        # Fixed once made, as its arguments were checked then: retries set
        # to -1 later broke every request (the upstream's own jitter and
        # max_pause are checked as they are set).
        if "upstream" in self.__dict__:
            raise AttributeError(
                f"{name}: a PermitsMiddleware is fixed once made: make another with {name}=..."
            )
        super().__setattr__(name, value)

    def __repr__(self) -> str:
        return (
            f"<PermitsMiddleware limiter={self.limiter!r} "
            f"retries={self.retries} timeout={self.timeout!r}>"
        )

    async def __call__(
        self, request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        level = self.level(request) if self.level is not None else None
        flow = self.flow(request) if self.flow is not None else None
        cost = self.cost(request) if self.cost is not None else 1
        if self.retries:
            await _in_memory(request)
        kept: aiohttp.ClientResponse | None = None  # the response a retry is for
        for attempt in range(self.retries + 1):
            try:
                permit = await self.limiter.acquire(
                    level,
                    cost=cost,
                    flow=flow,
                    timeout=self.timeout,
                    max_wait=None if kept is None else self.timeout,
                )
            except LATE as late:
                raise_if_broken(late)
                if kept is None:
                    raise
                return kept  # its permit not within the timeout: that response says why
            response = await handler(request)
            try:
                # a body sent that cannot be sent again leaves no try:
                # nothing is paused for one
                retries = attempt if _spent(request) else self.retries
                again = self.upstream.again(
                    response.status,
                    _Fields(response.headers),
                    attempt,
                    retries,
                    self.timeout,
                    cost=cost,
                )
            except BaseException:
                response.release()
                raise
            if again:
                # kept, read whole (which frees the connection; released, it
                # could not be read again by the caller)
                _content_again(response, await response.read())
                kept = response
                continue  # the next acquire waits for the pause
            if self.settle is not None and response.status not in THROTTLED:
                body = await response.read()
                _content_again(response, body)
                actual = self.settle(response, body)
                if actual is not None:
                    settle_in_time(permit, actual)
            return response
        raise AssertionError("unreachable")  # pragma: no cover
