"""Attempts that gave up: an answer without any work, or a blank one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentcompass_dagster.plugins.analyzers.steps import tool_steps
from agentcompass_dagster.contracts.analyzer import AnalysisColumn, Analyzer, AttemptResult
from agentcompass_dagster.plugins.analyzers.columns import field
from agentcompass_dagster.contracts.records import EvaluatedAttempt, TaskSpec


class GaveUpAnalyzer(Analyzer):
    """Attempts that gave up instead of failing at the task.

    An attempt that ended with an answer (a submit, tool_agent's reply without a tool call, mini's
    submitting command), without a run error, and was not scored correct, gave up when it ran no command
    before that answer (``no_work``) or its answer is blank (``empty_answer``). A correct attempt never
    gave up (a task whose answer needs no command, a file task submitted with an empty answer); an attempt
    that ended in an error or at a limit gave no answer. A harness that submits a command's output
    (miniswe) gives a blank answer for a file task: a failed one counts as ``empty_answer``."""

    name = "gave_up"
    family = "behaviour"
    requires = frozenset({"trajectory"})
    columns = (AnalysisColumn("gave_up", "bool", field("gave_up")),)

    def analyze(self, task: TaskSpec, attempt: EvaluatedAttempt) -> dict[str, Any]:
        answer = attempt.final_answer
        if answer is None or attempt.correct or attempt.run_error is not None:
            return {"gave_up": False}
        if not any(step.is_work for step in tool_steps(attempt.trajectory)):
            return {"gave_up": True, "reason": "no_work"}
        if not answer.strip():
            return {"gave_up": True, "reason": "empty_answer"}
        return {"gave_up": False}

    def summarize(self, items: Sequence[AttemptResult]) -> dict[str, Any]:
        flagged = [item for item in items if item.result["gave_up"]]
        reasons = [item.result["reason"] for item in flagged]
        return {
            "attempts": len(items),
            "gave_up": len(flagged),
            "rate": round(len(flagged) / len(items), 4),
            "no_work": reasons.count("no_work"),
            "empty_answer": reasons.count("empty_answer"),
            "flagged": [
                {"task": item.task_id, "attempt": item.attempt, "reason": item.result["reason"]} for item in flagged
            ],
        }
