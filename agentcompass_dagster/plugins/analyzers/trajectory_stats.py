"""The analyzer of how long an attempt's trajectory was (``trajectory_stats``)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from agentcompass_dagster.plugins.analyzers.steps import opening
from agentcompass_dagster.contracts.analyzer import Analyzer, AttemptResult
from agentcompass_dagster.contracts.records import EvaluatedAttempt, TaskSpec


class TrajectoryStatsAnalyzer(Analyzer):
    """How long trajectories are: steps (after the opening prompt, as the trajectory page counts them), tool
    calls run, tokens and seconds per attempt."""

    name = "trajectory_stats"
    family = "trajectory"
    requires = frozenset({"trajectory"})

    def analyze(self, task: TaskSpec, attempt: EvaluatedAttempt) -> dict[str, Any]:
        # A call counts once, as the step that ran it: the model's reply that asked for it is a step of its own.
        return {
            "steps": len(attempt.trajectory) - opening(attempt.trajectory),
            "tool_calls": sum(step.get("type") in ("tool_call", "command") for step in attempt.trajectory),
            "tokens": attempt.usage.input_tokens + attempt.usage.output_tokens,
            "duration_s": round(attempt.duration_s, 3),
        }

    def summarize(self, items: Sequence[AttemptResult]) -> dict[str, Any]:
        results = [item.result for item in items]
        summary: dict[str, Any] = {"attempts": len(results)}
        for key in ("steps", "tool_calls", "tokens", "duration_s"):
            values = [r[key] for r in results]
            summary[f"{key} mean"] = round(statistics.fmean(values), 3)
            summary[f"{key} median"] = statistics.median(values)
            summary[f"{key} max"] = max(values)
        return summary
