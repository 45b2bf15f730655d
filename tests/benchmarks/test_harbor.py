"""Tasks in the Harbor / Terminal-Bench layout (resources/data/harbor_tasks): the oracle passes all, nop
fails all, in the sandbox; the reward file becomes score and correctness."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from agentcompass_dagster.benchmarks.harbor_tasks import map_paths
from agentcompass_dagster.config import load_sweep
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate
from agentcompass_dagster.runtime.store.run_store import open_run_dir

from conftest import REPO, write_sweep

TASKS = REPO / "resources" / "data" / "harbor_tasks"
NO_NETWORK = {"baseline": "none", "run": "none", "evaluation": "none"}


def run(tmp_path: Path, harness: str, tasks_dir: Path = TASKS) -> Any:
    sweep = write_sweep(tmp_path, name=f"harbor-{harness}", harness=harness, environment="sandbox",
                        benchmarks=[{"id": "harbor", "params": {"tasks_dir": str(tasks_dir)}}],
                        execution={"network": NO_NETWORK})
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    return outcome.result


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
@pytest.mark.parametrize(("harness", "accuracy"), [("oracle", 1.0), ("nop", 0.0)])
def test_oracle_passes_all_and_nop_fails_all(tmp_path: Path, harness: str, accuracy: float) -> None:
    """Oracle (solution/solve.sh) passes every task; nop passes none; the verifier's reward is the score."""
    result = run(tmp_path, harness)
    assert result.metrics.counts.model_dump() == {"total": 4, "evaluated": 4, "error": 0}
    assert result.metrics.metrics["accuracy"] == accuracy
    details = open_run_dir(Path(result.run_dir)).load_all_details()
    assert {d.attempts["1"].benchmark_fields["reward"] for d in details.values()} == {accuracy}
    assert details["fibonacci"].category == "compute"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_a_verifier_that_writes_no_reward_is_a_scored_failure(tmp_path: Path) -> None:
    """A task whose verifier writes no reward is never a pass: the agent's failure saying why, score 0,
    counted in accuracy (not an error that leaves the denominator)."""
    tasks = tmp_path / "tasks"
    shutil.copytree(TASKS / "hello-file", tasks / "silent")
    (tasks / "silent" / "tests" / "test.sh").write_text("#!/bin/bash\ntrue\n")
    result = run(tmp_path, "oracle", tasks)
    detail = open_run_dir(Path(result.run_dir)).load_all_details()["silent"]
    attempt = detail.attempts["1"]
    assert not detail.correct and attempt.score == 0.0 and attempt.benchmark_fields["reward"] is None
    assert attempt.failure and "the verifier wrote no usable reward" in attempt.failure
    assert attempt.eval_error is None and not detail.is_error and result.metrics.counts.error == 0


def test_layout_paths_map_onto_the_scratch_directory() -> None:
    """/logs/verifier, /tests and /solution map onto the task's scratch directory; other paths stay."""
    script = 'echo 1 > /logs/verifier/reward.txt; cat /solution/text.txt "/tests/x"; ls /testsuite /usr/tests'
    assert map_paths(script, "/s") == (
        'echo 1 > /s/logs/verifier/reward.txt; cat /s/solution/text.txt "/s/tests/x"; ls /testsuite /usr/tests')
