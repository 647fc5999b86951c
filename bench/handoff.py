"""What one hand-off costs in each adapter, beside its framework's bare floor.

    python bench/handoff.py [--quick]

At a rate that never binds (``rate=10**9``), in ns per acquire (wall clock,
best of three):

- *uncontended*: one task calls ``acquire()`` in a loop and a permit is
  always free, so every acquire returns at once. Floor, asyncio: create an
  ``asyncio.Future``, resolve it, await it (no trip through the loop).
  Floor, trio: ``trio.lowlevel.checkpoint()``, which trio requires of any
  operation that may block, an immediate acquire included.
- *contended*: ``WAITERS`` tasks are all parked in ``acquire()`` and one
  tick releases one permit to each; they wake, count, and park again. Time
  is frozen (a loop whose ``time()`` stands still, trio's
  ``MockClock(rate=0)``) and a releaser task moves it on by 1 ms per round,
  so every permit is released by the limiter's own timer and no real
  sleeping is timed. Floor, asyncio: each waiter awaits a fresh future and
  the releaser resolves them all; floor, trio: each waiter parks with
  ``trio.lowlevel.wait_task_rescheduled`` and the releaser
  ``reschedule()`` s them all (what ``trio.Event`` is built on). Both floors
  run the same releaser loop.
- beside them: the peers' acquire, granted at once under asyncio (those
  installed), and the flat reference limiter (``_reference.py``) on both
  paths under asyncio and trio; then the floors and a few primitives
  (``asyncio.sleep(0)``, events) in a table of their own.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import time
from collections.abc import Callable
from typing import Any

import anyio
import trio
import trio.lowlevel
from _common import (
    ADAPTERS,
    ASYNCIO,
    PEERS,
    QUICK,
    REPEAT,
    TRIO,
    UNLIMITED,
    Acquire,
    Adapter,
    Framework,
    Make,
    best,
    close_limiter,
    footer,
    granted,
    header,
    installed,
    skipped,
    version,
)
from _options import check_options
from _reference import FlatLimiter, FlatTrioLimiter, make_flat

from permits.core import Fifo

UNCONTENDED = 20_000 if QUICK else 100_000  # acquires per timed loop
WAITERS = 100  # tasks parked at once in the contended hand-off
ROUNDS = 50 if QUICK else 200  # releases of WAITERS permits per timed loop
STEP = 0.001  # seconds the frozen clock moves per contended round


async def _per_acquire(acquire: Acquire) -> float:
    """Seconds per ``acquire()`` in a loop of UNCONTENDED, after 1,000 to warm up."""
    for _ in range(1000):
        await acquire()
    gc.collect()
    start = time.perf_counter()
    for _ in range(UNCONTENDED):
        await acquire()
    return (time.perf_counter() - start) / UNCONTENDED


def uncontended_limiter(adapter: Adapter) -> float:
    """Seconds per acquire when a permit is always free."""

    async def body() -> float:
        async with adapter.open(Fifo(1), UNLIMITED, 10**6) as limiter:
            per_acquire = await _per_acquire(limiter.acquire)
            assert granted(limiter) == UNCONTENDED + 1000
        return per_acquire

    return adapter.framework.run(body)


def uncontended_peer(make: Make) -> float:
    """Seconds per acquire of a peer (asyncio) when a permit is always free."""

    async def body() -> float:
        acquire, close = make(UNLIMITED, 10**6)
        per_acquire = await _per_acquire(acquire)
        await close_limiter(close)
        return per_acquire

    return asyncio.run(body())


def uncontended_asyncio_floor() -> float:
    """Create a future, resolve it, await it: no trip through the loop."""

    async def body() -> float:
        loop = asyncio.get_running_loop()
        create = loop.create_future
        gc.collect()
        start = time.perf_counter()
        for _ in range(UNCONTENDED):
            future: asyncio.Future[None] = create()
            future.set_result(None)
            await future
        return (time.perf_counter() - start) / UNCONTENDED

    return ASYNCIO.run(body)


def uncontended_checkpoint(framework: Framework) -> float:
    """The framework's own checkpoint, once per iteration."""

    async def body() -> float:
        checkpoint = framework.checkpoint
        gc.collect()
        start = time.perf_counter()
        for _ in range(UNCONTENDED):
            await checkpoint()
        return (time.perf_counter() - start) / UNCONTENDED

    return framework.run(body)


async def _release_rounds(
    framework: Framework,
    release: Callable[[], None],
    parked: Callable[[], int],
    progress: list[int],
) -> float:
    """The releaser: wait until every live waiter is parked, release them all,
    wait for all of them to come back; seconds for the whole run.

    ``progress`` is ``[live waiters, hand-offs done]``, kept by the waiters."""
    checkpoint = framework.checkpoint
    while parked() < progress[0]:
        await checkpoint()
    gc.collect()
    start = time.perf_counter()
    target = 0
    while progress[0]:
        target += progress[0]
        release()
        while progress[1] < target:
            await checkpoint()
        # A waiter counts its grant and parks again in one step, so this seldom waits.
        while progress[0] and parked() < progress[0]:
            await checkpoint()
    return time.perf_counter() - start


async def _contend(framework: Framework, acquire: Acquire, parked: Callable[[], int]) -> float:
    """WAITERS tasks each acquire ROUNDS times while the releaser moves the
    frozen clock on; seconds per hand-off."""
    progress = [WAITERS, 0]
    elapsed: list[float] = []

    async def waiter() -> None:
        for _ in range(ROUNDS):
            await acquire()
            progress[1] += 1
        progress[0] -= 1

    async def releaser() -> None:
        elapsed.append(
            await _release_rounds(framework, lambda: framework.advance(STEP), parked, progress)
        )

    await framework.run_all([waiter] * WAITERS + [releaser])
    return elapsed[0] / (WAITERS * ROUNDS)


def contended_limiter(adapter: Adapter) -> float:
    """Seconds per hand-off with WAITERS tasks parked, one tick releasing all."""
    framework = adapter.framework

    async def body() -> float:
        # Time stands still: the bucket refills only when the releaser moves
        # the clock, by far more than WAITERS permits, capped at the burst.
        async with adapter.open(Fifo(1), UNLIMITED, WAITERS) as limiter:
            for _ in range(WAITERS):  # empty the bucket
                await limiter.acquire()
            per_hand_off = await _contend(framework, limiter.acquire, limiter.machine.__len__)
            assert granted(limiter) == WAITERS * (ROUNDS + 1)
        return per_hand_off

    return framework.run(body, frozen=True)


def contended_flat() -> float:
    """The flat limiter in the contended hand-off, as the adapters are run."""

    async def body() -> float:
        flat = FlatLimiter(UNLIMITED, WAITERS)
        for _ in range(WAITERS):  # empty the bucket
            await flat.acquire()
        return await _contend(ASYNCIO, flat.acquire, lambda: flat.waiting)

    return ASYNCIO.run(body, frozen=True)


def contended_flat_trio() -> float:
    """The flat limiter on trio in the contended hand-off."""

    async def body() -> float:
        flat = FlatTrioLimiter(UNLIMITED, WAITERS)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(flat.run_timer)
            for _ in range(WAITERS):  # empty the bucket
                await flat.acquire()
            per_hand_off = await _contend(TRIO, flat.acquire, lambda: flat.waiting)
            nursery.cancel_scope.cancel()
        return per_hand_off

    return TRIO.run(body, frozen=True)


def uncontended_flat_trio() -> float:
    """The flat limiter on trio, one task acquiring, a permit always free."""

    async def body() -> float:
        flat = FlatTrioLimiter(UNLIMITED, 10**6)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(flat.run_timer)
            per_acquire = await _per_acquire(flat.acquire)
            nursery.cancel_scope.cancel()
        return per_acquire

    return TRIO.run(body)


def contended_asyncio_floor() -> float:
    """Each waiter awaits a fresh future; the releaser resolves them all."""

    async def body() -> float:
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[None]] = []
        progress = [WAITERS, 0]
        elapsed: list[float] = []

        async def waiter() -> None:
            create = loop.create_future
            for _ in range(ROUNDS):
                future: asyncio.Future[None] = create()
                futures.append(future)
                await future
                progress[1] += 1
            progress[0] -= 1

        def release() -> None:
            for future in futures:
                future.set_result(None)
            futures.clear()

        async def releaser() -> None:
            elapsed.append(await _release_rounds(ASYNCIO, release, futures.__len__, progress))

        await ASYNCIO.run_all([waiter] * WAITERS + [releaser])
        return elapsed[0] / (WAITERS * ROUNDS)

    return ASYNCIO.run(body)


def contended_trio_floor() -> float:
    """Each waiter parks (``wait_task_rescheduled``); the releaser reschedules all."""

    async def body() -> float:
        tasks: list[trio.lowlevel.Task] = []
        progress = [WAITERS, 0]
        elapsed: list[float] = []

        def abort(_: Any) -> trio.lowlevel.Abort:
            return trio.lowlevel.Abort.SUCCEEDED

        async def waiter() -> None:
            current = trio.lowlevel.current_task
            park = trio.lowlevel.wait_task_rescheduled
            for _ in range(ROUNDS):
                tasks.append(current())
                await park(abort)
                progress[1] += 1
            progress[0] -= 1

        def release() -> None:
            reschedule = trio.lowlevel.reschedule
            for task in tasks:
                reschedule(task)
            tasks.clear()

        async def releaser() -> None:
            elapsed.append(await _release_rounds(TRIO, release, tasks.__len__, progress))

        await TRIO.run_all([waiter] * WAITERS + [releaser])
        return elapsed[0] / (WAITERS * ROUNDS)

    return TRIO.run(body)


def contended_event(framework: Framework, make: Callable[[], Any]) -> float:
    """Each waiter waits on a fresh event of ``make``; the releaser sets them all."""

    async def body() -> float:
        events: list[Any] = []
        progress = [WAITERS, 0]
        elapsed: list[float] = []

        async def waiter() -> None:
            for _ in range(ROUNDS):
                event = make()
                events.append(event)
                await event.wait()
                progress[1] += 1
            progress[0] -= 1

        def release() -> None:
            for event in events:
                event.set()
            events.clear()

        async def releaser() -> None:
            elapsed.append(await _release_rounds(framework, release, events.__len__, progress))

        await framework.run_all([waiter] * WAITERS + [releaser])
        return elapsed[0] / (WAITERS * ROUNDS)

    return framework.run(body)


def main() -> None:
    print(f"Hand-off cost, rate={UNLIMITED:,}/s (never binds); ns per acquire, best of {REPEAT}")
    print()
    print(
        f"*uncontended*: {UNCONTENDED:,} acquires in a loop by one task, each "
        f"granted at once; *contended*: {WAITERS} tasks parked in acquire(), one "
        f"tick releases a permit to each, {ROUNDS} rounds (frozen clock)."
    )
    print()
    floors = {
        ("asyncio", "uncontended"): best(uncontended_asyncio_floor),
        ("trio", "uncontended"): best(lambda: uncontended_checkpoint(TRIO)),
        ("asyncio", "contended"): best(contended_asyncio_floor),
        ("trio", "contended"): best(contended_trio_floor),
    }

    def row(name: str, path: str, on: str, cost: float) -> None:
        floor = floors[on, path]
        print(
            f"| {name} | {path} | {cost * 1e9:,.0f} | {floor * 1e9:,.0f} ({on}) "
            f"| {cost / floor:.2f} |"
        )

    print("| limiter | path | ns/acquire | floor ns | x floor |")
    print("| --- | --- | ---: | ---: | ---: |")
    for path, measure in (("uncontended", uncontended_limiter), ("contended", contended_limiter)):
        for adapter in ADAPTERS:
            row(adapter.name, path, adapter.floor, best(functools.partial(measure, adapter)))
    # The peers' acquire, granted at once, against the same floor: what the
    # simplest limiters in the field cost on this path.
    missing: list[str] = []
    for peer in PEERS[1:]:
        if peer.make is None:
            continue
        if not installed(peer):
            missing.append(peer.name)
            continue
        cost = best(functools.partial(uncontended_peer, peer.make))
        row(f"peer: {version(peer)}", "uncontended", "asyncio", cost)
    # The flat limiter: only the steps this library's promises need; what a
    # rewrite could reach on these paths.
    flat_runs: tuple[tuple[str, str, Callable[[], float]], ...] = (
        ("asyncio", "uncontended", functools.partial(uncontended_peer, make_flat)),
        ("asyncio", "contended", contended_flat),
        ("trio", "uncontended", uncontended_flat_trio),
        ("trio", "contended", contended_flat_trio),
    )
    for on, path, run_flat in flat_runs:
        row(f"reference: flat limiter on {on}", path, on, best(run_flat))
    print()
    print("| floor and reference primitives | path | ns/op |")
    print("| --- | --- | ---: |")
    rows: list[tuple[str, str, float]] = [
        (
            "asyncio: create, resolve, await a Future (floor)",
            "uncontended",
            floors["asyncio", "uncontended"],
        ),
        ("trio: trio.lowlevel.checkpoint() (floor)", "uncontended", floors["trio", "uncontended"]),
        (
            "asyncio: await asyncio.sleep(0) (one loop pass)",
            "uncontended",
            best(lambda: uncontended_checkpoint(ASYNCIO)),
        ),
        (
            "anyio on asyncio: anyio.lowlevel.checkpoint()",
            "uncontended",
            best(lambda: uncontended_checkpoint(ADAPTERS[2].framework)),
        ),
        (
            "anyio on trio: anyio.lowlevel.checkpoint()",
            "uncontended",
            best(lambda: uncontended_checkpoint(ADAPTERS[3].framework)),
        ),
        ("asyncio: a Future per waiter (floor)", "contended", floors["asyncio", "contended"]),
        (
            "trio: wait_task_rescheduled / reschedule (floor)",
            "contended",
            floors["trio", "contended"],
        ),
        (
            "asyncio: an asyncio.Event per waiter",
            "contended",
            best(lambda: contended_event(ASYNCIO, asyncio.Event)),
        ),
        (
            "trio: a trio.Event per waiter",
            "contended",
            best(lambda: contended_event(TRIO, trio.Event)),
        ),
        (
            "anyio on asyncio: an anyio.Event per waiter",
            "contended",
            best(lambda: contended_event(ADAPTERS[2].framework, anyio.Event)),
        ),
        (
            "anyio on trio: an anyio.Event per waiter",
            "contended",
            best(lambda: contended_event(ADAPTERS[3].framework, anyio.Event)),
        ),
    ]
    for name, path, cost in rows:
        print(f"| {name} | {path} | {cost * 1e9:,.0f} |")
    print()
    skipped(missing)


if __name__ == "__main__":
    check_options(__doc__, "--quick")
    started = header()
    main()
    footer(started)
