"""Export a limiter's statistics to Prometheus (extra ``permits[prometheus]``).

    from prometheus_client import REGISTRY
    collector = PermitsCollector(limiter, name="upstream", level_names=["interactive", "batch"])
    collector.add(other_limiter, name="search")  # several limiters: one collector
    REGISTRY.register(collector)

Per level, what a dashboard of the limiter shows: queue depth, the waits
as a histogram (``permits_wait_seconds_bucket``, ``_sum``, ``_count``: a
quantile over any time range is ``histogram_quantile`` of their rates), the
longest wait, and the permits granted, cancelled, rejected, expired,
refused as too long (``permits_too_long_total``: ``acquire(max_wait=...)``
refused) and refunded; per limit too, the units granted (``permits_units_granted``, a
gauge: refunds and settles give units back). A growing batch depth with
flat interactive waits is the policy working; rising interactive waits
mean demand exceeds the limit.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

from permits.core import Machine, PermitTypeError, PermitValueError, in_seconds

from ._base import BaseLimiter, _Limiting
from ._metrics import (
    COUNTERS,
    DEFAULT_BUCKETS,
    UPSTREAM,
    Upstream,
    bucket_bounds,
    check_upstream,
    checked_level_names,
    limiter_name,
    statistics_and_waits,
)
from ._requires import requires_extra

with requires_extra(__name__, "prometheus", "prometheus_client"):
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.registry import Collector
    from prometheus_client.utils import floatToGoString

__all__ = ["DEFAULT_BUCKETS", "PermitsCollector"]


class _Source(NamedTuple):
    """One limiter of a collector, with its labels."""

    #: A limiter reads its statistics and waits at one moment (under its
    #: lock, for the thread adapter); a bare machine is read directly.
    limiting: _Limiting | None
    machine: Machine
    #: The ``limiter`` label, and the ``level`` label of each level.
    name: str
    level_names: list[str]
    upstream: Upstream | None


class PermitsCollector(Collector):
    """A collector for one limiter (or bare machine), read at scrape time;
    :meth:`add` adds more, each with a ``limiter`` label of its own.

    :param name: the ``limiter`` label, to tell several limiters apart.
    :param level_names: a name per level for the ``level`` label (default:
        the level numbers).
    :param buckets: the histogram's upper bounds, in seconds, ascending; a
        wait within 0.4% of a bound may be counted on either side of it.
    :param upstream: a client integration's view of the upstream (for
        ``permits.httpx``, ``transport.upstream``): the 429s it received,
        the headers it could not read and the quotas it ignored for their
        unit.
    """

    def __init__(
        self,
        source: BaseLimiter | _Limiting | Machine,
        *,
        name: str = "default",
        level_names: Sequence[str] | None = None,
        buckets: Sequence[float] = DEFAULT_BUCKETS,
        upstream: Upstream | None = None,
    ) -> None:
        self._sources: list[_Source] = []
        bounds = bucket_bounds(buckets)
        #: Each bound as the ``le`` label, written as prometheus_client writes its own.
        self._les: list[str] = [floatToGoString(b) for b in bounds]  # type: ignore[no-untyped-call]
        self._bounds_ns = [round(b * 1e9) for b in bounds]
        self.add(source, name=name, level_names=level_names, upstream=upstream)

    def __repr__(self) -> str:
        return f"<PermitsCollector limiters={[source.name for source in self._sources]!r}>"

    def add(
        self,
        source: BaseLimiter | _Limiting | Machine,
        *,
        name: str,
        level_names: Sequence[str] | None = None,
        upstream: Upstream | None = None,
    ) -> None:
        """Export another limiter too, labelled ``limiter=name``: a registry
        holds one collector of these metrics (a second one registered is a
        ``DuplicateTimeseries``), so several limiters share it. Each
        limiter (each machine) once: added again, under another name too,
        it is refused (every scrape would export its figures twice, and a
        dashboard's sums over limiters count them twice); its
        ``upstream`` goes where it is added."""
        if not isinstance(source, (_Limiting, Machine)):
            raise PermitTypeError(
                "source",
                source,
                "a limiter of permits.adapters (what `with open_limiter(...) as limiter` "
                "gives) or a permits.core.Machine",
            )
        limiter_name(name)
        check_upstream(upstream)
        machine = source.machine if isinstance(source, _Limiting) else source
        names = checked_level_names(machine, level_names)
        for known in self._sources:
            if known.machine is machine:  # its figures twice: a dashboard's sums counted twice
                again = "" if known.name == name else ": once, under one name, with its upstream"
                raise PermitValueError(
                    "source",
                    source,
                    f"exported by this collector already, as {known.name!r}{again}",
                )
        if any(known.name == name for known in self._sources):
            raise PermitValueError(
                "name", name, "already the name of a limiter of this collector: give each its own"
            )
        limiting = source if isinstance(source, _Limiting) else None
        if not machine.keep_waits:  # (a bare machine: every limiter keeps them)
            raise PermitValueError(
                "source",
                source,
                "keeps no waits (keep_waits=False), which the wait histogram exports: "
                "make it with keep_waits=True (the default)",
            )
        self._sources.append(_Source(limiting, machine, name, names, upstream))

    def describe(self) -> Iterator[Metric]:
        """The metrics :meth:`collect` yields, without their samples: what
        a registry checks a collector against those registered before it.
        A second collector of these metrics is refused so (``Duplicated
        timeseries``) by every registry; one made with
        ``CollectorRegistry()``, which reads nothing of a collector without
        ``describe`` as it registers it, took it, and each scrape then
        named every metric twice (a text Prometheus refuses whole)."""
        families = _Families()
        yield from families.all()
        yield from families.upstreams

    def collect(self) -> Iterator[Metric]:
        families = _Families()
        for source in self._sources:
            if source.limiting is not None:
                whole, waits = source.limiting._statistics_and_waits(self._bounds_ns)
            else:
                whole, waits = statistics_and_waits(source.machine, self._bounds_ns)
            limiter = [source.name]
            for level in whole.levels:
                label = [source.name, source.level_names[level.level]]
                families.waiting.add_metric(label, level.waiting)
                for counter, (field, _) in zip(families.counters, COUNTERS, strict=True):
                    counter.add_metric(label, getattr(level, field))
                buckets = list(zip(self._les, waits[level.level], strict=True))
                buckets.append(("+Inf", level.granted))
                # (None only from a machine keeping no waits, which add() refuses)
                families.wait.add_metric(label, buckets, in_seconds(level.wait_total_ns or 0))
                if level.wait_max_ns is not None:
                    families.longest.add_metric(label, in_seconds(level.wait_max_ns))
                for limit, count in zip(source.machine.limits, level.units_granted, strict=True):
                    families.units.add_metric([*label, limit], count)
            families.pauses.add_metric(limiter, whole.pauses)
            families.paused.add_metric(limiter, in_seconds(whole.paused_ns))
            if source.upstream is not None:
                for counter, (field, _, _) in zip(families.upstreams, UPSTREAM, strict=True):
                    counter.add_metric(limiter, getattr(source.upstream, field))
        yield from families.all()
        if any(source.upstream is not None for source in self._sources):
            yield from families.upstreams


class _Families:
    """The metric families of one scrape (or of :meth:`PermitsCollector.describe`),
    empty."""

    def __init__(self) -> None:
        labels = ["limiter", "level"]
        self.waiting = GaugeMetricFamily(
            "permits_waiting", "Waiters per level (queue depth)", labels=labels
        )
        self.counters = [
            CounterMetricFamily(f"permits_{field}", text, labels=labels) for field, text in COUNTERS
        ]
        self.wait = HistogramMetricFamily(
            "permits_wait_seconds", "Wait from push to grant, of granted waiters", labels=labels
        )
        self.longest = GaugeMetricFamily(
            "permits_wait_max_seconds", "Longest wait from push to grant, exact", labels=labels
        )
        # A gauge: a refund or a settle for less gives units back, and a
        # counter that goes down reads as a reset to rate().
        self.units = GaugeMetricFamily(
            "permits_units_granted",
            "Units granted per limit, less those refunded, as settled for those settled",
            labels=[*labels, "limit"],
        )
        self.pauses = CounterMetricFamily(
            "permits_pauses",
            "Pauses that lengthened the time nothing is granted (a 429 with Retry-After)",
            labels=["limiter"],
        )
        self.paused = CounterMetricFamily(
            "permits_paused_seconds",
            "Time nothing could be granted because of pauses, overlaps counted once",
            labels=["limiter"],
        )
        self.upstreams = [
            CounterMetricFamily(f"permits_upstream_{field}", text, labels=["limiter"])
            for field, text, _ in UPSTREAM
        ]

    def all(self) -> Iterator[Metric]:
        """Every family but the upstream's, in the order a scrape shows them."""
        yield self.waiting
        yield from self.counters
        yield self.wait
        yield self.longest
        yield self.units
        yield self.pauses
        yield self.paused
