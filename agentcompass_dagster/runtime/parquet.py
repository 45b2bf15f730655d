"""metrics.parquet and task_results.parquet of a run directory, with fixed column types so that files
from different runs and versions concatenate cleanly (read them with agentcompass_dagster.results)."""

from __future__ import annotations

import io
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentcompass_dagster.runtime.atomic import atomic_write_bytes
from agentcompass_dagster.runtime.redact import redact_text
from agentcompass_dagster.runtime.types import MetricResult, TaskDetail

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


def _write(path: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows, schema=schema)
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def write_run_parquet(
    run_dir: Path,
    identity: dict[str, object],
    metrics: MetricResult,
    details: list[TaskDetail],
    reused: set[str],
) -> None:
    """``identity`` holds sweep, benchmark, model, harness, run_id and the run's started_at (what "newest"
    is ordered by), repeated on every row."""
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
    task_rows = []
    for detail in details:
        attempts = detail.attempts.values() or [None]
        for attempt in attempts:
            error = (attempt.error if attempt is not None else None) or (detail.error if attempt is None else None)
            task_rows.append({
                **identity,
                "task_id": detail.task_id,
                "category": detail.category,
                "attempt": attempt.attempt if attempt is not None else 0,
                "correct": bool(attempt and attempt.correct and attempt.error is None),
                "score": attempt.score if attempt is not None else 0.0,
                "input_tokens": attempt.usage.input_tokens if attempt is not None else 0,
                "output_tokens": attempt.usage.output_tokens if attempt is not None else 0,
                "cost_usd": attempt.usage.cost_usd if attempt is not None else None,
                "duration_s": attempt.duration_s if attempt is not None else 0.0,
                "error": redact_text(error.strip().splitlines()[-1][:500]) if error else None,
                "reused": detail.task_id in reused,
            })
    _write(run_dir / METRICS_FILE, metric_rows, metrics_schema())
    _write(run_dir / TASK_RESULTS_FILE, task_rows, task_results_schema())
