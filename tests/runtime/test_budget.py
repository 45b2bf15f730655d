"""The sweep's budget ledger (runtime/store/budget.py): shared by processes through one flock'ed file, it
admits a model call only while the spend plus the calls in flight stays below the budget, so the total
passes it by less than one call; a dead process's reservation stops counting; a run stopped by the
budget leaves its tasks without a result (neither failures nor errors) and runs them once it is raised."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.runtime.store.budget import BudgetExhausted, Ledger, ledger
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate
from agentcompass_dagster.runtime.store.processes import ProcessId
from agentcompass_dagster.runtime.store.run_records import RunInfo
from agentcompass_dagster.runtime.results.summary import SummaryCounts
from agentcompass_dagster.contracts.records import BudgetConfig, Usage

from conftest import write_sweep

CALL_USD = 0.1


def _spend_until_refused(path: str, limits: dict[str, Any], start: Any, calls: Any) -> None:
    """A worker process: reserve, "call" (the cost is known), settle, until the budget refuses."""
    book = Ledger(Path(path))
    config = BudgetConfig(**limits)
    start.wait()
    while True:
        try:
            call = book.reserve(config)
        except BudgetExhausted:
            return
        if call is None:
            continue  # calls in flight could take what is left: ask again once they settle
        with calls.get_lock():
            calls.value += 1
        book.settle(call, Usage(input_tokens=7, output_tokens=3, cost_usd=CALL_USD), "b/m/run")


@pytest.mark.parametrize("limits", [{"max_cost_usd": 1.05}, {"max_tokens": 95}])
def test_processes_sharing_the_ledger_pass_the_budget_by_at_most_one_call(
    tmp_path: Path, limits: dict[str, Any]
) -> None:
    """Issue #28 (sweep budget): four processes hammering one ledger at once spend the budget and stop;
    the total never passes it by more than one call (10 tokens, $0.1), and every call they made is in
    the ledger."""
    path = tmp_path / "bq" / "budget.jsonl"
    context = multiprocessing.get_context("fork")
    start, calls = context.Event(), context.Value("i", 0)
    workers = [context.Process(target=_spend_until_refused, args=(str(path), limits, start, calls)) for _ in range(4)]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(timeout=50)
        assert worker.exitcode == 0
    status = Ledger(path).status(BudgetConfig(**limits))
    assert status.exhausted
    assert status.spent_tokens == 10 * calls.value
    if "max_cost_usd" in limits:
        assert limits["max_cost_usd"] <= status.spent_usd < limits["max_cost_usd"] + CALL_USD
    else:
        assert limits["max_tokens"] <= status.spent_tokens < limits["max_tokens"] + 10
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert sum(line["kind"] == "settle" for line in lines) == calls.value
    assert {line["run"] for line in lines if line["kind"] == "settle"} == {"b/m/run"}


def test_calls_in_flight_hold_back_the_next_until_they_settle_and_a_dead_processes_reservation_does_not(
    tmp_path: Path,
) -> None:
    """Issue #28 (sweep budget): the first call of a sweep goes alone (its cost is unknown); later, calls in
    flight are counted at the largest cost seen, so one that could take what is left holds the next back;
    a reservation of a process that is gone (killed mid-call) stops counting."""
    path = tmp_path / "budget.jsonl"
    limits = BudgetConfig(max_cost_usd=0.15)
    book = Ledger(path)
    first = book.reserve(limits)
    assert first is not None and book.reserve(limits) is None
    book.settle(first, Usage(cost_usd=CALL_USD), None)
    second = book.reserve(limits)
    assert second is not None
    assert book.reserve(limits) is None  # $0.1 spent + $0.1 in flight reach $0.15: wait for it
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    gone = ProcessId.of(dead.pid)
    dead.wait()
    book.settle(second, Usage(cost_usd=0.0), None)  # it failed: it cost nothing
    with path.open("a") as ledger_file:  # a reservation its process never settled
        ledger_file.write(json.dumps({"kind": "reserve", "call": f"{gone}#1", "worker": str(gone)}) + "\n")
    assert Ledger(path).reserve(limits) is not None
    # Deleting the ledger resets what was spent, for every process that reads it next.
    path.unlink()
    assert book.status(limits).spent_usd == 0.0


def _budget_sweep(tmp_path: Path, max_cost_usd: float, n: int = 6) -> Path:
    """A synthetic benchmark answered by the tool agent in one model call a task, at $0.1 a call."""
    model = {
        "id": "paid",
        "provider": "scripted",
        "params": {
            "turns": {
                "*": [
                    {
                        "tool_calls": [{"name": "submit", "arguments": {"answer": "x"}}],
                        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
                        "cost_usd": CALL_USD,
                    }
                ]
            }
        },
    }
    return write_sweep(
        tmp_path,
        name="bq",
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": n}}],
        models=[model],
        harness="tool_agent",
        execution={"limits": {"task_concurrency": 2}},
        budget={"max_cost_usd": max_cost_usd},
    )


def test_a_run_stopped_by_the_budget_leaves_its_tasks_unrun_and_a_raised_budget_runs_them(tmp_path: Path) -> None:
    """Issue #28 (sweep budget): the run completes (not failed) with the tasks it could not pay for
    missing: neither errors nor failures of the agent, listed in run_info.json, counted and said in
    summary.md; a later run with a raised budget runs them (reuse does not take them as done)."""
    path = _budget_sweep(tmp_path, 0.25)
    result = orchestrate(load_sweep(path).requests())
    assert result.status == "completed"
    (outcome,) = result.outcomes.values()
    assert outcome.result is not None
    run_dir = Path(outcome.result.run_dir)
    counts = SummaryCounts.model_validate_json((run_dir / ".summary_counts.json").read_text())
    assert (counts.evaluated, counts.error, counts.failed, counts.missing) == (3, 0, 0, 3)
    assert counts.budget is not None and counts.budget.exhausted and counts.budget_not_run == 3
    assert counts.budget.spent_usd == pytest.approx(0.3)
    info = RunInfo.model_validate_json((run_dir / "run_info.json").read_text())
    assert info.status == "completed" and info.budget is not None and len(info.budget.not_run) == 3
    assert (
        "Budget of the sweep: spent $0.3 of $0.25 (exhausted); 3 tasks not run" in (run_dir / "summary.md").read_text()
    )
    assert not list((run_dir / "details").glob("_error_*"))

    data = yaml.safe_load(path.read_text())
    data["budget"]["max_cost_usd"] = 1.0
    data["output"]["reuse"] = True
    path.write_text(yaml.safe_dump(data))
    (again,) = orchestrate(load_sweep(path).requests()).outcomes.values()
    assert again.result is not None
    counts = SummaryCounts.model_validate_json((Path(again.result.run_dir) / ".summary_counts.json").read_text())
    assert (counts.evaluated, counts.missing, counts.reused, counts.new, counts.budget_not_run) == (6, 0, 3, 3, 0)
    assert ledger(tmp_path / "results" / "bq" / "budget.jsonl").status(
        BudgetConfig(max_cost_usd=1.0)
    ).spent_usd == pytest.approx(0.6)
