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

On a virtual clock (:func:`permits.testing.run`) the two agree to the
nanosecond, but where a caller gives up at the very nanosecond its permit
falls due: the simulation withdraws it first, while here the cancel reaches
the limiter only as the caller's task next runs, after the limiter granted
it the permit, which it hands back to the next waiter at once. Under
``Fifo``, ``StrictPriority`` and ``Aging`` that comes to the same; a
``Shares`` deal has counted the grant handed back, and deals on a slot
further.
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
        start = round(loop.time() * 1e9)  # (ns, as the limiter reads the loop's clock)

        # The run's own timers (an arrival, a give-up) act at their time to
        # the nanosecond, as in the simulation: each is set for the loop's
        # time of that nanosecond, as the limiter sets its own (a delay from
        # now, a sum of floats, may land a nanosecond past it), and acts only
        # once the clock has reached it: asyncio runs a timer up to its
        # clock's resolution (1 ns) early, in the turn of one due that much
        # before it (a permit's); then it is set again.

        def elapsed() -> int:
            """The run's clock, in ns."""
            return round(loop.time() * 1e9) - start

        def when(at: int) -> float:
            """The loop's time at ``at`` (ns) on the run's clock."""
            return (start + at) / 1e9

        async def until(at: int) -> None:
            """Wait until the run's clock reads ``at`` (ns)."""
            while elapsed() < at:
                woken = asyncio.Event()
                timer = loop.call_at(when(at), woken.set)
                try:
                    await woken.wait()
                finally:
                    timer.cancel()

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
            timer: asyncio.TimerHandle | None = None

            def give_up(at: int) -> None:
                """Give up if the run's clock has reached ``at`` (ns), else
                set the timer for then."""
                nonlocal gave_up, timer
                if elapsed() < at:
                    timer = loop.call_at(when(at), give_up, at)
                else:
                    gave_up = True
                    task.cancel()

            patience = workload.give_up_after
            if patience is not None:  # (more than 0 s: a Workload refuses 0)
                give_up(arrived + nanoseconds("give_up_after", patience))
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
        start = round(loop.time() * 1e9)
        while upcoming is not None:
            await until(upcoming[0])
            start_caller(*upcoming)
            upcoming = next(stream, None)
        await until(duration)
        for task in list(callers):
            task.cancel()
        await asyncio.gather(*callers, return_exceptions=True)
    return tally.result()
