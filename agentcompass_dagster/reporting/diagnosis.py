"""The report's diagnosis of one model's newest run on a benchmark: why it scored what it did.

How its attempts ended (correct, wrong, a failure the agent caused, an infrastructure error) with each
error's text grouped by message, the analyzers' flags (from the run's analysis_summary.json, so that the
thresholds are the analyzers' own) with links to the flagged attempts, what a task cost in tokens, money
and time (median, 90th percentile, largest, total over tasks) and the slowest attempts. Every attempt
links where the report's per-task table links its task (report_data.outcome_href).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentcompass_dagster.reporting.report_data import BenchmarkResults, RunPages, missing, outcome_href

if TYPE_CHECKING:
    import pandas as pd

# How an attempt ended. A failure the agent caused is scored (0, like a wrong answer); an infrastructure
# error is not scored and is re-run by the next run of the sweep (runtime/store/outcomes.py).
CORRECT, WRONG, AGENT_FAILURE, INFRASTRUCTURE = "correct", "wrong", "agent failure", "infrastructure error"
OUTCOMES = (CORRECT, WRONG, AGENT_FAILURE, INFRASTRUCTURE)
# The analyzers whose summaries list flagged attempts, in the order shown, with what a flag means.
FLAGS = (
    ("loops", "loop or no progress"),
    ("tool_errors", "tool errors or malformed replies"),
    ("cost_outliers", "token or cost outlier"),
    ("time_split", "framework time dominates"),
    ("gave_up", "gave up"),
    ("reward_hacking", "suspected reward hacking"),
)
MAX_LINKS = 20  # flagged or errored attempts linked per line; the rest are counted
SLOWEST = 5
# What a task used (its attempts summed): column(s), label, digits shown.
SPREADS = (
    (("input_tokens", "output_tokens"), "tokens (input + output)", 0),
    (("cost_usd",), "cost (USD)", 4),
    (("duration_s",), "time (s)", 2),
)


@dataclass(frozen=True)
class Link:
    label: str
    href: str | None
    note: str = ""


@dataclass(frozen=True)
class ErrorGroup:
    kind: str
    message: str
    attempts: int
    where: list[Link]


@dataclass(frozen=True)
class FlagCount:
    label: str
    analyzer: str
    flagged: int
    analysed: int
    threshold: str
    where: list[Link]
    error: str | None = None


@dataclass(frozen=True)
class Spread:
    what: str
    tasks: int
    median: float
    p90: float
    largest: float
    total: float
    digits: int


@dataclass(frozen=True)
class Slow:
    link: Link
    outcome: str
    duration_s: float
    model_s: Any
    tool_s: Any
    framework_s: Any


@dataclass(frozen=True)
class Diagnosis:
    model: str
    outcomes: dict[str, int]
    errors: list[ErrorGroup]
    # None: the run has no analysis_summary.json (analyzers off, or none applied).
    flags: list[FlagCount] | None
    spreads: list[Spread]
    slowest: list[Slow]


def outcome_of(row: Any) -> str:
    """How one attempt row of task_results ended (a record or a pandas row)."""
    if not missing(row["error"]):
        return INFRASTRUCTURE
    if not missing(row["failure"]):
        return AGENT_FAILURE
    return CORRECT if bool(row["correct"]) else WRONG


def _label(task_id: str, attempt: int) -> str:
    # Attempt 0 stands for a task that ended before any attempt.
    return task_id if attempt == 0 else f"{task_id} a{attempt}"


class _Targets:
    """The links to one model's attempts: where each task's detail file is (its category, whether the
    task ended in error) is read once per task."""

    def __init__(self, tasks: pd.DataFrame, run_dir: Path | None, base: Path, pages: RunPages) -> None:
        self._run_dir, self._base, self._pages = run_dir, base, pages
        every_error = tasks["error"].notna().groupby(tasks["task_id"], sort=False).all()
        first = tasks.drop_duplicates("task_id")
        self._tasks = {
            str(task_id): (category, bool(every_error[task_id]))
            for task_id, category in zip(first["task_id"], first["category"])
        }

    def link(self, task_id: str, attempt: int, note: str = "") -> Link:
        category, task_error = self._tasks.get(task_id, (None, False))
        href = outcome_href(self._run_dir, task_id, category, task_error, attempt, self._base, self._pages)
        return Link(_label(task_id, attempt), href, note)


def _error_groups(tasks: pd.DataFrame, targets: _Targets) -> list[ErrorGroup]:
    """Infrastructure errors, then agent failures, each message once with the attempts that ended so,
    the most frequent first (links to the first MAX_LINKS: a run may have thousands)."""
    ended = tasks[tasks["error"].notna() | tasks["failure"].notna()].sort_values(["task_id", "attempt"], kind="stable")
    groups: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for _, row in ended.iterrows():
        kind = outcome_of(row)
        message = str(row["error"] if kind == INFRASTRUCTURE else row["failure"])
        groups.setdefault((kind, message), []).append((str(row["task_id"]), int(row["attempt"])))
    ordered = sorted(groups.items(), key=lambda item: (-OUTCOMES.index(item[0][0]), -len(item[1]), item[0][1]))
    return [
        ErrorGroup(kind, message, len(where), [targets.link(*attempt) for attempt in where[:MAX_LINKS]])
        for (kind, message), where in ordered
    ]


def _note(flagged: dict[str, Any]) -> str:
    """What an analyzer recorded about a flagged attempt, beside its task and attempt (evidence: on the
    attempt's own page)."""
    parts = []
    for key, value in flagged.items():
        if key in ("task", "attempt", "evidence") or value is None:
            continue
        parts.append(f"{key} {'+'.join(map(str, value)) if isinstance(value, list) else value}")
    return ", ".join(parts)


def _flags(run_dir: Path | None, targets: _Targets) -> list[FlagCount] | None:
    from agentcompass_dagster.runtime.store.layout import ANALYSIS_JSON

    if run_dir is None or not (run_dir / ANALYSIS_JSON).is_file():
        return None
    data = json.loads((run_dir / ANALYSIS_JSON).read_text())
    flags = []
    for analyzer, label in FLAGS:
        summary = data.get(analyzer)
        if not isinstance(summary, dict):
            continue  # not selected, or applied to no attempt
        if "error" in summary:
            flags.append(FlagCount(label, analyzer, 0, 0, "", [], str(summary["error"])))
            continue
        flagged = summary.get("flagged", [])
        links = [targets.link(str(f["task"]), int(f["attempt"]), _note(f)) for f in flagged[:MAX_LINKS]]
        flags.append(
            FlagCount(
                label,
                analyzer,
                len(flagged),
                int(summary.get("attempts", 0)),
                str(summary.get("thresholds", "")),
                links,
            )
        )
    return flags


def _spreads(attempts: pd.DataFrame) -> list[Spread]:
    """What each task used, over the tasks where every attempt recorded it (a partial sum would read as
    the whole)."""
    import numpy as np

    out = []
    by_task = attempts.groupby("task_id", sort=False)
    for columns, what, digits in SPREADS:
        per_column = [by_task[c].sum(min_count=1).where(by_task[c].count() == by_task[c].size()) for c in columns]
        values = sum(per_column[1:], per_column[0]).dropna().to_numpy(dtype=float)
        if len(values):
            out.append(
                Spread(
                    what,
                    len(values),
                    float(np.median(values)),
                    float(np.percentile(values, 90)),
                    float(values.max()),
                    float(values.sum()),
                    digits,
                )
            )
    return out


def _slowest(attempts: pd.DataFrame, targets: _Targets) -> list[Slow]:
    timed = attempts[attempts["duration_s"].notna()].sort_values(
        ["duration_s", "task_id", "attempt"], ascending=[False, True, True], kind="stable"
    )
    return [
        Slow(
            targets.link(str(row["task_id"]), int(row["attempt"])),
            outcome_of(row),
            float(row["duration_s"]),
            row["model_time_s"],
            row["tool_time_s"],
            row["framework_time_s"],
        )
        for _, row in timed.head(SLOWEST).iterrows()
    ]


def diagnose(b: BenchmarkResults, model: str, run_dir: Path | None, base: Path, pages: RunPages) -> Diagnosis:
    """The diagnosis of ``model``'s newest run (``run_dir``, its trajectory pages ``pages``) on ``b``;
    links relative to ``base``."""
    tasks = b.model_tasks(model)
    targets = _Targets(tasks, run_dir, base, pages)
    kinds = [outcome_of(row) for row in tasks[["error", "failure", "correct"]].to_dict("records")]
    attempts = tasks[tasks["attempt"] > 0]
    return Diagnosis(
        model,
        {kind: kinds.count(kind) for kind in OUTCOMES},
        _error_groups(tasks, targets),
        _flags(run_dir, targets),
        _spreads(attempts) if not attempts.empty else [],
        _slowest(attempts, targets),
    )


def share(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a percentage for the template."""
    return "—" if not whole else f"{100 * part / whole:.0f}%"
