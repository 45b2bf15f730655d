"""A regression verdict: a model's newest complete run of a sweep x benchmark against its previous one.

The regression check (defs/asset_checks.py) writes one into the newer run's directory; the history
(`agentcompass history`, results.load_history, the HTML report) reads it back from there, so a run's
verdict travels with the run. The same judgement compares a model with the sweep's baseline model.
A failed check becomes a RegressionAlert, one line of ``<results_dir>/<sweep>/alerts.jsonl``
(defs/alerts.py writes them, results.load_alerts reads them).

A run is complete when its run_info.json says completed, it is not a fork (a fork shares its parent's
turns: not a from-scratch sample) and its task_results.parquet holds a result for every task it
selected. A run that reused earlier results is complete like any other: its reused tasks score as they
did, so they tie with the run they came from and only what was evaluated again can move the test."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from agentcompass_dagster.runtime.store.atomic import atomic_write_json
from agentcompass_dagster.runtime.store.layout import ALERTS_FILE, RUN_INFO, TASK_RESULTS_FILE, VERDICT_FILE
from agentcompass_dagster.runtime.results.parquet import read_task_scores
from agentcompass_dagster.runtime.store.redact import redact
from agentcompass_dagster.runtime.store.run_records import ReuseSource, read_json, read_params
from agentcompass_dagster.runtime.store.safe_fs import append_beneath, read_beneath
from agentcompass_dagster.runtime.results.stats import paired_comparison

VerdictStatus = Literal["passed", "failed", "skipped"]


class RegressionVerdict(BaseModel):
    """``run_id`` is the newer run, ``baseline_run_id`` the one it was compared with (None when skipped:
    ``reason`` says why). Means are per-task scores (the mean over a task's attempts) on the ``n`` tasks
    both runs finished; ``diff`` is newer minus baseline, so a drop is negative. ``baseline_model`` is
    set when the baseline run is another model's (the sweep's alerts.baseline_model), not an earlier
    run of ``model``."""

    model_config = ConfigDict(extra="forbid")

    sweep: str
    benchmark: str
    model: str
    run_id: str
    baseline_run_id: str | None = None
    baseline_model: str | None = None
    status: VerdictStatus
    reason: str
    n: int = 0
    mean_new: float | None = None
    mean_baseline: float | None = None
    diff: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    test: str | None = None
    alpha: float
    min_drop: float
    checked_at: float


def write_verdict(run_dir: Path, verdict: RegressionVerdict) -> None:
    atomic_write_json(run_dir / VERDICT_FILE, verdict.model_dump(mode="json"))


def read_verdict(run_dir: Path) -> RegressionVerdict | None:
    """The run's verdict, or None when it has none (never checked, or a file this version cannot read)."""
    path = run_dir / VERDICT_FILE
    if not path.is_file() or path.is_symlink():
        return None
    try:
        return RegressionVerdict.model_validate_json(path.read_bytes())
    except ValueError:
        return None


class RegressionAlert(RegressionVerdict):
    """A failed check's evaluation as alerted: its verdict's figures, which check and Dagster run
    produced it, and what became of the webhook call. ``evaluation_id`` is Dagster's id of the check
    evaluation: one alert per id, however often the sensor looks."""

    check_name: str
    evaluation_id: int
    dagster_run_id: str
    alerted_at: float
    webhook: Literal["not declared", "delivered", "failed"]
    webhook_error: str | None = None


def finished_scores(scores: dict[str, float | None]) -> dict[str, float]:
    """The tasks of read_task_scores that ended without error: the ones a comparison pairs."""
    return {task: score for task, score in scores.items() if score is not None}


def complete_runs(runs_newest_first: list[ReuseSource]) -> Iterator[tuple[ReuseSource, dict[str, float]]]:
    """The complete runs among these (module docstring), newest first, each with its finished tasks'
    scores; lazily, since a check needs only the first two."""
    for run in runs_newest_first:
        path = Path(run.path)
        info, params = read_json(path / RUN_INFO), read_params(path)
        if (
            info is None
            or info.get("status") != "completed"
            or (params is not None and params.lineage is not None)
            or not (path / TASK_RESULTS_FILE).is_file()
        ):
            continue
        scores = read_task_scores(path)
        if set(info.get("selected_tasks") or []) <= set(scores):
            yield run, finished_scores(scores)


def judge(
    new: tuple[str, dict[str, float]],
    old: tuple[str, dict[str, float]] | None,
    *,
    sweep: str,
    benchmark: str,
    model: str,
    alpha: float,
    min_drop: float,
    baseline_model: str | None = None,
    missing: str = "no earlier complete run",
) -> RegressionVerdict:
    """The verdict on run ``new`` against run ``old`` (run id, task -> score each; ``old`` None: skipped,
    saying ``missing``): failed when the newer is worse on the tasks both finished, with the paired
    test's p < ``alpha`` and a drop in mean score larger than ``min_drop``."""
    verdict = RegressionVerdict(
        sweep=sweep,
        benchmark=benchmark,
        model=model,
        run_id=new[0],
        baseline_model=baseline_model,
        status="skipped",
        reason=missing,
        alpha=alpha,
        min_drop=min_drop,
        checked_at=time.time(),
    )
    if old is None:
        return verdict
    verdict.baseline_run_id = old[0]
    result = paired_comparison(new[1], old[1])
    if result is None:
        verdict.reason = "no task finished in both runs"
        return verdict
    failed = result.diff < 0 and result.p_value < alpha and -result.diff > min_drop
    figures = (
        f"{result.diff:+.4f} on {result.n} tasks ({result.only_b} worse, {result.only_a} better), "
        f"p = {result.p_value:.3g} ({result.test})"
    )
    return verdict.model_copy(
        update={
            "status": "failed" if failed else "passed",
            "n": result.n,
            "mean_new": result.mean_a,
            "mean_baseline": result.mean_b,
            "diff": result.diff,
            "ci_low": result.ci_low,
            "ci_high": result.ci_high,
            "p_value": result.p_value,
            "test": result.test,
            "reason": (
                f"worse: {figures} < alpha {alpha} and a drop > {min_drop}"
                if failed
                else f"no significant drop: {figures}; fails at p < {alpha} with a drop > {min_drop}"
            ),
        }
    )


def append_alert(results_dir: Path, sweep_dir: str, alert: RegressionAlert) -> None:
    """One redacted line of ``<results_dir>/<sweep_dir>/alerts.jsonl``, appended and fsynced in one
    write, never through a symlink."""
    line = json.dumps(redact(alert.model_dump(mode="json")), ensure_ascii=False) + "\n"
    append_beneath(results_dir, Path(sweep_dir) / ALERTS_FILE, line.encode())


def read_alerts(path: Path) -> list[RegressionAlert]:
    """The alerts of one alerts.jsonl (a symlink in its place reads as none); lines this version cannot
    read, such as a torn last line, are left out."""
    try:
        data = read_beneath(path.parent, path.name)
    except OSError:
        return []
    alerts = []
    for line in data.splitlines():
        try:
            alerts.append(RegressionAlert.model_validate_json(line))
        except ValidationError:
            continue
    return alerts
