"""The Orchestrator: several named requests, one global pool of task loops, ordered priority (R-ORCH-1).

Preflight checks every request before anything is written (plugins, plans, task ids, run ids, reuse
sources) and freezes the reuse sources before any request reserves its directory (R-REUSE-2). Then three
kinds of cooperating tasks run:

- starting, in declared order and pipelined: request i starts (reserves its run directory, plans what
  runs) once every earlier request has started and their pending tasks number fewer than the task loops;
- ``task_concurrency`` task loops, each taking the next task of the first started request that still has
  pending ones (ordered priority, not round robin; running tasks may overlap later requests);
- finalisation of a request once it has no pending or active task and every earlier request has drained
  its queue; it may overlap other work (R-FIN-1).

The deadline (``orchestration_timeout_s``) counts from the end of preflight. On timeout or outer
cancellation the terminal states are locked, starting and task loops cancelled, their cleanup given
``cleanup_grace_seconds``, and unfinished requests persisted as ``timeout`` / ``cancelled`` (R-CLEAN-2).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import sys
import threading
import traceback
from collections import deque
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.runtime.results.analysis import check_analyzer_names, select_analyzers
from agentcompass_dagster.runtime.execution.attempt import TaskRunner
from agentcompass_dagster.runtime.store.budget import BudgetExhausted, budget_status
from agentcompass_dagster.runtime.execution.plugins import resolve_plugins
from agentcompass_dagster.runtime.execution.finalize import finalize_request
from agentcompass_dagster.runtime.execution.permits import PROCESS_PERMITS, PermitSource
from agentcompass_dagster.runtime.execution.plan import Planner
from agentcompass_dagster.runtime.execution.selection import load_selected_tasks
from agentcompass_dagster.runtime.store.layout import request_root
from agentcompass_dagster.runtime.store.run_store import RunStore
from agentcompass_dagster.contracts.records import TaskSpec, utcnow
from agentcompass_dagster.runtime.execution.request_state import OrchestrationObserver, RequestState, ResolvedRequest
from agentcompass_dagster.runtime.store.outcomes import (
    BudgetOutcome,
    OrchestrationResult,
    RequestOutcome,
    TaskDetail,
    TerminalStatus,
)

log = logging.getLogger(__name__)


def _traceback(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, UserError) else "".join(traceback.format_exception(exc)).strip()


class Orchestrator:
    def __init__(
        self,
        requests: list[EvalRequest],
        *,
        task_concurrency: int | None = None,
        timeout_s: float | None = None,
        cleanup_grace_s: float | None = None,
        observer: OrchestrationObserver | None = None,
        resolved: Mapping[str, ResolvedRequest] | None = None,
        permits: PermitSource | None = None,
    ) -> None:
        if not requests:
            raise UserError("nothing to run: no requests")
        names = [r.name for r in requests]
        if len(set(names)) != len(names):
            raise UserError(f"request names must be unique, got {names}")
        limits = [r.execution.limits for r in requests]
        self.requests = requests
        self.task_concurrency = task_concurrency or max(lim.task_concurrency for lim in limits)
        timeouts = [lim.orchestration_timeout_s for lim in limits if lim.orchestration_timeout_s]
        self.timeout_s = timeout_s if timeout_s is not None else (max(timeouts) if timeouts else None)
        self.cleanup_grace_s = (
            cleanup_grace_s if cleanup_grace_s is not None else max(lim.cleanup_grace_seconds for lim in limits)
        )
        self.observer = observer or OrchestrationObserver()
        self.resolved = resolved or {}
        self.permits = permits or PROCESS_PERMITS
        self.id = f"orch-{secrets.token_hex(6)}"
        self.states: list[RequestState] = []

    # preflight

    def preflight(self) -> list[RequestState]:
        """Everything that can be checked before a file is written; raises UserError. Tasks are loaded,
        validated and selected here, once per request, so a bad task id leaves no directory behind."""
        states = []
        for request in self.requests:
            check_analyzer_names(request)
            resolved = self.resolved.get(request.name)
            plugins = resolved.plugins if resolved else resolve_plugins(request)
            selected, not_loaded = resolved.selection if resolved else load_selected_tasks(request, plugins.benchmark)
            Planner(request, plugins).preflight(selected[0])
            store = RunStore(request.output.results_dir)
            root = request_root(request)
            store.check_run_id_free(root, request.output.run_id)
            states.append(RequestState(request, plugins, select_analyzers(request), store, root, selected, not_loaded))
        # Last, as it creates the results directory: a later request's mistake must leave nothing behind.
        for state in states:
            state.store.check_writable()
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
            for run_id in state.store.fail_dead_runs(state.root):
                log.warning(
                    "run %s of %s was left running by a process that is gone: marked failed", run_id, state.request.name
                )
            state.reuse_source = state.store.find_reuse_source(state.root, output)

    # running

    def use_thread_pool(self) -> None:
        """Give the running loop enough threads: every task does blocking file work in threads (fsynced
        details, temp dirs), and the default pool (cores + 4) would cap throughput below the declared
        task concurrency."""
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2 * self.task_concurrency + 4))

    async def run(self) -> OrchestrationResult:
        started_at = utcnow()
        self.states = self.preflight()
        self._cond = asyncio.Condition()
        self._starting_done = False
        self._locked = False
        self._finalizers: list[asyncio.Task[None]] = []
        self._own = [asyncio.create_task(self._start_in_order())]
        self._own += [asyncio.create_task(self._task_loop()) for _ in range(self.task_concurrency)]
        status: TerminalStatus = "completed"
        try:
            async with asyncio.timeout(self.timeout_s):
                await asyncio.gather(*self._own)
                while unfinished := [f for f in self._finalizers if not f.done()]:
                    await asyncio.gather(*unfinished)
        except TimeoutError:
            status = "timeout"
            await self._cancel_remaining("timeout", f"orchestration timed out after {self.timeout_s}s")
        except BaseException:
            await self._cancel_remaining("cancelled", "interrupted before all tasks finished")
            raise
        finally:  # what a harness's attempts shared (the model gateway) ends with them
            await asyncio.gather(*(s.plugins.harness.close() for s in self.states), return_exceptions=True)
        if status == "completed" and any(s.status != "completed" for s in self.states):
            status = "failed"
        outcomes = {
            s.request.name: RequestOutcome(
                name=s.request.name,
                status=s.status,
                error=s.error,
                paths=s.run_dir.paths if s.run_dir else {},
                result=s.result,
            )
            for s in self.states
        }
        return OrchestrationResult(
            id=self.id, status=status, started_at=started_at, finished_at=utcnow(), outcomes=outcomes
        )

    def _may_start(self, index: int) -> bool:
        earlier = self.states[:index]
        waiting = sum(len(s.pending) for s in earlier if s.status == "running")
        return all(s.started for s in earlier) and waiting < self.task_concurrency

    async def _start_in_order(self) -> None:
        for index, state in enumerate(self.states):
            async with self._cond:
                await self._cond.wait_for(lambda: self._may_start(index))  # called within this await only
            try:
                await asyncio.to_thread(self._start, state)
            except Exception as exc:
                state.status, state.error = "failed", _traceback(exc)
                if state.run_dir is not None:
                    await asyncio.to_thread(state.run_dir.record.write_terminal_status, "failed", state.error)
            else:
                self.observer.request_started(state)
            async with self._cond:
                self._cond.notify_all()
            self._schedule_finalization()
        self._starting_done = True
        async with self._cond:
            self._cond.notify_all()

    def _start(self, state: RequestState) -> None:
        """R-PREP-1: reserve the directory, write run_info and params, materialise reuse, queue the rest."""
        request = state.request
        run_dir = state.store.reserve(state.root, request.output.run_id)
        state.run_dir = run_dir
        run_dir.record.write(request, [t.id for t in state.tasks], run_dir.paths, state.not_loaded)
        run_dir.record.write_params(request)
        scores = state.scores
        if state.reuse_source is not None:
            reused = run_dir.link_reused_details(state.reuse_source, scores)
            finished = run_dir.finished.link(
                state.reuse_source, [t for position, t in enumerate(state.tasks) if not scores.holds(position)]
            )
            run_dir.record.set_reused_from(
                state.reuse_source, sorted(state.tasks[position].id for position in scores.reused_positions()), finished
            )
            run_dir.log(
                f"reused {reused} details and {finished} finished-attempt records from {state.reuse_source.path}"
            )
        if request.dagster_run_id:
            run_dir.record.set_dagster_run_id(request.dagster_run_id)
        run_dir.log(f"environment {request.environment.id!r}: {state.plugins.environment.describe()}")
        state.runner = TaskRunner(request, state.plugins, run_dir, state.analyzers, self.permits)
        wanted = set(request.run_only) if request.run_only is not None else None
        state.pending = deque(
            position
            for position, t in enumerate(state.tasks)
            if not scores.holds(position) and (wanted is None or t.id in wanted)
        )
        state.status = "running"
        run_dir.log(f"started {request.name}: {len(state.tasks)} tasks, {len(state.pending)} to run")

    def _next(self) -> RequestState | None:
        """Ordered priority: the first started request that still has pending tasks."""
        return next((s for s in self.states if s.status == "running" and s.pending), None)

    def _dispatch_over(self) -> bool:
        return self._starting_done and self._next() is None

    async def _task_loop(self) -> None:
        while True:
            async with self._cond:
                await self._cond.wait_for(lambda: self._next() is not None or self._dispatch_over())
                state = self._next()
                if state is None:
                    return
                position = state.pending.popleft()
                state.active += 1
                self._cond.notify_all()
            task = state.tasks[position]
            self.observer.task_started(state, task)
            try:
                detail = await self._run_one(state, task)
                if detail is None:
                    state.budget_stopped.append(position)
                else:
                    state.scores.add(position, detail)
                    self.observer.task_finished(state, detail)
            finally:
                state.active -= 1
            self._schedule_finalization()

    async def _run_one(self, state: RequestState, task: TaskSpec) -> TaskDetail | None:
        """The task's detail, persisted; None when the sweep's budget is spent before or while it runs."""
        assert state.runner is not None and state.run_dir is not None
        try:
            detail = await state.runner.run_task(task)
        except BudgetExhausted:
            return None
        except Exception as exc:
            detail = TaskDetail(
                task_id=task.id,
                category=task.category,
                k=state.request.execution.attempts.k,
                error=_traceback(exc),
                finished_at=utcnow(),
            )
        await state.run_dir.persist(detail)
        return detail

    def _schedule_finalization(self) -> None:
        if self._locked:
            return
        earlier_drained = True
        for state in self.states:
            ready = state.status == "running" and not state.pending and state.active == 0
            if ready and earlier_drained and not state.finalizing:
                state.finalizing = True
                self._finalizers.append(asyncio.create_task(self._finalize(state)))
            earlier_drained = earlier_drained and state.started and not state.pending

    async def _finalize(self, state: RequestState) -> None:
        await asyncio.to_thread(self._finalize_sync, state)
        self.observer.request_finished(state)

    def _finalize_sync(self, state: RequestState) -> None:
        assert state.run_dir is not None and state.runner is not None
        try:
            if state.runner.planner.budget is not None:
                state.run_dir.record.set_budget(
                    BudgetOutcome(
                        status=budget_status(state.runner.planner.budget),
                        not_run=sorted(state.tasks[position].id for position in state.budget_stopped),
                    )
                )
            state.result = finalize_request(
                state.request, state.plugins, state.analyzers, state.run_dir, state.scores, "completed"
            )
            state.status = "completed"
        except Exception as exc:
            state.status, state.error = "failed", _traceback(exc)
            state.run_dir.record.write_terminal_status("failed", state.error)
        finally:
            state.run_dir.close()

    # timeout and cancellation

    async def _cancel_remaining(self, status: TerminalStatus, reason: str) -> None:
        """R-CLEAN-2: lock terminal states, cancel starting and task loops, give their cleanup the grace
        period, persist the terminal state of every unfinished request."""
        self._locked = True
        for task in self._own:
            # A task already being cancelled (by the timeout or the interrupted gather) is cleaning up:
            # cancelling it again would cut its cleanup short instead of granting the grace period.
            if not task.done() and not task.cancelling():
                task.cancel()
        waiting = [t for t in self._own + self._finalizers if not t.done()]
        if waiting:
            _, still_running = await asyncio.wait(waiting, timeout=self.cleanup_grace_s)
            if still_running:
                log.warning("%d tasks still cleaning up after the %ss grace", len(still_running), self.cleanup_grace_s)
        await asyncio.to_thread(self._persist_unfinished, status, reason)

    def _persist_unfinished(self, status: TerminalStatus, reason: str) -> None:
        for state in self.states:
            if state.status not in ("pending", "running"):
                continue
            state.status, state.error = status, reason
            if state.run_dir is None:
                continue
            # A finalization still running after the grace may never end (the process is stopping): the run
            # says now how it ended; one that completes after all writes its own status, and closes.
            if state.run_dir.record.stop(status, reason):
                state.run_dir.log(f"{status}: {reason}; {len(state.scores)} of {len(state.tasks)} tasks have details")
            if not state.finalizing:
                state.run_dir.close()

    def abandon(self, reason: str) -> None:
        """The last word of a process that ends without waiting for the cleanup (a second interrupt, a
        stop whose wait ran out): every run directory with no terminal status yet is marked cancelled, so
        what `show` and `resume` read later is how the run ended. Safe from any thread."""
        for state in self.states:
            if state.run_dir is not None and state.run_dir.record.stop("cancelled", reason):
                state.run_dir.log(f"cancelled: {reason}; {len(state.scores)} of {len(state.tasks)} tasks have details")


def orchestrate(
    requests: list[EvalRequest],
    observer: OrchestrationObserver | None = None,
    resolved: Mapping[str, ResolvedRequest] | None = None,
) -> OrchestrationResult:
    """Run an orchestration to its end from synchronous code (the CLI, tests).

    In the main thread, the first SIGINT or SIGTERM starts the cooperative cleanup (raised here as
    KeyboardInterrupt once it is done); a second SIGINT exits the process at once.
    """
    orchestrator = Orchestrator(requests, observer=observer, resolved=resolved)

    async def main() -> OrchestrationResult:
        loop = asyncio.get_running_loop()
        orchestrator.use_thread_pool()
        main_task = asyncio.current_task()
        assert main_task is not None
        interrupts = 0

        def interrupt() -> None:
            nonlocal interrupts
            interrupts += 1
            if interrupts > 1:
                orchestrator.abandon("interrupted twice: the process exited without waiting for the cleanup")
                os._exit(130)
            print("agentcompass: stopping: cleaning up (press Ctrl-C again to exit at once)", file=sys.stderr)
            main_task.cancel()

        handled = (signal.SIGINT, signal.SIGTERM) if threading.current_thread() is threading.main_thread() else ()
        for sig in handled:
            loop.add_signal_handler(sig, interrupt)
        try:
            return await orchestrator.run()
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None
