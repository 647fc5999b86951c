"""The anyio adapter: one limiter that runs under asyncio or trio.

    async with open_limiter(StrictPriority(2), rate=100) as limiter:
        async with limiter.permit(INTERACTIVE):
            ...

Structured like the trio adapter: one background task in a task group,
which lives as long as the ``async with``. Under trio it sleeps until the
next permit's due time and ticks; under asyncio the loop's own timer
(``call_at``, as in the asyncio adapter) ticks instead, since a cancel
scope's deadline there would cancel the task and catch the cancel at every
tick (twice the CPU a permit costs). Leaving the ``async with`` closes
the limiter, wakes every waiter with :class:`~permits.adapters.LimiterClosed`,
and leaves nothing running. An acquire granted at once looks for a
cancel first (under trio, at a checkpoint, which trio asks of every
operation that may block; under asyncio without yielding, as the asyncio
adapter does not yield either). A waiter cancelled after its permit was
decided, before it resumed, hands the permit back (it goes to the next waiter
at once) under both backends, whether the cancel came from a cancel scope or,
under asyncio, a native ``Task.cancel()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from permits.core import Policy

from ._base import Event, LimiterOptions, async_opening, refuse_unknown
from ._requires import (
    Framework,
    other_loop,
    requires_extra,
    running_framework,
    wrong_framework,
)
from ._tasked import TaskedLimiter, running
from .asyncio import LoopTimed

if TYPE_CHECKING:
    from typing_extensions import Unpack

with requires_extra(__name__, "anyio", "anyio"):
    import anyio
    import anyio.abc
    import anyio.lowlevel

__all__ = ["Limiter", "open_limiter"]


class Limiter(LoopTimed, TaskedLimiter):
    """A priority limiter for anyio; make one with :func:`open_limiter`."""

    #: The running backend's clock, in seconds: ``anyio.current_time`` until
    #: the timer task starts, then its event loop's own, which refuses to be
    #: read in any other loop (see _bind_backend).
    _seconds: Callable[[], float] = staticmethod(anyio.current_time)

    def _clock(self) -> int:
        return (self._seconds() * 1e9).__round__()  # round(), without its look-up

    def _bind_backend(self) -> None:
        """Call the running backend's own clock and checkpoint from now on.

        anyio's ``current_time()`` and ``checkpoint()`` look the running
        backend up on every call; a limiter lives in one event loop (its task
        group's), so it looks once, as its background task starts. Every call
        that changes the limiter reads that clock first: a call from another
        loop (another thread's) is refused there."""
        backend = anyio.lowlevel.current_token().backend_class
        under_asyncio = _under_asyncio()
        self._seconds = _asyncio_seconds() if under_asyncio else _trio_seconds()
        self._checkpoint_if_cancelled = backend.checkpoint_if_cancelled
        # asyncio's own event under asyncio (anyio's wraps it, and its
        # cancel scopes cancel a task waiting on any future)
        self._event = asyncio.Event if under_asyncio else backend.create_event
        if under_asyncio and self._loop_timed:
            # The loop's own timer and futures, as the asyncio adapter's: a
            # cancel scope's deadline would cancel the timer task and
            # catch its cancel at every tick.
            self._loop = asyncio.get_running_loop()
        # Where a permit is granted at once: trio asks every operation that
        # may block for a schedule point; asyncio does not, and a trip
        # through its loop would cost more than the grant. There, a cancel
        # is looked for without yielding.
        self._checkpoint = backend.checkpoint_if_cancelled if under_asyncio else backend.checkpoint

    async def _run(self, *, task_status: Any) -> None:
        self._bind_backend()
        await super()._run(task_status=task_status)

    #: Whether, under asyncio, the loop's timer ticks the machine (see
    #: _bind_backend); otherwise, as under trio, the timer task does.
    _loop_timed = True

    def _reschedule(self) -> None:
        if self._loop is None:  # under trio: the timer task's
            TaskedLimiter._reschedule(self)
        else:
            LoopTimed._reschedule(self)

    async def _timer(self) -> None:
        if self._loop is None:
            await super()._timer()
            return
        try:
            await anyio.sleep_forever()  # (the loop's timer ticks; closing ends this)
        finally:
            self._stop_timer()

    #: The running backend's event class: ``anyio.Event`` until the timer
    #: task starts, then the backend's own (see _bind_backend).
    _event: Callable[[], Event] = anyio.Event

    def _new_event(self) -> Event:
        if self._loop is None:
            return self._event()
        return LoopTimed._new_event(self)

    _checkpoint_on_grant = True
    #: The framework's own checkpoint, called directly (no coroutine around it).
    _checkpoint = staticmethod(anyio.lowlevel.checkpoint)
    _cancel_after_wake = True
    _checkpoint_if_cancelled = staticmethod(anyio.lowlevel.checkpoint_if_cancelled)

    def _cancel_scope(self, deadline: float, shield: bool = False) -> anyio.CancelScope:
        return anyio.CancelScope(deadline=deadline, shield=shield)

    async def _sleep_forever(self) -> None:
        await anyio.sleep_forever()

    def _time(self) -> float:
        return self._seconds()


def _asyncio_seconds() -> Callable[[], float]:
    """The running asyncio loop's clock, refusing any other loop (another
    thread's, whose tasks the limiter's timer cannot wake)."""
    return _own_seconds(asyncio.get_running_loop, "time", "asyncio")


def _trio_seconds() -> Callable[[], float]:
    """The running trio run's clock, refusing any other run's (another
    thread's, at another reading)."""
    import trio  # anyio runs on it

    return _own_seconds(trio.lowlevel.current_clock, "current_time", "trio")


def _own_seconds(
    running: Callable[[], object], method: str, framework: Framework
) -> Callable[[], float]:
    """The clock (its ``method``, bound once) of the loop or run ``running()``
    gives now, read only from there: from any other, a call is refused."""
    own = running()
    seconds: Callable[[], float] = getattr(own, method)

    def read() -> float:
        try:
            now = running()
        except RuntimeError:
            raise wrong_framework(Limiter, framework, bound=True) from None
        if now is not own:
            raise other_loop(Limiter)
        return seconds()

    return read


def _under_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def open_limiter(
    policy: Policy,
    rate: int | float | Fraction | None = None,
    burst: int = 1,
    **options: Unpack[LimiterOptions],
) -> AbstractAsyncContextManager[Limiter]:
    """Open an anyio :class:`Limiter` for an ``async with``; see
    :class:`~permits.adapters.BaseLimiter` for the arguments."""
    if running_framework() is None:  # anyio would say "NoEventLoopError"
        raise wrong_framework(open_limiter, "anyio") from None
    refuse_unknown("permits.adapters.anyio.open_limiter", options)
    limiter = Limiter(policy, rate, burst, **options)
    return async_opening(running(limiter, anyio.create_task_group()))
