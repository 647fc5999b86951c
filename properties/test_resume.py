"""P26: the limit holds where the upstream sees it, when callers proceed.

The machine charges each permit as its caller proceeds (``Charge.AT_SPEND``),
and the adapters spend it as the caller resumes. So whatever the event loop
does (stalls of any length at any phase, decisions made during a stall by a
``try_acquire``'s tick, cancellations at the moment of a grant), the times at
which callers proceed never hold more than the limit allows. Checked on every
adapter, on virtual time (:mod:`permits.testing`), so a stall is exact and the
run deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import anyio
import anyio.abc
from hypothesis import given, note
from hypothesis import strategies as st

from permits.adapters import AcquireTimeout, BaseLimiter
from permits.adapters import anyio as anyio_adapter
from permits.adapters import asyncio as asyncio_adapter
from permits.adapters import trio as trio_adapter
from permits.core import SECOND, Fifo, StrictPriority
from permits.testing import stall, virtual_backend

#: (backend, adapter): the conformance suite's four cases.
CASES = [("asyncio", "asyncio"), ("asyncio", "anyio"), ("trio", "trio"), ("trio", "anyio")]

OPENERS: dict[str, Callable[..., AbstractAsyncContextManager[BaseLimiter]]] = {
    "asyncio": asyncio_adapter.open_limiter,
    "trio": trio_adapter.open_limiter,
    "anyio": anyio_adapter.open_limiter,
}


def clock_ns() -> int:
    """The running loop's time, read as the adapters read it."""
    return round(anyio.current_time() * 1e9)


def excess(times: list[int], rate: int, burst: int) -> list[tuple[int, int, int]]:
    """The windows ``[times[i], times[j]]`` that hold more than ``burst +
    floor(rate * (d + 1 ns))`` of ``times`` (SPEC P1 on the nanosecond grid)."""
    times = sorted(times)
    return [
        (times[i], times[j], j - i + 1)
        for i in range(len(times))
        for j in range(i, len(times))
        if j - i + 1 > burst + rate * (times[j] - times[i] + 1) // SECOND
    ]


#: A caller: (arrival in ms, level, timeout in ms or None).
callers = st.lists(
    st.tuples(st.integers(0, 400), st.integers(0, 1), st.none() | st.integers(0, 60)),
    min_size=1,
    max_size=30,
)
#: A stall: (when in ms, how long in ms, whether a try_acquire ticks in its middle).
stalls = st.lists(st.tuples(st.integers(0, 500), st.integers(1, 300), st.booleans()), max_size=4)


@given(
    case=st.sampled_from(CASES),
    strict=st.booleans(),
    rate=st.sampled_from([10, 50, 200, 1000]),
    burst=st.integers(1, 5),
    calls=callers,
    pauses=stalls,
    cancels=st.lists(st.integers(0, 29), max_size=5),
)
def test_callers_proceed_within_the_limit(
    case: tuple[str, str],
    strict: bool,
    rate: int,
    burst: int,
    calls: list[tuple[int, int, int | None]],
    pauses: list[tuple[int, int, bool]],
    cancels: list[int],
) -> None:
    """P26: over every window of ``d`` ns, the callers that proceeded (their
    acquire returned) number at most ``burst + floor(rate * (d + 1 ns))``,
    on every adapter, through loop stalls at random phases, timeouts and
    cancellations; and the permits granted and not refunded equal them."""
    backend, adapter = case
    proceeded: list[int] = []

    async def caller(limiter: BaseLimiter, at: int, lv: int, timeout: int | None) -> None:
        await anyio.sleep(at / 1000)
        try:
            await limiter.acquire(lv, timeout=None if timeout is None else timeout / 1000)
        except AcquireTimeout:
            return
        proceeded.append(clock_ns())

    async def staller(limiter: BaseLimiter, at: int, length: int, tick: bool) -> None:
        await anyio.sleep(at / 1000)
        stall(length / 2000)
        if tick and limiter.try_acquire(0):  # its tick decides permits mid-stall
            proceeded.append(clock_ns())
        stall(length / 2000)

    async def main() -> None:
        policy = StrictPriority(2) if strict else Fifo(2)
        async with OPENERS[adapter](policy, rate, burst) as limiter:
            async with anyio.create_task_group() as tg:
                scopes: list[anyio.CancelScope] = []
                for at, lv, timeout in calls:
                    scope = anyio.CancelScope()
                    scopes.append(scope)

                    async def run(
                        scope: anyio.CancelScope = scope,
                        at: int = at,
                        lv: int = lv,
                        timeout: int | None = timeout,
                    ) -> None:
                        with scope:
                            await caller(limiter, at, lv, timeout)

                    tg.start_soon(run)
                for at, length, tick in pauses:
                    tg.start_soon(staller, limiter, at, length, tick)
                for i, index in enumerate(cancels):
                    # cancel some callers at random phases, grants included
                    await anyio.sleep(0.013 * (i + 1))
                    scopes[index % len(scopes)].cancel()
            stats = limiter.statistics()
        note(f"proceeded at {sorted(proceeded)}")
        assert stats.granted - sum(lv.refunded for lv in stats.levels) == len(proceeded), (
            "P26: permits granted and not refunded != callers that proceeded",
            stats,
            len(proceeded),
        )

    name, options = virtual_backend(backend)
    anyio.run(main, backend=name, backend_options=options)
    over = excess(proceeded, rate, burst)
    assert not over, ("P26: more callers proceeded in a window than the limit allows", over)
