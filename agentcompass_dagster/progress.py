"""A live progress display for CLI runs: tasks done, running and failed, rate and ETA per request.

Drawn with rich on the terminal; the CLI uses it only when stdout is a terminal, so logs and pipes get
the plain summary alone.
"""

from __future__ import annotations

import time
from typing import Any

from agentcompass_dagster.runtime.orchestrator import OrchestrationObserver, RequestState
from agentcompass_dagster.runtime.types import TaskDetail, TaskSpec


class LiveProgress(OrchestrationObserver):
    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[running]} running · {task.fields[errors]} errors · {task.fields[rate]}"),
            TimeRemainingColumn(),
            console=Console(),
            refresh_per_second=4,
        )
        self._ids: dict[str, Any] = {}
        self._started: dict[str, float] = {}
        self._counts: dict[str, dict[str, int]] = {}

    def __enter__(self) -> LiveProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def request_prepared(self, state: RequestState) -> None:
        name = state.request.name
        self._counts[name] = {"running": 0, "errors": 0, "done": 0}
        self._started[name] = time.monotonic()
        self._ids[name] = self.progress.add_task(
            name, total=len(state.pending), running=0, errors=0, rate="-- tasks/s"
        )

    def task_started(self, state: RequestState, task: TaskSpec) -> None:
        self._update(state, running=+1)

    def task_finished(self, state: RequestState, detail: TaskDetail) -> None:
        self._update(state, running=-1, done=+1, errors=int(detail.is_error))

    def _update(self, state: RequestState, **delta: int) -> None:
        name = state.request.name
        counts = self._counts[name]
        for key, value in delta.items():
            counts[key] += value
        elapsed = max(time.monotonic() - self._started[name], 1e-9)
        self.progress.update(
            self._ids[name],
            completed=counts["done"],
            running=counts["running"],
            errors=counts["errors"],
            rate=f"{counts['done'] / elapsed:.1f} tasks/s",
        )
