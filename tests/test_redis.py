"""The Redis permit source, on a real redis-server started by the tests.

In one process under asyncio and trio: ordering, cancellation, timeouts,
closing. Across real processes: the shared limit counted on the Redis side,
utilisation, and the headroom reserve against none. Killing the server
mid-run and restarting it: errors or fallback as configured, recovery, the
over-grant bound, nobody left hanging.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import math
import socket
import statistics
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis

import permits.adapters.redis as redis_module
from permits.adapters import AcquireTimeout, LimiterClosed, WouldWaitTooLong
from permits.adapters.redis import (
    BackendUnavailable,
    GcraAnswer,
    RedisLimit,
    RedisLimiter,
    open_limiter,
)
from permits.core import (
    SECOND,
    Decision,
    Fifo,
    Limit,
    NotRefundable,
    PermitTypeError,
    PermitValueError,
    QueueFull,
    Shares,
    State,
    StrictPriority,
)
from permits.testing import virtual_backend

from redis_server import RedisCluster, RedisServer, need_redis_server

pytestmark = pytest.mark.timeout(60)

INTERACTIVE, BATCH = 0, 1
_names = itertools.count()


def fresh() -> str:
    return f"test-{next(_names)}-{time.monotonic_ns()}"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


def audit_entries(server: RedisServer, name: str) -> list[str]:
    """The audit list as the script wrote it: a grant's time, or a
    give-back's after a ``g`` and then its units, in the order the script
    ran."""
    client = redis.Redis.from_url(server.url)
    try:
        entries = client.lrange(f"permits:{{{name}}}:audit", 0, -1)
    finally:
        client.close()
    return [entry.decode() if isinstance(entry, bytes) else entry for entry in entries]


def audit(server: RedisServer, name: str) -> list[float]:
    """Grant times (microseconds, Redis TIME) the script recorded, net of
    the units given back (for limits of unit costs): each unit given back
    returns the latest unit charged before it (GCRA's ``TAT - T``), so it
    takes that charge out; a unit charged by a settle counts as a grant
    then. (One entry taken out per give-back, whatever its units, counted
    the rest of a lease given back as granted: a false excess.)"""
    charged: list[float] = []
    for text in audit_entries(server, name):
        if text.startswith("g"):
            at, units = text[1:].split()
            given = float(at)
            charged += [given] * int(units)  # (none unless charged)
            for _ in range(-int(units)):
                latest = max((t for t in charged if t <= given), default=None)
                if latest is not None:
                    charged.remove(latest)
        else:
            charged.append(float(text))
    return sorted(charged)


def worst_excess(times: list[float], interval: float, burst: int) -> float:
    """The largest ``count - (burst + d / interval)`` over every window
    ``[times[i], times[j]]``: positive means the limit was exceeded.
    O(n): with ``f(k) = k - times[k] / interval`` it is
    ``max over i <= j of f(j) - f(i) + 1 - burst``."""
    worst = -math.inf
    lowest = math.inf
    for k, t in enumerate(times):
        f = k - t / interval
        lowest = min(lowest, f)
        worst = max(worst, f - lowest + 1 - burst)
    return worst


@pytest.mark.anyio
async def test_strict_priority_across_the_shared_limit(redis_server: RedisServer) -> None:
    """One process: the interactive calls overtake the queued batch, exactly
    as the local pacer would order them; one round trip per permit."""
    order: list[str] = []
    async with open_limiter(
        StrictPriority(2), redis_server.url, name=fresh(), rate=10, burst=1
    ) as limiter:

        async def call(name: str, level: int) -> None:
            await limiter.acquire(level)
            order.append(name)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "b1", BATCH)
            with anyio.fail_after(5):
                while not order:  # b1 has the bucket's permit
                    await anyio.sleep(0.001)
            # The others queue, in this order, well within the 100 ms the
            # next permit takes (however loaded the machine: each waits for
            # the one before it to be in the queue).
            for i, (name, level) in enumerate(
                [("b2", BATCH), ("b3", BATCH), ("i1", INTERACTIVE), ("i2", INTERACTIVE)]
            ):
                tg.start_soon(call, name, level)
                with anyio.fail_after(5):
                    while len(limiter.machine) < i + 1:
                        await anyio.sleep(0.001)
        assert order == ["b1", "i1", "i2", "b2", "b3"]
        assert limiter.statistics().levels[INTERACTIVE].granted == 2
        assert limiter.round_trips <= 5 + 2  # one per permit, and a refusal or two


@pytest.mark.anyio
async def test_max_wait_is_the_machines_too_long(redis_server: RedisServer) -> None:
    """A shared limit's ``max_wait`` is its machine's (SPEC P53): with one
    batch caller queued behind the bucket's permit, the best case of the
    next is one interval (0.1 s), so ``max_wait=0.05`` is refused at once,
    counted as too long at its level, never queued."""
    async with (
        open_limiter(
            StrictPriority(2), redis_server.url, name=fresh(), rate=10, burst=1
        ) as limiter,
        anyio.create_task_group() as tg,
    ):
        await limiter.acquire(BATCH)  # the bucket's permit
        tg.start_soon(limiter.acquire, BATCH)
        with anyio.fail_after(5):
            while len(limiter.machine) < 1:
                await anyio.sleep(0.001)
        with pytest.raises(WouldWaitTooLong) as refused:
            await limiter.acquire(BATCH, max_wait=0.05)
        assert refused.value.estimated == 0.1
        assert len(limiter.machine) == 1
        batch = limiter.statistics().levels[BATCH]
        assert (batch.too_long, batch.rejected) == (1, 0)
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_max_wait_0_on_an_empty_shared_bucket_refuses_at_once(
    redis_server: RedisServer,
) -> None:
    """Found by a user's program: with the shared bucket empty (taken by
    another process) and nobody waiting here, ``acquire(max_wait=0)``
    waited the full interval (1 s) for its permit, where the adapters
    refuse at once (``WouldWaitTooLong``) what would wait."""
    name = fresh()
    async with (
        open_limiter(Fifo(), redis_server.url, name=name, rate=1, burst=1) as other,
        open_limiter(Fifo(), redis_server.url, name=name, rate=1, burst=1) as limiter,
    ):
        await other.acquire()  # the shared bucket's one permit
        start = anyio.current_time()
        with anyio.fail_after(5), pytest.raises(WouldWaitTooLong):
            await limiter.acquire(max_wait=0)
        assert anyio.current_time() - start < 0.5


@pytest.mark.anyio
@pytest.mark.parametrize("book_ahead", [0.0, 0.5])
async def test_a_max_wait_the_shared_wait_fits_in_is_granted(
    redis_server: RedisServer, book_ahead: float
) -> None:
    """Another process emptied the shared bucket (a unit a 0.1 s): Redis
    says the take waits about 0.1 s (refused, or booked ahead), within the
    caller's max_wait: it waits and is granted, not refused."""
    name = fresh()
    async with (
        open_limiter(Fifo(), redis_server.url, name=name, rate=10, burst=1) as other,
        open_limiter(
            Fifo(), redis_server.url, name=name, rate=10, burst=1, book_ahead=book_ahead
        ) as limiter,
    ):
        await other.acquire()
        with anyio.fail_after(5):
            await limiter.acquire(max_wait=2.0)
        level = limiter.statistics().levels[0]
        assert (level.granted, level.too_long, level.cancelled) == (1, 0, 0)


@pytest.mark.anyio
@pytest.mark.parametrize("book_ahead", [0.0, 8.0])
async def test_a_max_wait_the_shared_wait_passes_is_refused_and_costs_nothing(
    redis_server: RedisServer, book_ahead: float
) -> None:
    """Another process emptied the shared bucket (a unit every 4 s): Redis
    says the take waits about 4 s (refused, or booked ahead: Redis charged
    it for then), past the caller's max_wait of 1 s: refused at once with
    WouldWaitTooLong, its estimate Redis's wait, counted as too long (not
    rejected nor cancelled); a booking is given back, so the units charged
    in Redis are the callers' that proceeded (the other's one)."""
    name = fresh()
    async with (
        open_limiter(Fifo(), redis_server.url, name=name, rate=0.25, burst=1) as other,
        open_limiter(
            Fifo(), redis_server.url, name=name, rate=0.25, burst=1, book_ahead=book_ahead
        ) as limiter,
    ):
        await other.acquire()
        recording = limiter.record()
        start = anyio.current_time()
        with anyio.fail_after(5), pytest.raises(WouldWaitTooLong) as refused:
            await limiter.acquire(max_wait=1.0)
        # recorded as asked, refused by the limiter (not a caller that gave up)
        [call] = recording.calls
        assert (call.max_wait_ns, call.give_up_after_ns) == (SECOND, None)
        assert anyio.current_time() - start < 2.0  # not Redis's 4 s
        assert 1.0 < refused.value.estimated < 5.0  # Redis's 4 s, from its arrival
        assert refused.value.max_wait == 1.0
        level = limiter.statistics().levels[0]
        assert (level.too_long, level.rejected, level.cancelled, level.waiting) == (1, 0, 0, 0)
        assert len(limiter.machine) == 0
        gives = 1 if book_ahead else 0  # the booking, given back
        with anyio.fail_after(2):
            while limiter.given_back < gives:
                await anyio.sleep(0.01)
        assert limiter._booked is None
        assert limiter.given_back == gives
        check = peek(redis_server, name, rate=0.25, burst=1)
        try:
            # within the 4 s: the other's unit only (-1 had the booking stayed)
            assert check.charge((0,)).remaining == (0,)
        finally:
            check.close()


@pytest.mark.anyio
async def test_cancel_timeout_and_close(redis_server: RedisServer) -> None:
    name = fresh()
    async with open_limiter(StrictPriority(2), redis_server.url, name=name, rate=5, burst=1) as lim:
        await lim.acquire(BATCH)  # takes the bucket's only permit
        with anyio.move_on_after(0.05):  # cancelled while waiting: costs nothing
            await lim.acquire(BATCH)
        with pytest.raises(AcquireTimeout):
            await lim.acquire(INTERACTIVE, timeout=0.05)
        stats = lim.statistics().levels
        assert (stats[BATCH].cancelled, stats[INTERACTIVE].expired) == (1, 1)
        await anyio.sleep(0.25)  # the next permit fell due; nobody took it
        await lim.acquire(INTERACTIVE)  # so it is there at once
        errors: list[BaseException] = []

        async def waiter() -> None:
            try:
                await lim.acquire(BATCH)
            except LimiterClosed as error:
                errors.append(error)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.sleep(0.02)
            lim._break(None)  # what leaving the async with does
    assert len(errors) == 1
    assert lim.statistics().levels[BATCH].granted == 1
    assert lim.statistics().levels[INTERACTIVE].granted == 1
    assert len(audit(redis_server, name)) == 0  # audit is off by default
    # Each change refused by the closed limiter raises a LimiterClosed of its
    # own: one instance raised again and again keeps every raise's frames.
    refused = []
    for _ in range(2):
        with pytest.raises(LimiterClosed) as paused:
            lim.pause_for(1.0)
        with pytest.raises(LimiterClosed) as settled:
            lim._settle(0, 1)
        refused += [paused.value, settled.value]
    assert len({id(error) for error in refused}) == 4
    assert lim.pause_left() == 0.0, "a pause refused changes nothing"


@pytest.mark.anyio
async def test_a_process_whose_waiters_all_leave_leaves_the_line(
    redis_server: RedisServer,
) -> None:
    """P48: a process whose waiters all give up while it holds a place in
    the line leaves it at once (one request), rather than keep the others
    behind its turn until that turn is ``demand_ttl`` past."""
    name = fresh()
    async with (
        open_limiter(Fifo(), redis_server.url, name=name, rate=0.5, burst=1) as other,
        open_limiter(Fifo(), redis_server.url, name=name, rate=0.5, burst=1) as limiter,
    ):
        await other.acquire()  # the bucket's only permit: the next in 2 s
        gave_up = 0

        async def impatient() -> None:
            nonlocal gave_up
            with contextlib.suppress(AcquireTimeout):
                await limiter.acquire(timeout=0.3)
                return
            gave_up += 1

        async with anyio.create_task_group() as tg:
            for _ in range(2):  # two waiting: the process takes a place in the line
                tg.start_soon(impatient)
            await anyio.sleep(0.2)
            _, turn = redis_time_and_turn(redis_server, name, limiter.limit.process)
            assert turn is not None, "its two waiters hold no place in the line"
        assert gave_up == 2
        await anyio.sleep(0.5)
        # gone well before its turn (2 s in), let alone that turn + 2 s
        now, turn = redis_time_and_turn(redis_server, name, limiter.limit.process)
        assert turn is None, (turn - now) / 1e6


@pytest.mark.anyio
async def test_a_days_quota_beside_a_rate_a_second_does_not_hold_up_the_line(
    redis_server: RedisServer,
) -> None:
    """P100: three processes share 20 requests a second (burst 10) and a
    day's quota of 10,000 (its burst: the whole day's). Their 30 callers
    are served as the second's limit lets them through, about a second for
    all, not as the day's interval (8.64 s) spaces the processes in the
    line: the line's step is that of the limit that holds a take back.
    (Spaced by the day's interval, 11 of 60 such callers were served in
    6 s, the limit standing idle.)"""
    name = fresh()
    limits = {"requests": Limit(20, 10), "daily": Limit(Fraction(10_000, 86_400), 10_000)}
    async with contextlib.AsyncExitStack() as stack:
        limiters = [
            await stack.enter_async_context(
                open_limiter(Fifo(), redis_server.url, name=name, limits=limits)
            )
            for _ in range(3)
        ]
        served = 0

        async def caller(limiter: RedisLimiter) -> None:
            nonlocal served
            with contextlib.suppress(AcquireTimeout):
                await limiter.acquire(timeout=6)  # (a second needed: margin for a busy host)
                served += 1

        async with anyio.create_task_group() as tg:
            for limiter in limiters:
                for _ in range(10):
                    tg.start_soon(caller, limiter)
        assert served == 30, ("P100", served)


@pytest.mark.anyio
async def test_a_process_served_under_global_priority_leaves_the_line(
    redis_server: RedisServer,
) -> None:
    """P48: under global priority, a process granted while more of its
    waiters remain is told a turn, and holds a place in the line, even when
    that turn is now (the processes in the line wait at a less urgent
    level: none is ahead of it). Once its last waiter is served it says so
    and leaves the line at once; it held its place (and counted ahead of
    the less urgent processes there) until its turn was ``demand_ttl``
    past."""
    name = fresh()
    url = redis_server.url
    urgent = RedisLimit(url, name=name, rate=10, burst=10)
    batch = RedisLimit(url, name=name, rate=10, burst=10)
    try:
        urgent.publish_demand((1, 0), demand_ttl=5)  # a waiter at level 0 elsewhere
        held = batch.take(0, level=1, demand=(0, 3), waiting=3)
        assert not held.allowed  # held by it: in the line, at level 1
        async with open_limiter(
            StrictPriority(2), url, name=name, rate=10, burst=10, global_priority=True, lease=1
        ) as limiter:
            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(limiter.acquire, 0)
            await anyio.sleep(0.3)  # (its turn + demand_ttl: 2 s on)
            _, turn = redis_time_and_turn(redis_server, name, limiter.limit.process)
            assert turn is None, ("P48", "still in the line", turn)
    finally:
        urgent.close()
        batch.close()


@pytest.mark.anyio
async def test_permit_for_a_waiter_that_left_is_given_back(redis_server: RedisServer) -> None:
    """The interactive waiter the driver asked for leaves during the round
    trip, and the batch waiter now next has a larger reserve: the permit,
    taken under reserve 0, is given back to Redis, not handed to the batch."""
    name = fresh()
    async with open_limiter(
        StrictPriority(2), redis_server.url, name=name, rate=1, burst=3, reserve=(0, 2)
    ) as limiter:
        round_trip, answered = limiter._round_trip, anyio.Event()

        async def slow_round_trip(request: Any) -> Any:
            answer = await round_trip(request)
            if request is not None and request.args[0] == b"take" and request.args[2] == b"0":
                await answered.wait()  # hold the round trip until the test says
            return answer

        limiter._round_trip = slow_round_trip  # type: ignore[method-assign]
        granted: list[str] = []

        async def call(name: str, level: int) -> None:
            await limiter.acquire(level)
            granted.append(name)

        interactive = anyio.CancelScope()

        async def impatient() -> None:
            with interactive:
                await call("interactive", INTERACTIVE)

        async with anyio.create_task_group() as tg:
            tg.start_soon(impatient)
            await anyio.sleep(0.05)  # its round trip is under way
            tg.start_soon(call, "batch", BATCH)
            await anyio.sleep(0.01)
            interactive.cancel()
            await anyio.sleep(0.01)
            answered.set()
        assert granted == ["batch"]
        assert limiter.given_back == 1
    check = RedisLimit(redis_server.url, name=name, rate=1, burst=3)
    try:
        # The given-back permit is in the bucket again.
        assert check.take().remaining == (1,)  # 3 - the batch's - this one; 0 had it been kept
    finally:
        check.close()


@pytest.mark.anyio
async def test_a_permit_cancelled_past_its_refund_window_goes_back_to_redis(
    redis_server: RedisServer,
) -> None:
    """P26: a caller is granted a permit and cancelled before it proceeds, the
    loop stalled past ``refund_window`` meanwhile, and the next waiter asks
    for the same units: the permit is too old to hand over, so it goes back
    to Redis, where the next waiter's take finds it. Redis charged one
    permit per caller that proceeded, and the statistics count it refunded
    (P20: they counted it used, its units granted, the callers that went
    ahead one too many)."""
    name = fresh()
    async with open_limiter(
        Fifo(1), redis_server.url, name=name, rate=2, burst=1, refund_window=0.05, audit=True
    ) as limiter:
        await limiter.acquire()  # the bucket's only permit: the next in 0.5 s
        # granted: cancelled before it runs; the loop stalls past the refund window
        await cancelled_at_its_grant_then_another(limiter, stall=0.1)
        assert limiter.given_back == 1
        level = limiter.statistics().levels[0]
        # counted refunded, as one handed to a waiter here is: two proceeded
        assert (level.granted, level.refunded, level.units_granted) == (3, 1, (2,))
    assert len(audit(redis_server, name)) == 2  # granted, less given back


@pytest.mark.anyio
@pytest.mark.parametrize("next_asks", ["other units", "a larger reserve"])
async def test_a_permit_cancelled_at_its_grant_goes_on_only_to_a_waiter_it_fits(
    redis_server: RedisServer, next_asks: str
) -> None:
    """P26 on the shared limit, within the refund window: a caller granted
    a permit and cancelled before it proceeds hands it to the next waiter
    only if that one asks for the same units under no larger reserve;
    here the next asks for 2 units, or waits at a level with a reserve of
    1 (the permit was taken under 0): the permit goes back to Redis, and
    the next waiter's own take is judged there (handed on, a 1-unit permit
    would let a 2-unit caller through, or a reserved level into the
    reserve)."""
    async with open_limiter(
        StrictPriority(2), redis_server.url, name=fresh(), rate=2, burst=2, reserve=(0, 1)
    ) as limiter:
        await limiter.acquire()
        await limiter.acquire()  # the bucket is empty: a unit every 0.5 s
        first = anyio.CancelScope()
        cancel_when_granted(limiter, first)

        async def cancelled() -> None:
            with first:
                await limiter.acquire(0)

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancelled)
            await anyio.sleep(0.05)  # it waits first
            if next_asks == "other units":
                tg.start_soon(partial(limiter.acquire, 0, cost=2))
            else:
                tg.start_soon(limiter.acquire, 1)
        assert first.cancelled_caught
        assert limiter.given_back == 1, "the permit was handed to a waiter it does not fit"
        assert limiter.statistics().levels[0].refunded == 1


@pytest.mark.anyio
async def test_a_permit_cancelled_at_its_grant_skips_a_waiter_whose_deadline_passed(
    redis_server: RedisServer,
) -> None:
    """P26 on the shared limit: the waiter a permit handed back would go to
    is judged at the time it is handed back. Behind the caller cancelled at
    its grant wait one whose deadline passed while the loop stalled (its
    timer not yet run) and a batch caller under a reserve of 1: the permit,
    taken under reserve 0, goes back to Redis; judged at the machine's last
    time, the expired waiter looked like its taker, and the permit went to
    the batch caller, into its reserve (seen under asyncio, where the
    cancelled caller runs before the timer; under trio either may run
    first)."""
    async with open_limiter(
        StrictPriority(2), redis_server.url, name=fresh(), rate=2, burst=2, reserve=(0, 1)
    ) as limiter:
        await limiter.acquire()
        await limiter.acquire()  # the bucket is empty: a unit every 0.5 s
        first = anyio.CancelScope()
        cancel_when_granted(limiter, first, stall=0.3)  # past the next one's deadline
        expired: list[bool] = []

        async def cancelled() -> None:
            with first:
                await limiter.acquire(0)

        async def impatient() -> None:
            with contextlib.suppress(AcquireTimeout):
                await limiter.acquire(0, timeout=0.5)  # due at 0.55 s, the grant at 0.5 s
                return
            expired.append(True)

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancelled)
            await anyio.sleep(0.05)
            tg.start_soon(impatient)
            tg.start_soon(limiter.acquire, 1)
        assert first.cancelled_caught
        assert expired == [True]
        assert limiter.given_back == 1, "the permit went into the batch caller's reserve"


def test_the_audit_nets_a_lease_given_back_whole(redis_server: RedisServer) -> None:
    """The audit the multi-process tests count the limit by: a lease of
    five permits given back in one request (its callers left during the
    round trip) takes five grants out, and a settle for more adds its
    units. The audit wrote a bare ``g`` per give-back, taken for one unit:
    the other four counted as granted, a false excess of the limit (the
    likely cause of ``test_four_processes_share_one_limit`` failing now
    and then on a loaded host, 0.79 and 0.34 permits over)."""
    name = fresh()
    limit = RedisLimit(redis_server.url, name=name, rate=1, burst=10, audit=True)
    try:
        assert limit.take(lease=8).taken == 5  # half the burst left
        limit.give_back((5,))
        assert audit(redis_server, name) == []
        assert limit.take().allowed
        limit.charge((2,))  # settled for 3 units
        assert len(audit(redis_server, name)) == 3
    finally:
        limit.close()


def test_script_cached_and_reloaded_after_noscript(redis_server: RedisServer) -> None:
    limit = RedisLimit(redis_server.url, name=fresh(), rate=1, burst=2)
    try:
        assert limit.take().allowed
        client = redis.Redis.from_url(redis_server.url)
        client.script_flush()  # as after a restart or failover
        client.close()
        assert limit.take().allowed  # EVALSHA answered NOSCRIPT; loaded and retried
        assert not limit.take().allowed  # capacity 2: the third is refused
    finally:
        limit.close()


async def acquire_thrice(limiter: RedisLimiter) -> None:
    for _ in range(3):
        await limiter.acquire(timeout=5)


#: Keys of a limit written by something else (another program, a hand at
#: redis-cli), each as a function of the state key, and whether it needs
#: global priority to be read.
_OVERWRITTEN: dict[str, tuple[Callable[[redis.Redis, str], object], bool]] = {
    "the state a string": (lambda c, key: (c.delete(key), c.set(key, "garbage")), False),
    "a bucket's time not a number": (lambda c, key: c.hset(key, "tat:units", "garbage"), False),
    "a changed limit not 'T burst'": (lambda c, key: c.hset(f"{key}:limits", "units", "x"), False),
    "the limits a string": (lambda c, key: c.set(f"{key}:limits", "garbage"), False),
    "a demand not numbers": (lambda c, key: c.hset(f"{key}:demand", "other", "garbage"), True),
    "a pause not a number": (lambda c, key: c.hset(key, "pause", "garbage"), False),
    "a quota not numbers": (lambda c, key: c.hset(key, "q:units", "garbage"), False),
    "a bucket's time not finite": (lambda c, key: c.hset(key, "tat:units", "inf"), False),
}


@pytest.mark.anyio
@pytest.mark.parametrize("overwrite", list(_OVERWRITTEN), ids=list(_OVERWRITTEN))
async def test_a_key_overwritten_by_something_else_closes_the_limiter_saying_what_to_do(
    redis_server: RedisServer, overwrite: str
) -> None:
    """P70: a key of the limit that something else overwrote with what the
    script cannot read (another type, or a field that is no number): the
    script fails, and the limiter closes (it cannot judge the limit), with
    an error that says Redis's own words, which key, and what to do: delete
    the keys or open the limit under another name. Its message said
    ``the limiter broke: server:ResponseError`` (redis-py's repr of the
    error), neither the reply nor the key."""
    corrupt, global_priority = _OVERWRITTEN[overwrite]
    name = fresh()
    key = f"permits:{{{name}}}"
    client = redis.Redis.from_url(redis_server.url)
    try:
        async with open_limiter(
            Fifo(1),
            redis_server.url,
            name=name,
            rate=100,
            burst=2,
            global_priority=global_priority,
        ) as limiter:
            await limiter.acquire()
            corrupt(client, key)
            with pytest.raises(LimiterClosed) as closed:  # (its second permit, or a wait)
                await acquire_thrice(limiter)
        message = str(closed.value)
        assert "ResponseError" in message, message
        assert "WRONGTYPE" in message or "user_script" in message, message  # Redis's words
        assert key in message, message
        assert "delete them" in message, message
    finally:
        client.delete(*(f"{key}{suffix}" for suffix in ("", ":limits", ":demand", ":line")))
        client.close()


@pytest.mark.anyio
async def test_a_state_key_deleted_by_something_else_starts_the_limit_afresh(
    redis_server: RedisServer,
) -> None:
    """P70: the state deleted under a running limiter (``DEL``, as ``FLUSHDB``
    or an eviction would): the next take finds full buckets, as after a
    restart, at most one burst more over a window that spans it; nothing
    breaks."""
    name = fresh()
    client = redis.Redis.from_url(redis_server.url)
    try:
        async with open_limiter(
            Fifo(1), redis_server.url, name=name, rate=1, burst=2, audit=True
        ) as limiter:
            await limiter.acquire()
            await limiter.acquire()  # the bucket is empty: the next in 1 s
            client.delete(f"permits:{{{name}}}")
            with anyio.fail_after(0.5):  # well before the bucket's next permit
                await limiter.acquire()
                await limiter.acquire()
            with pytest.raises(AcquireTimeout):
                await limiter.acquire(timeout=0.3)
    finally:
        client.close()
    assert len(audit(redis_server, name)) == 4  # burst, then burst again


@pytest.mark.anyio
@pytest.mark.parametrize("fault", ["SCRIPT FLUSH", "CLIENT KILL"])
async def test_waiters_ride_through_a_script_flush_or_a_dropped_connection(
    redis_server: RedisServer, fault: str
) -> None:
    """While callers wait, Redis forgets the script (``SCRIPT FLUSH``, as
    after a failover) or drops every client's connection (``CLIENT
    KILL``), twice: every caller is served, nothing fails, the limit holds
    on the Redis side, and Redis charged a permit for every caller (behind
    ``NOSCRIPT`` the script is loaded and run once: exactly one each; a
    take in flight as its connection dropped may have been charged with
    its reply lost: more, never fewer)."""
    name = fresh()
    admin = redis.Redis.from_url(redis_server.url)
    proceeded = 0

    async def call(limiter: RedisLimiter) -> None:
        nonlocal proceeded
        await limiter.acquire(timeout=5)
        proceeded += 1

    try:
        async with (
            open_limiter(
                Fifo(1), redis_server.url, name=name, rate=100, burst=2, lease=1, audit=True
            ) as limiter,
            anyio.create_task_group() as tg,
        ):
            for _ in range(30):
                tg.start_soon(call, limiter)
            for _ in range(2):
                await anyio.sleep(0.08)
                if fault == "SCRIPT FLUSH":
                    admin.script_flush()
                else:
                    admin.client_kill_filter(_type="normal", skipme=True)
    finally:
        admin.close()
    assert proceeded == 30
    charged = audit(redis_server, name)
    assert worst_excess(charged, 1e6 / 100, 2) <= 0
    assert len(charged) >= 30  # never a permit Redis did not charge
    if fault == "SCRIPT FLUSH":
        assert len(charged) == 30  # a NOSCRIPT ran nothing


def test_key_is_hash_tagged_and_expires_when_idle(redis_server: RedisServer) -> None:
    name = fresh()
    limit = RedisLimit(redis_server.url, name=name, rate=10, burst=3, prefix="app:")
    client = redis.Redis.from_url(redis_server.url)
    try:
        assert limit.key == f"app:{{{name}}}"
        start = time.monotonic()
        limit.take()
        ttl = client.pttl(limit.key)
        since_ms = (time.monotonic() - start) * 1000
        # full again after one interval (100 ms); kept a second more
        assert 1100 - since_ms - 1 <= ttl <= 1100
        time.sleep(1.15)
        assert client.exists(limit.key) == 0
    finally:
        limit.close()
        client.close()


@pytest.mark.parametrize("limits", [{"a": Limit(1, 3)}, {"a": Limit(1, 3), "b": Limit(2, 3)}])
def test_the_key_lives_as_long_as_its_buckets_need(
    redis_server: RedisServer, limits: dict[str, Limit]
) -> None:
    """Each take that needs the state kept longer lengthens its time to
    live: three takes at 1/s are 3 s to come back, for one limit (the plain
    take) and for two (the general steps)."""
    limit = RedisLimit(redis_server.url, name=fresh(), limits=limits)
    client = redis.Redis.from_url(redis_server.url)
    try:
        start = time.monotonic()
        for _ in range(3):
            assert limit.take().allowed
        ttl = client.pttl(limit.key)
        since_ms = (time.monotonic() - start) * 1000
        assert 3000 - since_ms - 1 <= ttl <= 4000  # until full again, a second more at most
    finally:
        limit.close()
        client.close()


def test_the_probe_leaves_the_limits_key_as_it_was(redis_server: RedisServer) -> None:
    """The fallback's probe writes the limit's key and undoes it: no key
    where there was none, the same fields and expiry where there was one."""
    limit = RedisLimit(redis_server.url, name=fresh(), rate=1, burst=3)
    client = redis.Redis.from_url(redis_server.url)
    try:
        limit.probe()
        assert client.exists(limit.key) == 0
        limit.take()
        before = client.hgetall(limit.key)
        limit.probe()
        assert client.hgetall(limit.key) == before
        assert 0 < client.pttl(limit.key) <= 2000  # full in 1 s, kept a second more
    finally:
        limit.close()
        client.close()


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({}, "rate"),
        ({"rate": 1, "limits": {"a": Limit(1)}}, "limits"),
        ({"burst": 5, "limits": {"a": Limit(1)}}, "limits"),  # each Limit has its own
        ({"limits": {"a": 1}}, "limits['a']"),  # named by its entry
        ({"limits": {}}, "limits"),
        ({"rate": 0}, "rate"),
        ({"rate": 1, "burst": 0}, "burst"),
        ({"rate": 1, "redis_timeout": None}, "redis_timeout"),  # every reply would wait forever
        ({"rate": 1, "redis_timeout": 0}, "redis_timeout"),  # every request would time out
        ({"rate": 1, "redis_timeout": -1}, "redis_timeout"),
        ({"rate": 1, "redis_timeout": math.nan}, "redis_timeout"),
        ({"rate": 1, "redis_timeout": math.inf}, "redis_timeout"),
        ({"rate": 1, "redis_timeout": "1"}, "redis_timeout"),
        (
            {"rate": 1, "redis_timeout": 1e10},
            "redis_timeout",
        ),  # past a socket's: taken, then failing
        # a unit in more than 1e9 s: the script's times would overflow
        ({"rate": Fraction(1, 10**10)}, "rate"),
        ({"limits": {"a": Limit(Fraction(1, 10**10))}}, "limits['a']"),
        # a unit in less than a microsecond: lost in the script's times
        ({"rate": 10**6 + 1}, "rate"),
        ({"rate": 1e30}, "rate"),
        ({"limits": {"a": Limit(1e30)}}, "limits['a']"),
        ({"rate": 1, "prefix": "app{}"}, "prefix"),  # an empty hash tag: keys in many slots
    ],
)
def test_bad_limits(options: dict[str, Any], argument: str) -> None:
    with pytest.raises((PermitValueError, PermitTypeError)) as error:
        RedisLimit("redis://127.0.0.1:1/0", name="x", **options)
    assert getattr(error.value, "argument", None) == argument


def test_a_timeout_for_redis_is_named_apart_from_an_acquires() -> None:
    """Redis's reply timeout is ``redis_timeout``: ``timeout`` is what an
    acquire waits for its permit, and a shared limit given one (for its
    replies, or its callers) says which is which, instead of passing it to
    redis-py, which failed at the first connect."""
    with pytest.raises(PermitTypeError) as error:
        RedisLimit("redis://127.0.0.1:1/0", name="x", rate=1, timeout=0.5)
    assert str(error.value) == (
        "timeout=0.5: expected redis_timeout=... for Redis's replies (a caller's own wait is "
        "acquire(timeout=...)), got timeout"
    )
    limit = RedisLimit("redis://127.0.0.1:1/0", name="x", rate=1, redis_timeout=0.25)
    assert limit._options["socket_timeout"] == limit._options["socket_connect_timeout"] == 0.25
    # open_limiter says the same, and names what it takes for another
    # keyword (Python's own error would not say which one was meant)
    with pytest.raises(PermitTypeError) as error:
        open_limiter(Fifo(), "redis://127.0.0.1:1/0", name="x", rate=1, timeout=0.5)  # type: ignore[arg-type]
    assert str(error.value).startswith("timeout=0.5: expected redis_timeout=...")
    with pytest.raises(TypeError) as unknown:
        open_limiter(Fifo(), "redis://127.0.0.1:1/0", name="x", rate=1, redis_timout=0.5)  # type: ignore[arg-type]
    assert str(unknown.value).startswith(
        "permits.adapters.redis.open_limiter() got an unexpected keyword argument "
        "'redis_timout' (it takes policy, url, name, rate, burst, limits, reserve,"
    )
    assert str(unknown.value).endswith("demand_ttl, book_ahead, lease)")


@pytest.mark.parametrize("name", ["}x", "}"])
def test_a_name_that_empties_the_hash_tag_is_refused(name: str) -> None:
    """``{}x}``: Redis Cluster would hash each of the limit's keys whole,
    into different slots, and every script call would fail (CROSSSLOT)."""
    with pytest.raises(PermitValueError) as error:
        RedisLimit("redis://127.0.0.1:1/0", name=name, rate=1)
    assert error.value.argument == "name"
    limit = RedisLimit("redis://127.0.0.1:1/0", name="x}y", rate=1, prefix="{app}:")
    assert limit.key == "{app}:{x}y}"  # tagged "app", as every key of the limit
    limit.close()


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"name": "x\ud800", "rate": 1}, "name"),
        ({"name": "x", "prefix": "\udcff:", "rate": 1}, "prefix"),
        ({"name": "x", "limits": {"\ud800": Limit(1)}}, "limits"),
    ],
)
def test_a_name_that_is_no_utf8_is_refused(options: dict[str, Any], argument: str) -> None:
    """A name, prefix or limit name that is no UTF-8 (a lone surrogate, as
    ``os.fsdecode`` makes of a byte it cannot decode) is refused at
    opening, naming it: it failed at the first round trip, closing the
    limiter (trio) or tearing down its task group (asyncio)."""
    with pytest.raises(PermitValueError) as error:
        RedisLimit("redis://127.0.0.1:1/0", **options)
    assert error.value.argument == argument


def test_try_acquire_is_not_offered_and_says_what_to_use() -> None:
    """``try_acquire`` (a permit free now, or none, at once) cannot be
    answered without a round trip: it is refused, as the README says, and
    the refusal names what does the same in one (it said "use acquire()",
    which waits)."""
    limit = RedisLimit("redis://127.0.0.1:1/0", name="x", rate=10, burst=1)
    limiter = RedisLimiter(StrictPriority(2), limit)
    try:
        with pytest.raises(NotImplementedError) as refused:
            limiter.try_acquire(1)
        assert str(refused.value) == (
            "try_acquire() needs a round trip to Redis: use `await limiter.acquire(level, "
            "timeout=0.05)`, which raises AcquireTimeout if no permit came within it"
        )
        text = " ".join((Path(__file__).parent.parent / "README.md").read_text().split())
        assert "`try_acquire` is not offered (`NotImplementedError`)" in text
    finally:
        limit.close()


@pytest.mark.anyio
async def test_a_limiter_made_by_hand_refuses_to_wait_naming_its_class() -> None:
    """A ``RedisLimiter`` made by hand, not opened by ``open_limiter``, has
    no driver: an acquire and a change of limit are refused at once with a
    ``RuntimeError`` naming its class and what to use (it named a class
    ``permits.adapters.redis.Limiter``, which does not exist), and the
    limits are as they were."""
    limit = RedisLimit("redis://127.0.0.1:1/0", name="x", rate=10, burst=1)
    limiter = RedisLimiter(StrictPriority(2), limit)
    said = (
        r"^this permits\.adapters\.redis\.RedisLimiter has no timer task, .*"
        r"`async with open_limiter\(\.\.\.\) as limiter:`$"
    )
    try:
        with pytest.raises(RuntimeError, match=said):
            await limiter.acquire(0)
        with pytest.raises(RuntimeError, match=said):
            limiter.set_limit(rate=5)
        assert limiter.limits == {"units": Limit(10, 1)}
    finally:
        limit.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_bad_costs_and_changes() -> None:
    """Bad input to the shared limit is refused in the caller, naming the
    argument, before anything goes to Redis."""
    limits = {"requests": Limit(10, burst=5), "tokens": Limit(100, burst=1000)}
    limit = RedisLimit("redis://127.0.0.1:1/0", name="x", limits=limits)
    limiter = RedisLimiter(StrictPriority(2), limit, settle_window=1)
    try:
        for cost, argument in [
            ({"nope": 1}, "cost"),
            ({"tokens": 1001}, "cost['tokens']"),
            (-1, "cost"),
        ]:
            with pytest.raises(PermitValueError) as error:
                limit.units("cost", cost)
            assert error.value.argument == argument
        with pytest.raises(PermitTypeError):
            limit.units("cost", "1")
        # a mapping's bad entry is named by its entry, as the machine's
        # errors name it (they named only the value)
        with pytest.raises(PermitTypeError) as typed:
            limit.units("cost", {"requests": 1, "tokens": 1.5})
        assert str(typed.value) == "cost['tokens']=1.5: expected an int of units, got float"
        with pytest.raises(PermitValueError) as valued:
            limit.units("cost", {"requests": 1, "tokens": -1})
        assert (valued.value.argument, valued.value.value) == ("cost['tokens']", -1)
        assert str(valued.value) == "cost['tokens']=-1: must be at least 0"
        for cost in (0, -1):  # one rule, whatever the sign, as the machine's
            with pytest.raises(
                PermitValueError, match=f"^cost={cost}: must take at least one unit of some limit$"
            ):
                await limiter.acquire(cost=cost)
        with pytest.raises(PermitValueError) as error:
            limiter.set_limit(rate=1)  # two limits: which one?
        assert error.value.argument == "limit"
        with pytest.raises(PermitValueError) as error:
            limiter.adopt(-1, 1.0, limit="tokens")
        assert error.value.argument == "remaining"
        with pytest.raises(PermitValueError) as error:
            limiter.pause_for(math.inf)
        assert error.value.argument == "seconds"
        # P88: past what the script's microseconds hold: the error it raised
        # halfway left the shared key unreadable, for every process, for ever
        with pytest.raises(PermitValueError) as error:
            limiter.pause_for(1e14)
        assert error.value.argument == "seconds"
        assert limiter.pause_left() == 0.0
        # P109: the same pause, asked until a moment, is refused naming the moment
        with pytest.raises(PermitValueError, match=r"s from now, and must be finite") as error:
            limiter.pause_until(datetime.now(timezone.utc) + timedelta(days=20_000))
        assert error.value.argument == "when"
        assert limiter.pause_left() == 0.0
        with pytest.raises(PermitValueError) as error:
            limiter.adopt(0, 1e14, limit="tokens")
        assert error.value.argument == "reset_after"
        with pytest.raises(PermitValueError) as error:
            limiter.set_limit(rate=Fraction(1, 10**10), limit="tokens")
        assert error.value.argument == "rate"
        assert limiter.limits == limits
        with pytest.raises(NotRefundable):
            limiter._settle(12345, {"tokens": 1})  # never granted
        assert limiter._pending == []  # nothing was sent
    finally:
        limit.close()


def test_a_burst_changed_to_a_levels_reserve_is_refused() -> None:
    """As opening refuses it: a burst at or below a level's reserve (that
    level then served only from a full bucket) is refused naming ``burst``,
    nothing sent, the limits as they were. It was taken."""
    limit = RedisLimit("redis://127.0.0.1:1/0", name="x", rate=10, burst=5)
    limiter = RedisLimiter(StrictPriority(2), limit, reserve=(0, 3))
    try:
        for burst in (3, 2):
            with pytest.raises(PermitValueError) as error:
                limiter.set_limit(burst=burst)
            assert (error.value.argument, error.value.value) == ("burst", burst)
            assert "above every level's reserve (the largest, 3)" in str(error.value)
        assert limiter.limits == {"units": Limit(10, burst=5)}
        assert limiter._pending == []  # nothing was sent
    finally:
        limit.close()


@pytest.mark.parametrize("call", ["set_limit", "adopt", "quota"])
@pytest.mark.parametrize("limit", [[], 5, b"units"])
def test_a_limit_named_by_no_str_is_a_type_error(call: str, limit: object) -> None:
    """A limit named by something other than a str is a PermitTypeError
    naming ``limit``, as on every adapter (a list raised a raw TypeError,
    unhashable; an int was a PermitValueError), and nothing is kept to send."""
    redis_limit = RedisLimit("redis://127.0.0.1:1/0", name="x", rate=10, burst=5)
    limiter = RedisLimiter(Fifo(1), redis_limit)
    try:
        arguments: dict[str, Any] = {"rate": 1} if call == "set_limit" else {}
        positional = () if call == "set_limit" else (1, 1.0)
        with pytest.raises(PermitTypeError) as error:
            getattr(limiter, call)(*positional, limit=limit, **arguments)
        assert error.value.argument == "limit"
        with pytest.raises(PermitTypeError):
            getattr(redis_limit, call)(*positional, limit=limit, **arguments)
        assert limiter._pending == []
        assert limiter.limits["units"] == Limit(10, burst=5)
    finally:
        redis_limit.close()


def test_bad_takes_and_give_backs_are_refused(redis_server: RedisServer) -> None:
    """RedisLimit's own take and give_back refuse a negative reserve or
    units (a reserve of -1 took from an empty bucket, into debt; units of
    -1 given back charged one), and units not one per limit, naming the
    argument; nothing goes to Redis. So is a cost of no unit, as a
    machine's push refuses it (it was sent, and allowed)."""
    limit = peek(redis_server, fresh(), rate=1, burst=2)
    try:
        assert limit.take(cost=(2,)).allowed  # empty now
        bad: list[tuple[dict[str, Any], str]] = [
            ({"reserve": -1}, "reserve"),
            ({"cost": (-1,)}, "cost[0]"),  # named by its entry
            ({"cost": (1, 1)}, "cost"),
            ({"lease": 0}, "lease"),
            ({"cost": (0,)}, "cost"),
        ]
        for options, argument in bad:
            with pytest.raises((PermitValueError, PermitTypeError)) as error:
                limit.take(**options)
            assert getattr(error.value, "argument", None) == argument, options
        with pytest.raises(PermitValueError) as refused:
            limit.give_back((-1,))
        assert refused.value.argument == "cost[0]"  # named by its entry
        answer = limit.take()
        assert not answer.allowed
        assert answer.remaining == (0,)  # nothing was taken or charged
    finally:
        limit.close()


@pytest.mark.parametrize(
    ("call", "options", "argument"),
    [
        ("take", {"level": -1}, "level"),  # it took a permit
        ("take", {"level": "0"}, "level"),
        ("take", {"level": True}, "level"),
        ("take", {"level": 1, "demand": (1,)}, "demand"),  # a script error, once allowed
        ("take", {"demand": ("x",)}, "demand[0]"),  # (a raw ValueError)
        ("take", {"demand": (-1,)}, "demand[0]"),  # (a bad entry named by its entry)
        ("take", {"demand": 5}, "demand"),  # (a raw TypeError)
        ("take", {"demand": ()}, "demand"),
        ("take", {"demand": (1,), "demand_ttl": math.inf}, "demand_ttl"),  # (a raw OverflowError)
        ("take", {"demand": (1,), "demand_ttl": 0}, "demand_ttl"),
        ("take", {"demand": (1,), "demand_ttl": "2"}, "demand_ttl"),
        ("take", {"book_ahead": math.inf}, "book_ahead"),
        ("take", {"book_ahead": math.nan}, "book_ahead"),
        ("take", {"book_ahead": -1}, "book_ahead"),
        ("take", {"book_ahead": "1"}, "book_ahead"),
        ("take", {"waiting": 2, "grace": math.inf}, "grace"),
        ("take", {"waiting": 2, "grace": -1}, "grace"),
        ("take", {"demand": (1,), "weights": (0,)}, "weights[0]"),  # (a ZeroDivisionError)
        ("take", {"demand": (1,), "weights": (1, 2)}, "weights"),
        ("take", {"demand": (1,), "weights": "1"}, "weights"),
        ("take", {"demand": (1,), "weights": (1,), "shared": 1}, "shared"),
        ("take", {"demand": (1,), "weights": (1,), "shared": -1}, "shared"),
        ("charge", {"units": ("x",)}, "units[0]"),  # a script error
        ("charge", {"units": (1.5,)}, "units[0]"),  # a debt of half a unit
        ("charge", {"units": (1, 1)}, "units"),
        ("publish_demand", {"demand": ("x",)}, "demand[0]"),
        ("publish_demand", {"demand": (1,), "demand_ttl": math.inf}, "demand_ttl"),
        ("publish_demand", {"demand": (1,), "demand_ttl": -5}, "demand_ttl"),  # published, expired
        ("leave", {"demand": "yes"}, "demand"),
    ],
)
def test_bad_arguments_of_the_limits_own_calls_are_refused(
    redis_server: RedisServer, call: str, options: dict[str, Any], argument: str
) -> None:
    """RedisLimit's take, charge, publish_demand and leave refuse a bad argument
    with PermitValueError or PermitTypeError naming it (they took a permit,
    charged half a unit, failed in the script or raised a raw Python
    error), and send nothing: Redis holds no key of the limit."""
    name = fresh()
    limit = peek(redis_server, name, rate=1, burst=2)
    try:
        with pytest.raises((PermitValueError, PermitTypeError)) as error:
            getattr(limit, call)(**options)
        assert getattr(error.value, "argument", None) == argument
        assert limit._client.keys(f"*{name}*") == []
    finally:
        limit.close()


def test_a_limit_that_would_take_ages_to_refill_is_refused(redis_server: RedisServer) -> None:
    """P21: a full bucket must refill within 1e9 s (about 31 years): at one unit
    per 1,000 s, a burst of 10**6 at most. (At 10**10, the script's time for
    a bucket taken whole, past 2**63 us, wrapped to a negative one, and the
    next take of the whole burst was granted too.) The client refuses what
    it can judge, with nothing sent; the script refuses a change of limit
    that gives the burst alone, knowing the rate, and stores nothing. P89:
    a burst alone past 10**15 is past the bound at any rate, and refused in
    the process."""
    slow = Fraction(1, 1000)
    with pytest.raises(PermitValueError) as error:
        RedisLimit(redis_server.url, name=fresh(), rate=slow, burst=10**6 + 1)
    assert error.value.argument == "burst"
    assert "more than 1e+09 s (about 31 years) to refill" in str(error.value)
    with pytest.raises(PermitValueError) as error:
        RedisLimit(redis_server.url, name=fresh(), limits={"tokens": Limit(slow, 10**6 + 1)})
    assert error.value.argument == "limits['tokens']"  # named by its entry
    assert error.value.value == Limit(slow, 10**6 + 1)
    name = fresh()
    limit = peek(redis_server, name, rate=slow, burst=10**6)  # at the bound: taken
    try:
        assert limit.take(10**6).allowed
        assert not limit.take(10**6).allowed
        with pytest.raises(PermitValueError) as error:
            limit.set_limit(rate=slow, burst=10**6 + 1)
        assert error.value.argument == "burst"
        assert limit._client.hgetall(limit.live_key) == {}  # nothing sent
        with pytest.raises(redis.exceptions.ResponseError, match="more than 1e9 s to refill"):
            limit.set_limit(burst=10**6 + 1)
        assert limit._client.hgetall(limit.live_key) == {}  # nothing stored
        # a burst alone past 10**15 is past the bound at any rate (10**6 a second at
        # most): refused in the process (P89), not sent for the script to refuse
        with pytest.raises(PermitValueError) as error:
            limit.set_limit(burst=2 * 10**15)
        assert error.value.argument == "burst"
        assert "to refill a full bucket of 2,000,000,000,000,000" in str(error.value)
        assert limit._client.hgetall(limit.live_key) == {}  # nothing sent
        limit.set_limit(burst=10**6 - 1)
        assert limit._client.hgetall(limit.live_key) == {b"units": b"1000000000 999999"}
    finally:
        limit.close()


@pytest.mark.anyio
async def test_a_limiter_refuses_a_change_that_would_take_ages_to_refill(
    redis_server: RedisServer,
) -> None:
    """P21 through the limiter: it judges a change of limit by the rate and
    burst it knows: refused, the limiter as it was, nothing sent; within the
    bound, made."""
    name = fresh()
    async with open_limiter(Fifo(), redis_server.url, name=name, rate=Fraction(1, 1000)) as lim:
        for change in ({"burst": 10**6 + 1}, {"rate": Fraction(1, 10_000), "burst": 10**5 + 1}):
            with pytest.raises(PermitValueError) as error:
                lim.set_limit(**change)
            assert error.value.argument == "burst"
        assert lim.limits["units"] == Limit(Fraction(1, 1000), 1)
        lim.set_limit(burst=10**6)  # at the bound
        assert lim.limits["units"] == Limit(Fraction(1, 1000), 10**6)
        with pytest.raises(PermitValueError) as error:
            lim.set_limit(rate=Fraction(1, 2000))  # that burst in 2 * 10**9 s
        assert error.value.argument == "rate"
        assert lim.limits["units"] == Limit(Fraction(1, 1000), 10**6)
        await lim.acquire()  # the change reached Redis, and left the limiter open
        assert not lim.closed
    check = peek(redis_server, name, rate=1, burst=1)
    try:
        assert check._client.hget(check.live_key, "units") == b"1000000000 1000000"
    finally:
        check.close()


def test_a_rate_above_a_unit_a_microsecond_is_refused(
    redis_server: RedisServer, script: Any
) -> None:
    """P21: a rate above 10**6 a second (a unit in less than a microsecond,
    the script's unit of time) is refused, naming the rate, at opening and
    in a change of limit, nothing sent. (At 1e30 a second, a unit of 1e-24
    us, as at 10**7, a tenth of one, the unit was lost in the bucket's
    time, about 2**50 us, which a Lua number holds to a quarter of a
    microsecond: every take of one unit was granted, however many came in
    one microsecond, and the bucket never stored.) At 10**6, a burst of 1
    lets one unit through in a microsecond, and the next a microsecond
    later (the script at chosen times)."""
    for rate in (10**6 + 1, 10**7, 1e30, Fraction(10**12, 3)):
        with pytest.raises(PermitValueError) as error:
            RedisLimit(redis_server.url, name=fresh(), rate=rate, burst=1)
        assert error.value.argument == "rate"
        assert "at most 1,000,000 a second" in str(error.value)
        with pytest.raises(PermitValueError) as error:
            RedisLimit(redis_server.url, name=fresh(), limits={"a": Limit(rate, 1)})
        assert error.value.argument == "limits['a']"  # named by its entry
        assert error.value.value == Limit(rate, 1)
        assert "its rate must be at most 1,000,000 a second" in str(error.value)
    name = fresh()
    limit = peek(redis_server, name, rate=10**6, burst=1)  # at the bound: taken
    try:
        with pytest.raises(PermitValueError) as error:
            limit.set_limit(rate=1e30)
        assert error.value.argument == "rate"
        assert limit._client.keys(f"*{name}*") == []  # nothing sent
        t0 = 1_700_000_000_000_000
        for now, allowed in [(t0, 1), (t0, 0), (t0 + 1, 1), (t0 + 1, 0), (t0 + 3, 1)]:
            request = limit.ask_take(0, (1,))
            keys = limit._keys[: request.keys]
            reply = script(keys=keys, args=[b"take", now, *request.args[2:]])
            assert reply[0] == allowed, (now - t0, reply)
    finally:
        limit._client.delete(limit.key)
        limit.close()


@pytest.mark.anyio
async def test_a_limiter_refuses_a_rate_above_a_unit_a_microsecond(
    redis_server: RedisServer,
) -> None:
    """P21 through the limiter: a change to a rate above 10**6 a second is
    refused, naming the rate, the limiter as it was and open."""
    async with open_limiter(Fifo(), redis_server.url, name=fresh(), rate=10**6, burst=5) as lim:
        with pytest.raises(PermitValueError) as error:
            lim.set_limit(rate=1e30)
        assert error.value.argument == "rate"
        assert lim.limits["units"] == Limit(10**6, 5)
        await lim.acquire()
        assert not lim.closed


@pytest.mark.anyio
async def test_a_burst_redis_cannot_count_is_refused_not_stored(redis_server: RedisServer) -> None:
    """P89: a change of limit to a burst above 2**53 is refused, in the
    process, the limiter as it was, nothing sent, even where the process
    could not judge the refill (the burst alone: the script judges it by
    the rate Redis holds): the script wrote it with %d from a Lua number,
    2**63 and more as -2**63, kept in Redis without expiry, and every
    process sharing the limit then closed at its next reply (a burst below
    1), for good."""
    name = fresh()
    async with open_limiter(Fifo(), redis_server.url, name=name, rate=10**6, burst=5) as lim:
        with pytest.raises(PermitValueError) as error:
            lim.set_limit(burst=10**20)
        assert error.value.argument == "burst"
        assert lim.limits["units"] == Limit(10**6, 5)
        await lim.acquire()
        assert not lim.closed
    check = peek(redis_server, name, rate=10**6, burst=5)
    try:
        assert check._client.hget(check.live_key, "units") is None
        with pytest.raises(PermitValueError):
            check.set_limit(burst=2**53 + 1)
    finally:
        check.close()


def test_no_secrets_in_reprs_or_errors() -> None:
    url = "redis://user:s3cret@127.0.0.1:1/0"
    limit = RedisLimit(url, name="x", rate=1, burst=1)
    assert "s3cret" not in repr(limit)
    assert "***" in repr(limit)
    error = BackendUnavailable(limit.url, 1.0, ConnectionError("refused"))
    assert "s3cret" not in str(error)
    limiter = RedisLimiter(StrictPriority(2), limit)
    assert "s3cret" not in repr(limiter)
    limit.close()


@pytest.mark.parametrize(
    "url",
    [
        "unix:///tmp/permits-none.sock?db=0&password=s3cret",
        "redis://127.0.0.1:1/0?password=s3cret",
        "redis://u:s3cret@127.0.0.1:1/0?socket_keepalive=1&password=s3cret",
    ],
)
def test_a_password_in_the_query_string_is_masked(url: str) -> None:
    """A password given in the URL's query string (redis-py's way for a
    Unix socket, ``unix:///path?password=...``) is masked as one before
    the ``@``: reprs and errors showed it."""
    limit = RedisLimit(url, name="x", rate=1, burst=1)
    try:
        assert "s3cret" not in repr(limit)
        assert "password=***" in limit.url
        error = BackendUnavailable(limit.url, 1.0, ConnectionError("refused"))
        assert "s3cret" not in str(error)
        assert "s3cret" not in repr(RedisLimiter(StrictPriority(2), limit))
    finally:
        limit.close()


@pytest.mark.parametrize(
    "url",
    [
        "127.0.0.1:6379",
        "http://127.0.0.1:6379/0",
        "redis://user:s3cret@127.0.0.1:port/0",
        "redis://:s3cret@127.0.0.1:99999999/0",
    ],
)
@pytest.mark.parametrize("cluster", [False, True])
def test_a_url_redis_cannot_read_is_refused_naming_it(url: str, cluster: bool) -> None:
    """A URL redis-py cannot read (no scheme, another scheme, a port that
    is no port) is refused as ``url``, its password masked; it was
    redis-py's ValueError (or urllib's, as the password was masked),
    naming no argument."""
    with pytest.raises(PermitValueError) as error:
        RedisLimit(url, name="x", rate=1, cluster=cluster)
    assert error.value.argument == "url"
    assert "s3cret" not in str(error.value)
    assert "port" in str(error.value).lower() or "scheme" in str(error.value)
    assert "write redis://[:password@]host:6379/0" in str(error.value)  # what to do


@pytest.mark.parametrize("url", ["redis://:s3cret@127.0.0.1:6379/abc", "rediss://127.0.0.1/x1"])
def test_a_database_that_is_no_number_is_refused_naming_the_url(url: str) -> None:
    """A URL whose database is no number is refused at once, as ``url``,
    saying what to write: redis-py read it as database 0, and the
    limiter's own client refused it only as its task started, a
    ``ValueError`` naming no argument inside an exception group."""
    with pytest.raises(PermitValueError) as error:
        RedisLimit(url, name="x", rate=1)
    assert error.value.argument == "url"
    assert "s3cret" not in str(error.value)
    assert "database, must be a number (redis://host:6379/0)" in str(error.value)


@pytest.mark.parametrize("audit", ["no", 0, None])
def test_audit_not_a_bool_is_a_type_error(audit: object) -> None:
    """``audit`` is a bool, as ``cluster`` is: ``audit="no"`` turned the
    audit on (a list in Redis kept an hour, an entry per grant), as any
    true value did."""
    with pytest.raises(PermitTypeError) as error:
        RedisLimit("redis://127.0.0.1:1/0", name="x", rate=1, audit=audit)  # type: ignore[arg-type]
    assert error.value.argument == "audit"


def test_a_name_not_a_str_is_a_type_error() -> None:
    with pytest.raises(PermitTypeError) as error:
        RedisLimit("redis://127.0.0.1:1/0", name=3, rate=1)  # type: ignore[arg-type]
    assert error.value.argument == "name"
    with pytest.raises(PermitValueError) as empty:
        RedisLimit("redis://127.0.0.1:1/0", name="", rate=1)
    assert empty.value.argument == "name"


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"reserve": (0,)}, "reserve"),
        ({"reserve": (0, 3)}, "reserve[1]"),  # burst 3: a reserve of 3 would starve the level
        ({"reserve": (0, -1)}, "reserve[1]"),
        ({"on_unavailable": "open"}, "on_unavailable"),
        ({"on_unavailable": "local"}, "share"),
        ({"on_unavailable": "local", "share": 1.5}, "share"),
        ({"share": 0.5}, "share"),  # on_unavailable="closed" never reads it
        ({"unavailable_after": 0}, "unavailable_after"),
        ({"demand_ttl": 0}, "demand_ttl"),
        ({"demand_ttl": 1e13}, "demand_ttl"),  # past the script's times (P88)
        ({"book_ahead": -1}, "book_ahead"),
        ({"book_ahead": math.inf}, "book_ahead"),
        ({"global_priority": True, "book_ahead": 1.5}, "book_ahead"),  # above demand_ttl / 2
        ({"settle_window": -1}, "settle_window"),
        ({"refund_window": math.inf}, "refund_window"),  # a PermitTypeError
        ({"refund_window": 1e300}, "refund_window"),
        ({"refund_window": math.nan}, "refund_window"),
        ({"refund_window": -1}, "refund_window"),
        # a shared permit is granted after a round trip, never at once: a
        # level that never queues would refuse every acquire
        ({"max_waiting": 0}, "max_waiting"),
        ({"max_waiting": (None, 0)}, "max_waiting"),
    ],
)
def test_bad_options(options: dict[str, Any], argument: str) -> None:
    """A bad option of the limiter is refused, naming it (a ``demand_ttl``
    past 1e9 s among them: P88)."""
    limit = RedisLimit("redis://127.0.0.1:1/0", name="x", rate=10, burst=3)
    with pytest.raises(PermitValueError) as error:
        RedisLimiter(StrictPriority(2), limit, **options)
    assert error.value.argument == argument
    limit.close()


def test_a_booking_past_half_the_demand_s_life_says_the_bound_and_what_to_do() -> None:
    """Under global priority a booking may reach at most half the demand's
    time to live: the refusal gives that bound in seconds and says what to
    change, not the rule alone."""
    limit = RedisLimit("redis://127.0.0.1:1/0", name="x", rate=10, burst=3)
    with pytest.raises(PermitValueError) as error:
        RedisLimiter(StrictPriority(2), limit, global_priority=True, book_ahead=1.5)
    assert str(error.value) == (
        "book_ahead=1.5: must be at most demand_ttl / 2 (1 s) under global priority, so that "
        "a booked permit's demand is still published when it comes: book less, or raise "
        "demand_ttl"
    )


def test_bad_options_are_refused_in_words() -> None:
    """A bad option of a Redis limit or limiter is refused, before any
    connection, saying the value and what to give: a bad entry of
    ``reserve`` by its entry (the whole tuple was named, a str entry as a
    bad value); a share that is no number as a ``PermitTypeError``; a
    timeout below 0 with the whole range (it said "at least 0", and 0 was
    refused next); a URL not a str by its type, its value hidden (it said
    "got str")."""
    url = "redis://127.0.0.1:1/0"
    constructed: list[tuple[dict[str, Any], str]] = [
        (
            {"url": b"redis://:s3cret@host/0"},
            "url='<hidden>': expected a str, such as 'redis://localhost:6379/0' "
            "(str() of a URL object), got bytes",
        ),
        ({"redis_timeout": -1}, "redis_timeout=-1: must be finite seconds > 0"),
        ({"redis_timeout": math.nan}, "redis_timeout=nan: must be finite seconds > 0"),
        (
            {"redis_timeout": 1e10},
            "redis_timeout=10000000000.0: must be at most 1e+09 seconds (about 31 years)",
        ),
    ]
    for bad, refusal in constructed:
        given: dict[str, Any] = {"url": url, "name": "x", "rate": 10, "burst": 3, **bad}
        with pytest.raises((PermitValueError, PermitTypeError)) as error:
            RedisLimit(given.pop("url"), **given)
        assert str(error.value) == refusal
    limit = RedisLimit(url, name="x", rate=10, burst=3)
    local: dict[str, Any] = {"on_unavailable": "local"}
    fraction = "this process's fraction of the rate, in (0, 1], for 'local'"
    limited: list[tuple[dict[str, Any], str]] = [
        (
            {"reserve": (0, 3)},
            "reserve[1]=3: must be from 0 to 2, below the smallest burst "
            "(3): units the level's requests must leave",
        ),
        ({"reserve": (0, "1")}, "reserve[1]='1': expected an int, got str"),
        ({"reserve": (0,)}, "reserve=(0,): needs one entry per level (2)"),
        ({**local, "share": "0.5"}, f"share='0.5': expected a number: {fraction}, got str"),
        ({**local, "share": 2}, f"share=2: must be {fraction}"),
        ({**local}, f"share=None: must be given: {fraction}"),
        ({"unavailable_after": -1}, "unavailable_after=-1: must be finite seconds > 0"),
    ]
    try:
        for options, refusal in limited:
            with pytest.raises((PermitValueError, PermitTypeError)) as error:
                RedisLimiter(StrictPriority(2), limit, **options)
            assert str(error.value) == refusal
    finally:
        limit.close()


def test_a_share_beside_closed_says_what_to_pass() -> None:
    """A ``share`` beside ``on_unavailable="closed"`` (which never reads
    it) is refused saying what to pass instead."""
    limit = RedisLimit("redis://127.0.0.1:1/0", name="x", rate=10, burst=3)
    try:
        with pytest.raises(PermitValueError, match="pass that, or no share") as error:
            RedisLimiter(StrictPriority(2), limit, share=0.5)
        assert error.value.argument == "share"
    finally:
        limit.close()


def test_a_negative_duration_is_refused_with_the_range_it_must_be_in() -> None:
    """A negative time that must be above 0 is refused saying so, as 0 is:
    it said 'must be >= 0', and 0 was refused next ('must be finite seconds
    > 0'); one that may be 0 says '>= 0' with the rest of its range."""
    limit = RedisLimit("redis://127.0.0.1:1/0", name="x", rate=10, burst=3)
    try:
        for demand_ttl in (-1, 0):
            with pytest.raises(PermitValueError, match=r"must be finite seconds > 0, at most"):
                RedisLimiter(StrictPriority(2), limit, demand_ttl=demand_ttl)
        for ttl in (-5, 0):
            refusal = r"^demand_ttl=.*: must be finite seconds > 0,"
            with pytest.raises(PermitValueError, match=refusal):
                limit.publish_demand((1,), demand_ttl=ttl)
        with pytest.raises(PermitValueError, match=r"^book_ahead=-1: must be finite seconds >= 0,"):
            limit.take(book_ahead=-1)
    finally:
        limit.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_an_infinite_refund_window_is_refused_by_open_limiter() -> None:
    """As by RedisLimiter: PermitValueError naming it, before anything runs."""
    with pytest.raises(PermitValueError) as error:
        async with open_limiter(
            Fifo(1), "redis://127.0.0.1:1/0", name="x", rate=1, refund_window=math.inf
        ):
            pass
    assert error.value.argument == "refund_window"


# -- what the core has, on the shared limit ----------------------------------


async def sent(*limiters: RedisLimiter) -> None:
    """Wait until every change the limiters were given is in Redis."""
    with anyio.fail_after(10):
        while any(limiter._pending for limiter in limiters):
            await anyio.sleep(0.002)
        await anyio.sleep(0.01)  # the last one's round trip is answered


def peek(server: RedisServer, name: str, **options: Any) -> RedisLimit:
    """Another process's view of the shared limit, by its own client."""
    return RedisLimit(server.url, name=name, **options)


@pytest.mark.anyio
async def test_costs_charge_every_limit_or_none(redis_server: RedisServer) -> None:
    """P39 through the limiter: a cost names its units of each limit; one
    acquire charges them all at once, and a cost that does not fit one
    limit waits without charging the other."""
    name = fresh()
    limits = {"requests": Limit(1, burst=5), "tokens": Limit(Fraction(1, 10), burst=100)}
    async with open_limiter(Fifo(1), redis_server.url, name=name, limits=limits) as limiter:
        await limiter.acquire(cost={"requests": 1, "tokens": 60})
        await limiter.acquire(cost={"tokens": 30})  # no request taken
        with pytest.raises(AcquireTimeout):  # 10 tokens left: 20 do not fit
            await limiter.acquire(cost={"requests": 1, "tokens": 20}, timeout=0.2)
        with pytest.raises(PermitValueError) as error:
            await limiter.acquire(cost={"tokens": 101})  # above the burst: never
        assert (error.value.argument, error.value.value) == ("cost['tokens']", 101)  # its entry
        # counted per limit: every unit asked, whichever limits it takes
        assert limiter.statistics().levels[0].units_granted == (1, 90)
    check = peek(redis_server, name, limits=limits)
    try:
        # requests 5 - 1, tokens 100 - 90 (the refused one took none)
        assert check.take(cost=(0, 1)).remaining == (4, 9)
    finally:
        check.close()


@pytest.mark.anyio
async def test_a_recording_keeps_the_cost_of_every_limit(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """A shared limiter's recording keeps each call's cost as it was asked,
    of every limit, and writes a ``cost.<limit>`` column for each: replayed,
    a call asks the tokens it asked for, not one of each limit."""
    from permits.sim import Call, read_trace

    limits = {"requests": Limit(1, burst=5), "tokens": Limit(10, burst=100)}
    async with open_limiter(Fifo(1), redis_server.url, name=fresh(), limits=limits) as limiter:
        recording = limiter.record()
        await limiter.acquire(cost={"requests": 1, "tokens": 60})
        await limiter.acquire(cost={"tokens": 30})
    assert [(c.cost, c.timeout_ns) for c in recording.calls] == [
        ({"requests": 1, "tokens": 60}, None),
        ({"tokens": 30}, None),
    ]
    path = tmp_path / "trace.csv"
    recording.write(path)
    with path.open(encoding="utf-8", newline="") as file:
        header = "at,level,cost.requests,cost.tokens,flow,timeout,max_wait,give_up_after\n"
        assert file.readline() == header
    with path.open(encoding="utf-8", newline="") as file:
        calls = [c._replace(at_ns=0, line=0) for c in read_trace(file, limits=limits)]
    assert calls == [
        Call(0, 0, {"requests": 1, "tokens": 60}),
        Call(0, 0, {"requests": 0, "tokens": 30}),
    ]


@pytest.mark.anyio
async def test_a_recorded_caller_granted_and_cancelled_before_it_ran_gives_up(
    redis_server: RedisServer,
) -> None:
    """A shared limiter's caller granted and cancelled before it ran (its
    permit handed to the next waiter) is recorded as giving up at its
    grant, about 0.5 s after it asked, so the replay hands the permit on
    too; it was recorded as waiting as long as it took."""
    async with open_limiter(Fifo(1), redis_server.url, name=fresh(), rate=2, burst=1) as limiter:
        recording = limiter.record()
        await limiter.acquire()  # the bucket's only permit: the next in 0.5 s
        await cancelled_at_its_grant_then_another(limiter)
    waited = recording.calls[1].give_up_after_ns
    assert waited is not None
    assert 0.3 * SECOND < waited < 5 * SECOND, waited
    assert recording.calls[2].give_up_after_ns is None


@pytest.mark.anyio
async def test_one_pause_for_all(redis_server: RedisServer) -> None:
    """P40 through two limiters (as two processes): a pause one of them
    stores holds up the other's next acquire, with no call of its own."""
    name = fresh()
    async with (
        open_limiter(Fifo(1), redis_server.url, name=name, rate=100, burst=5) as a,
        open_limiter(Fifo(1), redis_server.url, name=name, rate=100, burst=5) as b,
    ):
        await b.acquire()  # the bucket has permits to spare
        start = anyio.current_time()
        a.pause_for(0.4)  # a 429 with Retry-After: 0.4
        assert 0.2 < a.pause_left() <= 0.4  # its own pause (b does not know of it)
        assert b.pause_left() == 0.0
        await sent(a)
        await b.acquire()
        # the pause ends 0.4 s after Redis stored it, after start (a few ms
        # for the two clocks' reading)
        assert anyio.current_time() - start >= 0.39
        assert b.round_trips <= 3  # one refusal (told when the pause ends), one grant


@pytest.mark.anyio
async def test_this_process_s_pauses_are_counted(redis_server: RedisServer) -> None:
    """P46 on the Redis limiter: ``statistics()`` (and so the exporters'
    ``permits_pauses_total`` and ``permits_paused_seconds_total``) counts
    the pauses this process set that lengthened its pause, overlaps once;
    they read 0 after any number of 429s, the machine being fed from
    outside and keeping none."""
    prometheus_client = pytest.importorskip("prometheus_client")
    from permits.adapters.prometheus import PermitsCollector

    async with open_limiter(Fifo(1), redis_server.url, name=fresh(), rate=100, burst=5) as a:
        a.pause_for(30)
        a.pause_for(10)  # within the first: lengthens nothing
        a.pause_for(0)  # nothing
        whole = a.statistics()
        assert whole.pauses == 1
        assert whole.paused_ns == 30 * SECOND
        a.pause_for(31)  # a second or so more (as long as the test took)
        whole = a.statistics()
        assert whole.pauses == 2
        assert 31 * SECOND <= whole.paused_ns <= 32 * SECOND
        registry = prometheus_client.CollectorRegistry()
        registry.register(PermitsCollector(a))
        text = prometheus_client.generate_latest(registry).decode()
        assert 'permits_pauses_total{limiter="default"} 2.0' in text
        assert f'permits_paused_seconds_total{{limiter="default"}} {whole.paused_ns / 1e9}' in text


@pytest.mark.anyio
async def test_live_limits_and_the_upstreams_word(redis_server: RedisServer) -> None:
    """P41 through the limiter: set_limit in one process is the limit of
    every process from its next request; adopt lowers the shared bucket."""
    name = fresh()
    async with open_limiter(Fifo(1), redis_server.url, name=name, rate=1, burst=1) as a:
        other = peek(redis_server, name, rate=1, burst=1)  # opened with the old limit
        try:
            assert other.take().remaining == (0,)  # burst 1
            other.give_back()
            a.set_limit(rate=1.5, burst=5)  # the unit in the bucket carries over
            await sent(a)
            answer = other.take()
            assert answer.allowed
            # paced by the stored limit, not its own: the next unit within
            # 667 ms (1 s at the limit it was opened with)
            assert 0 <= answer.retry_after_us <= 666_667, answer
            a.adopt(0, 30.0)  # nothing left for 30 s
            await sent(a)
            answer = other.take()
            assert not answer.allowed
            assert answer.retry_after_us > 30e6  # 30 s, and the one unit after it
        finally:
            other.close()


@pytest.mark.anyio
async def test_every_shared_limit_is_read_back_and_learned_from(redis_server: RedisServer) -> None:
    """``limiter.limits`` names every shared limit (as opened, and as this
    process changed them), so that the HTTP integrations read the
    upstream's ``x-ratelimit-*-tokens`` into the shared ``tokens`` limit."""
    from permits._upstream import Upstream

    name = fresh()
    limits = {"requests": Limit(1, burst=5), "tokens": Limit(10, burst=100)}
    async with open_limiter(Fifo(1), redis_server.url, name=name, limits=limits) as limiter:
        assert limiter.limits == limits
        limiter.set_limit(rate=20, limit="tokens")
        assert limiter.limits == {**limits, "tokens": Limit(20, burst=100)}
        headers = {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "30s"}
        Upstream(limiter).learn(200, headers)
        await sent(limiter)
    check = peek(redis_server, name, limits=limits)
    try:
        answer = check.take(cost=(0, 1))
        assert not answer.allowed  # none left: the upstream's word reached Redis
    finally:
        check.close()


@pytest.mark.anyio
async def test_the_upstreams_quota_is_shared(redis_server: RedisServer) -> None:
    """P41 through the limiter: a quota one process is told (2 left for
    30 s) holds every process: two takes go at once, the third waits for
    the quota's end, not for the bucket."""
    name = fresh()
    async with open_limiter(Fifo(1), redis_server.url, name=name, rate=10, burst=5) as a:
        a.quota(2, 30.0)
        await sent(a)
        other = peek(redis_server, name, rate=10, burst=5)
        try:
            assert other.take().allowed
            assert other.take().allowed
            answer = other.take()
            assert not answer.allowed
            assert 29e6 < answer.retry_after_us <= 30e6, answer
        finally:
            other.close()


@pytest.mark.parametrize("remaining", [2**53 + 1, 2**63 - 1, 2**64, 10**30])
def test_a_quota_of_more_than_redis_counts_exactly_never_blocks(
    redis_server: RedisServer, remaining: int
) -> None:
    """P74: the upstream's quota of a huge number of units left (an API's
    "unlimited", often 2**63 - 1, as the IETF ``RateLimit`` field's
    ``remaining``, which permits.httpx passes on) holds back nothing. The
    script wrote it with ``%d`` from a Lua number: 2**63 and above came
    out as -2**63 in Redis, and every take of every process was refused
    until the quota's end (up to 1e9 s)."""
    limit = RedisLimit(redis_server.url, name=fresh(), rate=10, burst=5)
    try:
        limit.quota(remaining, 60.0)
        answer = limit.take()
        assert answer.allowed, answer
        limit.quota(2, 60.0)  # a quota beside it still holds, as before
        assert limit.take().allowed
        assert limit.take().allowed
        assert not limit.take().allowed
    finally:
        limit.close()


@pytest.mark.anyio
async def test_settle_on_the_shared_key(redis_server: RedisServer) -> None:
    """P41 through the limiter: a permit settled for more charges the
    difference on the shared key, one settled for less gives it back; a
    permit past its settle window, or settled twice, is refused."""
    name = fresh()
    async with open_limiter(
        Fifo(1), redis_server.url, name=name, rate=0.1, burst=10, settle_window=5
    ) as limiter:
        first = await limiter.acquire(cost=2)
        second = await limiter.acquire(cost=2)
        first.settle(5)  # 3 more
        second.settle(0)  # 2 back
        with pytest.raises(NotRefundable, match=r"^permit=<Permit level=0 cost=2 flow=None>: "):
            second.settle(1)
        await sent(limiter)
    check = peek(redis_server, name, rate=0.1, burst=10)
    try:
        assert check.take().remaining == (4,)  # 10 - 5 - 0 - this one
    finally:
        check.close()


@pytest.mark.anyio
async def test_a_settle_keeps_on_the_shared_key_the_limits_it_leaves_out(
    redis_server: RedisServer,
) -> None:
    """P41 with several limits: a settle naming only ``tokens`` gives back
    tokens and keeps the request on the shared key; one bare number, which
    names no limit, is refused and changes nothing."""
    name = fresh()
    limits = {"requests": Limit(Fraction(1, 10), burst=5), "tokens": Limit(Fraction(1, 10), 100)}
    async with open_limiter(
        Fifo(1), redis_server.url, name=name, limits=limits, settle_window=5
    ) as limiter:
        permit = await limiter.acquire(cost={"requests": 1, "tokens": 60})
        with pytest.raises(PermitValueError, match=r"^actual=20: is one number for several"):
            permit.settle(20)
        permit.settle({"tokens": 20})  # 40 back, the request kept
        assert limiter.statistics().levels[0].units_granted == (1, 20)
        await sent(limiter)
    check = peek(redis_server, name, limits=limits)
    try:
        assert check.take(cost=(0, 1)).remaining == (4, 79)  # 5 - 1; 100 - 20 - this one
    finally:
        check.close()


@pytest.mark.anyio
async def test_a_settle_above_the_burst_puts_the_shared_bucket_in_debt(
    redis_server: RedisServer,
) -> None:
    """P41: a call that turned out to cost more than a whole burst (an LLM
    answer longer than expected) is settled as in the core: the difference
    is charged, the bucket goes into debt and holds up every process's
    takes until it is paid back. Refusing it would leave the units unpaid."""
    name = fresh()
    async with open_limiter(
        Fifo(1), redis_server.url, name=name, rate=0.1, burst=10, settle_window=5
    ) as limiter:
        permit = await limiter.acquire(cost=2)
        permit.settle(25)  # 23 more: 15 in debt
        with pytest.raises(NotRefundable):
            permit.settle(2)  # settled once
        await sent(limiter)
    check = peek(redis_server, name, rate=0.1, burst=10)
    try:
        answer = check.take()
        assert not answer.allowed
        assert answer.remaining == (-15,), answer
    finally:
        check.close()


@pytest.mark.anyio
async def test_a_settle_of_a_debt_redis_cannot_hold_is_refused(redis_server: RedisServer) -> None:
    """P90: a settle whose debt would take more than 1e9 s to pay back (the
    bound of every time the script keeps) is refused, naming ``actual``,
    the permit still settleable and the limiter open. It was sent: the
    script wrote the bucket's time with %d (2**63 and more as -2**63: a
    full bucket), failed on the key's expiry, and the limiter closed; so
    did ``RedisLimit.charge``'s."""
    name = fresh()
    async with open_limiter(
        Fifo(1), redis_server.url, name=name, rate=1, burst=10, settle_window=5
    ) as limiter:
        permit = await limiter.acquire(cost=2)
        for actual in (10**9 + 11, 10**30, {"units": 10**30}):
            with pytest.raises(PermitValueError) as error:
                permit.settle(actual)
            assert error.value.argument == "actual"
        permit.settle(12)  # 10 more, at the bound
        await sent(limiter)
        assert not limiter.closed
    check = peek(redis_server, name, rate=1, burst=10)
    try:
        with pytest.raises(PermitValueError) as error:
            check.charge([10**30])
        assert error.value.argument == "units"
        answer = check.take()
        assert not answer.allowed
        assert answer.remaining == (-2,), answer
    finally:
        check.close()


@pytest.mark.anyio
async def test_changes_made_just_before_closing_reach_redis(redis_server: RedisServer) -> None:
    """A pause (a 429 seen on the way out), a settle and new limits given
    as the last thing in the ``async with`` still reach the shared key:
    leaving sends what the driver had no time to."""
    name = fresh()
    async with open_limiter(
        Fifo(1), redis_server.url, name=name, rate=1, burst=10, settle_window=5
    ) as limiter:
        permit = await limiter.acquire()
        permit.settle(4)  # 3 more
        limiter.set_limit(burst=20)  # the units in the bucket carry over
        limiter.pause_for(30)
    check = peek(redis_server, name, rate=1, burst=10)
    client = redis.Redis.from_url(redis_server.url)
    try:
        answer = check.take()
        assert not answer.allowed
        assert answer.retry_after_us > 20e6, answer  # paused for 30 s
        assert answer.remaining == (6,), answer  # 10 - 4
        assert client.hget(check.live_key, "units") == b"1000000 20"
    finally:
        check.close()
        client.close()


@pytest.mark.anyio
async def test_a_change_redis_refuses_as_the_limiter_closes_leaves_the_rest_done(
    redis_server: RedisServer,
) -> None:
    """A change Redis refuses as the limiter closes (a burst that, at the
    rate another process set, would take ages to refill) is raised from the
    ``async with``, once the rest of the closing is done: the changes given
    after it reach Redis, and the clients are closed (the error skipped
    all of that)."""
    name = fresh()
    other = peek(redis_server, name, rate=10, burst=5)
    try:
        other.set_limit(rate=Fraction(1, 10**4))  # a unit every 10,000 s, for every process
        opened: list[RedisLimiter] = []

        async def change_and_close() -> None:
            async with open_limiter(
                Fifo(1), redis_server.url, name=name, rate=10, burst=5
            ) as limiter:
                opened.append(limiter)
                limiter.set_limit(burst=10**6)  # fine at 10/s; 3e8 years at Redis's rate
                limiter.pause_for(30)

        with pytest.raises(redis.exceptions.ResponseError, match="1e9 s to refill"):
            await change_and_close()
        assert opened[0].limit._aclient is None  # closed
        answer = other.take()
        assert not answer.allowed
        assert answer.retry_after_us > 20e6, answer  # the pause reached Redis
    finally:
        other.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_a_permit_taken_as_the_limiter_closes_goes_back_to_redis(
    redis_server: RedisServer,
) -> None:
    """A permit nobody used is never lost, closing included: 20 callers
    come, and the limiter closes after 0 to 11 passes of the event loop,
    while a take (a lease of 16, or a lone caller's) is in flight, or its
    answer is being handed out, or a permit is booked. The units Redis
    charged, less those given back, are those of the callers that
    proceeded (a take in flight was cancelled, and its permits, charged,
    went to nobody: up to 16 of 40)."""
    for passes in range(12):
        for book_ahead in (0.0, 5.0):
            name = fresh()
            proceeded = 0

            async def caller(limiter: RedisLimiter) -> None:
                nonlocal proceeded
                with contextlib.suppress(LimiterClosed):
                    await limiter.acquire()
                    proceeded += 1

            async with (
                anyio.create_task_group() as tg,
                open_limiter(
                    Fifo(1), redis_server.url, name=name, rate=1, burst=40, book_ahead=book_ahead
                ) as limiter,
            ):
                await limiter.acquire()  # (the connection is open)
                proceeded += 1
                if book_ahead:
                    for _ in range(39):
                        await limiter.acquire()  # the bucket is empty: the next is booked
                    proceeded += 39
                for _ in range(20):
                    tg.start_soon(caller, limiter)
                for _ in range(passes):
                    await anyio.lowlevel.checkpoint()
            other = peek(redis_server, name, rate=1, burst=40)
            try:
                left = other.charge((0,)).remaining[0]
            finally:
                other.close()
            assert left == 40 - proceeded, (passes, book_ahead, proceeded, left)


@pytest.mark.anyio
async def test_a_permit_granted_as_the_limiter_closes_to_a_caller_that_leaves_goes_back(
    redis_server: RedisServer,
) -> None:
    """A caller outside the limiter's block is granted its permit, the
    limiter closes, and the caller, resuming, leaves (cancelled): its
    permit goes back to Redis with the changes the closing sends. It was
    dropped once closed (Redis charged one unit nobody used); a storm of
    400 such callers lost up to 14 units a run."""
    name = fresh()
    scope = anyio.CancelScope()
    async with (
        anyio.create_task_group() as tg,
        open_limiter(Fifo(1), redis_server.url, name=name, rate=1, burst=10) as limiter,
    ):
        await limiter.acquire()  # (the connection is open)
        dispatch = limiter._dispatch

        def closing(decisions: list[Decision]) -> None:
            dispatch(decisions)
            if not scope.cancel_called and any(d.state is State.GRANTED for d in decisions):
                scope.cancel()  # its caller leaves as it resumes, after
                limiter._break(None)  # the limiter closed (as leaving its block does first)

        limiter._dispatch = closing  # type: ignore[method-assign]

        left = anyio.Event()

        async def caller() -> None:
            try:
                with scope:
                    await limiter.acquire()
            finally:
                left.set()

        tg.start_soon(caller)
        with anyio.fail_after(5):
            await left.wait()  # it left before the closing (leaving the block) was done
        assert limiter.closed
    assert scope.cancelled_caught
    other = peek(redis_server, name, rate=1, burst=10)
    try:
        assert other.charge((0,)).remaining[0] == 9  # the first acquire's unit only
    finally:
        other.close()


@pytest.mark.anyio
async def test_a_cost_above_a_lowered_burst_fails(redis_server: RedisServer) -> None:
    name = fresh()
    async with open_limiter(Fifo(1), redis_server.url, name=name, rate=0.5, burst=4) as a:
        await a.acquire(cost=4)  # empty for 8 s
        a.set_limit(burst=2)
        await sent(a)
        with pytest.raises(PermitValueError) as error:
            await a.acquire(cost=3)
        assert error.value.argument == "cost"


@pytest.mark.anyio
async def test_a_cost_within_a_raised_burst_is_granted(redis_server: RedisServer) -> None:
    """A burst this process raised holds for its own acquires at once:
    ``limits`` says so, and a cost above the burst it opened with, within
    the new one, is granted (it was refused as above the old burst)."""
    name = fresh()
    async with open_limiter(Fifo(1), redis_server.url, name=name, rate=100, burst=4) as a:
        a.set_limit(burst=10)
        await sent(a)
        with anyio.fail_after(10):
            await a.acquire(cost=8)
        with pytest.raises(PermitValueError) as error:
            await a.acquire(cost=11)
        assert error.value.argument == "cost"


@pytest.mark.anyio
async def test_a_lease_takes_several_permits_per_round_trip(
    redis_server: RedisServer, anyio_backend: str
) -> None:
    """P45 through the limiter: 50 callers queued at once under a limit
    with room for all, a lease of 10: about 10 permits per round trip,
    handed out in the policy's order, every one charged in Redis. The
    order is read from the decisions the limiter acts on, on every backend
    (its ids count its pushes), and from the callers' resumption where it
    follows them (asyncio)."""
    name = fresh()
    pushed: list[int] = []
    order: list[int] = []
    granted: list[Any] = []  # the ids: ints, in push order
    async with open_limiter(
        Fifo(1), redis_server.url, name=name, rate=1000, burst=100, lease=10, audit=True
    ) as limiter:
        dispatch = limiter._dispatch

        def observed(decisions: list[Decision]) -> None:
            granted.extend(d.id for d in decisions if d.state is State.GRANTED)
            dispatch(decisions)

        limiter._dispatch = observed  # type: ignore[method-assign]

        async def call(i: int) -> None:
            pushed.append(i)  # no checkpoint before the push: the same order
            await limiter.acquire()
            order.append(i)

        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(call, i)
        if anyio_backend == "asyncio":  # (trio resumes woken tasks in any order)
            assert order == pushed  # FIFO
        assert sorted(order) == list(range(50))
        assert len(granted) == 50
        assert granted == sorted(granted), ("P45: not in push order", granted)  # FIFO
        assert limiter.round_trips <= 12, limiter.round_trips  # 50 without a lease
    assert len(audit(redis_server, name)) == 50


@pytest.mark.anyio
@pytest.mark.parametrize("lease", [1, 10])
async def test_a_leases_price_in_priority(redis_server: RedisServer, lease: int) -> None:
    """P45: permits taken for a level go, as they come back, to the waiter
    the policy chooses then: an urgent caller that arrives while its
    process waits for Redis (a lease in flight or not) is handed the first
    permit that comes back, before any batch caller. 30 batch callers queue
    at once under a limit with room for all; the urgent one arrives after 0
    to 11 passes of the event loop, before, during and after the first
    requests. (The grants are read from the decisions the limiter acts on,
    in its order, not from when each task resumes.)"""
    async with open_limiter(
        StrictPriority(2), redis_server.url, name=fresh(), rate=10_000, burst=1_000, lease=lease
    ) as limiter:
        await limiter.acquire(BATCH)  # connected, the script loaded
        events: list[int | str] = []  # the levels granted, and "urgent" at its arrival
        dispatch = limiter._dispatch

        def observed(decisions: list[Decision]) -> None:
            events.extend(d.level for d in decisions if d.state is State.GRANTED)
            dispatch(decisions)

        limiter._dispatch = observed  # type: ignore[method-assign]
        for passes in range(12):
            events.clear()

            async def interactive(passes: int = passes) -> None:
                for _ in range(passes):
                    await anyio.lowlevel.checkpoint()
                events.append("urgent")
                await limiter.acquire(INTERACTIVE)

            async with anyio.create_task_group() as tg:
                for _ in range(30):
                    tg.start_soon(limiter.acquire, BATCH)
                tg.start_soon(interactive)
            arrived = events.index("urgent")
            assert events[arrived + 1] == INTERACTIVE, (passes, events)
            assert events.count(BATCH) == 30


async def acquire_at_once(limiter: RedisLimiter, callers: int) -> None:
    """``callers`` tasks queue at once, and each acquires its permit."""
    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(limiter.acquire)


@pytest.mark.anyio
async def test_a_limiters_options_are_fixed_once_opened(redis_server: RedisServer) -> None:
    """Its options are read as attributes; one set later was taken
    unchecked and broke the limiter at its next take (``lease = "2"``: a
    TypeError, every caller's LimiterClosed). Each is refused, naming it,
    and the limiter works on as opened."""
    async with open_limiter(Fifo(1), redis_server.url, name=fresh(), rate=100, burst=10) as limiter:
        later = [("lease", "2"), ("book_ahead", -1.0), ("reserve", (5,)), ("limit", None)]
        for name, value in later:
            with pytest.raises(AttributeError, match=rf"^{name}: a RedisLimiter's options are"):
                setattr(limiter, name, value)
        assert (limiter.lease, limiter.book_ahead, limiter.reserve) == (16, 0.0, (0,))
        await limiter.acquire()
        assert not limiter.closed


@pytest.mark.anyio
async def test_a_lease_leaves_half_the_burst(redis_server: RedisServer) -> None:
    """P45: the default lease takes extra permits only while half of the
    burst stays free for the other processes. 30 callers queued at once
    under a burst of 10 at 100/s: the first request takes 5 (10 down to
    5), and every permit after it comes alone, as it falls due."""
    name = fresh()
    async with open_limiter(
        Fifo(1), redis_server.url, name=name, rate=100, burst=10, audit=True
    ) as limiter:
        assert limiter.lease == 16
        await acquire_at_once(limiter, 30)
        grants = audit(redis_server, name)
        assert len(grants) == 30
        assert grants[:5] == [grants[0]] * 5  # the first five in one take
        assert grants[5] != grants[0]
    # The rest as they fall due: one a take, unless a late loop found more
    # due and half the burst still free after the take (the bucket replayed
    # from the grant times Redis recorded, so load cannot fail it).
    free, last = 10.0, grants[0]
    for at, group in itertools.groupby(grants):
        taken = len(list(group))
        free = min(10.0, free + (at - last) / (1e6 / 100))
        last = at
        assert taken == 1 or free - taken >= 5 - 1e-6, (at, taken, free)
        free -= taken
    assert worst_excess(grants, 1e6 / 100, 10) <= 1e-9


@pytest.mark.anyio
@pytest.mark.parametrize("callers", [1, 3, 20])
async def test_a_lease_takes_no_permit_ahead_of_its_callers(
    redis_server: RedisServer, callers: int
) -> None:
    """P45: a request asks for at most as many permits as callers wait at
    its level when it is sent, so the default lease is the asks of callers
    already there sent in one round trip, never permits taken ahead of
    demand: with a burst that has room for all and nobody leaving, no permit
    is ever given back, and Redis charges exactly one per caller."""
    name = fresh()
    async with open_limiter(
        Fifo(1), redis_server.url, name=name, rate=1000, burst=100, audit=True
    ) as limiter:
        assert limiter.lease == 16
        await acquire_at_once(limiter, callers)
    entries = audit_entries(redis_server, name)
    assert [e for e in entries if e.startswith("g")] == []  # nothing given back
    assert len(entries) == callers


@pytest.mark.anyio
@pytest.mark.parametrize("costs", [[1, 2] * 10, [1] * 8 + [2] * 8 + [1] * 4])
async def test_a_lease_takes_no_permit_for_callers_of_another_cost(
    redis_server: RedisServer, costs: list[int]
) -> None:
    """P45 with costs: a lease is the asks of callers already there that it
    can serve, the callers its permits go to, in their order, for as long
    as they ask for the head's cost: 20 callers of two costs queued at once,
    under a burst with room for all and nobody leaving, are charged once
    each and nothing is given back; under the upstream's quota of exactly
    the units they ask, every one is served. (A lease counted every caller
    of the level: one asking for 1 unit took 16 permits of 1, gave 15 back
    and charged the quota for them all, so 5 callers of 20 were served.)"""
    name = fresh()
    async with open_limiter(
        Fifo(1), redis_server.url, name=name, rate=1000, burst=100, audit=True
    ) as limiter:
        limiter.quota(sum(costs), 60)
        await sent(limiter)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for cost in costs:
                    tg.start_soon(partial(limiter.acquire, cost=cost))
        assert limiter.given_back == 0
    entries = audit_entries(redis_server, name)
    assert [e for e in entries if e.startswith("g")] == []  # nothing given back
    assert len(entries) == len(costs)


# -- several real processes -------------------------------------------------

WORKERS = 4
RATE, BURST, SECONDS = 200, 10, 5


def start_processes(
    server: RedisServer, name: str, reserve: str, *flags: str, seconds: float = SECONDS
) -> tuple[float, list[subprocess.Popen[str]]]:
    """The worker processes and the time (wall clock) they start together."""
    start_at = time.time() + 3.0  # all four start together, after their imports
    script = Path(__file__).with_name("redis_worker.py")
    workers = []
    for i in range(WORKERS):
        argv = [sys.executable, str(script), server.url, name]
        argv += ["--backend", "asyncio" if i % 2 == 0 else "trio", "--reserve", reserve]
        argv += ["--rate", str(RATE), "--burst", str(BURST), "--seconds", str(seconds)]
        argv += ["--seed", str(i), "--start-at", str(start_at), *flags]
        workers.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
    return start_at, workers


def report(worker: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = worker.communicate(timeout=40)
    assert worker.returncode == 0
    return json.loads(out)  # type: ignore[no-any-return]


def run_processes(
    server: RedisServer, reserve: str, *flags: str
) -> tuple[str, list[dict[str, Any]]]:
    name = fresh()
    _, workers = start_processes(server, name, reserve, *flags)
    return name, [report(worker) for worker in workers]


def p99(waits: list[float]) -> float:
    ordered = sorted(waits)
    return ordered[max(1, math.ceil(0.99 * len(ordered))) - 1]


@pytest.mark.timeout(120)
def test_four_processes_share_one_limit(redis_server: RedisServer) -> None:
    """Four processes (two on asyncio, two on trio), each with a batch
    backlog and Poisson interactive calls, share 200 permits/s for 5 s,
    once with a headroom reserve of 3 for the batch, once with global
    priority (P43) and no reserve, and once with neither.

    Counted on the Redis side: no window exceeds the limit, and the limit is
    used (at least 85%: 95% and more on an idle machine, 93% seen with other
    jobs holding both cores, the processes waiting for one). The interactive
    p50 and p99 over all processes, side by side, show what each is for.

    P48: each process waits for its turn in the line, so with neither a
    reserve nor global priority (nobody asks before its turn) a permit
    costs about one round trip, not one per process: 1.5 allowed."""
    results = {}
    for label, reserve, *flags in (
        ("reserve 3", "0,3"),
        ("global priority", "0,0", "--global-priority"),
        ("no reserve", "0,0"),
    ):
        name, reports = run_processes(redis_server, reserve, *flags)
        grants = audit(redis_server, name)
        assert worst_excess(grants, 1e6 / RATE, BURST) <= 1e-9, label
        assert len(grants) >= 0.85 * RATE * SECONDS, (label, len(grants))
        # Every permit a caller got was charged in Redis; the others charged
        # were given back, or in flight when the processes stopped: at most
        # one request's per process (a lease leaves half the burst, so it
        # takes at most the other half) and one being handed over.
        proceeded = sum(sum(r["granted"].values()) for r in reports)
        given_back = sum(r["given_back"] for r in reports)
        in_flight = (BURST - BURST // 2 + 1) * WORKERS
        assert proceeded <= len(grants) <= proceeded + given_back + in_flight, label
        waits = [w for r in reports for w in r["waits"]]
        offered = sum(r["offered"] for r in reports)
        results[label] = (p99(waits), len(waits), offered, statistics.median(waits))
        round_trips = sum(r["round_trips"] for r in reports)
        print(f"{label}: {len(grants)} permits, {round_trips / len(grants):.2f} round trips each")
        if label == "no reserve":
            assert round_trips / len(grants) <= 1.5, ("P48", round_trips, len(grants))
    for label, (worst, served, offered, median) in results.items():
        print(
            f"{label}: interactive p50 {median * 1e3:.1f} ms, p99 {worst * 1e3:.1f} ms, "
            f"{served} of {offered} served"
        )
    with_reserve, first = results["reserve 3"][0], results["global priority"][0]
    # the medians: the line took the herd's worst waits away from all three,
    # so the tails of a loaded machine are close
    assert results["reserve 3"][3] < results["no reserve"][3], results
    assert results["global priority"][3] < results["no reserve"][3], results
    # Found at once, from any process: a few ms on an idle machine (BENCHMARKS.md).
    # Four processes on a loaded machine wait for a core too (p99s of 135 and
    # 279 ms were seen with two other test suites running on the host's two
    # cores), so the margin is 100 permit intervals, 0.5 s of a 5 s run: no
    # interactive call starves behind the batch (one that did would wait to
    # the end, and go unserved: checked below).
    assert with_reserve < 100 / RATE, results
    assert first < 100 / RATE, results
    for label in ("reserve 3", "global priority"):  # every interactive call served
        assert results[label][1] == results[label][2], (label, results)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_global_priority_under_a_process_serving_a_lower_level_first(
    redis_server: RedisServer,
) -> None:
    """P42: a process whose own policy serves a less urgent level while it
    has a more urgent waiter (``Shares``) is not held up by another
    process's waiter between the two levels, so neither waits for the other
    forever. Process B (shares of three levels, equal weights) has three
    waiters at level 0 and one at level 2: its second permit goes to level
    2 (the shares, counted in Redis, owe it), while level-0 waiters of its
    own are left; process A waits at level 1, held up by them. Every waiter
    is served."""
    name = fresh()
    served: list[tuple[str, int]] = []
    url = redis_server.url
    options: dict[str, Any] = {"name": name, "rate": 50, "burst": 1, "global_priority": True}
    async with (
        open_limiter(StrictPriority(3), url, **options) as a,
        open_limiter(Shares((1, 1, 1)), url, **options) as b,
    ):

        async def call(limiter: RedisLimiter, process: str, level: int) -> None:
            await limiter.acquire(level, timeout=5)
            served.append((process, level))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, a, "a", 1)  # takes the bucket's permit
            tg.start_soon(call, a, "a", 1)  # waits, published
            with anyio.fail_after(5):
                while len(a.machine) < 1 or not served:
                    await anyio.sleep(0.001)
            for level in (0, 0, 0, 2):
                tg.start_soon(call, b, "b", level)
    assert sorted(served) == [("a", 1), ("a", 1), ("b", 0), ("b", 0), ("b", 0), ("b", 2)]
    assert [level for process, level in served if process == "b"] == [0, 2, 0, 0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_global_shares_across_two_limiters(redis_server: RedisServer) -> None:
    """P49: two limiters (two processes, to Redis) share 100 permits/s under
    ``Shares((3, 1))``; one has only interactive calls waiting, the other
    only batch calls, both backlogged for 2 s. With global priority the
    shares are counted over both: about three interactive permits to one
    batch permit (the script's bound is one permit of each level). Without
    it each limiter's shares count only its own waiters, and the two take
    turns: about one to one."""
    fractions = {}
    for global_priority in (True, False):
        name = fresh()
        granted = [0, 0]
        options: dict[str, Any] = {"name": name, "rate": 100, "burst": 1}
        options["global_priority"] = global_priority
        url = redis_server.url
        async with (
            open_limiter(Shares((3, 1)), url, **options) as a,
            open_limiter(Shares((3, 1)), url, **options) as b,
        ):

            async def call(limiter: RedisLimiter, level: int, granted: list[int]) -> None:
                while True:
                    await limiter.acquire(level)
                    granted[level] += 1

            async with anyio.create_task_group() as tg:
                for _ in range(20):
                    tg.start_soon(call, a, INTERACTIVE, granted)
                    tg.start_soon(call, b, BATCH, granted)
                await anyio.sleep(2.0)
                tg.cancel_scope.cancel()
        fractions[global_priority] = granted[INTERACTIVE] / sum(granted)
        print(f"global priority {global_priority}: {granted}")
    assert 0.65 <= fractions[True] <= 0.85, fractions
    assert fractions[False] <= 0.6, fractions


class StrictHereSharedAcross(StrictPriority):
    """A user's policy: strict priority among a process's own waiters, and
    the units dealt 3 to 1 among levels across processes."""

    def across_processes(self, limits: Any) -> Any:
        return (3, 1), 0


class Dealing:
    """A user's policy (strict priority in a process) whose
    ``across_processes`` gives ``dealt``."""

    def __init__(self, levels: int, dealt: object) -> None:
        self.strict = StrictPriority(levels)
        self.levels = levels
        self.dealt = dealt

    def choose(self, queues: Any, now: int) -> int:
        return self.strict.choose(queues, now)

    def ahead(self, queues: Any, level: int, now: int) -> int:
        return self.strict.ahead(queues, level, now)

    def across_processes(self, limits: Any) -> Any:
        return self.dealt


@pytest.mark.anyio
async def test_a_policy_of_the_user_s_own_deals_the_shares_across_processes(
    redis_server: RedisServer,
) -> None:
    """P49 with a user's policy whose ``across_processes`` gives weights:
    two limiters, one with interactive callers waiting and the other batch
    callers, get about three interactive permits to one (strict order across
    processes would give the interactive ones nearly all). Weights that are
    not one ``int >= 1`` per level, or an index that is not a limit's, are
    refused naming the policy, before anything is sent."""
    options: dict[str, Any] = {"name": fresh(), "rate": 100, "burst": 1, "global_priority": True}
    granted = [0, 0]
    url = redis_server.url
    async with (
        open_limiter(StrictHereSharedAcross(2), url, **options) as a,
        open_limiter(StrictHereSharedAcross(2), url, **options) as b,
    ):

        async def call(limiter: RedisLimiter, level: int) -> None:
            while True:
                await limiter.acquire(level)
                granted[level] += 1

        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(call, a, INTERACTIVE)
                tg.start_soon(call, b, BATCH)
            await anyio.sleep(2.0)
            tg.cancel_scope.cancel()
    print(f"granted {granted}")
    assert 0.65 <= granted[INTERACTIVE] / sum(granted) <= 0.85, granted
    for dealt in [((3, 1, 1), 0), ((3, 0), 0), ((3, 1), 1), ((3, 1), -1), (3, 1), "x", None]:
        broken = Dealing(2, dealt)
        with pytest.raises(PermitValueError, match="across_processes") as error:
            open_limiter(broken, url, **options)
        assert (error.value.argument, error.value.value) == ("policy", broken), dealt
    async with open_limiter(Dealing(2, None), url, name=fresh(), rate=100) as limiter:
        await limiter.acquire()  # without global priority, never asked


@pytest.mark.timeout(60)
@pytest.mark.anyio
async def test_global_shares_count_a_process_waiting_at_two_levels(
    redis_server: RedisServer,
) -> None:
    """P49 with a process at two levels: under ``Shares((1, 6, 1))`` limiter
    a has callers waiting at levels 0 and 2, limiter b at level 1, all
    backlogged for 2 s at 100 permits/s. The shares count over both, level
    by level: about 1/8, 6/8 and 1/8 of the permits. (Were a serving its
    two levels in its local order, level 0 would get about 0.4.)"""
    granted = [0, 0, 0]
    options: dict[str, Any] = {"name": fresh(), "rate": 100, "burst": 1, "global_priority": True}
    policy = Shares((1, 6, 1))
    async with (
        open_limiter(policy, redis_server.url, **options) as a,
        open_limiter(policy, redis_server.url, **options) as b,
    ):

        async def call(limiter: RedisLimiter, level: int) -> None:
            while True:
                await limiter.acquire(level)
                granted[level] += 1

        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(call, a, 0)
                tg.start_soon(call, a, 2)
                tg.start_soon(call, b, 1)
            await anyio.sleep(2.0)
            tg.cancel_scope.cancel()
    total = sum(granted)
    print(f"granted per level: {granted}")
    assert total >= 40, granted  # enough grants for the fractions to mean something
    shares = [g / total for g in granted]
    for level in (0, 2):
        assert 0.05 <= shares[level] <= 0.22, ("P49", granted)
    assert shares[1] >= 0.62, ("P49", granted)


CRASHING = """
import sys, time
from permits.adapters.redis import RedisLimit
limit = RedisLimit(sys.argv[1], name=sys.argv[2], rate=100, burst=5)
limit.publish_demand((1, 0), demand_ttl=1.0)  # one interactive waiter, for 1 s
print("published", flush=True)
time.sleep(60)
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_killed_processs_demand_blocks_within_its_ttl(redis_server: RedisServer) -> None:
    """P43: a process killed (SIGKILL) while its interactive waiter is
    published holds up another process's batch call under global priority
    until its demand expires (``demand_ttl``, 1 s), and no longer.

    Both ends are read on the Redis clock: the demand's expiry as the
    script wrote it, and the grant's time from the audit; so a host whose
    load delays this test's own reads moves neither (the margin after the
    expiry is for the waiting process's late wake-up on a busy machine)."""
    name = fresh()
    argv = [sys.executable, "-c", CRASHING, redis_server.url, name]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as crashing:
        assert crashing.stdout is not None
        assert crashing.stdout.readline().strip() == "published"
        crashing.kill()
    client = redis.Redis.from_url(redis_server.url)
    try:
        (entry,) = client.hgetall(f"permits:{{{name}}}:demand").values()
    finally:
        client.close()
    expires = int(entry.split()[0])  # us, Redis TIME
    async with open_limiter(
        StrictPriority(2),
        redis_server.url,
        name=name,
        rate=100,
        burst=5,
        global_priority=True,
        audit=True,
    ) as limiter:
        await limiter.acquire(BATCH)
    (granted,) = audit(redis_server, name)
    # held up until the demand's expiry, then served at once
    assert expires <= granted < expires + 2.0e6, (granted - expires, "us past the expiry")


def redis_time_and_turn(server: RedisServer, name: str, process: str) -> tuple[int, float | None]:
    """Redis ``TIME`` (us) and ``process``'s turn in the line (us; ``None``:
    it holds no place), read in one transaction."""
    client = redis.Redis.from_url(server.url)
    try:
        with client.pipeline(transaction=True) as pipe:
            pipe.time()
            pipe.hget(f"permits:{{{name}}}:line", process)
            (seconds, micros), entry = pipe.execute()
    finally:
        client.close()
    return seconds * 10**6 + micros, None if entry is None else float(entry.split()[0])


@pytest.mark.timeout(120)
def test_a_killed_processs_place_in_the_line_is_kept_within_its_ttl(
    redis_server: RedisServer,
) -> None:
    """P48 with real processes: four saturate 200/s for 6 s (batch
    backlogs, interactive calls, a reserve of 3, ``demand_ttl`` 1 s); one is
    killed (SIGKILL) 1.5 s in, while it holds a place in the line.

    Its place is kept until its turn is ``demand_ttl`` past, and not much
    longer: on the Redis clock it is in the line until its last turn plus
    1 s, and gone within a margin of that (1 s, for a busy machine; the
    others drop it at their next take, every few ms at saturation). Until
    then the others count it ahead of them; they are served throughout
    (half the limit at least, every interactive call in the end), and from
    the drop on the limit is used again (75%: three survivors on a
    machine whose load slows them; 170/s was seen at load 6, where the
    four-process test's 85% asks four). Counted on the Redis side, no
    window exceeds the limit.

    Every time is read, none assumed: the processes say when they start
    (on a loaded host, seconds later than planned), the victim is killed
    1.5 s after the last has started, once it holds a place, the rates
    are counted while all the survivors run, the drop is placed between
    the last read that saw the place and the first that did not (a read
    late by the host's load widens that span, it does not move the drop),
    and the rate after the drop is counted from the drop read, not from
    where an idle host would have it."""
    name, seconds, kill_after, ttl = fresh(), 6.0, 1.5, 1.0
    _, workers = start_processes(
        redis_server, name, "0,3", "--demand-ttl", str(ttl), "--announce", seconds=seconds
    )
    try:
        processes, started = [], []
        for worker in workers:
            assert worker.stdout is not None
            processes.append(json.loads(worker.stdout.readline())["process"])
        for worker in workers:
            assert worker.stdout is not None
            started.append(json.loads(worker.stdout.readline())["started"])
        victim, survivors = workers[0], workers[1:]
        time.sleep(max(0.0, max(started) + kill_after - time.time()))
        # killed while it holds a place
        placed = time.monotonic() + 30.0
        while redis_time_and_turn(redis_server, name, processes[0])[1] is None:
            assert time.monotonic() < placed, "P48: the process never took a place in the line"
            time.sleep(0.002)
        victim.kill()
        victim.communicate()
        wall = time.time()
        killed_at, turn = redis_time_and_turn(redis_server, name, processes[0])
        assert turn is not None, "P48: the killed process held no place in the line"
        # A take it sent before it died may still run: its place is its last
        # turn. (Were it never dropped, the line would expire once the
        # others stop, seconds late.) `seen`: the last read that saw it.
        seen = killed_at
        while True:
            now, place = redis_time_and_turn(redis_server, name, processes[0])
            if place is None:
                break
            seen, turn = now, place
            time.sleep(0.002)
        reports = [report(worker) for worker in survivors]
    finally:
        for worker in workers:  # none left running if an assertion failed
            if worker.poll() is None:
                worker.kill()
                worker.communicate()
    # dropped after `seen` and by `now`: kept for at least the time to the
    # read that found it gone, and at most the time to the last that saw it
    kept = (seen - turn, now - turn)
    print(
        f"the dead turn: {turn - killed_at:.0f} us from the kill, dropped between "
        f"{kept[0]:.0f} and {kept[1]:.0f} us past"
    )
    assert ttl * 1e6 <= kept[1], ("P48: dropped before its ttl", kept)
    assert kept[0] <= (ttl + 1.0) * 1e6, ("P48: kept past its ttl", kept)
    for r in reports:  # every interactive call of every survivor served
        assert len(r["waits"]) == r["offered"], r
    grants = audit(redis_server, name)
    assert worst_excess(grants, 1e6 / RATE, BURST) <= 1e-9
    # on the Redis clock (this host's): when the last worker started, and
    # when the first survivor to start ends (all run `seconds` from their start)
    start = max(started) * 1e6 + killed_at - wall * 1e6
    end = min(started[1:]) * 1e6 + killed_at - wall * 1e6 + seconds * 1e6

    def rate(since: float, until: float) -> float:
        return sum(since <= t < until for t in grants) / (until - since) * 1e6

    before = rate(start + 0.5e6, killed_at)
    while_kept = rate(killed_at, turn + ttl * 1e6)
    after = rate(now + 0.25e6, end - 0.2e6)
    print(
        f"permits/s: {before:.0f} before the kill, {while_kept:.0f} while its place was kept, "
        f"{after:.0f} after"
    )
    assert while_kept >= 0.5 * RATE, while_kept
    assert after >= 0.75 * RATE, after


@pytest.mark.anyio
async def test_an_urgent_waiter_is_published_while_its_process_waits_for_a_booking(
    redis_server: RedisServer,
) -> None:
    """P43 with booking ahead: an interactive caller that comes while its
    process waits for a batch permit booked 1 s ahead is published at once
    (one round trip), not at the booked time: until then the other
    processes' batch calls were not held up by it (it was never published,
    served by the booked permit)."""
    name = fresh()
    admin = redis.Redis.from_url(redis_server.url)
    try:
        async with open_limiter(
            StrictPriority(2),
            redis_server.url,
            name=name,
            rate=1,
            burst=1,
            global_priority=True,
            book_ahead=1.0,
            demand_ttl=2.0,
        ) as limiter:
            await limiter.acquire(BATCH)  # the bucket is empty
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(limiter.acquire, BATCH))
                with anyio.fail_after(5):
                    while limiter._booked is None:  # booked about 1 s ahead
                        await anyio.sleep(0.005)
                tg.start_soon(partial(limiter.acquire, INTERACTIVE))
                start = anyio.current_time()
                with anyio.fail_after(5):
                    while True:
                        entry = admin.hget(f"permits:{{{name}}}:demand", limiter.limit.process)
                        if entry is not None and int(entry.split()[1]) > 0:
                            break
                        await anyio.sleep(0.005)
                assert limiter._booked is not None  # its time has not come
                assert anyio.current_time() - start < 0.5
    finally:
        admin.close()


@pytest.mark.timeout(120)
def test_booking_ahead_at_saturation(redis_server: RedisServer) -> None:
    """P44 with four real processes saturating 200/s, each booking up to
    0.1 s ahead (and a reserve of 3 for interactive calls): the limit
    holds at the times the booked permits count (no window over it, on the
    Redis side), it is used, and each permit costs about one round trip
    rather than one per process (1.5 allowed: interactive calls and
    give-backs ask too)."""
    name, reports = run_processes(redis_server, "0,3", "--book-ahead", "0.1")
    grants = audit(redis_server, name)
    assert worst_excess(grants, 1e6 / RATE, BURST) <= 1e-9
    assert len(grants) >= 0.85 * RATE * SECONDS, len(grants)
    round_trips = sum(r["round_trips"] for r in reports)
    print(f"booking: {len(grants)} permits, {round_trips / len(grants):.2f} round trips each")
    assert round_trips / len(grants) <= 1.5, (round_trips, len(grants))
    waits = [w for r in reports for w in r["waits"]]
    assert len(waits) == sum(r["offered"] for r in reports)  # every interactive call served
    print(f"booking: interactive p99 {p99(waits) * 1e3:.1f} ms")


# -- the server dies and comes back ----------------------------------------


@pytest.fixture
def own_server() -> Any:
    server = RedisServer(need_redis_server())
    server.start()
    yield server
    server.stop()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("mode", ["closed", "local"])
@pytest.mark.anyio
async def test_server_killed_and_restarted(own_server: RedisServer, mode: str) -> None:
    """Callers ask for 150 permits/s of a 100/s limit; the server is killed
    at 1 s and restarted (empty) at 2.5 s. Fail closed: every caller waiting
    in the outage gets BackendUnavailable within its bound, nobody is
    granted until the server is back. Fail local: callers are served at the
    declared share (half the rate) meanwhile. Both: service resumes by
    itself, no caller is left hanging, and no window sees more than one
    burst above the limit."""
    rate, burst, after = 100, 5, 0.3
    outcomes: list[tuple[float, float, str]] = []  # (asked, answered, outcome)
    async with open_limiter(
        StrictPriority(2),
        own_server.url,
        name=fresh(),
        rate=rate,
        burst=burst,
        on_unavailable=mode,  # type: ignore[arg-type]
        share=0.5 if mode == "local" else None,
        unavailable_after=after,
        redis_timeout=0.1,
    ) as limiter:
        start = anyio.current_time()

        async def call() -> None:
            asked = anyio.current_time() - start
            try:
                await limiter.acquire(BATCH)
            except BackendUnavailable:
                outcomes.append((asked, anyio.current_time() - start, "unavailable"))
            else:
                outcomes.append((asked, anyio.current_time() - start, "granted"))

        async def probe() -> None:
            with contextlib.suppress(BackendUnavailable):
                await limiter.acquire(BATCH)
                outcomes.append((0.0, anyio.current_time() - start, "granted"))

        async with anyio.create_task_group() as tg:
            i = 0
            while (now := anyio.current_time() - start) < 4.0:
                if now >= 1.0 and own_server.process is not None and now < 2.5:
                    own_server.kill()
                    killed = now
                if now >= 2.5 and own_server.process is None:
                    restarted = now  # from here on it may answer
                    await anyio.to_thread.run_sync(own_server.start)
                tg.start_soon(call)
                i += 1
                await anyio.sleep_until(start + i / 150)
            await anyio.sleep(after + 0.5)  # let the last ones finish or fail
            # Service resumes by itself: on a loaded host the restart and the
            # reconnection can take seconds more, so callers keep coming
            # (10 a second) until it has, within a bound no host misses;
            # their grants count, their refusals are not the outage's.
            resumed_by = anyio.current_time() + 30
            while limiter.backend_down and anyio.current_time() < resumed_by:
                tg.start_soon(probe)
                await anyio.sleep(0.1)
            waiting = limiter.statistics().levels[BATCH].waiting
            tg.cancel_scope.cancel()
        assert not limiter.backend_down

    granted = sorted(answered for _, answered, outcome in outcomes if outcome == "granted")
    failed = [(asked, answered) for asked, answered, o in outcomes if o == "unavailable"]
    # no window more than one burst above the limit (client-side times)
    assert worst_excess([t * 1e6 for t in granted], 1e6 / rate, 2 * burst) <= 1e-9
    # service resumed after the restart
    assert any(t > restarted + 0.2 for t in granted)
    outage = [t for t in granted if killed + 0.05 < t < restarted]
    if mode == "closed":
        assert outage == []
        assert failed, "callers in the outage were told"
        for asked, answered in failed:  # each within its bound
            assert answered - max(asked, killed) <= after + 0.1 + 0.25, (asked, answered)
        assert waiting < 150 * (after + 0.3)  # the rest were served or failed
    else:
        assert failed == []
        served = len(outage) / (restarted - killed - 0.05)
        assert 0.3 * rate < served <= 0.5 * rate + burst, served  # the declared share


# -- the server hangs (SIGSTOP) ------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_a_waiters_timeout_holds_while_redis_hangs(own_server: RedisServer) -> None:
    """The driver is stuck in a round trip for the whole reply timeout
    (2 s); a waiter's own timeout (0.2 s) still holds: the timer task
    expires it. Margins for a busy machine: the assertion is that it does
    not wait for the reply timeout, not how fast it is."""
    async with open_limiter(
        Fifo(1),
        own_server.url,
        name=fresh(),
        rate=1,
        burst=1,
        redis_timeout=2.0,
        unavailable_after=5,
    ) as limiter:
        await limiter.acquire()  # the only permit
        own_server.hang()
        try:
            start = anyio.current_time()
            with pytest.raises(AcquireTimeout):
                await limiter.acquire(timeout=0.2)
            waited = anyio.current_time() - start
        finally:
            own_server.resume()
    assert 0.2 <= waited < 0.2 + 1.0, waited  # the reply timeout is 2 s


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize(("after", "reply"), [(0.3, 2.0), (1.0, 0.5)])
@pytest.mark.anyio
async def test_backend_unavailable_bound_in_a_hang(
    own_server: RedisServer, after: float, reply: float
) -> None:
    """Failing closed, a waiter gets BackendUnavailable ``unavailable_after``
    from the later of its acquire and the oldest unanswered request, whether
    the reply timeout is longer than that or shorter (then the outage is
    known only after it, and still counts from the request)."""
    async with open_limiter(
        Fifo(1),
        own_server.url,
        name=fresh(),
        rate=1,
        burst=1,
        redis_timeout=reply,
        unavailable_after=after,
    ) as limiter:
        await limiter.acquire()
        own_server.hang()
        try:
            start = anyio.current_time()
            with pytest.raises(BackendUnavailable):
                await limiter.acquire()  # its request is the first unanswered one
            waited = anyio.current_time() - start
        finally:
            own_server.resume()
    # not after + reply (the bound counted from the first failure), nor
    # after the reply timeout when that is longer
    assert after <= waited < after + min(0.8 * reply, 1.0), waited


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_recorded_caller_failed_in_an_outage_gives_up_then(own_server: RedisServer) -> None:
    """Failing closed, a waiter that gets BackendUnavailable stops waiting
    then: it is recorded as giving up then, as one cancelled is. It was
    recorded as waiting as long as it took, and a replay granted it."""
    async with open_limiter(
        Fifo(1),
        own_server.url,
        name=fresh(),
        rate=1,
        burst=1,
        redis_timeout=2.0,
        unavailable_after=0.3,
    ) as limiter:
        recording = limiter.record()
        await limiter.acquire()
        own_server.hang()
        try:
            with pytest.raises(BackendUnavailable):
                await limiter.acquire()
        finally:
            own_server.resume()
    waited = recording.calls[1].give_up_after_ns
    assert waited is not None
    assert 0.3 * SECOND <= waited < 2 * SECOND, waited


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "anyio_backend", [virtual_backend("asyncio"), virtual_backend("trio")], ids=["asyncio", "trio"]
)
@pytest.mark.anyio
async def test_the_outage_bound_holds_when_the_timer_was_to_wake_sooner(
    own_server: RedisServer,
) -> None:
    """On virtual time, the server hung from the start: the first request
    goes out at 0 while the timer is to wake sooner than its bound (at a
    waiter's timeout, 0.95 s), and that waiter leaves before it (at 0.9 s).
    The waiter that came at 0 still gets BackendUnavailable
    ``unavailable_after`` from that request, and one that came at 0.5 s
    that long after it came (the first got it at 1.5 s, the bound counted
    from the last time the limiter read its clock)."""
    own_server.hang()
    try:
        async with open_limiter(
            Fifo(1),
            own_server.url,
            name=fresh(),
            rate=1,
            burst=1,
            redis_timeout=2.0,
            unavailable_after=1,
        ) as limiter:
            start = anyio.current_time()
            failed: dict[str, float] = {}

            async def patient(name: str, after: float) -> None:
                if after:
                    await anyio.sleep(after)
                with pytest.raises(BackendUnavailable):
                    await limiter.acquire()
                failed[name] = anyio.current_time() - start

            async with anyio.create_task_group() as tg:
                with anyio.move_on_after(0.9):
                    tg.start_soon(patient, "first", 0)
                    tg.start_soon(patient, "later", 0.5)
                    await limiter.acquire(timeout=0.95)  # the timer wakes at 0.95
    finally:
        own_server.resume()
    assert failed == {"first": pytest.approx(1.0, abs=0.01), "later": pytest.approx(1.5, abs=0.01)}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_the_local_fallback_keeps_a_pause_in_force(own_server: RedisServer) -> None:
    """A pause given before Redis became unreachable still holds when the
    local fallback takes over: it grants nothing before the pause ends (it
    granted at its own rate at once), then serves."""
    async with falling_back(own_server.url, fresh(), 100, 5) as limiter:
        await limiter.acquire()
        paused = anyio.current_time()
        limiter.pause_for(2.0)
        await sent(limiter)
        own_server.kill()
        with anyio.fail_after(10):
            await limiter.acquire()
        granted = anyio.current_time()
        assert limiter.backend_down  # served by the fallback
    assert granted - paused >= 2.0, granted - paused


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_the_local_fallback_follows_a_lowered_limit(own_server: RedisServer) -> None:
    """The local fallback serves its share of the limit as this process
    last set it (``limits``), not as opened: lowered from 200/s to 10/s,
    half of it is 5/s (it served 100/s)."""
    async with falling_back(own_server.url, fresh(), 200, 4) as limiter:
        limiter.set_limit(rate=10, burst=4)
        await sent(limiter)
        own_server.kill()
        granted = await granted_in_a_second(limiter)
        assert limiter.backend_down
    # 5/s for 1 s, its bucket empty at the start; a margin for a late loop
    assert granted <= 5 + 2, granted


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_the_local_fallback_follows_a_limit_lowered_while_it_serves(
    own_server: RedisServer,
) -> None:
    """A limit this process lowers while the local fallback serves (Redis
    unreachable) is the fallback's from then on, as a pause is: lowered
    from 200/s to 10/s, it serves half of it, 5/s (it went on serving
    100/s, the share of the limit as it was when Redis went away); raised
    again while a caller waits, that caller is served at once."""
    async with falling_back(own_server.url, fresh(), 200, 4) as limiter:
        await limiter.acquire()
        own_server.kill()
        with anyio.fail_after(10):
            while limiter.fallbacks == 0:
                await limiter.acquire()
        limiter.set_limit(rate=10, burst=4)
        assert limiter.limits["units"].rate == 10
        granted = await granted_in_a_second(limiter)
        assert granted <= 5 + 2, granted  # 5/s for 1 s; a margin for a late loop
        # Lowered to a permit every 20 s, then raised while a caller waits:
        # the driver, asleep until the permit due at the low rate, wakes.
        limiter.set_limit(rate=0.1)
        async with anyio.create_task_group() as tg:
            tg.start_soon(limiter.acquire)
            await anyio.sleep(0.5)
            raised = anyio.current_time()
            limiter.set_limit(rate=200)
        assert anyio.current_time() - raised < 5.0
        assert limiter.backend_down


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.parametrize("word", ["adopt", "quota"])
@pytest.mark.anyio
async def test_the_local_fallback_takes_the_upstreams_word_at_its_share(
    own_server: RedisServer, word: str
) -> None:
    """While the local fallback serves (Redis unreachable), the upstream's
    word on the first limit is its too, at its share of what is left:
    nothing left for 5 s (``adopt(0, 5.0)``), or a quota of 3 at a share of
    half, 1 (``quota(3, 5.0)``), grants at most that in the next second,
    where the fallback served 50/s (half of 100/s). (The second ends well
    before the reset, however late a loaded machine's loop.)"""
    async with falling_back(own_server.url, fresh(), 100, 4) as limiter:
        await limiter.acquire()
        own_server.kill()
        with anyio.fail_after(10):
            while limiter.fallbacks == 0:
                await limiter.acquire()
        if word == "adopt":
            limiter.adopt(0, 5.0)
        else:
            limiter.quota(3, 5.0)
        granted = await granted_in_a_second(limiter)
        assert limiter.backend_down
    # (a margin of one for a permit decided as the word came)
    assert granted <= (0 if word == "adopt" else 1) + 1, granted


@pytest.mark.parametrize("word", ["adopt", "quota"])
@pytest.mark.anyio
async def test_the_local_fallback_takes_a_word_of_more_than_a_float_holds(word: str) -> None:
    """The upstream's word of a huge number left (a header of hundreds of
    digits, which permits.httpx reads as an int) while the fallback serves
    changes nothing there, as on Redis. Its share was taken as a float of
    that int: OverflowError out of ``quota()``/``adopt()`` (and out of the
    HTTP response's handling)."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # nobody listens there
    async with falling_back(f"redis://127.0.0.1:{port}/0", fresh(), 100, 4) as limiter:
        with anyio.fail_after(5):
            await limiter.acquire()
        assert limiter.fallbacks == 1
        getattr(limiter, word)(10**400, 5.0)
        with anyio.fail_after(5):
            await limiter.acquire()  # served locally, as before the word
        assert limiter.fallbacks == 1
        assert not limiter.closed


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.parametrize("mode", ["closed", "local"])
@pytest.mark.anyio
async def test_a_permit_booked_as_redis_goes_away_is_handed_over_at_its_time(
    own_server: RedisServer, mode: str
) -> None:
    """A permit booked just before Redis goes away (the driver learns of it
    sending a change) is handed over at its time, as Redis charged it for
    then. Failing closed, the driver stayed on the change it could not
    send, asking a server that refused it thousands of times a second, and
    the waiter the permit was for failed with BackendUnavailable; falling
    back locally, it slept until the booked time, long past, thousands of
    times a second, for the whole outage (the booked permit never handed
    over). Either way it sleeps a few times a second now."""
    async with open_limiter(
        Fifo(1),
        own_server.url,
        name=fresh(),
        rate=5,
        burst=1,
        book_ahead=0.3,
        redis_timeout=0.2,
        unavailable_after=1.0,
        on_unavailable=mode,  # type: ignore[arg-type]
        share=0.5 if mode == "local" else None,
    ) as limiter:
        await limiter.acquire()  # the bucket is empty: the next permit is booked
        sleeps = 0
        sleep = limiter._sleep

        async def counted(until: float, *, idle: bool = False) -> None:
            nonlocal sleeps
            sleeps += 1
            await sleep(until, idle=idle)

        limiter._sleep = counted  # type: ignore[method-assign]
        outcome: list[str] = []

        async def waiter() -> None:
            try:
                await limiter.acquire()
            except BackendUnavailable:
                outcome.append("unavailable")
            else:
                outcome.append("granted")

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            with anyio.fail_after(5):
                while limiter._booked is None:
                    await anyio.sleep(0.001)
            own_server.kill()
            limiter.set_limit(rate=5)  # a change to send: the driver learns of the outage
            await anyio.sleep(1.0)  # the booked permit's time is at most 0.3 s away
            assert limiter.backend_down
            assert limiter._booked is None
            assert sleeps < 100, sleeps
    assert outcome == ["granted"]


async def granted_in_a_second(limiter: RedisLimiter, callers: int = 5) -> int:
    """The permits ``callers`` tasks acquiring back to back get in 1 s."""
    granted = 0

    async def caller() -> None:
        nonlocal granted
        while True:
            await limiter.acquire()
            granted += 1

    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(caller)
        await anyio.sleep(1.0)
        tg.cancel_scope.cancel()
    return granted


def falling_back(
    url: str, name: str, rate: int, burst: int, **options: Any
) -> contextlib.AbstractAsyncContextManager[RedisLimiter]:
    """A limiter that serves half of ``rate`` and ``burst`` locally while
    Redis does not answer within 0.3 s."""
    return open_limiter(
        Fifo(1),
        url,
        name=name,
        rate=rate,
        burst=burst,
        on_unavailable="local",
        share=0.5,
        redis_timeout=0.3,
        **options,
    )


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_local_fallback_serves_while_redis_hangs(own_server: RedisServer) -> None:
    """With ``share=0.5`` of 100/s and the server frozen, the local limit
    serves about 50/s: the probes (each waiting its reply timeout) run in a
    task of their own. When the server runs again, Redis serves again."""
    rate, burst = 100, 5
    granted: list[float] = []
    async with falling_back(own_server.url, fresh(), rate, burst) as limiter:

        async def caller() -> None:
            while True:
                await limiter.acquire()
                granted.append(anyio.current_time())

        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(caller)
            await anyio.sleep(0.5)
            own_server.hang()
            hung = anyio.current_time()
            await anyio.sleep(3.0)
            own_server.resume()
            resumed = anyio.current_time()
            with anyio.fail_after(10):
                while limiter.backend_down or limiter._local is not None:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    # from the first failed request (one reply timeout into the hang) on
    served = [t for t in granted if hung + 0.3 + 0.1 < t < resumed]
    per_second = len(served) / (resumed - hung - 0.4)
    assert 0.3 * rate < per_second <= 0.5 * rate + burst, per_second


# -- a lone caller's own round trip ---------------------------------------------


@pytest.mark.anyio
async def test_a_lone_caller_sends_its_own_take(
    redis_server: RedisServer, anyio_backend: str
) -> None:
    """Under asyncio, each acquire that finds nobody waiting makes its own
    round trip: the driver sleeps through them all (it waits on the same
    event throughout) and makes none. Under trio (redis-py's client in
    worker threads) the driver makes every round trip, as before."""
    async with open_limiter(
        Fifo(1), redis_server.url, name=fresh(), rate=10**6, burst=10**6
    ) as lim:
        await lim.acquire()  # the connection opens (the driver's round trip)
        await anyio.sleep(0.01)  # the driver is asleep again
        trips, driver_waits_on = lim.round_trips, lim._driver_wake
        for _ in range(20):
            await lim.acquire()
        assert lim.round_trips - trips == 20  # one per acquire either way
        if anyio_backend == "asyncio":
            assert lim.lone_takes == 20
            assert lim._driver_wake is driver_waits_on is not None
        else:
            assert lim.lone_takes == 0
        assert lim.statistics().levels[0].granted == 21


async def lone_takes_sent(limiter: RedisLimiter, takes: int) -> None:
    """Wait (at most 5 s) until ``takes`` lone takes were sent."""
    with anyio.fail_after(5):
        while limiter.lone_takes < takes:
            await anyio.sleep(0.001)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("leaves", ["cancelled", "timed out"])
@pytest.mark.anyio
async def test_a_lone_caller_that_leaves_mid_round_trip_costs_no_permit(
    own_server: RedisServer, leaves: str
) -> None:
    """The server hung (SIGSTOP) after a lone caller sent its take, the
    caller leaves (its scope cancelled, or its own timeout) before the
    reply: once the server runs again, the permit the reply grants goes
    back to Redis. Units granted less units given back equal the callers
    that proceeded, in the audit and in the bucket."""
    name = fresh()
    async with open_limiter(
        Fifo(1),
        own_server.url,
        name=name,
        rate=1,
        burst=5,
        audit=True,
        redis_timeout=10.0,  # no reply timeout while hung: the reply comes
        unavailable_after=10.0,
    ) as limiter:
        await limiter.acquire()  # the one that proceeds
        own_server.hang()
        try:
            async with anyio.create_task_group() as tg:
                left = anyio.Event()

                async def leaving() -> None:
                    if leaves == "cancelled":
                        with anyio.CancelScope() as scope:
                            tg.start_soon(cancel_once_sent, scope)
                            await limiter.acquire()
                    else:
                        with pytest.raises(AcquireTimeout):
                            await limiter.acquire(timeout=0.2)
                    left.set()

                async def cancel_once_sent(scope: anyio.CancelScope) -> None:
                    await lone_takes_sent(limiter, 1)
                    scope.cancel()

                tg.start_soon(leaving)
                await lone_takes_sent(limiter, 1)
                with anyio.fail_after(5):
                    await left.wait()
                assert limiter.given_back == 0  # the reply has not come
        finally:
            own_server.resume()
        with anyio.fail_after(10):
            while limiter.given_back < 1:  # the reply granted it: back it goes
                await anyio.sleep(0.01)
        assert limiter.given_back == 1
        assert limiter.statistics().levels[0].granted == 1
    assert len(audit(own_server, name)) == 1  # granted, less given back
    check = RedisLimit(own_server.url, name=name, rate=1, burst=5)
    try:
        assert check.take().remaining == (3,)  # 5 - the one that proceeded - this one
    finally:
        check.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_waiter_arriving_during_a_lone_take_is_served(own_server: RedisServer) -> None:
    """A batch caller's lone take is in flight (the server hung); an
    interactive caller comes: the driver sends nothing while the take is
    in flight, the permit it brings goes to the interactive caller (the
    policy's choice when it lands, as for the driver's own take), and the
    driver then serves the batch caller."""
    async with open_limiter(
        StrictPriority(2), own_server.url, name=fresh(), rate=10**6, burst=10**6, redis_timeout=10.0
    ) as limiter:
        await limiter.acquire(BATCH)
        order: list[str] = []

        async def call(name: str, level: int) -> None:
            await limiter.acquire(level)
            order.append(name)

        own_server.hang()
        try:
            async with anyio.create_task_group() as tg:
                trips = limiter.round_trips
                tg.start_soon(call, "batch", BATCH)
                await lone_takes_sent(limiter, 1)
                tg.start_soon(call, "interactive", INTERACTIVE)
                with anyio.fail_after(5):
                    while len(limiter.machine) < 2:
                        await anyio.sleep(0.001)
                await anyio.sleep(0.05)
                assert limiter.round_trips == trips + 1  # the lone take, nothing beside it
                own_server.resume()
                with anyio.fail_after(10):
                    while len(order) < 2:
                        await anyio.sleep(0.01)
        finally:
            own_server.resume()
        assert order == ["interactive", "batch"]
        assert limiter.lone_takes == 1
        assert limiter.given_back == 0


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_lone_callers_booked_permit_is_handed_over_at_its_time(
    redis_server: RedisServer,
) -> None:
    """Booking ahead, a lone caller's take finds the bucket empty and books
    the next permit: the answer wakes the driver, which hands the permit
    over at its time, with no round trip more."""
    async with open_limiter(
        Fifo(1),
        redis_server.url,
        name=fresh(),
        rate=10,
        burst=1,
        book_ahead=0.5,
        unavailable_after=30,  # (the timer's outage check would wake the driver after 1 s)
    ) as limiter:
        await limiter.acquire()  # the bucket's one permit
        await anyio.sleep(0.01)  # the driver is asleep again
        with anyio.fail_after(5):
            await limiter.acquire()  # the next one falls due 0.1 s after the first
        assert limiter.lone_takes == 1
        assert limiter.round_trips == 2


class HeldWake:
    """The driver's wake-up event, its ``set`` held back until ``release``:
    the driver stays woken (as the limiter sees it) and not yet run."""

    def __init__(self, event: Any) -> None:
        self.event = event
        self.sets = 0

    def set(self) -> None:
        self.sets += 1

    def wait(self) -> Any:
        return self.event.wait()

    def release(self) -> None:
        self.event.set()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("newcomer", ["same level", "larger reserve", "none"])
@pytest.mark.parametrize("leaves", ["cancelled", "timed out"])
@pytest.mark.anyio
async def test_a_booked_permit_whose_caller_left_is_passed_on_or_given_back(
    redis_server: RedisServer, leaves: str, newcomer: str
) -> None:
    """A lone caller's take books the next permit, and its answer wakes the
    driver; before the driver runs, that caller leaves (cancelled, or its
    timeout) and another comes. The newcomer sends no take of its own (a
    permit is booked); at the booked permit's time the driver hands it to
    the newcomer if it may have it (the same units, no larger reserve),
    else gives it back (and the newcomer takes its own). Never lost, never
    doubled: the grants Redis recorded, net of the permits given back, are
    the callers that proceeded, and the caller that left has none."""
    name = fresh()
    async with open_limiter(
        StrictPriority(2),
        redis_server.url,
        name=name,
        rate=1,  # the next permit 1 s after the bucket is empty: well within a busy host's margin
        burst=2,
        reserve=(0, 1),
        book_ahead=2.0,
        audit=True,
        unavailable_after=30,  # (the timer's outage check would wake the driver after 1 s)
    ) as limiter:
        await limiter.acquire(INTERACTIVE)  # the connection opens (the driver's round trip)
        await anyio.sleep(0.01)  # the driver is asleep again
        await limiter.acquire(INTERACTIVE)  # a lone take: the bucket is empty now
        await anyio.sleep(0.01)
        landed, booked = limiter._landed, anyio.Event()
        wake: HeldWake | None = None

        def landing(answer: GcraAnswer | None, error: BaseException | None) -> None:
            nonlocal wake
            wake = HeldWake(limiter._driver_wake)
            limiter._driver_wake = wake
            landed(answer, error)
            booked.set()

        limiter._landed = landing  # type: ignore[method-assign]
        proceeded: list[str] = []
        left = anyio.Event()
        leaving = anyio.CancelScope()

        async def booked_caller() -> None:
            if leaves == "cancelled":
                with leaving:
                    await limiter.acquire(INTERACTIVE)
                    proceeded.append("the one that left")
            else:
                with pytest.raises(AcquireTimeout):
                    await limiter.acquire(INTERACTIVE, timeout=0.2)
            left.set()

        async def call(level: int) -> None:
            await limiter.acquire(level)
            proceeded.append("newcomer")

        async with anyio.create_task_group() as tg:
            tg.start_soon(booked_caller)
            with anyio.fail_after(5):
                await booked.wait()
            assert limiter.lone_takes == 2
            assert limiter._booked is not None  # the bucket was empty: booked
            assert wake is not None
            assert wake.sets == 1  # the driver is woken, not yet run
            if leaves == "cancelled":
                leaving.cancel()
            with anyio.fail_after(5):
                await left.wait()
            assert len(limiter.machine) == 0
            if newcomer != "none":
                tg.start_soon(call, INTERACTIVE if newcomer == "same level" else BATCH)
                with anyio.fail_after(5):
                    while not len(limiter.machine):
                        await anyio.sleep(0.001)
            assert limiter.lone_takes == 2  # the newcomer sent nothing: a permit is booked
            assert limiter._booked is not None
            trips = limiter.round_trips
            wake.release()  # the driver runs
            with anyio.fail_after(10):
                while len(proceeded) < (newcomer != "none") or (
                    newcomer != "same level" and limiter.given_back < 1
                ):
                    await anyio.sleep(0.01)
        assert proceeded == ([] if newcomer == "none" else ["newcomer"])
        if newcomer == "same level":
            assert (limiter.given_back, limiter.round_trips) == (0, trips)  # handed over
        else:
            assert limiter.given_back == 1  # back to Redis
        granted = limiter.statistics().levels
        assert granted[INTERACTIVE].granted == 2 + (newcomer == "same level")
        assert granted[BATCH].granted == (newcomer == "larger reserve")
        settled = limiter.round_trips
        await anyio.sleep(0.05)
        assert limiter.round_trips == settled  # nothing more to send: nothing booked or owed
        assert limiter._booked is None
    assert len(audit(redis_server, name)) == 2 + (newcomer != "none")


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_lone_take_answered_with_no_list_closes_the_limiter(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone caller's take answered with something other than the script's
    list of numbers (``_answer`` raises ``TypeError`` reading it) closes the
    limiter, as that answer to the driver's own take does: the caller gets
    ``LimiterClosed`` at once, rather than the limiter waiting for ever on
    a take whose answer never reaches it."""
    async with open_limiter(
        Fifo(1), redis_server.url, name=fresh(), rate=10**6, burst=10**6, unavailable_after=30
    ) as limiter:
        await limiter.acquire()  # the connection opens (the driver's round trip)
        await anyio.sleep(0.01)  # the driver is asleep again
        answer, not_a_list = redis_module._answer, 42
        monkeypatch.setattr(redis_module, "_answer", lambda _, n: answer(not_a_list, n))  # type: ignore[arg-type]
        with anyio.fail_after(5), pytest.raises(LimiterClosed) as closed:
            await limiter.acquire()
        assert limiter.lone_takes == 1
        assert isinstance(closed.value.cause, TypeError)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_permit_the_fallback_served_is_never_settled_on_redis(
    own_server: RedisServer,
) -> None:
    """Redis never charged a permit its local fallback served, so a settle
    of it (here at the whole burst, four units above its cost) changes
    nothing in Redis: once the server runs again, the shared bucket holds
    what it held (less the one take that may have been sent as the server
    froze), not four units less."""
    async with settled_while_redis_hangs(own_server) as limiter:
        permit = await limiter.acquire()  # from the local fallback
        permit.settle(5)


def cancel_when_granted(limiter: RedisLimiter, scope: anyio.CancelScope, stall: float = 0) -> None:
    """Make ``limiter`` cancel ``scope`` at its first grant, before that
    caller runs (then block the loop for ``stall`` seconds)."""
    dispatch = limiter._dispatch

    def cancelling(decisions: list[Decision]) -> None:
        dispatch(decisions)
        if not scope.cancel_called and any(d.state is State.GRANTED for d in decisions):
            scope.cancel()
            if stall:
                time.sleep(stall)

    limiter._dispatch = cancelling  # type: ignore[method-assign]


async def cancelled_at_its_grant_then_another(limiter: RedisLimiter, stall: float = 0) -> None:
    """A caller waits and is cancelled at its grant, before it runs (the
    loop then blocked ``stall`` seconds); another comes 0.1 s after it and
    acquires."""
    first = anyio.CancelScope()
    cancel_when_granted(limiter, first, stall=stall)

    async def cancelled() -> None:
        with first:
            await limiter.acquire()
        assert first.cancelled_caught

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancelled)
        await anyio.sleep(0.1)  # it waits first
        tg.start_soon(limiter.acquire)


async def keep_acquiring(limiter: RedisLimiter) -> None:
    """A caller that acquires again and again, until it is cancelled."""
    while True:
        await limiter.acquire()


@contextlib.asynccontextmanager
async def settled_while_redis_hangs(server: RedisServer) -> AsyncIterator[RedisLimiter]:
    """A limiter whose whole rate (a unit every 2 s, burst 5) falls back
    locally, settling for 60 s: it takes a permit from Redis (4 units left
    there), the server hangs, and the block runs once the fallback serves.
    Then the server runs again, and back on Redis the limiter finds 4 units
    there, less at most one take sent as it froze: three acquires at once
    (a settle of 4 units more on Redis would leave none, and they would
    come back a unit per 2 s)."""
    async with open_limiter(
        Fifo(1),
        server.url,
        name=fresh(),
        rate=0.5,
        burst=5,
        on_unavailable="local",
        share=1.0,
        redis_timeout=0.3,
        settle_window=60.0,
    ) as limiter:
        await limiter.acquire()
        server.hang()
        try:
            with anyio.fail_after(10):
                while not limiter.backend_down:  # the outage is noticed
                    with anyio.move_on_after(0.5):
                        await limiter.acquire()
            yield limiter
        finally:
            server.resume()
        with anyio.fail_after(15):
            while limiter.backend_down or limiter._local is not None:
                await anyio.sleep(0.05)
        for _ in range(3):
            await limiter.acquire(timeout=0.9)


@pytest.mark.anyio
async def test_a_fallback_permit_handed_on_is_never_settled_on_redis(
    own_server: RedisServer,
) -> None:
    """A permit the local fallback served, whose caller was cancelled before
    it proceeded, goes to the next waiter, and is still the fallback's: that
    waiter's settle (at the whole burst, four units above its cost) changes
    nothing in Redis. It counted as a permit Redis had charged: the settle
    took four units from the shared bucket (and a give-back of it would
    have given Redis a unit it never charged)."""
    async with settled_while_redis_hangs(own_server) as limiter:
        first = anyio.CancelScope()
        cancel_when_granted(limiter, first)  # granted by the fallback: cancelled before it runs
        held: list[Any] = []

        async def cancelled() -> None:
            with first:
                await limiter.acquire()

        async def next_one() -> None:
            held.append(await limiter.acquire())

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(cancelled)
                await anyio.sleep(0.05)  # it waits first
                tg.start_soon(next_one)
        assert first.cancelled_caught
        held[0].settle(5)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_restart_loses_the_pause_and_changed_limits(own_server: RedisServer) -> None:
    """SPEC, across a Redis restart: the pause and the limits changed by
    set_limit are lost with the server's data; every process goes back to
    the limits it was opened with, and nothing is paused any more."""
    name = fresh()
    async with open_limiter(Fifo(1), own_server.url, name=name, rate=1, burst=1) as limiter:
        limiter.set_limit(rate=1, burst=5)
        limiter.pause_for(60)
        await sent(limiter)
    other = peek(own_server, name, rate=1, burst=1)
    try:
        answer = other.take()
        assert not answer.allowed  # paused, for every process
        assert answer.retry_after_us > 50e6
        own_server.kill()
        own_server.start()
        for _ in range(3):  # the client's connection to the old server is gone
            try:
                answer = other.take()
                break
            except redis.exceptions.ConnectionError:
                continue
        assert answer == GcraAnswer(True, 1_000_000, (0,))  # burst 1, as opened; no pause
    finally:
        other.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_a_restart_takes_back_the_limits_the_process_changed(
    own_server: RedisServer,
) -> None:
    """P41, across a Redis restart: the process that raised a
    burst hears at its next reply that Redis holds the limits it was opened
    with again, and takes them as its own: ``limits`` says so, and a cost
    above the burst it was opened with is refused at acquire, as above that
    burst (it was checked against the raised burst Redis no longer had, and
    failed later as "lowered by set_limit")."""
    name = fresh()
    async with open_limiter(
        Fifo(1), own_server.url, name=name, rate=100, burst=4, redis_timeout=0.5
    ) as limiter:
        limiter.set_limit(burst=10)
        await sent(limiter)
        with anyio.fail_after(10):
            await limiter.acquire(cost=8)  # within the raised burst
        await anyio.to_thread.run_sync(own_server.kill)
        await anyio.to_thread.run_sync(own_server.start)
        with anyio.fail_after(10):
            await limiter.acquire()  # its reply says what Redis holds now
        assert limiter.limits["units"].burst == 4
        with pytest.raises(PermitValueError) as error:
            await limiter.acquire(cost=8)
        assert str(error.value) == "cost=8: exceeds the burst (4): it could never be granted"


@pytest.mark.anyio
async def test_a_process_follows_another_processs_change_of_limit(
    redis_server: RedisServer,
) -> None:
    """P41: every reply says which limits the script used, so
    a process takes another's change as its own at its next reply: a cost
    within a burst the other raised is granted (not refused at acquire as
    above the burst it was opened with), and its rate's estimates follow."""
    name = fresh()
    async with (
        open_limiter(Fifo(1), redis_server.url, name=name, rate=100, burst=4) as a,
        open_limiter(Fifo(1), redis_server.url, name=name, rate=100, burst=4) as b,
    ):
        a.set_limit(rate=3, burst=10)  # (an interval of no whole microseconds)
        await sent(a)
        with anyio.fail_after(10):
            await b.acquire()
        assert b.limits["units"] == a.limits["units"] == Limit(3, 10)
        with anyio.fail_after(10):
            await b.acquire(cost=8)


@pytest.mark.anyio
async def test_a_waiter_above_a_burst_another_process_lowered_fails(
    redis_server: RedisServer,
) -> None:
    """P41: a waiter whose cost is above a burst another process lowered
    fails with the cost named as its process hears of the change (at its
    next reply, here an urgent caller's), instead of waiting for units that
    could never come; the urgent caller and a waiter within the new burst
    are served."""
    name = fresh()
    async with (
        open_limiter(StrictPriority(2), redis_server.url, name=name, rate=10, burst=10) as a,
        open_limiter(StrictPriority(2), redis_server.url, name=name, rate=10, burst=10) as b,
    ):
        await b.acquire(1, cost=10)  # empty: 0.8 s until 8 units
        failed: list[PermitValueError] = []
        served: list[int] = []

        async def wait(cost: int) -> None:
            try:
                await b.acquire(1, cost=cost)
            except PermitValueError as error:
                failed.append(error)
            else:
                served.append(cost)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(wait, 8)
                await anyio.sleep(0.01)
                tasks.start_soon(wait, 3)
                await anyio.sleep(0.01)
                a.set_limit(burst=4)
                await sent(a)
                await b.acquire(0)  # its reply tells b of the lowered burst
        assert [error.argument for error in failed] == ["cost"], failed
        assert "could never be granted" in str(failed[0])
        assert served == [3]
        assert b.limits["units"].burst == 4


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_a_pause_redis_lost_holds_its_process_without_a_round_trip_each_pass(
    own_server: RedisServer,
) -> None:
    """SPEC, across a Redis restart: the pause in force is lost in Redis,
    while the process that paused still hands nothing over within it (a
    permit Redis lets through then goes back). It waits for its pause's end
    to ask again, not take and give back a permit in a loop: that was about
    6,000 round trips a second, for as long as the pause had left."""
    async with open_limiter(
        Fifo(1), own_server.url, name=fresh(), rate=10, burst=5, redis_timeout=0.5
    ) as limiter:
        limiter.pause_for(60)
        await sent(limiter)
        await anyio.to_thread.run_sync(own_server.kill)
        await anyio.to_thread.run_sync(own_server.start)
        before = limiter.round_trips
        with pytest.raises(AcquireTimeout):  # paused here for a minute yet
            await limiter.acquire(timeout=1.0)
        # a take, its permit given back (and a try or two on the old
        # connection, the server restarted under it): then nothing more
        assert limiter.round_trips - before <= 10


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_a_pause_redis_lost_is_sent_again_by_its_process(own_server: RedisServer) -> None:
    """P40, across a Redis restart: the process that paused, with an urgent
    waiter published under global priority, keeps its pause and keeps
    publishing that waiter (its heartbeat), so the others' lower levels
    are held for the pause's length anyway. At its first take answered
    allowed within its pause (Redis lost it), it sends the pause again for
    the time left: every process is paused again, as before the restart
    (the others' urgent levels included), at the cost of one round trip."""
    name = fresh()
    async with open_limiter(
        StrictPriority(2),
        own_server.url,
        name=name,
        rate=100,
        burst=5,
        global_priority=True,
        demand_ttl=0.4,
        redis_timeout=0.5,
    ) as paused:
        paused.pause_for(30)
        await sent(paused)
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(paused.acquire, level=0, timeout=20))
            await anyio.sleep(0.1)
            await anyio.to_thread.run_sync(own_server.kill)
            await anyio.to_thread.run_sync(own_server.start)
            await anyio.sleep(1.0)  # its heartbeat (every 0.2 s) finds Redis again
            other = peek(own_server, name, rate=100, burst=5)
            try:
                answer = other.take()  # the most urgent level: held by no demand
                assert not answer.allowed
                assert answer.retry_after_us > 20e6  # paused for the time left
            finally:
                other.close()
            tg.cancel_scope.cancel()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.parametrize("mode", ["closed", "local"])
@pytest.mark.anyio
async def test_changes_kept_through_an_outage_count_from_when_they_were_given(
    own_server: RedisServer, mode: str
) -> None:
    """P40: a pause, the upstream's word and its quota given while Redis is
    unreachable reach it when it answers again, their times counted from
    when they were given, not from when they are sent: given 2 s before,
    a pause of 1 s is over (it paused every process for 1 s more), so are
    a reset and a quota's end 1 s after it (the bucket was emptied, the
    count of 0 held, for 1 s more); a pause of 30 s has 28 s left at most
    (not 30). Failing closed or served locally meanwhile alike."""
    names = fresh(), fresh()
    options: dict[str, Any] = {
        "rate": 10,
        "burst": 5,
        "redis_timeout": 0.2,
        "unavailable_after": 0.3,
    }
    if mode == "local":
        options.update(on_unavailable="local", share=0.5)
    async with (
        open_limiter(Fifo(1), own_server.url, name=names[0], **options) as over,
        open_limiter(Fifo(1), own_server.url, name=names[1], **options) as under_way,
    ):
        await over.acquire()
        await under_way.acquire()
        own_server.kill()
        over.pause_for(1.0)
        over.adopt(0, 1.0)
        over.quota(0, 1.0)
        under_way.pause_for(30.0)
        await anyio.sleep(2.0)
        await anyio.to_thread.run_sync(own_server.start)
        await sent(over, under_way)
        others = [peek(own_server, name, rate=10, burst=5) for name in names]
        try:
            assert others[0].take() == GcraAnswer(True, 0, (4,))  # nothing holds it
            answer = others[1].take()
            assert not answer.allowed
            assert answer.retry_after_us < 29e6, answer  # 28 s left at most
        finally:
            for other in others:
                other.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_waiter_that_comes_into_an_outage_is_told(own_server: RedisServer) -> None:
    """Failing closed, a waiter that comes alone into an outage, after the
    ones before it were failed, gets BackendUnavailable within its bound."""
    async with open_limiter(
        Fifo(1), own_server.url, name=fresh(), rate=10, burst=1, unavailable_after=0.3
    ) as limiter:
        own_server.kill()
        with pytest.raises(BackendUnavailable):
            await limiter.acquire()
        await anyio.sleep(0.5)  # nobody waits; the outage goes on
        start = anyio.current_time()
        with pytest.raises(BackendUnavailable):
            await limiter.acquire()
        waited = anyio.current_time() - start
    assert waited < 0.3 + 1.0, waited  # its bound, with a margin for a busy machine


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_a_server_with_no_room_for_another_client_is_an_outage() -> None:
    """A server at ``maxclients`` answers a new connection with ``-ERR max
    number of clients reached``: an outage (redis-py raises it as a
    ConnectionError), so the waiter gets BackendUnavailable; not a broken
    limiter. Once there is room, service resumes."""
    server = RedisServer(need_redis_server(), "--maxclients", "1")
    server.start()
    try:
        async with open_limiter(
            Fifo(1), server.url, name=fresh(), rate=100, burst=1, unavailable_after=0.3
        ) as limiter:
            hog = redis.Redis(port=server.port)
            hog.ping()  # the only connection
            with anyio.fail_after(10), pytest.raises(BackendUnavailable):
                await limiter.acquire()
            hog.close()
            with anyio.fail_after(10):
                while True:  # served once the server has let the hog go
                    try:
                        await limiter.acquire()
                        break
                    except BackendUnavailable:
                        await anyio.sleep(0.05)
    finally:
        server.stop()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_a_tls_url_to_a_server_without_tls_says_so(redis_server: RedisServer) -> None:
    """A ``rediss://`` URL to a port that speaks no TLS: the handshake
    waits for ever, and the outage only said that Redis did not answer.
    It now says why that may be."""
    url = redis_server.url.replace("redis://", "rediss://", 1)
    async with open_limiter(
        Fifo(1), url, name=fresh(), rate=100, burst=1, redis_timeout=0.2, unavailable_after=0.5
    ) as limiter:
        with anyio.fail_after(10), pytest.raises(BackendUnavailable) as caught:
            await limiter.acquire()
    assert "rediss:// speaks TLS" in str(caught.value), str(caught.value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_a_restarted_server_still_loading_its_data_is_an_outage() -> None:
    """A restarted Redis answers ``-LOADING`` while it reads its data back:
    an outage, as redis-py says (BusyLoadingError, a ConnectionError), and
    service resumes once it is loaded; not a broken limiter."""
    delay = ("--key-load-delay", "20", "--loading-process-events-interval-bytes", "1024")
    server = RedisServer(need_redis_server(), *delay)
    server.start()
    try:
        filler = redis.Redis(port=server.port)
        for start in range(0, 50_000, 5_000):  # about 1 s to load, 20 us a key
            filler.mset({f"fill:{i}": "x" for i in range(start, start + 5_000)})
        filler.save()
        filler.close()
        async with open_limiter(
            Fifo(1), server.url, name=fresh(), rate=100, burst=1, unavailable_after=30
        ) as limiter:
            await limiter.acquire()
            server.kill()
            # started in a thread: start() returns only once the data is loaded
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, server.start)
                with anyio.fail_after(20):  # loading takes about 1 s; a busy machine's margin
                    await limiter.acquire()
            assert not limiter.backend_down
    finally:
        server.stop()


def run_until_killed(server: RedisServer) -> None:
    """Run a script that loops until ``SCRIPT KILL``."""
    client = redis.Redis(port=server.port)
    try:
        with contextlib.suppress(redis.ResponseError):  # killed
            client.eval("while true do end", 0)
    finally:
        client.close()


def answers_busy(server: RedisServer) -> bool:
    client = redis.Redis(port=server.port)
    try:
        client.ping()
    except redis.ResponseError as error:
        return str(error).startswith("BUSY ")
    finally:
        client.close()
    return False


@contextlib.contextmanager
def refusing(server: RedisServer, refusal: str) -> Any:
    """While in the block, ``server`` answers each script call with the
    error ``refusal`` (``-OOM``, ``-READONLY``, ``-BUSY``, ``-MISCONF``,
    ``-NOREPLICAS``), as a server does out of memory, turned into a replica,
    running a script past its time limit, after a snapshot that failed, or
    with fewer replicas in sync than ``min-replicas-to-write``; then it
    serves again."""
    admin = redis.Redis(port=server.port)
    try:
        if refusal == "OOM":
            admin.config_set("maxmemory", 1)
            yield
            admin.config_set("maxmemory", 0)
        elif refusal == "NOREPLICAS":
            admin.config_set("min-replicas-to-write", 1)  # it has none
            yield
            admin.config_set("min-replicas-to-write", 0)
        elif refusal == "MISCONF":
            # a snapshot that cannot be written (a directory where its file
            # goes) stops writes, as a full or broken disk does
            dump = server.dir / "dump.rdb"
            dump.mkdir()
            admin.config_set("save", "3600 1")
            admin.bgsave()
            while admin.info("persistence")["rdb_last_bgsave_status"] != "err":
                time.sleep(0.01)
            try:
                yield
            finally:
                dump.rmdir()
                admin.config_set("save", "")
                admin.config_set("stop-writes-on-bgsave-error", "no")
        elif refusal == "READONLY":
            master = RedisServer(need_redis_server())
            master.start()
            try:
                admin.replicaof("127.0.0.1", master.port)
                yield
                admin.replicaof("NO", "ONE")
            finally:
                master.stop()
        else:
            admin.config_set("busy-reply-threshold", 10)
            hog = threading.Thread(target=run_until_killed, args=(server,))
            hog.start()
            while not answers_busy(server):  # the script has run past its time limit
                time.sleep(0.01)
            try:
                yield
            finally:
                admin.script_kill()
                hog.join()
    finally:
        admin.close()


@pytest.mark.parametrize("refusal", ["OOM", "READONLY", "BUSY", "MISCONF", "NOREPLICAS"])
@pytest.mark.anyio
async def test_a_server_that_cannot_serve_now_is_an_outage(
    own_server: RedisServer, refusal: str
) -> None:
    """A server out of memory (``-OOM``), turned into a replica by a
    failover (``-READONLY``), running a script past its time limit
    (``-BUSY``), refusing writes after a failed snapshot (``-MISCONF``) or
    while fewer replicas are in sync than it must write to (``-NOREPLICAS``)
    answers, but serves no take: an outage, as for ``-LOADING``,
    so the waiter gets BackendUnavailable (the limiter broke: LimiterClosed
    for every waiter); once it serves again, service resumes."""
    async with open_limiter(
        Fifo(1), own_server.url, name=fresh(), rate=100, burst=1, unavailable_after=0.3
    ) as limiter:
        await limiter.acquire()
        with refusing(own_server, refusal):
            with anyio.fail_after(10), pytest.raises(BackendUnavailable):
                await limiter.acquire()
            assert limiter.backend_down
        with anyio.fail_after(10):
            while True:
                try:
                    await limiter.acquire()
                    break
                except BackendUnavailable:
                    await anyio.sleep(0.05)
        assert not limiter.backend_down


@pytest.mark.parametrize("query", ["", "?socket_keepalive=true"])
@pytest.mark.anyio
async def test_a_replica_after_a_failover_is_asked_on_a_new_connection(
    own_server: RedisServer, query: str
) -> None:
    """The server the limiter talks to becomes a replica (``-READONLY``):
    each try during the outage opens a new connection, which behind a name
    or a proxy that follows the failover reaches the new master (it kept
    the one to the replica, and the outage lasted as long as it did). On
    every client: the small one, and redis-py's (a URL with options) under
    asyncio (its asyncio client kept its connections) and trio."""
    url = own_server.url + query
    async with open_limiter(
        Fifo(1), url, name=fresh(), rate=100, burst=1, unavailable_after=0.3
    ) as limiter:
        await limiter.acquire()
        admin = redis.Redis(port=own_server.port)
        try:
            with refusing(own_server, "READONLY"):
                before = admin.info("stats")["total_connections_received"]
                with anyio.fail_after(10), pytest.raises(BackendUnavailable):
                    await limiter.acquire()
                opened = admin.info("stats")["total_connections_received"] - before
        finally:
            admin.close()
    assert opened >= 1


@pytest.mark.parametrize("refusal", ["OOM", "READONLY", "MISCONF", "NOREPLICAS"])
@pytest.mark.anyio
async def test_the_local_fallback_holds_while_redis_answers_but_cannot_serve(
    own_server: RedisServer, refusal: str
) -> None:
    """A server out of memory (``-OOM``), turned into a replica
    (``-READONLY``), refusing writes after a failed snapshot (``-MISCONF``)
    or while its replicas are not in sync (``-NOREPLICAS``) still answers
    reads: the local fallback holds for as
    long as it refuses writes (its probe read the limit's key, succeeded,
    and the limiter went back to Redis about every 0.1 s, failed a take and
    fell back again), and Redis serves again within a bound once it clears
    (a probe every 0.1 s; seconds of margin for a busy machine)."""
    async with falling_back(own_server.url, fresh(), 100, 5) as limiter:
        await limiter.acquire()

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(keep_acquiring, limiter)
            with refusing(own_server, refusal):
                with anyio.fail_after(10):
                    while not limiter.fallbacks:
                        await anyio.sleep(0.01)
                await anyio.sleep(1.5)  # fifteen probes
                assert (limiter.fallbacks, limiter.backend_down) == (1, True)
            with anyio.fail_after(5):
                while limiter.backend_down:
                    await anyio.sleep(0.01)
            trips = limiter.round_trips
            await anyio.sleep(0.5)
            tg.cancel_scope.cancel()
        assert limiter.round_trips > trips  # takes, from Redis
        assert (limiter.fallbacks, limiter.backend_down) == (1, False)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_a_cancel_around_the_limiter_leaves_its_probe_working(
    own_server: RedisServer,
) -> None:
    """A scope around ``open_limiter`` is cancelled while its body is
    shielded from that cancel: the local fallback still probes Redis, and
    the limiter goes back to it once it serves. The probe task, in a task
    group inside the cancelled scope, was cancelled with it (seen under
    trio): the fallback served for ever."""
    with anyio.move_on_after(0.2) as outer:
        async with falling_back(own_server.url, fresh(), 100, 5) as limiter:
            await limiter.acquire()
            with anyio.CancelScope(shield=True), anyio.fail_after(20):
                await anyio.sleep(0.4)  # past the outer deadline
                async with anyio.create_task_group() as tg:
                    tg.start_soon(keep_acquiring, limiter)
                    with refusing(own_server, "OOM"):
                        while not limiter.fallbacks:
                            await anyio.sleep(0.01)
                    while limiter.backend_down:  # a probe every 0.1 s
                        await anyio.sleep(0.01)
                    tg.cancel_scope.cancel()
            await anyio.lowlevel.checkpoint()  # where the outer cancel lands
    assert outer.cancelled_caught
    assert (limiter.fallbacks, limiter.backend_down) == (1, False)


def restricted_user(server: RedisServer, name: str) -> str:
    """The URL of a Redis user allowed exactly what the limiter's takes need
    (ACL): the commands its script sends, by category (hashes, lists,
    keys, scripts; no strings), on the limit ``name``'s keys."""
    admin = redis.Redis(port=server.port)
    try:
        admin.acl_setuser(
            "limiter",
            enabled=True,
            passwords=["+secret"],
            keys=[f"permits:{{{name}}}*"],
            categories=["+@scripting", "+@hash", "+@list", "+@keyspace", "+@connection"],
            commands=["+time"],
        )
    finally:
        admin.close()
    return f"redis://limiter:secret@127.0.0.1:{server.port}/0"


@pytest.mark.anyio
async def test_the_local_fallback_goes_back_to_redis_as_a_user_allowed_takes(
    own_server: RedisServer,
) -> None:
    """A Redis user allowed what a take needs (ACL) is allowed the
    fallback's probe too: after a hang, Redis serves again. The probe was a
    SET on a key of its own, refused to such a user (NOPERM), and its
    error, raised out of the probe's task, tore down the limiter's task
    group: the caller's ``async with`` block raised an ExceptionGroup."""
    name = fresh()
    url = restricted_user(own_server, name)
    async with falling_back(url, name, 100, 5) as limiter:
        await limiter.acquire()

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(keep_acquiring, limiter)
            own_server.hang()
            try:
                with anyio.fail_after(10):
                    while not limiter.fallbacks:
                        await anyio.sleep(0.01)
            finally:
                own_server.resume()
            with anyio.fail_after(10):
                while limiter.backend_down:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        assert (limiter.fallbacks, limiter.closed) == (1, False)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_a_password_the_server_refuses_is_an_outage_until_it_works_again(
    own_server: RedisServer,
) -> None:
    """P73: a password the server no longer takes (changed there, the limiter's
    connections cut) is refused at each connection (``WRONGPASS``), which
    redis-py raises as a ``ConnectionError``; both clients (the limiter's
    own under asyncio, redis-py's under trio) count it so, as Redis
    unreachable: the limiter does not close, each waiter fails with
    ``BackendUnavailable`` (``"closed"``), naming the refusal, and service
    resumes by itself once the password works again."""
    name = fresh()
    url = restricted_user(own_server, name)
    admin = redis.Redis(port=own_server.port)
    try:
        async with soon_out(url, name) as limiter:
            await limiter.acquire()
            admin.acl_setuser("limiter", enabled=True, reset_passwords=True, passwords=["+changed"])
            admin.client_kill_filter(_type="normal", skipme=True)
            await refused_until_it_works_again(
                limiter,
                lambda: admin.acl_setuser(
                    "limiter", enabled=True, reset_passwords=True, passwords=["+secret"]
                ),
            )
    finally:
        admin.close()


def soon_out(url: str, name: str) -> contextlib.AbstractAsyncContextManager[RedisLimiter]:
    """A limiter on ``url`` that counts Redis out soon: a reply waited for
    0.3 s at most, an outage after 0.5 s without one."""
    return open_limiter(
        Fifo(1), url, name=name, rate=100, burst=5, redis_timeout=0.3, unavailable_after=0.5
    )


async def refused_until_it_works_again(
    limiter: Any, mend: Callable[[], object], naming: str = "AuthenticationError"
) -> None:
    """``limiter``'s acquires fail as an outage (``BackendUnavailable``
    naming ``naming``, by default a password refused; no secret in it, the
    limiter open) until ``mend()``, and then one is served by itself; each
    within 10 s."""

    async def until_refused() -> None:
        while True:
            await limiter.acquire()

    with anyio.fail_after(10), pytest.raises(BackendUnavailable) as refused:
        await until_refused()
    assert naming in str(refused.value), str(refused.value)
    assert "secret" not in str(refused.value)
    assert not limiter.closed
    mend()
    with anyio.fail_after(10):
        while True:
            with contextlib.suppress(BackendUnavailable):
                await limiter.acquire()
                break
    assert not limiter.closed


@pytest.mark.anyio
async def test_a_password_asked_for_and_not_given_is_an_outage_until_it_works_again(
    own_server: RedisServer,
) -> None:
    """P73: a server that asks for a password the URL does not give (one
    turned on there, or a server restarted with one) refuses the take
    before reading it, as it refuses any long request of a client not
    authenticated (``-ERR Protocol error: unauthenticated multibulk
    length``, then it closes the connection). Both clients count it as
    they count ``-NOAUTH``: an outage, ``BackendUnavailable`` naming the
    refusal, and service resumes by itself once the server takes the
    limiter again. The limiter's own client (asyncio) read it as a plain
    error reply, and the limiter closed for good."""
    name = fresh()
    admin = redis.Redis(port=own_server.port)
    admin.config_set("requirepass", "a-secret")
    admin = redis.Redis(port=own_server.port, password="a-secret")
    try:
        async with soon_out(own_server.url, name) as limiter:
            await refused_until_it_works_again(limiter, lambda: admin.config_set("requirepass", ""))
    finally:
        admin.close()


@pytest.mark.anyio
async def test_a_server_short_of_replicas_is_an_outage_until_it_writes_again(
    own_server: RedisServer,
) -> None:
    """P73: a server told to write only while a replica is in sync, with
    none there, refuses every take (``-NOREPLICAS``, a real reply). Both
    clients (the limiter's own under asyncio, redis-py's under trio) count
    it as an outage: each waiter fails with ``BackendUnavailable`` naming
    it, the limiter stays open, and service resumes by itself once the
    server writes again."""
    name = fresh()
    admin = redis.Redis(port=own_server.port)
    try:
        async with soon_out(own_server.url, name) as limiter:
            await limiter.acquire()
            admin.config_set("min-replicas-to-write", 1)
            await refused_until_it_works_again(
                limiter, lambda: admin.config_set("min-replicas-to-write", 0), "NOREPLICAS"
            )
    finally:
        admin.config_set("min-replicas-to-write", 0)
        admin.close()


@pytest.mark.anyio
async def test_a_server_that_is_no_redis_is_an_outage_on_both_clients() -> None:
    """P73: a port that answers, but not as Redis does (a web server: the URL's
    port is wrong, or a proxy in between answers for it), is counted alike
    by both clients: as Redis unreachable, each waiter failing with
    ``BackendUnavailable`` naming what it sent, the limiter open. The
    limiter's own client (asyncio) counted it so, and redis-py's (trio)
    raised ``InvalidResponse``, which closed the limiter for good."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    stop = threading.Event()

    def answer() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn, contextlib.suppress(OSError):
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        async with open_limiter(
            Fifo(1), f"redis://127.0.0.1:{port}/0", name=fresh(), rate=10, redis_timeout=0.3,
            unavailable_after=0.5,
        ) as limiter:  # fmt: skip
            with anyio.fail_after(10), pytest.raises(BackendUnavailable) as refused:
                await limiter.acquire()
            assert "HTTP" in str(refused.value) or "b'H'" in str(refused.value)
            assert not limiter.closed
    finally:
        stop.set()
        thread.join()
        listener.close()


@pytest.mark.anyio
async def test_a_probe_refused_for_good_closes_the_limiter(own_server: RedisServer) -> None:
    """The fallback's probe refused with an error that is no outage (the
    user's permission to run scripts revoked meanwhile, NOPERM) closes the
    limiter, as a take refused so does: every waiter gets LimiterClosed,
    with the refusal as its cause. Raised out of the probe's task, it tore
    down the limiter's task group, and the caller's ``async with`` block
    raised an ExceptionGroup."""
    name = fresh()
    url = restricted_user(own_server, name)
    admin = redis.Redis(port=own_server.port)
    closed: list[LimiterClosed] = []
    try:
        async with falling_back(url, name, 100, 5) as limiter:
            await limiter.acquire()

            async def caller() -> None:
                try:
                    while True:
                        await limiter.acquire()
                except LimiterClosed as error:
                    closed.append(error)

            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(caller)
                with refusing(own_server, "OOM"):
                    with anyio.fail_after(10):
                        while not limiter.fallbacks:
                            await anyio.sleep(0.01)
                    admin.acl_setuser("limiter", categories=["-@scripting"])
                with anyio.fail_after(10):
                    while not limiter.closed:
                        await anyio.sleep(0.01)
    finally:
        admin.close()
    assert len(closed) == 3
    assert all(isinstance(error.cause, redis.ResponseError) for error in closed), closed


# -- a real Redis Cluster ---------------------------------------------------------


@pytest.fixture
def cluster() -> Any:
    nodes = RedisCluster(need_redis_server())
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()
        # redis-py's cluster client, when a node fails, drops that node's
        # connections without closing their sockets (8.1 also as it refreshes
        # its topology after the whole cluster was down): collected here,
        # where their ResourceWarnings are expected, and not in a later test
        # or at the session's end, where they fail the run.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_on_a_redis_cluster(cluster: RedisCluster) -> None:
    """Three masters: the keys of one limit (state, audit, stored limits,
    demand) share their hash tag, so each script call reaches the one node
    that holds them all; costs, a pause and global priority work there as
    on one server, from a client that knows only one node's address."""
    name = fresh()
    limits = {"requests": Limit(100, burst=5), "tokens": Limit(10, burst=100)}
    async with open_limiter(
        StrictPriority(2),
        cluster.url,
        name=name,
        limits=limits,
        cluster=True,
        audit=True,
        global_priority=True,
    ) as limiter:
        for _ in range(3):
            await limiter.acquire(INTERACTIVE, cost={"requests": 1, "tokens": 30})
        limiter.pause_for(0.3)
        await sent(limiter)
        start = anyio.current_time()
        await limiter.acquire(BATCH, cost={"tokens": 1})
        assert anyio.current_time() - start >= 0.2  # paused, for everyone
    client = redis.RedisCluster.from_url(cluster.url)
    try:
        suffixes = ("", ":audit", ":limits", ":demand", ":line")
        keys = [f"permits:{{{name}}}{suffix}" for suffix in suffixes]
        slots = {client.keyslot(key) for key in keys}  # type: ignore[no-untyped-call]
        assert len(slots) == 1
        assert client.llen(f"permits:{{{name}}}:audit") == 4
        left = RedisLimit(cluster.url, name=name, limits=limits, cluster=True)
        try:
            answer = left.take(cost=(0, 1))
            assert answer.allowed
            # 91 tokens taken there; at 10/s, less than 3 s of refill since
            assert answer.remaining[1] <= 100 - 91 + 30, answer
        finally:
            left.close()
    finally:
        client.close()


def node_of(client: redis.RedisCluster, name: str) -> int:
    """The port of the node that holds limit ``name``'s keys."""
    node = client.get_node_from_key(f"permits:{{{name}}}")  # type: ignore[no-untyped-call]
    return int(node.port)


@pytest.mark.timeout(90)
@pytest.mark.filterwarnings("ignore::ResourceWarning")  # see the cluster fixture
@pytest.mark.anyio
async def test_the_fallback_holds_while_the_limits_node_of_a_cluster_hangs(
    cluster: RedisCluster,
) -> None:
    """With the node that holds the limit's keys frozen and the others up,
    the local limit serves throughout: its probe asks that node (a command
    on the limit's key), not whichever node the client knows first, which
    answers and would send the limiter back to a node that does not."""
    client = redis.RedisCluster.from_url(cluster.url)
    try:
        first = cluster.servers[0].port
        name = fresh()
        while node_of(client, name) == first:
            name = fresh()  # the limit's keys on another node than the URL's
        port = node_of(client, name)
    finally:
        client.close()
    (node,) = [server for server in cluster.servers if server.port == port]
    local: list[bool] = []
    async with (
        falling_back(cluster.url, name, 100, 5, cluster=True) as limiter,
        anyio.create_task_group() as tg,
    ):
        for _ in range(5):
            tg.start_soon(keep_acquiring, limiter)
        await anyio.sleep(0.3)
        node.hang()
        try:
            await anyio.sleep(1.0)  # the outage is seen, the local limit serves
            for _ in range(40):  # 2 s, under the cluster's node timeout
                local.append(limiter._local is not None)
                await anyio.sleep(0.05)
        finally:
            node.resume()
        tg.cancel_scope.cancel()
    assert all(local), f"back to Redis {local.count(False)} times of {len(local)}"


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.parametrize("on_unavailable", ["closed", "local"])
@pytest.mark.anyio
async def test_a_cluster_down_as_the_limiter_opens_is_an_outage(on_unavailable: str) -> None:
    """A limiter opened on a cluster none of whose nodes answers opens, as
    one on a single server does, and its waiters see an outage: served
    locally, or BackendUnavailable. redis-py's synchronous cluster client
    connects as it is made: it was made as the limiter was, and
    ``open_limiter()`` itself raised ``RedisClusterUnreachableError``
    (having held the event loop for up to the reply timeout, a node hung)."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # nobody listens there
    local = {"on_unavailable": "local", "share": 0.5} if on_unavailable == "local" else {}
    async with open_limiter(
        Fifo(1),
        f"redis://127.0.0.1:{port}/0",
        name=fresh(),
        rate=100,
        burst=5,
        cluster=True,
        redis_timeout=0.3,
        unavailable_after=0.3,
        **local,  # type: ignore[arg-type]
    ) as limiter:
        with anyio.fail_after(5):
            if on_unavailable == "local":
                await limiter.acquire()
                assert limiter.fallbacks == 1
            else:
                with pytest.raises(BackendUnavailable):
                    await limiter.acquire()
        assert not limiter.closed
    with pytest.raises(PermitValueError) as error:  # (so redis-py's cluster client refused it)
        RedisLimit("unix:///tmp/redis.sock", name="x", rate=1, cluster=True)
    assert error.value.argument == "url"


@pytest.mark.timeout(90)
@pytest.mark.filterwarnings("ignore::ResourceWarning")  # (as above)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_a_whole_cluster_down_is_an_outage_and_service_resumes(
    cluster: RedisCluster,
) -> None:
    """Every node of the cluster down, then back: failing closed, each
    waiter gets BackendUnavailable and service resumes by itself, as with
    one server. redis-py's cluster client, its topology refresh finding no
    node, raises ``RedisClusterUnreachableError``, which is no
    ``ConnectionError``: it closed the limiter for good (LimiterClosed)."""
    async with open_limiter(
        Fifo(1),
        cluster.url,
        name=fresh(),
        rate=100,
        burst=5,
        cluster=True,
        redis_timeout=0.3,
        unavailable_after=0.5,
    ) as limiter:
        await limiter.acquire()
        for server in cluster.servers:
            server.kill()
        for _ in range(3):  # 1.5 s: the client refreshes its topology meanwhile
            with pytest.raises(BackendUnavailable):
                await limiter.acquire()
        for server in cluster.servers:
            server.start()  # (each keeps its cluster configuration)
        with anyio.fail_after(30):
            while True:
                with contextlib.suppress(BackendUnavailable):
                    await limiter.acquire()
                    break
        assert not limiter.closed


def test_the_test_server_starts_elsewhere_when_its_port_is_taken() -> None:
    """The suite's own redis-server: a port chosen free and taken by another
    process before the server binds it is chosen again (a busy host runs
    many suites at once), even when what took it is a redis-server that
    answers there; a port the test named is not, and says so."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = other.getsockname()[1]
        server = RedisServer(need_redis_server())
        server.port = taken  # as if another process took it after it was chosen
        server.start()
        try:
            assert server.port != taken
        finally:
            server.kill()
        named = RedisServer(need_redis_server(), port=taken)
        with pytest.raises(RuntimeError, match=f"exited at start on port {taken}"):
            named.start()
    first = RedisServer(need_redis_server())  # another suite's server, on the port
    first.start()
    try:
        second = RedisServer(need_redis_server())
        second.port = first.port
        second.start()  # the first answers there, but it is not this one
        try:
            assert second.port != first.port
            assert second._answers()
        finally:
            second.kill()
    finally:
        first.kill()


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "anyio_backend", [virtual_backend("asyncio"), virtual_backend("trio")], ids=["asyncio", "trio"]
)
@pytest.mark.parametrize("days", [116, 1157])
@pytest.mark.anyio
async def test_waiters_expire_far_from_the_clock_s_epoch(
    redis_server: RedisServer, days: int
) -> None:
    """Past about 104 days of a clock's reading, a float holds its seconds
    only to a few nanoseconds: the timer's deadline for a waiter's timeout
    at ``t`` (``t / 1e9`` seconds) passes while the clock, read in
    nanoseconds, still rounds to a little before ``t``. The Redis limiter's
    timer, which expires its waiters, took nothing to be due and fired
    again at once: on virtual time the clock never moved on, and every
    timeout hung. The tick the deadline was set for is taken to have come."""
    name = fresh()
    drain = RedisLimit(redis_server.url, name=name, rate=0.01)
    try:
        assert drain.take().allowed  # the bucket's one unit: the next is 100 s away
    finally:
        drain.close()
    await anyio.sleep(days * 86_400 + 0.123)
    async with open_limiter(
        Fifo(), redis_server.url, name=name, rate=0.01, unavailable_after=1e6
    ) as limiter:
        for timeout in (1 / 3, 2 / 3, 0.123456789, 0.987654321, 1 / 7):
            start = anyio.current_time()
            with pytest.raises(AcquireTimeout):
                await limiter.acquire(timeout=timeout)
            assert anyio.current_time() - start == pytest.approx(timeout, abs=1e-6)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "anyio_backend", [virtual_backend("asyncio"), virtual_backend("trio")], ids=["asyncio", "trio"]
)
@pytest.mark.anyio
async def test_the_outage_bound_holds_far_from_the_clock_s_epoch(own_server: RedisServer) -> None:
    """As for a timeout: 116 days into the clock's reading, a waiter's
    outage bound (``unavailable_after`` after the first request Redis left
    unanswered) is taken to have come when the timer set for it fires,
    though the clock read in nanoseconds rounds to a little before it (the
    timer fired again at once, for ever)."""
    await anyio.sleep(116 * 86_400 + 0.123)
    own_server.hang()
    try:
        async with open_limiter(
            Fifo(), own_server.url, name=fresh(), rate=1, redis_timeout=5.0, unavailable_after=1 / 3
        ) as limiter:
            for _ in range(3):
                start = anyio.current_time()
                with pytest.raises(BackendUnavailable):
                    await limiter.acquire()
                assert anyio.current_time() - start == pytest.approx(1 / 3, abs=1e-6)
    finally:
        own_server.resume()


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_a_booked_permit_is_not_handed_over_within_this_process_s_pause(
    redis_server: RedisServer,
) -> None:
    """P44: a permit booked before this process pauses (its take charged, its
    time within ``book_ahead``) is not handed over before the pause ends:
    nothing is granted within a pause (it was handed over at its time, in
    the pause the upstream asked for)."""
    async with open_limiter(
        Fifo(1),
        redis_server.url,
        name=fresh(),
        rate=1,  # the next permit 1 s after the first: well within a busy host's margin
        burst=1,
        book_ahead=1.0,
        unavailable_after=30,
    ) as limiter:
        await limiter.acquire()  # the bucket's one permit: the next is 1 s away
        async with anyio.create_task_group() as tg:
            tg.start_soon(limiter.acquire)
            with anyio.fail_after(5):
                while limiter._booked is None:  # booked, 1 s after the first
                    await anyio.sleep(0.001)
            paused = anyio.current_time()
            limiter.pause_for(2.0)
        assert anyio.current_time() - paused >= 2.0 - 0.001


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_a_permit_taken_before_this_process_pauses_waits_for_the_pause(
    own_server: RedisServer,
) -> None:
    """P40: a take in flight when this process pauses (the server slow to
    answer) may come back allowed, Redis having read no pause yet: its
    permit is not handed over within the pause (the caller proceeded at
    once, in the pause the upstream had just asked for). It goes back to
    Redis, and the caller is granted when the pause ends."""
    async with open_limiter(
        Fifo(1),
        own_server.url,
        name=fresh(),
        rate=10,
        burst=2,
        redis_timeout=10,
        unavailable_after=30,
    ) as limiter:
        await limiter.acquire()  # the connection is open; one unit is left
        own_server.hang()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(limiter.acquire)
                sent = limiter.round_trips
                with anyio.fail_after(5):
                    while limiter.round_trips == sent:  # its take is in flight
                        await anyio.sleep(0.001)
                paused = anyio.current_time()
                limiter.pause_for(2.0)
                own_server.resume()
        finally:
            own_server.resume()
        assert anyio.current_time() - paused >= 2.0 - 0.001
        assert limiter.given_back == 1


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_a_permit_handed_back_within_this_process_s_pause_waits_for_it(
    redis_server: RedisServer,
) -> None:
    """P40: a caller granted a permit, then cancelled before it proceeds,
    after this process paused: its permit does not go to the next waiter
    within the pause (as a refund to a paused machine grants nothing
    before the pause ends); it goes back to Redis, and the next waiter is
    granted when the pause ends (it was granted at once)."""
    async with open_limiter(Fifo(1), redis_server.url, name=fresh(), rate=2, burst=1) as limiter:
        await limiter.acquire()  # the bucket's only permit: the next in 0.5 s
        first = anyio.CancelScope()
        dispatch = limiter._dispatch
        paused: list[float] = []

        def pausing(decisions: list[Decision]) -> None:
            dispatch(decisions)
            if not paused and any(d.state is State.GRANTED for d in decisions):
                paused.append(anyio.current_time())
                limiter.pause_for(2.0)
                first.cancel()  # before it runs

        limiter._dispatch = pausing  # type: ignore[method-assign]

        async def cancelled() -> None:
            with first:
                await limiter.acquire()

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancelled)
            await anyio.sleep(0.1)  # it waits first
            tg.start_soon(limiter.acquire)
        assert first.cancelled_caught
        assert anyio.current_time() - paused[0] >= 2.0 - 0.001
        assert limiter.given_back == 1


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "anyio_backend", [virtual_backend("asyncio"), virtual_backend("trio")], ids=["asyncio", "trio"]
)
@pytest.mark.anyio
async def test_the_local_fallback_serves_far_from_the_clock_s_epoch(
    own_server: RedisServer,
) -> None:
    """As for the timer: 116 days into the clock's reading, the driver
    serving from the local fallback sleeps until the local limit's next
    permit (``t``, in ns, ``t / 1e9`` s), and the clock, read in ns when
    it wakes, rounds to a little before it: the permit was not due, and
    the driver slept until ``t / 1e9`` again, a time passed, for ever (on
    virtual time; the callers were never served)."""
    await anyio.sleep(116 * 86_400 + 0.123)
    own_server.kill()
    async with falling_back(own_server.url, fresh(), 6, 2, unavailable_after=1e6) as limiter:
        await limiter.acquire()  # the local limit: 3/s, burst 1, its bucket empty at first
        start = anyio.current_time()
        for _ in range(4):
            await limiter.acquire()
        assert anyio.current_time() - start == pytest.approx(4 / 3, abs=1e-6)
        assert limiter.backend_down


@pytest.mark.anyio
async def test_an_acquire_that_would_never_wait_is_refused(redis_server: RedisServer) -> None:
    """A shared permit is granted only after a round trip to Redis, never
    at once: ``timeout=0`` ("do not wait") timed out every time, however
    many units Redis held, and a level's ``max_waiting`` of 0 refused every
    acquire with QueueFull. Both are refused naming the argument, saying
    what to use (a short timeout, or ``max_wait=0``, which fails fast on
    Redis's answer); nothing is pushed."""
    async with open_limiter(Fifo(), redis_server.url, name=fresh(), rate=10, burst=5) as limiter:
        for timeout in (0, 0.0):
            with pytest.raises(PermitValueError, match="give a short timeout") as error:
                await limiter.acquire(timeout=timeout)
            assert error.value.argument == "timeout"
            assert "or max_wait=0 (WouldWaitTooLong" in str(error.value)
        with pytest.raises(PermitTypeError):
            await limiter.acquire(timeout=False)
        assert limiter.statistics().levels[0].pushed == 0
        await limiter.acquire(max_wait=0)  # 5 units in the bucket
        await limiter.acquire(timeout=1.0)
    with pytest.raises(PermitValueError, match="give a short timeout") as error:
        RedisLimiter(Fifo(), limiter.limit, max_waiting=0)
    assert error.value.argument == "max_waiting"


@pytest.mark.anyio
async def test_a_policy_that_raises_as_a_caller_arrives_breaks_the_limiter(
    redis_server: RedisServer,
) -> None:
    """A policy that raises when asked which level is next, as a caller
    arrives with the driver asleep: under asyncio as the lone caller's own
    take is made, under trio as the driver is asked whether to wake. The
    caller got the policy's own error, the limiter went on unbroken, and
    under asyncio the caller was left in the machine, a waiter nobody
    waited on; as when the driver meets the bug, the limiter breaks and
    the caller gets LimiterClosed with the cause."""

    class Broken:
        levels = 2

        def choose(self, queues: Any, now: int) -> int:
            return 1  # wrong once level 1 is empty

        def ahead(self, queues: Any, lv: int, now: int) -> int:
            return int(queues.depths[lv])

    async with open_limiter(Broken(), redis_server.url, name=fresh(), rate=50) as limiter:
        await limiter.acquire(1)
        await anyio.sleep(0.05)  # the driver is asleep, nobody waiting
        with pytest.raises(LimiterClosed) as broke:
            await limiter.acquire(0)
        assert "choose() returned 1" in str(broke.value.cause)
        assert limiter.closed
        assert len(limiter.machine) == 0


@pytest.mark.anyio
async def test_a_flow_s_max_waiting_of_0_is_refused(redis_server: RedisServer) -> None:
    """As a level's ``max_waiting`` of 0: a ``max_waiting_per_flow`` of 0
    refused every acquire with QueueFull (a shared permit is never granted
    at once, so every caller would have had to queue in its flow). It is
    refused naming it, and 1 serves."""
    with pytest.raises(PermitValueError, match="give a short timeout") as error:
        open_limiter(Fifo(), redis_server.url, name=fresh(), rate=10, max_waiting_per_flow=0)
    assert (error.value.argument, error.value.value) == ("max_waiting_per_flow", 0)
    async with open_limiter(
        Fifo(), redis_server.url, name=fresh(), rate=10, burst=5, max_waiting_per_flow=1
    ) as limiter:
        await limiter.acquire(flow="a", timeout=1.0)


@pytest.mark.anyio
async def test_flows_take_turns_among_a_process_s_waiters(redis_server: RedisServer) -> None:
    """Flows keep their fairness among each process's own waiters, as in
    every adapter: 40 callers of flow "a" (weight 3) queued before 40 of
    "b" (weight 1) at one level, one permit per request, are granted three
    of "a" to one of "b" (within one grant of each); and a flow at its
    ``max_waiting_per_flow`` is refused its next waiter at once."""
    granted: list[str] = []
    async with open_limiter(
        Fifo(1),
        redis_server.url,
        name=fresh(),
        rate=2_000,
        burst=1,
        lease=1,
        flow_weights={"a": 3},
    ) as limiter:
        await limiter.acquire()  # connected, the script loaded, the burst taken

        async def call(flow: str) -> None:
            await limiter.acquire(flow=flow)
            granted.append(flow)

        async with anyio.create_task_group() as tg:
            for flow in ["a"] * 40 + ["b"] * 40:
                tg.start_soon(call, flow)
    assert sorted(granted) == ["a"] * 40 + ["b"] * 40
    assert 29 <= granted[:40].count("a") <= 31, granted  # 3 to 1: 30 of the first 40

    async with open_limiter(
        Fifo(1), redis_server.url, name=fresh(), rate=1, burst=1, max_waiting_per_flow=2
    ) as limiter:
        await limiter.acquire()  # the next permit a second away
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(lambda: limiter.acquire(flow="a"))
            while len(limiter._waiters) < 2:
                await anyio.sleep(0.001)
            with pytest.raises(QueueFull):
                await limiter.acquire(flow="a")
            tg.cancel_scope.cancel()
