"""Export a limiter's statistics to Prometheus (extra ``permits[prometheus]``).

    from prometheus_client import REGISTRY
    REGISTRY.register(PermitsCollector(limiter, name="upstream", levels=["interactive", "batch"]))

Per level, what the seed asks dashboards to show: queue depth, wait
quantiles, and the permits granted, cancelled, rejected, expired and
refunded. A growing batch depth with flat interactive waits is the policy
working; rising interactive waits mean demand exceeds the limit.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from permits.core import Machine

from ._base import BaseLimiter
from ._requires import requires_extra

with requires_extra(__name__, "prometheus", "prometheus_client"):
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
    from prometheus_client.registry import Collector

__all__ = ["PermitsCollector"]

_COUNTERS = (
    ("granted", "Permits granted (including those later refunded)"),
    ("cancelled", "Waiters that withdrew while waiting"),
    ("rejected", "Pushes refused because the level was full"),
    ("expired", "Waiters still waiting at their deadline"),
    ("refunded", "Granted permits handed back unused"),
)


class PermitsCollector(Collector):
    """A collector for one limiter (or bare machine), read at scrape time.

    :param name: the ``limiter`` label, to tell several limiters apart.
    :param levels: a name per level for the ``level`` label (default: the
        level numbers).
    """

    def __init__(
        self,
        source: BaseLimiter | Machine,
        *,
        name: str = "default",
        levels: Sequence[str] | None = None,
    ) -> None:
        self._machine = source.machine if isinstance(source, BaseLimiter) else source
        count = self._machine.levels
        if levels is not None and len(levels) != count:
            raise ValueError(f"levels={levels!r}: needs one name per level ({count})")
        self._names = list(levels) if levels is not None else [str(i) for i in range(count)]
        self._limiter = name

    def collect(self) -> Iterator[Metric]:
        stats = self._machine.statistics().levels
        labels = ["limiter", "level"]
        waiting = GaugeMetricFamily(
            "permits_waiting", "Waiters per level (queue depth)", labels=labels
        )
        for level in stats:
            waiting.add_metric([self._limiter, self._names[level.level]], level.waiting)
        yield waiting
        for field, text in _COUNTERS:
            counter = CounterMetricFamily(f"permits_{field}", text, labels=labels)
            for level in stats:
                counter.add_metric([self._limiter, self._names[level.level]], getattr(level, field))
            yield counter
        wait = GaugeMetricFamily(
            "permits_wait_seconds",
            "Wait from push to grant: p50 and p99 (within 0.4%) and max, over granted waiters",
            labels=[*labels, "quantile"],
        )
        for level in stats:
            for quantile, ns in (
                ("0.5", level.wait_p50_ns),
                ("0.99", level.wait_p99_ns),
                ("1", level.wait_max_ns),
            ):
                if ns is not None:  # no quantile before the level's first grant
                    wait.add_metric([self._limiter, self._names[level.level], quantile], ns / 1e9)
        yield wait
