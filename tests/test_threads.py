"""The thread adapter, with real threads on the real clock.

Times are real, so every check is one a loaded machine cannot break: orders
(decided by the machine under one lock, not by the scheduler), counts, the
limit (grants never come early, however late they come), and the CPU the
waiting takes. The order of grants is compared with the core on the same
pushes, as the conformance suite does for the async adapters.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import multiprocessing
import os
import signal
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from contextlib import suppress
from typing import Any, NoReturn

import pytest

from permits.adapters import AcquireTimeout, LimiterClosed, Permit, threads
from permits.adapters.threads import Limiter, open_limiter
from permits.core import (
    SECOND,
    Decision,
    Fifo,
    Limit,
    Machine,
    NotRefundable,
    PermitTypeError,
    Shares,
    State,
    StrictPriority,
)

pytestmark = pytest.mark.timeout(60)


def until(condition: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("the condition never held")
        time.sleep(0.001)


class Recording:
    """The limiter's machine, noting the level of every grant in the order
    the machine made them (thread wake-ups may come in any order)."""

    def __init__(self, machine: Machine) -> None:
        self._machine = machine
        self.levels: list[int] = []
        self.times: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._machine, name)

    def __len__(self) -> int:
        return len(self._machine)

    def _note(self, decisions: list[Decision]) -> list[Decision]:
        for d in decisions:
            if d.state is State.GRANTED:
                self.levels.append(d.level)
                self.times.append(d.at)
        return decisions

    def tick(self, now: int) -> list[Decision]:
        return self._note(self._machine.tick(now))

    def push(self, *args: Any, **options: Any) -> list[Decision]:
        return self._note(self._machine.push(*args, **options))


def test_many_threads_contend_in_priority_order_within_the_limit() -> None:
    """64 threads queue one after another while nothing is granted, then the
    limit opens: they are granted in the core's order for the same pushes
    (strict priority, FIFO within a level), never faster than the limit,
    and the waiting burns no CPU (no polling)."""
    rate, threads = 200, 64
    levels = [i % 3 % 2 for i in range(threads)]  # 0, 1, 0, 0, 1, 0, ...
    done = []
    with open_limiter(StrictPriority(2), 0.01) as limiter:  # one permit per 100 s
        limiter.acquire(0)  # the banked permit: the rest queue
        recording = Recording(limiter.machine)
        limiter._machine = recording  # type: ignore[assignment]

        def call(i: int) -> None:
            limiter.acquire(levels[i])
            done.append(i)

        workers = [threading.Thread(target=call, args=(i,)) for i in range(threads)]
        for n, worker in enumerate(workers):
            worker.start()
            until(lambda n=n: len(limiter.machine) > n)
        cpu = time.process_time()
        limiter.set_limit(rate=rate)
        for worker in workers:
            worker.join()
        cpu = time.process_time() - cpu
    core = Machine(StrictPriority(2), rate)
    core.push("first", 0, 0)
    for i, lv in enumerate(levels):
        core.push(i, lv, 0)
    expected: list[int] = []
    while (at := core.next_tick()) is not None:
        expected += [d.level for d in core.tick(at)]
    assert recording.levels == expected, "the core's order"
    assert sorted(done) == list(range(threads))
    span = (recording.times[-1] - recording.times[0]) / SECOND
    assert span >= (threads - 2) / rate, ("faster than the limit", span)
    assert cpu < 0.5 * span + 0.5, ("the waiting took CPU", cpu, span)


def test_a_thread_that_times_out_costs_no_permit() -> None:
    """(One permit in 10 s: the second acquire comes long before the next,
    however late a loaded machine makes it.)"""
    with open_limiter(Fifo(), 0.1) as limiter:
        limiter.acquire()
        start = time.monotonic()
        with pytest.raises(AcquireTimeout):
            limiter.acquire(timeout=0.05)
        assert time.monotonic() - start >= 0.05
        stats = limiter.statistics().levels[0]
        assert (stats.granted, stats.expired) == (1, 1)
        assert len(limiter.machine) == 0
        assert limiter.machine.in_flight == 0


class Charging:
    """The limiter's machine, noting the time of every charge: each permit
    counts from the moment its caller proceeds (a take of a free permit,
    or the spend of one in flight), at the adapter's clock."""

    def __init__(self, machine: Machine) -> None:
        self._machine = machine
        self.times: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._machine, name)

    def __len__(self) -> int:
        return len(self._machine)

    def take(self, id: Any, level: int, now: int, **options: Any) -> list[Decision]:
        decisions = self._machine.take(id, level, now, **options)
        if decisions and decisions[-1].id == id and decisions[-1].state is State.GRANTED:
            self.times.append(now)
        return decisions

    def try_take(self, id: Any, level: int, now: int, **options: Any) -> bool:
        granted = self._machine.try_take(id, level, now, **options)
        if granted:
            self.times.append(now)
        return granted

    def spend(self, id: Any, now: int, **options: Any) -> list[Decision]:
        flying = self._machine.in_flight
        decisions = self._machine.spend(id, now, **options)
        # (the spend's tick may grant others first, each one more in flight)
        granted = sum(decision.state is State.GRANTED for decision in decisions)
        if self._machine.in_flight - granted < flying:
            self.times.append(now)
        return decisions


def test_threads_proceed_within_the_limit() -> None:
    """P26 on the thread adapter: 60 threads, a third of them with a short
    timeout (most reach it), acquire at scattered moments; over every window
    of ``d`` ns, the permits charged as their callers proceeded number at
    most ``burst + floor(rate * (d + 1 ns))``, and the permits granted and
    not refunded equal the callers that proceeded (a thread that timed out
    cost none)."""
    rate, burst, threads_ = 200, 2, 60
    shuffle = [(i * 37) % threads_ for i in range(threads_)]
    proceeded: list[int] = []
    with open_limiter(StrictPriority(2), rate, burst) as limiter:
        charging = Charging(limiter.machine)
        limiter._machine = charging  # type: ignore[assignment]

        def call(i: int) -> None:
            time.sleep(shuffle[i] / 1000)
            timeout = 0.002 * (i % 10) if i % 3 == 0 else None
            try:
                limiter.acquire(i % 2, timeout=timeout)
            except AcquireTimeout:
                return
            proceeded.append(i)

        workers = [threading.Thread(target=call, args=(i,)) for i in range(threads_)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        stats = limiter.statistics()
    times = sorted(charging.times)
    over = [
        (times[i], times[j])
        for i in range(len(times))
        for j in range(i, len(times))
        if j - i + 1 > burst + rate * (times[j] - times[i] + 1) // SECOND
    ]
    assert not over, ("P26: more callers proceeded in a window than the limit allows", over)
    refunded = sum(level.refunded for level in stats.levels)
    assert stats.granted - refunded == len(proceeded) == len(times), (stats, len(proceeded))
    print(f"{len(proceeded)} of {threads_} proceeded; the others timed out")


def test_a_misspelt_option_names_open_limiter() -> None:
    with (
        pytest.raises(TypeError, match=r"^permits\.adapters\.threads\.open_limiter\(\) got an "),
        open_limiter(Fifo(), 10, settle_windw=60.0),  # type: ignore[call-arg]
    ):
        pass


def test_an_open_limiter_used_unopened_says_how_to_open_it() -> None:
    """``limiter = open_limiter(...)`` then ``limiter.acquire()``, or an
    ``async with`` of it, are refused saying to write ``with
    open_limiter(...) as limiter:``; the ``with`` then opens it."""
    opening: Any = open_limiter(Fifo(), 10)
    with pytest.raises(
        AttributeError, match=r"has no 'acquire': write `with open_limiter\(\.\.\.\) as limiter:`"
    ):
        opening.acquire  # noqa: B018

    async def enter() -> None:
        async with opening:
            pass

    with pytest.raises(TypeError, match=r"its own kind of block: write `with open_limiter"):
        asyncio.run(enter())
    with opening as limiter:
        assert isinstance(limiter, Limiter)
        limiter.acquire()


def test_a_limiter_says_what_it_is() -> None:
    with open_limiter(Fifo(), 10, burst=2) as limiter:
        said = repr(limiter)
    assert said == (
        "<permits.adapters.threads.Limiter policy=Fifo(levels=1) "
        "limits={'units': Limit(rate=Fraction(10, 1), burst=2)} waiting=0>"
    )
    assert repr(limiter).endswith(" closed>")


def test_costs_flows_settle_and_a_pause() -> None:
    """The core's features through the blocking API: flows take turns, a
    settle gives units back, a pause holds everyone. (A pause of a second,
    timed from a reading before it is set: on the real clock of a loaded
    machine any time at all may pass between setting it and reading what
    is left, so what is left is bounded by the readings around both.)"""
    limits = {"requests": Limit(1000, burst=10), "tokens": Limit(1000, burst=100)}
    with open_limiter(Fifo(), limits=limits, settle_window=60.0) as limiter:
        permit = limiter.acquire(cost={"requests": 1, "tokens": 100})
        permit.settle({"requests": 1, "tokens": 10})  # 90 tokens back
        assert limiter.try_acquire(cost={"tokens": 90}), "the 90 given back are free now"
        with pytest.raises(NotRefundable, match=r"settle_window=60\.0 seconds$"):
            permit.settle({"tokens": 0})
        with limiter.permit(flow="acme") as held:
            assert held.flow == "acme"
        start = time.monotonic_ns()  # the limiter's clock
        limiter.pause_for(1.0)
        limiter.pause_for(0.5)  # shortens nothing
        left = limiter.pause_left()
        passed = (time.monotonic_ns() - start) / SECOND
        assert 1.0 - passed <= left <= 1.0, (left, passed)
        limiter.acquire(cost=1)
        assert time.monotonic_ns() - start >= SECOND
        assert limiter.pause_left() == 0.0


def waiting_thread(limiter: Limiter, woken: list[BaseException]) -> threading.Thread:
    """A started thread whose acquire waits on ``limiter``, and appends the
    ``LimiterClosed`` it wakes with to ``woken``."""

    def wait() -> None:
        try:
            limiter.acquire()
        except LimiterClosed as error:
            woken.append(error)

    thread = threading.Thread(target=wait)
    thread.start()
    return thread


def test_bad_input_and_close() -> None:
    """Bad input is refused; closing wakes a waiter. (One permit in 10 s:
    the waiter's thread queues long before the next; at 10 a second, on a
    loaded machine it could start after it and never wait.)"""
    with open_limiter(Fifo(), 0.1) as limiter:
        with pytest.raises(PermitTypeError):
            limiter.acquire(flow=["unhashable"])  # type: ignore[arg-type]
        limiter.acquire()
        errors: list[BaseException] = []
        waiter = waiting_thread(limiter, errors)
        until(lambda: len(limiter.machine) == 1)
    waiter.join()
    assert len(errors) == 1, "closing wakes the waiter with LimiterClosed"


def test_with_a_limiter_is_refused_saying_what_to_write() -> None:
    """``with limiter:`` would take no permit (a ``threading.Semaphore``'s
    takes one): refused, saying what to write, as ``async with`` is on the
    async limiters (the thread limiter's error was Python's, naming no way
    out, and its ``async with`` advised ``async with limiter.permit()``,
    which no thread can write); the limiter still works."""
    import asyncio

    with open_limiter(Fifo(), 10) as limiter:
        with pytest.raises(TypeError, match=r"`with limiter\.permit\(level\):`"), limiter:
            pass

        async def async_with() -> None:
            async with limiter:
                pass

        with pytest.raises(TypeError, match=r"`with limiter\.permit\(level\):`"):
            asyncio.run(async_with())
        limiter.acquire()


def test_a_permit_entered_by_async_with_says_to_write_with() -> None:
    """``async with limiter.permit(level):`` (the async adapters' idiom) on
    a thread limiter is refused saying to write ``with`` and, in an event
    loop, which adapter to use (Python's own error named contextlib's
    private class); it takes no permit."""
    import asyncio

    with open_limiter(Fifo(), 10) as limiter:

        async def async_with() -> None:
            block: Any = limiter.permit()
            async with block:
                pass

        with pytest.raises(
            TypeError, match=r"write `with limiter\.permit\(\.\.\.\) as permit:`.*asyncio"
        ):
            asyncio.run(async_with())
        assert limiter.statistics().levels[0].pushed == 0
        with limiter.permit() as permit:
            assert permit.level == 0


def test_an_open_limiter_entered_twice_says_to_call_it_again() -> None:
    """An ``open_limiter(...)`` kept and entered a second time (contextlib
    said ``AttributeError: args``) is refused saying to call
    ``open_limiter`` for each block."""
    opening = open_limiter(Fifo(), 10)
    with opening as limiter:
        limiter.acquire()
    with (
        pytest.raises(RuntimeError, match=r"entered once: call open_limiter\(\.\.\.\) again"),
        opening,
    ):
        pass


def test_a_pools_thread_does_not_inherit_the_level_a_decorated_function_does() -> None:
    """As README says: ``with level(BATCH):`` around ``pool.submit(fetch)``
    leaves the pool's thread at ``default_level`` (a context variable is not
    passed to it), the most urgent by default; ``level(BATCH)(fetch)``
    submitted is at BATCH."""
    from concurrent.futures import ThreadPoolExecutor

    from permits.adapters import level

    with open_limiter(StrictPriority(2), 100, 5) as limiter:

        def fetch() -> int:
            return limiter.acquire().level

        with level(1), ThreadPoolExecutor(1) as pool:
            assert pool.submit(fetch).result() == 0
            assert pool.submit(level(1)(fetch)).result() == 1


def test_a_limiter_made_by_hand_refuses_at_once() -> None:
    limiter = Limiter(Fifo(), 10)
    with pytest.raises(RuntimeError, match=r"with open_limiter\(\.\.\.\)"):
        limiter.acquire()


def test_an_interrupt_leaves_no_permit_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt can land between any two bytecodes of the main
    thread: one as a permit free at once is about to be taken takes none;
    one just after a waiter's permit was granted gives the permit back; one
    just after the waiter was queued withdraws it. None leaves a permit in
    flight or a waiter queued with nobody to take it. (A permit a second:
    each acquire after the first finds none free, however late a loaded
    machine makes it; at 20 a second one 50 ms late took a free one.)"""
    from permits.adapters import _base

    def interrupt(*args: object) -> NoReturn:
        raise KeyboardInterrupt

    with threads.open_limiter(Fifo(), 1, 1) as limiter:  # a permit a second
        with monkeypatch.context() as patch:
            patch.setattr(_base, "_permit", interrupt)  # as the permit free is taken
            with pytest.raises(KeyboardInterrupt):
                limiter.acquire()
        assert limiter.statistics().levels[0].pushed == 0, "nothing was taken"
        limiter.acquire()  # the permit free
        made: list[object] = []
        original = _base._permit

        def second(*args: object) -> object:
            made.append(args)  # the first is made for a take, which finds no permit free
            if len(made) == 2:
                interrupt()  # after the grant, before the caller has it
            return original(*args)  # type: ignore[arg-type]

        with monkeypatch.context() as patch:
            patch.setattr(_base, "_permit", second)
            with pytest.raises(KeyboardInterrupt):
                limiter.acquire()  # waits for the next permit
        assert len(made) == 2
        assert limiter.machine.in_flight == 0
        assert limiter.statistics().levels[0].refunded == 1
        assert limiter.try_acquire(), "the permit came back"

        class Interrupted(dict[int, object]):
            def __setitem__(self, key: int, value: object) -> None:
                interrupt()  # after the push, before the waiter is registered

        with monkeypatch.context() as patch:
            patch.setattr(limiter, "_waiters", Interrupted())
            with pytest.raises(KeyboardInterrupt):
                limiter.acquire()
        assert len(limiter.machine) == 0, "not left queued"
        assert limiter.statistics().levels[0].cancelled == 1


def test_an_interrupt_while_a_waiting_call_is_recorded_leaves_it_queued_for_nobody(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A KeyboardInterrupt after the push, before the acquire knows its
    waiter (here: as the recording adds the call) withdraws it: it was
    left queued with no thread to take its permit, which the timer was
    never told of, and every later acquire waited behind it for ever. (A
    permit a second: the second acquire finds none free, however late a
    loaded machine makes it; at 20 a second one 50 ms late took a free one.)"""
    from permits.adapters import _recording

    add = _recording.Recording.add

    def interrupt(*args: Any, **options: Any) -> NoReturn:
        monkeypatch.setattr(_recording.Recording, "add", add)  # once
        raise KeyboardInterrupt

    with open_limiter(Fifo(), 1, 1) as limiter:  # a permit a second
        limiter.acquire()
        recording = limiter.record()
        monkeypatch.setattr(_recording.Recording, "add", interrupt)
        with pytest.raises(KeyboardInterrupt):
            limiter.acquire()  # waits for the next permit: pushed, then recorded
        assert len(limiter.machine) == 0, "left queued"
        assert limiter.statistics().levels[0].cancelled == 1
        limiter.acquire(timeout=5.0)  # the next permit, within a second
        assert limiter.machine.in_flight == 0
    assert len(recording.calls) == 1


def test_an_interrupted_threads_permit_goes_to_the_next_waiter_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """P26 on the thread adapter: a thread interrupted after its permit was
    decided, before it proceeded with it (a KeyboardInterrupt, the one way
    out of a wait a thread has but its timeout), hands it back, and the
    thread waiting behind it gets it at once, not a permit interval (a
    second) later."""
    from permits.adapters import _base

    original = _base._permit
    interrupted: list[float] = []

    def interrupt_once(*args: object) -> object:
        # (a take makes its Permit first: only a decided permit, in flight)
        main = threading.current_thread() is threading.main_thread()
        if main and limiter.machine.in_flight and not interrupted:
            interrupted.append(time.monotonic())
            raise KeyboardInterrupt
        return original(*args)  # type: ignore[arg-type]

    resumed: list[float] = []
    with open_limiter(Fifo(), 1, 1) as limiter:  # a permit a second
        limiter.acquire()

        def behind() -> None:
            until(lambda: len(limiter.machine) == 1)  # the main thread waits first
            limiter.acquire()
            resumed.append(time.monotonic())

        other = threading.Thread(target=behind)
        other.start()
        monkeypatch.setattr(_base, "_permit", interrupt_once)
        with pytest.raises(KeyboardInterrupt):
            limiter.acquire()  # granted in a second, interrupted as it proceeds
        other.join()
        stats = limiter.statistics().levels[0]
    assert (stats.granted, stats.refunded) == (3, 1)
    assert resumed[0] - interrupted[0] < 0.5, "the next waiter waited for a permit of its own"


def test_a_newcomer_granted_before_another_waiter_proceeds() -> None:
    """A push may grant its newcomer and then a waiter behind it in the same
    call (``Shares`` with costs): the newcomer's thread proceeds at once,
    and no permit is left in flight for nobody."""
    with open_limiter(Shares((1, 1, 1)), 0.001, 5) as limiter:  # nothing refills
        limiter.acquire(2)  # 4 units left
        outcomes: list[str] = []

        def call(lv: int, cost: int, timeout: float | None) -> None:
            try:
                limiter.acquire(lv, cost=cost, timeout=timeout)
                outcomes.append(f"granted {lv}")
            except AcquireTimeout:
                outcomes.append(f"timed out {lv}")

        big = threading.Thread(target=call, args=(0, 5, 0.5))  # chosen, short of units
        big.start()
        until(lambda: len(limiter.machine) == 1)
        mid = threading.Thread(target=call, args=(2, 3, None))
        mid.start()
        until(lambda: len(limiter.machine) == 2)
        newcomer = threading.Thread(target=call, args=(1, 1, 5.0))
        newcomer.start()
        newcomer.join(2.0)
        assert not newcomer.is_alive(), "the newcomer was left waiting"
        for worker in (mid, big):
            worker.join()
        assert limiter.machine.in_flight == 0
    assert sorted(outcomes) == ["granted 1", "granted 2", "timed out 0"], outcomes


def test_a_call_under_way_when_the_recording_starts_is_not_in_it(tmp_path: Any) -> None:
    """A thread starts a recording while another thread's acquire, which
    read the clock before it, is under way (here: held in its flow's
    weight): that call is not the recording's, so no row of the trace is
    earlier than its start, and the trace reads back. (The recording
    starts once the call is done: ``record`` waits for the limiter's lock,
    which the call holds; the other thread is given a moment, in which it
    cannot finish.)"""
    from permits.sim import read_trace

    started: list[Any] = []
    others: list[threading.Thread] = []

    def weight(flow: object) -> int:
        if not others:  # another thread starts recording, meanwhile
            other = threading.Thread(target=lambda: started.append(limiter.record()))
            others.append(other)
            other.start()
            other.join(0.2)
        return 1

    with open_limiter(Fifo(), 100, flow_weights=weight) as limiter:
        limiter.acquire(flow="acme")
        others[0].join(10)
        limiter.acquire(flow="acme")
    [recording] = started
    assert [call.at_ns >= 0 for call in recording.calls] == [True]
    path = tmp_path / "trace.csv"
    recording.write(path)
    with path.open(encoding="utf-8", newline="") as file:
        assert len(list(read_trace(file))) == 1


def test_a_wait_inside_an_event_loop_warns() -> None:
    """A blocking acquire that has to wait, called from a thread that runs
    an event loop (asyncio or trio), blocks every task of that loop: it
    warns, naming the adapter to use; one that finds a permit free, or that
    waits in a thread with no loop, does not."""
    import asyncio

    import trio

    def blocked(limiter: Limiter) -> None:
        with pytest.raises(AcquireTimeout), pytest.warns(RuntimeWarning) as warned:
            limiter.acquire(timeout=0.01)
        assert len(warned) == 1
        assert warned[0].filename == __file__  # it points at the caller's line
        assert str(warned[0].message).startswith("acquire waits in a thread that runs")
        with (
            pytest.raises(AcquireTimeout),
            pytest.warns(RuntimeWarning) as warned,
            limiter.permit(timeout=0.01),
        ):
            pass
        # through permit() too (it pointed at permit's own line in threads.py)
        assert (warned[0].filename, len(warned)) == (__file__, 1)

    with open_limiter(Fifo(), rate=0.01, burst=1) as limiter:  # the next permit in 100 s

        async def asyncio_task() -> None:
            limiter.acquire()  # a permit free: no wait, no warning
            blocked(limiter)
            assert "permits.adapters.asyncio" in str(_last_warning(limiter))

        async def trio_task() -> None:
            blocked(limiter)
            assert "permits.adapters.trio" in str(_last_warning(limiter))

        asyncio.run(asyncio_task())
        trio.run(trio_task)
        with pytest.raises(AcquireTimeout):  # no loop here: no warning (warnings are errors)
            limiter.acquire(timeout=0.01)


def _last_warning(limiter: Limiter) -> Warning:
    """The warning a waiting acquire gives here, caught again."""
    with pytest.raises(AcquireTimeout), pytest.warns(RuntimeWarning) as warned:
        limiter.acquire(timeout=0.01)
    return warned[0].message  # type: ignore[return-value]


class _State:
    """A caller's state, in its frame."""


def test_a_closed_limiter_keeps_no_callers_frame_alive() -> None:
    """Each thread refused by a closed limiter, and each woken by its
    closing, raises a LimiterClosed of its own: one instance raised again
    and again kept every raise's frames, and their locals, in its traceback."""
    woken: list[BaseException] = []
    with open_limiter(Fifo(), 1) as limiter:
        limiter.acquire()
        threads_ = [waiting_thread(limiter, woken) for _ in range(2)]
        until(lambda: limiter.statistics().waiting == 2)
    for thread in threads_:
        thread.join()
    assert len(woken) == 2
    assert woken[0] is not woken[1]
    kept: list[weakref.ref[_State]] = []

    def call() -> None:
        state = _State()
        kept.append(weakref.ref(state))
        limiter.acquire()

    refused: list[LimiterClosed] = []
    for _ in range(3):
        for call_once in (call, limiter.try_acquire, lambda: limiter.pause_for(1.0)):
            try:
                call_once()
            except LimiterClosed as error:
                refused.append(error)
    assert len({id(error) for error in refused}) == len(refused) == 9
    refused.clear()
    woken.clear()
    gc.collect()
    assert [ref() for ref in kept] == [None] * 3, "a refused caller's frame is kept"


def reap(pid: int) -> None:
    """Wait for the child ``pid`` to end, within 30 s; a child that hangs
    is killed, and the test fails."""
    try:
        until(lambda: os.waitpid(pid, os.WNOHANG) != (0, 0), seconds=30.0)
    except AssertionError:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise AssertionError("the child hung") from None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX's")
def test_a_limiter_opened_before_a_fork_works_in_the_child() -> None:
    """A limiter opened before ``os.fork`` (an app a pre-forking server
    loads first, then forks into workers) works in the child: its timer
    thread is not copied into the child, which starts its own, and the
    parent's waiters, whose threads are not there either, are withdrawn
    there (each would have been granted a permit that no thread spends).
    In the child every wait hung, its timeout too. (A permit a second: the
    parent's thread queues long before the next, however late a loaded
    machine starts it; at 20 a second one 50 ms late took a free one.)"""
    with open_limiter(Fifo(), 1, 1) as limiter:
        limiter.acquire()
        parent = threading.Thread(target=limiter.acquire)
        parent.start()
        until(lambda: limiter.statistics().waiting == 1)
        read, write = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # forking with threads, 3.12
            pid = os.fork()
        if pid == 0:  # the child: report, and never return into pytest
            outcome = "granted"
            try:
                for _ in range(3):
                    limiter.acquire(timeout=5.0)
                try:
                    limiter.acquire(timeout=0.001)
                except AcquireTimeout:
                    outcome += ", then timed out"
            except BaseException as error:
                outcome = repr(error)
            os.write(write, outcome.encode())
            os._exit(0)
        os.close(write)
        reap(pid)
        with os.fdopen(read) as pipe:
            assert pipe.read() == "granted, then timed out"
        parent.join()


def in_a_child(report: Callable[[], str], forked: threading.Event | None = None) -> str:
    """Fork; in the child, what ``report()`` says (or the error it raised).
    ``forked`` is set in the parent once the child is made."""
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # forking with threads, 3.12
        pid = os.fork()
    if pid == 0:  # the child: report, and never return into pytest
        try:
            outcome = report()
        except BaseException as error:
            outcome = repr(error)
        os.write(write, outcome.encode())
        os._exit(0)
    os.close(write)
    if forked is not None:
        forked.set()
    reap(pid)
    with os.fdopen(read) as pipe:
        return pipe.read()


def three_acquires_in_a_child(
    limiter: Limiter, forked: threading.Event, state: Callable[[], str]
) -> str:
    """Fork; in the child, the limiter's ``state`` and three acquires (5 s
    each at most): what it reports, ``"<state>, granted"`` or the error.
    ``forked`` is set in the parent once the child is made."""

    def report() -> str:
        outcome = state()
        try:
            for _ in range(3):
                limiter.acquire(timeout=5.0)
        except BaseException as error:
            return f"{outcome}, {error!r}"
        return f"{outcome}, granted"

    return in_a_child(report, forked)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX's")
def test_a_permit_in_flight_at_a_fork_is_not_lost_in_the_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fork that lands after a waiter was granted its permit, before its
    thread proceeded with it (here: held as its permit is made): that
    thread is not in the child, so nobody there would ever spend the
    permit, which held its place in the bucket for ever. With a burst of
    1, every wait in the child timed out; the child hands it back. (The
    thread holds the lock until the fork is made, which waits for it 50 ms,
    not a second.)"""
    from permits.adapters import _base

    monkeypatch.setattr(threads, "_FORK_WAIT_S", 0.05)

    # The next permit 500 ms away: the thread below must find none free
    # (its take would succeed, and no permit be held, were it 50 ms late).
    with open_limiter(Fifo(), 2, 1) as limiter:
        limiter.acquire()  # the permit free: the next is 500 ms away
        original = _base._permit
        made: list[object] = []
        granted, forked = threading.Event(), threading.Event()

        def held(*args: object) -> object:
            made.append(args)  # the first is made for a take, which finds no permit free
            if len(made) == 2:  # granted, its permit being made
                granted.set()
                forked.wait()
            return original(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(_base, "_permit", held)
        parent = threading.Thread(target=limiter.acquire)
        parent.start()
        assert granted.wait(10.0)
        monkeypatch.setattr(_base, "_permit", original)
        assert limiter.machine.in_flight == 1
        outcome = three_acquires_in_a_child(
            limiter, forked, lambda: f"in flight: {limiter.machine.in_flight}"
        )
        assert outcome == "in flight: 0, granted"
        parent.join()
        assert limiter.machine.in_flight == 0


class _Units(dict[str, int]):
    """A cost of one unit whose ``get`` (read by the recording as it adds
    the call, after the machine has it) runs ``during`` once."""

    during: Any = None

    def get(self, key: str, default: Any = None) -> Any:
        during, _Units.during = _Units.during, None
        if during is not None:
            during()
        return super().get(key, default)


def test_a_recording_started_while_a_call_is_recorded_learns_how_it_ends() -> None:
    """``record`` from another thread, while a waiting call is being added
    to the recording it replaces, waits for the limiter's lock: the call
    is in the earlier recording, and the new one, told how its waiters
    end, tells it that the call gave up as the limiter closed (without the
    lock, the new recording was made before the call was noted as
    waiting, lost it, and the earlier one kept it waiting for ever). The
    other thread is given a moment to finish, as it did without the lock;
    holding the lock, it cannot (a slow machine only makes it not try)."""
    recordings: list[Any] = []
    with open_limiter(Fifo(), 0.001) as limiter:  # the next permit in 1000 s
        recordings.append(limiter.record())
        limiter.acquire()
        other = threading.Thread(target=lambda: recordings.append(limiter.record()))

        def start_recording() -> None:
            other.start()
            other.join(0.5)

        def call() -> None:
            with pytest.raises(LimiterClosed):
                limiter.acquire(cost=_Units(units=1))

        _Units.during = start_recording
        caller = threading.Thread(target=call)
        caller.start()
        until(lambda: other.ident is not None)  # started by the caller's thread
        other.join(10)
        until(lambda: limiter.statistics().waiting == 1)
    caller.join(10)
    first, second = recordings
    assert [call.give_up_after_ns is not None for call in first.calls] == [False, True]
    assert second.calls == []


def test_close_wakes_the_timer_thread_however_long_it_would_sleep() -> None:
    """``close()`` returns at once, the timer thread ended, though the next
    permit is due only in 1000 s: closing wakes that thread, which would
    otherwise sleep until then (an hour at most) before it saw the close."""
    limiter = Limiter(Fifo(), 0.001)
    limiter._start()
    limiter.acquire()  # the bucket's permit; the next is due in 1000 s
    errors: list[BaseException] = []
    waiter = waiting_thread(limiter, errors)
    until(lambda: len(limiter.machine) == 1)
    closing = threading.Thread(target=limiter.close, daemon=True)
    closing.start()
    closing.join(timeout=20)  # (a margin for a loaded machine: it takes microseconds)
    assert not closing.is_alive(), "close() waits for the timer thread to sleep out"
    waiter.join()
    assert len(errors) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX's")
def test_a_waiter_pushed_but_not_yet_known_at_a_fork_is_withdrawn_in_the_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fork that lands after another thread's waiter was pushed into the
    machine, before the limiter noted it as waiting (here: held as it is
    noted): that thread is not in the child, so its waiter must go there
    too. The child withdrew only the waiters the limiter had noted, and
    left this one queued for nobody: every acquire in the child queued
    behind it, and it took the only permit of the burst, for ever. (A permit
    a second: the parent's thread queues long before the next, however late
    a loaded machine starts it; at 20 a second one 50 ms late took a free
    one. The thread holds the lock until the fork is made, which waits for
    it 50 ms, not a second.)"""
    monkeypatch.setattr(threads, "_FORK_WAIT_S", 0.05)
    pushed, forked = threading.Event(), threading.Event()

    class Held(dict[int, Any]):
        def __setitem__(self, key: int, value: Any) -> None:
            pushed.set()  # in the machine, not yet noted
            forked.wait()
            super().__setitem__(key, value)

    with open_limiter(Fifo(), 1, 1) as limiter:  # a permit a second
        limiter.acquire()  # the permit free: the next thread waits
        limiter._waiters = Held()
        parent = threading.Thread(target=limiter.acquire)
        parent.start()
        assert pushed.wait(10.0)
        assert len(limiter.machine) == 1
        outcome = three_acquires_in_a_child(
            limiter, forked, lambda: f"queued: {len(limiter.machine)}"
        )
        assert outcome == "queued: 0, granted"
        parent.join()


def test_an_interrupt_inside_the_machines_call_breaks_the_limiter_loudly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A KeyboardInterrupt can land between any two bytecodes of the main
    thread, the machine's own among them: here in a push, after the
    waiter is queued, before its deadline is noted. The machine, whose
    calls are not made to be cut short, is left half done (the waiter
    queued for nobody, unknown to the limiter, its deadline lost): every
    caller after it waited behind it, and a later call could fail on the
    half-made state. The limiter breaks instead, at once: the interrupt
    leaves as itself, every waiter wakes with LimiterClosed naming it,
    and so is every later call refused. (One permit in 10 s: the waiter
    queues and the next call pushes long before it, however late a loaded
    machine makes them; at 20 a second one 50 ms late took a free permit.)"""
    from permits.core import _deadlines

    add = _deadlines.Deadlines.add

    def interrupt(*args: Any) -> NoReturn:
        monkeypatch.setattr(_deadlines.Deadlines, "add", add)  # once
        raise KeyboardInterrupt

    woken: list[BaseException] = []
    with open_limiter(Fifo(), 0.1, 1) as limiter:  # a permit in 10 s
        limiter.acquire()  # the permit free: the next callers wait
        waiter = waiting_thread(limiter, woken)
        until(lambda: len(limiter.machine) == 1)
        monkeypatch.setattr(_deadlines.Deadlines, "add", interrupt)
        with pytest.raises(KeyboardInterrupt):
            limiter.acquire(timeout=5.0)
        assert limiter.closed, "the limiter works on, on a machine left half done"
        with pytest.raises(LimiterClosed) as refused:
            limiter.acquire(timeout=5.0)
        assert isinstance(refused.value.cause, KeyboardInterrupt)
        waiter.join(10.0)
        assert not waiter.is_alive()
    assert len(woken) == 1
    assert isinstance(woken[0], LimiterClosed)


class _PopInterrupted(list[Decision]):
    """A push's decisions: the first ``pop`` is interrupted as it returns,
    the decision taken from the list and not yet the caller's."""

    def pop(self, index: Any = -1) -> Decision:
        super().pop(index)
        raise KeyboardInterrupt


def test_an_interrupt_as_the_newcomer_takes_its_decision_hands_the_permit_back() -> None:
    """A push may grant its newcomer at once while others wait (``Shares``
    with costs). A KeyboardInterrupt that lands as the limiter takes that
    grant out of the push's decisions, before the caller knows it (the
    eval loop looks for one as each call returns), withdrew a waiter it
    took to be waiting: the machine had no such waiter, and the permit
    stayed in flight for nobody, for ever. It goes back."""
    with open_limiter(Shares((1, 1)), 0.001, 5) as limiter:  # nothing refills
        limiter.acquire(0, cost=2)  # 3 units left
        woken: list[BaseException] = []

        def wait() -> None:
            try:
                limiter.acquire(0, cost=5)
            except LimiterClosed as error:
                woken.append(error)

        big = threading.Thread(target=wait)
        big.start()  # chosen next, short of units: it waits
        until(lambda: len(limiter.machine) == 1)
        machine = limiter.machine

        class Interrupting:
            def __getattr__(self, name: str) -> Any:
                return getattr(machine, name)

            def __len__(self) -> int:
                return len(machine)

            def push(self, *args: Any, **options: Any) -> list[Decision]:
                limiter._machine = machine  # once
                return _PopInterrupted(machine.push(*args, **options))

        limiter._machine = Interrupting()  # type: ignore[assignment]
        with pytest.raises(KeyboardInterrupt):
            limiter.acquire(1)  # granted at once: a unit is free at level 1
        assert limiter.machine.in_flight == 0, "a permit in flight for nobody"
        assert limiter.statistics().levels[1].refunded == 1
        assert len(limiter.machine) == 1, "the waiter at level 0 waits on"
    big.join()
    assert len(woken) == 1, "the waiter at level 0 waited until the limiter closed"


def _three_waiting_the_first_interrupted_as_woken(
    limiter: Limiter, call: Callable[[int], None]
) -> list[threading.Thread]:
    """Three threads calling ``call(i)``, each queued in turn (a daemon: one
    never woken does not hold up the test run), the first of them woken by
    an event whose ``set`` raises KeyboardInterrupt once, as it returns (the
    eval loop looks for one as each call returns)."""
    callers = []
    for i in range(3):
        caller = threading.Thread(target=call, args=(i,), daemon=True)
        caller.start()
        until(lambda i=i: len(limiter.machine) == i + 1)
        callers.append(caller)
    first = min(limiter._waiters)
    event = limiter._waiters[first].event
    assert event is not None

    class Interrupted:
        interrupted = False

        def set(self) -> None:
            event.set()  # type: ignore[union-attr]
            if not self.interrupted:  # once, as it returns
                self.interrupted = True
                raise KeyboardInterrupt

    limiter._waiters[first].event = Interrupted()
    return callers


def test_an_interrupt_while_waking_the_waiters_granted_wakes_them_all() -> None:
    """A call of the main thread that grants several waiters at once (here
    a settle that gives units back) wakes each in turn; a KeyboardInterrupt that lands as
    the first is woken (the eval loop looks for one as each call returns)
    left the rest asleep for ever, their permits in flight for nobody.
    They are woken; the interrupt goes on as itself."""
    done: list[int] = []

    def call(i: int) -> None:
        with suppress(LimiterClosed):  # (as the limiter closes, if never woken)
            limiter.acquire()
            done.append(i)

    with open_limiter(Fifo(), 0.001, 3, settle_window=60.0) as limiter:  # nothing refills
        permit = limiter.acquire(cost=3)
        callers = _three_waiting_the_first_interrupted_as_woken(limiter, call)
        with pytest.raises(KeyboardInterrupt):
            permit.settle(0)  # three units back at once
        for caller in callers:
            caller.join(10.0)
        assert sorted(done) == [0, 1, 2], "a waiter granted was never woken"
        assert limiter.machine.in_flight == 0


def test_an_interrupt_while_closing_wakes_every_waiter() -> None:
    """Closing wakes each waiter in turn with LimiterClosed. A
    KeyboardInterrupt that lands as the first is woken (a second Ctrl-C
    while the `with open_limiter()` block closes; the eval loop looks for
    one as each call returns) left the rest asleep for ever, threads that
    never end. They are woken; the interrupt goes on as itself."""
    woken: list[BaseException] = []

    def call(i: int) -> None:
        try:
            limiter.acquire()
        except LimiterClosed as error:
            woken.append(error)

    with open_limiter(Fifo(), 0.001, 1) as limiter:  # nothing refills
        limiter.acquire()
        callers = _three_waiting_the_first_interrupted_as_woken(limiter, call)
        with pytest.raises(KeyboardInterrupt):
            limiter.close()
        for caller in callers:
            caller.join(10.0)
        assert not any(caller.is_alive() for caller in callers), "a waiter was never woken"
        assert len(woken) == 3
        assert limiter.statistics().levels[0].waiting == 0


def a_push_held_as_its_deadline_is_noted(
    monkeypatch: pytest.MonkeyPatch, release: threading.Event
) -> tuple[threading.Event, Callable[[], None]]:
    """Make the next push with a deadline, in this process, stop inside the
    machine's call once its waiter is queued, before its deadline is noted
    (a copy made then is half done), until ``release`` is set: the event
    set once it stops, and what undoes the hold."""
    from permits.core import _deadlines

    add = _deadlines.Deadlines.add
    stopped = threading.Event()
    parent = os.getpid()

    def held(*args: Any) -> Any:
        if os.getpid() == parent:
            stopped.set()
            release.wait()
        return add(*args)

    monkeypatch.setattr(_deadlines.Deadlines, "add", held)
    return stopped, lambda: monkeypatch.setattr(_deadlines.Deadlines, "add", add)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX's")
def test_a_fork_waits_for_a_machine_call_under_way_in_another_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fork that lands while another thread is inside a machine call
    (here: a push, held after its waiter is queued, before its deadline is
    noted, until 0.2 s after the fork began) waits for the call to end, so
    that the child's copy is whole, and the child withdraws the waiter as
    usual. The fork went ahead at once, and the child had the half-done
    copy. (A permit a second: the thread queues long before the next.)"""
    monkeypatch.setattr(threads, "_FORK_WAIT_S", 30.0)  # however loaded the machine
    release = threading.Event()
    released_at_fork: list[bool] = []

    class Forked(threading.Event):
        def set(self) -> None:  # in the parent, as the fork returns
            released_at_fork.append(release.is_set())
            super().set()

    forked = Forked()
    with open_limiter(Fifo(), 1, 1) as limiter:
        limiter.acquire()  # the permit free: the next thread waits
        stopped, undo = a_push_held_as_its_deadline_is_noted(monkeypatch, release)
        parent = threading.Thread(target=limiter.acquire, kwargs={"timeout": 5.0})
        parent.start()
        assert stopped.wait(10.0)
        undo()
        threading.Timer(0.2, release.set).start()

        def state() -> str:
            deadlines = limiter.machine.snapshot().deadlines
            return f"deadlines noted: {len(deadlines)}, queued: {len(limiter.machine)}"

        outcome = three_acquires_in_a_child(limiter, forked, state)
        assert released_at_fork == [True]
        assert outcome == "deadlines noted: 0, queued: 0, granted"
        parent.join()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX's")
@pytest.mark.parametrize("torn", [False, True])
def test_a_fork_that_cannot_wait_checks_the_child_s_copy(
    monkeypatch: pytest.MonkeyPatch, torn: bool
) -> None:
    """A fork waits a second at most (here 50 ms) for a machine call under
    way in another thread: one made in a policy's own code by the thread
    that holds the lock could not wait it out. The child's copy may then be
    half done: once its waiters are withdrawn, the machine checks it. Whole
    (as here: a waiter queued, its deadline not yet noted, is withdrawn
    cleanly), the child's limiter works; torn (here the check made to find
    it so, a stand-in for a copy no withdrawal mends), the child's limiter
    is broken, each acquire refused with LimiterClosed naming the fork."""
    monkeypatch.setattr(threads, "_FORK_WAIT_S", 0.05)
    if torn:

        def check_valid(self: Machine) -> None:
            raise AssertionError("invariant broken: a stand-in")

        monkeypatch.setattr(Machine, "check_valid", check_valid)
    release, forked = threading.Event(), threading.Event()
    with open_limiter(Fifo(), 1, 1) as limiter:
        limiter.acquire()  # the permit free: the next thread waits
        stopped, undo = a_push_held_as_its_deadline_is_noted(monkeypatch, release)
        parent = threading.Thread(target=limiter.acquire, kwargs={"timeout": 5.0})
        parent.start()
        try:
            assert stopped.wait(10.0)
            undo()
            outcome = three_acquires_in_a_child(
                limiter, forked, lambda: f"closed: {limiter.closed}"
            )
        finally:
            release.set()
            parent.join()
    if torn:
        assert outcome.startswith("closed: True, LimiterClosed(")
        assert "forked during a machine call in another thread" in outcome
        assert "invariant broken: a stand-in" in outcome
    else:
        assert outcome == "closed: False, granted"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX's")
def test_a_limiter_closed_as_a_fork_begins_is_not_locked_in_the_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A limiter closed by another thread as the fork begins (it leaves the
    open limiters after the fork took its lock): the child restarts only
    the open ones, and this one's lock stayed held there, by the fork, so
    any use of it in the child (closing it again) hung for ever."""

    class Leaving(set[Limiter]):
        """The open limiters: the fork's hook sees them, the child's not."""

        seen = 0

        def __iter__(self) -> Any:
            Leaving.seen += 1
            return super().__iter__() if Leaving.seen == 1 else iter(())

    def free() -> str:
        taken = limiter._lock.acquire(timeout=1.0)
        if taken:
            limiter._lock.release()
        return f"lock free: {taken}"

    with open_limiter(Fifo(), 10, 1) as limiter:
        monkeypatch.setattr(threads, "_open", Leaving({limiter}))
        outcome = in_a_child(free)
        monkeypatch.undo()
        assert free() == "lock free: True"  # and in the parent
    assert outcome == "lock free: True"


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer (POSIX)")
def test_a_signal_handler_closes_through_a_thread_as_the_readme_says() -> None:
    """The README's advice for a signal handler, which must not call the
    limiter (its lock is not re-entrant: a ``close()`` there, landing while
    its own thread is inside a call, would wait for ever): start a thread
    that closes it. The signals land while the main thread calls the limiter
    without pause; the limiter closes, and the next call says so."""
    closers: list[threading.Thread] = []
    with open_limiter(Fifo(), 10, 1) as limiter:

        def handler(signum: int, frame: object) -> None:
            closer = threading.Thread(target=limiter.close)
            closers.append(closer)
            closer.start()

        previous = signal.signal(signal.SIGALRM, handler)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.01)
            deadline = time.monotonic() + 30.0

            def call_until_closed() -> None:
                while time.monotonic() < deadline:
                    limiter.try_acquire()

            with pytest.raises(LimiterClosed):
                call_until_closed()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        for closer in closers:
            closer.join(10.0)
        assert closers
        assert not any(closer.is_alive() for closer in closers)
        assert limiter.closed


def times_out_in_a_worker_process() -> None:
    """A pool worker's job: its acquire finds no permit within its timeout."""
    with open_limiter(Fifo(), rate=1, burst=1) as limiter:
        limiter.acquire()
        limiter.acquire(timeout=0.01)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX's")
def test_an_error_in_a_worker_process_reaches_the_caller_as_itself() -> None:
    """P95, as a user meets it: a limiter's error raised in a process pool's
    worker (``requests`` behind a thread limiter, fanned out over processes)
    reaches the caller of ``future.result()`` as itself, pickled across.
    It broke the whole pool instead (``BrokenProcessPool``: the parent
    could not rebuild the ``AcquireTimeout`` from its message)."""
    timed_out = raised_in_a_worker_process(times_out_in_a_worker_process)
    assert isinstance(timed_out, AcquireTimeout)
    assert (timed_out.level, timed_out.timeout) == (0, 0.01)
    assert str(timed_out) == "no permit at level 0 within timeout=0.01 s"


def raised_in_a_worker_process(job: Callable[[], None]) -> BaseException:
    """What ``job`` raised in a process pool's worker, as the caller of
    ``future.result()`` gets it; the pool works on after it."""
    context = multiprocessing.get_context("fork")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # forking with threads, 3.12
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
            raised = pool.submit(job).exception(timeout=30)
            assert pool.submit(int, "7").result(timeout=30) == 7  # the pool works on
    assert raised is not None, "the job raised nothing"
    return raised


def settles_in_a_worker_process() -> None:
    """A pool worker's job: it settles a permit its limiter keeps nothing of."""
    with open_limiter(Fifo(), rate=10) as limiter:  # settle_window=0
        with limiter.permit(cost=1, flow="tenant") as permit:
            pass
        permit.settle(2)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX's")
def test_a_refused_settle_in_a_worker_process_reaches_the_caller_as_itself() -> None:
    """P95: the error names the permit, which holds its limiter (and its
    lock): it came back as pickle's ``TypeError`` instead. The permit
    crosses as a copy of what it asked for."""
    refused = raised_in_a_worker_process(settles_in_a_worker_process)
    assert isinstance(refused, NotRefundable)
    permit = refused.id
    assert isinstance(permit, Permit)
    assert (permit.level, permit.cost, permit.flow) == (0, 1, "tenant")
    assert str(refused).startswith(
        "permit=<Permit level=0 cost=1 flow='tenant'>: has nothing to settle: the limiter "
        "keeps no permit to settle"
    )


class _InterruptedOnce:
    """A limiter's lock whose next taking by the main thread (or the one
    ``after`` more) is cut short by a KeyboardInterrupt (as a Ctrl-C lands
    while it waits for the lock); every other taking is the lock's own."""

    def __init__(self, lock: threading.Lock, *, after: int = 0) -> None:
        self.lock = lock
        self.interrupted = False
        self.after = after  # the main thread's takings before the one cut short

    def __enter__(self) -> bool:
        if not self.interrupted and threading.current_thread() is threading.main_thread():
            if not self.after:
                self.interrupted = True
                raise KeyboardInterrupt
            self.after -= 1
        return self.lock.__enter__()

    def __exit__(self, *exc_info: Any) -> None:
        self.lock.__exit__(*exc_info)


def test_an_interrupt_before_closing_takes_the_lock_still_closes_the_limiter() -> None:
    """A KeyboardInterrupt that lands as the `with open_limiter()` block
    closes, before closing holds the lock (a second Ctrl-C while it waits
    for the lock another thread holds), left the limiter open after its
    block: its timer thread running, and a thread waiting there waited on
    for its permit (for ever, behind a long pause). The limiter closes and
    every waiter wakes with LimiterClosed; the interrupt goes on as itself."""
    opened: list[Limiter] = []
    woken: list[BaseException] = []

    def call() -> None:
        try:
            opened[0].acquire()
        except LimiterClosed as error:
            woken.append(error)

    caller = threading.Thread(target=call, daemon=True)

    def block() -> None:
        with open_limiter(Fifo(), 0.001, 1) as limiter:  # nothing refills
            opened.append(limiter)
            limiter.acquire()
            caller.start()
            until(lambda: limiter.statistics().waiting == 1)
            limiter._lock = _InterruptedOnce(limiter._lock)  # type: ignore[assignment]

    try:
        with pytest.raises(KeyboardInterrupt):
            block()
        (limiter,) = opened
        caller.join(10.0)
        assert not caller.is_alive(), "the waiter was never woken"
        assert len(woken) == 1
        assert limiter.closed
        assert limiter._thread is not None
        limiter._thread.join(10.0)
        assert not limiter._thread.is_alive(), "the timer thread runs on"
    finally:
        for limiter in opened:  # (one left open: closed, so that nothing runs on)
            if isinstance(limiter._lock, _InterruptedOnce):
                limiter._lock = limiter._lock.lock
            limiter.close()


def test_a_second_interrupt_as_an_interrupted_waiter_withdraws_still_withdraws_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A thread interrupted while it waits withdraws. A second
    KeyboardInterrupt that lands as it does, before it holds the lock (a
    second Ctrl-C while another thread holds it), left it queued for
    nobody: every caller after it at its level waited behind it (for ever,
    without a timeout). It is withdrawn; the interrupt goes on as itself."""

    class Interrupted(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            raise KeyboardInterrupt  # the first, as the thread waits

    with open_limiter(Fifo(), 0.001, 1) as limiter:  # nothing refills
        limiter.acquire()
        lock = limiter._lock
        with monkeypatch.context() as patch:
            patch.setattr(threading, "Event", Interrupted)
            # the second, as the withdrawal takes the lock (the push took it first)
            limiter._lock = _InterruptedOnce(lock, after=1)  # type: ignore[assignment]
            try:
                with pytest.raises(KeyboardInterrupt):
                    limiter.acquire()
            finally:
                limiter._lock = lock
        assert len(limiter.machine) == 0, "left queued for nobody"
        assert limiter.statistics().levels[0].cancelled == 1
        limiter.set_limit(rate=1000)
        limiter.acquire(timeout=5.0)  # nobody ahead of it


def test_an_interrupt_as_try_acquire_takes_a_permit_granted_past_waiters_hands_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A try_acquire granted at once while others wait (a more urgent
    level, its cost fitting where the waiter's does not) that a
    KeyboardInterrupt stops before its caller has the permit (here: as the
    recording notes it decided) hands the permit back. It was left in
    flight for nobody, for ever: counted as granted, and holding its place
    in the bucket, so that a burst of 2 let one caller through at a time."""
    from permits.adapters import _recording

    decided = _recording.Recording.decided

    def interrupt(*args: object) -> NoReturn:
        monkeypatch.setattr(_recording.Recording, "decided", decided)  # once
        raise KeyboardInterrupt

    with open_limiter(StrictPriority(2), 0.001, 2) as limiter:  # nothing refills
        limiter.acquire(0)  # one unit left

        def wait_behind() -> None:
            with suppress(LimiterClosed):  # (as the limiter closes)
                limiter.acquire(1, cost=2)

        behind = threading.Thread(target=wait_behind, daemon=True)
        behind.start()
        until(lambda: limiter.statistics().waiting == 1)  # its cost does not fit
        limiter.record()
        monkeypatch.setattr(_recording.Recording, "decided", interrupt)
        with pytest.raises(KeyboardInterrupt):
            limiter.try_acquire(0)  # granted at once, then interrupted
        assert limiter.machine.in_flight == 0, "a permit in flight for nobody"
        assert limiter.statistics().levels[0].units_granted == (1,)
        assert limiter.try_acquire(0), "the permit came back"
    behind.join(10.0)
