"""A sweep's budget through Dagster: concurrent `agentcompass run`s share its ledger, stop cleanly when it
is spent, and nothing (a later run, a schedule tick) launches another evaluation until it is raised."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.defs.location import sweep_definitions
from agentcompass_dagster.runtime.store.budget import Ledger
from agentcompass_dagster.contracts.records import BudgetConfig, Usage

from conftest import run_cli, write_sweep
from test_dagster_engine import cli, finish, instance

CALL_USD = 0.1
TASKS = 6
BUDGET_USD = 0.35
ATTEMPTS = dg.AssetKey(["bq", "synthetic", "attempts"])
METRICS = dg.AssetKey(["bq", "synthetic", "metrics"])


def budget_sweep(tmp_path: Path, **fields: object) -> Path:
    """Six synthetic tasks, each answered by the tool agent in one model call of a known $0.1."""
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
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": TASKS}}],
        models=[model],
        harness="tool_agent",
        execution={"limits": {"task_concurrency": 2}},
        budget={"max_cost_usd": BUDGET_USD},
        **fields,
    )


def test_concurrent_runs_of_a_budgeted_sweep_stop_at_the_budget_and_a_later_run_launches_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #28 acceptance (sweep budget): two `agentcompass run` of one budgeted sweep started together,
    its tasks split over concurrent runs (run workers: separate processes), spend at most one call over the
    budget in total; both exit 0 and end by saying what was spent of what; the tasks left unpaid stay
    missing (the runs succeeded, metrics and all, and the metrics asset shows the budget); a later run
    launches nothing and says why."""
    sweep = budget_sweep(tmp_path, dagster={"max_partitions_per_run": 3, "max_concurrent_runs": 2})
    first, second = cli(tmp_path, "run", str(sweep)), cli(tmp_path, "run", str(sweep))
    assert (finish(first), finish(second)) == (0, 0)
    status = Ledger(tmp_path / "results" / "bq" / "budget.jsonl").status(BudgetConfig(max_cost_usd=BUDGET_USD))
    assert BUDGET_USD <= status.spent_usd < BUDGET_USD + CALL_USD
    with instance() as inst:
        paid = len(inst.get_materialized_partitions(ATTEMPTS))
        runs = inst.get_runs()
        assert runs and all(run.status == dg.DagsterRunStatus.SUCCESS for run in runs)
        (metrics,) = inst.fetch_materializations(METRICS, limit=1).records
        assert metrics.asset_materialization is not None
        shown = metrics.asset_materialization.metadata
        assert shown["budget"].value.endswith("(exhausted)") and shown["budget max usd"].value == BUDGET_USD
    assert paid == round(status.spent_usd / CALL_USD) and paid < TASKS
    for log in tmp_path.glob("cli-*.log"):
        assert (
            f"budget: {status.message}; {TASKS - paid} (model, task) partition(s) without a result" in log.read_text()
        )

    capsys.readouterr()
    assert run_cli("run", sweep) == 0
    out = capsys.readouterr().out
    assert out.startswith("Nothing launched: the sweep's budget is exhausted (spent $")
    with instance() as inst:
        assert len(inst.get_runs()) == len(runs)


def test_a_schedule_tick_with_the_budget_spent_launches_nothing_and_says_why(tmp_path: Path) -> None:
    """Issue #28 (sweep budget): a schedule tick, evaluated as Dagster's daemon evaluates it, requests no
    run while every task is missing when the sweep's budget is spent, and its skip reason says so with the
    spend and the limit."""
    sweep = budget_sweep(tmp_path, schedule={"cron": "0 3 * * *"})
    book = Ledger(tmp_path / "results" / "bq" / "budget.jsonl")
    call = book.reserve(BudgetConfig(max_cost_usd=BUDGET_USD))
    assert call is not None
    book.settle(call, Usage(cost_usd=0.4), "synthetic/paid/earlier")
    schedule = sweep_definitions(load_sweep(sweep)).resolve_schedule_def("bq__schedule")
    with instance() as inst, dg.build_schedule_context(instance=inst) as context:
        tick = schedule.evaluate_tick(context)
        assert not inst.get_runs()
    assert not tick.run_requests
    assert tick.skip_message == (
        "budget exhausted: spent $0.4 of $0.35 (exhausted); 6 (model, task) partitions "
        "without a result are not run until the sweep's budget is raised"
    )
