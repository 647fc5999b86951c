"""The ``permits`` command: output, JSON, plots, scenario files and bad input."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

import permits.testing
from permits.cli import _live as live
from permits.cli import main, scenarios
from permits.sim import SEED, Scenario, simulate

ROOT = Path(__file__).resolve().parent.parent
SEED_FILE = ROOT / "examples" / "seed.toml"


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
            assert got["wait_max"] == (None if want.wait_max is None else want.wait_max / 1e9)
    aging = data["scenarios"][4]["workloads"][1]
    assert aging["published"]["cleared_at"] == 4.8


def test_same_output_in_a_fresh_process() -> None:
    """Determinism across processes (hash seeds differ), not only within one."""
    command = [sys.executable, "-m", "permits", "simulate", "--json"]
    command.append(str(ROOT / "examples" / "mixed.toml"))
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
    (
        GOOD.replace("size = 1000", "sise = 1000"),
        "scenario[0].workload[1].sise=1000: unknown key (expected one of: arrivals, at, "
        "deadline, level, name, published, size, timeout)",
    ),
    (
        GOOD.replace("level = 1", "level = 2"),
        "scenario[0].workload[1].level=2: must be below 2, the policy's levels",
    ),
    (
        GOOD.replace('arrivals = "batch"', 'arrivals = "burst"'),
        "scenario[0].workload[1].arrivals='burst': unknown arrivals (expected one of: "
        "'batch', 'constant', 'poisson')",
    ),
    (
        GOOD.replace("rate = 100", 'rate = "fast"'),
        "scenario[0].rate='fast': expected an int, float, Fraction or Decimal, got str",
    ),
    (
        GOOD.replace('policy = "strict"', 'policy = { kind = "shares", weights = [4, 0] }'),
        "scenario[0].policy.weights=[4, 0]: every weight must be at least 1",
    ),
    (
        GOOD.replace('policy = "strict"', 'policy = { kind = "aging", afer = 2 }'),
        "scenario[0].policy.afer=2: unknown key (expected one of: after, kind, levels)",
    ),
    (GOOD.replace("[[scenario]]", "[[scenarios]]", 1), "scenarios="),
    (GOOD + "\nburst = 0\n", "scenario[0].workload[1].burst=0: unknown key"),
    (
        GOOD.replace("seconds = 10", "seconds = 10\nburst = 0"),
        "scenario[0].burst=0: must be at least 1",
    ),
    (GOOD.replace("name = ", "name = = ", 1), "is not valid TOML"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_scenario_file_is_one_line_and_status_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    for command in ("simulate", "demo"):
        status, out, err = run(capsys, command, str(path))
        assert status == 2
        assert out == ""
        assert err.count("\n") == 1, err
        assert err.startswith(f"permits: error: {path}: ") or "TOML" in err, err
        assert message in err, err


def test_good_file_runs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "scenario.toml"
    path.write_text(GOOD)
    status, out, _ = run(capsys, "simulate", str(path))
    assert status == 0
    assert "interactive" in out


def test_missing_file_and_bad_options(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = run(capsys, "simulate", str(tmp_path / "nowhere.toml"))
    assert status == 2
    assert "cannot read" in err
    assert "nowhere.toml" in err
    for argv in (["demo", "--scale", "-1"], ["demo", "--scale", "x"], ["demo", "--burst", "0"]):
        with pytest.raises(SystemExit) as exit:
            main(argv)
        assert exit.value.code == 2
        assert argv[-1] in capsys.readouterr().err


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
        assert (got.rejected, got.expired) == (want.rejected, want.expired), got.name
        assert (got.waits, got.timeline, got.wait_max) == (
            want.waits,
            want.timeline,
            want.wait_max,
        ), got.name


def test_plot_writes_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "seed.png"
    status, _, _ = run(capsys, "simulate", "--plot", str(target))
    assert status == 0
    data = target.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 20_000  # five rows of two charts, not an empty canvas
