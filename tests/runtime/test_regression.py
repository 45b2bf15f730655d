"""The regression judgement (runtime/results/regression.py): which runs are complete, the verdict on two runs'
per-task scores, and the alert records of alerts.jsonl, without Dagster."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pydantic import ValidationError

from agentcompass_dagster.declarations.sweep import AlertsConfig
from agentcompass_dagster.reporting.results import load_alerts
from agentcompass_dagster.runtime.store.layout import ALERTS_FILE
from agentcompass_dagster.runtime.results.regression import (
    RegressionAlert,
    append_alert,
    complete_runs,
    judge,
    read_alerts,
)
from agentcompass_dagster.runtime.store.run_store import RunStore
from agentcompass_dagster.runtime.store.safe_fs import UnsafePath

TASKS = [f"t{i:02d}" for i in range(20)]
IDENTITY: dict[str, Any] = {"sweep": "s", "benchmark": "b", "model": "m"}


def scores(failing: int, tasks: list[str] = TASKS) -> dict[str, float]:
    """Every task solved but the first ``failing``."""
    return {task: 0.0 if index < failing else 1.0 for index, task in enumerate(tasks)}


def test_a_verdict_fails_only_on_a_significant_drop_larger_than_min_drop() -> None:
    """Issue #28: failed when the newer run is worse with p < alpha and a drop > min_drop, passed
    otherwise, with the figures of the paired test (McNemar for 0/1 scores)."""
    worse = judge(("new", scores(10)), ("old", scores(0)), alpha=0.05, min_drop=0.0, **IDENTITY)
    assert (worse.status, worse.test, worse.n, worse.baseline_run_id) == ("failed", "mcnemar", 20, "old")
    assert worse.diff == pytest.approx(-0.5) and worse.p_value == pytest.approx(2 * 0.5**10)
    assert (worse.mean_new, worse.mean_baseline) == (0.5, 1.0) and "p = 0.00195" in worse.reason
    assert judge(("new", scores(10)), ("old", scores(0)), alpha=0.05, min_drop=0.5, **IDENTITY).status == "passed"
    assert judge(("new", scores(10)), ("old", scores(0)), alpha=0.001, min_drop=0.0, **IDENTITY).status == "passed"
    assert judge(("new", scores(0)), ("old", scores(10)), alpha=0.05, min_drop=0.0, **IDENTITY).status == "passed"
    assert judge(("new", scores(2)), ("old", scores(0)), alpha=0.05, min_drop=0.0, **IDENTITY).status == "passed"


def test_a_verdict_pairs_only_common_tasks_and_uses_the_sign_flip_test_for_k_above_1() -> None:
    """Issue #28 (k >= 1): scores that are means over several attempts go to the sign-flip test; only
    tasks both runs finished are paired; nothing to compare is a skip with its reason."""
    halves = {task: 0.5 for task in TASKS}
    verdict = judge(("new", halves), ("old", {**scores(0), "extra": 1.0}), alpha=0.05, min_drop=0.0, **IDENTITY)
    assert (verdict.status, verdict.test, verdict.n) == ("failed", "sign-flip", 20)
    skipped = judge(("new", halves), None, alpha=0.05, min_drop=0.0, **IDENTITY)
    assert (skipped.status, skipped.reason, skipped.baseline_run_id) == ("skipped", "no earlier complete run", None)
    apart = judge(("new", {"a": 1.0}), ("old", {"b": 1.0}), alpha=0.05, min_drop=0.0, **IDENTITY)
    assert (apart.status, apart.reason) == ("skipped", "no task finished in both runs")


def write_run(
    root: Path,
    run_id: str,
    started_at: str,
    results: dict[str, float | None],
    status: str = "completed",
    selected: list[str] | None = None,
    fork: bool = False,
) -> None:
    """A run directory as far as the check reads it: run_info.json, params.json, task_results.parquet
    (``results``: task -> score, None for a task that ended in error)."""
    run = root / run_id
    run.mkdir(parents=True)
    (run / "run_info.json").write_text(
        json.dumps(
            {"run_id": run_id, "request_name": "b/m", "status": status, "selected_tasks": selected or list(results)}
        )
    )
    lineage = (
        {
            "parent_run_id": "p",
            "parent_run_dir": "p",
            "task_id": "t00",
            "attempt": 1,
            "checkpoint_seq": 1,
            "parent_model": "m",
            "model": "m2",
        }
        if fork
        else None
    )
    (run / "params.json").write_text(json.dumps({"started_at": started_at, "lineage": lineage}))
    pd.DataFrame(
        {
            "task_id": list(results),
            "score": [0.0 if s is None else s for s in results.values()],
            "error": [("infrastructure" if s is None else None) for s in results.values()],
        }
    ).to_parquet(run / "task_results.parquet")


def test_complete_runs_are_completed_from_scratch_runs_with_a_result_for_every_selected_task(tmp_path: Path) -> None:
    """Issue #28, "complete run": a running run, a fork and a run missing a selected task are passed
    over; a task that ended in error is a result, left out of the scores; newest first."""
    root = tmp_path / "results" / "s" / "b" / "m"
    write_run(root, "r1", "2026-01-01T00:00:01", {"t00": 1.0, "t01": None})
    write_run(root, "r2", "2026-01-01T00:00:02", {"t00": 1.0}, selected=["t00", "t01"])
    write_run(root, "r3", "2026-01-01T00:00:03", {"t00": 0.0, "t01": 0.5})
    write_run(root, "r4", "2026-01-01T00:00:04", {"t00": 1.0, "t01": 1.0}, fork=True)
    write_run(root, "r5", "2026-01-01T00:00:05", {"t00": 1.0, "t01": 1.0}, status="running")
    runs = [(run.run_id, found) for run, found in complete_runs(RunStore(tmp_path / "results").runs_newest_first(root))]
    assert runs == [("r3", {"t00": 0.0, "t01": 0.5}), ("r1", {"t00": 1.0})]


def alert(evaluation_id: int, reason: str = "worse") -> RegressionAlert:
    return RegressionAlert(
        **IDENTITY,
        run_id="r2",
        baseline_run_id="r1",
        status="failed",
        reason=reason,
        alpha=0.05,
        min_drop=0.0,
        checked_at=1.0,
        check_name="no_regression__m",
        evaluation_id=evaluation_id,
        dagster_run_id="d",
        alerted_at=2.0,
        webhook="not declared",
    )


def test_alerts_are_redacted_lines_never_written_through_a_symlink(tmp_path: Path) -> None:
    """Issue #28: each alert is one redacted JSON line of <results>/<sweep>/alerts.jsonl, which pandas
    reads (load_alerts); a torn last line is left out and cut before the next append; a symlink planted
    in its place is refused, its target untouched."""
    results = tmp_path / "results"
    results.mkdir()
    append_alert(results, "s", alert(1, reason="worse, token sk-proj-abcdefghijklmnopqrstuvwx1234"))
    path = results / "s" / ALERTS_FILE
    with open(path, "ab") as torn:
        torn.write(b'{"sweep": "s", "ben')
    assert [a.evaluation_id for a in read_alerts(path)] == [1]
    append_alert(results, "s", alert(2))
    frame = load_alerts(results)
    assert list(frame["evaluation_id"]) == [1, 2] and len(path.read_text().splitlines()) == 2
    assert "sk-proj-abcdefghijklmnopqrstuvwx1234" not in path.read_text() and frame.loc[0, "webhook"] == "not declared"

    target = tmp_path / "elsewhere.txt"
    target.write_text("keep\n")
    (results / "t").mkdir()
    os.symlink(target, results / "t" / ALERTS_FILE)
    with pytest.raises(UnsafePath):
        append_alert(results, "t", alert(3))
    assert target.read_text() == "keep\n" and read_alerts(results / "t" / ALERTS_FILE) == []


def test_a_webhook_url_is_http() -> None:
    """alerts.webhook_url is POSTed to with urllib, which also opens file: and ftp: URLs: only http(s)."""
    assert AlertsConfig(webhook_url="https://hooks.slack.com/services/T/B/x").webhook_url
    with pytest.raises(ValidationError, match="http"):
        AlertsConfig(webhook_url="file:///etc/passwd")
