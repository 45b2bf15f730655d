"""Tool-error rate and malformed-call rate."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentcompass_dagster.plugins.analyzers.steps import replies, tool_steps
from agentcompass_dagster.contracts.analyzer import AnalysisColumn, Analyzer, AttemptResult
from agentcompass_dagster.plugins.analyzers.columns import Results
from agentcompass_dagster.contracts.records import EvaluatedAttempt, TaskSpec

ERROR_RATE_FLAG = 0.5
MIN_CALLS = 2


def rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def rates(part: str, whole: str) -> Callable[[Results], list[float | None]]:
    """The column of one count of the results over another."""
    return lambda results: [None if result is None else rate(result[part], result[whole]) for result in results]


class ToolErrorsAnalyzer(Analyzer):
    """How often the agent's tools failed, and how often the model's reply held no usable tool call.

    ``tool_error_rate``: of the commands the agent ran (not the submit), those that exited nonzero or timed
    out (a nonzero exit is not always a mistake: ``grep`` finding nothing exits 1). ``malformed_call_rate``:
    of the model's replies, those the harness could not use: arguments that are not the JSON the tool
    takes or an unknown tool (tool_agent ends the attempt there), any reply mini rejected (no tool call,
    bad JSON, unknown tool: its format error), a reply cut at the token limit without a tool call.
    Flagged: a tool error rate >= 0.5 over at least 2 commands, or any malformed reply."""

    name = "tool_errors"
    family = "errors"
    requires = frozenset({"trajectory"})
    columns = (
        AnalysisColumn("tool_error_rate", "float", rates("tool_errors", "commands")),
        AnalysisColumn("malformed_call_rate", "float", rates("malformed", "replies")),
    )

    def analyze(self, task: TaskSpec, attempt: EvaluatedAttempt) -> dict[str, Any]:
        steps = tool_steps(attempt.trajectory)
        work = [step for step in steps if step.is_work]
        model_replies = replies(attempt.trajectory)
        # A reply is malformed once, however many of its calls were unusable.
        malformed = {step.turn for step in steps if step.malformed} | {r.turn for r in model_replies if r.unusable}
        return {
            "commands": len(work),
            "tool_errors": sum(step.failed for step in work),
            "replies": len(model_replies),
            "malformed": len(malformed),
        }

    def summarize(self, items: Sequence[AttemptResult]) -> dict[str, Any]:
        totals = {
            key: sum(item.result[key] for item in items) for key in ("commands", "tool_errors", "replies", "malformed")
        }
        flagged = [
            item
            for item in items
            if item.result["malformed"]
            or (
                item.result["commands"] >= MIN_CALLS
                and item.result["tool_errors"] / item.result["commands"] >= ERROR_RATE_FLAG
            )
        ]
        return {
            "attempts": len(items),
            **totals,
            "tool_error_rate": rate(totals["tool_errors"], totals["commands"]),
            "malformed_call_rate": rate(totals["malformed"], totals["replies"]),
            "attempts_with_malformed_calls": sum(bool(item.result["malformed"]) for item in items),
            "thresholds": f"tool error rate >= {ERROR_RATE_FLAG} over >= {MIN_CALLS} commands, or any malformed reply",
            "flagged": [
                {
                    "task": item.task_id,
                    "attempt": item.attempt,
                    "tool_error_rate": rate(item.result["tool_errors"], item.result["commands"]),
                    "malformed": item.result["malformed"],
                }
                for item in flagged
            ],
        }
