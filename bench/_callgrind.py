"""Instructions counted by valgrind's callgrind, for the benchmarks.

Unlike time, an instruction count comes out the same on every run, whatever
else the machine does; a benchmark script runs one of its own loops in a
child process under callgrind and reads the total off valgrind's summary.
"""

from __future__ import annotations

import re
import subprocess
import sys


def instructions(script: str, *args: str) -> int:
    """Instructions of ``python script *args``, run under callgrind."""
    result = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            script,
            *args,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"refs:\s*([\d,]+)", result.stderr)
    assert found, result.stderr
    return int(found.group(1).replace(",", ""))
