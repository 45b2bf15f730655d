"""Analyzers (R-ATT-5): per-attempt diagnostics beside the score, never part of it.

An analyzer is picked for a request by dataset (benchmark id), by the data it requires (an attempt
without a trajectory is not given to a trajectory analyzer, one that reports no token or cost is not
given a usage analyzer), by configuration
(``execution.analyzers``: names or families; unset = every built-in, [] = none) and by family. Its
result goes to ``attempt.analysis_result[name]``; if it raises, the failure goes to
``attempt.meta["analysis_errors"][name]`` and the score and the attempt's own error stay as they were.
"""

from __future__ import annotations

import re
import statistics
import traceback
from collections import Counter
from typing import Any, ClassVar, NamedTuple

from agentcompass_dagster import registry
from agentcompass_dagster.config import RunRequest
from agentcompass_dagster.runtime.scores import TaskScores
from agentcompass_dagster.runtime.types import EvaluatedAttempt, TaskSpec


# A flagged list longer than this shows its head in analysis_summary.md; the .json keeps all of it.
RENDERED_ITEMS = 20


class AttemptResult(NamedTuple):
    """One attempt's result of one analyzer, with the attempt it is about (what a summary lists)."""

    task_id: str
    attempt: int
    result: dict[str, Any]


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
        usage = attempt.usage
        if usage.input_tokens or usage.output_tokens or usage.cost_usd:
            have.add("usage")
        return self.requires <= have

    def analyze(self, task: TaskSpec, attempt: EvaluatedAttempt) -> dict[str, Any]:
        raise NotImplementedError

    def summarize(self, results: list[dict[str, Any]]) -> dict[str, Any]:
        raise NotImplementedError

    def summarize_attempts(self, items: list[AttemptResult]) -> dict[str, Any]:
        """The summary over every analysed attempt; an analyzer that lists flagged attempts overrides this
        to know which they are, the others summarise the results alone."""
        return self.summarize([item.result for item in items])

    def render(self, summary: dict[str, Any]) -> str:
        """Scalars as a table, a mapping as a table of its own, a list (flagged attempts) as bullets."""
        scalars = {key: value for key, value in summary.items() if not isinstance(value, (dict, list))}
        parts = [_table(self.name, scalars)] if scalars else []
        for key, value in summary.items():
            if isinstance(value, dict):
                parts.append(_table(key, value))
            elif isinstance(value, list) and not value:
                parts.append(f"{key}: none")
            elif isinstance(value, list):
                lines = [f"- {self.render_item(item)}" for item in value[:RENDERED_ITEMS]]
                if len(value) > RENDERED_ITEMS:
                    lines.append(f"- ... and {len(value) - RENDERED_ITEMS} more (analysis_summary.json)")
                parts.append(f"{key}:\n\n" + "\n".join(lines))
        return "\n\n".join(parts)

    def render_item(self, item: Any) -> str:
        if not isinstance(item, dict):
            return str(item)
        where = f"{item['task']} attempt {item['attempt']}" if {"task", "attempt"} <= item.keys() else ""
        rest = ", ".join(f"{key} {markdown_code(value) if key == 'command' else value}" for key, value in item.items()
                         if key not in ("task", "attempt"))
        return f"{where}: {rest}" if where else rest

    def description(self) -> str:
        """The first paragraph of the analyzer's docstring, under its heading in analysis_summary.md."""
        return " ".join((type(self).__doc__ or "").strip().split("\n\n")[0].split())


def _table(title: str, values: dict[str, Any]) -> str:
    return f"| {title} | value |\n|---|---|\n" + "\n".join(f"| {key} | {value} |" for key, value in values.items())


def markdown_code(text: object, limit: int = 200) -> str:
    """A command as inline code on one line, whatever it holds."""
    flat = " ".join(str(text).split())
    return "`" + (flat if len(flat) <= limit else flat[:limit] + "...").replace("`", "'") + "`"


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
    rows = scores.attempt_rows()
    analysed = [(int(row), results) for row, results in zip(rows, scores.decoded_analysis(rows)) if results]
    for analyzer in analyzers:
        items = [AttemptResult(*scores.attempt_key(row), results[analyzer.name])
                 for row, results in analysed if analyzer.name in results]
        if not items:
            continue
        try:
            summary = analyzer.summarize_attempts(items)
        except Exception as exc:
            data[analyzer.name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        data[analyzer.name] = summary
        heading = "\n\n".join(part for part in (f"## {analyzer.name}", analyzer.description()) if part)
        sections.append(f"{heading}\n\n{analyzer.render(summary)}")
    failures = scores.analysis_failures
    if not data and not failures:
        return None
    data["analysis_failures"] = failures
    markdown = "# Analysis\n\n" + "\n\n".join(sections) + f"\n\nAnalyzer failures: {failures}\n"
    return markdown, data
