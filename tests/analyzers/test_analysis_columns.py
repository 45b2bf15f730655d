"""The columns of task_results.parquet an analyzer declares (Analyzer.columns): the built-ins declare
theirs, and a third party's analyzer adds its own without touching the framework."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from conftest import run_cli, write_sweep

from agentcompass_dagster.contracts.analyzer import AnalysisColumn, Analyzer, AttemptResult
from agentcompass_dagster.contracts.records import EvaluatedAttempt, TaskSpec
from agentcompass_dagster.declarations import registry
from agentcompass_dagster.plugins.analyzers.columns import field
from agentcompass_dagster.reporting.results import load_task_results
from agentcompass_dagster.runtime.results.parquet import analysis_columns


class AnswerLengthAnalyzer(Analyzer):
    """A third party's analyzer, named by class path in the sweep: the length of the final answer."""

    name = "answer_length"
    columns = (AnalysisColumn("answer_chars", "int", field("chars")),)

    def analyze(self, task: TaskSpec, attempt: EvaluatedAttempt) -> dict[str, Any]:
        return {"chars": len(attempt.final_answer or "")}

    def summarize(self, items: Sequence[AttemptResult]) -> dict[str, Any]:
        return {"attempts": len(items)}


def test_each_built_in_analyzer_declares_the_columns_it_adds() -> None:
    """Issue 40: the analyzers declare their columns; runtime/results/parquet.py names none of them (it
    hard-coded the eleven, and the analyzer package held their recipes apart from the analyzers)."""
    declared = {(analyzer, column.name) for analyzer, column in analysis_columns()}
    assert declared == {
        ("loops", "loop_max_repeats"),
        ("loops", "no_progress_streak"),
        ("tool_errors", "tool_error_rate"),
        ("tool_errors", "malformed_call_rate"),
        ("cost_outliers", "token_outlier"),
        ("cost_outliers", "cost_outlier"),
        ("time_split", "model_time_s"),
        ("time_split", "tool_time_s"),
        ("time_split", "framework_time_s"),
        ("gave_up", "gave_up"),
        ("reward_hacking", "reward_hacking"),
    }
    source = (Path(registry.__file__).parents[1] / "runtime" / "results" / "parquet.py").read_text()
    assert not [name for _, name in declared if f'"{name}"' in source]


def test_an_analyzer_named_by_class_path_adds_its_column_to_task_results(tmp_path: Path) -> None:
    """R-ATT-5, issue 40: a sweep naming a third party's analyzer by class path gets its declared column in
    task_results.parquet, with its type, and load_task_results reads it beside the built-ins' columns."""
    path = f"{__name__}:AnswerLengthAnalyzer"
    sweep = write_sweep(
        tmp_path,
        benchmarks=[{"id": "demo", "tasks": ["count-errors", "create-hello"]}],
        execution={"analyzers": [path, "loops"]},
    )
    assert run_cli("run", sweep, "--direct") == 0
    (parquet,) = (tmp_path / "results").rglob("task_results.parquet")
    assert str(pq.read_schema(parquet).field("answer_chars").type) == "int64"
    frame = load_task_results(tmp_path / "results").set_index("task_id")
    assert frame["answer_chars"].notna().all() and frame["answer_chars"].ge(0).all()
    assert frame["loop_max_repeats"].notna().all() and frame["gave_up"].isna().all()
