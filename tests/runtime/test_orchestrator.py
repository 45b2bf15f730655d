"""Orchestration over several named requests: preparation, ordered priority, finalisation (R-PREP-1,
R-ORCH-1)."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from lifecycle import Lifecycle

from agentcompass_dagster.declarations import registry
from agentcompass_dagster.plugins.benchmarks.synthetic import SyntheticBenchmark
from agentcompass_dagster.contracts.declarations import BenchmarkConfig, EnvironmentConfig, HarnessConfig, ModelConfig
from agentcompass_dagster.contracts.request import ExecutionConfig, OutputConfig, EvalRequest
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.runtime.execution.orchestrator import Orchestrator, orchestrate
from agentcompass_dagster.runtime.execution.request_state import OrchestrationObserver
from agentcompass_dagster.contracts.records import TaskSpec


def request(
    tmp_path: Path,
    name: str,
    *,
    benchmark: str = "synthetic",
    n: int = 4,
    record: Path | None = None,
    step: dict[str, Any] | None = None,
    **execution: Any,
) -> EvalRequest:
    params: dict[str, Any] = {"default": step or {"oracle": True}}
    if record is not None:
        params["record"] = str(record)
    return EvalRequest(
        name=name,
        benchmark=BenchmarkConfig(id=benchmark, params={"n_tasks": n}),
        model=ModelConfig(id="m"),
        harness=HarnessConfig(id="scripted", params=params),
        environment=EnvironmentConfig(id="local"),
        execution=ExecutionConfig.model_validate(execution),
        output=OutputConfig(results_dir=tmp_path / "results", run_name=name),
    )


def calls(record: Path, event: str) -> list[float]:
    return [json.loads(line)["time"] for line in record.read_text().splitlines() if f'"{event}"' in line]


def seconds(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def test_ordered_priority_pipelined_preparation_and_early_finalisation(tmp_path: Path) -> None:
    """R-ORCH-1: with 2 workers and three requests, request i+1 starts a task only once request i has no
    pending task; request i+1 is prepared only once request i has fewer pending tasks than workers;
    request 1 finalises before request 2 finishes."""
    records = [tmp_path / f"r{i}.jsonl" for i in range(3)]
    step = {"sleep": 0.3, "oracle": True}
    requests = [
        request(tmp_path, f"r{i}", record=records[i], step=step, limits={"task_concurrency": 2}) for i in range(3)
    ]
    dispatched = DispatchLog()
    result = orchestrate(requests, observer=dispatched)
    assert result.status == "completed" and list(result.outcomes) == ["r0", "r1", "r2"]
    starts = [[t for name, t in dispatched.starts if name == f"r{i}"] for i in range(3)]
    ends = [sorted(calls(r, "end")) for r in records]
    assert all(len(s) == 4 for s in starts)
    assert [name for name, _ in dispatched.starts] == ["r0"] * 4 + ["r1"] * 4 + ["r2"] * 4
    for i in (0, 1):
        info = json.loads(Path(result.outcomes[f"r{i + 1}"].paths["run_info"]).read_text())
        assert seconds(info["started_at"]) >= starts[i][2] - 0.002
    assert dispatched.started == ["r0", "r1", "r2"]
    first_info = json.loads(Path(result.outcomes["r0"].paths["run_info"]).read_text())
    assert seconds(first_info["finished_at"]) < ends[1][-1]
    assert dispatched.finished.index("r0") < dispatched.finished.index("r1")
    assert all(o.status == "completed" for o in result.outcomes.values())


class DispatchLog(OrchestrationObserver):
    """The order in which the orchestrator starts requests and hands tasks to its task loops."""

    def __init__(self) -> None:
        self.starts: list[tuple[str, float]] = []
        self.started: list[str] = []
        self.finished: list[str] = []

    def request_started(self, state: Any) -> None:
        self.started.append(state.request.name)

    def task_started(self, state: Any, task: TaskSpec) -> None:
        self.starts.append((state.request.name, time.time()))

    def request_finished(self, state: Any) -> None:
        self.finished.append(state.request.name)


def test_prepare_loads_tasks_once_and_queues_only_what_reuse_lacks(tmp_path: Path, recorder: Lifecycle) -> None:
    """R-PREP-1: tasks are loaded and selected once per request (not per attempt or retry); reused ids are
    dropped from the queue; run_info.json records the selected tasks."""
    faulty = request(tmp_path, "f", benchmark="faulty", n=3, attempts={"k": 2}, max_retries=1)
    faulty = faulty.model_copy(update={"environment": EnvironmentConfig(id="rec", provider="recording")})
    orchestrate([faulty])
    assert recorder.events.count("load_tasks") == 1
    record = tmp_path / "calls.jsonl"
    first = orchestrate([request(tmp_path, "q", n=5)])
    run_dir = Path(first.outcomes["q"].paths["run_dir"])
    (run_dir / "details" / "t3_a.json").unlink()
    again = request(tmp_path, "q", n=5, record=record)
    again = again.model_copy(update={"output": again.output.model_copy(update={"reuse": True})})
    second = orchestrate([again])
    assert [json.loads(line)["task"] for line in record.read_text().splitlines() if '"start"' in line] == ["t3"]
    info = json.loads(Path(second.outcomes["q"].paths["run_info"]).read_text())
    assert info["selected_tasks"] == ["t0", "t1", "t2", "t3", "t4"]


class DuplicateIds(SyntheticBenchmark):
    def load_tasks(self) -> list[TaskSpec]:
        return [TaskSpec(id="same"), TaskSpec(id="same")]


def test_invalid_task_ids_stop_before_any_directory(tmp_path: Path, plugin_registries: None) -> None:
    """R-PREP-1: task ids are validated (unique, well-formed) before a run directory is reserved."""
    registry.benchmarks.register("duplicate-ids", DuplicateIds)
    with pytest.raises(UserError, match="id='same' is duplicated"):
        orchestrate([request(tmp_path, "d", benchmark="duplicate-ids")])
    assert not (tmp_path / "results").exists()


def test_one_failing_request_does_not_stop_the_others(tmp_path: Path) -> None:
    """R-ORCH-1: a request whose preparation fails is recorded as failed; later requests still run."""
    results = tmp_path / "results"
    blocked = request(tmp_path, "blocked")
    root = results / "blocked" / "synthetic" / "m"
    orchestrator = Orchestrator([blocked, request(tmp_path, "fine")])
    states = orchestrator.preflight()
    assert states[0].root == root
    root.parent.mkdir(parents=True)
    root.write_text("a file where the run root should be")
    result = orchestrate([blocked, request(tmp_path, "fine")])
    assert result.status == "failed"
    assert result.outcomes["blocked"].status == "failed" and "blocked" in (result.outcomes["blocked"].error or "")
    assert result.outcomes["fine"].status == "completed"
