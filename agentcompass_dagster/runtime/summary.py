"""summary.md and .summary_counts.json: the human and the machine view of one request's results."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agentcompass_dagster.runtime.types import MetricResult, Record, TaskDetail


class CategoryCounts(Record):
    total: int = 0
    evaluated: int = 0
    correct: int = 0
    error: int = 0


class SummaryCounts(Record):
    """The counts summary.md is rendered from; re-rendering from details gives the same numbers."""

    schema_version: int = 1
    total: int
    evaluated: int
    error: int
    missing: int
    correct: int
    reused: int
    new: int
    categories: dict[str, CategoryCounts] = Field(default_factory=dict)
    metrics: dict[str, float | None] = Field(default_factory=dict)
    uncertainty: dict[str, dict[str, float]] = Field(default_factory=dict)
    usage: dict[str, Any] = Field(default_factory=dict)


def count(details: list[TaskDetail], selected: list[str], reused: set[str], metrics: MetricResult) -> SummaryCounts:
    by_id = {d.task_id: d for d in details}
    categories: dict[str, CategoryCounts] = {}
    for detail in details:
        group = categories.setdefault(detail.category or "uncategorized", CategoryCounts())
        group.total += 1
        if detail.is_error:
            group.error += 1
        else:
            group.evaluated += 1
            group.correct += detail.correct
    usage = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "cost_complete": True, "duration_s": 0.0}
    for detail in details:
        total = detail.usage
        usage["input_tokens"] += total.input_tokens
        usage["output_tokens"] += total.output_tokens
        usage["duration_s"] += sum(a.duration_s for a in detail.attempts.values())
        if total.cost_usd is None:
            usage["cost_complete"] = False
        else:
            usage["cost_usd"] += total.cost_usd
    errors = sum(d.is_error for d in details)
    return SummaryCounts(
        total=len(selected),
        evaluated=len(details) - errors,
        error=errors,
        missing=sum(task_id not in by_id for task_id in selected),
        correct=sum(d.correct for d in details if not d.is_error),
        reused=sum(task_id in reused for task_id in by_id),
        new=sum(task_id not in reused for task_id in by_id),
        categories=dict(sorted(categories.items())),
        metrics=metrics.metrics,
        uncertainty=(metrics.details or {}).get("uncertainty", {}),
        usage=usage,
    )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def render(title: str, run_id: str, status: str, counts: SummaryCounts, errors: list[TaskDetail]) -> str:
    lines = [
        f"# {title}",
        "",
        f"run `{run_id}` · status **{status}**",
        "",
        f"Tasks: {counts.total} selected · {counts.evaluated} evaluated · {counts.correct} correct · "
        f"{counts.error} errors · {counts.missing} missing · {counts.reused} reused · {counts.new} new",
        "",
        "| metric | value |",
        "|---|---|",
    ]
    lines += [f"| {name} | {_fmt(value)} |" for name, value in counts.metrics.items()]
    usage = counts.usage
    if usage.get("input_tokens") or usage.get("output_tokens") or usage.get("cost_usd"):
        cost = f"${usage['cost_usd']:.4f}" if usage.get("cost_complete", True) else (
            f"${usage['cost_usd']:.4f} known, incomplete (some model turns had no price)")
        lines += ["", f"Usage: {usage['input_tokens']:,} input tokens · {usage['output_tokens']:,} output tokens · "
                      f"cost {cost} · {usage.get('duration_s', 0.0):.1f}s in attempts"]
    if counts.uncertainty:
        lines += ["", "| metric | stderr | 95% CI (bootstrap over tasks) | tasks |", "|---|---|---|---|"]
        lines += [
            f"| {name} | {u['stderr']:.4f} | [{u['ci_low']:.4f}, {u['ci_high']:.4f}] | {int(u['n'])} |"
            for name, u in counts.uncertainty.items()
        ]
    if counts.categories:
        lines += ["", "| category | tasks | evaluated | correct | errors |", "|---|---|---|---|---|"]
        lines += [
            f"| {name} | {c.total} | {c.evaluated} | {c.correct} | {c.error} |" for name, c in counts.categories.items()
        ]
    if errors:
        lines += ["", "## Errors", ""]
        lines += [f"- `{d.task_id}`: {(d.error or '').splitlines()[0][:200] if d.error else ''}" for d in errors[:50]]
        if len(errors) > 50:
            lines.append(f"- ... and {len(errors) - 50} more")
    return "\n".join(lines) + "\n"
