"""The thread adapter behind the async limiter's API, for the conformance
suite's thread case (tests/conftest.py)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Hashable, Mapping
from contextlib import asynccontextmanager
from typing import Any, NoReturn

import anyio.to_thread

from permits.adapters import BaseLimiter, Permit, threads

__all__ = ["ThreadLimiter", "open_thread_limiter"]


class ThreadLimiter:
    """The thread adapter's limiter behind the async limiter's API: an
    acquire blocks a worker thread (``anyio.to_thread``), which a cancel
    abandons (a thread cannot be cancelled: it waits on, and its limiter's
    closing wakes it); every other call is the limiter's own."""

    def __init__(self, limiter: threads.Limiter) -> None:
        self.limiter = limiter

    def __getattr__(self, name: str) -> Any:
        return getattr(self.limiter, name)

    async def acquire(
        self,
        level: int | None = None,
        *,
        cost: int | Mapping[str, int] = 1,
        flow: Hashable = None,
        timeout: float | None = None,
        max_wait: float | None = None,
    ) -> Permit:
        call = functools.partial(
            self.limiter.acquire, level, cost=cost, flow=flow, timeout=timeout, max_wait=max_wait
        )
        try:
            return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        except Exception:
            # anyio's worker thread holds its job's outcome until its next
            # job: give it one, so that it keeps no traceback (and no frame
            # of the caller's in it) alive.
            await anyio.to_thread.run_sync(_nothing)
            raise

    @asynccontextmanager
    async def permit(self, level: int | None = None, **options: Any) -> AsyncIterator[Permit]:
        yield await self.acquire(level, **options)

    async def __aenter__(self) -> NoReturn:
        await self.limiter.__aenter__()

    async def __aexit__(self, *exc_info: object) -> None:  # pragma: no cover - never entered
        return None


def _nothing() -> None:
    """A job for a worker thread."""


@asynccontextmanager
async def open_thread_limiter(*args: Any, **options: Any) -> AsyncIterator[BaseLimiter]:
    """:func:`permits.adapters.threads.open_limiter`, its limiter behind the
    async API (:class:`ThreadLimiter`)."""
    with threads.open_limiter(*args, **options) as limiter:
        yield ThreadLimiter(limiter)  # type: ignore[misc]
