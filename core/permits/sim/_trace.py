"""Recorded requests, replayed: a trace's rows as :class:`Call` s, and :func:`replay`.

A trace is CSV with a header row, or JSON lines (one object a line); its
columns: ``at`` (seconds from the start, in time order) and ``level``, and
optionally ``cost`` (units of every limit, default 1), ``flow`` (a tenant's
name; a whole number in JSON lines is its digits, as in CSV; empty: none,
and ``''`` the name that is the empty string), ``timeout``
(seconds after which the limiter expires the caller still waiting: it
asked with ``acquire(timeout=...)``), ``max_wait`` (seconds: the caller
asked with ``acquire(max_wait=...)``, and is refused if the limiter
estimates a longer wait) and ``give_up_after`` (seconds after which the
caller gave up on its own, still waiting: it was cancelled; 0: as it came,
never granted). A cost per
limit, as the core's mapping costs: in CSV a column ``cost.<limit>`` for
each limit named (in place of ``cost``; an empty cell: 0), in JSON lines
``"cost": {"tokens": 1500}`` (a limit not named: 0). Reading the file is
the caller's: :func:`read_trace` takes its lines (an open file will do) and
yields one call at a time, so a trace of millions of rows is never held in
memory. Blank lines (spaces and tabs too) are skipped. A malformed row
raises :class:`TraceError` naming its line; given the scenario's limits, a
CSV header naming another limit, the header's.
"""

from __future__ import annotations

import csv
import functools
import io
import itertools
import json
import operator
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from decimal import Context, Decimal, InvalidOperation
from typing import Any, NamedTuple

import attrs

from permits.core import MAX_LEVELS, Limit, PermitTypeError, PermitValueError
from permits.core.checks import NO_UNIT, check_hashable, level_range

from ._run import Result, _Admit, _run, check_scenario
from ._scenario import Batch, Scenario, Workload, more_levels, nanoseconds

__all__ = ["COLUMNS", "Call", "TraceError", "read_trace", "replay", "traced"]

#: A trace's columns: the first two required, the rest optional. In CSV,
#: ``cost.<limit>`` columns may stand in place of ``cost``.
COLUMNS = ("at", "level", "cost", "flow", "timeout", "max_wait", "give_up_after")
_REQUIRED = {"at", "level"}
_PER_LIMIT = "cost."
_BILLION = Decimal(1_000_000_000)
#: Nanoseconds in a unit of each decimal place of a second: ``_PLACE[k]`` for
#: the ``k``-th digit after the point (``_PLACE[0]``: whole seconds).
_PLACE: tuple[int, ...] = tuple(10 ** (9 - k) for k in range(10))
#: The most digits int() reads from text however Python is configured
#: (``sys.set_int_max_str_digits`` goes no lower than 640): a number of
#: more is a time read by Decimal, and too many for a level or a cost.
_DIGITS = 640
#: The largest power of ten of seconds a time may reach: an exponent written
#: past it (``1e999999999``) would make a number of that many digits (or
#: overflow Decimal), where a time written out in full costs its length.
_EXPONENT = 10_000


class TraceError(PermitValueError):
    """A trace row that does not read.

    :ivar line: the row's line number in the file (the first line is 1).
    """

    def __init__(self, line: int, field: str, value: object, reason: str) -> None:
        super().__init__(field, value, reason)
        self.line: int = line
        # (the message made above shows the value: one whose repr Python
        # refuses, an int of 10,000 digits, too)
        said = self.args[0] if value is not None else f"{field}: {reason}"
        self.args = (f"line {line}: {said}",)


class Call(NamedTuple):
    """One recorded request, its times in the core's nanoseconds (a trace's
    row, whose columns ``at``, ``timeout``, ``max_wait`` and
    ``give_up_after`` are seconds,
    read exactly). (A named tuple: a trace of millions of rows makes
    millions of them.)"""

    #: When it arrived, in nanoseconds from the start of the trace.
    at_ns: int
    level: int
    #: Units of every limit, or units per limit by name (a limit not named: 0).
    cost: int | Mapping[str, int] = 1
    flow: Hashable = None
    #: After how many nanoseconds the limiter expires it, still waiting
    #: (``acquire(timeout=...)``); ``None``: it waits as long as it takes.
    timeout_ns: int | None = None
    #: Its line in the trace (for errors); 0 for a call made otherwise.
    line: int = 0
    #: The longest wait it would take at all, in nanoseconds
    #: (``acquire(max_wait=...)``): refused on arrival if the limiter
    #: estimates a longer one; ``None``: any.
    max_wait_ns: int | None = None
    #: After how many nanoseconds it gave up on its own, still waiting
    #: (cancelled); 0: as it came, before anything was decided for it (a
    #: permit free then goes to the next caller); ``None``: it did not.
    give_up_after_ns: int | None = None


_made = Call.__new__
_made_of = Call._make


@functools.wraps(_made)
def _made_in_code(cls: type[Call], *args: Any, **kwargs: Any) -> Call:
    """A call made in code, its times checked: ints of nanoseconds, or
    refused naming the field (a float ``at_ns`` was refused in the replay,
    as the machine's ``now``), and its flow hashable. Checked here, once,
    not in the replay's loop; :func:`read_trace` makes its calls without
    it, from cells it has checked."""
    return _checked(_made(cls, *args, **kwargs))


@functools.wraps(_made_of)
def _made_of_values(cls: type[Call], iterable: Iterable[Any]) -> Call:
    """A call made of its fields' values (``Call._make``, and so
    ``call._replace``: a recording's calls changed in code), checked as
    one made in code is."""
    return _checked(_made_of.__func__(cls, iterable))  # type: ignore[attr-defined]


def _checked(call: Call) -> Call:
    """``call``, its times and flow checked (see :func:`_made_in_code`)."""
    at_ns, _, _, _, timeout_ns, _, max_wait_ns, give_up_after_ns = call
    if at_ns.__class__ is not int and (isinstance(at_ns, bool) or not isinstance(at_ns, int)):
        raise PermitTypeError("at_ns", at_ns, "an int of nanoseconds")
    for field, value in (
        ("timeout_ns", timeout_ns),
        ("max_wait_ns", max_wait_ns),
        ("give_up_after_ns", give_up_after_ns),
    ):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise PermitTypeError(field, value, "an int of nanoseconds, or None")
    check_hashable("flow", call.flow, "a hashable value (a tenant's name, a key)")
    return call


Call.__new__ = staticmethod(_made_in_code)  # type: ignore[assignment]
Call._make = classmethod(_made_of_values)  # type: ignore[assignment]


def _ns(line: int, field: str, value: object) -> int:
    """Seconds as exact nanoseconds: the decimal as written (a float as it
    prints), nearest nanosecond."""
    text = value if value.__class__ is str else repr(value)
    whole, _, fraction = text.partition(".")
    digits = whole + fraction
    if digits.isdigit() and digits.isascii() and len(fraction) <= 9 and len(whole) <= _DIGITS:
        # The common case, plain digits (a bool's repr is not): no Decimal.
        return int(digits) * _PLACE[len(fraction)]
    if (
        isinstance(value, bool)
        or not isinstance(value, (str, int, float))
        or "_" in text
        or not text.strip().isascii()  # (spaces around it, a no-break one too, are not)
    ):
        # (Decimal reads 1_0 as 10, and another script's digits, ٣ as 3; a
        # level or cost written so is refused too)
        raise TraceError(line, field, value, "expected a number of seconds")
    try:
        exact = Decimal(value.strip() if isinstance(value, str) else repr(value))
    except InvalidOperation:
        raise TraceError(line, field, value, "expected a number of seconds") from None
    if not exact.is_finite() or exact < 0:
        raise TraceError(line, field, value, "must be a finite number >= 0")
    if exact and exact.adjusted() > _EXPONENT:
        raise TraceError(line, field, value, f"must be under 1e{_EXPONENT + 1} s")
    # Exact: in a context of as many digits as the product has (the current
    # one's, 28 by default, would round a time of more significant digits).
    wide = Context(prec=len(exact.as_tuple().digits) + len(_BILLION.as_tuple().digits))
    return round(wide.multiply(exact, _BILLION))


#: The nanoseconds of the timeouts, max_waits and give-ups read as text, by text: a
#: trace repeats a few (a level's timeout, say) row after row. At most
#: _WAITS_KEPT of them, then it starts again: memory, not behaviour.
_WAITS: dict[str, int] = {}
_WAITS_KEPT = 1024


def _wait_ns(line: int, field: str, value: object) -> int:
    """A timeout, max_wait or give_up_after, as :func:`_ns` reads it (a text read before
    is not read again)."""
    if value.__class__ is not str:
        return _ns(line, field, value)
    ns = _WAITS.get(value)
    if ns is None:
        ns = _ns(line, field, value)
        if len(_WAITS) >= _WAITS_KEPT:
            _WAITS.clear()
        _WAITS[value] = ns
    return ns


#: The levels a policy may have, as a CSV cell writes them: one look-up
#: each (any other text is read by _int).
_LEVELS = {str(n): n for n in range(MAX_LEVELS)}


def _int(line: int, field: str, value: object, minimum: int) -> int:
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit() and text.isascii():
            if len(text) > _DIGITS:
                reason = f"{len(text):,} digits, too many for a whole number"
                raise TraceError(line, field, f"{text[:20]}...", reason)
            value = int(text)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceError(line, field, value, f"expected a whole number >= {minimum}")
    if value < minimum:
        raise TraceError(line, field, value, f"must be at least {minimum}")
    return value


def _one_cost(line: int, cost: object) -> int:
    """A row's one cost, for every limit: a whole number of units, at least
    one (a negative one refused by the rule that refuses 0)."""
    if isinstance(cost, str):
        digits = cost.strip().removeprefix("-")
        if digits.isdigit() and digits.isascii() and len(digits) <= _DIGITS:
            cost = int(cost)
    if isinstance(cost, int) and not isinstance(cost, bool) and cost < 1:
        raise TraceError(line, "cost", cost, NO_UNIT)
    return _int(line, "cost", cost, 1)


def _call(
    line: int,
    at: object,
    level: object,
    cost: object,
    flow: object,
    timeout: object,
    max_wait: object,
    give_up: object,
    previous: int,
) -> Call:
    """The call of a row's cells (``None`` or ``""``: absent), checked; its
    ``at`` no earlier than ``previous``."""
    if at is None or at == "":
        raise TraceError(line, "at", None, "missing")
    if level is None or level == "":
        raise TraceError(line, "level", None, "missing")
    at_ns = _ns(line, "at", at)
    if at_ns < previous:
        raise TraceError(
            line, "at", at, f"earlier than the row before ({_shown(previous)} s): sort by at"
        )
    if flow.__class__ is not str and (
        isinstance(flow, bool) or not isinstance(flow, (str, int, type(None)))
    ):
        raise TraceError(line, "flow", flow, "expected a name (a string) or a whole number")
    listed = _LEVELS.get(level) if level.__class__ is str else None  # (one look-up)
    return _new(
        Call,
        (
            at_ns,
            _int(line, "level", level, 0) if listed is None else listed,
            1
            if cost is None or cost == "" or cost == "1"
            else _costs(line, cost)
            if cost.__class__ is dict
            else _one_cost(line, cost),
            # (a str or None: a JSON line's whole number was made its digits)
            None if not flow else _unquoted(flow) if flow[:2] == "''" else flow,  # type: ignore[index, arg-type]
            None if timeout is None or timeout == "" else _wait_ns(line, "timeout", timeout),
            line,
            None if max_wait is None or max_wait == "" else _wait_ns(line, "max_wait", max_wait),
            None if give_up is None or give_up == "" else _wait_ns(line, "give_up_after", give_up),
        ),
    )


def _quoted(flow: str) -> str:
    """A flow's cell: its name; the empty string, which an empty cell (no
    flow) would lose, as ``''``, and so each name of apostrophes alone with
    two more (``'`` as ``'''``), so that every name reads back as itself."""
    return f"''{flow}" if not flow.strip("'") else flow


def _unquoted(cell: str) -> str:
    """The flow of a cell that begins ``''``: of apostrophes alone, the
    name :func:`_quoted` wrote so (``''``: the empty string); another, as it is."""
    return cell if cell.strip("'") else cell[2:]


def _shown(ns: int) -> str:
    """``ns`` nanoseconds as seconds: exactly while that is short
    (``86400.123``, not ``86400.1``, which reads as earlier than a row's
    ``86400.12``), else to six digits (``1e+300``), past a float too."""
    if ns < 10**20:  # (1e11 s: over 3,000 years)
        return _seconds(ns)
    try:
        return f"{ns / 1_000_000_000:g}"
    except OverflowError:  # 1e309 ns and on
        return f"{Context(prec=6).create_decimal(ns).scaleb(-9).normalize():g}"


def _costs(line: int, cost: dict[str, object]) -> dict[str, int]:
    """A cost per limit (a JSON object, or a CSV row's ``cost.<limit>``
    cells but the empty ones), checked: limit names, each a whole number
    of units ``>= 0``, some unit of some limit in all."""
    units = {}
    for name, n in cost.items():
        if not name:
            raise TraceError(line, "cost", cost, "limit names must be non-empty strings")
        if isinstance(n, str) and n.isdigit() and n.isascii() and len(n) <= _DIGITS:  # a CSV cell
            units[name] = int(n)
        else:
            units[name] = _int(line, f"{_PER_LIMIT}{name}", n, 0)
    if not any(units.values()):
        raise TraceError(line, "cost", cost, NO_UNIT)
    return units


_new = tuple.__new__  # a Call without NamedTuple's slower __new__: one per row


def _unknown(line: int, keys: Iterable[str], per_limit: bool) -> None:
    """Raises for a key of ``keys`` that names no column (``per_limit``:
    ``cost.<limit>`` does)."""
    for key in keys:
        if key not in COLUMNS and not (
            per_limit and key.startswith(_PER_LIMIT) and key != _PER_LIMIT
        ):
            expected = ", ".join((*COLUMNS, "cost.<limit>") if per_limit else COLUMNS)
            reason = f"unknown column (expected some of: {expected})"
            if key.startswith(_PER_LIMIT):  # in CSV, "cost." alone
                reason += (
                    "; name the limit after the dot, as cost.tokens"
                    if per_limit
                    else '; a cost per limit is written "cost": {"<limit>": <units>}'
                )
            raise TraceError(line, key, None, reason)


_LINES = "the lines of a trace: an open file, or its text's splitlines(keepends=True)"


#: A JSON document whose calls are in one array, not a line each.
_ARRAY = (
    "a JSON array: a trace in JSON has one call per line, each an object "
    '({"at": 0.5, "level": 0}), with no array around them (JSON lines)'
)


def _refused(error: TraceError) -> Iterator[Call]:
    """A trace that raises ``error`` as it is read, as a malformed row does."""
    raise error
    yield  # (a generator: nothing is raised before the calls are asked for)


def read_trace(lines: Iterable[str], *, limits: Iterable[str] | None = None) -> Iterator[Call]:
    """The calls of a trace, one at a time, from its lines: JSON lines if the
    first non-blank line opens an object, else CSV with a header row (open
    a CSV file with ``newline=""``, as :mod:`csv` asks). A byte-order mark
    before the first line (a spreadsheet's UTF-8 export) is not part of it.

    ``limits``: the names of the limits the calls are for (a scenario's
    :attr:`~permits.sim.Scenario.named_limits` will do). With them, a CSV
    header with a ``cost.<limit>`` column for a limit not among them raises
    :class:`TraceError` at the header; without, :func:`replay` raises at
    the first row that costs it (as it does for a JSON line's)."""
    if isinstance(lines, (str, bytes)):  # read a character at a time, it says nothing useful
        raise PermitTypeError("lines", lines[:60], _LINES)  # (a file's text may be long)
    if isinstance(limits, str):
        raise PermitTypeError("limits", limits, "the names of limits, such as ['tokens']")
    try:
        source = iter(lines)
    except TypeError:
        raise PermitTypeError("lines", lines, _LINES) from None
    first = next(source, None)
    if first is None:
        return iter(())
    if not isinstance(first, str):  # a file opened in binary mode: lines of bytes
        raise PermitTypeError(
            "lines",
            first[:60] if isinstance(first, bytes) else first,
            "lines of text: open the file in text mode, open(path, newline='')",
        )
    source = itertools.chain([first.removeprefix("\ufeff")], source)
    number = 0
    for text in source:
        number += 1
        if text.strip():
            break
    else:
        return iter(())
    if text.lstrip().startswith("{"):
        return _json_calls(itertools.chain([(number, text)], enumerate(source, number + 1)))
    if text.lstrip().startswith("["):  # (no CSV header opens so)
        return _refused(TraceError(number, "row", text.strip()[:60], _ARRAY))
    return _csv_calls(number, text, source, None if limits is None else tuple(limits))


def _json_calls(numbered: Iterator[tuple[int, str]]) -> Iterator[Call]:
    previous = 0
    for number, text in numbered:
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            row = None
        except ValueError:  # an integer of more digits than int() reads from text
            raise TraceError(
                number, "row", text.strip()[:60], "a number too long to read"
            ) from None
        if not isinstance(row, dict):
            raise TraceError(number, "row", text.strip()[:60], "not a JSON object")
        cost = row.get("cost")
        if text.count('":') != len(row) + (len(cost) if cost.__class__ is dict else 0):
            _named_once(number, text)  # fewer keys than written: one twice, perhaps
        _unknown(number, row, per_limit=False)
        get = row.get
        flow = get("flow")
        if flow.__class__ is int:  # tenant 7 is tenant "7", as its CSV cell reads
            flow = str(flow)
        call = _call(
            number,
            get("at"),
            get("level"),
            get("cost"),
            flow,
            get("timeout"),
            get("max_wait"),
            get("give_up_after"),
            previous,
        )
        previous = call.at_ns
        yield call


class _Twice(NamedTuple):
    """A key a JSON object names twice (its place: ``cost.tokens``)."""

    key: str


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any] | _Twice:
    """A JSON object's keys and values, or the first key named twice in it
    or in an object within it (as ``json.loads`` would keep the last)."""
    row = dict(pairs)
    if len(row) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                return _Twice(key)
            seen.add(key)
    for key, value in pairs:
        if value.__class__ is _Twice:
            return _Twice(f"{key}.{value.key}")
    return row


def _named_once(number: int, text: str) -> None:
    """Raises for a key that line ``number``'s JSON object names twice, as
    a CSV header's column named twice is (a line whose text only seemed to
    name more keys than it has, a ``":`` in a string, passes)."""
    row = json.loads(text, object_pairs_hook=_once)
    if row.__class__ is _Twice:
        raise TraceError(number, row.key, None, "named twice")


def _csv_calls(
    number: int, header: str, source: Iterator[str], limits: Sequence[str] | None
) -> Iterator[Call]:
    # One reader for the header and the rows: a header cell quoted across
    # lines (a limit's name with a line break in it) is read whole.
    reader = csv.reader(itertools.chain([header], source), strict=True)
    try:
        names = [name.strip() for name in next(reader)]
    except csv.Error as error:
        raise TraceError(number, "header", None, f"not CSV: {error}") from None
    # A row's line number: the header's, less one, plus the lines read so far.
    before = number - 1
    for k, name in enumerate(names):
        if not name:  # a spreadsheet's trailing comma, say
            raise TraceError(number, f"column {k + 1}", None, "has no name in the header")
    _unknown(number, names, per_limit=True)
    for key in sorted(_REQUIRED - set(names)):
        raise TraceError(number, key, None, "missing from the header")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise TraceError(number, name, None, "named twice in the header")
        seen.add(name)
    # The cost per limit: each cost.<limit> column's index and limit.
    per_limit = [
        (k, name[len(_PER_LIMIT) :]) for k, name in enumerate(names) if name.startswith(_PER_LIMIT)
    ]
    if per_limit and "cost" in names:
        raise TraceError(number, "cost", None, "give cost or cost.<limit> columns, not both")
    if limits is not None:  # the scenario's: a column for another fails here, not at a row
        for _, limit in per_limit:
            if limit not in limits:
                raise _no_such_limit(number, limit, limits)
    width = len(names)
    # The cells of the columns, in COLUMNS' order: an absent one reads the
    # empty cell appended to each row.
    columns = operator.itemgetter(*(names.index(c) if c in names else width for c in COLUMNS))
    cells_of: Callable[[list[str]], tuple[object, ...]] = (
        _with_costs(columns, per_limit) if per_limit else columns
    )
    previous = 0
    try:
        for cells in reader:
            line = before + reader.line_num
            if not cells:  # a blank line
                continue
            if len(cells) != width:
                if len(cells) == 1 and not cells[0].strip():  # a line of spaces: blank too
                    continue
                shown = ",".join(cells)[:60]
                raise TraceError(
                    line,
                    "row",
                    shown,
                    f"{len(cells)} cell{'' if len(cells) == 1 else 's'}, the header has {width}",
                )
            cells.append("")
            at, level, cost, flow, timeout, max_wait, give_up = cells_of(cells)
            call = _call(line, at, level, cost, flow, timeout, max_wait, give_up, previous)
            previous = call.at_ns
            yield call
    except csv.Error as error:
        raise TraceError(before + reader.line_num, "row", None, f"not CSV: {error}") from None


def _with_costs(
    cells_of: Callable[[list[str]], tuple[object, ...]], per_limit: list[tuple[int, str]]
) -> Callable[[list[str]], tuple[object, ...]]:
    """``cells_of`` with a row's cost as its ``cost.<limit>`` cells by limit
    (but the empty ones: 0 units), for :func:`_costs` to read. (A function
    of its own, so that a row with one cost pays nothing for it.)"""

    def cells_with_costs(cells: list[str]) -> tuple[object, ...]:
        at, level, _, flow, timeout, max_wait, give_up = cells_of(cells)
        return (
            at,
            level,
            {limit: cells[k] for k, limit in per_limit if cells[k] != ""},
            flow,
            timeout,
            max_wait,
            give_up,
        )

    return cells_with_costs


def trace_lines(calls: Iterable[Call], limits: Sequence[str] | None = None) -> Iterator[str]:
    """The CSV lines of a trace of ``calls`` (a header, then a row a call),
    as :func:`read_trace` reads them back: times in seconds, exact to the
    nanosecond; levels and units as numbers; a flow as its ``str``. With
    ``limits`` (their names), a ``cost.<limit>`` column for each in place of
    ``cost``: a call's units of each (a cost that is one number: that many
    of each; a mapping: 0 of a limit it does not name). Without, every cost
    must be one number. A flow whose ``str`` is empty is written ``''`` (an
    empty cell is no flow), and one of apostrophes alone with two more."""
    if isinstance(calls, (str, bytes)) or not isinstance(calls, Iterable):
        raise PermitTypeError("calls", calls, "calls, such as read_trace(file) gives")
    if isinstance(limits, (str, bytes)):  # its letters read as names: cost.t, cost.o, ...
        raise PermitTypeError("limits", limits, "a sequence of limit names, such as ['tokens']")
    names = list(limits) if limits is not None else None
    if names is not None and (not names or len(set(names)) != len(names)):
        raise PermitValueError("limits", limits, "names each limit once, and at least one")
    costs = ["cost"] if names is None else [f"{_PER_LIMIT}{name}" for name in names]
    row = io.StringIO()
    writer = csv.writer(row, lineterminator="\n")
    # csv quotes a cell with the line terminator in it, not one with "\r"
    # alone (which read_trace's csv reads as the end of a line), nor one
    # with another character a text's splitlines() ends a line at (a
    # vertical tab, U+2028): a row with one, in a flow or a limit's name,
    # is written all quoted, so that its lines join again when read.
    quoted = csv.writer(row, lineterminator="\n", quoting=csv.QUOTE_ALL)
    header = ["at", "level", *costs, "flow", "timeout", "max_wait", "give_up_after"]
    (quoted if any(_breaks(cell) for cell in header) else writer).writerow(header)
    yield row.getvalue()
    for index, call in enumerate(calls):
        row.seek(0)
        row.truncate()
        units = _written_costs(call.cost, names)
        try:
            flow = "" if call.flow is None else _quoted(str(call.flow))
            timeout = "" if call.timeout_ns is None else _seconds(call.timeout_ns)
            limit = "" if call.max_wait_ns is None else _seconds(call.max_wait_ns)
            give_up = "" if call.give_up_after_ns is None else _seconds(call.give_up_after_ns)
            cells = [_seconds(call.at_ns), int(call.level), *units, flow, timeout, limit, give_up]
            (quoted if _breaks(flow) else writer).writerow(cells)
        except ValueError as error:
            if "integer string conversion" not in str(error):
                raise  # (a flow's own str that raises: the user's error, as it is)
            # an int of more digits than str gives (10**10000)
            raise PermitValueError(
                f"calls[{index}]",
                call,
                "holds an int of more digits than str writes (sys.get_int_max_str_digits()): "
                "give it a smaller time, level, cost or flow",
            ) from None
        except csv.Error as error:  # a NUL, before Python 3.11's csv
            raise PermitValueError(
                "flow",
                call.flow,
                f"cannot be written as CSV ({error}): name it without one "
                f"(calls[{index}], at {_seconds(call.at_ns)} s)",
            ) from None
        yield row.getvalue()


def _breaks(text: str) -> bool:
    """Whether ``text`` holds a character ``str.splitlines`` ends a line at."""
    return text.splitlines() not in ([], [text])


def _written_costs(cost: int | Mapping[str, int], names: list[str] | None) -> list[int]:
    """The cost cells of a row: one, or one per limit of ``names`` (each a
    plain ``int``: an ``(int, Enum)``'s ``str`` is its name)."""
    if isinstance(cost, int):
        return [int(cost)] if names is None else [int(cost)] * len(names)
    if names is None:
        raise PermitValueError("limits", None, f"a cost per limit ({dict(cost)}) needs limits")
    for name in cost:
        if name not in names:
            raise PermitValueError(
                "limits", names, f"a call's cost names limit {name!r}, not in them"
            )
    return [int(cost.get(name, 0)) for name in names]


def _seconds(ns: int) -> str:
    """``ns`` nanoseconds as an exact decimal of seconds (a negative one
    too: -5 is -0.000000005, not divmod's -1 and 999999995)."""
    whole, part = divmod(abs(ns), 10**9)
    return f"{'-' if ns < 0 else ''}{whole}.{part:09d}".rstrip("0").rstrip(".")


def traced(scenario: Scenario) -> Scenario:
    """``scenario`` with one workload per level of its policy, for a trace's
    calls: each named after the scenario's first workload of that level (its
    ``timeout``, ``give_up_after`` and ``max_wait`` apply to the calls of
    its level; a call's own ``timeout``, ``max_wait`` and ``give_up_after``
    come first),
    ``level N`` where it has none."""
    check_scenario(scenario)
    first: dict[int, Workload] = {}
    for workload in scenario.workloads:
        first.setdefault(workload.level, workload)
    taken = {w.name for w in scenario.workloads}
    workloads = []
    for level in range(scenario.policy.levels):
        known = first.get(level)
        if known is None:
            name = f"level {level}"
            while name in taken:  # a workload of another level has that name
                name += "'"
            taken.add(name)
            workloads.append(Workload(name, level, Batch(0)))
        else:
            workloads.append(attrs.evolve(known, arrivals=Batch(0), published=None))
    kept = {w.name for w in workloads}
    for i, requirement in enumerate(scenario.requirements):
        if requirement.workload not in kept:
            raise PermitValueError(
                f"requirements[{i}]",
                requirement.text,
                f"a trace's calls count as the first workload of their level, and "
                f"{requirement.workload!r} is not one: require it of "
                f"{_first_of(scenario, requirement.workload)!r} instead",
            )
    return attrs.evolve(scenario, workloads=workloads)


def _first_of(scenario: Scenario, name: str) -> str:
    """The name of the first workload of ``name``'s level in ``scenario``."""
    level = next(w.level for w in scenario.workloads if w.name == name)
    return next(w.name for w in scenario.workloads if w.level == level)


def replay(scenario: Scenario, calls: Iterable[Call]) -> Result:
    """Run the recorded ``calls`` (in time order) through ``scenario``'s
    limit and policy, for its ``seconds``, in place of its workloads
    (:func:`traced` says which workload each level's calls count as). Calls
    from ``seconds`` on are not read. A call the machine could never take
    (its level below 0 or beyond the policy's, its cost beyond a burst, a cost per
    limit naming a limit the scenario does not have) raises
    :class:`TraceError` naming its line; one made in code (read_trace
    refuses such rows) earlier than the call before it, or of a negative
    timeout or give-up, a :class:`~permits.core.PermitValueError` naming
    ``calls`` and showing it; calls that are no :class:`Call` (plain
    ``(at, level)`` pairs), a :class:`~permits.core.PermitTypeError`."""
    if isinstance(calls, (str, bytes)) or not isinstance(calls, Iterable):
        raise PermitTypeError(
            "calls", calls, "calls, such as read_trace(file) gives (not a file's name or text)"
        )
    scenario = traced(scenario)
    duration = nanoseconds("seconds", scenario.seconds)
    source = iter(calls)
    first = next(source, None)
    if first is not None:
        # The first only (calls are made alike), not each in the loop
        if not isinstance(first, Call):
            raise PermitTypeError(
                "calls",
                calls,
                f"calls (permits.sim.Call), such as read_trace(file) gives; the first is {first!r}",
            )
        source = itertools.chain((first,), source)
    return _run(scenario, duration, source, _admission(scenario))  # type: ignore[arg-type]


def _admission(scenario: Scenario) -> _Admit:
    """The check of a traced ``scenario``'s calls that the replay loop asks
    of a call not of one unit or of a level past the policy's (the loop's
    workload index is the call's level): the call's cost as units of every
    limit, or per limit in the scenario's order; raises :class:`TraceError`
    for a call the machine could never take."""
    levels = scenario.policy.levels
    limits = scenario.named_limits
    # A cost that is one number is units of every limit: the smallest burst
    # bounds it (named, where the scenario has several limits).
    name, burst = min(((name, limit.burst) for name, limit in limits.items()), key=lambda n: n[1])
    over = f"exceeds the burst of limit {name!r}" if len(limits) > 1 else "exceeds the burst"
    over = f"{over} ({burst:,})"

    def admit(line: int, level: int, cost: Any) -> int | tuple[int, ...]:
        if isinstance(level, bool) or not isinstance(level, int):  # (a call made in code)
            raise TraceError(line, "level", level, "expected an int")
        if level >= levels:
            raise TraceError(line, "level", level, more_levels(levels, level))
        if level < 0:
            raise TraceError(line, "level", level, level_range(levels))
        if isinstance(cost, bool) or not isinstance(cost, int):
            # A cost per limit, or none the machine takes (a call made in
            # code: a str, or a float that would have gone as units)
            return _per_limit(line, cost, limits)
        if cost > burst:
            raise TraceError(line, "cost", cost, f"{over}: it could never be granted")
        return cost

    return admit


def _per_limit(line: int, cost: object, limits: dict[str, Limit]) -> tuple[int, ...]:
    """A call's cost per limit as units of each of ``limits``, in order;
    raises :class:`TraceError` for a limit it names that is not one of
    them, or units over a limit's burst."""
    if not isinstance(cost, Mapping):
        raise TraceError(line, "cost", cost, "expected units, or units per limit by name")
    for name in cost:
        if name not in limits:
            raise _no_such_limit(line, name, limits)
    units = tuple(cost.get(name, 0) for name in limits)
    for (name, limit), n in zip(limits.items(), units, strict=True):
        if n > limit.burst:
            raise TraceError(
                line,
                f"{_PER_LIMIT}{name}",
                n,
                f"exceeds the burst ({limit.burst:,}): it could never be granted",
            )
    return units


def _no_such_limit(line: int, name: str, limits: Iterable[str]) -> TraceError:
    """The error for a cost of limit ``name``, not one of ``limits``."""
    known = ", ".join(map(repr, limits))
    reason = f"names no limit of the scenario (its limits: {known})"
    return TraceError(line, f"{_PER_LIMIT}{name}", None, reason)
