"""Framework adapters for ``permits``: asyncio, trio, anyio and threads.

They own the clock, the sleeping and their framework's cancellation, and
nothing of policy: every decision is :class:`permits.core.Machine`'s.

- :mod:`permits.adapters.asyncio`: ``open_limiter`` (standard library only);
- :mod:`permits.adapters.trio`: ``open_limiter`` (needs ``trio``);
- :mod:`permits.adapters.anyio`: ``open_limiter``, under asyncio or trio
  (needs ``anyio``);
- :mod:`permits.adapters.threads`: ``open_limiter``, blocking, for threads
  (standard library only);
- :mod:`permits.adapters.redis`: ``open_limiter``, one limit shared by many
  processes through Redis, under asyncio or trio (needs ``permits[redis]``).

A :mod:`permits.sim` scenario played in real time on the asyncio adapter
(``permits demo``) lives with the command line, in ``permits.cli._live``.

Shared by all of them: :func:`level` (the context-local default level), the
:class:`Permit` an acquire returns (``permit.settle(actual)``), the
:class:`Recording` that ``limiter.record()`` returns, and the
errors :class:`LimiterClosed`, :class:`AcquireTimeout`,
:class:`WouldWaitTooLong` (and :class:`permits.core.QueueFull`), and
:class:`WrongFramework` (an adapter used outside its framework).

A module whose extra is not installed says so as it is imported (a
``ModuleNotFoundError`` naming ``pip install 'permits[trio]'``, and so on).
"""

from ._base import (
    AcquireTimeout,
    BaseLimiter,
    LimiterClosed,
    Permit,
    WouldWaitTooLong,
    current_level,
    level,
)
from ._recording import Recording
from ._requires import WrongFramework

__all__ = [
    "AcquireTimeout",
    "BaseLimiter",
    "LimiterClosed",
    "Permit",
    "Recording",
    "WouldWaitTooLong",
    "WrongFramework",
    "current_level",
    "level",
]
