"""httpx transports that take a permit per request and learn from the upstream
(extra ``permits[httpx]``).

    from permits.adapters.asyncio import open_limiter
    from permits.httpx import AsyncPermitsTransport

    async with open_limiter(Fifo(), limits=..., settle_window=600.0) as limiter:
        transport = AsyncPermitsTransport(limiter, cost=estimate, settle=tokens_used)
        async with httpx.AsyncClient(transport=transport) as client:
            await client.post(url, json=..., extensions={"permits.level": INTERACTIVE})

Each request takes a permit first: at the level and in the flow its
``extensions`` name (``"permits.level"``, ``"permits.flow"``), else those
the transport's functions of the request give, else the limiter's current
level; asking for ``cost(request)`` (1 by default). The response then
teaches the limiter what the upstream knows:

- a 429 or 503 with ``Retry-After`` (seconds or an HTTP date) pauses the
  whole limiter until then, every level and every task (at most
  ``max_pause`` seconds; a longer one is cut there, with a warning); the
  request is sent again after the pause, with a new permit, up to
  ``retries`` times;
- ``x-ratelimit-remaining-<limit>`` with ``x-ratelimit-reset-<limit>`` (the
  OpenAI style: ``6m0s``, ``1.5s``, ``20ms``) adopt the upstream's view of
  the limit of that name, and the IETF draft's ``RateLimit`` field
  (``remaining=`` and ``reset=``, or ``r=`` and ``t=``) that of the first;
- ``settle(response)``, if given, says what the call cost after all (read
  from a header, or from the body, which is then read first).

A header that does not parse is ignored and counted in ``malformed``, never
fatal. :class:`PermitsTransport` does the same for ``httpx.Client``, with a
:mod:`permits.adapters.threads` limiter.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Hashable, Mapping
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, TypedDict

from permits.adapters._base import _Limiting
from permits.adapters._requires import requires_extra
from permits.adapters.threads import Limiter as ThreadLimiter
from permits.core import PermitValueError
from permits.core.checks import check_int

with requires_extra(__name__, "httpx", "httpx"):
    import httpx

from permits.adapters import BaseLimiter, Permit

if TYPE_CHECKING:
    from typing_extensions import Unpack  # in typing from Python 3.11

__all__ = [
    "AsyncPermitsTransport",
    "PermitsTransport",
    "TransportOptions",
    "Upstream",
    "parse_duration",
]

log = logging.getLogger("permits.httpx")

Cost = int | Mapping[str, int]

#: The longest pause a Retry-After may set by default: an hour.
MAX_PAUSE = 3600.0

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> float | None:
    """Seconds in ``6m0s``, ``1.5s``, ``20ms``, ``1h2m3s`` or a bare number;
    ``None`` if it is none of those (or negative)."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        return value if math.isfinite(value) and value >= 0 else None
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNITS[u] for n, u in parts)


def _retry_after(value: str, now: float) -> float | None:
    """Seconds from now that a ``Retry-After`` says: a number of seconds or
    an HTTP date; ``None`` if it is neither, or in the past."""
    seconds = parse_duration(value) if not value.strip().endswith("GMT") else None
    if seconds is not None and re.fullmatch(r"\s*\d+(\.\d+)?\s*", value):
        return seconds
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when - now)


class Upstream:
    """What one response says about the limit, applied to a limiter."""

    def __init__(self, limiter: _Limiting, max_pause: float = MAX_PAUSE) -> None:
        self.limiter = limiter
        self.max_pause = max_pause
        #: Headers ignored because they did not parse.
        self.malformed = 0
        #: Responses that paused the limiter (429 or 503 with Retry-After).
        self.pauses = 0
        #: Responses that said the limit was exceeded (429), with or without
        #: a Retry-After.
        self.throttled = 0

    def learn(self, response: httpx.Response) -> float | None:
        """Apply ``response``'s headers; the pause it set (seconds), if any."""
        headers = response.headers
        pause = None
        if response.status_code == 429:
            self.throttled += 1
        if response.status_code in (429, 503) and "retry-after" in headers:
            seconds = _retry_after(headers["retry-after"], time.time())
            if seconds is None:
                self.malformed += 1
            else:
                if seconds > self.max_pause:
                    log.warning(
                        "Retry-After of %s s cut to max_pause=%s s", seconds, self.max_pause
                    )
                    seconds = self.max_pause
                self.limiter.pause_for(seconds)
                self.pauses += 1
                pause = seconds
        names = list(self.limiter.limits)
        for name in names:
            remaining = headers.get(f"x-ratelimit-remaining-{name}")
            reset = headers.get(f"x-ratelimit-reset-{name}")
            if remaining is not None and reset is not None:
                self._adopt(remaining, reset, name)
        field = headers.get("ratelimit")
        if field is not None:
            found = dict(re.findall(r"\b(remaining|reset|r|t)=(\d+(?:\.\d+)?)", field))
            remaining = found.get("remaining", found.get("r"))
            reset = found.get("reset", found.get("t"))
            if remaining is None or reset is None:
                self.malformed += 1
            else:
                self._adopt(remaining, reset, names[0])
        return pause

    def _adopt(self, remaining: str, reset: str, limit: str) -> None:
        seconds = parse_duration(reset)
        if not remaining.strip().isdigit() or seconds is None:
            self.malformed += 1
            return
        self.limiter.adopt(int(remaining), seconds, limit=limit)


class TransportOptions(TypedDict, total=False):
    """The keyword arguments of both transports (see :class:`AsyncPermitsTransport`)."""

    level: Callable[[httpx.Request], int | None] | None
    flow: Callable[[httpx.Request], Hashable] | None
    cost: Callable[[httpx.Request], Cost] | None
    settle: Callable[[httpx.Response], Cost | None] | None
    retries: int
    timeout: float | None
    max_pause: float


class _Options:
    """How a transport asks for each request's permit, and settles it."""

    def __init__(
        self,
        level: Callable[[httpx.Request], int | None] | None = None,
        flow: Callable[[httpx.Request], Hashable] | None = None,
        cost: Callable[[httpx.Request], Cost] | None = None,
        settle: Callable[[httpx.Response], Cost | None] | None = None,
        retries: int = 0,
        timeout: float | None = None,
        max_pause: float = MAX_PAUSE,
    ) -> None:
        check_int("retries", retries, 0)
        if (
            isinstance(max_pause, bool)
            or not isinstance(max_pause, (int, float))
            or not 0 < max_pause < math.inf
        ):
            raise PermitValueError("max_pause", max_pause, "must be a finite number of seconds > 0")
        self.level, self.flow, self.cost, self.settle = level, flow, cost, settle
        self.retries = retries
        self.timeout = timeout

    def ask(self, request: httpx.Request) -> dict[str, Any]:
        extensions = request.extensions
        level = extensions.get("permits.level")
        if level is None and self.level is not None:
            level = self.level(request)
        flow = extensions.get("permits.flow")
        if flow is None and self.flow is not None:
            flow = self.flow(request)
        cost = self.cost(request) if self.cost is not None else 1
        return {"level": level, "flow": flow, "cost": cost, "timeout": self.timeout}

    def settled(self, response: httpx.Response, content: bytes, permit: Permit) -> httpx.Response:
        """``response`` with its body read (``content``), its permit settled
        at what ``settle`` says it cost."""
        assert self.settle is not None
        read = httpx.Response(
            response.status_code,
            headers=response.headers,
            content=content,
            request=response.request,
            extensions=response.extensions,
        )
        actual = self.settle(read)
        if actual is not None:
            permit.settle(actual)
        return read


def _check_settle(limiter: _Limiting, options: _Options) -> None:
    """``settle`` needs a limiter that keeps permits to settle: refused now,
    not after a request the upstream has charged for."""
    if options.settle is not None and not limiter.machine.refund_window_ns:
        raise PermitValueError(
            "settle", options.settle, "needs a limiter opened with settle_window > 0"
        )


class AsyncPermitsTransport(httpx.AsyncBaseTransport):
    """A permit per request for ``httpx.AsyncClient``, over an async limiter.

    :param limiter: an asyncio, trio or anyio limiter.
    :param transport: the transport that sends (default: httpx's own).
    :param level: the level of a request its extensions do not name.
    :param flow: the flow (tenant) of a request its extensions do not name.
    :param cost: what a request asks for (1 by default).
    :param settle: what a response says the call cost; the limiter needs a
        ``settle_window``.
    :param retries: how many times a 429/503 with ``Retry-After`` is sent
        again, after the pause, each with a new permit.
    :param timeout: seconds a request waits for its permit at most.
    :param max_pause: the longest pause a ``Retry-After`` may set.
    """

    def __init__(
        self,
        limiter: BaseLimiter,
        transport: httpx.AsyncBaseTransport | None = None,
        **options: Unpack[TransportOptions],
    ) -> None:
        self.limiter = limiter
        self.transport = transport if transport is not None else httpx.AsyncHTTPTransport()
        self.options = _Options(**options)
        _check_settle(limiter, self.options)
        self.upstream = Upstream(limiter, options.get("max_pause", MAX_PAUSE))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        options = self.options
        for attempt in range(options.retries + 1):
            permit = await self.limiter.acquire(**options.ask(request))
            response = await self.transport.handle_async_request(request)
            try:
                paused = self.upstream.learn(response)
            except BaseException:
                await response.aclose()
                raise
            if paused is not None and attempt < options.retries:
                await response.aclose()
                continue  # the next acquire waits for the pause
            if options.settle is not None:
                response.request = request
                return options.settled(response, await _read(response), permit)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        await self.transport.aclose()


async def _read(response: httpx.Response) -> bytes:
    try:
        return b"".join([part async for part in response.stream])  # type: ignore[union-attr]
    finally:
        await response.aclose()


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
        self.limiter = limiter
        self.transport = transport if transport is not None else httpx.HTTPTransport()
        self.options = _Options(**options)
        _check_settle(limiter, self.options)
        self.upstream = Upstream(limiter, options.get("max_pause", MAX_PAUSE))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        options = self.options
        for attempt in range(options.retries + 1):
            permit = self.limiter.acquire(**options.ask(request))
            response = self.transport.handle_request(request)
            try:
                paused = self.upstream.learn(response)
            except BaseException:
                response.close()
                raise
            if paused is not None and attempt < options.retries:
                response.close()
                continue
            if options.settle is not None:
                try:
                    content = b"".join(response.stream)  # type: ignore[arg-type]
                finally:
                    response.close()
                response.request = request
                return options.settled(response, content, permit)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        self.transport.close()
