"""summary.md and .summary_counts.json: the human and the machine view of one request's results."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field

from agentcompass_dagster.contracts.markdown import markdown_table
from agentcompass_dagster.runtime.results.scores import TaskScores
from agentcompass_dagster.contracts.records import MetricResult, StoredRecord
from agentcompass_dagster.runtime.store.outcomes import BudgetOutcome, BudgetStatus


class CategoryCounts(StoredRecord):
    total: int = 0
    evaluated: int = 0
    correct: int = 0
    error: int = 0


class SummaryCounts(StoredRecord):
    """The counts summary.md is rendered from; re-rendering from details gives the same numbers."""

    schema_version: int = 1
    total: int
    evaluated: int
    error: int
    # Of the evaluated: tasks the agent failed on its own (a limit, a timeout, no verdict), scored 0.
    failed: int = 0
    missing: int
    correct: int
    reused: int
    new: int
    # Attempts that ran (tasks that ended before any attempt have none), and how many were correct: with
    # k > 1 a task counts as correct when any attempt was, while accuracy averages the attempts.
    attempts: int = 0
    correct_attempts: int = 0
    # Of the attempts, those of tasks reused from earlier runs: they did not run in this one.
    attempts_reused: int = 0
    categories: dict[str, CategoryCounts] = Field(default_factory=dict)
    metrics: dict[str, float | None] = Field(default_factory=dict)
    uncertainty: dict[str, dict[str, float]] = Field(default_factory=dict)
    usage: dict[str, Any] = Field(default_factory=dict)
    # The sweep's budget as the run ended, and how many of the missing tasks it left unrun (run_info.json
    # lists them).
    budget: BudgetStatus | None = None
    budget_not_run: int = 0


def count(
    scores: TaskScores, selected: int, metrics: MetricResult, budget: BudgetOutcome | None = None
) -> SummaryCounts:
    """The counts of ``selected`` tasks, of which ``scores`` holds the finished ones; ``budget``: what the
    sweep's budget left unrun, when it has one."""
    categories: dict[str, CategoryCounts] = {}
    is_error, correct = scores.column("is_error"), scores.column("correct")
    for row in scores.rows():
        group = categories.setdefault(scores.task(int(row)).category or "uncategorized", CategoryCounts())
        group.total += 1
        if is_error[row]:
            group.error += 1
        else:
            group.evaluated += 1
            group.correct += int(correct[row])
    # Attempt rows numbered 0 stand for tasks that ended before any attempt: they used nothing.
    real = scores.column("attempt") > 0
    cost = scores.column("cost_usd")[real]
    usage = {
        "input_tokens": int(scores.column("input_tokens")[real].sum()),
        "output_tokens": int(scores.column("output_tokens")[real].sum()),
        "cost_usd": float(np.nansum(cost)),
        "cost_complete": not bool(np.isnan(cost).any()),
        "duration_s": float(scores.column("duration_s")[real].sum()),
    }
    errors = int(is_error.sum())
    reused = int(scores.column("reused").sum())
    return SummaryCounts(
        total=selected,
        evaluated=len(scores) - errors,
        error=errors,
        failed=len(scores.failures),
        missing=selected - len(scores),
        correct=int(correct[is_error == 0].sum()),
        reused=reused,
        new=len(scores) - reused,
        attempts=int(real.sum()),
        attempts_reused=int(scores.column("reused")[scores.column("attempt_task")][real].sum()),
        correct_attempts=int(scores.column("attempt_correct")[real].sum()),
        categories=dict(sorted(categories.items())),
        metrics=metrics.metrics,
        uncertainty=(metrics.details or {}).get("uncertainty", {}),
        usage=usage,
        budget=budget.status if budget else None,
        budget_not_run=len(budget.not_run) if budget else 0,
    )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _several_attempts(counts: SummaryCounts) -> bool:
    return counts.attempts > counts.evaluated + counts.error


def _correct(counts: SummaryCounts) -> str:
    return f"{counts.correct} correct" + (" (by at least one attempt)" if _several_attempts(counts) else "")


def _attempts_line(counts: SummaryCounts) -> list[str]:
    """With several attempts a task, what the attempts did: the metrics average them, "correct" above
    counts a task any of whose attempts was."""
    if not _several_attempts(counts):
        return []
    ran = counts.attempts - counts.attempts_reused
    where = (
        f"{counts.attempts} · {ran} run in this run · {counts.attempts_reused} reused from earlier runs"
        if counts.attempts_reused
        else f"{counts.attempts} run"
    )
    return [
        "",
        f"Attempts: {where} · {counts.correct_attempts} correct "
        f"({counts.correct_attempts / counts.attempts:.2f} of them; the metrics average each task's attempts)",
    ]


def render(
    title: str,
    run_id: str,
    status: str,
    counts: SummaryCounts,
    errors: list[tuple[str, str]],
    failures: list[tuple[str, str]],
    not_loaded: Sequence[tuple[str, str]] = (),
    replays: Sequence[tuple[str, str]] = (),
) -> str:
    """``errors``: (task id, first line of its error) of the tasks that ended in an infrastructure error
    (left out of accuracy, run again); ``failures``: those the agent failed on its own (scored 0);
    ``not_loaded``: (task id, why) of the benchmark's tasks it could not load (left out of the run);
    ``replays``: (task@attempt, what) of the agent CLI attempts resumed by replay."""
    lines = [
        f"# {title}",
        "",
        f"run `{run_id}` · status **{status}**",
        "",
        f"Tasks: {counts.total} selected · {counts.evaluated} evaluated · {_correct(counts)} · "
        f"{counts.evaluated - counts.correct - counts.failed} wrong · "
        f"{counts.failed} failed by the agent · {counts.error} errors · {counts.missing} missing · "
        f"{counts.new} run in this run · "
        f"{counts.reused} reused from earlier runs",
        *_attempts_line(counts),
        "",
        markdown_table(["metric", "value"], [(name, _fmt(value)) for name, value in counts.metrics.items()]),
    ]
    lines += _spending(counts) + _breakdowns(counts)
    lines += _listed("Failed by the agent (scored 0: a limit, a timeout, no verdict)", failures)
    lines += _listed("Errors (the infrastructure's: left out of accuracy, run again by a re-run)", errors)
    lines += _listed("Not loaded (the benchmark could not read these tasks: not selected, not run)", not_loaded)
    lines += _listed("Resumed by replay (a rerun after a crash: recorded turns answered again, no model call)", replays)
    return "\n".join(lines) + "\n"


def _spending(counts: SummaryCounts) -> list[str]:
    """The attempts' usage and cost, and the sweep's budget: lines only when there is something to say."""
    lines: list[str] = []
    usage = counts.usage
    if usage.get("input_tokens") or usage.get("output_tokens") or usage.get("cost_usd"):
        cost = (
            f"${usage['cost_usd']:.4f}"
            if usage.get("cost_complete", True)
            else (f"${usage['cost_usd']:.4f} known, incomplete (some model turns had no price)")
        )
        lines += [
            "",
            f"Usage: {usage['input_tokens']:,} input tokens · {usage['output_tokens']:,} output tokens · "
            f"cost {cost} · {usage.get('duration_s', 0.0):.1f}s in attempts",
        ]
    if counts.budget is not None:
        lines += [
            "",
            f"Budget of the sweep: {counts.budget.message}"
            + (
                f"; {counts.budget_not_run} tasks not run (they run when the budget is raised)"
                if counts.budget_not_run
                else ""
            ),
        ]
    return lines


def _breakdowns(counts: SummaryCounts) -> list[str]:
    """The metrics' uncertainty and the per-category counts, as tables."""
    lines: list[str] = []
    if counts.uncertainty:
        lines += [
            "",
            markdown_table(
                ["metric", "stderr", "95% CI (bootstrap over tasks)", "tasks"],
                [
                    (name, f"{u['stderr']:.4f}", f"[{u['ci_low']:.4f}, {u['ci_high']:.4f}]", int(u["n"]))
                    for name, u in counts.uncertainty.items()
                ],
            ),
        ]
    if counts.categories:
        lines += [
            "",
            markdown_table(
                ["category", "tasks", "evaluated", "correct", "errors"],
                [(name, c.total, c.evaluated, c.correct, c.error) for name, c in counts.categories.items()],
            ),
        ]
    return lines


def _listed(heading: str, entries: Sequence[tuple[str, str]]) -> list[str]:
    if not entries:
        return []
    lines = ["", f"## {heading}", ""]
    lines += [f"- `{task_id}`: {line}" for task_id, line in entries[:50]]
    if len(entries) > 50:
        lines.append(f"- ... and {len(entries) - 50} more")
    return lines
