"""The adapters in real time, beside each framework's bare floor and the peers, in one run.

    python bench/adapters.py [--quick] [--handoff] [--pacing] [--peers] [--virtual]

Three parts, each printed as a Markdown table:

1. **Hand-off cost** at a rate that never binds (``rate=10**9``), in ns per
   acquire (wall clock, best of three), beside the bare floor of the
   framework the adapter runs on:

   - *uncontended*: one task calls ``acquire()`` in a loop and a permit is
     always free, so every acquire returns at once. Floor, asyncio: create an
     ``asyncio.Future``, resolve it, await it (no trip through the loop).
     Floor, trio: ``trio.lowlevel.checkpoint()``, which trio requires of any
     operation that may block, an immediate acquire included.
   - *contended*: ``WAITERS`` tasks are all parked in ``acquire()`` and one
     tick releases one permit to each; they wake, count, and park again.
     Time is frozen (a loop whose ``time()`` stands still, trio's
     ``MockClock(rate=0)``) and a releaser task moves it on by 1 ms per
     round, so every permit is released by the limiter's own timer and no
     real sleeping is timed. Floor, asyncio: each waiter awaits a fresh
     future and the releaser resolves them all; floor, trio: each waiter
     parks with ``trio.lowlevel.wait_task_rescheduled`` and the releaser
     ``reschedule()`` s them all (what ``trio.Event`` is built on). Both
     floors run the same releaser loop.
   - the peers' acquire (part 3), granted at once under asyncio, against the
     same floor: what the simplest limiters in the field cost on that path.

2. **Pacing** at 100, 1,000 and 10,000 permits/s for ``PACE_SECONDS`` each,
   with ``CALLERS`` tasks that call ``acquire()`` again as soon as they
   resume (so someone always waits). The first grant starts the machine
   with a full bucket at ``t0``; grant ``k`` (in the order callers resumed)
   is due at ``t0 + ceil((k - burst) / rate)`` for ``k > burst`` and at
   ``t0`` before. *Late* is the framework clock when the caller resumed
   minus that due time, so a schedule that slips shows as growing lateness.
   *Delay* is the same against the limiter's own schedule, which a late
   grant moves (GCRA: what the bucket cannot bank is lost), rebuilt from
   the grant times: it is how late each wake-up was. *Achieved* is the
   steady rate: the grants resumed after the first 10% of the run,
   ``(n - 1) / (last - first)``. *Lost* is the ideal number of grants before
   the end minus the number made. Two rows without a limiter give the floor
   for lateness: one task sleeping until each due time of the 100/s
   schedule with the framework's own timer (``loop.call_at``,
   ``trio.sleep_until``).

3. **Peers** (only if installed: ``aiolimiter``, ``asynciolimiter``,
   ``pyrate-limiter``, ``aiometer``) and the asyncio adapter doing one job:
   ``CALLERS`` tasks acquiring continuously at 1,000 and 10,000 permits/s
   for ``PEER_SECONDS``, every limiter configured for the same sustained
   rate and a burst of ``PEER_BURST``: achieved rate as above and CPU time
   (``time.process_time()``) per permit. FIFO: ``FIFO_ARRIVALS`` tasks start
   waiting one after another, faster than the limiter serves them; each
   takes a ticket as it calls acquire, and a grant is *overtaken* if its
   caller resumed after one with a later ticket.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import importlib
import importlib.metadata
import itertools
import math
import os
import platform
import selectors
import shutil
import statistics
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import trio
import trio.testing
from _callgrind import instructions as instructions_of

import permits.adapters.anyio
import permits.adapters.asyncio
import permits.adapters.trio
from permits.adapters import BaseLimiter
from permits.core import Fifo, Policy

T = TypeVar("T")

QUICK = "--quick" in sys.argv
UNCONTENDED = 20_000 if QUICK else 100_000  # acquires per timed loop
WAITERS = 100  # tasks parked at once in the contended hand-off
ROUNDS = 50 if QUICK else 200  # releases of WAITERS permits per timed loop
REPEAT = 3  # hand-off figures are the best of this many runs
UNLIMITED = 10**9  # permits per second: one a nanosecond, never binds
PACE_RATES = (100, 1_000, 10_000)
PACE_SECONDS = 1.0 if QUICK else 5.0
CALLERS = 4  # tasks acquiring continuously in the pacing and peer runs
PEER_RATES = (1_000, 10_000)
PEER_SECONDS = 1.0 if QUICK else 3.0
PEER_BURST = 10  # the smallest burst every peer can express at 10,000/s
FIFO_RATE = 1_000
FIFO_ARRIVALS = 300
WARMUP = 0.1  # fraction of a run left out of the achieved rate
STEP = 0.001  # seconds the frozen clock moves per contended round

Opener = Callable[[Policy, int, int], AbstractAsyncContextManager[BaseLimiter]]


# -- frameworks ---------------------------------------------------------------


class _FrozenLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose clock stands still until :meth:`advance`."""

    def __init__(self) -> None:
        super().__init__()
        self._frozen = 1000.0

    def time(self) -> float:
        return self._frozen

    def advance(self, seconds: float) -> None:
        self._frozen += seconds


def _advance_asyncio(seconds: float) -> None:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, _FrozenLoop), "advance() needs a frozen loop"
    loop.advance(seconds)


def _advance_trio(seconds: float) -> None:
    clock = trio.lowlevel.current_clock()
    assert isinstance(clock, trio.testing.MockClock), "advance() needs a MockClock"
    clock.jump(seconds)


class Framework:
    """What a benchmark body needs of the framework it runs under."""

    name = ""

    def run(self, body: Callable[[], Awaitable[T]], *, frozen: bool = False) -> T:
        raise NotImplementedError

    def now(self) -> float:
        raise NotImplementedError

    async def checkpoint(self) -> None:
        raise NotImplementedError

    def advance(self, seconds: float) -> None:
        raise NotImplementedError

    async def sleep_until(self, deadline: float) -> None:
        raise NotImplementedError

    async def run_all(self, tasks: Sequence[Callable[[], Coroutine[Any, Any, None]]]) -> None:
        raise NotImplementedError


class Asyncio(Framework):
    name = "asyncio"

    def run(self, body: Callable[[], Awaitable[T]], *, frozen: bool = False) -> T:
        async def main() -> T:
            return await body()

        if not frozen:
            return asyncio.run(main())
        loop = _FrozenLoop()
        try:
            return loop.run_until_complete(main())
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def checkpoint(self) -> None:
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        _advance_asyncio(seconds)

    async def sleep_until(self, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        loop.call_at(deadline, future.set_result, None)
        await future

    async def run_all(self, tasks: Sequence[Callable[[], Coroutine[Any, Any, None]]]) -> None:
        await asyncio.gather(*(task() for task in tasks))


class Trio(Framework):
    name = "trio"

    def run(self, body: Callable[[], Awaitable[T]], *, frozen: bool = False) -> T:
        async def main() -> T:
            return await body()

        clock = trio.testing.MockClock(rate=0) if frozen else None
        return trio.run(main, clock=clock)

    def now(self) -> float:
        return trio.current_time()

    async def checkpoint(self) -> None:
        await trio.lowlevel.checkpoint()

    def advance(self, seconds: float) -> None:
        _advance_trio(seconds)

    async def sleep_until(self, deadline: float) -> None:
        await trio.sleep_until(deadline)

    async def run_all(self, tasks: Sequence[Callable[[], Coroutine[Any, Any, None]]]) -> None:
        async with trio.open_nursery() as nursery:
            for task in tasks:
                nursery.start_soon(task)


class Anyio(Framework):
    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.name = f"anyio on {backend}"

    def run(self, body: Callable[[], Awaitable[T]], *, frozen: bool = False) -> T:
        async def main() -> T:
            return await body()

        options: dict[str, Any] = {}
        if frozen:
            if self.backend == "asyncio":
                options["loop_factory"] = _FrozenLoop
            else:
                options["clock"] = trio.testing.MockClock(rate=0)
        return anyio.run(main, backend=self.backend, backend_options=options)

    def now(self) -> float:
        return anyio.current_time()

    async def checkpoint(self) -> None:
        await anyio.lowlevel.checkpoint()

    def advance(self, seconds: float) -> None:
        if self.backend == "asyncio":
            _advance_asyncio(seconds)
        else:
            _advance_trio(seconds)

    async def run_all(self, tasks: Sequence[Callable[[], Coroutine[Any, Any, None]]]) -> None:
        async with anyio.create_task_group() as group:
            for task in tasks:
                group.start_soon(task)


ASYNCIO = Asyncio()
TRIO = Trio()


def _open_asyncio(
    policy: Policy, rate: int, burst: int
) -> AbstractAsyncContextManager[BaseLimiter]:
    return permits.adapters.asyncio.Limiter(policy, rate, burst)


def _open_trio(policy: Policy, rate: int, burst: int) -> AbstractAsyncContextManager[BaseLimiter]:
    return permits.adapters.trio.open_limiter(policy, rate, burst)


def _open_anyio(policy: Policy, rate: int, burst: int) -> AbstractAsyncContextManager[BaseLimiter]:
    return permits.adapters.anyio.open_limiter(policy, rate, burst)


@dataclass(frozen=True)
class Adapter:
    name: str
    framework: Framework
    open: Opener
    #: The framework whose floor the adapter is compared with.
    floor: str


ADAPTERS = (
    Adapter("asyncio", ASYNCIO, _open_asyncio, "asyncio"),
    Adapter("trio", TRIO, _open_trio, "trio"),
    Adapter("anyio on asyncio", Anyio("asyncio"), _open_anyio, "asyncio"),
    Adapter("anyio on trio", Anyio("trio"), _open_anyio, "trio"),
)


def _ns(seconds: float) -> int:
    """A framework time in the adapters' unit (they convert the same way)."""
    return int(seconds * 1e9)


def _best(run: Callable[[], float]) -> float:
    return min(run() for _ in range(REPEAT))


def _granted(limiter: BaseLimiter) -> int:
    return sum(level.granted for level in limiter.statistics().levels)


# -- 1. hand-off --------------------------------------------------------------


def uncontended_limiter(adapter: Adapter) -> float:
    """Seconds per acquire when a permit is always free."""

    async def body() -> float:
        async with adapter.open(Fifo(1), UNLIMITED, 10**6) as limiter:
            acquire = limiter.acquire
            for _ in range(1000):
                await acquire()
            gc.collect()
            start = time.perf_counter()
            for _ in range(UNCONTENDED):
                await acquire()
            elapsed = time.perf_counter() - start
            assert _granted(limiter) == UNCONTENDED + 1000
        return elapsed / UNCONTENDED

    return adapter.framework.run(body)


def uncontended_peer(make: Callable[[int, int], tuple[Acquire, Close]]) -> float:
    """Seconds per acquire of a peer (asyncio) when a permit is always free."""

    async def body() -> float:
        acquire, close = make(UNLIMITED, 10**6)
        for _ in range(1000):
            await acquire()
        gc.collect()
        start = time.perf_counter()
        for _ in range(UNCONTENDED):
            await acquire()
        elapsed = time.perf_counter() - start
        await _close(close)
        return elapsed / UNCONTENDED

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
            assert _granted(limiter) == WAITERS * (ROUNDS + 1)
        return per_hand_off

    return framework.run(body, frozen=True)


def contended_flat() -> float:
    """The flat limiter of part 4 in the contended hand-off, as the adapters are run."""

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
            for _ in range(1000):
                await flat.acquire()
            gc.collect()
            start = time.perf_counter()
            for _ in range(UNCONTENDED):
                await flat.acquire()
            elapsed = time.perf_counter() - start
            nursery.cancel_scope.cancel()
        return elapsed / UNCONTENDED

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


def handoff() -> None:
    print(
        f"### 1. Hand-off cost, rate={UNLIMITED:,}/s (never binds); "
        f"ns per acquire, best of {REPEAT}"
    )
    print()
    print(
        f"*uncontended*: {UNCONTENDED:,} acquires in a loop by one task, each "
        f"granted at once; *contended*: {WAITERS} tasks parked in acquire(), one "
        f"tick releases a permit to each, {ROUNDS} rounds (frozen clock)."
    )
    print()
    floors = {
        ("asyncio", "uncontended"): _best(uncontended_asyncio_floor),
        ("trio", "uncontended"): _best(lambda: uncontended_checkpoint(TRIO)),
        ("asyncio", "contended"): _best(contended_asyncio_floor),
        ("trio", "contended"): _best(contended_trio_floor),
    }
    print("| adapter | path | ns/acquire | floor ns | x floor | within 2x |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for path, measure in (("uncontended", uncontended_limiter), ("contended", contended_limiter)):
        for adapter in ADAPTERS:
            cost = _best(functools.partial(measure, adapter))
            floor = floors[adapter.floor, path]
            ratio = cost / floor
            print(
                f"| {adapter.name} | {path} | {cost * 1e9:,.0f} | {floor * 1e9:,.0f} "
                f"({adapter.floor}) | {ratio:.2f} | {'yes' if ratio <= 2 else 'no'} |"
            )
    # The peers' acquire, granted at once, against the same floor: what the
    # simplest limiters in the field cost on this path.
    floor = floors["asyncio", "uncontended"]
    for peer in PEERS[1:]:
        if peer.make is None:
            continue
        try:
            importlib.import_module(peer.module)
        except ImportError:
            continue
        cost = _best(functools.partial(uncontended_peer, peer.make))
        ratio = cost / floor
        print(
            f"| peer: {peer.name} {importlib.metadata.version(peer.dist)} | uncontended "
            f"| {cost * 1e9:,.0f} | {floor * 1e9:,.0f} (asyncio) | {ratio:.2f} "
            f"| {'yes' if ratio <= 2 else 'no'} |"
        )
    # The flat limiter of part 4: only the steps this library's promises
    # need, on asyncio; what a rewrite could reach on these paths.
    flat_runs: tuple[tuple[str, str, Callable[[], float]], ...] = (
        ("asyncio", "uncontended", functools.partial(uncontended_peer, _make_flat)),
        ("asyncio", "contended", contended_flat),
        ("trio", "uncontended", uncontended_flat_trio),
        ("trio", "contended", contended_flat_trio),
    )
    for on, path, run_flat in flat_runs:
        cost = _best(run_flat)
        floor = floors[on, path]
        ratio = cost / floor
        print(
            f"| reference: flat limiter (part 4) on {on} | {path} | {cost * 1e9:,.0f} "
            f"| {floor * 1e9:,.0f} ({on}) | {ratio:.2f} | {'yes' if ratio <= 2 else 'no'} |"
        )
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
            _best(lambda: uncontended_checkpoint(ASYNCIO)),
        ),
        (
            "anyio on asyncio: anyio.lowlevel.checkpoint()",
            "uncontended",
            _best(lambda: uncontended_checkpoint(ADAPTERS[2].framework)),
        ),
        (
            "anyio on trio: anyio.lowlevel.checkpoint()",
            "uncontended",
            _best(lambda: uncontended_checkpoint(ADAPTERS[3].framework)),
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
            _best(lambda: contended_event(ASYNCIO, asyncio.Event)),
        ),
        (
            "trio: a trio.Event per waiter",
            "contended",
            _best(lambda: contended_event(TRIO, trio.Event)),
        ),
        (
            "anyio on asyncio: an anyio.Event per waiter",
            "contended",
            _best(lambda: contended_event(ADAPTERS[2].framework, anyio.Event)),
        ),
        (
            "anyio on trio: an anyio.Event per waiter",
            "contended",
            _best(lambda: contended_event(ADAPTERS[3].framework, anyio.Event)),
        ),
    ]
    for name, path, cost in rows:
        print(f"| {name} | {path} | {cost * 1e9:,.0f} |")
    print()


# -- 2. pacing ----------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """What one continuous-acquire run recorded (times in ns)."""

    start: int  # t0: the machine's first operation, or the first acquire call
    end: int
    grants: list[tuple[int, int]]  # (resumed, asked) of each grant before the end
    cpu: float  # process time, seconds
    permits: int  # every permit granted, the ones after the end included


def _percentile(values: Sequence[int], q: float) -> int:
    """Nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _achieved(run: Run) -> float:
    """Permits per second after the warm-up: (n - 1) / (last - first)."""
    after = run.start + WARMUP * (run.end - run.start)
    times = sorted(resumed for resumed, _ in run.grants if resumed >= after)
    if len(times) < 2 or times[-1] == times[0]:
        return 0.0
    return (len(times) - 1) * 1e9 / (times[-1] - times[0])


def _lateness(run: Run, rate: int, burst: int) -> tuple[list[int], list[int]]:
    """Per grant, in the order callers resumed: lateness against the ideal
    schedule from t0, and delay against the limiter's own schedule.

    The own schedule follows SPEC.md's pacing (``TAT = max(TAT, at - 1ns) +
    interval``, a permit due at ``ceil(TAT - (burst - 1) * interval)``), so
    a late grant moves the later due times as it does in the machine; the
    time of each grant is taken as the time its caller resumed (a little
    after the limiter decided it), and a grant is not due before its caller
    asked."""
    interval = Fraction(10**9, rate)
    lateness: list[int] = []
    delay: list[int] = []
    tat = Fraction(run.start)
    for k, (resumed, asked) in enumerate(sorted(run.grants), start=1):
        lateness.append(resumed - (run.start + math.ceil(max(0, k - burst) * interval)))
        due = max(math.ceil(tat - (burst - 1) * interval), asked)
        delay.append(resumed - due)
        tat = max(tat, Fraction(resumed - 1)) + interval
    return lateness, delay


def pacing_run(adapter: Adapter, rate: int, burst: int, seconds: float) -> Run:
    framework = adapter.framework

    async def body() -> Run:
        async with adapter.open(Fifo(1), rate, burst) as limiter:
            cpu = time.process_time()
            asked = _ns(framework.now())
            await limiter.acquire()
            grants = [(_ns(framework.now()), asked)]
            start = limiter.machine.now
            assert start is not None
            end = start + round(seconds * 1e9)

            async def caller() -> None:
                acquire = limiter.acquire
                now = framework.now
                while True:
                    asked = _ns(now())
                    await acquire()
                    resumed = _ns(now())
                    if resumed >= end:
                        return
                    grants.append((resumed, asked))

            await framework.run_all([caller] * CALLERS)
            cpu = time.process_time() - cpu
            permits = _granted(limiter)
        return Run(start, end, grants, cpu, permits)

    return framework.run(body)


def timer_run(framework: Framework, rate: int, seconds: float) -> Run:
    """No limiter: one task sleeps until each due time of the ideal schedule
    (burst 1) in turn, with the framework's own timer."""

    async def body() -> Run:
        now = framework.now
        cpu = time.process_time()
        start = _ns(now())
        end = start + round(seconds * 1e9)
        grants = [(start, start)]
        for k in itertools.count(1):
            due = start + -(-k * 10**9 // rate)
            if due >= end:
                break
            await framework.sleep_until(due / 1e9)
            grants.append((_ns(now()), due))
        return Run(start, end, grants, time.process_time() - cpu, len(grants))

    return framework.run(body)


PACE_CONFIGS = (
    (ADAPTERS[0], 1),
    (ADAPTERS[1], 1),
    (ADAPTERS[2], 1),
    (ADAPTERS[3], 1),
    (ADAPTERS[0], 10),
    (ADAPTERS[1], 10),
    (ADAPTERS[0], 50),
)


def pacing() -> None:
    print(
        f"### 2. Pacing: {CALLERS} callers always waiting, {PACE_SECONDS:g} s per rate, times in µs"
    )
    print()
    print(
        "*late* = resumed - (t0 + (k - burst) / rate), the ideal schedule; *delay* = "
        "resumed - due on the limiter's own schedule, which a late grant moves "
        "(reconstructed from the grant times); *lost* = ideal grants before the end "
        "- grants made."
    )
    print()
    print(
        "| adapter | burst | rate/s | grants (ideal) | lost | achieved/s | error "
        "| late p50 | late p99 | delay p50 | delay p99 | delay max | CPU µs/permit |"
    )
    print(
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |"
    )
    for adapter, burst in PACE_CONFIGS:
        for rate in PACE_RATES:
            gc.collect()
            run = pacing_run(adapter, rate, burst, PACE_SECONDS)
            lateness, delay = _lateness(run, rate, burst)
            # due times before the end: k - burst < (end - t0) / interval
            ideal = burst + math.ceil(Fraction((run.end - run.start) * rate, 10**9)) - 1
            achieved = _achieved(run)
            print(
                f"| {adapter.name} | {burst} | {rate:,} | {len(run.grants):,} ({ideal:,}) "
                f"| {ideal - len(run.grants):,} | {achieved:,.1f} "
                f"| {(achieved / rate - 1) * 100:+.2f}% "
                f"| {_percentile(lateness, 0.5) / 1e3:,.0f} "
                f"| {_percentile(lateness, 0.99) / 1e3:,.0f} "
                f"| {_percentile(delay, 0.5) / 1e3:,.0f} "
                f"| {_percentile(delay, 0.99) / 1e3:,.0f} | {max(delay) / 1e3:,.0f} "
                f"| {run.cpu / run.permits * 1e6:.1f} |"
            )
    rate = PACE_RATES[0]
    for framework, timer in ((ASYNCIO, "loop.call_at"), (TRIO, "trio.sleep_until")):
        gc.collect()
        run = timer_run(framework, rate, PACE_SECONDS)
        lateness, _ = _lateness(run, rate, 1)
        achieved = _achieved(run)
        print(
            f"| no limiter: bare {framework.name} timer ({timer}) on the ideal schedule "
            f"| 1 | {rate:,} | {len(run.grants):,} | | {achieved:,.1f} "
            f"| {(achieved / rate - 1) * 100:+.2f}% "
            f"| {_percentile(lateness, 0.5) / 1e3:,.0f} "
            f"| {_percentile(lateness, 0.99) / 1e3:,.0f} | | | "
            f"| {run.cpu / run.permits * 1e6:.1f} |"
        )
    print()


# -- 3. peers -----------------------------------------------------------------

Acquire = Callable[[], Awaitable[Any]]
Close = Callable[[], Any]


@dataclass(frozen=True)
class Peer:
    name: str
    module: str  # the import that must succeed
    dist: str  # the distribution, for its version
    config: str  # how it is configured, {burst} filled in
    #: make(rate, burst) -> (acquire, close); None for aiometer, which has no acquire.
    make: Callable[[int, int], tuple[Acquire, Close]] | None


def _make_permits(rate: int, burst: int) -> tuple[Acquire, Close]:
    limiter = permits.adapters.asyncio.Limiter(Fifo(1), rate, burst)
    return limiter.acquire, limiter.aclose


def _make_aiolimiter(rate: int, burst: int) -> tuple[Acquire, Close]:
    module = importlib.import_module("aiolimiter")
    limiter = module.AsyncLimiter(burst, burst / rate)
    return limiter.acquire, lambda: None


def _make_asynciolimiter(rate: int, burst: int) -> tuple[Acquire, Close]:
    module = importlib.import_module("asynciolimiter")
    limiter = module.Limiter(rate, max_burst=burst)
    return limiter.wait, limiter.close


def _make_pyrate(rate: int, burst: int) -> tuple[Acquire, Close]:
    module = importlib.import_module("pyrate_limiter")
    window_ms = Fraction(burst * 1000, rate)
    assert window_ms.denominator == 1, "pyrate-limiter's windows are whole milliseconds"
    limiter = module.Limiter(module.Rate(burst, int(window_ms)), buffer_ms=0)

    async def acquire() -> None:
        if not await limiter.try_acquire_async("bench"):
            raise RuntimeError("pyrate-limiter refused a permit")

    return acquire, limiter.close


PEERS = (
    Peer(
        "permits (asyncio adapter)",
        module="permits",
        dist="permits",
        config="Limiter(Fifo(1), rate, burst={burst})",
        make=_make_permits,
    ),
    Peer(
        "aiolimiter",
        module="aiolimiter",
        dist="aiolimiter",
        config="AsyncLimiter({burst}, {burst} / rate)",
        make=_make_aiolimiter,
    ),
    Peer(
        "asynciolimiter",
        module="asynciolimiter",
        dist="asynciolimiter",
        config="Limiter(rate, max_burst={burst})",
        make=_make_asynciolimiter,
    ),
    Peer(
        "pyrate-limiter",
        module="pyrate_limiter",
        dist="pyrate-limiter",
        config="Limiter(Rate({burst}, {burst}000 / rate ms), buffer_ms=0) (in-memory bucket)",
        make=_make_pyrate,
    ),
    Peer(
        "aiometer",
        module="aiometer",
        dist="aiometer",
        config="run_on_each(job, jobs, max_per_second=rate) (burst 1, fixed)",
        make=None,
    ),
)


async def _close(close: Close) -> None:
    result = close()
    if isinstance(result, Awaitable):
        await result


def peer_run(make: Callable[[int, int], tuple[Acquire, Close]], rate: int, seconds: float) -> Run:
    async def body() -> Run:
        acquire, close = make(rate, PEER_BURST)
        loop = asyncio.get_running_loop()
        grants: list[tuple[int, int]] = []
        permits = [0]
        start = _ns(loop.time())
        end = start + round(seconds * 1e9)
        cpu = time.process_time()

        async def caller() -> None:
            while True:
                asked = _ns(loop.time())
                await acquire()
                permits[0] += 1
                resumed = _ns(loop.time())
                if resumed >= end:
                    return
                grants.append((resumed, asked))

        await asyncio.gather(*(caller() for _ in range(CALLERS)))
        cpu = time.process_time() - cpu
        await _close(close)
        return Run(start, end, grants, cpu, permits[0])

    return asyncio.run(body())


def aiometer_run(rate: int, seconds: float) -> Run:
    """aiometer has no acquire(): it starts a list of jobs, max_per_second at most."""
    aiometer = importlib.import_module("aiometer")

    async def body() -> Run:
        loop = asyncio.get_running_loop()
        grants: list[tuple[int, int]] = []
        permits = [0]
        start = _ns(loop.time())
        end = start + round(seconds * 1e9)

        async def job(_: int) -> None:
            permits[0] += 1
            resumed = _ns(loop.time())
            if resumed < end:
                grants.append((resumed, start))

        cpu = time.process_time()
        with anyio.move_on_after(seconds + 0.05):
            jobs = range(int(rate * seconds * 2) + 100)
            await aiometer.run_on_each(job, jobs, max_per_second=rate)
        cpu = time.process_time() - cpu
        return Run(start, end, grants, cpu, permits[0])

    return asyncio.run(body())


def fifo_run(make: Callable[[int, int], tuple[Acquire, Close]]) -> tuple[int, int]:
    """FIFO_ARRIVALS tasks start waiting one after another, faster than the
    rate serves them, each acquiring once: (grants overtaken, grants).

    A task takes its ticket as it calls acquire (each starts, and waits or is
    granted, before the next is created); a grant is overtaken if its caller
    resumed after a caller with a later ticket."""

    async def body() -> tuple[int, int]:
        acquire, close = make(FIFO_RATE, PEER_BURST)
        served: list[int] = []

        async def one(ticket: int) -> None:
            await acquire()
            served.append(ticket)

        tasks = []
        for ticket in range(FIFO_ARRIVALS):
            tasks.append(asyncio.create_task(one(ticket)))
            # about 3 arrivals per millisecond against FIFO_RATE permits per second
            await asyncio.sleep(0.001 if ticket % 3 == 2 else 0)
        await asyncio.gather(*tasks)
        await _close(close)
        highest = -1
        overtaken = 0
        for ticket in served:
            if ticket < highest:
                overtaken += 1
            highest = max(highest, ticket)
        return overtaken, len(served)

    return asyncio.run(body())


def peers() -> None:
    print(
        f"### 3. Peers under asyncio: {CALLERS} callers acquiring continuously, "
        f"{PEER_SECONDS:g} s per rate, burst {PEER_BURST}"
    )
    print()
    print(
        f"*FIFO*: {FIFO_ARRIVALS} tasks start waiting one after another, about 3 per ms, "
        f"at {FIFO_RATE:,}/s; each acquires once; *overtaken* = grants whose caller "
        "resumed after one that started waiting later."
    )
    print()
    print("| limiter | configured as | rate/s | achieved/s | error | CPU µs/permit | FIFO |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    missing: list[str] = []
    for peer in PEERS:
        config = peer.config.format(burst=PEER_BURST)
        try:
            importlib.import_module(peer.module)
        except ImportError:
            missing.append(peer.name)
            print(f"| {peer.name} | not installed | | | | | |")
            continue
        name = f"{peer.name} {importlib.metadata.version(peer.dist)}"
        if peer.make is None:
            fifo = "n/a: no acquire(); one loop starts the jobs in list order"
        else:
            overtaken, total = fifo_run(peer.make)
            fifo = "held" if not overtaken else f"broken: {overtaken} of {total} overtaken"
        for rate in PEER_RATES:
            gc.collect()
            try:
                if peer.make is None:
                    run = aiometer_run(rate, PEER_SECONDS)
                else:
                    run = peer_run(peer.make, rate, PEER_SECONDS)
            except Exception as error:
                print(f"| {name} | {config} | {rate:,} | failed: {error!r} | | | |")
                continue
            achieved = _achieved(run)
            print(
                f"| {name} | {config} | {rate:,} | {achieved:,.1f} "
                f"| {(achieved / rate - 1) * 100:+.2f}% "
                f"| {run.cpu / max(run.permits, 1) * 1e6:.1f} | {fifo} |"
            )
    print()
    if missing:
        print(
            "Not installed, skipped: "
            + ", ".join(missing)
            + " (pip install aiolimiter asynciolimiter pyrate-limiter aiometer)."
        )
        print()


def main() -> None:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"Python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {load} at start; "
        f"trio {trio.__version__}; {'--quick' if QUICK else 'full run'}"
    )
    print()
    took = []
    sections = (handoff, pacing, peers, virtual)
    only = [section for section in sections if f"--{section.__name__}" in sys.argv]
    for section in only or sections:
        start = time.perf_counter()
        section()
        took.append(f"{section.__name__} {time.perf_counter() - start:.0f} s")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"Load average {load} at the end; took {', '.join(took)}.")


def cpu_repeats(repeats: int, seconds: float = 1.5) -> None:
    """``--cpu-repeats N``: the peers' CPU time per permit only, N times over,
    the limiters taking turns, so that the noise of a shared machine (one run
    can cost twice another) falls on all of them alike; median, min, max."""
    makers = [(p.name, p.make) for p in PEERS if p.make is not None]
    available = []
    for name, make in makers:
        peer = next(p for p in PEERS if p.name == name)
        try:
            importlib.import_module(peer.module)
        except ImportError:
            continue
        available.append((name, make))
    runs: dict[tuple[str, int], list[float]] = {}
    for repeat in range(repeats):
        # Rotate who goes first: the first run after a pause tends to cost more.
        turn = repeat % len(available)
        for name, make in available[turn:] + available[:turn]:
            assert make is not None
            for rate in PEER_RATES:
                gc.collect()
                run = peer_run(make, rate, seconds)
                runs.setdefault((name, rate), []).append(run.cpu / max(run.permits, 1) * 1e6)
    print(f"CPU µs per permit, {CALLERS} callers, burst {PEER_BURST}, {seconds:g} s a run, ")
    print(f"{repeats} runs each, the limiters taking turns (who goes first rotates)")
    print()
    print("| limiter | rate/s | median | min | max |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for (name, rate), values in runs.items():
        print(
            f"| {name} | {rate:,} | {statistics.median(values):.1f} | "
            f"{min(values):.1f} | {max(values):.1f} |"
        )


# -- 4. CPU on a virtual clock ----------------------------------------------------


class _NeverSleeps(selectors.DefaultSelector):
    """A selector that never blocks: a wait of ``t`` seconds moves the virtual
    clock on by ``t`` (whole nanoseconds, at least one, so that time always
    moves, as a real clock does between two passes of the loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.ns = 0

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout is None:
            raise RuntimeError("nothing is scheduled: the job would never end")
        self.ns += max(1, math.ceil(timeout * 1e9))
        return super().select(0)


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An asyncio loop on a virtual clock: no sleeping, no timer lateness."""

    def __init__(self) -> None:
        self._never_sleeps = _NeverSleeps()
        super().__init__(self._never_sleeps)

    def time(self) -> float:
        return self._never_sleeps.ns / 1e9


class BarePacer:
    """The asyncio floor of part 4: what asyncio itself does per permit when
    every caller waits, and nothing else. A FIFO of futures and one
    ``loop.call_at`` per permit at a fixed float interval; no levels, no
    burst, no statistics, no cancellation handling. Not a limiter: it lets a
    newcomer through whenever nobody waits, at any rate."""

    def __init__(self, rate: int, burst: int) -> None:
        self.interval = 1 / rate
        self.futures: deque[asyncio.Future[None]] = deque()
        self.timer: asyncio.TimerHandle | None = None
        self.at = 0.0

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.futures.append(future)
        if self.timer is None:
            self.at = max(self.at + self.interval, loop.time())
            self.timer = loop.call_at(self.at, self.fire)
        await future

    def fire(self) -> None:
        self.futures.popleft().set_result(None)
        if self.futures:
            self.at += self.interval
            self.timer = asyncio.get_running_loop().call_at(self.at, self.fire)
        else:
            self.timer = None


class FlatLimiter:
    """An ideal flat priority limiter for asyncio: every step this library's
    promises need per permit, written as one class with nothing but them.

    Strict priority over one FIFO line per level, the core's exact integer
    pacing with a burst, a bounded wait histogram per level, the refund log
    (each grant kept until its caller proceeds), a spend as the caller
    resumes, a waiter cancelled while waiting withdrawn, and one timer at
    the due time. Left out, because this job never takes them: the refund of
    a permit decided for a caller cancelled before it resumed. No argument
    checks, no deadlines, no queue limits, no pluggable policy, no
    ``Decision``, no statistics snapshot, no close. It is not a limiter
    anyone should use; it bounds what a rewrite of ``permits`` (core and
    adapter together) in pure Python could cost per permit on this job.
    """

    def __init__(self, rate: int, burst: int, levels: int = 1) -> None:
        self.P, self.Q = 10**9, rate  # the interval, P / Q ns
        self.b1 = burst - 1
        self.lines: list[deque[list[Any]]] = [deque() for _ in range(levels)]
        self.depths = [0] * levels
        self.waiting = 0
        self.anchor: int | None = None
        self.k = 0
        self.due = 0
        self.counts: list[dict[int, int]] = [{} for _ in range(levels)]
        self.maxima = [-1] * levels
        self.log: deque[tuple[int, int, int, int]] = deque()
        self.refundable: dict[int, tuple[int, int, int, int]] = {}
        self.ids = itertools.count()
        self.timer: asyncio.TimerHandle | None = None

    def _grant(self, id: int, level: int, pushed_at: int, now: int) -> None:
        P, Q, k, anchor = self.P, self.Q, self.k, self.anchor
        assert anchor is not None
        entry = (id, now, anchor, k)
        if k * P < (now - 1 - anchor) * Q:
            anchor = self.anchor = now - 1
            k = 0
        k += 1
        self.k = k
        self.due = anchor - ((self.b1 - k) * P // Q)
        wait = now - pushed_at
        counts = self.counts[level]
        shift = wait.bit_length() - 8
        bucket = wait >> shift << shift if shift > 0 else wait
        counts[bucket] = counts.get(bucket, 0) + 1
        if wait > self.maxima[level]:
            self.maxima[level] = wait
        self.refundable[id] = entry
        self.log.append(entry)

    def _spend(self, id: int) -> None:
        self.refundable.pop(id, None)
        log, refundable = self.log, self.refundable
        while log and refundable.get(log[0][0]) is not log[0]:
            log.popleft()

    async def acquire(self, level: int = 0) -> None:
        loop = asyncio.get_running_loop()
        now = int(loop.time() * 1e9)
        if self.anchor is None:
            self.anchor = now
            self.due = now - (self.b1 * self.P // self.Q)
        id = next(self.ids)
        if not self.waiting and now >= self.due:
            self._grant(id, level, now, now)
            self._spend(id)
            return
        future = loop.create_future()
        waiter = [future, id, now]
        self.lines[level].append(waiter)
        self.depths[level] += 1
        self.waiting += 1
        if self.timer is None:
            self.timer = loop.call_at(self.due / 1e9, self.fire)
        try:
            await future
        except BaseException:
            if not future.done():  # still waiting: withdraw
                self.lines[level].remove(waiter)
                self.depths[level] -= 1
                self.waiting -= 1
            raise
        self._spend(id)

    def fire(self) -> None:
        self.timer = None
        loop = asyncio.get_running_loop()
        now = int(loop.time() * 1e9)
        depths = self.depths
        while self.waiting and now >= self.due:
            level = next(level for level, depth in enumerate(depths) if depth)
            future, id, pushed_at = self.lines[level].popleft()
            depths[level] -= 1
            self.waiting -= 1
            self._grant(id, level, pushed_at, now)
            future.set_result(None)
        if self.waiting:
            self.timer = loop.call_at(self.due / 1e9, self.fire)


class FlatTrioLimiter(FlatLimiter):
    """The flat limiter on trio: a waiter parks in ``wait_task_rescheduled``
    (withdrawn if cancelled there) and one timer task, run by
    :meth:`run_timer`, sleeps in a cancel scope until the due time. The
    steps of a grant and a spend are the asyncio one's."""

    def __init__(self, rate: int, burst: int, levels: int = 1) -> None:
        super().__init__(rate, burst, levels)
        self.wake_at = math.inf
        self.scope: trio.CancelScope | None = None

    async def acquire(self, level: int = 0) -> None:
        now = int(trio.current_time() * 1e9)
        if self.anchor is None:
            self.anchor = now
            self.due = now - (self.b1 * self.P // self.Q)
        id = next(self.ids)
        if not self.waiting and now >= self.due:
            self._grant(id, level, now, now)
            await trio.lowlevel.checkpoint()  # trio's rule for an acquire that returns at once
            self._spend(id)
            return
        waiter = [trio.lowlevel.current_task(), id, now]
        line = self.lines[level]
        line.append(waiter)
        self.depths[level] += 1
        self.waiting += 1
        if self.wake_at == math.inf:
            self.wake_at = self.due / 1e9
            if self.scope is not None:
                self.scope.deadline = self.wake_at

        def abort(_: Any) -> trio.lowlevel.Abort:
            line.remove(waiter)
            self.depths[level] -= 1
            self.waiting -= 1
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
        self._spend(id)

    async def run_timer(self) -> None:
        while True:
            with trio.CancelScope(deadline=self.wake_at) as scope:
                self.scope = scope
                await trio.sleep_forever()
            self.scope = None
            if trio.current_time() >= self.wake_at:
                self.fire_trio()

    def fire_trio(self) -> None:
        now = int(trio.current_time() * 1e9)
        depths = self.depths
        while self.waiting and now >= self.due:
            level = next(level for level, depth in enumerate(depths) if depth)
            task, id, pushed_at = self.lines[level].popleft()
            depths[level] -= 1
            self.waiting -= 1
            self._grant(id, level, pushed_at, now)
            trio.lowlevel.reschedule(task)
        self.wake_at = self.due / 1e9 if self.waiting else math.inf


def _make_bare_pacer(rate: int, burst: int) -> tuple[Acquire, Close]:
    return BarePacer(rate, burst).acquire, lambda: None


def _make_flat(rate: int, burst: int) -> tuple[Acquire, Close]:
    return FlatLimiter(rate, burst).acquire, lambda: None


#: Reference rows of part 4, run after the peers: (name, make).
VIRTUAL_REFERENCES: tuple[tuple[str, Callable[[int, int], tuple[Acquire, Close]]], ...] = (
    ("reference: flat limiter (the promises' steps, nothing else)", _make_flat),
    ("floor: bare pacer (a future and a timer per permit, no limiter)", _make_bare_pacer),
)


#: Peers that read the loop's clock (pyrate-limiter reads the system clock and
#: cannot run on a virtual one; aiometer has no acquire).
VIRTUAL_PEERS = ("permits (asyncio adapter)", "aiolimiter", "asynciolimiter")
VIRTUAL_PERMITS = 5_000 if QUICK else 20_000


def virtual_run(
    make: Callable[[int, int], tuple[Acquire, Close]], rate: int, permits: int
) -> tuple[float, int]:
    """``CALLERS`` tasks acquire until ``permits`` are granted, on a virtual
    clock: (process CPU seconds, permits granted)."""

    async def body() -> tuple[float, int]:
        acquire, close = make(rate, PEER_BURST)
        granted = [0]

        async def caller() -> None:
            while granted[0] < permits:
                await acquire()
                granted[0] += 1

        cpu = time.process_time()
        await asyncio.gather(*(caller() for _ in range(CALLERS)))
        cpu = time.process_time() - cpu
        await _close(close)
        return cpu, granted[0]

    loop = VirtualClockLoop()
    try:
        return loop.run_until_complete(body())
    finally:
        loop.close()


def _instructions(name: str, rate: int, permits: int) -> int:
    """Instructions (callgrind) of one process that runs ``virtual_run``."""
    return instructions_of(__file__, "--virtual-one", name, str(rate), str(permits))


def virtual() -> None:
    print(
        f"### 4. CPU per permit on a virtual clock: {CALLERS} callers acquiring "
        f"continuously, burst {PEER_BURST}"
    )
    print()
    print(
        "The peers' job of part 3 on an asyncio loop whose clock is virtual: it never "
        "sleeps, every timer fires exactly on time, and no system call waits, so what "
        "is left is the Python each limiter runs per permit, with asyncio's own. "
        f"*CPU*: process time per permit, best of {REPEAT} runs of "
        f"{VIRTUAL_PERMITS:,} permits. *Instructions*: counted by valgrind's callgrind, "
        f"the difference between runs of {2 * VIRTUAL_PERMITS:,} and "
        f"{VIRTUAL_PERMITS:,} permits per permit, so start-up cancels out; the same "
        "count on every run, whatever else the machine does. Two reference rows "
        "follow the peers: a *flat limiter*, an ideal one doing only the steps this "
        "library's promises need (strict priority, exact pacing, the wait histogram, "
        "the refund log and the spend), and the *floor*, a bare pacer doing only "
        "asyncio's part (a future and a timer per permit)."
    )
    print()
    counting = shutil.which("valgrind") is not None and "--no-valgrind" not in sys.argv
    print("| limiter | rate/s | CPU µs/permit | instructions/permit |")
    print("| --- | ---: | ---: | ---: |")
    rows: list[tuple[str, str, Callable[[int, int], tuple[Acquire, Close]]]] = []
    for peer in PEERS:
        if peer.name not in VIRTUAL_PEERS or peer.make is None:
            continue
        try:
            importlib.import_module(peer.module)
        except ImportError:
            continue
        version = importlib.metadata.version(peer.dist)
        rows.append((f"{peer.name} {version}", peer.name, peer.make))
    rows += [(name, name, make) for name, make in VIRTUAL_REFERENCES]
    for label, key, make in rows:
        for rate in PEER_RATES:
            runs = [virtual_run(make, rate, VIRTUAL_PERMITS) for _ in range(REPEAT)]
            cpu = min(spent / granted for spent, granted in runs)
            count = "not counted (no valgrind)"
            if counting:
                small = _instructions(key, rate, VIRTUAL_PERMITS)
                large = _instructions(key, rate, 2 * VIRTUAL_PERMITS)
                count = f"{(large - small) / VIRTUAL_PERMITS:,.0f}"
            print(f"| {label} | {rate:,} | {cpu * 1e6:.2f} | {count} |")
    print()


if __name__ == "__main__":
    if "--virtual-one" in sys.argv:
        at = sys.argv.index("--virtual-one")
        peer_name, rate, count = sys.argv[at + 1], int(sys.argv[at + 2]), int(sys.argv[at + 3])
        makers = [(p.name, p.make) for p in PEERS] + list(VIRTUAL_REFERENCES)
        make = next(m for n, m in makers if n == peer_name)
        assert make is not None
        virtual_run(make, rate, count)
        raise SystemExit(0)
    if "--cpu-repeats" in sys.argv:
        cpu_repeats(int(sys.argv[sys.argv.index("--cpu-repeats") + 1]))
    else:
        main()
