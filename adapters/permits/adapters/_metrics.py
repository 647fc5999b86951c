"""What every metrics exporter of a limiter shares: the instruments' words,
the histogram's default buckets, the level names, and what a client
integration counts of the upstream."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Protocol

from permits.core import Machine, Statistics

__all__ = [
    "COUNTERS",
    "DEFAULT_BUCKETS",
    "UPSTREAM",
    "Upstream",
    "bucket_bounds",
    "level_names",
    "statistics_and_waits",
]

#: Upper bounds (seconds) of the wait histogram's buckets: from the
#: millisecond an interactive call notices to the minute a batch tolerates.
DEFAULT_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)

#: The per-level counters: a field of LevelStatistics, and what it counts.
COUNTERS = (
    ("granted", "Permits granted (including those later refunded)"),
    ("cancelled", "Waiters that withdrew while waiting"),
    ("rejected", "Pushes refused because the level was full"),
    ("expired", "Waiters still waiting at their deadline"),
    ("too_long", "Pushes refused because even their best case would wait longer than max_wait"),
    ("refunded", "Granted permits handed back unused"),
)

#: What a client integration counts of the upstream (the fields of
#: :class:`Upstream`), what each counts, and its unit (OpenTelemetry's).
UPSTREAM = (
    ("throttled", "Responses 429 (limit exceeded) received from the upstream", "{response}"),
    ("malformed", "Rate-limit headers from the upstream that did not parse", "{header}"),
    (
        "ignored",
        "RateLimit items from the upstream ignored: their quota unit is no limit's here",
        "{item}",
    ),
)


class Upstream(Protocol):
    """What a client integration counts of the upstream's answers
    (``permits.httpx``'s ``transport.upstream``)."""

    @property
    def throttled(self) -> int: ...
    @property
    def pauses(self) -> int: ...
    @property
    def malformed(self) -> int: ...
    @property
    def ignored(self) -> int: ...


def level_names(machine: Machine, levels: Sequence[str] | None) -> list[str]:
    """A name per level for the ``level`` label (default: the level numbers)."""
    count = machine.levels
    if levels is not None and len(levels) != count:
        raise ValueError(f"levels={levels!r}: needs one name per level ({count})")
    return list(levels) if levels is not None else [str(i) for i in range(count)]


def bucket_bounds(buckets: Sequence[float]) -> list[float]:
    """The histogram's upper bounds, checked: ascending finite seconds >= 0."""
    bounds = [float(b) for b in buckets]
    if (
        not bounds
        or not all(map(math.isfinite, bounds))
        or bounds[0] < 0
        or any(a >= b for a, b in itertools.pairwise(bounds))
    ):
        raise ValueError(f"buckets={buckets!r}: needs strictly ascending finite seconds >= 0")
    return bounds


def statistics_and_waits(
    machine: Machine, bounds_ns: Sequence[int]
) -> tuple[Statistics, tuple[tuple[int, ...], ...]]:
    """``machine``'s statistics, and per level the waits at most each bound
    (:meth:`~permits.core.Machine.waits_at_most`): a histogram whose
    buckets and count agree. The buckets are read first, so that read from
    another thread (an exporter's) while a wait is recorded, no bucket
    counts more than the count read after it."""
    waits = tuple(machine.waits_at_most(level, bounds_ns) for level in range(machine.levels))
    return machine.statistics(), waits
