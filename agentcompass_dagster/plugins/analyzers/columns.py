"""The analyzers' columns of task_results.parquet: per attempt, from its analysis results; null where
the analyzer did not run on the attempt (not selected, no trajectory, no usage). Their types are fixed
in ``runtime/results/parquet.py``; the outlier flags are computed over the run's attempts, like the summary's."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from agentcompass_dagster.plugins.analyzers.outliers import far_above
from agentcompass_dagster.plugins.analyzers.tool_errors import rate

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


# Column -> (the analyzer it comes from, how its values are made from the analyses).
COLUMNS: dict[str, tuple[str, Callable[[Analyses], list[Any]]]] = {
    "loop_max_repeats": ("loops", lambda a: _field(a, "loops", "max_repeats")),
    "no_progress_streak": ("loops", lambda a: _field(a, "loops", "no_progress_streak")),
    "tool_error_rate": ("tool_errors", lambda a: _rate(a, "tool_errors", "commands")),
    "malformed_call_rate": ("tool_errors", lambda a: _rate(a, "malformed", "replies")),
    "token_outlier": ("cost_outliers", lambda a: _outlier(_field(a, "cost_outliers", "tokens"))),
    "cost_outlier": ("cost_outliers", lambda a: _outlier(_field(a, "cost_outliers", "cost_usd"))),
    "model_time_s": ("time_split", lambda a: _field(a, "time_split", "model_s")),
    "tool_time_s": ("time_split", lambda a: _field(a, "time_split", "tool_s")),
    "framework_time_s": ("time_split", lambda a: _field(a, "time_split", "framework_s")),
    "gave_up": ("gave_up", lambda a: _field(a, "gave_up", "gave_up")),
    "reward_hacking": ("reward_hacking", lambda a: _joined(_field(a, "reward_hacking", "patterns"))),
}


def analysis_columns(analyses: Analyses) -> Iterator[tuple[str, list[Any] | None]]:
    """Each analysis column's values, one per attempt in the order of ``analyses``, or None when its
    analyzer ran on no attempt (a column of nulls, made without a list: at 100,000 attempts the lists
    of a run whose analyzers did not apply cost 26 MB). One column at a time, for the same reason."""
    # Attempts with equal results share one dict, so the distinct ones are few.
    present = {name for analysis in {id(a): a for a in analyses if a}.values() for name in analysis}
    for column, (analyzer, values) in COLUMNS.items():
        yield column, values(analyses) if analyzer in present else None
