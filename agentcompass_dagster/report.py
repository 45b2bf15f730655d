"""One self-contained HTML report of a results directory.

    from agentcompass_dagster.report import build_report, write_report
    html = build_report("results")                 # links relative to results/
    write_report("results", "results/report.html")

Per sweep x benchmark it shows the models (newest run of each), every metric with its 95% interval,
the pairwise comparisons (``comparison.parquet``, when written), every run of each model (the history),
three plots and one row per task with each model's outcome linked to its detail file. Everything is
inline (CSS, PNGs as data: URIs, no script); a Content-Security-Policy forbids the page any request.
Links to detail files are relative to where the report is written, so the report works from a copy of
the whole results directory.
"""

from __future__ import annotations

import base64
import html
import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from agentcompass_dagster.errors import UserError

if TYPE_CHECKING:
    import pandas as pd

COMPARISON_FILE = "comparison.parquet"
REPORT_FILE = "report.html"
COMPARISON_COLUMNS = ["sweep", "benchmark", "model_a", "model_b", "n", "accuracy_a", "accuracy_b", "diff",
                      "ci_low", "ci_high", "only_a", "only_b", "p_value", "test", "verdict"]
# base64 of the embedded PNGs is broken into lines this long: a browser drops the newlines of a data:
# URL, and no secret-shaped pattern of the redaction that every write applies fits in so few characters.
B64_LINE = 32

CSS = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 0;
       color: #1d1f23; background: #f6f7f9; line-height: 1.4; }
header { background: #1f3a5f; color: #fff; padding: 18px 28px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 0; opacity: .85; font-size: 13px; }
main { padding: 8px 28px 40px; max-width: 1400px; }
nav ul { padding-left: 18px; margin: 6px 0; }
section.benchmark { background: #fff; border: 1px solid #dde1e6; border-radius: 6px; padding: 4px 20px 18px;
                    margin: 22px 0; }
h2 { font-size: 19px; border-bottom: 2px solid #1f3a5f; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 20px 0 6px; }
table { border-collapse: collapse; font-size: 13px; margin: 4px 0 8px; }
th, td { border: 1px solid #d0d5db; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #eef1f4; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.ok { background: #e3f4e6; } td.bad { background: #fbe5e3; } td.part { background: #fff8d6; }
td.err { background: #ffe0b2; }
td.none { color: #999; }
tr.disagree td:first-child { box-shadow: inset 4px 0 0 #e0a100; }
.verdict-better { font-weight: 600; color: #1b6e2a; } .verdict-none { color: #555; }
.note { color: #555; font-size: 12px; margin: 2px 0 8px; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 380px), 1fr)); gap: 12px;
         align-items: start; }
@media (min-width: 900px) { .plots figure.wide { grid-column: span 2; } }
.plots figure { margin: 0; } .plots img { width: 100%; height: auto; border: 1px solid #dde1e6; }
.plots figcaption { font-size: 12px; color: #555; }
details summary { cursor: pointer; font-weight: 600; margin: 16px 0 6px; }
a { color: #1f5fa8; }
"""

# Plots wider than this (many models or categories) take two columns of the plot grid.
WIDE_PLOT = 640

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


@dataclass
class _Benchmark:
    sweep: str
    benchmark: str
    metrics: pd.DataFrame
    tasks: pd.DataFrame
    comparisons: pd.DataFrame
    history: pd.DataFrame
    models: list[str] = field(default_factory=list)


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _missing(value: Any) -> bool:
    """None, NaN, pd.NA, NaT or an infinite number."""
    import pandas as pd

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return not math.isfinite(value)
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # array-likes: not a scalar value
        return False


def _num(value: Any, digits: int = 3) -> str:
    if _missing(value):
        return "—"
    return f"{float(value):.{digits}f}"


def _int(value: Any) -> str:
    return "—" if _missing(value) else str(int(value))


def _interval(low: Any, high: Any, digits: int = 3) -> str:
    if _missing(low) or _missing(high):
        return "—"
    return f"[{float(low):.{digits}f}, {float(high):.{digits}f}]"


def _p_value(value: Any) -> str:
    if _missing(value):
        return "—"
    value = float(value)
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


# ---------------------------------------------------------------------------------------------- data


def _load_comparisons(results_dir: Path) -> pd.DataFrame:
    from agentcompass_dagster.results import load_comparisons

    frame = load_comparisons(results_dir)
    frame = frame.reindex(columns=list(dict.fromkeys([*COMPARISON_COLUMNS, *frame.columns])))
    for column in ("sweep", "benchmark", "model_a", "model_b"):
        frame[column] = frame[column].astype("object")
    return frame.drop_duplicates(subset=["sweep", "benchmark", "model_a", "model_b"], keep="last")


def _run_dirs(benchmarks: list[_Benchmark]) -> dict[tuple[str, str, str, str], Path]:
    """(sweep, benchmark, model, run_id) -> run directory, from each run's line of the history."""
    return {(b.sweep, b.benchmark, str(run.model), str(run.run_id)): Path(run.run_dir)
            for b in benchmarks for run in b.history.itertuples()}


def _detail_file(run_dir: Path, task_id: str, category: Any, error: bool) -> Path | None:
    """The task's detail file in its run directory (normal first unless the task ended in error)."""
    from agentcompass_dagster.runtime.layout import DETAILS, ERROR_PREFIX, detail_names

    names = detail_names(task_id, None if _missing(category) else str(category))
    prefixes = ("", ERROR_PREFIX) if not error else (ERROR_PREFIX, "")
    for prefix in prefixes:
        for name in names:
            path = run_dir / DETAILS / f"{prefix}{name}"
            if path.is_file():
                return path
    return None


def _href(path: Path, base: Path) -> str:
    relative = os.path.relpath(path.resolve(), base.resolve())
    return quote(Path(relative).as_posix(), safe="/")


def _benchmarks(results_dir: Path) -> list[_Benchmark]:
    from agentcompass_dagster.results import load_history, load_metrics, load_task_results

    metrics = load_metrics(results_dir, latest=True)
    if metrics.empty:
        raise UserError(f"{results_dir}: no run results found (no metrics.parquet beside a run_info.json); "
                        "run a sweep first")
    tasks = load_task_results(results_dir, latest=True)
    comparisons = _load_comparisons(results_dir)
    history = load_history(results_dir)
    out = []
    for (sweep, benchmark), group in metrics.groupby(["sweep", "benchmark"], sort=True):
        task_rows = tasks[(tasks["sweep"] == sweep) & (tasks["benchmark"] == benchmark)] if not tasks.empty else tasks
        pairs = comparisons[(comparisons["sweep"] == sweep) & (comparisons["benchmark"] == benchmark)]
        models = sorted(dict.fromkeys(group["model"].astype(str)))
        runs = history[(history["sweep"] == sweep) & (history["benchmark"] == benchmark)]
        out.append(_Benchmark(str(sweep), str(benchmark), group.reset_index(drop=True),
                              task_rows.reset_index(drop=True), pairs.reset_index(drop=True), runs, models))
    return out


# ------------------------------------------------------------------------------------------- sections


def _table(headers: list[str], rows: list[str], cls: str = "") -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    klass = f' class="{cls}"' if cls else ""
    return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _summary_link(run_dir: Path | None, run_id: str, base: Path) -> str:
    """The run id, linked to the run's summary.md where there is one."""
    if run_dir is None or not (run_dir / "summary.md").is_file():
        return _esc(run_id)
    return f'<a href="{_esc(_href(run_dir / "summary.md", base))}">{_esc(run_id)}</a>'


def _models_table(b: _Benchmark, run_dirs: dict[tuple[str, str, str, str], Path], base: Path) -> str:
    rows = []
    for model in b.models:
        mrows = b.metrics[b.metrics["model"] == model]
        accuracy = mrows[mrows["metric"] == "accuracy"]
        first = (accuracy if not accuracy.empty else mrows).iloc[0]
        run_id = str(first["run_id"])
        run_cell = _summary_link(run_dirs.get((b.sweep, b.benchmark, model, run_id)), run_id, base)
        t = b.tasks[b.tasks["model"] == model] if not b.tasks.empty else b.tasks
        tokens_in = int(t["input_tokens"].fillna(0).sum()) if not t.empty else None
        tokens_out = int(t["output_tokens"].fillna(0).sum()) if not t.empty else None
        cost = t["cost_usd"].sum(min_count=1) if not t.empty else None
        duration = t["duration_s"].sum(min_count=1) if not t.empty else None
        reused = int(t["reused"].fillna(False).astype(bool).sum()) if not t.empty else None
        rows.append(
            f"<tr><td>{_esc(model)}</td><td>{_esc(first.get('harness'))}</td><td>{run_cell}</td>"
            f"<td class=num>{_int(first.get('n'))}</td><td class=num>{_int(first.get('total'))}</td>"
            f"<td class=num>{_int(first.get('errors'))}</td><td class=num>{_int(tokens_in)}</td>"
            f"<td class=num>{_int(tokens_out)}</td><td class=num>{_num(cost, 4)}</td>"
            f"<td class=num>{_num(duration, 1)}</td><td class=num>{_int(reused)}</td></tr>"
        )
    return _table(["model", "harness", "run (summary)", "evaluated", "selected", "errors", "input tokens",
                   "output tokens", "cost (USD)", "task time (s)", "reused rows"], rows)


def _metric_order(names: list[str]) -> list[str]:
    def key(name: str) -> tuple[int, str]:
        if name == "accuracy":
            return 0, ""
        if name.startswith("pass@"):
            suffix = name[5:]
            return 1, suffix.zfill(6) if suffix.isdigit() else suffix
        if name.startswith("accuracy/"):
            return 2, name
        return 3, name

    return sorted(names, key=key)


def _metrics_table(b: _Benchmark) -> str:
    names = _metric_order(list(dict.fromkeys(b.metrics["metric"].astype(str))))
    by_key = {(str(r["model"]), str(r["metric"])): r for _, r in b.metrics.iterrows()}
    rows = []
    for name in names:
        cells = []
        for model in b.models:
            r = by_key.get((model, name))
            if r is None:
                cells.append("<td class=none>—</td><td class=none></td>")
                continue
            cells.append(f"<td class=num>{_num(r['value'])}</td>"
                         f"<td class=num>{_interval(r['ci_low'], r['ci_high'])}"
                         f"{'' if _missing(r['stderr']) else ' ± ' + _num(r['stderr'])}</td>")
        rows.append(f"<tr><td>{_esc(name)}</td>{''.join(cells)}</tr>")
    headers = ["metric"]
    for model in b.models:
        headers += [model, f"{model}: 95% CI ± s.e."]
    return _table(headers, rows)


def _comparisons_table(b: _Benchmark) -> str:
    if b.comparisons.empty:
        if len(b.models) < 2:
            return '<p class="note">One model: nothing to compare.</p>'
        return (f'<p class="note">No {_esc(COMPARISON_FILE)} for this benchmark yet (it is written by the '
                "Dagster metrics step).</p>")
    rows = []
    for _, r in b.comparisons.iterrows():
        verdict = "" if _missing(r["verdict"]) else str(r["verdict"])
        klass = "verdict-better" if verdict.endswith(" better") else "verdict-none"
        test = "" if _missing(r["test"]) else f" ({_esc(r['test'])})"
        rows.append(
            f"<tr><td>{_esc(r['model_a'])}</td><td>{_esc(r['model_b'])}</td><td class=num>{_int(r['n'])}</td>"
            f"<td class=num>{_num(r['accuracy_a'])}</td><td class=num>{_num(r['accuracy_b'])}</td>"
            f"<td class=num>{_num(r['diff'])}</td><td class=num>{_interval(r['ci_low'], r['ci_high'])}</td>"
            f"<td class=num>{_int(r['only_a'])}</td><td class=num>{_int(r['only_b'])}</td>"
            f"<td class=num>{_esc(_p_value(r['p_value']))}{test}</td>"
            f"<td class=\"{klass}\">{_esc(verdict)}</td></tr>"
        )
    return _table(["model a", "model b", "tasks (both)", "accuracy a", "accuracy b", "diff (a − b)",
                   "95% CI of diff", "a higher", "b higher", "p (test)", "verdict"], rows,
                  "comparisons")


def _history_tables(b: _Benchmark, base: Path) -> str:
    """One table per model, its runs oldest first: the lines of `agentcompass history`."""
    from agentcompass_dagster.history import COLUMNS, cells

    columns = [c for c in COLUMNS if c not in ("benchmark", "model")]
    tables = []
    for model, runs in b.history.groupby("model", sort=True):
        rows = []
        for _, run in runs.iterrows():
            text = {column: _esc(value) for column, value in cells(run).items()}
            text["run"] = _summary_link(Path(run["run_dir"]), str(run["run_id"]), base)
            rows.append("<tr>" + "".join(f"<td>{text[column]}</td>" for column in columns) + "</tr>")
        tables.append(f"<h4>{_esc(model)}</h4>{_table(columns, rows, 'history')}")
    return "".join(tables)


def _data_uri(png: bytes) -> str:
    encoded = base64.b64encode(png).decode("ascii")
    lines = "\n".join(encoded[i:i + B64_LINE] for i in range(0, len(encoded), B64_LINE))
    return f"data:image/png;base64,{lines}"


def _plots(b: _Benchmark) -> str:
    from agentcompass_dagster import plots

    figures = [
        ("accuracy", "Accuracy per model with its 95% bootstrap interval.", plots.accuracy_with_ci(b.metrics)),
        ("categories", "Accuracy per category (models × categories).", plots.category_heatmap(b.metrics)),
        ("cost", "Accuracy against what each model spent (cost, else tokens, else time).",
         plots.cost_vs_accuracy(b.metrics, b.tasks)),
    ]
    parts = []
    for name, caption, plot in figures:
        # Shown at most at its own size (a one-model chart stays small); a wide one spans two columns.
        wide = ' class="wide"' if plot.width > WIDE_PLOT else ""
        parts.append(
            f'<figure{wide}><img class="plot" data-plot="{name}" width="{plot.width}" height="{plot.height}" '
            f'style="max-width: min(100%, {plot.width}px)" alt="{_esc(caption)}" src="{_data_uri(plot.png)}">'
            f'<figcaption>{_esc(caption)}</figcaption></figure>'
        )
    return f'<div class="plots">{"".join(parts)}</div>'


def _task_cell(rows: pd.DataFrame, run_dir: Path | None, base: Path) -> str:
    """One model's outcome of one task: correct / wrong / error (k=1) or c/k correct, linked to its detail."""
    if rows.empty:
        return "<td class=none>—</td>"
    first = rows.iloc[0]
    failed = rows["error"].notna()
    errors = [str(e) for e in rows.loc[failed, "error"]]
    attempts = rows[rows["attempt"] > 0]
    correct = int(attempts["correct"].fillna(False).astype(bool).sum())
    tried = len(attempts)
    task_error = bool(failed.all())
    if task_error:
        text, klass = "✗ error", "err"
    elif tried == 1:
        text, klass = ("✓ correct", "ok") if correct else ("✗ wrong", "bad")
    else:
        text = f"{correct}/{tried} correct" + (f" ({len(errors)} error)" if errors else "")
        klass = "ok" if correct == tried else ("bad" if correct == 0 else "part")
    title = f' title="{_esc(errors[-1])}"' if errors else ""
    body = _esc(text)
    if run_dir is not None:
        path = _detail_file(run_dir, str(first["task_id"]), first["category"], error=task_error)
        if path is not None:
            body = f'<a href="{_esc(_href(path, base))}">{body}</a>'
    return f'<td class="{klass}"{title}>{body}</td>'


def _tasks_table(b: _Benchmark, run_dirs: dict[tuple[str, str, str, str], Path], base: Path) -> str:
    if b.tasks.empty:
        return '<p class="note">No task results recorded.</p>'
    tasks = b.tasks.assign(_cat=b.tasks["category"].astype("object").where(b.tasks["category"].notna(), ""))
    order = tasks[["task_id", "_cat"]].drop_duplicates("task_id").sort_values(["_cat", "task_id"], kind="stable")
    run_of = {str(r["model"]): run_dirs.get((b.sweep, b.benchmark, str(r["model"]), str(r["run_id"])))
              for _, r in b.metrics.drop_duplicates("model").iterrows()}
    grouped = {key: group for key, group in tasks.groupby(["task_id", "model"], sort=False)}
    rows, disagreements = [], 0
    empty = tasks.iloc[0:0]
    for _, t in order.iterrows():
        cells, outcomes = [], set()
        for model in b.models:
            group = grouped.get((t["task_id"], model), empty)
            cells.append(_task_cell(group, run_of.get(model), base))
            if not group.empty:
                outcomes.add(round(float(group["correct"].fillna(False).astype(bool).mean()), 6))
        disagree = len(outcomes) > 1
        disagreements += disagree
        klass = ' class="disagree"' if disagree else ""
        rows.append(f"<tr{klass}><td>{_esc(t['task_id'])}</td><td>{_esc(t['_cat'])}</td>{''.join(cells)}</tr>")
    note = (f'<p class="note">{len(rows)} tasks; {disagreements} where the models disagree (marked at the left). '
            "Each outcome links to the task's detail file.</p>") if len(b.models) > 1 else (
            f'<p class="note">{len(rows)} tasks. Each outcome links to the task\'s detail file.</p>')
    table = _table(["task", "category", *b.models], rows, "tasks")
    return f"<details open><summary>Per-task results</summary>{note}{table}</details>"


def _section(index: int, b: _Benchmark, run_dirs: dict[tuple[str, str, str, str], Path], base: Path) -> str:
    return (
        f'<section class="benchmark" id="b{index}">'
        f"<h2>{_esc(b.sweep)} · {_esc(b.benchmark)}</h2>"
        f"<p class=\"note\">{len(b.models)} model(s): {_esc(', '.join(b.models))}. The newest run of each.</p>"
        f"<h3>Models</h3>{_models_table(b, run_dirs, base)}"
        f"<h3>Metrics</h3>"
        '<p class="note">Value, then its 95% bootstrap interval over tasks and standard error (— where the run '
        "recorded none). Counts are over evaluated tasks; error_rate over selected tasks.</p>"
        f"{_metrics_table(b)}"
        f"<h3>Comparisons</h3>"
        '<p class="note">Paired over the tasks both models finished, on each task\'s score (the mean of its '
        "attempts): the accuracy difference with a paired bootstrap 95% interval and a paired test — the exact "
        "McNemar test on the tasks only one model solved when every score is 0 or 1, else the sign-flip "
        "permutation test; a model is called better only when both agree. \"a higher\": tasks a scored "
        "higher on.</p>"
        f"{_comparisons_table(b)}"
        f"<h3>History</h3>"
        '<p class="note">Every run of each model, oldest first: accuracy with its 95% interval, cost (n/a when '
        "any attempt's cost is unknown) and the regression check's verdict against the run before.</p>"
        f"{_history_tables(b, base)}"
        f"<h3>Plots</h3>{_plots(b)}"
        f"{_tasks_table(b, run_dirs, base)}"
        "</section>"
    )


def build_report(results_dir: str | Path, link_base: str | Path | None = None) -> str:
    """The HTML report of ``results_dir`` as one string. Links to run files are relative to
    ``link_base`` (the directory the report will be in; default: ``results_dir``). Raises UserError when
    the directory is missing or holds no run results."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise UserError(f"{results_dir}: no such results directory")
    base = Path(link_base) if link_base is not None else results_dir
    benchmarks = _benchmarks(results_dir)
    run_dirs = _run_dirs(benchmarks)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    toc = "".join(f'<li><a href="#b{i}">{_esc(b.sweep)} · {_esc(b.benchmark)}</a> '
                  f"({len(b.models)} model(s))</li>" for i, b in enumerate(benchmarks))
    sections = "".join(_section(i, b, run_dirs, base) for i, b in enumerate(benchmarks))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{_esc(CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>AgentCompass report: {_esc(results_dir.name or results_dir)}</title>"
        f"<style>{CSS}</style></head><body>"
        f"<header><h1>AgentCompass report</h1><p>{_esc(results_dir.resolve())} · generated {_esc(generated)} · "
        f"{len(benchmarks)} sweep × benchmark section(s)</p></header>"
        f"<main><nav><h3>Contents</h3><ul>{toc}</ul></nav>{sections}</main></body></html>\n"
    )


def write_report(results_dir: str | Path, out_path: str | Path | None = None) -> Path:
    """Write the report atomically (default ``results_dir/report.html``); returns its path."""
    from agentcompass_dagster.runtime.atomic import atomic_write_text

    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise UserError(f"{results_dir}: no such results directory")
    out = Path(out_path) if out_path is not None else results_dir / REPORT_FILE
    if not out.parent.is_dir():
        raise UserError(f"{out}: the directory {out.parent} does not exist")
    atomic_write_text(out, build_report(results_dir, link_base=out.parent))
    return out
