"""The README's examples run, and say what they claim."""

from __future__ import annotations

import doctest
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from http_upstream import Script, Upstream_, serve, serve_script

from redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent

#: The modules whose public names the README may use.
PUBLIC_MODULES = [
    "permits.core",
    "permits.core.checks",
    "permits.sim",
    "permits.adapters",
    "permits.adapters.asyncio",
    "permits.adapters.trio",
    "permits.adapters.anyio",
    "permits.adapters.threads",
    "permits.adapters.redis",
    "permits.adapters.prometheus",
    "permits.adapters.opentelemetry",
    "permits.httpx",
    "permits.aiohttp",
    "permits.testing",
]


def test_readme_examples() -> None:
    failures, tried = doctest.testfile(
        str(ROOT / "README.md"), module_relative=False, optionflags=doctest.ELLIPSIS
    )
    assert tried > 0, "the README has no examples"
    assert failures == 0


def test_readme_redis_example(redis_server: RedisServer) -> None:
    """The Redis example runs as written, against the test's server."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (example,) = [b for b in blocks if "REDIS_URL" in b and ">>>" not in b]
    assert 'REDIS_URL = "redis://localhost:6379/0"' in example
    code = example.replace("redis://localhost:6379/0", redis_server.url)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})


def test_readme_aiohttp_example(capsys: pytest.CaptureFixture[str]) -> None:
    """The aiohttp example runs as written, against a server on loopback."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (example,) = [b for b in blocks if "UPSTREAM_URL" in b]
    with serve(Upstream_(rate=10, burst=2)) as url:
        code = example.replace("https://api.example/v1/chat", url)
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out == "200 {'usage': {'total_tokens': 7}}\n"


def test_readme_aiohttp_example_returns_an_upstreams_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An upstream's error (a 400 whose body has no ``usage``) reaches the
    example's caller: its ``settle`` raised ``KeyError`` on it, and the
    error was lost."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (example,) = [b for b in blocks if "UPSTREAM_URL" in b]
    with serve_script(Script((400, {"Content-Type": "application/json"}))) as url:
        code = example.replace("https://api.example/v1/chat", url)
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out == "400 {'ok': True}\n"


@pytest.mark.parametrize(
    ("adapter", "backend"),
    [("trio", "trio"), ("anyio", "trio"), ("anyio", "asyncio")],
)
def test_readme_trio_and_anyio_example(adapter: str, backend: str) -> None:
    """The trio and anyio example runs as written inside an async function,
    on the trio adapter and on the anyio one under both backends, on
    virtual time (on the real clock, a host loaded enough to take 10 ms
    between two lines refilled a unit before the ``try_acquire``)."""
    import anyio

    from permits.testing import virtual_backend

    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (example,) = [b for b in blocks if "from permits.adapters.trio import" in b]
    if adapter == "anyio":
        example = example.replace("permits.adapters.trio", "permits.adapters.anyio", 1)
    body = "".join(f"    {line}\n" for line in example.splitlines())
    code = (
        "from permits.core import Shares\n"
        "INTERACTIVE, BATCH = 0, 1\n"
        f"async def main():\n{body}    return limiter.statistics()\n"
    )
    namespace: dict[str, Any] = {"__name__": "readme"}
    exec(compile(code, "README.md", "exec"), namespace)
    name, options = virtual_backend(backend)
    stats = anyio.run(namespace["main"], backend=name, backend_options=options)
    assert [level.granted for level in stats.levels] == [1, 1]  # the try_acquire found none


def test_readme_scenario_files_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's scenario files run as written (``permits simulate
    FILE``), and its list of requirements parses."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    from permits.cli import main
    from permits.sim import Requirement

    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```toml\n(.*?)```", text, flags=re.S)
    files = [b for b in blocks if b.startswith("[[scenario]]")]
    assert len(files) == 2
    for n, block in enumerate(files):
        path = tmp_path / f"readme-{n}.toml"
        path.write_text(block)
        assert main(["simulate", str(path)]) == 0
        out, err = capsys.readouterr()
        assert err == ""
        assert out.startswith(tomllib.loads(block)["scenario"][0]["name"] + "\n")
    (fragment,) = [b for b in blocks if b.startswith("require")]
    requirements = [Requirement.parse(r) for r in tomllib.loads(fragment)["require"]]
    assert len(requirements) == 5


def test_readme_says_how_python_reads_a_scenario_file(tmp_path: Path) -> None:
    """A user with a scenario file who turns to Python is told how to read
    it (``load_scenarios``, which the README did not name: only
    ``compare(scenario)``), and the call it shows reads the README's first
    scenario file into the scenario ``permits simulate`` runs."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    import permits.sim

    text = " ".join((ROOT / "README.md").read_text().split())
    shown = "`(scenario,) = permits.sim.load_scenarios(tomllib.load(file))`"
    assert shown in text
    raw = re.findall(
        r"```toml\n(\[\[scenario\]\].*?)```", (ROOT / "README.md").read_text(), flags=re.S
    )
    path = tmp_path / "scenario.toml"
    path.write_text(raw[0])
    namespace: dict[str, Any] = {"permits": permits, "tomllib": tomllib}
    with path.open("rb") as file:
        namespace["file"] = file
        exec(shown.strip("`"), namespace)
    scenario = namespace["scenario"]
    assert scenario.name == "checkout beside the nightly export"
    assert permits.sim.simulate(scenario)["checkout"].offered > 0


def test_readme_compare_output_is_what_permits_compare_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The lines the README shows of ``permits compare`` are its output's,
    in that order (``...`` stands for the lines left out)."""
    from permits.cli import main

    text = (ROOT / "README.md").read_text()
    (shown,) = re.findall(r"```text\n\$ permits compare\n(.*?)```", text, flags=re.S)
    assert main(["compare"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = 0
    for line in shown.splitlines():
        if line.strip() == "...":
            continue
        assert line in lines[at:], line
        at = lines.index(line, at) + 1


def test_readme_error_lines_are_what_the_command_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The one-line errors the README shows (a misspelt key, a run too long,
    a trace out of order) are the command's, word for word, for the inputs
    they describe: the README's first scenario file with ``sise`` for
    ``size`` or ``seconds = 1e30``, and a trace whose line 48213 goes back."""
    from permits.cli import main

    text = (ROOT / "README.md").read_text()
    shown = dict(re.findall(r"```text\n\$ (permits [^\n]*)\n(permits: error: [^\n]*\n)```", text))
    scenario = re.findall(r"```toml\n(\[\[scenario\]\].*?)```", text, flags=re.S)[0]
    monkeypatch.chdir(tmp_path)
    Path("typo.toml").write_text(scenario.replace("size = 5000", "sise = 1000"))
    Path("long.toml").write_text(scenario.replace("seconds = 60 ", "seconds = 1e30"))
    rows = [f"{0.51 * n / 48210:.6f},0\n" for n in range(48211)]
    Path("calls.csv").write_text("at,level\n" + "".join(rows) + "0.5,0\n")
    assert len(shown) == 3
    for command, error in shown.items():
        assert main(command.split()[1:]) == 2
        assert capsys.readouterr().err == error, command


def test_docstring_examples() -> None:
    """The examples in the public modules' docstrings run too."""
    import permits.sim

    failures, tried = doctest.testmod(permits.sim, optionflags=doctest.ELLIPSIS)
    assert tried > 0
    assert failures == 0


def test_readme_traces_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's two traces replay as written: the first under its first
    scenario file, the second (a cost per limit) under the ``llm`` example,
    which has the limits it names; every call of each is offered."""
    from permits.cli import main

    text = (ROOT / "README.md").read_text()
    traces = re.findall(r"```text\n(at,.*?)```", text, flags=re.S)
    scenario = re.findall(r"```toml\n(\[\[scenario\]\].*?)```", text, flags=re.S)[0]
    assert len(traces) == 2
    (tmp_path / "scenario.toml").write_text(scenario)
    for n, (trace, source) in enumerate(
        zip(traces, [[str(tmp_path / "scenario.toml")], ["--example", "llm"]], strict=True)
    ):
        path = tmp_path / f"calls-{n}.csv"
        path.write_text(trace)
        assert main(["simulate", *source, "--trace", str(path), "--json"]) == 0
        out, err = capsys.readouterr()
        assert err == ""
        [run] = json.loads(out)["scenarios"]
        offered = sum(workload["offered"] for workload in run["workloads"])
        assert offered == len(trace.splitlines()) - 1, (n, run)


def test_readme_metric_names_are_exported() -> None:
    """Every Prometheus metric and OpenTelemetry instrument the README
    names is one a limiter with an upstream exports, under that exact name
    (a histogram's ``_bucket``/``_sum``/``_count`` samples included)."""
    httpx = pytest.importorskip("httpx")
    prometheus_client = pytest.importorskip("prometheus_client")
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from permits.adapters.opentelemetry import instrument
    from permits.adapters.prometheus import PermitsCollector
    from permits.adapters.threads import open_limiter
    from permits.core import StrictPriority
    from permits.httpx import Upstream

    text = (ROOT / "README.md").read_text()
    (otel,) = re.findall(r"go to\nOpenTelemetry with (.*?)`uninstrument", text, flags=re.S)
    shown_otel = set(re.findall(r"`(permits\.[\w.]+)`", otel))
    shown_prometheus = set(re.findall(r"`(permits_\w+)", text))
    assert len(shown_otel) >= 6
    assert len(shown_prometheus) >= 10
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    with open_limiter(StrictPriority(2), 100) as limiter:
        upstream = Upstream(limiter)
        instrument(limiter, meter, upstream=upstream)
        limiter.acquire(0)
        upstream.learn(429, httpx.Headers({"Retry-After": "0"}))
        registry = prometheus_client.CollectorRegistry()
        registry.register(PermitsCollector(limiter, upstream=upstream))
        exposition = prometheus_client.generate_latest(registry).decode()
        data = reader.get_metrics_data()
    exported = set(re.findall(r"^(permits_\w+)", exposition, flags=re.M))
    prefixes = {name for name in shown_prometheus if name.endswith("_")}
    unknown = sorted(shown_prometheus - prefixes - exported)
    unknown += [p for p in prefixes if not any(name.startswith(p) for name in exported)]
    assert not unknown, f"the README names metrics nobody exports: {unknown}"
    assert data is not None
    instruments = {
        metric.name
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    missing = sorted(shown_otel - instruments)
    assert not missing, f"the README names instruments nobody exports: {missing} of {instruments}"


def test_benchmarks_commands_exist_and_take_their_options() -> None:
    """Every benchmark script the documents name exists, and every option
    shown after one (in a command, its comment, or a quoted command line)
    is one the script accepts and its ``--help`` (its docstring) describes:
    a script refuses an option it does not read, so a renamed one would
    leave the document's command failing (read from the sources: the
    benchmarks are long, and are not run here)."""
    import ast

    accepted: dict[str, tuple[set[str], str]] = {}
    for path in (ROOT / "bench").glob("*.py"):
        tree = ast.parse(path.read_text())
        options = {
            arg.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check_options"
            for arg in node.args
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
        }
        accepted[path.name] = (options, ast.get_docstring(tree) or "")
    wrong = []
    checked = 0
    for document in ("BENCHMARKS.md", "README.md", "MUTATION.md"):
        text = (ROOT / document).read_text().replace("\\\n", " ")
        for line in text.splitlines():
            for script, rest in re.findall(r"bench/(\w+\.py)([^`|]*)", line):
                if script not in accepted:
                    wrong.append(f"{document}: bench/{script} does not exist")
                    continue
                options, doc = accepted[script]
                for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest.split("bench/")[0]):
                    checked += 1
                    if option not in options or option not in doc:
                        wrong.append(f"{document}: bench/{script} {option}")
    assert checked > 20, checked
    assert not wrong, f"options the scripts do not take or --help does not describe: {wrong}"


def test_readme_command_lines_parse() -> None:
    """Every ``permits`` command line the README shows (in a shell block,
    after a ``$``, or quoted in the text) is one the command's parser
    takes: its subcommand and options exist, with values where they take
    them (parsed only: the files they name need not exist)."""
    import shlex

    from permits.cli import _parser

    text = (ROOT / "README.md").read_text()
    lines = [
        line.split("#")[0]
        for block in re.findall(r"```(?:sh|text)\n(.*?)```", text, flags=re.S)
        for line in block.splitlines()
    ]
    lines += re.findall(r"`(permits (?:simulate|compare|demo|examples)[^`]*)`", text)
    commands = [shlex.split(line.removeprefix("$ ")) for line in lines]
    commands = [argv[1:] for argv in commands if argv[:1] == ["permits"]]
    assert len(commands) >= 10, commands
    for argv in commands:
        if "--version" in argv or "--help" in argv:
            with pytest.raises(SystemExit) as exit:
                _parser().parse_args(argv)
            assert exit.value.code == 0, argv
        else:
            _parser().parse_args(argv)


def test_readme_defaults_and_bounds_are_the_codes() -> None:
    """The defaults and bounds the README states in figures are the code's:
    each phrase is written from the code's value, so a default changed in
    the code alone leaves the README stating another, and this fails."""
    import inspect

    pytest.importorskip("redis")
    pytest.importorskip("httpx")
    from permits.adapters.redis import open_limiter
    from permits.core import Machine
    from permits.httpx import BACKOFF, MAX_BACKOFF, MAX_PAUSE
    from permits.sim import MAX_ARRIVALS, MAX_CHOICES, MAX_LIMITS, MAX_TENANTS

    def default(function: Any, name: str) -> Any:
        return inspect.signature(function).parameters[name].default

    def seconds(value: float) -> str:
        return {1.0: "1 s", 2.0: "2 s", 3600.0: "an hour"}.get(value, f"{value:g} s")

    from permits.adapters import BaseLimiter

    text = " ".join((ROOT / "README.md").read_text().split())
    window = default(Machine, "settle_window_ns")
    kept = default(BaseLimiter, "settle_window")
    assert default(open_limiter, "settle_window") == kept  # the Redis limiter's
    phrases = [
        f"`settle_window_ns` ({seconds(window / 10**9)} by default)",
        f"an adapter's `settle_window` is {kept:g} by default",
        f"`demand_ttl`, {seconds(default(open_limiter, 'demand_ttl'))}, unless refreshed",
        f"`refund_window` ({seconds(default(open_limiter, 'refund_window'))} by default)",
        f"(`lease={default(open_limiter, 'lease')}` by default;",
        f"(at most `max_pause`, {seconds(MAX_PAUSE)} by default)",
        f"{seconds(BACKOFF)}, doubling each try, at most {seconds(MAX_BACKOFF)} (and `max_pause`)",
        f"asks for more than {MAX_ARRIVALS:,}",
        f"at most {MAX_TENANTS:,} tenants, a choice {MAX_CHOICES:,} values, "
        f"a scenario {MAX_LIMITS} limits",
    ]
    missing = [phrase for phrase in phrases if phrase not in text]
    assert not missing, f"the README does not state the code's figures: {missing}"


def test_readme_keyword_arguments_exist() -> None:
    """Every ``name=`` the README writes in code (``settle_window=600.0``,
    ``acquire(max_wait=...)``, ``book_ahead=0.1``) is a parameter of a
    public callable of ``permits``, under that exact name: a renamed
    argument would leave the README teaching one that is refused. (Some are
    other libraries': the IETF ``RateLimit`` field's ``r=`` and ``t=``,
    anyio's, httpx's and aiohttp's, ``open``'s ``newline=``, and
    ``datetime``'s ``hours=`` and ``tzinfo=``.)"""
    import contextlib
    import importlib
    import inspect

    parameters: set[str] = set()
    seen: set[int] = set()

    def visit(value: object, depth: int) -> None:
        if id(value) in seen or not callable(value):
            return
        seen.add(id(value))
        with contextlib.suppress(TypeError, ValueError):  # a builtin with none
            parameters.update(inspect.signature(value).parameters)
        if inspect.isclass(value) and depth < 2:
            for member in vars(value).values():
                visit(getattr(member, "__func__", member), depth + 1)
        if inspect.isclass(value):  # a TypedDict's keys are the options it types
            parameters.update(getattr(value, "__annotations__", {}))

    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for attribute in dir(module):
            if not attribute.startswith("_"):
                visit(getattr(module, attribute), 0)
    visit(importlib.import_module("permits.adapters._base").LimiterOptions, 0)
    text = (ROOT / "README.md").read_text()
    code = re.findall(r"`([^`\n]+)`", text) + re.findall(r"```python\n(.*?)```", text, flags=re.S)
    written = {
        name for span in code for name in re.findall(r"(?<![\w=<>!.])([a-z_]\w*)=(?!=)", span)
    }
    theirs = {
        "r",
        "t",
        "backend",
        "extensions",
        "json",
        "middlewares",
        "newline",
        "hours",
        "tzinfo",
    }
    unknown = sorted(written - parameters - theirs)
    assert len(written) > 30, written
    assert not unknown, f"the README writes arguments no public callable takes: {unknown}"


def test_readme_class_and_error_names_exist() -> None:
    """Every class or exception the README names in code (``AcquireTimeout``,
    ``BackendUnavailable``, ``QuotaPolicy``...) is a public name of
    ``permits`` under that exact name, or Python's own, or one of the few
    named as others' (trio's ``MockClock``, the ``RateLimit`` header, the
    properties' ``TestUserPolicy``)."""
    import builtins
    import importlib

    ours = {name for module in PUBLIC_MODULES for name in dir(importlib.import_module(module))}
    text = (ROOT / "README.md").read_text()
    named = set(re.findall(r"`([A-Z][a-z]+[A-Z]\w*)`", text))
    theirs = {"MockClock", "RateLimit"}
    assert "TestUserPolicy" in (ROOT / "properties" / "test_machine.py").read_text()
    unknown = sorted(
        name
        for name in named - theirs - {"TestUserPolicy"}
        if name not in ours and not hasattr(builtins, name)
    )
    assert len(named) >= 10, named
    assert not unknown, f"the README names classes or errors permits does not have: {unknown}"


def test_readme_constant_names_exist() -> None:
    """Every constant the README names in code (``MAX_QUOTAS``, ``SECOND``,
    ``MAX_POLICIES``) is a public name of ``permits`` under that exact name,
    so a reader can import what the README names."""
    import importlib

    ours = {name for module in PUBLIC_MODULES for name in dir(importlib.import_module(module))}
    text = (ROOT / "README.md").read_text()
    named = set(re.findall(r"`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{4,})`", text))
    theirs = {"SIGKILL"}  # the signal
    unknown = sorted(named - theirs - ours)
    assert len(named) >= 3, named
    assert not unknown, f"the README names constants permits does not export: {unknown}"


def test_readme_api_table_names_every_export_and_nothing_else() -> None:
    """The README's table of the public API names, for each module in it,
    exactly the names the module exports (its ``__all__``): a name added
    to a module and not to the table, or left in the table after it went,
    fails here. Every public module has its row."""
    import importlib

    text = (ROOT / "README.md").read_text()
    section = text.split("## The public API at a glance\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `permits")]
    seen = []
    for row in rows:
        modules_cell, names_cell = row.split(" | ", 1)
        written = re.findall(r"`([^`]+)`", modules_cell)
        modules = [written[0]] + [written[0].rsplit(".", 1)[0] + name for name in written[1:]]
        named = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", names_cell))
        for module in modules:
            exported = set(importlib.import_module(module).__all__)
            assert named == exported, (
                module,
                f"exported, not in the table: {sorted(exported - named)}",
                f"in the table, not exported: {sorted(named - exported)}",
            )
            seen.append(module)
    assert set(PUBLIC_MODULES) | {"permits.cli"} == set(seen), seen
