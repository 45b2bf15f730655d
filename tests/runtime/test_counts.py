"""One definition of each count: tasks correct, attempts, attempts correct and attempts reused, computed
here from the run's details by hand, are what summary.md, its counts file, `show --json` and
task_results.parquet say, for a k = 3 run that reuses three tasks of an earlier one and runs a fourth."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.reporting.results import load_task_results
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate
from agentcompass_dagster.runtime.store.run_store import open_run_dir
from conftest import run_cli, write_sweep

WRONG = {"answer": "wrong"}
RIGHT = {"oracle": True}
SCRIPT = {
    "t0": [RIGHT, RIGHT, RIGHT],
    "t1": [RIGHT, WRONG, WRONG],
    "t2": [WRONG, WRONG, WRONG],
    "t3": [WRONG, RIGHT, WRONG],
}


def test_every_surface_gives_the_counts_the_details_give(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """R-FIN-1: k = 3; the first run evaluates t0-t2, the second reuses them and runs t3. Tasks correct
    (any attempt), attempts, attempts correct and attempts reused agree between the details (counted by
    hand), .summary_counts.json, summary.md, show --json and task_results.parquet."""

    def sweep(tasks: list[str], reuse: bool) -> Path:
        return write_sweep(
            tmp_path,
            name="counts",
            benchmarks=[{"id": "synthetic", "params": {"n_tasks": 4}, "tasks": tasks}],
            harness={"id": "scripted", "params": {"tasks": SCRIPT}},
            execution={"attempts": {"k": 3}},
            output={"results_dir": str(tmp_path / "results"), "reuse": reuse},
        )

    orchestrate(load_sweep(sweep(["t0", "t1", "t2"], False)).requests())
    (outcome,) = orchestrate(load_sweep(sweep(["t0", "t1", "t2", "t3"], True)).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    run = Path(outcome.result.run_dir)
    details = open_run_dir(run).load_all_details()
    reused = set(json.loads((run / "run_info.json").read_text())["reused_from"]["task_ids"])
    by_hand = {
        "correct": sum(d.correct for d in details.values()),
        "attempts": sum(len(d.attempts) for d in details.values()),
        "correct_attempts": sum(a.correct for d in details.values() for a in d.attempts.values()),
        "attempts_reused": sum(len(d.attempts) for t, d in details.items() if t in reused),
    }
    assert by_hand == {"correct": 3, "attempts": 12, "correct_attempts": 5, "attempts_reused": 9}

    counts = json.loads((run / ".summary_counts.json").read_text())
    assert {key: counts[key] for key in by_hand} == by_hand

    summary = (run / "summary.md").read_text()
    assert re.search(r"\b3 correct \(by at least one attempt\)", summary), summary
    assert "Attempts: 12 · 3 run in this run · 9 reused from earlier runs · 5 correct" in summary, summary

    assert run_cli("show", run, "--json") == 0
    shown = json.loads(capsys.readouterr().out)["tasks"]
    outcomes = [a["outcome"] for t in shown for a in t["attempts"]]
    assert (len(outcomes), outcomes.count("correct")) == (by_hand["attempts"], by_hand["correct_attempts"])
    assert sum(any(a["outcome"] == "correct" for a in t["attempts"]) for t in shown) == by_hand["correct"]

    rows = load_task_results(tmp_path / "results")
    attempts = rows[rows["attempt"] > 0]
    assert (len(attempts), int(attempts["correct"].sum()), int(attempts["reused"].sum())) == (
        by_hand["attempts"],
        by_hand["correct_attempts"],
        by_hand["attempts_reused"],
    )
    assert rows.groupby("task_id")["correct"].any().sum() == by_hand["correct"]
