"""Analyzers (R-ATT-5): per-attempt diagnostics beside the score, never part of it.

An analyzer is picked for a request by dataset (benchmark id), by the data it requires (an attempt
without a trajectory is not given to a trajectory analyzer), by configuration
(``execution.analyzers``: names or families; unset = every built-in, [] = none) and by family. Its
result goes to ``attempt.analysis_result[name]``; if it raises, the failure goes to
``attempt.meta["analysis_errors"][name]`` and the score and the attempt's own error stay as they were.
"""

from __future__ import annotations

import re
import statistics
import traceback
from collections import Counter
from typing import Any, ClassVar

from agentcompass_dagster import registry
from agentcompass_dagster.config import RunRequest
from agentcompass_dagster.runtime.scores import TaskScores
from agentcompass_dagster.runtime.types import EvaluatedAttempt, TaskSpec


class Analyzer:
    name: ClassVar[str]
    family: ClassVar[str] = "general"
    datasets: ClassVar[frozenset[str] | None] = None
    requires: ClassVar[frozenset[str]] = frozenset()

    def applies_to(self, attempt: EvaluatedAttempt) -> bool:
        """The attempt holds the data this analyzer needs."""
        have = {"trajectory"} if attempt.trajectory else set()
        if attempt.error:
            have.add("error")
        return self.requires <= have

    def analyze(self, task: TaskSpec, attempt: EvaluatedAttempt) -> dict[str, Any]:
        raise NotImplementedError

    def summarize(self, results: list[dict[str, Any]]) -> dict[str, Any]:
        raise NotImplementedError

    def render(self, summary: dict[str, Any]) -> str:
        rows = "\n".join(f"| {key} | {value} |" for key, value in summary.items())
        return f"| {self.name} | value |\n|---|---|\n{rows}"


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

    def summarize(self, results: list[dict[str, Any]]) -> dict[str, Any]:
        return dict(Counter(r["category"] for r in results).most_common())


class TrajectoryStatsAnalyzer(Analyzer):
    """How long trajectories are: steps, tool calls, tokens and seconds per attempt."""

    name = "trajectory_stats"
    family = "trajectory"
    requires = frozenset({"trajectory"})

    def analyze(self, task: TaskSpec, attempt: EvaluatedAttempt) -> dict[str, Any]:
        tool_calls = 0
        for step in attempt.trajectory:
            calls = step.get("tool_calls")
            tool_calls += len(calls) if isinstance(calls, list) else int(step.get("type") in ("tool_call", "command"))
        return {
            "steps": len(attempt.trajectory),
            "tool_calls": tool_calls,
            "tokens": attempt.usage.input_tokens + attempt.usage.output_tokens,
            "duration_s": round(attempt.duration_s, 3),
        }

    def summarize(self, results: list[dict[str, Any]]) -> dict[str, Any]:
        summary: dict[str, Any] = {"attempts": len(results)}
        for key in ("steps", "tool_calls", "tokens", "duration_s"):
            values = [r[key] for r in results]
            summary[f"{key} mean"] = round(statistics.fmean(values), 3)
            summary[f"{key} median"] = statistics.median(values)
            summary[f"{key} max"] = max(values)
        return summary


def select_analyzers(request: RunRequest) -> list[Analyzer]:
    """The analyzers for this request: configured names or families (all registered when unset),
    keeping those whose datasets include the benchmark."""
    wanted = request.execution.analyzers
    selected = []
    for analyzer_id in registry.analyzers.ids():
        cls = registry.analyzers.get(analyzer_id, "execution.analyzers")
        if wanted is not None and analyzer_id not in wanted and cls.family not in wanted:
            continue
        if cls.datasets is not None and request.benchmark.id not in cls.datasets:
            continue
        selected.append(cls())
    return selected


def check_analyzer_names(request: RunRequest) -> None:
    """Each configured name is a registered analyzer or the family of one."""
    known = {analyzer_id: registry.analyzers.get(analyzer_id) for analyzer_id in registry.analyzers.ids()}
    families = {cls.family for cls in known.values()}
    for name in request.execution.analyzers or []:
        if name not in known and name not in families:
            registry.analyzers.get(name, "execution.analyzers")


def analyze_attempt(analyzers: list[Analyzer], task: TaskSpec, attempt: EvaluatedAttempt) -> None:
    results: dict[str, Any] = {}
    failures: dict[str, str] = {}
    for analyzer in analyzers:
        if not analyzer.applies_to(attempt):
            continue
        try:
            results[analyzer.name] = analyzer.analyze(task, attempt)
        except Exception as exc:
            failures[analyzer.name] = "".join(traceback.format_exception(exc)).strip()
    if results:
        attempt.analysis_result = results
    if failures:
        attempt.meta["analysis_errors"] = failures


def summarize_analysis(analyzers: list[Analyzer], scores: TaskScores) -> tuple[str, dict[str, Any]] | None:
    """analysis_summary.md and .json over every analysed attempt of these tasks, or None."""
    data: dict[str, Any] = {}
    sections = []
    for analyzer in analyzers:
        results = list(scores.analysis_results(analyzer.name))
        if not results:
            continue
        try:
            summary = analyzer.summarize(results)
        except Exception as exc:
            data[analyzer.name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        data[analyzer.name] = summary
        sections.append(f"## {analyzer.name}\n\n{analyzer.render(summary)}")
    failures = scores.analysis_failures
    if not data and not failures:
        return None
    data["analysis_failures"] = failures
    markdown = "# Analysis\n\n" + "\n\n".join(sections) + f"\n\nAnalyzer failures: {failures}\n"
    return markdown, data
