"""One benchmark of one sweep as the Dagster layer sees it: its Dagster names (asset keys, job, pool,
partitions), its results paths, the RunRequests that run a set of its partitions, and what a process
resolves once for it (plugins, selected tasks)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path

import dagster as dg

from agentcompass_dagster.contracts.declarations import BenchmarkConfig
from agentcompass_dagster.contracts.request import OutputConfig, EvalRequest
from agentcompass_dagster.declarations.sweep import SweepConfig
from agentcompass_dagster.defs.partitions import (
    asset_key,
    attempts_partitions,
    dagster_name,
    partition_key,
    split_key,
    tasks_partitions_name,
)
from agentcompass_dagster.defs.resources import SweepResources
from agentcompass_dagster.runtime.store.budget import sweep_budget
from agentcompass_dagster.runtime.execution.plugins import Plugins, resolve_plugins
from agentcompass_dagster.runtime.execution.request_state import ResolvedRequest
from agentcompass_dagster.runtime.execution.selection import Selection, load_selected_tasks
from agentcompass_dagster.runtime.store.layout import run_root
from agentcompass_dagster.runtime.store.run_records import ReuseSource
from agentcompass_dagster.runtime.store.run_store import RunStore
from agentcompass_dagster.contracts.records import SweepBudget, TaskSpec

# Run tags naming what a run evaluates; the launcher, the schedule and the sensor find runs by them.
SWEEP_TAG = "agentcompass/sweep"
BENCHMARK_TAG = "agentcompass/benchmark"
MODELS_TAG = "agentcompass/models"
MAX_TAG_VALUE = 200


@dataclass(frozen=True, eq=False)
class SweepBenchmark:
    sweep: SweepConfig
    benchmark: BenchmarkConfig
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Contestant id -> its plugins for the declared harness and environment, built on first use.
    _plugins: dict[str, Plugins] = field(default_factory=dict, repr=False)

    # names

    @property
    def group(self) -> str:
        return dagster_name(self.sweep.name)

    def key(self, kind: str) -> dg.AssetKey:
        return asset_key(self.sweep.name, self.benchmark.id, kind)

    def name(self, kind: str) -> str:
        """Names of the sweep's job, schedule and sensor. A sweep of several benchmarks has one of each
        per benchmark (a job's partitioned assets share one partitions definition, and each benchmark
        has its own tasks), named with the benchmark too."""
        if len(self.sweep.benchmarks) == 1:
            return dagster_name(self.sweep.name, kind)
        return dagster_name(self.sweep.name, self.benchmark.id, kind)

    @property
    def job_name(self) -> str:
        return self.name("job")

    @property
    def asset_keys(self) -> set[dg.AssetKey]:
        return {self.key(kind) for kind in ("tasks", "attempts", "metrics", "comparison")}

    def owns(self, run: dg.DagsterRun) -> bool:
        """Whether a run is one of this benchmark's: of its job, or of another job (the asset job of a
        backfill, `dagster asset materialize`, the automation sensor) that selects its assets."""
        return run.job_name == self.job_name or bool(self.asset_keys & set(run.asset_selection or ()))

    @property
    def pool(self) -> str:
        """The Dagster pool of the evaluating step: its limit is max_concurrent_runs."""
        return f"agentcompass/{self.sweep.name}/{self.benchmark.id}"

    @property
    def partitions_name(self) -> str:
        return tasks_partitions_name(self.sweep.name, self.benchmark.id)

    @cached_property
    def model_keys(self) -> dict[str, str]:
        """Key in the partitions' "model" dimension -> contestant id (config.Contestant: the model's id in a
        sweep of one harness): every other name of a contestant in this layer derives from this one."""
        return {partition_key(contestant.id): contestant.id for contestant in self.sweep.contestants()}

    @cached_property
    def partitions(self) -> dg.MultiPartitionsDefinition:
        return attempts_partitions(self.sweep.name, self.benchmark.id, list(self.model_keys))

    @property
    def tags(self) -> dict[str, str]:
        models = ",".join(contestant.id for contestant in self.sweep.contestants())
        return {
            SWEEP_TAG: self.sweep.name[:MAX_TAG_VALUE],
            BENCHMARK_TAG: self.benchmark.id[:MAX_TAG_VALUE],
            MODELS_TAG: models if len(models) <= MAX_TAG_VALUE else models[: MAX_TAG_VALUE - 3] + "...",
        }

    # what a process resolves once

    @cached_property
    def selection(self) -> Selection:
        """The selected tasks, in order, as the runtime sees them, and those the benchmark could not
        load; loaded once per process."""
        return self.load()

    @property
    def tasks(self) -> list[TaskSpec]:
        return self.selection.tasks

    def load(self) -> Selection:
        """The task source read now (the sensor's way to notice new tasks)."""
        request = self.request(self.first)
        return load_selected_tasks(request, self.plugins(request).benchmark)

    def load_tasks(self) -> list[TaskSpec]:
        return self.load().tasks

    @cached_property
    def task_keys(self) -> dict[str, TaskSpec]:
        """Task partition key -> task."""
        return keys_of(self.tasks)

    def plugins(self, request: EvalRequest, resources: SweepResources | None = None) -> Plugins:
        """The plugins of a request: built by the run's resources when given (the evaluating step, whose
        run may configure them apart from the sweep in the launchpad), else for the declared harness and
        environment, once per contestant."""
        if resources is not None:
            return resources.plugins(request, self.sweep.contestant(request.contestant_id).harness.id)
        with self._lock:
            if request.contestant_id not in self._plugins:
                self._plugins[request.contestant_id] = resolve_plugins(request)
            return self._plugins[request.contestant_id]

    def resolved(
        self, requests: list[EvalRequest], resources: SweepResources | None = None
    ) -> dict[str, ResolvedRequest]:
        return {request.name: ResolvedRequest(self.plugins(request, resources), self.selection) for request in requests}

    # results

    @property
    def output(self) -> OutputConfig:
        """Through Dagster every run reuses the newest run of its benchmark x model: materialized
        partitions are not run again (but by a fresh round: round_output), and the newest directory
        holds every finished detail."""
        return OutputConfig(results_dir=self.sweep.output.results_dir, run_name=self.sweep.name, reuse=True)

    def round_output(self, contestant_id: str, since: str) -> OutputConfig:
        """The output of a fresh round's request (started at ``since``): it reuses the contestant's newest run
        of the round, when an earlier run of the round made one (the round's runs, one after another,
        then add up to one complete run), and never a run from before the round. A ``since`` that is no
        time (a run tagged fresh by hand, say "true") reuses nothing."""
        try:
            start = datetime.fromisoformat(since)
        except ValueError:
            start = None
        source = next(
            (
                run
                for run in self.store.runs_newest_first(self.root(contestant_id))
                if start is not None and run.started_at and datetime.fromisoformat(run.started_at) >= start
            ),
            None,
        )
        return OutputConfig(
            results_dir=self.sweep.output.results_dir,
            run_name=self.sweep.name,
            reuse_run_id=source.run_id if source is not None else None,
        )

    @cached_property
    def store(self) -> RunStore:
        return RunStore(self.sweep.output.results_dir)

    @cached_property
    def budget(self) -> SweepBudget | None:
        """The sweep's budget and its ledger (the same for every benchmark and model of the sweep)."""
        return sweep_budget(self.request(self.first, []))

    @property
    def first(self) -> str:
        """The first contestant's id."""
        return next(iter(self.model_keys.values()))

    def root(self, contestant_id: str) -> Path:
        return run_root(self.output, self.benchmark.id, contestant_id)

    @property
    def benchmark_dir(self) -> Path:
        return self.root(self.first).parent

    @property
    def report_dir(self) -> Path:
        """The sweep's directory, where its metrics step writes the sweep's report and trajectory pages."""
        return self.benchmark_dir.parent

    def with_result(self, partitions: set[str]) -> set[str]:
        """Of these (contestant, task) partitions, materialized ones, those whose task has a normal detail in
        this sweep's results directory. Dagster keeps one materialization state per partition, whichever
        results directory the run that materialized it wrote into; a result in another one (a run with
        `agentcompass run --results-dir`) is not a result here, so its task is still to evaluate here
        (#36). A partition of a task or contestant this process does not know is taken as materialized."""
        known: dict[str, dict[str, TaskSpec]] = {}
        kept: set[str] = set()
        for key in partitions:
            model_key, task_key = split_key(key)
            if model_key in self.model_keys and task_key in self.task_keys:
                known.setdefault(self.model_keys[model_key], {})[key] = self.task_keys[task_key]
            else:
                kept.add(key)
        for contestant_id, tasks in known.items():
            finished = self.store.finished(self.root(contestant_id), list(tasks.values()))
            kept.update(key for key, task in tasks.items() if task.id in finished)
        return kept

    def newest_runs(self, have: str) -> dict[str, ReuseSource]:
        """Contestant id -> its newest run directory holding ``have`` (a file such as summary.md);
        contestants that have none are left out."""
        newest = {}
        for contestant_id in self.model_keys.values():
            source = next(
                (
                    run
                    for run in self.store.runs_newest_first(self.root(contestant_id))
                    if (Path(run.path) / have).is_file()
                ),
                None,
            )
            if source is not None:
                newest[contestant_id] = source
        return newest

    def request(
        self,
        contestant_id: str,
        run_only: list[str] | None = None,
        resources: SweepResources | None = None,
        dagster_run_id: str | None = None,
        fresh_since: str | None = None,
    ) -> EvalRequest:
        """With ``resources``, a request of the harness and environment the run configured them with (what
        ``plugins(request, resources)`` builds); with ``fresh_since``, a request of the fresh round
        that started then (round_output)."""
        contestant = self.sweep.contestant(contestant_id)
        output = self.output if fresh_since is None else self.round_output(contestant_id, fresh_since)
        harness, environment = (
            (resources.harness_config(contestant.harness), resources.environment.config(self.sweep.environment))
            if resources
            else (None, None)
        )
        return self.sweep.request(
            self.benchmark,
            contestant,
            output,
            harness=harness,
            environment=environment,
            run_only=run_only,
            dagster_run_id=dagster_run_id,
        )


def keys_of(tasks: list[TaskSpec]) -> dict[str, TaskSpec]:
    return {partition_key(task.id): task for task in tasks}


def sweep_benchmarks(sweep: SweepConfig) -> list[SweepBenchmark]:
    return [SweepBenchmark(sweep, benchmark) for benchmark in sweep.benchmarks]
