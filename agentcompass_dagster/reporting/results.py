"""The pandas API over the Parquet outputs of a results directory.

    from agentcompass_dagster.reporting.results import load_metrics, load_task_results
    metrics = load_metrics("results")              # the newest run per sweep x benchmark x model x harness
    history = load_metrics("results", latest=False)        # every run, one row per metric
    metrics.pivot_table(index="model", columns="metric", values="value")

Both default to the newest run of each sweep x benchmark x model x harness (a sweep's contestant): a run
that reused earlier results
lists the reused tasks again (``reused`` true), so rows of every run would count a task once per run.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from agentcompass_dagster.runtime.results.parquet import analysis_columns, conform, metrics_schema, task_results_schema
from agentcompass_dagster.runtime.store.layout import (
    ALERTS_FILE,
    COMPARISON_FILE,
    METRICS_FILE,
    RUN_INFO,
    TASK_RESULTS_FILE,
)
from agentcompass_dagster.runtime.results.regression import read_verdict
from agentcompass_dagster.runtime.store.run_records import read_params

IDENTITY = ["sweep", "benchmark", "model", "harness"]


def _run_files(results_dir: Path, name: str, include_forks: bool = False) -> list[Path]:
    """Run-level files only: each sits beside a run_info.json. Forks share their parent's turns up to
    the cut, so they are not from-scratch samples and stay out unless asked for (R-FORK-1)."""
    return sorted(
        p
        for p in Path(results_dir).rglob(name)
        if (p.parent / RUN_INFO).is_file() and (include_forks or not _is_fork(p.parent))
    )


def _is_fork(run_dir: Path) -> bool:
    params = read_params(run_dir)
    return params is not None and params.lineage is not None


def _load(results_dir: str | Path, name: str, schema: pa.Schema, include_forks: bool = False) -> pd.DataFrame:
    """The files' rows in ``schema``, with the columns a file holds beyond it (an analyzer named by class
    path, which this process has not registered) after it, null in the files without them."""
    tables = [pq.read_table(path) for path in _run_files(Path(results_dir), name, include_forks)]
    extra = {field.name: field for table in tables for field in table.schema if field.name not in schema.names}
    schema = pa.schema([*schema, *extra.values()])
    return (
        pa.concat_tables([conform(t, schema) for t in tables]).to_pandas()
        if tables
        else schema.empty_table().to_pandas()
    )


def newest_runs(metrics: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """The newest run of each ``by`` group of metric rows (columns ``by`` and run_id), as
    ``RunStore.runs_newest_first`` orders run directories, which reuse and the Dagster assets take: the one
    that started last, the greater run id between two that started together. "Newest" means this and
    nothing else (never when a file was written: re-rendering a summary does not make a run newer); a row
    of a run that recorded no start counts from when it was written."""
    started = metrics["started_at"].fillna(metrics["timestamp"])
    ordered = metrics.assign(_started=started).sort_values(["_started", "run_id"], kind="stable")
    return ordered.drop_duplicates(subset=by, keep="last")[[*by, "run_id"]]


def _keep_latest(frame: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """Rows of the newest run of each sweep x benchmark x model x harness."""
    if metrics.empty:
        return frame.iloc[0:0]
    newest = newest_runs(metrics, IDENTITY)
    return frame.merge(newest, on=[*IDENTITY, "run_id"]).reset_index(drop=True)


def load_metrics(results_dir: str | Path, latest: bool = True, include_forks: bool = False) -> pd.DataFrame:
    """One row per run x metric: sweep, benchmark, model, harness, run_id, metric, value, n, total,
    errors, timestamp. ``latest`` (the default) keeps only the newest run of each sweep x benchmark x model x
    harness;
    ``include_forks`` adds forked runs, which are left out of from-scratch statistics by default."""
    metrics = _load(results_dir, METRICS_FILE, metrics_schema(), include_forks)
    return _keep_latest(metrics, metrics) if latest else metrics


def load_task_results(results_dir: str | Path, latest: bool = True, include_forks: bool = False) -> pd.DataFrame:
    """One row per run x task x attempt: ids, category, attempt, correct, score, tokens, cost, duration,
    failure, error, reused. ``latest`` (the default) keeps only the newest run of each sweep x benchmark x
    model x harness, so a task reused from an earlier run is counted once; ``latest=False`` gives every run's rows."""
    tasks = _load(results_dir, TASK_RESULTS_FILE, task_results_schema(analysis_columns()), include_forks)
    return _keep_latest(tasks, _load(results_dir, METRICS_FILE, metrics_schema(), include_forks)) if latest else tasks


HISTORY_COLUMNS = [
    "sweep",
    "benchmark",
    "model",
    "harness",
    "run_id",
    "started_at",
    "accuracy",
    "ci_low",
    "ci_high",
    "n",
    "total",
    "errors",
    "cost_usd",
    "regression",
    "regression_p_value",
    "regression_diff",
    "baseline_run_id",
    "run_dir",
]


def _run_cost(run_dir: Path) -> float:
    """What the run's result cost, reused tasks included as its summary counts them; NaN when any
    attempt's cost is unknown, so that a partial sum never reads as the whole (R-DISP-4). Attempt 0 rows
    stand for tasks that ended before any attempt: nothing was spent on them."""
    path = run_dir / TASK_RESULTS_FILE
    if not path.is_file():
        return float("nan")
    attempts = pq.read_table(path, columns=["attempt", "cost_usd"]).to_pandas()
    costs = attempts.loc[attempts["attempt"] > 0, "cost_usd"]
    return float("nan") if costs.isna().any() else float(costs.sum())


def _history_row(metrics_path: Path) -> dict[str, object] | None:
    metrics = conform(pq.read_table(metrics_path), metrics_schema()).to_pandas()
    if metrics.empty:
        return None
    accuracy = metrics[metrics["metric"] == "accuracy"]
    # A benchmark with metrics of its own may have no accuracy: its run still has a date, counts and cost.
    row = (accuracy if not accuracy.empty else metrics).iloc[0]
    nan = float("nan")
    run_dir = metrics_path.parent
    verdict = read_verdict(run_dir)
    return {
        **{
            column: row[column]
            for column in ("sweep", "benchmark", "model", "harness", "run_id", "n", "total", "errors")
        },
        "started_at": row["timestamp"] if pd.isna(row["started_at"]) else row["started_at"],
        **(
            {"accuracy": row["value"], "ci_low": row["ci_low"], "ci_high": row["ci_high"]}
            if not accuracy.empty
            else {"accuracy": nan, "ci_low": nan, "ci_high": nan}
        ),
        "cost_usd": _run_cost(run_dir),
        "regression": verdict.status if verdict else None,
        "regression_p_value": verdict.p_value if verdict else None,
        "regression_diff": verdict.diff if verdict else None,
        "baseline_run_id": verdict.baseline_run_id if verdict else None,
        "run_dir": str(run_dir),
    }


def load_history(results_dir: str | Path, sweep: str | None = None) -> pd.DataFrame:
    """One row per run (of ``sweep``, or of every sweep), oldest first within each sweep x benchmark x
    model: started_at, accuracy with its 95% interval (ci_low, ci_high), n evaluated of total selected
    tasks, errors, cost_usd (NaN when incomplete), the regression check's verdict on the run
    (``regression``: passed / failed / skipped, NaN where none was written; its p-value, diff and
    baseline run) and the run's directory. Forks are left out: they are not from-scratch runs."""
    rows = [
        row
        for path in _run_files(Path(results_dir), METRICS_FILE)
        if (row := _history_row(path)) is not None and (sweep is None or row["sweep"] == sweep)
    ]
    frame = pd.DataFrame(rows, columns=HISTORY_COLUMNS)
    return frame.sort_values(["sweep", "benchmark", "model", "started_at"], kind="stable").reset_index(drop=True)


def load_comparisons(results_dir: str | Path) -> pd.DataFrame:
    """Every paired model comparison of every sweep x benchmark (from the Dagster comparison asset)."""
    frames = [pd.read_parquet(path) for path in sorted(Path(results_dir).rglob(COMPARISON_FILE))]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_alerts(results_dir: str | Path) -> pd.DataFrame:
    """Every regression alert of every sweep (``<sweep>/alerts.jsonl``): one row per failed check
    evaluation, with the verdict's figures, the Dagster run and the webhook's delivery."""
    from agentcompass_dagster.runtime.results.regression import RegressionAlert, read_alerts

    rows = [
        alert.model_dump() for path in sorted(Path(results_dir).glob(f"*/{ALERTS_FILE}")) for alert in read_alerts(path)
    ]
    return pd.DataFrame(rows, columns=list(RegressionAlert.model_fields))
