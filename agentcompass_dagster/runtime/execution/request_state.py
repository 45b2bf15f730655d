"""What the orchestrator keeps of each request while it runs (RequestState: its plugins, run directory,
tasks still to run, scores so far, status), what its observers (progress displays, Dagster's task
events) are shown of it, and what a caller may hand it already built (ResolvedRequest)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from agentcompass_dagster.contracts.analyzer import Analyzer
from agentcompass_dagster.contracts.records import NotLoaded, TaskSpec
from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.runtime.execution.attempt import TaskRunner
from agentcompass_dagster.runtime.execution.plugins import Plugins
from agentcompass_dagster.runtime.execution.selection import Selection
from agentcompass_dagster.runtime.results.scores import TaskScores
from agentcompass_dagster.runtime.store.outcomes import RequestResult, RequestStatus, TaskDetail
from agentcompass_dagster.runtime.store.run_dir import RunDir
from agentcompass_dagster.runtime.store.run_records import ReuseSource
from agentcompass_dagster.runtime.store.run_store import RunStore


@dataclass
class RequestState:
    request: EvalRequest
    plugins: Plugins
    analyzers: list[Analyzer]
    store: RunStore
    root: Path
    tasks: list[TaskSpec]
    not_loaded: list[NotLoaded] = field(default_factory=list)
    reuse_source: ReuseSource | None = None
    run_dir: RunDir | None = None
    runner: TaskRunner | None = None
    pending: deque[int] = field(default_factory=deque)  # positions in ``tasks`` of the tasks still to run
    active: int = 0
    scores: TaskScores = field(init=False)
    status: RequestStatus = "pending"
    finalizing: bool = False
    error: str | None = None
    result: RequestResult | None = None
    budget_stopped: list[int] = field(default_factory=list)  # positions of tasks the spent budget left out

    def __post_init__(self) -> None:
        self.scores = TaskScores(self.tasks)

    @property
    def started(self) -> bool:
        return self.status != "pending"


class OrchestrationObserver:
    """Hooks for progress displays; called on the event loop, so they must be quick."""

    def request_started(self, state: RequestState) -> None: ...

    def task_started(self, state: RequestState, task: TaskSpec) -> None: ...

    def task_finished(self, state: RequestState, detail: TaskDetail) -> None: ...

    def request_finished(self, state: RequestState) -> None: ...


@dataclass(frozen=True)
class ResolvedRequest:
    """Plugins and selected tasks a caller already built for a request (the Dagster layer resolves a
    sweep once per process), so preflight checks them without building or loading them again."""

    plugins: Plugins
    selection: Selection
