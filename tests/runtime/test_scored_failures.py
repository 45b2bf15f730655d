"""A failure the agent caused is a scored failure, not an error (R-FIN-1, R-REUSE-1): an environment
limit it hit, a verifier it hung, a reply its harness gave up on score 0 and count in accuracy's
denominator, and a re-run with reuse does not run them again. Only the infrastructure's failures are
errors, left out of accuracy and run again. Failing on purpose raised accuracy: 1 solved of 3 showed
accuracy 1.0 beside an error rate of 0.67."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import write_sweep, write_task

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate
from agentcompass_dagster.runtime.store.run_store import open_run_dir

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

FORK_BOMB = "for i in $(seq 200); do sleep 30 & done; wait"
FILL_TMP = "head -c 64M /dev/zero > /tmp/fill; true"


def harbor_task(tasks: Path, name: str, test: str) -> None:
    task = tasks / name
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text("[verifier]\ntimeout_sec = 2\n")
    (task / "instruction.md").write_text("x\n")
    (task / "tests" / "test.sh").write_text(f"#!/bin/bash\n{test}\n")


def run(sweep: Path) -> Any:
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    return outcome.result


@needs_bwrap
def test_failing_on_purpose_does_not_raise_accuracy(tmp_path: Path) -> None:
    """Three tasks in the sandbox: one solved, one whose agent fills /tmp past tmp_mb, one whose agent
    starts processes past max_processes. Accuracy is 1/3 (it was 1.0: the two left the denominator as
    errors), error_rate 0, each failure recorded with the limit it hit; a re-run with reuse runs none of
    the three again."""
    tasks = tmp_path / "tasks"
    for name in ("solved", "fills-tmp", "forks"):
        write_task(tasks, name, check="test -f done")
    commands = {"solved": "touch done", "fills-tmp": f"touch done; {FILL_TMP}", "forks": f"touch done; {FORK_BOMB}"}
    fields: dict[str, Any] = dict(
        name="onpurpose",
        benchmarks=[{"id": "demo", "params": {"tasks_dir": str(tasks)}}],
        environment={"id": "sandbox", "params": {"tmp_mb": 8, "max_processes": 32}},
        harness={
            "id": "scripted",
            "params": {"tasks": {t: {"command": c, "answer": "x"} for t, c in commands.items()}},
        },
    )
    result = run(write_sweep(tmp_path, **fields))
    assert result.metrics.metrics["accuracy"] == pytest.approx(1 / 3)
    assert result.metrics.metrics["error_rate"] == 0.0
    assert result.metrics.counts.model_dump() == {"total": 3, "evaluated": 3, "error": 0}
    details = open_run_dir(Path(result.run_dir)).load_all_details()
    assert "tmp_mb=8" in (details["fills-tmp"].failure or "") and "max_processes=32" in (details["forks"].failure or "")
    assert details["fills-tmp"].attempts["1"].status == "failed" and not details["fills-tmp"].is_error
    summary = (Path(result.run_dir) / "summary.md").read_text()
    assert "2 failed by the agent · 0 errors" in summary and "## Failed by the agent" in summary
    rows = pd.read_parquet(Path(result.run_dir) / "task_results.parquet").set_index("task_id")
    assert rows.loc["forks", "failure"].startswith("environment limit exceeded: max_processes=32")
    assert rows["error"].isna().all()
    again = run(write_sweep(tmp_path, output={"results_dir": str(tmp_path / "results"), "reuse": True}, **fields))
    assert json.loads((Path(again.run_dir) / "run_info.json").read_text())["reused_from"]["tasks"] == 3
    assert again.metrics.metrics["accuracy"] == pytest.approx(1 / 3)


@needs_bwrap
def test_a_verifier_the_agent_hung_is_a_scored_failure(tmp_path: Path) -> None:
    """A Harbor verifier that reads fib.txt hangs on the FIFO the agent left there until its timeout, and
    gives no verdict: the attempt scores 0 with the reason, in the denominator (it was an error)."""
    tasks = tmp_path / "tasks"
    harbor_task(tasks, "fifo", 'if [ "$(cat fib.txt)" = 55 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt')
    sweep = write_sweep(
        tmp_path,
        name="fifo",
        environment="sandbox",
        benchmarks=[{"id": "harbor", "params": {"tasks_dir": str(tasks)}}],
        harness={"id": "scripted", "params": {"default": {"command": "mkfifo fib.txt", "answer": "x"}}},
    )
    result = run(sweep)
    detail = open_run_dir(Path(result.run_dir)).load_all_details()["fifo"]
    assert not detail.is_error and detail.score == 0.0
    assert detail.failure is not None and "the verifier timed out after 2s" in detail.failure
    assert result.metrics.metrics["accuracy"] == 0.0 and result.metrics.counts.error == 0


def test_an_infrastructure_failure_stays_an_error(tmp_path: Path) -> None:
    """An exception of the framework or its plugins (here the harness raising) is an error: left out of
    accuracy, listed under Errors, run again by a re-run."""
    sweep = write_sweep(
        tmp_path,
        name="infra",
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 2}}],
        harness={
            "id": "scripted",
            "params": {"tasks": {"t0": {"raise": "endpoint unreachable"}}, "default": {"oracle": True}},
        },
    )
    result = run(sweep)
    assert result.metrics.counts.model_dump() == {"total": 2, "evaluated": 1, "error": 1}
    assert result.metrics.metrics["accuracy"] == 1.0
    summary = (Path(result.run_dir) / "summary.md").read_text()
    assert "0 failed by the agent · 1 errors" in summary and "endpoint unreachable" in summary
