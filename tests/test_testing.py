"""permits.testing: the virtual clocks, run(), virtual_backend() and stall()."""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from fractions import Fraction
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from permits import testing
from permits.adapters import BaseLimiter
from permits.adapters import asyncio as asyncio_adapter
from permits.core import Fifo, PermitTypeError, PermitValueError

OpenLimiter = Callable[..., AbstractAsyncContextManager[BaseLimiter]]


def test_the_loop_jumps_to_the_next_timer_in_no_real_time() -> None:
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        seen = [loop.time()]
        await asyncio.sleep(3600)
        seen.append(loop.time())
        await asyncio.sleep(15e-9)  # 15 ns: 15 / 1e9 * 1e9 reads back as 14.99...
        seen.append(loop.time())
        return seen

    began = time.monotonic()
    seen = testing.run(main())
    assert time.monotonic() - began < 30, "an hour of virtual time is not an hour"
    assert seen[:2] == [0.0, 3600.0]
    assert int(seen[2] * 1e9) == 3600 * 10**9 + 15, "readings are exact nanoseconds"


@pytest.mark.timeout(10)  # without the fix, the loop spins for ever
def test_the_loop_runs_its_timers_past_194_days() -> None:
    """From 2**24 s on, a float's step is wider than 2 ns, and asyncio's
    test for a timer due (before ``time()`` plus the clock's 1 ns
    resolution) never held for one due at the clock's reading: the loop
    spun, its clock still. The limiter's daily permit of day 195, a sleep
    landed on by a jump and one landed on by a stall all come; a sleep of
    a million years too, in one jump (it went a day at a step)."""

    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        seen = []
        async with asyncio_adapter.open_limiter(Fifo(), rate=Fraction(1, 86400)) as limiter:
            for _ in range(196):  # one a day
                await limiter.acquire()
        seen.append(loop.time())
        await asyncio.sleep(2**25 - loop.time())
        seen.append(loop.time())
        timer = asyncio.Event()
        loop.call_at(2**26, timer.set)
        testing.stall(2**26 - loop.time())  # onto the timer's time exactly
        await timer.wait()
        seen.append(loop.time())
        await asyncio.sleep(1e6 * 365 * 86400)
        seen.append(loop.time())
        return seen

    seen = testing.run(main())
    assert seen == pytest.approx([195 * 86400, 2**25, 2**26, 2**26 + 1e6 * 365 * 86400]), seen


def test_the_clock_waits_for_the_loops_executor() -> None:
    """A job in run_in_executor holds the clock: a timer 10 s away does not
    fire before a job of a few real milliseconds ends."""

    async def main() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        timer = loop.call_later(10, lambda: None)
        await loop.run_in_executor(None, time.sleep, 0.05)
        return timer.cancelled() or loop.time() < 10, loop.time()

    held, at = testing.run(main())
    assert held, at
    assert at == 0.0


@pytest.mark.parametrize("forever", [anyio.sleep_forever, partial(anyio.sleep, 1e300)])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_task_asleep_forever_is_no_timer(
    backend: str, forever: Callable[[], Coroutine[Any, Any, None]]
) -> None:
    """A task in ``sleep_forever()`` (``sleep(math.inf)``, a timer at
    infinity under asyncio) sets no time to jump to: waiting for another
    thread's word, the clock stays where it is and the loop sleeps in real
    time, as under trio, rather than spin a day of virtual time at a step.
    So does one in ``sleep(1e300)``, past what the clock counts in
    nanoseconds (its jump raised OverflowError, under trio as a
    TrioInternalError)."""

    async def main() -> float:
        async with anyio.create_task_group() as tg:
            tg.start_soon(forever)
            done = anyio.Event()
            token = anyio.lowlevel.current_token()

            def later() -> None:
                time.sleep(0.05)
                anyio.from_thread.run_sync(done.set, token=token)

            threading.Thread(target=later).start()
            await done.wait()
            tg.cancel_scope.cancel()
        return anyio.current_time()

    name, options = testing.virtual_backend(backend)
    assert anyio.run(main, backend=name, backend_options=options) == 0.0


#: Delays whose sum with the clock's reading a float may hold a hair above
#: a whole nanosecond (0.1 + 0.2 is 0.30000000000000004).
DELAYS = st.lists(
    st.floats(min_value=1e-9, max_value=1e6, allow_nan=False) | st.sampled_from([0.1, 0.2, 1e-9]),
    min_size=1,
    max_size=20,
)


@given(delays=DELAYS)
def test_the_loop_wakes_a_sleeper_at_or_after_its_timer(delays: list[float]) -> None:
    """The loop's clock jumps to the first nanosecond at or after the next
    timer: a sleep never ends with the clock short of the time its timer
    was set for, however that time rounds to a nanosecond (asyncio would
    run a timer up to its clock's resolution early, and a limiter's timer
    read then would find its time not yet come)."""

    async def main() -> list[tuple[float, float]]:
        loop = asyncio.get_running_loop()
        seen = []
        for delay in delays:
            when = loop.time() + delay  # (as asyncio's call_later sets it)
            await asyncio.sleep(delay)
            seen.append((when, loop.time()))
        return seen

    for when, woke in testing.run(main()):
        assert woke >= when


@given(deadlines=DELAYS)
def test_the_trio_clock_jumps_at_or_after_a_deadline(deadlines: list[float]) -> None:
    """trio asks the clock how long to sleep until a deadline only when no
    task can run: the first time, it sleeps 0 s where it is (trio looks
    for I/O), and asked again (nothing woke), the clock jumps to the first
    nanosecond at or after it. One that landed short would leave the
    deadline not yet come, and trio would ask again, for ever, the clock
    never moving."""
    clock = testing.VirtualClock()
    for deadline in sorted(deadlines):
        before = clock.current_time()
        assert clock.deadline_to_sleep_time(deadline) == 0.0
        if deadline > before:
            assert clock.current_time() == before  # not yet: I/O first
            assert clock.deadline_to_sleep_time(deadline) == 0.0
        assert clock.current_time() >= deadline


def test_the_trio_clock_jumps_only_once_no_io_is_ready() -> None:
    """As under trio's ``MockClock(autojump_threshold=0)`` and the asyncio
    ``VirtualClockLoop``: a reply that reached a socket a task waits on, or
    a callback queued (from another thread, or its own), is seen before
    the clock jumps. The clock jumped before trio looked, so a read whose
    data was there failed at its 1 s timeout, and the callback ran 10 s
    late, or later still."""

    async def main() -> tuple[list[object], list[float]]:
        ours, theirs = socket.socketpair()
        read: list[object] = []
        ran: list[float] = []
        with ours, theirs:
            reader = trio.socket.from_stdlib_socket(theirs)

            async def read_one() -> None:
                try:
                    with trio.fail_after(1):
                        read.append(await reader.recv(1))
                except trio.TooSlowError:
                    read.append("timed out")
                read.append(trio.current_time())

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_one)
                await trio.testing.wait_all_tasks_blocked()  # it waits for the reply
                ours.send(b"x")  # the reply is there from now on
                token = trio.lowlevel.current_trio_token()
                token.run_sync_soon(lambda: ran.append(trio.current_time()))  # (as a thread)
                await trio.sleep(10)
        return read, ran

    for _ in range(20):
        assert trio.run(main, clock=testing.VirtualClock()) == ([b"x", 0.0], [0.0])


def test_the_trio_clock_reads_exact_nanoseconds() -> None:
    """trio's MockClock lands on 1.001, which int(t * 1e9) reads as
    1,000,999,999 ns; a limiter's timer at 1,001,000,000 ns then never
    sees its time come. VirtualClock's readings are exact."""

    async def main() -> int:
        await trio.sleep_until(1.001)
        return int(trio.current_time() * 1e9)

    assert trio.run(main, clock=testing.VirtualClock()) == 1_001_000_000


def test_the_trio_clock_lets_tasks_waiting_for_idle_run_before_it_jumps() -> None:
    """As under trio's ``MockClock(autojump_threshold=0)``: a task in
    ``wait_all_tasks_blocked()`` is woken once every other task waits,
    before the clock jumps to their next deadline (it jumped first, so
    "let everything settle" moved the time on, under trio only)."""

    async def main() -> list[float]:
        seen = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep, 10)
            await trio.testing.wait_all_tasks_blocked()
            seen.append(trio.current_time())
            await trio.sleep(1)  # the jumps still come, exactly
            seen.append(trio.current_time())
        seen.append(trio.current_time())
        return seen

    assert trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)) == [0.0, 1.0, 10.0]
    assert trio.run(main, clock=testing.VirtualClock()) == [0.0, 1.0, 10.0]


def test_virtual_backend_refuses_an_unknown_name() -> None:
    """Refused as ``name``, a ``PermitValueError`` (it was a plain
    ``ValueError``, which carries no argument)."""
    with pytest.raises(PermitValueError, match="name='curio'") as refused:
        testing.virtual_backend("curio")
    assert refused.value.argument == "name"


@pytest.mark.parametrize("name", [1, None, b"trio"])
def test_virtual_backend_refuses_a_name_that_is_no_str(name: object) -> None:
    """A name that is no ``str`` is refused as a ``PermitTypeError``
    naming ``name`` and the value, not as a name anyio lacks."""
    with pytest.raises(PermitTypeError, match=f"name={name!r}: expected") as refused:
        testing.virtual_backend(name)  # type: ignore[arg-type]
    assert (refused.value.argument, refused.value.value) == ("name", name)


@pytest.mark.anyio
async def test_stall_moves_the_clock_and_runs_nothing(open_limiter: OpenLimiter) -> None:
    """On every case: the clock moves on by exactly the stall, nothing runs
    meanwhile, and what fell due runs once the caller awaits."""
    ran: list[float] = []
    sleeping = anyio.Event()

    async def other() -> None:
        sleeping.set()
        await anyio.sleep(0.1)
        ran.append(anyio.current_time())

    async with open_limiter(Fifo(), 10) as limiter, anyio.create_task_group() as tg:
        await limiter.acquire()  # the bucket's permit; the next is due in 100 ms
        tg.start_soon(other)
        await sleeping.wait()
        start = anyio.current_time()
        testing.stall(0.5)
        assert anyio.current_time() - start == pytest.approx(0.5, abs=1e-9)
        assert ran == [], "nothing ran during the stall"
        assert limiter.statistics().granted == 1
        assert limiter.try_acquire(), "the permit that fell due is free"
        for _ in range(20):  # a few scheduling rounds, in no virtual time
            await anyio.lowlevel.checkpoint()
        assert len(ran) == 1
        assert ran[0] - start == pytest.approx(0.5, abs=1e-9), "late by the stall"


def test_stall_on_trios_mock_clock() -> None:
    async def main() -> float:
        testing.stall(0.25)
        return trio.current_time()

    clock = trio.testing.MockClock()
    assert trio.run(main, clock=clock) == 0.25


def test_stall_refuses_a_real_clock_and_bad_durations() -> None:
    async def on_asyncio() -> None:
        testing.stall(0.1)

    with pytest.raises(TypeError, match="VirtualClockLoop"):
        asyncio.run(on_asyncio())

    async def on_trio() -> None:
        testing.stall(0.1)

    with pytest.raises(TypeError, match="MockClock"):
        trio.run(on_trio)
    with pytest.raises(RuntimeError):
        testing.stall(0.1)  # no loop running

    async def bad(seconds: object) -> None:
        testing.stall(seconds)  # type: ignore[arg-type]

    for seconds in (-1.0, float("nan"), 1e300, 10**400):  # (1e300 s: 1e309 ns, past a float)
        with pytest.raises(PermitValueError, match="seconds=") as refused:
            testing.run(bad(seconds))
        assert refused.value.argument == "seconds"

    async def twice() -> float:
        testing.stall(1e299)
        with pytest.raises(PermitValueError, match="seconds=") as refused:
            testing.stall(1e299)  # each within range, the clock's sum not
        assert refused.value.argument == "seconds"
        return asyncio.get_running_loop().time()

    assert testing.run(twice()) == 1e299  # as the refused stall left it
    clock = testing.VirtualClock()
    clock.advance(1e299)
    with pytest.raises(PermitValueError, match="seconds="):
        clock.advance(1e299)
    assert clock.current_time() == 1e299
    with pytest.raises(PermitTypeError, match="seconds=") as wrong:
        testing.run(bad("1"))
    assert wrong.value.argument == "seconds"


def test_run_refuses_a_running_loop_as_asyncio_run_does() -> None:
    """Called from a coroutine, run() says so, as asyncio.run() does, and
    leaves no coroutine unawaited behind (nor a loop unclosed)."""

    async def inner() -> None:
        pass

    async def outer() -> None:
        with pytest.raises(RuntimeError, match="cannot be called from a running event loop"):
            testing.run(inner())

    asyncio.run(outer())
    gc.collect()  # an unawaited coroutine warns here


def test_run_refuses_what_is_not_a_coroutine_naming_it() -> None:
    """``run(main)`` (the function, not called) is refused naming ``main``
    and saying to call it, before a loop is made; asyncio's own error
    ("An asyncio.Future, a coroutine or an awaitable is required") said
    neither."""

    async def main() -> int:
        return 1

    for wrong in (main, 42):
        with pytest.raises(PermitTypeError, match=r"main=.*call it") as refused:
            testing.run(wrong)  # type: ignore[arg-type]
        assert refused.value.argument == "main"
    assert testing.run(main()) == 1


def test_stall_on_a_real_clock_says_how_to_get_a_virtual_one() -> None:
    """stall() under a real loop, or outside any, names what to run the
    test with, not only the class it wanted (or asyncio's "no running
    event loop")."""

    async def on_asyncio() -> None:
        testing.stall(0.1)

    with pytest.raises(TypeError, match=r"permits\.testing\.run\(") as wrong:
        asyncio.run(on_asyncio())
    assert "virtual_backend" in str(wrong.value)
    with pytest.raises(RuntimeError, match=r"from a task.*permits\.testing\.run\("):
        testing.stall(0.1)  # no loop running
