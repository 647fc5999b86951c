"""The grant ledger: which permits can still be refunded, settled or spent.

A permit charged can be refunded or settled within the machine's refund
window; doing so replays what the log holds after it (the later charges, and
the changes of a limit made since), so each logged grant keeps the bucket's
state just before it (its mark). A permit in flight (charged at its spend)
can be refunded until it is spent, and needs no mark. Spending a permit
forgets it, unless it is to be settled later, and with it every logged record
no refund or settle can reach any more. Without a window (``None``) no
charged permit is ever refunded or settled: the ledger holds only the
permits in flight, and logs nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterator
from typing import NamedTuple

from ._queues import Waiter
from .checks import check_hashable

__all__ = ["Grant", "Ledger"]


class Grant(NamedTuple):
    """One permit granted: in flight, or charged and still refundable or
    settleable, or (in the log only) a charge a replay goes through again."""

    waiter: Waiter
    #: When it was charged (ns); for a permit in flight, when it was granted.
    at: int
    #: The units it is charged, one per limit: the waiter's cost, until settled.
    cost: tuple[int, ...]
    #: The bucket's state just before it was charged; ``None`` for a permit
    #: in flight, charged when spent.
    before: object


class Ledger:
    """The grants that may still be refunded or settled, and the log that
    replays them.

    :param window: nanoseconds after its charge during which a permit may be
        refunded or settled. The log holds the records of up to two windows
        (pruned in batches), or, once no permit in it is refundable or
        settleable any more, nothing. ``None``: a charged permit never may
        be (only one in flight is held).
    """

    __slots__ = ("_log", "_spent", "held", "window")

    def __init__(self, window: int | None) -> None:
        self.window = window
        #: The grants held, by id: read-only outside (change it through
        #: :meth:`add` and :meth:`forget`).
        self.held: dict[Hashable, Grant] = {}
        self._log: deque[object] = deque()
        #: Ids of held grants that were spent, kept to be settled.
        self._spent: set[Hashable] = set()

    def __len__(self) -> int:
        """Grants that may still be refunded, settled or spent."""
        return len(self.held)

    def __iter__(self) -> Iterator[Grant]:
        """Those grants, oldest first."""
        return iter(self.held.values())

    @property
    def logged(self) -> tuple[object, ...]:
        """The log, oldest first: what a refund would replay."""
        return tuple(self._log)

    def get(self, id: Hashable) -> Grant | None:
        """``id``'s grant, if it may still be refunded, settled or spent."""
        try:
            return self.held.get(id)  # get() hashes even on an empty dict
        except Exception:
            check_hashable("id", id)
            raise

    def settleable(self, id: Hashable, now: int) -> Grant | None:
        """``id``'s grant if it can be settled at ``now``: in flight, or
        charged within the window."""
        grant = self.get(id)
        window = self.window
        if grant is None or (
            grant.before is not None and (window is None or grant.at < now - window)
        ):
            return None
        return grant

    def refundable(self, id: Hashable, now: int) -> Grant | None:
        """``id``'s grant if it can be refunded at ``now``: settleable and not spent."""
        grant = self.settleable(id, now)
        return None if grant is None or grant.waiter.id in self._spent else grant

    def is_spent(self, id: Hashable) -> bool:
        """Whether ``id``'s held grant was spent (kept to be settled)."""
        return id in self._spent

    def add(self, grant: Grant) -> None:
        """A new grant held; logged if it was charged. (Without a window, the
        machine adds none that was charged.)"""
        self.held[grant.waiter.id] = grant
        if grant.before is not None:
            self.log(grant)

    def add_spent(self, grant: Grant) -> None:
        """``grant``, spent, is kept to be settled: held, unless it is already
        (charged at its grant, and logged then)."""
        self._spent.add(grant.waiter.id)
        if self.held.get(grant.waiter.id) is not grant:
            self.add(grant)

    def log(self, record: object) -> None:
        """A charge or a change, at the end of the log: unless no grant is
        held, so that no refund or settle could replay it (a replay goes
        only through the records after the grant it returns to; and
        without a window, no charged grant is held)."""
        window = self.window
        if self.held and window is not None:
            log = self._log
            at: int = record.at  # type: ignore[attr-defined]
            if log and log[0].at < at - 2 * window:  # type: ignore[attr-defined]
                self._prune(at - window)  # (pruned once two windows old)
            log.append(record)

    def forget(self, id: Hashable) -> None:
        """``id``'s grant can no longer be refunded or settled (spent,
        settled, or pushed again)."""
        self.held.pop(id, None)
        if self._spent:
            self._spent.discard(id)

    def _prune(self, horizon: int) -> None:
        """Forget the records older than ``horizon`` (a window ago): amortised
        O(1) per grant, done in batches of a window's worth."""
        log, held = self._log, self.held
        while log and log[0].at < horizon:  # type: ignore[attr-defined]
            old = log.popleft()
            if isinstance(old, Grant):
                id = old.waiter.id
                if held.get(id) is old:
                    self.forget(id)

    def trim(self) -> None:
        """Forget the logged records no refund or settle can reach: those
        before the oldest grant still held (a replay goes only through later
        ones)."""
        log, held = self._log, self.held
        while log:
            head = log[0]
            if isinstance(head, Grant) and held.get(head.waiter.id) is head:
                return
            log.popleft()

    def unlog(self, grant: Grant) -> list[object]:
        """Take ``grant`` and every record logged after it out of the log;
        return those after it, oldest first. O(records after it)."""
        log = self._log
        later: list[object] = []
        while (last := log.pop()) is not grant:
            later.append(last)
        later.reverse()
        return later

    def relog(self, records: list[object], marks: list[object]) -> None:
        """Log ``records`` again, each grant with the bucket's state replayed
        before it."""
        held = self.held
        for old, mark in zip(records, marks, strict=True):
            if isinstance(old, Grant):
                new = old._replace(before=mark)
                if held.get(old.waiter.id) is old:
                    held[old.waiter.id] = new
                self._log.append(new)
            else:
                self._log.append(old)

    def check(self) -> None:
        """Assert the ledger's invariants (for tests)."""
        logged = {id(record) for record in self._log}
        if self.window is None and (logged or any(g.before is not None for g in self)):
            raise AssertionError("invariant broken: a charge kept without a settle window")
        for grant in self.held.values():
            if grant.before is not None and id(grant) not in logged:
                raise AssertionError("invariant broken: a held charged grant is not in the log")
        if not self._spent <= self.held.keys():
            raise AssertionError("invariant broken: a spent grant is not held")
        log, window = self._log, self.window
        if window is not None and log and log[-1].at - log[0].at > 2 * window:  # type: ignore[attr-defined]
            raise AssertionError("invariant broken: the log spans more than two settle windows")
