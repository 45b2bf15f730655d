"""One benchmark of one sweep as the Dagster layer sees it: asset keys, partition names, task keys,
results paths, and the RunRequests that run a set of its partitions through the runtime."""

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import dagster as dg

from agentcompass_dagster import registry
from agentcompass_dagster.config import BenchmarkConfig, EnvironmentConfig, HarnessConfig, OutputConfig, RunRequest, SweepConfig
from agentcompass_dagster.defs.partitions import attempts_partitions, identifier, partition_key, tasks_partitions_name
from agentcompass_dagster.runtime.naming import normalize_component
from agentcompass_dagster.runtime.orchestrator import load_selected_tasks
from agentcompass_dagster.runtime.store import ReuseSource, RunStore
from agentcompass_dagster.runtime.types import TaskSpec


@dataclass(frozen=True)
class SweepBenchmark:
    sweep: SweepConfig
    benchmark: BenchmarkConfig

    # names

    @property
    def group(self) -> str:
        return identifier(self.sweep.name)

    def key(self, kind: str) -> dg.AssetKey:
        """Asset keys are <sweep>/<benchmark>/<kind>: two sweeps may evaluate the same benchmark."""
        return dg.AssetKey([self.sweep.name, self.benchmark.id, kind])

    @property
    def partitions_name(self) -> str:
        return tasks_partitions_name(self.sweep.name, self.benchmark.id)

    @cached_property
    def model_keys(self) -> dict[str, str]:
        """Model partition key -> model id."""
        return {partition_key(model.id): model.id for model in self.sweep.models}

    @cached_property
    def partitions(self) -> dg.MultiPartitionsDefinition:
        return attempts_partitions(self.sweep.name, self.benchmark.id, list(self.model_keys))

    @property
    def harness_resource_key(self) -> str:
        return identifier(self.sweep.name, "harness")

    @property
    def environment_resource_key(self) -> str:
        return identifier(self.sweep.name, "environment")

    # tasks

    def load_tasks(self) -> list[TaskSpec]:
        """The selected tasks, in order, as the runtime will see them."""
        benchmark = registry.benchmarks.get(self.benchmark.id, "benchmark.id")(self.benchmark)
        return load_selected_tasks(self.benchmark.id, benchmark)

    @staticmethod
    def task_keys(tasks: list[TaskSpec]) -> dict[str, TaskSpec]:
        return {partition_key(task.id): task for task in tasks}

    # results

    @property
    def output(self) -> OutputConfig:
        """Through Dagster every run reuses the newest run of its benchmark x model: materialized
        partitions are never run again, and the newest directory holds every finished detail."""
        return OutputConfig(results_dir=self.sweep.output.results_dir, run_name=self.sweep.name, reuse=True)

    @property
    def benchmark_dir(self) -> Path:
        return (
            Path(self.sweep.output.results_dir)
            / normalize_component(self.sweep.name, "output.run_name")
            / normalize_component(self.benchmark.id, "benchmark.id")
        )

    def newest_runs(self) -> dict[str, ReuseSource]:
        """Model id -> its newest run directory (models that have none are left out)."""
        store = RunStore(self.sweep.output.results_dir)
        newest = {}
        for model in self.sweep.models:
            source = store.find_reuse_source(store.root_for(self.output, self.benchmark.id, model.id), self.output)
            if source is not None:
                newest[model.id] = source
        return newest

    def requests(
        self,
        run_only: dict[str, list[str]],
        harness: HarnessConfig | None = None,
        environment: EnvironmentConfig | None = None,
        dagster_run_id: str | None = None,
    ) -> list[RunRequest]:
        """One runtime request per model in ``run_only`` (model id -> task ids to run)."""
        metadata = {"dagster_run_id": dagster_run_id} if dagster_run_id else {}
        return [
            RunRequest(
                name=f"{self.benchmark.id}/{model.id}",
                sweep=self.sweep.name,
                benchmark=self.benchmark,
                model=model,
                harness=harness or self.sweep.harness,
                environment=environment or self.sweep.environment,
                execution=self.sweep.execution,
                output=self.output,
                metadata=metadata,
                run_only=run_only[model.id],
            )
            for model in self.sweep.models
            if model.id in run_only
        ]


def sweep_benchmarks(sweep: SweepConfig) -> list[SweepBenchmark]:
    return [SweepBenchmark(sweep, benchmark) for benchmark in sweep.benchmarks]
