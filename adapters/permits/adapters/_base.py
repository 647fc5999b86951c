"""What every adapter shares: ids, waking, cancel-or-refund, fail-fast.

An adapter subclasses :class:`BaseLimiter` and provides three things of its
framework's: the clock (:meth:`_clock`), an event a waiter sleeps on
(:meth:`_new_event`), and a timer (:meth:`_reschedule`) that calls
:meth:`_on_timer` at ``machine.next_tick()``. Nothing here knows a policy:
every decision is :class:`permits.core.Machine`'s.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import itertools
import logging
import math
import sys
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Hashable,
    Mapping,
    Sequence,
)
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    suppress,
)
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypedDict, TypeVar, cast

from permits.core import (
    SECOND,
    Charge,
    Decision,
    FlowStatistics,
    Limit,
    Machine,
    NotRefundable,
    PermitError,
    PermitTypeError,
    PermitValueError,
    Policy,
    State,
    Statistics,
)
from permits.core.checks import check_int, level_range

from ._metrics import statistics_and_waits
from ._recording import Recording

if TYPE_CHECKING:
    pass  # in typing from Python 3.11

log = logging.getLogger("permits.adapters")

__all__ = [
    "AcquireTimeout",
    "BaseLimiter",
    "LimiterClosed",
    "LimiterOptions",
    "Permit",
    "WouldWaitTooLong",
    "current_level",
    "level",
]


class LimiterClosed(PermitError, RuntimeError):
    """The limiter was closed (or broke) while, or before, waiting on it.

    :ivar cause: the exception that broke the limiter, or ``None`` if it was
        closed normally.
    """

    def __init__(self, cause: BaseException | None = None) -> None:
        self.cause = cause
        if cause is None:
            super().__init__("the limiter is closed")
            return
        # The cause's type and message, not its repr: some hide the message
        # there (redis-py's errors: ``server:ResponseError``).
        text = str(cause)
        kind = type(cause).__name__
        super().__init__(
            f"the limiter broke: {kind}: {text}" if text else f"the limiter broke: {kind}"
        )


if sys.version_info >= (3, 11):
    _TimeoutError = TimeoutError
else:  # pragma: no cover - Python 3.10

    class _TimeoutError(asyncio.TimeoutError, TimeoutError):
        """Both timeouts of Python 3.10 (one since 3.11): aiohttp passes on
        from its middlewares only asyncio's, and turns any other
        ``OSError`` into its own ``ClientOSError``."""


class AcquireTimeout(PermitError, _TimeoutError):
    """``acquire(timeout=...)`` ran out before a permit was granted (a
    ``TimeoutError``, and asyncio's, which on Python 3.10 is another)."""

    def __init__(self, level: int, timeout: float) -> None:
        self.level = level
        self.timeout = timeout
        super().__init__(f"no permit at level {level} within timeout={timeout!r} s")


class WouldWaitTooLong(PermitError):
    """Fail-fast admission: even the best case would wait longer than
    ``max_wait`` (the machine's :attr:`~permits.core.State.TOO_LONG`, counted
    in the level's ``too_long``).

    :ivar estimated: the least wait in seconds (``Machine.min_wait``).
    """

    def __init__(self, level: int, estimated: float, max_wait: float) -> None:
        self.level = level
        self.estimated = estimated
        self.max_wait = max_wait
        # To the nanosecond, the machine's resolution: a due time is rounded
        # up to one, and a max_wait a nanosecond short of it is refused.
        seconds = f"{estimated:.9f}".rstrip("0").rstrip(".")
        super().__init__(
            f"level {level} would wait at least {seconds} s, more than max_wait={max_wait!r} s"
        )


_GRANTED = State.GRANTED

_LEVEL: contextvars.ContextVar[int | None] = contextvars.ContextVar("permits_level", default=None)
#: The tokens of the ``with level(n):`` blocks this context is in, innermost last.
_LEVEL_TOKENS: contextvars.ContextVar[tuple[contextvars.Token[int | None], ...]] = (
    contextvars.ContextVar("permits_level_tokens", default=())
)


def level(value: int) -> _LevelBlock:
    """Make ``value`` the level of every acquire in this context that names none.

    Assign priority where work enters (a request handler is interactive, a
    job worker batch) and let code deep in the call stack inherit it::

        with level(BATCH):
            await export_everything()   # its acquires are at BATCH

    or decorate the function where it enters (a plain or an ``async def``
    one, a generator or an async one: the level holds while its code runs,
    not in its caller's code between a generator's steps)::

        @level(BATCH)
        async def export_everything(): ...

    Under ``@contextmanager`` or ``@asynccontextmanager``, put it beneath,
    on the generator (above, it is refused: the body runs after the call).

    The level is a context variable, which no generator has its own of: a
    ``with level(n):`` block around a ``yield`` leaves ``n`` set in the
    caller's code while the generator is suspended. Around a context
    manager's ``yield``, that sets it for the ``with`` block it serves; in
    an iterated generator, decorate the generator instead.
    """
    check_int("level", value, 0)  # as acquire would, at once: not at the first acquire
    return _LevelBlock(value)


_F = TypeVar("_F", bound=Callable[..., Any])


class _LevelBlock:
    """What :func:`level` gives: a ``with`` block, or a decorator."""

    __slots__ = ("_value",)

    def __init__(self, value: int) -> None:
        self._value = value

    def __repr__(self) -> str:
        return f"level({self._value})"

    # The tokens to reset are the context's own, not the object's: one
    # ``level(1)`` kept and entered by two tasks or threads at once would
    # reset, in one, a token made in the other's context (a ValueError).
    def __enter__(self) -> None:
        token = _LEVEL.set(self._value)
        _LEVEL_TOKENS.set((*_LEVEL_TOKENS.get(), token))

    def __exit__(self, *exc_info: object) -> None:
        tokens = _LEVEL_TOKENS.get()
        _LEVEL_TOKENS.set(tokens[:-1])
        _LEVEL.reset(tokens[-1])

    def __call__(self, function: _F) -> _F:
        """``function``, run at this level while its code runs: an ``async
        def`` one while its coroutine runs (contextlib's decorator would set
        it only while the call made the coroutine), a generator (or an async
        one) while each step of its body runs, not in its caller's code
        between the steps. What it cannot hold a level for is refused."""
        value = self._value
        if isinstance(function, (staticmethod, classmethod)):
            return cast(_F, type(function)(self(function.__func__)))
        if inspect.isclass(function):
            raise PermitTypeError(
                "function",
                function,
                f"a function for level({value}) to decorate, not a class: decorate its "
                f"methods that acquire, or make it inside `with level({value}):`",
            )
        if not callable(function):
            raise PermitTypeError(
                "function", function, f"a function for level({value}) to decorate"
            )
        if inspect.isasyncgenfunction(function):
            return cast(_F, _async_steps_at(value, function))
        if inspect.isgeneratorfunction(function):
            return cast(_F, _steps_at(value, function))
        inner = inspect.unwrap(function)
        if inspect.isasyncgenfunction(inner) or inspect.isgeneratorfunction(inner):
            # @contextmanager's (or another wrapper's) function: the generator
            # runs after the call returns (in __enter__), under no level
            kind = "async" if inspect.isasyncgenfunction(inner) else ""
            raise PermitTypeError(
                "function",
                function,
                f"a function for level({value}) to decorate, not one wrapping a generator "
                f"(its body runs after the call returns): put @level({value}) beneath "
                f"@{kind}contextmanager (or the other decorator), on the generator itself",
            )
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def run(*args: Any, **kwargs: Any) -> Any:  # (still an async def to look at)
                return await _awaited_at(value, function(*args, **kwargs))

            return cast(_F, run)

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            with _At(value):
                result = function(*args, **kwargs)
            # an async def or a generator under a plain wrapper (another
            # decorator's): its body runs after the call returns, at this
            # level too
            if inspect.iscoroutine(result):
                return _awaited_at(value, result)
            if inspect.isgenerator(result):
                return _steps_at(value, lambda: result)()
            if inspect.isasyncgen(result):
                return _async_steps_at(value, lambda: result)()
            return result

        return cast(_F, call)


class _At:
    """A block run with the level ``value`` set, reset as it leaves: the
    steps of a decorated function (its own token, whatever ``with level()``
    blocks its code enters meanwhile)."""

    __slots__ = ("_token", "_value")

    def __init__(self, value: int) -> None:
        self._value = value

    def __enter__(self) -> None:
        self._token = _LEVEL.set(self._value)

    def __exit__(self, *exc_info: object) -> None:
        _LEVEL.reset(self._token)


def _steps_at(value: int, function: Callable[..., Generator[Any, Any, Any]]) -> Callable[..., Any]:
    """A generator function: ``function``'s generator, each step run with the
    level ``value`` set, and reset before its caller's code runs again."""

    @functools.wraps(function)
    def steps(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        with _At(value):
            generator = function(*args, **kwargs)
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                with _At(value):
                    out = generator.send(sent) if thrown is None else generator.throw(thrown)
            except StopIteration as stop:
                return stop.value
            thrown = None
            try:
                sent = yield out
            except GeneratorExit:
                with _At(value):
                    generator.close()
                raise
            except BaseException as error:
                sent, thrown = None, error

    return steps


def _async_steps_at(
    value: int, function: Callable[..., AsyncGenerator[Any, Any]]
) -> Callable[..., Any]:
    """An async generator function: ``function``'s async generator, each
    step run with the level ``value`` set, and reset before its caller's
    code runs again."""

    @functools.wraps(function)
    async def steps(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        with _At(value):
            generator = function(*args, **kwargs)
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                with _At(value):
                    if thrown is None:
                        out = await generator.asend(sent)
                    else:
                        out = await generator.athrow(thrown)
            except StopAsyncIteration:
                return
            thrown = None
            try:
                sent = yield out
            except GeneratorExit:
                with _At(value):
                    await generator.aclose()
                raise
            except BaseException as error:
                sent, thrown = None, error

    return steps


async def _awaited_at(value: int, coroutine: Coroutine[Any, Any, Any]) -> Any:
    """``coroutine``'s result, awaited with the level ``value`` set."""
    with _At(value):
        return await coroutine


def current_level() -> int | None:
    """The level set by the innermost :func:`level` block, or ``None``."""
    return _LEVEL.get()


def despite_interrupt(step: Callable[..., object], *args: object) -> None:
    """``step(*args)``, whole: an interrupt that lands in it (a
    ``KeyboardInterrupt`` lands between any two bytecodes of the main
    thread) goes on once ``step`` has run again. Each part of ``step`` done
    already must do nothing the second time."""
    try:
        step(*args)
    except BaseException as interrupt:
        if isinstance(interrupt, Exception):
            raise
        step(*args)
        raise


def _nanoseconds(argument: str, seconds: float) -> int | None:
    """``seconds`` as nanoseconds; ``None`` for an infinite duration, or one
    too long for a float to hold its nanoseconds (past about 1e299 s)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise PermitTypeError(argument, seconds, "a number of seconds")
    if seconds != seconds:  # NaN (math.isnan refuses a huge int)
        raise PermitValueError(argument, seconds, "must be a number of seconds >= 0, not NaN")
    if seconds < 0:
        raise PermitValueError(argument, seconds, "must be at least 0")
    ns = seconds * SECOND
    return None if ns > sys.float_info.max else round(ns)


#: A bound below the longest duration whose nanoseconds a float holds
#: (``sys.float_info.max / SECOND``, 1.797e299 s), as an error tells it:
#: rounded down, so that it never reads as taking what is refused.
_MOST_SECONDS = 1.79e299


def _finite_nanoseconds(argument: str, seconds: float) -> int:
    """``seconds`` as nanoseconds, where a duration must be one: refused if
    infinite, or too long for a float to hold its nanoseconds."""
    ns = _nanoseconds(argument, seconds)
    if ns is None:
        raise PermitValueError(
            argument, seconds, f"must be a finite number of seconds, at most {_MOST_SECONDS:g}"
        )
    return ns


def _seconds_until(argument: str, when: datetime) -> float:
    """The seconds from the wall clock's now to the aware ``when`` (``0.0``
    for a moment past): a ``datetime`` holds microseconds."""
    if not isinstance(when, datetime):
        raise PermitTypeError(argument, when, "an aware datetime.datetime")
    if when.utcoffset() is None:
        raise PermitValueError(
            argument,
            when,
            "is naive: it names no moment; give it a tzinfo "
            "(datetime.now(timezone.utc) + timedelta(seconds=30))",
        )
    return max(when - datetime.now(timezone.utc), timedelta(0)) / timedelta(seconds=1)


class Event(Protocol):
    def set(self) -> None: ...
    def wait(self) -> Awaitable[object]: ...


class _Wakeable(Protocol):
    def set(self) -> None: ...


class _Waiter:
    """A caller that pushed: what wakes it, and what it wakes to (made by
    :func:`_waiter`)."""

    __slots__ = ("decision", "error", "event")

    event: _Wakeable | None
    decision: Decision | None
    error: BaseException | None


def _waiter(event: _Wakeable | None, decision: Decision | None = None) -> _Waiter:
    """A new :class:`_Waiter`, filled in here: it has no ``__init__``, as
    :class:`Permit` has none (see :func:`_permit`)."""
    waiter = _Waiter()
    waiter.event = event
    waiter.decision = decision
    waiter.error = None
    return waiter


class LimiterOptions(TypedDict, total=False):
    """The keyword arguments every adapter's limiter takes (see
    :class:`BaseLimiter`)."""

    limits: Mapping[str, Limit] | Limit | None
    max_waiting: int | Sequence[int | None] | None
    default_level: int
    flow_weights: Mapping[Hashable, int] | Callable[[Hashable], int] | None
    max_waiting_per_flow: int | None
    flow_limit: str | None
    settle_window: float


def refuse_unknown(
    function: str, options: Mapping[str, object], takes: Sequence[str] | None = None
) -> None:
    """A keyword ``function`` does not take is refused naming ``function``
    and the arguments it ``takes`` (by default an ``open_limiter``'s: the
    policy, the limit and :class:`LimiterOptions`); Python's own error
    would name the private class that takes them."""
    if takes is None:
        takes = ("policy", "rate", "burst", *LimiterOptions.__annotations__)
    for name in options:
        if name not in takes:
            raise TypeError(
                f"{function}() got an unexpected keyword argument {name!r} "
                f"(it takes {', '.join(takes)})"
            )


_Opened = TypeVar("_Opened")


class _Block:
    """A context manager that only its own kind of block enters, once:
    ``async with`` (an async limiter's ``open_limiter()`` and ``permit()``)
    or ``with`` (the thread adapter's). Entered the other way, a second
    time, or used as what it gives (``limiter = open_limiter(...)``, then
    ``limiter.acquire()``), it says what to write instead of naming
    contextlib's private classes. (It is not awaitable: code that awaits
    whatever is awaitable leaves it alone.)"""

    __slots__ = ("_call", "_entered", "_gives", "_manager")

    #: How the block is written, and a word for those who wrote the other.
    _keyword = ""
    _hint = ""

    def __init__(self, manager: object, call: str, gives: str) -> None:
        self._manager = manager
        self._call = call  # "open_limiter" or "limiter.permit"
        self._gives = gives  # "limiter" or "permit"
        self._entered = False

    @property
    def _usage(self) -> str:
        return f"{self._keyword} {self._call}(...) as {self._gives}:"

    def _enter(self) -> None:
        """Refuse a second entry (kept at module level, entered by each
        test), which contextlib's manager refused naming its own
        attribute (``args``)."""
        if self._entered:
            raise RuntimeError(
                f"{self._call}(...) gives one {self._gives}, entered once: call "
                f"{self._call}(...) again for each block, `{self._usage}`"
            )
        self._entered = True

    def __repr__(self) -> str:
        entered = "entered" if self._entered else f"not entered: `{self._usage}`"
        return f"<{self._call}(...) {entered}>"

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__") or name in _Block.__slots__:
            raise AttributeError(name)
        raise AttributeError(
            f"{self._call}() gives no {self._gives} until it is entered, so it has no "
            f"{name!r}: write `{self._usage}` and use {self._gives}.{name} in that block"
        )

    def _refuse(self) -> NoReturn:
        raise TypeError(
            f"{self._call}() is entered by its own kind of block: write `{self._usage}`"
            + self._hint
        )


class AsyncBlock(_Block, AbstractAsyncContextManager[_Opened]):
    """An async framework's block: ``async with`` it."""

    __slots__ = ()
    _keyword = "async with"

    async def __aenter__(self) -> _Opened:
        self._enter()
        manager = cast(AbstractAsyncContextManager[_Opened], self._manager)
        return await manager.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        manager = cast(AbstractAsyncContextManager[_Opened], self._manager)
        return await manager.__aexit__(*exc_info)

    def __enter__(self) -> NoReturn:
        self._refuse()

    def __exit__(self, *exc_info: object) -> NoReturn:
        self._refuse()


class Block(_Block, AbstractContextManager[_Opened]):
    """The thread adapter's block: ``with`` it."""

    __slots__ = ()
    _keyword = "with"
    _hint = (
        " (it blocks the thread; in an event loop, use permits.adapters.asyncio, .trio or .anyio)"
    )

    def __enter__(self) -> _Opened:
        self._enter()
        return cast(AbstractContextManager[_Opened], self._manager).__enter__()

    def __exit__(self, *exc_info: Any) -> bool | None:
        return cast(AbstractContextManager[_Opened], self._manager).__exit__(*exc_info)

    async def __aenter__(self) -> NoReturn:
        self._refuse()

    async def __aexit__(self, *exc_info: object) -> NoReturn:
        self._refuse()


def async_opening(manager: AbstractAsyncContextManager[_Opened]) -> AsyncBlock[_Opened]:
    """An async framework's ``open_limiter()``: ``async with`` it."""
    return AsyncBlock(manager, "open_limiter", "limiter")


def opening(manager: AbstractContextManager[_Opened]) -> Block[_Opened]:
    """The thread adapter's ``open_limiter()``: ``with`` it."""
    return Block(manager, "open_limiter", "limiter")


class Permit:
    """The permit a caller holds: what it asked for, and the way to say what
    its call cost after all (:meth:`settle`). A limiter's ``acquire`` makes
    it; there is nothing to make one from by hand.

    A permit pickled (into another process) or copied comes back as a copy
    with its level, cost and flow, which settles nothing: its limiter stays
    with the original."""

    __slots__ = ("_id", "_limiter", "cost", "flow", "level")

    #: The level it was granted at.
    level: int
    #: The cost it asked for, as given.
    cost: int | Mapping[str, int]
    #: The flow it belongs to (``None``: its level's default flow).
    flow: Hashable
    _limiter: _Limiting | None  # (None: a copy)
    _id: int

    def settle(self, actual: int | Mapping[str, int]) -> None:
        """The call cost ``actual`` after all: a mapping of limit names to
        units (a limit it leaves out keeps the units asked for), or, with
        one limit, an ``int`` (with several, refused: which would it
        settle?). Less than asked
        gives the difference back at once, more is charged to the permits
        after it. Accepted within the limiter's ``settle_window`` of the
        caller proceeding, once; :class:`~permits.core.NotRefundable`
        otherwise, naming this permit and the limiter's ``settle_window``.
        After the limiter closed: :class:`LimiterClosed` (nothing is left to
        settle)."""
        limiter = self._limiter
        if limiter is None:
            raise NotRefundable(
                self,
                "has nothing to settle: it is a copy (pickled or copied), and only the "
                "permit its limiter gave settles",
                argument="permit",
            )
        try:
            limiter._settle(self._id, actual)
        except NotRefundable:
            window = limiter._settle_window
            if window > 0:
                reason = (
                    "has nothing to settle: settled already, or its caller proceeded "
                    f"longer ago than the limiter's settle_window={window!r} seconds"
                )
            else:
                reason = (
                    "has nothing to settle: the limiter keeps no permit to settle "
                    "after its caller proceeds (settle_window=0, the default); open "
                    "it with settle_window=SECONDS, the longest a call may take"
                )
            raise NotRefundable(self, reason, argument="permit") from None

    def __init__(self) -> None:
        raise TypeError(
            "a Permit is not made by hand: a limiter's acquire() returns one, "
            "and its permit() block gives one"
        )

    def __reduce__(self) -> tuple[Callable[..., Permit], tuple[object, ...]]:
        # (for pickle and copy: its limiter, with its lock, pickles not)
        return _copy, (self.level, self.cost, self.flow)

    def __repr__(self) -> str:
        return f"<Permit level={self.level} cost={self.cost!r} flow={self.flow!r}>"


#: A :class:`Permit` made as a limiter makes it: without its ``__init__``,
#: which refuses (``Permit()`` by hand).
_new_permit = object.__new__


def _copy(level: int, cost: int | Mapping[str, int], flow: Hashable) -> Permit:
    """A :class:`Permit` pickled or copied: one that settles nothing."""
    permit: Permit = _new_permit(Permit)
    permit._limiter = None
    permit._id = -1
    permit.level = level
    permit.cost = cost
    permit.flow = flow
    return permit


def _permit(
    limiter: _Limiting, id: int, level: int, cost: int | Mapping[str, int], flow: Hashable
) -> Permit:
    """The :class:`Permit` of ``id``, granted at ``level``: filled in here,
    not by an ``__init__`` (Python 3.11 runs a class's own ``__init__`` in
    an interpreter of its own, entered from C: about 500 instructions an
    acquire more than a call; and ``Permit``'s refuses)."""
    permit: Permit = _new_permit(Permit)
    permit._limiter = limiter
    permit._id = id
    permit.level = level
    permit.cost = cost
    permit.flow = flow
    return permit


class _Limiting:
    """What every limiter shares, whatever its caller waits with: the machine,
    its clock and timer, waking, cancel-or-refund, settling and live limits.
    The waiting itself is :class:`BaseLimiter`'s (async) or
    :class:`permits.adapters.threads.Limiter`'s (blocking)."""

    def __init__(
        self,
        policy: Policy,
        rate: int | float | Fraction | None = None,
        burst: int = 1,
        *,
        limits: Mapping[str, Limit] | Limit | None = None,
        max_waiting: int | Sequence[int | None] | None = None,
        default_level: int = 0,
        flow_weights: Mapping[Hashable, int] | Callable[[Hashable], int] | None = None,
        max_waiting_per_flow: int | None = None,
        flow_limit: str | None = None,
        settle_window: float = 0.0,
    ) -> None:
        window = _finite_nanoseconds("settle_window", settle_window)
        #: Whether permits stay settleable after their callers proceed.
        self._settle_later = window > 0
        #: The settle window as given, in seconds (for the errors).
        self._settle_window = settle_window
        self._machine = self._new_machine(
            policy,
            rate,
            burst,
            limits=limits,
            max_waiting=max_waiting,
            flow_weights=flow_weights,
            max_waiting_per_flow=max_waiting_per_flow,
            flow_limit=flow_limit,
            settle_window_ns=window,
        )
        try:
            self._machine.min_wait(default_level)  # validates it
        except (PermitTypeError, PermitValueError) as error:
            raise error.renamed("default_level") from None
        self.default_level = default_level
        #: The waiters, by id: exactly the machine's, each added as it is
        #: pushed and dropped as it is decided or withdrawn, so that
        #: ``not self._waiters`` says nobody waits (cheaper than asking the
        #: machine, whose ``len`` is a Python method called through a slot).
        self._waiters: dict[int, _Waiter] = {}
        self._ids = itertools.count()
        self._closed: LimiterClosed | None = None
        #: Told ``(level, waited_ns)`` as each caller proceeds with its
        #: permit (the OpenTelemetry wait histogram records from here);
        #: replaced by a new list to change it, never changed in place (a
        #: thread may be walking it meanwhile).
        self._on_proceed: list[Callable[[int, int], None]] = []
        self._recording: Recording | None = None
        #: Whether the machine paces its own permits, so that one may be
        #: free at once (a supplied machine's come from outside).
        self._paced = not self._machine.supplied
        #: When the longest pause set by :meth:`pause_for` ends (the clock's ns).
        self._pause_end = 0
        # Class settings read on every acquire (the last by every waiter as
        # it wakes), made the instance's own: Python 3.11 reads an
        # instance's attribute fast, but a class's through an instance the
        # slow way (a few hundred instructions).
        self._running = self._running
        self._checkpoint_on_grant = self._checkpoint_on_grant
        self._cancel_after_wake = self._cancel_after_wake

    # -- what an adapter provides -----------------------------------------

    def _new_machine(
        self, policy: Policy, rate: int | float | Fraction | None, burst: int, **options: Any
    ) -> Machine:
        """The machine: paced here, each permit charged as its caller
        proceeds (a shared limit's permits come from outside instead)."""
        return Machine(policy, rate, burst, charge=Charge.AT_SPEND, **options)

    def _clock(self) -> int:
        """The framework's monotonic clock, in nanoseconds."""
        raise NotImplementedError

    def _new_event(self) -> Event:
        raise NotImplementedError

    def _reschedule(self) -> None:
        """Arrange one call of :meth:`_on_timer` at ``machine.next_tick()``
        (or none if that is ``None``), replacing any arranged before."""
        raise NotImplementedError

    #: Whether an acquire decided at once (granted, or refused) still
    #: passes a cancellation point (trio's and anyio's convention: every
    #: async call of theirs is one).
    _checkpoint_on_grant = False

    async def _checkpoint(self) -> None:
        """A cancellation point, where the framework wants one."""

    def _ensure_open(self) -> None:
        """Raise at once if this limiter cannot work (a limiter whose timer
        task was never started). Asked only while not :attr:`_running`."""

    #: Whether the limiter's timer runs, so that :meth:`_ensure_open` has
    #: nothing to ask (asyncio's timer is the loop's own: always); checked
    #: first, as a call costs more on every acquire.
    _running = True

    #: Whether a waiter woken with its permit must still look for a cancel
    #: that came after the wake-up (trio's and anyio's cancel scopes: the
    #: task resumes normally and would see the cancel only at its next
    #: checkpoint, with a permit it cannot use).
    _cancel_after_wake = False

    async def _checkpoint_if_cancelled(self) -> None:
        """Raise the framework's cancellation if the caller is cancelled."""

    # -- shared machinery ---------------------------------------------------

    @property
    def machine(self) -> Machine:
        """The core state machine (read it; drive it only through the limiter)."""
        return self._machine

    #: The latest time handed to the machine (every time it is given comes
    #: from _now); at first below any clock's reading in int64 nanoseconds.
    _last = -(1 << 63)

    def _now(self) -> int:
        # Never a time behind one the machine has seen, whatever the clock
        # does (a monotonic clock never runs back; a loop's own may).
        now = self._clock()
        if now < self._last:
            return self._last
        self._last = now
        return now

    def _proceed(self, id: int, decision: Decision, now: int) -> None:
        """The caller of ``id`` proceeds with the permit ``decision`` granted:
        its permit counts from ``now``; then the exporters are told."""
        machine = self._machine
        try:
            decisions = machine.spend(id, now, settle_later=self._settle_later)
        except BaseException as error:
            self._fault(error)
        if decisions:
            self._dispatch(decisions)
        if self._waiters:  # the next permit's due time moved
            self._reschedule()
        if self._on_proceed:
            self._tell(decision.level, decision.waited)

    def _tell(self, level: int, waited: int) -> None:
        """Tell the exporters that a caller at ``level`` proceeds after
        waiting ``waited`` ns (an exporter that fails is logged; the caller
        keeps its permit)."""
        for told in self._on_proceed:
            try:
                told(level, waited)
            except Exception:
                log.exception("a metrics exporter failed to record a wait")

    def _dispatch(self, decisions: list[Decision]) -> None:
        """Wake the waiter of each decision, with it. An interrupt that
        lands meanwhile (a ``KeyboardInterrupt`` lands between any two
        bytecodes of the main thread) goes on once every one is woken: a
        waiter left asleep would never wake, its permit in flight for
        nobody. (Each is dropped once woken, so that waking it again
        does nothing.)"""
        despite_interrupt(self._wake, decisions)

    def _wake(self, decisions: list[Decision]) -> None:
        waiters = self._waiters
        for decision in decisions:
            waiter = waiters.get(decision.id)  # type: ignore[call-overload]
            if waiter is not None:
                if waiter.event is not None:
                    waiter.decision = decision
                    waiter.event.set()
                del waiters[decision.id]  # type: ignore[arg-type]

    def _fault(self, error: BaseException) -> NoReturn:
        """A machine call raised. Bad input (``PermitTypeError``,
        ``PermitValueError``) left the machine as it was and goes to the
        caller as it is. Anything else is a broken policy, which may have
        decided for other waiters in the same call: the limiter breaks, so
        that every waiter wakes with :class:`LimiterClosed` (none is left
        waiting, and no permit is left in flight for nobody), and so does
        the caller. An interrupt that landed in the call (see
        :meth:`_interrupted`) breaks it too, and goes on as itself."""
        if isinstance(error, (PermitTypeError, PermitValueError)):
            raise error
        self._break(error)
        if not isinstance(error, Exception):
            raise error
        raise self._refused() from error

    def _interrupted(self, error: BaseException) -> None:
        """A machine call was cut short by ``error``, broken policy or not:
        the limiter breaks (:meth:`_fault`). One that is not an
        ``Exception`` is an interrupt (a ``KeyboardInterrupt``, or what a
        signal handler raised, lands between any two bytecodes of the main
        thread, the machine's own among them), which may have left the
        machine half done (a waiter queued with its deadline not yet
        noted): nothing it decides can be trusted after it. It goes on as
        itself; a broken policy's error is the caller's to drop."""
        self._break(error)
        if not isinstance(error, Exception):
            raise error

    def _catch_up(self, due: int, seconds: float) -> None:
        """The timer set for the tick ``due`` (ns) fired with the framework's
        clock at ``seconds``: if that passes ``due / 1e9``, as the framework
        judged the deadline, the machine's time is ``due`` at least. (Past
        about 104 days of a clock's reading, a float holds its seconds only
        to a few ns, and the clock read in ns may round to a little before
        ``due``: the tick would find nothing due and the timer, its deadline
        passed, fire again at once; on a virtual clock, for ever.)"""
        if due > self._last and due / 1e9 <= seconds:
            self._last = due

    def _on_timer(self) -> None:
        """The timer fired: tick, wake whoever was decided, re-arm."""
        if self._closed is not None:
            return
        try:
            self._dispatch(self._machine.tick(self._now()))
        except BaseException as error:
            # The waiters learn of it (LimiterClosed, with the cause); the
            # timer is the limiter's own, so nobody else would.
            self._interrupted(error)
            return
        self._reschedule()

    def _refused(self) -> LimiterClosed:
        """The error of a call the closed limiter refuses: a new one each
        time, with the cause it closed with (one instance raised again and
        again keeps every raise's frames, and their locals, in its
        traceback)."""
        assert self._closed is not None
        return LimiterClosed(self._closed.cause)

    def _break(self, error: BaseException | None) -> None:
        """Close: every waiter wakes with :class:`LimiterClosed` (each its own).
        An interrupt that lands meanwhile goes on once every one is woken,
        as in :meth:`_dispatch`: a waiter left asleep would never wake."""
        if self._closed is not None:
            return
        self._closed = LimiterClosed(error)
        waiters, self._waiters = self._waiters, {}
        now = self._last
        if waiters and self._recording is not None:
            with suppress(Exception):  # closed from outside its loop: the last time seen
                now = self._now()
        despite_interrupt(self._wake_closed, waiters, now)

    def _wake_closed(self, waiters: dict[int, _Waiter], now: int) -> None:
        """Wake each of ``waiters`` with :class:`LimiterClosed`, dropping
        each once woken (so that waking them again does nothing)."""
        for id in list(waiters):
            waiter = waiters[id]
            if waiter.error is None:
                with suppress(Exception):  # a broken policy, asked its next choice
                    self._machine.cancel(id)
                self._gave_up(id, waiter, now)  # in a replay, it gives up now
                waiter.error = self._refused()
            if waiter.event is not None:
                waiter.event.set()
            del waiters[id]

    def _request(
        self,
        level: int | None,
        cost: int | Mapping[str, int],
        flow: Hashable,
        timeout: float | None,
        max_wait: float | None,
    ) -> tuple[int, int, Decision | None]:
        """An acquire's first step: check, push (which fails fast, with
        ``max_wait``: :class:`WouldWaitTooLong`). Returns the id, the level,
        and the decision if it was made at once."""
        level, now, patience, limit = self._arrival(level, timeout, max_wait)
        machine = self._machine
        deadline = None if patience is None else now + patience
        id = next(self._ids)
        try:
            decisions = machine.push(
                id, level, now, deadline=deadline, cost=cost, flow=flow, max_wait_ns=limit
            )
        except BaseException as error:
            self._fault(error)
        # The newcomer's own decision, if any: the last, or followed by
        # others' grants in the same push (the policy chooses again after it).
        decision = None
        try:
            if decisions:  # (none while others wait and the newcomer joins them)
                for i in range(len(decisions) - 1, -1, -1):
                    if decisions[i].id == id:
                        decision = decisions.pop(i)
                        break
                if decisions:
                    self._dispatch(decisions)
            if self._recording is not None:
                # Kept as waiting until it proceeds: one granted at once that
                # still passes a checkpoint (trio's, anyio's) may be
                # cancelled there, and then gives up at its grant.
                waiting = None
                if decision is None or (self._checkpoint_on_grant and decision.state is _GRANTED):
                    waiting = id
                self._record(now, level, cost, flow, patience, limit, waiting)
        except BaseException:
            # An interrupt (or a recording that failed) before the caller
            # knows its id: withdrawn, or its permit handed back, as a
            # caller's that leaves (left queued, it waited for nobody, and
            # every caller after it behind it).
            self._withdraw(id, _waiter(None, decision))
            raise
        if decision is not None and decision.state is State.TOO_LONG:
            assert max_wait is not None  # only a push with one is refused so
            raise self._too_long(level, cost, flow, max_wait)
        return id, level, decision

    def _take(
        self,
        level: int | None,
        cost: int | Mapping[str, int],
        flow: Hashable,
        timeout: float | None,
        max_wait: float | None,
    ) -> Permit | None:
        """An acquire's first try while nobody waits: a permit free now is
        taken and spent at once (:meth:`~permits.core.Machine.take`), with no
        waiter to record or wake. ``None``: none is free, and nothing was
        asked (:meth:`_request` asks)."""
        level, now, patience, limit = self._arrival(level, timeout, max_wait)
        id = next(self._ids)
        # Made first: once taken, the permit is spent, and the caller must
        # have it (an interrupt can land between any two bytecodes).
        permit = _permit(self, id, level, cost, flow)
        try:
            granted = self._machine.try_take(
                id, level, now, cost=cost, flow=flow, settle_later=self._settle_later
            )
        except BaseException as error:
            self._fault(error)
        if not granted:
            return None
        if self._recording is not None:
            self._record(now, level, cost, flow, patience, limit)
        if self._on_proceed:
            self._tell(level, 0)
        return permit

    def _arrival(
        self, level: int | None, timeout: float | None, max_wait: float | None
    ) -> tuple[int, int, int | None, int | None]:
        """An acquire's arguments, checked at its arrival: its level (named,
        or the context's, or the default), the time, and its patience and
        ``max_wait`` in nanoseconds (``None``: unbounded). Raises if the
        limiter is closed or cannot work."""
        if self._closed is not None:
            raise self._refused()
        if level is None:  # _level, inlined: acquire is the hot path
            level = _LEVEL.get()
            if level is None:
                level = self.default_level
            elif not 0 <= level < self._machine.levels:  # (said where it came from)
                reason = level_range(self._machine.levels)
                raise PermitValueError(
                    "level", level, f"{reason}: the level of the level({level}) block it runs in"
                )
        now = self._now()
        if not self._running:
            self._ensure_open()
        patience = None if timeout is None else _nanoseconds("timeout", timeout)
        limit = None if max_wait is None else _nanoseconds("max_wait", max_wait)
        return level, now, patience, limit

    def _record(
        self,
        now: int,
        level: int,
        cost: int | Mapping[str, int],
        flow: Hashable,
        patience: int | None,
        limit: int | None,
        waiting: int | None = None,
    ) -> None:
        """A request, in the recording (``limit``: its ``max_wait``, ns;
        ``waiting``: its id, if it waits)."""
        assert self._recording is not None
        self._recording.add(now, level, cost, flow, patience, limit, waiting)

    def _outcome(
        self,
        id: int,
        decision: Decision,
        cost: int | Mapping[str, int],
        flow: Hashable,
        timeout: float | None,
        now: int,
    ) -> Permit:
        """An acquire's last step, its permit decided: the caller proceeds at
        ``now`` with its :class:`Permit`, or learns why it has none."""
        if self._recording is not None:
            self._recording.decided(id)
        level = decision.level
        if decision.state is _GRANTED:
            permit = _permit(self, id, level, cost, flow)
            self._proceed(id, decision, now)
            return permit
        if decision.state is State.EXPIRED:
            raise AcquireTimeout(level, timeout if timeout is not None else 0.0)
        raise self._machine.queue_full(None, level, flow)  # the id is the limiter's own

    def _too_long(
        self, level: int, cost: int | Mapping[str, int], flow: Hashable, max_wait: float
    ) -> WouldWaitTooLong:
        """The error for an acquire the machine just refused as too long: its
        estimate is the ``min_wait`` the refusal compared (the refusal left
        the machine as the push's tick did)."""
        self._reschedule()  # the push's tick may have decided for others
        wait = self._machine.min_wait(level, cost=cost, flow=flow)
        # (past what a float holds, as long as an infinite wait)
        estimated = wait / SECOND if wait <= sys.float_info.max else math.inf
        return WouldWaitTooLong(level, estimated, float(max_wait))

    # -- the API ----------------------------------------------------------

    def _withdraw(self, id: int, waiter: _Waiter) -> None:
        """The caller gave up (cancelled, or any exception) after pushing."""
        if waiter.error is not None:
            return
        self._gave_up(id, waiter)
        if waiter.decision is None:
            self._waiters.pop(id, None)
            try:
                cancelled = self._machine.cancel(id)  # asks the policy when costs differ
            except BaseException as error:
                self._interrupted(error)  # a broken policy; the caller's exception goes on
                return
            if cancelled:
                # The next cost may fit now (SPEC P2): re-plan the timer.
                self._reschedule()
            else:
                # Not waiting, yet its decision never reached the caller
                # (an interrupt as it was taken from the push's decisions):
                # a permit granted to it goes back (none: nothing is done).
                self._refund(id)
        elif waiter.decision.state is State.GRANTED:
            # Decided, but the caller never proceeded: hand the permit back.
            self._refund(id)

    def _gave_up(self, id: int, waiter: _Waiter, now: int | None = None) -> None:
        """In the recording, the caller of ``id`` gives up: ``now`` (the
        clock's if ``None``), or at its grant if it was granted and never
        proceeded (its permit went on to the next waiter, as the replay's
        does when it gives up then); one the machine expired first stays
        expired."""
        if self._recording is not None:
            decision = waiter.decision
            if decision is not None and decision.state is not State.GRANTED:
                # Decided otherwise first (expired at its timeout): the
                # recording keeps that, as the statistics do.
                self._recording.decided(id)
                return
            if decision is not None:
                now = decision.at
            self._recording.gave_up(id, self._now() if now is None else now)

    def _refund(self, id: int) -> bool:
        """Hand back the permit granted to ``id``, whose caller never
        proceeded: to the next waiter at once, or banked. ``False``: past
        its refund window (a shared limit's permit, a loop stalled that
        long), nothing was done; the caller's own exception goes on
        unchanged either way."""
        try:
            self._dispatch(self._machine.refund(id, self._now()))
        except NotRefundable:
            return False
        except BaseException as error:
            self._interrupted(error)  # a broken policy
            return True
        self._reschedule()
        return True

    def try_acquire(
        self, level: int | None = None, *, cost: int | Mapping[str, int] = 1, flow: Hashable = None
    ) -> bool:
        """Take a permit only if one is free now; never waits, never queues.

        An acquire with ``timeout=0`` that answers instead of raising: a
        permit is free only while nobody waits (the core is
        work-conserving), so a newcomer never jumps the queue. One that finds
        none counts as pushed and expired at its level.
        """
        # Timeout 0, as the push below: recorded so, it never waits in a replay.
        if self._paced and not self._waiters and self._take(level, cost, flow, 0, None):
            return True
        id, _, decision = self._request(level, cost, flow, 0, None)  # deadline now
        assert decision is not None  # a deadline of now decides at once
        try:
            if self._recording is not None:
                self._recording.decided(id)
            if decision.state is _GRANTED:
                self._proceed(id, decision, decision.at)
                return True
        except BaseException:
            # An interrupt before the caller proceeds (one lands between any
            # two bytecodes of the main thread): a permit granted goes back,
            # as a waiter's does (left in flight, it held its place in the
            # bucket for ever); one spent already stays spent.
            self._withdraw(id, _waiter(None, decision))
            raise
        self._reschedule()
        return False

    # -- what the upstream says, and live limits ---------------------------

    @property
    def limits(self) -> dict[str, Limit]:
        """The limits as they stand now, by name."""
        return self._machine.limits

    def __repr__(self) -> str:
        kind = type(self)
        machine = self._machine
        state = "closed" if self._closed is not None else f"waiting={len(self._waiters)}"
        return (
            f"<{kind.__module__}.{kind.__qualname__} policy={machine.policy!r} "
            f"limits={machine.limits!r} {state}>"
        )

    def set_limit(
        self,
        *,
        rate: int | float | Fraction | None = None,
        burst: int | None = None,
        limit: str | None = None,
    ) -> None:
        """Change a limit now (``limit`` names it; it may be left out when
        there is one): the units in the bucket carry over, and what now fits
        is granted at once (SPEC.md, *Changing a limit*)."""
        self._apply(lambda now: self._machine.set_limit(now, rate=rate, burst=burst, limit=limit))

    def pause_for(self, seconds: float) -> None:
        """Grant nothing for ``seconds`` from now, at any level (a 429 with
        ``Retry-After``); then the backlog resumes in policy order. A later
        pause that ends sooner shortens nothing."""
        length = _finite_nanoseconds("seconds", seconds)

        def pause(now: int) -> list[Decision]:
            decisions = self._machine.pause_until(now + length, now)
            self._pause_end = max(self._pause_end, now + length)
            return decisions

        self._apply(pause)

    def pause_until(self, when: datetime) -> None:
        """Grant nothing before the moment ``when``, at any level: an aware
        :class:`~datetime.datetime` (a ``Retry-After`` date, an
        ``x-ratelimit-reset`` time), read against the system's wall clock
        as the call runs, then kept on the limiter's own clock:
        :meth:`pause_for` the seconds from now to ``when``, none for a
        moment already past. A naive ``datetime`` names no moment, and is
        refused."""
        seconds = _seconds_until("when", when)
        try:
            self.pause_for(seconds)
        except PermitValueError as error:  # (too long for this limiter)
            raise PermitValueError(
                "when", when, f"is {seconds} s from now, and {error.reason}"
            ) from None

    def pause_left(self) -> float:
        """Seconds until the pauses set by :meth:`pause_for` (and
        :meth:`pause_until`) end (``0.0``
        when none is in force): how long anything asked now waits at least."""
        return max(0, self._pause_end - self._clock()) / SECOND

    def adopt(self, remaining: int, reset_after: float, *, limit: str | None = None) -> None:
        """The upstream says ``remaining`` units of ``limit`` are left until
        ``reset_after`` seconds from now (the ``x-ratelimit-remaining-*``
        and ``-reset`` headers): until then this limit's bucket holds no
        more than that, paced so that what is left lasts to the reset
        (nothing of it before ``reset - remaining * interval``:
        :meth:`permits.core.Machine.adopt`). It only ever lowers what is
        available, never grants more because of it."""
        self._upstream_word(self._machine.adopt, remaining, reset_after, limit)

    def quota(self, remaining: int, reset_after: float, *, limit: str | None = None) -> None:
        """The upstream says ``remaining`` units of ``limit`` are left for
        ``reset_after`` seconds, a count (the IETF ``RateLimit`` field):
        until then at most that many more go, paced by the limit as before;
        a cost beyond what is left waits for the reset."""
        self._upstream_word(self._machine.quota, remaining, reset_after, limit)

    def _upstream_word(
        self,
        word: Callable[..., list[Decision]],
        remaining: int,
        reset_after: float,
        limit: str | None,
    ) -> None:
        """Apply the machine's ``word`` (adopt or quota) at the clock's now."""
        after = _finite_nanoseconds("reset_after", reset_after)
        self._apply(lambda now: word(remaining, now + after, now, limit=limit))

    def _apply(self, operation: Callable[[int], list[Decision]]) -> None:
        """Run a machine operation at the clock's now; wake whoever it decided
        for and re-plan the timer."""
        if self._closed is not None:
            raise self._refused()
        now = self._now()
        if not self._running:
            self._ensure_open()
        try:
            decisions = operation(now)
        except BaseException as error:
            self._fault(error)
        self._dispatch(decisions)
        self._reschedule()

    def _settle(self, id: int, actual: int | Mapping[str, int]) -> None:
        self._apply(lambda now: self._machine.settle(id, actual, now))

    def busiest_flows(self, level: int, n: int = 10) -> tuple[FlowStatistics, ...]:
        """The busiest named flows of ``level``: the ``n`` granted the most
        units and the ``n`` with the most units waiting (see
        :meth:`permits.core.Machine.busiest_flows`)."""
        return self._machine.busiest_flows(level, n)

    def statistics(self) -> Statistics:
        """The core's per-level snapshot: counts, and waits in seconds as
        ``wait_p50_s``, ``wait_p99_s`` and ``wait_max_s`` (``0.0`` before a
        level's first grant; the ``_ns`` fields hold the exact nanoseconds)."""
        return self._machine.statistics()

    def record(self, max_calls: int = 1_000_000) -> Recording:
        """Record the calls from now on as a trace (off until called): each
        acquire's and try_acquire's time, level, cost, flow and timeout (for
        a caller cancelled while waiting: how long it waited, to its grant
        if it was granted and cancelled before it ran), at most
        ``max_calls`` of them. ``recording.write(path)`` writes it as
        the CSV that ``permits simulate --trace`` and ``permits compare
        --trace`` replay against other policies (with several limits, a
        ``cost.<limit>`` column for each, so the replay asks what each call
        asked). A later ``record`` starts a new recording (the one it
        replaces keeps no new calls, and still learns how its waiting ones
        end); ``recording.stop()`` ends one. After the limiter closed:
        :class:`LimiterClosed` (no call is left to record)."""
        max_calls = check_int("max_calls", max_calls, 1)
        if self._closed is not None:
            raise self._refused()
        previous = self._recording
        if previous is not None:
            previous.stop()  # (told still how its waiting calls end)
        self._recording = Recording(self._now(), max_calls, tuple(self._machine.limits), previous)
        return self._recording

    def _statistics_and_waits(
        self, bounds_ns: Sequence[int]
    ) -> tuple[Statistics, tuple[tuple[int, ...], ...]]:
        """For the exporters, whose bounds are the core's nanoseconds:
        :meth:`statistics`, and per level the waits at most each bound
        (:meth:`permits.core.Machine.waits_at_most`), read at one moment:
        a histogram whose buckets and count agree (read from another
        thread too: see :func:`~permits.adapters._metrics.statistics_and_waits`)."""
        return statistics_and_waits(self._machine, bounds_ns)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def __aenter__(self) -> NoReturn:
        """``async with limiter:`` is refused: it would take no permit (as it
        does in aiolimiter), and it does not open a limiter either."""
        raise TypeError(
            "`async with limiter:` takes no permit: write `async with limiter.permit(level):` "
            "for one; open a limiter with `async with open_limiter(...) as limiter:`"
        )

    async def __aexit__(self, *exc_info: object) -> None:  # pragma: no cover - never entered
        return None


# Python's error for a keyword the constructor does not take names the
# function's qualified name: a user's ``Limiter(..., settle_windw=60)`` is
# told of ``Limiter.__init__``, the class they called, not of this private one.
_Limiting.__init__.__qualname__ = "Limiter.__init__"


class BaseLimiter(_Limiting):
    """A limiter over a :class:`~permits.core.Machine`; made by a framework
    module (:mod:`permits.adapters.asyncio`, ``.trio``, ``.anyio``).

    :param policy: who goes next (see :mod:`permits.core`).
    :param rate: units per second of the one limit (or give ``limits``).
    :param burst: units that may be banked, at least 1. On a real event
        loop, timers fire up to about a millisecond late; a burst of about
        ``1 + rate * 0.0015`` keeps the configured rate (README, "Pacing on a
        real event loop").
    :param limits: several limits at once, by name (``{"requests":
        Limit.per_minute(500), "tokens": Limit.per_minute(90_000)}``);
        an acquire's ``cost`` names what it takes from each.
    :param max_waiting: queue limits, as for the machine; ``0`` for a level
        means "never queue": such an acquire is granted at once or rejected.
    :param default_level: the level of an acquire that names none, outside
        any :func:`level` block.
    :param flow_weights: the weight of each flow (a mapping, or a function
        of the flow), as for the machine; 1 by default.
    :param max_waiting_per_flow: the most waiters one flow may have queued.
    :param flow_limit: the limit whose units the flows of a level share
        (the first by default).
    :param settle_window: seconds after a caller proceeds during which its
        :meth:`Permit.settle` is accepted; 0 (the default) keeps nothing to
        settle. The limiter remembers each permit for that long, so its
        memory grows with the rate times the window.

    A permit counts against the limit when its caller proceeds (the machine
    charges it :attr:`~permits.core.Charge.AT_SPEND`), so the limit holds
    where the upstream sees the calls, however late a stalled event loop
    lets the callers resume. Until then it is in flight; at most ``burst``
    are, so the burst also covers the hand-off from the timer to the caller.
    """

    async def acquire(
        self,
        level: int | None = None,
        *,
        cost: int | Mapping[str, int] = 1,
        flow: Hashable = None,
        timeout: float | None = None,
        max_wait: float | None = None,
    ) -> Permit:
        """Wait for a permit at ``level`` (default: :func:`current_level`, then
        ``default_level``), asking for ``cost`` (an ``int``: that many units of
        every limit; or a mapping of limit names to units), in ``flow`` (a
        tenant, an API key: the flows of a level take turns). Returns the
        :class:`Permit`, whose :meth:`Permit.settle` says what the call cost
        after all.

        :param timeout: seconds to wait at most; then :class:`AcquireTimeout`.
            The framework's own timeouts and cancellation work too.
        :param max_wait: fail fast: raise :class:`WouldWaitTooLong` at once if
            even the best case would wait longer than this many seconds (the
            machine's ``push(max_wait_ns=...)``; counted as the level's
            ``too_long``).
        :raises permits.core.QueueFull: the level is at its ``max_waiting``.
        :raises LimiterClosed: the limiter is closed, or closes while waiting.

        ``timeout=0`` means "do not wait": granted if a permit is free now,
        :class:`AcquireTimeout` otherwise.

        A cancelled waiter costs no permit; one cancelled after its permit was
        decided, before it could proceed, hands the permit back, and the next
        waiter gets it at once.
        """
        if self._paced and not self._waiters:  # nobody waits: one may be free
            if self._checkpoint_on_grant:
                # Before a permit is taken, so that a cancel costs none. Under
                # the wrong framework the clock says so, clearly.
                try:
                    await self._checkpoint()
                except BaseException:
                    self._now()
                    raise
            permit = self._take(level, cost, flow, timeout, max_wait)
            if permit is not None:
                return permit
        try:
            id, level, decision = self._request(level, cost, flow, timeout, max_wait)
        except WouldWaitTooLong:
            if self._checkpoint_on_grant:
                await self._checkpoint()  # a refusal too (see below)
            raise
        if decision is not None:
            # Decided at once (granted, rejected, expired): no waiter record
            # or event is needed.
            if self._checkpoint_on_grant:
                if decision.state is _GRANTED:
                    try:
                        await self._checkpoint()
                    except BaseException:
                        self._withdraw(id, _waiter(None, decision))
                        raise
                    return self._outcome(id, decision, cost, flow, timeout, self._now())
                # A refusal is a schedule point too: a caller that polls
                # with timeout=0 while others wait lets them run. Its error
                # is made first: the queue it names is the push's.
                try:
                    return self._outcome(id, decision, cost, flow, timeout, decision.at)
                finally:
                    await self._checkpoint()
            return self._outcome(id, decision, cost, flow, timeout, decision.at)
        # Nothing can run between the push and here: no await.
        event = self._new_event()
        waiter = _waiter(event)
        self._waiters[id] = waiter
        self._reschedule()
        try:
            await event.wait()
            if self._cancel_after_wake:
                await self._checkpoint_if_cancelled()
        except BaseException:
            self._withdraw(id, waiter)
            raise
        if waiter.error is not None:
            raise waiter.error
        assert waiter.decision is not None
        return self._outcome(id, waiter.decision, cost, flow, timeout, self._now())

    def permit(
        self,
        level: int | None = None,
        *,
        cost: int | Mapping[str, int] = 1,
        flow: Hashable = None,
        timeout: float | None = None,
        max_wait: float | None = None,
    ) -> AbstractAsyncContextManager[Permit]:
        """``async with limiter.permit(level, cost=...) as permit:`` --
        :meth:`acquire`, then the block; ``permit.settle(actual)`` works in
        it and after it."""
        acquire = functools.partial(
            self.acquire, level, cost=cost, flow=flow, timeout=timeout, max_wait=max_wait
        )
        return AsyncBlock(_acquired(acquire), "limiter.permit", "permit")


@asynccontextmanager
async def _acquired(acquire: Callable[[], Awaitable[Permit]]) -> AsyncIterator[Permit]:
    """The block of an async limiter's ``permit()``: ``acquire()``'s permit."""
    yield await acquire()
