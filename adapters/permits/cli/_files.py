"""What the command reads: scenario files, the examples it ships, output paths.

Every failure here is a :class:`Usage`: one line for the user, exit status 2.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from permits.core import PermitError
from permits.sim import (
    MAX_ARRIVALS,
    SEED,
    Call,
    Scenario,
    check_arrivals,
    load_scenarios,
    read_trace,
)

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["Usage", "check_output", "example", "examples", "read_scenarios", "trace"]


class Usage(Exception):
    """Bad input: the one line to print before exiting with status 2."""


def _examples_dir() -> Traversable:
    return resources.files("permits.cli").joinpath("examples")


def examples() -> dict[str, str]:
    """The scenario files shipped with the package: name -> what it is (the
    first paragraph of its opening comment)."""
    found = {}
    for entry in sorted(_examples_dir().iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            lines = []
            for line in entry.read_text(encoding="utf-8").splitlines():
                text = line.removeprefix("#").strip()
                if not line.startswith("#") or not text:
                    break
                lines.append(text)
            found[entry.name.removesuffix(".toml")] = " ".join(lines)
    return found


def example(name: str) -> tuple[str, bytes]:
    """The shipped example ``name``: (how to call it in errors, its bytes)."""
    known = examples()
    if name not in known:
        raise Usage(f"--example={name!r}: no such example (expected one of: {', '.join(known)})")
    return f"example {name!r}", _examples_dir().joinpath(f"{name}.toml").read_bytes()


#: The most a scenario file is read of: one larger (a trace given where a
#: scenario goes, ``/dev/zero``, which never ends) is refused, not read
#: until memory runs out.
_MAX_SCENARIO_BYTES = 64 * 2**20


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as file:
            data = file.read(_MAX_SCENARIO_BYTES + 1)
    except OSError as error:
        raise Usage(f"cannot read {str(path)!r}: {error.strerror or error}") from None
    if len(data) > _MAX_SCENARIO_BYTES:
        raise Usage(f"{str(path)!r}: larger than 64 MiB: not a scenario file")
    return data


def _read_stdin() -> bytes:
    """FILE ``-``: the standard input, as ``--trace -`` reads it."""
    if sys.stdin is None:  # (closed as the process started)
        raise Usage("cannot read '-': the standard input is closed")
    try:
        data = sys.stdin.buffer.read(_MAX_SCENARIO_BYTES + 1)
    except OSError as error:  # (opened for writing, 0>file)
        raise Usage(f"cannot read '-': {error.strerror or error}") from None
    if len(data) > _MAX_SCENARIO_BYTES:
        raise Usage("'-': larger than 64 MiB: not a scenario file")
    return data


def _parse_toml(where: str, data: bytes) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Usage(
            f"{where}: not a scenario file: not UTF-8 text "
            f"(byte {data[error.start]:#04x} at offset {error.start})"
        ) from None
    text = text.removeprefix("\ufeff")  # a byte-order mark (Windows editors write one)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise Usage(f"{where}: not valid TOML: {error}") from None
    except ValueError as error:  # an integer of more digits than int() reads from text
        raise Usage(f"{where}: not valid TOML: {str(error).partition(';')[0]}") from None
    except RecursionError:
        raise Usage(
            f"{where}: arrays or tables nested too deep to read (a scenario needs a few levels)"
        ) from None


def read_scenarios(
    path: Path | None, name: str | None, max_arrivals: int | None = MAX_ARRIVALS
) -> tuple[Scenario, ...]:
    """The scenarios of the file at ``path``, or of the shipped example
    ``name``, or (neither) the article's five."""
    if path is not None and name is not None:
        raise Usage(f"give a FILE or --example, not both (got {str(path)!r} and {name!r})")
    if path is None and name is None:
        for scenario in SEED:  # bounded as a file's are (the example 'seed' is the same)
            try:
                check_arrivals(scenario, max_arrivals)
            except PermitError as error:
                raise Usage(f"{scenario.name}: {error}") from None
        return SEED
    if path is not None:
        where, data = str(path), _read_stdin() if str(path) == "-" else _read(path)
    else:
        assert name is not None
        where, data = example(name)
    parsed = _parse_toml(where, data)
    try:
        return load_scenarios(parsed, max_arrivals=max_arrivals)
    except PermitError as error:
        raise Usage(f"{where}: {error}") from None


def trace(path: Path) -> Callable[[Iterable[str]], Iterator[Call]]:
    """A function that reads the trace at ``path`` afresh each time it is
    called with a scenario's limits (their names), one call at a time (the
    file is checked readable now; a pipe, only once). A malformed row, or a header naming a
    limit not among them, raises :class:`~permits.sim.TraceError` while it
    runs; a trace with no call at all, :class:`Usage`. ``-`` is the
    standard input (``/dev/stdin``, which a file redirected in reads afresh
    each time, as its own path does)."""
    name = str(path)  # as the command line wrote it
    if name == "-":
        path = Path("/dev/stdin")
    try:
        with path.open("rb") as file:
            regular = stat.S_ISREG(os.fstat(file.fileno()).st_mode)
    except OSError as error:
        raise Usage(f"--trace={name!r}: cannot read: {error.strerror or error}") from None
    reads = 0

    def calls(limits: Iterable[str]) -> Iterator[Call]:
        nonlocal reads
        if reads and not regular:  # a pipe: read again, it would seem to hold no calls
            raise Usage(
                f"--trace={name!r}: not a regular file, so it reads only once, and this "
                "command reads it once per run: write it to a file first"
            )
        reads += 1
        read = 0
        try:
            with path.open(encoding="utf-8-sig", newline="") as file:
                for call in read_trace(file, limits=limits):
                    read += 1
                    yield call
            if not read:  # (read to its end: a replay stops at the first call after the run)
                raise Usage(f"{name}: holds no call: nothing to replay")
        except UnicodeDecodeError:
            where = _first_line_not_utf8(path) if regular else None
            at = "" if where is None else f"line {where}: "
            raise Usage(f"{name}: {at}not a trace: not UTF-8 text") from None
        except OSError as error:
            raise Usage(f"{name}: cannot read: {error.strerror or error}") from None

    return calls


def _first_line_not_utf8(path: Path) -> int | None:
    """The number of the first line of ``path`` that is not UTF-8 (the
    decoder reads ahead in blocks, so its error says no line): read again,
    a line at a time, once it has failed."""
    try:
        with path.open("rb") as file:
            for number, line in enumerate(file, 1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError:
                    return number
    except OSError:
        return None
    return None


def check_output(option: str, path: Path) -> None:
    """Refuse, before any work, an output ``path`` that cannot be written."""
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise Usage(f"{option}={str(path)!r}: no directory {str(parent)!r} to write it in")
    if path.is_dir():
        raise Usage(f"{option}={str(path)!r}: is a directory")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise Usage(f"{option}={str(path)!r}: not writable")
