"""Traces: recorded calls read one at a time, and replayed exactly."""

from __future__ import annotations

import csv
import enum
import io
import itertools
import json
import random
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import suppress
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from replays import replayed_as_live

from permits.core import (
    SECOND,
    Aging,
    Decision,
    Fifo,
    Limit,
    Machine,
    PermitTypeError,
    PermitValueError,
    Policy,
    Shares,
    State,
    StrictPriority,
)
from permits.sim import (
    SEED,
    Batch,
    Call,
    Constant,
    Poisson,
    Scenario,
    TraceError,
    Workload,
    arrivals,
    compare,
    nanoseconds,
    read_trace,
    replay,
    simulate,
)

CSV = """at,level,cost,flow,timeout,give_up_after
0,1,,,,0
0.25,0,2,acme,1.5,0.75

0.25,1,1,bulk,,
"""
JSONL = """{"at": 0, "level": 1, "give_up_after": 0}
{"at": 0.25, "level": 0, "cost": 2, "flow": "acme", "timeout": 1.5, "give_up_after": 0.75}

{"at": 0.25, "level": 1, "cost": 1, "flow": "bulk", "timeout": null, "give_up_after": null}
"""
CALLS = [
    Call(0, 1, give_up_after_ns=0),
    Call(SECOND // 4, 0, 2, "acme", 3 * SECOND // 2, give_up_after_ns=3 * SECOND // 4),
    Call(SECOND // 4, 1, 1, "bulk"),
]


@pytest.mark.parametrize("text", [CSV, JSONL], ids=["csv", "jsonl"])
def test_csv_and_json_lines_read_alike(text: str) -> None:
    calls = list(read_trace(text.splitlines(keepends=True)))
    assert [c._replace(line=0) for c in calls] == CALLS
    assert [c.line for c in calls] == ([2, 3, 5] if text is CSV else [1, 2, 4])
    assert list(read_trace([])) == []
    bom = ("\ufeff" + text).splitlines(keepends=True)  # as a spreadsheet exports UTF-8
    assert [c._replace(line=0) for c in read_trace(bom)] == CALLS
    # a line of spaces or tabs is as blank as an empty one (in CSV it was a
    # row of one cell: "1 cells, the header has 6")
    spaced = text.replace("\n\n", "\n  \t\n") + " \n"
    assert [c._replace(line=0) for c in read_trace(spaced.splitlines(keepends=True))] == CALLS


def test_a_json_lines_flow_reads_as_a_csv_cell_of_its_text() -> None:
    """A JSON string names its flow as the CSV cell of the same text does
    (README): ``""`` none, ``"''"`` the tenant named with the empty string,
    three apostrophes the tenant ``'``."""
    texts = ['""', "\"''\"", "\"'''\"", '"acme"']
    jsonl = [f'{{"at": 0, "level": 0, "flow": {text}}}\n' for text in texts]
    csv = ["at,level,flow\n", "0,0,\n", "0,0,''\n", "0,0,'''\n", "0,0,acme\n"]
    assert [c.flow for c in read_trace(jsonl)] == [None, "", "'", "acme"]
    assert [c.flow for c in read_trace(csv)] == [None, "", "'", "acme"]


def test_a_json_lines_flow_that_is_a_number_is_the_tenant_its_digits_name() -> None:
    """``"flow": 7`` and ``"flow": "7"`` are one tenant, as the CSV cell 7
    is (they were two, both shown as 7), and replay as the CSV does."""
    jsonl = '{"at": 0, "level": 0, "flow": 7}\n{"at": 0, "level": 0, "flow": "7"}\n'
    calls = list(read_trace(jsonl.splitlines(keepends=True)))
    assert [c.flow for c in calls] == ["7", "7"]
    scenario = Scenario("s", Fifo(1), 1, 5, [Workload("api", 0, Batch(0))])
    from_csv = replay(scenario, read_trace(["at,level,flow\n", "0,0,7\n", "0,0,7\n"]))
    assert replay(scenario, calls) == from_csv
    assert from_csv["api"].tenants == 1
    with pytest.raises(TraceError, match="line 1: flow=True: expected a name"):
        list(read_trace(['{"at": 0, "level": 0, "flow": true}\n']))
    with pytest.raises(TraceError) as raised:  # a number, but no whole one: said so
        list(read_trace(['{"at": 0, "level": 0, "flow": 7.0}\n']))
    assert str(raised.value) == ("line 1: flow=7.0: expected a name (a string) or a whole number")


def test_a_trace_in_one_json_array_says_to_write_a_call_a_line() -> None:
    """A JSON document of one array of calls (what ``json.dump`` of a list
    writes) was read as CSV, its first line a header: "column 3: has no
    name in the header". It is refused naming JSON lines, when read."""
    lines = ['[{"at": 0, "level": 0},\n', '{"at": 1, "level": 0}]\n']
    calls = read_trace(lines)  # (nothing is raised before the calls are asked for)
    with pytest.raises(TraceError) as raised:
        next(calls)
    assert raised.value.line == 1
    assert "a JSON array: a trace in JSON has one call per line" in str(raised.value)


def test_a_json_line_naming_each_key_once_reads_whatever_its_strings_hold() -> None:
    """A flow's name with ``":`` in it (which the check for a key named
    twice counts as a key) reads as written; so do spaces around colons."""
    lines = [
        '{"at": 0, "level": 0, "flow": "a\\":b", "cost": {"x": 2}}\n',
        '{"at" : 1, "level" : 1}\n',
    ]
    calls = list(read_trace(lines))
    assert [(c.at_ns, c.level, c.flow, c.cost) for c in calls] == [
        (0, 0, 'a":b', {"x": 2}),
        (SECOND, 1, None, 1),
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("at,level\n0,0\nsoon,1\n", "line 3: at='soon': expected a number of seconds"),
        ("at,level\n0,0\n-1,1\n", "line 3: at='-1': must be a finite number >= 0"),
        ("at,level\n0,0\nnan,1\n", "line 3: at='nan': must be a finite number >= 0"),
        ("at,level\n2,0\n1,1\n", "line 3: at='1': earlier than the row before (2 s): sort by at"),
        # the row before as it was, not to six digits (86400.1 s, seemingly before 86400.12)
        (
            "at,level\n86400.123,0\n86400.12,1\n",
            "line 3: at='86400.12': earlier than the row before (86400.123 s): sort by at",
        ),
        (
            "at,level\n1.0000001,0\n1.00000005,1\n",
            "line 3: at='1.00000005': earlier than the row before (1.0000001 s)",
        ),
        # the row before past a float in ns: OverflowError writing it (previous / 1e9)
        ("at,level\n1e300,0\n1,1\n", "line 3: at='1': earlier than the row before (1e+300 s)"),
        ("at,level\n1e9999,0\n1,1\n", "line 3: at='1': earlier than the row before (1e+9999 s)"),
        ("at,level\n0,0\n1,-1\n", "line 3: level='-1': expected a whole number >= 0"),
        ("at,level,cost\n0,0,0\n", "line 2: cost=0: must take at least one unit of some limit"),
        ("at,level,timeout\n0,0,-1\n", "line 2: timeout='-1': must be a finite number >= 0"),
        ("at,level,max_wait\n0,0,x\n", "line 2: max_wait='x': expected a number of seconds"),
        ("at,level\n0,0\n1_0,0\n", "line 3: at='1_0': expected a number of seconds"),
        ("at,level,timeout\n0,0,1_0.5\n", "line 2: timeout='1_0.5': expected a number of seconds"),
        # digits of another script: read as seconds by Decimal, where a level's are refused
        ("at,level\n0,0\n\u0663,0\n", "line 3: at='\u0663': expected a number of seconds"),
        ("at,level,timeout\n0,0,\uff11.5\n", "line 2: timeout='\uff11.5': expected a number of"),
        ("at,level\n0,\u0663\n", "line 2: level='\u0663': expected a whole number >= 0"),
        ('{"at": 0, "level": 0, "max_wait": -1}\n', "line 1: max_wait=-1: must be a finite"),
        # an exponent past any number Decimal holds, or of too many digits to make
        ("at,level\n0,0\n1e999999999,0\n", "line 3: at='1e999999999': must be under 1e10001 s"),
        ("at,level,timeout\n0,0,1E+20000\n", "line 2: timeout='1E+20000': must be under 1e"),
        ('{"at": "9e999999", "level": 0}\n', "line 1: at='9e999999': must be under 1e10001 s"),
        ("at,level\n0,0\n1\n", "line 3: row='1': 1 cell, the header has 2"),
        ("at,level\n0,0\n\n1.5e-1,0\n.5,1\n1.25,x\n", "line 6: level='x'"),
        ('at,level\n0,0\n"1\n', "line 3: row: not CSV"),
        ("at,level\n0,\n", "line 2: level: missing"),
        ("at,lvl\n0,0\n", "line 1: lvl: unknown column (expected some of: at, level, cost"),
        ("at\n0\n", "line 1: level: missing from the header"),
        ("at,level,\n0,0,\n", "line 1: column 3: has no name in the header"),
        ('{"at": 0, "level": 0}\n{"at": 1\n', "line 2: row='{\"at\": 1': not a JSON object"),
        ('{"at": 0, "level": 0, "weight": 2}\n', "line 1: weight: unknown column"),
        ('{"at": 0, "level": 0, "flow": [1]}\n', "line 1: flow=[1]: expected a name"),
        ('{"at": 0, "level": true}\n', "line 1: level=True: expected a whole number >= 0"),
        ('{"at": 0, "level": 0}\n' + "[" * 5000 + "\n", "line 2: row='[[[["),
        ("at,level,cost.tokens\n0,0,-5\n", "line 2: cost.tokens='-5': expected a whole number"),
        ("at,level,cost.tokens\n0,0,1.5\n", "line 2: cost.tokens='1.5': expected a whole number"),
        ("at,level,cost.a,cost.b\n0,0,0,\n", "line 2: cost={'a': '0'}: must take at least one"),
        ("at,level,cost,cost.a\n", "line 1: cost: give cost or cost.<limit> columns, not both"),
        ("at,level,cost.a,cost.a\n", "line 1: cost.a: named twice in the header"),
        # as a CSV header's column, a JSON line's key once (json.loads keeps the last)
        ('{"at": 0, "level": 0}\n{"at": 1, "level": 0, "at": 0}\n', "line 2: at: named twice"),
        ('{"at": 0, "level": 0, "cost": {"a": 1, "a": 9}}\n', "line 1: cost.a: named twice"),
        ('{"at" : 0, "level" : 0, "at" : 1}\n', "line 1: at: named twice"),
        (  # a CSV header: not the JSON lines' advice, '"cost": {"<limit>": <units>}'
            "at,level,cost.\n",
            "line 1: cost.: unknown column (expected some of: at, level, cost, flow, timeout, "
            "max_wait, give_up_after, cost.<limit>); name the limit after the dot, as cost.tokens",
        ),
        ('{"at": 0, "level": 0, "cost": {"tokens": -1}}', "line 1: cost.tokens=-1: must be at"),
        ('{"at": 0, "level": 0, "cost": {"tokens": 2.5}}', "line 1: cost.tokens=2.5: expected"),
        ('{"at": 0, "level": 0, "cost": {"tokens": true}}', "line 1: cost.tokens=True: expected"),
        ('{"at": 0, "level": 0, "cost": {"": 1}}', "line 1: cost={'': 1}: limit names must be"),
        ('{"at": 0, "level": 0, "cost": {}}', "line 1: cost={}: must take at least one unit"),
        ('{"at": 0, "level": 0, "cost": [1]}', "line 1: cost=[1]: expected a whole number >= 1"),
        (
            '{"at": 0, "level": 0, "cost.tokens": 1}',
            "line 1: cost.tokens: unknown column (expected",
        ),
        # more digits than int() reads from text (4,300 by default): one line, no ValueError
        ("at,level\n0," + "9" * 5000, "line 2: level='99999999999999999999...': 5,000 digits"),
        ("at,level,cost\n0,0," + "9" * 5000, "line 2: cost='99999999999999999999...': 5,000"),
        ("at,level,cost.a\n0,0," + "9" * 5000, "line 2: cost.a='99999999999999999999...': 5,0"),
        (
            '{"at": 0, "level": ' + "9" * 5000 + "}",
            'line 1: row=\'{"at": 0, "level": ' + "9" * 41 + "': a number too long to read",
        ),
    ],
)
def test_a_malformed_row_names_its_line(text: str, says: str) -> None:
    with pytest.raises(TraceError) as raised:
        list(read_trace(text.splitlines(keepends=True)))
    assert str(raised.value).startswith(says), str(raised.value)


def test_a_time_of_any_number_of_digits_reads_exactly() -> None:
    """``at`` and ``timeout`` written with more digits than int() reads from
    text read as exactly as in exponent form (and such an ``at`` is past
    any run's end, so a replay does not read it)."""
    huge = "1" + "0" * 5000
    (call,) = read_trace(["at,level,timeout\n", f"{huge},0,{huge}\n"])
    assert call.at_ns == call.timeout_ns == 10**5009
    scenario = Scenario("s", Fifo(1), rate=1, seconds=10, workloads=[Workload("w", 0, Batch(0))])
    result = replay(scenario, read_trace(["at,level\n", "0,0\n", f"{huge},0\n"]))
    assert result["w"].offered == 1


@pytest.mark.parametrize(
    "written",
    [
        "12345678901234567890.1234567891",  # a tenth of a nanosecond more: the same
        " 12345678901234567890.123456789",
        "+12345678901234567890.123456789",
        "1.2345678901234567890123456789e19",
    ],
)
def test_a_time_of_many_significant_digits_reads_exactly_in_any_form(written: str) -> None:
    """A time read through Decimal (exponent form, more than nine decimals,
    a sign, a space) is exact however many significant digits it has, as
    one written out plainly is: not rounded to Decimal's 28 digits, which
    would put it after the same time written plainly and refuse the trace
    as unsorted."""
    plain = "12345678901234567890.123456789"
    calls = list(read_trace(["at,level,timeout\n", f"{written},0,{written}\n", f"{plain},0,\n"]))
    exact = 12345678901234567890123456789
    assert [call.at_ns for call in calls] == [exact, exact]
    assert calls[0].timeout_ns == exact


def test_a_time_of_more_than_nine_decimals_reads_to_the_nearest_nanosecond() -> None:
    """P58: A time written finer than a nanosecond (read through Decimal) is the
    nearest whole nanosecond, ties to even, not truncated: 0.6 ns is 1,
    0.4 ns is 0, 2.5 ns past a second is 2 and 3.5 ns is 4."""
    rows = ["at,level,timeout\n", "0.0000000006,0,0.0000000004\n"]
    rows.append("1.00000000250,0,1.00000000350\n")
    calls = list(read_trace(rows))
    assert [(c.at_ns, c.timeout_ns) for c in calls] == [(1, 0), (1_000_000_002, 1_000_000_004)]


PER_LIMIT_CSV = """at,level,cost.requests,cost.tokens,flow
0,1,1,4000,
0.5,0,1,,acme
0.5,0,0,1500,
"""
PER_LIMIT_JSONL = """{"at": 0, "level": 1, "cost": {"requests": 1, "tokens": 4000}}
{"at": 0.5, "level": 0, "cost": {"requests": 1}, "flow": "acme"}
{"at": 0.5, "level": 0, "cost": {"tokens": 1500, "requests": 0}}
"""


def test_a_cost_per_limit_reads_alike_in_csv_and_json_lines() -> None:
    """``cost.<limit>`` columns in CSV, a ``cost`` object in JSON lines: a
    limit not named (an empty cell) costs 0, as in the core's mappings."""
    csv_calls = list(read_trace(PER_LIMIT_CSV.splitlines(keepends=True)))
    json_calls = list(read_trace(PER_LIMIT_JSONL.splitlines(keepends=True)))
    assert [c.cost for c in csv_calls] == [
        {"requests": 1, "tokens": 4000},
        {"requests": 1},
        {"requests": 0, "tokens": 1500},
    ]
    assert [c._replace(line=0) for c in csv_calls] == [c._replace(line=0) for c in json_calls]
    assert csv_calls[1].flow == "acme"


LLM = Scenario(
    "llm",
    StrictPriority(2),
    rate=None,
    seconds=60,
    limits={"tokens": Limit.per_minute(6000), "requests": Limit.per_minute(60, burst=2)},
    workloads=[
        Workload("chat", 0, Batch(0), cost={"requests": 1, "tokens": 1000}),
        Workload("summaries", 1, Batch(0), cost={"requests": 1, "tokens": 4000}),
    ],
)


def test_a_cost_per_limit_is_replayed_as_asked() -> None:
    """Each call takes what its row names of each limit, and nothing of the
    limits it does not name: the replay of the scenario's own calls is its
    simulation."""
    calls = list(read_trace(PER_LIMIT_CSV.splitlines(keepends=True)))
    result = replay(LLM, calls)
    assert result.limits == ("tokens", "requests")
    assert result["summaries"].units_per_limit == (4000, 1)
    assert result["chat"].units_per_limit == (1500, 1)
    assert result["chat"].tenants == 1
    own = attrs.evolve(
        LLM,
        workloads=[
            attrs.evolve(LLM.workloads[0], arrivals=Constant(1)),
            attrs.evolve(LLM.workloads[1], arrivals=Batch(10)),
        ],
    )
    costs = [{"requests": 1, "tokens": 1000}, {"requests": 1, "tokens": 4000}]
    trace = [Call(at, own.workloads[w].level, costs[w]) for at, w in arrivals(own, 60 * SECOND)]
    want, got = simulate(own), replay(LLM, trace)
    for g, w in zip(got.workloads, want.workloads, strict=True):
        assert g == w
        assert (g.waits_ns, g.timeline) == (w.waits_ns, w.timeline)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "at,level,cost.requests,cost.tokns\n0,0,1,10\n",
            "line 2: cost.tokns: names no limit of the scenario (its limits: 'tokens', 'requests')",
        ),
        (
            '{"at": 0, "level": 0}\n{"at": 1, "level": 1, "cost": {"tokens": 6001}}\n',
            "line 2: cost.tokens=6001: exceeds the burst (6,000): it could never be granted",
        ),
        (
            "at,level,cost.requests\n0,0,3\n",
            "line 2: cost.requests=3: exceeds the burst (2): it could never be granted",
        ),
        (
            '{"at": 0, "level": 0, "cost": 3}\n',
            "line 1: cost=3: exceeds the burst of limit 'requests' (2): it could never be granted",
        ),
        (
            "at,level,cost\n0,0,7000\n",
            "line 2: cost=7000: exceeds the burst of limit 'requests' (2): it could never be "
            "granted",
        ),
    ],
)
def test_a_cost_the_scenarios_limits_could_never_grant_names_its_line(text: str, says: str) -> None:
    with pytest.raises(TraceError) as raised:
        replay(LLM, read_trace(text.splitlines(keepends=True)))
    assert str(raised.value) == says
    with pytest.raises(TraceError, match="cost='3': expected units, or units per limit by name"):
        replay(LLM, [Call(0, 0, "3")])  # type: ignore[arg-type]  # a call made by hand


def test_a_header_naming_a_limit_the_scenario_lacks_fails_at_the_header() -> None:
    """Given the scenario's limits, a CSV header with a ``cost.<limit>``
    column for another limit fails at the header, before any row is read;
    a header of its limits, or of one cost, reads as it does without them.
    (Without the limits, replay says so at the first row: above.)"""

    def rows() -> Iterator[str]:
        raise AssertionError("a row was read")
        yield ""  # a generator

    header = "at,level,cost.requests,cost.tokns,flow\n"
    for lines, line in (([header], 1), (["\n", header], 2)):
        with pytest.raises(TraceError) as raised:
            next(read_trace(itertools.chain(lines, rows()), limits=LLM.named_limits))
        assert str(raised.value) == (
            f"line {line}: cost.tokns: names no limit of the scenario "
            "(its limits: 'tokens', 'requests')"
        )
        assert raised.value.line == line
    assert list(read_trace([header])) == []  # nothing to say before a row
    for text in (PER_LIMIT_CSV, CSV, PER_LIMIT_JSONL):
        lines = text.splitlines(keepends=True)
        assert list(read_trace(lines, limits=["requests", "tokens"])) == list(read_trace(lines))
    with pytest.raises(
        PermitTypeError,
        match=r"limits='tokens': expected the names of limits, such as \['tokens'\], got str",
    ):
        read_trace(PER_LIMIT_CSV.splitlines(keepends=True), limits="tokens")


def test_a_trace_given_as_one_str_is_refused_naming_it() -> None:
    """A trace's text (or its file's name) passed whole was read a
    character at a time: 'line 1: a: unknown column' for the text of a
    good trace, 'c' for calls.csv; a replay of a str failed on comparing
    a str with an int."""
    for lines in (CSV, "calls.csv", CSV.encode()):
        with pytest.raises(PermitTypeError, match=r"^lines=.*: expected the lines of a trace"):
            read_trace(lines)  # type: ignore[arg-type]
    with pytest.raises(PermitTypeError, match=r"^calls='calls.csv': expected calls"):
        replay(Scenario("r", Fifo(2), 8, 3, [Workload("w", 0, Batch(0))]), "calls.csv")  # type: ignore[arg-type]


@pytest.mark.parametrize("first", [(0, 0), 0, {"at_ns": 0, "level": 0}])
def test_calls_that_are_no_calls_are_refused_naming_them(first: object) -> None:
    """Calls given as plain (at, level) pairs, or anything else that is
    no ``Call``, are refused naming ``calls`` and the first of them (they
    failed inside the replay: not enough values to unpack, or an int that
    is not subscriptable)."""
    scenario = Scenario("r", Fifo(2), 8, 3, [Workload("w", 0, Batch(0))])
    with pytest.raises(PermitTypeError) as refused:
        replay(scenario, [first, first])  # type: ignore[list-item]
    assert refused.value.argument == "calls"
    assert f"the first is {first!r}" in str(refused.value)


def test_a_trace_of_bytes_or_of_nothing_iterable_is_refused_naming_it(tmp_path: Path) -> None:
    """A file opened in binary mode gives lines of bytes: refused naming
    ``lines`` and saying to open it as text (it failed inside, 'a
    bytes-like object is required, not str'); so is something that is no
    lines at all, and a replay of something that is no calls."""
    path = tmp_path / "calls.csv"
    path.write_text(CSV)
    binary = pytest.raises(PermitTypeError, match=r"^lines=b'at,level,.*: expected .*text mode")
    with path.open("rb") as file, binary:
        read_trace(file)  # type: ignore[arg-type]
    for nothing in (5, None):
        with pytest.raises(PermitTypeError, match=r"^lines=(5|None): expected the lines"):
            read_trace(nothing)  # type: ignore[arg-type]
        with pytest.raises(PermitTypeError, match=r"^calls=(5|None): expected calls"):
            replay(SEED[0], nothing)  # type: ignore[arg-type]
    with path.open(newline="") as text:
        assert [call._replace(line=0) for call in read_trace(text)] == CALLS


def test_calls_made_in_code_out_of_time_order_or_of_negative_times_are_refused() -> None:
    """Calls made in code (not read by read_trace, which refuses such rows)
    that go back in time, or wait a negative time, are refused naming
    ``calls``: an earlier call was pushed at the later one's time, its
    wait counted from there, and a negative give-up took the run back
    in time."""
    scenario = Scenario("r", Fifo(2), 1, 10, [Workload("w", 0, Batch(0))])
    for calls, says in (
        (
            [Call(SECOND, 0), Call(2 * SECOND, 0), Call(0, 0, line=7)],
            "line=7, max_wait_ns=None, give_up_after_ns=None): its at_ns is earlier than the "
            "call before it (2000000000 ns)",
        ),
        ([Call(-5, 0)], "Call(at_ns=-5, level=0, "),
        ([Call(0, 0), Call(0, 0, give_up_after_ns=-3)], "its give_up_after_ns must be at least 0"),
        ([Call(0, 0), Call(0, 0, timeout_ns=-3)], "its timeout_ns must be at least 0"),
    ):
        with pytest.raises(PermitValueError, match=r"^calls=") as refused:
            replay(scenario, calls)
        assert refused.value.argument == "calls"
        assert says in str(refused.value), str(refused.value)
    in_order = replay(scenario, [Call(0, 0), Call(0, 0), Call(2 * SECOND, 0, timeout_ns=0)])
    assert (in_order["w"].granted, in_order["w"].wait_max_ns) == (3, SECOND)


def own_trace(scenario: Scenario) -> Iterator[Call]:
    """A scenario's own arrivals, as a trace of calls."""
    duration = round(scenario.seconds * SECOND)
    for at, w in arrivals(scenario, duration):
        workload = scenario.workloads[w]
        yield Call(at, workload.level)


@pytest.mark.parametrize("scenario", SEED, ids=lambda s: s.name)
def test_replaying_a_scenarios_own_arrivals_is_its_simulation(scenario: Scenario) -> None:
    """P59: One workload per level: the replay is the simulation, exactly."""
    want = simulate(scenario)
    got = replay(scenario, own_trace(scenario))
    assert [attrs.evolve(w) for w in got.workloads] == list(want.workloads)


def test_a_levels_calls_take_its_first_workloads_options() -> None:
    """P59: where a level has two workloads, its calls take the first's
    options (a timeout of 1 s here, not the second's 100 s), unless a
    row names its own; the level is reported as its first workload.
    (Every other test had one workload a level, where first and last are
    one.)"""
    scenario = Scenario(
        "two a level",
        Fifo(1),
        rate=1,
        seconds=10,
        workloads=[
            Workload("first", 0, Batch(0), timeout=1),
            Workload("second", 0, Batch(0), timeout=100),
        ],
    )
    calls = [Call(0, 0), Call(0, 0), Call(0, 0), Call(0, 0, timeout_ns=5 * SECOND)]
    result = replay(scenario, calls)
    first = result["first"]
    # one granted at once; two expire at 1 s, the first's timeout; the row
    # of its own 5 s is granted at 1 s, the next permit
    assert (first.offered, first.granted, first.expired) == (4, 2, 2), "P59"


def test_replay_with_give_ups_and_timeouts_is_the_simulation() -> None:
    scenario = Scenario(
        "mixed",
        StrictPriority(3),
        rate=30,
        burst=5,
        seconds=30,
        seed=3,
        max_waiting=(None, 50, 500),
        workloads=[
            Workload("users", 0, Poisson(20), give_up_after=0.5),
            Workload("api", 1, Poisson(25), give_up_after=2),
            Workload("jobs", 2, Batch(800), timeout=10),
        ],
    )
    # The workloads' give-ups and timeouts apply to their level's calls.
    want = simulate(scenario)
    assert min(want["api"].cancelled, want["api"].rejected, want["jobs"].expired) > 0
    got = replay(scenario, own_trace(scenario))
    for g, w in zip(got.workloads, want.workloads, strict=True):
        assert (g.offered, g.granted, g.cancelled, g.rejected, g.expired) == (
            w.offered,
            w.granted,
            w.cancelled,
            w.rejected,
            w.expired,
        ), g.name
        assert (g.waits_ns, g.timeline) == (w.waits_ns, w.timeline)


def test_a_calls_own_timeout_comes_first_and_costs_count_as_units() -> None:
    scenario = Scenario(
        "s",
        StrictPriority(2),
        rate=10,
        burst=4,
        seconds=10,
        workloads=[Workload("users", 0, Constant(1)), Workload("export", 1, Batch(0))],
    )
    calls = [
        *(Call(0, 1, cost=4) for _ in range(30)),
        Call(SECOND, 1, timeout_ns=SECOND // 100),  # expires long before its turn
        Call(2 * SECOND, 0),  # overtakes the export's waiting head
    ]
    result = replay(scenario, calls)
    users, export = result["users"], result["export"]
    assert (users.offered, users.granted, users.units) == (1, 1, 1)
    assert users.wait_max_ns == SECOND // 10  # one unit, after the export took four at 2 s
    # 10 s at 10 units/s and 4 in the bucket at the start: 104 units, one to
    # the user, 25 calls of 4 to the export (the 26th lacks one unit)
    assert (export.offered, export.expired, export.granted, export.units) == (31, 1, 25, 100)
    assert export.share == 100 / 101


def test_a_call_of_timeout_0_not_granted_expires_before_the_next_arrives() -> None:
    """P59: A row of timeout 0 (a try_acquire) that finds no permit expires at
    once, as the live limiter's does: the rows of the same time after it
    is not refused for it (its level's one place, its ``max_wait``). It
    stayed queued until the next turn, and the row after it was refused."""
    scenario = Scenario(
        "s",
        Fifo(),
        rate=10,
        burst=1,
        seconds=1,
        max_waiting=1,
        workloads=[Workload("w", 0, Batch(0))],
    )
    trace = "at,level,timeout,max_wait\n0.012,0,,\n0.012,0,0,\n0.012,0,,0.1\n"
    result = replay(scenario, read_trace(trace.splitlines(keepends=True)))
    w = result["w"]
    assert (w.granted, w.expired, w.rejected, w.wait_max_ns) == (2, 1, 0, SECOND // 10)


def test_a_call_that_gave_up_as_it_came_is_never_granted() -> None:
    """P59: A row of give_up_after 0 (a caller cancelled as it came, or granted
    then and cancelled before it ran: trio's and anyio's checkpoint after
    a grant at once, its permit handed back) is cancelled as it comes,
    with a permit free too: that permit goes to the next caller, as it
    did live. It was granted, and the level-1 caller that had the permit
    handed back waited for the next one (2 s, not 1 s)."""
    scenario = Scenario(
        "s",
        StrictPriority(2),
        rate=1,
        burst=2,
        seconds=10,
        workloads=[Workload("a", 0, Batch(0)), Workload("b", 1, Batch(0))],
    )
    trace = "at,level,cost,flow,give_up_after\n0,0,1,,\n0,1,2,,\n0,0,1,x,0\n"
    result = replay(scenario, read_trace(trace.splitlines(keepends=True)))
    a, b = result["a"], result["b"]
    assert (a.offered, a.granted, a.cancelled, a.tenants) == (2, 1, 1, 1)
    assert (b.granted, b.wait_max_ns) == (1, SECOND)


def test_a_replay_reads_no_further_than_the_run() -> None:
    """The trace is read one row at a time, and not past ``seconds``: a
    million rows cost no memory, and rows after the end are never read."""

    def lines() -> Iterator[str]:
        yield "at,level\n"
        for n in range(10**6):
            yield f"{n / 1000},{n % 2}\n"
        raise AssertionError("read past the end of the run")

    scenario = attrs.evolve(SEED[1], seconds=5)
    result = replay(scenario, read_trace(lines()))
    assert result["interactive"].offered + result["batch"].offered == 5000


def test_a_call_the_machine_could_never_take_names_its_line() -> None:
    scenario = SEED[1]  # burst 1, two levels
    with pytest.raises(TraceError) as raised:
        replay(scenario, read_trace(["at,level\n", "0,0\n", "1,2\n"]))
    assert str(raised.value) == (
        "line 3: level=2: must be 0 or 1 (the policy has 2 levels), "
        "or give the scenario a policy of 3 levels or more"
    )
    with pytest.raises(TraceError) as raised:
        replay(scenario, read_trace(['{"at": 0, "level": 0, "cost": 3}']))
    assert str(raised.value) == "line 1: cost=3: exceeds the burst (1): it could never be granted"
    # a call made in code, not read from a trace: a level below 0 too (it
    # counted as the last level's)
    with pytest.raises(TraceError) as raised:
        replay(scenario, [Call(0, 0), Call(1, -1)])
    assert str(raised.value) == "line 0: level=-1: must be 0 or 1 (the policy has 2 levels)"


def test_a_call_made_in_code_at_no_time_or_level_is_refused() -> None:
    """A call made in code whose at_ns is NaN is refused naming ``calls``
    (the replay stalled on it, and dropped it and every later call
    without a word), and one whose level is no int names it (a raw
    ``TypeError`` comparing it with 0)."""
    scenario = SEED[1]  # two levels
    nan: Any = float("nan")
    # (Call(nan, 0) and Call._make are refused: made as read_trace makes its calls)
    at_nan: Call = tuple.__new__(Call, (nan, 0, 1, None, None, 0, None, None))
    with pytest.raises(PermitValueError) as no_time:
        replay(scenario, [Call(0, 0), at_nan, Call(1, 0)])
    assert no_time.value.argument == "calls"
    assert str(no_time.value) == f"calls={at_nan!r}: its at_ns must be an int of nanoseconds"
    with pytest.raises(TraceError) as no_level:
        replay(scenario, [Call(0, "0")])  # type: ignore[arg-type]
    assert str(no_level.value) == "line 0: level='0': expected an int"


@pytest.mark.parametrize("cost", [0.5, 2.5, 1.0, True, Decimal(1)])
def test_a_call_made_in_code_of_a_cost_that_is_no_int_names_it(cost: object) -> None:
    """A call made in code whose cost is a number but no int is refused
    as a cost of a str is, naming its line and the cost: one of 1.0 or
    ``True`` went as one unit, unchecked (the machine refuses both), and
    one of 0.5 failed with a raw ``TypeError`` ('float' object is not
    iterable)."""
    scenario = Scenario(
        "costs", Fifo(), rate=10, burst=3, seconds=10, workloads=[Workload("a", 0, Batch(0))]
    )
    with pytest.raises(TraceError) as refused:
        replay(scenario, [Call(0, 0), Call(0, 0, cost)])  # type: ignore[arg-type]
    assert (
        str(refused.value) == f"line 0: cost={cost!r}: expected units, or units per limit by name"
    )


def test_a_call_made_in_code_of_an_unhashable_flow_names_it() -> None:
    """A call made in code whose flow is no hashable value is refused as
    it is made, a ``PermitTypeError`` naming ``flow`` (the replay failed
    with a raw ``TypeError``: unhashable type), as the machine refuses
    such a flow."""
    with pytest.raises(PermitTypeError, match=r"^flow=\[\]: ") as refused:
        Call(0, 0, flow=[])  # type: ignore[arg-type]
    assert refused.value.argument == "flow"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("at_ns", 1.5),
        ("at_ns", float("nan")),
        ("at_ns", True),
        ("at_ns", "0"),
        ("at_ns", None),
        ("timeout_ns", 0.5),
        ("max_wait_ns", "1"),
        ("give_up_after_ns", False),
    ],
)
def test_a_call_made_in_code_of_a_time_that_is_no_int_names_its_field(
    field: str, value: object
) -> None:
    """A call made in code whose time is no int of nanoseconds is refused
    as it is made, a ``PermitTypeError`` naming its field and the value
    (a float ``at_ns`` was refused by the replay as ``now``, an argument
    the caller never wrote)."""
    times: dict[str, Any] = {"at_ns": 0, field: value}
    with pytest.raises(PermitTypeError, match=r"^" + field) as refused:
        replay(SEED[1], [Call(level=0, **times)])
    assert refused.value.argument == field
    assert refused.value.value is value  # (is: NaN is not equal to itself)
    assert Call(5, 1, timeout_ns=0, max_wait_ns=7, give_up_after_ns=None).at_ns == 5


@pytest.mark.parametrize(
    ("field", "value"),
    [("at_ns", 1.5), ("timeout_ns", 0.5), ("give_up_after_ns", True), ("flow", [])],
)
def test_a_call_changed_with_replace_is_checked_as_one_made_in_code(
    field: str, value: object
) -> None:
    """A call changed with ``_replace`` (a recording's calls, their times
    scaled or their flows renamed) or made with ``_make`` is checked as
    one made in code is, a ``PermitTypeError`` naming the field: an
    unhashable flow failed in the replay with a raw ``TypeError``, and a
    float ``at_ns`` was refused as ``now``, an argument never written."""
    call = Call(0, 0)
    changes: dict[str, Any] = {field: value}
    with pytest.raises(PermitTypeError, match=r"^" + field) as replaced:
        call._replace(**changes)
    assert replaced.value.argument == field
    values = list(call)
    values[Call._fields.index(field)] = value
    with pytest.raises(PermitTypeError, match=r"^" + field) as made:
        Call._make(values)
    assert made.value.argument == field
    assert call._replace(at_ns=5, flow="acme") == Call(5, 0, flow="acme")


def test_trace_lines_refuses_a_str_of_limits_or_no_calls() -> None:
    """``trace_lines`` refuses limits given as one str (its letters became
    the columns cost.t, cost.o, ...) and calls that are no iterable (a
    raw ``TypeError``), naming each."""
    from permits.sim import trace_lines

    with pytest.raises(PermitTypeError) as letters:
        list(trace_lines([Call(0, 0)], "tokens"))
    assert str(letters.value) == (
        "limits='tokens': expected a sequence of limit names, such as ['tokens'], got str"
    )
    with pytest.raises(PermitTypeError) as none:
        list(trace_lines(5))  # type: ignore[arg-type]
    assert none.value.argument == "calls"
    assert next(trace_lines([Call(0, 0)], ["tokens"])).startswith("at,level,cost.tokens,")


def test_levels_without_a_workload_are_named_by_level() -> None:
    scenario = Scenario(
        "s", Fifo(3), rate=10, seconds=1, workloads=[Workload("users", 0, Batch(1))]
    )
    result = replay(scenario, [Call(0, 0), Call(0, 2)])
    assert [w.name for w in result.workloads] == ["users", "level 1", "level 2"]
    assert [w.granted for w in result.workloads] == [1, 0, 1]


def test_compare_replays_the_trace_under_each_policy() -> None:
    scenario = SEED[3]
    calls = list(own_trace(scenario))
    comparison = compare(scenario, [Shares.every(5), Fifo(2)], calls=lambda: iter(calls))
    for outcome in comparison.outcomes:
        want = simulate(attrs.evolve(scenario, policy=outcome.policy))
        assert [w.granted for w in outcome.result.workloads] == [w.granted for w in want.workloads]


def test_cli_heads_a_level_no_workload_names_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A level's calls that no workload names are reported as ``level N``,
    and compare's table for them is headed so, not ``level 1 (level 1)``."""
    from permits.cli import main

    scenario = tmp_path / "one.toml"
    scenario.write_text(
        '[[scenario]]\nname = "s"\npolicy = "strict"\nrate = 10\nseconds = 1\n'
        '[[scenario.workload]]\nname = "users"\nlevel = 0\narrivals = "batch"\nsize = 1\n'
    )
    trace = tmp_path / "calls.csv"
    trace.write_text("at,level\n0,0\n0,1\n")
    assert main(["compare", str(scenario), "--trace", str(trace), "--policy", "strict"]) == 0
    out = capsys.readouterr().out
    assert "\nusers (level 0)\n" in out
    assert "\nlevel 1\n" in out, out
    trace.write_text("at,level\n0,0\n")
    assert main(["simulate", str(scenario), "--trace", str(trace)]) == 0
    assert "; 1 permit granted\n" in capsys.readouterr().out  # not "1 permits"


def test_cli_replays_a_trace_and_a_bad_row_is_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    permits = str(Path(sys.executable).parent / "permits")
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps({"at": n / 50, "level": n % 2}) + "\n" for n in range(400)))
    done = subprocess.run(
        [permits, "compare", "--trace", str(path), "--json", "--policy", "strict"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stderr == ""
    (scenario,) = json.loads(done.stdout)["scenarios"]
    interactive, batch = scenario["policies"][0]["workloads"]
    assert (interactive["offered"], batch["offered"]) == (200, 200)
    with path.open("a") as file:
        file.write('{"at": 8, "level": 0}\n{"at": 8, "level": "zero"}\n')
    for command in ("simulate", "compare"):
        done = subprocess.run(
            [permits, command, "--trace", str(path)], capture_output=True, text=True, check=False
        )
        assert done.returncode == 2
        assert done.stdout == ""
        assert done.stderr == (
            f"permits: error: {path}: line 402: level='zero': expected a whole number >= 0\n"
        )
    path.write_text(f"at,level,cost\n0,0,{'9' * 5000}\n")
    done = subprocess.run(
        [permits, "simulate", "--trace", str(path)], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"permits: error: {path}: line 2: cost='99999999999999999999...': "
        "5,000 digits, too many for a whole number\n"
    )


_arrivals = st.one_of(
    st.builds(Batch, st.integers(0, 40), st.sampled_from([0, 0.25, 1])),
    st.builds(Constant, st.sampled_from([1, 7, 20, 55.5]), st.sampled_from([0, 0.003])),
    st.builds(Poisson, st.sampled_from([2, 15, 60])),
)


@settings(deadline=None)
@given(
    policy=st.sampled_from(
        [Fifo(3), StrictPriority(3), Shares((3, 2, 1)), Aging(3, after_ns=SECOND // 4)]
    ),
    rate=st.sampled_from([3, 25, Fraction(100, 3)]),
    burst=st.integers(1, 4),
    seed=st.integers(0, 2**70),
    loads=st.lists(
        st.tuples(
            _arrivals,
            st.sampled_from([None, 0.05, 0.4]),
            st.sampled_from([None, 0.1, 0.7]),
        ),
        min_size=1,
        max_size=3,
    ),
    own_timeouts=st.booleans(),
)
def test_any_scenario_replayed_from_its_own_arrivals_is_its_simulation(
    policy: Fifo,
    rate: int,
    burst: int,
    seed: int,
    loads: list[tuple[Batch | Constant | Poisson, float | None, float | None]],
    own_timeouts: bool,
) -> None:
    """One workload per level: replaying the scenario's arrivals as calls
    gives its simulation, exactly; with each call carrying its workload's
    timeout itself (``own_timeouts``) too."""
    workloads = [
        Workload(f"w{level}", level, arrivals, timeout=timeout, give_up_after=give_up)
        for level, (arrivals, give_up, timeout) in enumerate(loads)
    ]
    scenario = Scenario("any", policy, rate, 2, workloads, burst=burst, seed=seed)
    want = simulate(scenario)
    calls = own_trace(scenario)
    if own_timeouts:

        def ns(seconds: float | Fraction | Decimal | None) -> int | None:  # as the simulator

            return None if seconds is None else nanoseconds("seconds", seconds)

        calls = (
            c._replace(
                timeout_ns=ns(workloads[c.level].timeout),
                give_up_after_ns=ns(workloads[c.level].give_up_after),
            )
            for c in list(calls)
        )
        scenario = attrs.evolve(
            scenario,
            workloads=[attrs.evolve(w, timeout=None, give_up_after=None) for w in workloads],
        )
    got = replay(scenario, calls)
    mine, others = got.workloads[: len(loads)], got.workloads[len(loads) :]
    for g, w in zip(mine, want.workloads, strict=True):
        assert g == w
        assert (g.waits_ns, g.timeline) == (w.waits_ns, w.timeline)
    assert [(w.name, w.offered) for w in others] == [
        (f"level {n}", 0) for n in range(len(loads), 3)
    ]


def test_cli_says_a_header_naming_a_limit_the_scenario_lacks_at_the_header(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Each scenario's limits reach the trace's reader: the header's line,
    one line, exit 2, for simulate and compare alike, and for the seed's
    one limit (``units``)."""
    from permits.cli import main

    path = tmp_path / "trace.csv"
    path.write_text("at,level,cost.requests,cost.tokns\n0,0,1,10\n")
    for command, *example in (("simulate", "--example", "llm"), ("compare", "--example", "llm")):
        assert main([command, *example, "--trace", str(path)]) == 2
        out, err = capsys.readouterr()
        assert (out, err) == (
            "",
            f"permits: error: {path}: line 1: cost.tokns: names no limit of the scenario "
            "(its limits: 'tokens', 'requests')\n",
        )
    assert main(["simulate", "--trace", str(path)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == (
        "",
        f"permits: error: {path}: line 1: cost.requests: names no limit of the scenario "
        "(its limits: 'units')\n",
    )


def test_cli_refuses_a_binary_or_missing_trace_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from permits.cli import main

    path = tmp_path / "trace.csv"
    path.write_bytes(b"at,level\n0,0\n" + bytes(range(128, 256)))
    for command in ("simulate", "compare"):
        assert main([command, "--trace", str(path)]) == 2
        out, err = capsys.readouterr()
        assert (out, err) == ("", f"permits: error: {path}: line 3: not a trace: not UTF-8 text\n")
    assert main(["simulate", "--trace", str(tmp_path / "none.csv")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"permits: error: --trace={str(tmp_path / 'none.csv')!r}: cannot read")


@pytest.mark.skipif(not Path("/dev/stdin").exists(), reason="needs /dev/stdin")
@pytest.mark.parametrize("stdin", ["/dev/stdin", "-"])
def test_cli_refuses_to_read_a_piped_trace_twice(tmp_path: Path, stdin: str) -> None:
    """A pipe (``--trace /dev/stdin``, ``--trace -``, ``<(zcat
    calls.csv.gz)``) reads once: the runs after the first saw no calls at
    all and were reported as if nobody had come. Read once, it replays;
    asked for again, one line. (``-`` was a file of that name.)"""
    import subprocess
    import sys

    permits = str(Path(sys.executable).parent / "permits")
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        '[[scenario]]\nname = "s"\npolicy = "strict"\nrate = 1\nseconds = 10\n'
        '[[scenario.workload]]\nname = "w"\nlevel = 0\narrivals = "batch"\nsize = 0\n'
    )
    trace = "at,level\n0,0\n0,0\n0,0\n"

    def piped(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [permits, *argv, str(scenario), "--trace", stdin, "--json"]
        return subprocess.run(command, input=trace, capture_output=True, text=True, check=False)

    done = piped("simulate")
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout)["scenarios"][0]["workloads"][0]["granted"] == 3
    done = piped("compare", "--policy", "fifo", "--policy", "strict")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"permits: error: --trace={stdin!r}: not a regular file, so it reads only once, "
        "and this command reads it once per run: write it to a file first\n"
    )
    # a file redirected in is read afresh for each run
    calls = tmp_path / "calls.csv"
    calls.write_text(trace)
    command = [permits, "compare", "--policy", "fifo", "--policy", "strict", str(scenario)]
    with calls.open() as file:
        done = subprocess.run(
            [*command, "--trace", stdin, "--json"], stdin=file, capture_output=True, text=True
        )
    assert (done.returncode, done.stderr) == (0, "")
    runs = json.loads(done.stdout)["scenarios"][0]["policies"]
    assert [run["workloads"][0]["granted"] for run in runs] == [3, 3]


def test_a_trace_names_its_levels_and_says_which_requirements_it_can_judge() -> None:
    """A level without a workload of its own gets a name no workload has; a
    requirement of a level's second workload is refused in words (a trace's
    calls count as each level's first), naming the one to require it of."""
    from permits.sim import Requirement

    named = Scenario(
        "s",
        StrictPriority(2),
        rate=10,
        burst=1,
        seconds=1,
        workloads=[Workload("level 1", 0, Batch(1))],
    )
    result = replay(named, [Call(0, 0), Call(0, 1)])
    assert [w.name for w in result.workloads] == ["level 1", "level 1'"]
    two = Scenario(
        "s",
        StrictPriority(2),
        rate=10,
        burst=1,
        seconds=1,
        workloads=[
            Workload("a", 0, Batch(1)),
            Workload("b", 1, Batch(1)),
            Workload("c", 1, Batch(1)),
        ],
        requirements=[Requirement.parse("c p99 <= 1 s")],
    )
    with pytest.raises(PermitValueError, match="require it of 'b' instead"):
        replay(two, [Call(0, 1)])


def test_cli_says_which_requirements_a_trace_can_judge_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """simulate refuses such a requirement as compare does: one line, status
    2 (it was a traceback from simulate)."""
    from permits.cli import main

    scenario = tmp_path / "s.toml"
    scenario.write_text(
        '[[scenario]]\nname = "s"\npolicy = "strict"\nrate = 1\nseconds = 10\n'
        'require = ["b p99 <= 1 s"]\n'
        + "".join(
            f'[[scenario.workload]]\nname = "{name}"\nlevel = 0\narrivals = "batch"\nsize = 1\n'
            for name in "ab"
        )
    )
    trace = tmp_path / "trace.csv"
    trace.write_text("at,level\n0,0\n")
    for command in ("simulate", "compare"):
        assert main([command, str(scenario), "--trace", str(trace)]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err == (  # the requirement's place in the file, as the file's other errors
            f"permits: error: {scenario}: scenario[0].require[0]='b p99 <= 1 s': a trace's "
            "calls count as the first workload of their level, and 'b' is not one: require it "
            "of 'a' instead\n"
        )


def test_cli_refuses_a_tenants_requirement_the_traces_calls_cannot_meet_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """compare refuses a requirement on the tenants of a workload whose
    calls in the trace name none (no flow column, or every cell empty), as
    it refuses one on a workload whose callers name none without a trace:
    one line, status 2. Every policy missed it, ``never``, and compare
    exited 1 recommending by the misses. A trace whose calls of that level
    name tenants is judged (P99)."""
    from permits.cli import main

    scenario = tmp_path / "s.toml"
    scenario.write_text(
        '[[scenario]]\nname = "s"\nrate = 10\nseconds = 10\n'
        'require = ["a worst tenant p99 <= 1 s"]\n'
        '[[scenario.workload]]\nname = "a"\nlevel = 0\narrivals = "batch"\nsize = 1\n'
    )
    trace = tmp_path / "trace.csv"
    for rows in ("at,level\n0,0\n", "at,level,flow\n0,0,\n0.5,0,\n"):
        trace.write_text(rows)
        assert main(["compare", str(scenario), "--trace", str(trace)]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err == (
            f"permits: error: {scenario}: scenario[0].require[0]='a worst tenant p99 <= 1 s': "
            "no call of 'a' (level 0) in the trace names a tenant: give its calls a flow\n"
        )
    trace.write_text("at,level,flow\n0,0,\n0.5,0,acme\n")
    assert main(["compare", str(scenario), "--trace", str(trace)]) == 0
    assert "recommended: FIFO (meets every requirement)" in capsys.readouterr().out


@given(
    st.lists(
        st.tuples(
            st.integers(0, 10**12),
            st.integers(0, 3),
            st.integers(1, 1000),
            st.none()
            | st.sampled_from(
                ["acme", "a,b", 'quo"te', "7", "two\nlines", "cr\rlf", " x\r\n", "", "'", "''"]
            )
            | st.text(),
            st.none() | st.integers(0, 10**11),
        ),
        max_size=20,
    )
)
def test_written_traces_read_back_as_they_were(rows: list[tuple[Any, ...]]) -> None:
    """P107: trace_lines writes what read_trace reads: times exact to the
    nanosecond, flows quoted as CSV needs (a flow reads back as a string;
    one with a carriage return was written unquoted, and its row did not
    read), the empty name too (``''``: an empty cell is no flow; it was
    refused)."""
    from permits.sim import trace_lines

    at = 0
    calls = []
    for step, level, cost, flow, timeout in rows:
        at += step
        calls.append(Call(at, level, cost, flow, timeout))
    if sys.version_info < (3, 11) and any("\0" in str(c.flow) for c in calls):
        # Python 3.10's csv can neither write nor read a NUL: refused, naming the flow
        with pytest.raises(PermitValueError, match=r"^flow="):
            list(trace_lines(calls))
        return
    back = [c._replace(line=0) for c in read_trace(list(trace_lines(calls)))]
    assert back == [c._replace(flow=None if c.flow is None else str(c.flow)) for c in calls]


#: The characters ``str.splitlines`` ends a line at, besides ``\n`` and ``\r``.
_LINE_BREAKS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@given(
    flow=st.lists(st.sampled_from(["a", " ", ",", '"', "\n", "\r", *_LINE_BREAKS]), min_size=1).map(
        "".join
    ),
    # (inside the name: a header's names are read stripped of spaces at their ends)
    limit=st.lists(st.sampled_from(["t", *_LINE_BREAKS])).map(lambda s: f"t{''.join(s)}t"),
)
def test_written_traces_read_back_from_their_texts_lines(flow: str, limit: str) -> None:
    """A trace's text, written by trace_lines, reads back from its
    ``splitlines(keepends=True)`` (what read_trace takes besides an open
    file) as from the file, whatever a flow or a limit's name holds: a
    cell with a character splitlines ends a line at (a vertical tab, a
    form feed, U+2028...) is quoted, as one with a newline is, so its row
    is not cut in two there."""
    from permits.sim import trace_lines

    calls = [Call(0, 0, {limit: 2}, flow), Call(SECOND, 1, {limit: 1}, "b")]
    text = "".join(trace_lines(calls, [limit]))
    for lines in (text.splitlines(keepends=True), io.StringIO(text, newline="")):
        back = [c._replace(line=0) for c in read_trace(lines)]
        assert back == calls, (back, calls)


def test_a_header_quoted_across_lines_is_read_whole_and_rows_keep_their_lines() -> None:
    """A header cell quoted across two lines (a limit's name with a line
    break, as trace_lines writes it) is one column, and the rows after it
    are named by their own lines; a header that is no CSV is named so."""
    text = 'at,level,"cost.a\nb"\n0,0,1\n\n0.1,0,x\n'
    calls = read_trace(io.StringIO(text, newline=""))
    assert next(calls) == Call(0, 0, {"a\nb": 1}, line=3)
    with pytest.raises(TraceError, match=r"^line 5: cost\.a\nb='x': expected a whole number"):
        next(calls)
    with pytest.raises(TraceError, match=r"^line 1: header: not CSV: unexpected end of data"):
        list(read_trace(['at,"level\n', "0,0\n"]))


def test_a_negative_time_is_written_as_the_number_it_is() -> None:
    """trace_lines writes a time before the start (a call made in code) as
    the negative number it is, which read_trace then refuses naming it:
    -5 ns was written -1.999999995 s."""
    from permits.sim import trace_lines

    calls = [Call(-5, 0, timeout_ns=-(10**9) - 5)]
    row = list(trace_lines(calls))[1]
    assert row == "-0.000000005,0,1,,-1.000000005,,\n"
    with pytest.raises(TraceError, match=r"^line 2: at='-0.000000005': must be a finite number"):
        list(read_trace(list(trace_lines(calls))))


def test_the_empty_flow_is_written_as_two_apostrophes() -> None:
    """P107: the empty flow's cell is ``''`` (an empty cell is no flow:
    it was refused, and a recording whose callers named it could not be
    written), and a flow of apostrophes alone has two more, so that each
    reads back as itself, in CSV and in JSON lines; a cell a person wrote
    beginning with them and holding more is as written."""
    from permits.sim import trace_lines

    flows = [None, "", "'", "''", "''a", "a''"]
    calls = [Call(i, 0, flow=flow) for i, flow in enumerate(flows)]
    lines = list(trace_lines(calls))
    assert [line.split(",")[3] for line in lines[1:]] == ["", "''", "'''", "''''", "''a", "a''"]
    assert [c.flow for c in read_trace(lines)] == flows
    rows = [json.dumps({"at": 0, "level": 0, "flow": flow}) for flow in ["", "''", "'''"]]
    assert [c.flow for c in read_trace(rows)] == [None, "", "'"]


@pytest.mark.anyio
async def test_a_recording_of_the_empty_flow_replays_as_it_went(
    open_limiter: Any, tmp_path: Path
) -> None:
    """P107: callers of the empty flow beside another, recorded, written,
    read back and replayed: the calls read back are the recording's (the
    empty flow its own tenant, not the level's default flow: the write
    was refused), and their replay is the recording's, two tenants."""
    async with open_limiter(Fifo(), 8, 1) as limiter:
        recording = limiter.record()
        for flow in ["", "acme", "", None, "acme", ""]:
            limiter.try_acquire(flow=flow)
        for flow in ["", "acme", ""]:
            await limiter.acquire(flow=flow)
    path = tmp_path / "calls.csv"
    recording.write(path)
    with path.open(newline="") as file:
        back = [c._replace(line=0) for c in read_trace(file)]
    assert back == recording.calls
    assert [c.flow for c in back].count("") == 5
    scenario = Scenario("r", Fifo(), 8, 10, [Workload("w", 0, Batch(0))])
    assert replay(scenario, back) == replay(scenario, recording.calls)
    assert replay(scenario, back)["w"].tenants == 2


def test_levels_and_costs_of_an_int_enum_are_written_as_numbers() -> None:
    """A level (or units) of an ``(int, Enum)`` class, as callers name
    their priorities, is written as its number: it was written as its
    ``str``, ``Priority.LOW``, and the trace did not read."""
    from permits.sim import trace_lines

    class Priority(int, enum.Enum):
        HIGH = 0
        LOW = 1

    calls = [Call(0, Priority.LOW, Priority.LOW), Call(1, Priority.HIGH, {"tokens": Priority.LOW})]
    lines = list(trace_lines(calls, ["requests", "tokens"]))
    assert lines[1:] == ["0,1,1,1,,,,\n", "0.000000001,0,0,1,,,,\n"]
    assert [c._replace(line=0) for c in read_trace(lines)] == [
        Call(0, 1, {"requests": 1, "tokens": 1}),
        Call(1, 0, {"requests": 0, "tokens": 1}),
    ]


_LIMITS = ["requests", "tokens", "a,b", "cr\rlf"]  # (a name with "\r" alone is quoted)


def _units(cost: int | Mapping[str, int], limits: list[str]) -> tuple[int, ...]:
    return tuple(cost if isinstance(cost, int) else cost.get(name, 0) for name in limits)


@given(
    limits=st.lists(st.sampled_from(_LIMITS), min_size=1, unique=True),
    rows=st.lists(
        st.tuples(
            st.integers(0, 10**12),
            st.integers(0, 3),
            st.integers(1, 1000) | st.dictionaries(st.sampled_from(_LIMITS), st.integers(0, 10**6)),
            st.none() | st.sampled_from(["acme", "7"]),
        ),
        max_size=20,
    ),
)
def test_written_costs_per_limit_read_back_as_they_were(
    limits: list[str], rows: list[tuple[Any, ...]]
) -> None:
    """trace_lines with limits writes a ``cost.<limit>`` column for each,
    and read_trace reads back each call's units of each limit (one number:
    that many of each; a mapping: 0 of a limit it does not name)."""
    from permits.sim import trace_lines

    at = 0
    calls = []
    for step, level, cost, flow in rows:
        if isinstance(cost, dict):
            cost = {name: n for name, n in cost.items() if name in limits}
            if not any(cost.values()):
                continue  # takes nothing: no call can ask that
        at += step
        calls.append(Call(at, level, cost, flow))
    lines = list(trace_lines(calls, limits))
    header = next(csv.reader(lines[:1]))
    assert header == ["at", "level", *(f"cost.{name}" for name in limits), *header[-4:]]
    assert header[-4:] == ["flow", "timeout", "max_wait", "give_up_after"]
    back = list(read_trace(lines))
    assert [(c.at_ns, c.level, c.flow) for c in back] == [
        (c.at_ns, c.level, None if c.flow is None else str(c.flow)) for c in calls
    ]
    assert [_units(c.cost, limits) for c in back] == [_units(c.cost, limits) for c in calls]


def test_trace_lines_refuses_a_cost_it_cannot_write() -> None:
    from permits.sim import trace_lines

    with pytest.raises(PermitValueError, match="needs limits"):
        list(trace_lines([Call(0, 0, {"tokens": 5})]))
    with pytest.raises(PermitValueError, match="names limit 'tokens', not in them"):
        list(trace_lines([Call(0, 0, {"tokens": 5})], ["requests"]))
    with pytest.raises(PermitValueError, match="each limit once"):
        list(trace_lines([], ["requests", "requests"]))


def test_a_trace_replayed_not_fair_counts_tenants_and_queues_in_arrival_order() -> None:
    """A level whose first workload says fair=False replays its calls as if
    they named no flow (the same waits), and still counts them by tenant."""
    calls = [Call(0, 0, 1, "bulk")] * 30 + [Call(SECOND, 0, 1, f"t{n}") for n in range(5)]
    scenario = Scenario("s", Fifo(1), 10, 5, [Workload("api", 0, Batch(0), fair=False)])
    one_line = replay(scenario, calls)["api"]
    without = replay(scenario, [call._replace(flow=None) for call in calls])["api"]
    fair = replay(attrs.evolve(scenario, workloads=[Workload("api", 0, Batch(0))]), calls)["api"]
    assert one_line.waits_ns == without.waits_ns
    assert (one_line.tenants, without.tenants, fair.tenants) == (6, 0, 6)
    assert one_line.tenant_wait_p99_median_ns is not None
    assert fair.tenant_wait_p99_median_ns is not None
    assert fair.tenant_wait_p99_median_ns < one_line.tenant_wait_p99_median_ns


def test_a_timeout_that_runs_out_after_its_grant_changes_nothing() -> None:
    """A caller granted before its timeout runs out does not give up: the
    replay is the same as without the timeout, whatever the caller's cost
    and flow, and however many such give-ups fall due at once."""
    calls = [
        Call(
            n * SECOND // 40,
            n % 2,
            cost=1 + n % 3 // 2,
            flow=None if n % 5 == 0 else f"t{n % 7}",
            timeout_ns=SECOND if n % 2 == 0 else None,
        )
        for n in range(400)
    ]
    scenario = Scenario(
        "s",
        StrictPriority(2),
        rate=30,
        burst=3,
        seconds=12,
        workloads=[Workload("users", 0, Batch(0)), Workload("batch", 1, Batch(0))],
    )
    with_timeouts = replay(scenario, calls)
    users = with_timeouts["users"]
    # some of the users' calls waited, and all were granted within their timeout
    assert users.granted == users.offered == 200
    assert users.wait_max_ns is not None
    assert 0 < users.wait_max_ns < SECOND
    assert with_timeouts == replay(scenario, [call._replace(timeout_ns=None) for call in calls])


def test_cli_bounds_no_workload_a_trace_replaces(tmp_path: Path) -> None:
    """With ``--trace``, the scenario's own arrivals are never made (the
    trace's calls replace them), so a workload that would ask for more
    callers than a run may is not refused; without it, it is."""
    import subprocess
    import sys

    permits = str(Path(sys.executable).parent / "permits")
    scenario = tmp_path / "big.toml"
    scenario.write_text(
        '[[scenario]]\nname = "big"\nrate = 100\nseconds = 100\n'
        'policy = { kind = "strict", levels = 2 }\n'
        '[[scenario.workload]]\nname = "interactive"\nlevel = 0\n'
        'arrivals = "poisson"\nrate = 1000000\n'
        '[[scenario.workload]]\nname = "batch"\nlevel = 1\narrivals = "poisson"\nrate = 10\n'
    )
    calls = tmp_path / "calls.csv"
    calls.write_text("at,level\n0.1,0\n0.2,1\n")
    for command in ("simulate", "compare"):
        done = subprocess.run(
            [permits, command, str(scenario), "--trace", str(calls), "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, "")
        assert "offered" in done.stdout
    done = subprocess.run(
        [permits, "simulate", str(scenario)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "over the 10,000,000 a run may ask for" in done.stderr


def test_a_trace_not_utf8_names_the_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The decoder reads ahead, so its error says no line: the first line
    that is not UTF-8 is named, as any other malformed row's."""
    from permits.cli import main

    path = tmp_path / "trace.csv"
    rows = "".join(f"{n / 1000},0\n" for n in range(5000))  # past the decoder's first block
    path.write_bytes(f"at,level\n{rows}".encode() + b"9.5,\xff\n")
    assert main(["simulate", "--trace", str(path)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"permits: error: {path}: line 5002: not a trace: not UTF-8 text\n")


def test_cli_refuses_a_trace_with_no_call_within_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A trace whose calls all fall after the run (its times a clock's,
    seconds since 1970, not seconds from its start) replays nothing: one
    line that says so, exit 2, for simulate and compare alike."""
    from permits.cli import main

    path = tmp_path / "epoch.csv"
    path.write_text("at,level\n1733400000.1,0\n1733400000.2,1\n")
    for command in ("simulate", "compare"):
        assert main([command, "--example", "article", "--trace", str(path)]) == 2
        out, err = capsys.readouterr()
        assert (out, err) == (
            "",
            f"permits: error: {path}: no call falls within the 10 s of scenario \"the article's "
            "workload: interactive 90/s, a batch of 300\" (a call's at is seconds from the "
            "start of the run): nothing to replay\n",
        )
    path.write_text("at,level\n9.9,0\n1733400000.2,1\n")  # one call within: replayed
    assert main(["simulate", "--example", "article", "--trace", str(path)]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("text", ["", "at,level\n", "at,level\n\n\n", "\n"])
def test_cli_refuses_a_trace_with_no_call_saying_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str
) -> None:
    """A trace with no call at all (empty, or a header alone: a recording
    written before any call) replays nothing, and the line says that, not
    that no call falls within the run, with a hint about its times (it has
    none), for simulate and compare alike."""
    from permits.cli import main

    path = tmp_path / "empty.csv"
    path.write_text(text)
    for command in ("simulate", "compare"):
        assert main([command, "--example", "article", "--trace", str(path)]) == 2
        out, err = capsys.readouterr()
        assert (out, err) == ("", f"permits: error: {path}: holds no call: nothing to replay\n")


#: The policies of the live-and-replayed runs below: each as it starts,
#: for the limiter and again for the replay.
_REPLAYED_POLICIES: dict[str, Callable[[], Policy]] = {
    "strict": lambda: StrictPriority(2),
    "fifo": lambda: Fifo(2),
    "aging": lambda: Aging(2, after_ns=SECOND // 4),
}


@pytest.mark.anyio
@pytest.mark.parametrize("policy", list(_REPLAYED_POLICIES))
@pytest.mark.parametrize("seed", range(20))
async def test_a_recording_of_any_shape_replays_as_the_live_run_went(
    open_limiter: Any, seed: int, policy: str
) -> None:
    """tests/test_adapters.py's guard, wider: forty calls at random on
    virtual time under three policies, acquires with a timeout (0
    included), a ``max_wait``, try_acquires, callers cancelled, and callers
    with both a timeout and a give-up of their own (a different one: at
    one instant, which goes first is the event loop's to say); recorded
    and replayed, each level's grants, refusals, expiries and cancels are
    the live limiter's. (Not under shares, nor with flows, a caller
    granted and cancelled before it ran: the live limiter's refund leaves
    the policy's turn moved on, where the replay, cancelling it at its
    grant, does not. Nor a caller cancelled after 0 s: live, it leaves at
    its first await, after callers of the same instant may have come, and
    a trace's give_up_after of 0 leaves before them.)"""
    import anyio

    from permits.adapters import AcquireTimeout, WouldWaitTooLong
    from permits.core import QueueFull

    draw = random.Random(seed)

    async def call(kind: str, level: int, patience: float | None, give: float) -> None:
        with suppress(AcquireTimeout, WouldWaitTooLong, QueueFull):
            if kind == "try":
                limiter.try_acquire(level)
            elif kind == "cancelled":
                with anyio.move_on_after(give):
                    await limiter.acquire(level)
            elif kind == "both":
                with anyio.move_on_after(give):
                    await limiter.acquire(level, timeout=patience)
            elif kind == "max_wait":
                await limiter.acquire(level, max_wait=patience)
            else:
                await limiter.acquire(level, timeout=patience)

    async with open_limiter(_REPLAYED_POLICIES[policy](), 8, 2, max_waiting=5) as limiter:
        recording = limiter.record()
        async with anyio.create_task_group() as tg:
            for _ in range(40):
                await anyio.sleep(draw.choice([0, 0, 1 / 64, 1 / 16, 1 / 8, 1 / 4]))
                kind = draw.choice(["timeout", "max_wait", "try", "cancelled", "both"])
                patience = draw.choice([None, 0, 1 / 16, 1 / 8, 1 / 4, 1.0])
                give = draw.choice([1 / 16, 1 / 8, 1 / 4, 3 / 8, 1.0])
                if kind == "both" and give == patience:
                    give += 1 / 32
                tg.start_soon(call, kind, draw.randrange(2), patience, give)
        live = limiter.statistics().levels
    replayed_as_live(_REPLAYED_POLICIES[policy](), live, recording.calls)


@pytest.mark.anyio
async def test_a_caller_expired_and_then_cancelled_at_its_deadline_replays_as_expired(
    open_limiter: Any,
) -> None:
    """A caller whose timeout and own give-up fall at one instant, where the
    limiter's timer runs first: the machine expires it (counted expired),
    then its cancel scope ends the acquire. The recording must not write it
    as a give-up: the replay, which counts a give-up first at one instant,
    would count it cancelled where the live limiter counted it expired.
    (Where the event loop runs the cancel scope first, the machine counts
    it cancelled, and so does the replay: nothing to check.)"""
    import anyio

    async with open_limiter(Fifo(), 10, 1) as limiter:
        recording = limiter.record()
        await limiter.acquire()  # the bucket's permit; the next is due at 100 ms
        with anyio.move_on_after(0.05):
            await limiter.acquire(timeout=0.05)
        live = limiter.statistics().levels[0]
    if live.cancelled:  # (here the cancel scope ran first: counted cancelled, and so replayed)
        pytest.skip("the cancel scope ran before the limiter's timer on this event loop")
    assert live.expired == 1
    scenario = Scenario("r", Fifo(), 10, 1, [Workload("w", 0, Batch(0))])
    replayed = replay(scenario, recording.calls)["w"]
    assert (replayed.expired, replayed.cancelled) == (1, 0)


def _naive_replay(scenario: Scenario, calls: list[Call]) -> list[dict[str, Any]]:
    """Per level, what a naive loop over the machine makes of ``calls``:
    one event at a time, the next tick asked after every step; a timeout
    is the machine's own deadline (a timeout of 0, a deadline of now:
    expired at its push unless granted), a give-up a cancel; at one time
    the give-ups first (a give-up of 0: its caller is cancelled as it
    comes, never pushed), then the tick, then the arrivals. A call's
    cost is pushed as it is, its flow named to the machine if its level's
    workload (the scenario's ``level``-th) is fair."""
    duration = nanoseconds("seconds", scenario.seconds)
    names = tuple(scenario.named_limits)
    machine = Machine(
        scenario.policy,
        limits=scenario.named_limits,
        max_waiting=scenario.max_waiting,
        **scenario.flow_options(),
    )
    ends: list[tuple[State, int, int | None] | None] = [None] * len(calls)
    gives_up: dict[int, int] = {}
    arriving = [c for c in calls if c.at_ns < duration]

    def decide(decisions: list[Decision]) -> None:
        for d in decisions:
            assert isinstance(d.id, int)
            ends[d.id] = (d.state, d.at, d.waited)
            gives_up.pop(d.id, None)

    def cancel(id: int, t: int) -> None:
        gives_up.pop(id, None)
        if machine.cancel(id):
            ends[id] = (State.CANCELLED, t, None)

    i = 0
    while True:
        times = [machine.next_tick(), *gives_up.values()]
        if i < len(arriving):
            times.append(arriving[i].at_ns)
        t = min((time for time in times if time is not None), default=duration)
        if t >= duration:
            break
        for id in sorted(id for id, at in gives_up.items() if at == t):
            cancel(id, t)
        due = machine.next_tick()
        if due is not None and due <= t:
            decide(machine.tick(t))
        while i < len(arriving) and arriving[i].at_ns == t:
            call = arriving[i]
            id = i
            i += 1
            give = call.give_up_after_ns
            timeout = call.timeout_ns
            if give == 0:  # it gives up as it comes: nothing is decided for it
                ends[id] = (State.CANCELLED, t, None)
                continue
            decide(
                machine.push(
                    id,
                    call.level,
                    t,
                    deadline=None if timeout is None else t + timeout,
                    max_wait_ns=call.max_wait_ns,
                    cost=call.cost,
                    flow=call.flow if scenario.workloads[call.level].fair else None,
                )
            )
            if give is not None and ends[id] is None:
                gives_up[id] = t + give
    figures = []
    for level in range(scenario.policy.levels):
        mine = [ends[k] for k, c in enumerate(arriving) if c.level == level]
        done = [end for end in mine if end is not None]
        count = Counter(end[0] for end in done)
        granted = [
            c
            for c, end in zip(arriving, ends, strict=False)
            if c.level == level and end is not None and end[0] is State.GRANTED
        ]
        flows = {c.flow for c in arriving if c.level == level and c.flow is not None}
        figures.append(
            {
                "offered": len(mine),
                "granted": count[State.GRANTED],
                "cancelled": count[State.CANCELLED],
                "expired": count[State.EXPIRED],
                "rejected": count[State.REJECTED],
                "too_long": count[State.TOO_LONG],
                "wait_max_ns": max(
                    (end[2] for end in done if end[0] is State.GRANTED and end[2] is not None),
                    default=None,
                ),
                "cleared_at_ns": max((end[1] for end in done), default=None)
                if len(done) == len(mine)
                else None,
                "units_per_limit": tuple(
                    sum(c.cost if isinstance(c.cost, int) else c.cost.get(n, 0) for c in granted)
                    for n in names
                ),
                "tenants": len(flows),
                "tenants_starved": len(flows - {c.flow for c in granted}),
            }
        )
    return figures


_QUARTERS = st.sampled_from([None, 0, SECOND // 8, SECOND // 4, SECOND // 2])


@pytest.mark.parametrize(
    "call",
    [
        Call(0, 0, flow=10**10000),
        Call(10**10000, 0),
        Call(0, 10**10000),
        Call(0, 0, 10**10000),
        Call(0, 0, timeout_ns=10**10000),
    ],
)
def test_a_call_holding_an_int_too_long_to_write_is_refused_naming_it(call: Call) -> None:
    """P108: a call made in code (or a recording's: a flow that is an int)
    holding an int of more digits than ``str`` writes (10**10000) is
    refused by ``trace_lines`` naming its place, ``calls[1]``, and saying
    what to do: it raised Python's own ``ValueError``, naming nothing."""
    from permits.sim import trace_lines

    with pytest.raises(PermitValueError) as refused:
        list(trace_lines([Call(0, 0), call]))
    assert refused.value.argument == "calls[1]"
    assert str(refused.value) == (
        "calls[1]=<Call holding a number too long to show>: holds an int of more digits than "
        "str writes (sys.get_int_max_str_digits()): give it a smaller time, level, cost or flow"
    )


def test_a_flow_whose_str_raises_raises_as_it_does() -> None:
    """A flow whose own ``str`` raises a ``ValueError`` is the user's error,
    raised as it is, not taken for an int too long to write (P108)."""
    from permits.sim import trace_lines

    class Tenant:
        def __str__(self) -> str:
            raise ValueError("no name yet")

    with pytest.raises(ValueError, match=r"^no name yet$"):
        list(trace_lines([Call(0, 0, flow=Tenant())]))


def test_a_give_up_and_a_timeout_at_one_instant_are_a_give_up() -> None:
    """P59: a call whose timeout and give-up fall at the same instant gives
    up (cancelled), as the order of events at one instant says: the first
    takes the burst, the second would wait a second, and leaves at 0.5 s."""
    levels = [Workload("w0", 0, Batch(0)), Workload("w1", 1, Batch(0))]
    scenario = Scenario("r", StrictPriority(2), 1, 1, levels, burst=1)
    half = SECOND // 2
    calls = [Call(0, 0, 1, None, None, 0, None, None), Call(0, 0, 1, None, half, 0, None, half)]
    w0 = replay(scenario, calls).workloads[0]
    assert (w0.cancelled, w0.expired) == (1, 0), "P59"
