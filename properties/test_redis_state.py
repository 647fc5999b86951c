"""P70-P75: the shared limit's keys on a real Redis: what the script does
with a key something else overwrote, how long the state and the keys of
global priority live, the one Redis Cluster slot that holds a limit; which
of Redis's error replies are an outage, whichever client reads them; and
the upstream's word of more units than the script's numbers count.

The expiry runs on Redis's own clock, the script's decisions on the time
the test chooses (``script_source(clock="argv")``, which keeps its keys an
hour longer: ``SLACK``): the time to live is read just before and just after
each call, and judged against the moment the buckets (the exact model of
``test_redis_gcra.py``) say the state holds nothing any more, within the
milliseconds the reads took on Redis's clock.
"""

from __future__ import annotations

import itertools
import math
import time
import uuid
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
import redis
from hypothesis import given, note
from hypothesis import strategies as st
from redis.crc import key_slot
from test_redis_gcra import GRACE, RATES, T0, Buckets, caller

from permits.adapters.redis import RedisLimit, Request
from permits.core import Limit, PermitValueError

from redis_server import RedisServer

#: The hour the script the tests run keeps its keys beyond their moment (ms).
SLACK = 3_600_000

_keys = itertools.count()


# -- what something else wrote --------------------------------------------------

#: A value the script cannot read as one of its numbers: none at all, or one
#: its times (whole microseconds below 2^53) never reach.
garbage = st.one_of(
    st.sampled_from(["garbage", "", "x y", "inf", "-inf", "nan", "1e300", "-1e300", "1e16"]),
    st.text(alphabet="abc xyz-_", min_size=1, max_size=6).filter(lambda s: not s.isspace()),
)

#: (the key's suffix, a field of it or ``None`` for another type, two limits)
overwrites = st.one_of(
    st.tuples(
        st.sampled_from(["", ":limits", ":demand", ":line", ":shares"]),
        st.none(),
        st.booleans(),
    ),
    st.tuples(st.just(""), st.sampled_from(["tat:units", "pause", "q:units"]), st.booleans()),
    st.tuples(st.just(":limits"), st.just("units"), st.booleans()),
    st.tuples(st.sampled_from([":demand", ":line"]), st.just("other"), st.booleans()),
    st.tuples(st.just(":shares"), st.sampled_from(["V", "F0", "F1"]), st.booleans()),
)


@given(
    overwrite=overwrites,
    value=garbage,
    kind=st.sampled_from(["string", "list", "set"]),
    plain=st.booleans(),
)
def test_a_key_something_else_overwrote_fails_the_script_saying_which(
    redis_server: RedisServer,
    client: Any,
    overwrite: tuple[str, str | None, bool],
    value: str,
    kind: str,
    plain: bool,
) -> None:
    """P70: a key of the limit that something else overwrote with another
    type, or a field the script reads that holds no number it could have
    stored (not a number, not finite, beyond 2^53), fails the script: no
    take is answered, whether it is the plain take of one limit or one
    under several limits, global shares and the line (which read every
    key), and the error says Redis's words, the limit's keys and to delete
    them; once they are deleted, the next take finds full buckets."""
    suffix, field, two = overwrite
    name = f"p70-{uuid.uuid4().hex[:12]}"
    limits = {"units": Limit(100, 3), **({"other": Limit(50, 2)} if two else {})}
    limit = RedisLimit(redis_server.url, name=name, limits=limits)
    key = limit.key + suffix
    everything: dict[str, Any] = {"demand": (1, 0), "weights": (1, 2), "waiting": 2}
    asked = {} if plain and suffix in ("", ":limits") else everything
    try:
        limit.set_limit(rate=100, burst=3, limit="units")  # (the changed limits, stored)
        limit.take(**everything)  # (the demand, the shares)
        limit.take(waiting=2, cost=(3, *([0] * (len(limits) - 1))))  # (refused: the line)
        if field is None:
            client.delete(key)
            if kind == "string":
                client.set(key, value)
            elif kind == "list":
                client.rpush(key, value or "x")
            else:
                client.sadd(key, value or "x")
        else:
            client.hset(key, field, value)
        note(f"{key} {field or kind}: {value!r}, take {asked}")
        with pytest.raises(redis.exceptions.ResponseError) as failed:
            limit.take(**asked)
        message = str(failed.value)
        assert "WRONGTYPE" in message or "user_script:" in message, ("P70", message)
        assert limit.key in message, ("P70", message)
        assert "delete them" in message, ("P70", message)
        client.delete(*(limit.key + s for s in ("", ":limits", ":demand", ":line", ":shares")))
        answer = limit.take(**asked)
        assert answer.allowed, ("P70", answer)
        assert answer.remaining == tuple(lim.burst - 1 for lim in limits.values()), ("P70", answer)
    finally:
        client.delete(*(limit.key + s for s in ("", ":limits", ":demand", ":line", ":shares")))
        limit.close()


# -- expiry ---------------------------------------------------------------------

#: (kind, dt, arg, units, the change of limit): as test_redis_gcra's ops.
expiry_ops = st.tuples(
    st.sampled_from(["take"] * 5 + ["give", "pause", "adopt", "quota", "rate"]),
    st.one_of(
        st.just(0), st.integers(1, 1_500_000), st.sampled_from([0, 25_000, 100_000, 1_000_000])
    ),
    st.integers(0, 2_000_000),
    st.lists(st.integers(-1, 6), min_size=2, max_size=2),
    st.tuples(st.integers(0, 1), st.sampled_from(RATES), st.integers(1, 5)),
)


def moment(model: Buckets, now: int) -> Fraction:
    """When the state holds nothing any more: every bucket full again, the
    pause over, every quota ended (``now`` if so already)."""
    last = Fraction(max(now, model.pause))
    for tokens, burst, T, quotas in zip(
        model.tokens, model.burst, model.T, model.quotas, strict=True
    ):
        last = max(last, now + (burst - tokens) * T)
        last = max([last, *(Fraction(end) for _, end in quotas)])
    return last


@given(
    rates=st.lists(st.sampled_from(RATES), min_size=1, max_size=2),
    bursts=st.lists(st.integers(1, 5), min_size=2, max_size=2),
    steps=st.lists(expiry_ops, min_size=2, max_size=25),
)
def test_the_state_lives_until_it_holds_nothing_and_a_second_more(
    client: Any, script: Any, rates: list[int], bursts: list[int], steps: list[Any]
) -> None:
    """P71: after every call that stores (a take allowed, a give-back or
    settle, a pause, the upstream's word and quota, a change of limit), the
    state key exists if and only if it holds something: a bucket not full,
    a pause or a quota in force; its time to live is then at least until
    the last of those, lengthened only when shorter than that, and then to
    that and a second more (a call that brings the moment nearer leaves it
    as it was); a call refused leaves it as it was. The changed limits never
    expire. For the plain take of one limit and the general steps alike."""
    n = len(rates)
    bursts = bursts[:n]
    key = f"test:{{p71-{next(_keys)}}}"
    call = caller(script, rates, bursts, key)
    model = Buckets(rates, bursts)
    now = T0
    for kind, dt, arg, xs, (index, new_rate, new_burst) in steps:
        now += dt
        xs = xs[:n]
        before = time.monotonic()
        ttl_before = client.pttl(key)
        if kind == "take":
            units = tuple(max(0, x) for x in xs)
            if arg % 5:  # mostly a take of something
                units = (max(1, units[0]), *units[1:])
            general = ("", 0, 0, "0", 0, 1) if arg % 2 else ()  # else the plain take
            got = tuple(call("take", now, arg % 3, units, *general))
            want = model.take(now, arg % 3, units)
            stores = bool(got[0])
        elif kind == "give":
            units = tuple(x - 3 for x in xs)
            got, want = tuple(call("give", now, 0, units)), model.give(now, units)
            stores = True
        elif kind == "pause":
            got, want = tuple(call("pause", now, arg, (0,) * n)), model.pause_for(now, arg)
            stores = True
        elif kind in ("adopt", "quota"):
            remaining = tuple(min(x, 5) for x in xs)
            word = model.adopt if kind == "adopt" else model.limit_quota
            got, want = tuple(call(kind, now, arg, remaining)), word(now, arg, remaining)
            stores = True
        else:
            index = min(index, n - 1)
            got = tuple(call("rate", now, index + 1, (0,) * n, 10**6 // new_rate, new_burst))
            want = model.rerate(now, index, new_rate, new_burst)
            stores = True
        ttl = client.pttl(key)
        took = math.ceil((time.monotonic() - before) * 1000) + 2  # ms of Redis's clock, at most
        assert got == want, ("P38", got, want)  # (the model holds: its moment is the state's)
        keep = math.ceil((moment(model, now) - now) / 1000) + SLACK
        note(f"t={now - T0} {kind}: {got}; ttl {ttl_before} -> {ttl}, keep {keep}, took {took}")
        if not stores:
            assert ttl <= max(ttl_before, -2), ("P71", "a refused call lengthened it")
            continue
        if keep == SLACK:  # it holds nothing: gone
            assert ttl == -2, ("P71", "kept holding nothing", ttl)
            continue
        assert ttl >= keep - took, ("P71", "it would expire before its moment", ttl, keep)
        # (the script read it between the two reads, up to `took` ms lower)
        if ttl_before < keep:  # shorter than that: lengthened, a second more
            assert keep + 1000 - took <= ttl <= keep + 1000, ("P71", ttl, keep)
        elif ttl_before >= keep + took:  # long enough: left as it was
            assert ttl <= ttl_before, ("P71", "lengthened though long enough", ttl_before, ttl)
        else:  # (within the reads' milliseconds of it: either)
            assert ttl <= max(ttl_before, keep + 1000), ("P71", ttl_before, ttl, keep)
        if model.stored:
            assert client.pttl(key + ":limits") == -1, ("P71", "the changed limits expire")


# -- Redis Cluster --------------------------------------------------------------

braces = st.text(alphabet="ab{}:", max_size=6)


@given(prefix=braces, name=braces.filter(bool))
def test_every_key_of_a_limit_is_in_one_cluster_slot(prefix: str, name: str) -> None:
    """P72: whatever its prefix and name, a limit opened on a Redis Cluster
    names keys (its state, changed limits, audit, demand, line and shares)
    that all hash to one slot by the cluster's hash tag rule, so each call
    of the script reaches the one node that holds them all; where the tag
    would be empty (``{}``), and the keys in different slots, opening is
    refused with a ``PermitValueError`` naming the prefix or the name."""
    url = "redis://127.0.0.1:1/0"  # (a cluster client connects at its first call: never here)
    key = f"{prefix}{{{name}}}"
    suffixes = ("", ":limits", ":audit", ":demand", ":line", ":shares")
    if len({key_slot((key + suffix).encode()) for suffix in suffixes}) > 1:
        with pytest.raises(PermitValueError) as refused:
            RedisLimit(url, name=name, prefix=prefix, rate=10, burst=2, cluster=True)
        assert refused.value.argument in ("prefix", "name"), ("P72", refused.value)
        return
    limit = RedisLimit(url, name=name, prefix=prefix, rate=10, burst=2, cluster=True)
    keys = [limit.key, limit.live_key, limit.audit_key]
    keys += [limit.demand_key, limit.line_key, limit.shares_key]
    assert keys == [key + suffix for suffix in suffixes], ("P72", keys)
    assert keys == limit._keys, ("P72", "the script names other keys", limit._keys)
    assert len({key_slot(k.encode()) for k in keys}) == 1, ("P72", keys)


# -- an outage or a fault, by Redis's reply --------------------------------------

#: The replies that say Redis cannot serve the limit now: an outage (a
#: password refused too: changed on the server, it may work again).
OUTAGES = ["BUSY", "MISCONF", "NOREPLICAS", "LOADING", "READONLY", "OOM", "NOAUTH", "WRONGPASS"]
#: Other first words of Redis's error replies (and a few of none).
OTHERS = ["ERR", "WRONGTYPE", "NOSCRIPT", "NOPERM", "EXECABORT", "CROSSSLOT", "NOPE"]

replies = st.one_of(
    st.tuples(st.sampled_from(OUTAGES + OTHERS), st.text(alphabet="abc :_.1", max_size=12)).map(
        " ".join
    ),
    st.sampled_from(
        [
            "ERR max number of clients reached",
            'ERR user_script:66: permits: the field pause holds "x", no number it stores',
            "ERR Error running script (call to f_0123): @user_script:66: oops",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ]
    ),
)


@given(reply=replies)
def test_both_clients_count_a_reply_as_an_outage_or_a_fault_alike(reply: str) -> None:
    """P73: an error reply of Redis counts, whichever client read it (the
    limiter's own under asyncio, redis-py's elsewhere), as an outage (the
    limiter waits for Redis, or serves locally) exactly when it says Redis
    cannot serve the limit now: ``-BUSY``, ``-MISCONF``, ``-NOREPLICAS``,
    ``-LOADING``, ``-READONLY``, ``-OOM``, a server at its ``maxclients``, and
    a password refused (``-NOAUTH``, ``-WRONGPASS``: changed on the server);
    the script failing on what a key holds (``-WRONGTYPE``, a script error)
    is a fault that closes the limiter, its error naming the limit's keys
    and saying to delete them; the two clients count every reply alike."""
    from redis._parsers.base import BaseParser

    from permits.adapters import _resp
    from permits.adapters.redis import _UNREACHABLE, _counted

    key = "permits:{p73}"
    ours, _ = _resp.parse(f"-{reply}\r\n".encode(), 0)
    theirs = BaseParser.parse_error(reply)  # type: ignore[no-untyped-call]
    counted = [_counted(error, key) for error in (ours, theirs)]
    outage = [isinstance(error, _UNREACHABLE) for error in counted]
    note(f"{reply!r}: ours {counted[0]!r}, redis-py's {counted[1]!r}")
    assert outage[0] == outage[1], ("P73", "the clients count it apart", reply, counted)
    said = reply.split(" ", 1)[0] in OUTAGES or reply == "ERR max number of clients reached"
    assert outage[0] == said, ("P73", reply, counted)
    if reply.startswith("WRONGTYPE") or "user_script:" in reply:
        for error in counted:
            assert key in str(error), ("P73", error)
            assert "delete them" in str(error), ("P73", error)


# -- the upstream's word beyond what Lua numbers count -----------------------------

Run = Callable[[str, Request, int], tuple[Any, ...]]


@given(
    remaining=st.one_of(
        st.integers(2**53, 2**70), st.sampled_from([2**53 + 1, 2**63 - 1, 2**63, 2**64])
    ),
    word=st.sampled_from(["quota", "adopt"]),
    two=st.booleans(),
    reset_after=st.sampled_from([0.5, 60.0, 10.0**9]),
    takes=st.lists(
        st.tuples(st.integers(0, 300_000), st.integers(0, 3), st.integers(0, 2)), max_size=12
    ),
)
def test_a_word_of_more_units_than_lua_counts_holds_back_nothing(
    redis_server: RedisServer,
    client: Any,
    script: Any,
    remaining: int,
    word: str,
    two: bool,
    reset_after: float,
    takes: list[tuple[int, int, int]],
) -> None:
    """P74: the upstream's word or quota of more than 2**53 units left (an
    API's "unlimited", often 2**63 - 1) counts as 2**53: it stores what one
    of 2**53 stores, and holds back nothing: every take after it, on the
    limit it names or beside it, is answered exactly as with no word at
    all."""
    limits = {"units": Limit(10, 4), **({"other": Limit(20, 3)} if two else {})}
    made = [
        RedisLimit(redis_server.url, name=f"p74-{uuid.uuid4().hex[:12]}", limits=limits)
        for _ in range(3)
    ]

    def run(limit: RedisLimit, request: Request, now: int) -> tuple[Any, ...]:
        """``request`` on ``limit``'s keys, at ``now`` (the script of chosen times)."""
        args = [request.args[0], str(now).encode(), *request.args[2:]]
        reply = script(keys=limit._keys[: request.keys], args=args)
        return tuple(tuple(r) if isinstance(r, list) else r for r in reply)

    try:
        huge, exact, _ = made
        named = "other" if two and remaining % 2 else "units"
        ask = huge.ask_quota if word == "quota" else huge.ask_adopt
        run(huge, ask(remaining, reset_after, named), T0)
        ask = exact.ask_quota if word == "quota" else exact.ask_adopt
        run(exact, ask(2**53, reset_after, named), T0)
        stored = [client.hgetall(limit.key) for limit in (huge, exact)]
        assert stored[0] == stored[1], ("P74", stored)
        now = T0
        for dt, reserve, cost in takes:
            now += dt
            units = (cost, *([1] * (len(limits) - 1)))
            got = [run(limit, limit.ask_take(reserve, units), now) for limit in made]
            note(f"t={now - T0} take {units} reserve {reserve}: {got}")
            assert got[0] == got[2], ("P74", "held back", got)
            assert got[1] == got[2], ("P74", "2**53 held back", got)
    finally:
        for limit in made:
            client.delete(limit.key)
            limit.close()


# -- the keys of global priority, the line and global shares ----------------------

#: (kind, dt, process, level, its waiters per level, its demand's time to live in us)
global_ops = st.tuples(
    st.sampled_from(["take"] * 4 + ["demand"]),
    st.one_of(st.just(0), st.integers(1, 400_000), st.sampled_from([50_000, 150_000])),
    st.sampled_from(["a", "b", "c"]),
    st.integers(0, 1),
    st.lists(st.integers(0, 2), min_size=2, max_size=2),
    st.sampled_from([300_000, 300_000, 2_000_000, 1_500]),
)


def _words(raw: dict[bytes, bytes]) -> dict[str, list[float]]:
    return {k.decode(): [float(w) for w in v.split()] for k, v in raw.items()}


@given(
    limit=st.tuples(st.sampled_from(RATES), st.integers(1, 3)),
    shares=st.booleans(),
    steps=st.lists(global_ops, min_size=1, max_size=25),
)
def test_the_keys_of_global_priority_expire_with_what_they_hold(
    client: Any, script: Any, limit: tuple[int, int], shares: bool, steps: list[Any]
) -> None:
    """P75: processes under global priority in the line (with global shares
    or strict): a call that writes a process's demand leaves the demand
    hash living at least that demand's time to live, and never longer than
    the longest written to it; one that tells a process its turn leaves the
    line living until the latest turn it holds is the grace past, exactly;
    a grant under global shares leaves the shares living ``demand_ttl``,
    exactly, and nothing else lengthens them. So none expires while what it
    holds is read, and none outlives it by more than that."""
    rate, burst = limit
    key = f"test:{{p75-{next(_keys)}}}"
    call = caller(script, [rate], [burst], key)
    costs = ("1 2", 1) if shares else ()
    now = T0
    longest = 0  # (us) the longest a demand was written to live
    for kind, dt, process, level, waiting, ttl in steps:
        now += dt
        counts = list(waiting)
        if kind == "take":
            counts[level] = max(1, counts[level])
        words = " ".join(map(str, counts))
        before = time.monotonic()
        shares_before = client.pttl(key + ":shares")
        turn_before = client.hget(key + ":line", process)
        if kind == "demand":
            got = call("demand", now, 0, (0,), process, ttl, 0, words, 0, 1, process, 0, 0, GRACE)
        else:
            extra = (0, 1, process, level, sum(counts), GRACE, *costs)
            got = call("take", now, 0, (1,), process, ttl, level, words, *extra)
        line = _words(client.hgetall(key + ":line"))
        ttls = [client.pttl(key + suffix) for suffix in (":demand", ":line", ":shares")]
        took = math.ceil((time.monotonic() - before) * 1000) + 2  # ms of Redis's clock, at most
        note(f"t={now - T0} {kind} {process} L{level} {counts} ttl {ttl}: {got}")
        note(f"  line {line}, ttls {ttls}, took {took}")
        taken = got[0] if kind == "take" and got[0] > 0 else 0
        if sum(counts) - taken > 0:  # its demand written
            longest = max(longest, ttl)
            least = math.ceil(ttl / 1000) + SLACK - took
            assert ttls[0] >= least, ("P75", "the demand expires before it", ttls, least)
        if ttls[0] != -2:
            most = math.ceil(longest / 1000) + SLACK
            assert ttls[0] <= most, ("P75", "the demand outlives every entry", ttls, most)
        turn = client.hget(key + ":line", process)
        if turn is not None and turn != turn_before:  # told its turn
            latest = max(words[0] for words in line.values())
            keep = math.ceil((latest - now + GRACE) / 1000) + SLACK
            assert keep - took <= ttls[1] <= keep, ("P75", "the line", ttls, keep)
        if shares and taken:
            keep = math.ceil(ttl / 1000) + SLACK
            assert keep - took <= ttls[2] <= keep, ("P75", "the shares", ttls, keep)
        elif ttls[2] != -2:
            assert ttls[2] <= shares_before, ("P75", "the shares lengthened without a grant")
