"""``--plot FILE.png``: permits over time and the wait distributions per
scenario; for ``compare``, the trade-off between the policies.

Needs the optional extra ``permits[plot]`` (matplotlib). Uses matplotlib's
object API and its Agg canvas, so no window and no global pyplot state.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from fractions import Fraction
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any

from permits.core import SECOND
from permits.sim import (
    BINS,
    Comparison,
    Measure,
    Result,
    WorkloadResult,
    describe,
    offered_quantile,
)

from ._files import Usage
from ._report import heading

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["image_format", "plot", "plot_comparisons", "require_matplotlib"]


def require_matplotlib() -> None:
    """A :class:`Usage` error naming the extra if matplotlib is missing
    (checked before the run, not after it): status 2, not compare's 1."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise Usage("--plot needs matplotlib: pip install 'permits[plot]'") from None


def image_format(path: Path) -> str:
    """The format ``path`` is drawn in: its suffix's, PNG without one (at
    ``path`` itself, not ``path.png``). A suffix matplotlib cannot write is
    a :class:`Usage` error, to check before the run."""
    from matplotlib.backend_bases import FigureCanvasBase

    suffix = path.suffix.removeprefix(".").lower()
    known = FigureCanvasBase.get_supported_filetypes()
    if suffix and suffix not in known:
        expected = ", ".join(f".{name}" for name in sorted(known))
        raise Usage(
            f"--plot={str(path)!r}: cannot draw a .{suffix} file (expected one of: {expected})"
        )
    if suffix == "pgf":  # set in TeX by matplotlib: without it, a RuntimeError after the run
        from matplotlib import rcParams

        tex = rcParams["pgf.texsystem"]
        if shutil.which(tex) is None:
            raise Usage(
                f"--plot={str(path)!r}: a .pgf file needs {tex}, not found "
                "(draw a .pdf, .svg or .png instead)"
            )
    return suffix or "png"


def _plain(text: str) -> str:
    """``text`` as matplotlib shows it as is: a ``$`` in a name would start
    its math mode (``a $x^$ b``: a ParseException after the run)."""
    return text.replace("$", r"\$")


#: Waits shorter than this are drawn at it on the log axes (seconds).
_FLOOR = 1e-4


def _end(seconds: float) -> float:
    """Where a log axis of waits ends: at the run's length, or a decade past
    :data:`_FLOOR` for a shorter run (its axis ran backwards)."""
    return max(seconds, 10 * _FLOOR)


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _cdf(
    axes: Axes, workload: WorkloadResult, duration: float, label: str, color: Any = None
) -> None:
    """The fraction of ``workload``'s callers offered that were granted
    within x seconds, on a log axis: the curve tops out at granted/offered,
    the callers never granted counted as waiting past the end."""
    if not workload.offered:
        return
    xs, ys, seen = [_FLOOR], [0.0], 0
    for wait, count in workload.waits_ns:
        seen += count
        xs.append(max(_FLOOR, wait / SECOND))
        ys.append(seen / workload.offered)
    xs.append(duration)
    ys.append(ys[-1])
    axes.step(xs, ys, where="post", label=label, color=color)


def _wait_axes(axes: Axes, duration: float, title: str) -> None:
    axes.set_title(title, fontsize=10, loc="left")
    axes.set_xscale("log")
    axes.set_xlim(_FLOOR, _end(duration))
    axes.set_xlabel(f"wait (s, log scale; under {_FLOOR * 1e3:g} ms drawn at it)")
    axes.set_ylabel("fraction of callers offered")
    axes.set_ylim(0, 1.02)
    axes.grid(alpha=0.3, which="both")


def plot(results: Sequence[Result], path: Path) -> None:
    """Draw each result as one row of two charts into the PNG ``path``:
    cumulative permits per workload over time, and each workload's waits as
    a distribution on a log axis (the fraction of its callers offered that
    were granted within x: those never granted keep it below 1)."""
    figure = _figure(12, 3.4 * len(results))
    rows = figure.subplots(len(results), 2, squeeze=False)
    for (over_time, waits), result in zip(rows, results, strict=True):
        seconds = result.duration_ns / SECOND
        edges = [seconds * (i + 1) / BINS for i in range(BINS)]
        for workload in result.workloads:
            label = _plain(heading(workload))
            over_time.plot(edges, list(accumulate(workload.timeline)), label=label)
            _cdf(waits, workload, seconds, label)
        title = _plain(f"{result.scenario.name} ({describe(result.scenario.policy)})")
        over_time.set_title(title, fontsize=10, loc="left")
        over_time.set_xlabel("time (s)")
        over_time.set_ylabel("permits granted (cumulative)")
        over_time.set_xlim(0, seconds)
        over_time.legend(fontsize=8, loc="upper left")
        over_time.grid(alpha=0.3)
        _wait_axes(waits, seconds, "wait before the permit")
        if any(w.offered for w in result.workloads):
            waits.legend(fontsize=8, loc="upper left")
    figure.savefig(path, dpi=100, format=image_format(path))


def plot_comparisons(comparisons: Sequence[Comparison], path: Path) -> None:
    """Draw each comparison as one row of three charts into the PNG ``path``:
    the trade-off (the most urgent workload's p99 wait, log scale, against
    the least urgent one's share, a point per policy, the requirements on
    them as lines), and each of the two workloads' wait distributions per
    policy (as :func:`plot` draws them)."""
    from matplotlib import colormaps

    figure = _figure(18, 4.6 * len(comparisons))
    rows = figure.subplots(len(comparisons), 3, squeeze=False)
    for (tradeoff, urgent_waits, lower_waits), comparison in zip(rows, comparisons, strict=True):
        first = comparison.outcomes[0].result
        seconds = first.duration_ns / SECOND
        urgent = comparison.urgent
        lower = comparison.least_urgent
        for k, outcome in enumerate(comparison.outcomes):
            color = colormaps["tab20"](k % 20)
            name = _plain(describe(outcome.policy))
            u, low = outcome.result[urgent], outcome.result[lower]
            share = low.share or 0.0  # (None: nothing granted at all, drawn as none)
            wait = offered_quantile(u.waits_ns, u.offered, Fraction(99, 100))
            y = seconds if wait is None else max(_FLOOR, wait / SECOND)
            marker = "^" if wait is None else ("o" if outcome.meets_all else "x")
            tradeoff.scatter([share], [y], marker=marker, color="C0" if outcome.meets_all else "C3")
            tradeoff.annotate(
                name, (share, y), fontsize=7, xytext=(3, 3), textcoords="offset points"
            )
            _cdf(urgent_waits, u, seconds, name, color)
            _cdf(lower_waits, low, seconds, name, color)
        for requirement in comparison.scenario.requirements:
            bound = float(requirement.bound)
            if requirement.workload == urgent and requirement.measure is Measure.WAIT_P99:
                tradeoff.axhline(bound, color="C2", linestyle="--", label=_plain(requirement.text))
            elif (
                requirement.workload == lower
                and requirement.measure is Measure.SHARE
                and requirement.limit in (None, first.limits[0])  # the share drawn
            ):
                tradeoff.axvline(bound, color="C1", linestyle="--", label=_plain(requirement.text))
        tradeoff.set_yscale("log")
        tradeoff.set_ylim(_FLOOR, _end(seconds) * 2)
        best = describe(comparison.recommended.policy)
        tradeoff.set_title(
            _plain(f"{comparison.scenario.name}: recommended {best}"),
            fontsize=10,
            loc="left",
        )
        tradeoff.set_xlabel(_plain(f"{lower}'s share of the units"))
        tradeoff.set_ylabel(_plain(f"{urgent}'s p99 wait (s, log; ^ = never granted)"))
        tradeoff.grid(alpha=0.3, which="both")
        if tradeoff.get_legend_handles_labels()[1]:  # a requirement drawn
            tradeoff.legend(fontsize=8, loc="lower right")
        _wait_axes(urgent_waits, seconds, _plain(f"{urgent}: wait before the permit"))
        _wait_axes(lower_waits, seconds, _plain(f"{lower}: wait before the permit"))
        if urgent_waits.get_legend_handles_labels()[1]:  # it had callers
            urgent_waits.legend(fontsize=6, loc="upper left", ncols=2)
    figure.savefig(path, dpi=100, format=image_format(path))
