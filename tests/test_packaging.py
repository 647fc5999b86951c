"""What a user installs: the version, ``--version``, the wheel and sdist, typing,
and what a module whose extra is missing says.

The wheel and sdist are built once per module with ``python -m build`` (the
sdist first, then the wheel from it, as PyPI's users get them); mypy runs as
a subprocess on a user's script, against this editable install and against
the wheel installed in a throwaway virtual environment.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

import pytest

import permits
from permits.adapters._requires import requires_extra

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

#: Every package of ``permits`` (each must ship a py.typed).
PACKAGES = ("permits", "permits.core", "permits.sim", "permits.adapters", "permits.cli")

#: A user's script: every module the README imports from (permits.httpx,
#: .aiohttp and .testing sit beside the subpackages, in ``permits`` itself),
#: and what the main calls give, to the type.
USER_SCRIPT = """\
from typing import TYPE_CHECKING

import permits.testing
from permits.adapters import Permit, Recording
from permits.adapters.asyncio import Limiter, open_limiter
from permits.aiohttp import PermitsMiddleware
from permits.core import Fifo, Machine
from permits.httpx import AsyncPermitsTransport
from permits.sim import SEED, simulate

if TYPE_CHECKING:
    from typing_extensions import assert_type

machine: Machine = Machine(Fifo(), rate=10)
limiter: Limiter = Limiter(Fifo(), rate=10)
granted: int = simulate(SEED[0]).granted


async def main() -> int:
    async with open_limiter(Fifo(), rate=10) as opened:
        assert_type(opened, Limiter)
        assert_type(await opened.acquire(), Permit)
        assert_type(opened.record(), Recording)
        assert_type(AsyncPermitsTransport(opened), AsyncPermitsTransport)
        assert_type(PermitsMiddleware(opened), PermitsMiddleware)
    return 1


assert_type(permits.testing.run(main()), int)
"""


def run(
    *argv: str | Path, cwd: Path | None = None, alone: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run ``argv``; ``alone``: without PYTHONPATH and MYPYPATH, which would
    show it sources other than the installed ones."""
    env = None
    if alone:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    return subprocess.run(
        [str(arg) for arg in argv], capture_output=True, text=True, check=False, cwd=cwd, env=env
    )


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the sdist, the wheel built from it)."""
    out = tmp_path_factory.mktemp("dist")
    done = run(sys.executable, "-m", "build", "--outdir", out, ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    (sdist,) = out.glob("permits-*.tar.gz")
    (wheel,) = out.glob("permits-*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def wheel_python(dist: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh virtual environment with only the wheel of
    permits installed (its dependencies come from this environment's)."""
    venv = tmp_path_factory.mktemp("venv")
    done = run(sys.executable, "-m", "venv", "--without-pip", venv)
    assert done.returncode == 0, done.stderr
    python = venv / "bin" / "python"
    purelib = Path(
        run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip()
    )
    done = run(
        sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", purelib, dist[1]
    )
    assert done.returncode == 0, done.stderr
    # attrs and the rest, but not this checkout's editable permits: a .pth
    # file in a directory that a .pth file adds is not read.
    (purelib / "_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python


def test_version_is_the_distributions() -> None:
    assert permits.__version__ == importlib.metadata.version("permits")


def test_docstring_says_where_things_are() -> None:
    doc = permits.__doc__
    assert doc is not None
    for package in PACKAGES[1:]:
        assert package in doc


@pytest.mark.parametrize(
    "command",
    [[str(BIN / "permits"), "--version"], [sys.executable, "-m", "permits", "--version"]],
    ids=["command", "module"],
)
def test_version_option(command: list[str]) -> None:
    done = run(*command)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"permits {permits.__version__}\n"


def _package_dirs(names: list[str]) -> set[PurePosixPath]:
    return {PurePosixPath(name).parent for name in names if name.endswith("/__init__.py")}


def test_wheel_ships_every_package_typed_once_and_the_license(dist: tuple[Path, Path]) -> None:
    with zipfile.ZipFile(dist[1]) as wheel:
        names = wheel.namelist()
    assert names.count("permits/__init__.py") == 1
    assert len(names) == len(set(names))
    packages = _package_dirs(names)
    assert {str(p).replace("/", ".") for p in packages} == set(PACKAGES)
    for package in packages:
        assert f"{package}/py.typed" in names
    assert not [name for name in names if "__pycache__" in name]
    assert "permits/adapters/redis.lua" in names  # the shared limit's script
    dist_info = f"permits-{permits.__version__}.dist-info"
    assert f"{dist_info}/licenses/LICENSE" in names
    with zipfile.ZipFile(dist[1]) as wheel:
        metadata = wheel.read(f"{dist_info}/METADATA").decode()
        license_text = wheel.read(f"{dist_info}/licenses/LICENSE").decode()
    assert "License-Expression: MIT" in metadata
    assert "License-File: LICENSE" in metadata
    assert license_text == (ROOT / "LICENSE").read_text()


def test_sdist_ships_the_license_and_every_py_typed(dist: tuple[Path, Path]) -> None:
    with tarfile.open(dist[0]) as sdist:
        names = [PurePosixPath(name) for name in sdist.getnames()]
    top = PurePosixPath(f"permits-{permits.__version__}")
    assert top / "LICENSE" in names
    files = [str(name.relative_to(top)) for name in names]
    packages = _package_dirs(files)
    assert len(packages) == len(PACKAGES)
    for package in packages:
        assert f"{package}/py.typed" in files


def test_sdist_ships_the_scripts_the_readme_runs(dist: tuple[Path, Path]) -> None:
    """The README's set-up commands and the mutation run (`bash .ci/setup`,
    `.ci/run`, `bash .ci/mutation`) work from an unpacked sdist, which holds
    the tests and properties they run."""
    with tarfile.open(dist[0]) as sdist:
        names = {PurePosixPath(name).as_posix() for name in sdist.getnames()}
    top = f"permits-{permits.__version__}"
    for script in ("setup", "run", "mutation", "mutation-survivors"):
        assert f"{top}/.ci/{script}" in names, script


def test_wheel_install_imports_every_package(wheel_python: Path) -> None:
    code = (
        "import permits, " + ", ".join(PACKAGES[1:]) + "\n"
        "print(permits.__version__, permits.__file__, *permits.__path__)"
    )
    done = run(wheel_python, "-c", code, cwd=wheel_python.parent, alone=True)
    assert done.returncode == 0, done.stderr
    version, init, *path = done.stdout.split()
    assert version == permits.__version__
    assert Path(init).is_relative_to(wheel_python.parent.parent)  # not this checkout
    assert len(path) == 1  # one directory: the wheel's


def _mypy(tmp_path: Path, *options: str | Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    # cwd=tmp_path: not this checkout's configuration (mypy_path would find
    # the sources whatever is installed).
    return run(
        BIN / "mypy", "--strict", "--no-incremental", *options, script, cwd=tmp_path, alone=True
    )


def test_mypy_strict_on_a_users_script_editable(tmp_path: Path) -> None:
    done = _mypy(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_on_a_users_script_wheel(tmp_path: Path, wheel_python: Path) -> None:
    done = _mypy(tmp_path, "--python-executable", wheel_python)
    assert done.returncode == 0, done.stdout + done.stderr


#: Each module that needs an extra: (module, extra, the packages the extra
#: brings that the module imports).
OPTIONAL = [
    ("permits.adapters.trio", "trio", ("trio",)),
    ("permits.adapters.anyio", "anyio", ("anyio",)),
    ("permits.adapters.redis", "redis", ("redis", "anyio")),
    ("permits.adapters._resp", "redis", ("redis",)),
    ("permits.adapters.prometheus", "prometheus", ("prometheus_client",)),
]

#: Every package an extra brings (pyproject.toml's optional-dependencies).
EXTRAS = ("trio", "anyio", "redis", "prometheus_client", "matplotlib")

IMPORT_HIDDEN = """\
import importlib, json, sys
module, hidden = sys.argv[1], sys.argv[2:]
for name in hidden:
    sys.modules[name] = None  # as if not installed: importing it fails
try:
    importlib.import_module(module)
except ImportError as error:
    print(json.dumps([isinstance(error, ModuleNotFoundError), error.name, str(error)]))
else:
    print(json.dumps(None))
"""


def import_hidden(module: str, *hidden: str) -> list[object] | None:
    """Import ``module`` in a fresh interpreter where ``hidden`` are not
    installed: None, or (a ModuleNotFoundError?, its name, its message)."""
    done = run(sys.executable, "-c", IMPORT_HIDDEN, module, *hidden)
    assert done.returncode == 0, done.stderr
    answer: list[object] | None = json.loads(done.stdout)
    return answer


@pytest.mark.parametrize(
    ("module", "extra", "hidden"),
    [(m, e, h) for m, e, packages in OPTIONAL for h in packages],
    ids=[f"{m.rpartition('.')[2]}-without-{h}" for m, _, packages in OPTIONAL for h in packages],
)
def test_missing_extra_names_what_to_install(module: str, extra: str, hidden: str) -> None:
    assert import_hidden(module, hidden) == [
        True,
        hidden,
        f"{module} needs {hidden}: pip install 'permits[{extra}]'",
    ]


def test_every_module_that_needs_an_extra_says_so() -> None:
    """With every extra missing, the modules that fail to import are exactly
    those of OPTIONAL, each naming its extra (a new adapter that imports a
    package of an extra bare fails here)."""
    failing = {}
    for path in sorted((ROOT / "adapters" / "permits").rglob("*.py")):
        parts = path.relative_to(ROOT / "adapters").with_suffix("").parts
        if parts[-1] in ("__init__", "__main__"):
            parts = parts[:-1]
        module = ".".join(parts)
        answer = import_hidden(module, *EXTRAS)
        if answer is not None:
            failing[module] = answer[2]
    assert set(failing) == {m for m, _, _ in OPTIONAL}, failing
    for module, extra, packages in OPTIONAL:
        says = {f"{module} needs {p}: pip install 'permits[{extra}]'" for p in packages}
        assert failing[module] in says


def test_requires_extra_passes_other_import_errors_on() -> None:
    with pytest.raises(ModuleNotFoundError) as raised, requires_extra("m", "x", "wanted"):
        import permits_no_such_package  # type: ignore[import-not-found]  # noqa: F401
    assert raised.value.name == "permits_no_such_package"
    assert str(raised.value) == "No module named 'permits_no_such_package'"
    with pytest.raises(ModuleNotFoundError) as raised, requires_extra("m", "x", "permits_no"):
        import permits_no.such  # type: ignore[import-not-found]  # noqa: F401
    assert raised.value.name == "permits_no"
    assert str(raised.value) == "m needs permits_no: pip install 'permits[x]'"


def test_wheel_ships_the_examples_and_runs_them(
    dist: tuple[Path, Path], wheel_python: Path
) -> None:
    """``pip install permits`` then ``permits simulate --example mixed``."""
    with zipfile.ZipFile(dist[1]) as wheel:
        names = wheel.namelist()
    shipped = sorted(n for n in names if n.startswith("permits/cli/examples/"))
    here = ROOT / "adapters" / "permits" / "cli" / "examples"
    assert shipped == sorted(f"permits/cli/examples/{p.name}" for p in here.glob("*.toml"))
    done = run(wheel_python, "-m", "permits", "examples", cwd=wheel_python.parent, alone=True)
    assert done.returncode == 0, done.stderr
    assert "mixed" in done.stdout
    done = run(
        wheel_python,
        "-m",
        "permits",
        "simulate",
        "--example",
        "mixed",
        cwd=wheel_python.parent,
        alone=True,
    )
    assert done.returncode == 0, done.stderr
    assert "strict priority, 3 levels" in done.stdout
