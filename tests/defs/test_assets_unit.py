"""The Dagster assets of one small sweep at their seams, on an ephemeral instance: the tasks asset and the
comparison asset invoked directly with ``build_asset_context``, the evaluation step (attempts, metrics) run
with ``materialize`` for the partitions it is given. No CLI, no DAGSTER_HOME, no daemon
(test_dagster.py and test_dagster_engine.py drive the same assets through `agentcompass run`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pytest
from conftest import write_sweep

from agentcompass_dagster.contracts.declarations import EnvironmentConfig, HarnessConfig
from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.contracts import Environment, Harness, Model
from agentcompass_dagster.defs.location import sweep_definitions
from agentcompass_dagster.defs.partitions import partition_key
from agentcompass_dagster.defs.resources import EnvironmentResource, HarnessResource, SweepResources
from agentcompass_dagster.defs.task_events import detail_metadata
from agentcompass_dagster.defs.sweep import SweepBenchmark, sweep_benchmarks
from agentcompass_dagster.contracts.records import EvaluatedAttempt, Usage
from agentcompass_dagster.runtime.store.outcomes import TaskDetail

TASKS = ["create-hello", "count-errors"]


class Lab:
    """The sweep `lab` (demo tasks, oracle harness, local environment) as Dagster sees it."""

    def __init__(self, tmp_path: Path, models: list[str], **fields: Any) -> None:
        path = write_sweep(
            tmp_path,
            name="lab",
            benchmarks=[{"id": "demo", "tasks": TASKS}],
            models=[{"id": m, "provider": "none"} for m in models],
            **fields,
        )
        self.sweep = load_sweep(path)
        (self.benchmark,) = sweep_benchmarks(self.sweep)
        self.defs = sweep_definitions(self.sweep)
        self.assets = {key: a for a in self.defs.assets or [] if isinstance(a, dg.AssetsDefinition) for key in a.keys}
        self.instance = dg.DagsterInstance.ephemeral()

    def asset(self, kind: str) -> dg.AssetsDefinition:
        return self.assets[self.benchmark.key(kind)]

    def invoke(self, kind: str) -> dict[str, Any]:
        """Invoke an asset directly; the metadata of its MaterializeResult (the tasks' ObserveResult), as
        plain values."""
        result = self.asset(kind)(dg.build_asset_context(instance=self.instance))
        assert isinstance(result, (dg.MaterializeResult, dg.ObserveResult)) and result.metadata is not None
        return {name: getattr(value, "value", value) for name, value in result.metadata.items()}

    def materialize(self, kind: str, partition_key: str | None = None) -> dg.ExecuteInProcessResult:
        result = dg.materialize(
            [self.asset(kind)],
            selection=[self.benchmark.key(kind)],
            partition_key=partition_key,
            instance=self.instance,
            resources=self.defs.resources,
        )
        assert result.success
        return result

    def materialized(self) -> set[str]:
        return set(self.instance.get_materialized_partitions(self.benchmark.key("attempts")))


def metadata_of(event: dg.DagsterEvent) -> dict[str, Any]:
    materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
    return {name: value.value for name, value in materialization.metadata.items()}


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    return Lab(tmp_path, ["m1", "m2"])


def test_the_tasks_asset_registers_one_partition_per_task_and_writes_tasks_parquet(lab: Lab) -> None:
    """R-PREP-1 at the Dagster seam: the tasks asset loads and selects the benchmark's tasks once, adds a
    dynamic partition per new task to the instance and writes tasks.parquet; run again, it adds none."""
    benchmark: SweepBenchmark = lab.benchmark
    metadata = lab.invoke("tasks")

    assert (metadata["tasks"], metadata["new partitions"]) == (2, 2)
    assert metadata["path"] == str((benchmark.benchmark_dir / "tasks.parquet").resolve())
    frame = pd.read_parquet(metadata["path"])
    assert sorted(frame["task_id"]) == sorted(TASKS) == sorted(frame["partition_key"])
    assert sorted(lab.instance.get_dynamic_partitions(benchmark.partitions_name)) == sorted(TASKS)
    assert lab.invoke("tasks")["new partitions"] == 0
    assert lab.materialized() == set()


def test_the_evaluation_step_materializes_only_the_partition_it_is_given(lab: Lab) -> None:
    """The evaluation step run for one (model, task) partition evaluates that task for that model only:
    one attempts materialization whose metadata is what the UI shows of the task (its score, tokens,
    cost, duration and its detail file, relative to the benchmark's directory, and where its attempt's
    trajectory page is; no task id, which the partition key is, and no ``reused``, which it is not), no
    other partition, and nothing of the other model on disk."""
    lab.invoke("tasks")
    result = lab.materialize("attempts", "m1|create-hello")

    (event,) = result.get_asset_materialization_events()
    assert event.asset_key == lab.benchmark.key("attempts") and event.partition == "m1|create-hello"
    metadata = metadata_of(event)
    assert set(metadata) == {"score", "tokens", "duration_s", "cost_usd", "detail", "trajectory a1"}
    assert metadata["score"] == 1.0 and metadata["trajectory a1"].endswith("/create-hello__a1.html")
    assert metadata["detail"].startswith("m1/") and (lab.benchmark.benchmark_dir / metadata["detail"]).is_file()
    assert lab.materialized() == {"m1|create-hello"}
    assert not (lab.benchmark.benchmark_dir / "m2").exists()


def test_a_tasks_metadata_names_its_id_only_when_the_partition_key_is_not_it_and_reused_only_when_true() -> None:
    """Per-task metadata is stored once per task: the id of a task whose key was made safe (the key
    alone does not say it), ``reused`` when the result came from an earlier run, neither otherwise; a
    cost only when the model reports one; duration to the millisecond."""
    usage = Usage(input_tokens=7, output_tokens=3, cost_usd=None)
    detail = TaskDetail(
        task_id="dir/sub/task",
        score=0.5,
        attempts_tried=2,
        attempts={
            "1": EvaluatedAttempt(attempt=1, score=1.0, correct=True, duration_s=0.12345, usage=usage),
            "2": EvaluatedAttempt(attempt=2, score=0.0, duration_s=0.2, usage=usage),
        },
    )
    path = Path("m1/run/details/dir_sub_task.json")
    unsafe = detail_metadata(detail, partition_key(detail.task_id), path, reused=True)
    assert {name: getattr(value, "value", value) for name, value in unsafe.items()} == {
        "task_id": "dir/sub/task",
        "score": 0.5,
        "tokens": 20.0,
        "duration_s": 0.323,
        "detail": str(path),
        "reused": True,
    }
    safe = detail.model_copy(update={"task_id": "alpha"})
    assert set(detail_metadata(safe, "alpha", path, reused=False)) == {"score", "tokens", "duration_s", "detail"}


def test_metrics_and_comparison_are_computed_from_the_runs_on_disk(lab: Lab) -> None:
    """With every partition evaluated, the metrics step reads each model's newest run (accuracy per
    model, in its metadata and in metrics.parquet) and the comparison asset, invoked directly, pairs the
    two models on the tasks both finished."""
    lab.invoke("tasks")
    for model in ("m1", "m2"):
        for task in TASKS:
            lab.materialize("attempts", f"{model}|{task}")
    assert len(lab.materialized()) == 4

    (event,) = lab.materialize("metrics").get_asset_materialization_events()
    metrics = metadata_of(event)
    assert (metrics["accuracy m1"], metrics["accuracy m2"], metrics["models"]) == (1.0, 1.0, 2)
    rows = pd.read_parquet(metrics["metrics"])
    assert set(rows[rows["metric"] == "accuracy"]["model"]) == {"m1", "m2"}

    comparison = lab.invoke("comparison")
    assert comparison["pairs"] == 1 and "| m1 | m2 | 2 |" in comparison["comparisons"]
    assert (lab.benchmark.benchmark_dir / "comparison.parquet").is_file()


# What the recording resources below built, in order.
BUILT: list[str] = []


class RecordingHarness(HarnessResource):
    """The declared harness resource, noting each model it builds the harness for."""

    def build(self, model: Model, declared: HarnessConfig | None = None) -> Harness:
        BUILT.append(f"harness for {model.config.id}")
        return super().build(model, declared)


class RecordingEnvironment(EnvironmentResource):
    """The declared environment resource, noting each provider it opens."""

    def open_provider(self, declared: EnvironmentConfig | None = None) -> Environment:
        BUILT.append(f"environment {self.id}")
        return super().open_provider(declared)


def test_the_evaluation_step_runs_with_what_its_resources_build(lab: Lab) -> None:
    """Issue #27: the harness and the environment are resources that carry behaviour. The evaluation step
    looks up its sweep's resources and runs every request with the harness the harness resource builds
    for the request's model and the environment provider the environment resource opens."""
    BUILT.clear()
    lab.invoke("tasks")
    harness_key, environment_key = SweepResources.keys("lab")
    resources = {
        **(lab.defs.resources or {}),
        harness_key: RecordingHarness.declared(lab.sweep.harness),
        environment_key: RecordingEnvironment.declared(lab.sweep.environment),
    }
    result = dg.materialize(
        [lab.asset("attempts")],
        selection=[lab.benchmark.key("attempts")],
        partition_key="m2|count-errors",
        instance=lab.instance,
        resources=resources,
    )

    assert result.success and lab.materialized() == {"m2|count-errors"}
    assert BUILT == ["harness for m2", "environment local"]


def test_a_launchpad_environment_is_what_the_run_uses_and_records(lab: Lab) -> None:
    """Issue #27: the environment resource configured in the run's config (the launchpad) replaces the
    declared one for that run: the provider it names runs the task, and run_info.json records it."""
    lab.invoke("tasks")
    _, environment_key = SweepResources.keys("lab")
    launchpad = {
        "id": "from-launchpad",
        "provider": "local",
        "env": {"LAUNCHPAD": "1"},
        "capacity": 0,
        "open_qps": 0.0,
        "params": {},
    }
    result = dg.materialize(
        [lab.asset("attempts")],
        selection=[lab.benchmark.key("attempts")],
        partition_key="m1|create-hello",
        instance=lab.instance,
        resources=lab.defs.resources,
        run_config={"resources": {environment_key: {"config": launchpad}}},
    )

    assert result.success and lab.materialized() == {"m1|create-hello"}
    (run_dir,) = [p for p in lab.benchmark.root("m1").iterdir() if (p / "run_info.json").is_file()]
    recorded = json.loads((run_dir / "run_info.json").read_text())["request"]["environment"]
    assert (recorded["id"], recorded["provider"], recorded["env"]) == ("from-launchpad", "local", {"LAUNCHPAD": "1"})
    assert lab.sweep.environment.id == "local"


def test_a_harness_left_as_declared_resolves_its_paths_beside_the_sweep_and_a_launchpad_one_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #36: Dagster rebuilds the harness resource from its config for each run, which names no file.
    Left as the sweep declares it, the harness still resolves a relative param (the scripted harness's
    ``record``) beside the sweep file, as the sweep does; configured in the launchpad, it was read from no
    file, so the path is the working directory's."""
    project, cwd = tmp_path / "project", tmp_path / "cwd"
    project.mkdir()
    cwd.mkdir()
    harness = {"id": "scripted", "params": {"default": {"oracle": True}, "record": "calls.jsonl"}}
    lab = Lab(project, ["m1"], harness=harness)
    monkeypatch.chdir(cwd)
    lab.invoke("tasks")
    lab.materialize("attempts", "m1|create-hello")
    assert (project / "calls.jsonl").is_file() and not (cwd / "calls.jsonl").exists()

    harness_key, _ = SweepResources.keys("lab")
    launchpad = {"id": "scripted", "params": {**harness["params"], "record": "launchpad.jsonl"}}
    result = dg.materialize(
        [lab.asset("attempts")],
        selection=[lab.benchmark.key("attempts")],
        partition_key="m1|count-errors",
        instance=lab.instance,
        resources=lab.defs.resources,
        run_config={"resources": {harness_key: {"config": launchpad}}},
    )
    assert result.success and (cwd / "launchpad.jsonl").is_file() and not (project / "launchpad.jsonl").exists()
