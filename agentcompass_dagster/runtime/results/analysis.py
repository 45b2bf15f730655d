"""Analyzers (R-ATT-5): per-attempt diagnostics beside the score, never part of it.

An analyzer is picked for a request by dataset (benchmark id), by the data it requires (an attempt
without a trajectory is not given to a trajectory analyzer, one that reports no token or cost is not
given a usage analyzer), by configuration
(``execution.analyzers``: names or families; unset = every built-in, [] = none) and by family. Its
result goes to ``attempt.analysis_result[name]``; if it raises, the failure goes to
``attempt.meta["analysis_errors"][name]`` and the score and the attempt's own error stay as they were.
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from agentcompass_dagster.declarations import registry
from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.contracts.analyzer import Analyzer, AttemptResult
from agentcompass_dagster.runtime.results.scores import TaskScores
from agentcompass_dagster.contracts.records import EvaluatedAttempt, TaskSpec


def select_analyzers(request: EvalRequest) -> list[Analyzer]:
    """The analyzers for this request: configured names, families or class paths (all registered when
    unset), keeping those whose datasets include the benchmark."""
    wanted = request.execution.analyzers
    registered = registry.analyzers.ids()
    named_by_class = [name for name in wanted or [] if name not in registered and registry.is_class_path(name)]
    selected = []
    for analyzer_id in [*registered, *named_by_class]:
        cls = registry.analyzers.get(analyzer_id, "execution.analyzers")
        if wanted is not None and analyzer_id not in wanted and cls.family not in wanted:
            continue
        if cls.datasets is not None and request.benchmark.id not in cls.datasets:
            continue
        selected.append(cls())
    return selected


def check_analyzer_names(request: EvalRequest) -> None:
    """Each configured name is a registered analyzer, the family of one, or an analyzer's class path."""
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


class AttemptResults(Sequence[AttemptResult]):
    """The attempts that have a result of one analyzer, each made when asked for: a list of them would
    cost about 80 bytes an attempt (17 MB at 100,000 attempts). ``analyses`` is
    ``scores.decoded_analysis(rows)``, shared by every analyzer's view."""

    def __init__(self, scores: TaskScores, rows: np.ndarray, analyses: list[dict[str, Any] | None], name: str) -> None:
        self._scores, self._rows, self._analyses, self._name = scores, rows, analyses, name
        self._positions = np.fromiter(
            (i for i, analysis in enumerate(analyses) if analysis and name in analysis), dtype=np.int64
        )

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> AttemptResult: ...

    @overload
    def __getitem__(self, index: slice) -> list[AttemptResult]: ...

    def __getitem__(self, index: int | slice) -> AttemptResult | list[AttemptResult]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        position = int(self._positions[index])
        analysis = self._analyses[position]
        assert analysis is not None  # positions hold only analysed attempts
        return AttemptResult(*self._scores.attempt_key(int(self._rows[position])), analysis[self._name])


def summarize_analysis(analyzers: list[Analyzer], scores: TaskScores) -> tuple[str, dict[str, Any]] | None:
    """analysis_summary.md and .json over every analysed attempt of these tasks, or None."""
    data: dict[str, Any] = {}
    sections = []
    rows = scores.attempt_rows()
    analyses = scores.decoded_analysis(rows)
    for analyzer in analyzers:
        items = AttemptResults(scores, rows, analyses, analyzer.name)
        if not items:
            continue
        try:
            summary = analyzer.summarize(items)
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
