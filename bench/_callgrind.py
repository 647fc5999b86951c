"""Instructions counted by valgrind's callgrind, for the benchmarks.

Unlike time, an instruction count comes out nearly the same on every run (within about
two million for a whole process: the interpreter's start-up), whatever
else the machine does; a benchmark script runs one of its own loops in a
child process under callgrind and reads the total off valgrind's summary,
or runs a server under callgrind and reads the total off its output file.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping


def callgrind(out: str = "/dev/null") -> list[str]:
    """The command to run a program under, its results written to ``out``."""
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]


def instructions(script: str, *args: str, env: Mapping[str, str] | None = None) -> int:
    """Instructions of ``python script *args``, run under callgrind."""
    result = subprocess.run(
        [*callgrind(), sys.executable, script, *args],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    found = re.search(r"refs:\s*([\d,]+)", result.stderr)
    assert found, result.stderr
    return int(found.group(1).replace(",", ""))


def totals(out: str) -> int:
    """The instructions in callgrind's output file ``out``, written when the
    program it ran exited."""
    with open(out) as file:
        for line in file:
            if line.startswith("totals:"):
                return int(line.split()[1])
    raise ValueError(f"no totals in {out}")
