"""Token and cost outliers among a run's attempts."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agentcompass_dagster.contracts.analyzer import AnalysisColumn, Analyzer, AttemptResult
from agentcompass_dagster.plugins.analyzers.columns import Results, field
from agentcompass_dagster.contracts.records import EvaluatedAttempt, TaskSpec

IQRS = 3.0
MEDIANS = 2.0
MIN_ATTEMPTS = 4


def far_above(values: np.ndarray) -> tuple[np.ndarray, float | None]:
    """Which values are far above the rest (NaN: no value, never flagged), and the threshold: above
    Q3 + 3 IQR (Tukey's "far out") and above twice the median, so a run of nearly equal attempts flags
    none. With fewer than 4 values there is no distribution to be far from: none, threshold None."""
    known = values[~np.isnan(values)]
    if len(known) < MIN_ATTEMPTS:
        return np.zeros(len(values), dtype=bool), None
    q1, median, q3 = np.percentile(known, [25, 50, 75])
    threshold = float(max(q3 + IQRS * (q3 - q1), MEDIANS * median))
    return values > threshold, threshold


def flagged(key: str) -> Callable[[Results], list[bool | None]]:
    """The column of the attempts whose ``key`` is far above the run's (computed over the run's attempts,
    like the summary's flags); null where the analyzer did not run."""

    def values(results: Results) -> list[bool | None]:
        known = field(key)(results)
        flags, _ = far_above(np.array([math.nan if value is None else value for value in known], dtype=np.float64))
        return [None if value is None else bool(flag) for value, flag in zip(known, flags)]

    return values


class CostOutliersAnalyzer(Analyzer):
    """Attempts that spent far more tokens or money than the run's typical attempt.

    Per attempt the values (``tokens``: input + output, ``cost_usd``, null when the provider reported none);
    the flags need the whole run's distribution, so they are computed over every analysed attempt when
    the run is finalised (in analysis_summary and task_results.parquet alike): an outlier is above
    Q3 + 3 IQR and above twice the median of the run's attempts, and a run needs at least 4 attempts with
    a value. Attempts that report no usage (the oracle, nop) are not analysed."""

    name = "cost_outliers"
    family = "cost"
    requires = frozenset({"usage"})
    columns = (
        AnalysisColumn("token_outlier", "bool", flagged("tokens")),
        AnalysisColumn("cost_outlier", "bool", flagged("cost_usd")),
    )

    def analyze(self, task: TaskSpec, attempt: EvaluatedAttempt) -> dict[str, Any]:
        usage = attempt.usage
        return {"tokens": usage.input_tokens + usage.output_tokens, "cost_usd": usage.cost_usd}

    def summarize(self, items: Sequence[AttemptResult]) -> dict[str, Any]:
        tokens = np.array([item.result["tokens"] for item in items], dtype=np.float64)
        costs = np.array(
            [math.nan if item.result["cost_usd"] is None else item.result["cost_usd"] for item in items],
            dtype=np.float64,
        )
        token_flags, token_threshold = far_above(tokens)
        cost_flags, cost_threshold = far_above(costs)
        known_costs = costs[~np.isnan(costs)]
        return {
            "attempts": len(items),
            "median_tokens": float(np.median(tokens)),
            "token_threshold": token_threshold,
            "token_outliers": int(token_flags.sum()),
            "median_cost_usd": float(np.median(known_costs)) if len(known_costs) else None,
            "cost_threshold_usd": cost_threshold,
            "cost_outliers": int(cost_flags.sum()),
            "thresholds": f"above Q3 + {IQRS:g} IQR and above {MEDIANS:g} x the median, over >= {MIN_ATTEMPTS} "
            "attempts",
            "flagged": [
                {
                    "task": item.task_id,
                    "attempt": item.attempt,
                    "tokens": item.result["tokens"],
                    "cost_usd": item.result["cost_usd"],
                    "over": [name for name, flag in (("tokens", token), ("cost", cost)) if flag],
                }
                for item, token, cost in zip(items, token_flags, cost_flags)
                if token or cost
            ],
        }
