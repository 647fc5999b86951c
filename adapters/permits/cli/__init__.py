"""The ``permits`` command: see what each policy does to a workload.

``permits simulate`` runs scenarios in virtual time on the core (the
article's five by default, or those of a TOML file) and prints a table per
scenario, or JSON; ``permits demo`` plays them live on the asyncio adapter
and prints measured beside simulated. Bad input is one line on stderr naming
the field and the value, and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, NoReturn

import attrs

from permits import __version__
from permits.core import PermitError, StrictPriority
from permits.core.checks import check_rate
from permits.sim import SEED, Result, Scenario, load_scenarios, simulate

from ._report import as_json, comparison, seconds, table

__all__ = ["main"]

PROG = "permits"


class _Usage(Exception):
    """Bad input: the one line to print before exiting with status 2."""


def _fail(message: str) -> NoReturn:
    raise _Usage(message)


def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except OSError as error:
        _fail(f"cannot read {str(path)!r}: {error.strerror or error}")
    except tomllib.TOMLDecodeError as error:
        _fail(f"{str(path)!r} is not valid TOML: {error}")


def scenarios(path: Path | None) -> tuple[Scenario, ...]:
    """The scenarios of the TOML file at ``path``, or the article's five."""
    if path is None:
        return SEED
    try:
        return load_scenarios(_read_toml(path))
    except PermitError as error:
        _fail(f"{path}: {error}")


def _scale(text: str) -> Fraction:
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"scale={text!r}: expected a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"scale={text!r}: must be greater than 0")
    return value


def _burst(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"burst={text!r}: expected an int") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"burst={text!r}: must be at least 1")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Permits under one shared rate limit, by priority: "
        "see what FIFO, strict priority, shares and aging do to a workload.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sim = commands.add_parser(
        "simulate",
        help="run scenarios in virtual time (default: the article's five)",
        description="Run scenarios in virtual time on the policy core and print, per "
        "scenario and workload, what each got. Without FILE: the article's five "
        "scenarios, its published figures beside the simulated ones.",
    )
    sim.add_argument("file", nargs="?", type=Path, metavar="FILE", help="a TOML scenario file")
    sim.add_argument("--json", action="store_true", help="print JSON instead of tables")
    sim.add_argument(
        "--plot", type=Path, metavar="FILE.png", help="also draw the results (needs permits[plot])"
    )
    demo = commands.add_parser(
        "demo",
        help="run scenarios live on the asyncio adapter, beside the simulation",
        description="Play scenarios in real time on the asyncio adapter and print what "
        "was measured beside what the simulation of the same scenario gives. Exit "
        "status 1 if they disagree by more than the conformance suite allows.",
    )
    demo.add_argument("file", nargs="?", type=Path, metavar="FILE", help="a TOML scenario file")
    demo.add_argument(
        "--scale",
        type=_scale,
        default=Fraction(1),
        help="run each scenario SCALE times faster and shorter (default 1: real length)",
    )
    demo.add_argument(
        "--burst",
        type=_burst,
        default=2,
        help="burst for both runs (default 2: absorbs the event loop's timer lateness)",
    )
    demo.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return parser


def _simulate(args: argparse.Namespace) -> int:
    results = [simulate(scenario) for scenario in scenarios(args.file)]
    if args.plot is not None:
        from ._plot import plot

        plot(results, args.plot)
    if args.json:
        print(json.dumps({"scenarios": [as_json(r) for r in results]}, indent=2))
    else:
        print("\n\n".join(table(r) for r in results))
    return 0


def checks(simulated: Result, measured: Result) -> list[tuple[bool, str]]:
    """The conformance suite's tolerances: each workload's permits within 2% of
    the run's permits; under strict priority, the most urgent level's p99 wait
    within one permit interval plus 5 ms of the simulated."""
    out = []
    total = (simulated.granted + measured.granted) / 2
    for sim, real in zip(simulated.workloads, measured.workloads, strict=True):
        ok = abs(sim.granted - real.granted) <= 0.02 * total
        out.append((ok, f"{sim.name}: granted {real.granted} measured, {sim.granted} simulated"))
    scenario = simulated.scenario
    if isinstance(scenario.policy, StrictPriority):
        interval = 1 / float(check_rate(scenario.rate))
        for sim, real in zip(simulated.workloads, measured.workloads, strict=True):
            if sim.level == 0 and sim.wait_p99 is not None:
                bound = (seconds(sim.wait_p99) or 0.0) + interval + 0.005
                got = seconds(real.wait_p99) or 0.0
                out.append(
                    (got <= bound, f"{sim.name}: p99 {got * 1e3:.2f} ms, at most {bound * 1e3:.2f}")
                )
    return out


def _demo(args: argparse.Namespace) -> int:
    agree = True
    reports = []
    for original in scenarios(args.file):
        scenario = original.scaled(args.scale)
        if scenario.burst != args.burst:
            scenario = attrs.evolve(scenario, burst=args.burst)
        simulated = simulate(scenario)
        measured = asyncio.run(_play_live(scenario))
        verdicts = checks(simulated, measured)
        agree = agree and all(ok for ok, _ in verdicts)
        if args.json:
            reports.append(
                {
                    "simulated": as_json(simulated),
                    "measured": as_json(measured),
                    "checks": [{"ok": ok, "check": text} for ok, text in verdicts],
                }
            )
        else:
            lines = [("agrees: " if ok else "DISAGREES: ") + text for ok, text in verdicts]
            print(comparison(simulated, measured, lines) + "\n", flush=True)
    if args.json:
        print(json.dumps({"scale": float(args.scale), "scenarios": reports}, indent=2))
    return 0 if agree else 1


async def _play_live(scenario: Scenario) -> Result:
    from ._live import run

    return await run(scenario)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with ``argv`` (default: ``sys.argv[1:]``); the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "simulate":
            return _simulate(args)
        return _demo(args)
    except _Usage as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
