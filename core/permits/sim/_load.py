"""Scenarios from data: the tables of a scenario file, already parsed.

Reading the file is the caller's (the ``permits`` command reads TOML); this
module only checks the data and builds :class:`Scenario` s, so it stays pure.
Every key is checked: a missing, misspelt or unknown one is an error naming
its place (``scenario[0].workload[1].rate``), never ignored.

The shape, in TOML::

    [[scenario]]
    name = "strict priority, interactive 20/s"
    policy = "strict"            # optional (FIFO); or a table: { kind = "aging", after = 2 }
    rate = 100                   # permits per second
    seconds = 10                 # length of the run
    burst = 1                    # optional, default 1
    max_waiting = 500            # optional: per level, or a list, one per level
    flow_weights = { acme = 3 }  # optional: the flows' weights (others weigh 1)
    max_waiting_per_flow = 100   # optional: the most waiters one flow may have queued
    flow_limit = "units"         # optional: the limit whose units flows share (the first;
                                 # "units" is the one limit of rate and burst)
    seed = 0                     # optional: fixes Poisson arrivals
    require = ["interactive p99 <= 50 ms", "batch share >= 20%"]   # optional

    [[scenario.workload]]
    name = "interactive"
    level = 0
    arrivals = "constant"        # "batch", "constant" or "poisson"
    rate = 20                    # constant and poisson: arrivals per second
    start = 0.005                # optional; also stop = ...
    timeout = 3                  # optional: seconds after which the limiter expires the caller
                                 # (0: it takes only a permit free on arrival)
    give_up_after = 1.5          # optional: seconds after which the caller gives up (cancels)
    max_wait = 0.5               # optional: refused at once if the wait would be longer

    [[scenario.workload]]
    name = "batch"
    level = 1
    arrivals = "batch"
    size = 1000                  # batch: how many, queued at once
    at = 0                       # optional

In place of ``rate`` and ``burst``, ``[scenario.limits]`` may name several
limits (``tokens = { per_minute = 90_000 }``, or ``per_second``,
``per_hour``; optional ``burst``); a workload's ``cost`` is a number, a draw
(``{ uniform = [low, high] }``, ``{ choice = [...] }``) or a table of those
by limit; its callers may name a ``flow`` or one of ``tenants = N`` (with
``zipf = s`` or ``heaviest = fraction``), and ``fair = false`` counts them
by tenant without naming the flows to the limiter.

Policies: ``"fifo"``, ``"strict"`` (optional ``levels``, default 2),
``"shares"`` (``weights = [4, 1]`` or ``every = 5``) and ``"aging"``
(optional ``levels``, default 2, and ``after`` in seconds, default 2).
Requirements: see :class:`~permits.sim.Requirement`. README.md documents
the format for users. A workload may also carry
``published = { granted = 797, wait_p99 = 0.0103 }``: figures from
elsewhere, printed beside the simulated ones.
"""

from __future__ import annotations

import contextlib
import math
import re
import reprlib
from collections.abc import Callable, Mapping
from typing import Any

from permits.core import (
    Aging,
    Fifo,
    Limit,
    PermitError,
    PermitTypeError,
    PermitValueError,
    Policy,
    Shares,
    StrictPriority,
)

from ._require import Requirement
from ._run import MAX_ARRIVALS, check_arrivals
from ._scenario import (
    MAX_LIMITS,
    UNDER_A_NANOSECOND,
    Arrivals,
    Batch,
    Choice,
    Constant,
    Poisson,
    Published,
    Scenario,
    Tenants,
    Uniform,
    Workload,
    nanoseconds,
)

__all__ = ["ScenarioError", "load_policy", "load_scenarios"]

_MISSING = object()


class ScenarioError(PermitValueError):
    """Scenario data with a missing, unknown or bad field.

    :ivar argument: where the field is, as ``scenario[0].workload[1].rate``.
    """

    def __init__(self, field: str, value: object, reason: str) -> None:
        super().__init__(field, value, reason)
        if value is _MISSING:
            self.value: object = None
            self.args = (f"{field}: {reason}",)
        else:  # a value that is huge or nested deep is shown cut short
            # (an int of 10,001 digits, whose repr raises: as the message made above shows it)
            with contextlib.suppress(ValueError):
                self.args = (f"{field}={_REPR.repr(value)}: {reason}",)


_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = _REPR.maxother = 60


def _table(path: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ScenarioError(path, value, f"expected a table, got {type(value).__name__}")
    return value


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _keys(path: str, table: Mapping[str, Any], required: set[str], optional: set[str]) -> None:
    for key in table:
        if key not in required and key not in optional:
            allowed = ", ".join(sorted(required | optional))
            raise ScenarioError(
                _at(path, key), table[key], f"unknown key (expected one of: {allowed})"
            )
    for key in sorted(required):
        if key not in table:
            raise ScenarioError(_at(path, key), _MISSING, "missing")


#: The Python API's words that a scenario file has no use for, and the file's.
_FILE_WORDS = (
    ("an int, float, Fraction or Decimal", "a number"),
    (" (or None)", " (or left out: none)"),
    (
        "an int, Uniform or Choice",
        "a whole number, { uniform = [low, high] } or { choice = [...] }",
    ),
)


def _as_written(value: object) -> object:
    """``value`` as a scenario file writes it: a draw as its table, a
    tuple as an array, within a table too (what a refusal shows of it)."""
    if isinstance(value, Uniform):
        return {"uniform": [value.low, value.high]}
    if isinstance(value, Choice):
        return {"choice": list(value.values)}
    if isinstance(value, tuple):
        return [_as_written(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_written(item) for key, item in value.items()}
    return value


def _in_file_words(text: str) -> str:
    for python, file in _FILE_WORDS:
        text = text.replace(python, file)
    return text


def _build(path: str, make: Callable[[], Any], names: Mapping[str, str] | None = None) -> Any:
    """Call ``make``; an argument error in it is re-raised naming its place
    (an argument in ``names`` by the key it was written as), in a scenario
    file's words (a number, not a Fraction; a key left out, not None)."""
    try:
        return make()
    except ScenarioError:
        raise
    except PermitTypeError as error:
        raise ScenarioError(
            _place(path, _renamed(error.argument, names)),
            _as_written(error.value),
            f"expected {_in_file_words(error.expected)}, got {error.got}",
        ) from None
    except PermitValueError as error:
        raise ScenarioError(
            _place(path, _renamed(error.argument, names)),
            _as_written(error.value),
            _in_file_words(error.reason),
        ) from None


def _renamed(argument: str, names: Mapping[str, str] | None) -> str:
    """``argument`` with its name (before an entry: ``values`` of
    ``values[1]``) as ``names`` says it was written in the file."""
    head = re.match(r"[^\[.]*", argument)
    assert head is not None  # (matches the empty string at least)
    name = head.group()
    return (names or {}).get(name, name) + argument[len(name) :]


def _place(path: str, argument: str) -> str:
    """A :class:`Scenario` argument's place in the file: a cost's or the
    limits' entry as the file's tables write it (``cost.tokens``, not
    ``cost['tokens']``)."""
    argument = argument.replace("workloads[", "workload[").replace("requirements[", "require[")
    argument = re.sub(
        r"(cost|limits)\['([^'\\]*)'\]", lambda m: f"{m.group(1)}.{m.group(2)}", argument
    )
    return f"{path}.{argument}"


_POLICY_KEYS = {
    "fifo": {"levels"},
    "strict": {"levels"},
    "shares": {"weights", "every"},
    "aging": {"levels", "after"},
}


def _policy(path: str, value: object) -> Policy:
    spec: dict[str, Any] = {"kind": value} if isinstance(value, str) else dict(_table(path, value))
    kind = spec.get("kind", _MISSING)
    if kind is _MISSING:
        raise ScenarioError(f"{path}.kind", _MISSING, "missing")
    if not isinstance(kind, str) or kind not in _POLICY_KEYS:
        known = ", ".join(repr(k) for k in _POLICY_KEYS)
        raise ScenarioError(
            path if isinstance(value, str) else f"{path}.kind",
            kind,
            f"unknown policy (expected one of: {known})",
        )
    _keys(path, spec, {"kind"}, _POLICY_KEYS[kind])
    if kind == "shares":
        if ("weights" in spec) == ("every" in spec):
            raise ScenarioError(path, value, "shares needs exactly one of weights or every")
        if "every" in spec:
            return _build(  # type: ignore[no-any-return]
                path, lambda: Shares.every(spec["every"]), {"n": "every"}
            )
        return _build(path, lambda: Shares(spec["weights"]))  # type: ignore[no-any-return]
    levels = spec.get("levels", 2)
    if kind == "fifo":
        return _build(path, lambda: Fifo(levels))  # type: ignore[no-any-return]
    if kind == "strict":
        return _build(path, lambda: StrictPriority(levels))  # type: ignore[no-any-return]
    after = spec.get("after", 2)
    after_ns = _build(path, lambda: _after(after))
    return _build(path, lambda: Aging(levels, after_ns=after_ns))  # type: ignore[no-any-return]


def load_policy(value: object, levels: int, field: str = "policy") -> Policy:
    """A policy written as in a scenario file (``"strict"``, ``{ kind =
    "aging", after = 2 }``), over ``levels`` levels unless it says how many;
    a :class:`ScenarioError` naming ``field`` if it is bad."""
    if isinstance(value, str):
        if value not in _POLICY_KEYS:
            return _policy(field, value)  # says which kinds there are
        value = {"kind": value}
    spec = dict(_table(field, value))
    if spec.get("kind") in ("fifo", "strict", "aging"):
        spec.setdefault("levels", levels)
    return _policy(field, spec)


#: Why an aging's ``after`` of 0 s or less is refused: 0 would be read as
#: "no aging" (strict priority) as well as "the level never counts" (FIFO).
_AFTER_POSITIVE = (
    "must be greater than 0, the seconds of waiting worth one level "
    "(for no aging, strict; for the level not to count, fifo)"
)


def _after(value: object) -> int:
    # (a negative value is refused in these words too: "at least 0" would not do)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        raise PermitValueError("after", value, _AFTER_POSITIVE)
    ns = nanoseconds("after", value)
    if ns == 0:
        reason = UNDER_A_NANOSECOND if value > 0 else _AFTER_POSITIVE  # type: ignore[operator]
        raise PermitValueError("after", value, reason)
    return ns


_ARRIVAL_KEYS: dict[str, tuple[set[str], set[str]]] = {
    "batch": ({"size"}, {"at"}),
    "constant": ({"rate"}, {"start", "stop"}),
    "poisson": ({"rate"}, {"start", "stop"}),
}
_ARRIVALS: dict[str, type[Batch] | type[Constant] | type[Poisson]] = {
    "batch": Batch,
    "constant": Constant,
    "poisson": Poisson,
}
#: The keys of any arrivals: in a workload that names none, not unknown (its
#: ``arrivals`` is what is missing).
_ANY_ARRIVAL = {key for required, optional in _ARRIVAL_KEYS.values() for key in required | optional}
_WORKLOAD_KEYS = {"name", "level", "arrivals"}
_WORKLOAD_OPTIONAL = {"timeout", "give_up_after", "max_wait", "published", "cost", "flow", "fair"}
_TENANT_KEYS = {"tenants", "zipf", "heaviest"}
#: Keys a workload once had, and what they are called now.
_RENAMED = {"deadline": "timeout", "expire_after": "timeout"}
_DRAWS = {"uniform", "choice"}


def _units(path: str, value: object) -> Any:
    """One limit's cost: a number as written (the workload checks it), or a
    draw, ``{ uniform = [low, high] }`` or ``{ choice = [...] }``."""
    if not isinstance(value, Mapping):
        return value
    _keys(path, value, set(), _DRAWS)
    if len(value) != 1:
        raise ScenarioError(path, value, "give one of uniform = [low, high] or choice = [...]")
    ((kind, values),) = value.items()
    if kind == "choice":
        return _build(path, lambda: Choice(values), {"values": "choice"})
    if not isinstance(values, list) or len(values) != 2:
        raise ScenarioError(f"{path}.uniform", values, "expected [low, high]")
    return _build(path, lambda: Uniform(*values), {"low": "uniform[0]", "high": "uniform[1]"})


def _cost(path: str, value: object) -> Any:
    """A workload's cost: units of every limit (a number or a draw), or a
    table of them by limit."""
    if isinstance(value, Mapping) and not (value.keys() & _DRAWS):
        return {name: _units(f"{path}.{name}", units) for name, units in value.items()}
    return _units(path, value)


def _tenants(path: str, table: Mapping[str, Any]) -> Tenants | None:
    if "tenants" not in table:
        for key in ("zipf", "heaviest"):
            if key in table:
                raise ScenarioError(f"{path}.{key}", table[key], "needs tenants = N")
        return None
    return _build(  # type: ignore[no-any-return]
        path,
        lambda: Tenants(table["tenants"], table.get("zipf", 0), table.get("heaviest")),
        {"count": "tenants"},
    )


_PUBLISHED_KEYS = {"granted", "offered", "wait_p50", "wait_p99", "cleared_at", "note"}


def _workload(path: str, value: object) -> Workload:
    table = _table(path, value)
    kind = table.get("arrivals", _MISSING)
    if kind is not _MISSING and (not isinstance(kind, str) or kind not in _ARRIVAL_KEYS):
        known = ", ".join(repr(k) for k in _ARRIVAL_KEYS)
        raise ScenarioError(
            f"{path}.arrivals", kind, f"unknown arrivals (expected one of: {known})"
        )
    required, optional = _ARRIVAL_KEYS[kind] if isinstance(kind, str) else (set(), _ANY_ARRIVAL)
    for old, new in _RENAMED.items():
        if old in table:
            raise ScenarioError(
                _at(path, old), table[old], f"renamed: write {new} = ... (seconds after arrival)"
            )
    if isinstance(kind, str):
        for key in table:
            if key in _ANY_ARRIVAL and key not in required | optional:
                others = ", ".join(repr(k) for k, (r, o) in _ARRIVAL_KEYS.items() if key in r | o)
                takes = ", ".join(sorted(required | optional))
                raise ScenarioError(
                    _at(path, key),
                    table[key],
                    f"not a key of arrivals = {kind!r} (a key of {others}; {kind!r} takes {takes})",
                )
    _keys(path, table, _WORKLOAD_KEYS | required, _WORKLOAD_OPTIONAL | _TENANT_KEYS | optional)
    args = {key: table[key] for key in required | optional if key in table}
    arrivals: Arrivals = _build(path, lambda: _ARRIVALS[str(kind)](**args))
    published = None
    if "published" in table:
        published = _published(f"{path}.published", table["published"])
    cost = _cost(f"{path}.cost", table["cost"]) if "cost" in table else 1
    tenants = _tenants(path, table)
    if "flow" in table and tenants is not None:  # (Workload's error shows the Tenants made)
        raise ScenarioError(f"{path}.tenants", table["tenants"], "give flow or tenants, not both")
    return _build(  # type: ignore[no-any-return]
        path,
        lambda: Workload(
            table["name"],
            table["level"],
            arrivals,
            timeout=table.get("timeout"),
            give_up_after=table.get("give_up_after"),
            max_wait=table.get("max_wait"),
            published=published,
            cost=cost,
            flow=table.get("flow"),
            tenants=tenants,
            fair=table.get("fair", True),
        ),
    )


def _published(path: str, value: object) -> Published:
    figures = _table(path, value)
    _keys(path, figures, set(), _PUBLISHED_KEYS)
    for key, figure in figures.items():
        if key == "note":
            ok = isinstance(figure, str)
        elif key in ("granted", "offered"):
            ok = isinstance(figure, int) and not isinstance(figure, bool) and figure >= 0
        else:
            ok = (
                isinstance(figure, (int, float))
                and not isinstance(figure, bool)
                and 0 <= figure < math.inf  # --json writes no Infinity
            )
        if not ok:
            raise ScenarioError(f"{path}.{key}", figure, "not a valid figure")
    return Published(**figures)


def _requirement(path: str, i: int, text: object) -> Requirement:
    return _build(path, lambda: Requirement.parse(text, f"require[{i}]"))  # type: ignore[no-any-return]


_SCENARIO_KEYS = {"name", "seconds", "workload"}
_SCENARIO_OPTIONAL = {
    "rate",
    "limits",
    "policy",
    "burst",
    "max_waiting",
    "seed",
    "require",
    "flow_weights",
    "max_waiting_per_flow",
    "flow_limit",
}
_PER = {"per_second": Limit.per_second, "per_minute": Limit.per_minute, "per_hour": Limit.per_hour}


def _limits(path: str, value: object) -> dict[str, Limit]:
    """``[scenario.limits]``: each limit's name, ``per_second``,
    ``per_minute`` or ``per_hour``, and optionally its ``burst``."""
    table = _table(path, value)
    if not table or len(table) > MAX_LIMITS:
        raise ScenarioError(path, value, f"expected 1 to {MAX_LIMITS} limits")
    return {name: _limit(f"{path}.{name}", entry) for name, entry in table.items()}


def _limit(path: str, value: object) -> Limit:
    spec = _table(path, value)
    _keys(path, spec, set(), {*_PER, "burst"})
    given = [key for key in _PER if key in spec]
    if len(given) != 1:
        raise ScenarioError(path, value, f"give one of {', '.join(_PER)}")
    per = given[0]
    try:
        return _build(  # type: ignore[no-any-return]
            path, lambda: _PER[per](spec[per], burst=spec.get("burst")), {"count": per}
        )
    except ScenarioError as error:
        if error.argument != f"{path}.burst" or "burst" in spec:
            raise
        raise ScenarioError(
            error.argument, _MISSING, f"missing: {per}={spec[per]!r} is not a whole number"
        ) from None


def _scenario(path: str, value: object, max_arrivals: int | None) -> Scenario:
    table = _table(path, value)
    _keys(path, table, _SCENARIO_KEYS, _SCENARIO_OPTIONAL)
    entries = table["workload"]
    if not isinstance(entries, list) or not entries:
        raise ScenarioError(
            f"{path}.workload", entries, "expected one [[scenario.workload]] or more"
        )
    workloads = [_workload(f"{path}.workload[{j}]", entry) for j, entry in enumerate(entries)]
    if "policy" in table:
        policy = _policy(f"{path}.policy", table["policy"])
    else:  # FIFO over the levels the workloads use (compare runs its grid)
        top = max(range(len(workloads)), key=lambda j: workloads[j].level)
        level = workloads[top].level
        try:
            policy = Fifo(1 + level)
        except PermitValueError as error:  # more levels than a policy has: name the level
            raise ScenarioError(
                f"{path}.workload[{top}].level",
                level,
                f"needs a policy of {level + 1:,} levels, and a policy's levels {error.reason}",
            ) from None
    require = table.get("require", [])
    if not isinstance(require, list):
        raise ScenarioError(f"{path}.require", require, "expected a list of requirements")
    requirements = [_requirement(path, i, text) for i, text in enumerate(require)]
    max_waiting = table.get("max_waiting")
    if isinstance(max_waiting, list):
        max_waiting = tuple(max_waiting)
    limits = None
    if "limits" in table:
        for key in ("rate", "burst"):
            if key in table:
                raise ScenarioError(
                    f"{path}.{key}", table[key], "give rate and burst, or limits, not both"
                )
        limits = _limits(f"{path}.limits", table["limits"])
    elif "rate" not in table:
        raise ScenarioError(f"{path}.rate", _MISSING, "missing (or give [scenario.limits])")
    scenario: Scenario = _build(
        path,
        lambda: Scenario(
            table["name"],
            policy,
            table.get("rate"),
            table["seconds"],
            workloads,
            burst=table.get("burst", 1),
            max_waiting=max_waiting,
            seed=table.get("seed", 0),
            requirements=requirements,
            limits=limits,
            flow_weights=table.get("flow_weights"),
            max_waiting_per_flow=table.get("max_waiting_per_flow"),
            flow_limit=table.get("flow_limit"),
        ),
    )
    end = nanoseconds("seconds", scenario.seconds)
    for j, entry in enumerate(entries):
        # A workload that begins once the run has ended (a typo for 1.5, say)
        # would meet its every requirement, none of its callers come to judge.
        # Judged on the nanoseconds the run keeps, as it offers its callers.
        key = "at" if isinstance(workloads[j].arrivals, Batch) else "start"
        if key in entry and nanoseconds(key, entry[key]) >= end:
            rounded = ", to the nearest nanosecond" if entry[key] < scenario.seconds else ""
            raise ScenarioError(
                f"{path}.workload[{j}].{key}",
                entry[key],
                f"at or after the end of the run (seconds = {table['seconds']}){rounded}: "
                "no caller of it would come",
            )
    _build(path, lambda: check_arrivals(scenario, max_arrivals))
    return scenario


def load_scenarios(
    data: Mapping[str, Any], *, max_arrivals: int | None = MAX_ARRIVALS
) -> tuple[Scenario, ...]:
    """The scenarios of a parsed scenario file (``{"scenario": [...]}``).

    Raises :class:`ScenarioError` (a :class:`~permits.core.PermitValueError`)
    naming the first bad field, and the field that asks for the most callers
    of a scenario that asks for more than ``max_arrivals``
    (:func:`~permits.sim.check_arrivals`); a
    :class:`~permits.core.PermitTypeError` naming ``data`` for what is no
    parsed file (its name, say).
    """
    if not isinstance(data, Mapping):  # a path, the file's text or the file itself
        raise PermitTypeError(
            "data",
            data,
            "a parsed scenario file, such as tomllib.load(file) gives (the file opened "
            "in binary), not a file, its name or its text",
        )
    _keys("", data, {"scenario"}, set())
    entries = data["scenario"]
    if not isinstance(entries, list) or not entries:
        raise ScenarioError("scenario", entries, "expected one [[scenario]] table or more")
    try:
        return tuple(
            _scenario(f"scenario[{i}]", entry, max_arrivals) for i, entry in enumerate(entries)
        )
    except ScenarioError:
        raise
    except PermitError as error:  # pragma: no cover - every check above names its field
        raise ScenarioError("scenario", None, str(error)) from None
