"""The plugin contracts, all in this package: what a benchmark, a harness, an environment (and its
session), a model and an analyzer must provide, and when the runtime calls each part. A plugin
subclasses one of these ABCs and is registered by id (``agentcompass_dagster.declarations.registry``, or an entry point
of a third-party package, named by the id, in the group ``agentcompass.benchmarks``,
``agentcompass.harnesses``, ``agentcompass.environments``, ``agentcompass.models`` or
``agentcompass.analyzers``); the registry refuses a class that does not. The records a plugin receives and
returns (``TaskSpec``, ``PreparedTask``, ``ExecutionPlan``, ``RunResult``, ``Evaluation``, ...) are in
``records.py``, the steps of a trajectory in ``trajectory.py``; nothing here imports the runtime.

One attempt, in order (R-ATT-1..R-ATT-4):

1. ``Environment.open(plan, task) -> EnvironmentSession`` (``environment.py``): a fresh session per
   attempt, opened no faster than the provider's ``open_qps`` (the runtime waits before calling ``open``)
   and closed in a ``finally`` whatever happens (``EnvironmentSession.close``).
2. ``Benchmark.prepare_task(task, session, request, benchmark_plan) -> PreparedTask``.
3. ``Harness.adapt_input(prepared)``, then ``Harness.start_session(prepared, session, benchmark, plan)
   -> HarnessSession`` (``harness.py``): the only way a harness runs. The runtime switches the
   environment to the run network policy, awaits ``HarnessSession.run() -> RunResult`` (asking
   ``stopped`` for what was recorded when the attempt times out) and closes it in a nested ``finally``.
   A harness that calls a model awaits ``Model.complete(messages, tools, context) -> ModelTurn``
   (``model.py``) on its session's ``model``: the request's model under the attempt's limits, which the
   framework enforces (``LimitExceeded``), as it bounds the session's environment by its wall time.
4. ``Benchmark.collect_artifacts`` while the session is alive, then ``Benchmark.evaluate`` (the only
   scorer) in the mode the plan names (reuse, none, fresh).
5. ``Analyzer.analyze(task, attempt)`` for each analyzer that applies (``analyzer.py``).

A benchmark that runs its tasks itself subclasses ``HarnessFreeBenchmark`` and is declared with harness
``none``, a harness like any other whose session calls the benchmark's ``run_task``.
"""

from agentcompass_dagster.contracts.analyzer import Analyzer, AttemptResult
from agentcompass_dagster.contracts.benchmark import Benchmark, HarnessFreeBenchmark, ReferenceSolution, Scores
from agentcompass_dagster.contracts.environment import (
    Caller,
    DelegatingSession,
    Environment,
    EnvironmentLimitExceeded,
    EnvironmentSession,
    ExecResult,
)
from agentcompass_dagster.contracts.harness import AgentHarness, Harness, HarnessSession
from agentcompass_dagster.contracts.model import (
    CallContext,
    ContextOverflow,
    LimitExceeded,
    Model,
    ModelError,
    ModelTurn,
    ToolCall,
)
from agentcompass_dagster.contracts.records import (
    EvaluatedAttempt,
    Evaluation,
    ExecutionPlan,
    MetricResult,
    NetworkPolicy,
    PreparedTask,
    RunResult,
    TaskSpec,
    Usage,
)
from agentcompass_dagster.contracts.trajectory import (
    CommandStep,
    MessageStep,
    ModelCallStep,
    ToolCallStep,
    TrajectoryStep,
)

__all__ = [
    "AgentHarness",
    "Analyzer",
    "AttemptResult",
    "Benchmark",
    "CallContext",
    "Caller",
    "CommandStep",
    "ContextOverflow",
    "DelegatingSession",
    "Environment",
    "EnvironmentLimitExceeded",
    "EnvironmentSession",
    "EvaluatedAttempt",
    "Evaluation",
    "ExecResult",
    "ExecutionPlan",
    "Harness",
    "HarnessFreeBenchmark",
    "HarnessSession",
    "LimitExceeded",
    "MessageStep",
    "MetricResult",
    "Model",
    "ModelCallStep",
    "ModelError",
    "ModelTurn",
    "NetworkPolicy",
    "PreparedTask",
    "ReferenceSolution",
    "RunResult",
    "Scores",
    "TaskSpec",
    "ToolCall",
    "ToolCallStep",
    "TrajectoryStep",
    "Usage",
]
