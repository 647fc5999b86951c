"""The ``permits`` command: see what each policy does to a workload.

``permits simulate`` runs scenarios in virtual time on the core (the
article's five by default, or those of a TOML file) and prints a table per
scenario, or JSON; ``permits compare`` runs each scenario's workloads under
a grid of policies and says which meet its requirements; ``permits demo``
plays them live on the asyncio adapter and prints measured beside
simulated; ``permits examples`` lists the scenario files shipped with the
package. Bad input is one line on stderr naming the field and the value,
and exit status 2. Policy logic is :mod:`permits.sim`'s; this module reads,
prints and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import functools
import json
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import suppress
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import attrs

from permits import __version__
from permits.core import PermitError, PermitValueError, Policy, StrictPriority
from permits.core.checks import check_rate
from permits.sim import (
    MAX_ARRIVALS,
    Result,
    Scenario,
    TraceError,
    compare,
    every_nth,
    load_policy,
    replay,
    simulate,
)

from ._files import Usage, check_output, examples, read_scenarios, trace
from ._report import (
    as_json,
    compare_tables,
    comparison,
    comparison_json,
    duration,
    seconds,
    table,
)

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

__all__ = ["main"]

PROG = "permits"


def _fail(message: str) -> NoReturn:
    raise Usage(message)


def scenarios(
    path: Path | None, example: str | None = None, max_arrivals: int | None = MAX_ARRIVALS
) -> tuple[Scenario, ...]:
    """The scenarios of the TOML file at ``path``, or of the shipped example
    ``example``, or (neither) the article's five."""
    return read_scenarios(path, example, max_arrivals)


#: The least and the most ``--scale``: past them, the times of a run are past
#: a float's range (the live run's clock), its seconds a lifetime, or every
#: scenario's length below a nanosecond.
_SCALES = (Fraction(1, 10**6), Fraction(10**18))


def _scale(text: str) -> Fraction:
    try:
        written = Decimal(text)
    except InvalidOperation:  # 1/3, say: Fraction reads it
        written = Decimal(1)
    if written.is_finite() and abs(written.adjusted()) > 1000:  # Fraction() would not return
        raise argparse.ArgumentTypeError(f"scale={text!r}: must be from 1e-06 to 1e+18")
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"scale={text!r}: expected a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"scale={text!r}: must be greater than 0")
    if not _SCALES[0] <= value <= _SCALES[1]:
        raise argparse.ArgumentTypeError(f"scale={text!r}: must be from 1e-06 to 1e+18")
    return value


def _whole(name: str, text: str, minimum: int) -> int:
    """``text`` as an option's whole number ``>= minimum``, written as a
    trace's cells are: ASCII digits, a sign at most (``int`` alone also
    reads ``1_000`` and other scripts' digits, which no other input here
    takes)."""
    digits = text.strip().removeprefix("-")
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 4300:
        raise argparse.ArgumentTypeError(f"{name}={text!r}: expected a whole number")
    value = int(text)
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{name}={text!r}: must be at least {minimum}")
    return value


def _burst(text: str) -> int:
    return _whole("burst", text, 1)


def _max_arrivals(text: str) -> int:
    return _whole("max_arrivals", text, 0)


def _inputs(command: argparse.ArgumentParser) -> None:
    """FILE, --example and --max-arrivals: where the scenarios come from."""
    command.add_argument(
        "file",
        nargs="?",
        type=Path,
        metavar="FILE",
        help="a TOML scenario file (-: the standard input)",
    )
    command.add_argument(
        "--example",
        metavar="NAME",
        help="a scenario file shipped with permits (see: permits examples)",
    )
    command.add_argument(
        "--max-arrivals",
        type=_max_arrivals,
        default=MAX_ARRIVALS,
        metavar="N",
        help=f"refuse a scenario that asks for more than N callers (default {MAX_ARRIVALS:,})",
    )
    command.add_argument("--json", action="store_true", help="print JSON instead of tables")


def _trace_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--trace",
        type=Path,
        metavar="TRACE",
        help="replay these recorded calls (CSV or JSON lines: at, level, and optionally "
        "cost or a cost per limit, flow, timeout, max_wait, give_up_after) in place of the "
        "workloads' arrivals, under each scenario's limits and policy, for its seconds "
        "(- reads the standard input)",
    )


def _plot_option(command: argparse.ArgumentParser, help: str) -> None:
    command.add_argument("--plot", type=Path, metavar="FILE.png", help=help)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose help and version that cannot be written to
    the standard output raise (argparse drops the error: ``permits
    --version`` to a full disk wrote nothing and exited 0). A usage error,
    to the standard error, is argparse's own."""

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        if file is not sys.stdout:
            with suppress(AttributeError, OSError):  # (argparse drops it from 3.11 on)
                super()._print_message(message, file)
        elif message:
            if file is None:  # (sys.stdout, closed as the process started)
                raise _closed()
            file.write(message)
            flush = getattr(file, "flush", None)
            if flush is not None:
                flush()


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
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
    _inputs(sim)
    _trace_option(sim)
    _plot_option(sim, "also draw the results (needs permits[plot])")
    cmp = commands.add_parser(
        "compare",
        help="run the workloads under every policy family and recommend one",
        description="Run each scenario's workloads under a grid of policies (FIFO; strict "
        "priority; every n-th permit to the lowest level, n = 2..10; aging after 0.5, 1, 2, "
        "5, 10 s) in place of its own, print a table per workload and which policies meet "
        "the scenario's requirements, and recommend one. Exit status 0 if some policy meets "
        "every requirement (of every scenario), 1 if not. Without FILE: the example "
        "'article'.",
    )
    _inputs(cmp)
    _trace_option(cmp)
    _plot_option(
        cmp,
        "also draw the trade-off: the most urgent workload's p99 wait against the least "
        "urgent one's share, a point per policy; and the wait distributions (needs "
        "permits[plot])",
    )
    cmp.add_argument(
        "--policy",
        action="append",
        metavar="POLICY",
        help="run this policy instead of the grid (repeat for several): fifo, strict, "
        "every:N, shares:W1,W2,..., aging:SECONDS",
    )
    demo = commands.add_parser(
        "demo",
        help="run scenarios live on the asyncio adapter, beside the simulation",
        description="Play scenarios in real time on the asyncio adapter and print what "
        "was measured beside what the simulation of the same scenario gives. Exit "
        "status 1 if they disagree by more than the conformance suite allows.",
    )
    _inputs(demo)
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
    listing = commands.add_parser(
        "examples",
        help="list the scenario files shipped with permits",
        description="List the scenario files shipped with permits, for --example NAME.",
    )
    listing.add_argument("--json", action="store_true", help="print JSON instead of text")
    return parser


def _draw(path: Path, draw: Callable[[], None]) -> None:
    """Draw the plot; a write that fails all the same (a full disk, a file
    system that refuses it) is one line naming --plot, not a traceback."""
    try:
        draw()
    except OSError as error:
        _fail(f"--plot={str(path)!r}: cannot write it: {error.strerror or error}")


def _check_inputs(args: argparse.Namespace) -> None:
    """Refuse FILE and ``--trace`` that both read the standard input."""
    stdin = ("-", "/dev/stdin")
    if str(args.file) in stdin and str(args.trace) in stdin:
        _fail(
            f"FILE={str(args.file)!r} and --trace={str(args.trace)!r} both read the standard "
            "input: give one of them a file"
        )


def _check_plot(args: argparse.Namespace) -> None:
    """Refuse, before any run, a ``--plot`` that could not be drawn or written."""
    if args.plot is not None:
        from ._plot import image_format, require_matplotlib

        check_output("--plot", args.plot)
        require_matplotlib()
        image_format(args.plot)


#: The longest run ``--plot`` draws, in seconds: matplotlib's log axes fail
#: (an OverflowError) on times of about 1e290 s.
_LONGEST_DRAWN = 10**200


def _check_drawn(args: argparse.Namespace, scenario: Scenario) -> None:
    """Refuse, before its run, a scenario too long for ``--plot`` to draw."""
    if args.plot is not None and scenario.seconds > _LONGEST_DRAWN:
        _fail(
            f"--plot={str(args.plot)!r}: cannot draw a run of more than 1e+200 s "
            f"({scenario.name}: seconds={scenario.seconds!r})"
        )


def _bound(args: argparse.Namespace) -> int | None:
    """The most callers a scenario's own workloads may ask for: none with
    ``--trace``, whose calls replace them (a trace is read as it streams)."""
    return None if args.trace is not None else args.max_arrivals


def _replayed(args: argparse.Namespace, result: Result) -> Result:
    """``result``, a replay of ``--trace``: refused (one line, exit 2) if no
    call of the trace fell within the run, as when its times are a clock's
    (seconds since 1970) rather than seconds from the trace's start."""
    if not any(w.offered for w in result.workloads):
        length = duration(seconds(result.duration_ns))
        _fail(
            f"{args.trace}: no call falls within the {length} of scenario "
            f"{result.scenario.name!r} (a call's at is seconds from the start of the run): "
            "nothing to replay"
        )
    return result


def _source(args: argparse.Namespace, example: str | None) -> str | None:
    """How the file's errors name it: its path, or the shipped example's name
    (``None``: the article's scenarios, no file)."""
    if args.file is not None:
        return str(args.file)
    return None if example is None else f"example {example!r}"


def _refused(source: str | None, index: int, scenario: Scenario, error: PermitError) -> NoReturn:
    """A requirement of ``scenario`` (the file's ``index``-th) that a run
    cannot judge, named by its place in the file (``scenario[0].require[1]``)
    as the file's other errors are; any other refusal, by the scenario's
    name."""
    if (
        source is not None
        and isinstance(error, PermitValueError)
        and error.argument.startswith("requirements[")
    ):
        place = f"scenario[{index}].require[{error.argument.removeprefix('requirements[')}"
        _fail(f"{source}: {place}={error.value!r}: {error.reason}")
    _fail(f"{scenario.name}: {error}")


def _simulate(args: argparse.Namespace) -> int:
    _check_inputs(args)
    _check_plot(args)
    loaded = scenarios(args.file, args.example, _bound(args))
    for scenario in loaded:
        _check_drawn(args, scenario)
    if args.trace is None:
        results = [simulate(scenario, max_arrivals=None) for scenario in loaded]
    else:
        calls = trace(args.trace)
        results = []
        for index, scenario in enumerate(loaded):
            try:
                results.append(_replayed(args, replay(scenario, calls(scenario.named_limits))))
            except TraceError as error:
                _fail(f"{args.trace}: {error}")
            except PermitError as error:  # a requirement a trace cannot judge
                _refused(_source(args, args.example), index, scenario, error)
    if args.plot is not None:
        from ._plot import plot

        _draw(args.plot, lambda: plot(results, args.plot))
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
            if sim.level == 0 and sim.wait_p99_ns is not None:
                bound = (sim.wait_p99_s or 0.0) + interval + 0.005
                got = real.wait_p99_s
                if got is None:  # none granted live: no p99 to be within the bound
                    out.append(
                        (False, f"{sim.name}: no p99, none granted, at most {bound * 1e3:.2f} ms")
                    )
                    continue
                out.append(
                    (
                        got <= bound,
                        f"{sim.name}: p99 {got * 1e3:.2f} ms, at most {bound * 1e3:.2f} ms",
                    )
                )
    return out


def _demo(args: argparse.Namespace) -> int:
    agree = True
    reports = []
    for original in scenarios(args.file, args.example, args.max_arrivals):
        if original.limits is not None or not all(w.plain for w in original.workloads):
            _fail(
                f"{original.name}: demo plays one limit, callers of one unit and no flows; "
                "run this scenario with simulate or compare"
            )
        try:
            scenario = original.scaled(args.scale)
        except PermitError as error:  # a time scaled below a nanosecond
            _fail(f"{original.name}: {error} (from --scale={float(args.scale):g})")
        if scenario.burst != args.burst:
            scenario = attrs.evolve(scenario, burst=args.burst)
        simulated = simulate(scenario, max_arrivals=None)
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


#: What ``--policy`` takes, as its errors say it.
_POLICY_FORMS = "fifo, strict, every:N, shares:W1,W2,... or aging:SECONDS"


def _seconds(text: str) -> int | float:
    """Seconds written in an option, as written: ``0`` an int (its error
    says ``0``, not ``0.0``), ``0.5`` or ``1e-9`` a float; raises
    ``ValueError`` for a text that is neither."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def _policies(texts: list[str] | None, levels: int) -> list[Policy] | None:
    """``--policy`` options as policies over ``levels`` levels."""
    if texts is None:
        return None
    policies: list[Policy] = []
    given: list[str] = []
    for text in texts:
        kind, _, value = text.partition(":")
        spec: dict[str, object] = {"kind": kind.strip()}
        if spec["kind"] not in ("fifo", "strict", "every", "shares", "aging"):
            _fail(f"--policy={text!r}: unknown policy (expected {_POLICY_FORMS})")
        every = None
        try:
            if spec["kind"] == "every":
                every = int(value)
                spec = {"kind": "shares", "every": every}
            elif spec["kind"] == "shares":
                spec["weights"] = [int(w) for w in value.split(",")]
            elif spec["kind"] == "aging" and value:
                spec["after"] = _seconds(value)
            elif value:
                raise ValueError(value)
        except ValueError:
            _fail(f"--policy={text!r}: expected {_POLICY_FORMS}")
        try:
            policy = load_policy(spec if value else spec["kind"], levels, "--policy")
            if every is not None and levels > 2:  # over every level, as the grid's
                policy = every_nth(every, levels)
        except PermitError as error:
            _fail(f"{error} (from --policy={text!r})")
        if policy.levels < levels:  # weights for fewer levels than the scenario's
            _fail(
                f"--policy={text!r}: orders {policy.levels} of the {levels} levels "
                "of the scenario's policy: give a weight for each"
            )
        if policy.levels > levels:  # a trace's rows, max_waiting: per level of the scenario
            _fail(
                f"--policy={text!r}: orders {policy.levels} levels, and the scenario "
                f"{levels}: give a policy of {levels} level{'' if levels == 1 else 's'}"
            )
        if policy in policies:  # a row of the same figures twice ("every:5", "shares:4,1")
            earlier = given[policies.index(policy)]
            same = "given twice" if earlier == text else f"the same policy as --policy={earlier!r}"
            _fail(f"--policy={text!r}: {same}: give each policy once")
        policies.append(policy)
        given.append(text)
    return policies


def _compare(args: argparse.Namespace) -> int:
    _check_inputs(args)
    _check_plot(args)
    name = "article" if args.file is None and args.example is None else args.example
    calls = None if args.trace is None else trace(args.trace)
    comparisons = []
    loaded = scenarios(args.file, name, _bound(args))
    for scenario in loaded:
        _check_drawn(args, scenario)
    for index, scenario in enumerate(loaded):
        grid = _policies(args.policy, scenario.policy.levels)
        try:
            replayed = None if calls is None else functools.partial(calls, scenario.named_limits)
            compared = compare(scenario, grid, max_arrivals=None, calls=replayed)
            if calls is not None:
                _replayed(args, compared.outcomes[0].result)
            comparisons.append(compared)
        except TraceError as error:
            _fail(f"{args.trace}: {error}")
        except PermitError as error:
            _refused(_source(args, name), index, scenario, error)
    if args.plot is not None:
        from ._plot import plot_comparisons

        _draw(args.plot, lambda: plot_comparisons(comparisons, args.plot))
    status = 0 if all(c.any_meets_all for c in comparisons) else 1
    try:
        if args.json:
            print(json.dumps({"scenarios": [comparison_json(c) for c in comparisons]}, indent=2))
        else:
            print("\n\n\n".join(compare_tables(c) for c in comparisons))
    except BrokenPipeError:  # permits compare | head: the verdict stands
        _reader_gone()
    return status


def _examples(args: argparse.Namespace) -> int:
    found = examples()
    if args.json:
        listing = [{"name": name, "description": text} for name, text in found.items()]
        print(json.dumps({"examples": listing}, indent=2))
    else:
        width = max(len(name) for name in found)
        for name, text in found.items():
            print(f"{name:<{width}}  {text}")
        print(f"\nrun one: {PROG} simulate --example NAME (or compare, demo)")
    return 0


_COMMANDS = {"simulate": _simulate, "compare": _compare, "demo": _demo, "examples": _examples}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with ``argv`` (default: ``sys.argv[1:]``); the exit status."""
    return _output(lambda: _run(argv))


def _run(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)  # (--help, --version: printed, SystemExit)
    if sys.stdout is None:  # started with it closed (>&-): print would write nothing, silently
        raise _closed()
    return _COMMANDS[args.command](args)


def _closed() -> OSError:
    return OSError(errno.EBADF, "the standard output is closed")


def _output(command: Callable[[], int]) -> int:
    """The exit status of ``command``, whose output is written by the time
    it is returned (an output short enough to stay in the buffer fails only
    as it is flushed: ``--version`` to a full disk exited 0); 2 with one
    line if it cannot be."""
    try:
        status = command()
        sys.stdout.flush()
        return status
    except Usage as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (permits simulate | head): nothing more to say.
        _reader_gone()
        return 0
    except OSError as error:
        # Every file the commands read is checked into a Usage error, so this
        # is the output failing (a full disk): one line, not a traceback.
        if sys.stdout is not None:
            _reader_gone()
        print(f"{PROG}: error: cannot write the output: {error.strerror or error}", file=sys.stderr)
        return 2


def _reader_gone() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush, to a
    pipe whose reader went away, is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
