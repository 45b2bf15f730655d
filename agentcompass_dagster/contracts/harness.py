"""The Harness plugin contract. A harness runs a prepared task and returns a raw RunResult; it never
scores (scoring is the benchmark's).

There is one way to implement one: a ``HarnessSession`` subclass whose ``run`` does the work, named by
the harness's ``session_class``. ``start_session`` builds it (override it only for work that must happen
before the run policy is switched on, or that may fail before the session exists); ``stopped`` says what
was recorded when the runtime stopped ``run``; ``close`` releases what the session holds."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel

from agentcompass_dagster.validation import validate_declaration
from agentcompass_dagster.contracts.model import Model
from agentcompass_dagster.contracts.records import ExecutionPlan, PreparedTask, RunResult

if TYPE_CHECKING:
    from agentcompass_dagster.config import HarnessConfig
    from agentcompass_dagster.contracts.benchmark import Benchmark
    from agentcompass_dagster.contracts.environment import EnvironmentSession


class HarnessSession(ABC):
    """One attempt's run of a harness; ``close`` always follows ``start_session`` (R-CLEAN-1)."""

    def __init__(
        self, harness: Harness, prepared: PreparedTask, env: EnvironmentSession, benchmark: Benchmark, plan: ExecutionPlan
    ) -> None:
        self.harness = harness
        self.resolved = prepared
        self.env = env
        self.benchmark = benchmark
        self.plan = plan

    @abstractmethod
    async def run(self) -> RunResult: ...

    def stopped(self, error: str) -> RunResult | None:
        """The runtime stopped ``run`` (attempt timeout): what the session recorded until then, with
        ``error``, or None when it recorded nothing worth keeping."""
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
        model get the NoModel that names the results directory."""
        self.config = config
        self.model = model

    @property
    def id(self) -> str:
        return self.config.id

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
