"""The grant ledger: which permits can still be refunded or spent.

A permit charged at its grant can be refunded within the machine's refund
window; refunding it replays the grants made after it, so each logged grant
keeps the bucket's state just before it (its :class:`~._bucket.Mark`). A
permit in flight (charged at its spend) can be refunded until it is spent,
and needs no log. Spending a permit forgets it, and with it every logged
grant no refund can reach any more.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterator
from typing import NamedTuple

from ._bucket import Mark
from ._errors import PermitTypeError
from ._queues import Waiter

__all__ = ["Grant", "Ledger"]


class Grant(NamedTuple):
    """One permit granted and not yet spent or refunded."""

    waiter: Waiter
    #: When it was granted (ns).
    at: int
    #: The bucket's state just before it was charged at its grant; ``None``
    #: for a permit in flight, charged when spent.
    before: Mark | None


class Ledger:
    """The grants that may still be refunded, and the log that replays them.

    :param window: nanoseconds after its grant during which a permit charged
        at its grant may be refunded. The log holds the grants of up to two
        windows (pruned in batches), or, once their permits are spent, only
        those from the oldest one still refundable on.
    """

    __slots__ = ("_held", "_log", "window")

    def __init__(self, window: int) -> None:
        self.window = window
        self._held: dict[Hashable, Grant] = {}
        self._log: deque[Grant] = deque()

    def __len__(self) -> int:
        """Grants that may still be refunded."""
        return len(self._held)

    def __iter__(self) -> Iterator[Grant]:
        """Those grants, oldest first."""
        return iter(self._held.values())

    @property
    def logged(self) -> tuple[Grant, ...]:
        """The log, oldest first: what a refund would replay."""
        return tuple(self._log)

    def get(self, id: Hashable) -> Grant | None:
        """``id``'s grant, if it may still be refunded or spent."""
        try:
            return self._held.get(id)  # get() hashes even on an empty dict
        except TypeError:
            raise PermitTypeError("id", id, "a hashable value") from None

    def refundable(self, id: Hashable, now: int) -> Grant | None:
        """``id``'s grant if it can be refunded at ``now``: in flight, or
        charged at its grant within the window."""
        grant = self.get(id)
        if grant is None or (grant.before is not None and grant.at < now - self.window):
            return None
        return grant

    def add(self, grant: Grant) -> None:
        """A new grant; logged if it was charged at its grant. Prunes the
        log first, once it holds two windows' worth."""
        log = self._log
        waiter, at, before = grant
        if log and log[0].at < at - 2 * self.window:
            self._prune(at)
        self._held[waiter.id] = grant
        if before is not None:
            log.append(grant)

    def forget(self, id: Hashable) -> None:
        """``id``'s grant can no longer be refunded (spent, or pushed again)."""
        self._held.pop(id, None)

    def _prune(self, now: int) -> None:
        """Forget the grants older than the window: amortised O(1) per grant,
        done in batches of a window's worth."""
        log, held = self._log, self._held
        horizon = now - self.window
        while log and log[0].at < horizon:
            old = log.popleft()
            if held.get(old.waiter.id) is old:
                del held[old.waiter.id]

    def trim(self) -> None:
        """Forget the logged grants no refund can reach: those before the
        oldest grant still refundable (a refund replays only later ones)."""
        log, held = self._log, self._held
        while log and held.get(log[0].waiter.id) is not log[0]:
            log.popleft()

    def unlog(self, grant: Grant) -> list[Grant]:
        """Take ``grant`` and every grant logged after it out of the log;
        return those after it, oldest first. O(grants after it)."""
        log = self._log
        later: list[Grant] = []
        while (last := log.pop()) is not grant:
            later.append(last)
        later.reverse()
        return later

    def relog(self, later: list[Grant], marks: list[Mark]) -> None:
        """Log ``later`` again, each with the bucket's state replayed before it."""
        held = self._held
        for old, mark in zip(later, marks, strict=True):
            new = old._replace(before=mark)
            if held.get(old.waiter.id) is old:
                held[old.waiter.id] = new
            self._log.append(new)

    def check(self) -> None:
        """Assert the ledger's invariants (for tests)."""
        logged = {id(grant) for grant in self._log}
        for grant in self._held.values():
            if grant.before is not None and id(grant) not in logged:
                raise AssertionError("invariant broken: a refundable grant is not in the log")
