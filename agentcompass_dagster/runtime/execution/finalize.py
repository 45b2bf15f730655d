"""Finalisation of a request (R-FIN-1) and re-rendering a summary from the details on disk."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from agentcompass_dagster.declarations import registry
from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.contracts.validation import validate_declaration
from agentcompass_dagster.contracts.analyzer import Analyzer
from agentcompass_dagster.runtime.results import summary
from agentcompass_dagster.runtime.results.analysis import summarize_analysis
from agentcompass_dagster.runtime.results.metrics import standard_metrics
from agentcompass_dagster.runtime.execution.plugins import Plugins
from agentcompass_dagster.runtime.results.parquet import analysis_columns, write_run_parquet
from agentcompass_dagster.runtime.results.scores import TaskScores
from agentcompass_dagster.runtime.store.run_dir import RunDir
from agentcompass_dagster.runtime.store.run_store import open_run_dir
from agentcompass_dagster.contracts.records import MetricResult, TaskSpec
from agentcompass_dagster.runtime.store.outcomes import RequestResult, RunDirStatus, TerminalStatus


def write_summary(
    request: EvalRequest, benchmark: Any, run_dir: RunDir, scores: TaskScores, status: RunDirStatus
) -> tuple[MetricResult, str]:
    """R-FIN-1: merge reused and new tasks in selected order, aggregate through the benchmark, write
    summary.md, .summary_counts.json, metrics.parquet and task_results.parquet."""
    metrics = benchmark.aggregate_metrics(scores, len(scores.tasks)) or standard_metrics(scores, len(scores.tasks))
    assert run_dir.info is not None
    counts = summary.count(scores, len(scores.tasks), metrics, run_dir.info.budget)
    title = f"{request.benchmark.id} · {request.model.id} · {request.harness.id}"
    lineage = request.lineage
    if lineage:
        # Forks are shown apart: their turns are not a from-scratch sample (R-FORK-1).
        title = (
            f"{lineage.kind} of run {lineage.parent_run_id} (task {lineage.task_id}, checkpoint "
            f"{lineage.checkpoint_seq}, model {lineage.parent_model} -> {lineage.model}) · {title}"
        )
    markdown = summary.render(
        title,
        run_dir.run_id,
        status,
        counts,
        list(scores.error_lines()),
        list(scores.failure_lines()),
        [(t.id, t.reason) for t in run_dir.info.not_loaded],
        scores.replay_lines(),
    )
    run_dir.save_results(markdown, counts)
    identity = {
        "sweep": request.sweep,
        "benchmark": request.benchmark.id,
        "model": request.model.id,
        "harness": request.harness.id,
        "run_id": run_dir.run_id,
        "started_at": datetime.fromisoformat(run_dir.info.started_at),
    }
    write_run_parquet(run_dir.path, identity, metrics, scores, analysis_columns(request.execution.analyzers))
    return metrics, markdown


def finalize_request(
    request: EvalRequest,
    plugins: Plugins,
    analyzers: list[Analyzer],
    run_dir: RunDir,
    scores: TaskScores,
    status: TerminalStatus,
) -> RequestResult:
    """R-FIN-1: summary, optional analysis artifacts, terminal status; the result of the whole request."""
    metrics, markdown = write_summary(request, plugins.benchmark, run_dir, scores, status)
    analysis = summarize_analysis(analyzers, scores)
    if analysis is not None:
        run_dir.save_analysis_summary(*analysis)
    run_dir.record.write_terminal_status(status)
    return RequestResult(
        name=request.name,
        run_id=run_dir.run_id,
        run_dir=str(run_dir.path),
        status=status,
        metadata={"benchmark": request.benchmark.id, "model": request.model.id, "harness": request.harness.id},
        metrics=metrics,
        summary=markdown,
        paths=run_dir.paths,
    )


def rerender_summary(path: Path) -> tuple[MetricResult, str]:
    """`agentcompass summary RUN_DIR`: rebuild summary.md and .summary_counts.json from details/."""
    run_dir = open_run_dir(path)
    assert run_dir.info is not None
    request = validate_declaration(EvalRequest, run_dir.info.request, f"{path}/run_info.json request")
    benchmark = registry.benchmarks.get(request.benchmark.id, "benchmark.id")(request.benchmark)
    results = run_dir.load_all_details()
    order = run_dir.info.selected_tasks or sorted(results)
    tasks = [
        TaskSpec(id=task_id, category=results[task_id].category if task_id in results else None) for task_id in order
    ]
    reused = set(run_dir.info.reused_from.task_ids) if run_dir.info.reused_from else set()
    scores = TaskScores(tasks)
    for position, task in enumerate(tasks):
        if task.id in results:
            scores.add(position, results[task.id], reused=task.id in reused)
    return write_summary(request, benchmark, run_dir, scores, run_dir.info.status)
