"""The ``permits`` command: output, JSON, plots, scenario files and bad input."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import permits.testing
from permits.cli import _live as live
from permits.cli import _report as report
from permits.cli import main, scenarios
from permits.core import SECOND, Aging, Fifo, Policy, Shares, StrictPriority
from permits.sim import COLUMNS as TRACE_COLUMNS
from permits.sim import (
    SEED,
    Batch,
    Comparison,
    Constant,
    Poisson,
    Requirement,
    Scenario,
    Workload,
    compare,
    default_grid,
    every_nth,
    simulate,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "adapters" / "permits" / "cli" / "examples"
SEED_FILE = EXAMPLES / "seed.toml"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_installed_as_a_command_and_a_module() -> None:
    for command in (
        [str(Path(sys.executable).parent / "permits"), "--help"],
        [sys.executable, "-m", "permits", "--help"],
    ):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        assert "simulate" in done.stdout
        assert "demo" in done.stdout


def test_the_scenario_files_shape_in_the_docstring_runs_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The one whole example of the file's shape in a docstring
    (``permits.sim._load``) named a limit ``tokens`` its scenario has not:
    copied out, it was refused. Each field it shows is read, and it runs."""
    import permits.sim._load as load

    doc = load.__doc__
    assert doc is not None
    shape = doc.split("The shape, in TOML::\n\n")[1].split("\n\nIn place of")[0]
    file = tmp_path / "shape.toml"
    file.write_text("\n".join(line[4:] for line in shape.splitlines()) + "\n")
    assert main(["simulate", str(file)]) == 0
    out = capsys.readouterr().out
    assert "strict priority, interactive 20/s" in out
    assert "interactive" in out
    assert "batch" in out


def test_simulate_prints_each_scenario_with_the_published_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, _ = run(capsys, "simulate")
    assert status == 0
    for scenario in SEED:
        assert scenario.name in out
    assert out.count("\n    published ") == 10  # a row under each workload of the five
    assert "1,092 permits, over the 1,000 that 10 s allow" in out
    # the strict priority 20/s rows: 200 of 200 served in 5 ms, 800 to the batch
    block = out.split("strict priority, interactive 20/s")[1].split("\n\n")[0]
    assert "      200      200        0" in block
    assert "5 ms" in block
    assert "      800      200" in block


def test_json_matches_the_simulation_and_is_byte_identical(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """P56: ``permits simulate --json`` prints the same bytes each time, the
    simulation's figures."""
    _, first, _ = run(capsys, "simulate", "--json")
    _, second, _ = run(capsys, "simulate", "--json")
    assert first == second
    data = json.loads(first)
    assert [s["name"] for s in data["scenarios"]] == [s.name for s in SEED]
    for scenario, reported in zip(SEED, data["scenarios"], strict=True):
        result = simulate(scenario)
        assert reported["granted"] == result.granted
        for got, want in zip(reported["workloads"], result.workloads, strict=True):
            assert got["granted"] == want.granted
            assert got["waiting"] == want.waiting
            assert got["wait_max_s"] == (
                None if want.wait_max_ns is None else want.wait_max_ns / 1e9
            )
    aging = data["scenarios"][4]["workloads"][1]
    assert aging["published"]["cleared_at_s"] == 4.8


def test_json_counts_the_callers_too_long_apart(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``too_long`` counts the callers refused for their ``max_wait``,
    ``rejected`` those refused for a full level, and neither counts the
    other's, as the core's statistics and the metrics exporters count them;
    the table has a column for each."""
    path = tmp_path / "scenario.toml"
    path.write_text(
        '[[scenario]]\nname = "s"\nrate = 10\nseconds = 2\nmax_waiting = 5\n'
        '[[scenario.workload]]\nname = "a"\nlevel = 0\narrivals = "batch"\nsize = 10\n'
        "max_wait = 0.35\n"
        '[[scenario.workload]]\nname = "b"\nlevel = 0\narrivals = "batch"\nsize = 10\n'
    )
    status, out, err = run(capsys, "simulate", str(path), "--json")
    assert (status, err) == (0, "")
    a, b = json.loads(out)["scenarios"][0]["workloads"]
    # a: waits of 0 to 0.3 s are taken, the six behind them too long;
    # b: two join a's three waiters, the eight behind find the level full
    assert (a["granted"], a["rejected"], a["too_long"]) == (4, 0, 6)
    assert (b["rejected"], b["too_long"]) == (8, 0)
    status, out, err = run(capsys, "simulate", str(path))
    assert (status, err) == (0, "")
    heading, a_row, b_row = out.splitlines()[2:5]
    assert "cancelled rejected too long expired" in heading
    # (workload, level, offered, granted, waiting, cancelled, rejected, too long, expired)
    assert a_row.split()[:9] == ["a", "0", "10", "4", "0", "0", "0", "6", "0"]
    assert b_row.split()[:9] == ["b", "0", "10", "2", "0", "0", "8", "0", "0"]


def test_same_output_in_a_fresh_process() -> None:
    """Determinism across processes (hash seeds differ), not only within one."""
    command = [sys.executable, "-m", "permits", "simulate", "--json"]
    command.append(str(EXAMPLES / "mixed.toml"))
    outputs = {
        subprocess.run(
            command, capture_output=True, check=True, env={"PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1


def test_seed_file_is_the_built_in_set() -> None:
    loaded = scenarios(SEED_FILE)
    assert loaded == SEED  # names, policies, rates, workloads ...
    for mine, theirs in zip(loaded, SEED, strict=True):  # ... and the published figures
        assert [w.published for w in mine.workloads] == [w.published for w in theirs.workloads]


GOOD = """
[[scenario]]
name = "s"
policy = "strict"
rate = 100
seconds = 10

[[scenario.workload]]
name = "interactive"
level = 0
arrivals = "constant"
rate = 20

[[scenario.workload]]
name = "batch"
level = 1
arrivals = "batch"
size = 1000
"""

BAD = [
    (
        GOOD.replace('policy = "strict"', 'policy = "lottery"'),
        "scenario[0].policy='lottery': unknown policy (expected one of: "
        "'fifo', 'strict', 'shares', 'aging')",
    ),
    (
        GOOD.replace("rate = 100", "rate = -5"),
        "scenario[0].rate=-5: must be greater than 0",
    ),
    (
        GOOD.replace("rate = 20", "rate = -20"),
        "scenario[0].workload[0].rate=-20: must be greater than 0",
    ),
    (GOOD.replace("seconds = 10", ""), "scenario[0].seconds: missing"),
    (  # JSON has no Infinity: --json printed one
        GOOD.replace("size = 1000", "size = 1000\npublished = { wait_p99 = inf }"),
        "scenario[0].workload[1].published.wait_p99=inf: not a valid figure",
    ),
    (
        GOOD.replace("size = 1000", "sise = 1000"),
        "scenario[0].workload[1].sise=1000: unknown key (expected one of: arrivals, at, "
        "cost, fair, flow, give_up_after, heaviest, level, max_wait, name, published, size, "
        "tenants, timeout, zipf)",
    ),
    (  # a name of two lines broke its table's row, and no requirement could name it
        GOOD.replace('name = "batch"', 'name = "batch\\njob"'),
        "scenario[0].workload[1].name='batch\\njob': must be one line of printable text "
        "(it heads a table's row, and a requirement names it)",
    ),
    (
        GOOD.replace('name = "s"', 'name = "s\\u001b[31m"'),
        "scenario[0].name='s\\x1b[31m': must be one line of printable text",
    ),
    (  # a typo for 1.5 met every requirement: no caller came to judge
        GOOD.replace("size = 1000", "size = 1000\nat = 15"),
        "scenario[0].workload[1].at=15: at or after the end of the run (seconds = 10): "
        "no caller of it would come",
    ),
    (
        GOOD.replace("rate = 20", "rate = 20\nstart = 10"),
        "scenario[0].workload[0].start=10: at or after the end of the run (seconds = 10): "
        "no caller of it would come",
    ),
    (  # before the end as written, at it to the nearest nanosecond: no caller came either
        GOOD.replace("size = 1000", "size = 1000\nat = 9.9999999996"),
        "scenario[0].workload[1].at=9.9999999996: at or after the end of the run "
        "(seconds = 10), to the nearest nanosecond: no caller of it would come",
    ),
    (
        GOOD.replace("seconds = 10", "seconds = 10.0000000004").replace(
            "rate = 20", "rate = 20\nstart = 10"
        ),
        "scenario[0].workload[0].start=10: at or after the end of the run "
        "(seconds = 10.0000000004), to the nearest nanosecond: no caller of it would come",
    ),
    (  # the value as written, not the Tenants it was made into
        GOOD.replace("rate = 20", 'rate = 20\nflow = "acme"\ntenants = 5'),
        "scenario[0].workload[0].tenants=5: give flow or tenants, not both",
    ),
    (  # not "unknown key": rate is a key, of other arrivals than the batch's
        GOOD.replace("size = 1000", "size = 1000\nrate = 3"),
        "scenario[0].workload[1].rate=3: not a key of arrivals = 'batch' (a key of "
        "'constant', 'poisson'; 'batch' takes at, size)",
    ),
    (
        GOOD.replace("rate = 20", "rate = 20\nsize = 5"),
        "scenario[0].workload[0].size=5: not a key of arrivals = 'constant' (a key of "
        "'batch'; 'constant' takes rate, start, stop)",
    ),
    (  # not "size=1000: unknown key": the arrivals that take it are what is missing
        GOOD.replace('arrivals = "batch"\n', ""),
        "scenario[0].workload[1].arrivals: missing",
    ),
    (  # the key's former name
        GOOD.replace("size = 1000", "size = 1000\ndeadline = 3"),
        "scenario[0].workload[1].deadline=3: renamed: write timeout = ... (seconds after arrival)",
    ),
    (  # the other former name of the same
        GOOD.replace("size = 1000", "size = 1000\nexpire_after = 3"),
        "scenario[0].workload[1].expire_after=3: renamed: write timeout = ... "
        "(seconds after arrival)",
    ),
    (
        GOOD.replace("level = 1", "level = 2"),
        "scenario[0].workload[1].level=2: must be 0 or 1 (the policy has 2 levels), "
        "or give the scenario a policy of 3 levels or more",
    ),
    (
        GOOD.replace('arrivals = "batch"', 'arrivals = "burst"'),
        "scenario[0].workload[1].arrivals='burst': unknown arrivals (expected one of: "
        "'batch', 'constant', 'poisson')",
    ),
    (
        GOOD.replace("rate = 100", 'rate = "fast"'),
        "scenario[0].rate='fast': expected a number, got str",
    ),
    (
        GOOD.replace('policy = "strict"', 'policy = { kind = "shares", weights = [4, 0] }'),
        "scenario[0].policy.weights[1]=0: must be at least 1",
    ),
    (
        GOOD.replace('policy = "strict"\n', "").replace("level = 1", "level = 5000"),
        "scenario[0].workload[1].level=5000: needs a policy of 5,001 levels, and a policy's "
        "levels must be at most 1000",
    ),
    (
        GOOD.replace('policy = "strict"', 'policy = { kind = "shares", every = 1 }'),
        "scenario[0].policy.every=1: must be at least 2",
    ),
    (
        GOOD.replace('policy = "strict"', 'policy = { kind = "aging", afer = 2 }'),
        "scenario[0].policy.afer=2: unknown key (expected one of: after, kind, levels)",
    ),
    (GOOD.replace("[[scenario]]", "[[scenarios]]", 1), "scenarios="),
    (GOOD + "\nburst = 0\n", "scenario[0].workload[1].burst=0: unknown key"),
    (  # not "at least 0": 0 is refused too
        GOOD.replace("seconds = 10", "seconds = -5"),
        "scenario[0].seconds=-5: must be greater than 0",
    ),
    (  # 1e600 callers, past a float: an OverflowError's traceback, saying how many
        GOOD.replace("seconds = 10", "seconds = 1e300").replace("rate = 20", "rate = 1e300"),
        "scenario[0].workload[0].rate=1e+300: for seconds=1e+300 asks for 1e+600 callers in all",
    ),
    (  # its waits past a float's seconds: an OverflowError's traceback, writing them
        GOOD.replace("seconds = 10", "seconds = 1" + "0" * 400),
        "scenario[0].seconds=100000000000000000...0000000000000000000: must be at most 1e+308",
    ),
    (  # the flow's entry named, not flow_weights=0 as if the whole table were 0
        GOOD.replace('policy = "strict"', 'policy = "strict"\nflow_weights = { acme = 0 }'),
        "scenario[0].flow_weights['acme']=0: must be from 1 to 1000000 (to serve the flow less, "
        "weigh the others more)",
    ),
    (  # likewise
        GOOD.replace('policy = "strict"', 'policy = { kind = "aging", after = -1 }'),
        "scenario[0].policy.after=-1: must be greater than 0",
    ),
    (
        GOOD.replace("rate = 20", "rate = 20\ntimeout = -1"),
        "scenario[0].workload[0].timeout=-1: must be at least 0 (or left out: none)",
    ),
    (
        GOOD.replace("rate = 20", "rate = 20\nstart = 5\nstop = 2"),
        "scenario[0].workload[0].stop=2: must be after start (5 s), or no caller would arrive",
    ),
    (
        GOOD.replace("seconds = 10", "seconds = 10\nburst = 0"),
        "scenario[0].burst=0: must be at least 1",
    ),
    (GOOD.replace("name = ", "name = = ", 1), "not valid TOML"),
    (
        GOOD.replace('policy = "strict"', 'policy = { kind = "strict", levels = 1000000000 }'),
        "scenario[0].policy.levels=1000000000: must be at most 1000",
    ),
    (
        GOOD.replace("size = 1000", "size = 100000000000"),
        "scenario[0].workload[1].size=100000000000: asks for 1e+11 callers in all, over the "
        "10,000,000 a run may ask for (raise the limit with max_arrivals, or --max-arrivals",
    ),
    (
        GOOD.replace("seconds = 10", "seconds = 1e30"),
        "scenario[0].workload[0].rate=20: for seconds=1e+30 asks for 2e+31 callers in all",
    ),
    (
        GOOD.replace("rate = 20", "rate = 1e30"),
        "scenario[0].workload[0].rate=1e+30: for seconds=10 asks for 1e+31 callers",
    ),
    (
        GOOD.replace('"constant"\nrate = 20', '"poisson"\nrate = 1e30\nstop = 1'),
        "scenario[0].workload[0].rate=1e+30: for seconds=10 asks for 1e+30 callers",
    ),
    (
        GOOD.replace("size = 1000", "size = " + "[" * 5000 + "]" * 5000),
        "arrays or tables nested too deep to read",
    ),
    (
        GOOD.replace(
            'policy = "strict"',
            "policy = { kind = 'shares', weights = " + "[" * 100 + "1" + "]" * 100 + " }",
        ),
        "scenario[0].policy.weights[0]=[[[[...]]]]: expected an int, got list",
    ),
    (
        GOOD.replace("seconds = 10", 'seconds = 10\nrequire = ["interactive p99 >= 50 ms"]'),
        "scenario[0].require[0]='interactive p99 >= 50 ms': a p99 bound is written <=",
    ),
    (
        GOOD.replace("seconds = 10", 'seconds = 10\nrequire = ["users p99 <= 50 ms"]'),
        "scenario[0].require[0]='users p99 <= 50 ms': no workload is called 'users' "
        "(the workloads: 'interactive', 'batch')",
    ),
    (
        GOOD.replace("seconds = 10", 'seconds = 10\nrequire = ["batch share >= 20"]'),
        "scenario[0].require[0]='batch share >= 20': a share is at most 100%",
    ),
    (
        GOOD.replace("seconds = 10", 'seconds = 10\nrequire = "batch share >= 20%"'),
        "scenario[0].require='batch share >= 20%': expected a list of requirements",
    ),
    (
        GOOD.replace("seconds = 10", 'seconds = 10\nrequire = ["batch share of tokens >= 20%"]'),
        "scenario[0].require[0]='batch share of tokens >= 20%': no limit is called 'tokens' "
        "(the limits: 'units')",
    ),
    (
        GOOD.replace("seconds = 10", 'seconds = 10\nrequire = ["batch tenants starved <= 5%"]'),
        "scenario[0].require[0]='batch tenants starved <= 5%': a count of tenants is a whole "
        "number, no unit",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_scenario_file_is_one_line_and_status_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    for command in ("simulate", "compare", "demo"):
        status, out, err = run(capsys, command, str(path))
        assert status == 2
        assert out == ""
        assert err.count("\n") == 1, err
        assert err.startswith(f"permits: error: {path}: "), err
        assert message in err, err


def test_good_file_runs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "scenario.toml"
    path.write_text(GOOD)
    status, out, _ = run(capsys, "simulate", str(path))
    assert status == 0
    assert "interactive" in out


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.005, "5 ms"),
        (0.9994, "999 ms"),
        (0.9996, "1 s"),
        (0.99999, "1 s"),
        (1.5, "1.5 s"),
        (999.4, "999 s"),
        (999.6, "1,000 s"),
        (1980.4, "1,980 s"),
        (86_400.0, "86,400 s"),
        (1e30, "1e+30 s"),
    ],
)
def test_a_time_is_written_short_without_an_exponent(seconds: float, shown: str) -> None:
    """0.9996 s was written '1e+03 ms' (999.6 to three digits); and 1,980 s
    (a run of an hour, a day's trace) '1.98e+03 s'."""
    assert report.duration(seconds) == shown


def test_a_file_with_a_byte_order_mark_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """UTF-8 with a BOM, CRLF line ends (as Notepad saves it): read as a trace is."""
    path = tmp_path / "scenario.toml"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.replace("\n", "\r\n").encode())
    status, out, err = run(capsys, "simulate", str(path))
    assert (status, err) == (0, "")
    assert "interactive" in out


def test_times_past_a_float_in_nanoseconds_are_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A wait of 1e300 s is 1e309 ns, past a float: the table and --json
    raised OverflowError turning it into seconds (ns / 1e9)."""
    path = tmp_path / "scenario.toml"
    path.write_text(
        '[[scenario]]\nname = "s"\nrate = 1e-300\nseconds = 1.5e300\n'
        '[[scenario.workload]]\nname = "a"\nlevel = 0\narrivals = "batch"\nsize = 2\n'
    )
    status, out, err = run(capsys, "simulate", str(path))
    assert (status, err) == (0, "")
    assert "1e+300 s" in out
    status, out, err = run(capsys, "simulate", str(path), "--json")
    assert (status, err) == (0, "")
    (workload,) = json.loads(out)["scenarios"][0]["workloads"]
    assert workload["wait_max_s"] == workload["cleared_at_s"] == 1e300


@pytest.mark.timeout(60)
def test_a_file_too_large_for_a_scenario_is_refused_unread(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A scenario file is read whole: one past 64 MiB (a trace given where a
    scenario goes, ``/dev/zero``, which never ends and was read until the
    system ran out of memory) is refused in one line, having read no more
    than that."""
    big = tmp_path / "big.toml"
    with big.open("wb") as file:
        file.truncate(64 * 2**20 + 1)  # (sparse: no disk used)
    status, out, err = run(capsys, "simulate", str(big))
    assert (status, out) == (2, "")
    assert "larger than 64 MiB: not a scenario file" in err, err
    assert err.count("\n") == 1, err
    if Path("/dev/zero").exists():
        status, _, err = run(capsys, "simulate", "/dev/zero")
        assert status == 2
        assert "larger than 64 MiB" in err, err
    at_most = tmp_path / "at_most.toml"
    with at_most.open("wb") as file:
        file.truncate(64 * 2**20)
    status, _, err = run(capsys, "simulate", str(at_most))
    assert status == 2
    assert "larger than" not in err, err  # read whole, and found to be no TOML


@pytest.mark.timeout(20)  # --scale 1e999999999 made a Fraction of a billion digits
def test_missing_file_and_bad_options(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = run(capsys, "simulate", str(tmp_path / "nowhere.toml"))
    assert status == 2
    assert "cannot read" in err
    assert "nowhere.toml" in err
    for argv in (
        ["demo", "--scale", "-1"],
        ["demo", "--scale", "x"],
        ["demo", "--burst", "0"],
        ["demo", "--scale", "1e999999999"],
        ["demo", "--scale", "1e-999999999"],
        ["demo", "--scale", "1e400"],  # float(scale): OverflowError
        ["demo", "--scale", "1e-400"],  # the live run's times past a float
        ["simulate", "--max-arrivals", "-1"],
        ["simulate", "--max-arrivals", "1.5"],
        # int() reads these; no other input of the command does
        ["simulate", "--max-arrivals", "1_000"],
        ["demo", "--burst", "\u0663"],
        ["demo", "--burst", "9" * 5000],  # (int() raises past 4,300 digits)
    ):
        with pytest.raises(SystemExit) as exit:
            main(argv)
        assert exit.value.code == 2
        # the option's name and the value given, as each of the others
        name = argv[1].removeprefix("--").replace("-", "_")
        assert f"{name}={argv[-1]!r}" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_trace_help_names_every_column_a_trace_may_have(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit:
        main([command, "--help"])
    assert exit.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    (trace,) = re.findall(r"--trace TRACE (.*?) --plot", text)
    for column in TRACE_COLUMNS:
        assert column in trace, (column, trace)


def test_demo_agrees_with_the_simulation(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The five scenarios live on the asyncio adapter, on virtual time (the
    command's ``asyncio.run`` is :func:`permits.testing.run`): the demo says
    they agree with the simulation."""
    monkeypatch.setattr(asyncio, "run", permits.testing.run)
    status, out, _ = run(capsys, "demo")
    assert "DISAGREES" not in out, out
    assert status == 0
    assert out.count("agrees: ") >= 12  # two per scenario, three under strict priority
    assert out.count("\n    measured ") == 10
    # the p99 check gives both times their unit
    assert re.search(r"agrees: interactive: p99 \d+\.\d\d ms, at most \d+\.\d\d ms\n", out), out


def test_demo_disagrees_where_the_urgent_workload_was_granted_nothing_live() -> None:
    """Under strict priority, the most urgent workload's p99 is checked
    against the simulation's: a live run that granted it nothing has no p99
    within the bound (it passed, read as 0 ms), whatever the counts say."""
    from permits.cli import checks

    simulated = simulate(SEED[1])
    urgent = simulated["interactive"]
    assert urgent.level == 0
    assert urgent.wait_p99_ns is not None
    starved = attrs.evolve(
        urgent, granted=0, waiting=urgent.offered, wait_p50_ns=None, wait_p99_ns=None
    )
    measured = attrs.evolve(
        simulated,
        workloads=tuple(starved if w is urgent else w for w in simulated.workloads),
    )
    verdicts = checks(simulated, measured)
    p99 = [(ok, text) for ok, text in verdicts if "p99" in text]
    assert p99 == [(False, p99[0][1])], verdicts
    assert "none granted" in p99[0][1]
    assert all(ok for ok, _ in checks(simulated, simulated))


@pytest.mark.parametrize("scenario", SEED, ids=lambda scenario: scenario.name)
def test_live_runner_matches_the_simulation_on_virtual_time(scenario: Scenario) -> None:
    """The live runner on virtual time is the simulation, not only within
    the demo's tolerances: every workload's counts, waits and timeline are
    the simulation's (both count the permits granted in [0, seconds))."""
    measured = permits.testing.run(live.run(scenario))
    simulated = simulate(scenario)
    for got, want in zip(measured.workloads, simulated.workloads, strict=True):
        assert (got.offered, got.granted, got.waiting, got.cancelled) == (
            want.offered,
            want.granted,
            want.waiting,
            want.cancelled,
        ), got.name
        assert (got.rejected, got.too_long, got.expired) == (
            want.rejected,
            want.too_long,
            want.expired,
        ), got.name
        assert (got.waits_ns, got.timeline, got.wait_max_ns) == (
            want.waits_ns,
            want.timeline,
            want.wait_max_ns,
        ), got.name


#: Scenarios of callers who leave waiting, for the live runner on virtual
#: time: expired, giving up, at the end of the run, refused.
_LEAVING = [
    Scenario(
        "expired at the end",
        Fifo(),
        1,
        2,
        [Workload("w", 0, Batch(5), timeout=2), Workload("v", 0, Constant(2, start=0.5))],
    ),
    Scenario(
        "giving up at the end",
        Fifo(),
        1,
        2,
        [Workload("w", 0, Batch(5), give_up_after=2), Workload("v", 0, Batch(2), timeout=1.5)],
    ),
    Scenario(
        "both, and refused",
        StrictPriority(2),
        10,
        5,
        [
            Workload("hi", 0, Constant(7), timeout=0.3, give_up_after=0.3),
            Workload("lo", 1, Batch(20), timeout=1, give_up_after=0.5),
            Workload("mid", 1, Poisson(3), max_wait=0.2, timeout=0.7),
        ],
        max_waiting=(5, 8),
    ),
    Scenario(
        "only a permit free on arrival (timeout 0)",
        Fifo(),
        10,
        2,
        [Workload("try", 0, Constant(20), timeout=0), Workload("wait", 0, Batch(3, at=0.5))],
        burst=2,
    ),
]


@pytest.mark.parametrize("scenario", _LEAVING, ids=lambda scenario: scenario.name)
def test_live_runner_counts_those_who_leave_as_the_simulation(scenario: Scenario) -> None:
    """The live runner on virtual time counts the callers that expire, give
    up or are refused as the simulation does; one whose timeout falls at
    the end of the run was still waiting then (the run is [0, seconds), and
    nothing at its end counts), not expired, and the backlog never cleared.
    A caller that may give up queues in the order it came, as in the
    simulation: before a later workload's callers of the same instant (it
    queued behind them when asyncio.wait_for pushed from a task of its own)."""
    measured = permits.testing.run(live.run(scenario))
    simulated = simulate(scenario)
    fields = ("offered", "granted", "waiting", "cancelled", "rejected", "too_long", "expired")
    for got, want in zip(measured.workloads, simulated.workloads, strict=True):
        for name in (*fields, "wait_max_ns", "cleared_at_ns"):
            assert getattr(got, name) == getattr(want, name), (got.name, name)


_arrivals = st.one_of(
    st.builds(Batch, st.integers(0, 12), st.sampled_from([0, 0.25, 1])),
    st.builds(Constant, st.sampled_from([1, 3, 7]), st.sampled_from([0, 0.003, 0.5])),
    st.builds(Poisson, st.sampled_from([2, 8])),
)
_leaving = st.builds(
    Workload,
    name=st.just("w"),
    level=st.integers(0, 2),
    arrivals=_arrivals,
    timeout=st.sampled_from([None, 0.05, 0.1, 0.7]),
    give_up_after=st.sampled_from([None, 0.05, 0.1, 0.4]),
    max_wait=st.sampled_from([None, 0, 0.02, 0.3]),
)


@settings(deadline=None, max_examples=30)
@given(
    policy=st.sampled_from(
        [Fifo(3), StrictPriority(3), Shares((3, 2, 1)), Aging(3, after_ns=SECOND // 4)]
    ),
    loads=st.lists(_leaving, min_size=1, max_size=4),
    rate=st.sampled_from([2, 3, 10]),
    burst=st.integers(1, 4),
    seed=st.integers(0, 100),
    max_waiting=st.sampled_from([None, 0, 2, (None, 3, 1)]),
)
# The second of two callers at 0.25 s is due its permit at 349,999,999 ns
# (the bucket, full, restarts a nanosecond back) and gives up at
# 350,000,000: asyncio runs a timer up to its clock's resolution (1 ns)
# early, so the give-up ran in the turn of the grant, before the caller
# resumed, which handed its permit back and was counted as cancelled.
@example(
    policy=Fifo(3),
    loads=[
        Workload("w", 0, Batch(0, 0)),
        Workload("w", 0, Batch(0, 0)),
        Workload("w", 0, Batch(1, 0)),
        Workload("w", 0, Batch(2, 0.25), give_up_after=0.1),
    ],
    rate=10,
    burst=1,
    seed=0,
    max_waiting=None,
)
# The same for an arrival: the caller of 0.35 s came in the turn of the
# grant at 349,999,999 ns, and its best case was then 100,000,000 ns, a
# nanosecond above its max_wait (refused as too long), not 99,999,999.
@example(
    policy=Fifo(3),
    loads=[
        Workload("w", 0, Batch(1, 0)),
        Workload("w", 0, Batch(2, 0.25)),
        Workload("w", 0, Batch(1, 0.35), max_wait=0.099999999),
    ],
    rate=10,
    burst=1,
    seed=0,
    max_waiting=None,
)
# Callers at 671,606,082 and 762,327,786 ns: a timer set 0.090721704 s (a
# float) after the first falls past 0.762327786 s (the sum rounds up), and
# the second would arrive a nanosecond late, its wait a nanosecond short.
@example(
    policy=Fifo(3),
    loads=[Workload("w", 0, Batch(0, 0)), Workload("w", 0, Poisson(2))],
    rate=2,
    burst=1,
    seed=48,
    max_waiting=None,
)
def test_any_scenario_the_demo_plays_runs_live_as_simulated(
    policy: Policy,
    loads: list[Workload],
    rate: int,
    burst: int,
    seed: int,
    max_waiting: int | tuple[int | None, ...] | None,
) -> None:
    """Any scenario ``permits demo`` plays (one limit, a unit each, no
    flows), live on virtual time: every count, the timeline, the longest
    wait and the time each backlog cleared are the simulation's, to the
    nanosecond: the run's arrivals and give-ups act at their nanosecond,
    never one before or after it."""
    if isinstance(policy, Shares):
        # A caller that gives up at the very nanosecond its permit falls due
        # cancels its task, and the cancel reaches the limiter only as the
        # task next runs, after the limiter's timer of that instant granted
        # it the permit: it hands it back, and the next waiter has it at
        # that instant, as in the simulation (where it gives up first). A
        # Shares deal has counted the grant handed back, though, and deals
        # on a slot further; Fifo, StrictPriority and Aging count nothing.
        loads = [attrs.evolve(w, give_up_after=None) for w in loads]
    loads = [attrs.evolve(w, name=f"w{i}") for i, w in enumerate(loads)]
    scenario = Scenario(
        "any", policy, rate, 2.5, loads, burst=burst, seed=seed, max_waiting=max_waiting
    )
    measured = permits.testing.run(live.run(scenario))
    simulated = simulate(scenario)
    fields = ("offered", "granted", "waiting", "cancelled", "rejected", "too_long", "expired")
    for got, want in zip(measured.workloads, simulated.workloads, strict=True):
        for name in (*fields, "timeline", "wait_max_ns", "cleared_at_ns"):
            assert getattr(got, name) == getattr(want, name), (got.name, name)


def test_plot_writes_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "seed.png"
    status, _, _ = run(capsys, "simulate", "--plot", str(target))
    assert status == 0
    data = target.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 20_000  # five rows of two charts, not an empty canvas


def test_a_run_shorter_than_the_floor_of_the_wait_axis_is_drawn_forwards(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log axes of waits start at 0.1 ms; a run shorter than that (50
    us) drew them backwards, from 0.1 ms down to its length. Each figure
    drawn is looked at as it is saved."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    drawn: list[Figure] = []
    save = Figure.savefig

    def keep(figure: Figure, *args: Any, **kwargs: Any) -> None:
        drawn.append(figure)
        save(figure, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    path = tmp_path / "short.toml"
    path.write_text(GOOD.replace("seconds = 10", "seconds = 0.00005"))
    for command in ("simulate", "compare"):
        status, _, _ = run(capsys, command, str(path), "--plot", str(tmp_path / f"{command}.png"))
        assert status in (0, 1), command
    assert len(drawn) == 2
    for figure in drawn:
        for axes in figure.axes:
            for low, high in (axes.get_xlim(), axes.get_ylim()):
                assert low < high, (axes.get_title(), low, high)


PERMITS = str(Path(sys.executable).parent / "permits")


def permits_command(*argv: str) -> subprocess.CompletedProcess[str]:
    """The installed command, in a process of its own."""
    return subprocess.run([PERMITS, *argv], capture_output=True, text=True, check=False)


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_a_scenario_file_of_minus_is_the_standard_input(command: str) -> None:
    """FILE ``-`` reads the scenarios from the standard input, as ``--trace
    -`` reads a trace (it was a file named ``-``: cannot read it); both at
    once are refused in one line."""
    done = subprocess.run(
        [PERMITS, command, "-", "--json"], input=GOOD, capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")
    from_file = json.loads(done.stdout)
    assert from_file["scenarios"][0]["name"] == "s"
    done = subprocess.run(
        [PERMITS, command, "-", "--trace", "/dev/stdin"],
        input=GOOD,
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "permits: error: FILE='-' and --trace='/dev/stdin' both read the standard input: "
        "give one of them a file\n"
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "argv",
    [
        ["simulate"],
        ["compare", "--json"],
        ["examples"],
        ["--help"],
        ["--version"],
        ["simulate", "--help"],
    ],
    ids=" ".join,
)
def test_output_that_cannot_be_written_is_one_line(argv: list[str]) -> None:
    """``permits simulate > /dev/full`` (a full disk): one line and status 2.
    A short output (``--version``, ``--help``) stayed in the buffer, whose
    flush at exit failed in silence: status 0."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [PERMITS, *argv], stdout=full, stderr=subprocess.PIPE, text=True, check=False
        )
    assert (done.returncode, done.stderr) == (
        2,
        "permits: error: cannot write the output: No space left on device\n",
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_usage_error_to_an_unwritable_standard_error_is_still_a_usage_error(
    tmp_path: Path,
) -> None:
    """A usage error whose message cannot be written exits 2, as argparse
    has it, without a word on the standard output (a parser that raised
    for every stream ended in a traceback, exit 1); and FILE ``-`` whose
    standard input cannot be read says so, as a file that cannot be read
    does (not as output that cannot be written)."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [PERMITS, "--bogus"], stdout=subprocess.PIPE, stderr=full, text=True, check=False
        )
    assert (done.returncode, done.stdout) == (2, "")
    with (tmp_path / "written").open("w") as written:  # (a stdin open for writing)
        done = subprocess.run(
            [PERMITS, "simulate", "-"], stdin=written, capture_output=True, text=True
        )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "permits: error: cannot read '-': Bad file descriptor\n"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="closes the child's stdout as it starts")
@pytest.mark.parametrize("argv", [["simulate"], ["compare", "--json"], ["examples"]], ids=" ".join)
def test_output_to_a_closed_standard_output_is_one_line(argv: list[str]) -> None:
    """``permits simulate >&-``: Python starts with no ``sys.stdout``, and
    ``print`` writes nothing, silently; the command wrote nothing and
    exited 0, as if it had. One line and status 2, as for a full disk."""
    done = subprocess.run(
        [PERMITS, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        preexec_fn=lambda: os.close(1),
    )
    assert (done.returncode, done.stderr) == (
        2,
        "permits: error: cannot write the output: the standard output is closed\n",
    )


def test_a_reader_that_goes_away_is_no_error() -> None:
    """``permits simulate | head``: the pipe's reader is gone before the first
    write; the command stops quietly with status 0."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [PERMITS, "simulate", "--json"], stdout=write, stderr=subprocess.PIPE, check=False
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, b"")


def test_a_reader_that_goes_away_keeps_compares_verdict(tmp_path: Path) -> None:
    """``permits compare | head`` (under ``set -o pipefail``): the exit status
    still says that no policy meets every requirement (it was 0)."""
    path = tmp_path / "scenario.toml"
    path.write_text(
        GOOD.replace("seconds = 10", 'seconds = 10\nrequire = ["batch cleared by 0.5 s"]')
    )
    for json_option in ([], ["--json"]):
        read, write = os.pipe()
        os.close(read)
        try:
            done = subprocess.run(
                [PERMITS, "compare", str(path), *json_option],
                stdout=write,
                stderr=subprocess.PIPE,
                check=False,
            )
        finally:
            os.close(write)
        assert (done.returncode, done.stderr) == (1, b"")


def test_plot_into_a_missing_directory_is_refused_before_the_run(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "seed.png"
    done = permits_command("simulate", "--plot", str(target))
    assert done.returncode == 2
    assert done.stdout == ""  # refused before the tables
    assert done.stderr == (
        f"permits: error: --plot={str(target)!r}: no directory "
        f"{str(target.parent)!r} to write it in\n"
    )
    done = permits_command("simulate", "--plot", str(tmp_path))
    assert (done.returncode, done.stderr.count("\n")) == (2, 1)
    assert "is a directory" in done.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_plot_whose_write_fails_is_one_line(command: str) -> None:
    """A file that passes the checks before the run and still cannot be
    written (/dev/full: every write is 'No space left on device')."""
    pytest.importorskip("matplotlib")  # (without: refused before the run, as below)
    done = permits_command(command, "--plot", "/dev/full")
    assert done.returncode == 2
    assert done.stderr == (
        "permits: error: --plot='/dev/full': cannot write it: No space left on device\n"
    )


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (bytes(range(256)) * 4, "not a scenario file: not UTF-8 text (byte 0x80 at offset 128)"),
        (b"x = " + b"[" * 5000 + b"]" * 5000, "arrays or tables nested too deep to read"),
        (GOOD.replace("size = 1000", "size = 100000000000").encode(), "workload[1].size="),
        (GOOD.replace("size = 1000", "size = " + "9" * 5000).encode(), "not valid TOML: "),
    ],
    ids=["binary", "nested", "size", "digits"],
)
def test_malformed_files_are_one_line_in_a_real_process(
    tmp_path: Path, data: bytes, says: str
) -> None:
    path = tmp_path / "scenario.toml"
    path.write_bytes(data)
    for command in ("simulate", "compare"):
        done = permits_command(command, str(path))
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"permits: error: {path}: ")
        assert says in done.stderr


def test_max_arrivals_raises_or_lowers_the_bound(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """GOOD asks for 1,200 callers (1,000 queued, 200 at 20/s for 10 s)."""
    path = tmp_path / "scenario.toml"
    path.write_text(GOOD)
    status, out, err = run(capsys, "simulate", str(path), "--max-arrivals", "1199")
    assert (status, out) == (2, "")
    assert "size=1000: asks for 1,200 callers in all, over the 1,199 a run" in err
    status, out, err = run(capsys, "simulate", str(path), "--max-arrivals", "1200")
    assert (status, err) == (0, "")
    assert "interactive" in out
    # without FILE, the article's five are bounded as the example 'seed' is (it ran them)
    for argv in ([], ["--example", "seed"]):
        status, out, err = run(capsys, "simulate", *argv, "--max-arrivals", "1199")
        assert (status, out) == (2, ""), argv
        assert err.count("\n") == 1, err
        assert "size=1000: asks for 1,200 callers in all, over the 1,199 a run" in err


def test_examples_are_listed_and_run_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "examples")
    assert status == 0
    names = [line.split()[0] for line in out.splitlines()[:5]]
    assert names == ["article", "llm", "mixed", "seed", "tenants"]
    assert sorted(p.stem for p in EXAMPLES.glob("*.toml")) == names
    status, out, _ = run(capsys, "examples", "--json")
    assert [e["name"] for e in json.loads(out)["examples"]] == names
    _, by_name, _ = run(capsys, "simulate", "--example", "mixed")
    _, by_path, _ = run(capsys, "simulate", str(EXAMPLES / "mixed.toml"))
    assert by_name == by_path
    assert "strict priority, 3 levels" in by_name
    status, out, err = run(capsys, "simulate", "--example", "nope")
    assert (status, out) == (2, "")
    assert err == (
        "permits: error: --example='nope': no such example "
        "(expected one of: article, llm, mixed, seed, tenants)\n"
    )


def test_compare_recommends_a_policy_meeting_the_articles_requirements() -> None:
    """The article's workload asks for 1,200 permits where 10 s give 1,000;
    of the grid, only aging after 5 s serves half the interactive calls
    within 1 s while the batch gets 15% and clears by 9 s."""
    done = permits_command("compare")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == permits_command("compare", "--example", "article").stdout
    out = done.stdout
    assert "16 policies" in out
    assert "recommended: aging after 5 s (meets every requirement)" in out
    requirements = out.split("\nrequirements\n")[1].split("\n\n")[0].splitlines()
    assert len(requirements) == 17
    assert [row.split()[-1] for row in requirements[1:]].count("yes") == 1
    fifo = out.split("\ninteractive (level 0)\n")[1].splitlines()[1]
    want = "FIFO 700 900 200 2.71 s never 3 s 70.0% -"
    assert fifo.split() == want.split()


def test_compare_says_what_its_waits_count(capsys: pytest.CaptureFixture[str]) -> None:
    """Its p50 and p99 count every caller offered, where ``simulate``'s
    count those granted, under the same headings; and its longest wait is
    of those granted: a row of p99 ``never`` beside a max of 3 s says why."""
    status, out, _ = run(capsys, "compare", "--policy", "fifo")
    assert status == 1
    lines = out.splitlines()
    assert lines[1] == "  100 permits/s, burst 1, 10 s; 1 policy"
    assert lines[2] == (
        "  wait p50, p99: of the callers offered (never: past the end, not granted); "
        "wait max: of those granted"
    )
    fifo = out.split("\ninteractive (level 0)\n")[1].splitlines()[1]
    want = "FIFO 700 900 200 2.71 s never 3 s 70.0% -"
    assert fifo.split() == want.split()


def test_simulate_says_its_waits_are_of_those_granted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Where a workload's callers were not all granted, simulate's waits
    (of those granted) say so under the table: FIFO's interactive row of 1
    granted of 200 read "wait p99 0 ms", the 199 never granted unseen in
    it. Where every caller was granted, nothing is added."""
    path = tmp_path / "s.toml"
    path.write_text(GOOD.replace('"strict"', '"fifo"').replace("size = 1000", "size = 999"))
    status, out, _ = run(capsys, "simulate", str(path))
    assert status == 0
    interactive = out.splitlines()[3].split()
    assert interactive[:4] == ["interactive", "0", "200", "1"]
    assert interactive[9:12] == ["0", "ms", "0"]  # its p50 and p99: the one granted
    assert out.splitlines()[-1] == (
        "  wait p50, p99, max: of the callers granted "
        "(permits compare counts those not granted too)"
    )
    path.write_text(GOOD.replace("size = 1000", "size = 1"))
    status, out, _ = run(capsys, "simulate", str(path))
    assert "of the callers granted" not in out


def test_compare_exit_status_says_whether_any_policy_meets_all(tmp_path: Path) -> None:
    path = tmp_path / "scenario.toml"
    path.write_text(
        GOOD.replace('policy = "strict"\n', "")
        .replace("size = 1000", "size = 100")
        .replace("seconds = 10", 'seconds = 10\nrequire = ["batch cleared by 5 s"]')
    )
    done = permits_command("compare", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    path.write_text(path.read_text().replace("cleared by 5 s", "cleared by 0.5 s"))
    done = permits_command("compare", str(path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "none meets every requirement; it misses 1" in done.stdout


def test_compare_json_has_stable_keys_with_units(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "compare", "--json", "--policy", "strict", "--policy", "every:5")
    assert status == 1  # neither meets the article's requirements
    (scenario,) = json.loads(out)["scenarios"]
    assert [p["policy"] for p in scenario["policies"]] == ["strict priority", "shares 4:1"]
    assert (scenario["any_meets_all"], scenario["recommended"]) == (False, "shares 4:1")
    strict = scenario["policies"][0]
    interactive, batch = strict["workloads"]
    assert set(interactive) >= {
        "wait_p50_s",
        "wait_p99_s",
        "wait_max_s",
        "offered_wait_p99_s",
        "cleared_at_s",
        "share",
        "starved",
    }
    assert (batch["granted"], batch["starved"], batch["offered_wait_p50_s"]) == (101, 199, None)
    share = strict["requirements"][1]
    assert share == {
        "requirement": "batch share >= 15%",
        "met": False,
        "measured_fraction": 101 / 1000,
        "bound_fraction": 0.15,
    }
    assert strict["requirements"][0]["measured_s"] == interactive["offered_wait_p50_s"]


def test_every_n_over_more_than_two_levels_is_the_grids(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--policy every:N`` on a scenario of three levels runs the default
    grid's policy of that N (weights ``(N-1)**k`` from the lowest up)."""
    status, out, err = run(capsys, "compare", "--example", "mixed", "--json", "--policy", "every:5")
    assert (status, err) == (0, "")
    assert [p["policy"] for p in json.loads(out)["scenarios"][0]["policies"]] == ["shares 16:4:1"]
    assert every_nth(5, 3) in default_grid(3)


def test_policy_option_with_spaces_around_its_kind(capsys: pytest.CaptureFixture[str]) -> None:
    """``--policy " strict"`` (a shell quote around a space) is strict priority,
    as ``--policy " every:5"`` already was."""
    status, out, err = run(capsys, "compare", "--json", "--policy", " strict")
    assert (status, err) == (1, "")  # it runs: strict priority misses the batch's share
    assert [p["policy"] for p in json.loads(out)["scenarios"][0]["policies"]] == ["strict priority"]
    status, out, err = run(capsys, "compare", "--policy", " strict")
    assert "\n  100 permits/s, burst 1, 10 s; 1 policy\n" in out  # not "1 policies"


@pytest.mark.parametrize(
    ("option", "says"),
    [
        (  # the option's own forms, every:N among them, not the scenario file's kinds
            "lottery",
            "--policy='lottery': unknown policy (expected fifo, strict, every:N, "
            "shares:W1,W2,... or aging:SECONDS)\n",
        ),
        ("every:x", "--policy='every:x': expected fifo, strict, every:N, shares:W1,W2,..."),
        ("shares:1", "--policy='shares:1': orders 1 of the 2 levels of the scenario's policy"),
        ("shares:4,1,1", "--policy='shares:4,1,1': orders 3 levels, and the scenario 2: give"),
        ("every:1", "--policy.every=1: must be at least 2 (from --policy='every:1')"),
        (  # as written (not after=0.0), and what to give for what 0 may have meant
            "aging:0",
            "--policy.after=0: must be greater than 0, the seconds of waiting worth one level "
            "(for no aging, strict; for the level not to count, fifo) (from --policy='aging:0')",
        ),
        ("aging:-1", "--policy.after=-1: must be greater than 0, the seconds of waiting"),
        ("aging:1e-10", "--policy.after=1e-10: is half a nanosecond or less"),
    ],
)
def test_bad_policy_option_is_one_line(
    capsys: pytest.CaptureFixture[str], option: str, says: str
) -> None:
    status, out, err = run(capsys, "compare", "--policy", option)
    assert (status, out) == (2, "")
    assert err.count("\n") == 1
    assert says in err, err


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["fifo", "strict", "fifo"], "--policy='fifo': given twice: give each policy once\n"),
        (
            ["every:5", "shares:4,1"],
            "--policy='shares:4,1': the same policy as --policy='every:5': give each policy once\n",
        ),
        (
            ["aging:2", "aging:2.0"],
            "--policy='aging:2.0': the same policy as --policy='aging:2': give each policy once\n",
        ),
    ],
)
def test_a_policy_given_twice_is_refused(
    capsys: pytest.CaptureFixture[str], options: list[str], says: str
) -> None:
    """The same policy twice (as written, or as two forms of it) ran twice:
    two rows of the same figures under the same name in every table."""
    argv = [arg for option in options for arg in ("--policy", option)]
    status, out, err = run(capsys, "compare", *argv)
    assert (status, out, err) == (2, "", f"permits: error: {says}")


def test_policy_option_of_more_levels_than_the_scenario_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A ``--policy`` of more levels than the scenario's is refused before
    any run: under a trace, its runs had a workload more than the others'
    (an IndexError printing the tables when it came first), and a
    ``max_waiting`` list was blamed for having one entry per level."""
    path = tmp_path / "s.toml"
    path.write_text(GOOD)
    trace = tmp_path / "calls.csv"
    trace.write_text("at,level\n0,0\n0.5,1\n")
    bounded = tmp_path / "bounded.toml"
    bounded.write_text(GOOD.replace("seconds = 10", "seconds = 10\nmax_waiting = [5, 500]"))
    for argv in (
        [str(path), "--trace", str(trace), "--policy", "shares:4,1,1", "--policy", "strict"],
        [str(path), "--trace", str(trace), "--policy", "strict", "--policy", "shares:4,1,1"],
        [str(bounded), "--policy", "shares:4,1,1"],
    ):
        status, out, err = run(capsys, "compare", *argv)
        assert (status, out) == (2, ""), argv
        assert err == (
            "permits: error: --policy='shares:4,1,1': orders 3 levels, and the scenario 2: "
            "give a policy of 2 levels\n"
        ), argv


def test_compare_plot_writes_a_png_and_checks_its_path_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "compare.png"
    status, out, _ = run(capsys, "compare", "--plot", str(target))
    assert status == 0
    assert "recommended: " in out
    data = target.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 50_000  # three charts of sixteen policies, not an empty canvas
    status, out, err = run(capsys, "compare", "--plot", str(tmp_path / "no" / "c.png"))
    assert (status, out) == (2, "")
    assert "no directory" in err


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_plot_without_matplotlib_is_one_line_and_status_2(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: str,
) -> None:
    """It exited with status 1, which compare also means for "no policy
    meets every requirement"."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    status, out, err = run(capsys, command, "--plot", str(tmp_path / "out.png"))
    assert (status, out) == (2, "")
    assert err == "permits: error: --plot needs matplotlib: pip install 'permits[plot]'\n"


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_plot_in_a_format_matplotlib_cannot_write_is_refused_before_the_run(
    tmp_path: Path, command: str
) -> None:
    """``--plot out.xyz`` is one line and status 2 before the run, not a
    traceback after it; a name without a suffix is drawn as a PNG at that
    very path (the one checked writable), not at ``name.png``."""
    pytest.importorskip("matplotlib")
    target = tmp_path / "out.xyz"
    done = permits_command(command, "--plot", str(target))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"permits: error: --plot={str(target)!r}: cannot draw")
    assert done.stderr.count("\n") == 1, done.stderr
    assert not target.exists()
    bare = tmp_path / "figure"
    done = permits_command(command, "--example", "seed", "--plot", str(bare))
    assert done.returncode in (0, 1), done.stderr
    assert bare.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert not bare.with_suffix(".png").exists()


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_plot_as_pgf_without_its_tex_is_refused_before_the_run(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: str,
) -> None:
    """matplotlib draws a .pgf with TeX (xelatex unless configured): without
    it, a RuntimeError's traceback after the whole run, and status 1."""
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("PATH", str(tmp_path))  # no TeX on it
    target = tmp_path / "out.pgf"
    status, out, err = run(capsys, command, "--plot", str(target))
    assert (status, out) == (2, "")
    assert err == (
        f"permits: error: --plot={str(target)!r}: a .pgf file needs xelatex, not found "
        "(draw a .pdf, .svg or .png instead)\n"
    )
    assert not target.exists()


def test_plot_shows_a_dollar_in_a_name_as_it_is(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A ``$`` in a name drawn (a workload's, a scenario's, a requirement's)
    opened matplotlib's math mode: ``a $x^$ b`` was a ParseException's
    traceback after the run."""
    pytest.importorskip("matplotlib")
    path = tmp_path / "s.toml"
    path.write_text(
        GOOD.replace('name = "s"', 'name = "s $"')
        .replace('name = "interactive"', 'name = "a $x^$ b"')
        .replace("seconds = 10", 'seconds = 10\nrequire = ["a $x^$ b p99 <= 50 ms"]')
    )
    for command in ("simulate", "compare"):
        target = tmp_path / f"{command}.png"
        status, _, err = run(capsys, command, str(path), "--plot", str(target))
        assert (status in (0, 1), err) == (True, ""), command
        assert target.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_plot_of_a_run_too_long_to_draw_is_refused_before_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    """matplotlib's log axes fail on times of about 1e290 s: an OverflowError
    or a ValueError's traceback after the run."""
    pytest.importorskip("matplotlib")
    path = tmp_path / "s.toml"
    batches = GOOD.replace('"constant"\nrate = 20', '"batch"\nsize = 5')
    path.write_text(batches.replace("seconds = 10", "seconds = 1e300"))
    target = tmp_path / "out.png"
    status, out, err = run(capsys, command, str(path), "--plot", str(target))
    assert (status, out) == (2, "")
    assert err == (
        f"permits: error: --plot={str(target)!r}: cannot draw a run of more than 1e+200 s "
        "(s: seconds=1e+300)\n"
    )
    assert not target.exists()


LLM = """
[[scenario]]
name = "llm"
policy = "strict"
seconds = 60
seed = 5

[scenario.limits]
requests = { per_minute = 500 }
tokens = { per_minute = 90000 }

[[scenario.workload]]
name = "chat"
level = 0
arrivals = "constant"
rate = 2
cost = { requests = 1, tokens = { uniform = [200, 2000] } }
flow = "acme"

[[scenario.workload]]
name = "batch"
level = 1
arrivals = "batch"
size = 100
cost = { requests = 1, tokens = { choice = [1000, 4000] } }
tenants = 50
zipf = 1.1
"""

_W0 = "scenario[0].workload[0]"
_W1 = "scenario[0].workload[1]"
BAD_COSTS = [
    (
        LLM.replace("seed = 5", "seed = 5\nrate = 5"),
        "scenario[0].rate=5: give rate and burst, or limits, not both",
    ),
    (
        LLM.replace("seed = 5", "seed = 5\nburst = 2"),
        "scenario[0].burst=2: give rate and burst, or limits",
    ),
    (GOOD.replace("rate = 100\n", ""), "scenario[0].rate: missing (or give [scenario.limits])"),
    (
        LLM.replace("tokens = { per_minute = 90000 }", "tokens = { burst = 5 }"),
        "scenario[0].limits.tokens={'burst': 5}: give one of per_second, per_minute, per_hour",
    ),
    (
        LLM.replace("tokens = { per_minute = 90000 }", "tokens = { per_minit = 9 }"),
        "scenario[0].limits.tokens.per_minit=9: unknown key (expected one of: burst, per_hour, "
        "per_minute, per_second)",
    ),
    (
        LLM.replace("per_minute = 90000", "per_minute = -1"),
        "scenario[0].limits.tokens.per_minute=-1: must be greater than 0",
    ),
    (
        LLM.replace("per_minute = 500", "per_minute = 2.5"),
        "scenario[0].limits.requests.burst: missing: per_minute=2.5 is not a whole number",
    ),
    (
        LLM.replace("per_minute = 90000", "per_minute = 90000, burst = 0"),
        "scenario[0].limits.tokens.burst=0: must be at least 1",
    ),
    (
        LLM.replace("requests = { per_minute = 500 }\ntokens = { per_minute = 90000 }\n", ""),
        "scenario[0].limits={}: expected 1 to 32 limits",
    ),
    (
        LLM.replace(
            "cost = { requests = 1, tokens = { uniform", "cost = { requests = 1, tokns = { uniform"
        ),
        f"{_W0}.cost={{'requests': 1, 'tokns': {{'uniform': [200, 2000]}}}}: 'tokns' is not "
        "one of the limits ['requests', 'tokens']",
    ),
    (
        LLM.replace("[1000, 4000]", "[1000, 100000]"),
        f"{_W1}.cost.tokens={{'choice': [1000, 100000]}}: draws up to 100,000 units, over the "
        "burst (90,000): such a caller could never be granted",
    ),
    (
        LLM.replace("[200, 2000]", "[2000, 200]"),
        f"{_W0}.cost.tokens.uniform[1]=200: must be at least low (2000)",
    ),
    (LLM.replace("[200, 2000]", "[200]"), f"{_W0}.cost.tokens.uniform=[200]: expected [low, high]"),
    (LLM.replace("[200, 2000]", "[-1, 5]"), f"{_W0}.cost.tokens.uniform[0]=-1: must be at least 0"),
    (LLM.replace("[1000, 4000]", "[]"), f"{_W1}.cost.tokens.choice=[]: needs 1 to 10,000 values"),
    (LLM.replace("[1000, 4000]", '["a"]'), f"{_W1}.cost.tokens.choice[0]='a': expected an int"),
    (
        LLM.replace("choice = [1000, 4000]", "choice = 5"),
        f"{_W1}.cost.tokens.choice=5: expected a sequence of whole numbers",
    ),
    (
        LLM.replace("{ uniform = [200, 2000] }", "{ normal = [200, 2000] }"),
        f"{_W0}.cost.tokens.normal=[200, 2000]: unknown key (expected one of: choice, uniform)",
    ),
    (
        LLM.replace("{ uniform = [200, 2000] }", "{ uniform = [1, 2], choice = [1] }"),
        f"{_W0}.cost.tokens={{'choice': [1], 'uniform': [1, 2]}}: give one of uniform",
    ),
    (
        LLM.replace(
            "cost = { requests = 1, tokens = { uniform = [200, 2000] } }",
            "cost = { requests = { uniform = [0, 1] }, tokens = 0 }",
        ),
        f"{_W0}.cost={{'requests': {{'uniform': [0, 1]}}, 'tokens': 0}}: must take at least "
        "one unit of some limit, in every draw",
    ),
    (
        LLM.replace("tokens = { uniform = [200, 2000] }", 'tokens = "many"'),
        f"{_W0}.cost.tokens='many': expected a whole number, {{ uniform = [low, high] }} or "
        "{ choice = [...] }, got str",
    ),
    (
        GOOD.replace("size = 1000", "size = 1000\ncost = 0"),
        f"{_W1}.cost=0: must take at least one unit",
    ),
    (  # refused as 0 is, by one rule
        GOOD.replace("size = 1000", "size = 1000\ncost = -1"),
        f"{_W1}.cost=-1: must take at least one unit of some limit",
    ),
    (
        GOOD.replace("size = 1000", "size = 1000\ncost = 2"),
        f"{_W1}.cost=2: exceeds the burst (1): such a caller could never be granted",
    ),
    (GOOD.replace("size = 1000", "size = 1000\ncost = {}"), f"{_W1}.cost={{}}: names no limit"),
    (
        GOOD.replace("size = 1000", 'size = 1000\nflow = ""'),
        f"{_W1}.flow='': expected a non-empty str (a tenant's name), got an empty str\n",
    ),
    (  # not "expected a non-empty str, got str"
        GOOD.replace('name = "s"', 'name = ""'),
        "scenario[0].name='': expected a non-empty str, got an empty str\n",
    ),
    (
        GOOD.replace("size = 1000", "size = 1000\nflow = 3"),
        f"{_W1}.flow=3: expected a non-empty str",
    ),
    (
        LLM.replace("tenants = 50", 'tenants = 50\nflow = "x"'),
        f"{_W1}.tenants=50: give flow or tenants, not both",
    ),
    (LLM.replace("tenants = 50", "tenants = 0"), f"{_W1}.tenants=0: must be at least 1"),
    (LLM.replace("tenants = 50", "tenants = 50\nfair = 1"), f"{_W1}.fair=1: expected a bool"),
    (
        LLM.replace("tenants = 50", "tenants = 100001"),
        f"{_W1}.tenants=100001: must be at most 100,000",
    ),
    (LLM.replace("tenants = 50", "tenants = 2.5"), f"{_W1}.tenants=2.5: expected an int"),
    (LLM.replace("tenants = 50\n", ""), f"{_W1}.zipf=1.1: needs tenants = N"),
    (LLM.replace("zipf = 1.1", "heaviest = 0.5"), "does not fail"),
    (LLM.replace("zipf = 1.1", "zipf = -1"), f"{_W1}.zipf=-1: must be from 0 to 100"),
    (LLM.replace("zipf = 1.1", "zipf = inf"), f"{_W1}.zipf=inf: must be from 0 to 100"),
    (LLM.replace("zipf = 1.1", 'zipf = "steep"'), f"{_W1}.zipf='steep': expected a number"),
    (
        LLM.replace("zipf = 1.1", "heaviest = 1.5"),
        f"{_W1}.heaviest=1.5: must be greater than 0 and at most 1",
    ),
    (LLM.replace("zipf = 1.1", "heaviest = 0"), f"{_W1}.heaviest=0: must be greater than 0"),
    (
        LLM.replace("zipf = 1.1", "zipf = 1.1\nheaviest = 0.5"),
        f"{_W1}.heaviest=0.5: give zipf or heaviest, not both",
    ),
]
BAD_COSTS = [case for case in BAD_COSTS if case[1] != "does not fail"]


@pytest.mark.parametrize(("text", "message"), BAD_COSTS)
def test_bad_costs_limits_and_flows_are_one_line_and_status_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    for command in ("simulate", "compare"):
        status, out, err = run(capsys, command, str(path))
        assert (status, out) == (2, ""), err
        assert err.count("\n") == 1, err
        assert err.startswith(f"permits: error: {path}: {message}"), err


def test_several_limits_drawn_costs_and_tenants_are_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "llm.toml"
    path.write_text(LLM)
    status, out, _ = run(capsys, "simulate", str(path), "--json")
    assert status == 0
    data = json.loads(out)["scenarios"][0]
    assert (data["rate_per_s"], data["burst"]) == (None, None)
    assert data["limits"] == [
        {"name": "requests", "rate_per_s": 8.333333333333334, "burst": 500},
        {"name": "tokens", "rate_per_s": 1500, "burst": 90000},
    ]
    chat, batch = data["workloads"]
    for name in ("requests", "tokens"):  # each limit's shares add up, and its limit holds
        assert math.isclose(chat["share_per_limit"][name] + batch["share_per_limit"][name], 1)
    assert (
        chat["units_per_limit"]["tokens"] + batch["units_per_limit"]["tokens"] <= 90_000 + 1500 * 60
    )
    # one request each; the tokens drawn within their bounds, and not all alike
    for w, low, high in ((chat, 200, 2000), (batch, 1000, 4000)):
        assert w["units_per_limit"]["requests"] == w["units"] == w["granted"] > 0
        assert low * w["granted"] < w["units_per_limit"]["tokens"] < high * w["granted"]
    assert (chat["tenants"], chat["tenants_starved"], chat["worst_tenant"]) == (1, 0, "acme")
    assert 1 < batch["tenants"] <= 50
    assert batch["worst_tenant"].startswith("batch#")
    assert batch["tenant_wait_p99_median_s"] <= batch["tenant_wait_p99_max_s"]
    assert batch["tenants_starved"] <= batch["tenants"]
    _, again, _ = run(capsys, "simulate", str(path), "--json")
    assert again == out  # the seed fixes every draw
    status, text, _ = run(capsys, "simulate", str(path))
    assert "requests 500/min (burst 500), tokens 90,000/min (burst 90,000)" in text
    assert "share per limit: requests " in text
    assert "tenants: 1, 0 never granted; p99 wait of the worst tenant" in text


@pytest.mark.parametrize(
    ("limit", "shown"),
    [
        ("rate = 1", "; 1 permit/s, burst 1, "),
        ("rate = 100", "; 100 permits/s, burst 1, "),
        # with its thousands apart, as a named limit's burst and the counts are
        ("rate = 1500\nburst = 2500", "; 1,500 permits/s, burst 2,500, "),
        ("rate = 33.3333333", "; 33.3333 permits/s, burst 1, "),  # not 33.33333330000000
        ("[scenario.limits]\nreq = { per_minute = 500 }", "; req 500/min (burst "),
        ("[scenario.limits]\nreq = { per_second = 0.3, burst = 1 }", "; req 0.3/s (burst "),
        # it read 16.666666666666668/min
        ("[scenario.limits]\nreq = { per_hour = 1000 }", "; req 1,000/h (burst "),
        ("[scenario.limits]\nreq = { per_second = 0.0001, burst = 1 }", "; req 0.0001/s (burst "),
        ("[scenario.limits]\nreq = { per_hour = 0.5, burst = 1 }", "; req 0.5/h (burst "),
        # as given (the burst, by default the count, says in which unit): it read 240/min
        ("[scenario.limits]\nreq = { per_second = 4 }", "; req 4/s (burst 4)"),
        ("[scenario.limits]\nreq = { per_second = 4, burst = 10 }", "; req 4/s (burst 10)"),
        ("[scenario.limits]\nreq = { per_minute = 600 }", "; req 600/min (burst 600)"),
        ("[scenario.limits]\nreq = { per_minute = 500, burst = 50 }", "; req 500/min (burst 50)"),
        ("[scenario.limits]\nreq = { per_hour = 36000, burst = 100 }", "; req 10/s (burst 100)"),
        ("[scenario.limits]\nreq = { per_second = 33.3333333, burst = 1 }", "; req 33.3333/s ("),
    ],
)
def test_a_limit_is_written_short(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, limit: str, shown: str
) -> None:
    """One limit's rate a second, whole or to six digits, in the singular for
    one; a named limit's by the second, minute or hour it was given in (the
    unit whose count is its burst), else the one it takes the fewest digits
    to write in."""
    path = tmp_path / "s.toml"
    path.write_text(
        f'[[scenario]]\nname = "s"\nseconds = 1\n{limit}\n'
        '[[scenario.workload]]\nname = "w"\nlevel = 0\narrivals = "batch"\nsize = 1\n'
    )
    status, out, _ = run(capsys, "simulate", str(path))
    assert status == 0
    assert shown in out, out


def test_a_long_workload_name_widens_its_column(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A name longer than the first column pushed its row's figures right
    of their headings, and so did a count of millions; each column is as
    wide as its widest cell."""
    path = tmp_path / "s.toml"
    path.write_text(GOOD.replace('name = "interactive"', 'name = "interactive checkout calls"'))
    status, out, _ = run(capsys, "simulate", str(path))
    assert status == 0
    heading, first, second = out.splitlines()[2:5]
    assert heading.startswith("  workload                   level  offered")
    assert len(first) == len(second) == len(heading), out
    # and a count of millions (a day's trace replayed) widens its column
    result = simulate(scenarios(path)[0])
    many = attrs.evolve(result.workloads[1], offered=12_345_678, waiting=12_344_878)
    text = report.table(attrs.evolve(result, workloads=(result.workloads[0], many)))
    heading, first, second = text.splitlines()[2:5]
    assert "     1 12,345,678      800 12,344,878 " in second, text
    assert len(first) == len(second) == len(heading), text
    # and in compare's table, a row per policy
    (outcome,) = compare(scenarios(path)[0], [StrictPriority(2)]).outcomes
    result = outcome.result
    many = attrs.evolve(result.workloads[1], offered=12_345_678)
    outcome = attrs.evolve(
        outcome, result=attrs.evolve(result, workloads=(result.workloads[0], many))
    )
    text = report.compare_tables(Comparison(result.scenario, (outcome,)))
    heading, row = text.split("\n\nbatch (level 1)\n")[1].splitlines()[:2]
    assert "  strict priority      800 12,345,678 12,344,878 " in row, text
    assert len(row) == len(heading), text


def test_a_measure_that_misses_is_not_written_as_its_bound() -> None:
    """compare's requirements table wrote 801 of 802 granted as '99.9% MISS'
    against 'granted >= 99.9%', and a backlog cleared at 10.01 s as '10 s
    MISS' against 'cleared by 10 s': a measure takes the digits it needs to
    read as its verdict (and only those)."""
    scenario = Scenario(
        "rounding",
        StrictPriority(2),
        100,
        10,
        [
            Workload("interactive", 0, Constant(80.2, start=0.005)),
            Workload("batch", 1, Batch(200)),
        ],
        requirements=[
            Requirement.parse("interactive granted >= 99.9%"),
            Requirement.parse("batch share >= 19.95%"),
        ],
    )
    text = report.compare_tables(compare(scenario, [StrictPriority(2)]))
    assert "  strict priority                    99.88% MISS              19.9% MISS" in text, text
    backlog = Scenario(
        "rounding",
        Fifo(1),
        100,
        11,
        [Workload("batch", 0, Batch(1002))],
        requirements=[Requirement.parse("batch cleared by 10 s")],
    )
    text = report.compare_tables(compare(backlog, [Fifo(1)]))
    assert "  FIFO                10.01 s MISS" in text, text
    met = attrs.evolve(backlog, requirements=[Requirement.parse("batch cleared by 10.01 s")])
    text = report.compare_tables(compare(met, [Fifo(1)]))
    assert "  FIFO                        10 s ok" in text, text
    # a wait quantile judged on the exact waits (within its bound) but
    # measured on the histogram (just past it) is not written past it
    result = simulate(met)
    (batch,) = result.workloads
    requirement = Requirement.parse("batch p99 <= 1 s")
    batch = attrs.evolve(batch, offered=1, waits_ns=((1_003_000_000, 1),), within_ns=((SECOND, 1),))
    judged = attrs.evolve(result, workloads=(batch,))
    assert requirement.met(judged)
    assert report._measured(requirement, judged, True) == "1 s"
    # to more digits, a time short of a second rounded up to one is 1 s too
    assert report.duration(0.99996, 4) == "1 s"  # not "1000 ms"


def test_compare_reports_tenants_and_each_limits_share(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(
        capsys, "compare", "--example", "tenants", "--policy", "fifo", "--policy", "strict"
    )
    assert status == 1  # strict priority leaves the export nothing
    assert "tenants starved  worst tenant p99  median tenant p99" in out
    status, out, _ = run(capsys, "compare", "--example", "tenants", "--json", "--policy", "strict")
    api = json.loads(out)["scenarios"][0]["policies"][0]["workloads"][0]
    assert api["tenants"] > 900
    assert api["tenants_starved"] == 0
    assert api["worst_tenant"] == "api#1"  # the heaviest waits, not the others
    assert api["tenant_wait_p99_median_s"] < 0.5 < api["tenant_wait_p99_max_s"]
    # the same calls, no flows named: every tenant waits behind the heaviest
    one_line = json.loads(out)["scenarios"][1]["policies"][0]["workloads"][0]
    assert one_line["granted"] == api["granted"]
    assert one_line["tenant_wait_p99_median_s"] > 20 * api["tenant_wait_p99_median_s"]
    status, out, _ = run(capsys, "compare", "--example", "llm", "--policy", "strict")
    assert status == 0
    assert "share tokens share requests" in out


def test_compare_judges_tenants_and_any_limits_share(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Requirements on a workload's tenants and on a limit's share, in the
    requirements table (a count of tenants as a number) and in JSON (its
    unit in its keys)."""
    path = tmp_path / "scenario.toml"
    path.write_text(
        (EXAMPLES / "llm.toml")
        .read_text()
        .replace(
            '"summaries share >= 25%",',
            '"summaries share of requests >= 25%",\n'
            '    "chat worst tenant p99 <= 10 s",\n'
            '    "chat median tenant p99 <= 10 s",\n'
            '    "chat tenants starved <= 0",',
        )
        .replace("give_up_after = 30", "give_up_after = 30\ntenants = 20")
    )
    _, out, _ = run(capsys, "compare", str(path), "--policy", "strict", "--policy", "fifo")
    table = out.split("\nrequirements\n")[1].split("\n\n")[0].splitlines()
    assert "chat tenants starved <= 0" in table[0]
    strict = table[1].split()
    assert strict[:2] == ["strict", "priority"]
    assert strict[-3:-1] == ["0", "ok"]  # the count, as a number
    status, out, _ = run(capsys, "compare", str(path), "--json", "--policy", "strict")
    (policy,) = json.loads(out)["scenarios"][0]["policies"]
    assert status == (0 if policy["meets_all"] else 1)
    chat, summaries = policy["workloads"]
    share, worst, median, starved = policy["requirements"][1:]
    assert share["measured_fraction"] == summaries["share_per_limit"]["requests"]
    assert share["bound_fraction"] == 0.25
    assert worst["measured_s"] == chat["tenant_wait_p99_max_s"]
    assert median["measured_s"] == chat["tenant_wait_p99_median_s"]
    assert starved == {
        "requirement": "chat tenants starved <= 0",
        "met": chat["tenants_starved"] == 0,
        "measured_count": chat["tenants_starved"],
        "bound_count": 0,
    }


def test_the_new_examples_run_and_demo_refuses_them(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("llm", "tenants"):
        status, out, _ = run(capsys, "simulate", "--example", name)
        assert status == 0
        assert "permits granted" in out
        status, out, err = run(capsys, "demo", "--example", name)
        assert (status, out) == (2, "")
        assert "demo plays one limit, callers of one unit and no flows" in err


def test_demo_scaled_past_a_nanosecond_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``--scale`` so large that a scenario's length rounds to 0 ns is bad
    input naming the scenario and the option, not a traceback."""
    status, out, err = run(capsys, "demo", "--scale", "1e12")
    assert (status, out) == (2, "")
    assert err.count("\n") == 1, err
    assert err.startswith(f"permits: error: {SEED[0].name}: seconds=")
    assert err.endswith(
        ": is half a nanosecond or less, and times are whole nanoseconds "
        "(the nearest, ties to even): give 1e-09 s or more (from --scale=1e+12)\n"
    ), err


def test_demo_scaled_past_a_nanosecond_names_the_workload(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A workload's time that ``--scale`` takes below a nanosecond (the
    example 'mixed': checkout's give_up_after of 2 s, 1e10 times faster)
    is named with its workload, not as a bare field of no workload."""
    status, out, err = run(capsys, "demo", "--example", "mixed", "--scale", "1e10")
    assert (status, out) == (2, "")
    assert err.count("\n") == 1, err
    assert err.startswith(
        "permits: error: strict priority, 3 levels: workloads[0].give_up_after="
    ), err
    assert err.endswith("(from --scale=1e+10)\n"), err


def test_compare_plot_of_no_callers_and_no_drawn_requirement_warns_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A legend only where something is labelled: matplotlib's "No artists
    with labels found" warning went to stderr for an urgent workload with
    no callers, and for requirements none of which the trade-off draws."""
    pytest.importorskip("matplotlib")
    path = tmp_path / "s.toml"
    path.write_text(
        '[[scenario]]\nname = "s"\nrate = 1\nseconds = 10\nrequire = ["w cleared by 5 s"]\n'
        '[[scenario.workload]]\nname = "w"\nlevel = 0\narrivals = "batch"\nsize = 0\n'
        '[[scenario.workload]]\nname = "v"\nlevel = 1\narrivals = "batch"\nsize = 1\n'
    )
    target = tmp_path / "c.png"
    status, _, err = run(capsys, "compare", str(path), "--plot", str(target))
    assert (status in (0, 1), err) == (True, "")
    assert target.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_a_scenario_file_names_the_flows_options(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``flow_weights``, ``max_waiting_per_flow`` and ``flow_limit`` in a
    scenario file are the limiter's: each flow at most 25 waiting (the rest
    rejected), "a" (weight 3) is served three permits to "b"'s one until
    its 25 are gone (20 each without the weights); a bad weight is one
    error naming its place."""
    path = tmp_path / "scenario.toml"
    text = (
        '[[scenario]]\nname = "s"\nrate = 100\nseconds = 0.4\n'
        'flow_weights = { a = 3 }\nmax_waiting_per_flow = 25\nflow_limit = "units"\n'
        '[[scenario.workload]]\nname = "a"\nlevel = 0\narrivals = "batch"\nsize = 40\nflow = "a"\n'
        '[[scenario.workload]]\nname = "b"\nlevel = 0\narrivals = "batch"\nsize = 40\nflow = "b"\n'
    )
    path.write_text(text)
    status, out, err = run(capsys, "simulate", str(path), "--json")
    assert (status, err) == (0, "")
    a, b = json.loads(out)["scenarios"][0]["workloads"]
    assert (a["granted"], b["granted"]) == (26, 14)  # its first at once, then its 25
    assert (a["rejected"], b["rejected"]) == (14, 15)
    path.write_text(text.replace("{ a = 3 }", "{ a = 0 }"))
    status, out, err = run(capsys, "simulate", str(path))
    assert status == 2
    assert "scenario[0].flow_weights['a']=0: must be from 1 to" in err, err


def test_a_requirement_on_tenants_none_name_is_refused_at_its_place_in_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """compare's refusal of a tenants requirement on a workload whose
    callers name none names the file and the requirement's place there
    (``scenario[1].require[0]``), as the file's other errors do; it named
    the scenario and ``requirements[0]``, a key the file does not have."""
    path = tmp_path / "two.toml"
    path.write_text(
        GOOD
        + GOOD.replace('name = "s"', 'name = "t"').replace(
            "seconds = 10", 'seconds = 10\nrequire = ["batch tenants starved <= 0"]'
        )
    )
    assert main(["compare", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"permits: error: {path}: scenario[1].require[0]='batch tenants starved <= 0': "
        "no caller of 'batch' names a tenant: give it tenants or a flow\n"
    )


#: A run in which nothing is granted at all: its callers come too late.
NOTHING_GRANTED = """
[[scenario]]
name = "nothing granted"
seconds = 1
rate = 1
require = ["a share >= 0%"]

[[scenario.workload]]
name = "a"
level = 0
arrivals = "poisson"
rate = 0.0001
"""


def test_a_share_of_nothing_granted_is_no_share(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Where no unit was granted in the run, a workload's share is of
    nothing: ``-`` in the tables, ``null`` in JSON, ``None`` from Python,
    and a share requirement is not met (it read 0.0%, and ``share >= 0%``
    was met)."""
    path = tmp_path / "s.toml"
    path.write_text(NOTHING_GRANTED)
    status, out, _ = run(capsys, "simulate", str(path))
    assert status == 0
    row = out.splitlines()[-1].split()
    assert (row[0], row[2], row[-2]) == ("a", "0", "-")
    status, out, _ = run(capsys, "simulate", "--json", str(path))
    (workload,) = json.loads(out)["scenarios"][0]["workloads"]
    assert (workload["granted"], workload["share"], workload["share_per_limit"]) == (
        0,
        None,
        {"units": None},
    )
    status, out, _ = run(capsys, "compare", "--policy", "fifo", str(path))
    assert status == 1
    assert out.split("requirements\n")[1].splitlines()[1].split() == ["FIFO", "-", "MISS", "no"]


def test_a_time_of_any_size_is_refused_at_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """P106: every time the command takes, in a scenario file, a
    ``--policy`` or a ``--trace``, however far its exponent (1e999999999,
    a float past its range; 1e-999999999; 5,000 digits) is refused at once, a
    second, one line naming it, exit status 2 (or read, as a trace's time
    under a nanosecond is: 0)."""
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(
        '[[scenario]]\nname = "s"\nrate = 1\nseconds = 1e999999999\n'
        '[[scenario.workload]]\nname = "w"\nlevel = 0\narrivals = "batch"\nsize = 1\n'
    )
    traced = tmp_path / "trace.csv"
    traced.write_text("at,level,timeout\n1e-999999999,0,1e-999999999\n0,0,1e99999\n")
    many = "9" * 5000
    cases = [
        (("simulate", str(scenario)), "scenario[0].seconds=inf: must be finite"),
        (("compare", "--policy", "aging:1e999999999"), "--policy.after=inf: must be finite"),
        (("compare", "--policy", f"aging:{many}"), "--policy.after=inf: must be finite"),
        (("compare", "--policy", "aging:1e-999999999"), "--policy.after=0.0: must be greater"),
        (
            ("simulate", "--example", "article", "--trace", str(traced)),
            "line 3: timeout='1e99999': must be under 1e10001 s",
        ),
    ]
    for argv, message in cases:
        began = time.perf_counter()
        status, _, err = run(capsys, *argv)
        assert time.perf_counter() - began < 30, argv  # (a hang guard, room for a loaded host)
        assert status == 2, (argv, err)
        assert message in err, (argv, err)
