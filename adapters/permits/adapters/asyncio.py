"""The asyncio adapter: standard library only.

Permits are handed out by ``loop.call_at`` timers at their due time; there is
no background task. Open one with ``async with open_limiter(...) as
limiter:``, as with every adapter (or make a :class:`Limiter` and call
:meth:`Limiter.aclose`); closing cancels the timer and wakes every waiter
with :class:`~permits.adapters.LimiterClosed`.

The asyncio race: a waiter whose future was resolved (its permit decided)
and whose task is cancelled before it runs raises ``CancelledError`` from
``acquire``; the limiter then refunds the permit, which goes to the next
waiter at once. So the permits granted and not refunded are exactly the
callers that proceeded.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from fractions import Fraction
from typing import TYPE_CHECKING

from permits.core import Policy, in_seconds

from ._base import BaseLimiter, Event, LimiterOptions, async_opening, refuse_unknown
from ._requires import other_loop, wrong_framework

if TYPE_CHECKING:
    from typing_extensions import Unpack  # in typing from Python 3.11

__all__ = ["Limiter", "open_limiter"]


class _FutureEvent:
    """The cheapest event asyncio has: one future, awaited directly. Made
    by :meth:`LoopTimed._new_event`, which gives it its future (it has no
    ``__init__``, which Python 3.11 runs in an interpreter of its own,
    entered from C: about 500 instructions a waiter more than a call)."""

    __slots__ = ("_future",)

    _future: asyncio.Future[None]

    def set(self) -> None:
        if not self._future.done():
            self._future.set_result(None)

    def wait(self) -> asyncio.Future[None]:
        return self._future


class LoopTimed(BaseLimiter):
    """A limiter whose timer is its asyncio loop's: one ``loop.call_at``
    handle at the machine's next tick, moved as that changes, no task; and
    whose waiters each wait on one future of the loop. The asyncio adapter,
    and the anyio adapter under asyncio."""

    #: The loop, once known (every change to the machine reads its clock
    #: first, so it is known before the timer is set).
    _loop: asyncio.AbstractEventLoop | None = None
    _handle: asyncio.TimerHandle | None = None
    #: The time (ns) the handle is set for.
    _handle_at: int | None = None

    def _reschedule(self) -> None:
        when = self._machine.next_tick()
        if when == self._handle_at and self._handle is not None:
            return
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._handle_at = when
        if when is not None and (at := in_seconds(when)) != math.inf:
            assert self._loop is not None
            self._handle = self._loop.call_at(at, self._fire)

    def _fire(self) -> None:
        due = self._handle_at
        self._handle = None
        self._handle_at = None
        if due is not None:
            assert self._loop is not None  # it armed the timer
            self._catch_up(due, self._loop.time())
        self._on_timer()

    def _stop_timer(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _new_event(self) -> Event:
        # Only acquire makes events, after its _clock() has checked the loop.
        assert self._loop is not None
        event = _FutureEvent()
        event._future = self._loop.create_future()
        return event


class Limiter(LoopTimed):
    """A priority limiter for asyncio; see :class:`~permits.adapters.BaseLimiter`
    for the arguments and :meth:`acquire`, :meth:`permit`, :meth:`try_acquire`.
    Open one with :func:`open_limiter`."""

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise wrong_framework(Limiter, "asyncio", bound=self._bound()) from None
        if loop is not self._loop:
            if self._loop is not None:
                raise other_loop(Limiter)
            self._loop = loop
        return loop

    def _bound(self) -> bool:
        """Whether the limiter lives in a loop that is still open (a call
        from another thread is to go through it)."""
        return self._loop is not None and not self._loop.is_closed()

    def _clock(self) -> int:
        # _running_loop, inlined: the clock is read on every acquire (a try
        # costs next to nothing until it catches).
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise wrong_framework(Limiter, "asyncio", bound=self._bound()) from None
        if loop is not self._loop:
            self._running_loop()
        # The loop's own time(), read on every call: its timers run on it,
        # whatever it is (uvloop's, a virtual clock's, one patched on the
        # loop or its class later, a frozen time.monotonic()). Rounded by
        # the float's own __round__, as round() would: the builtin looks it
        # up again on every call, which costs as much as the rounding.
        return (loop.time() * 1e9).__round__()

    async def aclose(self) -> None:
        """Close: cancel the timer and wake every waiter with LimiterClosed
        (in the limiter's own loop: from another, it would wake none)."""
        self._running_loop()
        self._stop_timer()
        self._break(None)


def open_limiter(
    policy: Policy,
    rate: int | float | Fraction | None = None,
    burst: int = 1,
    **options: Unpack[LimiterOptions],
) -> AbstractAsyncContextManager[Limiter]:
    """Open an asyncio :class:`Limiter` for an ``async with``, in the running
    loop; see :class:`~permits.adapters.BaseLimiter` for the arguments. On
    the way out, the timer is cancelled and every waiter wakes with
    :class:`~permits.adapters.LimiterClosed`."""
    refuse_unknown("permits.adapters.asyncio.open_limiter", options)
    return async_opening(_opened(Limiter(policy, rate, burst, **options)))


@asynccontextmanager
async def _opened(limiter: Limiter) -> AsyncIterator[Limiter]:
    limiter._running_loop()  # in a running asyncio loop, or WrongFramework now
    try:
        yield limiter
    finally:
        await limiter.aclose()
