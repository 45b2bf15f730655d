"""The Harness plugin contract. A harness runs a prepared task and returns a raw RunResult; it never
scores (scoring is the benchmark's).

There is one way to implement one: a ``HarnessSession`` subclass whose ``run`` does the work, named by
the harness's ``session_class``. ``start_session`` builds it (override it only for work that must happen
before the run policy is switched on, or that may fail before the session exists); ``stopped`` says what
was recorded when the runtime stopped ``run``; ``close`` releases what the session holds.

The framework enforces the attempt's limits (``plan.agent_limits``: turns, tokens, cost, wall time),
not the harness: the session's ``model`` (also its ``harness.model``) refuses a call past a limit with
``LimitExceeded`` and ``max_wall_s`` cuts one in flight; its ``env`` caps every command at the wall time
left and refuses commands once a limit is reached; and the runtime stops ``run`` a few seconds after
``max_wall_s`` or after a refusal, whatever the harness does then. A harness needs no check of its own.
It may catch ``LimitExceeded`` to return what it recorded: that result is evaluated like any other, with
the limit recorded on it. A run that lets the refusal through, that the runtime has to stop, or that
reports an error after it, is the agent's failure, scored 0 (never an error to run again)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel

from agentcompass_dagster.contracts.validation import validate_declaration
from agentcompass_dagster.contracts.model import Model
from agentcompass_dagster.contracts.records import ExecutionPlan, HostMount, PreparedTask, RunResult, TaskSpec

if TYPE_CHECKING:
    from agentcompass_dagster.contracts.declarations import EnvironmentConfig, HarnessConfig
    from agentcompass_dagster.contracts.benchmark import Benchmark
    from agentcompass_dagster.contracts.environment import EnvironmentSession


class HarnessSession(ABC):
    """One attempt's run of a harness; ``close`` always follows ``start_session`` (R-CLEAN-1). ``harness``
    is the attempt's view of the harness, ``env`` the task's environment under the attempt's limits."""

    def __init__(
        self,
        harness: Harness,
        prepared: PreparedTask,
        env: EnvironmentSession,
        benchmark: Benchmark,
        plan: ExecutionPlan,
    ) -> None:
        self.harness = harness
        self.prepared = prepared
        self.env = env
        self.benchmark = benchmark
        self.plan = plan

    @property
    def model(self) -> Model:
        """The request's model under the attempt's limits."""
        return self.harness.model

    @abstractmethod
    async def run(self) -> RunResult:
        """Run the agent on ``self.prepared`` in ``self.env`` (commands as ``Caller.agent``), calling
        ``self.model``, and return what it produced: its final answer and trajectory (the typed steps of
        contracts/trajectory.py). The agent's failure (it gave up, its reply could not be used) is ``failure``, a
        scored result; the runtime enforces the limits and the wall time around this call.

        Example::

            async def run(self):
                messages = [{"role": "user", "content": self.prepared.input}]
                context = CallContext(task_id=self.prepared.task.id, attempt=self.plan.attempt, turn=0)
                turn = await self.model.complete(messages, [], context)
                ran = await self.env.exec(turn.content or "true", timeout_s=120)
                return RunResult(final_answer=ran.stdout.strip(), trajectory=[
                    MessageStep(role="user", content=self.prepared.input),
                    ModelCallStep(turn=0, content=turn.content),
                    CommandStep(command=turn.content, exit_code=ran.exit_code, output=ran.output)])
        """

    def stopped(self, error: str) -> RunResult | None:
        """The runtime stopped ``run`` (the attempt timeout, or the agent's limits): what the session recorded
        until then, with ``error``, or None when it recorded nothing worth keeping."""
        return None

    async def close(self) -> None:
        """Release what the session holds; idempotent."""


class Harness(ABC):
    """What a harness is: the ``HarnessSession`` subclass that runs one attempt (``session_class``), and
    what the runtime must know of it. Nothing else is abstract: a harness's work is its session's ``run``."""

    session_class: ClassVar[type[HarnessSession]]
    # A harness that calls its model says so: the runtime refuses it a request whose model is ``none``.
    requires_model: ClassVar[bool] = False
    # The harness of benchmarks that run their tasks themselves (HarnessFreeBenchmark), declared as
    # harness ``none``; every other harness refuses them, and they refuse every other harness.
    runs_the_benchmark: ClassVar[bool] = False
    # Whether attempts keep an activity log and checkpoints (in plan.durable_dir) to resume from.
    durable: ClassVar[bool] = False

    def __init__(self, config: HarnessConfig, model: Model) -> None:
        """``model`` is the request's model plugin, built once for the request; harnesses that call no
        model get the NoModel that names the results directory. Each attempt's session holds a copy of
        the harness whose ``model`` is that model under the attempt's limits: state shared by attempts
        lives in objects the copies share, never in attributes rebound by one of them."""
        self.config = config
        self.model = model

    @property
    def id(self) -> str:
        return self.config.id

    def mounts(self, task: TaskSpec, environment: EnvironmentConfig, *, make: bool = True) -> list[HostMount]:
        """Host directories an attempt of ``task`` needs inside its ``environment``, asked before the
        environment opens (``ExecutionPlan.mounts``); an environment that cannot mount refuses the plan.
        ``make`` False: the plan is only checked (a launch's preflight, in a process that runs nothing),
        so nothing may be created; the paths inside the environment are what counts then."""
        return []

    async def close(self) -> None:
        """Release what the attempts shared (a server they used), once the request's attempts are over."""

    def adapt_input(self, prepared: PreparedTask) -> PreparedTask:
        """Turn the benchmark's input into what this harness expects (R-ATT-2); unchanged by default."""
        return prepared

    async def start_session(
        self, prepared: PreparedTask, env: EnvironmentSession, benchmark: Benchmark, plan: ExecutionPlan
    ) -> HarnessSession:
        return self.session_class(self, prepared, env, benchmark, plan)


class AgentHarness(Harness):
    """A harness that drives a model: its params are validated once."""

    requires_model = True
    params_model: ClassVar[type[BaseModel]]

    def __init__(self, config: HarnessConfig, model: Model) -> None:
        super().__init__(config, model)
        self.params = validate_declaration(self.params_model, config.params, config.file, "harness.params")
