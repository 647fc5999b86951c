"""The structured adapters' shared shape: one background task per limiter.

The task sleeps in a cancel scope whose deadline is moved to the machine's
next tick whenever it changes; at the deadline it ticks. trio's and anyio's
cancel scopes both allow moving a deadline, so this is a timer, not polling.
"""

from __future__ import annotations

import math

from ._base import BaseLimiter

__all__ = ["TaskedLimiter"]


class TaskedLimiter(BaseLimiter):
    """A limiter driven by one background task (trio, anyio)."""

    _sleep_scope: object | None = None
    _wake_at: float = math.inf

    def _reschedule(self) -> None:
        when = self._machine.next_tick()
        wake_at = math.inf if when is None else when / 1e9
        if wake_at == self._wake_at:
            return  # anyio's asyncio backend re-arms a timer on every deadline set
        self._wake_at = wake_at
        scope = self._sleep_scope
        if scope is not None:
            scope.deadline = wake_at  # type: ignore[attr-defined]
