"""Finished-attempt records (R-RETRY-4): one flat file per evaluated attempt of an unfinished k>1 task,
written without fsync: a record lost in a crash costs one attempt run again, never a result."""

from __future__ import annotations

import os
from pathlib import Path

from agentcompass_dagster.contracts.records import EvaluatedAttempt, TaskSpec
from agentcompass_dagster.runtime.store.atomic import atomic_write_json
from agentcompass_dagster.runtime.store.layout import DURABLE, FINISHED_ATTEMPTS_DIR, OLDER_FINISHED_ATTEMPTS_DIR
from agentcompass_dagster.runtime.store.naming import file_stem
from agentcompass_dagster.runtime.store.run_files import copy_durable, link_or_copy
from agentcompass_dagster.runtime.store.run_records import ReuseSource


class FinishedAttempts:
    """The finished-attempt records of one run directory."""

    def __init__(self, run_path: Path, restorable: set[str] | None) -> None:
        self.path = run_path
        # The file stems of tasks that may have records here: those linked from a reuse source, in a
        # directory this process reserved (None: unknown, look for every task).
        self.restorable = restorable

    def file(self, task_id: str, index: int) -> Path:
        return self.path / FINISHED_ATTEMPTS_DIR / f"{file_stem(task_id)}@{index}.json"

    def save(self, task: TaskSpec, attempt: EvaluatedAttempt) -> None:
        atomic_write_json(self.file(task.id, attempt.attempt), attempt, fsync=False)

    def may_hold(self, task: TaskSpec) -> bool:
        return self.restorable is None or file_stem(task.id) in self.restorable

    def load(self, task: TaskSpec, k: int) -> dict[int, EvaluatedAttempt]:
        """Error-free finished attempts of this task by index (an errored one runs again)."""
        found: dict[int, EvaluatedAttempt] = {}
        if not self.may_hold(task):
            return found
        for index in range(1, k + 1):
            try:
                attempt = EvaluatedAttempt.model_validate_json(self.file(task.id, index).read_bytes())
            except (OSError, ValueError):
                continue
            if attempt.error is None and attempt.attempt == index:
                found[index] = attempt
        return found

    def delete(self, task_id: str, k: int) -> None:
        for index in range(1, k + 1):
            self.file(task_id, index).unlink(missing_ok=True)

    def link(self, source: ReuseSource, tasks: list[TaskSpec]) -> int:
        """Make an interrupted source run's finished-attempt records and durable attempt logs visible here,
        so its unfinished tasks run only their missing attempts and unfinished agent attempts resume
        (R-RESUME-3). The source is only read: immutable files are hard-linked, activity logs (which
        the resumed attempt appends to) are copied."""
        wanted = {file_stem(task.id) for task in tasks}
        run = Path(source.path)
        origin = next(
            (run / name for name in (FINISHED_ATTEMPTS_DIR, OLDER_FINISHED_ATTEMPTS_DIR) if (run / name).is_dir()),
            run / FINISHED_ATTEMPTS_DIR,
        )
        names = os.listdir(origin) if origin.is_dir() else []
        linked = 0
        for name in names:
            stem = name.rpartition("@")[0]
            if name.endswith(".json") and stem in wanted:
                link_or_copy(origin / name, self.path / FINISHED_ATTEMPTS_DIR / name)
                if self.restorable is not None:
                    self.restorable.add(stem)
                linked += 1
        durable = Path(source.path) / DURABLE
        for name in os.listdir(durable) if durable.is_dir() else []:
            stem, _, attempt = name.rpartition("@")
            # <task>@<attempt>, or <task>@<attempt>.<step> for a step of a multi-step task
            if stem in wanted and attempt.partition(".")[0].isdigit():
                copy_durable(durable / name, self.path / DURABLE / name)
                linked += 1
        return linked
