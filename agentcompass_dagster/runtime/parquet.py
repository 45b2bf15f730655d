"""metrics.parquet and task_results.parquet of a run directory, with fixed column types so that files
from different runs and versions concatenate cleanly (read them with agentcompass_dagster.results)."""

from __future__ import annotations

import io
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from agentcompass_dagster.runtime.atomic import atomic_write_bytes
from agentcompass_dagster.runtime.scores import TaskScores
from agentcompass_dagster.runtime.types import MetricResult

if TYPE_CHECKING:
    import pyarrow as pa

METRICS_FILE = "metrics.parquet"
TASK_RESULTS_FILE = "task_results.parquet"


def metrics_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([
        ("sweep", pa.string()), ("benchmark", pa.string()), ("model", pa.string()), ("harness", pa.string()),
        ("run_id", pa.string()), ("metric", pa.string()), ("value", pa.float64()), ("n", pa.int64()),
        ("total", pa.int64()), ("errors", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")),
        ("stderr", pa.float64()), ("ci_low", pa.float64()), ("ci_high", pa.float64()),
        ("started_at", pa.timestamp("us", tz="UTC")),
    ])


def task_results_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([
        ("sweep", pa.string()), ("benchmark", pa.string()), ("model", pa.string()), ("harness", pa.string()),
        ("run_id", pa.string()), ("task_id", pa.string()), ("category", pa.string()), ("attempt", pa.int64()),
        ("correct", pa.bool_()), ("score", pa.float64()), ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()), ("cost_usd", pa.float64()), ("duration_s", pa.float64()),
        ("error", pa.string()), ("reused", pa.bool_()), ("started_at", pa.timestamp("us", tz="UTC")),
    ])


def _write(path: Path, table: pa.Table) -> None:
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def write_run_parquet(run_dir: Path, identity: dict[str, object], metrics: MetricResult, scores: TaskScores) -> None:
    """``identity`` holds sweep, benchmark, model, harness, run_id and the run's started_at (what "newest"
    is ordered by), repeated on every row. task_results has one row per attempt (attempt 0 for a task
    that ended before any), built column by column from the scores."""
    import pyarrow as pa

    now = datetime.now(timezone.utc)
    counts = metrics.counts
    uncertainty = (metrics.details or {}).get("uncertainty", {})
    metric_rows = [
        {**identity, "metric": name, "value": value, "n": uncertainty.get(name, {}).get("n", counts.evaluated),
         "total": counts.total,
         "errors": counts.error, "timestamp": now, **{key: uncertainty.get(name, {}).get(key)
                                                      for key in ("stderr", "ci_low", "ci_high")}}
        for name, value in metrics.metrics.items()
    ]
    _write(run_dir / METRICS_FILE, pa.Table.from_pylist(metric_rows, schema=metrics_schema()))
    rows = scores.attempt_rows()
    task_rows = scores.column("attempt_task")[rows] if len(rows) else np.array([], dtype=np.int64)
    tasks = [scores.task(int(row)) for row in task_rows]
    cost = scores.column("cost_usd")[rows] if len(rows) else np.array([])
    schema = task_results_schema()
    columns: dict[str, pa.Array] = {
        "task_id": pa.array([task.id for task in tasks], pa.string()),
        "category": pa.array([task.category for task in tasks], pa.string()),
        "attempt": pa.array(scores.column("attempt")[rows].astype(np.int64) if len(rows) else [], pa.int64()),
        "correct": pa.array(scores.column("attempt_correct")[rows].astype(bool) if len(rows) else [], pa.bool_()),
        "score": pa.array(scores.column("attempt_score")[rows] if len(rows) else [], pa.float64()),
        "input_tokens": pa.array(scores.column("input_tokens")[rows] if len(rows) else [], pa.int64()),
        "output_tokens": pa.array(scores.column("output_tokens")[rows] if len(rows) else [], pa.int64()),
        "cost_usd": pa.array(cost, pa.float64(), mask=np.isnan(cost)),
        "duration_s": pa.array(scores.column("duration_s")[rows] if len(rows) else [], pa.float64()),
        "error": pa.array([scores.attempt_errors.get(int(row)) for row in rows], pa.string()),
        "reused": pa.array(scores.column("reused")[task_rows].astype(bool) if len(rows) else [], pa.bool_()),
    }
    for name, value in identity.items():
        columns[name] = pa.repeat(pa.scalar(value, schema.field(name).type), len(rows))
    _write(run_dir / TASK_RESULTS_FILE, pa.table([columns[field.name] for field in schema], schema=schema))
