"""A simulator: the core driven in virtual time through a scenario.

Describe who arrives when (:class:`Workload` s of :class:`Batch`,
:class:`Constant` or :class:`Poisson` arrivals, each with an optional
``timeout``, ``give_up_after`` and ``max_wait``), under which limit and policy
(:class:`Scenario`), and :func:`simulate` reports what each workload got
(:class:`Result`). It runs the same :class:`~permits.core.Machine` the
adapters drive, so what it shows is what the limiter does, minus the event
loop's timer jitter. Pure like the core: no clock, no I/O; the same scenario
always gives the same result.

:func:`compare` runs one scenario under a grid of policies and checks each
run against the scenario's :class:`Requirement` s; :func:`replay` runs
recorded calls (:func:`read_trace` reads them from a trace's lines, one at
a time) in place of its workloads; :func:`check_arrivals` bounds the work a
scenario may ask for.

>>> from permits.sim import SEED, simulate
>>> result = simulate(SEED[1])              # strict priority, interactive 20/s
>>> result["interactive"].granted, result["batch"].granted
(200, 800)
"""

from ._compare import (
    AGING_AFTER,
    SHARES_EVERY,
    Comparison,
    Outcome,
    compare,
    default_grid,
    every_nth,
)
from ._load import ScenarioError, load_policy, load_scenarios
from ._require import Measure, Requirement, offered_quantile
from ._run import (
    BINS,
    MAX_ARRIVALS,
    Result,
    Tally,
    WorkloadResult,
    arrivals,
    check_arrivals,
    simulate,
)
from ._scenario import (
    MAX_CHOICES,
    MAX_LIMITS,
    MAX_TENANTS,
    Arrivals,
    Batch,
    Choice,
    Constant,
    Cost,
    Poisson,
    Published,
    Scenario,
    Tenants,
    Uniform,
    Workload,
    describe,
    nanoseconds,
)
from ._seed import SEED
from ._trace import COLUMNS, Call, TraceError, read_trace, replay, trace_lines, traced

__all__ = [
    "AGING_AFTER",
    "SHARES_EVERY",
    "Comparison",
    "Measure",
    "Outcome",
    "Requirement",
    "compare",
    "default_grid",
    "every_nth",
    "offered_quantile",
    "read_trace",
    "replay",
    "trace_lines",
    "BINS",
    "COLUMNS",
    "MAX_ARRIVALS",
    "MAX_CHOICES",
    "MAX_LIMITS",
    "MAX_TENANTS",
    "SEED",
    "Arrivals",
    "Batch",
    "Call",
    "Choice",
    "Constant",
    "Cost",
    "Poisson",
    "Published",
    "Result",
    "Scenario",
    "ScenarioError",
    "Tally",
    "Tenants",
    "TraceError",
    "Uniform",
    "Workload",
    "WorkloadResult",
    "arrivals",
    "check_arrivals",
    "describe",
    "load_policy",
    "load_scenarios",
    "nanoseconds",
    "simulate",
    "traced",
]
