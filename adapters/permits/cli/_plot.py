"""``--plot FILE.png``: permits over time and the wait distribution, per scenario.

Needs the optional extra ``permits[plot]`` (matplotlib). Uses matplotlib's
object API and its Agg canvas, so no window and no global pyplot state.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path

from permits.sim import BINS, Result, describe

__all__ = ["plot", "require_matplotlib"]


def require_matplotlib() -> None:
    """Exit with one line naming the extra if matplotlib is missing (checked
    before the run, not after it)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:  # pragma: no cover - depends on the environment
        raise SystemExit(
            "permits: error: --plot needs matplotlib: pip install 'permits[plot]'"
        ) from None


def plot(results: Sequence[Result], path: Path) -> None:
    """Draw each result as one row of two charts into the PNG ``path``:
    cumulative permits per workload over time, and each workload's waits as
    a distribution (fraction of its granted callers that waited at most x)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - depends on the environment
        raise SystemExit(
            "permits: error: --plot needs matplotlib: pip install 'permits[plot]'"
        ) from None

    figure = Figure(figsize=(12, 3.4 * len(results)), layout="constrained")
    rows = figure.subplots(len(results), 2, squeeze=False)
    for (over_time, waits), result in zip(rows, results, strict=True):
        seconds = result.duration / 1e9
        edges = [seconds * (i + 1) / BINS for i in range(BINS)]
        for workload in result.workloads:
            label = f"{workload.name} (level {workload.level})"
            over_time.plot(edges, list(accumulate(workload.timeline)), label=label)
            if workload.waits:
                total = sum(count for _, count in workload.waits)
                xs = [wait / 1e9 for wait, _ in workload.waits]
                ys = [seen / total for seen in accumulate(count for _, count in workload.waits)]
                waits.step(xs, ys, where="post", label=label)
        title = f"{result.scenario.name} ({describe(result.scenario.policy)})"
        over_time.set_title(title, fontsize=10, loc="left")
        over_time.set_xlabel("time (s)")
        over_time.set_ylabel("permits granted (cumulative)")
        over_time.set_xlim(0, seconds)
        over_time.legend(fontsize=8, loc="upper left")
        over_time.grid(alpha=0.3)
        waits.set_title("wait before the permit", fontsize=10, loc="left")
        waits.set_xlabel("wait (s)")
        waits.set_ylabel("fraction of granted callers")
        waits.set_ylim(0, 1.02)
        waits.grid(alpha=0.3)
        if any(w.waits for w in result.workloads):
            waits.legend(fontsize=8, loc="lower right")
    figure.savefig(path, dpi=100)
