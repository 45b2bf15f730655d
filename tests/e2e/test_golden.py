"""A run directory written by version 0.1.0 (tests/data/golden_run, committed) must keep working:
a later change that breaks reading old runs fails here (R-COMPAT-1)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from agentcompass_dagster.runtime.execution.finalize import rerender_summary
from agentcompass_dagster.runtime.store.run_store import open_run_dir

from conftest import run_cli, tree_snapshot, write_sweep, write_task

GOLDEN = Path(__file__).parent.parent / "data" / "golden_run"


def _install_golden(tmp_path: Path) -> Path:
    target = tmp_path / "results" / "golden" / "demo" / "none" / "golden-v0.1.0"
    shutil.copytree(GOLDEN, target)
    return target


def test_golden_details_load_and_summary_rerenders_identically(tmp_path: Path) -> None:
    """R-COMPAT-1: old details load with their file-name semantics; re-rendering gives the same summary."""
    run_dir = _install_golden(tmp_path)
    details = open_run_dir(run_dir).load_all_details()
    assert sorted(details) == ["error-task", "fail-task", "pass-task"]
    assert details["pass-task"].correct and details["pass-task"].attempts_tried == 2
    assert not details["fail-task"].correct and not details["fail-task"].is_error
    assert details["error-task"].is_error and "exited with 7" in (details["error-task"].error or "")
    assert not any(p.name.startswith("error-task") for p in (run_dir / "details").iterdir())
    metrics, markdown = rerender_summary(run_dir)
    old_counts = json.loads((GOLDEN / ".summary_counts.json").read_text())
    new_counts = json.loads((run_dir / ".summary_counts.json").read_text())
    # Newer versions may add metrics and usage figures; every number the old version reported must stay.
    for grown in ("metrics", "usage"):
        assert old_counts[grown].items() <= new_counts[grown].items()
    assert {k: v for k, v in old_counts.items() if k not in ("metrics", "usage")} == {
        k: v for k, v in new_counts.items() if k in old_counts and k not in ("metrics", "usage")
    }
    old_lines = [line for line in (GOLDEN / "summary.md").read_text().splitlines() if line.startswith("|")]
    assert set(old_lines) <= set(markdown.splitlines())
    assert metrics.metrics["accuracy"] == 0.5 and metrics.counts.error == 1


def test_golden_run_is_a_reuse_source(tmp_path: Path) -> None:
    """R-COMPAT-1, R-REUSE-4: an old run serves as reuse source: its normal details are reused, its
    _error_ task runs again, and the old directory is not written."""
    source = _install_golden(tmp_path)
    before = tree_snapshot(source)
    tasks = tmp_path / "tasks"
    for task_id in ("pass-task", "fail-task", "error-task"):
        write_task(tasks, task_id, solution="echo ok > out.txt", check="grep -qx ok out.txt")
    sweep = write_sweep(
        tmp_path,
        name="golden",
        benchmarks=[{"id": "demo", "params": {"tasks_dir": str(tasks)}}],
        output={"results_dir": str(tmp_path / "results"), "reuse_run_id": "golden-v0.1.0"},
    )
    assert run_cli("run", sweep, "--direct") == 0
    assert tree_snapshot(source) == before
    (new_dir,) = [p for p in source.parent.iterdir() if p != source]
    counts = json.loads((new_dir / ".summary_counts.json").read_text())
    assert (counts["reused"], counts["new"], counts["correct"], counts["error"]) == (2, 1, 2, 0)
