"""The `none` harness, of benchmarks that run their tasks themselves (``HarnessFreeBenchmark``): its
session calls the benchmark's ``run_task`` inside the same boundary as any harness (run network
policy, attempt timeout, close in a finally) (R-ATT-2)."""

from __future__ import annotations

from agentcompass_dagster.contracts.benchmark import HarnessFreeBenchmark
from agentcompass_dagster.contracts.harness import Harness, HarnessSession
from agentcompass_dagster.contracts.records import RunResult


class BenchmarkRunSession(HarnessSession):
    async def run(self) -> RunResult:
        # resolve_plugins pairs this harness with harness-free benchmarks only.
        assert isinstance(self.benchmark, HarnessFreeBenchmark)
        return await self.benchmark.run_task(self.prepared, self.env, self.plan)


class NoHarness(Harness):
    session_class = BenchmarkRunSession
    runs_the_benchmark = True
