"""The three assets of each benchmark of a sweep: tasks -> attempts (model x task) -> metrics."""

import base64
import io
from pathlib import Path
from typing import Any, Iterator

import dagster as dg

from agentcompass_dagster.defs.partitions import split_key
from agentcompass_dagster.defs.resources import EnvironmentResource, HarnessResource
from agentcompass_dagster.defs.sweep import SweepBenchmark
from agentcompass_dagster.plots import accuracy_with_ci, category_heatmap, cost_vs_accuracy
from agentcompass_dagster.runtime.atomic import atomic_write_bytes, atomic_write_text
from agentcompass_dagster.runtime.orchestrator import OrchestrationObserver, Observers, RequestState, run_requests
from agentcompass_dagster.runtime.parquet import METRICS_FILE, TASK_RESULTS_FILE
from agentcompass_dagster.runtime.stats import paired_comparison
from agentcompass_dagster.runtime.types import TaskDetail

TASKS_FILE = "tasks.parquet"
SUMMARY_FILE = "summary.md"

# Set by the CLI for runs it executes in its own process, so its live progress display sees the tasks.
in_process_observer: OrchestrationObserver | None = None


def tasks_asset(sb: SweepBenchmark) -> dg.AssetsDefinition:
    @dg.asset(
        key=sb.key("tasks"),
        group_name=sb.group,
        description=f"The selected tasks of benchmark {sb.benchmark.id!r}; one attempts partition per task.",
    )
    def tasks(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        import pandas as pd

        specs = sb.load_tasks()
        keys = sb.task_keys(specs)
        known = set(context.instance.get_dynamic_partitions(sb.partitions_name))
        new = [key for key in keys if key not in known]
        if new:
            context.instance.add_dynamic_partitions(sb.partitions_name, new)
        sb.benchmark_dir.mkdir(parents=True, exist_ok=True)
        frame = pd.DataFrame(
            {
                "task_id": [t.id for t in specs],
                "partition_key": list(keys),
                "category": [t.category for t in specs],
            }
        )
        write_frame(sb.benchmark_dir / TASKS_FILE, frame)
        return dg.MaterializeResult(
            metadata={"tasks": len(specs), "new partitions": len(new),
                      "path": dg.MetadataValue.path(str((sb.benchmark_dir / TASKS_FILE).resolve()))}
        )

    return tasks


def write_frame(path: Path, frame: Any) -> None:
    """A DataFrame as Parquet, written atomically."""
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    atomic_write_bytes(path, buffer.getvalue())


class _Finished(OrchestrationObserver):
    """Which tasks of each model ended with a normal detail, where it lies, and whether it was reused."""

    def __init__(self) -> None:
        self.normal: dict[tuple[str, str], tuple[TaskDetail, str, bool]] = {}

    def request_prepared(self, state: RequestState) -> None:
        assert state.run_dir is not None
        for task_id in state.reused:
            detail = state.results[task_id]
            path = str(state.run_dir.detail_path(task_id, detail.category))
            self.normal[(state.request.model.id, task_id)] = (detail, path, True)

    def task_finished(self, state: RequestState, detail: TaskDetail) -> None:
        assert state.run_dir is not None
        if not detail.is_error:
            path = str(state.run_dir.detail_path(detail.task_id, detail.category))
            self.normal[(state.request.model.id, detail.task_id)] = (detail, path, False)


def attempts_asset(sb: SweepBenchmark) -> dg.AssetsDefinition:
    @dg.asset(
        key=sb.key("attempts"),
        group_name=sb.group,
        deps=[sb.key("tasks")],
        partitions_def=sb.partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        output_required=False,
        required_resource_keys={sb.harness_resource_key, sb.environment_resource_key},
        description=(
            f"Every task of {sb.benchmark.id!r} for every model, k attempts each (inside the task's detail). "
            "A partition is materialized once its task has a normal detail; tasks that end in error stay "
            "missing and run again."
        ),
    )
    def attempts(context: dg.AssetExecutionContext) -> Iterator[dg.AssetMaterialization]:
        # A generator that yields only per-partition materializations: the partitions of the range whose
        # task did not end with a normal detail stay unmaterialized (returning would mark the whole range).
        harness: HarnessResource = getattr(context.resources, sb.harness_resource_key)
        environment: EnvironmentResource = getattr(context.resources, sb.environment_resource_key)
        tasks = sb.task_keys(sb.load_tasks())
        wanted: dict[str, list[str]] = {}
        for key in context.partition_keys:
            model_key, task_key = split_key(key)
            if task_key in tasks and model_key in sb.model_keys:
                wanted.setdefault(sb.model_keys[model_key], []).append(tasks[task_key].id)
        finished = _Finished()
        requests = sb.requests(wanted, harness.config(), environment.config(), context.run.run_id)
        result = run_requests(requests, observer=Observers(finished, in_process_observer))
        materialized = context.instance.get_materialized_partitions(context.asset_key)
        model_key_of = {model_id: key for key, model_id in sb.model_keys.items()}
        task_key_of = {task.id: key for key, task in tasks.items()}
        requested = {(model_id, task_id) for model_id, task_ids in wanted.items() for task_id in task_ids}
        for (model_id, task_id), (detail, path, reused) in finished.normal.items():
            key = dg.MultiPartitionKey({"model": model_key_of[model_id], "task": task_key_of[task_id]})
            if (model_id, task_id) not in requested or (reused and key in materialized):
                continue
            yield dg.AssetMaterialization(asset_key=context.asset_key, partition=key,
                                          metadata=_detail_metadata(detail, path))
        failed = {name: o.error for name, o in result.outcomes.items() if o.status != "completed"}
        if failed:
            raise dg.Failure(description=f"requests did not complete: {sorted(failed)}",
                             metadata={name: str(error)[-2000:] for name, error in failed.items()})

    return attempts


def _detail_metadata(detail: TaskDetail, path: str) -> dict[str, Any]:
    usage = detail.usage
    return {
        "task_id": detail.task_id,
        "correct": detail.correct,
        "score": detail.score,
        "attempts": detail.attempts_tried,
        "tokens": usage.input_tokens + usage.output_tokens,
        "cost_usd": usage.cost_usd,
        "detail": dg.MetadataValue.path(str(Path(path).resolve())),
    }


def metrics_asset(sb: SweepBenchmark) -> dg.AssetsDefinition:
    @dg.asset(
        key=sb.key("metrics"),
        group_name=sb.group,
        deps=[sb.key("attempts")],
        description=f"Metrics of {sb.benchmark.id!r} per model, from each model's newest run directory.",
    )
    def metrics(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        import pandas as pd

        newest = sb.newest_runs()
        frames = {name: [] for name in (METRICS_FILE, TASK_RESULTS_FILE)}
        for source in newest.values():
            for name, parts in frames.items():
                path = Path(source.path) / name
                if path.is_file():
                    parts.append(pd.read_parquet(path))
        metric_rows = pd.concat(frames[METRICS_FILE], ignore_index=True) if frames[METRICS_FILE] else pd.DataFrame()
        task_rows = pd.concat(frames[TASK_RESULTS_FILE], ignore_index=True) if frames[TASK_RESULTS_FILE] else pd.DataFrame()
        table = _markdown_table(metric_rows)
        sb.benchmark_dir.mkdir(parents=True, exist_ok=True)
        write_frame(sb.benchmark_dir / METRICS_FILE, metric_rows)
        write_frame(sb.benchmark_dir / TASK_RESULTS_FILE, task_rows)
        summary = f"# {sb.sweep.name} · {sb.benchmark.id}\n\n{table}\n"
        atomic_write_text(sb.benchmark_dir / SUMMARY_FILE, summary)
        plots = {"accuracy per model": accuracy_with_ci(metric_rows),
                 "accuracy per category": category_heatmap(metric_rows),
                 "cost against accuracy": cost_vs_accuracy(metric_rows, task_rows)}
        for title, png in plots.items():
            atomic_write_bytes(sb.benchmark_dir / f"{title.replace(' ', '_')}.png", png)
        return dg.MaterializeResult(
            metadata={
                "summary": dg.MetadataValue.md(table),
                **{f"plot: {title}": dg.MetadataValue.md(f"![{title}](data:image/png;base64,{base64.b64encode(png).decode()})")
                   for title, png in plots.items()},
                "models": len(newest),
                "runs": dg.MetadataValue.json({model: str(Path(source.path).resolve()) for model, source in newest.items()}),
                "metrics": dg.MetadataValue.path(str((sb.benchmark_dir / METRICS_FILE).resolve())),
            }
        )

    return metrics


def _markdown_table(metrics: Any) -> str:
    """Models as rows, metrics as columns, with the counts the values are over."""
    if metrics.empty:
        return "_no finished run yet_"
    wide = metrics.pivot_table(index="model", columns="metric", values="value", aggfunc="first", sort=False)
    counts = metrics.groupby("model", sort=False)[["n", "total", "errors"]].first()
    columns = list(wide.columns)
    lines = ["| model | " + " | ".join(columns) + " | evaluated | total | errors |",
             "|---" * (len(columns) + 4) + "|"]
    for model, row in wide.iterrows():
        values = " | ".join("n/a" if row[c] != row[c] else f"{row[c]:.4f}" for c in columns)
        c = counts.loc[model]
        lines.append(f"| {model} | {values} | {c['n']} | {c['total']} | {c['errors']} |")
    return "\n".join(lines)


COMPARISON_FILE = "comparison.parquet"


def comparison_asset(sb: SweepBenchmark) -> dg.AssetsDefinition:
    @dg.asset(
        key=sb.key("comparison"),
        group_name=sb.group,
        deps=[sb.key("metrics")],
        description=f"Every pair of models on the {sb.benchmark.id!r} tasks both finished: the difference in "
        "accuracy with a paired bootstrap 95% interval and the exact McNemar test.",
    )
    def comparison() -> dg.MaterializeResult:
        import pandas as pd

        scores = _task_scores(sb)
        rows = []
        models = [m.id for m in sb.sweep.models if m.id in scores]
        for index, a in enumerate(models):
            for b in models[index + 1:]:
                result = paired_comparison(scores[a], scores[b])
                if result is None:
                    continue
                rows.append({"sweep": sb.sweep.name, "benchmark": sb.benchmark.id, "model_a": a, "model_b": b,
                             "n": result.n, "accuracy_a": result.mean_a, "accuracy_b": result.mean_b,
                             "diff": result.diff, "ci_low": result.ci_low, "ci_high": result.ci_high,
                             "only_a": result.only_a, "only_b": result.only_b, "p_value": result.p_value,
                             "verdict": result.verdict(a, b)})
        frame = pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
        sb.benchmark_dir.mkdir(parents=True, exist_ok=True)
        write_frame(sb.benchmark_dir / COMPARISON_FILE, frame)
        table = comparison_table(frame)
        atomic_write_text(sb.benchmark_dir / "comparison.md", f"# {sb.sweep.name} · {sb.benchmark.id}: comparisons\n\n{table}\n")
        return dg.MaterializeResult(metadata={"comparisons": dg.MetadataValue.md(table), "pairs": len(rows)})

    return comparison


COMPARISON_COLUMNS = ["sweep", "benchmark", "model_a", "model_b", "n", "accuracy_a", "accuracy_b", "diff", "ci_low",
                      "ci_high", "only_a", "only_b", "p_value", "verdict"]


def _task_scores(sb: SweepBenchmark) -> dict[str, dict[str, float]]:
    """Model -> task -> mean score over attempts (what accuracy averages), for tasks without error."""
    import pandas as pd

    scores: dict[str, dict[str, float]] = {}
    for model, source in sb.newest_runs().items():
        path = Path(source.path) / TASK_RESULTS_FILE
        if not path.is_file():
            continue
        rows = pd.read_parquet(path, columns=["task_id", "score", "error"])
        finished = rows.groupby("task_id")["error"].apply(lambda e: e.isna().all())
        means = rows.groupby("task_id")["score"].mean()
        scores[model] = {task: float(means[task]) for task in means.index if finished[task]}
    return scores


def comparison_table(frame: Any) -> str:
    if frame.empty:
        return "_fewer than two models with finished tasks_"
    lines = ["| model A | model B | tasks | accuracy A | accuracy B | A - B [95% CI] | only A | only B | McNemar p | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in frame.itertuples():
        lines.append(f"| {row.model_a} | {row.model_b} | {row.n} | {row.accuracy_a:.4f} | {row.accuracy_b:.4f} | "
                     f"{row.diff:+.4f} [{row.ci_low:+.4f}, {row.ci_high:+.4f}] | {row.only_a} | {row.only_b} | "
                     f"{row.p_value:.4g} | {row.verdict} |")
    return "\n".join(lines)
