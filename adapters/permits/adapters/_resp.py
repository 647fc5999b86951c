"""A small Redis client for the Redis limiter under asyncio.

One connection, the RESP2 protocol, replies matched to requests in the
order they were sent (so requests may be pipelined), each with a reply
timeout; a connection that times out or fails is closed, and the next call
opens a new one. It speaks exactly what the limiter needs (``EVALSHA`` with
its ``SCRIPT LOAD`` fallback, ``AUTH`` and ``SELECT`` from the URL; and
``PING``, to check a connection by hand) and raises redis-py's exceptions,
so the limiter handles its faults as it does redis-py's.

Why not redis-py's asyncio client: measured under callgrind
(``bench/shared_acquire.py``), one script call costs the client about a
fifth of redis-py's instructions (110,527 against 505,343), and with one
request in flight a process's throughput is bound by that cost. redis-py stays for
everything else: the synchronous client (worker threads under trio), a
Redis Cluster, TLS and any connection option (see :func:`speaks`).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from ._requires import requires_extra

with requires_extra(__name__, "redis", "redis"):
    import redis.exceptions

#: A reply not yet whole in the buffer.
_PARTIAL = object()


def speaks(url: str, options: dict[str, Any]) -> bool:
    """Whether this client can open ``url`` as redis-py would with no
    ``options``: ``redis://`` or ``unix://`` with no query string (redis-py
    reads connection options from one)."""
    parts = urlsplit(url)
    return not options and parts.scheme in ("redis", "unix") and not parts.query


def bulk(args: list[bytes]) -> bytes:
    """``args`` as RESP bulk strings, one after the other."""
    return b"".join([b"$%d\r\n%s\r\n" % (len(arg), arg) for arg in args])


def encode(args: list[bytes]) -> bytes:
    """``args`` as one RESP request (an array of bulk strings)."""
    return b"*%d\r\n%s" % (len(args), bulk(args))


def parse(buffer: bytes, at: int) -> tuple[Any, int]:
    """The reply that starts at ``at`` in ``buffer`` and the index after it;
    ``_PARTIAL`` (and ``at``) if it is not all there yet. An error reply is
    a :class:`redis.exceptions.ResponseError` (returned, not raised: it is
    the answer to one request among others)."""
    end = buffer.find(b"\r\n", at)
    if end < 0:
        return _PARTIAL, at
    kind = buffer[at]
    line = buffer[at + 1 : end]
    if kind == 58:  # ':' an integer
        return int(line), end + 2
    if kind == 42:  # '*' an array
        count = int(line)
        if count < 0:
            return None, end + 2
        items = []
        next_at = end + 2
        for _ in range(count):
            item, next_at = parse(buffer, next_at)
            if item is _PARTIAL:
                return _PARTIAL, at
            items.append(item)
        return items, next_at
    if kind == 36:  # '$' a bulk string
        size = int(line)
        if size < 0:
            return None, end + 2
        stop = end + 2 + size
        if len(buffer) < stop + 2:
            return _PARTIAL, at
        return buffer[end + 2 : stop], stop + 2
    if kind == 43:  # '+' a simple string
        return line, end + 2
    if kind == 45:  # '-' an error
        message = line.decode(errors="replace")
        error = _ERRORS.get(message.split(" ", 1)[0], redis.exceptions.ResponseError)
        if message == _FULL:
            error = _FULL_ERROR
        return error(message), end + 2
    raise redis.exceptions.InvalidResponse(f"Protocol error, got {bytes([kind])!r} as reply type")


#: Error replies redis-py raises as more than a ``ResponseError``, by their
#: first word (as its parser reads them): those that say the server cannot
#: serve now (a restarted one still loading its data, a cluster without a
#: master) count as unreachable, as they do from redis-py; the limiter
#: counts a replica's (after a failover) and a full memory's as an outage too.
_ERRORS: dict[str, type[redis.exceptions.RedisError]] = {
    "NOSCRIPT": redis.exceptions.NoScriptError,
    "LOADING": redis.exceptions.BusyLoadingError,
    "READONLY": redis.exceptions.ReadOnlyError,
    "OOM": redis.exceptions.OutOfMemoryError,
    "NOAUTH": redis.exceptions.AuthenticationError,
    "WRONGPASS": redis.exceptions.AuthenticationError,
    "TRYAGAIN": redis.exceptions.TryAgainError,
    "CLUSTERDOWN": redis.exceptions.ClusterDownError,
    "MASTERDOWN": redis.exceptions.MasterDownError,
}

#: What a server at ``maxclients`` answers a new connection: redis-py's
#: ConnectionError (the server closes the connection after it).
_FULL = "ERR max number of clients reached"
#: redis-py's class for it, where it has one (a subclass of ConnectionError).
_FULL_ERROR: type[redis.exceptions.ConnectionError] = getattr(
    redis.exceptions, "MaxClientsReachedError", redis.exceptions.ConnectionError
)


class _Reply(Protocol):
    """Where a request's reply goes: a future, or a :class:`_Slot`."""

    def done(self) -> bool: ...
    def set_result(self, result: Any, /) -> None: ...
    def set_exception(self, exception: BaseException, /) -> None: ...


#: What a :meth:`AsyncRedis.submit` calls with its reply, or with the error
#: that stands for it.
Landed = Callable[[Any, "BaseException | None"], None]


class _Slot:
    """A submitted request's reply: handed to ``landed`` in the loop's own
    callback, the one that reads it (no task to wake in between)."""

    __slots__ = ("_done", "landed", "timer")

    def __init__(self, landed: Landed) -> None:
        self.landed = landed
        self.timer: asyncio.TimerHandle | None = None
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, result: Any) -> None:
        self._land(result, None)

    def set_exception(self, exception: BaseException) -> None:
        self._land(None, exception)

    def _land(self, result: Any, error: BaseException | None) -> None:
        self._done = True
        if self.timer is not None:
            self.timer.cancel()
        self.landed(result, error)


class _Connection(asyncio.Protocol):
    """One connection: requests written, their replies' futures in order."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiting: deque[_Reply] = deque()
        self.buffer = b""
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data if self.buffer else data
        at = 0
        waiting = self.waiting
        try:
            while waiting:
                reply, at = parse(buffer, at)
                if reply is _PARTIAL:
                    break
                future = waiting.popleft()
                if not future.done():  # (else its caller gave up: the reply is dropped)
                    if isinstance(reply, redis.exceptions.ConnectionError):
                        future.set_exception(reply)  # (LOADING, NOAUTH: as redis-py raises them)
                    else:
                        future.set_result(reply)
                if isinstance(reply, redis.exceptions.ReadOnlyError):
                    # a replica now (a failover), whether or not anyone still
                    # waits for this reply: the next request opens a new
                    # connection, which may reach the new master (as redis-py's
                    # Sentinel client does)
                    self.fail(redis.exceptions.ConnectionError("closed after a READONLY reply"))
                    return
        except (ValueError, IndexError, redis.exceptions.InvalidResponse) as error:
            self.fail(redis.exceptions.ConnectionError(f"Redis sent a malformed reply: {error}"))
            return
        self.buffer = buffer[at:]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        reason = f": {exc}" if exc is not None else ""
        self._fail_waiting(redis.exceptions.ConnectionError(f"Connection closed by Redis{reason}"))

    def fail(self, error: BaseException) -> None:
        """Close the connection, failing every request still waiting with ``error``."""
        self.closed = True
        self._fail_waiting(error)
        if self.transport is not None:
            self.transport.abort()

    def _fail_waiting(self, error: BaseException) -> None:
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(error)


class AsyncRedis:
    """A connection to the Redis server at ``url`` (``redis://`` or
    ``unix://``, see :func:`speaks`), opened at the first call.

    :param url: as redis-py reads it: ``redis://[[user]:password@]host[:port][/db]``
        or ``unix://[[user]:password@]/path``.
    :param timeout: seconds before a connect or a reply counts as failed.
    :param shown: the URL as errors show it (password masked).
    """

    def __init__(self, url: str, *, timeout: float, shown: str) -> None:
        parts = urlsplit(url)
        self._unix = parts.scheme == "unix"
        self._host = parts.hostname or "localhost"
        self._port = parts.port or 6379
        self._path = unquote(parts.path)
        db = 0
        if not self._unix and parts.path.strip("/"):
            try:
                db = int(parts.path.strip("/"))
            except ValueError:
                raise ValueError(f"Redis URL {shown!r}: the database must be a number") from None
        #: What the connection says first: who it is, and which database.
        hello: list[list[bytes]] = []
        if parts.username or parts.password:  # as redis-py: none for ':@', '' for 'user@'
            # As redis-py's HELLO does, a password alone is the default
            # user's: accepted by a server that needs none (the default user
            # takes any), where ``AUTH <password>`` is refused; a server
            # older than 6 has no users and is asked ``AUTH <password>``.
            user = unquote(parts.username).encode() if parts.username else b"default"
            hello.append([b"AUTH", user, unquote(parts.password or "").encode()])
        if db:
            hello.append([b"SELECT", str(db).encode()])
        self._hello = hello
        self._timeout = timeout
        self._shown = shown
        #: The open connection, its hello done; None while none is.
        self._connection: _Connection | None = None
        #: Held while a connection opens: requests made meanwhile wait for it.
        self._opening = asyncio.Lock()
        #: Times :meth:`aclose` was called: a connection opened across one
        #: is closed, not kept.
        self._closes = 0

    async def _open(self) -> _Connection:
        """The open connection, or one opened now; a request made while one
        opens waits for it (no request goes out before its hello, and no
        second connection is opened beside it). A connection that opens
        across an :meth:`aclose` is closed once its hello is done, and the
        request fails (it was kept, left open by a client closed)."""
        closes = self._closes
        async with self._opening:
            connection = self._connection
            if connection is None or connection.closed:
                connection = await self._connect()
                if self._closes != closes:
                    closed = redis.exceptions.ConnectionError("the client was closed")
                    connection.fail(closed)
                    raise closed
                self._connection = connection
            return connection

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            if self._unix:
                opening = loop.create_unix_connection(_Connection, self._path)
            else:
                opening = loop.create_connection(_Connection, self._host, self._port)
            _, connection = await asyncio.wait_for(opening, self._timeout)
        except (OSError, asyncio.TimeoutError) as error:
            detail = str(error) or "timed out"
            raise redis.exceptions.ConnectionError(
                f"Error connecting to Redis at {self._shown}: {detail}"
            ) from None
        for command in self._hello:  # AUTH, SELECT
            try:
                reply = await self._exchange(connection, encode(command))
                if (
                    isinstance(reply, redis.exceptions.ResponseError)
                    and command[:2] == [b"AUTH", b"default"]
                    and "wrong number of arguments" in str(reply)
                ):  # a Redis older than 6: a password alone
                    reply = await self._exchange(connection, encode([b"AUTH", command[2]]))
            except BaseException:
                # no request may go out on a connection its hello did not open
                connection.fail(redis.exceptions.ConnectionError("closed after a failed hello"))
                raise
            if isinstance(reply, redis.exceptions.ResponseError):
                connection.fail(redis.exceptions.ConnectionError("closed after a refused hello"))
                if command[0] == b"AUTH":
                    raise redis.exceptions.AuthenticationError(str(reply))
                raise reply
        return connection

    async def call(self, args: list[bytes]) -> Any:
        """Send one request and return its reply (an error reply returned as
        its :class:`~redis.exceptions.ResponseError`, not raised); raise
        redis-py's ``ConnectionError`` or ``TimeoutError`` if the
        connection fails or no reply comes within ``timeout`` seconds."""
        return await self.send(encode(args))

    async def send(self, request: bytes) -> Any:
        """:meth:`call` for a request already encoded."""
        connection = self._connection
        if connection is None or connection.closed:
            connection = await self._open()
        return await self._exchange(connection, request)

    async def _exchange(self, connection: _Connection, request: bytes) -> Any:
        """Send ``request`` on ``connection`` and await its reply."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        connection.waiting.append(future)
        assert connection.transport is not None
        connection.transport.write(request)
        timer = loop.call_later(self._timeout, self._expire, connection, future)
        try:
            return await future
        finally:
            timer.cancel()

    def submit(self, request: bytes, landed: Landed) -> bool:
        """Send ``request`` (encoded) at once, without awaiting anything, on
        the connection already open; from the event loop, once its reply is
        read, call ``landed(reply, None)``, or ``landed(None, error)`` with
        the ``ConnectionError`` or ``TimeoutError`` :meth:`send` would raise
        (``landed`` must not raise: it runs in the loop's reading callback).
        ``False``: no connection is open (the next :meth:`send` opens one),
        and nothing was sent."""
        connection = self._connection
        if connection is None or connection.closed:
            return False
        slot = _Slot(landed)
        connection.waiting.append(slot)
        assert connection.transport is not None
        connection.transport.write(request)
        loop = asyncio.get_running_loop()
        slot.timer = loop.call_later(self._timeout, self._expire, connection, slot)
        return True

    def _expire(self, connection: _Connection, future: _Reply) -> None:
        """No reply in time: fail the request with a timeout and close its
        connection (what it still owes would come after the next request's
        reply)."""
        if future.done():  # answered, its caller not resumed yet
            return
        future.set_exception(
            redis.exceptions.TimeoutError(
                f"Redis at {self._shown} did not answer within {self._timeout:g} s"
            )
        )
        connection.fail(redis.exceptions.ConnectionError("closed after a reply timeout"))
        if self._connection is connection:
            self._connection = None

    async def ping(self) -> None:
        reply = await self.call([b"PING"])
        if isinstance(reply, redis.exceptions.ResponseError):
            raise reply

    async def aclose(self) -> None:
        self._closes += 1
        connection, self._connection = self._connection, None
        if connection is not None and not connection.closed:
            connection.fail(redis.exceptions.ConnectionError("the client was closed"))


class AsyncScript:
    """A Lua script run by ``EVALSHA`` on ``client``, loaded on the first
    ``NOSCRIPT`` (a Redis that restarted or flushed its scripts)."""

    def __init__(self, client: AsyncRedis, source: str, keys: list[str]) -> None:
        self._client = client
        self._source = source.encode()
        sha = hashlib.sha1(self._source).hexdigest().encode()  # Redis names a script by its SHA-1
        head = [b"EVALSHA", sha, str(len(keys)).encode(), *(k.encode() for k in keys)]
        self._head = len(head), bulk(head)

    def _request(self, count: int, args: bytes) -> bytes:
        size, head = self._head
        return b"*%d\r\n%s%s" % (size + count, head, args)

    def submit(self, count: int, args: bytes, landed: Landed) -> bool:
        """Run the script as :meth:`AsyncRedis.submit` sends a request: its
        reply (an error reply as a :class:`~redis.exceptions.ResponseError`)
        goes to ``landed``. On ``NOSCRIPT`` the script is loaded and the
        request sent again behind it, on the same connection, and that reply
        goes to ``landed``. ``False``: nothing was sent."""
        client = self._client
        request = self._request(count, args)

        def replied(reply: Any, error: BaseException | None) -> None:
            if isinstance(reply, redis.exceptions.NoScriptError):
                load = encode([b"SCRIPT", b"LOAD", self._source])
                # (a failed load shows in the request's own reply, NOSCRIPT again)
                if client.submit(load, _ignored) and client.submit(request, landed):
                    return
            landed(reply, error)

        return client.submit(request, replied)

    async def __call__(self, count: int, args: bytes) -> Any:
        """Run the script with ``count`` arguments, ``args`` (as :func:`bulk`
        encodes them)."""
        request = self._request(count, args)
        reply = await self._client.send(request)
        if isinstance(reply, redis.exceptions.NoScriptError):
            loaded = await self._client.call([b"SCRIPT", b"LOAD", self._source])
            if isinstance(loaded, redis.exceptions.ResponseError):
                raise loaded
            reply = await self._client.send(request)
        if isinstance(reply, redis.exceptions.ResponseError):
            raise reply
        return reply


def _ignored(reply: Any, error: BaseException | None) -> None:
    """A reply nobody reads."""
