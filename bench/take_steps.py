"""Where do the instructions of an acquire that finds a permit free go?

    python bench/take_steps.py [--cython]

An acquire that finds a permit free and nobody waiting costs about two and
a half times aiolimiter's (``bench/uncontended.py``). This takes it apart:
each step that the asyncio adapter and the core's ``Machine.try_take`` (or
``Machine.take``, which also makes a waiter record and a decision) run for it,
measured alone in a loop of its own, with the floors beside them (a call,
an awaited coroutine) and the peers' whole acquires that are installed.

Each step runs in a child process under callgrind, once for N iterations
and once for 2N, so set-up cancels out; the empty loop's own cost is taken
off every row. The start-up of the interpreter itself moves by about two
million instructions from one run to the next, so a row moves by about
100 (N is 20,000). The steps read the machine's private parts on purpose:
they are what a take executes, one by one.

``--cython``: the whole take and the whole acquire again, with the core's
modules compiled by Cython from their unchanged source (annotation typing
off, so that the core's own argument checks stay in force), built in a
temporary folder; needs Cython and setuptools (``pip install cython
setuptools``) and a C compiler.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from _callgrind import instructions
from _options import check_options

ROOT = Path(__file__).resolve().parent.parent
N = 20_000

# Made before every loop: a machine that never binds (10^9 a second, burst
# 10^6), one permit taken so that its clock has started, and its parts.
MACHINE = """\
from permits.core import Fifo, Machine, State
from permits.core._machine import Decision, Waiter, _new
machine = Machine(Fifo(), rate=10**9, burst=10**6)
machine.take(-1, 0, 1_000)
source, unit, ledger = machine._source, machine._unit, machine._ledger
histogram = machine._hists[0]
take, try_take = machine.take, machine.try_take
"""
LIMITER = """\
from permits.core import Fifo
from permits.adapters.asyncio import Limiter
limiter = Limiter(Fifo(), 10**9, 10**6)
acquire, now = limiter.acquire, limiter._now
await acquire()
"""
PEER = """\
sys.path.insert(0, {bench!r})
from _common import PEERS
(peer,) = [p for p in PEERS if p.name == {name!r}]
acquire, close = peer.make(10**9, 10**6)
"""

#: name: (set-up, the loop's body). Every loop counts ``t`` up by 1,000 ns.
STEPS: dict[str, tuple[str, str]] = {
    "the empty loop (taken off every row)": ("", "pass"),
    "a call of a function of three arguments": ("def f(a, b, c): pass", "f(i, 0, t)"),
    "a coroutine of five keyword arguments, awaited": (
        "async def f(a=None, *, b=1, c=None, d=None, e=None): pass",
        "await f()",
    ),
    "Machine.take of a free permit, whole": (MACHINE, "take(i, 0, t)"),
    "Machine.try_take of a free permit, whole (what an acquire calls)": (
        MACHINE,
        "try_take(i, 0, t)",
    ),
    "- its waiter record made": (MACHINE, "_new(Waiter, (i, 0, i, t, None, unit, None))"),
    "- the bucket's charge, with its next due time": (MACHINE, "source.charge(t, unit, False)"),
    "- the next due time alone": (MACHINE, "source._set_due()"),
    "- the wait recorded in its level's histogram": (MACHINE, "histogram.record(0)"),
    "- the ledger's trim, nothing held": (MACHINE, "ledger.trim()"),
    "- its decision made": (MACHINE, "_new(Decision, (i, State.GRANTED, 0, t, 0))"),
    "asyncio adapter: a clock read": (LIMITER, "now()"),
    "asyncio adapter: acquire, whole": (LIMITER, "await acquire()"),
}
PEERS = ("aiolimiter", "asynciolimiter")
CYTHONIZE = (sys.executable, "-m", "Cython.Build.Cythonize", "-q", "-i", "-3")


def program(setup: str, body: str) -> str:
    """The child's source: ``setup``, then ``body`` in a loop of ``n``."""
    return (
        "import asyncio, sys\n"
        "async def main(n):\n"
        f"{textwrap.indent(setup, '    ')}\n"
        "    t = 1_000\n"
        "    for i in range(n):\n"
        "        t += 1_000\n"
        f"        {body}\n"
        "asyncio.run(main(int(sys.argv[1])))\n"
    )


def per_iteration(source: str, path: str) -> float:
    """Instructions per iteration of the loop in ``source``, run with
    ``path`` first on the import path."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as file:
        file.write(source)
    env = dict(os.environ, PYTHONPATH=path, PYTHONHASHSEED="0")  # the same start-up in both runs
    try:
        once = instructions(file.name, str(N), env=env)
        twice = instructions(file.name, str(2 * N), env=env)
    finally:
        os.unlink(file.name)
    return (twice - once) / N


def compiled_core(into: str) -> str:
    """The core's modules compiled by Cython in ``into``; its import path."""
    shutil.copytree(ROOT / "core", f"{into}/core")
    folder = f"{into}/core/permits/core"
    modules = sorted(p.name for p in Path(folder).glob("_*.py") if p.name != "__init__.py")
    subprocess.run(
        [*CYTHONIZE, "--directive", "annotation_typing=False,binding=True", *modules],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    return f"{into}/core{os.pathsep}{ROOT / 'adapters'}"


def main() -> None:
    check_options(__doc__, "--cython")
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind): it counts the instructions")
    sys.path.insert(0, str(ROOT / "bench"))
    from _common import importable

    here = f"{ROOT / 'core'}{os.pathsep}{ROOT / 'adapters'}"
    steps = dict(STEPS)
    for name in PEERS:
        if importable(name):
            setup = PEER.format(bench=str(ROOT / "bench"), name=name)
            steps[f"{name}: acquire, whole"] = (setup, "await acquire()")
        else:
            print(f"{name} is not installed here: left out (see BENCHMARKS.md's set-up)")
    print(f"Instructions per step, Python {sys.version.split()[0]}, {N:,} and {2 * N:,} loops")
    print()
    print("| step | instructions |")
    print("| --- | ---: |")
    empty = 0.0
    for name, (setup, body) in steps.items():
        count = per_iteration(program(setup, body), here)
        if not empty:
            empty = count
            print(f"| {name} | {count:,.0f} |")
        else:
            print(f"| {name} | {count - empty:,.0f} |")
    if "--cython" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            path = compiled_core(tmp)
            for name in ("Machine.take of a free permit, whole", "asyncio adapter: acquire, whole"):
                setup, body = STEPS[name]
                count = per_iteration(program(setup, body), path)
                print(f"| {name}, the core compiled by Cython | {count - empty:,.0f} |")


if __name__ == "__main__":
    main()
