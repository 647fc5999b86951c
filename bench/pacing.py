"""How closely each adapter keeps the configured rate on a real event loop.

    python bench/pacing.py [--quick]

At 100, 1,000 and 10,000 permits/s for ``PACE_SECONDS`` each, ``CALLERS``
tasks call ``acquire()`` again as soon as they resume (so someone always
waits). The first grant starts the machine with a full bucket at ``t0``;
grant ``k`` (in the order callers resumed) is due at
``t0 + ceil((k - burst) / rate)`` for ``k > burst`` and at ``t0`` before.

- *late*: the framework clock when the caller resumed minus that due time,
  so a schedule that slips shows as growing lateness;
- *delay*: the same against the limiter's own schedule, which a late grant
  moves (GCRA: what the bucket cannot bank is lost), rebuilt from the grant
  times: how late each wake-up was;
- *achieved*: the steady rate, the grants resumed after the first 10% of the
  run, ``(n - 1) / (last - first)``;
- *lost*: the ideal number of grants before the end minus the number made.

Two rows without a limiter give the floor for lateness: one task sleeping
until each due time of the 100/s schedule with the framework's own timer
(``loop.call_at``, ``trio.sleep_until``).
"""

from __future__ import annotations

import gc
import itertools
import math
import time
from fractions import Fraction

from _common import (
    ADAPTERS,
    ASYNCIO,
    CALLERS,
    QUICK,
    TRIO,
    Adapter,
    Framework,
    Run,
    achieved,
    footer,
    granted,
    header,
    ns,
    percentile,
)
from _options import check_options

from permits.core import Fifo

PACE_RATES = (100, 1_000, 10_000)
PACE_SECONDS = 1.0 if QUICK else 5.0


def _lateness(run: Run, rate: int, burst: int) -> tuple[list[int], list[int]]:
    """Per grant, in the order callers resumed: lateness against the ideal
    schedule from t0, and delay against the limiter's own schedule.

    The own schedule follows SPEC.md's pacing (``TAT = max(TAT, at - 1ns) +
    interval``, a permit due at ``ceil(TAT - (burst - 1) * interval)``), so
    a late grant moves the later due times as it does in the machine; the
    time of each grant is taken as the time its caller resumed (a little
    after the limiter decided it), and a grant is not due before its caller
    asked."""
    interval = Fraction(10**9, rate)
    lateness: list[int] = []
    delay: list[int] = []
    tat = Fraction(run.start)
    for k, (resumed, asked) in enumerate(sorted(run.grants), start=1):
        lateness.append(resumed - (run.start + math.ceil(max(0, k - burst) * interval)))
        due = max(math.ceil(tat - (burst - 1) * interval), asked)
        delay.append(resumed - due)
        tat = max(tat, Fraction(resumed - 1)) + interval
    return lateness, delay


def pacing_run(adapter: Adapter, rate: int, burst: int, seconds: float) -> Run:
    framework = adapter.framework

    async def body() -> Run:
        async with adapter.open(Fifo(1), rate, burst) as limiter:
            cpu = time.process_time()
            asked = ns(framework.now())
            await limiter.acquire()
            grants = [(ns(framework.now()), asked)]
            start = limiter.machine.now
            assert start is not None
            end = start + round(seconds * 1e9)

            async def caller() -> None:
                acquire = limiter.acquire
                now = framework.now
                while True:
                    asked = ns(now())
                    await acquire()
                    resumed = ns(now())
                    if resumed >= end:
                        return
                    grants.append((resumed, asked))

            await framework.run_all([caller] * CALLERS)
            cpu = time.process_time() - cpu
            permits = granted(limiter)
        return Run(start, end, grants, cpu, permits)

    return framework.run(body)


def timer_run(framework: Framework, rate: int, seconds: float) -> Run:
    """No limiter: one task sleeps until each due time of the ideal schedule
    (burst 1) in turn, with the framework's own timer."""

    async def body() -> Run:
        now = framework.now
        cpu = time.process_time()
        start = ns(now())
        end = start + round(seconds * 1e9)
        grants = [(start, start)]
        for k in itertools.count(1):
            due = start + -(-k * 10**9 // rate)
            if due >= end:
                break
            await framework.sleep_until(due / 1e9)
            grants.append((ns(now()), due))
        return Run(start, end, grants, time.process_time() - cpu, len(grants))

    return framework.run(body)


PACE_CONFIGS = (
    (ADAPTERS[0], 1),
    (ADAPTERS[1], 1),
    (ADAPTERS[2], 1),
    (ADAPTERS[3], 1),
    (ADAPTERS[0], 10),
    (ADAPTERS[1], 10),
    (ADAPTERS[0], 50),
)


def main() -> None:
    print(f"Pacing: {CALLERS} callers always waiting, {PACE_SECONDS:g} s per rate, times in µs")
    print()
    print(
        "*late* = resumed - (t0 + (k - burst) / rate), the ideal schedule; *delay* = "
        "resumed - due on the limiter's own schedule, which a late grant moves "
        "(reconstructed from the grant times); *lost* = ideal grants before the end "
        "- grants made."
    )
    print()
    print(
        "| adapter | burst | rate/s | grants (ideal) | lost | achieved/s | error "
        "| late p50 | late p99 | delay p50 | delay p99 | delay max | CPU µs/permit |"
    )
    print(
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |"
    )
    for adapter, burst in PACE_CONFIGS:
        for rate in PACE_RATES:
            gc.collect()
            run = pacing_run(adapter, rate, burst, PACE_SECONDS)
            lateness, delay = _lateness(run, rate, burst)
            # due times before the end: k - burst < (end - t0) / interval
            ideal = burst + math.ceil(Fraction((run.end - run.start) * rate, 10**9)) - 1
            got = achieved(run)
            print(
                f"| {adapter.name} | {burst} | {rate:,} | {len(run.grants):,} ({ideal:,}) "
                f"| {ideal - len(run.grants):,} | {got:,.1f} "
                f"| {(got / rate - 1) * 100:+.2f}% "
                f"| {percentile(lateness, 0.5) / 1e3:,.0f} "
                f"| {percentile(lateness, 0.99) / 1e3:,.0f} "
                f"| {percentile(delay, 0.5) / 1e3:,.0f} "
                f"| {percentile(delay, 0.99) / 1e3:,.0f} | {max(delay) / 1e3:,.0f} "
                f"| {run.cpu / run.permits * 1e6:.1f} |"
            )
    rate = PACE_RATES[0]
    for framework, timer in ((ASYNCIO, "loop.call_at"), (TRIO, "trio.sleep_until")):
        gc.collect()
        run = timer_run(framework, rate, PACE_SECONDS)
        lateness, _ = _lateness(run, rate, 1)
        got = achieved(run)
        print(
            f"| no limiter: bare {framework.name} timer ({timer}) on the ideal schedule "
            f"| 1 | {rate:,} | {len(run.grants):,} | | {got:,.1f} "
            f"| {(got / rate - 1) * 100:+.2f}% "
            f"| {percentile(lateness, 0.5) / 1e3:,.0f} "
            f"| {percentile(lateness, 0.99) / 1e3:,.0f} | | | "
            f"| {run.cpu / run.permits * 1e6:.1f} |"
        )
    print()


if __name__ == "__main__":
    check_options(__doc__, "--quick")
    started = header()
    main()
    footer(started)
