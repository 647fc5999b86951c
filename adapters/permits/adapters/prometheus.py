"""Export a limiter's statistics to Prometheus (extra ``permits[prometheus]``).

    from prometheus_client import REGISTRY
    REGISTRY.register(PermitsCollector(limiter, name="upstream", levels=["interactive", "batch"]))

Per level, what the seed asks dashboards to show: queue depth, the waits
as a histogram (``permits_wait_seconds_bucket``, ``_sum``, ``_count``: a
quantile over any time range is ``histogram_quantile`` of their rates), the
longest wait, and the permits granted, cancelled, rejected, expired and
refunded; per limit too, the units granted (``permits_units_granted``, a
gauge: refunds and settles give units back). A growing batch depth with
flat interactive waits is the policy working; rising interactive waits
mean demand exceeds the limit.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from permits.core import Machine

from ._base import BaseLimiter, _Limiting
from ._metrics import COUNTERS, DEFAULT_BUCKETS, Upstream, bucket_bounds, level_names
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


class PermitsCollector(Collector):
    """A collector for one limiter (or bare machine), read at scrape time.

    :param name: the ``limiter`` label, to tell several limiters apart.
    :param levels: a name per level for the ``level`` label (default: the
        level numbers).
    :param buckets: the histogram's upper bounds, in seconds, ascending; a
        wait within 0.4% of a bound may be counted on either side of it.
    :param upstream: a client integration's view of the upstream (for
        ``permits.httpx``, ``transport.upstream``): the 429s it received,
        the pauses they set and the headers it could not read.
    """

    def __init__(
        self,
        source: BaseLimiter | _Limiting | Machine,
        *,
        name: str = "default",
        levels: Sequence[str] | None = None,
        buckets: Sequence[float] = DEFAULT_BUCKETS,
        upstream: Upstream | None = None,
    ) -> None:
        self._upstream = upstream
        #: A limiter reads its statistics and waits at one moment (under its
        #: lock, for the thread adapter); a bare machine is read directly.
        self._limiting = source if isinstance(source, _Limiting) else None
        self._machine = source.machine if isinstance(source, _Limiting) else source
        self._names = level_names(self._machine, levels)
        self._limiter = name
        bounds = bucket_bounds(buckets)
        #: Each bound as the ``le`` label, written as prometheus_client writes its own.
        self._les: list[str] = [floatToGoString(b) for b in bounds]  # type: ignore[no-untyped-call]
        self._bounds_ns = [round(b * 1e9) for b in bounds]

    def collect(self) -> Iterator[Metric]:
        if self._limiting is not None:
            whole, waits = self._limiting.statistics_and_waits(self._bounds_ns)
        else:
            machine = self._machine
            whole = machine.statistics()
            waits = tuple(
                machine.waits_at_most(lv, self._bounds_ns) for lv in range(machine.levels)
            )
        stats = whole.levels
        labels = ["limiter", "level"]
        waiting = GaugeMetricFamily(
            "permits_waiting", "Waiters per level (queue depth)", labels=labels
        )
        for level in stats:
            waiting.add_metric([self._limiter, self._names[level.level]], level.waiting)
        yield waiting
        for field, text in COUNTERS:
            counter = CounterMetricFamily(f"permits_{field}", text, labels=labels)
            for level in stats:
                counter.add_metric([self._limiter, self._names[level.level]], getattr(level, field))
            yield counter
        wait = HistogramMetricFamily(
            "permits_wait_seconds", "Wait from push to grant, of granted waiters", labels=labels
        )
        longest = GaugeMetricFamily(
            "permits_wait_max_seconds", "Longest wait from push to grant, exact", labels=labels
        )
        for level in stats:
            at_most = waits[level.level]
            buckets = list(zip(self._les, at_most, strict=True))
            buckets.append(("+Inf", level.granted))
            label = [self._limiter, self._names[level.level]]
            wait.add_metric(label, buckets, level.wait_total_ns / 1e9)
            if level.wait_max_ns is not None:
                longest.add_metric(label, level.wait_max_ns / 1e9)
        yield wait
        yield longest
        # A gauge: a refund or a settle for less gives units back, and a
        # counter that goes down reads as a reset to rate().
        units = GaugeMetricFamily(
            "permits_units_granted",
            "Units granted per limit, less those refunded, as settled for those settled",
            labels=[*labels, "limit"],
        )
        for level in stats:
            for limit, count in zip(self._machine.limits, level.units_granted, strict=True):
                units.add_metric([self._limiter, self._names[level.level], limit], count)
        yield units
        limiter = [self._limiter]
        pauses = CounterMetricFamily(
            "permits_pauses",
            "Pauses that lengthened the time nothing is granted (a 429 with Retry-After)",
            labels=["limiter"],
        )
        pauses.add_metric(limiter, whole.pauses)
        yield pauses
        paused = CounterMetricFamily(
            "permits_paused_seconds",
            "Time nothing could be granted because of pauses, overlaps counted once",
            labels=["limiter"],
        )
        paused.add_metric(limiter, whole.paused_ns / 1e9)
        yield paused
        upstream = self._upstream
        if upstream is not None:
            for field, text in (
                ("throttled", "Responses 429 (limit exceeded) received from the upstream"),
                ("malformed", "Rate-limit headers from the upstream that did not parse"),
            ):
                counter = CounterMetricFamily(f"permits_upstream_{field}", text, labels=["limiter"])
                counter.add_metric(limiter, getattr(upstream, field))
                yield counter
