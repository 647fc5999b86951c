"""The thread adapter: a blocking limiter for synchronous code.

    from permits.adapters.threads import open_limiter

    with open_limiter(StrictPriority(2), rate=100) as limiter:
        with limiter.permit(INTERACTIVE):       # blocks this thread until granted
            requests.get(...)

Any number of threads may call it. One lock guards the machine; each waiter
sleeps on its own :class:`threading.Event`; one timer thread sleeps on a
condition until the machine's next tick (woken early whenever the plan
changes), so nothing polls. Threads that race are queued in the order they
take the lock, so FIFO within a level holds among them. A thread whose
``timeout`` passes expires in the machine at its deadline and costs no
permit; one interrupted while waiting (``KeyboardInterrupt``) withdraws, and
hands back a permit decided for it meanwhile (an interrupt that lands inside
the machine's own call, which it may leave half done, breaks the limiter:
:class:`LimiterClosed` naming it). A wait in a thread that runs
an event loop (asyncio, trio) would stall all its tasks: it warns
(:class:`RuntimeWarning`), naming the async adapter to use instead. A
limiter opened before ``os.fork`` (a server that loads the app, then forks
its workers) works in each child, which starts a timer thread of its own; the
fork waits for a machine call under way in another thread (a second at most),
so that the child's copy is whole.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from fractions import Fraction
from typing import TYPE_CHECKING, NoReturn

from permits.core import SECOND, Decision, FlowStatistics, Policy, Statistics

from ._base import (
    Block,
    LimiterOptions,
    Permit,
    _Limiting,
    _Waiter,
    _waiter,
    despite_interrupt,
    opening,
    refuse_unknown,
)
from ._recording import Recording
from ._requires import running_framework

if TYPE_CHECKING:
    from typing_extensions import Unpack  # in typing from Python 3.11

__all__ = ["Limiter", "open_limiter"]

#: The longest the timer thread sleeps at once, in ns.
_HOUR = 3600 * SECOND


class Limiter(_Limiting):
    """A thread-safe priority limiter; make one with :func:`open_limiter`
    (it takes the arguments of :class:`~permits.adapters.BaseLimiter`)."""

    def __init__(
        self,
        policy: Policy,
        rate: int | float | Fraction | None = None,
        burst: int = 1,
        **options: Unpack[LimiterOptions],
    ) -> None:
        super().__init__(policy, rate, burst, **options)
        self._lock = threading.Lock()
        #: Wakes the timer thread; shares the lock.
        self._plan = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None

    # -- what an adapter provides -----------------------------------------

    def _clock(self) -> int:
        return time.monotonic_ns()

    #: The tick the timer thread sleeps until (``None``: until notified).
    _timer_at: int | None = None

    def _reschedule(self) -> None:
        # The caller holds the lock. Wake the timer only if its plan changed:
        # an acquire granted at once leaves it as it was.
        if self._machine.next_tick() != self._timer_at:
            self._plan.notify()

    #: Whether the timer thread runs (from :meth:`_start` on).
    _running = False

    def _ensure_open(self) -> None:
        if not self._running and self._closed is None:
            raise RuntimeError(
                "this permits.adapters.threads.Limiter has no timer thread, so a waiter "
                "would wait forever: make it with `with open_limiter(...) as limiter:`"
            )

    def _timer(self) -> None:
        """The timer thread: sleep until the next tick, tick, repeat."""
        with self._plan:
            while self._closed is None:
                when = self._timer_at = self._machine.next_tick()
                if when is None:
                    self._plan.wait()
                    continue
                delay = when - self._clock()
                if delay > 0:
                    # (an hour at most: Condition.wait refuses a timeout past
                    # threading.TIMEOUT_MAX, as a long pause would ask; taken
                    # in ns, as a due time past a float's seconds is too)
                    self._plan.wait(min(delay, _HOUR) / 1e9)
                else:
                    self._on_timer()

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._timer, name="permits-timer", daemon=True)
        self._thread.start()
        self._running = True
        _open.add(self)

    def _after_fork(self, *, held: bool) -> None:
        """In a child made by ``os.fork``, which has only the thread that
        forked: a new lock (the parent's is held, by the fork or by a thread
        the child has not), the parent's waiters withdrawn (no thread waits
        on them here: each would take a permit nobody spends), the permits
        in flight handed back (granted to threads not here, which will never
        proceed with them), and a timer thread of its own. The waiters are
        the machine's, not those noted in ``_waiters``: a fork may land
        after a push, before its waiter is noted.

        ``held``: the fork held the lock (:func:`_before_fork`), so no
        machine call was under way. If not, one may have been, in a thread
        the child has not: a copy it left half done is found by the
        machine's own check, and breaks the limiter here
        (:class:`LimiterClosed` naming it), as an interrupt inside a machine
        call does."""
        self._lock = threading.Lock()
        self._plan = threading.Condition(self._lock)
        self._timer_at = None
        self._waiters = {}
        machine = self._machine
        try:
            for queue in machine.snapshot().waiting:
                for waiter in queue:
                    with suppress(Exception):  # a broken policy: the waiters are gone either way
                        machine.cancel(waiter.id)
            now = self._now()
            for grant in machine.snapshot().grants:
                if grant.before is None:  # in flight: charged only when spent
                    with suppress(Exception):  # (as above)
                        machine.refund(grant.waiter.id, now)
            if not held:
                machine.check_valid()  # O(waiters), once: none are left
        except Exception as torn:
            self._break(RuntimeError(f"forked during a machine call in another thread: {torn!r}"))
        if self._closed is None:
            self._start()

    def __enter__(self) -> NoReturn:
        """``with limiter:`` is refused: it would take no permit (where a
        ``threading.Semaphore`` takes one), and it does not open a limiter
        either; nor does ``async with limiter:``, whose advice for the async
        limiters (``async with limiter.permit(level):``) fits no thread."""
        raise TypeError(
            "`with limiter:` takes no permit: write `with limiter.permit(level):` for one; "
            "open a limiter with `with open_limiter(...) as limiter:`"
        )

    async def __aenter__(self) -> NoReturn:
        self.__enter__()

    def __exit__(self, *exc_info: object) -> None:  # pragma: no cover - never entered
        return None

    def close(self) -> None:
        """Close: every waiter wakes with LimiterClosed; the timer thread ends.
        An interrupt (a ``KeyboardInterrupt``) that lands before it is closed,
        as it waits for the lock say, goes on once it is: left open after its
        block, its timer thread ran on and its waiters waited on."""
        despite_interrupt(self._close)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _close(self) -> None:
        _open.discard(self)
        with self._lock:
            self._break(None)
            self._plan.notify()

    # -- the API ----------------------------------------------------------

    def acquire(
        self,
        level: int | None = None,
        *,
        cost: int | Mapping[str, int] = 1,
        flow: Hashable = None,
        timeout: float | None = None,
        max_wait: float | None = None,
    ) -> Permit:
        """Block until a permit at ``level`` is granted; as
        :meth:`permits.adapters.BaseLimiter.acquire`, and ``timeout`` is
        this thread's patience in seconds (:class:`AcquireTimeout` after)."""
        # An exception once the waiter is pushed (a KeyboardInterrupt lands
        # between any two bytecodes of the main thread) withdraws it or hands
        # its permit back: none is left queued or in flight with nobody to
        # take it (within _request, after the push, _request withdraws it).
        # One that lands inside a machine call breaks the limiter, whose
        # machine it may have left half done (_Limiting._interrupted). Only
        # the few bytecodes of the return of _request are not covered. (A
        # take pushes nothing: granted and spent in one step, or not made.)
        pushed = False
        try:
            with self._lock:
                if self._paced and not self._waiters:  # nobody waits: one may be free
                    permit = self._take(level, cost, flow, timeout, max_wait)
                    if permit is not None:
                        return permit
                waiter = _waiter(None)
                id, level, decision = self._request(level, cost, flow, timeout, max_wait)
                pushed = True
                waiter.decision = decision
                if decision is not None:
                    return self._outcome(id, decision, cost, flow, timeout, decision.at)
                event = threading.Event()
                waiter.event = event
                self._waiters[id] = waiter
                self._reschedule()
            _warn_if_in_event_loop()
            event.wait()  # the machine's deadline ends it: no timeout here
            with self._lock:
                if waiter.error is not None:
                    raise waiter.error
                assert waiter.decision is not None
                return self._outcome(id, waiter.decision, cost, flow, timeout, self._now())
        except BaseException as error:
            if pushed and error is not waiter.error:
                self._withdrawn(id, waiter)
            raise

    def _withdrawn(self, id: int, waiter: _Waiter) -> None:
        """Withdraw the waiter of ``id``, whose thread leaves (interrupted,
        or its outcome raised). A second interrupt that lands before it is
        withdrawn, as it waits for the lock say, goes on once it is: left
        queued, it waited for nobody, and every caller after it behind it."""

        def withdraw() -> None:
            with self._lock:
                self._withdraw(id, waiter)

        despite_interrupt(withdraw)

    def permit(
        self,
        level: int | None = None,
        *,
        cost: int | Mapping[str, int] = 1,
        flow: Hashable = None,
        timeout: float | None = None,
        max_wait: float | None = None,
    ) -> AbstractContextManager[Permit]:
        """``with limiter.permit(level, cost=...) as permit:`` --
        :meth:`acquire`, then the block."""
        acquire = functools.partial(
            self.acquire, level, cost=cost, flow=flow, timeout=timeout, max_wait=max_wait
        )
        return Block(_acquired(acquire), "limiter.permit", "permit")

    def try_acquire(
        self, level: int | None = None, *, cost: int | Mapping[str, int] = 1, flow: Hashable = None
    ) -> bool:
        with self._lock:
            return super().try_acquire(level, cost=cost, flow=flow)

    def _apply(self, operation: Callable[[int], list[Decision]]) -> None:
        with self._lock:
            super()._apply(operation)

    def statistics(self) -> Statistics:
        with self._lock:
            return super().statistics()

    def record(self, max_calls: int = 1_000_000) -> Recording:
        # Under the lock, as every call is recorded: a recording started
        # while another thread's call was being added to the one it
        # replaces lost that call (it was noted as waiting only after the
        # new recording looked for waiting calls), and the earlier one
        # never learned how it ended.
        with self._lock:
            return super().record(max_calls)

    def busiest_flows(self, level: int, n: int = 10) -> tuple[FlowStatistics, ...]:
        with self._lock:
            return super().busiest_flows(level, n)

    def _statistics_and_waits(
        self, bounds_ns: Sequence[int]
    ) -> tuple[Statistics, tuple[tuple[int, ...], ...]]:
        with self._lock:
            return super()._statistics_and_waits(bounds_ns)


#: The open limiters, each restarted in a child made by ``os.fork`` (a
#: limiter opened before a server forks its workers): only the thread that
#: forked is copied into the child, not the timer thread, without which
#: every wait there, and its timeout, would never end.
_open: weakref.WeakSet[Limiter] = weakref.WeakSet()


#: How long a fork waits for each open limiter's lock, held by a thread
#: inside a machine call (microseconds, unless the thread is kept from
#: running): long enough for a loaded machine, short enough that a fork made
#: under the lock itself (from a policy's code, say) is not stuck.
_FORK_WAIT_S = 1.0

#: The open limiters whose lock the fork under way holds.
_held: list[Limiter] = []


def _before_fork() -> None:
    """Hold every open limiter's lock across the fork, so that the child's
    copy of each machine is one no call was halfway through."""
    for limiter in list(_open):
        if limiter._lock.acquire(timeout=_FORK_WAIT_S):
            _held.append(limiter)


def _after_fork_in_parent() -> None:
    while _held:
        _held.pop()._lock.release()


def _after_fork_in_child() -> None:
    held = set(_held)
    _held.clear()
    for limiter in held:  # (one closed as the fork began is no longer open, its lock held)
        limiter._lock.release()
    for limiter in list(_open):
        limiter._after_fork(held=limiter in held)


if hasattr(os, "register_at_fork"):  # (POSIX)
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )


#: What a thread running each event loop should use instead.
_LOOPS = {
    "asyncio": "an asyncio event loop: use permits.adapters.asyncio",
    "trio": "trio: use permits.adapters.trio",
}


def _warn_if_in_event_loop() -> None:
    """A :class:`RuntimeWarning` if this thread runs an event loop, which
    the wait about to start blocks: every task, not only the caller."""
    running = running_framework()
    if running is None:
        return
    warnings.warn(
        f"acquire waits in a thread that runs {_LOOPS[running]} (or anyio), or "
        "call this one through a worker thread; until then every task waits",
        RuntimeWarning,
        stacklevel=_outside(),
    )


def _outside() -> int:
    """The ``stacklevel``, for a warning of the function that calls this
    one, of the first frame outside permits (and outside :mod:`contextlib`,
    which ``with limiter.permit()`` runs through): the caller's line, however
    it came to acquire (the warning pointed at ``permit``'s own line, once
    for every caller of it, under the default filter)."""
    frame = sys._getframe(2)  # the function that warns, counted as level 1
    level = 2
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(
        ("permits.", "contextlib")
    ):
        frame = frame.f_back
        level += 1
    return level


def open_limiter(
    policy: Policy,
    rate: int | float | Fraction | None = None,
    burst: int = 1,
    **options: Unpack[LimiterOptions],
) -> AbstractContextManager[Limiter]:
    """Open a thread :class:`Limiter` for a ``with`` block: its timer thread
    runs inside it; on the way out every waiter wakes with
    :class:`~permits.adapters.LimiterClosed` and the thread ends."""
    refuse_unknown("permits.adapters.threads.open_limiter", options)
    return opening(_opened(Limiter(policy, rate, burst, **options)))


@contextmanager
def _acquired(acquire: Callable[[], Permit]) -> Iterator[Permit]:
    """The block of :meth:`Limiter.permit`: ``acquire()``'s permit."""
    yield acquire()


@contextmanager
def _opened(limiter: Limiter) -> Iterator[Limiter]:
    limiter._start()
    try:
        yield limiter
    finally:
        limiter.close()
