"""The Redis limiter's own asyncio client (``permits.adapters._resp``).

Its reply parser against every RESP2 reply shape, cut anywhere; then the
client on a real redis-server: a password and a database from the URL, a
unix socket, the script loaded again after ``SCRIPT FLUSH``, a connection
killed by the server, a hung server (the reply timeout), a replica's
``-READONLY`` to a caller that gave up, a request sent without awaiting
(its reply handed to a callback), and the URLs it leaves to redis-py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
from hypothesis import given
from hypothesis import strategies as st
from redis._parsers.base import BaseParser

from permits.adapters import _resp
from permits.adapters.redis import RedisLimit, open_limiter
from permits.core import Fifo

from redis_server import RedisServer, need_redis_server

pytestmark = pytest.mark.timeout(60)

# -- the parser -------------------------------------------------------------

Reply = Any
leaves = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.binary(max_size=40),
    st.none(),
    st.builds(lambda text: ("simple", text), st.text("abc OK", max_size=10)),
    st.builds(lambda text: ("error", "ERR " + text), st.text("abc x", max_size=10)),
)
replies = st.recursive(leaves, lambda inner: st.lists(inner, max_size=5), max_leaves=20)


def wire(reply: Reply) -> bytes:
    """``reply`` as a Redis server sends it (RESP2)."""
    if isinstance(reply, bool) or reply is None:
        return b"$-1\r\n"
    if isinstance(reply, int):
        return b":%d\r\n" % reply
    if isinstance(reply, bytes):
        return b"$%d\r\n%s\r\n" % (len(reply), reply)
    if isinstance(reply, tuple):
        kind, text = reply
        sign = b"+" if kind == "simple" else b"-"
        return b"%s%s\r\n" % (sign, str(text).encode())
    return b"*%d\r\n" % len(reply) + b"".join(wire(item) for item in reply)


def expected(reply: Reply) -> Reply:
    """What the parser makes of ``reply``: bytes for a simple string, an
    exception for an error."""
    if isinstance(reply, tuple):
        kind, text = reply
        return text.encode() if kind == "simple" else ("error", text)
    if isinstance(reply, list):
        return [expected(item) for item in reply]
    return reply


def seen(value: Reply) -> Reply:
    if isinstance(value, redis.exceptions.ResponseError):
        return ("error", str(value))
    if isinstance(value, list):
        return [seen(item) for item in value]
    return value


@given(st.lists(replies, min_size=1, max_size=6), st.data())
def test_replies_cut_anywhere_reach_their_requests_in_order(
    sent: list[Reply], data: st.DataObject
) -> None:
    """Replies arriving in pieces cut at any byte each reach the request they
    answer, in order, whole."""
    stream = b"".join(wire(reply) for reply in sent)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(stream) - 1)), max_size=8)))
    loop = asyncio.new_event_loop()
    try:
        connection = _resp._Connection()
        futures = [loop.create_future() for _ in sent]
        connection.waiting.extend(futures)
        start = 0
        for cut in [*cuts, len(stream)]:
            connection.data_received(stream[start:cut])
            start = cut
        assert [seen(f.result()) for f in futures] == [expected(r) for r in sent]
        assert connection.buffer == b""
        assert not connection.waiting
    finally:
        loop.close()


def test_a_noscript_error_is_told_apart() -> None:
    reply, at = _resp.parse(b"-NOSCRIPT No matching script.\r\n", 0)
    assert isinstance(reply, redis.exceptions.NoScriptError)
    assert at == 31


@pytest.mark.parametrize(
    "message",
    [
        "READONLY You can't write against a read only replica.",
        "OOM command not allowed when used memory > 'maxmemory'.",
        "BUSY Redis is busy running a script.",
        "LOADING Redis is loading the dataset in memory",
        "NOSCRIPT No matching script.",
        "ERR max number of clients reached",
        "ERR unknown command",
    ],
)
def test_an_error_reply_is_redis_pys_class(message: str) -> None:
    """Each error reply is the class redis-py's own parser makes of it
    (READONLY and OOM were plain ResponseErrors)."""
    reply, _ = _resp.parse(b"-%s\r\n" % message.encode(), 0)
    assert type(reply) is type(BaseParser.parse_error(message))  # type: ignore[no-untyped-call]


def test_a_malformed_reply_closes_the_connection_and_fails_its_request() -> None:
    loop = asyncio.new_event_loop()
    try:
        connection = _resp._Connection()
        future = loop.create_future()
        connection.waiting.append(future)
        connection.data_received(b"?what\r\n")
        assert connection.closed
        with pytest.raises(redis.exceptions.ConnectionError, match="malformed reply"):
            future.result()
    finally:
        loop.close()


@pytest.mark.parametrize(
    ("url", "options", "own"),
    [
        ("redis://127.0.0.1:6379/0", {}, True),
        ("redis://:secret@127.0.0.1:6379/2", {}, True),
        ("unix:///tmp/redis.sock", {}, True),
        ("rediss://127.0.0.1:6379/0", {}, False),  # TLS: redis-py
        ("redis://127.0.0.1:6379/0?socket_keepalive=true", {}, False),  # options in the URL
        ("redis://127.0.0.1:6379/0", {"client_name": "x"}, False),  # options given
    ],
)
def test_the_urls_it_speaks(url: str, options: dict[str, Any], own: bool) -> None:
    assert _resp.speaks(url, options) is own


# -- on a real server ---------------------------------------------------------


def server_with(*options: str) -> RedisServer:
    server = RedisServer(need_redis_server(), *options)
    server.start()
    return server


async def acquired(url: str, name: str, n: int = 3, **options: Any) -> RedisLimit:
    """Acquire ``n`` permits from a limiter at ``url``; its limit."""
    async with open_limiter(Fifo(1), url, name=name, rate=1000, burst=100, **options) as limiter:
        assert isinstance(limiter.limit._aclient, _resp.AsyncRedis)
        for _ in range(n):
            await asyncio.wait_for(limiter.acquire(0), 5)
        return limiter.limit


def test_a_password_and_a_database_from_the_url() -> None:
    server = server_with("--requirepass", "s3cret:/@")
    try:
        url = f"redis://:s3cret%3A%2F%40@127.0.0.1:{server.port}/3"
        limit = asyncio.run(acquired(url, "auth", audit=True))
        for db, grants in ((3, 3), (0, 0)):  # the grants were recorded in database 3
            client = redis.Redis(port=server.port, password="s3cret:/@", db=db)
            try:
                assert client.llen(limit.audit_key) == grants
            finally:
                client.close()
        bad = f"redis://:wrong@127.0.0.1:{server.port}/3"
        own = _resp.AsyncRedis(bad, timeout=1, shown="bad")
        with pytest.raises(redis.exceptions.AuthenticationError):
            asyncio.run(own.ping())

        async def refused() -> None:
            # The hello's AUTH refused (WRONGPASS, raised as redis-py
            # raises it: an AuthenticationError, a ConnectionError): the call
            # raises it, and the connection, unauthenticated, is not kept.
            own = _resp.AsyncRedis(bad, timeout=1, shown="bad")
            with pytest.raises(redis.exceptions.AuthenticationError, match="WRONGPASS"):
                await own.call([b"ECHO", b"x"])
            assert own._connection is None

        asyncio.run(refused())
    finally:
        server.stop()


def test_requests_made_while_the_connection_opens_wait_for_its_hello() -> None:
    """Requests made one loop pass apart from the first call on: while the
    connection opens, while its AUTH and its SELECT are under way, and
    after. Every one goes out on the one connection, after its hello: each
    key lands in the URL's database (those made between the AUTH and the
    SELECT landed in database 0), and no other connection is opened (each
    request made while it connected opened one of its own, left open)."""
    server = server_with("--requirepass", "pw")
    try:
        url = f"redis://:pw@127.0.0.1:{server.port}/3"

        async def run() -> None:
            own = _resp.AsyncRedis(url, timeout=5, shown=url)
            calls = []
            for i in range(20):
                calls.append(asyncio.ensure_future(own.call([b"SET", b"k%d" % i, b"x"])))
                await asyncio.sleep(0)
            assert await asyncio.gather(*calls) == [b"OK"] * 20
            await own.aclose()

        admin, other = (redis.Redis(port=server.port, password="pw", db=db) for db in (3, 0))
        try:
            before = admin.info("stats")["total_connections_received"]
            asyncio.run(run())
            assert admin.info("stats")["total_connections_received"] - before == 1
            assert (admin.dbsize(), other.dbsize()) == (20, 0)
        finally:
            admin.close()
            other.close()

    finally:
        server.stop()


def test_a_close_while_a_connection_opens_closes_it() -> None:
    """``aclose`` while the connection opens (its ``SELECT`` under way, the
    server frozen): once the hello is answered, that connection is closed
    and the request made before the close fails (the connection was kept,
    open, and served it: leaked by a client its owner had closed)."""
    server = server_with()
    try:
        url = f"redis://127.0.0.1:{server.port}/3"
        admin = redis.Redis(port=server.port)

        def connected() -> int:
            return int(admin.info("clients")["connected_clients"]) - 1  # the admin's own

        async def run() -> None:
            own = _resp.AsyncRedis(url, timeout=5, shown=url)
            server.hang()
            try:
                call = asyncio.ensure_future(own.call([b"PING"]))
                await asyncio.sleep(0.2)  # connected (the kernel accepts), its SELECT sent
                await own.aclose()
            finally:
                server.resume()
            with pytest.raises(redis.exceptions.ConnectionError, match="the client was closed"):
                await asyncio.wait_for(call, 5)
            deadline = time.monotonic() + 5  # a margin for a busy host
            while connected() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert connected() == 0

        try:
            asyncio.run(run())
        finally:
            admin.close()
    finally:
        server.stop()


def test_a_unix_socket(tmp_path: Path) -> None:
    socket = tmp_path / "redis.sock"
    server = server_with("--unixsocket", str(socket))
    try:
        asyncio.run(acquired(f"unix://{socket}", "unix"))
    finally:
        server.stop()


def served_again_after(
    url: str, name: str, disrupt: Callable[[redis.asyncio.Redis], Awaitable[object]]
) -> int:
    """An acquire, then ``disrupt`` through another client, then an acquire
    again, which must be served: the limiter's round trips."""

    async def run() -> int:
        async with open_limiter(Fifo(1), url, name=name, rate=1000, burst=100) as limiter:
            await limiter.acquire(0)
            admin = redis.asyncio.Redis.from_url(url)
            await disrupt(admin)
            await admin.aclose()
            await asyncio.sleep(0.05)  # a close reaches the client
            await asyncio.wait_for(limiter.acquire(0), 5)
            return limiter.round_trips

    return asyncio.run(run())


def test_the_script_is_loaded_again_after_a_flush(redis_server: RedisServer) -> None:
    flush = served_again_after(redis_server.url, "flush", lambda admin: admin.script_flush())
    assert flush == 2  # SCRIPT LOAD is not a round trip of the limiter's


def test_a_connection_killed_by_the_server_is_opened_again(redis_server: RedisServer) -> None:
    async def kill(admin: redis.asyncio.Redis) -> None:
        assert await admin.client_kill_filter(_type="normal", skipme=True) >= 1

    assert served_again_after(redis_server.url, "killed", kill) == 2


def test_a_hung_server_times_out_and_the_next_call_opens_a_new_connection() -> None:
    server = server_with()
    try:

        async def run() -> None:
            own = _resp.AsyncRedis(server.url, timeout=0.2, shown=server.url)
            await own.ping()
            first = own._connection
            server.hang()
            try:
                start = time.monotonic()
                with pytest.raises(redis.exceptions.TimeoutError, match=r"within 0\.2 s"):
                    await own.ping()
                assert time.monotonic() - start < 2  # a margin for a busy host
            finally:
                server.resume()
            await own.ping()
            assert own._connection is not first
            await own.aclose()

        asyncio.run(run())
    finally:
        server.stop()


def test_a_readonly_reply_closes_the_connection_though_its_caller_gave_up() -> None:
    """A server turned into a replica (a failover) answers ``-READONLY`` to
    a request whose caller gave up before the reply came (cancelled): the
    connection is closed all the same, as for a reply someone waits for, so
    the next request opens a new one (which may reach the new master)
    rather than going to the replica first."""
    master, replica = server_with(), server_with()
    admin = redis.Redis(port=replica.port)
    try:
        admin.replicaof("127.0.0.1", master.port)

        async def run() -> None:
            own = _resp.AsyncRedis(replica.url, timeout=5, shown=replica.url)
            await own.ping()
            first = own._connection
            assert first is not None
            replica.hang()  # the reply waits: the caller gives up first
            try:
                call = asyncio.ensure_future(own.call([b"SET", b"key", b"value"]))
                await asyncio.sleep(0.05)  # sent
                call.cancel()
            finally:
                replica.resume()
            deadline = time.monotonic() + 5  # a margin for a busy host
            while not first.closed and time.monotonic() < deadline:
                await asyncio.sleep(0.01)  # the reply, read and dropped
            assert first.closed
            await own.ping()
            assert own._connection is not first
            await own.aclose()

        asyncio.run(run())
    finally:
        admin.close()
        replica.stop()
        master.stop()


def test_a_submitted_request_lands_in_order_or_times_out() -> None:
    """``submit`` sends at once on the open connection (nothing without
    one) and hands each reply to its callback, in order among the awaited
    requests; on a hung server, a ``TimeoutError`` after the reply timeout,
    and the connection is closed as for an awaited request."""
    server = server_with()
    try:

        async def run() -> None:
            own = _resp.AsyncRedis(server.url, timeout=0.2, shown=server.url)
            landed: list[tuple[Any, BaseException | None]] = []
            came = asyncio.Event()

            def land(reply: Any, error: BaseException | None) -> None:
                landed.append((reply, error))
                came.set()

            assert not own.submit(_resp.encode([b"PING"]), land)  # no connection yet
            await own.ping()
            assert own.submit(_resp.encode([b"ECHO", b"first"]), land)
            assert await own.call([b"ECHO", b"second"]) == b"second"
            assert landed == [(b"first", None)]  # answered before the request after it
            came.clear()
            server.hang()
            try:
                assert own.submit(_resp.encode([b"PING"]), land)
                await asyncio.wait_for(came.wait(), 5)  # a margin for a busy host
            finally:
                server.resume()
            reply, error = landed[-1]
            assert reply is None
            assert isinstance(error, redis.exceptions.TimeoutError)
            assert own._connection is None
            await own.aclose()

        asyncio.run(run())
    finally:
        server.stop()


def test_an_error_reply_is_raised_as_redis_pys(redis_server: RedisServer) -> None:
    async def run() -> None:
        own = _resp.AsyncRedis(redis_server.url, timeout=1, shown=redis_server.url)
        script = _resp.AsyncScript(own, "return redis.error_reply('no such thing')", [])
        with pytest.raises(redis.exceptions.ResponseError, match="no such thing"):
            await script(0, b"")
        await own.ping()  # the connection still serves
        await own.aclose()

    asyncio.run(run())


def test_a_url_with_options_goes_to_redis_py(redis_server: RedisServer) -> None:
    async def run() -> None:
        url = redis_server.url + "?socket_keepalive=true"
        async with open_limiter(Fifo(1), url, name="redis-py", rate=1000, burst=100) as limiter:
            await asyncio.wait_for(limiter.acquire(0), 5)
            assert isinstance(limiter.limit._aclient, redis.asyncio.Redis)

    asyncio.run(run())


def test_a_password_for_a_server_that_needs_none_is_accepted(redis_server: RedisServer) -> None:
    """``redis://:secret@host`` against a server with no password (a URL
    from one environment used in another): redis-py connects (its ``HELLO
    3 AUTH default secret`` is accepted by the default user, who needs no
    password), and so does the limiter's client, where its ``AUTH secret``
    was refused, every round trip failed, and the limiter failed closed
    under asyncio only, the same URL serving under trio."""

    async def run() -> None:
        url = f"redis://:secret@127.0.0.1:{redis_server.port}/0"
        await _both_connect(url)
        await acquired(url, "no-password-needed")  # on the limiter's own client

    asyncio.run(run())


def test_an_empty_password_in_the_url_sends_no_auth(redis_server: RedisServer) -> None:
    """``redis://:@host`` (a password left empty, as a template whose
    variable is unset writes it): redis-py sends no ``AUTH``, and neither
    does the limiter's client (its ``AUTH ""`` was refused by a server with
    no password, and every round trip failed)."""

    asyncio.run(_both_connect(f"redis://:@127.0.0.1:{redis_server.port}/0"))


async def _both_connect(url: str) -> None:
    """The limiter's own client and redis-py both connect to ``url``."""
    own = _resp.AsyncRedis(url, timeout=1, shown=url)
    try:
        await own.ping()
    finally:
        await own.aclose()
    other = redis.Redis.from_url(url)  # as redis-py reads it
    try:
        assert other.ping()
    finally:
        other.close()
