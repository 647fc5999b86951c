"""P21 and P22: the shared limit's script on a real Redis, at chosen times.

The script the limiter runs reads the time from Redis; the one tested here
is the same text with the time taken from ``ARGV`` instead
(``script_source(clock="argv")``), so that each call happens at a time the
test chooses. Its answers are compared with an exact token bucket written
from the definition (``Fraction`` arithmetic, no GCRA), at rates whose
interval is a whole number of microseconds.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import pytest
import redis
from hypothesis import given, note
from hypothesis import strategies as st

from permits.adapters.redis import script_source

from redis_server import RedisServer

_keys = itertools.count()


class Bucket:
    """The definition: ``burst`` permits of capacity, refilled at ``rate``;
    a request with reserve ``R`` takes one only if ``R + 1`` are there."""

    def __init__(self, rate: int, burst: int) -> None:
        self.T = Fraction(10**6, rate)  # microseconds per permit
        self.burst = burst
        self.tokens = Fraction(burst)
        self.at: int | None = None

    def _refill(self, now: int) -> None:
        if self.at is not None:
            self.tokens = min(Fraction(self.burst), self.tokens + (now - self.at) / self.T)
        self.at = now

    def available(self, now: int) -> Fraction:
        """Permits in the bucket at ``now``."""
        self._refill(now)
        return self.tokens

    def take(self, now: int, reserve: int) -> tuple[int, int, int]:
        self._refill(now)
        if self.tokens >= reserve + 1:
            self.tokens -= 1
            next_after = max(0, math.ceil((reserve + 1 - self.tokens) * self.T))
            return 1, next_after, math.floor(self.tokens)
        return 0, math.ceil((reserve + 1 - self.tokens) * self.T), math.floor(self.tokens)

    def give_back(self, now: int) -> tuple[int, int, int]:
        self._refill(now)
        self.tokens = min(Fraction(self.burst), self.tokens + 1)
        return 1, 0, math.floor(self.tokens)


@pytest.fixture(scope="module")
def script(redis_server: RedisServer) -> Any:
    client = redis.Redis.from_url(redis_server.url)
    yield client.register_script(script_source(clock="argv"))
    client.close()


T0 = 1_700_000_000_000_000  # a Redis-like time in microseconds

steps = st.lists(
    st.tuples(
        st.one_of(st.just(0), st.integers(1, 400_000), st.sampled_from([25_000, 100_000])),
        st.one_of(st.integers(0, 3), st.just(-1)),  # a reserve, or -1: give one back
    ),
    min_size=1,
    max_size=30,
)


@given(rate=st.sampled_from([1, 2, 4, 5, 8, 10]), burst=st.integers(1, 5), steps=steps)
def test_script_is_a_token_bucket_of_capacity_burst(
    script: Any, rate: int, burst: int, steps: list[tuple[int, int]]
) -> None:
    """P21, P22: at every chosen time the script answers exactly as the token
    bucket does (allowed, wait, permits left), whatever the reserve; grants
    over any window of ``d`` microseconds number at most ``burst + d / T``;
    and no request with reserve ``R`` leaves fewer than ``R`` permits."""
    key = f"test:{{p21-{next(_keys)}}}"
    bucket = Bucket(rate, burst)
    now = T0
    granted: list[int] = []
    for dt, reserve in steps:
        now += dt
        if reserve >= burst:
            reserve = burst - 1
        count = -1 if reserve < 0 else 1
        args = [float(bucket.T), burst, max(reserve, 0), 0, count, now]
        got = tuple(int(x) for x in script(keys=[key, key + ":audit"], args=args))
        before = bucket.available(now)
        want = bucket.give_back(now) if count < 0 else bucket.take(now, reserve)
        note(f"t={now - T0} reserve={reserve}: script {got}, bucket {want}")
        assert got == want, ("P21", got, want)
        if count > 0 and got[0]:
            granted.append(now)
            assert got[2] >= reserve, "P22"  # the reserve is left
        if count > 0 and not got[0]:
            assert before < reserve + 1, "P22"  # refused only to keep the reserve
            assert got[1] > 0, "P22"  # and told when to come back
    # P21, directly on the grants (give-backs aside, where none happened)
    if all(reserve >= 0 for _, reserve in steps):
        for i, j in itertools.combinations(range(len(granted)), 2):
            assert j - i + 1 <= burst + (granted[j] - granted[i]) / bucket.T, "P21"


def test_script_answers_at_chosen_times(script: Any) -> None:
    """P21, P22 by hand: rate 10/s (T = 100,000 us), burst 3, reserves 0 and 1."""
    key = f"test:{{hand-{next(_keys)}}}"

    def ask(t: int, reserve: int, count: int = 1) -> list[int]:
        args = [100_000.0, 3, reserve, 0, count, T0 + t]
        return [int(x) for x in script(keys=[key, key + ":audit"], args=args)]

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
