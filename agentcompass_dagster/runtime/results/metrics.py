"""Aggregation of task details into a validated MetricResult (R-STORE-7), with pass@k."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from agentcompass_dagster.runtime.results.scores import TaskScores
from agentcompass_dagster.runtime.results.stats import bootstrap_mean
from agentcompass_dagster.contracts.records import MetricCounts, MetricResult

PASS_AT = (1, 2, 5, 10, 20, 50, 100)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimator 1 - C(n-c, k) / C(n, k) of the chance that k of n samples hold a correct one."""
    if c <= 0:
        return 0.0
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def standard_metrics(scores: TaskScores, total: int) -> MetricResult:
    """accuracy (and per category) = mean task score over tasks with a normal detail; a task's score is
    the mean over its attempts, so with k attempts this is the mean accuracy over attempts. pass@j for
    the usual j up to k (avg strategy: every attempt ran, the estimator is unbiased; pass strategy stops
    at the first success, so only pass@k is reported). ``counts`` are the real denominators: evaluated
    tasks for accuracy and pass@k, selected tasks for error_rate. Nothing evaluated: accuracy is None.
    ``details["uncertainty"]`` holds each metric's bootstrap standard error and 95% interval over tasks.
    """
    rows = scores.rows()
    evaluated = rows[scores.column("is_error")[rows] == 0]
    errors = len(rows) - len(evaluated)
    score = scores.column("score")[evaluated]
    correct = scores.column("correct")[evaluated]
    per_task: dict[str, np.ndarray] = {"accuracy": score}
    per_category: dict[str, Any] = {}
    for category, members in _by_category(scores, evaluated):
        per_task[f"accuracy/{category}"] = score[members]
        per_category[category] = {"evaluated": len(members), "correct": int(correct[members].sum())}
    k = int(scores.column("k")[evaluated].max()) if len(evaluated) else 1
    if k > 1:
        only_k = bool(scores.column("pass_strategy")[evaluated].any())
        tried = scores.column("tried")[evaluated]
        solved = scores.column("correct_attempts")[evaluated]
        for j in sorted({j for j in PASS_AT if j <= k} | {k}):
            if only_k and j != k:
                continue
            per_task[f"pass@{j}"] = _pass_at_each(tried, solved, j)
    per_task.update(_reward_means(scores, evaluated))
    metrics: dict[str, float | None] = {
        name: float(values.mean()) if len(values) else None for name, values in per_task.items()
    }
    metrics["error_rate"] = errors / total if total else None
    uncertainty = {}
    for name, values in per_task.items():
        interval = bootstrap_mean(values)
        if interval is not None:
            uncertainty[name] = interval.model_dump(exclude={"mean"})
    return MetricResult(
        metrics=metrics,
        counts=MetricCounts(total=total, evaluated=len(evaluated), error=errors),
        details={"per_category": per_category, "correct": int(correct.sum()), "k": k, "uncertainty": uncertainty},
    )


def _reward_means(scores: TaskScores, evaluated: np.ndarray) -> dict[str, np.ndarray]:
    """``reward.<name>`` of each evaluated task, for each name an attempt rewarded: the mean over the
    task's attempts, an attempt without that reward counting 0 (no verdict, or another name)."""
    if not scores.attempt_rewards:
        return {}
    names = sorted({name for rewards in scores.attempt_rewards.values() for name in rewards})
    position = {int(task): index for index, task in enumerate(evaluated)}
    sums = np.zeros((len(names), len(evaluated)))
    counts = np.zeros(len(evaluated))
    attempt_task = scores.column("attempt_task")
    for row in range(len(attempt_task)):
        index = position.get(int(attempt_task[row]))
        if index is None:
            continue
        counts[index] += 1
        for n, name in enumerate(names):
            sums[n, index] += scores.attempt_rewards.get(row, {}).get(name, 0.0)
    counts[counts == 0] = 1
    return {f"reward.{name}": sums[n] / counts for n, name in enumerate(names)}


def _by_category(scores: TaskScores, rows: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """(category, indices into ``rows`` of its tasks, in order), categories sorted by name."""
    codes: dict[str, int] = {}
    code = np.fromiter(
        (codes.setdefault(scores.task(int(row)).category or "uncategorized", len(codes)) for row in rows),
        dtype=np.int64,
        count=len(rows),
    )
    order = np.argsort(code, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(code[order])) + 1) if len(order) else []
    names = {number: name for name, number in codes.items()}
    return sorted(((names[int(code[group[0]])], group) for group in groups), key=lambda item: item[0])


def _pass_at_each(tried: np.ndarray, solved: np.ndarray, k: int) -> np.ndarray:
    """pass@k of every task, computed once per distinct (attempts tried, attempts solved)."""
    pairs = np.stack([tried.astype(np.int64), solved.astype(np.int64)], axis=1)
    unique, inverse = np.unique(pairs, axis=0, return_inverse=True)
    values = np.array([pass_at_k(int(n), int(c), k) for n, c in unique])
    return values[inverse.reshape(-1)]
