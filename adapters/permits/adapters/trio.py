"""The trio adapter: native trio, structured.

    async with open_limiter(StrictPriority(2), rate=100) as limiter:
        async with limiter.permit(INTERACTIVE):
            ...

The limiter runs one background task in its own nursery, sleeping until the
next permit's due time; leaving the ``async with`` closes it, wakes every
waiter with :class:`~permits.adapters.LimiterClosed`, and leaves nothing
running.

Cancellation: trio delivers a cancellation only at a checkpoint. A waiter
cancelled *before* its permit is decided is withdrawn and costs nothing. One
whose permit was decided and whose cancel scope was cancelled before it
resumed looks for that cancel as it wakes (``checkpoint_if_cancelled``): it
hands the permit back, which goes to the next waiter at once, and raises
``Cancelled``. An acquire that may find a permit free (nobody waits)
checkpoints before it takes one, so a cancel there costs nothing; one
cancelled at its own checkpoint after any other immediate grant hands the
permit back. Either way the permits granted and not refunded are exactly
the callers whose acquire returned. An acquire refused at once (its
``timeout`` of 0 passed, its level full, its ``max_wait`` too short)
checkpoints too, so that a caller polling with ``timeout=0`` lets the
others run.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from permits.core import Policy

from ._base import Event, LimiterOptions, async_opening, refuse_unknown
from ._requires import other_loop, requires_extra, wrong_framework
from ._tasked import TaskedLimiter, running

if TYPE_CHECKING:
    from typing_extensions import Unpack

with requires_extra(__name__, "trio", "trio"):
    import trio

__all__ = ["Limiter", "open_limiter"]


class Limiter(TaskedLimiter):
    """A priority limiter for trio; make one with :func:`open_limiter`."""

    #: The clock of the trio run the limiter lives in, bound as its timer
    #: task starts: another run (another thread's) has its own clock, at
    #: another reading, and its own tasks, which this one's timer cannot wake.
    _run_clock: trio.abc.Clock | None = None

    def _clock(self) -> int:
        try:
            clock = trio.lowlevel.current_clock()
        except RuntimeError:  # outside trio.run (a try costs next to nothing until it catches)
            raise wrong_framework(Limiter, "trio", bound=self._run_clock is not None) from None
        if clock is not self._run_clock and self._run_clock is not None:
            raise other_loop(Limiter)
        return (clock.current_time() * 1e9).__round__()  # round(), without its look-up

    async def _run(self, *, task_status: Any) -> None:
        self._run_clock = trio.lowlevel.current_clock()
        await super()._run(task_status=task_status)

    def _new_event(self) -> Event:
        return trio.Event()

    _checkpoint_on_grant = True
    #: The framework's own checkpoint, called directly (no coroutine around it).
    _checkpoint = staticmethod(trio.lowlevel.checkpoint)
    _cancel_after_wake = True
    _checkpoint_if_cancelled = staticmethod(trio.lowlevel.checkpoint_if_cancelled)

    def _cancel_scope(self, deadline: float, shield: bool = False) -> trio.CancelScope:
        return trio.CancelScope(deadline=deadline, shield=shield)

    async def _sleep_forever(self) -> None:
        await trio.sleep_forever()

    def _time(self) -> float:
        return trio.current_time()


def open_limiter(
    policy: Policy,
    rate: int | float | Fraction | None = None,
    burst: int = 1,
    **options: Unpack[LimiterOptions],
) -> AbstractAsyncContextManager[Limiter]:
    """Open a trio :class:`Limiter` for an ``async with``; see
    :class:`~permits.adapters.BaseLimiter` for the arguments."""
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:  # trio.open_nursery() would say "'RunContext' object has no ..."
        raise wrong_framework(open_limiter, "trio") from None
    refuse_unknown("permits.adapters.trio.open_limiter", options)
    limiter = Limiter(policy, rate, burst, **options)
    return async_opening(running(limiter, trio.open_nursery()))
