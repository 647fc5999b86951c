"""The command line of a benchmark script: ``-h``/``--help`` prints its
docstring (what it measures, and its options) instead of running it, and
an option it does not read is refused rather than ignored (a mistyped
``--no-valgrind`` would start a half-hour run)."""

from __future__ import annotations

import os
import sys


def check_options(doc: str | None, *options: str) -> None:
    """Exit with ``doc`` for ``-h`` or ``--help``, or with an error for an
    argument starting ``--`` that is not one of ``options`` (a value may
    be a negative number)."""
    arguments = sys.argv[1:]
    if "-h" in arguments or "--help" in arguments:
        try:
            print((doc or "").strip(), flush=True)
        except BrokenPipeError:  # `--help | head`: the reader had enough
            # (stdout at /dev/null: the interpreter's last flush is quiet)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0)
    for argument in arguments:
        if argument.startswith("--") and argument not in options:
            known = ", ".join(options) or "none"
            raise SystemExit(f"{sys.argv[0]}: unknown option {argument} (its options: {known})")
