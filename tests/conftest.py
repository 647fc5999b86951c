"""The conformance suite's cases, on virtual time, for any module in tests/.

A test marked ``anyio`` that asks for ``open_limiter`` (or ``case``) runs
four times: the asyncio adapter on asyncio, the anyio adapter on asyncio, the
trio adapter on trio, the anyio adapter on trio. Every case runs on virtual
time (:mod:`permits.testing`): the clock jumps to the next timer whenever
every task waits, so a test may assert exact times and counts, and
:func:`permits.testing.stall` stalls the loop. A test that needs real time
parametrizes ``anyio_backend`` itself (a plain backend name).

A test marked ``threads`` runs on the thread adapter too: its limiter
behind the async API (tests/real_clock.py: each acquire blocks a worker
thread), under asyncio on the real clock, the thread adapter's own (it has
no virtual one). A test marked ``redis`` runs on the Redis limiter too,
under asyncio and trio, on a real redis-server and the real clock. On the
real clock a test asserts times within margins (test_adapters.py's
``near``): never early by more than a little, late by at most a loaded
machine's lag.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
from real_clock import open_redis_limiter, open_thread_limiter

from permits.adapters import BaseLimiter
from permits.adapters import anyio as anyio_adapter
from permits.adapters import asyncio as asyncio_adapter
from permits.adapters import trio as trio_adapter
from permits.testing import virtual_backend

#: (backend, adapter) of each case.
CASES = [("asyncio", "asyncio"), ("asyncio", "anyio"), ("trio", "trio"), ("trio", "anyio")]
#: The thread adapter's case: asyncio drives the test, on the real clock.
THREADS = ("asyncio", "threads")
#: The Redis limiter's cases, on the real clock (its permits come from a
#: real redis-server, on the server's clock).
REDIS = [("asyncio", "redis"), ("trio", "redis")]
#: The cases on the real clock.
REAL_CLOCK = [THREADS, *REDIS]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test that asks for ``case`` runs on the four async cases; on the
    thread adapter too if it is marked ``threads``, and on the Redis limiter
    under both backends if it is marked ``redis``."""
    if "case" not in metafunc.fixturenames:
        return
    cases = list(CASES)
    if metafunc.definition.get_closest_marker("threads") is not None:
        cases.append(THREADS)
    if metafunc.definition.get_closest_marker("redis") is not None:
        cases += REDIS
    ids = [
        "threads-adapter" if case == THREADS else f"{case[1]}-adapter-on-{case[0]}"
        for case in cases
    ]
    metafunc.parametrize("case", cases, ids=ids, indirect=True)


@pytest.fixture
def case(request: pytest.FixtureRequest) -> tuple[str, str]:
    """``(backend, adapter)``: which framework runs the test, which adapter it uses."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def anyio_backend(case: tuple[str, str]) -> str | tuple[str, dict[str, Any]]:
    """anyio's plugin runs the test on the case's backend, on virtual time
    (a fresh clock for each test); the thread adapter's, on the real clock."""
    if case in REAL_CLOCK:
        return case[0]
    return virtual_backend(case[0])


@pytest.fixture
def open_limiter(
    case: tuple[str, str], request: pytest.FixtureRequest
) -> Callable[..., AbstractAsyncContextManager[BaseLimiter]]:
    """The case's adapter: ``open_limiter(policy, rate, burst, **options)``
    (the Redis limiter's on a fresh name of the session's redis-server)."""
    adapter = case[1]
    if adapter == "redis":
        return functools.partial(open_redis_limiter, request.getfixturevalue("redis_server").url)
    if adapter == "asyncio":
        return asyncio_adapter.open_limiter
    if adapter == "trio":
        return trio_adapter.open_limiter
    if adapter == "threads":
        return open_thread_limiter
    return anyio_adapter.open_limiter


@pytest.fixture
def switch_often() -> Iterator[None]:
    """Threads switch as often as the interpreter allows while the test
    runs, so that a race a 5 ms switch interval hides shows at once."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
