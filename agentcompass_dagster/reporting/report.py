"""One self-contained HTML report of a results directory.

    from agentcompass_dagster.reporting.report import build_report, write_report
    html = build_report("results")                 # links relative to results/, outcomes to detail files
    write_report("results", "results/report.html")  # and the trajectory pages beside it, linked

Per sweep x benchmark it shows the models (newest run of each), every metric with its 95% interval,
the pairwise comparisons (``comparison.parquet``, when written), every run of each model (the history),
three plots (or why one has nothing to draw), the diagnosis of each model's run (diagnosis.py: how its
attempts ended, each error's text, the analyzers' flags, usage per task, the slowest attempts) and one
row per task with each model's outcome linked to its attempt's trajectory page (write_report writes them
beside the report; build_report links the pages it is given, else the detail file). Everything is
inline (CSS, PNGs as data: URIs, no script); a Content-Security-Policy forbids the page any request.
Links to run files are relative to where the report is written, so the report works from a copy of the
whole results directory.

This module prepares the data (report_data.py loads it); the HTML is in the Jinja2 templates of
``agentcompass_dagster/templates`` (report.html.j2 and its partials), autoescaped.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentcompass_dagster.reporting.diagnosis import OUTCOMES, Diagnosis, diagnose, share
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.reporting.plots import NoPlot, Plot
from agentcompass_dagster.reporting.report_data import (
    BenchmarkResults,
    Pages,
    RunDirs,
    RunPages,
    count_text,
    interval,
    load_benchmarks,
    missing,
    newest_run_dirs,
    num,
    outcome_href,
    p_value,
    run_dirs,
    summary_href,
)
from agentcompass_dagster.runtime.store.layout import COMPARISON_FILE, REPORT_FILE, TASK_RESULTS_FILE

if TYPE_CHECKING:
    import jinja2

MAX_TASK_ROWS = 2_000
# base64 of the embedded PNGs is broken into lines this long: a browser drops the newlines of a data:
# URL, and no secret-shaped pattern of the redaction that every write applies fits in so few characters.
B64_LINE = 32
# Plots wider than this (many models or categories) take two columns of the plot grid.
WIDE_PLOT = 640
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


@cache
def _environment() -> jinja2.Environment:
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("agentcompass_dagster", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(num=num, count=count_text, interval=interval, p_value=p_value, share=share)
    environment.tests["missing"] = missing
    return environment


@dataclass(frozen=True)
class Figure:
    name: str
    caption: str
    plot: Plot | NoPlot

    @property
    def drawn(self) -> bool:
        return isinstance(self.plot, Plot)

    @property
    def wide(self) -> bool:
        return isinstance(self.plot, Plot) and self.plot.width > WIDE_PLOT

    @property
    def src(self) -> str:
        assert isinstance(self.plot, Plot)
        encoded = base64.b64encode(self.plot.png).decode("ascii")
        lines = "\n".join(encoded[i : i + B64_LINE] for i in range(0, len(encoded), B64_LINE))
        return f"data:image/png;base64,{lines}"


@dataclass(frozen=True)
class TaskCell:
    """One model's outcome of one task; ``why``: the error or failure text, else the limit an attempt hit,
    shown under the outcome; ``hacking``: the reward-hacking patterns found in its attempts."""

    text: str
    klass: str
    href: str | None = None
    why: str = ""
    hacking: str = ""


@dataclass(frozen=True)
class TaskRow:
    task_id: str
    category: str
    cells: list[TaskCell]
    disagree: bool


@dataclass(frozen=True)
class Section:
    index: int
    b: BenchmarkResults
    models: list[dict[str, Any]]
    metrics: list[tuple[str, list[Any]]]
    history: dict[str, list[dict[str, Any]]]
    figures: list[Figure]
    diagnoses: list[Diagnosis]
    tasks: list[TaskRow]
    task_count: int


def _models(b: BenchmarkResults, dirs: RunDirs, base: Path) -> list[dict[str, Any]]:
    rows = []
    for model in b.models:
        mrows = b.metrics[b.metrics["model"] == model]
        accuracy = mrows[mrows["metric"] == "accuracy"]
        first = (accuracy if not accuracy.empty else mrows).iloc[0]
        run_id = str(first["run_id"])
        t = b.model_tasks(model)
        rows.append(
            {
                "model": model,
                "harness": first.get("harness"),
                "run_id": run_id,
                "run_href": summary_href(dirs.get((b.sweep, b.benchmark, model, run_id)), base),
                "n": first.get("n"),
                "total": first.get("total"),
                "errors": first.get("errors"),
                "tokens_in": int(t["input_tokens"].fillna(0).sum()) if not t.empty else None,
                "tokens_out": int(t["output_tokens"].fillna(0).sum()) if not t.empty else None,
                "cost": t["cost_usd"].sum(min_count=1) if not t.empty else None,
                "duration": t["duration_s"].sum(min_count=1) if not t.empty else None,
                "reused": int(t["reused"].fillna(False).astype(bool).sum()) if not t.empty else None,
            }
        )
    return rows


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


def _metrics(b: BenchmarkResults) -> list[tuple[str, list[Any]]]:
    """Each metric with each model's row (None where the model has no such metric)."""
    names = _metric_order(list(dict.fromkeys(b.metrics["metric"].astype(str))))
    by_key = {(str(r["model"]), str(r["metric"])): r for _, r in b.metrics.iterrows()}
    return [(name, [by_key.get((model, name)) for model in b.models]) for name in names]


def _history(b: BenchmarkResults, base: Path) -> dict[str, list[dict[str, Any]]]:
    """Per model its runs oldest first: the lines of `agentcompass history`, the run linked to its summary."""
    from agentcompass_dagster.reporting.history import cells

    return {
        str(model): [{**cells(run), "run_href": summary_href(Path(run["run_dir"]), base)} for _, run in runs.iterrows()]
        for model, runs in b.history.groupby("model", sort=True)
    }


def _figures(b: BenchmarkResults) -> list[Figure]:
    from agentcompass_dagster.reporting import plots

    return [
        Figure("accuracy", "Accuracy per model with its 95% bootstrap interval.", plots.accuracy_with_ci(b.metrics)),
        Figure("categories", "Accuracy per category (models × categories).", plots.category_heatmap(b.metrics)),
        Figure(
            "cost",
            "Accuracy against what each model spent (cost, else tokens, else time).",
            plots.cost_vs_accuracy(b.metrics, b.tasks),
        ),
    ]


def _task_cell(rows: list[dict[str, Any]], run_dir: Path | None, base: Path, pages: RunPages) -> TaskCell:
    """One model's outcome of one task: correct / wrong / failed (by the agent) / error (k=1) or c/k
    correct, linked to where the task's outcome is shown, with the last error or failure text (else the
    limit an attempt hit) and the reward-hacking patterns found. Rows are plain records: per-row pandas
    selections cost ~4 ms a cell, minutes for a sweep of 10,000 tasks."""
    if not rows:
        return TaskCell("—", "none")
    errors = [str(row["error"]) for row in rows if not missing(row["error"])]
    failures = [str(row["failure"]) for row in rows if not missing(row["failure"])]
    limits = [str(row["limit"]) for row in rows if not missing(row["limit"])]
    # Of the analyzers' flags, the one that changes what a "correct" means is shown beside it (an attempt
    # without a finding has no patterns: ""); the others are in the diagnosis.
    hacking = sorted(
        {p for row in rows if not missing(row["reward_hacking"]) for p in str(row["reward_hacking"]).split(",") if p}
    )
    attempts = [row for row in rows if row["attempt"] > 0]
    correct = sum(_correct(row) for row in attempts)
    tried = len(attempts)
    task_error = len(errors) == len(rows)
    if task_error:
        text, klass = "✗ error", "err"
    elif tried == 1:
        text, klass = ("✓ correct", "ok") if correct else ("✗ failed" if failures else "✗ wrong", "bad")
    else:
        text = f"{correct}/{tried} correct" + (f" ({len(errors)} error)" if errors else "")
        klass = "ok" if correct == tried else ("bad" if correct == 0 else "part")
    # The last attempt stands for the task (its detail file holds them all).
    first = rows[0]
    href = outcome_href(
        run_dir,
        str(first["task_id"]),
        first["category"],
        task_error,
        max(int(row["attempt"]) for row in rows),
        base,
        pages,
    )
    return TaskCell(text, klass, href, (errors or failures or limits or [""])[-1], ",".join(hacking))


def _correct(row: dict[str, Any]) -> bool:
    return not missing(row.get("correct")) and bool(row["correct"])


def _tasks(b: BenchmarkResults, runs: dict[str, Path | None], base: Path, pages: Pages) -> tuple[list[TaskRow], int]:
    """The per-task table's rows and the number of tasks: at most MAX_TASK_ROWS rows (a table of 100,000
    is 15 MB no browser shows usefully), those not every model solved in every attempt first."""
    if b.tasks.empty:
        return [], 0
    tasks = b.tasks.assign(_cat=b.tasks["category"].astype("object").where(b.tasks["category"].notna(), ""))
    order = tasks[["task_id", "_cat"]].drop_duplicates("task_id").sort_values(["_cat", "task_id"], kind="stable")
    grouped: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for row in tasks.to_dict("records"):
        grouped.setdefault((row["task_id"], row["model"]), []).append(row)
    listed = list(zip(order["task_id"], order["_cat"]))
    if len(listed) > MAX_TASK_ROWS:
        solved = {
            task_id
            for task_id, _ in listed
            if all(_correct(row) for model in b.models for row in grouped.get((task_id, model), [{}]))
        }
        first = [task_id for task_id, _ in listed if task_id not in solved][:MAX_TASK_ROWS]
        kept = {*first, *[task_id for task_id, _ in listed if task_id in solved][: MAX_TASK_ROWS - len(first)]}
        listed = [item for item in listed if item[0] in kept]
    rows = []
    for task_id, category in listed:
        cells, outcomes = [], set()
        for model in b.models:
            group = grouped.get((task_id, model), [])
            run_dir = runs.get(model)
            cells.append(_task_cell(group, run_dir, base, _run_pages(pages, run_dir)))
            if group:
                outcomes.add(round(sum(map(_correct, group)) / len(group), 6))
        rows.append(TaskRow(str(task_id), str(category), cells, len(outcomes) > 1))
    return rows, len(order)


def _run_pages(pages: Pages, run_dir: Path | None) -> RunPages:
    return pages.get(run_dir, {}) if run_dir is not None else {}


def _section(index: int, b: BenchmarkResults, dirs: RunDirs, base: Path, pages: Pages) -> Section:
    runs = newest_run_dirs(b, dirs)
    diagnoses = [diagnose(b, model, runs.get(model), base, _run_pages(pages, runs.get(model))) for model in b.models]
    return Section(
        index,
        b,
        _models(b, dirs, base),
        _metrics(b),
        _history(b, base),
        _figures(b),
        diagnoses,
        *_tasks(b, runs, base, pages),
    )


def _results_dir(results_dir: str | Path) -> Path:
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise UserError(f"{results_dir}: no such results directory")
    return results_dir


def _render(results_dir: Path, benchmarks: list[BenchmarkResults], base: Path, pages: Pages) -> str:
    from agentcompass_dagster.reporting.history import COLUMNS as HISTORY_COLUMNS

    dirs = run_dirs(benchmarks)
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            csp=CSP,
            title=results_dir.name or str(results_dir),
            results_dir=str(results_dir.resolve()),
            generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            sections=[_section(i, b, dirs, base, pages) for i, b in enumerate(benchmarks)],
            comparison_file=COMPARISON_FILE,
            task_results_file=TASK_RESULTS_FILE,
            outcomes=OUTCOMES,
            history_columns=[c for c in HISTORY_COLUMNS if c not in ("benchmark", "model")],
        )
    )


def build_report(results_dir: str | Path, link_base: str | Path | None = None, pages: Pages | None = None) -> str:
    """The HTML report of ``results_dir`` as one string; it writes nothing. Links to run files are
    relative to ``link_base`` (the directory the report will be in; default: ``results_dir``). An
    attempt's outcome links to its trajectory page where ``pages`` (run directory -> what
    trajectory.write_trajectory_pages returned for it) has one, else to its task's detail file. Raises
    UserError when the directory is missing or holds no run results."""
    results_dir = _results_dir(results_dir)
    base = Path(link_base) if link_base is not None else results_dir
    return _render(results_dir, load_benchmarks(results_dir), base, pages or {})


def write_report(results_dir: str | Path, out_path: str | Path | None = None) -> Path:
    """Write the report atomically (default ``results_dir/report.html``) and, beside it, the trajectory
    page of every attempt of the runs it shows (a page already newer than what it is made from is kept:
    see write_trajectory_pages), which its outcomes link to; returns the report's path."""
    from agentcompass_dagster.runtime.store.atomic import atomic_write_text
    from agentcompass_dagster.reporting.trajectory import write_trajectory_pages

    results_dir = _results_dir(results_dir)
    out = Path(out_path) if out_path is not None else results_dir / REPORT_FILE
    if not out.parent.is_dir():
        raise UserError(f"{out}: the directory {out.parent} does not exist")
    benchmarks = load_benchmarks(results_dir)
    dirs = run_dirs(benchmarks)
    # The results are loaded once, for the pages and the report: the pages are those of the runs it shows.
    shown = {run_dir for b in benchmarks for run_dir in newest_run_dirs(b, dirs).values() if run_dir is not None}
    pages = {run_dir: write_trajectory_pages(run_dir, out.parent, out) for run_dir in sorted(shown)}
    atomic_write_text(out, _render(results_dir, benchmarks, out.parent, pages))
    return out
