"""P95: every error ``permits`` raises crosses a process as itself.

An error raised in a worker process (a ``ProcessPoolExecutor``'s, a
``multiprocessing.Pool``'s) reaches the caller pickled, and ``copy`` copies
an error the same way. Python rebuilds an exception by calling its class
with its ``args``, the message alone here, which no ``__init__`` of these
errors takes: the thread adapter's ``AcquireTimeout`` out of a worker broke
the whole pool (``BrokenProcessPool``) instead of reaching the caller.
Each error is drawn here with any attributes its ``__init__`` takes, a note
or none, and must come back of its type, with its message, ``args``, notes
and attributes.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

from hypothesis import given, note
from hypothesis import strategies as st

from permits.adapters import AcquireTimeout, LimiterClosed, WouldWaitTooLong, WrongFramework
from permits.adapters.redis import BackendUnavailable
from permits.core import (
    Decision,
    DuplicateId,
    NotRefundable,
    PermitError,
    PermitTypeError,
    PermitValueError,
    PolicyError,
    QueueFull,
    State,
    TimeWentBackwards,
)
from permits.sim import ScenarioError, TraceError

#: What an error may carry as a value, an id or a flow: any plain value.
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.tuples(inner, inner) | st.lists(inner, max_size=3),
    max_leaves=5,
)
hashables = st.none() | st.integers() | st.text() | st.tuples(st.integers(), st.text())
frameworks = st.sampled_from(["asyncio", "trio"])
decisions = st.builds(
    Decision,
    id=hashables,
    level=st.integers(0, 3),
    state=st.sampled_from(State),
    at=st.integers(0, 10**12),
    waited=st.integers(0, 10**12),
)
causes = st.none() | st.builds(ValueError, st.text()) | st.builds(KeyError, st.text())

errors: st.SearchStrategy[PermitError] = st.one_of(
    st.builds(PermitError, st.text()),
    st.builds(PermitValueError, st.text(min_size=1), values, st.text()),
    st.builds(PermitTypeError, st.text(min_size=1), values, st.text(), got=st.none() | st.text()),
    st.builds(TimeWentBackwards, st.integers(), st.integers()),
    st.builds(DuplicateId, hashables),
    st.builds(
        NotRefundable, hashables, st.none() | st.text(), argument=st.sampled_from(["id", "permit"])
    ),
    st.builds(
        QueueFull,
        hashables,
        st.integers(0, 3),
        st.integers(0, 100),
        flow=hashables,
        per_flow=st.booleans(),
    ),
    st.builds(PolicyError, st.text(), st.lists(decisions, max_size=3)),
    st.builds(LimiterClosed, causes),
    st.builds(AcquireTimeout, st.integers(0, 3), st.floats(0, 1e9)),
    st.builds(WouldWaitTooLong, st.integers(0, 3), st.floats(0, 1e9), st.floats(0, 1e9)),
    st.builds(
        WrongFramework,
        st.text(),
        frameworks,
        st.none() | frameworks,
        bound=st.booleans(),
    ),
    st.builds(BackendUnavailable, st.text(), st.floats(0, 1e9), causes),
    st.builds(ScenarioError, st.text(min_size=1), values, st.text()),
    st.builds(TraceError, st.integers(1, 10**6), st.text(min_size=1), values, st.text()),
)


def same(a: object, b: object) -> bool:
    """Equal values; exceptions (which compare by identity) by type and args."""
    if isinstance(a, BaseException):
        return type(a) is type(b) and a.args == b.args
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return a == b or (a != a and b != b)


def copies() -> st.SearchStrategy[tuple[str, Callable[[Any], Any]]]:
    return st.sampled_from(
        [
            ("pickle", lambda error: pickle.loads(pickle.dumps(error))),
            ("copy.copy", copy.copy),
            ("copy.deepcopy", copy.deepcopy),
        ]
    )


@given(errors, st.none() | st.text(), copies())
def test_every_error_crosses_a_process_as_itself(
    error: PermitError, note_text: str | None, how: tuple[str, Callable[[Any], Any]]
) -> None:
    """P95: pickled (as an error from a worker process is), copied or deep
    copied, each error comes back of its type, with its message, ``args``,
    notes and attributes."""
    if note_text is not None:
        # (add_note is Python 3.11's; it keeps the notes in __notes__)
        error.__notes__ = [*getattr(error, "__notes__", ()), note_text]
    name, make = how
    note(f"{name} of {error!r}, attributes {vars(error)!r}")
    try:
        again = make(error)
    except Exception as failure:  # (Exception's own pickling: a TypeError)
        raise AssertionError(("P95", name, repr(failure))) from failure
    assert type(again) is type(error), ("P95", type(again), type(error))
    assert str(again) == str(error), ("P95", str(again), str(error))
    assert again.args == error.args, ("P95", again.args, error.args)
    assert vars(again).keys() == vars(error).keys(), ("P95", vars(again), vars(error))
    for attribute, value in vars(error).items():
        assert same(getattr(again, attribute), value), (
            "P95",
            attribute,
            getattr(again, attribute),
            value,
        )
