"""A run's analysis in a few figures, for the metrics asset in Dagster: a table of them per model and
the counts summed over models (``suspected_reward_hacking`` first), read from each run's
analysis_summary.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentcompass_dagster.contracts.markdown import markdown_table
from agentcompass_dagster.runtime.store.layout import ANALYSIS_JSON

# (figure, analyzer, key of its summary, summed over models: counts are, rates and shares are not).
FIGURES = (
    ("suspected_reward_hacking", "reward_hacking", "suspected", True),
    ("gave_up", "gave_up", "gave_up", True),
    ("loops", "loops", "attempts_with_loop", True),
    ("stuck", "loops", "attempts_stuck", True),
    ("token_outliers", "cost_outliers", "token_outliers", True),
    ("cost_outliers", "cost_outliers", "cost_outliers", True),
    ("tool_error_rate", "tool_errors", "tool_error_rate", False),
    ("malformed_call_rate", "tool_errors", "malformed_call_rate", False),
    ("model_time_share", "time_split", "model_share", False),
    ("tool_time_share", "time_split", "tool_share", False),
    ("framework_time_share", "time_split", "framework_share", False),
)


def run_figures(run_dir: Path) -> dict[str, Any]:
    """The figures of one run directory's analysis (none without an analysis_summary.json)."""
    path = run_dir / ANALYSIS_JSON
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {
        figure: data[analyzer][key]
        for figure, analyzer, key, _ in FIGURES
        if isinstance(data.get(analyzer), dict) and key in data[analyzer]
    }


def figures_table(per_model: dict[str, dict[str, Any]]) -> str:
    """Models as rows, the figures any of them has as columns."""
    names = [figure for figure, *_ in FIGURES if any(figure in figures for figures in per_model.values())]
    if not names:
        return "_no analysis yet_"
    return markdown_table(
        ["model", *names],
        [
            [model, *("" if figures.get(name) is None else figures[name] for name in names)]
            for model, figures in per_model.items()
        ],
    )


def summed_counts(per_model: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Each count figure summed over the models that have it."""
    return {
        figure: sum(figures[figure] for figures in per_model.values() if figure in figures)
        for figure, _, _, summed in FIGURES
        if summed and any(figure in figures for figures in per_model.values())
    }
