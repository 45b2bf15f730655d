"""The metrics of a benchmark of a sweep, as its metrics asset writes them: each contestant's newest run
made complete, the benchmark's Parquet files combined from those runs, summary.md with the metrics table,
the plots, the sweep's report, and the metadata the materialization shows."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.contracts.markdown import markdown_table
from agentcompass_dagster.declarations.contestants import by_contestant
from agentcompass_dagster.defs.coordination import sweep_lock
from agentcompass_dagster.defs.sweep import SweepBenchmark
from agentcompass_dagster.plugins.analyzers.overview import figures_table, run_figures, summed_counts
from agentcompass_dagster.reporting.plots import (
    NoPlot,
    Plot,
    accuracy_with_ci,
    category_heatmap,
    cost_vs_accuracy,
    inline_accuracy,
    markdown_image,
)
from agentcompass_dagster.runtime.execution.consolidate import consolidate
from agentcompass_dagster.runtime.results.analysis import select_analyzers
from agentcompass_dagster.runtime.results.parquet import (
    analysis_columns,
    conform,
    metrics_schema,
    task_results_schema,
    write_table,
)
from agentcompass_dagster.runtime.store.atomic import atomic_write_bytes, atomic_write_text
from agentcompass_dagster.runtime.store.budget import budget_figures
from agentcompass_dagster.runtime.store.layout import METRICS_FILE, SUMMARY, TASK_RESULTS_FILE
from agentcompass_dagster.runtime.store.run_records import ReuseSource

if TYPE_CHECKING:
    import pandas as pd


def write_metrics(sweep_benchmark: SweepBenchmark, dagster_run_id: str) -> dg.MaterializeResult:
    """Each contestant's newest run made complete (consolidated, when runs overlapped), then the metrics of
    the benchmark from those runs: Parquet, summary.md, plots."""
    several = sweep_benchmark.sweep.several_harnesses
    with sweep_lock(sweep_benchmark):
        _consolidate(sweep_benchmark, dagster_run_id)
        newest = sweep_benchmark.newest_runs(METRICS_FILE)
        sweep_benchmark.benchmark_dir.mkdir(parents=True, exist_ok=True)
        rows = _combine(sweep_benchmark, newest)
        table = _markdown_table(rows[METRICS_FILE], several)
        metric_rows, task_rows = (by_contestant(rows[name], several) for name in (METRICS_FILE, TASK_RESULTS_FILE))
        atomic_write_text(
            sweep_benchmark.benchmark_dir / SUMMARY,
            f"# {sweep_benchmark.sweep.name} · {sweep_benchmark.benchmark.id}\n\n{table}\n",
        )
        plots = _write_plots(sweep_benchmark, metric_rows, task_rows)
    return dg.MaterializeResult(
        asset_key=sweep_benchmark.key("metrics"),
        metadata=_metadata(sweep_benchmark, newest, table, metric_rows, plots),
    )


def _consolidate(sweep_benchmark: SweepBenchmark, dagster_run_id: str) -> None:
    for contestant in sweep_benchmark.model_keys.values():
        request = sweep_benchmark.request(contestant, [], dagster_run_id=dagster_run_id)
        plugins = sweep_benchmark.plugins(request)
        consolidate(
            request,
            plugins,
            select_analyzers(request),
            sweep_benchmark.tasks,
            sweep_benchmark.store,
            sweep_benchmark.root(contestant),
        )


def _combine(sweep_benchmark: SweepBenchmark, newest: dict[str, ReuseSource]) -> dict[str, pd.DataFrame]:
    """The benchmark's metrics and task results files, each the newest runs' files put together; the rows
    of each, by file name."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows: dict[str, pd.DataFrame] = {}
    # In the files' own schemas (a pandas round trip cannot write their map column back), older
    # runs' files conformed to them.
    for name, schema in (
        (METRICS_FILE, metrics_schema()),
        (TASK_RESULTS_FILE, task_results_schema(analysis_columns())),
    ):
        tables = [
            conform(pq.read_table(Path(source.path) / name), schema)
            for source in newest.values()
            if (Path(source.path) / name).is_file()
        ]
        table = pa.concat_tables(tables) if tables else schema.empty_table()
        write_table(sweep_benchmark.benchmark_dir / name, table)
        rows[name] = table.to_pandas()
    return rows


def _write_plots(
    sweep_benchmark: SweepBenchmark, metric_rows: pd.DataFrame, task_rows: pd.DataFrame
) -> dict[str, Plot | NoPlot]:
    plots = {
        "accuracy per model": accuracy_with_ci(metric_rows),
        "accuracy per category": category_heatmap(metric_rows),
        "cost against accuracy": cost_vs_accuracy(metric_rows, task_rows),
    }
    for title, plot in plots.items():
        png_path = sweep_benchmark.benchmark_dir / f"{title.replace(' ', '_')}.png"
        if isinstance(plot, Plot):
            atomic_write_bytes(png_path, plot.png)
        else:  # nothing to draw: no PNG, not an earlier materialization's one either
            png_path.unlink(missing_ok=True)
    return plots


def _metadata(
    sweep_benchmark: SweepBenchmark,
    newest: dict[str, ReuseSource],
    table: str,
    metric_rows: pd.DataFrame,
    plots: dict[str, Plot | NoPlot],
) -> dict[str, dg.RawMetadataValue]:
    accuracy = (
        {f"accuracy {row.model}": float(row.value) for row in metric_rows.itertuples() if row.metric == "accuracy"}
        if not metric_rows.empty
        else {}
    )
    inline = inline_accuracy(metric_rows)
    analysis = {model: run_figures(Path(source.path)) for model, source in newest.items()}
    return {
        # Markdown under 1,000 characters shows inline in the UI: the table, and a tiny SVG chart.
        "summary": dg.MetadataValue.md(table),
        **({"accuracy per model": dg.MetadataValue.md(inline)} if inline else {}),
        **accuracy,
        **{f"plot: {title}": dg.MetadataValue.md(markdown_image(title, plot)) for title, plot in plots.items()},
        # What the analyzers found in each contestant's run (its analysis_summary.md has the flagged attempts).
        "analysis": dg.MetadataValue.md(figures_table(analysis)),
        **summed_counts(analysis),
        **(budget_figures(sweep_benchmark.budget) if sweep_benchmark.budget else {}),
        "models": len(newest),
        "runs": dg.MetadataValue.json({model: str(Path(source.path).resolve()) for model, source in newest.items()}),
        "metrics": dg.MetadataValue.path(str((sweep_benchmark.benchmark_dir / METRICS_FILE).resolve())),
        "report": _report(sweep_benchmark),
    }


def _report(sweep_benchmark: SweepBenchmark) -> dg.MetadataValue:
    """The sweep's report.html, written with the trajectory pages the attempts' metadata names (the pages
    of each model's newest run); a report that cannot be written leaves the metrics as they are."""
    from agentcompass_dagster.reporting.report import write_report

    try:
        return dg.MetadataValue.path(str(write_report(sweep_benchmark.report_dir).resolve()))
    except UserError as error:
        return dg.MetadataValue.text(f"not written: {error}")


def _markdown_table(metrics: pd.DataFrame, several_harnesses: bool) -> str:
    """Models (harness x model, with several harnesses) as rows, metrics as columns, with the counts the
    values are over."""
    if metrics.empty:
        return "_no finished run yet_"
    index = ["harness", "model"] if several_harnesses else ["model"]
    wide = metrics.pivot_table(index=index, columns="metric", values="value", aggfunc="first", sort=False)
    counts = metrics.groupby(index, sort=False)[["n", "total", "errors"]].first()
    columns = list(wide.columns)
    rows = [
        [
            *(key if several_harnesses else [key]),
            *("n/a" if row[c] != row[c] else f"{row[c]:.4f}" for c in columns),
            *counts.loc[key, ["n", "total", "errors"]],
        ]
        for key, row in wide.iterrows()
    ]
    return markdown_table([*index, *columns, "evaluated", "total", "errors"], rows)
