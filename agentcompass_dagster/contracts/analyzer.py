"""The Analyzer plugin contract (R-ATT-5): a per-attempt diagnostic beside the score, never part of it.

``analyze`` sees one evaluated attempt and returns a JSON-able result (``attempt.analysis_result[name]``);
``summarize`` turns every attempt's result into the request's section of analysis_summary.md|json;
``render`` writes that section.
``requires`` names the data an attempt must hold ("trajectory", "error", "usage") to be given to it.
``columns`` declares what the analyzer adds to task_results.parquet.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal, NamedTuple

from agentcompass_dagster.contracts.markdown import markdown_table
from agentcompass_dagster.contracts.records import EvaluatedAttempt, TaskSpec

# A flagged list longer than this shows its head in analysis_summary.md; the .json keeps all of it.
RENDERED_ITEMS = 20


class AttemptResult(NamedTuple):
    """One attempt's result of one analyzer, with the attempt it is about (what a summary lists)."""

    task_id: str
    attempt: int
    result: dict[str, Any]


class AnalysisColumn(NamedTuple):
    """A column an analyzer adds to task_results.parquet, one value per attempt: ``values`` turns the
    analyzer's result on each attempt (None where it did not run) into the column's values. The column
    is in every run's file, null throughout where the analyzer ran on no attempt, so that files of
    different runs concatenate.

    Example::

        columns = (AnalysisColumn("commands", "int", lambda results: [r and r["commands"] for r in results]),)
    """

    name: str
    type: Literal["int", "float", "bool", "str"]
    values: Callable[[list[dict[str, Any] | None]], list[Any]]


class Analyzer(ABC):
    name: ClassVar[str]
    family: ClassVar[str] = "general"
    datasets: ClassVar[frozenset[str] | None] = None
    requires: ClassVar[frozenset[str]] = frozenset()
    columns: ClassVar[tuple[AnalysisColumn, ...]] = ()

    def applies_to(self, attempt: EvaluatedAttempt) -> bool:
        """The attempt holds the data this analyzer needs."""
        have = {"trajectory"} if attempt.trajectory else set()
        if attempt.error:
            have.add("error")
        usage = attempt.usage
        if usage.input_tokens or usage.output_tokens or usage.cost_usd:
            have.add("usage")
        return self.requires <= have

    @abstractmethod
    def analyze(self, task: TaskSpec, attempt: EvaluatedAttempt) -> dict[str, Any]:
        """This analyzer's finding on one evaluated ``attempt`` of ``task``: a JSON-able mapping, kept as
        ``attempt.analysis_result[name]``. It never changes the score; one that raises is recorded apart
        (``meta.analysis_errors``) and the attempt keeps its verdict.

        Example::

            def analyze(self, task, attempt):
                commands = [s for s in attempt.trajectory if s.get("type") == "tool_call"]
                return {"commands": len(commands), "answered": attempt.final_answer is not None}
        """

    @abstractmethod
    def summarize(self, items: Sequence[AttemptResult]) -> dict[str, Any]:
        """The summary over every analysed attempt of a run (each ``item`` names its task and attempt, so
        a summary can list the flagged ones): the analyzer's section of analysis_summary.json, which
        ``render`` writes into analysis_summary.md.

        Example::

            def summarize(self, items):
                unanswered = [{"task": i.task_id, "attempt": i.attempt} for i in items if not i.result["answered"]]
                return {"attempts": len(items), "unanswered": unanswered}
        """

    def render(self, summary: dict[str, Any]) -> str:
        """Scalars as a table, a mapping as a table of its own, a list (flagged attempts) as bullets."""
        scalars = {key: value for key, value in summary.items() if not isinstance(value, (dict, list))}
        parts = [markdown_table([self.name, "value"], scalars.items())] if scalars else []
        for key, value in summary.items():
            if isinstance(value, dict):
                parts.append(markdown_table([key, "value"], value.items()))
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
        rest = ", ".join(
            f"{key} {markdown_code(value) if key == 'command' else value}"
            for key, value in item.items()
            if key not in ("task", "attempt")
        )
        return f"{where}: {rest}" if where else rest

    def description(self) -> str:
        """The first paragraph of the analyzer's docstring, under its heading in analysis_summary.md."""
        return " ".join((type(self).__doc__ or "").strip().split("\n\n")[0].split())


def markdown_code(text: object, limit: int = 200) -> str:
    """A command as inline code on one line, whatever it holds."""
    flat = " ".join(str(text).split())
    return "`" + (flat if len(flat) <= limit else flat[:limit] + "...").replace("`", "'") + "`"
