"""Aggregation of task details into a validated MetricResult (R-STORE-7), with pass@k."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from agentcompass_dagster.runtime.stats import bootstrap_mean
from agentcompass_dagster.runtime.types import MetricCounts, MetricResult, TaskDetail

PASS_AT = (1, 2, 5, 10, 20, 50, 100)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimator 1 - C(n-c, k) / C(n, k) of the chance that k of n samples hold a correct one."""
    if c <= 0:
        return 0.0
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _correct_attempts(detail: TaskDetail) -> int:
    return sum(a.correct and a.error is None for a in detail.attempts.values())


def standard_metrics(details: list[TaskDetail], total: int) -> MetricResult:
    """accuracy (and per category) = mean task score over tasks with a normal detail; a task's score is
    the mean over its attempts, so with k attempts this is the mean accuracy over attempts. pass@j for
    the usual j up to k (avg strategy: every attempt ran, the estimator is unbiased; pass strategy stops
    at the first success, so only pass@k is reported). ``counts`` are the real denominators: evaluated
    tasks for accuracy and pass@k, selected tasks for error_rate. Nothing evaluated: accuracy is None.
    ``details["uncertainty"]`` holds each metric's bootstrap standard error and 95% interval over tasks.
    """
    evaluated = [d for d in details if not d.is_error]
    errors = len(details) - len(evaluated)
    by_category: dict[str, list[TaskDetail]] = defaultdict(list)
    for detail in evaluated:
        by_category[detail.category or "uncategorized"].append(detail)
    per_task: dict[str, list[float]] = {"accuracy": [d.score for d in evaluated]}
    per_category: dict[str, Any] = {}
    for category in sorted(by_category):
        group = by_category[category]
        per_task[f"accuracy/{category}"] = [d.score for d in group]
        per_category[category] = {"evaluated": len(group), "correct": sum(d.correct for d in group)}
    k = max((d.k for d in evaluated), default=1)
    if k > 1:
        only_k = any(d.strategy == "pass" for d in evaluated)
        for j in sorted({j for j in PASS_AT if j <= k} | {k}):
            if only_k and j != k:
                continue
            per_task[f"pass@{j}"] = [pass_at_k(d.attempts_tried, _correct_attempts(d), j) for d in evaluated]
    metrics: dict[str, float | None] = {name: _mean(values) for name, values in per_task.items()}
    metrics["error_rate"] = errors / total if total else None
    uncertainty = {}
    for name, values in per_task.items():
        interval = bootstrap_mean(values)
        if interval is not None:
            uncertainty[name] = interval.model_dump(exclude={"mean"})
    return MetricResult(
        metrics=metrics,
        counts=MetricCounts(total=total, evaluated=len(evaluated), error=errors),
        details={"per_category": per_category, "correct": sum(d.correct for d in evaluated), "k": k,
                 "uncertainty": uncertainty},
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
