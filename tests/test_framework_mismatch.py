"""An adapter used outside its framework says so, and names the one to use.

The asyncio limiter under trio said ``no running event loop``; trio's
``open_limiter`` under asyncio said ``'RunContext' object has no attribute
'runner'``. Both are now :class:`permits.adapters.WrongFramework`, a
``PermitError`` and a ``RuntimeError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import pytest
import trio

import permits.adapters
import permits.adapters.anyio
import permits.adapters.asyncio
import permits.adapters.trio
from permits.adapters import WrongFramework
from permits.core import Fifo, PermitError

UNDER_TRIO = (
    "permits.adapters.asyncio.Limiter needs a running asyncio event loop; under trio use "
    "permits.adapters.trio.open_limiter or permits.adapters.anyio.open_limiter"
)
#: (the way to open one, as for trio: it said ``permits.adapters.asyncio.Limiter``)
UNDER_ASYNCIO = (
    "needs a running trio event loop; under asyncio use "
    "permits.adapters.asyncio.open_limiter or permits.adapters.anyio.open_limiter"
)


def asyncio_limiter() -> permits.adapters.asyncio.Limiter:
    return permits.adapters.asyncio.Limiter(Fifo(), rate=10)


def trio_limiter() -> permits.adapters.trio.Limiter:
    return permits.adapters.trio.Limiter(Fifo(), rate=10)


def check(error: WrongFramework, adapter: str, needs: str, running: str | None) -> None:
    assert isinstance(error, PermitError)
    assert isinstance(error, RuntimeError)
    assert (error.adapter, error.needs, error.running) == (adapter, needs, running)
    assert error.__cause__ is None
    assert error.__suppress_context__  # raised from None: not the framework's error too


async def asyncio_acquire() -> None:
    await asyncio_limiter().acquire()


async def asyncio_permit() -> None:
    async with asyncio_limiter().permit():
        pass


async def asyncio_open_limiter() -> None:
    async with permits.adapters.asyncio.open_limiter(Fifo(), rate=10):
        pass


async def asyncio_try_acquire() -> None:
    asyncio_limiter().try_acquire()


@pytest.mark.parametrize(
    "use", [asyncio_acquire, asyncio_permit, asyncio_open_limiter, asyncio_try_acquire]
)
def test_asyncio_limiter_under_trio(use: Callable[[], Awaitable[None]]) -> None:
    with pytest.raises(WrongFramework) as raised:
        trio.run(use)
    assert str(raised.value) == UNDER_TRIO
    check(raised.value, "permits.adapters.asyncio.Limiter", "asyncio", "trio")


async def trio_open_limiter() -> None:
    async with permits.adapters.trio.open_limiter(Fifo(), rate=10) as limiter:
        await limiter.acquire()


def test_trio_open_limiter_under_asyncio() -> None:
    with pytest.raises(WrongFramework) as raised:
        asyncio.run(trio_open_limiter())
    assert str(raised.value) == "permits.adapters.trio.open_limiter " + UNDER_ASYNCIO
    check(raised.value, "permits.adapters.trio.open_limiter", "trio", "asyncio")


async def trio_acquire() -> None:
    await trio_limiter().acquire()


async def trio_try_acquire() -> None:
    trio_limiter().try_acquire()


@pytest.mark.parametrize("use", [trio_acquire, trio_try_acquire])
def test_trio_limiter_under_asyncio(use: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """A trio Limiter made by hand (not by open_limiter) and used under asyncio."""
    with pytest.raises(WrongFramework) as raised:
        asyncio.run(use())
    assert str(raised.value) == "permits.adapters.trio.Limiter " + UNDER_ASYNCIO
    check(raised.value, "permits.adapters.trio.Limiter", "trio", "asyncio")


@pytest.mark.parametrize(
    ("make", "adapter", "needs"),
    [
        (asyncio_limiter, "permits.adapters.asyncio.Limiter", "asyncio"),
        (trio_limiter, "permits.adapters.trio.Limiter", "trio"),
    ],
)
def test_outside_any_event_loop(
    make: Callable[[], permits.adapters.BaseLimiter], adapter: str, needs: str
) -> None:
    with pytest.raises(WrongFramework) as raised:
        make().try_acquire()
    assert str(raised.value) == (
        f"{adapter} needs a running {needs} event loop; "
        f"none runs in this thread (start one with {needs}.run)"
    )
    check(raised.value, adapter, needs, None)


def test_trio_open_limiter_outside_any_event_loop() -> None:
    with pytest.raises(WrongFramework) as raised:
        permits.adapters.trio.open_limiter(Fifo(), rate=10)
    check(raised.value, "permits.adapters.trio.open_limiter", "trio", None)


def test_anyio_open_limiter_outside_any_event_loop() -> None:
    """As trio's: anyio's own error (``NoEventLoopError``) was raised, not
    the ``WrongFramework`` an adapter raises where no loop runs."""
    with pytest.raises(WrongFramework) as raised:
        permits.adapters.anyio.open_limiter(Fifo(), rate=10)
    assert str(raised.value) == (
        "permits.adapters.anyio.open_limiter needs a running asyncio or trio event loop; "
        "none runs in this thread (start one with anyio.run)"
    )
    check(raised.value, "permits.adapters.anyio.open_limiter", "anyio", None)


def test_exported() -> None:
    assert "WrongFramework" in permits.adapters.__all__
    assert permits.adapters.WrongFramework is WrongFramework


async def trio_limiter_by_hand() -> None:
    limiter = trio_limiter()
    await limiter.acquire()  # the banked permit needs no timer, but
    await limiter.acquire()  # this one would wait for a timer that never runs


def test_a_limiter_without_its_timer_task_refuses_at_once() -> None:
    """A trio Limiter made by hand has no timer task: it raises at once,
    saying what to use, instead of a second acquire hanging forever."""
    with pytest.raises(RuntimeError, match=r"async with open_limiter\(\.\.\.\)"):
        trio.run(trio_limiter_by_hand)


@pytest.mark.anyio
async def test_a_limiter_called_from_another_loop_refuses_and_changes_nothing(
    open_limiter: Callable[..., Any], case: tuple[str, str]
) -> None:
    """A limiter lives in the loop it was first used in. A call from another
    thread's loop (or trio run) is refused there and leaves it as it was:
    that loop's clock is not its own (trio starts each run's clock at a
    random reading, days apart) and its timer cannot wake that loop's
    tasks. The trio and anyio limiters took such calls: one granted by the
    other clock's reading, a waiter that hung, a run that broke."""
    backend = case[0]
    async with open_limiter(Fifo(), rate=1, burst=1) as limiter:
        await limiter.acquire()
        before = (limiter.statistics(), limiter.limits)

        async def elsewhere() -> None:
            for call in (
                limiter.try_acquire,
                lambda: limiter.pause_for(60.0),
                lambda: limiter.set_limit(rate=1000),
            ):
                with pytest.raises(RuntimeError, match="belongs to the event loop it was first"):
                    call()
            with pytest.raises(RuntimeError, match="belongs to the event loop it was first"):
                await limiter.acquire(timeout=0)

        await anyio.to_thread.run_sync(lambda: anyio.run(elsewhere, backend=backend))
        assert (limiter.statistics(), limiter.limits) == before
        assert limiter.pause_left() == 0.0
        assert not limiter.try_acquire()  # its own loop's clock: the next permit is not due


def test_an_asyncio_limiter_closed_from_another_loop_refuses_and_stays_open() -> None:
    """``aclose`` from another thread's loop is refused as every other call
    from there is: it set its waiters' futures from the wrong thread, and a
    waiter slept on until something else woke its loop."""

    async def main() -> None:
        async with permits.adapters.asyncio.open_limiter(Fifo(), rate=10) as limiter:
            await limiter.acquire()
            with pytest.raises(RuntimeError, match="belongs to the event loop it was first"):
                await asyncio.to_thread(asyncio.run, limiter.aclose())
            assert not limiter.closed
            await limiter.acquire()  # its timer still runs

    asyncio.run(main())


@pytest.mark.anyio
async def test_a_limiter_called_from_a_thread_without_a_loop_says_to_call_it_in_its_own(
    open_limiter: Callable[..., Any], case: tuple[str, str]
) -> None:
    """A limiter already living in a loop, called from a worker thread where
    none runs (a permit settled in ``to_thread.run_sync``, a pause set from
    a blocking client's callback), is refused and left as it was, saying to
    call it in its own loop. It said "start one with asyncio.run": a call
    from a loop started there is refused too, as another loop's."""
    backend, adapter = case
    async with open_limiter(Fifo(), rate=1, burst=2, settle_window=10.0) as limiter:
        permit = await limiter.acquire()
        before = (limiter.statistics(), limiter.limits)
        calls: list[Callable[[], object]] = [
            lambda: permit.settle(0),
            limiter.try_acquire,
            lambda: limiter.pause_for(60.0),
            lambda: limiter.set_limit(rate=1000),
        ]
        for call in calls:
            with pytest.raises(WrongFramework) as raised:
                await anyio.to_thread.run_sync(call)
            assert str(raised.value) == (
                f"permits.adapters.{adapter}.Limiter belongs to the {backend} event loop it was "
                "first used in, and none runs in this thread: call it in that loop (from a "
                f"worker thread, through {FROM_THREAD[backend]})"
            )
            check(raised.value, f"permits.adapters.{adapter}.Limiter", backend, None)
        assert (limiter.statistics(), limiter.limits) == before
        assert limiter.pause_left() == 0.0
        permit.settle(0)  # in its own loop, it is taken
        assert limiter.try_acquire()
        assert limiter.try_acquire()


FROM_THREAD = {
    "asyncio": "asyncio.run_coroutine_threadsafe or loop.call_soon_threadsafe",
    "trio": "anyio.from_thread.run_sync or trio.from_thread.run_sync",
}


def test_a_plain_asyncio_worker_thread_can_do_what_the_refusal_says() -> None:
    """From ``asyncio.to_thread`` (no anyio worker thread: the
    ``anyio.from_thread.run_sync`` the refusal named raises there), the
    calls it names now reach the limiter in its loop: an acquire through
    ``asyncio.run_coroutine_threadsafe``, a pause through
    ``loop.call_soon_threadsafe``."""

    async def main() -> None:
        async with permits.adapters.asyncio.open_limiter(Fifo(), rate=1, burst=2) as limiter:
            loop = asyncio.get_running_loop()

            def worker() -> None:
                with pytest.raises(WrongFramework, match=FROM_THREAD["asyncio"]):
                    limiter.try_acquire()
                asyncio.run_coroutine_threadsafe(limiter.acquire(), loop).result()
                loop.call_soon_threadsafe(limiter.pause_for, 60.0)

            await asyncio.to_thread(worker)
            await asyncio.sleep(0)  # the pause, scheduled from the thread, runs
            assert limiter.statistics().levels[0].granted == 1
            assert limiter.pause_left() > 50.0

    asyncio.run(main())


def test_an_asyncio_limiter_whose_loop_closed_does_not_send_a_thread_to_it() -> None:
    """An asyncio Limiter made by hand whose loop has closed, called where
    no loop runs, is told what any call outside a loop is: that loop is
    gone, and calling it there (as a live loop's worker thread is told)
    cannot be done."""
    limiter = asyncio_limiter()

    async def use() -> None:
        limiter.try_acquire()

    asyncio.run(use())
    with pytest.raises(WrongFramework) as raised:
        limiter.try_acquire()
    assert str(raised.value) == (
        "permits.adapters.asyncio.Limiter needs a running asyncio event loop; "
        "none runs in this thread (start one with asyncio.run)"
    )
