"""The errors the core raises.

One root, :class:`PermitError`. Bad input is a :class:`PermitValueError` or a
:class:`PermitTypeError`; both are also the built-in ``ValueError`` /
``TypeError``, name the argument (a mapping's or a sequence's bad entry by
its entry: ``cost['tokens']=-1``) and carry the value they got, and leave the
machine exactly as it was.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

__all__ = [
    "DuplicateId",
    "NotRefundable",
    "PermitError",
    "PermitTypeError",
    "PermitValueError",
    "PolicyError",
    "QueueFull",
    "TimeWentBackwards",
]


class PermitError(Exception):
    """Root of every error raised by ``permits``.

    Every one pickles and copies as itself: of its type, with its message,
    ``args``, notes and attributes (an error raised in a worker process
    reaches its caller so)."""

    def __reduce__(self) -> tuple[object, ...]:
        # Exception's own rebuilds the error by calling its class with its
        # ``args``, the message alone, which no ``__init__`` here takes.
        return (_rebuilt, (type(self), self.args), self.__dict__)


def _rebuilt(kind: type[PermitError], args: tuple[object, ...]) -> PermitError:
    """An error of ``kind`` with these ``args``, made without its
    ``__init__`` (its attributes are set after, as pickled)."""
    error = kind.__new__(kind)
    error.args = args
    return error


#: The most characters of a value an error's message shows.
MAX_SHOWN = 1_000


def shown(value: object) -> str:
    """``repr(value)``, or for a value whose ``repr`` Python refuses (an
    ``int`` of more digits than ``sys.get_int_max_str_digits()``, 4,300 by
    default: ``10**10000``, or a container holding one) what it is, so that
    the error naming it is raised rather than a ``ValueError`` of its
    message. A ``repr`` longer than :data:`MAX_SHOWN` characters (the
    weights of a thousand levels) is cut there, saying how long it was."""
    try:
        text = repr(value)
    except ValueError:
        if isinstance(value, int):
            digits = math.floor(abs(value).bit_length() * math.log10(2)) + 1
            return f"<int of about {digits:,} digits>"
        return f"<{type(value).__name__} holding a number too long to show>"
    if len(text) > MAX_SHOWN:
        return f"{text[: MAX_SHOWN - 100]}... <{len(text):,} characters in all>"
    return text


class PermitValueError(PermitError, ValueError):
    """An argument has the right type but a value the operation refuses.

    :ivar argument: the name of the argument, as in the signature; or of
        its entry at fault, where the argument is a mapping or a sequence
        (``cost['tokens']``, ``max_waiting[1]``).
    :ivar value: the value it got (the entry's, for an entry).
    """

    def __init__(self, argument: str, value: object, reason: str) -> None:
        self.argument: str = argument
        self.value: object = value
        self.reason: str = reason
        super().__init__(f"{argument}={shown(value)}: {reason}")

    def renamed(self, argument: str) -> PermitValueError:
        """The same refusal, naming ``argument``: where a caller wrote the
        value under another name than the one that refused it."""
        return PermitValueError(argument, self.value, self.reason)


class PermitTypeError(PermitError, TypeError):
    """An argument has the wrong type.

    :ivar argument: the name of the argument, as in the signature; or of
        its entry at fault, as :class:`PermitValueError`'s.
    :ivar value: the value it got (a stand-in, where the value may hold a
        secret: a URL's password; ``got`` then names its type).
    :ivar got: what the message says it got: the value's type, or ``an
        empty str``.
    """

    def __init__(
        self, argument: str, value: object, expected: str, *, got: str | None = None
    ) -> None:
        self.argument: str = argument
        self.value: object = value
        self.expected: str = expected
        if got is None:  # not "got str" where a non-empty str is asked
            got = "an empty str" if isinstance(value, str) and not value else type(value).__name__
        self.got: str = got
        super().__init__(f"{argument}={shown(value)}: expected {expected}, got {got}")

    def renamed(self, argument: str) -> PermitTypeError:
        """The same refusal, naming ``argument`` (see
        :meth:`PermitValueError.renamed`)."""
        return PermitTypeError(argument, self.value, self.expected, got=self.got)


class TimeWentBackwards(PermitValueError):
    """``now`` is earlier than a time the machine has already seen.

    :ivar last: the latest time the machine has seen.
    """

    def __init__(self, now: int, last: int) -> None:
        self.last = last
        super().__init__("now", now, f"time went backwards (the machine is at {last})")


class DuplicateId(PermitValueError):
    """A push used an id that is already waiting, or whose permit is in flight."""

    def __init__(self, id: Hashable) -> None:
        self.id = id
        super().__init__("id", id, "this id is already waiting, or its permit is in flight")


class NotRefundable(PermitValueError):
    """A refund or settle named an id that holds no permit to give back or settle.

    The id was never granted, its permit was already refunded or settled, it
    was pushed again since, it was spent (a refund; a settle needs
    ``spend(..., settle_later=True)``), or it was charged longer ago than the
    machine's ``settle_window_ns``.
    """

    def __init__(self, id: Hashable, reason: str | None = None, *, argument: str = "id") -> None:
        self.id = id
        super().__init__(
            argument,
            id,
            reason
            or "holds no permit to refund or settle (never granted, already refunded or "
            "settled, spent, pushed again, or charged longer ago than settle_window_ns)",
        )


class QueueFull(PermitError):
    """A push was rejected because its level already has ``max_waiting``
    waiters (the option ``max_waiting``), or, when ``per_flow``, its flow
    ``flow`` of that level does (the option ``max_waiting_per_flow``).
    ``id`` is ``None`` from an adapter's ``acquire``, whose ids the caller
    never sees.

    Not bad input: the rejection is an outcome. The id ends in the state
    ``REJECTED``, is counted in the level's ``rejected`` statistic and is never
    granted.
    """

    def __init__(
        self,
        id: Hashable,
        level: int,
        max_waiting: int,
        *,
        flow: Hashable = None,
        per_flow: bool = False,
    ) -> None:
        self.id = id
        self.level = level
        self.max_waiting = max_waiting
        self.flow = flow
        self.per_flow = per_flow
        where = f"flow {shown(flow)} of level {level}" if per_flow else f"level {level}"
        option = "max_waiting_per_flow" if per_flow else "max_waiting"
        who = "rejected" if id is None else f"id={shown(id)} rejected"  # None: an acquire's
        if max_waiting == 0:
            full = "takes no waiters"
        else:
            full = f"already has {max_waiting} waiter{'' if max_waiting == 1 else 's'}"
        super().__init__(f"{who}: {where} {full} ({option}={max_waiting})")


class PolicyError(PermitError):
    """A policy broke the :class:`~permits.core.Policy` protocol.

    Raised before the grant it was asked for, so the machine stays whole:
    nothing is granted twice or lost, and the waiters not granted still
    wait. A permit may then be available while they do, and the next tick
    is due at once, to ask the policy again (until it does,
    :meth:`~permits.core.Machine.check_valid` says a permit idles, while
    every cost is one unit).
    Decisions the same call made before that stand: they are in
    :attr:`decisions`, for whoever must wake those waiters.
    """

    def __init__(self, message: str, decisions: Sequence[object] = ()) -> None:
        self.decisions: tuple[object, ...] = tuple(decisions)
        super().__init__(message)
