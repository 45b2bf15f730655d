"""One task's semantic attempts, and inside each the lifecycle of R-ATT-2..4: open the environment,
prepare, run the harness, collect artifacts, evaluate in the plan's evaluation mode, close inside-out."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import traceback
from typing import Any, Callable

from agentcompass_dagster.config import RunRequest
from agentcompass_dagster.environments.base import EnvironmentSession
from agentcompass_dagster.errors import field_error
from agentcompass_dagster.runtime.components import Components
from agentcompass_dagster.runtime.plan import Planner
from agentcompass_dagster.runtime.store import RunDir
from agentcompass_dagster.runtime.types import (
    EvaluatedAttempt,
    Evaluation,
    EvaluationMode,
    ExecutionPlan,
    PreparedTask,
    RunResult,
    TaskDetail,
    TaskSpec,
    utcnow,
)

log = logging.getLogger(__name__)


def _avg_done(attempts: dict[int, EvaluatedAttempt]) -> bool:
    return False


def _pass_done(attempts: dict[int, EvaluatedAttempt]) -> bool:
    return any(a.correct and a.error is None for a in attempts.values())


# A strategy says, after each attempt, whether the remaining ones may be skipped.
STRATEGIES: dict[str, Callable[[dict[int, EvaluatedAttempt]], bool]] = {"avg": _avg_done, "pass": _pass_done}


def check_strategy(name: str) -> None:
    if name not in STRATEGIES:
        raise field_error("execution.attempts.strategy", name, f"unknown strategy (known: {', '.join(STRATEGIES)})")


def _failure(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)).strip()


def retry_matches(error: str | None, patterns: list[str] | None) -> str | None:
    """R-RETRY-1: None matches any non-empty error, a list matches by regex, [] matches nothing.
    Returns the matching pattern ("*" for None), or None when the error is not retryable."""
    if not error:
        return None
    if patterns is None:
        return "*"
    return next((p for p in patterns if re.search(p, error)), None)


def build_detail(task: TaskSpec, k: int, strategy: str, attempts: dict[int, EvaluatedAttempt]) -> TaskDetail:
    first_correct = next((i for i in sorted(attempts) if attempts[i].correct and attempts[i].error is None), None)
    error = next((a.error for a in attempts.values() if a.error), None)
    return TaskDetail(
        task_id=task.id,
        category=task.category,
        k=k,
        strategy=strategy,
        attempts={str(i): attempts[i] for i in sorted(attempts)},
        attempts_tried=len(attempts),
        first_correct_attempt=first_correct,
        correct=first_correct is not None,
        score=sum(a.score for a in attempts.values()) / len(attempts) if attempts else 0.0,
        retry_count=sum(a.retries for a in attempts.values()),
        error=error,
        finished_at=utcnow(),
    )


class TaskRunner:
    """Runs the attempts of one request's tasks; one instance per request, shared by the workers."""

    def __init__(self, request: RunRequest, components: Components, run_dir: RunDir) -> None:
        self.request = request
        self.components = components
        self.run_dir = run_dir
        self.planner = Planner(request, components)

    async def run_task(self, task: TaskSpec) -> TaskDetail:
        attempts_config = self.request.execution.attempts
        done = STRATEGIES[attempts_config.strategy]
        attempts: dict[int, EvaluatedAttempt] = {}
        for index in range(1, attempts_config.k + 1):
            attempts[index] = await self.run_attempt(task, index)
            if done(attempts):
                break
        return build_detail(task, attempts_config.k, attempts_config.strategy, attempts)

    async def run_attempt(self, task: TaskSpec, index: int) -> EvaluatedAttempt:
        """A semantic attempt: planned once, retried whole in a new environment with the same plan."""
        plan = self.planner.plan(task, index)
        self.run_dir.record_resolved_execution_plan(plan)
        retry = 0
        while True:
            attempt = await self._attempt_once(task, plan)
            attempt.retries = retry
            matched = retry_matches(attempt.error, plan.retry_pattern_list)
            if matched is None or retry >= plan.max_retries:
                return attempt
            retry += 1
            await asyncio.to_thread(
                self.run_dir.save_retry_detail,
                task.id,
                index,
                retry,
                {
                    "phase": "evaluation" if attempt.eval_error else "run",
                    "scope": "attempt",
                    "matched_pattern": matched,
                    "error": attempt.error,
                    "plan": plan.persisted_view(),
                },
            )

    async def _attempt_once(self, task: TaskSpec, plan: ExecutionPlan) -> EvaluatedAttempt:
        started_at, started = utcnow(), time.monotonic()
        benchmark = self.components.benchmark
        session: EnvironmentSession | None = None
        result: RunResult | None = None
        evaluation: Evaluation | None = None
        run_error: str | None = None
        try:
            session = await self.components.environment.open(plan, task)
            prepared = await benchmark.prepare_task(task, session, self.request, plan.benchmark_plan)
            result = await self._run_harness(prepared, session, plan)
            if result.error is None:
                result = await benchmark.collect_artifacts(prepared, result, session)
            if result.error is None:
                evaluation, session = await self._evaluate(prepared, result, session, plan)
        except Exception as exc:
            run_error = _failure(exc)
        finally:
            if session is not None and not plan.keep_environment:
                await _close_quietly(session, "task environment")
        result = result or RunResult(status="error")
        return EvaluatedAttempt(
            attempt=plan.attempt,
            status=result.status if run_error is None else "error",
            correct=bool(evaluation and evaluation.correct and evaluation.error is None),
            score=evaluation.score if evaluation and evaluation.error is None else 0.0,
            final_answer=result.final_answer,
            run_error=run_error or result.error,
            eval_error=evaluation.error if evaluation else None,
            benchmark_fields=evaluation.fields if evaluation else {},
            trajectory=result.trajectory,
            artifacts=result.artifacts,
            usage=result.usage,
            duration_s=time.monotonic() - started,
            started_at=started_at,
            finished_at=utcnow(),
            meta={"resolved_execution_plan": plan.persisted_view()},
        )

    async def _run_harness(self, prepared: PreparedTask, session: EnvironmentSession, plan: ExecutionPlan) -> RunResult:
        harness_session = await self.components.harness.start_session(prepared, session, self.components.benchmark)
        started = time.monotonic()
        try:
            await session.set_network_policy(plan.run_network_policy)
            try:
                result: RunResult = await asyncio.wait_for(harness_session.run(), plan.attempt_timeout_s)
            except asyncio.TimeoutError:
                result = RunResult(status="timeout", error=f"attempt timed out after {plan.attempt_timeout_s}s")
        finally:
            await _close_quietly(harness_session, "harness session")
        if not result.duration_s:
            result.duration_s = time.monotonic() - started
        return result

    async def _evaluate(
        self, prepared: PreparedTask, result: RunResult, session: EnvironmentSession, plan: ExecutionPlan
    ) -> tuple[Evaluation, EnvironmentSession | None]:
        """R-ATT-4. Returns the evaluation and the task session still open (None once closed here)."""
        benchmark = self.components.benchmark
        mode = plan.evaluation_environment_mode
        if mode is EvaluationMode.reuse:
            await session.set_network_policy(plan.evaluation_network_policy)
            try:
                return await _evaluate_safely(benchmark, prepared, result, session), session
            finally:
                await asyncio.shield(session.set_network_policy(plan.baseline_network_policy))
        if not plan.keep_environment:
            await _close_quietly(session, "task environment")
        if mode is EvaluationMode.none:
            return await _evaluate_safely(benchmark, prepared, result, None), None
        fresh = await self.components.environment.open(plan, prepared.task)
        try:
            await fresh.set_network_policy(plan.evaluation_network_policy)
            return await _evaluate_safely(benchmark, prepared, result, fresh), None
        finally:
            await _close_quietly(fresh, "evaluation environment")


async def _evaluate_safely(benchmark: Any, prepared: PreparedTask, result: RunResult, session: Any) -> Evaluation:
    try:
        evaluation: Evaluation = await benchmark.evaluate(prepared, result, session)
    except Exception as exc:
        return Evaluation(error=_failure(exc))
    return evaluation


async def _close_quietly(resource: Any, what: str) -> None:
    """R-CLEAN-1: a close failure is a warning and never hides the task's own failure."""
    try:
        await resource.close()
    except Exception as exc:
        log.warning("closing the %s failed: %s", what, exc)
