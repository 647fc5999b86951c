"""Run a :class:`~permits.sim.Scenario` live, on the asyncio adapter, in real time.

The same scenario :func:`permits.sim.simulate` runs in virtual time, played
against a real :class:`~permits.adapters.asyncio.Limiter`: each caller is a
task that arrives at its time and calls ``acquire``; a workload's
``timeout`` is ``acquire(timeout=...)`` (the core expires it), its
``give_up_after`` cancels the caller's task (the caller gives up: the core
counts it cancelled), its ``max_wait`` is ``acquire(max_wait=...)``
(refused: counted as too long). What each caller got is counted by the
simulator's own :class:`~permits.sim.Tally`, so the two results read alike
and can be set side by side (``permits demo``).
"""

from __future__ import annotations

import asyncio

from permits.adapters import AcquireTimeout, WouldWaitTooLong
from permits.adapters.asyncio import open_limiter
from permits.core import QueueFull, State
from permits.core.checks import check_rate
from permits.sim import Result, Scenario, Tally, arrivals, nanoseconds

__all__ = ["run"]


async def run(scenario: Scenario) -> Result:
    """Play ``scenario`` in real time on the running event loop; takes its
    ``seconds``. Callers still waiting at the end are cancelled and counted
    as ``waiting``."""
    duration = nanoseconds("seconds", scenario.seconds)
    tally = Tally(scenario, duration)
    loop = asyncio.get_running_loop()
    callers: set[asyncio.Task[None]] = set()
    async with open_limiter(
        scenario.policy,
        check_rate(scenario.rate),
        scenario.burst,
        max_waiting=scenario.max_waiting,
        **scenario.flow_options(),
    ) as limiter:
        start = loop.time()

        def elapsed() -> int:
            return round((loop.time() - start) * 1e9)

        async def caller(w: int, at: int) -> None:
            workload = scenario.workloads[w]
            expire = None if workload.timeout is None else float(workload.timeout)
            limit = None if workload.max_wait is None else float(workload.max_wait)
            # Those queued at time zero arrived at zero: the clock starts
            # once they are all in the queue (see below).
            arrived = 0 if at == 0 else elapsed()
            # Its give-up cancels this task, the one that pushed: the caller
            # waits in the queue in the order it came, as in the simulation
            # (asyncio.wait_for would push from a task of its own, a turn of
            # the loop later, behind those that came at the same time).
            task = asyncio.current_task()
            assert task is not None
            gave_up = False

            def give_up() -> None:
                nonlocal gave_up
                gave_up = True
                task.cancel()

            patience = workload.give_up_after
            timer = None if patience is None else loop.call_later(float(patience), give_up)
            try:
                await limiter.acquire(workload.level, timeout=expire, max_wait=limit)
            except AcquireTimeout:
                left: State = State.EXPIRED
            except asyncio.CancelledError:
                if not gave_up:
                    raise  # the run is over
                left = State.CANCELLED
            except QueueFull:
                left = State.REJECTED
            except WouldWaitTooLong:
                left = State.TOO_LONG
            else:
                left = State.GRANTED
            finally:
                if timer is not None:
                    timer.cancel()
            now = elapsed()
            if now >= duration:
                # The run is [0, seconds), as the simulator's: what happens
                # from its end on (a grant, an expiry at the end) is not
                # counted, and the caller was still waiting then.
                return
            if left is State.GRANTED:
                tally.on_grant(w, now, now - arrived)
            elif left is State.EXPIRED or left is State.CANCELLED:
                tally.on_leave(w, now, left)
            else:
                tally.on_reject(w, now, left)

        def start_caller(at: int, w: int) -> None:
            tally.on_arrive(w)
            task = loop.create_task(caller(w, at))
            callers.add(task)
            task.add_done_callback(callers.discard)

        stream = arrivals(scenario, duration)
        upcoming = next(stream, None)
        while upcoming is not None and upcoming[0] == 0:
            start_caller(*upcoming)
            upcoming = next(stream, None)
        # Let those queued at time zero reach the queue (a batch of thousands
        # takes a while to start) before the clock starts.
        queued = sum(tally.offered)
        # (a push refused as too long counts as pushed)
        while sum(s.pushed for s in limiter.statistics().levels) < queued:
            await asyncio.sleep(0)
        start = loop.time()
        while upcoming is not None:
            delay = start + upcoming[0] / 1e9 - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            start_caller(*upcoming)
            upcoming = next(stream, None)
        await asyncio.sleep(max(0.0, start + duration / 1e9 - loop.time()))
        for task in list(callers):
            task.cancel()
        await asyncio.gather(*callers, return_exceptions=True)
    return tally.result()
