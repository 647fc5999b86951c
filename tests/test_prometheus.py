"""The Prometheus collector, scraped as Prometheus would."""

from __future__ import annotations

import pytest

from permits.core import MILLISECOND, Machine, StrictPriority

prometheus_client = pytest.importorskip("prometheus_client")
parser = pytest.importorskip("prometheus_client.parser")

from permits.adapters.prometheus import PermitsCollector  # noqa: E402


def scrape(registry: object) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = prometheus_client.generate_latest(registry).decode()
    samples = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_scrape_shows_depth_counters_and_waits() -> None:
    machine = Machine(StrictPriority(2), 100, max_waiting=(None, 2))
    machine.push("b0", 1, 0)  # granted at once
    machine.push("b1", 1, 0)
    machine.push("b2", 1, 0)
    machine.push("b3", 1, 0)  # rejected: level 1 holds 2
    machine.push("i0", 0, 4 * MILLISECOND)
    machine.cancel("b2")
    machine.tick(10 * MILLISECOND)  # i0 granted after 6 ms
    registry = prometheus_client.CollectorRegistry()
    registry.register(PermitsCollector(machine, name="upstream", levels=["interactive", "batch"]))
    samples = scrape(registry)

    def value(name: str, level: str, **extra: str) -> float:
        labels = tuple(sorted({"limiter": "upstream", "level": level, **extra}.items()))
        return samples[(name, labels)]

    assert value("permits_waiting", "batch") == 1
    assert value("permits_waiting", "interactive") == 0
    assert value("permits_granted_total", "batch") == 1
    assert value("permits_granted_total", "interactive") == 1
    assert value("permits_rejected_total", "batch") == 1
    assert value("permits_cancelled_total", "batch") == 1
    assert value("permits_wait_seconds", "interactive", quantile="0.99") == pytest.approx(
        0.006, rel=0.004
    )
    assert value("permits_wait_seconds", "interactive", quantile="1") == 0.006


def test_level_names_must_match() -> None:
    with pytest.raises(ValueError, match="levels="):
        PermitsCollector(Machine(StrictPriority(2), 1), levels=["only-one"])
