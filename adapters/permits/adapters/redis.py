"""Limits shared by many processes: GCRA in Redis, priority in each process.

The limits live in one Redis hash, checked and charged atomically by a Lua
script (GCRA: the hash holds each limit's theoretical arrival time, and the
pause). Each process queues its own waiters in a ``supplied``
:class:`~permits.core.Machine` under any policy; its driver task asks Redis
for a permit on behalf of the waiter the policy would serve next, for that
waiter's units of every limit, and hands the permit to the machine
(``supply``). The local pacer and Redis are two permit sources for the same
policy: nothing of policy is here.

Design, in brief (README, "One limit for many processes", and SPEC.md, "The
shared limit", say more):

- **redis-py's asyncio client under asyncio, its synchronous client in
  worker threads under trio** (``anyio.to_thread``; redis-py's asyncio
  client does not run under trio), so the limiter runs through the anyio
  adapter under both.
- **A lone caller sends its own take** (under asyncio, on the limiter's
  own client): nobody else waiting and the driver idle, the caller sends
  the take the driver would have sent, and the reply is acted on where it
  is read, as the driver would have; two event-loop passes fewer per
  acquire. A caller that leaves meanwhile leaves the answer to the driver,
  which gives back what nobody takes, and sends nothing else until then.
- **Time from Redis**: the script reads ``TIME``; clients' clocks never
  enter the limit. The state expires within a second of going idle
  (every bucket full, no pause). Every argument is in ``ARGV``; the keys
  are ``{prefix}{{{name}}}`` and its suffixes, hash-tagged, so a cluster
  keeps them in one slot.
- **Capacity ``burst``**: an idle limit lets exactly ``burst`` units through
  at once (not ``burst + 1``), then one per ``1 / rate`` seconds.
- **Several limits, costs**: one call charges every limit its part, or none.
- **Headroom reserve per level**: a take for a level with reserve ``R`` is
  granted only if at least ``R`` units of capacity remain after it, so
  batch traffic from every process together never takes the last ``R``, and
  an urgent call from any process finds them when the limit is saturated.
- **One pause for all, the upstream's word, live limits, settles**: each is
  one script call, sent by the driver before its next take; every take of
  every process reads the pause and the limits in the same call.
- **"Not yet, retry after X"**: the driver sleeps exactly ``X`` (a timer),
  then asks again for its best waiter, or earlier if a waiter with a smaller
  reserve arrives meanwhile.
- **Faults**: a timer task of its own expires waiters whatever the driver
  waits for. With Redis unreachable, ``on_unavailable="closed"`` (the
  default) fails each waiter with :class:`BackendUnavailable` once it has
  waited ``unavailable_after`` seconds since the later of its acquire and
  the oldest request Redis has not answered; ``"local"`` falls back to a
  local limit of the process's declared ``share`` of the rate, whose bucket
  starts empty, while a probe task looks for Redis. Either way service
  resumes by itself when it answers.
"""

from __future__ import annotations

import inspect
import math
import operator
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from fractions import Fraction
from functools import cache, partial
from importlib import resources
from typing import Any, Generic, Literal, NamedTuple, NoReturn, TypeVar, overload
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from permits.core import (
    MAX_QUOTAS,
    SECOND,
    Decision,
    Fifo,
    Limit,
    Machine,
    NotRefundable,
    PermitError,
    PermitTypeError,
    PermitValueError,
    State,
    across_processes,
)
from permits.core import Policy as _Policy
from permits.core.checks import (
    NO_UNIT,
    check_actual,
    check_change,
    check_int,
    check_limits,
    check_rate,
    check_units,
    no_limit,
    over_burst,
    settled_units,
)

from ._base import (
    Event,
    WouldWaitTooLong,
    _finite_nanoseconds,
    _nanoseconds,
    async_opening,
    refuse_unknown,
)
from ._recording import Recording
from ._requires import requires_extra
from ._tasked import running

with requires_extra(__name__, "redis", "anyio", "redis"):
    import anyio
    import anyio.abc
    import anyio.lowlevel
    import anyio.to_thread
    import redis
    import redis.asyncio
    import redis.backoff
    import redis.connection
    import redis.exceptions
    import redis.retry
    import sniffio

    from . import _resp
    from .anyio import Limiter as _AnyioLimiter

if sys.version_info >= (3, 11, 3):
    from asyncio import timeout as _asyncio_timeout
else:  # pragma: no cover - anyio.fail_after instead
    _asyncio_timeout = None  # type: ignore[assignment]

__all__ = [
    "SCRIPT",
    "BackendUnavailable",
    "GcraAnswer",
    "RedisLimit",
    "RedisLimiter",
    "open_limiter",
    "script_source",
]

#: The script's text (``redis.lua``, beside this module), before
#: :func:`script_source` fills in its clock and its bounds.
_SCRIPT = resources.files(__package__).joinpath("redis.lua").read_text(encoding="utf-8")


def script_source(*, clock: Literal["redis", "argv"] = "redis") -> str:
    """The script. ``clock="redis"`` (what the limiter runs) reads the time
    from Redis ``TIME``; ``"argv"`` takes it from ``ARGV[2]`` (microseconds),
    only so that tests can ask at chosen times, and keeps its keys an hour
    longer (their expiry runs on Redis's clock, not the test's). The rest of
    the text is the same."""
    text = _SCRIPT.replace("@QUOTAS@", str(MAX_QUOTAS))
    if clock == "redis":
        return text.replace("@TIME@", "redis.call('TIME')").replace("@SLACK@", "0")
    return text.replace("@TIME@", "{0, ARGV[2]}").replace("@SLACK@", "3600000")


#: The script the limiter runs (time from Redis).
SCRIPT = script_source()

#: The probe of a limiter falling back locally: whether Redis can serve a
#: take again. One write on the limit's own key, undone at once (a field
#: the script never reads, set and deleted; the key deleted with it if it
#: held nothing else): a server that answers reads but refuses writes (out
#: of memory, a replica after a failover) refuses it as it refuses a
#: take's first write; nothing of the limit is read or charged. Only the
#: commands and the key a take uses, so a Redis user allowed takes (ACL)
#: is allowed the probe.
PROBE = "redis.call('HSET', KEYS[1], 'probe', '1') return redis.call('HDEL', KEYS[1], 'probe')"


class GcraAnswer(NamedTuple):
    """What the script answered."""

    allowed: bool
    #: Microseconds until this request would be allowed, if refused (``-1``:
    #: never, its cost is above a limit's burst); if allowed, until the same
    #: request again would be (0: at once).
    retry_after_us: int
    #: Units left in each limit's bucket now (negative: in debt), in the
    #: order of :attr:`RedisLimit.limits`.
    remaining: tuple[int, ...]
    #: Allowed, for later: the permit is the taker's ``retry_after_us``
    #: microseconds from now (a take that books ahead).
    booked: bool = False
    #: Permits taken (more than one: a lease); 0 if refused.
    taken: int = 1
    #: Under global shares, the level the permits taken are owed to (the
    #: level asked for); ``None``: refused, or whoever the process's policy
    #: chooses.
    owed: int | None = None
    #: Under global shares, the level of the asking process whose next grant
    #: starts soonest, to ask for next (``None``: it waits no more, or no
    #: shares).
    ask_next: int | None = None
    #: The limits the script used, ``(T, burst)`` per limit (``T``: µs a
    #: unit), when Redis holds a limit changed by ``set_limit``; ``None``:
    #: the limits the request was built with, as opened.
    limits: tuple[tuple[float, int], ...] | None = None


#: What :meth:`RedisLimit.submit` calls with the answer, or the error.
_Landed = Callable[[GcraAnswer | None, BaseException | None], None]


#: The keys a call names, of the limit's six (see the script): the first
#: two (the state, the live limits), and the audit list when it audits,
#: unless it uses global priority, shares or the line. Each key named costs
#: Redis work at every call (about 1,800 instructions), used or not.
_FEW_KEYS, _AUDITED_KEYS, _ALL_KEYS = 2, 3, 6


class Request(NamedTuple):
    """One call of the script, built and checked, not yet sent."""

    #: The script's arguments, encoded as redis-py would (``str(arg)`` in
    #: UTF-8): it sends bytes as they are.
    args: list[bytes]
    #: The same as they go on the wire (RESP bulk strings), for the small
    #: asyncio client: a request sent many times is encoded once.
    wire: bytes
    #: How many of the limit's keys it names: :data:`_FEW_KEYS` (or
    #: :data:`_AUDITED_KEYS`, when it audits) or :data:`_ALL_KEYS`.
    keys: int


#: A change to the shared limit the driver is to send: its request, or what
#: builds it at the time it is sent (ns, the limiter's clock), for a change
#: whose time counts from when it was given (a pause, the upstream's word);
#: ``None``: nothing is left to send (it is over).
_Change = Request | Callable[[int], Request | None]


class _Take(NamedTuple):
    """A take for the head of a level, as the driver sends it."""

    request: Request
    #: The waiter it is for (the head of ``level`` when it was built).
    head: int
    level: int
    units: tuple[int, ...]
    reserve: int
    #: This process's waiters per level, under global priority.
    depths: tuple[int, ...] | None
    #: This process's waiters, when it asks for a place in the line.
    waiting: int | None


def _answer(reply: list[Any], limits: int) -> GcraAnswer:
    used = None
    if len(reply) == 5 + limits and isinstance(reply[-1], list):  # the limits stored
        words = reply[-1]
        if len(words) != 2 * limits:
            raise ValueError(f"the script answered {reply!r}: not {limits} limits at its end")
        used = tuple((float(words[j]), int(words[j + 1])) for j in range(0, 2 * limits, 2))
        reply = reply[:-1]
    if len(reply) not in (2 + limits, 4 + limits):
        raise ValueError(
            f"the script answered {reply!r}: not {2 + limits} or {4 + limits} numbers "
            "(a script of another version of permits?)"
        )
    numbers = [int(r) for r in reply]
    code, left = numbers[0], tuple(numbers[2 : 2 + limits])
    booked = code < 0
    owed = ask_next = None
    if len(numbers) > 2 + limits:  # a take under global shares
        owed, ask_next = (n if n >= 0 else None for n in numbers[2 + limits :])
    return GcraAnswer(
        code != 0, numbers[1], left, booked, 1 if booked else code, owed, ask_next, used
    )


class BackendUnavailable(PermitError, ConnectionError):
    """Redis did not answer: the waiter waited ``unavailable_after`` seconds
    since the later of its acquire and the oldest request Redis has not
    answered (``on_unavailable="closed"``).

    :ivar url: the Redis URL, password masked.
    """

    def __init__(self, url: str, after: float, cause: BaseException | None) -> None:
        self.url = url
        self.after = after
        detail = f": {type(cause).__name__}: {cause}" if cause is not None else ""
        if url.startswith("rediss://") and isinstance(cause, redis.exceptions.TimeoutError):
            # (a server without TLS waits for a command, and the handshake for ever)
            detail += " (rediss:// speaks TLS: does the server on that port?)"
        super().__init__(f"Redis at {url} unavailable for {after:g} s{detail}")


class _NotNow(redis.exceptions.ConnectionError):
    """An error reply that says Redis cannot serve now, which redis-py
    raises as a plain ``ResponseError``: an outage. ``-BUSY``: it runs a
    script past its time limit, and answers everything else so until it
    ends; ``-MISCONF``: its last snapshot failed, and it refuses writes
    until one succeeds (``stop-writes-on-bgsave-error``); ``-NOREPLICAS``:
    fewer of its replicas are in sync than ``min-replicas-to-write``, and it
    refuses writes until enough are again (a replica lagging or
    restarting)."""


#: The first words of the error replies that are a :class:`_NotNow`.
_NOT_NOW = ("BUSY ", "MISCONF ", "NOREPLICAS ")


#: What a server that asks for a password answers a long request (a take)
#: of a connection not authenticated, before reading it (it closes the
#: connection then): a password refused, as ``-NOAUTH`` (which redis-py's
#: client is told, asking ``HELLO`` first), not a plain error reply
#: (after ``-ERR``, which redis-py's parser drops).
_UNAUTHENTICATED = "Protocol error: unauthenticated "


def _counted(error: redis.exceptions.ResponseError, key: str | None = None) -> BaseException:
    """An error reply as the limiter counts it: ``-BUSY``, ``-MISCONF`` and
    ``-NOREPLICAS`` as a :class:`_NotNow` (an outage); a long request
    refused for want of a password as redis-py's ``AuthenticationError``
    (an outage too); the script failing
    on what it read (``-WRONGTYPE``, or a Lua error: a key of the limit
    ``key`` that something else wrote) as the same error, saying which keys
    and what to do; anything else as it is."""
    if type(error) is not redis.exceptions.ResponseError:
        return error
    text = str(error)
    if text.startswith(_NOT_NOW):
        return _NotNow(text)
    if text.removeprefix("ERR ").startswith(_UNAUTHENTICATED):
        return redis.exceptions.AuthenticationError(
            f"{text} (Redis asks for a password the URL does not give)"
        )
    if key is not None and (text.startswith("WRONGTYPE") or "user_script:" in text):
        return redis.exceptions.ResponseError(
            f"{text} (the script failed on what the keys of the limit hold: {key} and "
            f"{key}:limits, :demand, :line, :shares; if something else wrote them, "
            "delete them, or open the limit under another name or prefix)"
        )
    return error


def _sendable(argument: str, text: str) -> None:
    """Refuse ``argument=text`` if it cannot go to Redis: keys and
    arguments are sent in UTF-8, which a lone surrogate is not."""
    try:
        text.encode()
    except UnicodeEncodeError:
        raise PermitValueError(
            argument, text, "is no UTF-8 text (a lone surrogate): Redis is sent it in UTF-8"
        ) from None


def masked(url: str) -> str:
    """``url`` with any password replaced by ``***``: before the ``@``, and
    in the query string (``?password=``, redis-py's way for a Unix
    socket)."""
    parts = urlsplit(url)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]  # and the port, as written
        user = parts.username or ""
        url = urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    head, mark, rest = url.partition("?")
    if not mark:
        return url
    query, hashed, fragment = rest.partition("#")
    words = [
        "password=***" if unquote_plus(word.partition("=")[0]) == "password" else word
        for word in query.split("&")
    ]
    return f"{head}?{'&'.join(words)}{hashed}{fragment}"


@cache
def _virtual_costs(weights: tuple[int, ...]) -> str:
    """Each level's cost of one unit in virtual time, as the script reads
    them: the lcm of the weights over the level's weight (one policy's
    weights are asked for at every take: worked out once)."""
    whole = math.lcm(*weights)
    return " ".join(str(whole // w) for w in weights)


#: The most one grant may move a level's finish in global shares' virtual
#: time (P93: their renormalisation is exact while one grant moves it by no
#: more; past 2**53 a finish is unreadable, and every take fails).
_MOST_VIRTUAL = 2**52


def _check_virtual_costs(
    argument: str, value: object, weights: tuple[int, ...], burst: int
) -> None:
    """Refuse ``argument=value`` if a grant of ``burst`` units of the shared
    limit at the level of the smallest of ``weights`` would move its finish
    past :data:`_MOST_VIRTUAL` (P94). A grant moves it by its permits times
    its units times ``lcm(weights) // w``, and takes at most ``burst``
    units: one permit of up to ``burst`` (a cost above it is refused), or
    several of a lease, each more only while half the burst is left after
    it (so at most ``ceil(burst / 2)`` units in all)."""
    whole = math.lcm(*weights)
    cost = whole // min(weights)
    if burst * cost <= _MOST_VIRTUAL:
        return
    if argument == "burst":
        why = (
            f"a grant of {burst:,} units under weights {weights} would move a level's finish "
            f"by {burst * cost:,} in global shares' virtual time, past 2**52, the most it holds "
            f"exactly: a burst of at most {_MOST_VIRTUAL // cost:,}, or weights whose least "
            "common multiple is smaller"
        )
    else:
        why = (
            f"{'its weights cost' if argument == 'policy' else 'costs'} a unit {cost:,} in "
            f"global shares' virtual time (the least common multiple, {whole:,}, over the "
            f"smallest weight): a grant of the shared limit's burst ({burst:,}) would move a "
            f"level's finish by {burst * cost:,}, past 2**52, the most it holds exactly; give "
            f"weights whose least common multiple is at most {_MOST_VIRTUAL // burst:,} times "
            "the smallest (weights that divide one another: (4, 2, 1) rather than (5, 3, 2)), "
            "or a smaller burst"
        )
    raise PermitValueError(argument, value, why)


#: The longest pause, or time until the upstream's reset, the script takes
#: (seconds, about 31 years): its times are microseconds of Redis's clock
#: in Lua numbers, exact below 2**53 (the year 2255), and it writes them as
#: 64-bit integers; a longer one made it fail halfway, the state hash
#: half written and unreadable by every process.
_LONGEST_S = 10**9


#: The most units the script counts exactly (a Lua number holds every
#: integer up to 2**53); a quota or the upstream's word of more is taken
#: as that many (about 9e15 units: at a million units a second, 285 years),
#: a burst of more set by set_limit refused.
_MOST_UNITS = 2**53


def _microseconds(argument: str, seconds: float, *, above_zero: bool = False) -> int:
    """``seconds`` (finite, ``>= 0``, or ``> 0`` if ``above_zero``, at most
    :data:`_LONGEST_S`) in whole microseconds: its nearest whole nanosecond,
    as the process counts it (``_nanoseconds``), rounded up. (The float
    product ``seconds * 1e6`` rounded up made 1.1 s 1,100,001 µs: Redis's
    pause outlived the process's own by a microsecond.)"""
    try:
        ns = _nanoseconds(argument, seconds)
    except PermitValueError:  # negative or NaN: refused below, with the whole range
        ns = None
    if ns is None or seconds > _LONGEST_S or (above_zero and not ns):
        above = "> 0" if above_zero else ">= 0"
        raise PermitValueError(
            argument, seconds, f"must be finite seconds {above}, at most {_LONGEST_S:g}"
        )
    return -(-ns // 1000)


def _above_zero(argument: str, seconds: float) -> int:
    """``seconds`` (finite, ``> 0``) in nanoseconds: a negative, NaN, 0 or
    an infinity refused alike, so that the error shows the whole range
    (``-1`` refused as "at least 0" would send its caller to 0, refused
    next)."""
    try:
        ns = _nanoseconds(argument, seconds)
    except PermitValueError:  # negative or NaN: refused below, with the whole range
        ns = None
    if not ns:  # None (infinite, negative or NaN) or 0
        raise PermitValueError(argument, seconds, "must be finite seconds > 0")
    return ns


def _ints(argument: str, values: object, minimum: int | None, what: str) -> tuple[int, ...]:
    """``values``, a sequence of ints each ``>= minimum`` (any, if ``None``)
    and not a str; ``what`` says what they are, for the error, which names
    a bad one by its entry (``weights[1]=0``)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise PermitTypeError(argument, values, f"a sequence of ints, {what}")
    return tuple(check_int(f"{argument}[{i}]", n, minimum) for i, n in enumerate(values))


#: The most units a second the script counts: one a microsecond. Its times
#: are microseconds of Redis's clock in Lua numbers, which near now (about
#: 2**50 us) hold a quarter of one, and from 2**52 us (the year 2112) one:
#: a unit of less than that was lost in the bucket's time (at 10**7 a
#: second, a tenth of a microsecond each, every take of one unit was
#: granted, however many came in one microsecond).
_MOST_RATE = 10**6


def _interval_us(argument: str, rate: Fraction, limit: Limit | None = None) -> float:
    """Microseconds per unit at ``rate``: at least one (the script's unit
    of time, :data:`_MOST_RATE`) and at most :data:`_LONGEST_S` seconds
    (the bound the script's other times keep). ``rate`` is ``limit``'s
    where ``argument`` names an entry of ``limits``."""
    value, its = (rate, "") if limit is None else (limit, "its rate ")
    if rate * _LONGEST_S < 1:
        raise PermitValueError(
            argument,
            value,
            f"{its}must allow at least one unit in {_LONGEST_S:g} s (about 31 years)",
        )
    if rate > _MOST_RATE:
        raise PermitValueError(
            argument,
            value,
            f"{its}must be at most {_MOST_RATE:,} a second: the shared limit counts time in "
            "microseconds, and a unit must take at least one",
        )
    return float(Fraction(10**6) / rate)


#: The longest a full bucket may take to refill, in microseconds (a
#: bucket's time past now is kept in whole microseconds below 2**53, and
#: told in replies below 2**63).
_LONGEST_REFILL_US = _LONGEST_S * 10**6


def _check_refill(
    argument: str, value: object, burst: int, interval_us: float, limit: str | None
) -> None:
    """Refuse ``argument=value`` if ``limit`` (``None``: the one ``argument``
    names) would then take more than :data:`_LONGEST_S` seconds to refill a
    full ``burst`` at ``interval_us`` a unit."""
    if burst * interval_us > _LONGEST_REFILL_US:
        named = "it" if limit is None else f"limit {limit!r}"
        raise PermitValueError(
            argument,
            value,
            f"{named} would take more than {_LONGEST_S:g} s (about 31 years) to "
            f"refill a full bucket of {burst:,} at {10**6 / interval_us:g} a second",
        )


def _hash_tag(key: str) -> str:
    """The part of ``key`` Redis Cluster hashes to place it: between its
    first ``{`` and the next ``}``, unless that is empty."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return key if start < 0 or end <= start + 1 else key[start + 1 : end]


def _not_redis_timeout(value: object) -> PermitTypeError:
    """The error for a ``timeout`` given where Redis's reply timeout,
    ``redis_timeout``, was meant."""
    return PermitTypeError(
        "timeout",
        value,
        "redis_timeout=... for Redis's replies (a caller's own wait is acquire(timeout=...))",
        got="timeout",
    )


class RedisLimit:
    """The shared limit: its Redis keys and the script, over redis-py's
    synchronous client (and its asyncio client, once :meth:`open_async`).
    Each method is one round trip and blocks; the limiter sends the same
    requests (``ask_*``) through :meth:`asend` under asyncio, through
    :meth:`send` in worker threads under trio. The ``ask_*`` builders
    check only what building the request needs (the limiter builds them
    from what it checked already); the methods of the same names check
    every argument, then send.

    :param url: ``redis://`` or ``rediss://`` (TLS) URL, with password if
        any; given to ``redis.Redis.from_url`` unchanged.
    :param name: the limit's name; the key is ``{prefix}{{{name}}}``.
    :param rate: permits per second, over every process together (the one
        limit, named ``"units"``; or give ``limits``): at most 10**6 (a
        unit a microsecond, the script's unit of time), at least one in
        1e9 s.
    :param burst: capacity: permits an idle limit lets through at once.
    :param limits: several limits at once, by name, each a
        :class:`~permits.core.Limit`; a cost names what it takes from each,
        and is charged to all of them or to none. Every process sharing
        ``name`` opens the same limits.
    :param audit: also record each grant's Redis time (microseconds) in the
        list ``{key}:audit``, and each give-back's or settle's after a
        ``g``, with its units of the first limit (``g<time> <units>``:
        negative given back, positive charged): a diagnostic, used by the
        tests. The list is never trimmed: it grows by an entry per grant
        and expires an hour after its last one, so a limit in steady use
        keeps every entry since it last stood idle an hour (about 10 bytes
        an entry in Redis): for a test or a short look, not a limiter left
        running.
    :param redis_timeout: seconds before a connect or a reply counts as
        failed (at most 1e9). Not an acquire's ``timeout``: that is how long
        a caller waits for its permit.
    :param cluster: ``url`` names a node of a Redis Cluster: the client is
        redis-py's ``RedisCluster``. The keys of one limit share a hash tag,
        so every call goes to the one node that holds them.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str,
        rate: int | float | Fraction | None = None,
        burst: int = 1,
        limits: Mapping[str, Limit] | Limit | None = None,
        prefix: str = "permits:",
        audit: bool = False,
        redis_timeout: float = 0.5,
        cluster: bool = False,
        **options: Any,
    ) -> None:
        if not isinstance(url, str):  # its repr may hold a password (bytes, a URL object)
            raise PermitTypeError(
                "url",
                "<hidden>",
                "a str, such as 'redis://localhost:6379/0' (str() of a URL object)",
                got=type(url).__name__,
            )
        if not isinstance(name, str):
            raise PermitTypeError("name", name, "a str")
        if not name:
            raise PermitValueError("name", name, "must be a non-empty str")
        if not isinstance(prefix, str):
            raise PermitTypeError("prefix", prefix, "a str")
        if "timeout" in options:  # (redis-py would take it, and fail at the first connect)
            raise _not_redis_timeout(options["timeout"])
        _above_zero("redis_timeout", redis_timeout)
        if redis_timeout > _LONGEST_S:  # (a socket's timeout holds up to about 9.2e9 s)
            raise PermitValueError(
                "redis_timeout",
                redis_timeout,
                f"must be at most {_LONGEST_S:g} seconds (about 31 years)",
            )
        self.limits: dict[str, Limit] = check_limits(rate, burst, limits)
        for argument, text in [("name", name), ("prefix", prefix)] + [
            ("limits", key) for key in self.limits
        ]:
            _sendable(argument, text)
        self.url: str = masked(url)
        self.key: str = f"{prefix}{{{name}}}"
        if _hash_tag(self.key) == self.key:  # "{}": each key of the limit in its own slot
            argument, value = ("prefix", prefix) if "{" in prefix else ("name", name)
            raise PermitValueError(
                argument,
                value,
                "leaves the keys' hash tag empty ('{}'): they would fall in "
                "different Redis Cluster slots",
            )
        self.audit_key: str = f"{self.key}:audit"
        #: The limits changed by :meth:`set_limit`, shared by every process.
        self.live_key: str = f"{self.key}:limits"
        #: Each process's waiting demand per level (global priority).
        self.demand_key: str = f"{self.key}:demand"
        #: The line: each waiting process's turn.
        self.line_key: str = f"{self.key}:line"
        #: Global shares: where each level's grants start and finish.
        self.shares_key: str = f"{self.key}:shares"
        #: This limit's process, as the demand hash and the line name it.
        self.process: str = uuid.uuid4().hex
        if not isinstance(audit, bool):  # ("no" was true: an audit list, an hour long)
            raise PermitTypeError("audit", audit, "a bool")
        self.audit = audit
        #: The keys a call names unless it uses global priority, shares or the line.
        self._few_keys = _AUDITED_KEYS if self.audit else _FEW_KEYS
        #: The script's arguments for each limit: name, T (us) and burst.
        self._args: list[list[Any]] = []
        for key, lim in self.limits.items():
            if rate is not None:
                interval = _interval_us("rate", lim.rate)
                _check_refill("burst", burst, lim.burst, interval, key)
            else:  # named by its entry
                interval = _interval_us(f"limits[{key!r}]", lim.rate, lim)
                _check_refill(f"limits[{key!r}]", lim, lim.burst, interval, None)
            self._args.append([key, interval, lim.burst])
        #: One unit of every limit.
        self._unit = (1,) * len(self.limits)
        #: The take of one unit of every limit, by reserve, level, waiters,
        #: grace and lease (see ask_take).
        self._unit_takes: dict[tuple[int, int, int | None, int, int], Request] = {}
        if not isinstance(cluster, bool):
            raise PermitTypeError("cluster", cluster, "a bool")
        self._cluster = cluster
        self._url = url
        #: Seconds before a connect or a reply counts as failed.
        self._timeout = redis_timeout
        #: redis-py's options beyond the timeouts, as given.
        self._extra = options
        self._options = {
            "socket_timeout": redis_timeout,
            "socket_connect_timeout": redis_timeout,
            **options,
        }
        self._keys = [
            self.key,
            self.live_key,
            self.audit_key,
            self.demand_key,
            self.line_key,
            self.shares_key,
        ]
        #: redis-py's synchronous client and its scripts (the limit's, the
        #: probe), once made (see _sync).
        self._made: tuple[redis.Redis | redis.RedisCluster, Any, Any] | None = None
        self._making = threading.Lock()
        try:
            if cluster:
                # A cluster client connects as it is made (it asks a node for
                # the cluster's): made at its first call, in a worker
                # thread, not here, where a cluster down was no outage but
                # an error of open_limiter() (and a node hung held the event
                # loop); the URL is read now all the same.
                redis.connection.parse_url(url)  # type: ignore[no-untyped-call]
            else:
                self._sync()
        except ValueError as error:  # (redis-py's or urllib's, naming no argument)
            raise PermitValueError(
                "url",
                self.url,
                f"redis-py cannot read it: {error} (write redis://[:password@]host:6379/0, "
                "rediss:// for TLS, or unix:///path/to/redis.sock)",
            ) from None
        parts = urlsplit(url)
        database = parts.path.strip("/")
        if parts.scheme != "unix" and database and not (database.isascii() and database.isdigit()):
            # redis-py would use database 0 (its own client refused it, as
            # the limiter's task started, in an exception group)
            raise PermitValueError(
                "url",
                self.url,
                "its path, the database, must be a number (redis://host:6379/0)",
            )
        if cluster and parts.scheme == "unix":  # (redis-py's cluster client refused it)
            raise PermitValueError("url", self.url, "a Redis Cluster is reached by redis://")
        #: The asyncio client, once open_async: its script call and probe.
        self._aclient: Any = None
        self._arun: Callable[[Request], Awaitable[Any]] | None = None
        self._aprobe: Callable[[], Awaitable[Any]] | None = None
        #: The small client's submit, when it is the asyncio client.
        self._asubmit: Callable[[Request, _resp.Landed], bool] | None = None

    def _sync(self) -> tuple[redis.Redis | redis.RedisCluster, Any, Any]:
        """redis-py's synchronous client and its two scripts, made at the
        first call that needs them (once, whichever thread asks)."""
        made = self._made
        if made is None:
            with self._making:
                made = self._made
                if made is None:
                    client = self._new_client()
                    scripts = client.register_script(SCRIPT), client.register_script(PROBE)
                    made = self._made = (client, *scripts)
        return made

    def _run(self, keys: list[str], args: Any = (), *, probe: bool = False) -> Any:
        """Run the limit's script (or, with ``probe``, the probe) on
        ``keys`` with ``args`` through the synchronous client, blocking; a
        refusal raised as a take's."""
        try:
            _, script, probe_script = self._sync()
            return (probe_script if probe else script)(keys=keys, args=args)
        except redis.exceptions.ResponseError as error:
            raise self._refused(error) from None
        except redis.exceptions.RedisClusterException as error:
            if _no_node_answers(error):
                raise redis.exceptions.ConnectionError(str(error)) from error
            raise

    @property
    def _client(self) -> redis.Redis | redis.RedisCluster:
        """redis-py's synchronous client (made now if not yet)."""
        return self._sync()[0]

    def _new_client(self) -> redis.Redis | redis.RedisCluster:
        """redis-py's synchronous client of the URL, with the timeouts."""
        if self._cluster:
            # One try, within the timeout: the limiter's own outage handling
            # retries. (redis-py's retries, each rediscovering the nodes,
            # held a call to a hung node for seconds, and a worker thread
            # cannot be cut short.)
            retry = redis.retry.Retry(redis.backoff.NoBackoff(), 0)
            return redis.RedisCluster.from_url(self._url, retry=retry, **self._options)
        return redis.Redis.from_url(self._url, **self._options)

    @property
    def rate(self) -> Fraction:
        """Units per second of the first limit, as opened."""
        return next(iter(self.limits.values())).rate

    @property
    def burst(self) -> int:
        """Burst of the first limit, as opened."""
        return next(iter(self.limits.values())).burst

    def __repr__(self) -> str:
        named = list(self.limits) != ["units"]
        pacing = f"limits={self.limits!r}" if named else f"rate={self.rate!r}, burst={self.burst!r}"
        return f"RedisLimit(url={self.url!r}, key={self.key!r}, {pacing})"

    def units(self, argument: str, cost: object, *, within_burst: bool = True) -> tuple[int, ...]:
        """``cost`` (an ``int`` for every limit, or a mapping of limit names
        to units) as units per limit, each ``>= 0`` and, ``within_burst``
        (a cost asked for; not a settle's actual cost), within its burst."""
        if cost == 1 and type(cost) is int:
            return self._unit
        names = list(self.limits)
        if isinstance(cost, Mapping):
            for key in cost:
                if key not in self.limits:
                    raise no_limit(argument, cost, key, names)
            units = tuple(check_units(argument, key, cost.get(key, 0)) for key in names)
        elif isinstance(cost, bool) or not isinstance(cost, int):
            raise PermitTypeError(argument, cost, "an int, or a mapping of limit names to ints")
        else:
            units = (check_int(argument, cost, 0),) * len(names)
        for key, n in zip(names, units, strict=True):
            if within_burst and n > self.limits[key].burst:
                if isinstance(cost, Mapping):  # named by its entry, as in the core
                    raise PermitValueError(
                        f"{argument}[{key!r}]", n, over_burst(self.limits, key, entry=True)
                    )
                raise PermitValueError(argument, cost, over_burst(self.limits, key))
        return units

    # Each change is built as a request (the script's arguments), checked
    # where it is asked for; send() runs one in this thread, asend() on an
    # asyncio loop (the limiter's, under asyncio: no worker thread).

    def _request(
        self, op: str, units: Sequence[int], arg: float = 0, *extra: Any, keys: int | None = None
    ) -> Request:
        args: list[Any] = [op, 0, arg, int(self.audit), len(self._args)]
        for limit, x in zip(self._args, units, strict=True):
            args += limit
            args.append(x)
        args += extra
        encoded = [str(arg).encode() for arg in args]
        return Request(encoded, _resp.bulk(encoded), keys or self._few_keys)

    def _refused(self, error: redis.exceptions.ResponseError) -> BaseException:
        """An error reply to the synchronous client, as the limiter counts
        it (:func:`_counted`). After a ``-READONLY`` (a replica, after a
        failover), redis-py's connections are closed, so that the next call
        opens a new one, which reaches the new master behind a name or a
        proxy that follows the failover (as redis-py's Sentinel client does)."""
        if isinstance(error, redis.exceptions.ReadOnlyError) and isinstance(
            self._client, redis.Redis
        ):
            self._client.connection_pool.disconnect()
        return _counted(error, self.key)

    async def _arefused(self, error: redis.exceptions.ResponseError) -> BaseException:
        """:meth:`_refused` for an error reply to the asyncio client: after
        a ``-READONLY``, redis-py's asyncio connections are closed too (the
        small client closes its own)."""
        if isinstance(error, redis.exceptions.ReadOnlyError) and isinstance(
            self._aclient, redis.asyncio.Redis
        ):
            await self._aclient.connection_pool.disconnect()
        return _counted(error, self.key)

    def send(self, request: Request) -> GcraAnswer:
        """Run ``request`` (one round trip, blocking)."""
        keys = self._keys[: request.keys]
        return _answer(self._run(keys, request.args), len(self.limits))

    async def asend(self, request: Request) -> GcraAnswer:
        """Run ``request`` on the asyncio client (:meth:`open_async`)."""
        assert self._arun is not None
        try:
            reply = await self._arun(request)
        except redis.exceptions.ResponseError as error:
            raise await self._arefused(error) from None
        return _answer(reply, len(self.limits))

    @property
    def submits(self) -> bool:
        """Whether :meth:`submit` may send (the asyncio client is open, and
        it is this package's own)."""
        return self._asubmit is not None

    def submit(self, request: Request, landed: _Landed) -> bool:
        """Send ``request`` at once, awaiting nothing, on this package's own
        asyncio client when its connection is open; from the event loop,
        once the reply is read, call ``landed(answer, None)``, or
        ``landed(None, error)`` with what :meth:`asend` would have raised (a
        script Redis no longer holds is loaded and run again first, as
        :meth:`asend` does). ``landed`` must not raise. ``False``: nothing was sent (no
        connection open, or redis-py's client): use :meth:`asend`."""
        submit = self._asubmit
        if submit is None:
            return False
        limits = len(self.limits)

        def replied(reply: Any, error: BaseException | None) -> None:
            if error is None:
                if isinstance(reply, redis.exceptions.ResponseError):
                    # (the small client closes a READONLY connection)
                    error = _counted(reply, self.key)
                else:
                    try:
                        answer = _answer(reply, limits)
                    except (TypeError, ValueError) as wrong:  # not the script's list of numbers
                        error = wrong
                    else:
                        landed(answer, None)
                        return
            landed(None, error)

        return submit(request, replied)

    async def _replied(self, call: Awaitable[Any]) -> Any:
        """The reply to ``call`` on the asyncio client, or redis-py's
        ``TimeoutError`` after ``redis_timeout`` seconds without it (redis-py
        closes the connection of a call cut short; the next one opens a new
        one). The client has no socket timeout of its own: with one,
        redis-py writes every request in a task of its own, two more
        event-loop passes per request. ``asyncio.timeout`` where there is
        one (Python 3.11.3 and later, as redis-py itself): a sixth of the
        instructions of ``anyio.fail_after`` here."""
        try:
            if _asyncio_timeout is not None:
                async with _asyncio_timeout(self._timeout):
                    return await call
            with anyio.fail_after(self._timeout):
                return await call
        except TimeoutError:
            raise redis.exceptions.TimeoutError(
                f"Redis at {self.url} did not answer within {self._timeout:g} s"
            ) from None
        except redis.exceptions.RedisClusterException as error:
            if _no_node_answers(error):
                raise redis.exceptions.ConnectionError(str(error)) from error
            raise

    def take(
        self,
        reserve: int = 0,
        cost: Sequence[int] | None = None,
        *,
        level: int = 0,
        demand: Sequence[int] | None = None,
        demand_ttl: float = 2.0,
        book_ahead: float = 0.0,
        lease: int = 1,
        waiting: int | None = None,
        grace: float = 2.0,
        weights: Sequence[int] | None = None,
        shared: int = 0,
    ) -> GcraAnswer:
        """Ask for ``cost`` (units per limit; one of each by default) of every
        limit at once, leaving at least ``reserve`` more of each it takes.

        With ``waiting`` (this process's waiters, the one asking included),
        the process is in the line: refused, or allowed while more of its
        waiters must wait, it is told its turn (see SPEC.md) rather than
        when the buckets alone would allow the take; a turn ``grace``
        seconds past is dropped.

        Under global priority with ``weights`` (one per level), shares
        replace strict order across processes: the take is refused while
        another live process waits at a level whose next grant starts
        sooner, in units of the limit ``shared`` (its index) divided by the
        level's weight, than that of every level this process waits at.
        Weights with which a grant of that limit's burst would move a
        level's next start by more than 2**52 (its burst times the lcm of
        the weights over the smallest) are refused.

        Under global priority, ``demand`` is this process's waiters per
        level (the one asking, at ``level``, included): the take is refused
        while another live process has waiters at a more urgent level, and
        ``demand`` is published, less those granted, for ``demand_ttl`` seconds.

        With ``book_ahead`` (seconds), a take the buckets would allow within that
        long (no pause, nobody more urgent elsewhere) is *booked*: charged
        now, its permit the taker's at the time the answer gives. With a
        ``lease`` above 1, an allowed take takes up to that many permits of
        the same cost at once, as long as they are allowed now with half of
        each burst (and ``reserve``) left after each.

        Every argument is checked (the limiter's own requests are built
        from what it checked already): a bad one raises
        :class:`~permits.core.PermitValueError` or
        :class:`~permits.core.PermitTypeError` naming it, and nothing is
        sent."""
        level = check_int("level", level, 0)
        if demand is not None:
            demand = self._counts(demand)
            if level >= len(demand) or not demand[level]:
                raise PermitValueError(
                    "demand", demand, f"must count the waiter asking, at level {level}"
                )
        if weights is not None:
            weights = _ints("weights", weights, 1, "one per level")
            if demand is not None and len(weights) != len(demand):
                raise PermitValueError("weights", weights, f"needs one per level ({len(demand)})")
        if not check_int("shared", shared, 0) < len(self.limits):
            raise PermitValueError("shared", shared, f"must index a limit (< {len(self.limits)})")
        if weights is not None:
            burst = list(self.limits.values())[shared].burst
            _check_virtual_costs("weights", weights, weights, burst)
        _microseconds("demand_ttl", demand_ttl, above_zero=True)
        _microseconds("book_ahead", book_ahead)
        _microseconds("grace", grace)
        units = None if cost is None else self._per_limit("cost", cost, 0)
        # a cost of no unit refused as a push refuses it; one above a burst is
        # the script's to judge, by the burst Redis holds (it answers: never)
        if units is not None and not any(units):
            raise PermitValueError("cost", cost, NO_UNIT)
        return self.send(
            self.ask_take(
                check_int("reserve", reserve, 0),
                units,
                level=level,
                demand=demand,
                demand_ttl=demand_ttl,
                book_ahead=book_ahead,
                lease=check_int("lease", lease, 1),
                waiting=waiting,
                grace=grace,
                weights=weights,
                shared=shared,
            )
        )

    def _per_limit(self, argument: str, units: object, minimum: int | None) -> tuple[int, ...]:
        """``units`` as given to :meth:`take`, :meth:`give_back` or
        :meth:`charge`: one int per limit, each ``>= minimum`` (checked
        there; the limiter's own requests are built from units it checked
        already)."""
        checked = _ints(argument, units, minimum, "one per limit")
        if len(checked) != len(self.limits):
            raise PermitValueError(argument, units, f"needs one int per limit ({len(self.limits)})")
        return checked

    @staticmethod
    def _counts(demand: object) -> tuple[int, ...]:
        """``demand`` as given: waiters per level, each ``>= 0``."""
        counts = _ints("demand", demand, 0, "waiters per level")
        if not counts:
            raise PermitValueError("demand", demand, "needs one count per level")
        return counts

    def ask_take(
        self,
        reserve: int = 0,
        cost: Sequence[int] | None = None,
        *,
        level: int = 0,
        demand: Sequence[int] | None = None,
        demand_ttl: float = 2.0,
        book_ahead: float = 0.0,
        lease: int = 1,
        waiting: int | None = None,
        grace: float = 2.0,
        weights: Sequence[int] | None = None,
        shared: int = 0,
    ) -> Request:
        """:meth:`take`'s request."""
        units = cost or self._unit
        if waiting is not None:
            # all the script reads of it is whether more than the lease wait
            waiting = min(check_int("waiting", waiting, 1), lease + 1)
        # the request most made, one per reserve, waiters and lease: built once
        plain = demand is None and not book_ahead
        grace_us = -(-round(grace * SECOND) // 1000)  # (as _microseconds)
        key = (reserve, level, waiting, grace_us, lease)
        if plain and units == self._unit and key in self._unit_takes:
            return self._unit_takes[key]
        if plain and waiting is None and lease == 1:
            request = self._request("take", units, reserve)
        else:
            extra = ["", 0, 0, "0"] if demand is None else self._demand(level, demand, demand_ttl)
            line = ["", 0, 0, 0] if waiting is None else [self.process, level, waiting, grace_us]
            if demand is not None and weights is not None:
                line += [_virtual_costs(tuple(weights)), shared + 1]
            # its nearest nanosecond, then whole microseconds down (the float
            # product ``book_ahead * 1e6`` floored made 1.001 s 1,000,999 µs)
            book_us = round(book_ahead * SECOND) // 1000
            keys = self._few_keys if demand is None and waiting is None else _ALL_KEYS
            request = self._request(
                "take", units, reserve, *extra, book_us, lease, *line, keys=keys
            )
        if plain and units == self._unit:
            self._unit_takes[key] = request
        return request

    def publish_demand(self, demand: Sequence[int], demand_ttl: float = 2.0) -> GcraAnswer:
        """Publish this process's waiters per level (none: clear them), for
        ``demand_ttl`` seconds."""
        counts = self._counts(demand)
        _microseconds("demand_ttl", demand_ttl, above_zero=True)
        return self.send(self.ask_publish_demand(counts, demand_ttl))

    def ask_publish_demand(self, demand: Sequence[int], demand_ttl: float = 2.0) -> Request:
        """:meth:`publish_demand`'s request."""
        zero = (0,) * len(self.limits)
        return self._request(
            "demand", zero, 0, *self._demand(0, demand, demand_ttl), keys=_ALL_KEYS
        )

    def leave(self, *, demand: bool = False) -> GcraAnswer:
        """Take this process out of the line (nobody waits in it any more),
        and with ``demand`` clear its published demand too."""
        if not isinstance(demand, bool):
            raise PermitTypeError("demand", demand, "a bool")
        return self.send(self.ask_leave(demand=demand))

    def ask_leave(self, *, demand: bool = False) -> Request:
        """:meth:`leave`'s request."""
        extra = self._demand(0, (), 0.0) if demand else ["", 0, 0, "0"]
        zero = (0,) * len(self.limits)
        line = [self.process, 0, 0, 0]
        return self._request("demand", zero, 0, *extra, 0, 1, *line, keys=_ALL_KEYS)

    def _demand(self, level: int, demand: Sequence[int], ttl: float) -> list[Any]:
        counts = " ".join(str(int(c)) for c in demand) or "0"
        # its nanoseconds rounded up, as _microseconds (the float product
        # rounded up made 999999999.999999 s 0.05 us short)
        return [self.process, -(-round(ttl * SECOND) // 1000), level, counts]

    def give_back(self, cost: Sequence[int] | None = None) -> GcraAnswer:
        """Return ``cost`` (one of each by default), taken and not used."""
        units = self._unit if cost is None else self._per_limit("cost", cost, 0)
        return self.send(self.ask_charge(tuple(-n for n in units)))  # checked once, above

    def charge(self, units: Sequence[int]) -> GcraAnswer:
        """Charge ``units`` more of each limit (negative: give them back; a
        bucket never holds more than its burst): a settle."""
        return self.send(self.ask_charge(self._per_limit("units", units, None)))

    def ask_charge(
        self, units: Sequence[int], *, argument: str = "units", value: object = None
    ) -> Request:
        """:meth:`charge`'s request. A charge that would leave a limit in
        debt for more than :data:`_LONGEST_S` seconds at its rate as opened
        (the bound of every time the script keeps) is refused, as
        ``argument=value`` (``units``, by default)."""
        for (name, interval, _), n in zip(self._args, units, strict=True):
            if n * interval > _LONGEST_REFILL_US:
                raise PermitValueError(
                    argument,
                    units if value is None else value,
                    f"would leave limit {name!r} in debt for more than {_LONGEST_S:g} s "
                    "(about 31 years)",
                )
        return self._request("give", units)

    def pause(self, seconds: float) -> GcraAnswer:
        """Grant nothing for ``seconds`` from Redis's now, to any process (a
        later pause that ends sooner shortens nothing)."""
        return self.send(self.ask_pause(seconds))

    def ask_pause(self, seconds: float) -> Request:
        """:meth:`pause`'s request."""
        return self._request("pause", (0,) * len(self.limits), _microseconds("seconds", seconds))

    def adopt(self, remaining: int, reset_after: float, limit: str | None = None) -> GcraAnswer:
        """The upstream says ``remaining`` units of ``limit`` are left until
        ``reset_after`` seconds from now: from then on the shared bucket
        holds no more than that."""
        return self.send(self.ask_adopt(remaining, reset_after, limit))

    def ask_adopt(
        self, remaining: int, reset_after: float, limit: str | None = None, *, ago: float = 0.0
    ) -> Request:
        """:meth:`adopt`'s request; ``ago``: seconds since the upstream
        said so (its reset counts from then, and may be past)."""
        return self._word("adopt", remaining, reset_after, limit, ago)

    def quota(self, remaining: int, reset_after: float, limit: str | None = None) -> GcraAnswer:
        """The upstream's quota: at most ``remaining`` more units of
        ``limit`` until ``reset_after`` seconds from now, for every process,
        beside the quotas in force."""
        return self.send(self.ask_quota(remaining, reset_after, limit))

    def ask_quota(
        self, remaining: int, reset_after: float, limit: str | None = None, *, ago: float = 0.0
    ) -> Request:
        """:meth:`quota`'s request; ``ago`` as for :meth:`ask_adopt` (a
        quota whose end is past is dropped)."""
        return self._word("quota", remaining, reset_after, limit, ago)

    def _word(
        self, op: str, remaining: int, reset_after: float, limit: str | None, ago: float = 0.0
    ) -> Request:
        """The request of the upstream's word (``op``: adopt or quota) on one
        limit: ``remaining`` for it, no word (-1) on the others; said
        ``ago`` seconds before (the microseconds until the reset, less
        those, may be negative: the script reads them so)."""
        index = self._index("limit", limit)
        word = [-1] * len(self.limits)
        # more than Lua numbers hold exactly is as good as that many (the
        # script writes a quota's units with %d: 2**63 and more came out
        # as -2**63, a quota that refused every take until its end)
        word[index] = min(check_int("remaining", remaining, 0), _MOST_UNITS)
        reset = _microseconds("reset_after", reset_after)
        if ago:
            _microseconds("ago", ago)  # (checked)
            # the nanoseconds left from now (both checked: finite), rounded
            # up as a whole reset is
            left = round(reset_after * SECOND) - round(ago * SECOND)
            reset = -(-left // 1000)
        return self._request(op, word, reset)

    def set_limit(
        self,
        *,
        rate: int | float | Fraction | None = None,
        burst: int | None = None,
        limit: str | None = None,
    ) -> GcraAnswer:
        """Change ``limit`` for every process, from their next call on: the
        units in the bucket carry over; what is not given stays as it stands
        in Redis (changed earlier, or as opened). Kept in Redis, without
        expiry, until changed again (a Redis that loses its data loses it
        too: every process then goes back to the limits it was opened with)."""
        return self.send(self.ask_set_limit(rate=rate, burst=burst, limit=limit))

    def ask_set_limit(
        self,
        *,
        rate: int | float | Fraction | None = None,
        burst: int | None = None,
        limit: str | None = None,
    ) -> Request:
        """:meth:`set_limit`'s request."""
        index = self._index("limit", limit)
        check_change(rate, burst)
        interval = -1.0 if rate is None else _interval_us("rate", check_rate(rate))
        new_burst = -1 if burst is None else check_int("burst", burst, 1)
        if new_burst > _MOST_UNITS:  # (kept in Redis, read by every process)
            raise PermitValueError(
                "burst", burst, "must be at most 2**53, the units Redis's Lua numbers count exactly"
            )
        if burst is not None:  # (a burst alone: at the fastest rate, a microsecond a unit)
            at = interval if rate is not None else 10**6 / _MOST_RATE
            _check_refill("burst", burst, new_burst, at, list(self.limits)[index])
        zero = (0,) * len(self.limits)
        return self._request("rate", zero, index + 1, interval, new_burst)

    def _index(self, argument: str, limit: str | None) -> int:
        names = list(self.limits)
        if limit is not None and not isinstance(limit, str):  # (a list: unhashable)
            raise PermitTypeError(argument, limit, "a limit's name (str)")
        if limit is None:
            if len(names) > 1:
                raise PermitValueError(argument, limit, f"name one of the limits ({names})")
            return 0
        if limit not in self.limits:
            raise PermitValueError(argument, limit, f"is not one of the limits {names}")
        return names.index(limit)

    def probe(self) -> None:
        """Ask the node that holds the limit's keys whether it can serve a
        take (raises as a take would if not): :data:`PROBE`, on the
        limit's key, which a cluster client sends to that node. A read (the
        limit's ``PTTL``) succeeded on a server out of memory or turned
        into a replica, and the limiter went back to Redis only to fail its
        next take."""
        self._run([self.key], probe=True)

    async def aprobe(self) -> None:
        """:meth:`probe` on the asyncio client (:meth:`open_async`)."""
        assert self._aprobe is not None
        try:
            await self._aprobe()
        except redis.exceptions.ResponseError as error:
            raise await self._arefused(error) from None

    def open_async(self) -> None:
        """Open the asyncio client too (on the running asyncio loop), for
        :meth:`asend` and :meth:`aprobe`: this package's own small client
        (``_resp``, a fifth of redis-py's instructions a call) where it
        speaks the URL, else redis-py's (a cluster, TLS, any option)."""
        if not self._cluster and _resp.speaks(self._url, self._extra):
            own = _resp.AsyncRedis(self._url, timeout=self._timeout, shown=self.url)
            self._aclient = own
            scripts = {
                n: _resp.AsyncScript(own, SCRIPT, self._keys[:n])
                for n in (self._few_keys, _ALL_KEYS)
            }
            self._arun = lambda request: scripts[request.keys](len(request.args), request.wire)
            self._asubmit = lambda request, landed: scripts[request.keys].submit(
                len(request.args), request.wire, landed
            )
            probe = _resp.AsyncScript(own, PROBE, [self.key])
            self._aprobe = lambda: probe(0, b"")
            return
        client = redis.asyncio.RedisCluster if self._cluster else redis.asyncio.Redis
        options = {**self._options, "socket_timeout": None}  # see _replied
        aclient = client.from_url(self._url, **options)
        registered = aclient.register_script(SCRIPT)
        aprobe = aclient.register_script(PROBE)
        keys, probe_keys = self._keys, [self.key]
        self._aclient = aclient
        self._arun = lambda request: self._replied(
            registered(keys=keys[: request.keys], args=request.args)
        )
        self._aprobe = lambda: self._replied(aprobe(keys=probe_keys))

    async def aclose(self) -> None:
        """Close the asyncio client, if open."""
        aclient, self._aclient, self._arun, self._aprobe = self._aclient, None, None, None
        self._asubmit = None
        if aclient is not None:
            await aclient.aclose()

    def close(self) -> None:
        """Close the synchronous client, if made."""
        made = self._made
        if made is not None:
            made[0].close()


def _no_node_answers(error: redis.exceptions.RedisClusterException) -> bool:
    """Whether ``error`` says that no node of the cluster answers: an
    outage, raised on as a ``ConnectionError``. redis-py before 8.2 says so
    in words only (8.2 raises ``RedisClusterUnreachableError``, in
    :data:`_UNREACHABLE` as it is)."""
    return "cannot be connected" in str(error)


#: What counts as "Redis is unreachable" (a cluster without a master for
#: the limit's slot, or moving it, included; and one whose every node is
#: down, which redis-py's cluster client, its topology refresh finding no
#: node, raises as ``RedisClusterUnreachableError``, no ``ConnectionError``:
#: it closed the limiter for good), or answers that it cannot
#: serve the limit now: a replica, after a failover (``-READONLY``), out of
#: memory (``-OOM``; a script call refused so charges nothing), still
#: loading its data (``-LOADING``) or running a script past its time limit
#: (``-BUSY``) or refusing writes after a failed snapshot (``-MISCONF``)
#: or while too few replicas are in sync (``-NOREPLICAS``; see
#: :class:`_NotNow`), or refusing the password (``-NOAUTH``, ``-WRONGPASS``:
#: changed on the server), all ``ConnectionError``\ s.
_UNREACHABLE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.OutOfMemoryError,
    # a reply that is no RESP (a web server on the port, a proxy's word), as
    # the limiter's own client counts it (a ConnectionError, "malformed")
    redis.exceptions.InvalidResponse,
    # (where redis-py has it; before 8.2, the plain RedisClusterException it
    # raises instead is raised on as a ConnectionError: _no_node_answers)
    getattr(redis.exceptions, "RedisClusterUnreachableError", redis.exceptions.ClusterDownError),
    OSError,
)


_T = TypeVar("_T")


class _Fixed(Generic[_T]):
    """An option of a :class:`RedisLimiter`, read as an attribute (kept in
    ``_<name>``) and fixed once it is opened: one set later was taken
    unchecked, and broke the limiter at its next take (``lease = "2"``: a
    TypeError, and every caller's ``LimiterClosed``)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.own = f"_{name}"

    @overload
    def __get__(self, limiter: None, owner: type) -> _Fixed[_T]: ...
    @overload
    def __get__(self, limiter: object, owner: type) -> _T: ...
    def __get__(self, limiter: object, owner: type) -> _T | _Fixed[_T]:
        if limiter is None:
            return self
        value: _T = getattr(limiter, self.own)
        return value

    def __set__(self, limiter: object, value: _T) -> None:
        raise AttributeError(
            f"{self.name}: a RedisLimiter's options are fixed once it is opened: "
            f"open another with {self.name}=..."
        )


class RedisLimiter(_AnyioLimiter):
    """A limiter whose permits come from a :class:`RedisLimit`, shared with
    other processes; make one with :func:`open_limiter`. ``acquire``,
    ``permit``, ``statistics`` and cancellation behave as in every adapter;
    ``Permit.settle``, ``set_limit``, ``pause_for`` and ``adopt`` act on the
    shared limit (the driver sends each to Redis before its next request).

    Two tasks run it: the *driver*, which makes the round trips, and the
    *timer*, which expires waiters at their deadlines and, failing closed,
    fails them at their outage bound, whatever the driver is waiting for.
    Under asyncio, on the limiter's own client, a caller that finds nobody
    else waiting and the driver idle sends its take itself (the one the
    driver would send), and the reply is acted on as it is read: the caller
    wakes once, with its permit; whatever the answer leaves to do (a wait,
    a permit to give back because the caller left) goes to the driver,
    which sends nothing else while that take is in flight.
    """

    #: The timer task ticks, under asyncio too: it also wakes at the outage
    #: bound (_next_wake), which the loop's timer does not know.
    _loop_timed = False

    # Its options, as opened (read them; each is fixed: see _Fixed).
    #: The shared limit its permits come from.
    limit = _Fixed[RedisLimit]()
    #: Each level's reserve: the units a take at that level leaves in the bucket.
    reserve = _Fixed[tuple[int, ...]]()
    #: What callers get while Redis cannot be reached: ``"closed"`` or ``"local"``.
    on_unavailable = _Fixed[Literal["closed", "local"]]()
    #: The share of the limit the local fallback grants (``"local"``).
    share = _Fixed["float | None"]()
    #: Seconds without an answer after which Redis counts as unreachable.
    unavailable_after = _Fixed[float]()
    #: Whether a take waits while a more urgent level waits in any live
    #: process (each publishes its waiters per level with its takes).
    global_priority = _Fixed[bool]()
    #: Seconds a process's published demand lives without a refresh.
    demand_ttl = _Fixed[float]()
    #: Seconds ahead a refused take may book the next permit (0: never).
    book_ahead = _Fixed[float]()
    #: The most permits one request takes at once, for waiters of one
    #: level and cost (1: one per request).
    lease = _Fixed[int]()

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
        flow_weights: Mapping[Hashable, int] | Callable[[Hashable], int] | None = None,
        max_waiting_per_flow: int | None = None,
        flow_limit: str | None = None,
        refund_window: float = 1.0,
        settle_window: float = 0.0,
        global_priority: bool = False,
        demand_ttl: float = 2.0,
        book_ahead: float = 0.0,
        lease: int = 16,
    ) -> None:
        window = _finite_nanoseconds("refund_window", refund_window)
        self._refund_window_ns = window
        super().__init__(
            policy,
            None,
            1,
            limits=dict(limit.limits),
            max_waiting=max_waiting,
            default_level=default_level,
            flow_weights=flow_weights,
            max_waiting_per_flow=max_waiting_per_flow,
            flow_limit=flow_limit,
            settle_window=settle_window,
        )
        if 0 in (self._machine.max_waiting or ()):
            raise PermitValueError("max_waiting", max_waiting, _NEVER_AT_ONCE)
        if max_waiting_per_flow == 0:  # (checked as an int by the machine)
            raise PermitValueError("max_waiting_per_flow", max_waiting_per_flow, _NEVER_AT_ONCE)
        #: Permits are settled on the shared key, not in the machine.
        self._settle_window_ns = round(settle_window * SECOND)
        self._settle_later = False
        levels = self._machine.levels
        smallest = min(lim.burst for lim in limit.limits.values())
        if reserve is None:
            reserve = (0,) * levels
        if isinstance(reserve, (str, bytes)) or not isinstance(reserve, Sequence):
            raise PermitTypeError("reserve", reserve, "a sequence of ints, one per level")
        if len(reserve) != levels:
            raise PermitValueError("reserve", reserve, f"needs one entry per level ({levels})")
        reserve = [check_int(f"reserve[{level}]", r) for level, r in enumerate(reserve)]
        for level, r in enumerate(reserve):  # a bad one named by its entry: reserve[1]=3
            if not 0 <= r < smallest:
                raise PermitValueError(
                    f"reserve[{level}]",
                    r,
                    f"must be from 0 to {smallest - 1}, below the smallest burst ({smallest}): "
                    "units the level's requests must leave",
                )
        if on_unavailable not in ("closed", "local"):
            raise PermitValueError("on_unavailable", on_unavailable, "must be 'closed' or 'local'")
        if on_unavailable == "local":
            fraction = "this process's fraction of the rate, in (0, 1], for 'local'"
            if share is None:
                raise PermitValueError("share", share, f"must be given: {fraction}")
            if isinstance(share, bool) or not isinstance(share, (int, float)):
                raise PermitTypeError("share", share, f"a number: {fraction}")
            if not 0 < share <= 1:
                raise PermitValueError("share", share, f"must be {fraction}")
        if on_unavailable == "closed" and share is not None:  # read only by the local fallback
            raise PermitValueError(
                "share", share, "is read only with on_unavailable='local': pass that, or no share"
            )
        after_ns = _above_zero("unavailable_after", unavailable_after)
        if not isinstance(global_priority, bool):
            raise PermitTypeError("global_priority", global_priority, "a bool")
        _microseconds("demand_ttl", demand_ttl, above_zero=True)
        self._global_priority = global_priority
        self._demand_ttl = float(demand_ttl)
        # Under global priority, the policy says how the processes deal the
        # units among levels (Shares: by its weights, the script's rule); one
        # that does not say keeps strict order across processes.
        self._weights: tuple[int, ...] | None = None
        self._shared = 0
        dealt = across_processes(policy, tuple(limit.limits)) if global_priority else None
        if dealt is not None:
            burst = list(limit.limits.values())[dealt[1]].burst
            _check_virtual_costs("policy", policy, dealt[0], burst)
            self._weights, self._shared = dealt
        #: Whether this process's demand, as last published, has waiters.
        self._published = False
        #: Whether this process holds a turn in the line, or was refused, as
        #: last told: its next take asks for a place in the line.
        self._in_line = False
        #: Under global shares, the level of this process owed the next
        #: permit, as the script last said: the level to ask for next.
        self._ask_next: int | None = None
        book = _nanoseconds("book_ahead", book_ahead)
        if book is None:
            raise PermitValueError("book_ahead", book_ahead, "must be finite seconds")
        if global_priority and book_ahead > demand_ttl / 2:
            raise PermitValueError(
                "book_ahead",
                book_ahead,
                f"must be at most demand_ttl / 2 ({demand_ttl / 2:g} s) under global priority, "
                "so that a booked permit's demand is still published when it comes: "
                "book less, or raise demand_ttl",
            )
        self._book_ahead = float(book_ahead)
        self._lease = check_int("lease", lease, 1)
        #: The permit booked: when it is this process's (s), its units, the
        #: level it was asked for, and the level it is for (global shares).
        self._booked: tuple[float, tuple[int, ...], int, int | None] | None = None
        self._retry_level: int | None = None
        #: Whether the driver sleeps with nothing to do (nobody waits, nothing
        #: booked, or a lone caller's take in flight) and nobody woke it: a
        #: caller that comes alone may send its own take.
        self._idle = False
        #: A lone caller's take in flight (nothing else is sent meanwhile).
        self._flight: _Take | None = None
        #: What the answer to a lone caller's take left for the driver to do.
        self._then: Callable[[], Awaitable[None]] | None = None
        self._limit = limit
        self._reserve = tuple(reserve)
        self._on_unavailable = on_unavailable
        self._share = share
        self._unavailable_after = float(unavailable_after)
        self._after_ns = after_ns
        #: Seconds between attempts to reach Redis while it is unreachable.
        self._retry = min(0.1, self._unavailable_after / 4)
        #: When (ns) the oldest request Redis has not answered was sent
        #: (while requests fail, the first of them); None once one is answered.
        self._unanswered_since: int | None = None
        #: When (ns) the timer next looks for waiters past their outage
        #: bound (``None``: no bound is pending).
        self._fail_ns: int | None = None
        self._down = False
        self._down_error: BaseException | None = None
        #: The fallback's pacer while the local limit serves ("local" only).
        self._local: Machine | None = None
        self._retry_reserve: int | None = None
        #: The units asked by the take the driver waits to ask again for
        #: (``None``: not waiting to ask again, or waiting for a booking).
        self._retry_units: tuple[int, ...] | None = None
        #: Set to wake the driver while it sleeps (None while it does not).
        self._driver_wake: Event | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        #: The scopes shielding the timer and the probe (see _shielded).
        self._shields: set[anyio.CancelScope] = set()
        #: Units per limit asked by each waiting id.
        self._asks: dict[int, tuple[int, ...]] = {}
        #: The limits (µs a unit, burst) as opened, and as this process last
        #: heard the script use them (see _heard).
        self._opened_limits = tuple((float(T), int(b)) for _, T, b in limit._args)
        self._heard_limits = self._opened_limits
        #: The exact rate of each interval this process was given (opened,
        #: or by its own set_limit).
        self._rates = {
            T: known.rate
            for (T, _), known in zip(self._opened_limits, limit.limits.values(), strict=True)
        }
        #: This process's set_limit requests not yet answered: until they
        #: are, an answer to a request sent before them does not set its
        #: limits back.
        self._changing = 0
        #: The end (ns) of the pause last sent (see _pause_left), and of
        #: this process's pauses Redis answered: a take it allows before
        #: then finds the pause lost (a restart), and the pause is sent again.
        self._pause_asked = 0
        self._pause_in_redis = 0
        #: ... by each id granted whose caller has not proceeded yet.
        self._granted: dict[int, tuple[int, ...]] = {}
        #: The ``max_wait`` of each waiting id that gave one, in ns and as
        #: given: Redis's answer to a take for it may say it waits longer.
        self._max_waits: dict[int, tuple[int, float]] = {}
        #: ... by each caller that proceeded within the settle window, with
        #: when, its level, and whether Redis charged it (not the fallback).
        self._settleable: dict[int, tuple[tuple[int, ...], int, int, bool]] = {}
        #: Ids granted by the local fallback while Redis was unreachable:
        #: Redis never charged them, so nothing of theirs goes back to it.
        self._served_locally: set[int] = set()
        #: Whether the decisions being dispatched are the local fallback's.
        self._serving_locally = False
        #: Changes to the shared limit (settles, pauses, the upstream's word,
        #: new limits, permits given back) not yet sent, oldest first, each
        #: with the permits it gives back and whether it gives units back: a
        #: give whose answer is lost is not sent again (it may have been
        #: applied, and twice would give more than was taken; once lost, the
        #: limit loses those units, never exceeds). The others are safe to
        #: send again: a pause, a new limit or the upstream's word applied
        #: twice is applied once, and a charge twice only grants less.
        #: A change given while Redis does not answer may be sent long
        #: after: the time of a pause or of the upstream's word counts from
        #: when it was given (see _Change).
        self._pending: list[tuple[_Change, int, bool]] = []
        #: Whether the round trips go through the asyncio client (under
        #: asyncio), or redis-py's synchronous one in worker threads.
        self._async = False
        #: Whether a lone caller may send its own take (asyncio, the small
        #: client: see _alone).
        self._lone = False
        #: Round trips to Redis made so far (a diagnostic).
        self.round_trips: int = 0
        #: Permits taken from Redis and given back unused (a diagnostic).
        self.given_back: int = 0
        #: Of the round trips, takes a lone caller sent itself (a diagnostic).
        self.lone_takes: int = 0
        #: Times the local fallback took over from Redis (a diagnostic).
        self.fallbacks: int = 0

    def _new_machine(
        self, policy: _Policy, rate: int | float | Fraction | None, burst: int, **options: Any
    ) -> Machine:
        """A supplied machine: the permits come from Redis, charged there as
        they are taken; a permit whose caller was cancelled before it
        proceeded goes to the next waiter within ``refund_window``, if that
        waiter asks for the same units (else, and after it, back to Redis:
        see _withdraw). Its settle window is that refund window: what a
        supplied machine settles, Redis does (the machine is told, with
        ``settled``), so its window bounds only the hand-over."""
        options["settle_window_ns"] = self._refund_window_ns
        return Machine(policy, rate, burst, supplied=True, **options)

    def _heard(self, request: Request, answer: GcraAnswer) -> None:
        """Redis answered ``request``: the limits its script used (those it
        holds changed by set_limit, any process's; else as opened, as after
        a restart that lost them) become this process's own, for its cost
        checks at acquire, its estimates and its local fallback's share. A
        waiter whose cost is above a burst lowered so fails at once. Not
        while a set_limit of this process is unanswered (an answer to a
        request sent before it would set the change back for a moment)."""
        op = request.args[0]
        if op == b"rate":
            self._changing -= 1
        elif op == b"pause":
            self._pause_in_redis = max(self._pause_in_redis, self._pause_asked)
        elif op == b"take" and answer.allowed and self._closed is None:
            end = self._pause_in_redis
            if self._now() < end:
                # Redis lost this process's pause (a restart): it pauses every
                # process again, for the time left (once: the next pause
                # answered says it holds again)
                self._pause_in_redis = 0
                self._send(partial(self._pause_left, end))
        heard = answer.limits or self._opened_limits
        if self._changing or heard == self._heard_limits or self._closed is not None:
            return
        self._heard_limits = heard
        for name, (interval, burst) in zip(list(self.limits), heard, strict=True):
            known = self.limits[name]
            rate = None
            if _interval_us("rate", known.rate) != interval:
                rate = self._rates.get(interval)
                if rate is None:  # another process's: the rate of that interval
                    rate = (Fraction(10**6) / Fraction(interval)).limit_denominator(10**9)
            new_burst = None if burst == known.burst else burst
            if rate is None and new_burst is None:
                continue
            for waiter in self._machine.waiting_above(burst, limit=name):
                self._never(waiter.id, waiter.cost)
            self._apply(partial(self._machine.set_limit, rate=rate, burst=new_burst, limit=name))
            self._local_follows(name)

    def __repr__(self) -> str:
        # as every limiter's (BaseLimiter's), with the shared limit's own
        kind = type(self)
        state = "closed" if self._closed is not None else f"waiting={len(self._waiters)}"
        return (
            f"<{kind.__module__}.{kind.__qualname__} policy={self._machine.policy!r} "
            f"limit={self._limit!r} reserve={self._reserve!r} "
            f"on_unavailable={self._on_unavailable!r} {state}>"
        )

    @property
    def backend_down(self) -> bool:
        """Whether the last round trip to Redis failed."""
        return self._down

    def try_acquire(
        self, level: int | None = None, *, cost: int | Mapping[str, int] = 1, flow: Hashable = None
    ) -> bool:
        """Not offered: whether a shared permit is free takes a round trip.
        Use ``acquire(level, timeout=...)``, a short one."""
        raise NotImplementedError(
            "try_acquire() needs a round trip to Redis: use `await limiter.acquire(level, "
            "timeout=0.05)`, which raises AcquireTimeout if no permit came within it"
        )

    def record(self, max_calls: int = 1_000_000) -> Recording:
        """As :meth:`permits.adapters.BaseLimiter.record`: each call's cost
        as asked, of every limit of the shared limit."""
        recording = super().record(max_calls)
        recording.limits = tuple(self._limit.limits)
        return recording

    # -- costs: what each waiter asks of every limit -------------------------

    def _request(
        self,
        level: int | None,
        cost: int | Mapping[str, int],
        flow: Hashable,
        timeout: float | None,
        max_wait: float | None,
    ) -> tuple[int, int, Decision | None]:
        """Push with the cost's units of every limit (the machine counts them
        per limit, and the policy and flows the units of the limit they
        share); remember them. The machine checks the units against the
        bursts as they stand (this process's set_limit included)."""
        if isinstance(cost, int) and not isinstance(cost, bool) and cost < 0:
            raise PermitValueError("cost", cost, NO_UNIT)  # as 0 is: one rule
        units = self._limit.units("cost", cost, within_burst=False)
        if not any(units):
            raise PermitValueError("cost", cost, NO_UNIT)
        if timeout == 0 and not isinstance(timeout, bool):  # (refused as a bool, as elsewhere)
            raise PermitValueError("timeout", timeout, _NEVER_AT_ONCE)
        id, level, decision = super()._request(level, cost, flow, timeout, max_wait)
        if decision is None:
            self._asks[id] = units
            if max_wait is not None:
                bound = _nanoseconds("max_wait", max_wait)  # checked by the push
                if bound is not None:  # (None: infinite, never too long)
                    self._max_waits[id] = (bound, float(max_wait))
            if self._lone:
                try:
                    self._alone()
                except Exception as error:  # a broken policy, asked for the next level
                    # as the driver's would: the limiter breaks, and the
                    # caller, not yet a waiter, leaves the machine too
                    with suppress(Exception):
                        self._machine.cancel(id)
                    self._fault(error)
        return id, level, decision

    def _dispatch(self, decisions: list[Decision]) -> None:
        max_waits = self._max_waits
        for decision in decisions:
            if max_waits:
                max_waits.pop(decision.id, None)  # type: ignore[call-overload]
            units = self._asks.pop(decision.id, None)  # type: ignore[call-overload]
            if units is not None and decision.state is State.GRANTED:
                self._granted[decision.id] = units  # type: ignore[index]
                if self._serving_locally:
                    self._served_locally.add(decision.id)  # type: ignore[arg-type]
        super()._dispatch(decisions)

    def _proceed(self, id: int, decision: Decision, now: int) -> None:
        super()._proceed(id, decision, now)
        units = self._granted.pop(id, None)
        # One the local fallback served: Redis never charged it, so a settle
        # of it has nothing to change there.
        charged = id not in self._served_locally
        self._served_locally.discard(id)
        if units is not None and self._settle_window_ns:
            self._settleable[id] = (units, now, decision.level, charged)
            self._forget_settles(now)

    def _forget_settles(self, now: int) -> None:
        oldest = now - self._settle_window_ns
        settleable = self._settleable
        while settleable:
            id = next(iter(settleable))
            if settleable[id][1] >= oldest:
                break
            del settleable[id]

    def _withdraw(self, id: int, waiter: Any) -> None:
        """A caller granted and cancelled before it proceeded hands its
        permit to the next waiter, within ``refund_window`` of its grant, if
        that one asks for the same units (and this process is not paused);
        otherwise the units go back to Redis."""
        self._asks.pop(id, None)
        self._max_waits.pop(id, None)
        units = self._granted.pop(id, None)
        local = id in self._served_locally
        self._served_locally.discard(id)
        if local:
            # A permit of the local fallback goes to the next waiter (or back
            # to it), never to Redis; that waiter's is the fallback's too, so
            # that neither its settle nor its give-back reaches Redis.
            self._serving_locally = True
            try:
                super()._withdraw(id, waiter)
            finally:
                self._serving_locally = False
            return
        if units is None or waiter.error is not None:
            super()._withdraw(id, waiter)
            return
        self._gave_up(id, waiter)
        self._dispatch(self._machine.tick(self._now()))  # next_level() needs the time
        if self._takes_over(units, self._reserve[waiter.decision.level]) and self._refund(id):
            return
        self._pending.append((self._limit.ask_charge(tuple(-n for n in units)), 1, True))
        names = list(self.limits)
        self._machine.refunded(waiter.decision.level, dict(zip(names, units, strict=True)))
        if self._closed is None:
            self._wake_driver()
        # Closed (a caller outside the limiter's block, granted as it closed,
        # left after): sent with the changes the closing sends (_opened), if
        # it has not sent them yet; only after that are the units lost (the
        # limit then grants less, never more). (The driver is not woken: as
        # it closes, it waits only for a lone caller's take in flight.)

    def _never(self, id: Hashable, units: tuple[int, ...]) -> None:
        """``id`` asks ``units``, above a limit's burst now: it leaves the
        line, told it could never be granted."""
        if self._machine.cancel(id):
            self._fail(id, PermitValueError("cost", units, _ABOVE_BURST))

    def _fail(self, id: object, error: BaseException) -> None:
        self._asks.pop(id, None)  # type: ignore[call-overload]
        self._max_waits.pop(id, None)  # type: ignore[call-overload]
        waiter = self._waiters.pop(id, None)  # type: ignore[call-overload]
        if waiter is not None:
            self._gave_up(id, waiter)  # type: ignore[arg-type]  # in a replay, it gives up now
            waiter.error = error
            if waiter.event is not None:
                waiter.event.set()

    # -- changes to the shared limit ------------------------------------------

    def _settle(self, id: int, actual: int | Mapping[str, int]) -> None:
        """Charge, or give back, the difference on the shared key."""
        if self._closed is not None:
            raise self._refused()
        settled = check_actual(actual, list(self.limits))  # debt is allowed: no burst
        self._forget_settles(self._now())
        entry = self._settleable.get(id)
        if entry is None:
            raise NotRefundable(id)
        asked, _, level, charged = entry
        units = settled_units(asked, settled)
        delta = tuple(a - b for a, b in zip(units, asked, strict=True))
        # checked before anything changes: a debt Redis cannot hold is refused
        charge = self._limit.ask_charge(delta, argument="actual", value=actual)
        del self._settleable[id]
        names = list(self.limits)
        self._machine.settled(
            level, dict(zip(names, asked, strict=True)), dict(zip(names, units, strict=True))
        )
        if charged and any(delta):
            self._send(charge, gives=any(n < 0 for n in delta))

    def set_limit(
        self,
        *,
        rate: int | float | Fraction | None = None,
        burst: int | None = None,
        limit: str | None = None,
    ) -> None:
        """Change a limit for every process sharing it, from their next
        request on; the units in the bucket carry over. :attr:`limits` (and
        ``min_wait``'s estimate) follow this process's changes at once, and
        the limits Redis holds (another process's change, or those opened
        after a Redis that lost the change) at the next reply. While the
        local fallback serves, it serves its ``share`` of the first limit
        as changed, at once. A change that
        would leave a full bucket taking more than 1e9 s (about 31 years) to
        refill, at the rate and burst this process knows, is refused
        (:class:`PermitValueError`); one that would at those Redis holds
        closes the limiter, the error naming the limit."""
        request = self._limit.ask_set_limit(rate=rate, burst=burst, limit=limit)
        name = list(self.limits)[self._limit._index("limit", limit)]
        known = self.limits[name]
        new_rate = known.rate if rate is None else check_rate(rate)
        _check_refill(
            "burst" if burst is not None else "rate",
            burst if burst is not None else rate,
            known.burst if burst is None else burst,
            _interval_us("rate", new_rate),
            name,
        )
        if (
            burst is not None
            and self._weights is not None
            and name == list(self.limits)[self._shared]
        ):
            _check_virtual_costs("burst", burst, self._weights, burst)
        if burst is not None and burst <= max(self._reserve):  # as opening refuses it
            raise PermitValueError(
                "burst",
                burst,
                f"must be above every level's reserve (the largest, {max(self._reserve)}): "
                "a level whose reserve is the whole burst is served only from a full bucket",
            )
        super().set_limit(rate=rate, burst=burst, limit=limit)
        self._local_follows(name)
        self._send(request)
        self._rates.setdefault(_interval_us("rate", new_rate), new_rate)
        self._changing += 1

    def _local_follows(self, name: str) -> None:
        """``name`` changed: the local fallback, if it serves, serves its
        share of the first limit as it stands now (the driver, woken by the
        change, sees it as it runs next)."""
        local = self._local
        if local is not None and name == next(iter(self.limits)):
            local_rate, local_burst = self._local_limit()
            local.set_limit(self._now(), rate=local_rate, burst=local_burst)

    def pause_for(self, seconds: float) -> None:
        """Grant nothing for ``seconds``, in any process (a 429 with
        ``Retry-After``); the pause is kept in Redis, and every process's
        next request reads it. (:meth:`pause_left` knows this process's
        pauses, not the others'; so do ``statistics().pauses`` and
        ``paused_ns``.) At most 1e9 s (about 31 years). A permit this process
        booked ahead is handed over when the pause ends."""
        length = _nanoseconds("seconds", seconds)  # (a type, NaN or sign: as every adapter's)
        # checked: a pause Redis cannot hold is kept nowhere (past 1e9 s, or
        # infinite: refused naming that bound, not a float's)
        self._limit.ask_pause(seconds)
        assert length is not None
        now = self._now()
        self._send(partial(self._pause_left, now + length))
        local = self._local
        if local is not None:
            local.pause_until(now + length, now)
        self._machine.paused(now + length, now)  # counted as its own (P46)
        end = self._pause_end = max(self._pause_end, now + length)
        booked = self._booked
        if booked is not None and booked[0] < end / 1e9:
            # charged before the pause, handed over when it ends
            self._booked = (end / 1e9, booked[1], booked[2], booked[3])

    def adopt(self, remaining: int, reset_after: float, *, limit: str | None = None) -> None:
        """The upstream says ``remaining`` units of ``limit`` are left until
        ``reset_after`` seconds from now (at most 1e9; more than 2**53
        units counts as 2**53): the shared bucket holds no more. While the local
        fallback serves, it holds no more than its ``share`` of them (of
        the first limit) either."""
        self._send_word("adopt", remaining, reset_after, limit)

    def quota(self, remaining: int, reset_after: float, *, limit: str | None = None) -> None:
        """The upstream's quota: at most ``remaining`` more units of
        ``limit`` until ``reset_after`` seconds from now (at most 1e9; more
        than 2**53 units counts as 2**53), for every process; the count is
        kept in Redis beside the bucket. While the local fallback serves, it
        grants at most its ``share`` of them (of the first limit) until
        then."""
        self._send_word("quota", remaining, reset_after, limit)

    def _pause_left(self, end: int, now: int) -> Request | None:
        """The request of a pause until ``end`` (ns), sent at ``now``: for
        the time left then (``None``: it is over)."""
        if end <= now:
            return None
        self._pause_asked = end
        return self._limit.ask_pause((end - now) / SECOND)

    def _send_word(
        self, op: Literal["adopt", "quota"], remaining: int, reset_after: float, limit: str | None
    ) -> None:
        """Have the driver send the upstream's word (``op``), its reset
        counted from now however late it is sent; a quota whose end is past
        by then is not sent."""
        quota = op == "quota"
        ask = self._limit.ask_quota if quota else self._limit.ask_adopt
        first = ask(remaining, reset_after, limit)  # checked: a bad word is kept nowhere
        given = self._now()
        local = self._local
        if local is not None and self._limit._index("limit", limit) == 0:
            # The fallback serves its share of the first limit: its share of
            # what is left, as it serves its share of the rate (the shares
            # of every process add up to at most what the upstream said).
            assert self._share is not None
            until = given + round(reset_after * SECOND)
            # (no more than Redis counts: a float holds its share)
            left = math.floor(min(remaining, _MOST_UNITS) * self._share)
            getattr(local, op)(left, until, given)

        def word(now: int) -> Request | None:
            if now == given:
                return first
            if quota and now - given >= reset_after * SECOND:
                return None
            return ask(remaining, reset_after, limit, ago=(now - given) / SECOND)

        self._send(word)

    def _send(self, change: _Change, *, gives: bool = False) -> None:
        """Have the driver send ``change`` to Redis before its next request
        (``gives``: it gives units back, see ``_pending``)."""
        if self._closed is not None:
            raise self._refused()
        self._pending.append((change, 0, gives))
        self._wake_driver()

    def _send_pending(self, now: int) -> None:
        """Closed: send the changes the driver had no time to send (a pause,
        a settle, new limits given just before), in order, in this thread,
        with the synchronous client, as at ``now`` (ns); stop at the first
        Redis does not answer. One it refuses (a limit it judges would take
        ages to refill) is raised once the others are sent. A give the
        driver sent is no longer here: never twice."""
        pending = self._pending
        refused: Exception | None = None
        while pending:
            change, given_back, _ = pending.pop(0)
            request = change if isinstance(change, Request) else change(now)
            try:
                if request is not None:
                    self._limit.send(request)
            except _UNREACHABLE:
                raise
            except Exception as error:
                refused = refused or error
                continue
            self.given_back += given_back
        if refused is not None:
            raise refused

    def _wake_driver(self) -> None:
        wake = self._driver_wake
        if wake is not None and self._local is None:
            self._idle = False  # (it has something to do)
            wake.set()

    # -- waking the driver and the timer ---------------------------------------

    def _next_wake(self) -> int | None:
        """The machine's next tick, or the next outage bound if sooner."""
        when = self._machine.next_tick()
        fail = self._fail_ns
        return fail if fail is not None and (when is None or fail < when) else when

    def _reschedule(self) -> None:
        """A waiter came or went: re-arm the timer; wake the driver if that
        changes its plan."""
        if (
            self._unanswered_since is not None
            and self._fail_ns is None
            and self._on_unavailable == "closed"
            and len(self._machine)
        ):
            # Waiters came into an outage after the timer failed the others:
            # the first of them fails unavailable_after from now, at the earliest.
            self._fail_ns = self._last + self._after_ns
        super()._reschedule()
        wake = self._driver_wake
        if wake is None:
            return
        try:
            should = self._should_wake()
        except Exception as error:  # a broken policy, asked for the next level
            self._break(error)  # as the driver's would: every waiter learns of it
            should = True  # (and the driver, which ends)
        if should:
            self._idle = False  # (it has something to do)
            wake.set()

    def _should_wake(self) -> bool:
        """Changes to send, or what a lone caller's answer left to do; or
        idle, and a waiter came; or waiting to retry for a reserve, and the
        best waiter now has a smaller one, or asks fewer units of a limit
        than the take refused (a cheaper waiter came first, or the head
        left: it may find a permit sooner); or in the line, and nobody
        waits any more. Never while a lone caller's take is in flight."""
        if self._flight is not None:
            return False  # its reply wakes the driver
        if self._pending or self._then is not None:
            return True
        level = self._machine.next_level(self._ask_next)
        if level != self._retry_level and (
            self._published or (self._global_priority and self._booked is not None)
        ):
            # the demand published is not what waits now (or, waiting for a
            # permit booked, another level is next: its demand goes out)
            return True
        if level is None:
            # nobody waits now: a place held in the line is left (else the
            # others would count it ahead of them until its turn is past)
            return self._in_line
        if self._retry_reserve is None or self._reserve[level] < self._retry_reserve:
            return True
        retry = self._retry_units
        asks = self._asks.get(self._machine.queues.head(level).id)  # type: ignore[call-overload]
        return retry is not None and asks is not None and any(map(operator.lt, asks, retry))

    def _on_timer(self) -> None:
        """The timer fired: expire, fail what is past its outage bound, re-arm."""
        if self._closed is not None:
            return
        try:
            now = self._now()
            self._dispatch(self._machine.tick(now))
            self._fail_unavailable(now)
        except Exception as error:
            self._break(error)
            return
        self._reschedule()

    def _fail_unavailable(self, now: int) -> None:
        """Failing closed: every waiter that has waited ``unavailable_after``
        since the later of its push and the oldest unanswered request gets
        :class:`BackendUnavailable`."""
        since = self._unanswered_since
        if since is None or self._on_unavailable != "closed":
            self._fail_ns = None
            return
        if now < since + self._after_ns:
            self._fail_ns = since + self._after_ns
            return
        first: int | None = None
        for waiter in self._machine.waiting():
            start = max(waiter.pushed_at, since)
            if now - start >= self._after_ns:
                self._machine.cancel(waiter.id)
                error = BackendUnavailable(
                    self._limit.url, self._unavailable_after, self._down_error
                )
                self._fail(waiter.id, error)
            elif first is None or start + self._after_ns < first:
                first = start + self._after_ns
        self._fail_ns = first

    async def _sleep(self, until: float, *, idle: bool = False) -> None:
        """Sleep until ``until`` (seconds), a booked permit's time, or a wake-up
        (an event set: cheaper than cancelling a scope). ``idle``: with
        nothing to do meanwhile (nobody waits, nothing is booked, or a lone
        caller's take is in flight): a caller that comes alone may send its
        own take. Closed: at once (the driver finishes what it was doing)."""
        if self._local is None and not self._down:
            # Yield once first: the callers a hand-over just woke run before
            # the driver resumes, so that an acquire they make then finds it
            # awake, without a wake-up (and its event-loop pass).
            await self._checkpoint()
            if self._should_wake():
                return
        if self._booked is not None:
            until = min(until, self._booked[0])
        if self._closed is not None:  # (once it sleeps, the closing wakes it: _break)
            return
        wake = self._driver_wake = self._new_event()
        self._idle = idle
        try:
            if until == math.inf:
                await wake.wait()
            else:
                with anyio.CancelScope(deadline=until):
                    await wake.wait()
        finally:
            self._driver_wake = None
            self._idle = False

    # -- the driver ----------------------------------------------------------

    async def _run(self, *, task_status: Any) -> None:
        # Opened in a scope cancelled already: end before starting, so that
        # the opening is cancelled (the driver below is shielded, and ends
        # only once the limiter closes, which a cancelled opening never does).
        await anyio.lowlevel.checkpoint_if_cancelled()
        self._bind_backend()
        if sniffio.current_async_library() == "asyncio":
            self._limit.open_async()
            self._async = True
            self._lone = self._limit.submits
        self._running = True
        task_status.started()
        try:
            async with anyio.create_task_group() as tasks:
                self._tasks = tasks
                tasks.start_soon(self._shielded, self._timer)
                # Not cancelled by the closing: it ends by itself once closed,
                # after the round trip under way (each ends within the reply
                # timeout), whose answer is acted on, what it took given back.
                try:
                    with anyio.CancelScope(shield=True):
                        await self._drive()
                finally:
                    for scope in list(self._shields):
                        scope.cancel()
                    tasks.cancel_scope.cancel()
        finally:
            self._running = False

    async def _shielded(self, task: Callable[[], Awaitable[None]]) -> None:
        """``task`` (the timer, the probe), shielded from every cancel but
        the limiter's own as it closes (see _run), as the driver is: a
        cancel of a scope around the ``async with`` would end it while the
        limiter is still open to a body shielded from that cancel (the
        waiters' timeouts would end only at the driver's next tick; the
        local fallback would never go back to Redis). A task that starts
        once closed ends at once (each loops while the limiter is open)."""
        scope = anyio.CancelScope(shield=True)
        self._shields.add(scope)
        try:
            with scope:
                await task()
        finally:
            self._shields.discard(scope)

    async def _drive(self) -> None:
        try:
            while self._closed is None:
                await self._step()
            await self._closing()
        except Exception as error:
            self._break(error)  # the waiters learn of it; nobody hangs

    async def _closing(self) -> None:
        """Closed: what Redis charged and nobody will use goes back to it
        (a permit nobody used is never lost): the permits of a lone
        caller's take in flight, once answered (within the reply timeout),
        and of an answer not yet acted on, now; a booked permit, by the
        changes sent as the limiter closes."""
        if self._flight is not None:
            wake = self._driver_wake = self._new_event()
            try:
                with anyio.move_on_after(2 * self._limit._timeout):  # (the reply's own bound)
                    await wake.wait()
            finally:
                self._driver_wake = None
        then, self._then = self._then, None
        if then is not None:
            await then()
        booked, self._booked = self._booked, None
        if booked is not None:
            self._pending.append((self._limit.ask_charge(tuple(-n for n in booked[1])), 1, True))

    def _break(self, error: BaseException | None) -> None:
        super()._break(error)
        wake = self._driver_wake
        if wake is not None:  # closed: it ends by itself (see _run)
            wake.set()

    async def _round_trip(self, request: Request | None) -> GcraAnswer | None:
        """One request to Redis (``None``: a probe), on the asyncio client or
        in a worker thread; the time it was sent counts for the outage bound
        until one is answered."""
        self._sent()
        limit = self._limit
        result: GcraAnswer | None = None
        if self._async:
            if request is None:
                await limit.aprobe()
            else:
                result = await limit.asend(request)
        elif request is None:
            await anyio.to_thread.run_sync(limit.probe)
        else:
            result = await anyio.to_thread.run_sync(limit.send, request)
        self._replied()
        if result is not None:
            assert request is not None
            self._heard(request, result)
        return result

    def _sent(self) -> None:
        """A request goes to Redis now."""
        self.round_trips += 1
        if self._unanswered_since is None:
            self._unanswered_since = self._now()
            fail = self._unanswered_since + self._after_ns
            if self._on_unavailable == "closed" and (self._fail_ns is None or fail < self._fail_ns):
                # kept even while the timer is to wake sooner (at a waiter's
                # deadline): that waiter may leave first, and the bound stands
                self._fail_ns = fail
                if fail / 1e9 < self._wake_at:
                    self._reschedule()

    def _replied(self) -> None:
        """Redis answered a request."""
        # The timer still looks once at the time set (moving its deadline on
        # every round trip would cost more): it finds nothing to fail.
        self._unanswered_since = None
        self._down = False
        self._down_error = None

    async def _step(self) -> None:
        machine = self._machine
        then = self._then
        if then is not None:  # what a lone caller's take left to do
            self._then = None
            await then()
            return
        if self._flight is not None:
            # A lone caller's take is in flight: nothing else is sent before
            # its reply, which wakes the driver if anything is left to do.
            await self._sleep(math.inf, idle=True)
            return
        booked = self._booked
        if booked is not None and self._seconds() >= booked[0]:
            # The booked permit's time: hand it over (Redis charged it for
            # then), whatever else there is to send, and whether Redis
            # answers now or not (every sleep ends at its time, so until it
            # is handed over the driver would not sleep at all).
            self._booked = None
            left = self._hand_over(booked[1], self._reserve[booked[2]], 1, booked[3])
            if left and self._local is not None:  # given back once Redis answers again
                give = self._limit.ask_charge(tuple(-n * left for n in booked[1]))
                self._pending.append((give, left, True))
            elif left:
                await self._give_back(booked[1], left)
            return
        if self._local is not None:
            level = machine.next_level()
            if level is None:
                await self._sleep(math.inf)
            else:
                await self._step_local()
            return
        if self._pending:
            change, given_back, gives = self._pending[0]
            request = change if isinstance(change, Request) else change(self._now())
            if gives or request is None:
                # sent once: if its answer is lost, perhaps applied; or over
                del self._pending[0]
            if request is None:
                return
            try:
                await self._round_trip(request)
            except _UNREACHABLE as error:
                await self._outage(error)
                return
            if not gives:
                del self._pending[0]
            self.given_back += given_back
            return
        level = machine.next_level(self._ask_next)
        if level is None:
            if self._published or self._in_line:  # nobody waits here any more: say so
                try:
                    await self._round_trip(self._limit.ask_leave(demand=self._published))
                except _UNREACHABLE as error:
                    await self._outage(error)
                    return
                self._published = self._in_line = False
                self._ask_next = None
            if booked is None:
                await self._sleep(math.inf, idle=True)
            else:
                await self._sleep(booked[0])
            return
        if booked is not None:
            # Wait for the booked permit's time, unless a waiter with a
            # smaller reserve came (it may find a permit now), or, under
            # global priority, another level is next (its demand goes out,
            # published or not yet: an urgent waiter that came meanwhile
            # was told to the other processes only at the booked time).
            at, _, booked_level, _ = booked
            if self._reserve[level] >= self._reserve[booked_level] and not (
                self._global_priority and level != booked_level
            ):
                now = self._seconds()
                await self._wait_for(booked_level, math.ceil((at - now) * 1e6), now)
                return
        take = self._next_take(level, booked is None)
        try:
            answer = await self._round_trip(take.request)
        except _UNREACHABLE as error:
            await self._outage(error)
            return
        assert answer is not None
        then = self._took(take, answer)
        if then is not None:
            await then()

    def _next_take(self, level: int, book: bool) -> _Take:
        """The take for the head of ``level``, the level to ask for next
        (``book``: it may book ahead)."""
        machine = self._machine
        head = machine.queues.head(level)
        units = self._asks[head.id]  # type: ignore[index]
        reserve = self._reserve[level]
        depths = tuple(machine.queues.depths) if self._global_priority else None
        # In the line (unless booking ahead: a booking is its own turn) when
        # more wait here or the last take was refused: a lone waiter's first
        # take, the one most made, needs no place in it.
        line = not self._book_ahead and (len(machine) > 1 or self._in_line)
        waiting = len(machine) if line else None
        request = self._limit.ask_take(
            reserve,
            units,
            level=level,
            demand=depths,
            demand_ttl=self._demand_ttl,
            book_ahead=self._book_ahead if book else 0.0,
            lease=self._lease_for(level, units),
            waiting=waiting,
            grace=self._demand_ttl,
            weights=self._weights,
            shared=self._shared,
        )
        return _Take(request, head.id, level, units, reserve, depths, waiting)  # type: ignore[arg-type]

    def _lease_for(self, level: int, units: tuple[int, ...]) -> int:
        """The most permits a take for ``level``'s head (of ``units``) asks
        for: no more than :attr:`lease`, nor than the callers there its
        permits would go to, in the order they would be granted, until the
        first that asks for other units (the hand-over stops there, and what
        is left goes back to Redis, charged to any quota of the upstream's
        all the same). While every caller so far asked for one unit of every
        limit, those are all of the level's callers."""
        machine = self._machine
        most = min(self._lease, machine.queues.depths[level])
        if most == 1 or machine.unit_costs:
            return most
        asks = self._asks
        count = 0
        for waiter in machine.queues.leading(level, most):
            if asks.get(waiter.id) != units:  # type: ignore[call-overload]
                break
            count += 1
        return max(count, 1)

    def _took(self, take: _Take, answer: GcraAnswer) -> Callable[[], Awaitable[None]] | None:
        """Redis answered ``take``: act on the answer at once (hand the
        permits over, book, fail a waiter that can never be granted), and
        return what is left for the driver to do, if anything (give permits
        back, wait to ask again)."""
        machine = self._machine
        # a time to come back counts from the reply: never before Redis's
        # time (from the middle of the round trip, half the takes would come
        # a little early and be refused)
        answered = self._seconds()
        never = not answer.allowed and answer.retry_after_us < 0  # refused before publishing
        self._ask_next = answer.ask_next
        # the level the answer's wait is for: the one asked for, or the one
        # global shares say to ask for next (under strict priority a waiter
        # of another level that came meanwhile wakes the driver, and its
        # demand goes out at once; under shares, with the process's next take)
        asked_next = take.level if answer.ask_next is None else answer.ask_next
        # what the wait is for, if it is for the head asked for: a cheaper
        # best waiter wakes the driver sooner
        retry_units = take.units if asked_next == take.level else None
        if take.depths is not None and not never:
            self._published = sum(take.depths) > answer.taken
        if not self._book_ahead and not never:
            # told a turn (or to come back): refused, or allowed while more
            # must wait; under global priority a turn may be now (the
            # processes in the line wait at less urgent levels, or ones the
            # shares hold) and the place held all the same
            waiting = take.waiting
            self._in_line = not answer.allowed or (
                waiting is not None
                and waiting > answer.taken
                and (answer.retry_after_us > 0 or take.depths is not None)
            )
        if not answer.allowed:
            if never:  # a limit's burst was lowered below the cost
                self._never(take.head, take.units)
                return None
            if (
                self._max_waits
                and retry_units is not None  # (the wait is for the head asked for)
                and self._too_long_for(take.head, answered + answer.retry_after_us / 1e6)
                and machine.next_level() is None
            ):
                return None  # (a place held in the line is left: see _should_wake)
            return partial(self._wait_for, asked_next, answer.retry_after_us, answered, retry_units)
        if answer.booked:  # its time comes later: the driver hands it over then
            at = answered + answer.retry_after_us / 1e6
            if (
                self._max_waits
                and self._too_long_for(take.head, at)
                and not self._takes_over(take.units, take.reserve, answer.owed)
            ):
                # booked for a caller refused as too long, and nobody here to
                # take it: given back now, as a permit of a caller who left
                self._pending.append(
                    (self._limit.ask_charge(tuple(-n for n in take.units)), 1, True)
                )
                return None
            self._booked = (at, take.units, take.level, answer.owed)
            return None
        left = self._hand_over(take.units, take.reserve, answer.taken, answer.owed)
        if not left and not (answer.retry_after_us and machine.next_level() is not None):
            return None
        retry_after_us = answer.retry_after_us
        return partial(
            self._handed_over, take.units, left, asked_next, retry_after_us, answered, retry_units
        )

    def _too_long_for(self, id: int, until: float) -> bool:
        """Redis says the waiter ``id`` (the head a take asked for) has no
        permit before ``until`` (s): if its wait from its arrival then
        passes its ``max_wait``, by the machine's rule (``too_long``), it
        leaves now, refused with :class:`WouldWaitTooLong` and counted as
        too long. Whether it was."""
        bound = self._max_waits.get(id)
        waiter = None if bound is None else self._machine.queues.get(id)
        if waiter is None:
            return False
        assert bound is not None
        wait = max(0, math.ceil(until * 1e9) - waiter.pushed_at)
        decisions = self._machine.too_long(id, wait, bound[0])
        if not decisions:
            return False
        caller = self._waiters.get(id)
        if caller is not None:  # decided (a recording keeps it: its replay decides)
            caller.decision = decisions[0]
        self._fail(id, WouldWaitTooLong(waiter.level, wait / SECOND, bound[1]))
        self._reschedule()  # (its deadline, if any, no longer counts)
        return True

    async def _handed_over(
        self,
        units: tuple[int, ...],
        left: int,
        level: int,
        retry_after_us: int,
        answered: float,
        retry_units: tuple[int, ...] | None,
    ) -> None:
        """After a hand-over: give back the ``left`` permits nobody could
        take; if the next permit is not there yet and waiters remain, wait
        for it (as for a refusal). Permits left because this process is
        paused (Redis let them through before it read the pause, or after
        it lost it: a restart) are asked for again once the pause is over
        (sooner if the pause is still to be sent), not at once: a take and a
        give-back each pass, for as long as the pause lasts."""
        if left:
            await self._give_back(units, left)
            if self._last < self._pause_end:
                pause_us = math.ceil((self._pause_end / 1e9 - answered) * 1e6)
                retry_after_us = max(retry_after_us, pause_us)
        if retry_after_us and self._machine.next_level() is not None:
            await self._wait_for(level, retry_after_us, answered, retry_units)

    # -- a lone caller's own take ----------------------------------------------

    def _alone(self) -> None:
        """A caller just pushed, nobody else waits, and the driver is idle
        (no request in flight, nothing to send, nothing booked): send the
        take the driver would send for it now, from the caller, awaiting
        nothing; its reply is acted on as it is read (:meth:`_landed`), so
        the caller wakes once, with its permit, and the driver not at all.
        Under asyncio on the small client only (else the driver sends it)."""
        if (
            not self._idle
            or self._flight is not None
            or self._then is not None
            or self._pending
            or self._booked is not None
            or self._local is not None
            or self._down
            or len(self._machine) != 1
        ):
            return
        level = self._machine.next_level(self._ask_next)
        if level is None:
            return
        take = self._next_take(level, True)
        self._flight = take
        if not self._limit.submit(take.request, self._landed):
            self._flight = None  # no connection open: the driver opens one
            return
        self.lone_takes += 1
        self._sent()

    def _landed(self, answer: GcraAnswer | None, error: BaseException | None) -> None:
        """A lone caller's take was answered (or failed): act on it as the
        driver would have after its round trip, whether that caller still
        waits or not; leave the rest to the driver, and wake it if there is
        any (or if waiters remain)."""
        take, self._flight = self._flight, None
        if take is None:
            return
        try:
            if error is None:
                assert answer is not None
                self._replied()
                self._heard(take.request, answer)
                self._then = self._took(take, answer)
            elif isinstance(error, redis.exceptions.NoScriptError):
                self._replied()  # nothing ran: the driver asks again, and loads it
            elif isinstance(error, _UNREACHABLE):
                self._then = partial(self._outage, error)
            else:
                raise error
            wake = self._driver_wake
            if wake is not None and (
                self._closed is not None or self._booked is not None or self._should_wake()
            ):
                self._idle = False  # (it has something to do)
                wake.set()
        except Exception as broken:
            self._break(broken)  # as the driver would: nobody hangs

    def _hand_over(
        self, units: tuple[int, ...], reserve: int, count: int = 1, owed: int | None = None
    ) -> int:
        """``count`` permits of ``units`` taken under ``reserve`` (for level
        ``owed``, if the script said) are here: each to the waiter the
        policy chooses now (the head of ``owed`` while it waits), if that
        one asks for the same units with no larger reserve. Returns how many
        are left (the waiter left, or another came first, during the round
        trip or the wait; or this process paused meanwhile, before Redis
        read the pause): they go back to Redis, rather than break the
        reserve, the limit or the pause."""
        machine = self._machine
        now = self._now()
        self._dispatch(machine.tick(now))
        for handed in range(count):
            if not self._takes_over(units, reserve, owed):
                return count - handed
            self._dispatch(machine.supply(now, owed))
        return 0

    def _takes_over(self, units: tuple[int, ...], reserve: int, owed: int | None = None) -> bool:
        """Whether the waiter the policy chooses now (the machine ticked to
        now; the head of ``owed`` while it waits) may have a permit of
        ``units`` taken under ``reserve``: it asks for the same units, at a
        level whose reserve is no larger, and this process's pause is over
        (a permit Redis let through before it read the pause)."""
        machine = self._machine
        chosen = machine.next_level(owed)
        return (
            chosen is not None
            and self._last >= self._pause_end
            and self._reserve[chosen] <= reserve
            and self._asks.get(machine.queues.head(chosen).id) == units  # type: ignore[call-overload]
        )

    async def _wait_for(
        self,
        level: int,
        retry_after_us: int,
        answered: float,
        units: tuple[int, ...] | None = None,
    ) -> None:
        """Sleep until ``retry_after_us`` microseconds after ``answered``, to
        ask for ``level``'s head then; under global priority, no longer than
        half the demand's time to live while it has waiters (a heartbeat).
        ``units``: what the take that was told so asked, for ``level``'s
        head (``None``: waiting for a booked permit, which a cheaper waiter
        does not bring sooner, or to ask for another level than the take
        did, as global shares say)."""
        self._retry_reserve = self._reserve[level]
        self._retry_level = level
        self._retry_units = units
        seconds = retry_after_us / 1e6
        if self._published:
            seconds = min(seconds, self._demand_ttl / 2)
        try:
            await self._sleep(answered + seconds)
        finally:
            self._retry_reserve = self._retry_level = self._retry_units = None

    async def _give_back(self, units: Sequence[int], count: int = 1) -> None:
        try:
            await self._round_trip(self._limit.ask_charge(tuple(-n * count for n in units)))
        except _UNREACHABLE as error:
            await self._outage(error)
            return
        self.given_back += count

    async def _outage(self, error: BaseException) -> None:
        self._down = True
        self._down_error = error
        self._ask_next = None  # Redis's word on it is lost with the connection
        if self._on_unavailable == "local":
            if self._local is None:
                self._local = self._fallback(self._now())
                self.fallbacks += 1
                assert self._tasks is not None
                self._tasks.start_soon(self._shielded, self._probe)
            return
        # Failing closed: the timer fails the waiters at their bound; try
        # Redis again meanwhile.
        await self._sleep(self._seconds() + self._retry)

    def _local_limit(self) -> tuple[Fraction, int]:
        """The local limit's rate and burst: ``share`` (the decimal it prints
        as) of the first limit's as it stands (this process's set_limit
        included), the burst rounded down, 1 at least."""
        assert self._share is not None
        first = next(iter(self.limits.values()))
        share = Fraction(repr(float(self._share)))
        # (the float product: 0.29 of 100 was 28.999999999999996, so 28)
        return first.rate * share, max(1, math.floor(first.burst * share))

    def _fallback(self, now: int) -> Machine:
        """The local limit (:meth:`_local_limit`), its bucket empty at the
        start (so the switch itself lets nothing extra through), and paused
        until this process's pause in force ends."""
        rate, burst = self._local_limit()
        pacer = Machine(Fifo(1), rate, burst)
        for i in range(burst):
            pacer.push(("drain", i), 0, now)
        if self._pause_end > now:
            pacer.pause_until(self._pause_end, now)
        return pacer

    async def _probe(self) -> None:
        """While the local limit serves, see every so often if Redis can
        serve a take again (:meth:`RedisLimit.probe`, a write that charges
        nothing), without holding up the local service."""
        while self._local is not None and self._closed is None:
            await anyio.sleep(self._retry)
            try:
                await self._round_trip(None)
            except _UNREACHABLE as error:
                self._down = True
                self._down_error = error
                continue
            except Exception as error:
                # Refused otherwise (a permission revoked): as the driver
                # does, close, and the waiters learn of it; raised out of
                # this task, it would tear down the caller's task group.
                self._break(error)
            else:
                self._local = None  # back to Redis
            wake = self._driver_wake
            if wake is not None:
                wake.set()

    async def _step_local(self) -> None:
        """Serve the next waiter from the local limit (one permit each)."""
        pacer = self._local
        assert pacer is not None
        now = self._now()
        pacer.tick(now)
        due = pacer.next_due()
        assert due is not None
        if due <= now:
            pacer.push(object(), 0, now)
            self._serving_locally = True
            try:
                self._dispatch(self._machine.supply(now))
            finally:
                self._serving_locally = False
            return
        await self._sleep(due / 1e9)
        # woken at the permit's time, the time is its time at least (past
        # about 104 days of the clock, the ns read may round to just before)
        self._catch_up(due, self._seconds())


_ABOVE_BURST = (
    "is above a limit's burst now (lowered by set_limit, or as opened again after Redis "
    "lost the change): it could never be granted"
)
_NEVER_AT_ONCE = (
    "would refuse every acquire: a shared permit is granted only after a round trip "
    "to Redis, never at once; give a short timeout (timeout=0.05: AcquireTimeout if no "
    "permit came within it), or max_wait=0 (WouldWaitTooLong as soon as Redis's answer "
    "shows a wait)"
)


def open_limiter(
    policy: _Policy,
    url: str,
    *,
    name: str,
    rate: int | float | Fraction | None = None,
    burst: int = 1,
    limits: Mapping[str, Limit] | Limit | None = None,
    reserve: Sequence[int] | None = None,
    on_unavailable: Literal["closed", "local"] = "closed",
    share: float | None = None,
    unavailable_after: float = 1.0,
    prefix: str = "permits:",
    redis_timeout: float = 0.5,
    audit: bool = False,
    cluster: bool = False,
    max_waiting: int | Sequence[int | None] | None = None,
    default_level: int = 0,
    flow_weights: Mapping[Hashable, int] | Callable[[Hashable], int] | None = None,
    max_waiting_per_flow: int | None = None,
    flow_limit: str | None = None,
    refund_window: float = 1.0,
    settle_window: float = 0.0,
    global_priority: bool = False,
    demand_ttl: float = 2.0,
    book_ahead: float = 0.0,
    lease: int = 16,
    **unknown: NoReturn,
) -> AbstractAsyncContextManager[RedisLimiter]:
    """Open a :class:`RedisLimiter` for an ``async with`` (asyncio or trio,
    through anyio): ``rate`` and ``burst`` (or ``limits``) over every process
    that opens the same ``name`` on the same Redis; this process's waiters in
    ``policy``'s order.

    :param reserve: per level, units of every limit its requests must leave
        (``0`` for the most urgent); each below every burst.
    :param on_unavailable: ``"closed"``: with Redis unreachable, waiters get
        :class:`BackendUnavailable` after ``unavailable_after`` seconds;
        ``"local"``: serve from a local limit of ``share`` of the rate.
    :param share: this process's declared fraction of the rate, for
        ``"local"`` only (refused beside ``"closed"``, which never reads
        it); the shares of all processes should add up to at most 1.
    :param redis_timeout: seconds before a connect or a reply to Redis
        counts as failed (not an acquire's ``timeout``).
    :param refund_window: seconds after its grant during which the permit
        of a caller that gave up before proceeding (cancelled, say) goes to
        this process's next waiter, if that one asks for the same units
        under no larger reserve; otherwise, and once that long has passed,
        it goes back to Redis (never beyond the burst): a permit nobody
        used is never lost. Finite, ``>= 0``.
    :param settle_window: seconds after a caller proceeds during which its
        ``Permit.settle(actual)`` is accepted; the difference is charged or
        given back on the shared key.
    :param global_priority: strict priority across processes: no level is
        granted a permit while a more urgent level waits in any live process
        that shares the limit (each process publishes its waiters per level
        with its requests). Off by default: the reserve is the other way.
    :param demand_ttl: seconds a process's published demand lives without
        a refresh: how long a crashed process's waiters may still hold up
        the lower levels of the others. A live process refreshes it at
        least every ``demand_ttl / 2``. With or without global priority,
        also how long past its turn a process's place in the line is kept
        (see SPEC.md, *The line*): how long a crashed process still delays
        the others' turns.
    :param book_ahead: seconds: a request the shared buckets would allow
        within that long is *booked* (charged at once, the permit this
        process's at its time) instead of refused, so that at saturation
        each permit costs one round trip, not one per process. It costs
        priority across processes: a more urgent request may wait behind
        one booked permit per process, reserve or not. Off (0) by default;
        at most ``demand_ttl / 2`` under global priority.
    :param lease: the most permits one request takes at once, for the
        waiters of the level it asks for, of the same cost, as long as the
        shared buckets allow them now and keep at least half of each burst
        (and the level's reserve) for the others: more permits per round
        trip when many wait and the limit has room. 1: one per request.
    See :class:`RedisLimit` for ``url``, ``limits``, ``prefix``, ``audit``
    and ``cluster``, and :class:`~permits.adapters.BaseLimiter` for the rest
    (``flow_weights``, ``max_waiting_per_flow`` and ``flow_limit`` order the
    flows among this process's own waiters; nothing orders flows across
    processes).
    """
    if "timeout" in unknown:
        raise _not_redis_timeout(unknown["timeout"])
    if unknown:
        takes = [p for p in inspect.signature(open_limiter).parameters if p != "unknown"]
        refuse_unknown("permits.adapters.redis.open_limiter", unknown, takes)
    limit = RedisLimit(
        url,
        name=name,
        rate=rate,
        burst=burst,
        limits=limits,
        prefix=prefix,
        audit=audit,
        redis_timeout=redis_timeout,
        cluster=cluster,
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
        flow_weights=flow_weights,
        max_waiting_per_flow=max_waiting_per_flow,
        flow_limit=flow_limit,
        refund_window=refund_window,
        settle_window=settle_window,
        global_priority=global_priority,
        demand_ttl=demand_ttl,
        book_ahead=book_ahead,
        lease=lease,
    )
    return async_opening(_opened(limiter))


@asynccontextmanager
async def _opened(limiter: RedisLimiter) -> AsyncIterator[RedisLimiter]:
    try:
        async with running(limiter, anyio.create_task_group()):
            yield limiter
    finally:
        try:
            with anyio.CancelScope(shield=True):
                try:
                    if limiter._pending:
                        with suppress(*_UNREACHABLE):
                            now = limiter._now()
                            await anyio.to_thread.run_sync(limiter._send_pending, now)
                finally:  # (a change Redis refused is raised once the rest is done)
                    if limiter._published or limiter._in_line:
                        # so that the other processes need not wait for its expiry
                        leave = partial(limiter.limit.leave, demand=limiter._published)
                        with suppress(*_UNREACHABLE):
                            await anyio.to_thread.run_sync(leave)
                    with suppress(*_UNREACHABLE):
                        await limiter.limit.aclose()
        finally:
            limiter.limit.close()
