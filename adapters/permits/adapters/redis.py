"""One limit shared by many processes: GCRA in Redis, priority in each process.

The limit lives in one Redis key, checked and charged atomically by a Lua
script (GCRA: the key holds the theoretical arrival time). Each process
queues its own waiters in a ``supplied`` :class:`~permits.core.Machine` under
any policy; its driver task asks Redis for a permit on behalf of the waiter
the policy would serve next, and hands the permit to the machine
(``supply``). The local pacer and Redis are two permit sources for the same
policy: nothing of policy is here.

Design, in brief (README, "One limit for many processes", says more):

- **redis-py's synchronous client in worker threads** (``anyio.to_thread``),
  so the limiter runs through the anyio adapter under asyncio *and* trio
  (redis-py's asyncio client does not run under trio).
- **Time from Redis**: the script reads ``TIME``; clients' clocks never
  enter the limit. The key expires once idle (when its bucket is full).
  Every argument is a number in ``ARGV``; the key is ``{prefix}{{{name}}}``,
  hash-tagged, so a cluster keeps it (and its audit list) in one slot.
- **Capacity ``burst``**: an idle key lets exactly ``burst`` permits through
  at once (not ``burst + 1``), then one per ``1 / rate`` seconds.
- **Headroom reserve per level**: a request for a level with reserve ``R``
  is granted only if at least ``R`` permits of capacity remain after it, so
  batch traffic from every process together never takes the last ``R``, and
  an urgent call from any process finds them when the limit is saturated.
- **"Not yet, retry after X"**: the driver sleeps exactly ``X`` (a timer),
  then asks again for its best waiter, or earlier if a waiter with a smaller
  reserve arrives meanwhile.
- **Faults**: with Redis unreachable, ``on_unavailable="closed"`` (the
  default) fails each waiter with :class:`BackendUnavailable` once it has
  waited ``unavailable_after`` seconds into the outage; ``"local"`` falls
  back to a local limit of the process's declared ``share`` of the rate,
  whose bucket starts empty. Either way the driver keeps trying Redis and
  service resumes by itself when it answers.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from fractions import Fraction
from typing import Any, Literal, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from permits.core import Fifo, Machine, PermitError, PermitTypeError, PermitValueError
from permits.core import Policy as _Policy
from permits.core.checks import check_int, check_rate

from ._base import _nanoseconds
from ._requires import requires_extra
from ._tasked import running

with requires_extra(__name__, "redis", "anyio", "redis"):
    import anyio
    import anyio.lowlevel
    import anyio.to_thread
    import redis
    import redis.exceptions

    from .anyio import Limiter as _AnyioLimiter

__all__ = [
    "SCRIPT",
    "BackendUnavailable",
    "GcraAnswer",
    "RedisLimit",
    "RedisLimiter",
    "open_limiter",
    "script_source",
]

_GCRA = """
-- GCRA with capacity `burst` and a headroom reserve, for permits.
-- KEYS[1]: the limit's key (its theoretical arrival time, microseconds)
-- KEYS[2]: its audit list (written only when ARGV[4] == 1)
-- ARGV[1]: interval T = 1e6 / rate, microseconds; ARGV[2]: burst;
-- ARGV[3]: reserve (permits of capacity this request must leave);
-- ARGV[4]: audit, 0 or 1; ARGV[5]: 1 takes a permit, -1 gives one back.
-- Returns {allowed 0|1, microseconds until this request (if refused) or the
-- next one with the same reserve (if allowed) would be allowed, permits left}.
local T = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local reserve = tonumber(ARGV[3])
local now = @NOW@
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < now then tat = now end
if tonumber(ARGV[5]) < 0 then
  tat = tat - T
  if tat > now then
    redis.call('SET', KEYS[1], string.format('%.17g', tat), 'PX', math.ceil((tat - now) / 1000))
  else
    redis.call('DEL', KEYS[1])
    tat = now
  end
  return {1, 0, math.floor((burst * T - (tat - now)) / T)}
end
local room = (burst - reserve) * T
local new_tat = tat + T
local allow_at = new_tat - room
if allow_at > now then
  return {0, math.ceil(allow_at - now), math.floor((burst * T - (tat - now)) / T)}
end
redis.call('SET', KEYS[1], string.format('%.17g', new_tat), 'PX', math.ceil((new_tat - now) / 1000))
if tonumber(ARGV[4]) == 1 then
  redis.call('RPUSH', KEYS[2], string.format('%.17g', now))
  redis.call('PEXPIRE', KEYS[2], 3600000)
end
local next_at = math.max(0, math.ceil(new_tat + T - room - now))
return {1, next_at, math.floor((burst * T - (new_tat - now)) / T)}
"""

_REDIS_TIME = "(function() local t = redis.call('TIME'); return t[1] * 1000000 + t[2] end)()"


def script_source(*, clock: Literal["redis", "argv"] = "redis") -> str:
    """The GCRA script. ``clock="redis"`` (what the limiter runs) reads the
    time from Redis ``TIME``; ``"argv"`` takes it from ``ARGV[6]``
    (microseconds), only so that tests can ask at chosen times. The rest of
    the text is the same."""
    now = _REDIS_TIME if clock == "redis" else "tonumber(ARGV[6])"
    return _GCRA.replace("@NOW@", now)


#: The script the limiter runs (time from Redis).
SCRIPT = script_source()


class GcraAnswer(NamedTuple):
    """What the script answered."""

    allowed: bool
    #: Microseconds until this request would be allowed, if refused; if
    #: allowed, until the next with the same reserve would be (0: at once).
    retry_after: int
    #: Permits left in the bucket now, for a request without reserve.
    remaining: int


class BackendUnavailable(PermitError, ConnectionError):
    """Redis did not answer: the waiter waited ``unavailable_after`` seconds
    into the outage (``on_unavailable="closed"``).

    :ivar url: the Redis URL, password masked.
    """

    def __init__(self, url: str, after: float, cause: BaseException | None) -> None:
        self.url = url
        self.after = after
        detail = f": {type(cause).__name__}: {cause}" if cause is not None else ""
        super().__init__(f"Redis at {url} unavailable for {after:g} s{detail}")


def masked(url: str) -> str:
    """``url`` with any password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


class RedisLimit:
    """The shared limit: one Redis key and the script, over redis-py's
    synchronous client. Each method is one round trip and blocks; the limiter
    calls them in worker threads.

    :param url: ``redis://`` or ``rediss://`` (TLS) URL, with password if
        any; given to ``redis.Redis.from_url`` unchanged.
    :param name: the limit's name; the key is ``{prefix}{{{name}}}``.
    :param rate: permits per second, over every process together.
    :param burst: capacity: permits an idle limit lets through at once.
    :param audit: also record each grant's Redis time (microseconds) in the
        list ``{key}:audit`` (kept an hour): a diagnostic, used by the tests.
    :param timeout: seconds before a connect or a reply counts as failed.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str,
        rate: int | float | Fraction,
        burst: int = 1,
        prefix: str = "permits:",
        audit: bool = False,
        timeout: float = 0.5,
        **options: Any,
    ) -> None:
        if not isinstance(url, str):
            raise PermitTypeError("url", "<hidden>", "a str")
        if not isinstance(name, str) or not name:
            raise PermitValueError("name", name, "must be a non-empty str")
        if not isinstance(prefix, str):
            raise PermitTypeError("prefix", prefix, "a str")
        self.rate = check_rate(rate)
        self.burst = check_int("burst", burst, 1)
        self.url = masked(url)
        self.key = f"{prefix}{{{name}}}"
        self.audit_key = f"{self.key}:audit"
        self.audit = bool(audit)
        self.interval_us = float(Fraction(10**6) / self.rate)
        self._client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, **options
        )
        self._script = self._client.register_script(SCRIPT)

    def __repr__(self) -> str:
        return (
            f"RedisLimit(url={self.url!r}, key={self.key!r}, "
            f"rate={self.rate!r}, burst={self.burst!r})"
        )

    def _call(self, reserve: int, count: int) -> GcraAnswer:
        allowed, retry_after, remaining = self._script(
            keys=[self.key, self.audit_key],
            args=[self.interval_us, self.burst, reserve, int(self.audit), count],
        )
        return GcraAnswer(bool(allowed), int(retry_after), int(remaining))

    def take(self, reserve: int = 0) -> GcraAnswer:
        """Ask for one permit, leaving at least ``reserve`` of capacity."""
        return self._call(reserve, 1)

    def give_back(self) -> None:
        """Return one permit taken and not used."""
        self._call(0, -1)

    def ping(self) -> None:
        self._client.ping()

    def close(self) -> None:
        self._client.close()


#: What counts as "Redis is unreachable".
_UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


class RedisLimiter(_AnyioLimiter):
    """A limiter whose permits come from a :class:`RedisLimit`, shared with
    other processes; make one with :func:`open_limiter`. ``acquire``,
    ``permit``, ``statistics`` and cancellation behave as in every adapter.
    """

    def __init__(
        self,
        policy: _Policy,
        limit: RedisLimit,
        *,
        reserve: Sequence[int] | None = None,
        on_unavailable: Literal["closed", "local"] = "closed",
        share: float | None = None,
        unavailable_after: float = 1.0,
        max_waiting: int | Sequence[int | None] | None = None,
        default_level: int = 0,
        refund_window: float = 1.0,
    ) -> None:
        window = _nanoseconds("refund_window", refund_window)
        if window is None:
            raise PermitTypeError("refund_window", refund_window, "a finite number of seconds")
        self._refund_window_ns = window
        super().__init__(
            policy,
            limit.rate,
            limit.burst,
            max_waiting=max_waiting,
            default_level=default_level,
        )
        levels = self._machine.levels
        if reserve is None:
            reserve = (0,) * levels
        if isinstance(reserve, (str, bytes)) or not isinstance(reserve, Sequence):
            raise PermitTypeError("reserve", reserve, "a sequence of ints, one per level")
        if len(reserve) != levels or not all(
            isinstance(r, int) and not isinstance(r, bool) and 0 <= r < limit.burst for r in reserve
        ):
            raise PermitValueError(
                "reserve",
                reserve,
                f"needs one int per level ({levels}), each >= 0 and below burst ({limit.burst})",
            )
        if on_unavailable not in ("closed", "local"):
            raise PermitValueError("on_unavailable", on_unavailable, "must be 'closed' or 'local'")
        if on_unavailable == "local" and (
            isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1
        ):
            raise PermitValueError("share", share, "must be a number in (0, 1] for 'local'")
        after_ns = _nanoseconds("unavailable_after", unavailable_after)
        if not after_ns:  # None (infinite) or 0
            raise PermitValueError("unavailable_after", unavailable_after, "must be seconds > 0")
        self.limit = limit
        self.reserve = tuple(reserve)
        self.on_unavailable = on_unavailable
        self.share = share
        self.unavailable_after = float(unavailable_after)
        self._after_ns = after_ns
        #: Seconds between attempts to reach Redis while it is unreachable.
        self._retry = min(0.1, self.unavailable_after / 4)
        #: Time (ns) the current outage began; None while Redis answers.
        self._down_since: int | None = None
        self._down_error: BaseException | None = None
        #: The fallback's pacer while the local limit serves ("local" only).
        self._local: Machine | None = None
        self._retry_reserve: int | None = None
        self._sleep_scope: anyio.CancelScope | None = None
        self._probe_at = 0.0
        #: Round trips to Redis made so far (a diagnostic).
        self.round_trips = 0
        #: Permits taken from Redis and given back unused (a diagnostic).
        self.given_back = 0

    def _new_machine(
        self, policy: _Policy, rate: int | float | Fraction | None, burst: int, **options: Any
    ) -> Machine:
        """A supplied machine: the permits come from Redis, charged there as
        they are taken; a permit whose caller was cancelled before it
        proceeded goes to the next waiter within ``refund_window``."""
        options["refund_window_ns"] = self._refund_window_ns
        return Machine(policy, rate, burst, supplied=True, **options)

    def __repr__(self) -> str:
        return (
            f"RedisLimiter(policy={self._machine.policy!r}, limit={self.limit!r}, "
            f"reserve={self.reserve!r}, on_unavailable={self.on_unavailable!r})"
        )

    @property
    def backend_down(self) -> bool:
        """Whether the last round trip to Redis failed."""
        return self._down_since is not None

    def try_acquire(
        self, level: int | None = None, *, cost: int | Mapping[str, int] = 1, flow: Hashable = None
    ) -> bool:
        """Not offered: whether a shared permit is free takes a round trip.
        Use ``acquire(level, max_wait=...)`` or ``timeout=``."""
        raise NotImplementedError("try_acquire() needs a round trip to Redis; use acquire()")

    # -- waking the driver -------------------------------------------------

    def _reschedule(self) -> None:
        """A waiter came or went: wake the driver if that changes its plan."""
        scope = self._sleep_scope
        if scope is None:
            return  # busy in a round trip: it looks again right after
        if self._should_wake():
            scope.cancel()
        else:
            when = self._machine.next_tick()
            if when is not None and when / 1e9 < scope.deadline:
                scope.deadline = when / 1e9

    def _should_wake(self) -> bool:
        """Idle, and a waiter came; or waiting to retry for a reserve, and
        the best waiter now has a smaller one (it may find a permit now)."""
        level = self._machine.next_level()
        if level is None:
            return False
        return self._retry_reserve is None or self.reserve[level] < self._retry_reserve

    async def _sleep(self, until: float) -> None:
        """Sleep until ``until`` (seconds), the next deadline, or a wake-up."""
        if self._should_wake() and self._local is None and self._down_since is None:
            await anyio.lowlevel.checkpoint()
            return
        when = self._machine.next_tick()
        deadline = until if when is None else min(until, when / 1e9)
        with anyio.CancelScope(deadline=deadline) as scope:
            self._sleep_scope = scope
            try:
                await anyio.sleep_forever()
            finally:
                self._sleep_scope = None

    # -- the driver ----------------------------------------------------------

    async def _run(self, *, task_status: Any) -> None:
        self._bind_backend()
        self._running = True
        task_status.started()
        try:
            while self._closed is None:
                await self._step()
        except Exception as error:
            self._break(error)  # the waiters learn of it; nobody hangs
        finally:
            self._running = False

    async def _step(self) -> None:
        machine = self._machine
        now = self._now()
        self._dispatch(machine.tick(now))  # expiries
        level = machine.next_level()
        if level is None:
            await self._sleep(math.inf)
            return
        if self._local is not None:
            await self._step_local(level)
            return
        reserve = self.reserve[level]
        try:
            self.round_trips += 1
            answer = await anyio.to_thread.run_sync(self.limit.take, reserve)
        except _UNREACHABLE as error:
            await self._outage(error)
            return
        self._down_since = self._down_error = None
        if not answer.allowed:
            self._retry_reserve = reserve
            try:
                await self._sleep(anyio.current_time() + answer.retry_after / 1e6)
            finally:
                self._retry_reserve = None
            return
        now = self._now()
        self._dispatch(machine.tick(now))
        chosen = machine.next_level()
        if chosen is None or self.reserve[chosen] > reserve:
            # The waiter left, or a less urgent one is next, during the round
            # trip: this permit was taken under a smaller reserve than its
            # taker is owed. Give it back rather than break the reserve.
            await self._give_back()
            return
        self._dispatch(machine.supply(now))
        if answer.retry_after and machine.next_level() is not None:
            # The next permit is not there yet: wait for it (as for a refusal).
            self._retry_reserve = reserve
            try:
                await self._sleep(anyio.current_time() + answer.retry_after / 1e6)
            finally:
                self._retry_reserve = None

    async def _give_back(self) -> None:
        try:
            self.round_trips += 1
            await anyio.to_thread.run_sync(self.limit.give_back)
            self.given_back += 1
        except _UNREACHABLE as error:
            await self._outage(error)

    async def _outage(self, error: BaseException) -> None:
        now = self._now()
        if self._down_since is None:
            self._down_since = now
        self._down_error = error
        if self.on_unavailable == "local":
            self._local = self._fallback(now)
            self._probe_at = anyio.current_time() + self._retry
            return
        # Fail closed: every waiter that has waited unavailable_after into
        # the outage gets BackendUnavailable; then try Redis again.
        machine = self._machine
        first = math.inf
        for waiter in machine.waiting():
            since = max(waiter.pushed_at, self._down_since)
            if now - since >= self._after_ns:
                machine.cancel(waiter.id)
                self._fail(
                    waiter.id, BackendUnavailable(self.limit.url, self.unavailable_after, error)
                )
            else:
                first = min(first, (since + self._after_ns) / 1e9)
        await self._sleep(min(first, anyio.current_time() + self._retry))

    def _fail(self, id: object, error: BaseException) -> None:
        waiter = self._waiters.pop(id, None)  # type: ignore[call-overload]
        if waiter is not None:
            waiter.error = error
            if waiter.event is not None:
                waiter.event.set()

    def _fallback(self, now: int) -> Machine:
        """The local limit: ``share`` of the rate, ``share`` of the burst, its
        bucket empty at the start (so the switch itself lets nothing extra
        through)."""
        assert self.share is not None
        rate = self.limit.rate * Fraction(repr(float(self.share)))
        burst = max(1, math.floor(self.limit.burst * self.share))
        pacer = Machine(Fifo(1), rate, burst)
        for i in range(burst):
            pacer.push(("drain", i), 0, now)
        return pacer

    async def _step_local(self, level: int) -> None:
        """Serve from the local limit; every so often, see if Redis is back."""
        pacer = self._local
        assert pacer is not None
        if anyio.current_time() >= self._probe_at:
            try:
                self.round_trips += 1
                await anyio.to_thread.run_sync(self.limit.ping)
            except _UNREACHABLE as error:
                self._down_error = error
                self._probe_at = anyio.current_time() + self._retry
            else:
                self._local = None
                self._down_since = self._down_error = None
                return
        now = self._now()
        pacer.tick(now)
        due = pacer.next_due()
        assert due is not None
        if due <= now:
            pacer.push(object(), 0, now)
            self._dispatch(self._machine.supply(now))
            return
        await self._sleep(min(due / 1e9, self._probe_at))


def open_limiter(
    policy: _Policy,
    url: str,
    *,
    name: str,
    rate: int | float | Fraction,
    burst: int = 1,
    reserve: Sequence[int] | None = None,
    on_unavailable: Literal["closed", "local"] = "closed",
    share: float | None = None,
    unavailable_after: float = 1.0,
    prefix: str = "permits:",
    timeout: float = 0.5,
    audit: bool = False,
    max_waiting: int | Sequence[int | None] | None = None,
    default_level: int = 0,
    refund_window: float = 1.0,
) -> AbstractAsyncContextManager[RedisLimiter]:
    """Open a :class:`RedisLimiter` for an ``async with`` (asyncio or trio,
    through anyio): ``rate`` and ``burst`` over every process that opens the
    same ``name`` on the same Redis; this process's waiters in ``policy``'s
    order.

    :param reserve: per level, permits of the shared capacity its requests
        must leave (``0`` for the most urgent); each below ``burst``.
    :param on_unavailable: ``"closed"``: with Redis unreachable, waiters get
        :class:`BackendUnavailable` after ``unavailable_after`` seconds;
        ``"local"``: serve from a local limit of ``share`` of the rate.
    :param share: this process's declared fraction of the rate, for
        ``"local"``; the shares of all processes should add up to at most 1.
    :param timeout: seconds before a connect or a reply to Redis counts as
        failed.
    See :class:`RedisLimit` for ``url``, ``prefix`` and ``audit``, and
    :class:`~permits.adapters.BaseLimiter` for the rest.
    """
    limit = RedisLimit(
        url, name=name, rate=rate, burst=burst, prefix=prefix, audit=audit, timeout=timeout
    )
    limiter = RedisLimiter(
        policy,
        limit,
        reserve=reserve,
        on_unavailable=on_unavailable,
        share=share,
        unavailable_after=unavailable_after,
        max_waiting=max_waiting,
        default_level=default_level,
        refund_window=refund_window,
    )
    return _opened(limiter)


@asynccontextmanager
async def _opened(limiter: RedisLimiter) -> AsyncIterator[RedisLimiter]:
    try:
        async with running(limiter, anyio.create_task_group()):
            yield limiter
    finally:
        limiter.limit.close()
