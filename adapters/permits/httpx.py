"""httpx transports that take a permit per request and learn from the upstream
(extra ``permits[httpx]``).

    from permits.adapters.asyncio import open_limiter
    from permits.httpx import AsyncPermitsTransport

    async with open_limiter(Fifo(), limits=..., settle_window=600.0) as limiter:
        transport = AsyncPermitsTransport(limiter, cost=estimate, settle=tokens_used)
        async with httpx.AsyncClient(transport=transport) as client:
            await client.post(url, json=..., extensions={"permits.level": INTERACTIVE})

Each request takes a permit first: at the level and in the flow its
``extensions`` name (``"permits.level"``, ``"permits.flow"``; another
``permits.`` one is refused, a typo, and so is a level the limiter's
policy does not have or a flow that does not hash, naming the extension),
else those
the transport's functions of the request give, else the limiter's current
level; asking for ``cost(request)`` (1 by default). The response then
teaches the limiter what the upstream knows:

- a 429 or 503 with ``Retry-After`` (seconds or an HTTP date; or
  ``retry-after-ms``, milliseconds, heeded first) pauses the
  whole limiter until then, every level and every task (at most
  ``max_pause`` seconds; a longer one is cut there, with a warning); the
  request is sent again after the pause, with a new permit, up to
  ``retries`` times; one without (or with one that does not parse) is
  sent again too, after the reset its rate-limit headers say if they say
  nothing is left, else after a backoff (0.5 s, doubling each try, at
  most 8 s, less a random quarter at most) that pauses the whole
  limiter the same way; with no retry left, or ``x-should-retry: false``
  (the OpenAI and Anthropic APIs' word that another try cannot succeed),
  it is returned and pauses nothing more;
- ``x-ratelimit-remaining-<limit>`` with ``x-ratelimit-reset-<limit>`` (the
  OpenAI style, as Go writes a duration: ``6m0s``, ``1.5s``, ``20ms``,
  ``500µs``) adopt the upstream's view of
  the limit of that name, a bucket that refills: at most that much now,
  full again at the reset (``x-ratelimit-limit-<limit>``, if sent, its
  size; no reset sent, as Azure OpenAI sends none: refilling at the
  limit's own rate), and the limit's bucket never fuller than it (those of a name no
  limit has are ignored, counted in ``ignored``, once per name);
  the IETF draft's ``RateLimit`` field (``remaining=`` and ``reset=``, or
  ``r=`` and ``t=`` of each policy it lists; to its 6th version, the
  fields ``RateLimit-Remaining`` and ``RateLimit-Reset``) is a quota
  (the limiter's :meth:`~permits.adapters.BaseLimiter.quota`), that much
  until the reset, for the limit counting the policy's unit: the limit named after
  it (the policy's ``qu`` in ``RateLimit-Policy``, remembered in
  ``upstream.policies``), and for ``requests`` (the draft's default)
  the first limit if none is so named; an item in a unit no limit counts
  is ignored (counted in ``ignored``);
- ``settle(response)``, if given, says what the call cost after all (read
  from a header, or from the body): it is asked once the client has read
  the body to its end, so a streamed response streams as it comes (one
  closed before its end keeps the cost asked for, as does a loop that
  breaks at an event stream's ``data: [DONE]``: read on to the end); a 429 or 503 was not
  served, and keeps the cost asked for, unsettled.

A request that fails before its response (a refused connection, a
timeout, a hang-up) raises the client's error and keeps its permit, as one
that may have reached the upstream; it is not sent again. A header that
does not parse is ignored and counted in ``malformed``, never fatal.
:class:`PermitsTransport` does the same for ``httpx.Client``, with a
:mod:`permits.adapters.threads` limiter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Hashable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

import attrs

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
    parse_duration,
    raise_if_broken,
    settle_in_time,
)
from permits.adapters._base import refuse_unknown
from permits.adapters._requires import requires_extra
from permits.adapters.threads import Limiter as ThreadLimiter
from permits.core import PermitError, PermitTypeError, PermitValueError

with requires_extra(__name__, "httpx", "httpx"):
    import httpx

from permits.adapters import BaseLimiter, Permit

if TYPE_CHECKING:
    from typing_extensions import Unpack  # in typing from Python 3.11

__all__ = [
    "BACKOFF",
    "MAX_BACKOFF",
    "MAX_PAUSE",
    "MAX_POLICIES",
    "AsyncPermitsTransport",
    "PermitsTransport",
    "QuotaPolicy",
    "TransportOptions",
    "Upstream",
    "parse_duration",
]


class TransportOptions(TypedDict, total=False):
    """The keyword arguments of both transports (see :class:`AsyncPermitsTransport`)."""

    level: Callable[[httpx.Request], int | None] | None
    flow: Callable[[httpx.Request], Hashable] | None
    cost: Callable[[httpx.Request], Cost] | None
    settle: Callable[[httpx.Response], Cost | None] | None
    retries: int
    timeout: float | None
    max_pause: float


def _options(transport: str, options: Mapping[str, Any]) -> _Options:
    """``options`` checked, for ``transport`` (its name, for the errors): an
    unknown one is refused naming the transport and its options (not the
    private class that holds them)."""
    refuse_unknown(transport, options, ("limiter", "transport", *TransportOptions.__annotations__))
    return _Options(**options)


#: The request extensions a transport reads (any other ``permits.`` one is
#: a typo, refused before a permit is taken).
_EXTENSIONS = ("permits.level", "permits.flow")


def _as_written(request: httpx.Request, error: PermitError) -> PermitError:
    """The limiter's refusal of a level or flow that ``request``'s
    extensions named, naming the extension the caller wrote (it named the
    acquire's ``level``, which the caller never wrote); any other as it is
    (one an extension set to ``None`` left to the transport's function
    names that function's option)."""
    if not isinstance(error, (PermitValueError, PermitTypeError)):
        return error
    key = f"permits.{error.argument}"
    if error.argument not in ("level", "flow") or request.extensions.get(key) is None:
        return error
    return error.renamed(f"extensions[{key!r}]")


@attrs.frozen
class _Options:
    """How a transport asks for each request's permit, and settles it: fixed
    for the transport's life (``retries`` set to -1 later broke every
    request; the upstream's ``max_pause`` is its :class:`Upstream`'s)."""

    level: Callable[[httpx.Request], int | None] | None = None
    flow: Callable[[httpx.Request], Hashable] | None = None
    cost: Callable[[httpx.Request], Cost] | None = None
    settle: Callable[[httpx.Response], Cost | None] | None = None
    retries: int = 0
    timeout: float | None = None
    max_pause: float = MAX_PAUSE

    def __attrs_post_init__(self) -> None:
        check_options(
            self.retries,
            self.max_pause,
            self.timeout,
            level=self.level,
            flow=self.flow,
            cost=self.cost,
            settle=self.settle,
        )

    def ask(self, request: httpx.Request) -> dict[str, Any]:
        """What ``request``'s permit asks for (a misspelt ``permits.``
        extension refused)."""
        extensions = request.extensions
        for key in extensions:
            if isinstance(key, str) and key.startswith("permits.") and key not in _EXTENSIONS:
                raise PermitValueError(
                    "extensions",
                    key,
                    "no such extension: the request's permit reads "
                    f"{' and '.join(map(repr, _EXTENSIONS))}",
                )
        level = extensions.get("permits.level")
        if level is None and self.level is not None:
            level = self.level(request)
        flow = extensions.get("permits.flow")
        if flow is None and self.flow is not None:
            flow = self.flow(request)
        cost = self.cost(request) if self.cost is not None else 1
        return {"level": level, "flow": flow, "cost": cost, "timeout": self.timeout}

    def again(self, upstream: Upstream, response: httpx.Response, attempt: int, cost: Cost) -> bool:
        """Whether ``response``, to try ``attempt`` (from 0) of a request
        that asked for ``cost``, is sent again: :meth:`Upstream.again` under
        these ``retries`` and ``timeout``."""
        return upstream.again(
            response.status_code,
            _fields(response.headers),
            attempt,
            self.retries,
            self.timeout,
            cost=cost,
        )

    def settled(self, response: httpx.Response, permit: Permit) -> httpx.Response:
        """``response`` for the client, its body passed on as the client
        reads it: read to its end, its permit is settled at what ``settle``
        says of the whole response."""

        def read(content: bytes) -> None:
            assert self.settle is not None
            whole = httpx.Response(
                response.status_code,
                headers=response.headers,
                content=content,
                request=response.request,
                extensions=response.extensions,
            )
            actual = self.settle(whole)
            if actual is not None:
                settle_in_time(permit, actual)

        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Kept(response.stream, read),
            request=response.request,
            extensions=response.extensions,
        )


def _fields(headers: httpx.Headers) -> dict[str, str]:
    """``headers`` as the upstream's word is read: each value decoded on its
    own, as UTF-8 if it is, else as Latin-1, and a field sent on several
    lines one value, its lines joined by commas (RFC 9110, section 5.3).
    httpx decodes every value of a response in one encoding: one header
    not in UTF-8 made a reset of another, ``900µs`` in UTF-8, garbage."""
    fields: dict[str, list[str]] = {}
    for name, value in headers.raw:
        fields.setdefault(name.decode("latin-1").lower(), []).append(header_text(value))
    return {name: ", ".join(values) for name, values in fields.items()}


def _repr(transport: object, limiter: object, options: _Options) -> str:
    """A transport as a user debugging it reads it: its limiter and options."""
    return (
        f"<{type(transport).__name__} limiter={limiter!r} "
        f"retries={options.retries} timeout={options.timeout!r}>"
    )


def _check_transport(transport: object, sends: str, kind: str) -> None:
    """``transport``, checked: ``None`` or one with a method ``sends``;
    refused now (an async one given to the sync transport, an
    ``httpx.Client``), not once each request has taken its permit and then
    failed to be sent."""
    if transport is not None and not callable(getattr(transport, sends, None)):
        raise PermitTypeError(
            "transport", transport, f"{kind} (one with a {sends} method), or None for httpx's own"
        )


def _unread(response: httpx.Response, body: bytes) -> httpx.Response:
    """``response`` again, its ``body`` (read raw, as it came, still
    encoded as its ``Content-Encoding`` says; and the response closed) to
    be read by the client as any other (which then knows its ``elapsed``,
    and decodes it once)."""
    return httpx.Response(
        response.status_code,
        headers=response.headers,
        stream=httpx.ByteStream(body),
        extensions=response.extensions,
    )


class _Kept(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response's body, passed on as it is read and kept: read to its
    end, the whole of it goes to ``read`` (a body closed before its end,
    to nothing)."""

    def __init__(
        self, stream: httpx.SyncByteStream | httpx.AsyncByteStream, read: Callable[[bytes], None]
    ) -> None:
        self._stream = stream
        self._read = read

    def __iter__(self) -> Iterator[bytes]:
        parts = []
        for part in self._stream:  # type: ignore[union-attr]
            parts.append(part)
            yield part
        self._read(b"".join(parts))

    async def __aiter__(self) -> AsyncIterator[bytes]:
        parts = []
        async for part in self._stream:  # type: ignore[union-attr]
            parts.append(part)
            yield part
        self._read(b"".join(parts))

    def close(self) -> None:
        self._stream.close()  # type: ignore[union-attr]

    async def aclose(self) -> None:
        await self._stream.aclose()  # type: ignore[union-attr]


class AsyncPermitsTransport(httpx.AsyncBaseTransport):
    """A permit per request for ``httpx.AsyncClient``, over an async limiter.

    :param limiter: an asyncio, trio or anyio limiter.
    :param transport: the transport that sends (default: httpx's own).
    :param level: the level of a request its extensions do not name.
    :param flow: the flow (tenant) of a request its extensions do not name.
    :param cost: what a request asks for (1 by default).
    :param settle: what a response says the call cost (as
        :meth:`Permit.settle <permits.adapters.Permit.settle>` takes it: a
        limit a mapping leaves out keeps its cost; ``None`` keeps the whole
        cost asked for), asked once the
        client has read its body to the end (a response closed before keeps
        the cost asked for); the limiter needs a ``settle_window``. Not
        called for a 429 or 503 (not served: the cost asked for stays); a
        response later than ``settle_window`` keeps the cost asked for too,
        with a warning (and one that ends after the limiter closed reaches
        the caller, unsettled).
    :param retries: how many times a 429/503 is sent again, each with a
        new permit: after the pause its ``Retry-After`` sets; without one,
        after the reset its rate-limit headers say if they say nothing is
        left, else after a backoff (0.5 s, doubling, at most 8 s) that
        pauses the whole limiter (with retries, a streamed request body is
        read first, to be sent whole each time); never one whose
        ``x-should-retry`` says ``false``;
        not when the pause in force (``limiter.pause_left()``) or the
        backoff lasts ``timeout`` or longer, nor when the retry's permit cannot
        come within it (the upstream's other headers hold it back longer,
        say): that response is returned.
    :param timeout: seconds a request waits for its permit at most.
    :param max_pause: seconds: the longest pause a ``Retry-After`` (or a backoff) may set,
        and the furthest reset a rate-limit header may hold the limiter
        back to (an hour by default; a longer one is cut to it).
    """

    def __init__(
        self,
        limiter: BaseLimiter,
        transport: httpx.AsyncBaseTransport | None = None,
        **options: Unpack[TransportOptions],
    ) -> None:
        if not isinstance(limiter, BaseLimiter):  # a threads limiter's acquire does not wait
            raise PermitTypeError("limiter", limiter, "an asyncio, trio or anyio limiter")
        self.limiter = limiter
        _check_transport(transport, "handle_async_request", "an httpx.AsyncBaseTransport")
        self.transport: httpx.AsyncBaseTransport = (
            transport if transport is not None else httpx.AsyncHTTPTransport()
        )
        self.options: _Options = _options("AsyncPermitsTransport", options)
        check_settle(limiter, self.options.settle)
        self.upstream: Upstream = Upstream(limiter, options.get("max_pause", MAX_PAUSE))

    def __repr__(self) -> str:
        return _repr(self, self.limiter, self.options)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        options = self.options
        if options.retries:
            await request.aread()  # a streamed body, kept to be sent again
        asked = options.ask(request)  # once: each retry asks the same
        kept: httpx.Response | None = None  # the response a retry is for
        for attempt in range(options.retries + 1):
            if kept is None:
                try:
                    permit = await self.limiter.acquire(**asked)
                except PermitError as error:  # (refused: nothing taken)
                    raise _as_written(request, error) from None
            else:  # its permit not within the timeout: that response says why
                try:
                    permit = await self.limiter.acquire(**asked, max_wait=options.timeout)
                except LATE as late:
                    raise_if_broken(late)
                    return kept
            response = await self.transport.handle_async_request(request)
            try:
                again = options.again(self.upstream, response, attempt, asked["cost"])
            except BaseException:
                await response.aclose()
                raise
            if again:
                try:
                    kept = (
                        response  # built whole (httpx.MockTransport, a cache): read already
                        if response.is_stream_consumed
                        else _unread(response, b"".join([p async for p in response.aiter_raw()]))
                    )
                finally:
                    await response.aclose()
                continue  # the next acquire waits for the pause
            if options.settle is not None and response.status_code not in THROTTLED:
                response.request = request
                return options.settled(response, permit)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        await self.transport.aclose()


class PermitsTransport(httpx.BaseTransport):
    """A permit per request for ``httpx.Client``, over a
    :mod:`permits.adapters.threads` limiter; the arguments of
    :class:`AsyncPermitsTransport`."""

    def __init__(
        self,
        limiter: ThreadLimiter,
        transport: httpx.BaseTransport | None = None,
        **options: Unpack[TransportOptions],
    ) -> None:
        if not isinstance(limiter, ThreadLimiter):  # an async acquire, never awaited, takes none
            raise PermitTypeError("limiter", limiter, "a permits.adapters.threads limiter")
        self.limiter = limiter
        _check_transport(transport, "handle_request", "an httpx.BaseTransport")
        self.transport: httpx.BaseTransport = (
            transport if transport is not None else httpx.HTTPTransport()
        )
        self.options: _Options = _options("PermitsTransport", options)
        check_settle(limiter, self.options.settle)
        self.upstream: Upstream = Upstream(limiter, options.get("max_pause", MAX_PAUSE))

    def __repr__(self) -> str:
        return _repr(self, self.limiter, self.options)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        options = self.options
        if options.retries:
            request.read()  # a streamed body, kept to be sent again
        asked = options.ask(request)  # once: each retry asks the same
        kept: httpx.Response | None = None  # the response a retry is for
        for attempt in range(options.retries + 1):
            if kept is None:
                try:
                    permit = self.limiter.acquire(**asked)
                except PermitError as error:  # (refused: nothing taken)
                    raise _as_written(request, error) from None
            else:  # its permit not within the timeout: that response says why
                try:
                    permit = self.limiter.acquire(**asked, max_wait=options.timeout)
                except LATE as late:
                    raise_if_broken(late)
                    return kept
            response = self.transport.handle_request(request)
            try:
                again = options.again(self.upstream, response, attempt, asked["cost"])
            except BaseException:
                response.close()
                raise
            if again:
                try:
                    kept = (
                        response  # built whole (httpx.MockTransport, a cache): read already
                        if response.is_stream_consumed
                        else _unread(response, b"".join(response.iter_raw()))
                    )
                finally:
                    response.close()
                continue
            if options.settle is not None and response.status_code not in THROTTLED:
                response.request = request
                return options.settled(response, permit)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        self.transport.close()
