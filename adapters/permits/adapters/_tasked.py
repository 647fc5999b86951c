"""The structured adapters' shared shape: one background task per limiter.

The task sleeps in a cancel scope whose deadline is moved to the machine's
next tick whenever it changes; at the deadline it ticks. trio's and anyio's
cancel scopes both allow moving a deadline, so this is a timer, not polling.
A framework module supplies the scope, the sleep and the clock.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from typing import Any

from ._base import BaseLimiter

__all__ = ["TaskedLimiter"]


class TaskedLimiter(BaseLimiter):
    """A limiter driven by one background task (trio, anyio)."""

    _sleep_scope: Any = None
    _wake_at: float = math.inf

    def _cancel_scope(self, deadline: float) -> AbstractContextManager[Any]:
        """The framework's cancel scope with this deadline (seconds)."""
        raise NotImplementedError

    async def _sleep_forever(self) -> None:
        raise NotImplementedError

    def _reschedule(self) -> None:
        when = self._machine.next_tick()
        wake_at = math.inf if when is None else when / 1e9
        if wake_at == self._wake_at:
            return  # anyio's asyncio backend re-arms a timer on every deadline set
        self._wake_at = wake_at
        if self._sleep_scope is not None:
            self._sleep_scope.deadline = wake_at

    async def _timer(self) -> None:
        """Sleep until the next tick, tick, repeat; until closed or cancelled."""
        while self._closed is None:
            with self._cancel_scope(self._wake_at) as scope:
                self._sleep_scope = scope
                await self._sleep_forever()
            self._sleep_scope = None
            if self._clock() / 1e9 >= self._wake_at:
                self._wake_at = math.inf
                self._on_timer()
