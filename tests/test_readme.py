"""The README's examples run, and say what they claim."""

from __future__ import annotations

import doctest
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_examples() -> None:
    failures, tried = doctest.testfile(
        str(ROOT / "README.md"), module_relative=False, optionflags=doctest.ELLIPSIS
    )
    assert tried > 0, "the README has no examples"
    assert failures == 0


def test_quickstart_physics() -> None:
    """The main example's figures against what the rules allow, derived by hand.

    100 permits/s with burst 1 over [0 s, 10 s] is 1 + 100 * 10 = 1,001 permits.
    """
    quickstart = runpy.run_path(str(ROOT / "examples" / "quickstart.py"))
    simulate = quickstart["simulate"]
    from permits.core import MILLISECOND, Fifo, StrictPriority

    fifo = simulate(Fifo(2))
    # FIFO: the 1,000 batch calls were first; they take permits 1..1,000, so the
    # 1,001st and last permit (at 10 s) goes to the first interactive call.
    assert fifo.levels[1].granted == 1_000
    assert fifo.levels[0].granted == 1
    strict = simulate(StrictPriority(2))
    # Strict priority: every interactive call (200, arriving 5 ms before a
    # permit is due) is served within one interval; the batch gets the rest.
    assert strict.levels[0].granted == 200
    assert strict.levels[0].wait_max == 5 * MILLISECOND
    assert strict.levels[1].granted == 1_001 - 200
