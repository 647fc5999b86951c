"""Pacing: a token bucket as GCRA, in exact integer arithmetic.

Everything about *when* a permit is due lives here (the model is Go's
``x/time/rate``: one small type, explicit times). The bucket holds ``burst``
permits and refills at ``rate``; it is kept as a theoretical arrival time
``TAT = anchor + k * interval``, with ``interval = 10**9 / rate = P / Q``
nanoseconds exactly, so the due time of the n-th permit of a backlog is exact
however long it runs. Permits *held* are in flight: granted, not yet charged
(SPEC.md, Pacing).
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

from ._errors import PermitValueError

__all__ = ["NEVER", "Bucket", "Mark", "Outside"]

#: A due time no clock reaches (about 5e51 years of nanoseconds).
NEVER = 1 << 200

_new = tuple.__new__


class Mark(NamedTuple):
    """The bucket's charged state at one moment, to return to (a refund)."""

    anchor: int
    k: int


class Bucket:
    """``burst`` permits, refilled at ``rate`` per second.

    :ivar due: when the next permit is available (ns): ``NEVER`` while the
        permits held fill the bucket. Kept up to date by every change, so that
        reading it costs nothing.
    :ivar held: permits in flight.
    """

    __slots__ = ("P", "Q", "anchor", "b1", "due", "held", "k")

    def __init__(self, rate: Fraction, burst: int) -> None:
        # interval = 10**9 / rate = P / Q nanoseconds, exactly.
        self.P = 1_000_000_000 * rate.denominator
        self.Q = rate.numerator
        self.b1 = burst - 1
        self.anchor = 0
        self.k = 0
        self.held = 0
        self.due = 0

    def start(self, now: int) -> None:
        """The clock starts at ``now`` with a full bucket."""
        self.anchor = now
        self.k = 0
        self._set_due()

    def take(self, now: int) -> Mark:
        """Charge one permit at ``now``: ``TAT = max(TAT, now - 1) + interval``;
        return the charged state before it (for a refund's replay).

        A ``TAT`` more than a nanosecond in the past means a full bucket; the
        schedule restarts at ``now - 1``, so the bucket holds ``burst``
        permits plus one nanosecond of refill. That nanosecond is what lets a
        tick at a permit's rounded-up due time be on time: without it,
        ``burst = 1`` would lose up to a nanosecond per permit to rounding.
        """
        anchor, k = self.anchor, self.k
        before = _new(Mark, (anchor, k))
        if k * self.P < (now - 1 - anchor) * self.Q:
            self.anchor = now - 1
            k = 0
        self.k = k + 1
        self._set_due()
        return before

    def hold(self) -> None:
        """One more permit in flight: it keeps its place, charged later."""
        self.held += 1
        self._set_due()

    def release(self) -> None:
        """One permit fewer in flight (spent: :meth:`take` it; or refunded)."""
        self.held -= 1
        self._set_due()

    def replay(self, mark: Mark, times: list[int], now: int) -> list[Mark]:
        """A refund of a permit charged at its grant: return to ``mark``, the
        state before that grant, and charge again at each of ``times``, the
        later grants, as if it had never been made. The marks before each."""
        self.anchor, self.k = mark
        marks = [self.take(at) for at in times]
        self._set_due()
        return marks

    def offer(self, now: int) -> None:
        """Only a supplied machine is handed permits from outside."""
        raise PermitValueError(
            "supplied", False, "supply() is for a machine made with supplied=True"
        )

    def discard(self) -> None:
        """A permit of the bucket's own found nobody: it stays banked."""

    def available_after(self, count: int, now: int) -> int:
        """The least time (ns) from ``now`` until ``count`` more permits are
        available, at best: those held charged now."""
        anchor, k = self.anchor, self.k
        if k * self.P < (now - 1 - anchor) * self.Q:
            anchor, k = now - 1, 0
        due = anchor - ((self.b1 - k - self.held - count + 1) * self.P // self.Q)
        return max(0, due - now)

    def _set_due(self) -> None:
        # ceil(TAT + (held - burst + 1) * interval), or never while the held
        # permits fill the bucket and its nanosecond of refill.
        excess = self.held - self.b1
        if excess > 0 and excess * self.P > self.Q:
            self.due = NEVER
        else:
            self.due = self.anchor - ((-excess - self.k) * self.P // self.Q)


class Outside:
    """The permits of a supplied machine: they come from a source outside it
    (a limit shared through Redis), which paces and charges them. None falls
    due here; each is *offered* as it arrives, and one not taken at once is
    not kept. ``rate`` and ``burst`` describe the outside limit, for
    :meth:`available_after`'s estimate only.
    """

    __slots__ = ("P", "Q", "burst", "due")

    #: Never any in flight: the source charged each permit as it handed it over.
    held = 0

    def __init__(self, rate: Fraction, burst: int) -> None:
        self.P = 1_000_000_000 * rate.denominator
        self.Q = rate.numerator
        self.burst = burst
        self.due = NEVER

    def start(self, now: int) -> None:
        """Nothing to start: the source outside keeps the time."""

    def take(self, now: int) -> Mark:
        """The permit offered was granted."""
        self.due = NEVER
        return _NO_MARK

    def hold(self) -> None:
        raise AssertionError("a supplied machine holds no permit in flight")

    release = hold

    def offer(self, now: int) -> None:
        """A permit from outside, at hand at ``now``."""
        self.due = now

    def discard(self) -> None:
        """The permit offered found nobody: it is not kept."""
        self.due = NEVER

    def replay(self, mark: Mark, times: list[int], now: int) -> list[Mark]:
        """A refund: the permit is offered again, at ``now``."""
        self.offer(now)
        return [_NO_MARK] * len(times)

    def available_after(self, count: int, now: int) -> int:
        """At best the outside bucket is full: ``burst`` at once, then one
        per interval."""
        return max(0, (count - self.burst) * self.P // self.Q)


_NO_MARK = Mark(0, 0)
