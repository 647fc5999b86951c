"""Two reference limiters that bound what a limiter can cost per permit.

- :class:`FlatLimiter` (asyncio) and :class:`FlatTrioLimiter` (trio): an
  ideal flat priority limiter, every step this library's promises need per
  permit and nothing else. What a pure-Python rewrite of ``permits`` (core
  and adapter together) could reach.
- :class:`BarePacer`: asyncio's own part of a permit (a future and a timer),
  no limiter at all. The floor.

Neither is a limiter anyone should use. ``bench/handoff.py`` runs the flat
limiters on the hand-off paths; ``bench/peers_cpu.py`` runs both on a
virtual clock beside the peers.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections import deque
from typing import Any

import trio
import trio.lowlevel
from _common import Acquire, Close

__all__ = ["BarePacer", "FlatLimiter", "FlatTrioLimiter", "make_bare_pacer", "make_flat"]


class BarePacer:
    """The asyncio floor: what asyncio itself does per permit when
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


def make_bare_pacer(rate: int, burst: int) -> tuple[Acquire, Close]:
    return BarePacer(rate, burst).acquire, lambda: None


def make_flat(rate: int, burst: int) -> tuple[Acquire, Close]:
    return FlatLimiter(rate, burst).acquire, lambda: None
