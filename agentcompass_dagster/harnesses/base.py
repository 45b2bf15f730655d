"""The Harness plugin contract. A harness runs a prepared task and returns a raw RunResult; it never
scores (scoring is the benchmark's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from agentcompass_dagster.config import HarnessConfig, ModelConfig
from agentcompass_dagster.runtime.types import PreparedTask, RunResult

if TYPE_CHECKING:
    from agentcompass_dagster.benchmarks.base import Benchmark
    from agentcompass_dagster.environments.base import EnvironmentSession


class HarnessSession:
    """One task's run of a harness; ``close`` always follows ``start_session`` (R-CLEAN-1)."""

    def __init__(self, harness: Harness, prepared: PreparedTask, env: EnvironmentSession, benchmark: Benchmark) -> None:
        self.harness = harness
        self.prepared = prepared
        self.env = env
        self.benchmark = benchmark

    async def run(self) -> RunResult:
        return await self.harness.run_task(self.prepared, self.env, self.benchmark)

    async def close(self) -> None:
        """Release what the session holds; idempotent."""


class Harness:
    requires_model: ClassVar[bool] = False

    def __init__(self, config: HarnessConfig, model: ModelConfig) -> None:
        self.config = config
        self.model = model

    @property
    def id(self) -> str:
        return self.config.id

    async def start_session(self, prepared: PreparedTask, env: EnvironmentSession, benchmark: Benchmark) -> HarnessSession:
        return HarnessSession(self, prepared, env, benchmark)

    async def run_task(self, prepared: PreparedTask, env: EnvironmentSession, benchmark: Benchmark) -> RunResult:
        raise NotImplementedError(f"harness {self.id!r} implements neither run_task nor start_session")
