"""The Harness plugin contract. A harness runs a prepared task and returns a raw RunResult; it never
scores (scoring is the benchmark's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel

from agentcompass_dagster.config import HarnessConfig, validate_declaration
from agentcompass_dagster.models.base import Model
from agentcompass_dagster.runtime.types import ExecutionPlan, PreparedTask, RunResult

if TYPE_CHECKING:
    from agentcompass_dagster.benchmarks.base import Benchmark
    from agentcompass_dagster.environments.base import EnvironmentSession


class HarnessSession:
    """One attempt's run of a harness; ``close`` always follows ``start_session`` (R-CLEAN-1)."""

    def __init__(
        self, harness: Harness, prepared: PreparedTask, env: EnvironmentSession, benchmark: Benchmark, plan: ExecutionPlan
    ) -> None:
        self.harness = harness
        self.prepared = prepared
        self.env = env
        self.benchmark = benchmark
        self.plan = plan

    async def run(self) -> RunResult:
        return await self.harness.run_task(self.prepared, self.env, self.benchmark, self.plan)

    def stopped(self, error: str) -> RunResult | None:
        """The runtime stopped ``run`` (attempt timeout): what the session recorded until then, with
        ``error``, or None when it recorded nothing worth keeping."""
        return None

    async def close(self) -> None:
        """Release what the session holds; idempotent."""


class Harness:
    requires_model: ClassVar[bool] = False
    # Whether attempts keep an activity log and checkpoints (plan.private["durable_dir"]) to resume from.
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
        return HarnessSession(self, prepared, env, benchmark, plan)

    async def run_task(
        self, prepared: PreparedTask, env: EnvironmentSession, benchmark: Benchmark, plan: ExecutionPlan
    ) -> RunResult:
        raise NotImplementedError(f"harness {self.id!r} implements neither run_task nor start_session")


class AgentHarness(Harness):
    """A harness that drives a model: its params are validated once."""

    requires_model = True
    params_model: ClassVar[type[BaseModel]]

    def __init__(self, config: HarnessConfig, model: Model) -> None:
        super().__init__(config, model)
        self.params = validate_declaration(self.params_model, config.params, "harness.params")
