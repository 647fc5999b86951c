"""P21, P22, P38-P41: the shared limit's script on a real Redis, at chosen times.

The script the limiter runs reads the time from Redis; the one tested here
is the same text with the time taken from ``ARGV`` instead
(``script_source(clock="argv")``), so that each call happens at a time the
test chooses. Its answers are compared with exact token buckets written from
the definition (``Fraction`` arithmetic, no GCRA: one bucket per limit, a
pause, the upstream's word, a change of limit), at rates whose interval is a
whole number of microseconds. Mutants of the script (one limit charged, the
pause ignored) are run through the same property, which must catch them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, Phase, example, given, note, settings
from hypothesis import strategies as st

from permits.adapters.redis import script_source
from permits.core import MAX_QUOTAS

from reference import quotas_kept

_keys = itertools.count()

Answer = tuple[Any, ...]
#: (process, time to live in us, level, waiters per level)
Demand = tuple[str, int, int, tuple[int, ...]]
#: (process, level, its waiters, the grace of a turn in us)
Line = tuple[str, int, int, int]

#: The furthest past now a turn in the line is kept (us, P92): 2e9 s, as a
#: bucket's time (P91).
FURTHEST_TURN = 2 * 10**15


class Buckets:
    """The definition: per limit, ``burst`` units of capacity refilled at
    ``rate`` (the tokens may go below zero: a debt); a take of ``x`` units
    with reserve ``R`` is granted only if every limit it takes from holds
    ``min(x + R, burst)`` units (a limit it takes nothing from holds it in
    no way, whatever its debt: P96) and no pause holds; then every limit
    gives its part at once."""

    def __init__(self, rates: Sequence[int | Fraction], bursts: Sequence[int]) -> None:
        self.T = [Fraction(10**6, rate) for rate in rates]  # microseconds per unit
        self.burst = list(bursts)
        self.tokens = [Fraction(b) for b in bursts]
        self.pause = 0
        self.at: int | None = None
        #: Global priority: each process's (expiry, waiters per level).
        self.demand: dict[str, tuple[int, tuple[int, ...]]] = {}
        #: Global shares: the start of the last grant, each level's finish.
        self.virtual = 0
        self.finish: dict[int, int] = {}
        #: The line: each waiting process's turn (us), level and place (when
        #: it joined).
        self.line: dict[str, tuple[Fraction, int, int]] = {}
        #: The upstream's quotas of each limit in force: each one's units
        #: left and its end (us).
        self.quotas: list[list[tuple[int, int]]] = [[] for _ in bursts]
        #: Whether a limit was changed (the change is stored, with no end):
        #: from then on every answer ends with the limits it used.
        self.stored = False

    def elsewhere(self, process: str, now: int) -> list[int]:
        """Waiters of other live processes, per level; the demand of
        processes gone quiet is forgotten."""
        for other, (expiry, _) in list(self.demand.items()):
            if other != process and expiry <= now:
                del self.demand[other]
        waits = [0] * max((len(c) for _, c in self.demand.values()), default=0)
        for other, (_, counts) in self.demand.items():
            if other != process:
                for level, count in enumerate(counts):
                    waits[level] += count
        return waits

    def ahead(self, process: str, level: int, now: int) -> int:
        """Waiters of other live processes at levels more urgent than ``level``."""
        return sum(self.elsewhere(process, now)[:level])

    def expiry(self, process: str, now: int, levels: Sequence[int]) -> int:
        """When the last entry of another live process with a waiter at one
        of ``levels`` expires (``now`` if none)."""
        self.elsewhere(process, now)  # (the expired forgotten)
        return max(
            (
                expiry
                for other, (expiry, counts) in self.demand.items()
                if other != process and any(lv < len(counts) and counts[lv] for lv in levels)
            ),
            default=now,
        )

    def start(self, level: int) -> int:
        """Global shares: when ``level``'s next grant starts, in virtual time."""
        return max(self.finish.get(level, 0), self.virtual)

    def soonest(self, first: int, counts: Sequence[int]) -> int:
        """Global shares: of the levels a process waits at (``first``, unless
        -1, and those with ``counts``), the one whose next grant starts
        soonest, ``first`` among equals, then the most urgent; -1 if none."""
        levels = {lv for lv, c in enumerate(counts) if c > 0} | ({first} - {-1})
        if not levels:
            return -1
        return min(levels, key=lambda lv: (self.start(lv), lv != first, lv))

    def held_for(
        self, process: str, now: int, counts: Sequence[int], level: int
    ) -> tuple[int, int]:
        """Global shares: the level of ``process`` owed first (of the take's
        ``level`` and those it waits at), and the levels other live
        processes wait at whose next grant starts sooner than that one's."""
        mine = self.soonest(level, counts)
        waits = self.elsewhere(process, now)
        sooner = sum(
            1
            for lv, w in enumerate(waits[: len(counts)])
            if w > 0 and self.start(lv) < self.start(mine)
        )
        return mine, sooner

    def publish(self, process: str, now: int, ttl: int, counts: Sequence[int]) -> None:
        if sum(counts) > 0:
            self.demand[process] = (now + ttl, tuple(counts))
        else:
            self.demand.pop(process, None)

    def turn(
        self,
        line: Line,
        now: int,
        at: Fraction,
        units: Sequence[int],
        shares: bool = False,
        reserve: int = 0,
    ) -> Fraction:
        """The turn a process in the ``line`` is told for a take of ``units``
        (with ``reserve``) that the buckets allow at ``at``: one step (the
        units' interval on the limit that holds the take back, the last to
        allow it, P100) later for each process ahead of it (of a more
        urgent level, or of its level and before it in the line; every one,
        for a newcomer, who goes to the end; with ``shares``, a level is more
        urgent if its next grant starts sooner, alike if as soon), but at
        most 2e9 s past now (P92). Turns more than the grace past are
        dropped first."""
        process, level, _, grace = line
        self.line = {p: e for p, e in self.line.items() if e[0] >= now - grace}
        mine = self.line.pop(process, None)
        place = mine[2] if mine is not None and (mine[1] == level or shares) else None

        def key(lv: int) -> int:
            return self.start(lv) if shares else lv

        ahead = sum(
            1
            for name, (_, lv, other) in self.line.items()
            if key(lv) < key(level)
            or (key(lv) == key(level) and (place is None or (other, name) < (place, process)))
        )
        # each limit's time to hold the take (as ``wait`` counts it) and its
        # step; the latest's step, the slowest of those on a tie
        held = [
            ((min(x + reserve, self.burst[i]) - self.tokens[i]) * T, x * T)
            for i, (x, T) in enumerate(zip(units, self.T, strict=True))
            if x > 0
        ]
        step = max(held)[1] if held else Fraction(0)
        at = min(at + ahead * step, Fraction(now + FURTHEST_TURN))
        self.line[process] = (at, level, now if place is None else place)  # a newcomer: now
        return at

    def refill(self, now: int) -> None:
        if self.at is not None:
            for i, T in enumerate(self.T):
                self.tokens[i] = min(Fraction(self.burst[i]), self.tokens[i] + (now - self.at) / T)
        self.at = now
        self.quotas = [[q for q in quotas if q[1] > now] for quotas in self.quotas]

    def use_quota(self, units: Sequence[int]) -> None:
        """``units`` charged: each quota in force leaves that many fewer."""
        self.quotas = [
            [(left - x, end) for left, end in quotas]
            for quotas, x in zip(self.quotas, units, strict=True)
        ]

    def answer(self, allowed: int, wait: int) -> Answer:
        out: Answer = (allowed, wait, *(math.floor(t) for t in self.tokens))
        # after no answer of global shares (-1, -1), the limits used (the
        # runs under global shares change no limit: theirs would come first)
        if self.stored:
            used = tuple(n for T, b in zip(self.T, self.burst, strict=True) for n in (int(T), b))
            out += (-1, -1, used)
        return out

    def wait(
        self, now: int, reserve: int, units: Sequence[int], *, headroom: bool = False
    ) -> Fraction:
        """Microseconds until every limit holds what the take needs (and
        the pause is over; with ``headroom``, a lease's extra permit, half
        of each burst more), exactly; 0 if it is so now."""
        waits = [Fraction(self.pause - now)]
        for i, x in enumerate(units):
            if x == 0:
                continue  # a limit the take takes nothing from holds it in no way
            keep = max(reserve, self.burst[i] // 2) if headroom else reserve
            need = min(x + keep, self.burst[i])
            waits.append((need - self.tokens[i]) * self.T[i])
            # units a quota does not leave: not before its end
            waits += [Fraction(end - now) for left, end in self.quotas[i] if x > left]
        return max(Fraction(0), max(waits))

    def take(
        self,
        now: int,
        reserve: int,
        units: Sequence[int],
        demand: Demand | None = None,
        book: int = 0,
        lease: int = 1,
        line: Line | None = None,
        shares: Sequence[int] | None = None,
        shared: int = 0,
    ) -> Answer:
        """A take; under global priority (``demand``: the process, its
        demand's time to live, the level, its waiters per level), not while
        waiters of other live processes are more urgent: at best each takes
        one interval of the fastest limit. One the buckets alone would
        allow within ``book`` us is booked: charged now, the taker's then.
        One allowed now takes up to ``lease`` at once, while they are. In
        the ``line`` (the process, the level, its waiters, the grace of a turn), one
        refused, or allowed while more of its process's waiters must wait,
        is told its turn. Under global priority with ``shares`` (each
        level's cost of a unit in virtual time), not while any live process
        waits at a level whose next grant starts sooner than the take's
        level's (the process's own other levels included: allowed now, it
        is told to ask again at once); a grant moves its level's finish on
        by its units of limit ``shared`` times that cost; the answer ends
        with the level the permits are for (-1: refused) and the process's
        level owed next (-1: none)."""
        self.refill(now)
        if any(x > b for x, b in zip(units, self.burst, strict=True)):
            return self.answer(0, -1)
        wait = self.wait(now, reserve, units)
        held = self.pause > now
        tail: tuple[int, ...] = ()
        mine = None
        if demand is not None:
            process, ttl, level, counts = demand
            if shares is not None:
                mine, ahead = self.held_for(process, now, counts, level)
                tail = (-1, mine)
                held = held or mine != level
                waits = self.elsewhere(process, now)
                sooner = [
                    lv
                    for lv, w in enumerate(waits[: len(counts)])
                    if w > 0 and self.start(lv) < self.start(mine)
                ]
            else:
                # more urgent than the take and than every waiter of its own
                urgent = next((lv for lv in range(level) if counts[lv] > 0), level)
                ahead = self.ahead(process, urgent, now)
                sooner = list(range(urgent))
            if ahead > 0:
                # at best each takes an interval of the fastest limit; at the
                # latest they hold it until their entries expire
                last = self.expiry(process, now, sooner)
                wait = max(wait, min(ahead * min(self.T), Fraction(last - now)))
                held = True
        if wait > 0 and (held or wait > book):
            if demand is not None:
                self.publish(process, now, ttl, counts)
            if line is not None:
                if tail:  # shares: in the line for the level it asks next
                    line = (line[0], tail[1], line[2], line[3])
                wait = self.turn(line, now, now + wait, units, shares is not None, reserve) - now
            return self.answer(0, math.ceil(wait)) + tail
        if demand is not None and mine is not None and mine != level:
            self.publish(process, now, ttl, counts)  # another of its levels first
            return self.answer(0, 0) + tail
        taken = 0
        while True:
            for i, x in enumerate(units):
                self.tokens[i] -= x
            self.use_quota(units)
            taken += 1
            if wait > 0 or taken == lease or self.wait(now, reserve, units, headroom=True) > 0:
                break
        if demand is not None:
            left = list(counts)
            left[level] = max(0, left[level] - taken)
            self.publish(process, now, ttl, left)
            if shares is not None:
                self.virtual = begin = self.start(level)
                self.finish[level] = begin + taken * units[shared] * shares[level]
                tail = (level, self.soonest(-1, left))
        if wait > 0:
            if line is not None:
                self.line.pop(line[0], None)
            return self.answer(-1, math.ceil(wait)) + tail
        again = self.wait(now, reserve, units)
        if line is not None:
            self.line.pop(line[0], None)  # granted: back at the end, if more wait
            if line[2] > taken and (again > 0 or self.line):
                again = self.turn(line, now, now + again, units, shares is not None, reserve) - now
        return self.answer(taken, math.ceil(again)) + tail

    def give(self, now: int, units: Sequence[int]) -> Answer:
        """``units`` charged (> 0) or given back (< 0; never beyond the burst)."""
        self.refill(now)
        for i, x in enumerate(units):
            self.tokens[i] = min(Fraction(self.burst[i]), self.tokens[i] - x)
        self.use_quota([max(0, x) for x in units])  # (units given back: not to the quota)
        return self.answer(1, 0)

    def pause_for(self, now: int, length: int) -> Answer:
        self.refill(now)
        self.pause = max(self.pause, now + length)
        return self.answer(1, self.pause - now)

    def adopt(self, now: int, reset_after: int, remaining: Sequence[int]) -> Answer:
        """At ``now + reset_after`` at most ``remaining`` units are left:
        now, at most that less what refills until then."""
        self.refill(now)
        for i, r in enumerate(remaining):
            if r >= 0:
                self.tokens[i] = min(self.tokens[i], r - reset_after / self.T[i])
        return self.answer(1, 0)

    def limit_quota(self, now: int, reset_after: int, remaining: Sequence[int]) -> Answer:
        """Until ``now + reset_after`` at most ``remaining`` more units are
        charged, beside the quotas in force."""
        self.refill(now)
        for i, r in enumerate(remaining):
            if r >= 0 and reset_after > 0:
                kept = quotas_kept([list(q) for q in self.quotas[i]], r, now + reset_after, now)
                self.quotas[i] = [(left, end) for left, end in kept]
        return self.answer(1, 0)

    def rerate(self, now: int, index: int, rate: int, burst: int) -> Answer:
        """The units carry over (never more than the new burst); the time
        they fall short by, rounded up to a whole microsecond."""
        self.refill(now)
        T = Fraction(10**6, rate)
        short = max(0, math.ceil((burst - self.tokens[index]) * T))
        self.T[index], self.burst[index] = T, burst
        self.tokens[index] = burst - short / T
        self.stored = True
        return self.answer(1, 0)


T0 = 1_700_000_000_000_000  # a Redis-like time in microseconds
RATES = [1, 2, 4, 5, 8, 10]  # per second: whole microseconds per unit
BOOK = [0, 0, 150_000, 1_000_000]  # book ahead (us): often not at all
LEASE = [1, 1, 3]  # the most permits a take takes at once

Call = Callable[..., list[Any]]


def caller(
    script: Any, rates: Sequence[int | Fraction], bursts: Sequence[int], key: str = ""
) -> Call:
    """``call(op, now, arg, xs, *extra)``: the script, at ``now``, on the
    limit ``key`` (a new one by default)."""
    key = key or f"test:{{p21-{next(_keys)}}}"

    def call(op: str, now: int, arg: int, xs: Sequence[int], *extra: int) -> list[Any]:
        args: list[Any] = [op, now, arg, 0, len(rates)]
        for i, (rate, burst, x) in enumerate(zip(rates, bursts, xs, strict=True)):
            args += [f"l{i}", 10**6 // rate, burst, x]
        return [
            tuple(int(w) for w in r) if isinstance(r, list) else int(r)
            for r in script(
                keys=[
                    key,
                    *(
                        key + suffix
                        for suffix in (":limits", ":audit", ":demand", ":line", ":shares")
                    ),
                ],
                args=[*args, *extra],
            )
        ]

    return call


# The ops: (kind, dt, arg, xs, extra) drawn for two limits; a one-limit run
# reads the first of each.
ops = st.tuples(
    st.sampled_from(["take"] * 6 + ["give", "pause", "adopt", "quota", "rate"]),
    st.one_of(st.just(0), st.integers(1, 400_000), st.sampled_from([25_000, 100_000])),
    st.integers(0, 400_000),
    st.lists(st.integers(-1, 6), min_size=2, max_size=2),
    st.tuples(st.integers(0, 1), st.sampled_from(RATES), st.integers(1, 5), st.integers(0, 2)),
)


def run(
    script: Any,
    rates: list[int],
    bursts: list[int],
    steps: list[Any],
    *,
    plain: bool,
    nothing: bool = False,
) -> None:
    """Drive the script and the buckets side by side through ``steps``
    (with ``nothing``, a take of no units is sent as drawn, not as one of
    the first limit)."""
    n = len(rates)
    call = caller(script, rates, bursts)
    model = Buckets(rates, bursts)
    now = T0
    granted: list[tuple[int, tuple[int, ...]]] = []
    for kind, dt, arg, xs, (index, new_rate, new_burst, which) in steps:
        now += dt
        xs = xs[:n]
        if kind == "take":
            reserve = arg % 4
            book = BOOK[arg // 4 % len(BOOK)]
            lease = LEASE[arg // 16 % len(LEASE)]
            units = tuple(max(0, x) for x in xs)
            if not any(units) and not nothing:
                units = (1, *units[1:])
            # without booking (BOOK's first 0) and lease, the request as the
            # limiter sends it, stopping at the units; else every argument
            extra: tuple[Any, ...] = ("", 0, 0, "0", book, lease)
            if arg // 4 % len(BOOK) == 0 and lease == 1:
                extra = ()
            got = tuple(call("take", now, reserve, units, *extra))
            model.refill(now)
            before = list(model.tokens)
            paused = now < model.pause
            want = model.take(now, reserve, units, book=book, lease=lease)
            asked = f"take {units} reserve {reserve} book {book} lease {lease}"
            note(f"t={now - T0} {asked}: script {got}, model {want}")
            assert got == want, ("P38", got, want)
            if got[0]:
                # a booked permit counts from its time
                taken = max(got[0], 1)
                granted += [(now + got[1] if got[0] < 0 else now, units)] * taken
                assert not paused, "P40"  # nothing during a pause, nor booked
                if got[0] < 0:
                    assert 0 < got[1] <= book, "P44"  # booked only within the horizon
                assert taken <= lease, "P45"
                if taken > 1:  # a lease's extras leave half of each burst to the others
                    for i, x in enumerate(units):
                        if x:
                            half = model.burst[i] // 2
                            assert model.tokens[i] >= min(half, model.burst[i] - x), "P45"
                for i, x in enumerate(units):  # every limit gave its part, each permit
                    assert model.tokens[i] == before[i] - taken * x, "P39"
                    if x and got[0] > 0:  # a booked one leaves them at its time
                        assert got[2 + i] >= min(reserve, model.burst[i] - x), "P22"
            else:
                assert list(model.tokens) == before, "P39"  # none gave anything
                assert got[1] != 0, "P22"  # told when to come back
        elif kind == "give":
            units = tuple(x - 3 for x in xs)  # -4 .. 3: given back or charged
            got = tuple(call("give", now, 0, units))
            want = model.give(now, units)
            note(f"t={now - T0} give {units}: script {got}, model {want}")
            assert got == want, ("P41", got, want)
        elif kind == "pause":
            got = tuple(call("pause", now, arg, (0,) * n))
            want = model.pause_for(now, arg)
            note(f"t={now - T0} pause {arg}: script {got}, model {want}")
            assert got == want, ("P40", got, want)
        elif kind in ("adopt", "quota"):
            remaining = tuple(min(x, 5) for x in xs)
            got = tuple(call(kind, now, arg, remaining))
            word = model.adopt if kind == "adopt" else model.limit_quota
            want = word(now, arg, remaining)
            note(f"t={now - T0} {kind} {remaining} until +{arg}: script {got}, model {want}")
            assert got == want, ("P41", got, want)
        else:
            index = min(index, n - 1)
            # which: 0 both, 1 the rate only, 2 the burst only (-1: as it stands)
            interval = -1 if which == 2 else 10**6 // new_rate
            burst = -1 if which == 1 else new_burst
            got = tuple(call("rate", now, index + 1, (0,) * n, interval, burst))
            if which == 2:
                new_rate = int(10**6 / model.T[index])
            if which == 1:
                new_burst = model.burst[index]
            want = model.rerate(now, index, new_rate, new_burst)
            note(f"t={now - T0} limit {index} -> {new_rate}/s burst {new_burst}: {got}, {want}")
            assert got == want, ("P41", got, want)
    if plain:
        # P21, P44 directly on the grants, at the times they count (a booked
        # one's, its time): over any window, per limit, at most burst + d / T
        # units (no give-back, word, pause or change to count)
        granted.sort()
        for i in range(n):
            T = Fraction(10**6, rates[i])
            for (a, _), (b, _) in itertools.combinations(granted, 2):
                total = sum(u[i] for t, u in granted if a <= t <= b)
                assert total <= bursts[i] + (b - a) / T, "P21"


two_limits = st.tuples(
    st.lists(st.sampled_from(RATES), min_size=1, max_size=2),
    st.lists(st.integers(1, 5), min_size=2, max_size=2),
)


@given(limits=two_limits, steps=st.lists(ops, min_size=1, max_size=30))
@example(  # P45: a lease of 3 under reserve 3 above half the burst of 5: two permits, not three
    limits=([10], [5, 5]), steps=[("take", 0, 3 + 2 * 16, [1, 0], (0, 10, 1, 0))]
)
def test_script_is_the_exact_buckets(
    script: Any, limits: tuple[list[int], list[int]], steps: list[Any]
) -> None:
    """P21, P22, P38, P39, P40, P41, P44, P45, P96: at every chosen time the
    script answers exactly as the buckets do (allowed, wait, units left per limit), for one limit or
    two, costs of several units, reserves, bookings, leases, give-backs and settles,
    pauses, the upstream's word and changes of limit; a take is charged to every
    limit or to none; a limit a take takes nothing from holds it in no way;
    nothing is granted during a pause; and over the runs
    with takes only, no window of any limit sees more than
    ``burst + d / T`` units."""
    rates, bursts = limits
    bursts = bursts[: len(rates)]
    plain = all(kind == "take" for kind, *_ in steps)
    run(script, rates, bursts, steps, plain=plain)


# Mostly the take the limiter sends most, of one limit (without booking or
# lease: the request stops at its units), of 0 to 6 units with reserves 0
# to 3, among the calls that leave a pause, a quota or a changed limit.
plain_ops = st.tuples(
    st.sampled_from(["take"] * 8 + ["give", "pause", "adopt", "quota", "rate"]),
    st.one_of(st.just(0), st.integers(1, 400_000), st.sampled_from([25_000, 100_000])),
    st.integers(0, 400_000),
    st.lists(st.integers(-1, 6), min_size=1, max_size=1),
    st.tuples(st.just(0), st.sampled_from(RATES), st.integers(1, 5), st.integers(0, 2)),
)


@given(
    rate=st.sampled_from(RATES),
    burst=st.integers(1, 5),
    steps=st.lists(plain_ops, min_size=10, max_size=30),
)
def test_the_plain_take_is_the_exact_buckets(
    script: Any, rate: int, burst: int, steps: list[Any]
) -> None:
    """P21, P22, P40, P41 for the take the limiter sends most, of one limit
    and no booking or lease, which the script decides in steps of its own
    unless it finds a pause, a quota or a changed limit: granted, refused
    and taking no units, after give-backs, pauses, the upstream's word and
    changes of limit, it answers and stores exactly as the buckets do."""
    _plain_property(script, rate, burst, steps)


def _plain_property(script: Any, rate: int, burst: int, steps: list[Any]) -> None:
    plain = all(kind == "take" for kind, *_ in steps)
    # a take's argument below 4: its reserve, BOOK's first and LEASE's first (see run)
    steps = [
        (kind, dt, arg % 4 if kind == "take" else arg, *rest) for kind, dt, arg, *rest in steps
    ]
    run(script, [rate], [burst], steps, plain=plain, nothing=True)


#: name -> (text of the script, replacement, what it breaks, the property run)
MUTANTS = {
    "stored-limits-unsaid": (
        "  if live[i] then\n    stored = true\n",
        "  if live[i] then\n",
        "the limits a change stored are said in the change's answer only, not in later ones",
        "buckets",
    ),
    "lease-to-the-last": (
        "  until at > now or taken >= lease or allowed_at(arg, true) > now\n",
        "  until at > now or taken >= lease or allowed_at(arg) > now\n",
        "a lease takes every permit there is, leaving the others none",
        "buckets",
    ),
    "plain-take-charges-one-unit": (
        "    tat = tat + x * T\n",
        "    tat = tat + T\n",
        "a plain take of one limit charges one unit, whatever its cost",
        "buckets",
    ),
    "plain-take-charges-when-refused": (
        "    if at > now then\n      return {0,",
        "    if at > now then\n"
        "      redis.call('HSET', KEYS[1], field, tat + x * T)\n      return {0,",
        "a plain take of one limit refused is charged all the same",
        "plain",
    ),
    "plain-take-of-nothing-keeps-the-reserve": (
        "    if x > 0 then\n      need = x + ARGV[3]\n",
        "    if true then\n      need = x + ARGV[3]\n",
        "a plain take of no units waits for the reserve, and for a debt",
        "plain",
    ),
    "take-of-nothing-held-by-a-debt": (
        "    if x[i] > 0 then  -- (a limit the take takes nothing from holds it in no way)\n",
        "    if true then\n",
        "a take that takes nothing of a limit waits for its debt and its reserve (P96)",
        "buckets",
    ),
    "plain-take-ignores-a-quota": (
        "  if not (state[1] or state[3] or live[1]) and x <= burst then\n",
        "  if not (state[1] or live[1]) and x <= burst then\n",
        "a plain take of one limit does not count against the upstream's quota",
        "plain",
    ),
    "plain-take-ignores-a-live-limit": (
        "  if not (state[1] or state[3] or live[1]) and x <= burst then\n",
        "  if not (state[1] or state[3]) and x <= burst then\n",
        "a plain take of one limit is paced by the limit it was given, not the one set since",
        "plain",
    ),
    "plain-take-rounds-up-what-is-left": (
        "    return {1, ceil(again - now), floor((burst * T - (tat - now)) / T)}\n",
        "    return {1, ceil(again - now), ceil((burst * T - (tat - now)) / T)}\n",
        "a plain take of one limit granted rounds the units left up",
        "plain",
    ),
    "charge-one-limit": (
        "      tat[i] = tat[i] + x[i] * T[i]\n",
        "      if i == 1 then tat[i] = tat[i] + x[i] * T[i] end\n",
        "a take charges the first limit only",
        "buckets",
    ),
    "quota-uncounted": (
        "        for _, q in ipairs(quotas[i]) do q[1] = q[1] - x[i] end  -- the quotas' units\n",
        "",
        "a take's units do not count against the upstream's quota",
        "quota",
    ),
    "quota-keeps-its-last-units": (
        "        if x[i] > q[1] then at = max(at, q[2]) end\n",
        "        if x[i] >= q[1] then at = max(at, q[2]) end\n",
        "a take of exactly the units a quota leaves waits for its end",
        "quota",
    ),
    "ignore-the-pause": (
        "  local at = pause\n",
        "  local at = now\n",
        "a take does not read the pause",
        "buckets",
    ),
    "book-through-a-pause": (
        "  local held = pause > now",
        "  local held = false",
        "a take books a permit past a pause",
        "buckets",
    ),
    "book-past-urgent-waiters": (
        "      at = max(at, min(now + ahead * fastest, last))\n      held = true\n",
        "      at = max(at, min(now + ahead * fastest, last))\n",
        "a take books a permit past more urgent waiters published elsewhere",
        "demand",
    ),
    "book-short-of-the-horizon": (
        "(held or at - now > book)",
        "(held or at - now >= book)",
        "a take the buckets allow in exactly its horizon is refused, not booked",
        "horizon",
    ),
    "line-all-at-once": (
        "          step, last = x[i] * T[i], held\n",
        "          last = held\n",
        "every waiting process is told the same turn",
        "line",
    ),
    "line-loses-the-place": (
        "    if sooner or (alike and (place == nil or o[2] < place"
        " or (o[2] == place and o[3] < me))) then\n",
        "    if sooner or alike then\n",
        "a process asking again goes to the end of the line",
        "line",
    ),
    "line-keeps-a-booked-turn": (
        "    if me ~= '' then redis.call('HDEL', KEYS[5], me) end\n    return answer(-1",
        "    return answer(-1",
        "a process whose take is booked keeps its place in the line",
        "line",
    ),
    "line-keeps-dead-turns": (
        "    if words[1] < now - grace then\n",
        "    if false then\n",
        "a process that never comes back keeps its place for ever",
        "dead-turn",
    ),
    "shares-forget-the-finish": (
        "  return max(tonumber(tags[l + 2]) or 0, tonumber(tags[1]) or 0)\n",
        "  return tonumber(tags[1]) or 0\n",
        "a level's next grant starts with the last grant anywhere, whatever it took",
        "shares",
    ),
    "shares-any-own-level": (
        "      local mine = soonest(level, counts)\n",
        "      local mine = level\n",
        "a process serves any level it waits at, though another of its levels is owed sooner",
        "shares",
    ),
    "shares-owed-unsaid": (
        "      told = {level, soonest(-1, counts)}\n",
        "      told = {level, level}\n",
        "a process granted is told to ask for the same level again, whichever is owed",
        "shares",
    ),
    "line-shares-by-level": (
        "    if #costs > 0 then sooner, alike = start(o[1]) < start(rank),"
        " start(o[1]) == start(rank) end\n",
        "",
        "under global shares the line orders processes by level number, not by the level owed",
        "shares",
    ),
    "line-shares-asked-level": (
        "      if told then rank = told[2] end  -- in the line for the level it asks next\n",
        "",
        "under global shares a refused process waits in the line for the level it asked",
        "shares",
    ),
    "line-shares-loses-the-place": (
        "      if words[2] == rank or #costs > 0 then place = words[3] end  -- shares: any level\n",
        "      if words[2] == rank then place = words[3] end\n",
        "under global shares a process told to switch levels goes to the end of the line",
        "shares",
    ),
    "shares-lease-as-one": (
        "      local begin, grant = start(level), taken * x[shared] * costs[level + 1]\n",
        "      local begin, grant = start(level), x[shared] * costs[level + 1]\n",
        "a lease of several permits moves its level's finish by one",
        "shares",
    ),
    "shares-first-limit": (
        "      local begin, grant = start(level), taken * x[shared] * costs[level + 1]\n",
        "      local begin, grant = start(level), taken * x[1] * costs[level + 1]\n",
        "the shares count the units of the first limit, whichever is shared",
        "shared-limit",
    ),
    "drop-other-demand": (
        "  redis.call('HSET', KEYS[4], process, table.concat(words, ' '))\n",
        "  redis.call('DEL', KEYS[4])\n"
        "  redis.call('HSET', KEYS[4], process, table.concat(words, ' '))\n",
        "publishing one process's demand drops the others'",
        "demand",
    ),
    "held-past-the-demands-expiry": (
        "      at = max(at, min(now + ahead * fastest, last))\n",
        "      at = max(at, now + ahead * fastest)\n",
        "a take held by a silent process's demand comes back only when its waiters could be served",
        "silent",
    ),
    "publish-the-granted": (
        "    counts[level + 1] = max(0, counts[level + 1] - taken)\n",
        "",
        "a granted take publishes its process's waiters, the one granted included",
        "demand",
    ),
    "held-by-the-levels-between": (
        "      for l = 1, urgent do ahead, last = ",
        "      for l = 1, level do ahead, last = ",
        "a process serving a less urgent level first is held by the levels between",
        "demand",
    ),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_script_mutants_are_caught(client: Any, mutant: str) -> None:
    """P21, P39, P40, P41, P42, P44, P45, P48, P49, P96 have teeth: the properties
    fail on each mutant."""
    text, replacement, _, run = MUTANTS[mutant]
    source = script_source(clock="argv")
    assert source.count(text) == 1, mutant
    broken = client.register_script(source.replace(text, replacement))
    properties = {
        "buckets": given(limits=two_limits, steps=st.lists(ops, min_size=1, max_size=30))(
            _property
        ),
        "demand": given(
            limits=global_limits,
            weights=st.just(()),
            lease=st.sampled_from(LEASE),
            line=st.booleans(),
            steps=st.lists(demand_ops, min_size=1, max_size=30),
        )(global_run),
        "line": given(
            limit=one_limit,
            strict=st.booleans(),
            steps=st.lists(line_ops, min_size=1, max_size=30),
        )(line_run),
        "shares": given(
            limits=global_limits,
            weights=st.sampled_from(WEIGHTS),
            lease=st.sampled_from(LEASE),
            line=st.booleans(),
            steps=st.lists(demand_ops, min_size=1, max_size=30),
        )(global_run),
        "plain": given(
            rate=st.sampled_from(RATES),
            burst=st.integers(1, 5),
            steps=st.lists(plain_ops, min_size=10, max_size=30),
        )(_plain_property),
        # every example of it times a turn one microsecond past the grace
        "dead-turn": test_a_dead_processs_turn_counts_ahead_until_the_grace_is_past,
    }
    by_hand = {
        "shared-limit": test_global_shares_count_the_shared_limit_by_hand,
        "quota": test_a_quota_counts_down_on_the_shared_key_by_hand,
        "silent": test_a_silent_processs_demand_holds_no_longer_than_its_entry,
        "horizon": test_a_take_is_booked_up_to_its_horizon_by_hand,
    }
    if run in by_hand:  # no examples to draw
        with pytest.raises(AssertionError):
            by_hand[run](broken)
        return
    check = settings(
        max_examples=300,
        phases=[Phase.generate],
        suppress_health_check=[HealthCheck.function_scoped_fixture],
        derandomize=True,
        database=None,
    )(properties[run])
    with pytest.raises(AssertionError):
        check(broken)


def _property(script: Any, limits: tuple[list[int], list[int]], steps: list[Any]) -> None:
    rates, bursts = limits
    run(script, rates, bursts[: len(rates)], steps, plain=False)


def test_script_answers_at_chosen_times(script: Any) -> None:
    """P21, P22 by hand: rate 10/s (T = 100,000 us), burst 3, reserves 0 and 1."""
    call = caller(script, [10], [3])

    def ask(t: int, reserve: int, count: int = 1) -> list[int]:
        if count < 0:
            return call("give", T0 + t, 0, (count,))
        return call("take", T0 + t, reserve, (count,))

    assert ask(0, 0) == [1, 0, 2]  # an idle limit holds burst = 3 permits
    assert ask(0, 1) == [1, 100_000, 1]  # reserve 1: allowed, one is left
    assert ask(0, 1) == [0, 100_000, 1]  # ... but not the last one
    assert ask(0, 0) == [1, 100_000, 0]  # reserve 0 may take it
    assert ask(0, 0) == [0, 100_000, 0]  # empty: the next in one interval
    assert ask(50_000, 0) == [0, 50_000, 0]
    assert ask(150_000, 1) == [0, 50_000, 1]  # 1.5 permits there; 2 needed
    assert ask(150_000, 0, -1) == [1, 0, 2]  # one given back
    assert ask(150_000, 1) == [1, 50_000, 1]
    assert ask(10_000_000, 0) == [1, 0, 2]  # long idle: full again, not more


def test_several_limits_pause_and_word_by_hand(script: Any) -> None:
    """P38, P39, P40, P41 and P96 by hand: requests 10/s burst 3, tokens 1/s burst 5."""
    call = caller(script, [10, 1], [3, 5])
    # both charged; the same take again waits for 3 more tokens
    assert call("take", T0, 0, (1, 4)) == [1, 3_000_000, 2, 1]
    # tokens hold 1: a take of 2 is refused, and charges neither
    assert call("take", T0, 0, (1, 2)) == [0, 1_000_000, 2, 1]
    assert call("take", T0, 0, (1, 0)) == [1, 0, 1, 1]  # takes no tokens: allowed
    assert call("pause", T0, 300_000, (0, 0)) == [1, 300_000, 1, 1]
    assert call("take", T0 + 200_000, 0, (1, 0))[:2] == [0, 100_000]  # paused
    assert call("take", T0 + 300_000, 0, (1, 0)) == [1, 0, 2, 1]  # the pause is over
    # a settle: the call took 3 tokens more than it asked (1.3 there): a debt
    assert call("give", T0 + 300_000, 0, (0, 3)) == [1, 0, 2, -2]
    assert call("take", T0 + 300_000, 0, (0, 1))[:2] == [0, 2_700_000]  # no debt allowed
    # ... but to a take of none of it (P96)
    assert call("take", T0 + 300_000, 0, (1, 0)) == [1, 0, 1, -2]
    # the upstream says no request is left until 1 s from now: 10 short now
    assert call("adopt", T0 + 2_000_000, 1_000_000, (0, -1)) == [1, 0, -10, 0]
    # requests to 20/s, burst 4: the debt of 10 carries over; from then on
    # every answer ends with the limits used (after no shares' -1, -1)
    used = (50_000, 4, 1_000_000, 5)
    assert call("rate", T0 + 2_000_000, 1, (0, 0), 50_000, 4) == [1, 0, -10, 0, -1, -1, used]
    # 650 ms later, 13 units at 20/s: 3 there (at 10/s it would still be -3.5)
    assert call("take", T0 + 2_650_000, 0, (1, 0)) == [1, 0, 2, 0, -1, -1, used]


def test_a_quota_counts_down_on_the_shared_key_by_hand(script: Any) -> None:
    """P41 for the upstream's quota: 2 requests left for 10 s, under 10/s
    with a burst of 5: two takes at once (the bucket holds them), the third
    waits for the quota's end, not for the bucket; a settle for more counts
    against it, one for less gives nothing back; a second word holds beside
    the first, each until its own end."""
    call = caller(script, [10], [5])
    assert call("quota", T0, 10_000_000, (2,)) == [1, 0, 5]
    assert call("take", T0, 0, (1,)) == [1, 0, 4]
    assert call("take", T0, 0, (1,)) == [1, 10_000_000, 3]  # the same again: at the end
    assert call("take", T0 + 1, 0, (1,))[:2] == [0, 9_999_999]
    assert call("take", T0 + 10_000_000, 0, (1,)) == [1, 0, 4]  # over: the bucket alone
    assert call("quota", T0 + 10_000_000, 5_000_000, (3,)) == [1, 0, 4]
    assert call("give", T0 + 10_000_000, 0, (1,)) == [1, 0, 3]  # charged: 2 left
    assert call("give", T0 + 10_000_000, 0, (-1,)) == [1, 0, 4]  # given back: still 2
    # 2 left until +5 s, and now 4 until +8 s
    assert call("quota", T0 + 10_000_000, 8_000_000, (4,)) == [1, 0, 4]
    assert call("take", T0 + 10_000_000, 0, (2,)) == [1, 5_000_000, 2]  # 0 and 2 left
    assert call("take", T0 + 15_000_000, 0, (2,)) == [1, 3_000_000, 3]  # the first is over
    assert call("take", T0 + 17_000_000, 0, (1,))[:2] == [0, 1_000_000]  # 0 left until +8 s


def test_a_quota_given_twice_and_a_lease_count_down_by_hand(script: Any) -> None:
    """P41 and P45 by hand: the upstream's word of 2 left for 1 s, given
    twice at once, under 10/s with a burst of 9, is kept (once: not dropped
    as the same word twice); a lease of 3 then takes the quota's 2, each of
    its permits counted against the quota (not the first alone), and the
    next take waits for the quota's end."""
    call = caller(script, [10], [9])
    assert call("quota", T0, 1_000_000, (2,)) == [1, 0, 9]
    assert call("quota", T0, 1_000_000, (2,)) == [1, 0, 9]  # the same word again
    lease = call("take", T0, 0, (1,), "", 0, 0, "0", 0, 3)
    assert lease == [2, 1_000_000, 7], ("P41", "P45", lease)
    assert call("take", T0 + 10, 0, (1,))[:2] == [0, 999_990], "P41"


def test_the_quotas_on_the_shared_key_stay_bounded(script: Any) -> None:
    """P41, P52's bound on the shared key: 40 words that slide on, each a
    microsecond after the last with two more left (a take between them),
    keep MAX_QUOTAS quotas in Redis, each weighed by every take while it
    lasts, not one per word; the two that end first became one each time,
    the lesser count until the later end: the first word's 2, used at once,
    now hold until the 25th word's end."""
    key = f"test:{{p41-{next(_keys)}}}"
    call = caller(script, [1000], [100], key)
    for j in range(40):
        assert call("quota", T0 + j, 60_000_000, (2 + 2 * j,)) == [1, 0, 100 - min(j, 2)]
        call("take", T0 + j, 0, (1,))
    words = script.registered_client.hget(key, "q:l0").split()
    assert len(words) == 2 * MAX_QUOTAS, ("P41", len(words) // 2)
    assert call("take", T0 + 40, 0, (1,))[:2] == [0, 60_000_000 + 24 - 40]


@pytest.mark.parametrize("how", ["plain", "two limits", "lease", "line"])
def test_a_fractional_interval_is_kept(script: Any, how: str) -> None:
    """P38 by hand: 3 per second, an interval of 333,333.33 us as the limiter
    sends it (the properties' intervals are whole), burst 1: the state
    keeps the fraction of a microsecond, for the plain take and for the
    script's general steps (beside a second limit whose bucket is not
    touched, a lease of 2, the line)."""
    key = f"test:{{p38-{next(_keys)}}}"
    keys = [key, *(key + s for s in (":limits", ":audit", ":demand", ":line", ":shares"))]
    other = ("l1", 1, 1000, 0) if how == "two limits" else ()
    extra = {
        "lease": ("", 0, 0, "0", 0, 2),
        "line": ("", 0, 0, "0", 0, 1, "a", 0, 1, GRACE),
    }.get(how, ())

    def take(t: int) -> list[int]:
        args = ["take", T0 + t, 0, 0, 1 + len(other) // 4, "l0", repr(10**6 / 3), 1, 1]
        return [int(r) for r in script(keys=keys, args=[*args, *other, *extra])]

    rest = [1000] if other else []  # (the second's units left)
    assert take(0) == [1, 333_334, 0, *rest], "P38"
    assert take(333_333) == [0, 1, 0, *rest], "P38"  # a fraction of a microsecond short
    assert take(333_334) == [1, 333_334, 0, *rest], "P38"


def test_a_take_is_booked_up_to_its_horizon_by_hand(script: Any) -> None:
    """P44 by hand, at the horizon's edge: 10/s (T = 100 ms), burst 1, the
    bucket just emptied. A take the buckets allow in exactly ``w`` = 100 ms
    is refused under a horizon of ``w`` - 1 us and booked under one of
    ``w`` (``0 < w <= H``): charged at once and told ``w``."""
    call = caller(script, [10], [1])
    assert call("take", T0, 0, (1,)) == [1, 100_000, 0]

    def take(horizon: int) -> list[int]:
        return call("take", T0, 0, (1,), "", 0, 0, "0", horizon, 1)

    assert take(99_999) == [0, 100_000, 0], "P44"  # beyond the horizon: refused
    assert take(100_000) == [-1, 100_000, -1], "P44"  # at the horizon: booked


def test_the_pause_is_stored_while_it_lasts(client: Any, script: Any) -> None:
    """P40 by hand: the state holds a pause only while it lasts."""
    key = f"test:{{p40-{next(_keys)}}}"
    call = caller(script, [10], [3], key)
    call("take", T0, 0, (1,))
    assert client.hkeys(key) == [b"tat:l0"]  # no pause
    call("pause", T0, 300_000, (0,))
    assert client.hget(key, "pause") == str(T0 + 300_000).encode()
    assert call("take", T0 + 200_000, 0, (1,))[:2] == [0, 100_000]  # still paused
    call("take", T0 + 300_000, 0, (1,))  # the pause is over
    assert client.hkeys(key) == [b"tat:l0"]


# -- global priority ------------------------------------------------------------

TTL = 300_000  # a process's demand lives 300 ms without a refresh
LEVELS = 3

demand_ops = st.tuples(
    st.sampled_from(["take"] * 4 + ["demand"]),
    st.one_of(st.just(0), st.integers(1, 400_000), st.sampled_from([50_000, 150_000])),
    st.sampled_from(["a", "b", "c"]),
    st.integers(0, LEVELS - 1),
    st.lists(st.integers(0, 2), min_size=LEVELS, max_size=LEVELS),
    st.sampled_from([0, 0, 0, 150_000]),  # a take's horizon (us): often no booking
)
one_limit = st.tuples(st.sampled_from(RATES), st.integers(1, 4))


#: Limits for a run of several processes: rates, bursts, a take's units and
#: the index of the limit whose units global shares count.
global_limits = st.one_of(
    one_limit.map(lambda limit: ([limit[0]], [limit[1]], (1,), 0)),
    st.tuples(
        st.lists(st.sampled_from(RATES), min_size=2, max_size=2),
        st.lists(st.integers(2, 5), min_size=2, max_size=2),
        st.sampled_from([(1, 1), (1, 2), (2, 1)]),
        st.integers(0, 1),
    ),
)
Limits = tuple[list[int], list[int], tuple[int, ...], int]


def global_run(
    script: Any, limits: Limits, steps: list[Any], weights: Sequence[int], lease: int, line: bool
) -> None:
    """Takes (of ``units``, up to ``lease`` at once; each process in the
    line, with ``line``) and demand of several processes, strict (no
    ``weights``) or with shares of limit ``shared``, against the model."""
    rates, bursts, units, shared = limits
    costs = [math.lcm(*weights) // w for w in weights] if weights else None
    shares = (" ".join(map(str, costs)), shared + 1) if costs else ()
    call = caller(script, rates, bursts)
    model = Buckets(rates, bursts)
    now = T0
    for kind, dt, process, level, waiting, book in steps:
        now += dt
        counts = list(waiting)
        if kind == "take":
            counts[level] = max(1, counts[level])  # the one taking waits
        words = " ".join(map(str, counts))
        if kind == "demand":
            nothing = (0,) * len(rates)
            got = tuple(call("demand", now, 0, nothing, process, TTL, 0, words))
            model.refill(now)
            model.publish(process, now, TTL, counts)
            want = model.answer(1, 0)
        else:
            place = (process, level, sum(counts), GRACE) if line else ("", 0, 0, 0)
            extra = (book, lease, *place, *shares)
            got = tuple(call("take", now, 0, units, process, TTL, level, words, *extra))
            model.refill(now)
            if costs:
                mine, ahead = model.held_for(process, now, counts, level)
                ahead += mine != level
            else:
                urgent = next((lv for lv in range(level) if counts[lv] > 0), level)
                ahead = model.ahead(process, urgent, now)
            demand = (process, TTL, level, tuple(counts))
            in_line = (process, level, sum(counts), GRACE) if line else None
            want = model.take(
                now,
                0,
                units,
                demand,
                book=book,
                lease=lease,
                line=in_line,
                shares=costs,
                shared=shared,
            )
            if got[0]:
                # strict: nothing waits elsewhere more urgent than the take
                # and than every waiter of its own process; shares: nothing
                # anywhere is owed sooner than the take's level (booked, P44,
                # or granted now)
                assert ahead == 0, "P49" if costs else "P42"
        step = f"{kind} {process} level {level} {counts} book {book}"
        note(f"t={now - T0} {step}: {got}, model {want}")
        assert got == want, ("P49" if costs else "P42", got, want)


@given(
    limits=global_limits,
    lease=st.sampled_from(LEASE),
    line=st.booleans(),
    steps=st.lists(demand_ops, min_size=1, max_size=30),
)
@example(  # P42: a's lease of 2 (of 3, at burst 4) publishes its 2 urgent waiters less both
    limits=([10], [4], (1,), 0),
    lease=3,
    line=False,
    steps=[("take", 0, "a", 0, [2, 0, 0], 0), ("take", 0, "b", 1, [0, 1, 0], 0)],
)
def test_global_priority_is_the_demand_rule(
    script: Any, limits: Limits, lease: int, line: bool, steps: list[Any]
) -> None:
    """P42: under global priority, at every chosen time the script answers
    exactly as the buckets and the published demand do: a take at level
    ``L`` is granted only if no other live process has waiters at a level
    above ``L`` (nor booked ahead past them: P44), and is then told to come
    back no sooner than those waiters could be served; each take publishes
    its process's waiters (less those granted), and a process's demand
    not refreshed within its time to live blocks nothing."""
    global_run(script, limits, steps, (), lease, line)


WEIGHTS = [(1, 1, 1), (4, 1, 1), (3, 2, 1), (1, 2, 6)]


@given(
    limits=global_limits,
    weights=st.sampled_from(WEIGHTS),
    lease=st.sampled_from(LEASE),
    line=st.booleans(),
    steps=st.lists(demand_ops, min_size=1, max_size=30),
)
def test_global_shares_are_start_time_fair_queuing(
    script: Any,
    limits: Limits,
    weights: tuple[int, ...],
    lease: int,
    line: bool,
    steps: list[Any],
) -> None:
    """P49: under global priority with shares, at every chosen time the
    script answers exactly as the buckets, the published demand and the
    levels' virtual times do: a take at level ``L`` is granted only if no
    live process, its own included, waits at a level whose next grant
    starts sooner (the later of the level's last finish and the start of
    the last grant anywhere) than ``L``'s; a grant of ``x`` units at level
    ``L`` starts at ``L``'s start and finishes ``x * lcm / w_L`` later; and
    each answer names the level its permits are for and the process's level
    owed next. With the processes in the line, a turn counts those of a
    level whose next grant starts sooner, or as soon and before it (P48)."""
    global_run(script, limits, steps, weights, lease, line)


def test_global_shares_by_hand(script: Any) -> None:
    """P49 by hand: weights (3, 1); process a waits at level 0 only, b at
    level 1 only, both throughout, and both ask every millisecond (a first).
    The grants go in start-time fair order (a tie lets both through), and
    over every prefix level 0's units over 3 and level 1's over 1 differ
    by at most the bound 1/3 + 1."""
    call = caller(script, [1000], [1000])  # the buckets never hold anyone up
    order: list[int] = []
    for t in range(0, 100_000, 1_000):
        for process, level, words in (("a", 0, "5 0"), ("b", 1, "0 5")):
            args = (process, TTL, level, words, 0, 1, "", 0, 0, 0, "1 3", 1)
            if call("take", T0 + t, 0, (1,), *args)[0]:
                order.append(level)
    assert order[:9] == [0, 1, 0, 0, 1, 0, 0, 0, 1], order
    for end in range(1, len(order) + 1):
        zeros = order[:end].count(0)
        assert abs(Fraction(zeros, 3) - (end - zeros)) <= Fraction(4, 3), order[:end]
    assert len(order) >= 100, order  # one grant a millisecond at least: nobody starves


def test_global_shares_count_the_shared_limit_by_hand(script: Any) -> None:
    """P49 by hand, two limits, shares of the second: weights (1, 1);
    process a waits at level 0 with takes of 1 request and 3 tokens, b at
    level 1 with 1 and 1, both throughout, both asking every millisecond.
    The tokens granted at the two levels stay within the bound (one take of
    each, 3 + 1); so level 1 gets about three takes to level 0's one."""
    call = caller(script, [1000, 1000], [1000, 1000])  # never held by the buckets
    tokens = [0, 0]
    for t in range(0, 100_000, 1_000):
        for process, level, units, words in (("a", 0, (1, 3), "5 0"), ("b", 1, (1, 1), "0 5")):
            args = (process, TTL, level, words, 0, 1, "", 0, 0, 0, "1 1", 2)
            if call("take", T0 + t, 0, units, *args)[0]:
                tokens[level] += units[1]
            assert abs(tokens[0] - tokens[1]) <= 4, ("P49", t, tokens)
    assert min(tokens) >= 90, tokens  # about 100 grants of one token a ms at least


def test_the_line_under_shares_follows_the_level_asked_next(script: Any) -> None:
    """P48 under global shares, by hand: weights (4, 1), 10 permits/s,
    burst 1, both processes in the line. A waits at levels 0 and 1, C at
    level 1. A is granted at 0 and told to ask for level 1; C is granted
    at 100 ms, so level 0 is owed sooner when A asks for level 1: A is
    told to ask for level 0, at a turn ahead of C's (its place kept, its
    level the one it asks next), and at that turn its take is allowed."""
    call = caller(script, [10], [1])

    def take(t: int, process: str, level: int, counts: tuple[int, int]) -> list[int]:
        words = " ".join(map(str, counts))
        line = (process, level, sum(counts), 200_000)
        args = (process, 300_000, level, words, 0, 1, *line, "1 4", 1)
        return [int(v) for v in call("take", T0 + t, 0, (1,), *args)]

    assert take(0, "A", 0, (1, 1))[3:] == [0, 1], "P49"  # granted at 0, ask 1 next
    assert take(1, "C", 1, (0, 2))[0] == 0, "P48"  # refused: its turn
    assert take(100_000, "C", 1, (0, 2))[0] == 1, "P48"  # granted at its turn
    refused = take(100_001, "A", 1, (1, 1))
    assert (refused[0], refused[4]) == (0, 0), ("P49", refused)  # ask for level 0
    assert refused[1] <= 100_000, ("P48", refused)  # its turn: at 200 ms, ahead of C
    assert take(200_000, "C", 1, (0, 1))[0] == 0, "P49"  # held: level 0 is owed
    assert take(200_001, "A", 0, (1, 1))[:1] == [1], "P48"  # the permit is not lost


def test_a_process_at_two_levels_is_told_which_to_ask_for(script: Any) -> None:
    """P49 by hand, one process at two levels: weights (1, 6, 1), process a
    waits at levels 0 and 2 (five each), nobody else. Its first take, for
    level 2, is allowed (every level starts at 0: the take's own among
    equals) and says level 0 is owed next; asking for level 2 again is
    refused with no wait, owed 0; level 0 is then allowed, and with both
    levels started at 6 the more urgent is owed next."""
    call = caller(script, [1000], [1000])  # the buckets never hold anyone up

    def take(t: int, level: int, words: str) -> list[int]:
        args = ("a", TTL, level, words, 0, 1, "", 0, 0, 0, "6 1 6", 1)
        return [int(v) for v in call("take", T0 + t, 0, (1,), *args)]

    allowed, _, _, level, owed = take(0, 2, "5 0 5")
    assert (allowed, level, owed) == (1, 2, 0), "P49"
    refused = take(10, 2, "5 0 4")
    assert (refused[:2], refused[3:]) == ([0, 0], [-1, 0]), "P49"
    allowed, _, _, level, owed = take(20, 0, "5 0 4")
    assert (allowed, level, owed) == (1, 0, 0), "P49"
    allowed, _, _, level, owed = take(30, 0, "1 0 0")  # its last waiter
    assert (allowed, level, owed) == (1, 0, -1), "P49"


@given(
    ttl=st.integers(1_000, 400_000),
    after=st.lists(st.integers(0, 800_000), min_size=1, max_size=6, unique=True),
)
def test_a_silent_processs_demand_blocks_until_its_ttl(
    script: Any, ttl: int, after: list[int]
) -> None:
    """P43, in the script: process ``a`` publishes an interactive waiter and
    is never heard from again (killed). Process ``b``'s batch take is refused
    while ``a``'s demand lives, ``ttl`` from ``a``'s last word, and granted
    from then on, the buckets allowing (here they always do)."""
    call = caller(script, [10], [8])
    call("demand", T0, 0, (0,), "a", ttl, 0, "1 0")
    for dt in sorted({*after, ttl - 1, ttl}):  # and either side of the expiry
        allowed = call("take", T0 + dt, 0, (1,), "b", TTL, 1, "0 1")[0]
        assert bool(allowed) == (dt >= ttl), ("P43", dt, ttl)


def test_a_silent_processs_demand_holds_no_longer_than_its_entry(script: Any) -> None:
    """P43, in the script: a take held only by the waiters of a process gone
    quiet (killed) is told to come back when its entry expires, not once
    every waiter it published could have been served: ``a``'s 500
    interactive waiters would take 5 s at 100/s, its entry expires in 1 s.
    (Told 5 s, the process came back at its next heartbeat, up to half a
    ``demand_ttl`` past the bound.) A take held by waiters that could all be
    served sooner is told that."""
    call = caller(script, [100], [5])
    call("demand", T0, 0, (0,), "a", 1_000_000, 0, "500 0")
    call("demand", T0, 0, (0,), "c", 5_000_000, 0, "0 0 7")  # none more urgent than b's
    assert call("take", T0, 0, (1,), "b", TTL, 1, "0 1")[:2] == [0, 1_000_000], "P43"
    assert call("take", T0 + 999_999, 0, (1,), "b", TTL, 1, "0 1")[:2] == [0, 1], "P43"
    assert call("take", T0 + 1_000_000, 0, (1,), "b", TTL, 1, "0 1")[0] == 1, "P43"
    call("demand", T0 + 1_000_000, 0, (0,), "a", 1_000_000, 0, "2 0")
    assert call("take", T0 + 1_000_000, 0, (1,), "b", TTL, 1, "0 1")[:2] == [0, 20_000]


# -- the line -------------------------------------------------------------------

GRACE = 200_000  # a turn is kept 200 ms once past

line_ops = st.tuples(
    st.sampled_from(["take"] * 6 + ["give", "leave", "pause"]),
    st.one_of(st.just(0), st.integers(1, 300_000), st.sampled_from([10_000, 100_000])),
    st.sampled_from(["a", "b", "c", "d"]),
    st.sampled_from([1, 1, 0]),  # the level of the take: mostly batch
    st.integers(1, 3),  # the process's waiters, the one taking included
    st.integers(0, 2),  # take: the reserve; give: units given back; pause: 50 ms each
    st.integers(1, 2),  # the take's units
    st.sampled_from([0, 0, 0, 150_000]),  # the take's horizon (us): often no booking
)


def line_run(script: Any, limit: tuple[int, int], strict: bool, steps: list[Any]) -> None:
    """Takes, give-backs, pauses and leaves of several processes in the
    line, against the model; with ``strict``, under global priority (each
    take publishes its process's waiters, all at the take's level), where
    levels order the line."""
    rate, burst = limit
    key = f"test:{{p48-{next(_keys)}}}"
    call = caller(script, [rate], [burst], key)
    model = Buckets([rate], [burst])
    now = T0
    for kind, dt, process, level, waiting, arg, units, book in steps:
        now += dt
        counts = [waiting if lv == level else 0 for lv in range(2)]
        demand = (process, TTL, level, tuple(counts)) if strict else None
        words = " ".join(map(str, counts))
        published = (process, TTL, level, words) if strict else ("", 0, 0, "0")
        rank = level if strict else 0  # levels order the line only under strict priority
        if kind == "take":
            xs = (min(units, burst),)
            extra = (*published, book, 1, process, level, waiting, GRACE)
            got = tuple(call("take", now, arg, xs, *extra))
            line = (process, rank, waiting, GRACE)
            want = model.take(now, arg, xs, demand, book=book, line=line)
        elif kind == "give":
            got = tuple(call("give", now, 0, (-arg,)))
            want = model.give(now, (-arg,))
        elif kind == "leave":
            got, want = leave_the_line(call, model, now, process, strict)
        else:
            got = tuple(call("pause", now, 50_000 * arg, (0,)))
            want = model.pause_for(now, 50_000 * arg)
        step = f"{kind} {process} L{level} waiting {waiting} arg {arg} book {book}"
        note(f"t={now - T0} {step}: {got}, {want}")
        assert got == want, ("P48", got, want)


def leave_the_line(
    call: Callable[..., Any], model: Buckets, now: int, process: str, strict: bool
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """``process`` leaves the line (its demand published as none, under
    strict priority): the script's answer at ``now``, and the model's."""
    nobody = (process, TTL, 0, "0 0") if strict else ("", 0, 0, "0")
    got = tuple(call("demand", now, 0, (0,), *nobody, 0, 1, process, 0, 0, GRACE))
    model.refill(now)
    model.publish(process, now, TTL, (0, 0))
    model.line.pop(process, None)
    return got, model.answer(1, 0)


@given(limit=one_limit, strict=st.booleans(), steps=st.lists(line_ops, min_size=1, max_size=30))
def test_the_line_tells_each_process_its_turn(
    script: Any, limit: tuple[int, int], strict: bool, steps: list[Any]
) -> None:
    """P48: in the line, at every chosen time the script answers exactly as
    the buckets and the line do: a process refused, or allowed while more
    of its waiters wait, is told its turn: the buckets' time for its take,
    one step later for each process ahead of it in the line (under global
    strict priority: of its level or a more urgent one); it keeps its place
    while refused; a granted process leaves its place (and goes to the end
    if more wait), as does one that says nobody waits, and one whose take
    is booked ahead (P44); turns more than the grace past are dropped."""
    line_run(script, limit, strict, steps)


def test_four_processes_refused_at_once_are_told_four_turns(script: Any) -> None:
    """P48 by hand: 10/s (T = 100 ms), burst 1. Processes refused at the same
    time are told turns one interval apart, not all the same time: one for
    each process ahead; one that asks before its turn keeps its place; one
    granted with more waiters goes to the end of the line; one that leaves
    makes room, and the turns after it come sooner."""
    call = caller(script, [10], [1])
    plain = ("", 0, 0, "0", 0, 1)

    def take(t: int, process: str, waiting: int = 2) -> list[int]:
        return call("take", T0 + t, 0, (1,), *plain, process, 0, waiting, GRACE)

    assert take(0, "a")[:2] == [1, 100_000]  # allowed; more wait: its turn at 100 ms
    assert [take(0, p)[:2] for p in "bcd"] == [[0, 200_000], [0, 300_000], [0, 400_000]]
    assert take(50_000, "b")[:2] == [0, 150_000]  # early: keeps its turn, 200 ms
    assert take(100_000, "a")[:2] == [1, 400_000]  # at its turn; to the end: 500 ms
    assert take(230_000, "b", 1)[:2] == [1, 100_000]  # 30 ms late; nobody left: out
    assert take(300_000, "c")[:2] == [0, 30_000]  # due at 330 ms: c keeps its place
    assert call("demand", T0 + 300_000, 0, (0,), *plain, "c", 0, 0, GRACE)[0] == 1  # c leaves
    assert take(330_000, "e")[:2] == [1, 300_000]  # c's permit; then after d and a: 630 ms
    assert take(400_000, "d")[:2] == [0, 30_000]  # d keeps its place (due at 430 ms)


def test_the_line_puts_urgent_takes_first_under_strict_priority(script: Any) -> None:
    """P48 by hand, under global strict priority: 10/s, burst 1. An
    interactive take is not put after the batch's turns; a batch take is
    put after the interactive one's."""
    call = caller(script, [10], [1])

    def take(t: int, process: str, level: int) -> list[int]:
        words = "0 2" if level else "2 0"
        extra = (process, TTL, level, words, 0, 1, process, level, 2, GRACE)
        return call("take", T0 + t, 0, (1,), *extra)

    assert take(0, "a", 1)[:2] == [1, 100_000]  # batch, allowed; its turn at 100 ms
    assert take(0, "b", 1)[:2] == [0, 200_000]  # batch, after a
    assert take(0, "c", 0)[:2] == [0, 100_000]  # interactive: when the bucket allows
    # batch, held by c's two interactive waiters (200 ms), then after a, b and c
    assert take(0, "d", 1)[:2] == [0, 500_000]


@given(
    grace=st.integers(1_000, 400_000),
    after=st.lists(st.integers(0, 800_000), min_size=1, max_size=6, unique=True),
)
def test_a_dead_processs_turn_counts_ahead_until_the_grace_is_past(
    script: Any, grace: int, after: list[int]
) -> None:
    """P48 by hand, at chosen times either side of the drop: 10/s (T = 100
    ms), burst 1. Process ``a`` takes the permit at 0 with more waiters, is
    told its turn (100 ms) and never asks again (killed). A newcomer ``b``
    granted at ``100 ms + dt`` with more waiters counts ``a`` ahead of it
    (its turn one step later: 200 ms on) while ``a``'s turn is at most the
    grace past (``dt <= grace``), and not from one microsecond after (100
    ms on)."""
    for dt in sorted({*after, grace, grace + 1}):
        call = caller(script, [10], [1])  # a fresh limit for each time
        plain = ("", 0, 0, "0", 0, 1)
        assert call("take", T0, 0, (1,), *plain, "a", 0, 2, grace)[:2] == [1, 100_000]
        got = call("take", T0 + 100_000 + dt, 0, (1,), *plain, "b", 0, 2, grace)[:2]
        assert got == [1, 200_000 if dt <= grace else 100_000], ("P48", dt, grace, got)


def test_a_lease_that_serves_every_waiter_leaves_the_line(script: Any) -> None:
    """P48 with P45: a take whose lease serves all of its process's waiters
    leaves the process with nobody left, so out of the line: a newcomer
    then has nobody ahead of it. 10/s, burst 3: ``a``, with two waiters and
    a reserve of 1, takes both; ``c`` is refused (one unit left, its reserve
    1) and told the buckets' time alone, 100 ms, not a step later."""
    call = caller(script, [10], [3])
    plain = ("", 0, 0, "0", 0)
    got = call("take", T0, 1, (1,), *plain, 2, "a", 0, 2, GRACE)
    assert got[0] == 2, ("P45: both of a's waiters served", got)
    got = call("take", T0, 1, (1,), *plain, 1, "c", 0, 1, GRACE)
    assert got[:2] == [0, 100_000], ("P48: a served out stays in the line", got)


def test_a_demand_blocks_nothing_from_the_microsecond_it_expires(script: Any) -> None:
    """P42 and P44 at the edge of a demand's life: ``a``'s demand (a waiter
    at level 0) lives 300 ms; at exactly 300 ms it blocks nothing, and a
    take at level 1 with a horizon of 150 ms that the buckets allow in 100
    ms is booked (``-1``), not refused for it."""
    call = caller(script, [10], [1])
    call("demand", T0, 0, (0,), "a", 300_000, 0, "1 0")
    now = T0 + 300_000
    assert call("take", now, 0, (1,))[:2] == [1, 100_000]  # the bucket emptied
    got = call("take", now, 0, (1,), "b", 300_000, 1, "0 1", 150_000, 1)
    assert got[:2] == [-1, 100_000], ("P42: an expired demand held a booking back", got)


def test_a_change_of_rate_alone_that_would_take_ages_to_refill_is_refused(
    script: Any, client: Any
) -> None:
    """P21: a change of the rate alone (the burst kept) to one that would
    take more than 1e9 s to refill the burst is refused by the script and
    never stored. 1/s, burst 10**6 (1e6 s to refill), changed to one unit
    in 10**4 s: 1e10 s."""
    key = f"test:{{p21-rate-alone-{next(_keys)}}}"
    call = caller(script, [1], [1_000_000], key)
    with pytest.raises(redis.exceptions.ResponseError, match="more than 1e9 s to refill"):
        call("rate", T0, 1, (0,), 10**10, -1)
    assert client.hget(key + ":limits", "l0") is None, "P21: stored"
