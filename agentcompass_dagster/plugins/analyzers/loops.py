"""Repeated-command loops and no-progress streaks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentcompass_dagster.plugins.analyzers.steps import normalized, tool_steps
from agentcompass_dagster.contracts.analyzer import AnalysisColumn, Analyzer, AttemptResult
from agentcompass_dagster.plugins.analyzers.columns import field
from agentcompass_dagster.contracts.records import EvaluatedAttempt, TaskSpec

LOOP_REPEATS = 3
STUCK_STREAK = 3


class LoopsAnalyzer(Analyzer):
    """Whether the agent went round in circles: the same command run again and again, or tool calls that
    changed nothing.

    Per attempt, over the commands it ran (not the submit): ``max_repeats`` is the longest run of one
    command (whitespace collapsed) run back to back; ``no_progress_streak`` the longest run of back-to-back
    commands that each changed nothing: it gave exactly the command, exit code and output of an earlier
    call, or it failed with the same exit code and output as the call before it (another way to the same
    failure). Flagged: a loop at ``max_repeats`` >= 3, stuck at ``no_progress_streak`` >= 3. Re-running
    ``pytest`` after each edit is neither (other commands come between, and the output changes)."""

    name = "loops"
    family = "behaviour"
    requires = frozenset({"trajectory"})
    columns = (
        AnalysisColumn("loop_max_repeats", "int", field("max_repeats")),
        AnalysisColumn("no_progress_streak", "int", field("no_progress_streak")),
    )

    def analyze(self, task: TaskSpec, attempt: EvaluatedAttempt) -> dict[str, Any]:
        work = [step for step in tool_steps(attempt.trajectory) if step.is_work]
        longest, run, repeated, previous = 0, 0, None, None
        streak, stuck = 0, 0
        seen: set[tuple[str, int | None, str]] = set()
        last_failure: tuple[int | None, str] | None = None
        for step in work:
            command = normalized(step.command or "")
            run = run + 1 if command == previous else 1
            if run > longest:
                longest, repeated = run, command
            previous = command
            outcome = (command, step.exit_code, step.output)
            failure = (step.exit_code, step.output) if step.failed else None
            changed_nothing = outcome in seen or (failure is not None and failure == last_failure)
            streak = streak + 1 if changed_nothing else 0
            stuck = max(stuck, streak)
            seen.add(outcome)
            last_failure = failure
        result: dict[str, Any] = {"commands": len(work), "max_repeats": longest, "no_progress_streak": stuck}
        if longest >= LOOP_REPEATS:
            result["command"] = repeated
        return result

    def summarize(self, items: Sequence[AttemptResult]) -> dict[str, Any]:
        loops = [item.result["max_repeats"] >= LOOP_REPEATS for item in items]
        stuck = [item.result["no_progress_streak"] >= STUCK_STREAK for item in items]
        flagged = [item for item, loop, no_progress in zip(items, loops, stuck) if loop or no_progress]
        return {
            "attempts": len(items),
            "attempts_with_loop": sum(loops),
            "attempts_stuck": sum(stuck),
            "max_repeats": max(item.result["max_repeats"] for item in items),
            "longest_no_progress_streak": max(item.result["no_progress_streak"] for item in items),
            "thresholds": f"loop: one command >= {LOOP_REPEATS} times in a row; stuck: >= {STUCK_STREAK} calls in a "
            "row that changed nothing",
            "flagged": [
                {
                    "task": item.task_id,
                    "attempt": item.attempt,
                    "max_repeats": item.result["max_repeats"],
                    "no_progress_streak": item.result["no_progress_streak"],
                    **({"command": item.result["command"]} if "command" in item.result else {}),
                }
                for item in flagged
            ],
        }
