"""One task's semantic attempts and, inside each, the lifecycle of R-ATT-1..4 with the runtime retries
of R-RETRY-1..3.

Per attempt: plan (recorded before anything opens) -> open the task environment -> prepare -> adapt
input -> start the harness session -> run policy -> run -> close the harness session -> collect
artifacts (environment alive, run policy) -> evaluate in the plan's mode -> close the environment.
Resources are released inside-out in ``finally`` blocks; a close failure is a warning in run.log and
never hides the task's own failure (R-CLEAN-1).
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.contracts.analyzer import Analyzer
from agentcompass_dagster.contracts.environment import EnvironmentLimitExceeded, EnvironmentSession
from agentcompass_dagster.durable.activity import ACTIVITY_FILE, ActivityLog
from agentcompass_dagster.runtime.results.analysis import analyze_attempt
from agentcompass_dagster.runtime.execution.agent_limits import AttemptLimits, LimitedEnvironment, limited_harness
from agentcompass_dagster.runtime.store.budget import BudgetExhausted, check_budget
from agentcompass_dagster.runtime.execution.plugins import Plugins
from agentcompass_dagster.runtime.execution.permits import PROCESS_PERMITS, PermitSource, TaskRefused, open_session
from agentcompass_dagster.runtime.execution.plan import Planner
from agentcompass_dagster.runtime.execution.retries import WHOLE_ATTEMPT_SITES, RetryAllowance
from agentcompass_dagster.runtime.execution.strategies import STRATEGIES, build_detail
from agentcompass_dagster.runtime.execution.timed_run import timed_run
from agentcompass_dagster.runtime.execution.task_steps import joined, step_plan
from agentcompass_dagster.runtime.store.run_dir import RunDir
from agentcompass_dagster.runtime.store.run_files import copy_durable
from agentcompass_dagster.contracts.records import (
    EvaluatedAttempt,
    Evaluation,
    EvaluationMode,
    ExecutionPlan,
    PreparedTask,
    RunResult,
    StepOutcome,
    TaskSpec,
    utcnow,
)
from agentcompass_dagster.runtime.store.outcomes import TaskDetail

log = logging.getLogger(__name__)


def _failure(exc: BaseException) -> str:
    if isinstance(exc, EnvironmentLimitExceeded):
        # The attempt met a limit its declaration set, not a defect: the limit and its allowance say it all.
        return f"environment limit exceeded: {exc}"
    return "".join(traceback.format_exception(exc)).strip()


def _agent_failure(result: RunResult) -> str | None:
    """Why the agent failed the task on its own, moved out of ``result.error``: it ran out of its time
    (an attempt timeout), or its harness gave up on it. Such an attempt is scored 0 and counted; an
    error (the infrastructure's) would leave the denominator and be run again, and an agent could then
    raise its accuracy by failing on purpose."""
    if result.status == "timeout" and result.error is not None:
        result.failure, result.error = result.error, None
    elif result.failure is not None and result.status != "timeout":
        result.status = "failed"
    return result.failure


@dataclass
class _Try:
    """What one try of an attempt has come to so far, and the phase it is in (where an error happened)."""

    plan: ExecutionPlan
    phase: str = "environment"
    session: EnvironmentSession | None = None
    result: RunResult | None = None
    evaluation: Evaluation | None = None
    error: str | None = None
    failure: str | None = None
    site: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)


class TaskRunner:
    """Runs the attempts of one request's tasks; one instance per request, shared by the workers."""

    def __init__(
        self,
        request: EvalRequest,
        plugins: Plugins,
        run_dir: RunDir,
        analyzers: list[Analyzer],
        permits: PermitSource = PROCESS_PERMITS,
    ) -> None:
        self.request = request
        self.plugins = plugins
        self.run_dir = run_dir
        self.analyzers = analyzers
        self.permits = permits
        self.planner = Planner(request, plugins, run_dir.run_id)

    async def run_task(self, task: TaskSpec) -> TaskDetail:
        """All semantic attempts the strategy needs; attempts an interrupted earlier run finished
        with the same plan are restored, not run again (R-RETRY-4)."""
        config = self.request.execution.attempts
        done = STRATEGIES[config.strategy]
        finished = (
            await asyncio.to_thread(self.run_dir.finished.load, task, config.k)
            if config.k > 1 and self.run_dir.finished.may_hold(task)
            else {}
        )
        attempts: dict[int, EvaluatedAttempt] = {}
        for index in range(1, config.k + 1):
            if done(attempts):
                break
            plan = self.planner.plan(task, index)
            persisted = self.planner.persisted(plan)
            self.run_dir.record.keep_plan(task.id, index, persisted)
            earlier = finished.get(index)
            if earlier is not None and earlier.meta.get("resolved_execution_plan") == persisted.view:
                attempts[index] = earlier
                continue
            if self.planner.budget is not None:
                # An attempt does not start once the sweep's budget is spent (BudgetExhausted ends the task).
                await asyncio.to_thread(check_budget, self.planner.budget)
            attempts[index] = await self.run_attempt(task, plan)
            if config.k > 1:
                await asyncio.to_thread(self.run_dir.finished.save, task, attempts[index])
        return build_detail(task, config.k, config.strategy, attempts)

    async def run_attempt(self, task: TaskSpec, plan: ExecutionPlan) -> EvaluatedAttempt:
        """One semantic attempt; runtime retries of the whole attempt reuse its plan (R-ATT-1)."""
        retries = RetryAllowance(plan.max_retries, plan.retry_pattern_list)
        environment = self.request.environment
        while True:
            async with self.permits.hold(environment.id, environment.capacity):
                attempt, site = await self._attempt_once(task, plan, retries)
            whole = WHOLE_ATTEMPT_SITES | (
                {"evaluation"} if plan.evaluation_environment_mode is EvaluationMode.reuse else set()
            )
            matched = retries.take(attempt.error) if site in whole else None
            if matched is None:
                attempt.retries = retries.used
                analyze_attempt(self.analyzers, task, attempt)
                return attempt
            await self._discard(
                task,
                plan,
                retries.used,
                site or "general",
                "attempt",
                matched,
                attempt.error,
                attempt.model_dump(mode="json"),
            )
            await asyncio.to_thread(self.run_dir.set_attempt_aside, task, plan.attempt)

    async def _discard(
        self,
        task: TaskSpec,
        plan: ExecutionPlan,
        retry: int,
        phase: str,
        scope: str,
        matched: str,
        error: str | None,
        discarded: dict[str, Any] | None = None,
    ) -> None:
        """R-RETRY-3: the discarded try goes to retry_details/, outside the countable details."""
        record = {
            "phase": phase,
            "scope": scope,
            "matched_pattern": matched,
            "error": error,
            "plan": self.planner.persisted(plan).view,
            "discarded": discarded,
        }
        await asyncio.to_thread(self.run_dir.save_retry_detail, task.id, plan.attempt, retry, record)
        self.run_dir.log(
            f"retry {retry} of {task.id} attempt {plan.attempt} ({phase}, scope {scope}): "
            f"{(error or '').splitlines()[-1][:200] if error else ''}"
        )

    async def _attempt_once(
        self, task: TaskSpec, plan: ExecutionPlan, retries: RetryAllowance
    ) -> tuple[EvaluatedAttempt, str | None]:
        """One try of an attempt; returns it with the site where it failed (None when it did not). A
        resumed attempt's duration and start count the processes that worked on it before (its activity
        log has their time), not this one's alone."""
        started_at, started = utcnow(), time.monotonic()
        if self.plugins.harness.durable:
            earlier = await asyncio.to_thread(
                ActivityLog(self.run_dir.durable_dir(task.id, plan.attempt) / ACTIVITY_FILE).records
            )
            if earlier:
                started_at = datetime.fromtimestamp(earlier[0].at, timezone.utc).isoformat(timespec="milliseconds")
                started -= earlier[-1].elapsed_s
        plan = plan.model_copy(update={"artifacts_dir": self.run_dir.attempt_files.dir(task.id, plan.attempt)})
        benchmark = self.plugins.benchmark
        tried = _Try(plan)
        try:
            tried.session = await open_session(self.plugins.environment, plan, task)
            tried.environment = tried.session.describe()
            tried.phase = "prepare"
            prepared = await benchmark.prepare_task(task, tried.session, self.request, plan.benchmark_plan)
            if task.steps:
                await self._steps(tried, prepared, retries)
            else:
                await self._once(tried, task, prepared, retries)
        except EnvironmentLimitExceeded as exc:
            # What the agent did (or left for the verifier) hit a declared limit: its failure, scored.
            tried.failure = _failure(exc)
        except BudgetExhausted:
            # The sweep's budget, not the agent, stopped the attempt: no outcome of the task, no retry.
            raise
        except TaskRefused as exc:
            # The environment cannot run this task as it asks: no try would change that.
            tried.error, tried.site = str(exc), "refused"
        except Exception as exc:
            tried.error, tried.site = _failure(exc), tried.phase
        finally:
            if tried.session is not None and not plan.keep_environment:
                await self._close_quietly(tried.session, "task environment")
        return self._evaluated(plan, started_at, started, tried), tried.site

    async def _once(self, tried: _Try, task: TaskSpec, prepared: PreparedTask, retries: RetryAllowance) -> None:
        """Run, collect and evaluate a task of one step, in the plan's evaluation mode."""
        plan, benchmark = tried.plan, self.plugins.benchmark
        assert tried.session is not None
        tried.phase = "inference"
        result = tried.result = await self._run(prepared, tried.session, plan)
        tried.failure = _agent_failure(result)
        if result.error is None and tried.failure is None:
            tried.phase = "artifact"
            result = tried.result = await benchmark.collect_artifacts(prepared, result, tried.session)
        if result.error is not None:
            tried.site = tried.phase
            return
        if tried.failure is not None:
            return
        tried.phase = "evaluation"
        mode = plan.evaluation_environment_mode
        if mode is EvaluationMode.reuse:
            evaluation = await self._evaluate_reuse(prepared, result, tried.session, plan)
        else:
            if not plan.keep_environment:
                closing, tried.session = tried.session, None
                await self._close_quietly(closing, "task environment")
            if mode is EvaluationMode.none:
                evaluation = await self._evaluate_in_driver(task, prepared, result, plan, retries)
            else:
                evaluation = await self._evaluate_fresh(task, prepared, result, plan, retries)
        await self._judged(tried, evaluation)

    async def _steps(self, tried: _Try, prepared: PreparedTask, retries: RetryAllowance) -> None:
        """A multi-step task: each step prepared by the benchmark in the environment the earlier ones left,
        run by a harness session of its own within the step's time, verified in place; then the attempt's
        evaluation from the steps'. An agent's failure or an error in a step ends the attempt there."""
        plan, benchmark = tried.plan, self.plugins.benchmark
        session = tried.session
        assert session is not None
        if plan.evaluation_environment_mode is not EvaluationMode.reuse:
            raise TaskRefused(
                f"task {prepared.task.id!r} has steps, each verified in the environment the next "
                "step goes on in: declare execution.evaluation_environment_mode: reuse"
            )
        done: list[StepOutcome] = []
        tried.result = RunResult()
        for step in prepared.task.steps:
            tried.phase = "prepare"
            step_prepared = await benchmark.prepare_step(prepared, step, session, done)
            if step_prepared is None:
                break
            tried.phase = "inference"
            result = await self._run(step_prepared, session, step_plan(plan, step), step.name)
            failure = _agent_failure(result)
            if result.error is None and failure is None:
                tried.phase = "artifact"
                result = await benchmark.collect_artifacts(step_prepared, result, session)
            tried.result = joined(tried.result, result, step.name)
            if result.error is not None:
                tried.site = tried.phase
                return
            if failure is not None:
                tried.failure = f"step {step.name!r}: {failure}"
                return
            tried.phase = "evaluation"
            evaluation = await self._evaluate_reuse(step_prepared, result, session, plan)
            if evaluation.error is not None:
                await self._judged(tried, evaluation)
                return
            tried.files += await asyncio.to_thread(self._keep_files, plan, evaluation)
            done.append(
                StepOutcome(name=step.name, evaluation=evaluation, status=result.status, failure=evaluation.failure)
            )
        await self._judged(tried, benchmark.combine_steps(prepared, done))

    async def _judged(self, tried: _Try, evaluation: Evaluation) -> None:
        """The evaluation of the try, its files kept beside the attempt's detail."""
        tried.evaluation = evaluation
        if evaluation.error is not None:
            tried.site = "evaluation"
        tried.failure = evaluation.failure
        tried.files += await asyncio.to_thread(self._keep_files, tried.plan, evaluation)

    def _keep_files(self, plan: ExecutionPlan, evaluation: Evaluation) -> list[str]:
        return self.run_dir.attempt_files.save(plan.task_id, plan.attempt, evaluation.files) if evaluation.files else []

    def _evaluated(self, plan: ExecutionPlan, started_at: str, started: float, tried: _Try) -> EvaluatedAttempt:
        """The record of one try: the run's outcome, the evaluation's score, and where it failed."""
        error, failure, site, evaluation = tried.error, tried.failure, tried.site, tried.evaluation
        result = tried.result or RunResult(status="failed" if failure else "error")
        scored = evaluation is not None and evaluation.error is None and failure is None
        return EvaluatedAttempt(
            attempt=plan.attempt,
            status=("error" if error else "failed" if failure else result.status)
            if result.status == "completed"
            else result.status,
            correct=bool(scored and evaluation and evaluation.correct),
            score=evaluation.score if scored and evaluation else 0.0,
            final_answer=result.final_answer,
            run_error=(error if site != "evaluation" else None) or result.error,
            eval_error=(evaluation.error if evaluation else None) or (error if site == "evaluation" else None),
            failure=failure,
            benchmark_fields=evaluation.fields if evaluation else {},
            rewards=evaluation.rewards if scored and evaluation else {},
            trajectory=result.trajectory,
            artifacts=result.artifacts,
            usage=result.usage,
            duration_s=time.monotonic() - started,
            limit=result.limit,
            started_at=started_at,
            finished_at=utcnow(),
            meta={
                "resolved_execution_plan": self.planner.persisted(plan).view,
                **({"failure_site": site} if site else {}),
                **({"environment": tried.environment} if tried.environment else {}),
                **({"files": tried.files} if tried.files else {}),
                **({"lineage": self.request.lineage.model_dump(mode="json")} if self.request.lineage else {}),
            },
        )

    async def _run(
        self, prepared: PreparedTask, session: EnvironmentSession, plan: ExecutionPlan, step: str | None = None
    ) -> RunResult:
        """R-ATT-2: the harness path (a harness-free benchmark's own run through harness ``none``), under
        the run policy; one step's run, in a multi-step task."""
        harness = self.plugins.harness
        benchmark = self.plugins.benchmark
        prepared = harness.adapt_input(prepared)
        if harness.durable:
            durable = self.run_dir.durable_dir(prepared.task.id, plan.attempt, step)
            seed = self.request.durable_seed
            if seed is not None and not durable.exists():
                # A fork starts from its parent's history and checkpoints (R-FORK-1).
                await asyncio.to_thread(copy_durable, seed, durable)
            plan = plan.model_copy(update={"durable_dir": durable})
        # The harness is held to the attempt's limits by what its session is handed, not by its own checks.
        limits = AttemptLimits(plan.agent_limits, plan.durable_dir / ACTIVITY_FILE if plan.durable_dir else None)
        harness_session = await limited_harness(harness, limits).start_session(
            prepared, LimitedEnvironment(session, limits), benchmark, plan
        )
        try:
            await session.set_network_policy(plan.run_network_policy)
            return await timed_run(harness_session.run(), plan, harness_session, limits)
        finally:
            await self._close_quietly(harness_session, "harness session")

    async def _evaluate_reuse(
        self, prepared: PreparedTask, result: RunResult, session: EnvironmentSession, plan: ExecutionPlan
    ) -> Evaluation:
        """R-ATT-4 reuse: evaluation policy, evaluate in the task session, baseline restored even when
        cancelled (R-NET-1). What the agent left running is killed first: it must not touch its work, or
        the verifier's files, while they are checked."""
        await session.stop_processes()
        await session.set_network_policy(plan.evaluation_network_policy)
        try:
            return await _evaluate_safely(self.plugins.benchmark, prepared, result, session)
        finally:
            await asyncio.shield(session.set_network_policy(plan.baseline_network_policy))

    async def _evaluate_in_driver(
        self, task: TaskSpec, prepared: PreparedTask, result: RunResult, plan: ExecutionPlan, retries: RetryAllowance
    ) -> Evaluation:
        """R-ATT-4 none: evaluate here with env=None; a failure retries the evaluation only."""
        while True:
            evaluation = await _evaluate_safely(self.plugins.benchmark, prepared, result, None)
            matched = retries.take(evaluation.error)
            if matched is None:
                return evaluation
            await self._discard(task, plan, retries.used, "evaluation", "evaluate", matched, evaluation.error)

    async def _evaluate_fresh(
        self, task: TaskSpec, prepared: PreparedTask, result: RunResult, plan: ExecutionPlan, retries: RetryAllowance
    ) -> Evaluation:
        """R-ATT-4 fresh: a new evaluation session per try, closed in its own finally; a failure reopens
        it and retries the evaluation."""
        while True:
            try:
                fresh = await open_session(self.plugins.environment, plan, task)
                try:
                    await fresh.set_network_policy(plan.evaluation_network_policy)
                    try:
                        evaluation = await _evaluate_safely(self.plugins.benchmark, prepared, result, fresh)
                    finally:
                        await asyncio.shield(fresh.set_network_policy(plan.baseline_network_policy))
                finally:
                    if not plan.keep_environment:
                        await self._close_quietly(fresh, "evaluation environment")
            except Exception as exc:
                evaluation = Evaluation(error=_failure(exc))
            matched = retries.take(evaluation.error)
            if matched is None:
                return evaluation
            await self._discard(
                task, plan, retries.used, "evaluation", "evaluation_environment", matched, evaluation.error
            )

    async def _close_quietly(self, resource: Any, what: str) -> None:
        """R-CLEAN-1: a close failure is a warning and never hides the task's own failure; cancellation,
        KeyboardInterrupt and SystemExit propagate."""
        try:
            await resource.close()
        except Exception as exc:
            message = f"warning: closing the {what} failed: {type(exc).__name__}: {exc}"
            log.warning(message)
            self.run_dir.log(message)


async def _evaluate_safely(benchmark: Any, prepared: PreparedTask, result: RunResult, session: Any) -> Evaluation:
    try:
        evaluation: Evaluation = await benchmark.evaluate(prepared, result, session)
    except EnvironmentLimitExceeded as exc:
        # The verifier, checking what the agent left, hit a limit: the agent's failure.
        return Evaluation(failure=_failure(exc))
    except Exception as exc:
        return Evaluation(error=_failure(exc))
    return evaluation
