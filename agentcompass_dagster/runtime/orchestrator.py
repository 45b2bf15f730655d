"""The Orchestrator: several named requests, one global worker pool, ordered priority (R-ORCH-1).

Preflight checks every request before anything is written (plugins, plans, task ids, run ids, reuse
sources); reuse sources are frozen before any request reserves its directory (R-REUSE-2). Workers take
tasks from the first request that still has pending ones; a request finalises once it has no pending
or active tasks and every earlier request has drained its queue (R-FIN-1).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import traceback
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from agentcompass_dagster.config import RunRequest
from agentcompass_dagster.errors import UserError, field_error
from agentcompass_dagster.runtime.attempt import TaskRunner, check_strategy
from agentcompass_dagster.runtime.finalize import finalize_request
from agentcompass_dagster.runtime.components import Components, resolve_components
from agentcompass_dagster.runtime.naming import task_id_problem
from agentcompass_dagster.runtime.plan import Planner
from agentcompass_dagster.runtime.store import ReuseSource, RunDir, RunStore
from agentcompass_dagster.runtime.types import (
    OrchestrationResult,
    RequestOutcome,
    RequestResult,
    TaskDetail,
    TaskSpec,
    utcnow,
)

log = logging.getLogger(__name__)


@dataclass
class RequestState:
    request: RunRequest
    components: Components
    store: RunStore
    root: Path
    tasks: list[TaskSpec]
    reuse_source: ReuseSource | None = None
    run_dir: RunDir | None = None
    runner: TaskRunner | None = None
    pending: deque[TaskSpec] = field(default_factory=deque)
    active: int = 0
    results: dict[str, TaskDetail] = field(default_factory=dict)
    reused: set[str] = field(default_factory=set)
    status: str = "pending"
    error: str | None = None
    result: RequestResult | None = None


ProgressCallback = Callable[[RequestState, TaskDetail], None]


def validate_task_ids(benchmark_id: str, tasks: list[TaskSpec]) -> None:
    """R-PREP-1: unique, well-formed ids; a bad one is a user-facing error naming it."""
    seen: set[str] = set()
    for index, task in enumerate(tasks):
        problem = task_id_problem(task.id)
        if problem:
            raise UserError(f"benchmark {benchmark_id!r}: task id={task.id!r} (task #{index}) {problem}")
        if task.id in seen:
            raise UserError(f"benchmark {benchmark_id!r}: task id={task.id!r} is duplicated")
        seen.add(task.id)


class Orchestrator:
    def __init__(
        self,
        requests: list[RunRequest],
        *,
        task_concurrency: int | None = None,
        on_task_done: ProgressCallback | None = None,
    ) -> None:
        if not requests:
            raise UserError("nothing to run: no requests")
        names = [r.name for r in requests]
        if len(set(names)) != len(names):
            raise UserError(f"request names must be unique, got {names}")
        self.requests = requests
        self.task_concurrency = task_concurrency or max(r.execution.limits.task_concurrency for r in requests)
        self.on_task_done = on_task_done
        self.id = f"orch-{secrets.token_hex(6)}"
        self.states: list[RequestState] = []

    def preflight(self) -> list[RequestState]:
        """Everything that can be checked before a file is written; raises UserError."""
        states = []
        for request in self.requests:
            check_strategy(request.execution.attempts.strategy)
            components = resolve_components(request)
            tasks = components.benchmark.load_tasks()
            validate_task_ids(request.benchmark.id, tasks)
            selected = components.benchmark.select_tasks(tasks)
            if not selected:
                raise field_error("benchmark.tasks", request.benchmark.tasks, "selects no task")
            Planner(request, components).preflight(selected[0])
            store = RunStore(request.output.results_dir)
            store.check_writable()
            root = store.root_for(request.output, request.benchmark.id, request.model.id)
            store.check_run_id_free(root, request.output.run_id)
            states.append(RequestState(request, components, store, root, selected))
        self._freeze_reuse_sources(states)
        return states

    @staticmethod
    def _freeze_reuse_sources(states: list[RequestState]) -> None:
        """R-REUSE-2/3: pick every reuse source before any directory of this orchestration exists."""
        implicit: dict[Path, str] = {}
        for state in states:
            output = state.request.output
            if output.reuse and not output.reuse_run_id:
                if state.root in implicit:
                    raise UserError(
                        f"output.reuse=true: requests {implicit[state.root]!r} and {state.request.name!r} share "
                        f"{state.root}; the implicit reuse source is ambiguous, set output.reuse_run_id for each"
                    )
                implicit[state.root] = state.request.name
            state.reuse_source = state.store.find_reuse_source(state.root, output)

    def _prepare(self, state: RequestState) -> None:
        """R-PREP-1: reserve the directory, write run_info and params, materialise reuse."""
        request = state.request
        run_dir = state.store.reserve(state.root, request.output.run_id)
        state.run_dir = run_dir
        run_dir.write_run_info(request, [t.id for t in state.tasks])
        run_dir.write_params(request)
        if state.reuse_source is not None:
            reused = run_dir.materialize_reused_details(state.reuse_source, state.tasks)
            state.results.update(reused)
            state.reused = set(reused)
            run_dir.set_reused_from(state.reuse_source, sorted(state.reused))
            run_dir.log(f"reused {len(reused)} details from {state.reuse_source.path}")
        state.pending = deque(t for t in state.tasks if t.id not in state.results)
        state.runner = TaskRunner(request, state.components, run_dir)
        state.status = "running"
        run_dir.log(f"prepared {request.name}: {len(state.tasks)} tasks, {len(state.pending)} to run")

    async def run(self) -> OrchestrationResult:
        started_at = utcnow()
        self.states = self.preflight()
        self._finalizing: set[int] = set()
        self._finalizers: list[asyncio.Task[None]] = []
        try:
            for state in self.states:
                await asyncio.to_thread(self._prepare, state)
            workers = [asyncio.create_task(self._worker()) for _ in range(self.task_concurrency)]
            await asyncio.gather(*workers)
            self._schedule_finalization()
            await asyncio.gather(*self._finalizers)
        except BaseException:
            await asyncio.shield(asyncio.to_thread(self._persist_interrupted))
            raise
        outcomes = {
            s.request.name: RequestOutcome(
                name=s.request.name,
                status=s.status,  # type: ignore[arg-type]
                error=s.error,
                paths=s.run_dir.paths if s.run_dir else {},
                result=s.result,
            )
            for s in self.states
        }
        status = "completed" if all(s.status == "completed" for s in self.states) else "failed"
        return OrchestrationResult(
            id=self.id, status=status, started_at=started_at, finished_at=utcnow(), outcomes=outcomes
        )

    def _next(self) -> RequestState | None:
        """Ordered priority: the first running request that still has pending tasks."""
        return next((s for s in self.states if s.status == "running" and s.pending), None)

    async def _worker(self) -> None:
        while (state := self._next()) is not None:
            task = state.pending.popleft()
            state.active += 1
            try:
                detail = await self._run_one(state, task)
                state.results[task.id] = detail
                if self.on_task_done is not None:
                    self.on_task_done(state, detail)
            finally:
                state.active -= 1
            self._schedule_finalization()

    async def _run_one(self, state: RequestState, task: TaskSpec) -> TaskDetail:
        assert state.runner is not None and state.run_dir is not None
        try:
            detail = await state.runner.run_task(task)
        except Exception as exc:
            detail = TaskDetail(
                task_id=task.id,
                category=task.category,
                k=state.request.execution.attempts.k,
                error="".join(traceback.format_exception(exc)).strip(),
                finished_at=utcnow(),
            )
        await asyncio.to_thread(state.run_dir.save_partial_result, detail)
        return detail

    def _schedule_finalization(self) -> None:
        earlier_drained = True
        for index, state in enumerate(self.states):
            ready = state.status == "running" and not state.pending and state.active == 0
            if ready and earlier_drained and index not in self._finalizing:
                self._finalizing.add(index)
                self._finalizers.append(asyncio.create_task(asyncio.to_thread(self._finalize, state)))
            earlier_drained = earlier_drained and not state.pending

    def _finalize(self, state: RequestState) -> None:
        """R-FIN-1: merge reused and new details in selected order, aggregate, write the summary."""
        assert state.run_dir is not None
        try:
            state.result = finalize_request(state.request, state.components, state.run_dir, state.tasks,
                                            state.results, state.reused, "completed")
            state.status = "completed"
        except Exception as exc:
            state.status, state.error = "failed", "".join(traceback.format_exception(exc)).strip()
            state.run_dir.write_terminal_status("failed", state.error)
        finally:
            state.run_dir.close()

    def _persist_interrupted(self) -> None:
        """Terminal state for every request an interruption left unfinished; finished details stay."""
        for state in self.states:
            if state.run_dir is not None and state.status in ("pending", "running"):
                state.status = "cancelled"
                state.run_dir.write_terminal_status("cancelled", "interrupted before all tasks finished")
                state.run_dir.close()


def run_requests(requests: list[RunRequest], on_task_done: ProgressCallback | None = None) -> OrchestrationResult:
    """Run an orchestration to its end from synchronous code (the CLI, Dagster ops, tests)."""
    orchestrator = Orchestrator(requests, on_task_done=on_task_done)

    async def main() -> OrchestrationResult:
        # Every task does blocking file work in threads (fsynced details, temp dirs); the default pool
        # (cores + 4) would cap throughput below the declared task concurrency.
        workers = 2 * orchestrator.task_concurrency + 4
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=workers))
        return await orchestrator.run()

    return asyncio.run(main())
