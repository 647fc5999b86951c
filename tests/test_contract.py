"""SPEC.md's promises name their tests, and those tests exist and carry the id.

Rule: every property in SPEC.md has an id (``P1``...) and names the tests
that carry it, one of them at least under ``properties/``; a name that no
longer resolves (in the file the row names for it), a test that does not
mention the id it is cited for, or a mutant of ``properties/mutants.py``
that is not there, is a broken contract.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\| (P\d+) \|(.*)\|([^|]*)\|\s*$")
#: A cited test: ``name``, ``file.py::name`` or ``folder/file.py::name``.
NAME = re.compile(r"`((?:(?:properties|tests)/)?[\w.]+::[\w.]+|[\w.]+)`")
#: The mutants a row cites: ``properties/mutants.py`` (``name``, ...).
MUTANTS = re.compile(r"`properties/mutants\.py` \(([^)]*)\)")
SOURCES = sorted([*(ROOT / "properties").glob("*.py"), *(ROOT / "tests").glob("*.py")])


def rows() -> list[tuple[str, str]]:
    text = (ROOT / "SPEC.md").read_text()
    found = [(m[1], m[3]) for line in text.splitlines() if (m := ROW.match(line))]
    assert len(found) > 30, "SPEC.md's property tables were not found"
    return found


def cited(cell: str) -> list[tuple[str | None, str]]:
    """The (file, name) pairs a row's test cell cites, outside parentheses
    (which give context: a test class, a checked helper, an error case);
    a file may be given with its folder (``tests/test_sim.py``)."""
    cell = re.sub(r"\([^)]*\)", "", cell)
    out: list[tuple[str | None, str]] = []
    file: str | None = None
    for name in NAME.findall(cell):
        if "::" in name:
            file, name = name.split("::")
        out.append((file, name))
    return out


def test_a_cited_file_may_name_its_folder() -> None:
    """A name cited with its folder is read, and one outside parentheses
    only: a rename of such a test would otherwise go unseen."""
    cell = (
        " `test_laws.py::a`, `B.c`, `tests/test_sim.py::d` (`e`), `properties/mutants.py` (`f-g`) "
    )
    assert cited(cell) == [
        ("test_laws.py", "a"),
        ("test_laws.py", "B.c"),
        ("tests/test_sim.py", "d"),
    ]


def defines(path: Path, dotted: str) -> str | None:
    """The source of ``dotted`` (``f``, ``Class``, ``Class.method``) in
    ``path``, or of the whole module where the name is bound by assignment
    (``TestShares = machine_for("shares").TestCase``); ``None`` if absent."""
    text = path.read_text()
    body: list[ast.stmt] = ast.parse(text).body
    node: ast.stmt | None = None
    for part in dotted.split("."):
        defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        node = next((n for n in body if isinstance(n, defs) and n.name == part), None)
        if node is None:
            bound = any(
                isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == part for t in n.targets)
                for n in body
            )
            return text if bound else None
        body = node.body
    return ast.get_source_segment(text, node) if node is not None else None


@pytest.mark.parametrize(("pid", "cell"), rows(), ids=[pid for pid, _ in rows()])
def test_every_cited_test_exists_and_carries_its_id(pid: str, cell: str) -> None:
    names = cited(cell)
    assert names, f"{pid} names no test"
    in_properties = False
    for file, name in names:
        # the file last named, else (the conformance suite's) any test file
        if file is None:
            paths = SOURCES
        else:
            paths = [p for p in SOURCES if file in (p.name, f"{p.parent.name}/{p.name}")]
        found = [(p, s) for p in paths if (s := defines(p, name)) is not None]
        assert found, f"{pid}: {file or ''}::{name} is not defined under properties/ or tests/"
        assert any(re.search(rf"\b{pid}\b", source) for _, source in found), (
            f"{pid}: {name} does not mention it"
        )
        in_properties = in_properties or any(p.parent.name == "properties" for p, _ in found)
    assert in_properties, (
        f"{pid}: no test under properties/ carries it (properties/ is the contract)"
    )


def test_every_cited_mutant_exists() -> None:
    """The mutants a property cites (``properties/mutants.py``
    (``name``, ...)) are mutants of that file: a renamed or dropped one
    would leave the property's claim that it is caught unchecked."""
    text = (ROOT / "SPEC.md").read_text()
    names = [n for group in MUTANTS.findall(text) for n in re.findall(r"`([^`]+)`", group)]
    assert names, "SPEC.md cites no mutant"
    mutants = (ROOT / "properties" / "mutants.py").read_text()
    missing = [n for n in names if f'\n    "{n}": (' not in mutants]
    assert not missing, f"SPEC.md cites mutants properties/mutants.py does not have: {missing}"


def test_ids_are_unique_and_in_order() -> None:
    """Each id once; within each table (a section's rows), in order."""
    ids = [int(pid[1:]) for pid, _ in rows()]
    assert len(ids) == len(set(ids)), "a property id is used twice"
    tables: list[list[int]] = [[]]
    for line in (ROOT / "SPEC.md").read_text().splitlines():
        if m := ROW.match(line):
            tables[-1].append(int(m[1][1:]))
        elif tables[-1]:
            tables.append([])
    assert sum(map(len, tables)) == len(ids)
    for table in tables:
        assert table == sorted(table), table


def test_every_core_mutant_still_finds_the_text_it_breaks() -> None:
    """``properties/mutants.py`` breaks the core (or an adapter) by
    replacing a text that must occur exactly once in its file; one that
    the code no longer holds would run it unbroken and say nothing about
    the contract. A mutant of an adapter runs its area's tests, which
    ``ADAPTER_TESTS`` must name."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mutants", ROOT / "properties" / "mutants.py")
    assert spec is not None
    assert spec.loader is not None
    mutants = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mutants)
    stale = mutants.stale()
    assert not stale, f"mutants whose text is not in the core exactly once: {stale}"


def test_every_id_the_tests_and_docs_name_is_a_property() -> None:
    """A ``P`` id named in a test, the code or a document is one of
    SPEC.md's rows: an id cited for a promise SPEC.md does not hold (a
    dropped or renumbered property) would claim a contract there is none of."""
    ids = {pid for pid, _ in rows()}
    files = [
        *SOURCES,
        *(ROOT / "adapters").rglob("*.py"),
        *(ROOT / "core").rglob("*.py"),
        *(ROOT / "bench").glob("*.py"),
        *(ROOT / name for name in ("README.md", "MUTATION.md", "BENCHMARKS.md")),
    ]
    named = {
        (path.relative_to(ROOT).as_posix(), pid)
        for path in files
        for pid in re.findall(r"\bP\d+\b", path.read_text())
    }
    unknown = sorted(pair for pair in named if pair[1] not in ids)
    assert not unknown, f"ids SPEC.md has no property for: {unknown}"


#: A row of SPEC.md's tables that gives a call: ``| `name(params) -> type` |``.
CALL = re.compile(r"^\| `(\w+)\(([^`]*?)\)(?: -> [^`]*)?` \|", re.M)


def spec_calls(text: str) -> dict[str, list[list[tuple[str, str | None, bool]]]]:
    """Each call's parameters as SPEC.md's rows give them, per name, in
    order: (name, default as written or ``None``, keyword-only)."""
    calls: dict[str, list[list[tuple[str, str | None, bool]]]] = {}
    for match in CALL.finditer(text):
        params: list[tuple[str, str | None, bool]] = []
        keyword = False
        for part in filter(None, (p.strip() for p in match[2].split(","))):
            if part == "*":
                keyword = True
                continue
            name, _, default = part.partition("=")
            params.append((name, default or None, keyword))
        calls.setdefault(match[1], []).append(params)
    return calls


def test_the_signatures_spec_gives_are_the_codes() -> None:
    """Every call SPEC.md's tables give (the machine's operations, the
    policies, the adapters' calls) has the code's parameters, in order, of
    the same kind and with the same defaults; a row that gives fewer (``push(...)``,
    ``min_wait(level)`` of a supplied machine) gives the first of them."""
    import inspect

    from permits.adapters._base import Permit
    from permits.adapters.asyncio import Limiter
    from permits.core import SECOND, Aging, Charge, Fifo, Machine, Shares, StrictPriority

    text = (ROOT / "SPEC.md").read_text()
    core, adapters = text.split("\n## The adapters\n")
    objects: dict[str, object] = {
        "Machine": Machine,
        "Fifo": Fifo,
        "StrictPriority": StrictPriority,
        "Shares": Shares,
        "Aging": Aging,
    }
    scope = {"SECOND": SECOND, "Charge": Charge}
    checked = 0
    for part, owner in ((core, Machine), (adapters, Limiter)):
        for name, given in spec_calls(part).items():
            target = objects.get(name) or getattr(owner, name, None) or getattr(Permit, name)
            signature = inspect.signature(target)  # type: ignore[arg-type]
            code = [
                (p.name, p.default, p.kind is p.KEYWORD_ONLY)
                for p in signature.parameters.values()
                if p.name != "self"
            ]
            for params in given:
                if params == [("...", None, False)]:
                    continue
                assert len(params) <= len(code), (name, params, code)
                if params is max(given, key=len):
                    assert len(params) == len(code), f"SPEC.md's {name} leaves out {code}"
                for (spec, default, keyword), (real, value, kw) in zip(params, code, strict=False):
                    assert (spec, keyword) == (real, kw), f"{name}: SPEC.md {spec}, code {real}"
                    shown = inspect.Parameter.empty if default is None else eval(default, scope)
                    assert shown == value, f"SPEC.md's {name}({spec}={default}), code's {value}"
                checked += 1
    assert checked > 20, checked


def test_the_numbers_spec_states_are_the_codes() -> None:
    """The bounds and sizes SPEC.md states in figures are the code's: each
    phrase is written from the code's constant, so a constant changed in the
    code alone leaves SPEC.md stating another, and this fails."""
    from permits.core import CHUNK, MAX_LEVELS, MAX_SCALE, RELATIVE_ERROR
    from permits.core._machine import MAX_WEIGHT
    from permits.core._policies import MAX_SCHEDULE
    from permits.core._stats import Busiest

    def power(n: int, base: int) -> str:
        exponent = round(math.log(n, base))
        assert base**exponent == n, n
        return str(exponent)

    text = " ".join((ROOT / "SPEC.md").read_text().split())
    phrases = [
        f"`MAX_LEVELS = {MAX_LEVELS}`",
        f"at most `10**{power(MAX_SCHEDULE, 10)}` (the length of the cycle)",
        f"`MAX_SCALE = 2^{power(MAX_SCALE, 2)}`",
        f"`CHUNK = {CHUNK}`",
        f"`RELATIVE_ERROR` (1/{round(1 / RELATIVE_ERROR)})",
        f"a Space-Saving count of {Busiest().capacity} counters per level",
        f"an `int` from 1 to 10{'⁶' if MAX_WEIGHT == 10**6 else MAX_WEIGHT}",
    ]
    missing = [phrase for phrase in phrases if phrase not in text]
    assert not missing, f"SPEC.md does not state the code's figures: {missing}"


def test_the_shared_limits_defaults_spec_states_are_the_codes() -> None:
    """The defaults of the shared limit's options SPEC.md states (its
    leases, the published demand's life, the refund window, what is off)
    and the longest time its script holds are the code's."""
    import inspect

    pytest.importorskip("redis")
    from permits.adapters.redis import _LONGEST_S, open_limiter

    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(open_limiter).parameters.items()
    }
    text = " ".join((ROOT / "SPEC.md").read_text().split())
    seconds = {
        value: f"{value:g} s" for value in (defaults["demand_ttl"], defaults["refund_window"])
    }
    phrases = [
        f"(`lease=k`, {defaults['lease']} by default;",
        f"`demand_ttl` ({seconds[defaults['demand_ttl']]} by default)",
        f"within `refund_window` of its grant ({seconds[defaults['refund_window']]} by default)",
        "(`global_priority=True`, off by default)" if not defaults["global_priority"] else "?",
        "(`book_ahead=seconds`, off by default)" if not defaults["book_ahead"] else "?",
        f"of more than {_LONGEST_S:.0e}".replace("e+0", "e") + " s, about 31 years",
    ]
    missing = [phrase for phrase in phrases if phrase not in text]
    assert not missing, f"SPEC.md does not state the code's defaults: {missing}"


def test_the_tests_the_documents_cite_exist() -> None:
    """A test the README, BENCHMARKS.md or MUTATION.md cites as
    ``file.py::name`` is defined there: a renamed or dropped one would
    send a reader to nothing (SPEC.md's rows are checked above)."""
    cite = re.compile(r"((?:(?:properties|tests)/)?test_\w+\.py)::([\w.]+)")
    missing = []
    checked = 0
    for document in ("README.md", "BENCHMARKS.md", "MUTATION.md"):
        for file, name in set(cite.findall((ROOT / document).read_text())):
            paths = [p for p in SOURCES if file in (p.name, f"{p.parent.name}/{p.name}")]
            checked += 1
            if not any(defines(path, name.split("[")[0]) for path in paths):
                missing.append(f"{document}: {file}::{name}")
    assert checked > 20, checked
    assert not missing, f"the documents cite tests that are not there: {missing}"


def test_the_fields_spec_names_are_the_codes() -> None:
    """The fields SPEC.md gives ``statistics()``, ``busiest_flows`` and
    ``Queues.head``'s ``Waiter`` are attributes of what they return, under
    those names: a renamed field would leave the contract naming one that
    is not there."""
    from permits.core import FlowStatistics, LevelStatistics, Statistics, Waiter

    text = (ROOT / "SPEC.md").read_text()

    def row(call: str) -> str:
        (found,) = [line for line in text.splitlines() if line.startswith(f"| `{call}")]
        return found

    def names(cell: str) -> set[str]:
        return set(re.findall(r"`([a-z][a-z0-9_]*)`", cell))

    others = {"now", "until", "pause_until", "keep_waits", "n", "level"}
    statistics = names(row("statistics()")) - others
    assert {"too_long", "wait_total_ns", "paused_ns", "wait_p99_s"} <= statistics
    known = attrs_of(LevelStatistics) | attrs_of(Statistics)
    missing = [f"statistics: {name}" for name in statistics if name not in known]
    flows = names(row("busiest_flows(")) - others
    assert "granted_error" in flows
    missing += [f"busiest_flows: {name}" for name in flows if name not in attrs_of(FlowStatistics)]
    (head,) = re.findall(r"`head\(level\)` \(the\s+`Waiter`([^)]*)\)", text)
    fields = names(head)
    assert "pushed_at" in fields
    missing += [f"Waiter: {name}" for name in fields if name not in attrs_of(Waiter)]
    assert not missing, f"SPEC.md names fields the code does not have: {missing}"


def attrs_of(cls: type) -> set[str]:
    """The fields (of an attrs class or a named tuple) and properties of ``cls``."""
    import attrs

    fields = {f.name for f in attrs.fields(cls)} if attrs.has(cls) else set(cls._fields)  # type: ignore[attr-defined]
    return fields | {name for name, value in vars(cls).items() if isinstance(value, property)}


def test_the_documents_name_no_path_of_one_machine() -> None:
    """The documents' commands run from a checkout: none names a directory
    of the machine they were written on (a worktree, a home)."""
    found = [
        f"{document}: {match}"
        for document in ("README.md", "SPEC.md", "BENCHMARKS.md", "MUTATION.md")
        for match in re.findall(r"(?:/work/|/root/|/home/)\S*", (ROOT / document).read_text())
    ]
    assert not found, f"paths of one machine in the documents: {found}"


def test_the_mutants_script_lists_its_mutants() -> None:
    """``python properties/mutants.py --help`` says how to run it and lists
    every mutant by name with what it breaks, running none; an unknown name
    is refused in words, before any mutant runs (it was a ``KeyError``
    traceback after the mutants before it had run)."""
    import subprocess
    import sys

    script = str(ROOT / "properties" / "mutants.py")
    shown = subprocess.run(
        [sys.executable, script, "--help"], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    assert "mutants.py [--caught-only] [NAME ...]" in shown.stdout
    assert "skip-cancelled-check" in shown.stdout
    assert "cancel counts the waiter but leaves it queued" in shown.stdout
    unknown = subprocess.run(
        [sys.executable, script, "skip-cancelled-check", "no-such-mutant"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unknown.returncode == 2, unknown.stderr
    assert "no-such-mutant" in unknown.stderr
    assert "--help" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    assert unknown.stdout == ""
