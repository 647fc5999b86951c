"""The conformance suite's four cases, on virtual time, for any module in tests/.

A test marked ``anyio`` that asks for ``open_limiter`` (or ``case``) runs
four times: the asyncio adapter on asyncio, the anyio adapter on asyncio, the
trio adapter on trio, the anyio adapter on trio. Every case runs on virtual
time (:mod:`permits.testing`): the clock jumps to the next timer whenever
every task waits, so a test may assert exact times and counts, and
:func:`permits.testing.stall` stalls the loop. A test that needs real time
parametrizes ``anyio_backend`` itself (a plain backend name).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from permits.adapters import BaseLimiter
from permits.adapters import anyio as anyio_adapter
from permits.adapters import asyncio as asyncio_adapter
from permits.adapters import trio as trio_adapter
from permits.testing import virtual_backend

#: (backend, adapter) of each case.
CASES = [("asyncio", "asyncio"), ("asyncio", "anyio"), ("trio", "trio"), ("trio", "anyio")]


@pytest.fixture(params=CASES, ids=[f"{adapter}-adapter-on-{backend}" for backend, adapter in CASES])
def case(request: pytest.FixtureRequest) -> tuple[str, str]:
    """``(backend, adapter)``: which framework runs the test, which adapter it uses."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def anyio_backend(case: tuple[str, str]) -> tuple[str, dict[str, Any]]:
    """anyio's plugin runs the test on the case's backend, on virtual time
    (a fresh clock for each test)."""
    return virtual_backend(case[0])


@pytest.fixture
def open_limiter(case: tuple[str, str]) -> Callable[..., AbstractAsyncContextManager[BaseLimiter]]:
    """The case's adapter: ``open_limiter(policy, rate, burst, **options)``."""
    adapter = case[1]
    if adapter == "asyncio":
        return asyncio_adapter.open_limiter
    if adapter == "trio":
        return trio_adapter.open_limiter
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
