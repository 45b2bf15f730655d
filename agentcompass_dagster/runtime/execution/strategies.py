"""The strategies of a task's k semantic attempts (R-RETRY-1: ``avg`` runs all k, ``pass`` may stop at the
first valid success) and the task's detail made from its attempts (R-STORE-5)."""

from __future__ import annotations

from collections.abc import Callable

from agentcompass_dagster.contracts.records import EvaluatedAttempt, TaskSpec, utcnow
from agentcompass_dagster.contracts.request import Strategy
from agentcompass_dagster.runtime.store.outcomes import TaskDetail


def _avg_done(attempts: dict[int, EvaluatedAttempt]) -> bool:
    return False


def _pass_done(attempts: dict[int, EvaluatedAttempt]) -> bool:
    return any(a.correct and a.error is None for a in attempts.values())


# A strategy says, given the attempts so far, whether the remaining ones may be skipped (R-RETRY-1); the
# declaration accepts only these (config.AttemptsConfig.strategy).
STRATEGIES: dict[Strategy, Callable[[dict[int, EvaluatedAttempt]], bool]] = {"avg": _avg_done, "pass": _pass_done}


def build_detail(task: TaskSpec, k: int, strategy: Strategy, attempts: dict[int, EvaluatedAttempt]) -> TaskDetail:
    first_correct = next((i for i in sorted(attempts) if attempts[i].correct and attempts[i].error is None), None)
    error = next((a.error for a in attempts.values() if a.error), None)
    failure = next((a.failure for a in attempts.values() if a.failure), None)
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
        failure=failure,
        finished_at=utcnow(),
    )
