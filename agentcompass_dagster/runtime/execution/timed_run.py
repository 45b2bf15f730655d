"""A harness session's ``run`` under the attempt timeout and the agent's limits, and what ended it: the
run's own end; a limit, or the attempt timeout (the agent's time: a scored failure); or a model endpoint
that gave no response to a call the cut found waiting, and does not answer a probe either (an
infrastructure error, run again on reuse: a server that never answered is not the agent's doing)."""

from __future__ import annotations

import time
from collections.abc import Awaitable

from agentcompass_dagster.contracts.harness import HarnessSession
from agentcompass_dagster.contracts.model import LimitExceeded
from agentcompass_dagster.contracts.records import ExecutionPlan, RunResult
from agentcompass_dagster.runtime.execution.agent_limits import AttemptLimits


async def timed_run(
    run: Awaitable[RunResult], plan: ExecutionPlan, session: HarnessSession, limits: AttemptLimits
) -> RunResult:
    """What the harness recorded until it was stopped (its trajectory) stays in the result, and the
    limit hit is recorded on it."""
    started = time.monotonic()
    result: RunResult | None = None
    timed_out = False
    try:
        result = await limits.guard(run, plan.attempt_timeout_s)
    except LimitExceeded:
        if limits.hit is None:
            raise  # not the limits': the harness's own exception
    except TimeoutError:
        timed_out = True
    silence = await limits.calls.silence() if timed_out or limits.hit is not None else None
    if silence is not None:
        result = session.stopped(silence) or result or RunResult()
        result.error, result.failure, result.limit, result.status = silence, None, None, "error"
    elif timed_out:
        hit = limits.overrun()
        error = (
            hit.message
            if hit is not None
            else (f"attempt timed out after {plan.attempt_timeout_s:g}s (execution.limits.attempt_timeout_s)")
        )
        result = session.stopped(error) or RunResult(error=error)
        result.status = "timeout"
    elif result is None:
        # The harness let the limits' refusal end its run.
        assert limits.hit is not None
        result = session.stopped(limits.hit.message) or RunResult(error=limits.hit.message)
    if silence is None:
        limits.settle(result)
    if not result.duration_s:
        result.duration_s = time.monotonic() - started
    return result
