"""A live progress display for CLI runs: tasks done, running and failed, rate and ETA per request.

Drawn with rich on the terminal; the CLI uses it only when stdout is a terminal, so logs and pipes get
the plain summary alone. ``LiveProgress`` follows an orchestration in this process; the Dagster
launcher feeds the same board from the instance's events (its runs execute in other processes).
"""

from __future__ import annotations

import time
from typing import Any

from agentcompass_dagster.runtime.execution.request_state import OrchestrationObserver, RequestState
from agentcompass_dagster.contracts.records import TaskSpec
from agentcompass_dagster.runtime.store.outcomes import TaskDetail


class ProgressBoard:
    """One bar per request (benchmark/model): done of total, what is running (tasks, or for Dagster
    launches the runs in flight), errors, rate, time remaining."""

    def __init__(self, running: str = "running") -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(f"{{task.fields[running]}} {running} · {{task.fields[errors]}} errors · {{task.fields[rate]}}"),
            TimeRemainingColumn(),
            console=Console(),
            refresh_per_second=4,
        )
        self._ids: dict[str, Any] = {}
        self._started: dict[str, float] = {}

    def __enter__(self) -> ProgressBoard:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def add(self, name: str, total: int) -> None:
        self._started[name] = time.monotonic()
        self._ids[name] = self.progress.add_task(name, total=total, running=0, errors=0, rate="-- tasks/s")

    def update(self, name: str, done: int, running: int, errors: int) -> None:
        elapsed = max(time.monotonic() - self._started[name], 1e-9)
        self.progress.update(
            self._ids[name], completed=done, running=running, errors=errors, rate=f"{done / elapsed:.1f} tasks/s"
        )


class LiveProgress(OrchestrationObserver):
    """The board following an orchestration of this process (`agentcompass run --direct`, resume, fork)."""

    def __init__(self, board: ProgressBoard) -> None:
        self.board = board
        self._counts: dict[str, dict[str, int]] = {}

    def request_started(self, state: RequestState) -> None:
        self._counts[state.request.name] = {"running": 0, "errors": 0, "done": 0}
        self.board.add(state.request.name, len(state.pending))

    def task_started(self, state: RequestState, task: TaskSpec) -> None:
        self._update(state, running=+1)

    def task_finished(self, state: RequestState, detail: TaskDetail) -> None:
        self._update(state, running=-1, done=+1, errors=int(detail.is_error))

    def _update(self, state: RequestState, **delta: int) -> None:
        counts = self._counts[state.request.name]
        for key, value in delta.items():
            counts[key] += value
        self.board.update(state.request.name, **counts)
