"""Results as text tables and as JSON."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from permits.core import SECOND
from permits.core.checks import check_rate
from permits.sim import Published, Result, WorkloadResult, describe

__all__ = ["as_json", "comparison", "table"]


def seconds(ns: int | None) -> float | None:
    """Nanoseconds as seconds (``None`` stays ``None``)."""
    return None if ns is None else ns / 1e9


def duration(value: float | None) -> str:
    """Seconds, written short: ``5 ms``, ``1.1 s``, ``-`` for none."""
    if value is None:
        return "-"
    if value < 1:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def _number(exact: Fraction) -> int | float:
    return exact.numerator if exact.denominator == 1 else float(exact)


def _length(result: Result) -> Fraction:
    return Fraction(result.duration, SECOND)


def header(result: Result) -> str:
    scenario = result.scenario
    return (
        f"{scenario.name}\n"
        f"  {describe(scenario.policy)}; {_number(check_rate(scenario.rate)):,} permits/s, "
        f"burst {scenario.burst}, {_number(_length(result)):,} s; "
        f"{result.granted:,} permits granted"
    )


_COLUMNS = (
    ("workload", "<14"),
    ("level", ">5"),
    ("offered", ">8"),
    ("granted", ">8"),
    ("waiting", ">8"),
    ("cancelled", ">9"),
    ("rejected", ">8"),
    ("expired", ">7"),
    ("wait p50", ">9"),
    ("wait p99", ">9"),
    ("wait max", ">9"),
    ("share", ">6"),
    ("cleared", ">8"),
)


def _row(cells: Sequence[str]) -> str:
    return (
        "  "
        + " ".join(
            f"{cell:{spec}}" for cell, (_, spec) in zip(cells, _COLUMNS, strict=True)
        ).rstrip()
    )


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
        _count(w.expired),
        duration(seconds(w.wait_p50)),
        duration(seconds(w.wait_p99)),
        duration(seconds(w.wait_max)),
        f"{w.share:.1%}",
        duration(seconds(w.cleared_at)),
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
        maybe(p.wait_p50),
        maybe(p.wait_p99),
        "",
        "",
        maybe(p.cleared_at),
    ]


def table(result: Result) -> str:
    """One scenario's result, a row per workload, with the published figures
    (where the scenario has them) on a row below."""
    lines = [header(result), _row([name for name, _ in _COLUMNS])]
    notes = []
    for workload, got in zip(result.scenario.workloads, result.workloads, strict=True):
        lines.append(_row(_cells(got)))
        if workload.published is not None:
            lines.append(_row(_published(workload.published)))
            if workload.published.note:
                notes.append(f"  note ({workload.name}, published): {workload.published.note}")
    return "\n".join(lines + notes)


def comparison(simulated: Result, measured: Result, verdicts: Sequence[str]) -> str:
    """A scenario run both ways: per workload, a simulated and a measured row."""
    lines = [header(simulated), _row([name for name, _ in _COLUMNS])]
    for sim, real in zip(simulated.workloads, measured.workloads, strict=True):
        lines.append(_row([sim.name, *_cells(sim)[1:]]))
        lines.append(_row(["  measured", *_cells(real)[1:]]))
    lines.extend(f"  {verdict}" for verdict in verdicts)
    return "\n".join(lines)


def _workload_json(w: WorkloadResult, published: Published | None) -> dict[str, Any]:
    return {
        "name": w.name,
        "level": w.level,
        "offered": w.offered,
        "granted": w.granted,
        "waiting": w.waiting,
        "cancelled": w.cancelled,
        "rejected": w.rejected,
        "expired": w.expired,
        "wait_p50": seconds(w.wait_p50),
        "wait_p99": seconds(w.wait_p99),
        "wait_max": seconds(w.wait_max),
        "share": w.share,
        "cleared_at": seconds(w.cleared_at),
        "published": None
        if published is None
        else {
            "granted": published.granted,
            "offered": published.offered,
            "wait_p50": published.wait_p50,
            "wait_p99": published.wait_p99,
            "cleared_at": published.cleared_at,
            "note": published.note,
        },
    }


def as_json(result: Result) -> dict[str, Any]:
    """One scenario's result as JSON-ready data (times in seconds)."""
    scenario = result.scenario
    return {
        "name": scenario.name,
        "policy": describe(scenario.policy),
        "rate": _number(check_rate(scenario.rate)),
        "burst": scenario.burst,
        "seconds": _number(_length(result)),
        "granted": result.granted,
        "workloads": [
            _workload_json(got, workload.published)
            for workload, got in zip(scenario.workloads, result.workloads, strict=True)
        ],
    }
