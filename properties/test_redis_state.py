"""P70-P75, P81-P85, P88-P94, P100: the shared limit's keys on a real Redis: what the
script does with a key something else overwrote, how long the state and
the keys of global priority live, the one Redis Cluster slot that holds a
limit; which of Redis's error replies are an outage, whichever client reads
them; the upstream's word of more units than the script's numbers count;
what each process counts (its statistics) and serves on its own (the local
fallback, on virtual time, with no Redis at all); a word given while Redis
does not answer and sent later, durations in seconds as the script's
microseconds, and what a restart that loses the state lets through; the
bounds of the script's numbers (durations up to 1e9 s, a burst up to
2**53, a settle's debt up to 1e9 s at the limit's rate, the debt settles
add up to held up to 2e9 s, a turn in the line too, the virtual times of
global shares kept small under unbroken load, and weights that would let
one grant move them past 2**52 refused); the line stepped by the limit
that holds a take back, not by one with room for many.

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
import socket
import time
import uuid
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import anyio
import pytest
import redis
from hypothesis import example, given, note
from hypothesis import strategies as st
from redis.crc import key_slot
from test_redis_gcra import (
    GRACE,
    LEASE,
    RATES,
    T0,
    TTL,
    WEIGHTS,
    Buckets,
    Limits,
    caller,
    demand_ops,
    global_limits,
    leave_the_line,
)

from permits.adapters.redis import RedisLimit, RedisLimiter, Request, open_limiter
from permits.core import Fifo, Limit, PermitValueError, Shares, StrictPriority
from permits.testing import virtual_backend

from redis_server import RedisServer

#: The hour the script the tests run keeps its keys beyond their moment (ms).
SLACK = 3_600_000

_keys = itertools.count()


# -- what something else wrote --------------------------------------------------

#: A value the script cannot read as one of its numbers: none at all, or one
#: its times (whole microseconds below 2^53) never reach.
garbage = st.one_of(
    st.sampled_from(["garbage", "", "x y", "inf", "-inf", "nan", "1e300", "-1e300", "1e16"]),
    # pairs (a quota, a changed limit) with one word bad; Redis's own words
    # of an outage, held in a field (still a fault: no reply said them)
    st.sampled_from(["5 x", "x 3", "1e16 5", "5 1e16", "5 inf", "BUSY", "MISCONF x"]),
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
# a quota field empty, or of one number where pairs are stored: read as no
# quota (forgotten), or failing as Lua's own compare of nil
@example(overwrite=("", "q:units", False), value="", kind="string", plain=False)
@example(overwrite=("", "q:units", True), value="5", kind="string", plain=True)
@example(overwrite=("", "q:units", False), value="5 9 7", kind="string", plain=False)
# the plain take of one limit reads each field as the others do: a time far
# below 2^53, a quota or a changed limit of one bad word, a pause saying BUSY
@example(overwrite=("", "tat:units", False), value="-1e300", kind="string", plain=True)
@example(overwrite=("", "q:units", False), value="1e16 5", kind="string", plain=True)
@example(overwrite=("", "q:units", False), value="5 1e16", kind="string", plain=True)
@example(overwrite=(":limits", "units", False), value="x 3", kind="string", plain=True)
@example(overwrite=(":limits", "units", False), value="10000 x", kind="string", plain=True)
@example(overwrite=("", "pause", False), value="BUSY", kind="string", plain=True)
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
        if plain and suffix == "":
            # the state alone, as the plain take's own steps read it (they
            # are for a limit with no changed limits, demand or line stored)
            limit.take()
        else:
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
# the plain take of one limit alone, twice: its second more
@example(rates=[1], bursts=[5, 5], steps=[("take", 0, 4, [1, 1], (0, 1, 1))] * 2)
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
            "ERR Protocol error: unauthenticated multibulk length",
            "ERR Protocol error: unauthenticated bulk length",
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
    a password refused (``-NOAUTH``, ``-WRONGPASS``: changed on the server;
    a long request refused, ``-ERR Protocol error: unauthenticated ...``:
    asked for and not given);
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
    said = (
        reply.split(" ", 1)[0] in OUTAGES
        or reply == "ERR max number of clients reached"
        or reply.startswith("ERR Protocol error: unauthenticated ")  # no password given
    )
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
@example(  # (a later, shorter demand cut the hash's life below a's)
    limit=(RATES[0], 1),
    shares=False,
    steps=[("demand", 0, "a", 0, [1, 0], 2_000_000), ("demand", 0, "b", 0, [0, 1], 1_500)],
)
def test_the_keys_of_global_priority_expire_with_what_they_hold(
    client: Any, script: Any, limit: tuple[int, int], shares: bool, steps: list[Any]
) -> None:
    """P75: processes under global priority in the line (with global shares
    or strict): a call that writes a process's demand leaves the demand
    hash living until the latest expiry of any entry it holds (a later,
    shorter demand of another process cuts no longer one short), and never
    longer than the longest written to it; one that tells a process its turn leaves the
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
    start = time.monotonic()
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
        demand = _words(client.hgetall(key + ":demand"))
        if demand:  # (ms of Redis's clock since the first write, at most)
            since = math.ceil((time.monotonic() - start) * 1000) + 2
            latest = max(words[0] for words in demand.values())
            least = math.ceil((latest - now) / 1000) + SLACK - since
            assert ttls[0] >= least, ("P75", "the demand expires before an entry", ttls, least)
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


def test_the_line_lives_until_its_latest_turn_is_the_grace_past_rounded_up(
    client: Any, script: Any
) -> None:
    """P75 by hand, to the millisecond: a process told its turn 99,999 µs
    away leaves the line living ``ceil((99,999 + grace) / 1000)`` ms (and
    the slack), not one less: the turn is never dropped by its key's expiry
    before it is the grace past. Read as the key's absolute expiry between
    two readings of Redis's clock in one transaction, retried until both
    fall in one millisecond (PTTL, read after the call, is a millisecond or
    two short of it)."""
    keep = -(-(99_999 + GRACE) // 1000) + SLACK
    exact = None
    for _ in range(20):
        key = f"test:{{p75-line-{next(_keys)}}}"
        keys = [
            key,
            *(key + suffix for suffix in (":limits", ":audit", ":demand", ":line", ":shares")),
        ]
        limit = ["l0", 100_000, 1]  # (10/s, burst 1)
        assert script(keys=keys[:3], args=["take", T0, 0, 0, 1, *limit, 1])[0] == 1  # emptied
        line = ["", 0, 0, "0", 0, 1, "a", 0, 1, GRACE]
        pipe = client.pipeline(transaction=True)
        pipe.time()
        script(keys=keys, args=["take", T0 + 1, 0, 0, 1, *limit, 1, *line], client=pipe)
        pipe.execute_command("PEXPIRETIME", keys[4])
        pipe.time()
        before, got, expires, after = pipe.execute()
        client.delete(*keys)
        assert got[:2] == [0, 99_999], got  # refused, told its turn
        first, last = ((s * 10**6 + us) // 1000 for s, us in (before, after))
        assert expires - last <= keep <= expires - first, ("P75", "the line", expires, keep)
        if first == last:  # (the call's millisecond known)
            exact = expires - first
            break
    assert exact == keep, ("P75", "the line lives", exact, keep)


# -- the local fallback ------------------------------------------------------------

#: Declared shares, some whose product by a burst a float holds just below
#: the whole number it is (0.29 * 100 is 28.999999999999996).
SHARES = [1, 0.5, 0.25, 0.3, 0.29, 0.57, 0.125]


def _unused_url() -> str:
    """A Redis URL of a local port nobody listens on: every request fails."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{unused.getsockname()[1]}/0"


@given(
    backend=st.sampled_from(["asyncio", "trio"]),
    first=st.tuples(st.sampled_from([1, 3, 6, 10, 40, Fraction(1, 2)]), st.integers(1, 8)),
    second=st.none() | st.tuples(st.sampled_from([2, 1000]), st.integers(1, 5)),
    share=st.sampled_from(SHARES),
    callers=st.lists(
        st.tuples(
            st.sampled_from([0, 0, 0.001, 0.1, 0.4, 1.0, 4.0]),
            st.integers(1, 3),
            st.integers(0, 5),
        ),
        min_size=1,
        max_size=12,
    ),
)
@example(  # (a float's 0.29 * 100 is 28.999999999999996: 29 at once, not 28)
    backend="asyncio",
    first=(40, 100),
    second=None,
    share=0.29,
    callers=[(0, 1, 0), (4.0, 1, 0), *[(0, 1, 0)] * 29],
)
def test_the_local_fallback_starts_empty_and_serves_its_share_of_the_first_limit(
    backend: str,
    first: tuple[int | Fraction, int],
    second: tuple[int, int] | None,
    share: float,
    callers: list[tuple[float, int, int]],
) -> None:
    """P82: with ``on_unavailable="local"``, a process whose Redis does not
    answer serves its callers, in order, from a local bucket that starts
    empty at the first failed request and holds its ``share`` of the first
    limit: a rate of ``share`` times its rate and a capacity of ``share``
    times its burst, rounded down, one at least (the share the decimal it
    prints as); one permit per caller, whatever the cost it asks of each
    limit. On virtual time, each caller proceeds exactly when that bucket,
    written from the definition (exact fractions, each grant the moment
    its unit is there, the nanosecond above), grants it."""
    rate, burst = first
    limits = {"first": Limit(rate, burst)}
    if second is not None:
        limits["second"] = Limit(*second)
    mine = Fraction(repr(float(share)))
    local_rate = rate * mine  # units a second
    capacity = max(1, math.floor(burst * mine))
    url = _unused_url()
    granted: list[float] = []
    arrived: list[float] = []
    began: list[Fraction] = []  # when the local bucket was made

    async def main() -> None:
        async with open_limiter(
            Fifo(1),
            url,
            name=f"p82-{next(_keys)}",
            limits=limits,
            on_unavailable="local",
            share=share,
            unavailable_after=1e6,
        ) as limiter:
            start = anyio.current_time()
            made = limiter._fallback

            def fallback(now: int) -> Any:
                began.append(Fraction(now, 10**9) - Fraction(start))  # (the clock's ns)
                return made(now)

            limiter._fallback = fallback  # type: ignore[method-assign]
            async with anyio.create_task_group() as tg:
                for gap, cost, other in callers:
                    if gap:
                        await anyio.sleep(gap)
                    units = {"first": min(cost, burst)}  # (within the bursts)
                    if second is not None:
                        units["second"] = min(other, second[1])
                    arrived.append(anyio.current_time() - start)
                    tg.start_soon(call, limiter, units, start)
                    await anyio.sleep(0)  # (in order: it asks before the next)
            assert limiter.backend_down, ("P82", "served by Redis?")
            assert limiter.fallbacks == 1, ("P82", limiter.fallbacks)

    async def call(limiter: Any, units: dict[str, int], start: float) -> None:
        await limiter.acquire(cost=units)
        granted.append(anyio.current_time() - start)

    name, options = virtual_backend(backend)
    anyio.run(main, backend=name, backend_options=options)
    # the bucket from the definition: empty when it was made (at the first
    # request that failed), `capacity` units at most, `local_rate` a second
    assert len(began) == 1, ("P82", began)
    tokens, last = Fraction(0), began[0]
    expected: list[Fraction] = []
    for at in arrived:
        t = max(Fraction(at), last)
        tokens = min(Fraction(capacity), tokens + (t - last) * local_rate)
        last = t
        if tokens < 1:
            t += (1 - tokens) / local_rate
            t = Fraction(math.ceil(t * 10**9), 10**9)  # (ticked at the nanosecond above)
            tokens = min(Fraction(capacity), tokens + (t - last) * local_rate)
        tokens -= 1
        last = t
        expected.append(t)
    note(f"local: {local_rate}/s, capacity {capacity}; made at {float(began[0])}")
    note(f"arrived {arrived}")
    note(f"granted {granted}, expected {[float(t) for t in expected]}")
    assert len(granted) == len(callers), ("P82", granted)
    for got, want in zip(granted, expected, strict=True):
        assert abs(got - float(want)) <= 2e-6, ("P82", granted, [float(t) for t in expected])


# -- statistics per process ----------------------------------------------------------

#: (process, level, units of each limit asked, the settle: ``None``, or
#: the units of the limits it names)
stat_ops = st.tuples(
    st.integers(0, 1),
    st.integers(0, 1),
    st.tuples(st.integers(0, 3), st.integers(0, 20)).filter(any),
    st.none()
    | st.fixed_dictionaries(
        {}, optional={"requests": st.integers(0, 5), "tokens": st.integers(0, 30)}
    ),
)


@given(steps=st.lists(stat_ops, min_size=1, max_size=10))
def test_statistics_count_each_process_s_own_grants_in_every_limit_s_units(
    redis_server: RedisServer, steps: list[Any]
) -> None:
    """P81: two processes (two limiters) share one limit of two limits
    through Redis; each acquires at a level some units of each limit, and
    settles some of its permits. Each process's statistics count its own
    callers only, each level its pushes, its grants and, per limit, the
    units its callers asked, as settled for a permit settled (the limits
    the settle names at its units, the others as asked); the shared key is
    charged the units of both, as settled."""
    name = f"p81-{uuid.uuid4().hex[:12]}"
    names = ("requests", "tokens")
    # (a unit per 1000 s: the buckets refill by no unit during the test)
    limits = {
        "requests": Limit(Fraction(1, 1000), 1000),
        "tokens": Limit(Fraction(1, 1000), 10_000),
    }
    # per process, per level: pushed, granted, units of each limit
    counts: list[list[list[Any]]] = [[[0, 0, [0, 0]] for _ in range(2)] for _ in range(2)]
    stats: list[Any] = []

    async def main() -> None:
        async with (
            open_limiter(
                StrictPriority(2), redis_server.url, name=name, limits=limits, settle_window=60
            ) as one,
            open_limiter(
                StrictPriority(2), redis_server.url, name=name, limits=limits, settle_window=60
            ) as other,
        ):
            limiters = (one, other)
            for process, level, units, settle in steps:
                cost = {n: u for n, u in zip(names, units, strict=True) if u}
                permit = await limiters[process].acquire(level, cost=cost, timeout=10)
                count = counts[process][level]
                count[0] += 1
                count[1] += 1
                if settle is not None:
                    permit.settle(settle)
                    units = tuple(settle.get(n, u) for n, u in zip(names, units, strict=True))
                count[2] = [a + b for a, b in zip(count[2], units, strict=True)]
            with anyio.fail_after(10):  # (the settles sent)
                while one._pending or other._pending:
                    await anyio.sleep(0.002)
            stats.extend(limiter.statistics() for limiter in limiters)
            # (the last settle's round trip answered as the limiters close)

    anyio.run(main)
    peek = RedisLimit(redis_server.url, name=name, limits=limits)
    try:
        left = peek.take(cost=(0, 1)).remaining  # (a token, to read what is left)
    finally:
        peek.close()
    for process, (stat, count) in enumerate(zip(stats, counts, strict=True)):
        seen = [[lv.pushed, lv.granted, list(lv.units_granted)] for lv in stat.levels]
        note(f"process {process}: {seen}")
        assert seen == count, ("P81", process, seen, count)
        assert stat.waiting == 0, ("P81", stat)
    used = [sum(c[2][i] for per in counts for c in per) for i in range(2)]
    want = (1000 - used[0], 10_000 - used[1] - 1)
    assert left == want, ("P81", "the shared key", left, want)


# -- the word given while Redis does not answer --------------------------------------


def _run(script: Any, limit: RedisLimit, request: Request, now: int) -> tuple[Any, ...]:
    """``request`` on ``limit``'s keys, at ``now`` (the script of chosen times)."""
    args = [request.args[0], str(now).encode(), *request.args[2:]]
    reply = script(keys=limit._keys[: request.keys], args=args)
    return tuple(tuple(r) if isinstance(r, list) else r for r in reply)


@given(
    word=st.sampled_from(["pause_for", "adopt", "quota"]),
    remaining=st.integers(0, 4),
    seconds=st.one_of(
        st.sampled_from([0.0, 0.000003, 0.001, 0.1, 0.5, 1.1, 2.0, 0.0015005]),
        st.integers(0, 3_000_000).map(lambda us: us / 1e6),
        st.integers(0, 3 * 10**9).map(lambda ns: ns / 1e9),  # (a fraction of a µs)
    ),
    before=st.integers(0, 4),
    late=st.one_of(
        st.integers(0, 4_000_000), st.sampled_from([0, 1, 3, 249, 978, 100_000, 1_100_000])
    ),
    takes=st.lists(st.tuples(st.integers(0, 700_000), st.integers(1, 2)), max_size=8),
)
@example(  # (the µs left, 1,499.5, rounded down: the reset a µs early)
    word="adopt", remaining=0, seconds=0.0015005, before=0, late=1, takes=[(0, 1)]
)
def test_a_word_given_while_redis_does_not_answer_counts_from_when_it_was_given(
    redis_server: RedisServer,
    client: Any,
    script: Any,
    word: str,
    remaining: int,
    seconds: float,
    before: int,
    late: int,
    takes: list[tuple[int, int]],
) -> None:
    """P83: a pause, or the upstream's word or quota, that a process is
    given while Redis does not answer, and sends ``late`` µs after (when
    Redis answers again), leaves the shared limit answering every take
    from then on exactly as had it been sent when it was given: for the
    time left from then, a reset past still bounding the bucket as it
    would have, and a quota or pause over by then not sent at all. The
    time left is counted in nanoseconds, rounded up to the µs as a whole
    reset is (a fraction of a µs rounded down told the reset a µs early).
    (The process's clock and Redis's run at one pace here: the word given
    at ``T0`` on Redis's clock.)"""
    limits = {"units": Limit(10, 4)}
    keys = [f"p83-{uuid.uuid4().hex[:12]}" for _ in range(2)]
    then, sent = (RedisLimit(redis_server.url, name=key, limits=limits) for key in keys)
    limiter = RedisLimiter(Fifo(1), sent)
    given = 10**15 + 123  # (ns of the process's clock)
    clock = [given]
    limiter._clock = lambda: clock[0]  # type: ignore[method-assign]
    try:
        if before:  # (a take before: the bucket not full)
            for limit in (then, sent):
                _run(script, limit, limit.ask_take(0, (before,)), T0)
        args = (seconds,) if word == "pause_for" else (remaining, seconds)
        getattr(limiter, word)(*args)
        ((change, _, _),) = limiter._pending
        ask = getattr(then, "ask_pause" if word == "pause_for" else f"ask_{word}")
        _run(script, then, ask(*args), T0)  # sent as it was given
        clock[0] = given + late * 1000
        request = change if isinstance(change, Request) else change(clock[0])
        note(f"{word}{args} sent {late} us late: {request}")
        if request is not None:
            _run(script, sent, request, T0 + late)
        now = T0 + late
        for dt, cost in takes:
            now += dt
            got = [_run(script, limit, limit.ask_take(0, (cost,)), now) for limit in (then, sent)]
            note(f"t={now - T0} take {cost}: {got}")
            assert got[0] == got[1], ("P83", got)
    finally:
        for limit in (then, sent):
            client.delete(limit.key)
            limit.close()


# -- seconds as microseconds -----------------------------------------------------------


@given(
    word=st.sampled_from(["pause_for", "adopt", "quota"]),
    seconds=st.one_of(
        st.sampled_from([0.0, 1.1, 0.29, 3e-6, 5e-7, 1.5e-6, 2.5e-7, 123456.789, 1e9]),
        st.floats(0, 1e9),
        st.integers(0, 10**12).map(lambda us: us / 1e6),
    ),
)
def test_a_duration_reaches_redis_as_its_nanoseconds_rounded_up_to_the_microsecond(
    redis_server: RedisServer, client: Any, script: Any, word: str, seconds: float
) -> None:
    """P84: a duration the Redis limiter takes in seconds, ``pause_for``'s
    ``seconds`` and ``adopt``'s and ``quota``'s ``reset_after``, is its
    nearest whole nanosecond as the process counts it (P80: ``round(seconds
    * 10**9)``, what its own pause counts), rounded up to the whole
    microsecond for the script: the shared pause, reset or quota ends no
    sooner than the process's own and less than a microsecond after (1.1 s
    is 1,100,000 µs, where the float product ``1.1 * 1e6`` rounded up is
    1,100,001). Read back from the script at a chosen time: a take of one
    unit just after is told to wait exactly that (and, after the word that
    nothing is left, one interval more)."""
    limits = {"units": Limit(10, 4)}  # (T: 100,000 µs)
    limit = RedisLimit(redis_server.url, name=f"p84-{uuid.uuid4().hex[:12]}", limits=limits)
    limiter = RedisLimiter(Fifo(1), limit)
    given = 10**15 + 7
    limiter._clock = lambda: given  # type: ignore[method-assign]
    ns = round(seconds * 10**9)
    us = -(-ns // 1000)
    try:
        args = (seconds,) if word == "pause_for" else (0, seconds)
        getattr(limiter, word)(*args)
        if word == "pause_for":
            paused = limiter.statistics().paused_ns
            assert paused == ns, ("P84", "the process's own pause", paused, ns)
        ((change, _, _),) = limiter._pending
        request = change if isinstance(change, Request) else change(given)
        note(f"{word}{args}: {ns} ns, {us} us; {request}")
        if request is not None:
            _run(script, limit, request, T0)
        answer = _run(script, limit, limit.ask_take(0, (1,)), T0)
        note(f"take: {answer}")
        if word == "adopt":  # nothing left at the reset: a unit one interval later
            assert answer[:2] == (0, us + 100_000), ("P84", answer, us)
        elif us:
            assert answer[:2] == (0, us), ("P84", answer, us)
        else:  # (nothing holds it)
            assert answer[0] == 1, ("P84", answer)
    finally:
        client.delete(limit.key)
        limit.close()


@given(w=st.integers(1, 10**7))
@example(w=1_001_000)  # (the float product 1.001 * 1e6 is 1000999.9999999999)
def test_a_horizon_reaches_redis_as_its_nanoseconds_rounded_down_to_the_microsecond(
    redis_server: RedisServer, client: Any, script: Any, w: int
) -> None:
    """P44 through ``RedisLimit.ask_take``: a horizon of ``book`` seconds is
    its nearest whole nanosecond rounded down to the whole microsecond for
    the script, so a take the buckets allow in exactly ``w`` µs is booked
    under ``book = w / 1e6`` and refused under ``(w - 1) / 1e6``. (The float
    product ``book * 1e6`` rounded down made 1.001 s 1,000,999 µs: a take
    the buckets allow in exactly 1.001 s was refused.)"""
    limits = {"units": Limit(Fraction(10**6, w), 1)}  # (T: w µs)
    limit = RedisLimit(redis_server.url, name=f"p44-{uuid.uuid4().hex[:12]}", limits=limits)
    try:
        assert _run(script, limit, limit.ask_take(0, (1,)), T0)[:2] == (1, w)  # emptied
        short = _run(script, limit, limit.ask_take(0, (1,), book_ahead=(w - 1) / 1e6), T0)
        assert short[:2] == (0, w), ("P44", "beyond the horizon: refused", short)
        booked = _run(script, limit, limit.ask_take(0, (1,), book_ahead=w / 1e6), T0)
        assert booked[:2] == (-1, w), ("P44", "at the horizon: booked", booked)
    finally:
        client.delete(limit.key)
        limit.close()


# -- across a restart ------------------------------------------------------------------


@given(
    rates=st.lists(st.sampled_from(RATES), min_size=1, max_size=2),
    bursts=st.lists(st.integers(1, 5), min_size=2, max_size=2),
    steps=st.lists(
        st.tuples(
            st.one_of(st.just(0), st.integers(1, 600_000), st.sampled_from([100_000, 2_000_000])),
            st.lists(st.integers(0, 3), min_size=2, max_size=2),
            st.booleans(),
        ),
        min_size=1,
        max_size=30,
    ),
    lost=st.integers(0, 30),
)
# a burst before the loss and one after it, at one instant
@example(rates=[RATES[0]], bursts=[1, 1], steps=[(0, [1, 0], False)] * 2, lost=1)
def test_a_restart_lets_through_at_most_one_burst_more(
    client: Any, script: Any, rates: list[int], bursts: list[int], steps: list[Any], lost: int
) -> None:
    """P85: across a Redis restart, which loses the state (here deleted
    before the ``lost``-th take, as a restart, a ``FLUSHDB`` or an eviction
    would), the takes granted over any window that spans it are at most
    one burst more than the limit allows (P21: ``burst + d / T`` over
    ``d`` µs), of each limit: the new state starts with full buckets; and
    over a window on one side of it, no more than the limit allows. The
    plain take of one limit and the general steps alike (the script at
    chosen times)."""
    n = len(rates)
    bursts = bursts[:n]
    key = f"test:{{p85-{next(_keys)}}}"
    call = caller(script, rates, bursts, key)
    T = [Fraction(10**6, rate) for rate in rates]
    now, restart = T0, None
    #: (when, units, whether after the loss)
    granted: list[tuple[int, tuple[int, ...], bool]] = []
    try:
        for i, (dt, xs, general) in enumerate(steps):
            now += dt
            if i == lost:
                client.delete(key)
                restart = now
            units = tuple(xs[:n])
            if not any(units):
                units = (1, *units[1:])
            extra = ("", 0, 0, "0", 0, 1) if general else ()
            answer = call("take", now, 0, units, *extra)
            if answer[0]:
                granted.append((now, units, restart is not None))
        note(f"restart at {None if restart is None else restart - T0}: granted {granted}")
        for i, (start, _, _) in enumerate(granted):
            for end, _, _ in granted[i:]:
                d = end - start
                inside = [(u, after) for t, u, after in granted if start <= t <= end]
                # (grants at the loss's instant may come before it and after)
                spans = len({after for _, after in inside}) == 2
                for j in range(n):
                    got = sum(u[j] for u, _ in inside)
                    most = bursts[j] * (2 if spans else 1) + d / T[j]
                    assert got <= most, ("P85", j, start - T0, end - T0, spans, got, most)
    finally:
        client.delete(key)


# -- the bounds of the script's numbers ---------------------------------------------

#: 1e9 s, the longest duration the script takes, and the floats either side.
LONGEST = 1e9
below_longest = st.one_of(
    # (999999999.999999 s: the float product * 1e6 is 0.05 us short of it)
    st.sampled_from(
        [LONGEST, 10**9, math.nextafter(LONGEST, 0), 999_999_999.999999, 999_999_999.5]
    ),
    st.floats(LONGEST - 1, LONGEST),
)
above_longest = st.one_of(
    st.sampled_from(
        [math.nextafter(LONGEST, math.inf), 10**9 + 1, LONGEST + 1e-6, 1e13, 1e300, math.inf]
    ),
    st.floats(LONGEST, exclude_min=True),
    st.integers(10**9 + 1, 10**30),
)


def _refused(error: pytest.ExceptionInfo[PermitValueError], argument: str, value: object) -> None:
    """``error`` names ``argument`` and ``value`` (P88 to P90)."""
    got = error.value
    assert (got.argument, got.value) == (argument, value), (got.argument, got.value, argument)
    assert str(got).startswith(f"{argument}={value!r}: "), str(got)


@given(
    word=st.sampled_from(["pause_for", "adopt", "quota", "demand_ttl"]),
    inside=below_longest,
    outside=above_longest,
)
@example(word="demand_ttl", inside=999_999_999.999999, outside=math.nextafter(LONGEST, math.inf))
def test_a_duration_beyond_1e9_seconds_is_refused_and_one_within_is_honoured(
    redis_server: RedisServer,
    client: Any,
    script: Any,
    word: str,
    inside: float,
    outside: float,
) -> None:
    """P88: a duration of more than 1e9 s (about 31 years, the longest the
    script's microseconds hold: a pause, the upstream's word's or quota's
    reset, ``demand_ttl``) is refused with a ``PermitValueError`` naming
    the argument and the value, by the limiter and by the limit alike:
    nothing is sent to Redis, the limiter counts no pause and keeps nothing
    to send, and works on. One of 1e9 s or just less is accepted and
    honoured exactly (the script at a chosen time): the pause, reset or
    quota ends its nearest nanosecond rounded up to the microsecond later
    (P84), a published demand lives until then."""
    limits = {"units": Limit(10, 4)}  # (T: 100,000 µs)
    name = f"p88-{uuid.uuid4().hex[:12]}"
    limit = RedisLimit(redis_server.url, name=name, limits=limits)
    given = 10**15 + 7
    us = -(-round(inside * 10**9) // 1000)
    try:
        if word == "demand_ttl":
            with pytest.raises(PermitValueError) as error:
                RedisLimiter(Fifo(1), limit, global_priority=True, demand_ttl=outside)
            _refused(error, "demand_ttl", outside)
            limiter = RedisLimiter(Fifo(1), limit, global_priority=True, demand_ttl=inside)
            _run(script, limit, limit.ask_publish_demand((1,), limiter.demand_ttl), T0)
            words = client.hget(limit.demand_key, limit.process).split()
            note(f"demand_ttl={inside!r}: {words}")
            lives = int(words[0]) - T0
            assert lives == us, ("P88", lives, us)
            return
        argument = "seconds" if word == "pause_for" else "reset_after"
        longer = (outside,) if word == "pause_for" else (0, outside)
        with pytest.raises(PermitValueError) as error:
            getattr(limit, "pause" if word == "pause_for" else word)(*longer)
        _refused(error, argument, outside)
        limiter = RedisLimiter(Fifo(1), limit)
        limiter._clock = lambda: given  # type: ignore[method-assign]
        with pytest.raises(PermitValueError) as error:
            getattr(limiter, word)(*longer)
        _refused(error, argument, outside)
        assert limiter._pending == [], ("P88", "kept to send", limiter._pending)
        stats = limiter.statistics()
        assert (stats.pauses, stats.paused_ns) == (0, 0), ("P88", stats)
        assert limiter.pause_left() == 0, ("P88", limiter.pause_left())
        assert client.keys(f"*{name}*") == [], ("P88", "sent", client.keys(f"*{name}*"))
        # it works on: the duration within, honoured
        args = (inside,) if word == "pause_for" else (0, inside)
        getattr(limiter, word)(*args)
        ((change, _, _),) = limiter._pending
        request = change if isinstance(change, Request) else change(given)
        assert request is not None
        _run(script, limit, request, T0)
        answer = _run(script, limit, limit.ask_take(0, (1,)), T0)
        note(f"{word}{args}: {us} us; take: {answer}")
        want = us + 100_000 if word == "adopt" else us  # (adopt: nothing left at the reset)
        assert answer[:2] == (0, want), ("P88", answer, want)
    finally:
        client.delete(limit.key, limit.demand_key)
        limit.close()


@given(
    burst=st.one_of(
        st.sampled_from([2**53 + 1, 2**53 + 2, 2**63 - 1, 2**63, 2**64, 10**30]),
        st.integers(2**53 + 1, 2**80),
    ),
    rate_too=st.booleans(),
    most=st.sampled_from([(10**6, 10**15), (1, 10**9), (Fraction(1, 1000), 10**6)]),
)
def test_a_burst_beyond_2_53_is_refused_and_the_most_the_refill_allows_honoured(
    redis_server: RedisServer,
    client: Any,
    script: Any,
    burst: int,
    rate_too: bool,
    most: tuple[int | Fraction, int],
) -> None:
    """P89: a change of limit to a burst above 2**53 (the units a Lua number
    counts exactly) is refused with a ``PermitValueError`` naming ``burst``
    and the value, in the process, by the limiter and by the limit, with
    the rate or alone (where the process cannot judge the refill: the
    script, judging by the rate Redis holds, would refuse it as a fault
    that closes the limiter): nothing is sent, the limiter's limits are as
    they were, and it works on. The largest burst the refill bound allows
    at a rate (10**15 at 10**6 a second: every burst it allows is below
    2**53) is taken, stored, and honoured exactly: the bucket, full after
    it refills, lets the whole burst through at once and then one unit
    an interval later (the script at chosen times)."""
    rate, largest = most
    name = f"p89-{uuid.uuid4().hex[:12]}"
    limit = RedisLimit(redis_server.url, name=name, rate=rate, burst=1)
    change: dict[str, Any] = {"burst": burst, **({"rate": rate} if rate_too else {})}

    async def main() -> None:
        async with open_limiter(Fifo(1), redis_server.url, name=name, rate=rate) as limiter:
            with pytest.raises(PermitValueError) as error:
                limiter.set_limit(**change)
            _refused(error, "burst", burst)
            assert "at most 2**53" in str(error.value), str(error.value)
            assert limiter.limits == {"units": Limit(rate, 1)}, ("P89", limiter.limits)
            assert limiter._pending == [], ("P89", "kept to send", limiter._pending)
            assert client.keys(f"*{name}*") == [], ("P89", "sent", client.keys(f"*{name}*"))
            await limiter.acquire()  # it works on
            assert not limiter.closed
            limiter.set_limit(**{**change, "burst": largest})
            assert limiter.limits == {"units": Limit(rate, largest)}, ("P89", limiter.limits)
            with anyio.fail_after(10):  # (the change sent)
                while limiter._pending:
                    await anyio.sleep(0.001)

    try:
        with pytest.raises(PermitValueError) as error:
            limit.set_limit(**change)
        _refused(error, "burst", burst)
        assert "at most 2**53" in str(error.value), str(error.value)
        assert client.keys(f"*{name}*") == [], ("P89", "sent", client.keys(f"*{name}*"))
        anyio.run(main)
        T = 10**6 // rate if rate >= 1 else int(10**6 / rate)
        stored = client.hget(limit.live_key, "units")
        assert stored == f"{T} {largest}".encode(), ("P89", stored)
        client.delete(limit.key)  # (a full bucket of the changed limit, at chosen times)
        got = [
            _run(script, limit, limit.ask_take(0, (x,)), t)[:2]
            for t, x in [(T0, largest), (T0, 1), (T0 + T - 1, 1), (T0 + T, 1)]
        ]
        note(f"burst {largest} at {T} us a unit: {got}")
        want = [(1, largest * T), (0, T), (0, 1), (1, T)]
        assert got == want, ("P89", got, want)
    finally:
        client.delete(limit.key, limit.live_key)
        limit.close()


@given(
    # (rate, burst, T in us, the most units a settle may add: 1e9 s of them)
    most=st.sampled_from(
        [
            (1, 10, 10**6, 10**9),
            (Fraction(1, 1000), 1000, 10**9, 10**6),
            (Fraction(1, 10**9), 1, 10**15, 1),
            (10**6, 5, 1, 10**15),
        ]
    ),
    cost=st.integers(1, 10),
    over=st.one_of(
        st.integers(1, 3), st.sampled_from([10**9, 2**53, 2**63, 10**30]), st.integers(1, 10**40)
    ),
    named=st.booleans(),
)
def test_a_settle_whose_debt_would_outlast_1e9_seconds_is_refused(
    redis_server: RedisServer,
    client: Any,
    script: Any,
    most: tuple[int | Fraction, int, int, int],
    cost: int,
    over: int,
    named: bool,
) -> None:
    """P90: a settle that charges units more whose debt would take more
    than 1e9 s to pay back at the limit's rate (the bound of every time
    the script keeps) is refused with a ``PermitValueError`` naming
    ``actual`` and the value (``units`` for ``RedisLimit.charge``): nothing
    is sent, the permit is still the caller's to settle, and the limiter
    works on. A settle of exactly 1e9 s of units more is sent and
    honoured exactly: the shared bucket's time moves on by exactly those
    units' microseconds, and a take after it (the script at a chosen time)
    waits until the debt is paid, told the units left (below zero)."""
    rate, burst, T, largest = most
    cost = min(cost, burst)
    name = f"p90-{uuid.uuid4().hex[:12]}"
    limit = RedisLimit(redis_server.url, name=name, rate=rate, burst=burst)
    too_much = largest + over

    def actual(more: int) -> int | dict[str, int]:
        return {"units": cost + more} if named else cost + more

    async def main() -> None:
        async with open_limiter(
            Fifo(1), redis_server.url, name=name, rate=rate, burst=burst, settle_window=60
        ) as limiter:
            permit = await limiter.acquire(cost=cost)
            before = client.hget(limit.key, "tat:units")
            with pytest.raises(PermitValueError) as error:
                permit.settle(actual(too_much))
            _refused(error, "actual", actual(too_much))
            assert limiter._pending == [], ("P90", "kept to send", limiter._pending)
            assert client.hget(limit.key, "tat:units") == before, ("P90", "sent")
            permit.settle(actual(largest))  # (still the caller's to settle)
            with anyio.fail_after(10):  # (the settle sent)
                while limiter._pending:
                    await anyio.sleep(0.001)
            after = client.hget(limit.key, "tat:units")
            note(f"the bucket's time: {before!r} then {after!r}")
            assert int(after) - int(before) == largest * T, ("P90", before, after)
            assert not limiter.closed

    try:
        with pytest.raises(PermitValueError) as error:
            limit.charge((too_much,))
        _refused(error, "units", (too_much,))
        assert client.keys(f"*{name}*") == [], ("P90", "sent", client.keys(f"*{name}*"))
        _run(script, limit, limit.ask_charge((largest,)), T0)
        answer = _run(script, limit, limit.ask_take(0, (1,)), T0)
        note(f"{largest} units more at {T} us a unit: {answer}")
        want = (0, (largest - burst + 1) * T, burst - largest)
        assert answer == want, ("P90", answer, want)
        client.delete(limit.key)
        if T >= 10**6:  # (through the limiter: no unit comes back while it runs)
            anyio.run(main)
    finally:
        client.delete(limit.key)
        limit.close()


#: The furthest past the script's now a bucket's time is kept (us, P91): a
#: reset of 1e9 s with nothing left (P88), then a full bucket's refill of
#: 1e9 s (P21), the longest any one call holds a bucket.
FURTHEST = 2 * 10**15

#: (kind, us passed before it, a, b): a settle of ``a`` units more (at most
#: the most one settle may charge, P90), a take booking ahead ``a`` s or
#: leasing up to ``b`` permits, the upstream's word of ``b`` units left
#: until ``a`` s, a pause of ``a`` s, a change of limit to ``2**a`` us a
#: unit and a burst of ``b``. (Twelve steps pass at most 4.8e15 us: the
#: script's now stays where now + 2e9 s is below 2**53 us, as Redis's is
#: until about the year 2190.)
debt_steps = st.tuples(
    st.sampled_from(["settle"] * 4 + ["take", "adopt", "pause", "change"]),
    st.one_of(st.just(0), st.integers(1, 10**6), st.just(4 * 10**14)),
    st.one_of(st.just(10**15), st.just(10**9), st.integers(-3, 10**15)),
    st.integers(0, 5),
)


@given(
    k=st.sampled_from([0, 10, 20, 30]),
    burst=st.integers(1, 5),
    steps=st.lists(debt_steps, min_size=2, max_size=12),
)
@example(k=0, burst=5, steps=[("settle", 0, 10**15, 0)] * 8)  # (the limit wedged before)
def test_the_debt_settles_add_up_to_is_held_up_to_2e9_seconds(
    redis_server: RedisServer, client: Any, script: Any, k: int, burst: int, steps: list[Any]
) -> None:
    """P91: whatever settles add up to, and whatever else moves a bucket's
    time on (takes booked or leased, the upstream's word, a change of limit
    carrying a debt over to a slower rate), the script stores the bucket's
    time exactly as the buckets would, but never more than 2e9 s
    (``FURTHEST`` us) past its now: a call that would put it later puts it
    there. So every take after it is answered, refused and told the wait
    until the debt is paid, or allowed: never a failure. At ``2**k`` us a
    unit, where the script's arithmetic is exact."""
    T = 2**k
    name = f"p91-{uuid.uuid4().hex[:12]}"
    limit = RedisLimit(redis_server.url, name=name, rate=Fraction(10**6, T), burst=burst)
    largest = 10**15 // T  # (the most units one settle may charge: P90)
    stored: int | None = None  # the bucket's time the key holds (None: no key)
    pause = 0
    now = T0

    def store(tat: int) -> None:
        """The script's write: at most FURTHEST past now; the key deleted
        once the bucket is full and no pause holds."""
        nonlocal stored
        stored = min(tat, now + FURTHEST) if tat > now or pause > now else None

    def bucket() -> int:
        """The bucket's time now (a time past is a full bucket's)."""
        return max(now, stored or now)

    def take(book: int = 0, lease: int = 1) -> tuple[int, int]:
        """A take of one unit, booking ``book`` us ahead or leasing up to
        ``lease`` permits: stores as the script does, and says what it
        answers (taken, the wait)."""
        at = max(pause, now, bucket() - (burst - 1) * T)
        if at > now and (pause > now or at - now > book):
            return (0, at - now)
        tat, taken = bucket(), 0
        while True:  # a lease: more, while allowed now with half the burst left
            tat, taken = tat + T, taken + 1
            if at > now or taken >= lease:
                break
            if tat - (burst - min(1 + burst // 2, burst)) * T > now:
                break
        store(tat)
        if at > now:
            return (-1, at - now)  # booked
        return (taken, max(now, bucket() - (burst - 1) * T) - now)

    try:
        for kind, dt, a, b in steps:
            now += dt
            if kind == "settle":
                units = min(a, largest)
                got = _run(script, limit, limit.ask_charge((units,)), now)
                store(max(now, bucket() + units * T))
                want = (1, 0)
            elif kind == "take":
                book, lease = (min(max(a, 0), 10**9), 1) if b % 2 else (0, b + 1)
                got = _run(
                    script, limit, limit.ask_take(0, (1,), book_ahead=book, lease=lease), now
                )
                want = take(book * 10**6, lease)
            elif kind == "adopt":
                remaining, seconds = min(b, burst), min(max(a, 0), 10**9)
                got = _run(script, limit, limit.ask_adopt(remaining, seconds), now)
                store(max(bucket(), now + seconds * 10**6 + (burst - remaining) * T))
                want = (1, 0)
            elif kind == "pause":
                seconds = min(max(a, 0), 10**9)
                got = _run(script, limit, limit.ask_pause(seconds), now)
                pause = max(pause, now + seconds * 10**6)
                store(bucket())
                want = (1, max(pause, now) - now)
            else:
                new_T, new_burst = 2 ** (a % 31), max(b, 1)
                change = limit.ask_set_limit(rate=Fraction(10**6, new_T), burst=new_burst)
                got = _run(script, limit, change, now)
                short = (new_burst - burst) * new_T + Fraction((bucket() - now) * new_T, T)
                T, burst = new_T, new_burst
                store(now + max(0, math.ceil(short)))
                want = (1, 0)
            # then a take now: answered, refused with its wait or allowed, not a failure
            for asked, answer in ((kind, want), ("take after it", None)):
                if answer is None:
                    got, answer = _run(script, limit, limit.ask_take(0, (1,)), now), take()
                left = (burst * T - (bucket() - now)) // T
                held = client.hget(limit.key, "tat:units")
                note(f"t={now - T0} {asked} {a} {b}: {got[:3]}, the bucket's time {held!r}")
                assert got[:3] == (*answer, left), ("P91", asked, got, (*answer, left))
                assert (None if held is None else int(held)) == stored, ("P91", held, stored)
    finally:
        client.delete(limit.key, limit.live_key)
        limit.close()


@pytest.mark.parametrize("debtor", [0, 1])
def test_every_limits_debt_is_held_up_to_2e9_seconds_by_hand(
    client: Any, script: Any, debtor: int
) -> None:
    """P91 by hand, for each of two limits (1/s, burst 1 each): ten settles
    of 1e9 s of units each on one of them put its bucket's time 2e9 s past
    now, not 1e10 s (past 2**53 us: every take of the limit failed); a take
    of a unit of each is refused, told the wait until that debt is paid,
    and the other limit is untouched."""
    key = f"test:{{p91-{next(_keys)}}}"
    call = caller(script, [1, 1], [1, 1], key)
    debt = tuple(10**9 if i == debtor else 0 for i in range(2))
    try:
        for _ in range(10):
            assert call("give", T0, 0, debt)[0] == 1, "P91"
        held = client.hget(key, f"tat:l{debtor}")
        assert held == str(T0 + FURTHEST).encode(), ("P91", held)
        got = call("take", T0, 0, (1, 1))
        left = [1, 1]
        left[debtor] = -2 * 10**9 + 1  # (units: the debt, less the burst's one)
        assert got == [0, FURTHEST, *left], ("P91", got)
    finally:
        client.delete(key)


#: (kind, us passed before it, the process, its waiters, the level of its
#: take): a take in the line, a unit given back, or the process leaving the
#: line. (Twelve steps pass at most 4.8e15 us, as P91's.)
line_steps = st.tuples(
    st.sampled_from(["take"] * 6 + ["give", "leave"]),
    st.one_of(st.just(0), st.integers(1, 10**6), st.sampled_from([10**14, 4 * 10**14])),
    st.sampled_from("abcdefghij"),
    st.integers(1, 3),
    st.integers(0, 1),
)


@given(
    interval=st.sampled_from([10**15, 5 * 10**14, 2**48, 10**14]),
    burst=st.integers(1, 3),
    strict=st.booleans(),
    steps=st.lists(line_steps, min_size=1, max_size=12),
)
@example(  # (the limit wedged before: h's turn, 9.7e15 us, failed its next take)
    interval=10**15,
    burst=1,
    strict=False,
    steps=[("take", 0, p, 2, 0) for p in "abcdefgh"] + [("take", 1, "h", 2, 0)],
)
def test_a_turn_in_the_line_is_held_up_to_2e9_seconds(
    client: Any, script: Any, interval: int, burst: int, strict: bool, steps: list[Any]
) -> None:
    """P92: at intervals of up to 1e9 s a unit, with up to ten processes in
    the line (strict priority across them, or none), a turn is told and
    stored as the buckets' time for the take plus one step per process
    ahead (the line's rule), but never more than 2e9 s (``FURTHEST`` us) past the
    script's now: one that would come later is told and stored as that. So
    every take after it is answered as the buckets and the line say: never
    a failure. At whole µs, where the script's arithmetic is exact."""
    burst = min(burst, 10**15 // interval)  # (a full bucket refills within 1e9 s: P21)
    rate = Fraction(10**6, interval)
    key = f"test:{{p92-{next(_keys)}}}"
    call = caller(script, [rate], [burst], key)
    model = Buckets([rate], [burst])
    now = T0
    try:
        for kind, dt, process, waiting, level in steps:
            now += dt
            counts = [waiting if lv == level else 0 for lv in range(2)]
            words = " ".join(map(str, counts))
            published = (process, TTL, level, words) if strict else ("", 0, 0, "0")
            if kind == "take":
                extra = (*published, 0, 1, process, level, waiting, GRACE)
                got = tuple(call("take", now, 0, (1,), *extra))
                demand = (process, TTL, level, tuple(counts)) if strict else None
                line = (process, level if strict else 0, waiting, GRACE)
                want = model.take(now, 0, (1,), demand, line=line)
            elif kind == "give":
                got, want = tuple(call("give", now, 0, (-1,))), model.give(now, (-1,))
            else:
                got, want = leave_the_line(call, model, now, process, strict)
            held = {p.decode(): int(v.split()[0]) for p, v in client.hgetall(key + ":line").items()}
            turns = {p: int(entry[0]) for p, entry in model.line.items()}
            note(f"t={now - T0} {kind} {process} L{level} waiting {waiting}: {got}, {want}")
            note(f"  the line: {held}")
            assert got == want, ("P92", got, want)
            assert held == turns, ("P92", held, turns)
            assert all(turn <= now + FURTHEST for turn in held.values()), ("P92", held)
    finally:
        client.delete(key, *(key + s for s in (":demand", ":line")))


#: The virtual times of global shares the two runs start from: the start of
#: the last grant, and each level's finish (``None``: none, a level never
#: granted).
starts = st.tuples(
    st.integers(0, 3000), st.lists(st.none() | st.integers(0, 3000), min_size=3, max_size=3)
)


def start(shares: dict[bytes, bytes], level: int) -> int:
    """When ``level``'s next grant starts, as the script reads ``shares``."""
    return max(int(shares.get(f"F{level}".encode(), 0)), int(shares.get(b"V", 0)))


@given(
    limits=global_limits,
    weights=st.sampled_from([*WEIGHTS, (1000, 999, 1)]),
    lease=st.sampled_from(LEASE),
    line=st.booleans(),
    virtual=starts,
    large=st.one_of(
        st.sampled_from([2**52 - 5000, 2**52, 2**53 - 6001]), st.integers(2**52, 2**53 - 6001)
    ),
    steps=st.lists(demand_ops, min_size=1, max_size=30),
)
@example(  # (the limit wedged before: level 2's finish past 2**53 at the first grant)
    limits=([10], [4], (1,), 0),
    weights=(1000, 999, 1),
    lease=1,
    line=False,
    virtual=(0, [None, None, None]),
    large=2**53 - 6001,
    steps=[("take", 0, "a", 2, [0, 0, 2], 0), ("take", 0, "a", 2, [0, 0, 2], 0)],
)
def test_the_virtual_times_of_global_shares_stay_small_under_unbroken_load(
    client: Any,
    script: Any,
    limits: Limits,
    weights: tuple[int, ...],
    lease: int,
    line: bool,
    virtual: tuple[int, list[int | None]],
    large: int,
    steps: list[Any],
) -> None:
    """P93: global shares' virtual times only grow while grants go on (each
    moves its level's finish on by its units times ``lcm / w``), as months
    of unbroken load would leave them, up to just below 2**53: from there,
    every take under global shares (and in the line) is answered exactly as
    from the same times less that much, and so never fails: the times
    stored stay below 2**53, and every level's next start is the small
    run's plus one constant."""
    rates, bursts, units, shared = limits
    costs = " ".join(str(math.lcm(*weights) // w) for w in weights)
    v, finishes = virtual
    runs = []
    for offset in (0, large):
        key = f"test:{{p93-{next(_keys)}}}"
        times = {"V": offset + v}
        times.update({f"F{lv}": offset + f for lv, f in enumerate(finishes) if f is not None})
        client.hset(key + ":shares", mapping=times)
        runs.append((key, caller(script, rates, bursts, key)))
    now = T0
    try:
        for kind, dt, process, level, waiting, book in steps:
            now += dt
            counts = list(waiting)
            if kind == "take":
                counts[level] = max(1, counts[level])  # the one taking waits
            words = " ".join(map(str, counts))
            got = []
            for _, call in runs:
                if kind == "demand":
                    nothing = (0,) * len(rates)
                    got.append(tuple(call("demand", now, 0, nothing, process, TTL, 0, words)))
                else:
                    place = (process, level, sum(counts), GRACE) if line else ("", 0, 0, 0)
                    extra = (book, lease, *place, costs, shared + 1)
                    got.append(
                        tuple(call("take", now, 0, units, process, TTL, level, words, *extra))
                    )
            stored = [client.hgetall(key + ":shares") for key, _ in runs]
            note(f"t={now - T0} {kind} {process} L{level} {counts}: {got}, the shares {stored}")
            assert got[1] == got[0], ("P93", got[1], got[0])
            for value in stored[1].values():
                assert int(value) < 2**53, ("P93", stored[1])
            # every level's next start (its finish, or V if later) moved by as much
            moved = {start(stored[1], lv) - start(stored[0], lv) for lv in range(len(weights))}
            assert len(moved) == 1, ("P93", "the starts moved apart", stored)
    finally:
        for key, _ in runs:
            client.delete(key, *(key + s for s in (":demand", ":line", ":shares")))


#: The most a level's finish may move in one grant under global shares
#: (their renormalisation is exact while no grant moves it further).
MOST_VIRTUAL = 2**52

#: Weights whose least common multiple is huge though they add up to little:
#: the primes up to 47 (sum 328, lcm 6.1e17), and a few near 1000.
large_lcm = st.sampled_from(
    [
        (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47),
        (1000, 999, 998, 997, 991),
        (1, 2**40 + 1),
        (3, 2**50),
        (1, 2**52),
        (1, 2**52 + 1),
        (2**20, 2**20 - 1, 2**20 - 3),
    ]
)


@given(
    weights=large_lcm | st.lists(st.integers(1, 60), min_size=1, max_size=8).map(tuple),
    off=st.sampled_from([0, 1]) | st.integers(-3, 3),
    small=st.booleans(),
    second=st.booleans(),
)
@example(
    weights=(2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47),
    off=0,
    small=False,
    second=False,
)
@example(weights=(1, 2**52), off=0, small=False, second=False)  # (burst 1 exactly at the bound)
@example(weights=(1000, 999, 998, 997, 991), off=1, small=False, second=False)
@example(weights=(1000, 999, 998, 997, 991), off=1, small=False, second=True)
def test_weights_a_grant_of_the_burst_moves_past_2_52_are_refused(
    redis_server: RedisServer,
    client: Any,
    weights: tuple[int, ...],
    off: int,
    small: bool,
    second: bool,
) -> None:
    """P94: a grant under global shares moves its level's finish by its
    units times ``lcm(weights) // w``: at most the shared limit's burst
    times ``lcm(weights) // min(weights)``. Where that passes 2**52 (where
    their renormalisation stops being exact), the weights are refused with
    a ``PermitValueError`` naming them, by the limit's take (``weights``)
    and by a limiter opened with a ``Shares`` policy under global priority
    (``policy``), and a change of limit that raises the shared burst so
    far is refused naming ``burst``: nothing is sent, the limiter's limits
    are as they were. Weights and a burst within it are taken: a grant of
    the whole burst at the level of the smallest weight stores exactly
    that finish, and the next take is answered (before, weights with an
    lcm of 6.1e17 stored a finish past 2**53 at the first grant, and every
    take after it failed). With ``second``, the shared limit is the second,
    beside a first of burst 1: the weights are judged by the shared
    limit's burst, not the first's."""
    cost = math.lcm(*weights) // min(weights)
    at = MOST_VIRTUAL // cost  # the largest burst the weights allow
    burst = 1 if small else max(1, min(10**15, at + off))  # (10**15: the refill's bound)
    refused = burst * cost > MOST_VIRTUAL
    level = weights.index(min(weights))
    counts = tuple(int(lv == level) for lv in range(len(weights)))
    note(f"cost {cost}, burst {burst}: {burst * cost} {'>' if refused else '<='} 2**52")
    name = f"p94-{uuid.uuid4().hex[:12]}"
    first = {"first": Limit(10**6, 1)} if second else {}
    shared = len(first)
    limit = RedisLimit(redis_server.url, name=name, limits={**first, "units": Limit(10**6, burst)})
    try:

        def take(units: int) -> Any:
            cost = (0,) * shared + (units,)
            return limit.take(cost=cost, level=level, demand=counts, weights=weights, shared=shared)

        if refused:
            with pytest.raises(PermitValueError) as error:
                take(burst)
            _refused(error, "weights", weights)
            assert "least common multiple" in str(error.value), str(error.value)
            if sum(weights) <= 10**6:  # (Shares' own bound)
                policy = Shares(weights, limit="units")
                with pytest.raises(PermitValueError) as refusal:
                    RedisLimiter(policy, limit, global_priority=True)
                _refused(refusal, "policy", policy)
            assert client.keys(f"*{name}*") == [], ("P94", "sent", client.keys(f"*{name}*"))
        else:
            if sum(weights) <= 10**6:
                policy = Shares(weights, limit="units")
                RedisLimiter(policy, limit, global_priority=True)  # (accepted)
            answer = take(burst)
            shares = client.hgetall(limit.shares_key)
            note(f"the whole burst at level {level}: {answer}, the shares {shares}")
            assert answer.allowed == 1, ("P94", answer)
            assert shares == {b"V": b"0", f"F{level}".encode(): str(burst * cost).encode()}, (
                "P94",
                shares,
                burst * cost,
            )
            again = take(1)  # answered: the finish read back
            assert again.allowed in (0, 1), ("P94", again)
        if cost > MOST_VIRTUAL or sum(weights) > 10**6:
            return
        # a limiter opened at burst 1, its shared burst raised to `burst`
        url = redis_server.url
        anyio.run(_raise_the_burst, url, f"{name}-1", weights, burst, refused, second)
        stored = client.hget(f"permits:{{{name}-1}}:limits", "units")
        assert stored == (None if refused else f"1 {burst}".encode()), ("P94", stored)
    finally:
        client.delete(limit.key, limit.demand_key, limit.shares_key)
        client.delete(*(f"permits:{{{name}-1}}{s}" for s in ("", ":limits", ":demand")))
        limit.close()


async def _raise_the_burst(
    url: str, name: str, weights: tuple[int, ...], burst: int, refused: bool, second: bool
) -> None:
    """P94: a limiter under global shares by ``weights``, opened at burst 1,
    asked to raise it to ``burst``: refused naming it (the limits as they
    were, nothing sent) or taken. With ``second``, the shared limit is the
    second, beside a first of burst 1."""
    policy = Shares(weights, limit="units")
    first = {"first": Limit(10**6, 1)} if second else {}
    opened = {**first, "units": Limit(10**6, 1)}
    async with open_limiter(policy, url, name=name, limits=opened, global_priority=True) as limiter:
        if refused:
            with pytest.raises(PermitValueError) as error:
                limiter.set_limit(burst=burst, limit="units")
            _refused(error, "burst", burst)
            assert limiter.limits == opened, ("P94", limiter.limits)
            assert limiter._pending == [], ("P94", "kept to send", limiter._pending)
        else:
            limiter.set_limit(burst=burst, limit="units")
            raised = {**first, "units": Limit(10**6, burst)}
            assert limiter.limits == raised, ("P94", limiter.limits)
            with anyio.fail_after(10):  # (the change sent)
                while limiter._pending:
                    await anyio.sleep(0.001)


@given(
    quota=st.sampled_from([(Fraction(10_000, 86_400), 10_000), (Fraction(1, 60), 600)]),
    second=st.sampled_from([(10, 10), (100, 5), (1, 3)]),
    processes=st.integers(2, 5),
    cost=st.integers(1, 3),
)
@example(quota=(Fraction(10_000, 86_400), 10_000), second=(10, 10), processes=3, cost=1)
def test_a_limit_with_room_does_not_space_the_line(
    client: Any,
    script: Any,
    quota: tuple[Fraction, int],
    second: tuple[int, int],
    processes: int,
    cost: int,
) -> None:
    """P100: beside a limit that holds a take back, one with room for many
    (a day's quota, its units' interval hours long, beside a rate a
    second) does not space the processes in the line: each process ahead
    counts one step of the limit that holds the take back, the one whose
    bucket is the last to allow it. The second's bucket emptied, processes
    refused one after the other are told turns one interval of the
    second's limit apart (at 10 a second beside 10,000 a day: 0.1 s, 0.2 s,
    0.3 s; the slowest limit's step told them 0.1 s, 8.74 s, 17.38 s, and
    the limit stood idle while their waiters waited). The script at a
    chosen time, against the model of P48."""
    rate, burst = second
    cost = min(cost, burst)
    rates: list[int | Fraction] = [rate, quota[0]]
    bursts = [burst, quota[1]]
    key = f"test:{{p100-{next(_keys)}}}"
    call = caller(script, rates, bursts, key)
    model = Buckets(rates, bursts)
    units = (cost, cost)
    now = T0
    try:
        for _ in range(burst // cost):  # the second's bucket emptied
            got, want = tuple(call("take", now, 0, units)), model.take(now, 0, units)
            assert got == want, ("P100", got, want)
        turns = []
        for process in "abcdef"[:processes]:
            extra = ("", 0, 0, "0", 0, 1, process, 0, 2, GRACE)
            got = tuple(call("take", now, 0, units, *extra))
            want = model.take(now, 0, units, line=(process, 0, 2, GRACE))
            note(f"{process}: {got}, {want}")
            assert got == want, ("P100", got, want)
            turns.append(got[1])
        interval = 10**6 // rate
        first = turns[0]  # when the second's bucket holds the take
        assert first <= cost * interval, ("P100", turns)
        want_turns = [first + k * cost * interval for k in range(processes)]
        assert turns == want_turns, ("P100", turns, want_turns)
    finally:
        client.delete(key, *(key + s for s in (":demand", ":line")))


def test_the_line_is_stepped_by_the_limit_that_holds_the_take_back_with_its_reserve(
    client: Any, script: Any
) -> None:
    """P100 by hand, with a reserve: 10/s burst 5, emptied, beside 1/s
    burst 5 with one unit left; takes of a unit of each at reserve 1. The
    second limit holds the take back once the reserve is counted (two
    units there in 1 s; the first's in 0.2 s), though not without it (its
    one unit is there now, the first's in 0.1 s): two processes refused
    one after the other are told turns one interval of the second apart,
    1 s and 2 s, not 1 s and 1.1 s. The script at a chosen time, against
    the model of P48."""
    key = f"test:{{p100-{next(_keys)}}}"
    call = caller(script, [10, 1], [5, 5], key)
    model = Buckets([10, 1], [5, 5])
    try:
        got, want = tuple(call("take", T0, 0, (5, 4))), model.take(T0, 0, (5, 4))
        assert got == want == (1, 3_000_000, 0, 1), ("P100", got, want)  # 0 and 1 left
        turns = []
        for process in "ab":
            extra = ("", 0, 0, "0", 0, 1, process, 0, 2, GRACE)
            got = tuple(call("take", T0, 1, (1, 1), *extra))
            want = model.take(T0, 1, (1, 1), line=(process, 0, 2, GRACE))
            assert got == want, ("P100", process, got, want)
            turns.append(got[1])
        assert turns == [1_000_000, 2_000_000], ("P100", turns)
    finally:
        client.delete(key, *(key + s for s in (":demand", ":line")))


def test_an_empty_tag_from_the_prefix_is_refused_naming_the_prefix() -> None:
    """P72: the refusal of an empty hash tag names where its brace is: the
    prefix (``p{}``), not the limit's name."""
    with pytest.raises(PermitValueError) as refused:
        RedisLimit("redis://127.0.0.1:1", name="api", prefix="p{}", rate=1, burst=1)
    assert (refused.value.argument, refused.value.value) == ("prefix", "p{}"), "P72"
