"""The history of a sweep as people read it: one line per run of each benchmark x model, oldest first,
for `agentcompass history` and the HTML report's History tables (the frame is results.load_history)."""

from __future__ import annotations

from typing import Any

import pandas as pd

COLUMNS = ["date (UTC)", "benchmark", "model", "accuracy [95% CI]", "n/total", "errors", "cost", "regression", "run"]
NONE = "—"


def _present(value: Any) -> bool:
    """Neither None nor NaN / NaT (what a frame holds where a run recorded nothing)."""
    return not pd.isna(value)


def _accuracy(row: pd.Series) -> str:
    if not _present(row["accuracy"]):
        return NONE
    text = f"{row['accuracy']:.3f}"
    if _present(row["ci_low"]) and _present(row["ci_high"]):
        text += f" [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
    return text


def _regression(row: pd.Series) -> str:
    """The verdict of the regression check on this run against its baseline; a failure, the one to
    act on, is upper case with its p-value and the drop."""
    status = row["regression"]
    if not _present(status):
        return NONE
    if status != "failed":
        return str(status)
    p_value, diff = row["regression_p_value"], row["regression_diff"]
    return " ".join(
        ["FAILED", *([f"p={p_value:.3f}"] if _present(p_value) else []), *([f"{diff:+.2f}"] if _present(diff) else [])]
    )


def _count(value: Any) -> str:
    return str(int(value)) if _present(value) else NONE


def cells(row: pd.Series) -> dict[str, str]:
    """One run (a row of load_history) as the text of each of COLUMNS."""
    started = row["started_at"]
    cost = row["cost_usd"]
    return {
        "date (UTC)": started.strftime("%Y-%m-%d %H:%M") if _present(started) else NONE,
        "benchmark": str(row["benchmark"]),
        "model": str(row["model"]),
        "accuracy [95% CI]": _accuracy(row),
        "n/total": f"{_count(row['n'])}/{_count(row['total'])}",
        "errors": _count(row["errors"]),
        # An unknown cost of any attempt makes the whole unknown (load_history), never a partial sum.
        "cost": f"${cost:.4f}" if _present(cost) else "n/a",
        "regression": _regression(row),
        "run": str(row["run_id"]),
    }


def render(history: pd.DataFrame) -> str:
    """An aligned table with a header, the runs of one benchmark x model together (a blank line between
    groups) in the frame's order, which load_history makes oldest first."""
    rows = [cells(row) for _, row in history.iterrows()]
    widths = {column: max(len(column), *(len(row[column]) for row in rows)) for column in COLUMNS}
    lines = ["  ".join(column.ljust(widths[column]) for column in COLUMNS).rstrip()]
    previous = None
    for row in rows:
        group = (row["benchmark"], row["model"])
        if previous is not None and group != previous:
            lines.append("")
        previous = group
        lines.append("  ".join(row[column].ljust(widths[column]) for column in COLUMNS).rstrip())
    return "\n".join(lines) + "\n"
