"""The analyzers' columns of task_results.parquet: per attempt, from its analysis results; null where
the analyzer did not run on the attempt (not selected, no trajectory, no usage). Their types are fixed
in ``runtime/parquet.py``; the outlier flags are computed over the run's attempts, like the summary's."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from agentcompass_dagster.analyzers.outliers import far_above
from agentcompass_dagster.analyzers.tool_errors import rate

Analyses = list[dict[str, Any] | None]


def _field(analyses: Analyses, analyzer: str, key: str) -> list[Any]:
    return [None if analysis is None or analyzer not in analysis else analysis[analyzer].get(key)
            for analysis in analyses]


def _outlier(values: list[Any]) -> list[bool | None]:
    numbers = np.array([math.nan if value is None else value for value in values], dtype=np.float64)
    flags, _ = far_above(numbers)
    return [None if value is None else bool(flag) for value, flag in zip(values, flags)]


def _rate(analyses: Analyses, part: str, whole: str) -> list[float | None]:
    return [None if analysis is None or "tool_errors" not in analysis
            else rate(analysis["tool_errors"][part], analysis["tool_errors"][whole]) for analysis in analyses]


def _joined(values: list[Any]) -> list[str | None]:
    return [None if value is None else ",".join(value) for value in values]


def analysis_columns(analyses: Analyses) -> dict[str, list[Any]]:
    """Each analysis column's values, one per attempt in the order of ``analyses``."""
    return {
        "loop_max_repeats": _field(analyses, "loops", "max_repeats"),
        "no_progress_streak": _field(analyses, "loops", "no_progress_streak"),
        "tool_error_rate": _rate(analyses, "tool_errors", "commands"),
        "malformed_call_rate": _rate(analyses, "malformed", "replies"),
        "token_outlier": _outlier(_field(analyses, "cost_outliers", "tokens")),
        "cost_outlier": _outlier(_field(analyses, "cost_outliers", "cost_usd")),
        "model_time_s": _field(analyses, "time_split", "model_s"),
        "tool_time_s": _field(analyses, "time_split", "tool_s"),
        "framework_time_s": _field(analyses, "time_split", "framework_s"),
        "gave_up": _field(analyses, "gave_up", "gave_up"),
        "reward_hacking": _joined(_field(analyses, "reward_hacking", "patterns")),
    }
