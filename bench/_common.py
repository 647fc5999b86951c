"""What the adapter benchmarks share: the frameworks, the adapters, the peers, a run.

- :class:`Framework` (``ASYNCIO``, ``TRIO``, :class:`Anyio`): run a body under
  the framework, read its clock, checkpoint, start tasks; frozen-clock runs
  (a loop whose ``time()`` stands still, trio's ``MockClock(rate=0)``) for
  the contended hand-off.
- ``ADAPTERS``: the asyncio, trio and anyio adapters, each with the framework
  whose floor it is compared with.
- ``PEERS``: this library's asyncio adapter and the peers (``aiolimiter``,
  ``asynciolimiter``, ``pyrate-limiter``, ``aiometer``), each built as
  ``make(rate, burst) -> (acquire, close)``; :func:`installed` says whether
  a peer can be imported (the peers are optional: a script skips the missing
  ones and says so).
- :class:`Run` and what is read from it: :func:`achieved` rate,
  :func:`percentile`.
- :func:`header` and :func:`footer`: the machine, the versions and the load
  average, printed around a script's tables.

The scripts that read ``--quick`` (shorter runs, same tables) read it
through ``QUICK`` or ``sys.argv``; ``--help`` prints a script's options
(``_options.check_options``).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import math
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import trio
import trio.testing

import permits.adapters.anyio
import permits.adapters.asyncio
import permits.adapters.trio
from permits.adapters import BaseLimiter
from permits.core import Fifo, Policy

__all__ = [
    "ADAPTERS",
    "ASYNCIO",
    "CALLERS",
    "PEERS",
    "PEER_BURST",
    "PEER_RATES",
    "QUICK",
    "REPEAT",
    "TRIO",
    "UNLIMITED",
    "Acquire",
    "Adapter",
    "Anyio",
    "Close",
    "Framework",
    "Make",
    "Peer",
    "Run",
    "achieved",
    "best",
    "close_limiter",
    "footer",
    "granted",
    "header",
    "installed",
    "ns",
    "percentile",
    "skipped",
    "version",
]

T = TypeVar("T")

QUICK = "--quick" in sys.argv
REPEAT = 3  # a time is the best of this many runs
UNLIMITED = 10**9  # permits per second: one a nanosecond, never binds
CALLERS = 4  # tasks acquiring continuously in the pacing and peer runs
PEER_RATES = (1_000, 10_000)
PEER_BURST = 10  # the smallest burst every peer can express at 10,000/s
WARMUP = 0.1  # fraction of a run left out of the achieved rate

Opener = Callable[[Policy, int, int], AbstractAsyncContextManager[BaseLimiter]]
Acquire = Callable[[], Awaitable[Any]]
Close = Callable[[], Any]
#: make(rate, burst) -> (acquire, close): a limiter built for one run.
Make = Callable[[int, int], tuple[Acquire, Close]]


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
    return permits.adapters.asyncio.open_limiter(policy, rate, burst)


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


def ns(seconds: float) -> int:
    """A framework time in the adapters' unit (they convert the same way)."""
    return int(seconds * 1e9)


def best(run: Callable[[], float]) -> float:
    return min(run() for _ in range(REPEAT))


def granted(limiter: BaseLimiter) -> int:
    return sum(level.granted for level in limiter.statistics().levels)


# -- runs -------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """What one continuous-acquire run recorded (times in ns)."""

    start: int  # t0: the machine's first operation, or the first acquire call
    end: int
    grants: list[tuple[int, int]]  # (resumed, asked) of each grant before the end
    cpu: float  # process time, seconds
    permits: int  # every permit granted, the ones after the end included


def percentile(values: Sequence[int], q: float) -> int:
    """Nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def achieved(run: Run) -> float:
    """Permits per second after the warm-up: (n - 1) / (last - first)."""
    after = run.start + WARMUP * (run.end - run.start)
    times = sorted(resumed for resumed, _ in run.grants if resumed >= after)
    if len(times) < 2 or times[-1] == times[0]:
        return 0.0
    return (len(times) - 1) * 1e9 / (times[-1] - times[0])


# -- peers ------------------------------------------------------------------


@dataclass(frozen=True)
class Peer:
    name: str
    module: str  # the import that must succeed
    dist: str  # the distribution, for its version
    config: str  # how it is configured, {burst} filled in
    #: make(rate, burst) -> (acquire, close); None for aiometer, which has no acquire.
    make: Make | None


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


async def close_limiter(close: Close) -> None:
    result = close()
    if isinstance(result, Awaitable):
        await result


def importable(module: str) -> bool:
    """Whether ``module`` can be imported here."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def installed(peer: Peer) -> bool:
    """Whether ``peer`` can be imported here."""
    return importable(peer.module)


def skipped(missing: Sequence[str]) -> None:
    """Say which peers a table left out, and how to install them."""
    if missing:
        print(
            f"Not installed, skipped: {', '.join(missing)} (pip install "
            + " ".join(p.dist for p in PEERS if p.name in missing)
            + "; see BENCHMARKS.md's set-up)."
        )
        print()


def version(peer: Peer) -> str:
    """``peer``'s name and installed version, as the tables print it."""
    return f"{peer.name} {importlib.metadata.version(peer.dist)}"


def header() -> float:
    """Print the machine, the versions and the load; the start time, for :func:`footer`."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"Python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {load} at start; "
        f"trio {trio.__version__}, anyio {importlib.metadata.version('anyio')}; "
        f"{'--quick' if QUICK else 'full run'}"
    )
    print()
    return time.perf_counter()


def footer(start: float) -> None:
    """Print the load at the end and the time since :func:`header`."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"Load average {load} at the end; took {time.perf_counter() - start:.0f} s.")
