"""metrics.parquet and task_results.parquet of a run directory, with fixed column types so that files
from different runs and versions concatenate cleanly (read them with agentcompass_dagster.reporting.results)."""

from __future__ import annotations

import io
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from agentcompass_dagster.contracts.analyzer import AnalysisColumn
from agentcompass_dagster.declarations import registry
from agentcompass_dagster.runtime.store.atomic import atomic_write_bytes
from agentcompass_dagster.runtime.store.layout import METRICS_FILE, TASK_RESULTS_FILE
from agentcompass_dagster.runtime.results.scores import TaskScores
from agentcompass_dagster.contracts.records import MetricResult

if TYPE_CHECKING:
    import pyarrow as pa


def pyarrow_with_system_allocator() -> None:
    """Two small files are written once at the end of a run: Arrow's default memory pool (mimalloc or
    jemalloc) keeps ~25 MB of arenas for the rest of the process, the system allocator returns them. Only
    where pyarrow is not imported yet (the pool is chosen then), and a pool the user chose wins."""
    if "pyarrow" not in sys.modules:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


def metrics_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("sweep", pa.string()),
            ("benchmark", pa.string()),
            ("model", pa.string()),
            ("harness", pa.string()),
            ("run_id", pa.string()),
            ("metric", pa.string()),
            ("value", pa.float64()),
            ("n", pa.int64()),
            ("total", pa.int64()),
            ("errors", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("stderr", pa.float64()),
            ("ci_low", pa.float64()),
            ("ci_high", pa.float64()),
            ("started_at", pa.timestamp("us", tz="UTC")),
        ]
    )


def analysis_columns(named: list[str] | None = None) -> list[tuple[str, AnalysisColumn]]:
    """The columns each registered analyzer declares (Analyzer.columns), then those of the analyzers
    ``named`` by class path, with the analyzer's name: every run's file holds the built-ins' columns,
    whichever analyzers it ran, so that files concatenate."""
    ids = registry.analyzers.ids()
    ids += [name for name in named or [] if name not in ids and registry.is_class_path(name)]
    found = [registry.analyzers.get(plugin_id) for plugin_id in ids]
    return [(analyzer.name, column) for analyzer in found for column in analyzer.columns]


def task_results_schema(analysis: list[tuple[str, AnalysisColumn]]) -> pa.Schema:
    import pyarrow as pa

    types = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string()}
    return pa.schema(
        [
            ("sweep", pa.string()),
            ("benchmark", pa.string()),
            ("model", pa.string()),
            ("harness", pa.string()),
            ("run_id", pa.string()),
            ("task_id", pa.string()),
            ("category", pa.string()),
            ("attempt", pa.int64()),
            ("correct", pa.bool_()),
            ("score", pa.float64()),
            ("input_tokens", pa.int64()),
            ("output_tokens", pa.int64()),
            ("cost_usd", pa.float64()),
            ("duration_s", pa.float64()),
            ("error", pa.string()),
            ("failure", pa.string()),
            ("reused", pa.bool_()),
            ("started_at", pa.timestamp("us", tz="UTC")),
            # The limit the attempt hit (LimitHit.message), null where it hit none.
            ("limit", pa.string()),
            # The attempt's named rewards (Harbor's reward.json), null where its benchmark gave none.
            ("rewards", pa.map_(pa.string(), pa.float64())),
            # The analyzers' figures, null where one did not run.
            *((column.name, types[column.type]) for _, column in analysis),
        ]
    )


def write_table(path: Path, table: pa.Table) -> None:
    """An Arrow table as Parquet, written atomically."""
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The table in the current schema; columns added since it was written are null (R-COMPAT-1)."""
    import pyarrow as pa

    columns = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


# Columns are built from their buffers: pa.array() and pa.scalar() import pandas on first use, 50 MB
# of a 100,000-task run's peak memory for a library these files do not need.


def _validity(missing: np.ndarray) -> pa.Buffer | None:
    import pyarrow as pa

    return pa.py_buffer(np.packbits(~missing, bitorder="little")) if missing.any() else None


def _fixed(values: np.ndarray, type_: pa.DataType, missing: np.ndarray | None = None) -> pa.Array:
    """int64, float64, timestamp or bool values (a numpy array) as an Arrow array."""
    import pyarrow as pa

    if pa.types.is_boolean(type_):
        data = np.packbits(values.astype(bool), bitorder="little")
    else:
        data = np.ascontiguousarray(values, dtype=np.float64 if pa.types.is_floating(type_) else np.int64)
    validity = _validity(missing) if missing is not None else None
    return pa.Array.from_buffers(type_, len(values), [validity, pa.py_buffer(data)])


def _string_array(n: int, offsets: np.ndarray, data: bytes, validity: pa.Buffer | None) -> pa.Array:
    """A string column from its int64 offsets; int32 ones (no cast, which would load Arrow's compute
    kernels, 14 MB) unless the column holds 2 GB or more."""
    import pyarrow as pa

    if offsets[-1] < 2**31:
        return pa.Array.from_buffers(
            pa.string(), n, [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
        )
    return pa.Array.from_buffers(pa.large_string(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)]).cast(
        pa.string()
    )


def _strings(values: list[str | None]) -> pa.Array:
    encoded = [b"" if value is None else value.encode() for value in values]
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    missing = np.fromiter((value is None for value in values), dtype=bool, count=len(values))
    return _string_array(len(values), offsets, b"".join(encoded), _validity(missing))


def _column(values: list[object] | np.ndarray, type_: pa.DataType) -> pa.Array:
    """Any column of the schemas above from a list (None for missing) or a numpy array."""
    import pyarrow as pa

    # The schema's type tells what the values are (str, datetime or a number; None for missing): the casts say so.
    if pa.types.is_string(type_):
        return _strings(cast("list[str | None]", list(values)))
    if isinstance(values, np.ndarray):
        return _fixed(values, type_, np.isnan(values) if values.dtype.kind == "f" else None)
    missing = np.fromiter((value is None for value in values), dtype=bool, count=len(values))
    numbers: list[object]
    if pa.types.is_timestamp(type_):
        stamps = cast("list[datetime | None]", values)
        numbers = [0 if value is None else int(value.timestamp() * 1_000_000) for value in stamps]
    else:
        numbers = [0 if value is None else value for value in values]
    return _fixed(np.asarray(numbers), type_, missing)


def _rewards(values: list[dict[str, float] | None]) -> pa.Array:
    """A map column of named rewards, null where an attempt has none."""
    import pyarrow as pa

    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum([len(value or {}) for value in values], out=offsets[1:])
    keys = _strings([name for value in values for name in (value or {})])
    items = _fixed(np.array([v for value in values for v in (value or {}).values()], dtype=np.float64), pa.float64())
    missing = np.fromiter((not value for value in values), dtype=bool, count=len(values))
    return pa.MapArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), len(offsets), [None, pa.py_buffer(offsets)]),
        keys,
        items,
        mask=_fixed(missing, pa.bool_()) if missing.any() else None,
    )


def _repeated(value: object, type_: pa.DataType, n: int) -> pa.Array:
    import pyarrow as pa

    if value is None or not pa.types.is_string(type_):
        return _column([value] * n, type_)
    encoded = str(value).encode()
    return _string_array(n, np.arange(n + 1, dtype=np.int64) * len(encoded), encoded * n, None)


def _nulls(type_: pa.DataType, n: int) -> pa.Array:
    import pyarrow as pa

    return pa.nulls(n, type_)


def _table(columns: dict[str, pa.Array], schema: pa.Schema) -> pa.Table:
    import pyarrow as pa

    return pa.Table.from_arrays([columns[field.name] for field in schema], schema=schema)


def write_run_parquet(
    run_dir: Path,
    identity: dict[str, object],
    metrics: MetricResult,
    scores: TaskScores,
    analysis: list[tuple[str, AnalysisColumn]],
) -> None:
    """``identity`` holds sweep, benchmark, model, harness, run_id and the run's started_at (what "newest"
    is ordered by), repeated on every row. task_results has one row per attempt (attempt 0 for a task
    that ended before any), built column by column from the scores; ``analysis``: analysis_columns()."""
    pyarrow_with_system_allocator()
    counts = metrics.counts
    uncertainty = (metrics.details or {}).get("uncertainty", {})
    names = list(metrics.metrics)
    schema = metrics_schema()
    per_metric: dict[str, list[object]] = {
        "metric": list(names),
        "value": [metrics.metrics[name] for name in names],
        "n": [uncertainty.get(name, {}).get("n", counts.evaluated) for name in names],
        "total": [counts.total] * len(names),
        "errors": [counts.error] * len(names),
        "timestamp": [datetime.now(timezone.utc)] * len(names),
        **{key: [uncertainty.get(name, {}).get(key) for name in names] for key in ("stderr", "ci_low", "ci_high")},
    }
    columns = {name: _column(values, schema.field(name).type) for name, values in per_metric.items()}
    columns |= {name: _repeated(value, schema.field(name).type, len(names)) for name, value in identity.items()}
    write_table(run_dir / METRICS_FILE, _table(columns, schema))

    rows = scores.attempt_rows()
    schema = task_results_schema(analysis)
    task_rows = scores.column("attempt_task")[rows]
    tasks = [scores.task(int(row)) for row in task_rows]

    columns = {
        "task_id": _strings([task.id for task in tasks]),
        "category": _strings([task.category for task in tasks]),
        "correct": _column(scores.column("attempt_correct")[rows], schema.field("correct").type),
        "score": _column(scores.column("attempt_score")[rows], schema.field("score").type),
        "error": _strings([scores.attempt_errors.get(int(row)) for row in rows]),
        "failure": _strings([scores.attempt_failures.get(int(row)) for row in rows]),
        "limit": _strings([scores.attempt_limits.get(int(row)) for row in rows]),
        "rewards": _rewards([scores.attempt_rewards.get(int(row)) for row in rows]),
        "reused": _column(scores.column("reused")[task_rows], schema.field("reused").type),
        **{
            name: _column(scores.column(name)[rows], schema.field(name).type)
            for name in ("attempt", "input_tokens", "output_tokens", "cost_usd", "duration_s")
        },
    }
    columns |= {name: _repeated(value, schema.field(name).type, len(rows)) for name, value in identity.items()}
    analyses = scores.decoded_analysis(rows)
    # Attempts with equal results share one dict, so the distinct ones are few: an analyzer that ran on no
    # attempt gets a column of nulls made without a list (at 100,000 attempts those lists cost 26 MB).
    ran = {name for result in {id(a): a for a in analyses if a}.values() for name in result}
    for name, column in analysis:
        type_ = schema.field(column.name).type
        results = [None if result is None else result.get(name) for result in analyses] if name in ran else None
        columns[column.name] = _nulls(type_, len(rows)) if results is None else _column(column.values(results), type_)
    write_table(run_dir / TASK_RESULTS_FILE, _table(columns, schema))


def read_task_scores(run_dir: Path) -> dict[str, float | None]:
    """Task -> its score in a run's task_results.parquet (the mean over its attempts, what accuracy
    averages), None for a task that ended in error: every task the run holds a result for."""
    import pandas as pd

    rows = pd.read_parquet(Path(run_dir) / TASK_RESULTS_FILE, columns=["task_id", "score", "error"])
    tasks = rows.groupby("task_id")
    finished, means = tasks["error"].apply(lambda e: e.isna().all()), tasks["score"].mean()
    return {str(task): float(means[task]) if finished[task] else None for task in means.index}
