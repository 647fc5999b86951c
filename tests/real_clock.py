"""The conformance suite's cases on the real clock (tests/conftest.py): the
thread adapter behind the async limiter's API, and the Redis limiter opened
as the others are."""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import AsyncIterator, Hashable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, NoReturn

import anyio.to_thread

from permits.adapters import BaseLimiter, Permit, threads
from permits.adapters import redis as redis_adapter
from permits.core import Policy

__all__ = ["ThreadLimiter", "open_redis_limiter", "open_thread_limiter"]


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


_names = itertools.count()


def open_redis_limiter(
    url: str, policy: Policy, rate: Any = None, burst: int = 1, **options: Any
) -> AbstractAsyncContextManager[BaseLimiter]:
    """:func:`permits.adapters.redis.open_limiter` at ``url``, under a name
    of its own (no other test's buckets), opened as the other adapters are."""
    name = f"conformance-{next(_names)}-{time.monotonic_ns()}"
    return redis_adapter.open_limiter(policy, url, name=name, rate=rate, burst=burst, **options)
