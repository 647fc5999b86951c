"""The OpenTelemetry instruments, read by the SDK's in-memory reader."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

pytest.importorskip("opentelemetry.sdk.metrics")

import httpx
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from permits.adapters import WouldWaitTooLong, threads
from permits.adapters import asyncio as asyncio_adapter
from permits.adapters import opentelemetry as opentelemetry_adapter
from permits.adapters.opentelemetry import instrument, uninstrument
from permits.core import PermitValueError, StrictPriority
from permits.httpx import Upstream
from permits.testing import virtual_backend

pytestmark = pytest.mark.timeout(60)


def points(reader: InMemoryMetricReader, *, monotonic: bool = False) -> dict[str, list[Any]]:
    """The data points of each metric the reader reads (``monotonic``: of
    each sum it reads as monotonic, a counter)."""
    data = reader.get_metrics_data()
    assert data is not None
    return {
        metric.name: list(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if not monotonic or getattr(metric.data, "is_monotonic", False)
    }


def value(found: dict[str, list[Any]], name: str, **attributes: str) -> Any:
    [point] = [
        p for p in found[name] if all(p.attributes.get(k) == v for k, v in attributes.items())
    ]
    return point


def test_the_thread_limiter_exports_its_statistics_and_waits() -> None:
    """Counters, depth, units, pauses and the upstream's 429s as the reader
    collects them; the waits of the callers that proceeded in the histogram,
    in the buckets asked for."""
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    with threads.open_limiter(StrictPriority(2), 10, 1, max_waiting=(None, 0)) as limiter:
        upstream = Upstream(limiter)
        instrument(
            limiter,
            meter,
            name="api",
            level_names=["interactive", "batch"],
            buckets=[0.0005, 0.1],
            upstream=upstream,
        )
        limiter.acquire(1)  # granted at once
        limiter.acquire(0)  # waits for the next permit, up to 0.1 s
        with pytest.raises(Exception, match="rejected"):
            limiter.acquire(1)  # level 1 never queues, and no permit is free
        with pytest.raises(WouldWaitTooLong):
            limiter.acquire(0, max_wait=0)  # the next permit is 0.1 s away
        upstream.learn(429, httpx.Headers({"Retry-After": "0.001"}))
        found = points(reader)
    at = {"limiter": "api"}
    assert value(found, "permits.granted", level="batch", **at).value == 1
    assert value(found, "permits.granted", level="interactive", **at).value == 1
    assert value(found, "permits.rejected", level="batch", **at).value == 1
    assert value(found, "permits.too_long", level="interactive", **at).value == 1
    assert value(found, "permits.too_long", level="batch", **at).value == 0
    assert value(found, "permits.waiting", level="interactive", **at).value == 0
    units = value(found, "permits.units_granted", level="batch", limit="units", **at)
    assert units.value == 1
    assert value(found, "permits.pauses", **at).value == 1
    assert value(found, "permits.paused", **at).value == pytest.approx(0.001, abs=1e-6)
    assert value(found, "permits.upstream.throttled", **at).value == 1
    assert value(found, "permits.upstream.backoffs", **at).value == 0
    assert value(found, "permits.upstream.malformed", **at).value == 0
    assert value(found, "permits.upstream.ignored", **at).value == 0
    batch = value(found, "permits.wait", level="batch", **at)
    assert (batch.count, list(batch.explicit_bounds)) == (1, [0.0005, 0.1])
    assert batch.bucket_counts[0] == 1  # granted at once: no wait
    interactive = value(found, "permits.wait", level="interactive", **at)
    assert interactive.count == 1
    assert interactive.sum > 0


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", [virtual_backend("asyncio")], ids=["asyncio"])
async def test_an_async_limiter_records_each_caller_that_proceeds() -> None:
    """On virtual time: five callers at once, one permit each 0.1 s, wait
    0, 0.1, 0.2, 0.3 and 0.4 s; a sixth, at 0.5 s, takes one at once. The
    waits in seconds, each recorded as its caller proceeds."""
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    async with asyncio_adapter.open_limiter(StrictPriority(1), 10, 1) as limiter:
        instrument(limiter, meter)
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(limiter.acquire)
        await anyio.sleep(0.1)
        assert limiter.try_acquire()  # a caller that proceeds too
        found = points(reader)
    wait = value(found, "permits.wait", level="0", limiter="default")
    assert wait.count == 6
    assert wait.sum == pytest.approx(1.0)
    assert value(found, "permits.wait.max", level="0").value == pytest.approx(0.4)
    assert value(found, "permits.granted", level="0").value == 6


def test_a_bare_machine_or_bad_names_are_refused() -> None:
    """A bare machine is refused as ``limiter``, a ``PermitTypeError``
    (it was a plain ``TypeError``, which carries no argument), and so is a
    ``meter`` that is not one (it was an ``AttributeError``)."""
    from permits.core import Machine, PermitTypeError

    meter = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("test")
    with pytest.raises(PermitTypeError, match="limiter=") as refused:
        instrument(Machine(StrictPriority(1), 1), meter)  # type: ignore[arg-type]
    assert refused.value.argument == "limiter"
    with threads.open_limiter(StrictPriority(2), 1) as limiter:
        with pytest.raises(ValueError, match="one name per level"):
            instrument(limiter, meter, level_names=["only one"])
        with pytest.raises(ValueError, match="ascending"):
            instrument(limiter, meter, buckets=[1.0, 0.5])
        for past_nanoseconds in ([0.5, 1e300], [0.5, 10**400]):  # (an OverflowError, 10**400)
            with pytest.raises(ValueError, match=r"^buckets=.*at most about 1e299"):
                instrument(limiter, meter, buckets=past_nanoseconds)
        assert limiter._on_proceed == []
        with pytest.raises(PermitTypeError, match="meter=3: expected an OpenTelemetry Meter"):
            instrument(limiter, 3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"name": None}, "name"),
        ({"level_names": [0, 1]}, "level_names[0]"),
        ({"buckets": ["1"]}, "buckets"),
    ],
)
def test_names_that_are_not_text_are_refused(options: dict[str, Any], argument: str) -> None:
    """The attributes are the Prometheus collector's labels, text: a name
    that is not (None, which the SDK drops from every point) is refused as
    the collector refuses it, naming the argument, and nothing is
    instrumented."""
    from permits.core import PermitTypeError

    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    with threads.open_limiter(StrictPriority(2), 1) as limiter:
        with pytest.raises(PermitTypeError) as refused:
            instrument(limiter, meter, **options)
        assert refused.value.argument == argument
        assert limiter._on_proceed == []
        instrument(limiter, meter, name="api")
        limiter.acquire(0)
        assert value(points(reader), "permits.granted", level="0").attributes == {
            "limiter": "api",
            "level": "0",
        }


def test_no_counter_goes_down_when_a_permit_is_settled() -> None:
    """A settle for less lowers the units granted: ``permits.units_granted``
    is an up-down counter, not a counter (whose fall a backend reads as a
    reset: a spike of every unit granted so far)."""
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    with threads.open_limiter(StrictPriority(1), 1000, 1000, settle_window=60.0) as limiter:
        instrument(limiter, meter)
        permit = limiter.acquire(cost=600)
        before = points(reader, monotonic=True)
        permit.settle(150)  # it used less than it asked for
        after = points(reader, monotonic=True)
        found = points(reader)
    for name, counted in after.items():
        now = [p.value for p in counted]
        then = [p.value for p in before[name]]
        assert all(a >= b for a, b in zip(now, then, strict=True)), (name, now, then)
    assert value(found, "permits.units_granted", level="0", limit="units").value == 150


def test_several_limiters_on_one_meter() -> None:
    """Two limiters instrumented on one meter, each with its ``limiter``
    attribute: both are read (the SDK keeps the first instrument of a name,
    so a second limiter's own would never be)."""
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    with (
        threads.open_limiter(StrictPriority(1), 10) as search,
        threads.open_limiter(StrictPriority(2), 10) as chat,
    ):
        instrument(search, meter, name="search")
        instrument(chat, meter, name="chat", level_names=["interactive", "batch"])
        with (
            threads.open_limiter(StrictPriority(1), 10) as third,
            pytest.raises(ValueError, match=r"name='chat'.*give each its own"),
        ):
            instrument(third, meter, name="chat")
        search.acquire(0)
        chat.acquire(1)
        assert not chat.try_acquire(1)
        found = points(reader)
    assert value(found, "permits.granted", limiter="search", level="0").value == 1
    assert value(found, "permits.granted", limiter="chat", level="batch").value == 1
    assert value(found, "permits.expired", limiter="chat", level="batch").value == 1
    assert value(found, "permits.waiting", limiter="chat", level="interactive").value == 0
    assert value(found, "permits.wait", limiter="chat", level="batch").count == 1


def test_a_limiter_uninstrumented_is_no_longer_read() -> None:
    """After ``uninstrument``, a limiter's counters are no longer observed
    and its waits no longer recorded; the other limiter on the meter still
    is, and the name is free again."""
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    with (
        threads.open_limiter(StrictPriority(1), 1000, 10) as search,
        threads.open_limiter(StrictPriority(1), 1000, 10) as chat,
    ):
        instrument(search, meter, name="search")
        instrument(chat, meter, name="chat")
        search.acquire(0)
        uninstrument(search, meter)
        with pytest.raises(PermitValueError, match="pass the meter given") as refused:
            uninstrument(search, meter)
        assert refused.value.argument == "limiter"
        search.acquire(0)
        chat.acquire(0)
        found = points(reader)
        assert [p.attributes["limiter"] for p in found["permits.granted"]] == ["chat"]
        # (the SDK keeps reporting a histogram's points once recorded)
        assert value(found, "permits.wait", limiter="search").count == 1
        assert value(found, "permits.wait", limiter="chat").count == 1
        instrument(search, meter, name="search")
        found = points(reader)
    assert value(found, "permits.granted", limiter="search").value == 2


def _no_provider_set_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's global meter provider as it is before any is set, and
    the adapter's default meter not yet got."""
    from opentelemetry.metrics import _internal as api
    from opentelemetry.util._once import Once

    import permits.adapters.opentelemetry as otel

    monkeypatch.setattr(api, "_METER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(api, "_METER_PROVIDER", None)
    monkeypatch.setattr(api, "_PROXY_METER_PROVIDER", api._ProxyMeterProvider())
    monkeypatch.setattr(otel, "_default_meter", None)


def test_limiters_instrumented_before_the_sdk_is_set_are_all_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no meter given, each limiter goes on the global provider's
    ``permits`` meter. Until an SDK is set, the API hands out a new proxy
    meter at each ``get_meter``: a second limiter's instruments then went
    on a meter of their own, which the SDK dropped once set (it keeps the
    first instrument of a name), so that limiter was never read, and
    ``uninstrument`` found no limiter on its new meter. The meter is got
    once."""
    _no_provider_set_yet(monkeypatch)
    reader = InMemoryMetricReader()
    with (
        threads.open_limiter(StrictPriority(1), 1000, 10) as search,
        threads.open_limiter(StrictPriority(1), 1000, 10) as chat,
    ):
        instrument(search, name="search")
        instrument(chat, name="chat")
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        search.acquire(0)
        chat.acquire(0)
        chat.acquire(0)
        found = points(reader)
        assert value(found, "permits.granted", limiter="search").value == 1
        assert value(found, "permits.granted", limiter="chat").value == 2
        assert value(found, "permits.wait", limiter="chat").count == 2
        uninstrument(search)
        read = {p.attributes["limiter"] for p in points(reader)["permits.granted"]}
        assert read == {"chat"}


def test_two_threads_first_instrumenting_on_the_default_meter_share_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two threads' first ``instrument`` with no meter, at once (here the
    second while the first gets the meter): one meter for both. It was got
    outside the lock: each thread could get a proxy of its own, and once an
    SDK was set, the second's instruments were dropped (never read), and
    ``uninstrument`` of the first found it on no meter."""
    _no_provider_set_yet(monkeypatch)
    get_meter = metrics.get_meter
    getting = threading.Event()

    def slow(*args: Any, **kwargs: Any) -> Any:
        getting.set()
        time.sleep(0.05)  # (the other thread comes meanwhile)
        return get_meter(*args, **kwargs)

    monkeypatch.setattr(metrics, "get_meter", slow)
    reader = InMemoryMetricReader()
    with (
        threads.open_limiter(StrictPriority(1), 1000, 10) as search,
        threads.open_limiter(StrictPriority(1), 1000, 10) as chat,
    ):
        one = threading.Thread(target=instrument, args=(search,), kwargs={"name": "search"})
        one.start()
        getting.wait(10)
        instrument(chat, name="chat")
        one.join(10)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        search.acquire(0)
        chat.acquire(0)
        read = {p.attributes["limiter"] for p in points(reader)["permits.granted"]}
        assert read == {"search", "chat"}
        uninstrument(search)


def test_a_name_given_to_another_limiter_reads_its_counts() -> None:
    """As ``uninstrument`` says: a name given to another limiter reads that
    limiter's counts, from its start (as at a restart), and its histogram
    keeps the waits it held, the new limiter's added."""
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    with (
        threads.open_limiter(StrictPriority(1), 1000, 10) as old,
        threads.open_limiter(StrictPriority(1), 1000, 10) as new,
    ):
        instrument(old, meter, name="search")
        for _ in range(3):
            old.acquire(0)
        assert value(points(reader), "permits.granted", limiter="search").value == 3
        uninstrument(old, meter)
        instrument(new, meter, name="search")
        new.acquire(0)
        found = points(reader)
        assert value(found, "permits.granted", limiter="search").value == 1
        assert value(found, "permits.wait", limiter="search").count == 4


def test_an_upstream_without_its_counters_is_refused() -> None:
    """``upstream=`` takes ``transport.upstream``: the transport itself was
    taken, and each read of the upstream's counters then failed in the
    reader's callback. It is refused, naming the argument, and nothing is
    instrumented."""
    from permits.core import PermitTypeError
    from permits.httpx import PermitsTransport

    meter = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("test")
    with threads.open_limiter(StrictPriority(2), 1) as limiter:
        transport = PermitsTransport(limiter, httpx.MockTransport(lambda r: httpx.Response(200)))
        with pytest.raises(PermitTypeError) as refused:
            instrument(limiter, meter, upstream=transport)  # type: ignore[arg-type]
        assert refused.value.argument == "upstream"
        assert limiter._on_proceed == []
        instrument(limiter, meter, upstream=transport.upstream)


def test_the_instruments_are_the_prometheus_collectors() -> None:
    """Every metric the Prometheus collector exports has its instrument
    here, of the same kind and unit, named as OpenTelemetry's Prometheus
    exporter names it (dots as underscores, ``_seconds`` for the unit
    ``s``), and no other: the longest wait was the collector's alone."""
    prometheus_client = pytest.importorskip("prometheus_client")
    from permits.adapters.prometheus import PermitsCollector

    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    registry = prometheus_client.CollectorRegistry()
    with threads.open_limiter(StrictPriority(2), 10, 1) as limiter:
        upstream = Upstream(limiter)
        instrument(limiter, meter, upstream=upstream)
        registry.register(PermitsCollector(limiter, upstream=upstream))
        limiter.acquire(0)
        data = reader.get_metrics_data()
        prometheus = {(family.name, family.type) for family in registry.collect()}
    assert data is not None
    kinds = {"Sum": "counter", "Gauge": "gauge", "Histogram": "histogram"}
    otel = set()
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kind = kinds[type(metric.data).__name__]
                if kind == "counter" and not metric.data.is_monotonic:  # type: ignore[union-attr]
                    kind = "gauge"  # (an up-down counter, as the exporter writes it)
                name = metric.name.replace(".", "_") + ("_seconds" if metric.unit == "s" else "")
                otel.add((name, kind))
    assert otel == prometheus


def test_a_limiter_uninstrumented_as_it_tells_a_wait_leaves_the_other_meters_sample() -> None:
    """``uninstrument`` from one meter while the limiter tells its exporters
    of a wait (another thread's, here at once from between two of them):
    the other meter still records that wait (the list of exporters was
    changed in place as it was walked, and the one after skipped)."""
    readers = [InMemoryMetricReader(), InMemoryMetricReader()]
    first, second = (MeterProvider(metric_readers=[r]).get_meter("test") for r in readers)
    with threads.open_limiter(StrictPriority(1), 1000, 10) as limiter:
        instrument(limiter, first)

        def meanwhile(level: int, waited: int) -> None:
            uninstrument(limiter, first)

        limiter._on_proceed.append(meanwhile)
        instrument(limiter, second)
        limiter.acquire(0)
        assert value(points(readers[1]), "permits.wait", level="0").count == 1


def test_a_limiter_uninstrumented_as_the_reader_reads_leaves_the_others_read() -> None:
    """``uninstrument`` from another thread while the reader walks the
    meter's limiters (here at once, from the first one's statistics): the
    limiter after it is still read in that collection (the list was
    changed in place as it was walked, and the one after skipped)."""
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    with (
        threads.open_limiter(StrictPriority(1), 1000, 10) as first,
        threads.open_limiter(StrictPriority(1), 1000, 10) as second,
    ):
        instrument(first, meter, name="first")
        instrument(second, meter, name="second")
        statistics = first.statistics

        def meanwhile() -> Any:
            uninstrument(first, meter)
            return statistics()

        first.statistics = meanwhile  # type: ignore[method-assign]
        found = points(reader)
        assert [p.attributes["limiter"] for p in found["permits.waiting"]] == ["first", "second"]
        again = points(reader)
        assert [p.attributes["limiter"] for p in again["permits.waiting"]] == ["second"]


def test_two_threads_instrumenting_on_one_meter_at_once_are_both_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two threads instrument a limiter each on one meter at once (here the
    second all while the first is between reading the meter's limiters and
    writing them back): both are read. The tuple was replaced with no lock,
    so the first wrote back the limiters it had read, without the second."""
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    made = opentelemetry_adapter._Instrumented
    second_done = threading.Event()
    calls = 0

    def slow(*fields: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:  # the first: the second instruments meanwhile (or waits its turn)
            second_done.wait(1)
        return made(*fields)

    monkeypatch.setattr(opentelemetry_adapter, "_Instrumented", slow)
    with (
        threads.open_limiter(StrictPriority(1), 1000, 10) as first,
        threads.open_limiter(StrictPriority(1), 1000, 10) as second,
    ):
        instrument(first, meter, name="first")  # (makes the meter's instruments)
        uninstrument(first, meter)
        calls = 0
        one = threading.Thread(target=instrument, args=(first, meter), kwargs={"name": "first"})
        one.start()
        while calls == 0:
            time.sleep(0.001)
        instrument(second, meter, name="second")
        second_done.set()
        one.join(10)
        found = points(reader)
        assert sorted(p.attributes["limiter"] for p in found["permits.waiting"]) == [
            "first",
            "second",
        ]


def test_a_limiter_instrumented_twice_on_one_meter_is_told_so() -> None:
    """The same limiter instrumented again, as it was or under another
    name, on a meter that exports it is refused for what it is: it was
    refused for its name, "give each its own", as if it were another
    limiter (and taken under another name)."""
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    with threads.open_limiter(StrictPriority(1), 10) as limiter:
        instrument(limiter, meter, name="llm")
        with pytest.raises(PermitValueError) as refused:
            instrument(limiter, meter, name="llm")
        assert refused.value.argument == "limiter"
        assert str(refused.value).endswith(
            ": instrumented on this meter already, as 'llm' (uninstrument it first to "
            "change its options, its name among them)"
        )
        # under another name too: its figures were exported twice, its waits
        # recorded twice, and a dashboard's sums over limiters counted them twice
        with pytest.raises(PermitValueError) as refused:
            instrument(limiter, meter, name="llm-upstream")
        assert str(refused.value).endswith(
            ": instrumented on this meter already, as 'llm' "
            "(uninstrument it first to change its options, its name among them)"
        )
        limiter.acquire(0)
        found = points(reader)
    assert value(found, "permits.wait", limiter="llm", level="0").count == 1
    assert [p.attributes["limiter"] for p in found["permits.granted"]] == ["llm"]


def test_uninstrument_on_another_meter_of_the_same_name_says_which_meter_to_pass() -> None:
    """``get_meter("permits")`` called twice (no SDK set) gives two meters:
    a user who instruments on the first and uninstruments on the second,
    the same meter to them, was told to "pass the meter given to
    instrument()"; the error now says that this one is another object, and
    names the meter the limiter is instrumented on."""
    from opentelemetry.metrics import NoOpMeterProvider

    provider = NoOpMeterProvider()
    first, second = provider.get_meter("permits"), provider.get_meter("permits")
    assert first is not second
    with threads.open_limiter(StrictPriority(1), 10) as limiter:
        instrument(limiter, first)
        with pytest.raises(PermitValueError) as refused:
            uninstrument(limiter, second)
        assert str(refused.value).endswith(
            f": is not instrumented on meter {second!r}, another object than the meter "
            f"'permits' it is instrumented on, {first!r} (a get_meter call may give a new "
            "one each time): pass the meter given to instrument()"
        )
        uninstrument(limiter, first)


@pytest.mark.parametrize("waits", [False, True], ids=["at-once", "after-a-wait"])
def test_a_failing_exporter_is_logged_and_the_caller_keeps_its_permit(
    waits: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An SDK whose histogram raises as a wait is recorded (a broken exporter
    or view): the caller still proceeds with its permit, whether granted at
    once or after a wait, the failure is logged, and the limiter works on."""
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    with threads.open_limiter(StrictPriority(2), 1000, 1) as limiter:
        instrument(limiter, meter, name="api")
        wait = meter.create_histogram("permits.wait")  # the SDK's class of it

        def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("exporter down")

        monkeypatch.setattr(type(wait), "record", broken)
        if waits:
            limiter.acquire(0)  # the bucket is empty now: the next acquire waits
        permit = limiter.acquire(0)
        assert permit is not None
        limiter.acquire(1)
        stats = limiter.statistics().levels
    assert (stats[0].granted, stats[1].granted) == (1 + waits, 1)
    failed = [r for r in caplog.records if "failed to record a wait" in r.getMessage()]
    assert len(failed) == 2 + waits, "each failed record logged once"
    assert all(r.exc_info and "exporter down" in str(r.exc_info[1]) for r in failed)
