"""Where an attempt's time went: the model, the tools, the framework."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentcompass_dagster.plugins.analyzers.steps import replies, tool_steps
from agentcompass_dagster.contracts.analyzer import AnalysisColumn, Analyzer, AttemptResult
from agentcompass_dagster.plugins.analyzers.columns import field
from agentcompass_dagster.contracts.records import EvaluatedAttempt, TaskSpec

FRAMEWORK_SHARE_FLAG = 0.5
FRAMEWORK_MIN_S = 5.0


def recorded(durations: list[float | None]) -> float | None:
    """The sum of the recorded durations; 0 without steps; None when steps were recorded without one."""
    known = [d for d in durations if d is not None]
    if durations and not known:
        return None
    return round(float(sum(known)), 3)


class TimeSplitAnalyzer(Analyzer):
    """Where an attempt's time went: model calls, tool calls (commands), and the framework.

    ``model_s`` sums the durations the model calls recorded (those that failed, a limit cut or a crash
    interrupted included: waiting for them is the model's time), ``tool_s`` those of the commands, and
    ``framework_s`` is the rest of the attempt's duration_s: opening and preparing the environment,
    checkpoints, the activity log, evaluation, closing. A part is null when its steps recorded no duration
    (the oracle's command), and then ``framework_s`` too. Flagged: framework time above half of the
    attempt's time and at least 5 s (overhead, not the agent, set the pace)."""

    name = "time_split"
    family = "time"
    requires = frozenset({"trajectory"})
    columns = (
        AnalysisColumn("model_time_s", "float", field("model_s")),
        AnalysisColumn("tool_time_s", "float", field("tool_s")),
        AnalysisColumn("framework_time_s", "float", field("framework_s")),
    )

    def analyze(self, task: TaskSpec, attempt: EvaluatedAttempt) -> dict[str, Any]:
        aborted = [
            step.get("duration_s")
            for step in attempt.trajectory
            if step.get("type") == "model_call" and step.get("status") == "aborted"
        ]
        model = recorded([reply.duration_s for reply in replies(attempt.trajectory)] + aborted)
        tool = recorded([step.duration_s for step in tool_steps(attempt.trajectory) if step.command is not None])
        framework = None if model is None or tool is None else round(max(attempt.duration_s - model - tool, 0.0), 3)
        return {"model_s": model, "tool_s": tool, "framework_s": framework}

    def summarize(self, items: Sequence[AttemptResult]) -> dict[str, Any]:
        timed = [item for item in items if item.result["framework_s"] is not None]
        totals = {
            part: round(sum(item.result[part] for item in timed), 3) for part in ("model_s", "tool_s", "framework_s")
        }
        whole = sum(totals.values())
        flagged = [
            item
            for item in timed
            if item.result["framework_s"] >= FRAMEWORK_MIN_S
            and item.result["framework_s"] > FRAMEWORK_SHARE_FLAG * sum(item.result.values())
        ]
        return {
            "attempts": len(items),
            "attempts_timed": len(timed),
            **{f"total_{part}": value for part, value in totals.items()},
            **{f"{part[:-2]}_share": round(value / whole, 4) if whole else None for part, value in totals.items()},
            "thresholds": f"framework time > {FRAMEWORK_SHARE_FLAG} of the attempt and >= {FRAMEWORK_MIN_S:g} s",
            "flagged": [{"task": item.task_id, "attempt": item.attempt, **item.result} for item in flagged],
        }
