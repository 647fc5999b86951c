"""Export a limiter's statistics as OpenTelemetry metrics (extra ``permits[otel]``).

    instrument(limiter, name="upstream", level_names=["interactive", "batch"])
    instrument(other_limiter, name="search")  # the global provider's "permits" meter

The same instruments as the Prometheus collector, with OpenTelemetry's
names: per level (attributes ``limiter`` and ``level``) the queue depth
(``permits.waiting``, a gauge), the counters (``permits.granted``,
``permits.cancelled``, ``permits.rejected``, ``permits.expired``,
``permits.too_long``, ``permits.refunded``), the units granted per limit (``permits.units_granted``,
attribute ``limit``, an up-down counter: refunds and settles give units
back), the waits as a histogram (``permits.wait``, in seconds, recorded
as each caller proceeds) and the longest wait (``permits.wait.max``, in
seconds, from the limiter's start); for the whole limiter the
pauses and the seconds paused (``permits.pauses``, ``permits.paused``), and,
given ``upstream=transport.upstream`` from ``permits.httpx``, the 429s
received, the backoffs taken for a 429 or 503 without ``Retry-After``, the
headers that did not parse and the quotas ignored for their unit
(``permits.upstream.throttled``, ``permits.upstream.backoffs``,
``permits.upstream.malformed``, ``permits.upstream.ignored``). Everything
but the histogram is read from :meth:`~permits.core.Machine.statistics`
when the reader collects.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from permits.core import PermitTypeError, PermitValueError, in_seconds

from ._base import _Limiting
from ._metrics import (
    COUNTERS,
    DEFAULT_BUCKETS,
    UPSTREAM,
    Upstream,
    bucket_bounds,
    check_upstream,
    checked_level_names,
    limiter_name,
)
from ._requires import requires_extra

with requires_extra(__name__, "otel", "opentelemetry"):
    from opentelemetry import metrics
    from opentelemetry.metrics import CallbackOptions, Histogram, Meter, Observation

__all__ = ["DEFAULT_BUCKETS", "instrument", "uninstrument"]


class _Instrumented(NamedTuple):
    """A limiter instrumented on a meter, with its attributes."""

    limiter: _Limiting
    #: The ``limiter`` attribute, and the ``level`` attribute of each level.
    name: str
    level_names: list[str]
    upstream: Upstream | None
    #: Records each wait of the limiter in the meter's histogram.
    record: Callable[[int, int], None]


class _Sources:
    """The limiters instrumented on one meter: a tuple replaced, never
    changed in place (the reader's thread may be walking the one it
    replaces, as another thread instruments or uninstruments a limiter)."""

    __slots__ = ("all",)

    def __init__(self) -> None:
        self.all: tuple[_Instrumented, ...] = ()


#: Held by instrument and uninstrument as they read the limiters of a meter
#: (and a limiter's exporters) and replace them: two threads at once would
#: each write back what it read, without the other's change.
_changing = threading.Lock()

#: The limiters instrumented on each meter, and its wait histogram. A
#: meter keeps the first instrument of a name (and drops the callbacks of
#: another), so each instrument is made once per meter and reads them all.
_instrumented: weakref.WeakKeyDictionary[Meter, tuple[_Sources, Histogram]] = (
    weakref.WeakKeyDictionary()
)


#: The meter of ``meter=None``, got once: until an SDK is set, the API hands
#: out a new proxy meter at each ``get_meter``, and limiters instrumented on
#: two would not share one set of instruments (the SDK, once set, keeps the
#: first instrument of a name: the other limiters would never be read).
_default_meter: Meter | None = None


def _meter(meter: Meter | None) -> Meter:
    """``meter``, or the global provider's ``permits`` meter (the same one
    each time)."""
    global _default_meter
    if meter is not None:
        if not isinstance(meter, Meter):
            raise PermitTypeError(
                "meter", meter, "an OpenTelemetry Meter (meter_provider.get_meter(...)), or None"
            )
        return meter
    with _changing:  # (two threads' first calls at once: one meter for both)
        if _default_meter is None:
            _default_meter = metrics.get_meter("permits")
        return _default_meter


def instrument(
    limiter: _Limiting,
    meter: Meter | None = None,
    *,
    name: str = "default",
    level_names: Sequence[str] | None = None,
    buckets: Sequence[float] = DEFAULT_BUCKETS,
    upstream: Upstream | None = None,
) -> None:
    """Create ``limiter``'s instruments on ``meter`` (default: the global
    meter provider's ``permits`` meter, the same one each time, set or not
    yet). A meter of your own: the same one for every limiter (until an SDK
    is set, each ``get_meter`` call gives another). Each limiter once on a
    meter: again, under another name too, it is refused (its figures would
    be exported twice, and a dashboard's sums over limiters count them
    twice).

    :param name: the ``limiter`` attribute, to tell several limiters apart
        (each instrumented on the meter with a name of its own).
    :param level_names: a name per level for the ``level`` attribute (default:
        the level numbers).
    :param buckets: the wait histogram's bucket bounds, in seconds,
        ascending (an advice to the SDK, which a view may override; the
        first limiter's on a meter). Waits count from this call on; the
        counters from the limiter's start.
    :param upstream: a client integration's view of the upstream
        (``transport.upstream`` of ``permits.httpx``).
    """
    if not isinstance(limiter, _Limiting):
        raise PermitTypeError(
            "limiter",
            limiter,
            "a limiter of permits.adapters (what `with open_limiter(...) as limiter` gives; "
            "a bare Machine has no waits to tell)",
        )
    limiter_name(name)
    check_upstream(upstream)
    names = checked_level_names(limiter.machine, level_names)
    bounds = bucket_bounds(buckets)
    meter = _meter(meter)
    with _changing:  # (read, then replaced: by one thread at a time)
        if meter not in _instrumented:
            sources = _Sources()
            _observe(meter, sources)
            wait = meter.create_histogram(
                "permits.wait",
                unit="s",
                description="Wait from push to grant, of callers that proceeded",
                explicit_bucket_boundaries_advisory=bounds,
            )
            _instrumented[meter] = (sources, wait)
        sources, wait = _instrumented[meter]
        for other in sources.all:
            # (instrumented twice; under another name, its figures twice, and
            # a dashboard's sums over limiters counted twice)
            if other.limiter is limiter:
                raise PermitValueError(
                    "limiter",
                    limiter,
                    f"instrumented on this meter already, as {other.name!r} (uninstrument it "
                    "first to change its options, its name among them)",
                )
        if any(other.name == name for other in sources.all):
            raise PermitValueError(
                "name", name, "already the name of a limiter on this meter: give each its own"
            )
        attributes = [{"limiter": name, "level": level} for level in names]

        def record(level: int, waited: int) -> None:
            wait.record(in_seconds(waited), attributes[level])

        sources.all = (*sources.all, _Instrumented(limiter, name, names, upstream, record))
        # (a new list, never one changed in place: another thread may be
        # walking the one it replaces, as the limiter tells of a wait)
        limiter._on_proceed = [*limiter._on_proceed, record]


def uninstrument(limiter: _Limiting, meter: Meter | None = None) -> None:
    """Stop exporting ``limiter`` on ``meter`` (default: the global meter
    provider's ``permits`` meter): its waits are no longer recorded, and
    the reader no longer sees its attributes (the instruments stay, for the
    other limiters on the meter; an SDK cannot remove them). Its ``name``
    may then be given to another limiter, whose counts its series then
    read: from that limiter's start, so a reader sees them go back as at a
    restart (a delta reader, a negative delta once); the waits its
    histogram already holds stay in it, the new limiter's added. Raises
    :class:`~permits.core.PermitValueError` (a :class:`ValueError`) naming
    ``limiter`` if it is not instrumented on that meter."""
    meter = _meter(meter)
    with _changing:
        sources = _instrumented[meter][0] if meter in _instrumented else _Sources()
        mine = [source for source in sources.all if source.limiter is limiter]
        if not mine:
            on = [
                other
                for other, (held, _) in _instrumented.items()
                if any(source.limiter is limiter for source in held.all)
            ]
            which = (
                f", another object than the meter {on[0].name!r} it is instrumented on, "
                f"{on[0]!r} (a get_meter call may give a new one each time)"
                if on
                else ""
            )
            raise PermitValueError(
                "limiter",
                limiter,
                f"is not instrumented on meter {meter!r}{which}: pass the meter given to "
                "instrument()",
            )
        sources.all = tuple(source for source in sources.all if source.limiter is not limiter)
        for source in mine:
            limiter._on_proceed = [
                told for told in limiter._on_proceed if told is not source.record
            ]


def _observe(meter: Meter, sources: _Sources) -> None:
    """The observable instruments of ``meter``, read from every limiter of
    ``sources`` (those instrumented on it, now and later)."""

    def per_level(field: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [
                Observation(
                    getattr(level, field), {"limiter": s.name, "level": s.level_names[level.level]}
                )
                for s in sources.all
                for level in s.limiter.statistics().levels
            ]

        return observe

    def whole(
        read: Callable[[_Limiting], float],
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(read(s.limiter), {"limiter": s.name}) for s in sources.all]

        return observe

    def upstream(field: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [
                Observation(getattr(s.upstream, field), {"limiter": s.name})
                for s in sources.all
                if s.upstream is not None
            ]

        return observe

    meter.create_observable_gauge(
        "permits.waiting",
        callbacks=[per_level("waiting")],
        unit="{waiter}",
        description="Waiters per level (queue depth)",
    )

    def longest(options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(
                in_seconds(level.wait_max_ns),
                {"limiter": s.name, "level": s.level_names[level.level]},
            )
            for s in sources.all
            for level in s.limiter.statistics().levels
            if level.wait_max_ns is not None  # (none before the level's first grant)
        ]

    meter.create_observable_gauge(
        "permits.wait.max",
        callbacks=[longest],
        unit="s",
        description="Longest wait from push to grant, exact",
    )
    for field, text in COUNTERS:
        meter.create_observable_counter(
            f"permits.{field}", callbacks=[per_level(field)], unit="{permit}", description=text
        )

    def units(options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(
                count, {"limiter": s.name, "level": s.level_names[level.level], "limit": limit}
            )
            for s in sources.all
            for level in s.limiter.statistics().levels
            for limit, count in zip(s.limiter.machine.limits, level.units_granted, strict=True)
        ]

    # Up and down: a refund or a settle for less gives units back.
    meter.create_observable_up_down_counter(
        "permits.units_granted",
        callbacks=[units],
        unit="{unit}",
        description="Units granted per limit, less those refunded, as settled for those settled",
    )
    meter.create_observable_counter(
        "permits.pauses",
        callbacks=[whole(lambda limiter: limiter.statistics().pauses)],
        unit="{pause}",
        description="Pauses that lengthened the time nothing is granted (a 429 with Retry-After)",
    )
    meter.create_observable_counter(
        "permits.paused",
        callbacks=[whole(lambda limiter: in_seconds(limiter.statistics().paused_ns))],
        unit="s",
        description="Time nothing could be granted because of pauses, overlaps counted once",
    )
    for field, text, unit in UPSTREAM:
        meter.create_observable_counter(
            f"permits.upstream.{field}", callbacks=[upstream(field)], unit=unit, description=text
        )
