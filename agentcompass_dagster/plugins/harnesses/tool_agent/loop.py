"""The `tool_agent` harness: a compact tool-calling agent loop over any Model plugin.

    harness:
      id: tool_agent
      params: {compact_at_tokens: 60000, replay_safe_commands: ["^(cat|ls|grep|head|tail) "]}
    execution:
      limits: {max_turns: 30, max_tokens: 200000, max_cost_usd: 2.0, max_wall_s: 1800}

The model sees a system prompt and the task, and has two tools: ``bash`` (runs in the task's
environment) and ``submit`` (ends the attempt with an answer). The loop is durable: every model call and
tool call goes through the attempt's activity log (R-LOG-1), every completed tool call through a
checkpoint of the environment's files (R-CKPT-1), and the loop's state is always *rebuilt from the log*,
so a resumed attempt continues where the log ends instead of starting over (R-RESUME-1..3).

A model that sends malformed tool arguments or an unknown tool ends the attempt with an error that says
which. The limits are the framework's to enforce (the session's model and environment): the loop only
catches the LimitExceeded they raise, to end the attempt with the limit recorded (an outcome, scored like
any other). The trajectory up to that point is kept either way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentcompass_dagster.contracts.model import (
    CallContext,
    ContextOverflow,
    LimitExceeded,
    Model,
    ModelError,
    ToolCall,
)
from agentcompass_dagster.durable.activity import ActivityRecord
from agentcompass_dagster.durable.resume import prepare_resume
from agentcompass_dagster.plugins.harnesses.durable_agent import (
    DurableAgentHarness,
    DurableAgentSession,
    call_model,
    durable_session,
)
from agentcompass_dagster.plugins.harnesses.tool_agent.state import AgentState, summarize, trajectory
from agentcompass_dagster.plugins.harnesses.tool_agent.tools import TOOL_ARGUMENT, TOOLS, ToolAgentParams
from agentcompass_dagster.plugins.models.usage import usage_totals
from agentcompass_dagster.contracts.records import LimitHit, RunResult, SweepBudget, Usage

if TYPE_CHECKING:
    from agentcompass_dagster.contracts.environment import EnvironmentSession


class AgentFailure(Exception):
    """The model broke the tool protocol: the attempt ends with this error."""


@dataclass
class AgentOutcome:
    """What a run of the loop produced; dispatch and the harness both build on it."""

    status: str
    final_answer: str | None
    error: str | None
    trajectory: list[dict[str, Any]]
    turns: list[Usage]
    tool_calls: list[dict[str, Any]]
    usage: Usage
    cost_complete: bool
    duration_s: float
    resumed: str | None = None
    model_ids: list[str | None] = field(default_factory=list)
    shared_prefix_usage: Usage | None = None
    limit: LimitHit | None = None
    model_failed: bool = False


class AgentRun:
    """One attempt of the loop against one environment session and one activity log; ``model`` and
    ``env`` are the attempt's, under its limits (runtime/execution/agent_limits.py)."""

    def __init__(
        self,
        model: Model,
        params: ToolAgentParams,
        env: EnvironmentSession,
        *,
        task_id: str,
        attempt: int,
        prompt: str,
        durable_dir: Path,
        fingerprint: dict[str, Any],
        log_redacted: bool = True,
        on_record: Callable[[ActivityRecord], None] | None = None,
        budget: SweepBudget | None = None,
    ) -> None:
        self.model = model
        self.budget = budget
        self.params = params
        self.task_id = task_id
        self.attempt = attempt
        self.prompt = prompt
        self.session = durable_session(
            env,
            durable_dir,
            params,
            fingerprint=fingerprint,
            command_timeout_s=params.command_timeout_s,
            log_redacted=log_redacted,
            on_record=on_record,
        )
        # Built from the log once the run starts; every record appended after that advances it, so the
        # state always equals a rebuild from the log without re-reading the whole log at every step.
        self.state: AgentState | None = None
        self.session.listeners.append(self._advance)

    def _advance(self, record: ActivityRecord) -> None:
        if self.state is not None:
            self.state.apply(record)

    def rebuilt_state(self) -> AgentState:
        return AgentState.from_log(self.session.log.records(), self.params.system_prompt, self.prompt)

    # --- the loop --------------------------------------------------------------------------------

    async def run(self) -> AgentOutcome:
        session = self.session
        resumed = None
        if session.log.records():
            decision = await prepare_resume(session)
            if decision.classification == "busy":
                return self.outcome(self.rebuilt_state(), error=decision.reason, resumed="busy")
            if decision.classification == "finished":
                state = self.rebuilt_state()
                return self.outcome(state, error=state.error, resumed="finished")
            resumed = decision.classification
        session.begin(resumed)
        self.state = state = self.rebuilt_state()
        overflowed_at: int | None = None
        try:
            while not state.finished:
                if state.pending:
                    key, call = state.pending[0]
                    await self._tool_step(key, call, state.turns - 1)
                    continue
                self._maybe_compact(state)
                try:
                    await self._model_step(state)
                except ContextOverflow:
                    # One compaction and one more try per turn: an endpoint that still refuses is an error.
                    if overflowed_at == state.turns or not self._maybe_compact(state, force=True):
                        raise
                    overflowed_at = state.turns
        except AgentFailure as exc:
            state.error = str(exc)
        except LimitExceeded as exc:
            state.limit = exc.hit
        except ModelError as exc:
            state.error = f"model call failed: {exc}"
        status = "completed" if state.error is None else "error"
        session.end(status, state.error, state.final_answer, state.limit.model_dump() if state.limit else None)
        return self.outcome(state, error=state.error, resumed=resumed)

    def stop(self, error: str) -> AgentOutcome:
        """The runtime stopped the loop (attempt timeout): end the log's session with the error, so a
        re-run starts the attempt over instead of resuming it, and return what was recorded."""
        state = self.state or self.rebuilt_state()
        self.session.end("error", error, state.final_answer, None)
        return self.outcome(state, error=error, resumed=None)

    async def _model_step(self, state: AgentState) -> None:
        """The state advances from the completed record, like every other step."""
        context = CallContext(task_id=self.task_id, attempt=self.attempt, turn=state.turns)
        await call_model(self.session, self.model, list(state.messages), TOOLS, context, self.budget)

    async def _tool_step(self, key: str, call: ToolCall, turn: int) -> None:
        arguments = call.parsed_arguments()
        command = arguments.get("command") if call.name == "bash" and arguments else None
        self.session.append(
            ActivityRecord(
                id=key,
                kind="tool_call",
                status="in_flight",
                data={"turn": turn, "call": call.model_dump(), "command": command},
            )
        )
        data: dict[str, Any] = {"turn": turn, "call": call.model_dump()}
        wanted = TOOL_ARGUMENT.get(call.name)
        if wanted is None:
            data.update(
                error=f"model called unknown tool {call.name!r} (tools: {', '.join(TOOL_ARGUMENT)})",
                observation=f"error: unknown tool {call.name!r}",
            )
        elif arguments is None or not isinstance(arguments.get(wanted), str):
            data.update(
                error=f"model sent malformed arguments for {call.name!r}: {call.arguments[:200]!r} "
                f"(expected a JSON object with a string {wanted!r})",
                observation=f"error: malformed arguments for {call.name!r}",
            )
        elif call.name == "submit":
            data.update(answer=arguments["answer"], observation="submitted")
        else:
            data.update(await self.session.execute(key, arguments["command"]))
        await self.session.complete_tool(key, data)

    def _maybe_compact(self, state: AgentState, force: bool = False) -> bool:
        """R-LOG-2: replace older turns by a summary once the context passes its budget (or the endpoint
        refused it as too long); the summary and the range it replaces are logged, so a resume rebuilds
        the compacted context exactly. Returns whether it compacted."""
        budget = self.params.compact_at_tokens
        if not force and (budget is None or sum(len(json.dumps(m)) for m in state.messages) // 4 <= budget):
            return False
        start = 2
        end = len(state.messages) - self.params.keep_recent_messages
        # Never split an assistant turn from its tool results.
        while end > start and state.messages[end]["role"] == "tool":
            end -= 1
        if end - start < 2:
            return False
        summary = summarize(state.messages[start:end])
        self.session.append(
            ActivityRecord(
                id=f"compaction-{state.compactions}",
                kind="compaction",
                status="completed",
                checkpoint_seq=self.session.log.last_checkpoint_seq(),
                data={"start": start, "count": end - start, "summary": summary},
            )
        )
        return True

    # --- the result ------------------------------------------------------------------------------

    def outcome(self, state: AgentState, *, error: str | None, resumed: str | None) -> AgentOutcome:
        usage, complete = usage_totals(state.usages)
        records = self.session.log.records()
        return AgentOutcome(
            status="completed" if error is None else "error",
            final_answer=state.final_answer,
            error=error,
            trajectory=trajectory(records, self.params.system_prompt, self.prompt),
            turns=list(state.usages),
            tool_calls=[r.data for r in records if r.kind == "tool_call" and r.status in ("completed", "interrupted")],
            usage=usage,
            cost_complete=complete,
            duration_s=self.session.elapsed(),
            resumed=resumed,
            model_ids=[
                r.data["response"].get("model_id")
                for r in records
                if r.kind == "model_call" and r.status == "completed"
            ],
            shared_prefix_usage=usage_totals(state.inherited_usages)[0] if state.inherited_usages else None,
            limit=state.limit,
            model_failed=bool(error and error.startswith("model call failed")),
        )


class ToolAgentSession(DurableAgentSession):
    """One attempt of the loop; keeps its AgentRun so that an attempt the runtime stopped still gives
    the trajectory it recorded."""

    harness: ToolAgentHarness
    agent: AgentRun | None = None

    async def run(self) -> RunResult:
        harness = self.harness
        self.agent = AgentRun(
            self.model,
            harness.params,
            self.env,
            task_id=self.prepared.task.id,
            attempt=self.plan.attempt,
            prompt=self.prepared.input,
            durable_dir=self.durable_dir(),
            fingerprint=self.fingerprint(),
            budget=self.plan.budget,
        )
        return outcome_result(await self.agent.run())

    def stopped(self, error: str) -> RunResult | None:
        if self.agent is None:
            return None
        result = outcome_result(self.agent.stop(error))
        result.status = "timeout"
        return result


class ToolAgentHarness(DurableAgentHarness):
    params_model = ToolAgentParams
    session_class = ToolAgentSession
    params: ToolAgentParams


def outcome_result(outcome: AgentOutcome) -> RunResult:
    # The model's own failure (a reply cut at its token limit, a malformed tool call) is the attempt's
    # scored failure; an endpoint that failed, or an environment still busy, is an error.
    own = outcome.error is not None and not outcome.model_failed and outcome.resumed != "busy"
    return RunResult(
        status="completed" if outcome.error is None else "error",
        final_answer=outcome.final_answer,
        trajectory=outcome.trajectory,
        usage=outcome.usage,
        duration_s=outcome.duration_s,
        error=None if own else outcome.error,
        failure=outcome.error if own else None,
        limit=outcome.limit,
        artifacts={
            "agent": {
                "turns": len(outcome.turns),
                "tool_calls": len(outcome.tool_calls),
                "cost_complete": outcome.cost_complete,
                "resumed": outcome.resumed,
                **(
                    {"shared_prefix_usage": outcome.shared_prefix_usage.model_dump(mode="json")}
                    if outcome.shared_prefix_usage
                    else {}
                ),
            }
        },
    )
