"""Virtual time for tests: asyncio, trio, and anyio on either.

A test of behaviour over time (who is granted when, how many permits a
second) is exact and fast on a virtual clock, and flaky on a real one: a
loaded machine makes timers late. This module gives asyncio a loop whose
clock jumps to the next timer whenever every task waits
(:class:`VirtualClockLoop`), trio a clock that does the same
(:class:`VirtualClock`, trio's ``MockClock(autojump_threshold=0)`` with
exact nanosecond readings), and one way to use them:

- :func:`run` runs a coroutine on a fresh :class:`VirtualClockLoop`, as
  ``asyncio.run`` does on a real loop;
- :func:`virtual_backend` is the value for anyio's ``anyio_backend`` pytest
  fixture (or ``anyio.run``'s ``backend`` and ``backend_options``) that puts
  either backend on virtual time;
- :func:`stall` moves the running virtual clock on without letting anything
  run, as a blocking call stalls a real loop, on any of them::

    @pytest.fixture(params=["asyncio", "trio"])
    def anyio_backend(request):
        return permits.testing.virtual_backend(request.param)

    @pytest.mark.anyio
    async def test_paced():
        async with open_limiter(Fifo(), rate=10) as limiter:
            start = anyio.current_time()
            for _ in range(3):
                await limiter.acquire()
            assert anyio.current_time() - start == pytest.approx(0.2)

The clock jumps whenever every task waits on a timer, so a test that sleeps
for an hour takes no real time. It waits in real time only for what could
end the wait from outside the loop: I/O with no timer pending (a task in
``sleep_forever()`` sets none), and jobs in the loop's executor
(``run_in_executor``, ``getaddrinfo``). Other threads (``anyio.to_thread``)
do not hold it back: as with trio's autojump, the clock may jump while they
work.

The times are the same on every run. The order of tasks woken at the same
instant is asyncio's (the order they were scheduled in, every run) or
trio's, which shuffles such a batch on purpose to shake out code that
leans on it: under trio, assert on times, counts and the order of
different instants, not on which of several tasks woken together ran
first.
"""

from __future__ import annotations

import asyncio
import math
import selectors
import sys
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, TypeVar

from permits.core import PermitTypeError, PermitValueError

if TYPE_CHECKING:
    from typing_extensions import TypeVarTuple, Unpack

    _Ts = TypeVarTuple("_Ts")

try:
    from trio.abc import Clock as _TrioClock
    from trio.abc import Instrument as _TrioInstrument
except ImportError:  # pragma: no cover - without trio, VirtualClock has no use
    _TrioClock = object  # type: ignore[assignment,misc]
    _TrioInstrument = object  # type: ignore[assignment,misc]

__all__ = ["VirtualClock", "VirtualClockLoop", "run", "stall", "virtual_backend"]

T = TypeVar("T")


def _seconds(ns: int) -> float:
    """``ns`` as seconds: the least float ``s`` with ``int(s * 1e9) == ns``.

    A plain ``ns / 1e9`` reads back a nanosecond short for about one value
    in forty (``int(15 / 1e9 * 1e9) == 14``). Code that converts the clock
    to nanoseconds that way, as a limiter does, would then see a timer it
    set fire a nanosecond early, set it again, and on a clock that moves
    only when every task waits, never see time move."""
    seconds = ns / 1e9
    while int(seconds * 1e9) < ns:
        seconds = math.nextafter(seconds, math.inf)
    return seconds


#: The latest the clock reads, in nanoseconds (1.5e299 s): past about
#: 1.8e299 s, its seconds times 1e9, as a limiter reads them, are past a
#: float's range.
_LATEST_NS = 15 * 10**307
_LATEST_S = _LATEST_NS / 1e9


def _duration(seconds: float) -> int:
    """``seconds`` (finite, at least 0) in whole nanoseconds."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise PermitTypeError("seconds", seconds, "a number of seconds")
    if not (seconds >= 0 and (isinstance(seconds, int) or math.isfinite(seconds))):
        raise PermitValueError("seconds", seconds, "must be a finite number of seconds >= 0")
    if seconds > _LATEST_S:
        raise PermitValueError(
            "seconds", seconds, f"must be at most {_LATEST_S:g} (the clock's range)"
        )
    return round(seconds * 1e9)


def _later(ns: int, seconds: float) -> int:
    """The clock at ``ns``, ``seconds`` later (checked, and within its range)."""
    later = ns + _duration(seconds)
    if later > _LATEST_NS:
        raise PermitValueError(
            "seconds", seconds, f"would move the clock ({ns / 1e9!r} s) past {_LATEST_S:g} s"
        )
    return later


class _VirtualSelector(selectors.DefaultSelector):
    """The loop's selector: polls real I/O and, where the loop would sleep
    until its next timer, moves the loop's clock there instead."""

    def __init__(self, loop: VirtualClockLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        loop = self._loop
        if ready or (timeout is not None and timeout <= 0 and not loop._timer_held_back()):
            return ready
        if timeout is None or loop._executor_jobs or loop._next_timer_at_infinity():
            # Only I/O (another thread's call_soon_threadsafe among it) can
            # end this wait: wait for it in real time.
            return super().select(timeout)
        # (the timer itself: asyncio's timeout is at most a day, and may
        # fall short of the timer by the rounding of its subtraction)
        loop._jump_to(loop._next_timer())
        return []


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An asyncio event loop whose clock is virtual: whenever every task waits,
    the clock jumps to the next timer (trio's ``MockClock(autojump_threshold=0)``).

    The clock starts at 0.0 and moves in whole nanoseconds, only when the
    loop would otherwise sleep (to the first nanosecond at or after its next
    timer) and on :meth:`advance`. Callbacks and tasks take no virtual time.

    Make one directly (``loop.run_until_complete(...)``), through :func:`run`,
    or as anyio's ``loop_factory`` (:func:`virtual_backend`).
    """

    def __init__(self) -> None:
        self._ns = 0
        self._now = 0.0
        self._executor_jobs = 0
        super().__init__(_VirtualSelector(self))

    def time(self) -> float:
        """The virtual clock, in seconds."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock on by ``seconds`` at once, running nothing meanwhile.

        Called from a task (or a callback), this is a stall: what
        ``time.sleep(seconds)`` does to a real loop. Timers that fell due
        run once the caller next awaits. :func:`stall` calls it on the
        running loop."""
        self._set(_later(self._ns, seconds))

    def _set(self, ns: int) -> None:
        self._ns = ns
        self._now = _seconds(ns)

    def _next_timer(self) -> float:
        """When the next timer is due (there is one)."""
        scheduled: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        return scheduled[0].when()

    def _timer_held_back(self) -> bool:
        """Whether the next timer is due by the clock, nothing else is ready
        to run, and yet asyncio would not run it: it runs the timers due
        before ``time()`` plus the clock's resolution (1 ns), a sum that is
        ``time()`` itself from 2**24 s (about 194 days) on, where a float's
        step is wider than 2 ns. Then the clock moves on (:meth:`_jump_to`)."""
        ready = self._ready or self._stopping  # type: ignore[attr-defined]
        resolution: float = self._clock_resolution  # type: ignore[attr-defined]
        return not ready and self._next_timer() >= self._now + resolution

    def _next_timer_at_infinity(self) -> bool:
        """Whether the next timer never comes (``sleep(math.inf)``, anyio's
        ``sleep_forever``; or ``sleep(1e300)``, past what the clock counts
        in nanoseconds), so that no timer is pending."""
        scheduled: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        return bool(scheduled) and not math.isfinite(scheduled[0].when() * 1e9)

    def _jump_to(self, when: float) -> None:
        """The clock to the first nanosecond at or after ``when`` (at least
        one on: each jump moves time, so a timer that runs a little early by
        the loop's clock resolution and sets itself again still sees it come;
        and one held back, :meth:`_timer_held_back`, runs after a jump or two)."""
        ns = max(self._ns + 1, round(when * 1e9))
        if _seconds(ns) < when:
            ns += 1
        self._set(ns)

    def run_in_executor(
        self,
        executor: Executor | None,
        func: Callable[[Unpack[_Ts]], T],
        *args: Unpack[_Ts],
    ) -> asyncio.Future[T]:
        """As asyncio's; while the job runs, the clock waits for it."""
        future = super().run_in_executor(executor, func, *args)
        self._executor_jobs += 1
        future.add_done_callback(self._executor_job_done)
        return future

    def _executor_job_done(self, future: asyncio.Future[Any]) -> None:
        self._executor_jobs -= 1

    if sys.version_info >= (3, 12):

        async def shutdown_default_executor(self, timeout: float | None = None) -> None:
            """As asyncio's; the clock waits for it (its timeout is real time)."""
            self._executor_jobs += 1
            try:
                await super().shutdown_default_executor(timeout)
            finally:
                self._executor_jobs -= 1

    else:

        async def shutdown_default_executor(self) -> None:
            """As asyncio's; the clock waits for it."""
            self._executor_jobs += 1
            try:
                await super().shutdown_default_executor()
            finally:
                self._executor_jobs -= 1


class VirtualClock(_TrioClock):
    """A clock for trio (``trio.run(main, clock=VirtualClock())``) that jumps
    to the next deadline whenever no task can run and no I/O is ready, in
    whole nanoseconds: :class:`VirtualClockLoop`'s clock, for trio.

    trio's own ``MockClock(autojump_threshold=0)`` jumps the same way, but
    its readings are sums of float jumps, and a reading converted to
    nanoseconds with ``int(seconds * 1e9)`` can come out a nanosecond short
    of a deadline the clock has just reached. A timer that compares the two
    then sets itself again, forever, and the clock, which moves only when
    every task waits, never moves. Here every reading is exact.

    The clock starts at 0.0; :meth:`advance` (or :func:`stall`) moves it on.
    """

    def __init__(self) -> None:
        self._ns = 0
        self._now = 0.0
        #: Whether trio has looked for I/O since it last found no task to
        #: run, and found none ready (:class:`_IoWatch` says when it did).
        self._idle = False

    def __repr__(self) -> str:
        return f"<permits.testing.VirtualClock at {self._now!r} s>"

    def start_clock(self) -> None:
        """Part of trio's clock interface: watch trio's looks for I/O."""
        import trio.lowlevel

        self._idle = False
        trio.lowlevel.add_instrument(_IoWatch(self))

    def current_time(self) -> float:
        """The virtual clock, in seconds."""
        return self._now

    def deadline_to_sleep_time(self, deadline: float) -> float:
        """trio asks this only when no task can run. The first time, sleep
        0 s: trio looks for I/O already ready (a socket's reply, a callback
        from another thread) as ``MockClock`` does before it jumps. Asked
        again with nothing woken meanwhile, jump to ``deadline`` (the first
        nanosecond at or after it) and sleep 0 s. With no deadline, wait for
        I/O in real time (and for a deadline past what the clock counts in
        nanoseconds, ``sleep(1e300)``). While a task waits in
        ``wait_all_tasks_blocked()``, no jump: trio wakes it first, as
        under ``MockClock``, and asks again."""
        if not math.isfinite(deadline * 1e9) or _waiting_for_idle():
            self._idle = False
            return math.inf
        if deadline > self._now:
            if not self._idle:
                self._idle = True
                return 0.0
            ns = round(deadline * 1e9)
            if _seconds(ns) < deadline:
                ns += 1
            self._set(ns)
        self._idle = False
        return 0.0

    def advance(self, seconds: float) -> None:
        """Move the clock on by ``seconds`` at once (see :func:`stall`)."""
        self._set(_later(self._ns, seconds))

    def _set(self, ns: int) -> None:
        self._ns = ns
        self._now = _seconds(ns)


class _IoWatch(_TrioInstrument):
    """Tells a :class:`VirtualClock` when trio's look for I/O woke a task:
    the clock then waits for the next idle moment to jump."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock

    def after_io_wait(self, timeout: float) -> None:
        import trio.lowlevel

        if trio.lowlevel.current_statistics().tasks_runnable:
            self.clock._idle = False


def _waiting_for_idle() -> bool:
    """Whether a task waits in trio's ``wait_all_tasks_blocked()``. trio
    tells no clock but its own MockClock (python-trio/trio#1587), so this
    reads its run loop as MockClock does."""
    try:
        from trio._core._run import GLOBAL_RUN_CONTEXT

        return bool(GLOBAL_RUN_CONTEXT.runner.waiting_for_idle)
    except (ImportError, AttributeError):  # pragma: no cover - a trio without it
        return False


def run(main: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """Run ``main`` on a fresh :class:`VirtualClockLoop` and close it, as
    ``asyncio.run`` does on a real loop (tasks left over are cancelled,
    async generators and the default executor shut down)."""
    if not asyncio.iscoroutine(main):
        what = "a coroutine: call it, run(main()), not run(main)"
        raise PermitTypeError("main", main, what)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        main.close()  # never to be awaited
        raise RuntimeError("permits.testing.run() cannot be called from a running event loop")
    loop = VirtualClockLoop()
    if debug is not None:
        loop.set_debug(debug)
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            _cancel_all_tasks(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()


def _cancel_all_tasks(loop: asyncio.AbstractEventLoop) -> None:
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if not tasks:
        return
    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception during permits.testing.run() shutdown",
                    "exception": task.exception(),
                    "task": task,
                }
            )


def virtual_backend(name: str) -> tuple[str, dict[str, Any]]:
    """anyio's backend ``name`` ("asyncio" or "trio") on virtual time, as the
    ``(name, options)`` pair anyio's pytest plugin takes from the
    ``anyio_backend`` fixture: asyncio on a :class:`VirtualClockLoop`, trio
    with a fresh :class:`VirtualClock` (so call it once per test). For
    ``anyio.run``: ``anyio.run(f, backend=name, backend_options=options)``."""
    if name == "asyncio":
        return name, {"loop_factory": VirtualClockLoop}
    if name == "trio":
        return name, {"clock": VirtualClock()}
    if not isinstance(name, str):
        raise PermitTypeError("name", name, "a str, 'asyncio' or 'trio'")
    raise PermitValueError("name", name, "must be 'asyncio' or 'trio'")


def stall(seconds: float) -> None:
    """Stall the running loop for ``seconds`` of virtual time: move its clock
    on at once and run nothing meanwhile, as ``time.sleep(seconds)`` would
    on a real loop. Call it (synchronously) from a task: no other task runs
    until the caller awaits, and then every timer that fell due meanwhile is
    late by the same stall.

    Works on a :class:`VirtualClockLoop` (asyncio, or anyio on asyncio), and
    under trio (or anyio on trio) on a :class:`VirtualClock` or trio's own
    ``MockClock``.

    :raises RuntimeError: no loop is running.
    :raises TypeError: the running loop's clock is not virtual.
    """
    ns = _duration(seconds)
    if "trio" in sys.modules:
        import trio.lowlevel
        import trio.testing

        if trio.lowlevel.in_trio_task():
            clock = trio.lowlevel.current_clock()
            if isinstance(clock, VirtualClock):
                clock._set(_later(clock._ns, seconds))
            elif isinstance(clock, trio.testing.MockClock):
                clock.jump(ns / 1e9)
            else:
                raise TypeError(
                    f"stall() needs a permits.testing.VirtualClock or a "
                    f"trio.testing.MockClock, not {clock!r}: trio.run(main, "
                    f"clock=permits.testing.VirtualClock()), or anyio's "
                    f"permits.testing.virtual_backend('trio')"
                )
            return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(
            "stall() must be called from a task on a virtual clock, and no event loop is running: "
            "run the test with permits.testing.run(main()) (or on a virtual_backend)"
        ) from None
    if not isinstance(loop, VirtualClockLoop):
        raise TypeError(
            f"stall() needs a permits.testing.VirtualClockLoop, not {loop!r}: run the test "
            f"with permits.testing.run(main()) in place of asyncio.run, or anyio's "
            f"permits.testing.virtual_backend('asyncio')"
        )
    loop._set(_later(loop._ns, seconds))
