"""The policy core of ``permits``: a pure, clock-free state machine.

No clock, no sleeping, no I/O: time enters as ``now``, an ``int`` of
nanoseconds. See SPEC.md for the contract and ``properties/`` for its proof.
"""

from ._bucket import MAX_QUOTAS
from ._errors import (
    DuplicateId,
    NotRefundable,
    PermitError,
    PermitTypeError,
    PermitValueError,
    PolicyError,
    QueueFull,
    TimeWentBackwards,
)
from ._ledger import Grant
from ._limits import Limit
from ._machine import (
    MICROSECOND,
    MILLISECOND,
    SECOND,
    Charge,
    Decision,
    Machine,
    Snapshot,
    State,
)
from ._policies import (
    MAX_LEVELS,
    Aging,
    Deal,
    Fifo,
    Policy,
    Shares,
    StrictPriority,
    across_processes,
    schedule,
)
from ._queues import CHUNK, MAX_SCALE, Queues, Waiter
from ._stats import (
    RELATIVE_ERROR,
    FlowStatistics,
    LevelStatistics,
    Statistics,
    WaitHistogram,
    in_seconds,
)

__all__ = [
    "CHUNK",
    "MAX_LEVELS",
    "MAX_QUOTAS",
    "MAX_SCALE",
    "MICROSECOND",
    "MILLISECOND",
    "RELATIVE_ERROR",
    "SECOND",
    "Aging",
    "Charge",
    "Deal",
    "Decision",
    "DuplicateId",
    "Fifo",
    "FlowStatistics",
    "Grant",
    "LevelStatistics",
    "Limit",
    "Machine",
    "NotRefundable",
    "PermitError",
    "PermitTypeError",
    "PermitValueError",
    "Policy",
    "PolicyError",
    "QueueFull",
    "Queues",
    "Shares",
    "Snapshot",
    "State",
    "Statistics",
    "StrictPriority",
    "TimeWentBackwards",
    "WaitHistogram",
    "Waiter",
    "across_processes",
    "in_seconds",
    "schedule",
]
