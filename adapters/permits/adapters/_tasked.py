"""The structured adapters' shared shape: one background task per limiter.

The task sleeps in a cancel scope whose deadline is moved to the machine's
next tick whenever it changes; at the deadline it ticks. trio's and anyio's
cancel scopes both allow moving a deadline, so this is a timer, not polling.
A framework module supplies the scope, the sleep and the clock.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from typing import Any, TypeVar

from permits.core import in_seconds

from ._base import BaseLimiter

__all__ = ["TaskedLimiter", "running"]


class TaskedLimiter(BaseLimiter):
    """A limiter driven by one background task (trio, anyio)."""

    _sleep_scope: Any = None
    _wake_at: float = math.inf
    #: The time (ns) ``_wake_at`` was last set for.
    _wake_ns: int = 0

    def _cancel_scope(self, deadline: float, shield: bool = False) -> AbstractContextManager[Any]:
        """The framework's cancel scope with this deadline (seconds),
        shielded from the scopes around it if ``shield``."""
        raise NotImplementedError

    async def _sleep_forever(self) -> None:
        raise NotImplementedError

    def _time(self) -> float:
        """The framework's clock in seconds, as it judges a deadline."""
        raise NotImplementedError

    def _next_wake(self) -> int | None:
        """The time (ns) the timer task is to wake at next: the machine's
        next tick (``None``: only when woken)."""
        return self._machine.next_tick()

    def _reschedule(self) -> None:
        when = self._next_wake()
        if when is None:
            wake_at = math.inf
        else:
            wake_at = in_seconds(when)  # (inf, past a float: never)
            self._wake_ns = when
        if wake_at == self._wake_at:
            return  # anyio's asyncio backend re-arms a timer on every deadline set
        self._wake_at = wake_at
        if self._sleep_scope is not None:
            self._sleep_scope.deadline = wake_at

    #: Whether the timer task runs (it does inside ``open_limiter``).
    _running = False

    def _ensure_open(self) -> None:
        if not self._running and self._closed is None:
            raise RuntimeError(
                f"this {type(self).__module__}.{type(self).__qualname__} has no timer task, "
                "so a waiter would wait forever: make it with "
                "`async with open_limiter(...) as limiter:`"
            )

    #: The timer task's own scope, which only closing cancels (see _run).
    _task_scope: Any = None

    async def _run(self, *, task_status: Any) -> None:
        """The timer task, as started by a nursery or task group: shielded
        from every cancel but its own, which :func:`running` gives as the
        limiter closes. A cancel of a scope around the ``async with`` (the
        task group's too) would end it while the limiter is still open to
        a body shielded from that cancel: its waiters would wait for ever."""
        # Opened in a scope cancelled already: end as an unshielded task
        # would, so that the opening is cancelled (a task not yet started
        # stays in the opener's scope, which would wait for it for ever).
        await self._checkpoint_if_cancelled()
        self._running = True
        task_status.started()
        try:
            with self._cancel_scope(math.inf, shield=True) as self._task_scope:
                await self._timer()
        finally:
            self._running = False

    async def _timer(self) -> None:
        """Sleep until the next tick, tick, repeat; until closed or cancelled."""
        while self._closed is None:
            with self._cancel_scope(self._wake_at) as scope:
                self._sleep_scope = scope
                await self._sleep_forever()
            self._sleep_scope = None
            seconds = self._time()
            if seconds >= self._wake_at:
                self._wake_at = math.inf
                self._catch_up(self._wake_ns, seconds)
                self._on_timer()


L = TypeVar("L", bound=TaskedLimiter)


@asynccontextmanager
async def running(limiter: L, group: AbstractAsyncContextManager[Any]) -> AsyncIterator[L]:
    """Run ``limiter``'s timer task in ``group`` (a trio nursery or an anyio
    task group) for the ``async with``; on the way out, close the limiter
    (every waiter wakes with LimiterClosed) and stop the task."""
    raised: BaseException | None = None
    async with group as tasks:
        await tasks.start(limiter._run)
        try:
            yield limiter
        except BaseException as error:
            # The body's own exception leaves as itself, not wrapped in an
            # ExceptionGroup by the task group: `except AcquireTimeout`
            # around the block catches it.
            raised = error
        finally:
            limiter._break(None)
            if limiter._task_scope is not None:  # (shielded from the next line)
                limiter._task_scope.cancel()
            tasks.cancel_scope.cancel()
    if raised is not None:
        raise raised
