"""P62 to P69, P80 and P87: the adapters' own calls, as SPEC.md's *The adapters* states them.

What a limiter does beyond handing out permits where callers proceed (P26):
the blocks it refuses, how a block's exception leaves, the live calls
(``set_limit``, ``pause_for``, ``pause_until``, ``adopt``, ``quota``, ``Permit.settle``)
waking whom they decided for and re-planning the timer at once,
``pause_left()``, ``Permit.settle``'s window and refusals, durations in
seconds (P80), and an infinite ``timeout`` or ``max_wait`` (P87). Each runs
on every event-loop adapter (asyncio, trio, anyio under both) on virtual
time (:mod:`permits.testing`), so times are exact and a run takes no real
time; and, where the promise is not about the timer, on the thread
adapter, its clock made virtual (a subclass's ``_clock``) where time
matters.
"""

from __future__ import annotations

import ast
import copy
import math
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager, suppress
from datetime import date, datetime, timedelta, timezone, tzinfo
from typing import Any

import anyio
import anyio.lowlevel
import attrs
from hypothesis import example, given, note
from hypothesis import strategies as st

from permits.adapters import (
    AcquireTimeout,
    BaseLimiter,
    LimiterClosed,
    Permit,
    WouldWaitTooLong,
    level,
    threads,
)
from permits.adapters import anyio as anyio_adapter
from permits.adapters import asyncio as asyncio_adapter
from permits.adapters import trio as trio_adapter
from permits.core import (
    SECOND,
    Fifo,
    NotRefundable,
    PermitTypeError,
    PermitValueError,
    StrictPriority,
)
from permits.testing import virtual_backend

if sys.version_info >= (3, 11):
    from builtins import ExceptionGroup
else:  # pragma: no cover - (anyio's dependency there)
    from exceptiongroup import ExceptionGroup

#: (backend, adapter): the conformance suite's four event-loop cases.
CASES = [("asyncio", "asyncio"), ("asyncio", "anyio"), ("trio", "trio"), ("trio", "anyio")]
#: The thread adapter's case.
THREADS = ("threads", "threads")

OPENERS: dict[str, Callable[..., AbstractAsyncContextManager[BaseLimiter]]] = {
    "asyncio": asyncio_adapter.open_limiter,
    "trio": trio_adapter.open_limiter,
    "anyio": anyio_adapter.open_limiter,
}

#: The scripts' grid: a 256th of a second, exact as a float and in ns.
STEP = 3_906_250


def run(case: tuple[str, str], main: Callable[[], Awaitable[None]]) -> None:
    """Run ``main`` on the case's backend, on a fresh virtual clock."""
    name, options = virtual_backend(case[0])
    anyio.run(main, backend=name, backend_options=options)


def now() -> int:
    """The running loop's virtual time in ns, as the adapters read it."""
    return round(anyio.current_time() * 1e9)


async def until(condition: Callable[[], bool], why: str) -> None:
    """Let the other tasks run until ``condition()`` holds, in no virtual
    time (the clock jumps only once every task waits)."""
    for _ in range(1000):
        if condition():
            return
        await anyio.lowlevel.checkpoint()
    raise AssertionError(why)


class VirtualThreads(threads.Limiter):
    """The thread adapter on a clock the test moves (``clock[0]``, ns)."""

    def __init__(self, *args: Any, **options: Any) -> None:
        self.clock = [0]
        super().__init__(*args, **options)

    def _clock(self) -> int:
        return self.clock[0]


@contextmanager
def virtual_threads(*args: Any, **options: Any) -> Iterator[VirtualThreads]:
    """A :class:`VirtualThreads` limiter, open (its timer thread runs) for
    the block, closed after it."""
    limiter = VirtualThreads(*args, **options)
    limiter._start()
    try:
        yield limiter
    finally:
        limiter.close()


def until_it_waits(limiter: VirtualThreads, outcome: list[Any]) -> None:
    """Until a caller thread just started waits in ``limiter`` (or its
    acquire ended, into ``outcome``): 30 s at most, for a busy host."""
    for _ in range(30_000):
        if limiter.machine.waiting() or outcome:
            return
        threading.Event().wait(0.001)


# -- P62: the blocks a limiter refuses -----------------------------------------


@given(
    case=st.sampled_from([*CASES, THREADS]),
    taken=st.integers(0, 3),
    queued=st.integers(0, 2),
    form=st.sampled_from(["limiter", "other-limiter", "permit", "opener"]),
)
def test_a_block_of_the_wrong_kind_is_refused_saying_what_to_write(
    case: tuple[str, str], taken: int, queued: int, form: str
) -> None:
    """P62: ``async with limiter:`` (and ``with limiter:`` on the thread
    adapter, which refuses either) raises a ``TypeError`` that says what to
    write, ``limiter.permit(level)`` for a permit and ``open_limiter(...)``
    to open one; a limiter's ``permit(...)`` or ``open_limiter(...)``
    entered by the other kind of block is refused naming the block to
    write. Whatever was taken and whoever waits, the refusal takes no
    permit and changes nothing (the statistics, the waiters), and the
    limiter works on."""
    if case == THREADS:
        with virtual_threads(Fifo(), 1, 3) as limiter:  # (no time passes)
            for _ in range(taken):
                limiter.acquire()
            before = limiter.statistics()
            refused = _refused_thread_block(limiter, form)
            assert limiter.statistics() == before, ("P62: a refused block changed", form)
            assert not limiter.closed
            assert limiter.try_acquire() == (taken < 3), "P62: the limiter no longer works"
        _check_refusal(refused, form, "with")
        return

    refusals: list[TypeError] = []

    async def main() -> None:
        async with (
            anyio.create_task_group() as tg,
            OPENERS[case[1]](Fifo(), 1, 3) as limiter,
        ):
            for _ in range(taken):
                await limiter.acquire()
            waiting = max(0, taken + queued - 3)
            for _ in range(queued):
                tg.start_soon(_hold, limiter)
            await until(lambda: limiter.statistics().levels[0].pushed == taken + queued, "queued")
            before = limiter.statistics()
            refusals.append(await _refused_async_block(limiter, form, OPENERS[case[1]]))
            assert limiter.statistics() == before, ("P62: a refused block changed", form)
            assert len(limiter.machine) == waiting, "P62: a refused block changed the waiters"
            assert not limiter.closed
            with anyio.fail_after(10):
                await limiter.acquire()  # (it works on)

    run(case, main)
    _check_refusal(refusals[0], form, "async with")


async def _hold(limiter: BaseLimiter) -> None:
    """Acquire and keep the permit; a limiter that closes first ends it."""
    with suppress(LimiterClosed):
        await limiter.acquire()


async def _refused_async_block(
    limiter: BaseLimiter, form: str, opener: Callable[..., Any]
) -> TypeError:
    """The TypeError entering ``form`` wrongly gives, on an async limiter
    (``opener`` its adapter's ``open_limiter``)."""
    block: Any
    try:
        if form in ("limiter", "other-limiter"):
            async with limiter:
                pass
        elif form == "permit":
            block = limiter.permit(0)
            with block:
                pass
        else:
            block = opener(Fifo(), 1)
            with block:
                pass
    except TypeError as error:
        return error
    raise AssertionError(f"P62: {form} entered wrongly was not refused")


def _refused_thread_block(limiter: threads.Limiter, form: str) -> TypeError:
    """The TypeError entering ``form`` wrongly gives, on a thread limiter."""

    async def enter(block: Any) -> None:
        async with block:
            pass

    try:
        if form == "limiter":
            with limiter:
                pass
        elif form == "other-limiter":
            anyio.run(enter, limiter)
        elif form == "permit":
            anyio.run(enter, limiter.permit(0))
        else:
            anyio.run(enter, threads.open_limiter(Fifo(), 1))
    except TypeError as error:
        return error
    raise AssertionError(f"P62: {form} entered wrongly was not refused")


def _check_refusal(error: TypeError, form: str, keyword: str) -> None:
    """The refusal says what to write, in the limiter's own kind of block."""
    said = str(error)
    note(said)
    if form in ("limiter", "other-limiter"):
        assert f"`{keyword} limiter.permit(level):`" in said, ("P62", said)
        assert f"`{keyword} open_limiter(...) as limiter:`" in said, ("P62", said)
    elif form == "permit":
        assert f"`{keyword} limiter.permit(...) as permit:`" in said, ("P62", said)
    else:
        assert f"`{keyword} open_limiter(...) as limiter:`" in said, ("P62", said)


# -- P63: a body's exception leaves as itself ------------------------------------


class Mine(Exception):
    """An exception of the body's own."""


class Halt(BaseException):
    """The body's own of the kind that is no ``Exception`` (as
    ``KeyboardInterrupt`` and ``SystemExit`` are not)."""


@given(
    case=st.sampled_from([*CASES, THREADS]),
    kind=st.sampled_from(["own", "key", "timeout", "group", "closed", "halt"]),
    block=st.sampled_from(["limiter", "permit"]),
    queued=st.integers(0, 2),
)
def test_a_body_s_exception_leaves_the_block_as_itself(
    case: tuple[str, str], kind: str, block: str, queued: int
) -> None:
    """P63: an exception raised in the body of ``async with
    open_limiter(...) as limiter:`` (``with`` on the thread adapter) or of a
    ``limiter.permit(...)`` block leaves the block as itself, the very
    object raised: not wrapped in an ``ExceptionGroup`` (the task group
    that runs trio's and anyio's timer would), not replaced by the
    limiter's closing; whoever waits then wakes with ``LimiterClosed``, and
    the limiter is closed."""
    raised: list[BaseException] = []
    caught: list[BaseException] = []
    ended: list[str] = []

    def error(limiter: Any) -> BaseException:
        if kind == "own":
            made: BaseException = Mine("mine")
        elif kind == "key":
            made = KeyError("mine")
        elif kind == "group":
            made = ExceptionGroup("the body's own group", [Mine("a"), KeyError("b")])
        elif kind == "closed":
            made = LimiterClosed(None)  # (another limiter's, say)
        elif kind == "halt":
            made = Halt("mine")
        else:
            made = AcquireTimeout(0, 0.01)
        raised.append(made)
        return made

    if case == THREADS:
        try:
            # (a permit in 1000 s: on the real clock, the timeout ends first)
            with threads.open_limiter(Fifo(), 0.001, 1) as limiter:
                if kind == "timeout":
                    limiter.acquire()
                    try:
                        limiter.acquire(timeout=0.001)
                    except AcquireTimeout as timeout:
                        raised.append(timeout)
                        raise
                if block == "limiter":
                    raise error(limiter)
                with limiter.permit(0):
                    raise error(limiter)
        except BaseException as leaving:
            caught.append(leaving)
        assert limiter.closed, "P63: the limiter was left open"
    else:

        async def waiter(limiter: BaseLimiter) -> None:
            try:
                await limiter.acquire()
            except LimiterClosed:
                ended.append("LimiterClosed")

        async def body(limiter: BaseLimiter, tg: Any) -> None:
            await limiter.acquire()  # the one permit: whoever comes next waits
            for _ in range(queued):
                tg.start_soon(waiter, limiter)
            await until(lambda: len(limiter.machine) == queued, "queued")
            if kind == "timeout":
                try:
                    await limiter.acquire(timeout=0.01)
                except AcquireTimeout as timeout:
                    raised.append(timeout)
                    raise
            raise error(limiter)

        async def main() -> None:
            async with anyio.create_task_group() as tg:
                try:
                    async with OPENERS[case[1]](Fifo(), 1, 1) as limiter:
                        if block == "limiter":
                            await body(limiter, tg)
                        else:
                            async with limiter.permit(0):
                                await body(limiter, tg)
                except BaseException as leaving:
                    caught.append(leaving)
            assert limiter.closed, "P63: the limiter was left open"

        run(case, main)
        assert ended == ["LimiterClosed"] * queued, ("P63: the waiters did not wake closed", ended)
    note(f"raised {raised!r}, caught {caught!r}")
    assert len(raised) == 1
    assert caught, "P63: nothing left the block"
    assert caught[0] is raised[0], ("P63: the body's exception left changed", caught)


# -- P64: the live calls wake whom they decided for and re-plan at once ----------


@attrs.frozen
class Acquire:
    level: int
    cost: int


@attrs.frozen
class SetLimit:
    rate: int
    burst: int | None


@attrs.frozen
class Pause:
    length: int  # ns


@attrs.frozen
class Word:
    quota: bool
    remaining: int
    reset_after: int  # ns


@attrs.frozen
class Settle:
    caller: int
    actual: int


Op = Acquire | SetLimit | Pause | Word | Settle


@st.composite
def live_scripts(draw: st.DrawFn) -> tuple[bool, int, int, list[tuple[int, Op]]]:
    strict = draw(st.booleans())
    rate = draw(st.sampled_from([1, 2, 4]))
    burst = draw(st.integers(1, 3))
    ticks = st.integers(0, 256).map(lambda k: k * STEP)
    op = st.one_of(
        st.builds(Acquire, level=st.integers(0, 1), cost=st.integers(1, 3)),
        st.builds(
            SetLimit, rate=st.sampled_from([1, 2, 4, 16]), burst=st.none() | st.integers(1, 3)
        ),
        st.builds(Pause, length=ticks),
        st.builds(Word, quota=st.booleans(), remaining=st.integers(0, 3), reset_after=ticks),
        st.builds(Settle, caller=st.integers(0, 9), actual=st.integers(0, 3)),
    )
    times = sorted(draw(st.lists(st.integers(0, 96).map(lambda k: 4 * k * STEP), max_size=14)))
    steps = [(at, draw(op)) for at in times]
    # Callers first, so that the other calls find some waiting.
    lead = draw(
        st.lists(
            st.builds(Acquire, level=st.integers(0, 1), cost=st.integers(1, 3)),
            min_size=1,
            max_size=5,
        )
    )
    return strict, rate, burst, [(0, a) for a in lead] + steps


#: A settle that gives two units back to two waiters at once.
_TWO_WOKEN = (
    False,
    1,
    2,
    [(0, Acquire(0, 2)), (0, Acquire(0, 1)), (0, Acquire(0, 1)), (4 * STEP, Settle(0, 0))],
)


@given(case=st.sampled_from(CASES), script=live_scripts())
@example(case=CASES[0], script=_TWO_WOKEN)
@example(case=CASES[2], script=_TWO_WOKEN)
def test_a_live_call_wakes_whom_it_decided_for_and_re_plans_the_timer_at_once(
    case: tuple[str, str], script: tuple[bool, int, int, list[tuple[int, Op]]]
) -> None:
    """P64: each of ``set_limit``, ``pause_for``, ``adopt``, ``quota`` and
    ``Permit.settle`` wakes at once, in no time, every caller whose permit
    the machine's operation decided (each proceeds at the call's instant),
    and re-plans the timer at once: the next permit is decided at the
    machine's ``next_tick()`` as it stands after the call, whether the call
    brought it sooner (a raised rate, a settle that gives units back) or
    put it off (a pause, the upstream's word). On random scripts of those
    calls among waiting callers of costs 1 to 3, on every event-loop
    adapter; the driver wakes at every tick the machine plans and finds it
    done."""
    strict, rate, burst, steps = script
    note(f"{'strict' if strict else 'fifo'} rate={rate} burst={burst} steps={steps}")
    proceeded: dict[int, int] = {}
    failed: dict[int, str] = {}
    permits: dict[int, Permit] = {}

    async def main() -> None:
        callers = 0
        policy = StrictPriority(2) if strict else Fifo(2)
        async with (
            anyio.create_task_group() as tg,
            OPENERS[case[1]](policy, rate, burst, settle_window=1.0) as limiter,
        ):
            start = now()

            async def caller(i: int, op: Acquire) -> None:
                try:
                    permits[i] = await limiter.acquire(op.level, cost=op.cost)
                except Exception as error:
                    failed[i] = type(error).__name__
                    return
                proceeded[i] = now()

            def quiet() -> bool:
                """Every caller waits or has finished, and no tick is due."""
                unfinished = callers - len(proceeded) - len(failed)
                due = limiter.machine.next_tick()
                return unfinished == len(limiter.machine) and (due is None or due > now())

            async def settle(why: str) -> None:
                await until(quiet, f"P64: {why} at {now() - start} ns")

            async def sleep_until(at: int) -> None:
                """Until ``at``, waking at every tick the machine plans on
                the way: each must have been done then."""
                while now() < at:
                    due = limiter.machine.next_tick()
                    stop = at if due is None else max(now(), min(at, due))
                    await anyio.sleep((stop - now()) / 1e9)
                    await settle(f"the tick planned for {stop - start} ns was not done")

            for at, op in steps:
                await sleep_until(start + at)
                if isinstance(op, Acquire):
                    tg.start_soon(caller, callers, op)
                    callers += 1
                    await settle("a caller neither waits nor finished")
                    continue
                before = len(proceeded)
                waiting = len(limiter.machine)
                # (refused: a burst below a waiting cost; a settle past its window)
                with suppress(PermitValueError, PermitTypeError, NotRefundable):
                    _call(limiter, op, permits)
                decided = waiting - len(limiter.machine)
                await settle(f"{op} decided for {decided} callers but did not wake them")
                woken = list(proceeded.values())[before:]
                assert len(proceeded) - before == decided, ("P64", op, decided, woken)
                assert all(t == now() for t in woken), ("P64: woken later than the call", op)
            # 30 s more: every planned tick on the way is checked
            await sleep_until(now() + 30 * SECOND)

    run(case, main)


def _call(limiter: BaseLimiter, op: Op, permits: dict[int, Permit]) -> None:
    if isinstance(op, SetLimit):
        limiter.set_limit(rate=op.rate, burst=op.burst)
    elif isinstance(op, Pause):
        limiter.pause_for(op.length / 1e9)
    elif isinstance(op, Word):
        word = limiter.quota if op.quota else limiter.adopt
        word(op.remaining, op.reset_after / 1e9)
    elif isinstance(op, Settle) and op.caller in permits:
        permits[op.caller].settle(op.actual)


# -- P65: pause_left ------------------------------------------------------------


@attrs.frozen
class Read:
    """A reading of ``pause_left()``."""


@given(
    case=st.sampled_from([*CASES, THREADS]),
    steps=st.lists(
        st.tuples(
            st.integers(0, 64).map(lambda k: k * STEP),
            st.one_of(
                st.builds(Pause, length=st.integers(0, 128).map(lambda k: k * STEP)),
                st.builds(
                    Word,
                    quota=st.booleans(),
                    remaining=st.integers(0, 2),
                    reset_after=st.integers(0, 256).map(lambda k: k * STEP),
                ),
                st.just(Read()),
                st.just(Read()),
            ),
        ),
        max_size=12,
    ),
)
def test_pause_left_is_the_time_to_the_latest_end_of_the_limiter_s_own_pauses(
    case: tuple[str, str], steps: list[tuple[int, Pause | Word | Read]]
) -> None:
    """P65: ``pause_left()`` is the seconds from the clock's now to the
    latest end of the limiter's own ``pause_for`` calls, ``0.0`` once it is
    past (and before any): a later pause that ends sooner shortens nothing,
    it runs down with the clock between calls, and the upstream's word
    (``adopt``, ``quota``), which holds permits back too, is not a pause.
    On every adapter, at random times, on virtual time."""
    readings: list[tuple[float, int]] = []

    def step(limiter: Any, op: Pause | Word | Read, at: int, end: int) -> int:
        if isinstance(op, Pause):
            limiter.pause_for(op.length / 1e9)
            return max(end, at + op.length)
        if isinstance(op, Word):
            word = limiter.quota if op.quota else limiter.adopt
            word(op.remaining, op.reset_after / 1e9)
        else:
            readings.append((limiter.pause_left(), max(0, end - at)))
        return end

    if case == THREADS:
        with virtual_threads(Fifo(), 10, 2) as limiter:
            end = 0
            for gap, op in steps:
                limiter.clock[0] += gap
                end = step(limiter, op, limiter.clock[0], end)
            readings.append((limiter.pause_left(), max(0, end - limiter.clock[0])))
    else:

        async def main() -> None:
            async with OPENERS[case[1]](Fifo(), 10, 2) as limiter:
                start = now()
                end = start
                for gap, op in steps:
                    await anyio.sleep(gap / 1e9)
                    end = step(limiter, op, now(), end)
                readings.append((limiter.pause_left(), max(0, end - now())))
                del start

        run(case, main)
    note(f"readings (pause_left(), ns left): {readings}")
    for left, expected in readings:
        assert left == expected / SECOND, ("P65: pause_left() is not the pause left", readings)


# -- P109: pause_until, a moment of the wall clock ------------------------------


@given(
    case=st.sampled_from([*CASES, THREADS]),
    ahead=st.integers(-(10**7), 10**9).map(lambda us: timedelta(microseconds=us)),
    zone=st.sampled_from(
        [timezone.utc, timezone(timedelta(hours=-7)), timezone(timedelta(hours=5, minutes=30))]
    ),
    before=st.integers(0, 64).map(lambda k: k * STEP),
)
def test_pause_until_a_moment_pauses_for_the_wall_clock_s_time_to_it(
    case: tuple[str, str], ahead: timedelta, zone: timezone, before: int
) -> None:
    """P109: ``pause_until(when)``, for an aware ``when`` in any time zone,
    pauses as ``pause_for`` the seconds from the wall clock's now, as the
    call runs, to ``when``: none for a moment past. On every adapter, on
    virtual time (which the wall clock does not follow): ``pause_left()``
    and ``paused_ns`` just after the call lie between ``when`` less the
    wall clock after the call and ``when`` less the wall clock before it."""
    seen: list[tuple[float, int, float, float]] = []

    def pause(limiter: Any) -> None:
        when = (datetime.now(timezone.utc) + ahead).astimezone(zone)
        first = datetime.now(timezone.utc)
        limiter.pause_until(when)
        last = datetime.now(timezone.utc)
        least = max(when - last, timedelta(0)) / timedelta(seconds=1)
        most = max(when - first, timedelta(0)) / timedelta(seconds=1)
        seen.append((limiter.pause_left(), limiter.statistics().paused_ns, least, most))

    if case == THREADS:
        with virtual_threads(Fifo(), 10, 2) as limiter:
            limiter.clock[0] += before
            pause(limiter)
    else:

        async def main() -> None:
            async with OPENERS[case[1]](Fifo(), 10, 2) as limiter:
                await anyio.sleep(before / 1e9)
                pause(limiter)

        run(case, main)
    note(f"(pause_left(), paused_ns, least, most): {seen}")
    [(left, paused_ns, least, most)] = seen
    assert least - 1e-9 <= left <= most + 1e-9, ("P109: pause_left() is not the time to it", seen)
    assert least * SECOND - 1 <= paused_ns <= most * SECOND + 1, ("P109: paused_ns", seen)


# -- P66: Permit.settle's window and refusals ------------------------------------


@attrs.frozen
class Take:
    cost: int


@attrs.frozen
class Close:
    """The limiter closes (its block ends); the script goes on after it."""


@given(
    case=st.sampled_from([*CASES, THREADS]),
    rate=st.sampled_from([4, 1000]),
    window=st.sampled_from([0.0, 0.5, 1.0]),
    steps=st.lists(
        st.tuples(
            st.one_of(st.integers(0, 8).map(lambda k: 16 * k * STEP), st.just(128 * STEP)),
            st.one_of(
                st.builds(Take, cost=st.integers(1, 3)),
                # (caller: how far back from the latest caller)
                st.builds(Settle, caller=st.integers(0, 3), actual=st.integers(0, 6)),
                st.builds(Settle, caller=st.integers(0, 3), actual=st.integers(0, 6)),
                st.just(Close()),
            ),
        ),
        max_size=16,
    ),
)
# a settle at the very instant the window ends (that instant included)
@example(
    case=CASES[0],
    rate=1000,
    window=0.5,
    steps=[(0, Take(1)), (128 * STEP, Settle(caller=0, actual=0))],
)
@example(
    case=THREADS,
    rate=1000,
    window=0.5,
    steps=[(0, Take(1)), (128 * STEP, Settle(caller=0, actual=2))],
)
def test_a_permit_settles_once_within_the_settle_window_of_its_caller_proceeding(
    case: tuple[str, str],
    rate: int,
    window: float,
    steps: list[tuple[int, Take | Settle | Close]],
) -> None:
    """P66: ``permit.settle(actual)`` is accepted once, within
    ``settle_window`` seconds of its caller proceeding (that instant
    included), and then counts ``actual`` as the units granted; otherwise
    it is refused with ``NotRefundable`` whose ``argument`` is ``permit``
    and ``.id`` the ``Permit``, its message naming ``settle_window`` (with
    ``settle_window=0``, the default, saying to open the limiter with one),
    and changes nothing; after the limiter closed, ``LimiterClosed``. On
    every adapter, at random times on virtual time, the callers granted at
    once or after a wait (at 4 units a second, from a bucket of 3; on the
    thread adapter, whose clock the test moves, at once)."""
    window_ns = round(window * SECOND)
    permits: list[tuple[Permit, int]] = []  # (permit, when its caller proceeded)
    settled: set[int] = set()
    held: list[int] = []  # the units each caller holds
    outcomes: list[tuple[str, str]] = []

    def expected(index: int, at: int, closed: bool) -> str:
        if closed:
            return "LimiterClosed"
        if window_ns == 0 or index in settled or at - permits[index][1] > window_ns:
            return "NotRefundable"
        return "ok"

    def settle(limiter: Any, op: Settle, at: int, closed: bool) -> None:
        index = len(permits) - 1 - op.caller
        if index < 0:
            return
        permit = permits[index][0]
        want = expected(index, at, closed)
        before = None if closed else limiter.statistics()
        refused: NotRefundable | None = None
        try:
            permit.settle(op.actual)
        except NotRefundable as error:
            refused = error
            outcomes.append((want, "NotRefundable"))
        except LimiterClosed:
            outcomes.append((want, "LimiterClosed"))
        else:
            outcomes.append((want, "ok"))
            settled.add(index)
            held[index] = op.actual
        if refused is not None:
            assert refused.argument == "permit", ("P66", refused.argument)
            assert refused.id is permit, ("P66", refused.id)
            said = str(refused)
            expect = "(settle_window=0" if window_ns == 0 else f"settle_window={window!r}"
            assert expect in said, ("P66: the refusal does not name settle_window", said)
            assert limiter.statistics() == before, "P66: a refused settle changed something"
        if not closed:
            granted = limiter.statistics().levels[0].units_granted
            assert granted == (sum(held),), ("P66: units granted are not as settled", granted)

    if case == THREADS:
        with virtual_threads(Fifo(), 1000, 200, settle_window=window) as limiter:
            closed = False
            for gap, op in steps:
                limiter.clock[0] += gap
                if isinstance(op, Close):
                    limiter.close()
                    closed = True
                elif isinstance(op, Take) and not closed:
                    permits.append((limiter.acquire(cost=op.cost), limiter.clock[0]))
                    held.append(op.cost)
                elif isinstance(op, Settle):
                    settle(limiter, op, limiter.clock[0], closed)
    else:

        async def main() -> None:
            rest = list(steps)
            async with OPENERS[case[1]](
                Fifo(), rate, 3 if rate < 1000 else 200, settle_window=window
            ) as limiter:
                while rest:
                    gap, op = rest.pop(0)
                    await anyio.sleep(gap / 1e9)
                    if isinstance(op, Close):
                        break
                    if isinstance(op, Take):
                        permits.append((await limiter.acquire(cost=op.cost), now()))
                        held.append(op.cost)
                    else:
                        settle(limiter, op, now(), False)
            for gap, op in rest:
                await anyio.sleep(gap / 1e9)
                if isinstance(op, Settle):
                    settle(limiter, op, now(), True)

        run(case, main)
    note(f"(expected, got): {outcomes}")
    assert all(want == got for want, got in outcomes), ("P66", outcomes)


# -- P67: the level of an acquire that names none ---------------------------------


@attrs.frozen
class Ask:
    """An acquire (``try_``: a ``try_acquire``; ``block``: a ``permit()``
    block) at ``level``, ``None`` for none named."""

    level: int | None
    how: str


@attrs.frozen
class Enter:
    """Enter a ``level(value)`` block, as a ``with`` or by calling a
    function decorated with it, around the steps that follow, to ``Leave``."""

    value: int
    decorated: bool


@attrs.frozen
class Leave:
    pass


@given(
    case=st.sampled_from([*CASES, THREADS]),
    default=st.integers(0, 3),
    steps=st.lists(
        st.one_of(
            st.builds(
                Ask,
                level=st.none() | st.integers(0, 3),
                how=st.sampled_from(["acquire", "try", "block"]),
            ),
            st.builds(Enter, value=st.integers(0, 3), decorated=st.booleans()),
            st.just(Leave()),
        ),
        max_size=16,
    ),
)
def test_an_acquire_that_names_no_level_is_at_its_context_s_level_or_the_default(
    case: tuple[str, str], default: int, steps: list[Ask | Enter | Leave]
) -> None:
    """P67: an ``acquire``, ``try_acquire`` or ``permit()`` block that
    names no level (``None``) asks at the level of the innermost
    ``level(n)`` block it runs in (a ``with level(n):``, or a function
    decorated with ``@level(n)`` while its code runs), and outside any at
    the limiter's ``default_level``; one that names a level asks at that
    one. Its permit has that level, and the level counts it as pushed. On
    every adapter, in nested blocks that are left again."""
    asked: list[tuple[int, int, int]] = []  # (expected, the permit's, where pushed)

    def pushed(limiter: Any) -> list[int]:
        return [lv.pushed for lv in limiter.statistics().levels]

    def expected(ask: Ask, blocks: list[int]) -> int:
        if ask.level is not None:
            return ask.level
        return blocks[-1] if blocks else default

    def where(before: list[int], after: list[int]) -> int:
        changed = [i for i, (b, a) in enumerate(zip(before, after, strict=True)) if a != b]
        assert len(changed) == 1, ("P67: not one level counted the acquire", before, after)
        return changed[0]

    if case == THREADS:
        with threads.open_limiter(StrictPriority(4), 1000, 100, default_level=default) as tl:

            def ask_thread(ask: Ask) -> int:
                if ask.how == "try":
                    assert tl.try_acquire(ask.level)
                    return -1
                if ask.how == "block":
                    with tl.permit(ask.level) as permit:
                        return permit.level
                return tl.acquire(ask.level).level

            def walk_threads(rest: list[Ask | Enter | Leave], blocks: list[int]) -> None:
                while rest:
                    step = rest.pop(0)
                    if isinstance(step, Leave):
                        if blocks:
                            return
                        continue
                    if isinstance(step, Enter):
                        inner = [*blocks, step.value]
                        if step.decorated:
                            level(step.value)(walk_threads)(rest, inner)
                        else:
                            with level(step.value):
                                walk_threads(rest, inner)
                        continue
                    before = pushed(tl)
                    got = ask_thread(step)
                    lv = where(before, pushed(tl))
                    asked.append((expected(step, blocks), lv if got == -1 else got, lv))

            walk_threads(list(steps), [])
    else:

        async def main() -> None:
            opener = OPENERS[case[1]]
            async with opener(StrictPriority(4), 1000, 100, default_level=default) as limiter:

                async def ask_async(ask: Ask) -> int:
                    if ask.how == "try":
                        assert limiter.try_acquire(ask.level)
                        return -1
                    if ask.how == "block":
                        async with limiter.permit(ask.level) as permit:
                            return permit.level
                    return (await limiter.acquire(ask.level)).level

                async def walk(rest: list[Ask | Enter | Leave], blocks: list[int]) -> None:
                    while rest:
                        step = rest.pop(0)
                        if isinstance(step, Leave):
                            if blocks:
                                return
                            continue
                        if isinstance(step, Enter):
                            inner = [*blocks, step.value]
                            if step.decorated:
                                await level(step.value)(walk)(rest, inner)
                            else:
                                with level(step.value):
                                    await walk(rest, inner)
                            continue
                        before = pushed(limiter)
                        got = await ask_async(step)
                        lv = where(before, pushed(limiter))
                        asked.append((expected(step, blocks), lv if got == -1 else got, lv))

                await walk(list(steps), [])

        run(case, main)
    note(f"(expected, the permit's level, counted at): {asked}")
    assert all(want == got == lv for want, got, lv in asked), ("P67", asked)


# -- P68: fail fast with max_wait ---------------------------------------------------


@attrs.frozen
class Fast:
    """An acquire at ``level`` for ``cost``, with ``max_wait`` (ns) or none."""

    level: int
    cost: int
    max_wait: int | None


@given(
    case=st.sampled_from(CASES),
    rate=st.sampled_from([1, 2, 4]),
    burst=st.integers(1, 3),
    steps=st.lists(
        st.tuples(
            st.integers(0, 64).map(lambda k: 4 * k * STEP),
            st.builds(
                Fast,
                level=st.integers(0, 1),
                cost=st.integers(1, 3),
                max_wait=st.none() | st.integers(0, 512).map(lambda k: k * STEP),
            ),
        ),
        min_size=1,
        max_size=12,
    ),
)
def test_an_acquire_with_max_wait_is_refused_at_once_if_and_only_if_its_best_case_is_longer(
    case: tuple[str, str], rate: int, burst: int, steps: list[tuple[int, Fast]]
) -> None:
    """P68: ``acquire(max_wait=m)`` raises ``WouldWaitTooLong`` if and only
    if the machine's ``min_wait`` for it (its level, cost and flow, after
    the tick to the acquire's instant) exceeds ``m``: at that instant, with
    ``.level`` its level, ``.estimated`` that ``min_wait`` in seconds and
    ``.max_wait`` ``m``; counted as its level's ``too_long``, and nobody
    else's wait changed (the waiters are those before it). Otherwise it
    waits (or is granted) as without ``max_wait``. On every event-loop
    adapter, among waiting callers, at random times on virtual time."""
    refusals: list[tuple[Fast, int, Any]] = []  # (the acquire, the best case, what it raised)
    seen: list[tuple[Fast, int, str]] = []

    async def main() -> None:
        async with (
            anyio.create_task_group() as tg,
            OPENERS[case[1]](StrictPriority(2), rate, burst) as limiter,
        ):
            start = now()
            started = 0
            finished: list[int] = []

            def quiet() -> bool:
                due = limiter.machine.next_tick()
                waiting = started - len(finished)
                return waiting == len(limiter.machine) and (due is None or due > now())

            async def caller(op: Fast, best: int) -> None:
                asked = now()
                try:
                    await limiter.acquire(
                        op.level,
                        cost=op.cost,
                        max_wait=None if op.max_wait is None else op.max_wait / 1e9,
                    )
                except WouldWaitTooLong as error:
                    assert now() == asked, "P68: the refusal took time"
                    refusals.append((op, best, error))
                    seen.append((op, best, "refused"))
                except PermitValueError:
                    seen.append((op, best, "bad cost"))  # (above the burst)
                else:
                    seen.append((op, best, "granted"))
                finished.append(1)

            for at, op in sorted(steps, key=lambda step: step[0]):
                await anyio.sleep(max(0, start + at - now()) / 1e9)
                await until(quiet, "P68: the callers never settled")
                # The best case the push compares: the machine's min_wait
                # after a tick to now (on a copy: the limiter's is its own).
                shadow = copy.deepcopy(limiter.machine)
                shadow.tick(now())
                best = -1 if op.cost > burst else shadow.min_wait(op.level, cost=op.cost)
                before = limiter.statistics().levels[op.level].too_long
                waiters = len(limiter.machine)
                started += 1
                tg.start_soon(caller, op, best)

                def ran(op: Fast = op, waiters: int = waiters) -> bool:
                    """The caller started has an outcome, or waits."""
                    return any(o is op for o, _, _ in seen) or len(limiter.machine) > waiters

                await until(ran, "P68: the caller neither waits nor finished")
                if any(o is op and outcome == "refused" for o, _, outcome in seen):
                    assert len(limiter.machine) == waiters, "P68: a refusal changed the waiters"
                    after = limiter.statistics().levels[op.level].too_long
                    assert after == before + 1, ("P68: the refusal was not counted", before, after)
            await anyio.sleep(600)  # (the others are granted)

    run(case, main)
    note(f"(acquire, best case ns, outcome): {seen}")
    for op, best, outcome in seen:
        if outcome == "bad cost":
            continue
        too_long = op.max_wait is not None and best > op.max_wait
        assert (outcome == "refused") == too_long, ("P68", op, best, outcome)
    for op, best, error in refusals:
        assert error.level == op.level, ("P68", error.level)
        assert error.estimated == best / SECOND, ("P68: the estimate", error.estimated, best)
        assert op.max_wait is not None
        assert error.max_wait == op.max_wait / 1e9, ("P68", error.max_wait)


# -- P69: bad input to an adapter ---------------------------------------------------


class _Floating(tzinfo):
    """A time zone that names no offset: a datetime in it is naive."""

    def utcoffset(self, dt: datetime | None) -> None:
        return None

    def dst(self, dt: datetime | None) -> None:
        return None

    def tzname(self, dt: datetime | None) -> None:
        return None


#: (the call, its arguments, the argument named, the error): every call an
#: adapter takes from its user, with a bad value of each argument.
BAD_CALLS: list[tuple[str, dict[str, Any], str, type[Exception]]] = [
    ("acquire", {"level": -1}, "level", PermitValueError),
    ("acquire", {"level": 4}, "level", PermitValueError),
    ("acquire", {"level": "0"}, "level", PermitTypeError),
    ("acquire", {"level": 1.0}, "level", PermitTypeError),
    ("acquire", {"level": True}, "level", PermitTypeError),
    ("acquire", {"cost": 0}, "cost", PermitValueError),
    ("acquire", {"cost": -1}, "cost", PermitValueError),
    ("acquire", {"cost": 4}, "cost", PermitValueError),
    ("acquire", {"cost": "1"}, "cost", PermitTypeError),
    ("acquire", {"cost": {"nope": 1}}, "cost", PermitValueError),
    # a mapping's bad entry, named by its entry
    ("acquire", {"cost": {"units": -1}}, "cost['units']", PermitValueError),
    ("acquire", {"cost": {"units": 4}}, "cost['units']", PermitValueError),
    ("acquire", {"cost": {"units": 1.0}}, "cost['units']", PermitTypeError),
    ("acquire", {"flow": []}, "flow", PermitTypeError),
    ("acquire", {"timeout": -1}, "timeout", PermitValueError),
    ("acquire", {"timeout": math.nan}, "timeout", PermitValueError),
    ("acquire", {"timeout": "1"}, "timeout", PermitTypeError),
    ("acquire", {"max_wait": -1}, "max_wait", PermitValueError),
    ("acquire", {"max_wait": math.nan}, "max_wait", PermitValueError),
    ("acquire", {"max_wait": True}, "max_wait", PermitTypeError),
    ("permit", {"level": -1}, "level", PermitValueError),
    ("permit", {"cost": 4}, "cost", PermitValueError),
    ("try_acquire", {"level": 4}, "level", PermitValueError),
    ("try_acquire", {"cost": 0}, "cost", PermitValueError),
    ("try_acquire", {"flow": {}}, "flow", PermitTypeError),
    ("set_limit", {"rate": 0}, "rate", PermitValueError),
    ("set_limit", {"rate": math.nan}, "rate", PermitValueError),
    ("set_limit", {"rate": math.inf}, "rate", PermitValueError),
    ("set_limit", {"rate": "1"}, "rate", PermitTypeError),
    ("set_limit", {"burst": 0}, "burst", PermitValueError),
    ("set_limit", {"burst": 1.5}, "burst", PermitTypeError),
    ("set_limit", {"rate": 1, "limit": "nope"}, "limit", PermitValueError),
    ("set_limit", {}, "rate", PermitTypeError),
    ("pause_for", {"seconds": -1}, "seconds", PermitValueError),
    ("pause_for", {"seconds": math.nan}, "seconds", PermitValueError),
    ("pause_for", {"seconds": math.inf}, "seconds", PermitValueError),
    ("pause_for", {"seconds": "1"}, "seconds", PermitTypeError),
    ("pause_until", {"when": datetime(2030, 1, 1)}, "when", PermitValueError),  # naive
    # naive too: a time zone that names no offset
    ("pause_until", {"when": datetime(2030, 1, 1, tzinfo=_Floating())}, "when", PermitValueError),
    ("pause_until", {"when": 30.0}, "when", PermitTypeError),
    ("pause_until", {"when": date(2030, 1, 1)}, "when", PermitTypeError),
    ("pause_until", {"when": "2030-01-01T00:00:00Z"}, "when", PermitTypeError),
    ("adopt", {"remaining": -1, "reset_after": 1}, "remaining", PermitValueError),
    ("adopt", {"remaining": 1.5, "reset_after": 1}, "remaining", PermitTypeError),
    ("adopt", {"remaining": 1, "reset_after": -1}, "reset_after", PermitValueError),
    ("adopt", {"remaining": 1, "reset_after": math.inf}, "reset_after", PermitValueError),
    ("adopt", {"remaining": 1, "reset_after": 1, "limit": "nope"}, "limit", PermitValueError),
    ("quota", {"remaining": -1, "reset_after": 1}, "remaining", PermitValueError),
    ("quota", {"remaining": 1, "reset_after": math.nan}, "reset_after", PermitValueError),
    ("quota", {"remaining": 1, "reset_after": math.inf}, "reset_after", PermitValueError),
    ("settle", {"actual": -1}, "actual", PermitValueError),
    ("settle", {"actual": "1"}, "actual", PermitTypeError),
    ("settle", {"actual": {"nope": 1}}, "actual", PermitValueError),
    ("settle", {"actual": {"units": -1}}, "actual['units']", PermitValueError),
]


@given(
    case=st.sampled_from([*CASES, THREADS]),
    taken=st.integers(0, 3),
    queued=st.integers(0, 2),
    paused=st.booleans(),
    bad=st.sampled_from(BAD_CALLS),
)
def test_a_bad_argument_is_refused_by_name_and_changes_nothing(
    case: tuple[str, str],
    taken: int,
    queued: int,
    paused: bool,
    bad: tuple[str, dict[str, Any], str, type[Exception]],
) -> None:
    """P69: a bad argument of an adapter's call (``acquire``,
    ``try_acquire``, ``permit``, ``set_limit``, ``pause_for``, ``adopt``,
    ``quota``, ``Permit.settle``: a level out of range or not an ``int``, a
    cost of no unit, above the burst or naming no limit, an unhashable
    flow, a duration below 0, NaN, infinite where a pause or a reset must
    end, or not a number, a rate not finite and above 0, a burst below 1,
    an unknown limit) raises the ``PermitValueError`` or
    ``PermitTypeError`` naming it (``argument``, and ``argument=value`` at
    the start of the message), and changes nothing: the statistics, the
    waiters, the limits and the pause are as they were, the limiter stays
    open and works on. On every adapter, whatever was taken and whoever
    waits (none on the thread adapter)."""
    name, arguments, argument, kind = bad
    errors: list[Exception] = []

    def state(limiter: Any) -> tuple[Any, ...]:
        waiters = [(w.id, w.level, w.cost, w.flow) for w in limiter.machine.waiting()]
        return (limiter.statistics(), waiters, limiter.limits, limiter.pause_left())

    async def call(limiter: Any, permit: Permit) -> None:
        try:
            if name == "settle":
                permit.settle(**arguments)
            elif name == "permit":
                block = limiter.permit(**arguments)
                if case == THREADS:
                    with block:
                        pass
                else:
                    async with block:
                        pass
            elif name == "acquire" and case != THREADS:
                await limiter.acquire(**arguments)
            else:
                getattr(limiter, name)(**arguments)
        except Exception as error:
            errors.append(error)

    if case == THREADS:
        with virtual_threads(StrictPriority(4), 10, 3, settle_window=1.0) as tl:
            permit = tl.acquire()
            for _ in range(taken - 1):
                tl.acquire()
            if paused:
                tl.pause_for(1.0)
            before = state(tl)
            anyio.run(call, tl, permit)
            assert state(tl) == before, ("P69: a refused call changed the limiter", bad)
            assert not tl.closed, ("P69: a refused call closed the limiter", bad)
            tl.set_limit(rate=1000, burst=3)
            tl.clock[0] += 2 * SECOND
            tl.acquire()  # (it works on)
    else:

        async def main() -> None:
            async with (
                anyio.create_task_group() as tg,
                OPENERS[case[1]](StrictPriority(4), 10, 3, settle_window=1.0) as limiter,
            ):
                permit = await limiter.acquire()
                for _ in range(taken - 1):
                    await limiter.acquire()
                for _ in range(queued):
                    tg.start_soon(_hold, limiter)
                if paused:
                    limiter.pause_for(1.0)
                await until(
                    lambda: limiter.statistics().levels[0].pushed == max(1, taken) + queued, ""
                )
                before = state(limiter)
                await call(limiter, permit)
                assert state(limiter) == before, ("P69: a refused call changed the limiter", bad)
                assert not limiter.closed, ("P69: a refused call closed the limiter", bad)
                with anyio.fail_after(10):
                    await limiter.acquire()  # (it works on)

        run(case, main)
    assert errors, ("P69: a bad argument was not refused", bad)
    error = errors[0]
    assert type(error) is kind, ("P69: refused with another error", bad, error)
    assert isinstance(error, (PermitValueError, PermitTypeError))
    assert error.argument == argument, ("P69: the error names another argument", bad, error)
    value = arguments.get(argument)
    if argument.endswith("]"):  # a mapping's entry: cost['units']
        whole, _, key = argument[:-1].partition("[")
        value = arguments[whole][ast.literal_eval(key)]
    assert str(error).startswith(f"{argument}={value!r}"), ("P69: the message", bad, error)


# -- P80: seconds as nanoseconds ------------------------------------------------

#: Durations in seconds: ints, floats, the decimals a user types, and floats
#: at half a nanosecond (where the rounding shows).
DURATIONS = st.one_of(
    st.integers(0, 10**4),
    st.floats(0, 1e4),
    st.builds(lambda n, e: n / 10**e, st.integers(0, 10**10), st.integers(0, 12)),
    st.integers(0, 10**4).map(lambda k: (k + 0.5) * 1e-9),
    st.integers(0, 10**6).map(lambda k: k + 0.5e-9),
)


def as_ns(seconds: float) -> int:
    """SPEC.md's rule: ``round(seconds * 10**9)`` as Python computes it (an
    ``int`` exactly, a ``float`` by the float product), ties to even."""
    return round(seconds * 1e9) if isinstance(seconds, float) else seconds * 10**9


@given(
    case=st.sampled_from([*CASES, THREADS]),
    pause=DURATIONS,
    max_wait=DURATIONS,
    reset_after=DURATIONS,
    timeout=DURATIONS,
    window=DURATIONS,
    nearby=st.booleans(),
)
# ints past 2**53 ns (about 104 days), where the float product is not exact
# (10**10 + 1 s is 10000000000999999488 ns as a float): drawn ints are smaller
@example(
    case=THREADS,
    pause=10**10 + 1,
    max_wait=10**10,
    reset_after=10**10 + 3,
    timeout=10**11 + 7,
    window=10**10 + 1,
    nearby=False,
)
@example(
    case=CASES[0],
    pause=10**10 + 1,
    max_wait=10**10 + 1,
    reset_after=10**10 + 3,
    timeout=10**11 + 7,
    window=10**10 + 1,
    nearby=False,
)
def test_a_duration_in_seconds_is_its_nearest_nanosecond_of_the_float_product(
    case: tuple[str, str],
    pause: float,
    max_wait: float,
    reset_after: float,
    timeout: float,
    window: float,
    nearby: bool,
) -> None:
    """P80: a duration an adapter takes in seconds (``timeout``,
    ``max_wait``, ``pause_for``'s ``seconds``, ``reset_after``,
    ``settle_window``) is ``round(seconds * 10**9)`` nanoseconds as Python
    computes it: an ``int`` exactly, a ``float`` as the floating-point
    product, rounded to the nearest whole nanosecond, ties to even. So a
    pause counts exactly that (``paused_ns``), an acquire's deadline is
    that after its push, a ``max_wait`` is refused exactly when the pause
    ahead of it is longer, a quota holds until exactly that after it, and
    a permit settles exactly until that after its caller proceeded. On
    every adapter (the settle window on the thread adapter, whose clock the
    test moves by the nanosecond)."""
    if nearby:  # a max_wait at the pause, or a float's width from it
        max_wait = float(pause) if isinstance(pause, int) else pause
        max_wait = math.nextafter(max_wait, math.inf if timeout > window else 0.0)
    P, M, R, T, W = map(as_ns, (pause, max_wait, reset_after, timeout, window))
    note(f"ns: pause {P}, max_wait {M}, reset_after {R}, timeout {T}, settle_window {W}")
    seen: list[str] = []

    def paused(limiter: Any) -> None:
        """The pause counts P ns, and a max_wait behind it is refused iff P > M."""
        limiter.pause_for(pause)
        assert limiter.statistics().paused_ns == P, ("P80: pause_for", P)

    def judged(outcome: BaseException | Permit) -> None:
        want = "too long" if P > M else ("granted" if P == 0 else "timed out")
        got = (
            "too long"
            if isinstance(outcome, WouldWaitTooLong)
            else "timed out"
            if isinstance(outcome, AcquireTimeout)
            else "granted"
        )
        assert got == want, ("P80: max_wait", P, M, outcome)
        seen.append(got)

    def quota(limiter: Any) -> None:
        """A quota of 0 holds every cost until exactly R ns from now."""
        limiter.quota(0, reset_after)
        assert limiter.machine.min_wait(0) == R, ("P80: reset_after", R)

    def deadline(limiter: Any) -> None:
        (waiter,) = limiter.machine.waiting()
        assert waiter.deadline is not None
        assert waiter.deadline - waiter.pushed_at == T, ("P80: timeout", T, waiter)

    if case == THREADS:
        with virtual_threads(Fifo(), 1000, 1) as limiter:
            paused(limiter)
            try:
                judged(limiter.acquire(timeout=0, max_wait=max_wait))
            except (WouldWaitTooLong, AcquireTimeout) as error:
                judged(error)
        with virtual_threads(Fifo(), 1000, 1) as limiter:
            quota(limiter)
        with virtual_threads(Fifo(), 1000, 1) as limiter:
            limiter.acquire()
            outcome: list[str] = []
            waiter = threading.Thread(target=_quietly, args=(limiter, timeout, outcome))
            waiter.start()
            until_it_waits(limiter, outcome)
            if T == 0:
                waiter.join(60)
                assert outcome == ["timed out"], ("P80: timeout 0 waited", outcome)
            else:
                deadline(limiter)
            limiter.close()
            waiter.join(60)
        with virtual_threads(Fifo(), 1000, 5, settle_window=window) as limiter:
            first = limiter.acquire()
            limiter.clock[0] += W
            if W:
                first.settle(2)  # the last instant of its window
            second = limiter.acquire()
            limiter.clock[0] += W + 1
            try:
                second.settle(2)
            except NotRefundable:
                seen.append("settle refused past its window")
            else:
                raise AssertionError(("P80: settle_window", W))
    else:

        async def main() -> None:
            async with OPENERS[case[1]](Fifo(), 1000, 1) as limiter:
                paused(limiter)
                try:
                    judged(await limiter.acquire(timeout=0, max_wait=max_wait))
                except (WouldWaitTooLong, AcquireTimeout) as error:
                    judged(error)
            async with OPENERS[case[1]](Fifo(), 1000, 1) as limiter:
                quota(limiter)
            async with OPENERS[case[1]](Fifo(), 1000, 1) as limiter:
                await limiter.acquire()
                if T == 0:
                    with suppress(AcquireTimeout):
                        await limiter.acquire(timeout=timeout)
                        raise AssertionError(("P80: timeout 0 waited", timeout))
                    return
                async with anyio.create_task_group() as tg:

                    async def wait() -> None:
                        with suppress(AcquireTimeout):
                            await limiter.acquire(timeout=timeout)

                    tg.start_soon(wait)
                    await until(lambda: bool(limiter.machine.waiting()), "nobody waited")
                    deadline(limiter)
                    tg.cancel_scope.cancel()

        run(case, main)
    note(f"seen: {seen}")


def _quietly(limiter: threads.Limiter, timeout: float, outcome: list[str]) -> None:
    """An acquire that waits until its deadline or the limiter's closing,
    saying which ended it."""
    try:
        limiter.acquire(timeout=timeout)
    except AcquireTimeout:
        outcome.append("timed out")
    except LimiterClosed:
        outcome.append("closed")


# -- P87: an infinite timeout or max_wait is no bound -----------------------------

#: A duration with no end: infinite, or too long for a float to hold its
#: nanoseconds (``1e300`` s, ``10**400`` s); or none given.
ENDLESS = st.sampled_from([None, math.inf, 1e300, 10**400])


@given(
    case=st.sampled_from([*CASES, THREADS]),
    timeout=ENDLESS,
    max_wait=ENDLESS,
    pause=st.integers(1, 10**6),
    rate=st.sampled_from([1, 1000]),
)
def test_an_infinite_timeout_or_max_wait_is_no_bound(
    case: tuple[str, str], timeout: Any, max_wait: Any, pause: int, rate: int
) -> None:
    """P87: an acquire whose ``timeout`` or ``max_wait`` is infinite
    (``math.inf``, or a number of seconds whose nanoseconds a float cannot
    hold) acquires as one that gives none: behind a pause of ``pause``
    seconds (its best case that long) it is not refused as too long, it
    waits with no deadline, and is granted as the pause ends, having
    waited exactly the pause; nothing is counted as expired or too long.
    On every adapter of one process (the thread adapter's clock moved by
    the test)."""
    P = pause * SECOND
    stats: list[Any] = []

    def waits(limiter: Any) -> None:
        (waiter,) = limiter.machine.waiting()
        assert waiter.deadline is None, ("P87: a deadline", waiter)
        assert limiter.machine.min_wait(0) >= P - (limiter.machine.now - waiter.pushed_at)

    if case == THREADS:
        with virtual_threads(Fifo(), rate, 1) as limiter:
            limiter.acquire()
            limiter.pause_for(pause)
            outcome: list[Any] = []

            def call() -> None:
                try:
                    outcome.append(limiter.acquire(timeout=timeout, max_wait=max_wait))
                except Exception as error:  # (the test reads it)
                    outcome.append(error)

            caller = threading.Thread(target=call)
            caller.start()
            until_it_waits(limiter, outcome)
            assert not outcome, ("P87: it did not wait", outcome)
            waits(limiter)
            limiter.clock[0] = P - 1
            limiter.pause_for(0)  # (a tick now)
            waits(limiter)
            limiter.clock[0] = P
            limiter.pause_for(0)
            caller.join(60)  # (a busy host)
            assert outcome, "P87: never granted"
            assert isinstance(outcome[0], Permit), ("P87", outcome)
            stats.append(limiter.statistics().levels[0])
    else:

        async def main() -> None:
            async with OPENERS[case[1]](Fifo(), rate, 1) as limiter:
                await limiter.acquire()
                start = now()
                limiter.pause_for(pause)
                async with anyio.create_task_group() as tg:
                    got: list[Any] = []

                    async def call() -> None:
                        got.append(await limiter.acquire(timeout=timeout, max_wait=max_wait))
                        got.append(now())

                    tg.start_soon(call)
                    await until(lambda: bool(limiter.machine.waiting() or got), "never asked")
                    assert not got, ("P87: it did not wait", got)
                    waits(limiter)
                    await anyio.sleep(pause / 2)
                    waits(limiter)
                await until(lambda: len(got) == 2, "P87: never granted")
                assert isinstance(got[0], Permit)
                assert got[1] == start + P, ("P87: granted at", got[1] - start, P)
                stats.append(limiter.statistics().levels[0])

        run(case, main)
    (level,) = stats
    note(f"{level}")
    assert (level.expired, level.too_long) == (0, 0), ("P87", level)
    assert level.wait_max_ns == P, ("P87: its wait", level.wait_max_ns, P)
