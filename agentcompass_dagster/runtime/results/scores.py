"""What finalisation needs of a request's finished tasks, held column by column.

A task's detail stays on disk; the orchestrator keeps its scores, counts, usage and analysis here, at
about a hundred bytes a task, so memory does not grow with what details hold (R-FIN-1 merges reused
and new tasks in selected order from these columns). Reuse reads only these fields of a source detail
(``DetailView``), which skips trajectories, artifacts and plans without building them. The views name
their fields after the models they read (runtime/store/outcomes.py); tests/test_house.py fails when one of those
fields is renamed or retyped in the model alone.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pydantic_core
from pydantic import Field

from agentcompass_dagster.runtime.store.redact import redact_text
from agentcompass_dagster.contracts.records import EvaluatedAttempt, LimitHit, StoredRecord, TaskSpec
from agentcompass_dagster.contracts.request import Strategy
from agentcompass_dagster.runtime.store.outcomes import TaskDetail


class UsageView(StoredRecord):
    """The fields of Usage that the task and attempt columns hold."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0


class AttemptMetaView(StoredRecord):
    """The key of EvaluatedAttempt.meta that finalisation reads (EvaluatedAttempt.analysis_errors)."""

    analysis_errors: dict[str, str] = Field(default_factory=dict)


class AttemptView(StoredRecord):
    """The fields of an evaluated attempt that metrics, summaries, Parquet and analysis read."""

    attempt: int
    correct: bool = False
    score: float = 0.0
    run_error: str | None = None
    eval_error: str | None = None
    failure: str | None = None
    limit: LimitHit | None = None
    rewards: dict[str, float] = Field(default_factory=dict)
    analysis_result: dict[str, Any] | None = None
    usage: UsageView = Field(default_factory=UsageView)
    duration_s: float = 0.0
    meta: AttemptMetaView = Field(default_factory=AttemptMetaView)
    artifacts: dict[str, Any] = Field(default_factory=dict)

    @property
    def error(self) -> str | None:
        return self.run_error or self.eval_error

    @property
    def analysis_errors(self) -> dict[str, str]:
        return self.meta.analysis_errors


class DetailView(StoredRecord):
    """A task detail as finalisation reads it: the same names as TaskDetail, without the bulk."""

    task_id: str
    category: str | None = None
    k: int = 1
    strategy: Strategy = "avg"
    attempts: dict[str, AttemptView] = Field(default_factory=dict)
    attempts_tried: int = 0
    correct: bool = False
    score: float = 0.0
    error: str | None = None
    failure: str | None = None

    @property
    def is_error(self) -> bool:
        return self.error is not None


Scored = TaskDetail | DetailView


def _headline(text: str) -> str:
    """What an error says in a line: a traceback's last line (the exception), else its first."""
    if not text:
        return ""
    lines = text.strip().splitlines()
    return (lines[-1] if lines[0].startswith("Traceback") else lines[0])[:200]


def _replay_line(replay: dict[str, Any]) -> str:
    line = f"replayed {replay.get('replayed')} of {replay.get('recorded')} recorded turns"
    diverged = replay.get("diverged_at")
    return line + (
        f"; the request of turn {diverged} differed: live from there" if diverged is not None else "; live after them"
    )


def _last_line(text: str) -> str:
    return redact_text(text.strip().splitlines()[-1][:500]) if text.strip() else ""


class TaskScores:
    """The finished tasks of one request, one row per task and one per attempt (a task that ended
    before any attempt has one attempt row numbered 0). Rows arrive in completion order; readers get
    them in selected order."""

    def __init__(self, tasks: Sequence[TaskSpec]) -> None:
        self.tasks = tasks
        self._held = bytearray(len(tasks))
        self.position = array("l")
        self.k = array("I")
        self.tried = array("I")
        self.correct_attempts = array("I")
        self.correct = array("B")
        self.score = array("d")
        self.is_error = array("B")
        self.reused = array("B")
        self.pass_strategy = array("B")
        self.errors: dict[int, str] = {}
        # Tasks the agent failed on its own (a limit, a timeout, no verdict): evaluated, scored 0.
        self.failures: dict[int, str] = {}
        self.attempt_task = array("l")
        self.attempt = array("I")
        self.attempt_correct = array("B")
        self.attempt_score = array("d")
        self.input_tokens = array("q")
        self.output_tokens = array("q")
        self.cost_usd = array("d")
        self.duration_s = array("d")
        self.attempt_errors: dict[int, str] = {}
        self.attempt_failures: dict[int, str] = {}
        # The limit an attempt hit (LimitHit.message): few do, so by attempt row like the texts above.
        self.attempt_limits: dict[int, str] = {}
        # An attempt's named rewards (Evaluation.rewards), by attempt row: only some benchmarks give them.
        self.attempt_rewards: dict[int, dict[str, float]] = {}
        self.analysis: list[bytes | None] = []
        self.analysis_failures = 0
        # (position, "task@attempt", what its rerun replayed) of attempts an agent CLI resumed by replay.
        self.replays: list[tuple[int, str, str]] = []
        # Analyzer results repeat (a category, a count): one copy of each distinct encoding.
        self._shared: dict[bytes, bytes] = {}

    def __len__(self) -> int:
        return len(self.position)

    def holds(self, position: int) -> bool:
        return bool(self._held[position])

    def add(self, position: int, detail: Scored, reused: bool = False) -> None:
        if self._held[position]:
            return
        self._held[position] = 1
        row = len(self.position)
        attempts: list[EvaluatedAttempt | AttemptView] = list(detail.attempts.values())
        self.position.append(position)
        self.k.append(detail.k)
        self.tried.append(detail.attempts_tried)
        self.correct_attempts.append(sum(a.correct and a.error is None for a in attempts))
        self.correct.append(detail.correct)
        self.score.append(detail.score)
        self.is_error.append(detail.is_error)
        self.reused.append(reused)
        self.pass_strategy.append(detail.strategy == "pass")
        if detail.error is not None:
            self.errors[row] = detail.error
        elif detail.failure is not None:
            self.failures[row] = detail.failure
        if not attempts:
            self._add_attempt(row, 0, False, 0.0, 0, 0, math.nan, 0.0, detail.error, None, None, None)
        for a in attempts:
            if a.rewards:
                self.attempt_rewards[len(self.attempt)] = a.rewards
            self._add_attempt(
                row,
                a.attempt,
                a.correct and a.error is None,
                a.score,
                a.usage.input_tokens,
                a.usage.output_tokens,
                math.nan if a.usage.cost_usd is None else a.usage.cost_usd,
                a.duration_s,
                a.error,
                a.failure,
                a.limit,
                a.analysis_result,
            )
            self.analysis_failures += len(a.analysis_errors)
            replay = a.artifacts.get("replay")
            if isinstance(replay, dict):
                self.replays.append((position, f"{self.task(position).id}@{a.attempt}", _replay_line(replay)))

    def _add_attempt(
        self,
        row: int,
        index: int,
        correct: bool,
        score: float,
        input_tokens: int,
        output_tokens: int,
        cost: float,
        duration: float,
        error: str | None,
        failure: str | None,
        limit: LimitHit | None,
        analysis: dict[str, Any] | None,
    ) -> None:
        if error:
            self.attempt_errors[len(self.attempt)] = _last_line(error)
        if failure:
            self.attempt_failures[len(self.attempt)] = _last_line(failure)
        if limit is not None:
            self.attempt_limits[len(self.attempt)] = limit.message
        self.attempt_task.append(row)
        self.attempt.append(index)
        self.attempt_correct.append(correct)
        self.attempt_score.append(score)
        self.input_tokens.append(input_tokens)
        self.output_tokens.append(output_tokens)
        self.cost_usd.append(cost)
        self.duration_s.append(duration)
        encoded = pydantic_core.to_json(analysis) if analysis else None
        self.analysis.append(self._shared.setdefault(encoded, encoded) if encoded is not None else None)

    # readers, in selected order

    def rows(self) -> np.ndarray:
        """Task rows in selected order."""
        return np.argsort(self.column("position"), kind="stable")

    def attempt_rows(self) -> np.ndarray:
        """Attempt rows in selected task order, attempts in their order."""
        return np.lexsort((self.column("attempt"), self.column("position")[self.column("attempt_task")]))

    def column(self, name: str) -> np.ndarray:
        """A task or attempt column as a read-only numpy view (of its own type, also when empty)."""
        values: array[Any] = getattr(self, name)
        return np.frombuffer(values, dtype=np.dtype(values.typecode))

    def task(self, row: int) -> TaskSpec:
        return self.tasks[self.position[row]]

    def task_ids(self) -> list[str]:
        return [self.task(int(row)).id for row in self.rows()]

    def reused_positions(self) -> list[int]:
        return [self.position[row] for row in range(len(self)) if self.reused[row]]

    def error_lines(self) -> Iterator[tuple[str, str]]:
        """(task id, first line of its error) of every task that ended in error, in selected order."""
        for row in self.rows():
            if self.is_error[row]:
                yield self.task(int(row)).id, _headline(self.errors.get(int(row), ""))

    def failure_lines(self) -> Iterator[tuple[str, str]]:
        """(task id, first line of why) of every task the agent failed on its own, in selected order."""
        for row in self.rows():
            if int(row) in self.failures:
                yield self.task(int(row)).id, _headline(self.failures[int(row)])

    def replay_lines(self) -> list[tuple[str, str]]:
        """(task@attempt, what was replayed) of the attempts resumed by replay, in selected order."""
        return [(key, line) for _, key, line in sorted(self.replays)]

    def attempt_key(self, row: int) -> tuple[str, int]:
        """(task id, attempt number) of an attempt row."""
        return self.task(self.attempt_task[row]).id, self.attempt[row]

    def decoded_analysis(self, rows: np.ndarray) -> list[dict[str, Any] | None]:
        """The analysis of each of these attempt rows (results by analyzer name; None: not analysed).
        Rows that share an encoding share one decoded dict: read it, never change it."""
        decoded: dict[bytes, dict[str, Any]] = {}
        analyses: list[dict[str, Any] | None] = []
        for row in rows:
            encoded = self.analysis[row]
            if encoded is not None and encoded not in decoded:
                decoded[encoded] = json.loads(encoded)
            analyses.append(None if encoded is None else decoded[encoded])
        return analyses
