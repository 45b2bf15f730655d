"""The built-in analyzers of every attempt: which kind of failure ended it (``error_category``) and how
long its trajectory was (``trajectory_stats``)."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from agentcompass_dagster.plugins.analyzers.steps import opening
from agentcompass_dagster.contracts.analyzer import Analyzer, AttemptResult
from agentcompass_dagster.contracts.records import EvaluatedAttempt, TaskSpec

_ERROR_CATEGORIES = (
    ("timeout", re.compile(r"timed? ?out|TimeoutError|deadline", re.I)),
    ("model_api", re.compile(r"rate ?limit|\b429\b|APIConnection|APIStatus|openai|model call", re.I)),
    ("environment", re.compile(r"environment|No space left|Permission denied|bwrap|docker|container|OSError", re.I)),
)
_EXCEPTION = re.compile(r"^(\w+(?:\.\w+)*(?:Error|Exception|Exit|Interrupt))\b")


class ErrorCategoryAnalyzer(Analyzer):
    """Which kind of failure ended an attempt: timeout, model API, environment, evaluation, harness
    exception (by exception type), a returned error, or none."""

    name = "error_category"
    family = "errors"

    def analyze(self, task: TaskSpec, attempt: EvaluatedAttempt) -> dict[str, Any]:
        if attempt.error is None:
            return {"category": "none"}
        if attempt.status == "timeout":
            return {"category": "timeout"}
        if attempt.eval_error and not attempt.run_error:
            return {"category": "evaluation"}
        # A traceback's last line is the exception itself; the lines above are code, which would match
        # anything.
        last = attempt.error.strip().splitlines()[-1]
        for category, pattern in _ERROR_CATEGORIES:
            if pattern.search(last):
                return {"category": category}
        exception = _EXCEPTION.match(last)
        if exception and "Traceback" in attempt.error:
            return {"category": "harness_exception", "exception": exception.group(1)}
        return {"category": "returned_error"}

    def summarize(self, items: Sequence[AttemptResult]) -> dict[str, Any]:
        return dict(Counter(item.result["category"] for item in items).most_common())


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
