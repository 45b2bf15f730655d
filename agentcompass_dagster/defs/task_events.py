"""What the evaluate step reports to Dagster of each task as it ends: a materialization of its attempts
partition (a normal result) or an observation (a task that ended in error, which stays missing), with
the metadata the partition's page and the Plots tab show and the paths of its detail and trajectory
pages."""

import queue
from pathlib import Path
from typing import Any

import dagster as dg

from agentcompass_dagster.defs.sweep import SweepBenchmark
from agentcompass_dagster.runtime.execution.request_state import OrchestrationObserver, RequestState
from agentcompass_dagster.runtime.store.outcomes import TaskDetail
from agentcompass_dagster.reporting.trajectory import trajectory_page_name, trajectory_pages_dir


class TaskStream(OrchestrationObserver):
    """Hands each finished task from the runtime's thread to the step's thread, which reports it to
    Dagster at once (the step must yield its events itself)."""

    def __init__(self, sweep_benchmark: SweepBenchmark, claimed: set[tuple[str, str]]) -> None:
        self.sweep_benchmark = sweep_benchmark
        self.claimed = claimed
        self.events: queue.Queue[dg.AssetMaterialization | dg.AssetObservation] = queue.Queue()
        self._model_keys = {contestant: key for key, contestant in sweep_benchmark.model_keys.items()}
        self._task_keys = {task.id: key for key, task in sweep_benchmark.task_keys.items()}
        self._run_dirs: dict[str, tuple[Path, Path]] = {}

    def request_started(self, state: RequestState) -> None:
        # A claimed task whose normal detail the reuse source already had (its materialization was lost,
        # say, to a kill between the detail and the event) is finished: report it, run nothing.
        assert state.run_dir is not None
        for position in state.scores.reused_positions():
            task = state.tasks[position]
            if (state.request.contestant_id, task.id) in self.claimed:
                detail = state.run_dir.load_detail(task)
                if detail is not None:
                    self._report(state, detail, reused=True)

    def task_finished(self, state: RequestState, detail: TaskDetail) -> None:
        self._report(state, detail, reused=False)

    def _report(self, state: RequestState, detail: TaskDetail, reused: bool) -> None:
        assert state.run_dir is not None
        task_key = self._task_keys[detail.task_id]
        key = dg.MultiPartitionKey({"model": self._model_keys[state.request.contestant_id], "task": task_key})
        asset_key = self.sweep_benchmark.key("attempts")
        details, pages = self._dirs(state)
        trajectories = {
            f"trajectory a{n}": dg.MetadataValue.path(str(pages / trajectory_page_name(detail.task_id, n)))
            for n in sorted(int(n) for n in detail.attempts)
        }
        if detail.is_error:
            error = (detail.error or "").strip().splitlines()[-1:] or [""]
            path = details / state.run_dir.detail_path(detail.task_id, detail.category, error=True).name
            self.events.put(
                dg.AssetObservation(
                    asset_key=asset_key,
                    partition=key,
                    metadata={
                        **task_id_entry(detail.task_id, task_key),
                        "error": error[0][:500],
                        "detail": dg.MetadataValue.path(str(path)),
                        **trajectories,
                    },
                )
            )
            return
        path = details / state.run_dir.detail_path(detail.task_id, detail.category).name
        self.events.put(
            dg.AssetMaterialization(
                asset_key=asset_key,
                partition=key,
                metadata={**detail_metadata(detail, task_key, path, reused), **trajectories},
            )
        )

    def _dirs(self, state: RequestState) -> tuple[Path, Path]:
        """The run's details directory as the events show it, relative to the benchmark's directory (the
        attempts asset's description names it), and where the metrics step writes the pages of its
        attempts: worked out once per run, not once per task."""
        assert state.run_dir is not None
        name = state.request.name
        if name not in self._run_dirs:
            self._run_dirs[name] = (
                state.run_dir.details_dir.resolve().relative_to(self.sweep_benchmark.benchmark_dir.resolve()),
                trajectory_pages_dir(self.sweep_benchmark.report_dir.resolve(), state.run_dir.path),
            )
        return self._run_dirs[name]


def task_id_entry(task_id: str, task_key: str) -> dict[str, str]:
    """The task's id, where its partition key does not already say it (an id made safe for Dagster)."""
    return {} if task_id == task_key else {"task_id": task_id}


def detail_metadata(detail: TaskDetail, task_key: str, path: Path, reused: bool) -> dict[str, Any]:
    """A finished task's materialization metadata: what the partition's page and the Plots tab show, and
    nothing the detail file (``path``) already holds for whoever needs more. Every task stores one such
    event and each entry costs ~130 bytes of it, so: the score (what accuracy averages and comparisons
    test), tokens, cost and duration (numbers, which the Plots tab charts across partitions), the detail
    file relative to the benchmark's directory, the task id only when the partition key is not the id,
    and ``reused`` only when true."""
    attempts = list(detail.attempts.values())
    usage = detail.usage
    metadata: dict[str, Any] = {
        **task_id_entry(detail.task_id, task_key),
        "score": float(detail.score),
        "tokens": float(usage.input_tokens + usage.output_tokens),
        # Milliseconds are all anyone reads; the float's other digits cost ~15 bytes a task.
        "duration_s": round(float(sum(a.duration_s for a in attempts)), 3),
        "detail": dg.MetadataValue.path(str(path)),
    }
    if usage.cost_usd is not None:
        metadata["cost_usd"] = float(usage.cost_usd)
    if reused:
        metadata["reused"] = True
    return metadata
