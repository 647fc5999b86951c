"""Results as text tables and as JSON."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from permits.core import SECOND
from permits.core.checks import check_rate
from permits.sim import (
    Comparison,
    Measure,
    Published,
    Requirement,
    Result,
    Scenario,
    Workload,
    WorkloadResult,
    describe,
    offered_quantile,
)

__all__ = ["as_json", "compare_tables", "comparison", "comparison_json", "table"]


def seconds(ns: int | None) -> float | None:
    """Nanoseconds as seconds (``None`` stays ``None``)."""
    return None if ns is None else ns / SECOND  # int / int: past 2**1024 ns too


def duration(value: float | None, digits: int = 3) -> str:
    """Seconds, written short (to ``digits`` significant digits): ``5 ms``,
    ``1.1 s``, ``-`` for none."""
    if value is None:
        return "-"
    if value < 1:
        ms = f"{value * 1e3:.{digits}g}"
        if "e+" not in ms and float(ms) < 1e3:  # 999.6 ms rounds to 1e+03 (or 1000): 1 s
            return f"{ms} ms"
    shown = f"{value:.{digits}g}"
    if "e+" in shown and value < 1e15:  # 1,980 s, not 1.98e+03 s (a float's digits are whole)
        shown = f"{value:,.0f}"
    return f"{shown} s"


def _number(exact: Fraction) -> int | float:
    return exact.numerator if exact.denominator == 1 else float(exact)


def _length(result: Result) -> Fraction:
    return Fraction(result.duration_ns, SECOND)


def limits_text(scenario: Scenario) -> str:
    """The scenario's limit(s): ``100 permits/s, burst 1``, or each named
    limit with its rate (in the unit it was most likely given in: see
    :func:`_per`) and its burst."""
    if scenario.limits is None:
        rate = check_rate(scenario.rate)
        shown = f"{rate.numerator:,}" if rate.denominator == 1 else f"{float(rate):,.6g}"
        return f"{shown} permit{'' if rate == 1 else 's'}/s, burst {scenario.burst:,}"
    return ", ".join(
        f"{name} {_per(limit.rate, limit.burst)} (burst {limit.burst:,})"
        for name, limit in scenario.limits
    )


#: The units a named limit's rate is written in, by their seconds.
_PERIODS = ((1, "s"), (60, "min"), (3600, "h"))


def _per(rate: Fraction, burst: int) -> str:
    """A limit's rate a second, minute or hour, as it was most likely
    given: in the unit whose count is its burst (``per_second = 4``, whose
    burst defaults to 4, is ``4/s``; ``per_minute = 500`` is ``500/min``),
    else in the one it takes the fewest digits to write, the shorter unit
    on a tie (``per_second = 0.3`` is ``0.3/s``, not ``18/min``; ``per_hour
    = 0.5`` is ``0.5/h``, not ``0.00833333/min``)."""
    counts = [(rate * seconds, unit) for seconds, unit in _PERIODS]
    said = next(((count, unit) for count, unit in counts if count == burst), None)
    count, unit = said or min(counts, key=lambda pair: _digits(pair[0]))
    shown = f"{count.numerator:,}" if count.denominator == 1 else f"{float(count):,.6g}"
    return f"{shown}/{unit}"


def _digits(count: Fraction) -> int:
    """The significant digits ``count`` is written with exactly (7, more
    than a rate is shown with, if it takes more or has no end)."""
    for places in range(7):
        scaled = count * 10**places
        if scaled.denominator == 1:
            return min(7, len(str(scaled.numerator).strip("0")))
    return 7


def header(result: Result) -> str:
    scenario = result.scenario
    return (
        f"{scenario.name}\n"
        f"  {describe(scenario.policy)}; {limits_text(scenario)}, "
        f"{_number(_length(result)):,} s; "
        f"{result.granted:,} permit{'' if result.granted == 1 else 's'} granted"
    )


_COLUMNS = (
    ("workload", "<14"),
    ("level", ">5"),
    ("offered", ">8"),
    ("granted", ">8"),
    ("waiting", ">8"),
    ("cancelled", ">9"),
    ("rejected", ">8"),
    ("too long", ">8"),
    ("expired", ">7"),
    ("wait p50", ">9"),
    ("wait p99", ">9"),
    ("wait max", ">9"),
    ("share", ">6"),
    ("cleared", ">8"),
)


def _widths(rows: Sequence[Sequence[str]]) -> list[int]:
    """Each column's width: its heading's, or its widest cell's (a long
    workload name, a count of millions)."""
    return [
        max(int(spec[1:]), *(len(row[k]) for row in rows)) for k, (_, spec) in enumerate(_COLUMNS)
    ]


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    aligned = zip(cells, _COLUMNS, widths, strict=True)
    return (
        "  " + " ".join(f"{cell:{spec[0]}{width}}" for cell, (_, spec), width in aligned).rstrip()
    )


_HEADINGS = [name for name, _ in _COLUMNS]


def _share(share: float | None) -> str:
    """A share as a percentage; ``-`` for a share of nothing (no unit of
    its limit granted in the run)."""
    return "-" if share is None else f"{share:.1%}"


def _count(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


def _cells(w: WorkloadResult) -> list[str]:
    return [
        w.name,
        str(w.level),
        _count(w.offered),
        _count(w.granted),
        _count(w.waiting),
        _count(w.cancelled),
        _count(w.rejected),
        _count(w.too_long),
        _count(w.expired),
        duration(w.wait_p50_s),
        duration(w.wait_p99_s),
        duration(w.wait_max_s),
        _share(w.share),
        duration(w.cleared_at_s),
    ]


def _published(p: Published) -> list[str]:
    def maybe(value: float | None) -> str:
        return "" if value is None else duration(value)

    return [
        "  published",
        "",
        _count(p.offered),
        _count(p.granted),
        "",
        "",
        "",
        "",
        "",
        maybe(p.wait_p50),
        maybe(p.wait_p99),
        "",
        "",
        maybe(p.cleared_at),
    ]


def table(result: Result) -> str:
    """One scenario's result, a row per workload, with the published figures
    (where the scenario has them) on a row below."""
    rows = [_cells(got) for got in result.workloads]
    published = [
        _published(w.published) for w in result.scenario.workloads if w.published is not None
    ]
    widths = _widths([_HEADINGS, *rows, *published])
    lines = [header(result), _row(_HEADINGS, widths)]
    notes = []
    for workload, got, row in zip(result.scenario.workloads, result.workloads, rows, strict=True):
        lines.append(_row(row, widths))
        lines.extend(f"    {line}" for line in details(result, got))
        if workload.published is not None:
            lines.append(_row(_published(workload.published), widths))
            if workload.published.note:
                notes.append(f"  note ({workload.name}, published): {workload.published.note}")
    if any(0 < w.granted < w.offered for w in result.workloads):
        notes.append(f"  {_WAITS_OF_GRANTED}")
    return "\n".join(lines + notes)


#: What simulate's wait columns count, said where it matters: a workload
#: granted some of its callers, not all (its p99 says nothing of the rest).
_WAITS_OF_GRANTED = (
    "wait p50, p99, max: of the callers granted (permits compare counts those not granted too)"
)


def details(result: Result, w: WorkloadResult) -> list[str]:
    """A workload's figures beyond its row: its share of each limit where
    there are several, and its tenants where its callers named flows."""
    lines = []
    if len(result.limits) > 1:
        shares = ", ".join(
            f"{name} {_share(share)}" for name, share in zip(result.limits, w.shares, strict=True)
        )
        lines.append(f"share per limit: {shares}")
    if w.tenants:
        worst = (
            ""
            if w.worst_tenant is None
            else f"; p99 wait of the worst tenant {duration(w.tenant_wait_p99_max_s)} "
            f"({w.worst_tenant}), of the median one "
            f"{duration(w.tenant_wait_p99_median_s)}"
        )
        lines.append(f"tenants: {w.tenants:,}, {w.tenants_starved:,} never granted{worst}")
    return lines


def comparison(simulated: Result, measured: Result, verdicts: Sequence[str]) -> str:
    """A scenario run both ways: per workload, a simulated and a measured row."""
    rows = []
    for sim, real in zip(simulated.workloads, measured.workloads, strict=True):
        rows += [_cells(sim), ["  measured", *_cells(real)[1:]]]
    widths = _widths([_HEADINGS, *rows])
    lines = [header(simulated), _row(_HEADINGS, widths)]
    lines.extend(_row(row, widths) for row in rows)
    lines.extend(f"  {verdict}" for verdict in verdicts)
    return "\n".join(lines)


def _workload_json(
    w: WorkloadResult, limits: Sequence[str], published: Published | None
) -> dict[str, Any]:
    return {
        "name": w.name,
        "level": w.level,
        "offered": w.offered,
        "granted": w.granted,
        "waiting": w.waiting,
        "cancelled": w.cancelled,
        "rejected": w.rejected,
        "too_long": w.too_long,
        "expired": w.expired,
        "units": w.units,
        "wait_p50_s": w.wait_p50_s,
        "wait_p99_s": w.wait_p99_s,
        "wait_max_s": w.wait_max_s,
        "share": w.share,
        "units_per_limit": dict(zip(limits, w.units_per_limit, strict=True)),
        "share_per_limit": dict(zip(limits, w.shares, strict=True)),
        "tenants": w.tenants,
        "tenants_starved": w.tenants_starved,
        "tenant_wait_p99_max_s": w.tenant_wait_p99_max_s,
        "worst_tenant": w.worst_tenant,
        "tenant_wait_p99_median_s": w.tenant_wait_p99_median_s,
        "cleared_at_s": w.cleared_at_s,
        "published": None
        if published is None
        else {
            "granted": published.granted,
            "offered": published.offered,
            "wait_p50_s": published.wait_p50,
            "wait_p99_s": published.wait_p99,
            "cleared_at_s": published.cleared_at,
            "note": published.note,
        },
    }


def _limits_json(scenario: Scenario) -> dict[str, Any]:
    """``rate_per_s`` and ``burst`` (``null`` under several limits) and
    each limit's."""
    one = scenario.limits is None
    return {
        "rate_per_s": _number(check_rate(scenario.rate)) if one else None,
        "burst": scenario.burst if one else None,
        "limits": [
            {"name": name, "rate_per_s": _number(limit.rate), "burst": limit.burst}
            for name, limit in scenario.named_limits.items()
        ],
    }


def as_json(result: Result) -> dict[str, Any]:
    """One scenario's result as JSON-ready data (times in seconds)."""
    scenario = result.scenario
    return {
        "name": scenario.name,
        "policy": describe(scenario.policy),
        **_limits_json(scenario),
        "seconds": _number(_length(result)),
        "granted": result.granted,
        "workloads": [
            _workload_json(got, result.limits, workload.published)
            for workload, got in zip(scenario.workloads, result.workloads, strict=True)
        ],
    }


def _offered_quantile(w: WorkloadResult, q: Fraction) -> int | None:
    return offered_quantile(w.waits_ns, w.offered, q)


_P50, _P99 = Fraction(1, 2), Fraction(99, 100)


def _wait(w: WorkloadResult, q: Fraction) -> str:
    """A quantile of the offered callers' waits: ``never`` if it falls among
    those not granted within the run."""
    if not w.offered:
        return "-"
    wait = _offered_quantile(w, q)
    return "never" if wait is None else duration(seconds(wait))


def _measured(requirement: Requirement, run: Result, ok: bool) -> str:
    """A requirement's measure in ``run``, written short, but with as many
    more digits as it takes to read as its verdict ``ok``: 801 of 802
    granted is ``99.88%`` against ``granted >= 99.9%``, not ``99.9%``, and
    a backlog cleared at 10.01 s is not ``10 s`` against ``cleared by 10
    s``. (A wait quantile's verdict is on the exact waits, its measure the
    histogram's: where no digits read as the verdict, three.)"""
    value = requirement.measured(run)
    if value is None:
        nothing = requirement.measure is Measure.SHARE  # a share of nothing granted
        return "-" if nothing or not run[requirement.workload].offered else "never"
    if requirement.unit == "count":
        return f"{int(value):,}"
    written = []
    for digits in range(3, 19):
        if requirement.unit == "s":
            text = duration(float(value), digits)
            number, _, unit = text.rpartition(" ")
            shown = Fraction(number.replace(",", "")) / (1000 if unit == "ms" else 1)
        else:
            text = f"{float(value):.{digits - 2}%}"
            shown = Fraction(text[:-1]) / 100
        if requirement.met_by(shown) == ok:
            return text
        written.append(text)
    return written[0]


def heading(w: Workload | WorkloadResult) -> str:
    """A workload's name and level (once, for a level's calls that no
    workload names, called ``level N`` already)."""
    return w.name if w.name == f"level {w.level}" else f"{w.name} (level {w.level})"


def _grid_table(title: str, columns: Sequence[tuple[str, str]], rows: list[list[str]]) -> str:
    # each column as wide as its spec says, or as its widest cell (a count of millions)
    widths = [
        max(int(spec[1:]), len(name), *(len(row[k]) for row in rows))
        for k, (name, spec) in enumerate(columns)
    ]

    def line(cells: Sequence[str]) -> str:
        aligned = zip(cells, columns, widths, strict=True)
        return "  " + " ".join(f"{c:{spec[0]}{width}}" for c, (_, spec), width in aligned)

    out = [title, line([name for name, _ in columns]).rstrip()]
    out.extend(line(row).rstrip() for row in rows)
    return "\n".join(out)


def compare_tables(comparison: Comparison) -> str:
    """A comparison as text: a header, a table per workload (a row per
    policy), the requirements met and missed, and the recommendation."""
    scenario = comparison.scenario
    outcomes = comparison.outcomes
    names = [describe(o.policy) for o in outcomes]
    width = max(8, *(len(n) for n in names))
    first = outcomes[0].result
    count = len(outcomes)
    head = (
        f"{scenario.name}\n"
        f"  {limits_text(scenario)}, "
        f"{_number(_length(first)):,} s; {count} polic{'y' if count == 1 else 'ies'}\n"
        f"  {_WAITS_COUNTED}"
    )
    blocks = [head]
    limits = first.limits
    shares = (
        [("share", ">6")]
        if len(limits) == 1
        else [(f"share {name}", f">{max(6, len(name) + 6)}") for name in limits]
    )
    base = [
        ("policy", f"<{width}"),
        ("granted", ">8"),
        ("offered", ">8"),
        ("starved", ">8"),
        ("wait p50", ">9"),
        ("wait p99", ">9"),
        ("wait max", ">9"),
        *shares,
        ("cleared", ">8"),
    ]
    for j, workload in enumerate(first.scenario.workloads):  # a trace's: one per level
        tenants = any(o.result.workloads[j].tenants for o in outcomes)
        columns = base + (
            [("tenants starved", ">16"), ("worst tenant p99", ">17"), ("median tenant p99", ">18")]
            if tenants
            else []
        )
        rows = []
        for name, outcome in zip(names, outcomes, strict=True):
            w = outcome.result.workloads[j]
            row = [
                name,
                f"{w.granted:,}",
                f"{w.offered:,}",
                f"{w.offered - w.granted:,}",
                _wait(w, _P50),
                _wait(w, _P99),
                duration(w.wait_max_s),
                *(_share(share) for share in w.shares),
                duration(w.cleared_at_s),
            ]
            if tenants:
                row += [
                    f"{w.tenants_starved:,} of {w.tenants:,}",
                    duration(w.tenant_wait_p99_max_s),
                    duration(w.tenant_wait_p99_median_s),
                ]
            rows.append(row)
        blocks.append(_grid_table(heading(workload), columns, rows))
    requirements = scenario.requirements
    if requirements:
        req_columns = [("policy", f"<{width}")]
        req_columns += [(r.text, f">{max(len(r.text), 14) + 2}") for r in requirements]
        req_columns.append(("meets all", ">11"))
        rows = []
        for name, outcome in zip(names, outcomes, strict=True):
            row = [name]
            for r in requirements:
                ok = r not in outcome.missed
                row.append(f"{_measured(r, outcome.result, ok)} {'ok' if ok else 'MISS'}")
            row.append("yes" if outcome.meets_all else "no")
            rows.append(row)
        blocks.append(_grid_table("requirements", req_columns, rows))
    best = comparison.recommended
    if not requirements:
        verdict = "no requirements stated"
    elif best.meets_all:
        verdict = "meets every requirement"
    else:
        verdict = f"none meets every requirement; it misses {len(best.missed)}"
    blocks.append(
        f"recommended: {describe(best.policy)} ({verdict})\n  rule: {Comparison.RULE}"
        f" (most urgent: {comparison.urgent})"
    )
    return "\n\n".join(blocks)


#: What a comparison's wait columns count: not what ``simulate``'s do (those
#: granted), under the same headings.
_WAITS_COUNTED = (
    "wait p50, p99: of the callers offered (never: past the end, not granted); "
    "wait max: of those granted"
)


def _comparison_workload(w: WorkloadResult, limits: Sequence[str]) -> dict[str, Any]:
    def offered_s(q: Fraction) -> float | None:
        return seconds(_offered_quantile(w, q))

    return {
        **_workload_json(w, limits, None),
        "starved": w.offered - w.granted,
        "offered_wait_p50_s": offered_s(_P50),
        "offered_wait_p99_s": offered_s(_P99),
    }


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    """A comparison as JSON-ready data: per policy, each workload's figures
    (the ``offered_wait_*`` quantiles count callers never granted as
    waiting past the end: ``null`` when the quantile falls among them) and
    each requirement's measure and verdict."""
    scenario = comparison.scenario
    best = comparison.recommended
    policies = []
    for outcome in comparison.outcomes:
        workloads = []
        for w in outcome.result.workloads:
            data = _comparison_workload(w, outcome.result.limits)
            del data["published"]
            workloads.append(data)
        policies.append(
            {
                "policy": describe(outcome.policy),
                "meets_all": outcome.meets_all,
                "workloads": workloads,
                "requirements": [
                    {
                        "requirement": r.text,
                        "met": r not in outcome.missed,
                        **_requirement_value(r, outcome.result),
                    }
                    for r in scenario.requirements
                ],
            }
        )
    return {
        "name": scenario.name,
        **_limits_json(scenario),
        "seconds": _number(Fraction(comparison.outcomes[0].result.duration_ns, SECOND)),
        "requirements": [r.text for r in scenario.requirements],
        "policies": policies,
        "recommended": describe(best.policy),
        "recommended_meets_all": best.meets_all,
        "any_meets_all": comparison.any_meets_all,
        "rule": Comparison.RULE,
    }


def _requirement_value(requirement: Requirement, run: Result) -> dict[str, float | None]:
    """A requirement's measure, in seconds for a time (``null``: never
    reached), a whole number for a count, a fraction otherwise (``null``: a
    share of nothing granted); and its bound."""
    value = requirement.measured(run)
    unit = requirement.unit
    number = int if unit == "count" else float
    return {
        f"measured_{unit}": None if value is None else number(value),
        f"bound_{unit}": number(requirement.bound),
    }
