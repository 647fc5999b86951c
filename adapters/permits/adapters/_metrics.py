"""What every metrics exporter of a limiter shares: the instruments' words,
the histogram's default buckets, the level names, and what a client
integration counts of the upstream."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Protocol

from permits.core import Machine, PermitTypeError, PermitValueError, Statistics

__all__ = [
    "COUNTERS",
    "DEFAULT_BUCKETS",
    "UPSTREAM",
    "Upstream",
    "bucket_bounds",
    "check_upstream",
    "checked_level_names",
    "limiter_name",
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
    (
        "backoffs",
        "Responses 429 or 503 without a Retry-After that paused the limiter for a backoff",
        "{response}",
    ),
    ("malformed", "Rate-limit headers from the upstream that did not parse", "{header}"),
    (
        "ignored",
        "Rate-limit items from the upstream ignored: they count a unit no limit here counts",
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
    def backoffs(self) -> int: ...
    @property
    def malformed(self) -> int: ...
    @property
    def ignored(self) -> int: ...


def limiter_name(name: str) -> str:
    """The ``limiter`` label's value, checked: text (a Prometheus label's
    value is; a number there failed every scrape of the registry)."""
    if not isinstance(name, str):
        raise PermitTypeError("name", name, "a str, the limiter label's value")
    return name


def check_upstream(upstream: Upstream | None) -> Upstream | None:
    """``upstream``, checked: ``None``, or what has the counters the
    exporters read (``transport.upstream``, not the transport; a scrape
    would fail at each read)."""
    if upstream is not None and not all(hasattr(upstream, field) for field, _, _ in UPSTREAM):
        raise PermitTypeError(
            "upstream", upstream, "a client integration's upstream (transport.upstream)"
        )
    return upstream


def checked_level_names(machine: Machine, level_names: Sequence[str] | None) -> list[str]:
    """A name per level for the ``level`` label (default: the level
    numbers), checked: a sequence of ``str``, one per level, each its own."""
    count = machine.levels
    if level_names is None:
        return [str(i) for i in range(count)]
    if isinstance(level_names, str) or not isinstance(level_names, Sequence):
        raise PermitTypeError(
            "level_names", level_names, "a sequence of names (str), one per level"
        )
    for i, name in enumerate(level_names):  # a bad one named by its entry: level_names[0]=0
        if not isinstance(name, str):
            raise PermitTypeError(f"level_names[{i}]", name, "a level's name (str)")
        if not name:  # (an empty label value is no label to Prometheus)
            raise PermitValueError(f"level_names[{i}]", name, "must be a non-empty str")
    if len(level_names) != count:
        raise PermitValueError("level_names", level_names, f"needs one name per level ({count})")
    for i, name in enumerate(level_names):
        if name in level_names[:i]:
            # (each series of a level would be another's, labels and all)
            raise PermitValueError(
                "level_names",
                level_names,
                f"names {name!r} twice: give each level a name of its own",
            )
    return list(level_names)


def bucket_bounds(buckets: Sequence[float]) -> list[float]:
    """The histogram's upper bounds, checked: ascending finite seconds >= 0,
    each finite in nanoseconds too (the core's unit: at most about 1e299 s)."""
    if isinstance(buckets, str) or not isinstance(buckets, Iterable):
        raise PermitTypeError("buckets", buckets, "a sequence of seconds")
    given = list(buckets)
    for bound in given:
        if isinstance(bound, bool) or not isinstance(bound, (int, float)):
            raise PermitTypeError("buckets", buckets, f"a sequence of seconds (not {bound!r})")
    bounds = [_seconds(b) for b in given]
    if (
        not bounds
        or not all(math.isfinite(b * 1e9) for b in bounds)
        or bounds[0] < 0
        or any(a >= b for a, b in itertools.pairwise(bounds))
    ):
        raise PermitValueError(
            "buckets", buckets, "needs strictly ascending finite seconds >= 0 (at most about 1e299)"
        )
    return bounds


def _seconds(bound: float) -> float:
    """``bound`` as a float; infinite for an int past a float's range."""
    try:
        return float(bound)
    except OverflowError:
        return math.inf


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
