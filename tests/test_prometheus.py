"""The Prometheus collector, scraped as Prometheus would."""

from __future__ import annotations

import enum
import threading
from typing import Any

import pytest

from permits.core import (
    MILLISECOND,
    SECOND,
    Fifo,
    Machine,
    PermitTypeError,
    PermitValueError,
    StrictPriority,
)

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
    """A scrape shows each level's depth, counters and waits; its buckets
    are each level's own ``waits_at_most`` (P17)."""
    machine = Machine(StrictPriority(2), 100, max_waiting=(None, 2))
    machine.push("b0", 1, 0)  # granted at once
    machine.push("b1", 1, 0)
    machine.push("b2", 1, 0)
    machine.push("b3", 1, 0)  # rejected: level 1 holds 2
    machine.push("i1", 0, 0, max_wait_ns=0)  # too long: the next permit is 10 ms away
    machine.push("i0", 0, 4 * MILLISECOND)
    machine.cancel("b2")
    machine.tick(10 * MILLISECOND)  # i0 granted after 6 ms
    registry = prometheus_client.CollectorRegistry()
    registry.register(
        PermitsCollector(machine, name="upstream", level_names=["interactive", "batch"])
    )
    samples = scrape(registry)

    def value(name: str, level: str, **extra: str) -> float:
        labels = tuple(sorted({"limiter": "upstream", "level": level, **extra}.items()))
        return samples[(name, labels)]

    assert value("permits_waiting", "batch") == 1
    assert value("permits_waiting", "interactive") == 0
    assert value("permits_granted_total", "batch") == 1
    assert value("permits_granted_total", "interactive") == 1
    assert value("permits_rejected_total", "batch") == 1
    assert value("permits_too_long_total", "interactive") == 1
    assert value("permits_too_long_total", "batch") == 0
    assert value("permits_cancelled_total", "batch") == 1
    # the waits as a histogram: i0 waited 6 ms, b0 nothing
    assert value("permits_wait_seconds_bucket", "interactive", le="0.005") == 0
    assert value("permits_wait_seconds_bucket", "interactive", le="0.01") == 1
    assert value("permits_wait_seconds_bucket", "interactive", le="+Inf") == 1
    assert value("permits_wait_seconds_bucket", "batch", le="0.001") == 1
    # b1 still waits: a wait not yet over is in no bucket, nor the count
    assert value("permits_wait_seconds_bucket", "batch", le="+Inf") == 1
    assert value("permits_wait_seconds_count", "batch") == 1
    assert value("permits_wait_seconds_count", "interactive") == 1
    assert value("permits_wait_seconds_sum", "interactive") == pytest.approx(0.006)
    assert value("permits_wait_max_seconds", "interactive") == 0.006
    assert value("permits_units_granted", "interactive", limit="units") == 1
    assert value("permits_units_granted", "batch", limit="units") == 1


def test_level_names_must_match() -> None:
    with pytest.raises(PermitValueError, match="level_names="):
        PermitsCollector(Machine(StrictPriority(2), 1), level_names=["only-one"])


def test_two_levels_of_one_name_are_refused() -> None:
    """Two levels named alike were two series of the same labels in every
    family (a scrape Prometheus cannot ingest whole; the OpenTelemetry
    reader keeps one of the two): refused, naming the name given twice."""
    from permits.adapters._metrics import checked_level_names

    machine = Machine(StrictPriority(3), 1)
    with pytest.raises(PermitValueError, match=r"level_names=.*'batch' twice"):
        PermitsCollector(machine, level_names=["interactive", "batch", "batch"])
    with pytest.raises(PermitValueError, match="level_names="):
        checked_level_names(machine, ["0", "1", "0"])
    assert checked_level_names(machine, ["a", "b", "c"]) == ["a", "b", "c"]
    # an empty label value is no label to Prometheus: refused, by its entry
    with pytest.raises(PermitValueError, match=r"^level_names\[1\]='': must be a non-empty str$"):
        checked_level_names(machine, ["a", "", "c"])


class Level(enum.IntEnum):
    INTERACTIVE = 0
    BATCH = 1


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"level_names": [0, 1]}, "level_names[0]"),  # (named by its entry)
        ({"level_names": list(Level)}, "level_names[0]"),
        ({"level_names": "ab"}, "level_names"),
        ({"name": 3}, "name"),
        ({"name": None}, "name"),
        ({"buckets": [0.5, "1"]}, "buckets"),
    ],
)
def test_names_that_are_not_text_are_refused_when_made(
    options: dict[str, Any], argument: str
) -> None:
    """A label's value is text: a level named by a number (an IntEnum's
    members) or a limiter named None was taken, and every scrape of the
    registry then failed (the metrics of the whole process, not only these);
    it is refused when the collector is made, or a limiter added, naming the
    argument, and the collector is left as it was."""
    machine = Machine(StrictPriority(2), 1)
    with pytest.raises(PermitTypeError) as refused:
        PermitsCollector(machine, **options)
    assert refused.value.argument == argument
    collector = PermitsCollector(machine, name="first")
    if argument != "buckets":  # the collector's own
        with pytest.raises(PermitTypeError):
            collector.add(machine, **{"name": "second", **options})
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector)
    assert {labels for _, labels in scrape(registry)} >= {
        (("level", "0"), ("limiter", "first")),
        (("level", "1"), ("limiter", "first")),
    }
    assert all(dict(labels).get("limiter") != "second" for _, labels in scrape(registry))


def test_a_machine_that_keeps_no_waits_is_refused() -> None:
    """The collector exports each level's waits as a histogram: a machine
    made with ``keep_waits=False`` keeps none, so every scrape of the
    registry failed (the metrics of the whole process, not only these). It
    is refused when the collector is made, or the machine added, naming
    the source and saying what to do, and the collector is left as it
    was."""
    machine = Machine(StrictPriority(2), 1, keep_waits=False)
    with pytest.raises(PermitValueError, match="keep_waits=True") as refused:
        PermitsCollector(machine)
    assert (refused.value.argument, refused.value.value) == ("source", machine)
    collector = PermitsCollector(Machine(StrictPriority(2), 1), name="first")
    with pytest.raises(PermitValueError, match="keep_waits=True"):
        collector.add(machine, name="second")
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector)
    assert all(dict(labels).get("limiter") == "first" for _, labels in scrape(registry))


@pytest.mark.parametrize("source", [object(), "limiter", None])
def test_a_source_that_is_no_limiter_is_refused_naming_it(source: Any) -> None:
    """Not a limiter nor a machine (a client, a limiter's name): a
    PermitTypeError naming the argument and saying what to pass, where an
    AttributeError named an attribute of the collector's own
    (``keep_waits``); the collector is left as it was."""
    with pytest.raises(PermitTypeError, match=r"a limiter of permits\.adapters") as refused:
        PermitsCollector(source)
    assert (refused.value.argument, refused.value.value) == ("source", source)
    collector = PermitsCollector(Machine(StrictPriority(2), 1), name="first")
    with pytest.raises(PermitTypeError, match=r"or a permits\.core\.Machine"):
        collector.add(source, name="second")
    assert repr(collector) == "<PermitsCollector limiters=['first']>"


@pytest.mark.parametrize(
    "buckets", [[1.0, 0.5], [1.0, 1.0], [float("nan"), 1.0], [0.5, float("inf")], [-1.0, 1.0], []]
)
def test_buckets_must_ascend(buckets: list[float]) -> None:
    """Strictly ascending finite seconds, refused in words otherwise."""
    with pytest.raises(ValueError, match=r"buckets=.*strictly ascending finite seconds"):
        PermitsCollector(Machine(StrictPriority(2), 1), buckets=buckets)


@pytest.mark.parametrize("buckets", [[0.5, 1e300], [0.5, 10**400]])
def test_a_bound_too_long_for_nanoseconds_is_refused_naming_buckets(buckets: list[float]) -> None:
    """A bound past about 1e299 s has no nanoseconds a float holds (the
    core counts waits in them), and an int past a float's range is no
    float at all: an OverflowError came out of the collector's making;
    it is refused as any bound that is no finite number of seconds is,
    naming the buckets."""
    with pytest.raises(PermitValueError, match=r"strictly ascending finite seconds") as refused:
        PermitsCollector(Machine(StrictPriority(2), 1), buckets=buckets)
    assert (refused.value.argument, refused.value.value) == ("buckets", buckets)


def test_histogram_counts_match_the_waits() -> None:
    """Each bucket counts the waits at most its bound (P17's precision)."""
    machine = Machine(StrictPriority(1), 1000)
    waits = []
    for i in range(200):
        waits += [d.waited for d in machine.push(i, 0, 0)]
    while (at := machine.next_tick()) is not None:
        waits += [d.waited for d in machine.tick(at)]
    bounds = [0, 1_000_000, 50_000_000, 100_000_000, 199_000_000]
    counted = machine.waits_at_most(0, bounds)
    for bound, count in zip(bounds, counted, strict=True):
        exact = sum(1 for w in waits if w <= bound)
        near = sum(1 for w in waits if abs(w - bound) <= bound / 256)
        assert abs(count - exact) <= near, (bound, count, exact)
    assert machine.statistics().levels[0].wait_total_ns == sum(waits)


def test_scrape_shows_pauses_and_the_upstreams_answers() -> None:
    """Pauses (overlaps counted once) from the machine, and what a client
    integration read from real responses: the 429s, headers it could not
    parse, and quotas of a unit it does not count."""
    httpx = pytest.importorskip("httpx")
    from permits.adapters.threads import open_limiter
    from permits.httpx import Upstream

    machine = Machine(StrictPriority(1), 100)
    machine.pause_until(2 * MILLISECOND, 0)
    machine.pause_until(3 * MILLISECOND, MILLISECOND)  # overlaps: 1 ms more
    machine.pause_until(2 * MILLISECOND, 2 * MILLISECOND)  # ends sooner: no pause
    with open_limiter(StrictPriority(1), 100) as limiter:
        upstream = Upstream(limiter)
        upstream.learn(429, httpx.Headers({"Retry-After": "0"}))
        upstream.learn(429, httpx.Headers())  # no Retry-After: throttled, no pause
        # no Retry-After, and a retry to come: a backoff (the limiter's pause)
        assert upstream.again(429, httpx.Headers(), 0, 1, None)
        upstream.learn(503, httpx.Headers({"Retry-After": "soon"}))  # malformed
        # a quota of a unit no limit here counts: ignored
        bytes_policy = {"RateLimit-Policy": '"b";q=1000;qu="content-bytes"'}
        upstream.learn(200, httpx.Headers({**bytes_policy, "RateLimit": '"b";r=10;t=1'}))
        registry = prometheus_client.CollectorRegistry()
        registry.register(PermitsCollector(machine, name="api", upstream=upstream))
        samples = scrape(registry)
    at = (("limiter", "api"),)
    assert samples[("permits_pauses_total", at)] == 2
    assert samples[("permits_paused_seconds_total", at)] == pytest.approx(0.003)
    assert samples[("permits_upstream_throttled_total", at)] == 3
    assert samples[("permits_upstream_backoffs_total", at)] == 1
    assert samples[("permits_upstream_malformed_total", at)] == 1
    assert samples[("permits_upstream_ignored_total", at)] == 1


def test_no_counter_goes_down_when_a_permit_is_settled_or_refunded() -> None:
    """Units given back by a settle or a refund lower the units granted:
    exported as a gauge, not as a counter, whose fall ``rate()`` would read
    as a reset (a spike of every unit granted so far)."""
    machine = Machine(StrictPriority(2), 1000, 1000, settle_window_ns=60 * SECOND)
    machine.push("chat", 0, 0, cost=600)
    machine.push("batch", 1, 0, cost=300)
    registry = prometheus_client.CollectorRegistry()
    registry.register(PermitsCollector(machine))
    before = scrape(registry)
    machine.settle("chat", 150, MILLISECOND)  # it used less than it asked for
    machine.refund("batch", MILLISECOND)  # cancelled before it could proceed
    after = scrape(registry)
    types = {
        family.name: family.type
        for family in parser.text_string_to_metric_families(
            prometheus_client.generate_latest(registry).decode()
        )
    }
    for (name, labels), value in before.items():
        if types.get(name.removesuffix("_total")) == "counter":
            assert after[(name, labels)] >= value, (name, labels, after[(name, labels)], value)
    units = (("level", "0"), ("limit", "units"), ("limiter", "default"))
    assert (types["permits_units_granted"], after[("permits_units_granted", units)]) == (
        "gauge",
        150,
    )


def test_each_bucket_is_labelled_with_its_bound() -> None:
    """``le`` is the bound as given, written as prometheus_client writes
    its own (``1.0``): bounds that agree in six digits stay two buckets,
    each labelled with the bound it counts to."""
    machine = Machine(StrictPriority(1), 100)
    machine.push("a", 0, 0)
    registry = prometheus_client.CollectorRegistry()
    buckets = [0.001, 1.0, 120.0, 120.00001]
    registry.register(PermitsCollector(machine, buckets=buckets))
    text = prometheus_client.generate_latest(registry).decode()
    [family] = [
        f for f in parser.text_string_to_metric_families(text) if f.name == "permits_wait_seconds"
    ]
    bounds = [s.labels["le"] for s in family.samples if s.name.endswith("_bucket")]
    assert bounds == ["0.001", "1.0", "120.0", "120.00001", "+Inf"]


def test_several_limiters_in_one_registry() -> None:
    """Two limiters, each labelled with its name, in one registry that checks
    names as the default ``REGISTRY`` does: one collector holds both (two
    would be refused as duplicated timeseries), each family once."""
    first = Machine(StrictPriority(2), 100)
    second = Machine(StrictPriority(1), 100)
    first.push("a", 1, 0)
    second.push("b", 0, 0)
    second.push("c", 0, 0)
    registry = prometheus_client.CollectorRegistry(auto_describe=True)
    collector = PermitsCollector(first, name="search", level_names=["interactive", "batch"])
    collector.add(second, name="chat")
    registry.register(collector)
    with pytest.raises(ValueError, match=r"name='chat'.*give each its own"):
        collector.add(Machine(StrictPriority(1), 100), name="chat")
    samples = scrape(registry)
    assert samples[("permits_granted_total", (("level", "batch"), ("limiter", "search")))] == 1
    assert samples[("permits_granted_total", (("level", "0"), ("limiter", "chat")))] == 1
    assert samples[("permits_waiting", (("level", "0"), ("limiter", "chat")))] == 1
    text = prometheus_client.generate_latest(registry).decode()
    assert text.count("# TYPE permits_waiting gauge") == 1


@pytest.mark.parametrize("auto_describe", [False, True])
def test_a_second_collector_is_refused_by_any_registry(auto_describe: bool) -> None:
    """A second collector of these metrics is refused as it is registered,
    by a registry made as ``CollectorRegistry()`` too (which reads nothing
    of a collector with no ``describe`` as it registers it: it took the
    second, and every scrape then named each metric twice, a text the
    Prometheus server refuses whole); the first goes on being scraped."""
    machine = Machine(StrictPriority(1), 100)
    machine.push("a", 0, 0)
    registry = prometheus_client.CollectorRegistry(auto_describe=auto_describe)
    registry.register(PermitsCollector(machine, name="search"))
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(PermitsCollector(machine, name="chat"))
    text = prometheus_client.generate_latest(registry).decode()
    assert text.count("# TYPE permits_waiting gauge") == 1
    assert scrape(registry)[("permits_granted_total", (("level", "0"), ("limiter", "search")))] == 1


@pytest.mark.usefixtures("switch_often")
def test_a_scrape_while_another_thread_grants_keeps_buckets_within_the_count() -> None:
    """A scrape from the exporter's thread while the limiter's thread
    grants: no bucket counts more waits than ``_count`` (and ``+Inf``)."""
    machine = Machine(StrictPriority(1), 10**9, burst=10**6)
    registry = prometheus_client.CollectorRegistry()
    registry.register(PermitsCollector(machine, name="busy"))
    done = threading.Event()

    def grant() -> None:
        now = 0
        while not done.is_set():
            now += 1
            machine.take(now, 0, now)

    granting = threading.Thread(target=grant)
    granting.start()
    try:
        for _ in range(100):
            samples = scrape(registry)
            count = samples[("permits_wait_seconds_count", (("level", "0"), ("limiter", "busy")))]
            buckets = [
                value
                for (name, _), value in samples.items()
                if name == "permits_wait_seconds_bucket"
            ]
            assert max(buckets) <= count, (max(buckets), count)
    finally:
        done.set()
        granting.join()


def test_an_upstream_without_its_counters_is_refused_when_added() -> None:
    """``upstream=`` takes a client integration's ``upstream``, its counters.
    The middleware itself (``upstream=permits`` for ``permits.upstream``)
    was taken, and every scrape of the registry then failed
    (AttributeError); it is refused when the collector is made or a limiter
    added, naming the argument."""
    from permits.adapters import asyncio as asyncio_adapter
    from permits.aiohttp import PermitsMiddleware

    limiter = asyncio_adapter.Limiter(StrictPriority(2), 10)
    middleware = PermitsMiddleware(limiter)
    with pytest.raises(PermitTypeError) as refused:
        PermitsCollector(limiter, upstream=middleware)  # type: ignore[arg-type]
    assert refused.value.argument == "upstream"
    collector = PermitsCollector(Machine(Fifo(), 10), name="first")
    with pytest.raises(PermitTypeError):
        collector.add(limiter, name="second", upstream=middleware)  # type: ignore[arg-type]
    collector.add(limiter, name="second", upstream=middleware.upstream)
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector)
    assert scrape(registry)[("permits_upstream_throttled_total", (("limiter", "second"),))] == 0


def test_a_limiter_added_under_another_name_is_refused() -> None:
    """A limiter added again under another name (to export an upstream
    with it, say) was taken: each scrape exported its figures twice, and a
    dashboard's sums over limiters counted them twice. It is refused,
    naming the name it has, itself or its bare machine; its upstream goes
    where it is added, and the collector exports it once."""
    from permits.adapters import asyncio as asyncio_adapter
    from permits.aiohttp import PermitsMiddleware

    limiter = asyncio_adapter.Limiter(StrictPriority(2), 10)
    collector = PermitsCollector(limiter, name="llm")
    for source in (limiter, limiter.machine):
        with pytest.raises(PermitValueError) as refused:
            collector.add(source, name="llm-upstream")
        assert refused.value.argument == "source"
        assert str(refused.value).endswith(
            ": exported by this collector already, as 'llm': once, under one name, "
            "with its upstream"
        )
    assert repr(collector) == "<PermitsCollector limiters=['llm']>"
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector)
    waiting = [key for key in scrape(registry) if key[0] == "permits_waiting"]
    assert waiting == [
        ("permits_waiting", (("level", "0"), ("limiter", "llm"))),
        ("permits_waiting", (("level", "1"), ("limiter", "llm"))),
    ]
    # the right way: the limiter once, with its upstream
    middleware = PermitsMiddleware(limiter)
    collector = PermitsCollector(limiter, name="llm", upstream=middleware.upstream)
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector)
    assert scrape(registry)[("permits_upstream_throttled_total", (("limiter", "llm"),))] == 0


def test_a_limiter_added_again_is_refused_as_exported_already() -> None:
    """A limiter added again, as it was, is refused for what it is: exported
    already (not for its name, as if it were another limiter); the
    collector keeps exporting what it did."""
    first, second = Machine(StrictPriority(2), 100), Machine(Fifo(), 10)
    collector = PermitsCollector(first, name="llm")
    collector.add(second, name="search")
    with pytest.raises(PermitValueError) as refused:
        collector.add(first, name="llm")
    assert refused.value.argument == "source"
    assert str(refused.value).endswith(": exported by this collector already, as 'llm'")
    assert repr(collector) == "<PermitsCollector limiters=['llm', 'search']>"
    registry = prometheus_client.CollectorRegistry()
    registry.register(collector)
    assert ("permits_waiting", (("level", "0"), ("limiter", "search"))) in scrape(registry)
