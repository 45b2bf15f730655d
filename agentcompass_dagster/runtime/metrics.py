"""Aggregation of task details into a validated MetricResult (R-STORE-7)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from agentcompass_dagster.runtime.types import MetricCounts, MetricResult, TaskDetail


def accuracy_by_category(details: list[TaskDetail], total: int) -> MetricResult:
    """Accuracy = mean task score over tasks with a normal detail; errors are counted apart.

    A task's score is the mean over its attempts, so with k attempts this is the mean accuracy over
    attempts. ``counts`` are the real denominators: evaluated tasks are the accuracy's denominator.
    """
    evaluated = [d for d in details if not d.is_error]
    errors = len(details) - len(evaluated)
    by_category: dict[str, list[TaskDetail]] = defaultdict(list)
    for detail in evaluated:
        by_category[detail.category or "uncategorized"].append(detail)
    metrics: dict[str, float | None] = {"accuracy": _mean(evaluated)}
    per_category: dict[str, Any] = {}
    for category in sorted(by_category):
        group = by_category[category]
        metrics[f"accuracy/{category}"] = _mean(group)
        per_category[category] = {"evaluated": len(group), "correct": sum(d.correct for d in group)}
    metrics["error_rate"] = errors / total if total else None
    return MetricResult(
        metrics=metrics,
        counts=MetricCounts(total=total, evaluated=len(evaluated), error=errors),
        details={"per_category": per_category, "correct": sum(d.correct for d in evaluated)},
    )


def _mean(details: list[TaskDetail]) -> float | None:
    return sum(d.score for d in details) / len(details) if details else None
