"""What the durable agent harnesses (tool_agent, miniswe) share: their durable params, a model call
through the activity log, and a harness session that opens the attempt's
DurableSession (in the run directory's ``.durable/``, or in a temporary directory removed at close when
the runtime gave none)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentcompass_dagster.contracts.declarations import HarnessConfig, ModelConfig
from agentcompass_dagster.contracts.harness import AgentHarness, HarnessSession
from agentcompass_dagster.contracts.model import CallContext, LimitExceeded, Model, ModelError, ModelTry, ModelTurn
from agentcompass_dagster.durable.activity import ActivityRecord
from agentcompass_dagster.durable.session import DurableSession
from agentcompass_dagster.plugins.models.usage import turn_usage
from agentcompass_dagster.runtime.store.budget import reserve_call, settle_call
from agentcompass_dagster.contracts.records import (
    AgentLimits,
    ExecutionPlan,
    PreparedTask,
    SweepBudget,
    Usage,
)

if TYPE_CHECKING:
    from agentcompass_dagster.contracts.benchmark import Benchmark
    from agentcompass_dagster.contracts.environment import EnvironmentSession


def refuse_moved_limits(value: Any, moved_names: set[str]) -> Any:
    """Limits used to be harness params; name where they went instead of a bare 'extra field'."""
    if isinstance(value, dict):
        moved = sorted(set(value) & moved_names)
        if moved:
            raise ValueError(
                f"{', '.join(moved)}: agent limits are declared once for every harness, in "
                "execution.limits (max_turns, max_tokens, max_cost_usd, max_wall_s); harness.params "
                "keeps only what is specific to the harness"
            )
    return value


class DurableAgentParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # Names a harness took its limits by before execution.limits held them.
    former_limit_names: ClassVar[set[str]] = set(AgentLimits.model_fields)

    max_observation_chars: int = Field(default=10_000, ge=100)
    # Interrupted bash commands matching one of these are re-run on resume; any other is reported to
    # the model as interrupted, since running it twice could repeat a side effect (R-RESUME-2).
    replay_safe_commands: list[str] = Field(default_factory=list)
    checkpoints: bool = True
    # How long a resume waits for a command still running in the old environment (R-RESUME-1).
    resume_wait_s: float = Field(default=30.0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _no_limits(cls, value: Any) -> Any:
        return refuse_moved_limits(value, cls.former_limit_names)


def fingerprint(plan: ExecutionPlan | None, harness: HarnessConfig, model: ModelConfig) -> dict[str, Any]:
    """What must match for a log to be resumed rather than started over (R-RESUME-1)."""
    parts = {
        "plan": plan.persisted_view() if plan is not None else {},
        "harness": harness.model_dump(mode="json"),
        "model": model.model_dump(mode="json"),
    }
    return {
        name: hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:16] for name, part in parts.items()
    }


def durable_session(
    env: EnvironmentSession,
    directory: Path,
    params: DurableAgentParams,
    *,
    fingerprint: dict[str, Any],
    command_timeout_s: float,
    log_redacted: bool = True,
    on_record: Callable[[ActivityRecord], None] | None = None,
) -> DurableSession:
    return DurableSession(
        env,
        directory,
        fingerprint=fingerprint,
        command_timeout_s=command_timeout_s,
        max_observation_chars=params.max_observation_chars,
        replay_safe_commands=params.replay_safe_commands,
        resume_wait_s=params.resume_wait_s,
        checkpoints=params.checkpoints,
        log_redacted=log_redacted,
        on_record=on_record,
    )


async def call_model(
    session: DurableSession,
    model: Model,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    context: CallContext,
    budget: SweepBudget | None = None,
    record: dict[str, Any] | None = None,
) -> tuple[ModelTurn, Usage]:
    """One model call, admitted by the sweep's budget first (BudgetExhausted when it is spent; nothing
    is logged then, so the attempt can run later from where it stopped), through the activity log: in
    flight before it is sent, completed with its response and usage, or aborted with why (the endpoint
    failed, or the attempt's limits refused it or cut it: LimitExceeded, raised on). ``record``: what
    else the completed record keeps of the call."""
    if budget is None:
        return await _logged_call(session, model, messages, tools, context, record or {})
    call = await reserve_call(budget)
    usage: Usage | None = None
    try:
        reply, usage = await _logged_call(session, model, messages, tools, context, record or {})
    finally:
        settle_call(budget, call, usage)
    return reply, usage


async def _logged_call(
    session: DurableSession,
    model: Model,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    context: CallContext,
    record: dict[str, Any],
) -> tuple[ModelTurn, Usage]:
    turn = context.turn
    request_id = f"model-{turn}"

    def abort(reason: str, tries: list[ModelTry] | None = None, **data: Any) -> None:
        session.append(
            ActivityRecord(
                id=request_id,
                kind="model_call",
                status="aborted",
                data={"turn": turn, "error": reason, "tries": [t.model_dump(mode="json") for t in tries or []], **data},
            )
        )

    session.append(ActivityRecord(id=request_id, kind="model_call", status="in_flight", data={"turn": turn}))
    try:
        reply = await model.complete(messages, tools, context)
    except LimitExceeded as exc:
        if exc.in_flight:
            abort(f"{exc.hit.message} during the model call")
        else:
            # Never sent: the record closes the in-flight one, and no trajectory shows it as a call.
            abort(f"{exc.hit.message}: not sent", refused=True)
        raise
    except ModelError as exc:
        abort(str(exc), exc.tries)
        raise
    usage = turn_usage(reply.usage, reply.cost_usd, model.price)
    session.append(
        ActivityRecord(
            id=request_id,
            kind="model_call",
            status="completed",
            checkpoint_seq=session.log.last_checkpoint_seq(),
            data={
                "turn": turn,
                "response": reply.model_dump(mode="json"),
                "usage": usage.model_dump(mode="json"),
                **record,
            },
        )
    )
    return reply, usage


class DurableAgentSession(HarnessSession):
    harness: DurableAgentHarness
    _temporary: Path | None = None

    def durable_dir(self) -> Path:
        if self.plan.durable_dir is not None:
            return self.plan.durable_dir
        self._temporary = Path(tempfile.mkdtemp(prefix="agentcompass-agent-"))
        return self._temporary

    def fingerprint(self) -> dict[str, Any]:
        return fingerprint(self.plan, self.harness.config, self.harness.model.config)

    async def close(self) -> None:
        if self._temporary is not None:
            await asyncio.to_thread(shutil.rmtree, self._temporary, True)


class DurableAgentHarness(AgentHarness):
    durable = True
    session_class: ClassVar[type[DurableAgentSession]]

    async def start_session(
        self, prepared: PreparedTask, env: EnvironmentSession, benchmark: Benchmark, plan: ExecutionPlan
    ) -> HarnessSession:
        return self.session_class(self, prepared, env, benchmark, plan)
