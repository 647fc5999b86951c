"""SPEC.md's promises name their tests, and those tests exist and carry the id.

Rule: every property in SPEC.md has an id (``P1``...) and names the tests
that carry it, one of them at least under ``properties/``; a name that no
longer resolves (in the file the row names for it), a test that does not
mention the id it is cited for, or a mutant of ``properties/mutants.py``
that is not there, is a broken contract.
"""

from __future__ import annotations

import ast
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
    ids = [int(pid[1:]) for pid, _ in rows()]
    assert len(ids) == len(set(ids)), "a property id is used twice"
    core = [i for i in ids if i != 26]  # P26 sits in the adapters' table
    assert core == sorted(core), ids


def test_every_core_mutant_still_finds_the_text_it_breaks() -> None:
    """``properties/mutants.py`` breaks the core by replacing a text that
    must occur exactly once in its file; one that the core no longer holds
    would run the unbroken core and say nothing about the contract."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mutants", ROOT / "properties" / "mutants.py")
    assert spec is not None
    assert spec.loader is not None
    mutants = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mutants)
    stale = mutants.stale()
    assert not stale, f"mutants whose text is not in the core exactly once: {stale}"


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
