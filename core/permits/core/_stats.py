"""Statistics: the bounded wait-time histogram and the frozen snapshots."""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Sequence
from decimal import Decimal

import attrs

from ._errors import PermitTypeError, PermitValueError
from .checks import check_int

__all__ = [
    "Busiest",
    "FlowStatistics",
    "RELATIVE_ERROR",
    "LevelStatistics",
    "Statistics",
    "WaitHistogram",
]

#: Significant bits each histogram bucket keeps of a wait (in nanoseconds).
_BITS = 8

#: Largest relative error of a quantile read from :class:`WaitHistogram`:
#: the value reported is within this fraction of the exact nearest-rank
#: quantile of the recorded waits (1/256, about 0.4%).
RELATIVE_ERROR = 1 / (1 << _BITS)

#: Per bit length ``n`` of a wait, the mask that keeps its top ``_BITS``
#: bits: its bucket is ``wait & _KEEP[n]`` (one look-up, not two shifts and
#: a test). Waits of 2**127 ns or more compute it.
_KEEP = [~((1 << max(0, n - _BITS)) - 1) for n in range(128)]


class WaitHistogram:
    """Counts of waits in log-linear buckets, for quantiles in bounded memory.

    A wait ``w`` (nanoseconds, ``>= 0``) below ``2**8`` has a bucket of its own;
    a larger one keeps its top 8 bits, so a bucket spans at most 1/128 of its
    lower bound and the midpoint reported is within :data:`RELATIVE_ERROR` of
    any value in it. The number of buckets grows with the logarithm of the
    largest wait (at most 128 per power of two), never with the number of
    waits recorded. The maximum is kept exactly.
    """

    __slots__ = ("_counts", "_max", "count", "total")

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        #: Number of waits recorded.
        self.count: int = 0
        #: Their sum, in nanoseconds, exact.
        self.total: int = 0
        # Largest wait recorded, exactly; -1 before the first (see max).
        self._max = -1

    @property
    def max(self) -> int | None:
        """Largest wait recorded, exactly; ``None`` before the first."""
        return None if self._max < 0 else self._max

    def record(self, wait: int) -> None:
        """Record one wait of ``wait`` nanoseconds (an ``int``, ``>= 0``)."""
        self._add(check_int("wait", wait, 0))

    def _add(self, wait: int) -> None:
        """:meth:`record` unchecked, for the waits the machine and the
        simulator know to be ``int >= 0`` (one at every grant: the check
        cost a free acquire 1%)."""
        self.count += 1
        if wait:
            self.total += wait
            if wait > self._max:
                self._max = wait
            n = wait.bit_length()
            try:
                bucket = wait & _KEEP[n]
            except IndexError:  # (a try costs nothing until it catches)
                bucket = wait & ~((1 << (n - _BITS)) - 1)
        else:  # (every free take's: nothing to add, and a bucket of its own)
            bucket = 0
            if self._max < 0:
                self._max = 0
        try:
            self._counts[bucket] += 1  # (no call: cheaper than get())
        except KeyError:
            self._counts[bucket] = 1

    def merge(self, other: WaitHistogram) -> None:
        """Count ``other``'s waits here too, as if each had been recorded here."""
        self.count += other.count
        self.total += other.total
        self._max = max(self._max, other._max)
        counts = self._counts
        for wait, n in other._counts.items():
            counts[wait] = counts.get(wait, 0) + n

    @property
    def buckets(self) -> int:
        """Number of buckets in use (the memory held, in entries)."""
        return len(self._counts)

    def quantile(self, q: float | Decimal) -> int | None:
        """The ``q``-quantile (nearest rank) within :data:`RELATIVE_ERROR`.

        ``None`` when nothing was recorded.
        """
        if q.__class__ is bool or not isinstance(q, (numbers.Real, Decimal)):
            raise PermitTypeError("q", q, "a number between 0 and 1")
        if not 0 <= q <= 1:
            raise PermitValueError("q", q, "must be between 0 and 1")
        if self._max < 0:
            return None
        rank = max(1, -int(-q * self.count // 1))  # ceil(q * count), at least 1
        seen = 0
        for wait, count in self.items():
            seen += count
            if seen >= rank:
                return wait
        # The buckets add up to count, unless read from another thread (an
        # exporter's) between a wait's count and its bucket: it is the largest.
        return self._max

    def at_most(self, bounds: Sequence[int]) -> list[int]:
        """For each bound (ns, ascending), how many waits were at most it:
        exact for a bound at a bucket's edge; otherwise the bucket the bound
        falls in counts whole if the bound is at or past its middle, so a
        wait is misplaced only if within :data:`RELATIVE_ERROR` of a bound."""
        items = self.items()
        out, seen, i = [], 0, 0
        for bound in bounds:
            while i < len(items) and items[i][0] <= bound:
                seen += items[i][1]
                i += 1
            out.append(seen)
        return out

    def items(self) -> list[tuple[int, int]]:
        """``(wait, count)`` for each bucket in use, by wait: the value
        :meth:`quantile` reports for the bucket, and how many waits fell in it."""
        top = self.max
        out = []
        for low in sorted(self._counts):
            width = 1 << max(0, low.bit_length() - _BITS)
            mid = low + (width - 1) // 2
            out.append((mid if top is None or mid < top else top, self._counts[low]))
        return out


@attrs.frozen
class LevelStatistics:
    """What one level has seen, at the moment of the snapshot.

    Waits run from push to grant, over granted waiters. The fields ending in
    ``_ns`` are the core's exact nanoseconds, ``None`` until the level's
    first grant (and always, from a machine made with ``keep_waits=False``,
    which keeps no waits); the properties ending in ``_s`` are the same in
    seconds, as the adapters speak, and ``0.0`` where those are ``None``
    (``granted`` says how many waits they summarise). Quantiles are within
    :data:`RELATIVE_ERROR` of exact; the maximum is exact.
    """

    level: int
    #: Waiters in the level's queue now (queue depth).
    waiting: int
    #: Pushes at this level: accepted, rejected or too long.
    pushed: int
    #: Permits granted (including those later refunded).
    granted: int
    #: Waiters that withdrew while waiting.
    cancelled: int
    #: Granted permits handed back unused.
    refunded: int
    #: Pushes refused because the level was full.
    rejected: int
    #: Waiters still waiting at their deadline.
    expired: int
    #: Median wait, in nanoseconds; ``None`` before the first grant.
    wait_p50_ns: int | None
    #: 99th percentile wait, in nanoseconds; ``None`` before the first grant.
    wait_p99_ns: int | None
    #: Longest wait, in nanoseconds, exact; ``None`` before the first grant.
    wait_max_ns: int | None
    #: Flows with waiters at this level now (the default flow counts as one).
    flows: int = 0
    #: The sum of every wait, in nanoseconds, exact; ``None`` from a machine
    #: that keeps no waits (``keep_waits=False``).
    wait_total_ns: int | None = 0
    #: Units granted of each limit (in the machine's order), net: less those
    #: refunded, and as settled for those settled.
    units_granted: tuple[int, ...] = ()
    #: Pushes refused because even their best case would wait longer than
    #: their ``max_wait_ns`` (:attr:`~permits.core.State.TOO_LONG`).
    too_long: int = 0

    @property
    def proceeded(self) -> int:
        """Permits granted and not refunded: the callers that went ahead
        (under :attr:`~permits.core.Charge.AT_SPEND`, with those whose permit
        is still in flight, about to go ahead or to hand it back)."""
        return self.granted - self.refunded

    @property
    def wait_p50_s(self) -> float:
        """Median wait in seconds; ``0.0`` before the first grant."""
        return _seconds(self.wait_p50_ns)

    @property
    def wait_p99_s(self) -> float:
        """99th percentile wait in seconds; ``0.0`` before the first grant."""
        return _seconds(self.wait_p99_ns)

    @property
    def wait_max_s(self) -> float:
        """Longest wait in seconds; ``0.0`` before the first grant."""
        return _seconds(self.wait_max_ns)


def _seconds(ns: int | None) -> float:
    return 0.0 if ns is None else in_seconds(ns)


def in_seconds(ns: int) -> float:
    """``ns`` nanoseconds in seconds, as the adapters and exporters speak:
    ``ns / 1e9``, or ``math.inf`` (``-math.inf``) past what a float holds
    (a wait of 10**400 ns is as long as an infinite one)."""
    if ns.__class__ is not int:
        ns = check_int("ns", ns)
    try:
        return ns / 1e9
    except OverflowError:  # the int is past a float; its seconds may not be
        try:
            return ns / 1_000_000_000
        except OverflowError:
            return math.inf if ns > 0 else -math.inf


@attrs.frozen
class Statistics:
    """A snapshot of every level's :class:`LevelStatistics`, and of the
    machine's pauses."""

    levels: tuple[LevelStatistics, ...]
    #: Pauses (:meth:`Machine.pause_until`) that lengthened the time nothing
    #: is granted: a call whose ``until`` is later than ``now`` and than the
    #: end of every earlier pause.
    pauses: int = 0
    #: Nanoseconds paused in all: the length of the union of every pause's
    #: ``[now, until)``.
    paused_ns: int = 0

    @property
    def granted(self) -> int:
        """Permits granted over all levels (including those refunded)."""
        return sum(level.granted for level in self.levels)

    @property
    def waiting(self) -> int:
        """Waiters over all levels."""
        return sum(level.waiting for level in self.levels)

    def shares(self) -> tuple[float, ...]:
        """Each level's fraction of the permits that proceeded (0.0 if none did)."""
        total = sum(level.proceeded for level in self.levels)
        if total == 0:
            return tuple(0.0 for _ in self.levels)
        return tuple(level.proceeded / total for level in self.levels)


@attrs.frozen
class FlowStatistics:
    """One flow of one level, among its busiest (:meth:`Machine.busiest_flows`).

    Units are those of the machine's flow limit (its first, unless
    ``flow_limit`` names another)."""

    flow: Hashable
    #: Its waiters now, exact.
    waiting: int
    #: The units they ask for, exact.
    waiting_units: int
    #: Units granted to it, at least its true count and at most
    #: ``granted_error`` above it (a bounded count: see :class:`Busiest`).
    granted_units: int
    granted_error: int


class Busiest:
    """The flows granted the most units at one level, in bounded memory.

    Space-Saving (Metwally, Agrawal and El Abbadi, 2005): at most
    ``capacity`` counters. A flow without one takes the smallest counter's,
    and that count as its error, so a count is never below the flow's true
    units and exceeds them by at most its error; any flow granted more than
    ``1 / capacity`` of all units holds a counter.
    """

    __slots__ = ("_counts", "capacity")

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        #: flow -> [count, error]
        self._counts: dict[Hashable, list[int]] = {}

    def add(self, flow: Hashable, units: int) -> None:
        counts = self._counts
        counter = counts.get(flow)
        if counter is not None:
            counter[0] += units
        elif len(counts) < self.capacity:
            counts[flow] = [units, 0]
        else:
            low = counts.pop(self._smallest())[0]
            counts[flow] = [low + units, low]

    def get(self, flow: Hashable) -> tuple[int, int]:
        """``(count, error)`` of ``flow``. One that holds no counter was
        granted nothing while the counters are not all taken (none was ever
        let go): ``(0, 0)``; once they are, it may have lost one, and its
        true units are at most the smallest count: ``(smallest, smallest)``."""
        counts = self._counts
        counter = counts.get(flow)
        if counter is not None:
            return (counter[0], counter[1])
        if len(counts) < self.capacity:
            return (0, 0)
        smallest = counts[self._smallest()][0]
        return (smallest, smallest)

    def _smallest(self) -> Hashable:
        """The flow of the smallest count (the first of them)."""
        counts = self._counts
        return min(counts, key=lambda key: counts[key][0])

    def flows(self) -> list[Hashable]:
        return list(self._counts)
