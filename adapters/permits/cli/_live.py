"""Run a :class:`~permits.sim.Scenario` live, on the asyncio adapter, in real time.

The same scenario :func:`permits.sim.simulate` runs in virtual time, played
against a real :class:`~permits.adapters.asyncio.Limiter`: each caller is a
task that arrives at its time and calls ``acquire``; a workload's
``timeout`` is ``acquire(timeout=...)`` (the core expires it), its
``give_up_after`` is ``asyncio.wait_for`` around it (the caller gives up:
the core counts it cancelled), its ``max_wait`` is ``acquire(max_wait=...)``
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
            try:
                acquire = limiter.acquire(workload.level, timeout=expire, max_wait=limit)
                if workload.give_up_after is None:
                    await acquire
                else:
                    await asyncio.wait_for(acquire, float(workload.give_up_after))
            except AcquireTimeout:
                tally.on_leave(w, elapsed(), State.EXPIRED)
            except asyncio.TimeoutError:
                tally.on_leave(w, elapsed(), State.CANCELLED)
            except QueueFull:
                tally.on_reject(w, elapsed())
            except WouldWaitTooLong:
                tally.on_reject(w, elapsed(), State.TOO_LONG)
            else:
                now = elapsed()
                if now < duration:  # the run is [0, seconds), as the simulator's
                    tally.on_grant(w, now, now - arrived)

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
