"""What the HTML report (report.py) is made of: each sweep x benchmark's frames, the links from the report
to a run's files, and how a number is written. Kept apart from the rendering so that the diagnosis
(diagnosis.py) and the report's tables share one loader and one link target per outcome."""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from agentcompass_dagster.declarations.contestants import by_contestant
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.runtime.store.layout import SUMMARY

if TYPE_CHECKING:
    import pandas as pd

COMPARISON_COLUMNS = [
    "sweep",
    "benchmark",
    "model_a",
    "model_b",
    "n",
    "accuracy_a",
    "accuracy_b",
    "diff",
    "ci_low",
    "ci_high",
    "only_a",
    "only_b",
    "p_value",
    "test",
    "verdict",
]

RunDirs = dict[tuple[str, str, str, str], Path]
# The trajectory pages of one run, by (task, attempt) (trajectory.write_trajectory_pages), and of each
# run directory the report shows.
RunPages = Mapping[tuple[str, int], Path]
Pages = Mapping[Path, RunPages]


@dataclass
class BenchmarkResults:
    """One sweep x benchmark: the newest run of each model (metrics, tasks), comparisons and history."""

    sweep: str
    benchmark: str
    metrics: pd.DataFrame
    tasks: pd.DataFrame
    comparisons: pd.DataFrame
    history: pd.DataFrame
    models: list[str] = field(default_factory=list)

    def model_tasks(self, model: str) -> pd.DataFrame:
        return self.tasks[self.tasks["model"] == model] if not self.tasks.empty else self.tasks


# ------------------------------------------------------------------------------------------- numbers


def missing(value: Any) -> bool:
    """None, NaN, pd.NA, NaT or an infinite number."""
    import pandas as pd

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return not math.isfinite(value)
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # array-likes: not a scalar value
        return False


def num(value: Any, digits: int = 3) -> str:
    return "—" if missing(value) else f"{float(value):.{digits}f}"


def count_text(value: Any) -> str:
    return "—" if missing(value) else str(int(value))


def interval(low: Any, high: Any, digits: int = 3) -> str:
    if missing(low) or missing(high):
        return "—"
    return f"[{float(low):.{digits}f}, {float(high):.{digits}f}]"


def p_value(value: Any) -> str:
    if missing(value):
        return "—"
    value = float(value)
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


# ------------------------------------------------------------------------------------------------ links


def href(path: Path, base: Path) -> str:
    """``path`` relative to the report's directory, so that a copy of the results directory keeps working."""
    relative = os.path.relpath(_resolved(path.parent) / path.name, _resolved(base))
    return quote(Path(relative).as_posix(), safe="/")


@functools.lru_cache(maxsize=256)
def _resolved(directory: Path) -> Path:
    # Once per directory, not once per link: a report links each of thousands of tasks.
    return directory.resolve()


def detail_file(run_dir: Path, task_id: str, category: Any, error: bool) -> Path | None:
    """The task's detail file in its run directory (normal first unless the task ended in error)."""
    from agentcompass_dagster.runtime.store.layout import DETAILS, ERROR_PREFIX, detail_names

    names = detail_names(task_id, None if missing(category) else str(category))
    prefixes = ("", ERROR_PREFIX) if not error else (ERROR_PREFIX, "")
    for prefix in prefixes:
        for name in names:
            path = run_dir / DETAILS / f"{prefix}{name}"
            if path.is_file():
                return path
    return None


def outcome_href(
    run_dir: Path | None, task_id: str, category: Any, task_error: bool, attempt: int, base: Path, pages: RunPages
) -> str | None:
    """Where the report links an attempt's outcome: its trajectory page when one was written for the
    report (``pages``: the run's, by task and attempt), else (attempt 0: a task that ended before any
    attempt; a report built without pages) the task's detail file, which holds every attempt."""
    if run_dir is None:
        return None
    page = pages.get((task_id, attempt))
    if page is not None:
        return href(page, base)
    path = detail_file(run_dir, task_id, category, error=task_error)
    return None if path is None else href(path, base)


def summary_href(run_dir: Path | None, base: Path) -> str | None:
    """The run's summary.md, where there is one."""
    if run_dir is None or not (run_dir / SUMMARY).is_file():
        return None
    return href(run_dir / SUMMARY, base)


# ------------------------------------------------------------------------------------------------- load


def _load_comparisons(results_dir: Path) -> pd.DataFrame:
    from agentcompass_dagster.reporting.results import load_comparisons

    frame = load_comparisons(results_dir)
    frame = frame.reindex(columns=list(dict.fromkeys([*COMPARISON_COLUMNS, *frame.columns])))
    for column in ("sweep", "benchmark", "model_a", "model_b"):
        frame[column] = frame[column].astype("object")
    return frame.drop_duplicates(subset=["sweep", "benchmark", "model_a", "model_b"], keep="last")


def run_dirs(benchmarks: list[BenchmarkResults]) -> RunDirs:
    """(sweep, benchmark, model, run_id) -> run directory, from each run's line of the history."""
    return {
        (b.sweep, b.benchmark, str(run.model), str(run.run_id)): Path(run.run_dir)
        for b in benchmarks
        for run in b.history.itertuples()
    }


def newest_run_dirs(b: BenchmarkResults, dirs: RunDirs) -> dict[str, Path | None]:
    """model -> the directory of its newest run (the one the report shows)."""
    return {
        str(r["model"]): dirs.get((b.sweep, b.benchmark, str(r["model"]), str(r["run_id"])))
        for _, r in b.metrics.drop_duplicates("model").iterrows()
    }


def load_benchmarks(results_dir: Path) -> list[BenchmarkResults]:
    from agentcompass_dagster.reporting.results import load_history, load_metrics, load_task_results

    metrics = load_metrics(results_dir, latest=True)
    if metrics.empty:
        raise UserError(
            f"{results_dir}: no run results found (no metrics.parquet beside a run_info.json); run a sweep first"
        )
    tasks = load_task_results(results_dir, latest=True)
    comparisons = _load_comparisons(results_dir)
    history = load_history(results_dir)
    out = []
    for (sweep, benchmark), group in metrics.groupby(["sweep", "benchmark"], sort=True):
        # Rows of several harnesses are contestants, named as the sweep's comparisons name them.
        several = group["harness"].nunique() > 1
        group = by_contestant(group, several)
        task_rows = tasks[(tasks["sweep"] == sweep) & (tasks["benchmark"] == benchmark)] if not tasks.empty else tasks
        task_rows = by_contestant(task_rows, several)
        pairs = comparisons[(comparisons["sweep"] == sweep) & (comparisons["benchmark"] == benchmark)]
        models = sorted(dict.fromkeys(group["model"].astype(str)))
        runs = by_contestant(history[(history["sweep"] == sweep) & (history["benchmark"] == benchmark)], several)
        out.append(
            BenchmarkResults(
                str(sweep),
                str(benchmark),
                group.reset_index(drop=True),
                task_rows.reset_index(drop=True),
                pairs.reset_index(drop=True),
                runs,
                models,
            )
        )
    return out
