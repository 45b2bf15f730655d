"""The analyzer of every attempt that ended in error: which kind of failure ended it (``error_category``)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

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
