"""A run directory and the writers of what it holds: its record (run_info.json and params.json, in
run_info_file.py), details, retry details, finished-attempt records, durable attempt directories,
summary, analysis and run.log. Every write goes through runtime.atomic (temp file, fsync, rename) and
redaction."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, overload

from agentcompass_dagster.runtime.store.atomic import (
    DirectorySync,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    dumps,
    fsync_dir,
    open_temp,
    rename_noreplace,
)
from agentcompass_dagster.runtime.store.attempt_files import AttemptFiles
from agentcompass_dagster.runtime.store.detail_writer import DetailWriter
from agentcompass_dagster.runtime.store.finished_attempts import FinishedAttempts
from agentcompass_dagster.runtime.store.layout import (
    ANALYSIS_JSON,
    ANALYSIS_MD,
    DETAILS,
    DURABLE,
    ERROR_PREFIX,
    PARAMS,
    RETRY_DETAILS,
    RUN_INFO,
    RUN_LOG,
    SUMMARY,
    SUMMARY_COUNTS,
    detail_names,
)
from agentcompass_dagster.runtime.store.naming import file_stem
from agentcompass_dagster.runtime.store.redact import redact_text
from agentcompass_dagster.runtime.store.run_files import link_or_copy, set_aside
from agentcompass_dagster.runtime.store.run_info_file import RunInfoFile
from agentcompass_dagster.runtime.store.run_records import (
    DetailT,
    ReuseSource,
    RunInfo,
    read_detail,
)
from agentcompass_dagster.runtime.results.scores import DetailView, TaskScores
from agentcompass_dagster.runtime.results.summary import SummaryCounts
from agentcompass_dagster.contracts.records import TaskSpec, utcnow
from agentcompass_dagster.runtime.store.outcomes import TaskDetail


class RunDir:
    """One reserved run directory and the writers of its artifacts (thread-safe)."""

    def __init__(self, path: Path, restorable: set[str] | None = None, fresh: bool = False) -> None:
        self.path = Path(path)
        self.details_dir = self.path / DETAILS
        self.retry_dir = self.path / RETRY_DETAILS
        self.attempt_files = AttemptFiles(self.path)
        self.finished = FinishedAttempts(self.path, restorable)
        self.record = RunInfoFile(self.path)
        self._details_sync = DirectorySync(self.details_dir)
        self._writer: DetailWriter | None = None
        # The ``_error_`` files this run wrote, in a directory it reserved (so there were none before);
        # None where the directory may hold older ones: a success then looks for a stale one.
        self._error_names: set[str] | None = set() if fresh else None
        self._lock = threading.Lock()
        self._log_file: Any = None

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def info(self) -> RunInfo | None:
        """run_info.json as this run holds it (None before it is written)."""
        return self.record.info

    @info.setter
    def info(self, info: RunInfo) -> None:
        self.record.info = info

    @property
    def paths(self) -> dict[str, str]:
        return {
            "run_dir": str(self.path),
            "run_info": str(self.path / RUN_INFO),
            "params": str(self.path / PARAMS),
            "details": str(self.details_dir),
            "retry_details": str(self.retry_dir),
            "summary": str(self.path / SUMMARY),
            "summary_counts": str(self.path / SUMMARY_COUNTS),
            "analysis_summary": str(self.path / ANALYSIS_MD),
            "log": str(self.path / RUN_LOG),
        }

    # details

    def detail_path(self, task_id: str, category: str | None, error: bool = False) -> Path:
        name = detail_names(task_id, category)[0]
        return self.details_dir / (ERROR_PREFIX + name if error else name)

    def save_detail(self, detail: TaskDetail) -> Path | None:
        """R-STORE-6: write a task's terminal detail at once, atomically and redacted.

        A normal result is never overwritten (a concurrent second writer loses and gets None), an error
        never shadows an existing normal result, and a success removes the task's stale ``_error_`` file.
        """
        if not detail.is_error:
            return self.save_finished([detail])[0]
        normal = self.detail_path(detail.task_id, detail.category)
        error = self.detail_path(detail.task_id, detail.category, error=True)
        if normal.exists():
            return None
        if self._error_names is not None:
            self._error_names.add(error.name)
        atomic_write_bytes(error, dumps(detail))
        if normal.exists():
            # A normal result landed while we wrote: it wins, and no stale error stays beside it.
            error.unlink(missing_ok=True)
            return None
        return error

    def save_finished(self, details: list[TaskDetail]) -> list[Path | None]:
        """R-STORE-6 for normal details, several at once: each into a temp file, all fsynced, each
        renamed into place unless a normal detail of its task is there (None for it then), one fsync of
        details/ for all (shared with the run's other writers, begun after the last rename), and stale
        ``_error_`` files of their tasks removed. Nothing is returned before all of it is durable."""
        opened: list[tuple[Path, Path, int]] = []
        try:
            for detail in details:
                path = self.detail_path(detail.task_id, detail.category)
                opened.append((path, *open_temp(path, dumps(detail))))
            for _, _, fd in opened:
                os.fsync(fd)
        except BaseException:
            for _, tmp, _ in opened:
                tmp.unlink(missing_ok=True)
            raise
        finally:
            for _, _, fd in opened:
                os.close(fd)
        results: list[Path | None] = []
        for index, (path, tmp, _) in enumerate(opened):
            try:
                created = rename_noreplace(tmp, path)
            except BaseException:
                for _, left, _ in opened[index:]:
                    left.unlink(missing_ok=True)
                raise
            if not created:
                tmp.unlink(missing_ok=True)
            results.append(path if created else None)
        self._details_sync.sync()
        stale = [
            error
            for detail in details
            if (error := self.detail_path(detail.task_id, detail.category, error=True))
            and (self._error_names is None or error.name in self._error_names)
            and error.exists()
        ]
        for error in stale:
            error.unlink(missing_ok=True)
        if stale:
            fsync_dir(self.details_dir)
        return results

    async def persist(self, detail: TaskDetail) -> None:
        """A finished task's detail, durable on return; then its finished-attempt records are no longer
        needed (R-RETRY-4). Normal details go to the run's batch writer, error details straight to disk."""
        if detail.is_error:
            await asyncio.to_thread(self._persist_error, detail)
            return
        with self._lock:
            if self._writer is None:
                self._writer = DetailWriter(self)
            writer = self._writer
        await writer.submit(detail)

    def _persist_error(self, detail: TaskDetail) -> None:
        self.save_detail(detail)
        if detail.k > 1:
            self.finished.delete(detail.task_id, detail.k)

    def save_retry_detail(self, task_id: str, attempt: int, retry: int, record: dict[str, Any]) -> Path:
        """R-RETRY-3: a discarded runtime retry, kept outside details/ so it never counts."""
        path = self.retry_dir / f"{file_stem(task_id)}__attempt{attempt}__retry{retry}.json"
        atomic_write_json(path, {"task_id": task_id, "attempt": attempt, "retry": retry, **record})
        return path

    def durable_dir(self, task_id: str, attempt: int, step: str | None = None) -> Path:
        """Where an agent attempt (one step's run, in a multi-step task) keeps its activity log and
        checkpoints."""
        name = f"{file_stem(task_id)}@{attempt}"
        return self.path / DURABLE / (f"{name}.{file_stem(step)}" if step is not None else name)

    def set_attempt_aside(self, task: TaskSpec, attempt: int) -> None:
        """A discarded try's logs must not be resumed by the next try, and its files (a failed build's
        log) stay for a reader: each kept beside, as ``.tryN``."""
        for step in [None, *(s.name for s in task.steps)]:
            set_aside(self.durable_dir(task.id, attempt, step))
        set_aside(self.attempt_files.dir(task.id, attempt))

    def load_detail(self, task: TaskSpec, include_errors: bool = False) -> TaskDetail | None:
        names = detail_names(task.id, task.category)
        if include_errors:
            names += [ERROR_PREFIX + name for name in names]
        for name in names:
            detail = read_detail(self.details_dir / name)
            if detail is not None and detail.task_id == task.id:
                return detail
        return None

    def load_details(self, tasks: list[TaskSpec], include_errors: bool = False) -> dict[str, TaskDetail]:
        """Details on disk for these tasks, normal ones only unless include_errors."""
        found = {}
        for task in tasks:
            detail = self.load_detail(task, include_errors)
            if detail is not None:
                found[task.id] = detail
        return found

    @overload
    def load_all_details(self) -> dict[str, TaskDetail]: ...

    @overload
    def load_all_details(self, model: type[DetailT]) -> dict[str, DetailT]: ...

    def load_all_details(
        self, model: type[DetailT] | type[TaskDetail] = TaskDetail
    ) -> Mapping[str, DetailT | TaskDetail]:
        """Every readable detail in details/ (read as ``model``), by task id; a normal detail wins over
        an ``_error_`` one."""
        found: dict[str, DetailT | TaskDetail] = {}
        for path in sorted(self.details_dir.glob("*.json"), key=lambda p: not p.name.startswith(ERROR_PREFIX)):
            if path.name.startswith("."):
                continue
            detail = read_detail(path, model)
            if detail is not None:
                found[detail.task_id] = detail
        return found

    def link_reused_details(self, source: ReuseSource, scores: TaskScores) -> int:
        """R-REUSE-4: hard-link (or copy) the source's normal details of the selected tasks ``scores``
        does not hold yet into this run's details/, and add them to ``scores``, read as DetailView (the
        fields finalisation needs; trajectories and plans are skipped, not built). Missing tasks and
        every ``_error_`` file are ignored; the source directory is only read. Returns how many were
        reused."""
        source_details = Path(source.path) / DETAILS
        reused_files = AttemptFiles(Path(source.path))
        # Most benchmarks leave no attempt files: one look, not one per task.
        has_files = reused_files.root.is_dir()
        reused = 0
        for position, task in enumerate(scores.tasks):
            if scores.holds(position):
                continue
            for name in detail_names(task.id, task.category):
                target = self.details_dir / name
                if not link_or_copy(source_details / name, target):
                    continue
                detail = read_detail(target, DetailView)
                if detail is None or detail.task_id != task.id or detail.is_error:
                    # An unreadable source detail: drop our link so the task simply runs again.
                    target.unlink(missing_ok=True)
                    break
                scores.add(position, detail, reused=True)
                reused += 1
                if has_files:
                    self.attempt_files.link(reused_files, task.id, detail.attempts_tried)
                break
        if reused:
            fsync_dir(self.details_dir)
        return reused

    # summary and analysis

    def save_results(self, summary_md: str, counts: SummaryCounts) -> None:
        atomic_write_json(self.path / SUMMARY_COUNTS, counts)
        atomic_write_text(self.path / SUMMARY, summary_md)

    def save_analysis_summary(self, markdown: str, data: dict[str, Any]) -> None:
        atomic_write_json(self.path / ANALYSIS_JSON, data)
        atomic_write_text(self.path / ANALYSIS_MD, markdown)

    # run.log

    def log(self, message: str) -> None:
        line = f"{utcnow()} {redact_text(message)}\n"
        with self._lock:
            if self._log_file is None:
                self._log_file = open(self.path / RUN_LOG, "a", buffering=1)
            self._log_file.write(line)

    def close(self) -> None:
        with self._lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        self._details_sync.close()
        with self._lock:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None
