"""The `tool_agent` harness: a compact tool-calling agent loop over any Model plugin.

    harness:
      id: tool_agent
      params: {max_turns: 30, max_tokens: 200000, max_cost_usd: 2.0, max_wall_s: 1800,
               compact_at_tokens: 60000, replay_safe_commands: ["^(cat|ls|grep|head|tail) "]}

The model sees a system prompt and the task, and has two tools: ``bash`` (runs in the task's
environment) and ``submit`` (ends the attempt with an answer). The loop is durable: every model call and
tool call goes through the attempt's activity log (R-LOG-1), every completed tool call through a
checkpoint of the environment's files (R-CKPT-1), and the loop's state is always *rebuilt from the log*,
so a resumed attempt continues where the log ends instead of starting over (R-RESUME-1..3).

A model that sends malformed tool arguments or an unknown tool, or a loop that passes one of its limits,
ends the attempt with an error that says which; the trajectory up to that point is kept.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from agentcompass_dagster.config import HarnessConfig, ModelConfig
from agentcompass_dagster.durable.activity import (
    ACTIVITY_FILE,
    ActivityLog,
    ActivityRecord,
)
from agentcompass_dagster.durable.resume import CALLS_DIR, CURSOR_FILE, prepare_resume
from agentcompass_dagster.harnesses.base import AgentHarness
from agentcompass_dagster.models.base import (
    CallContext,
    Model,
    ModelError,
    ModelTurn,
    ToolCall,
)
from agentcompass_dagster.models.usage import turn_usage, usage_totals
from agentcompass_dagster.runtime.types import (
    ExecutionPlan,
    PreparedTask,
    RunResult,
    Usage,
)

if TYPE_CHECKING:
    from agentcompass_dagster.benchmarks.base import Benchmark
    from agentcompass_dagster.environments.base import EnvironmentSession

DEFAULT_SYSTEM_PROMPT = (
    "You are an autonomous agent solving a task in a Linux shell. Use the `bash` tool to run commands "
    "(each runs in a fresh shell in the task's working directory). When the task is done, call `submit` "
    "with your final answer (or a short note if the task asks for files, not an answer)."
)
# Each tool takes one string argument; the schema sent to the model and the check of what it sends
# back both come from here.
TOOL_ARGUMENT = {"bash": "command", "submit": "answer"}


def _tool(name: str, description: str) -> dict[str, Any]:
    argument = TOOL_ARGUMENT[name]
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {argument: {"type": "string"}}, "required": [argument]},
    }}


BASH_TOOL = _tool("bash", "Run a bash command in the task's working directory; returns exit code and output.")
SUBMIT_TOOL = _tool("submit", "Finish the task with a final answer.")
TOOLS = [BASH_TOOL, SUBMIT_TOOL]


class ToolAgentParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_turns: int = Field(default=30, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_wall_s: float | None = Field(default=None, gt=0)
    command_timeout_s: float = Field(default=120.0, gt=0)
    max_observation_chars: int = Field(default=10_000, ge=100)
    # Estimated context size (characters / 4) past which older turns are replaced by a summary.
    compact_at_tokens: int | None = Field(default=None, ge=100)
    keep_recent_messages: int = Field(default=6, ge=2)
    # Interrupted bash commands matching one of these are re-run on resume; any other is reported to
    # the model as interrupted, since running it twice could repeat a side effect (R-RESUME-2).
    replay_safe_commands: list[str] = Field(default_factory=list)
    checkpoints: bool = True
    # How long a resume waits for a command still running in the old environment (R-RESUME-1).
    resume_wait_s: float = Field(default=30.0, ge=0)


class AgentFailure(Exception):
    """The model broke the tool protocol or a limit was passed: the attempt ends with this error."""


class LimitExceeded(AgentFailure):
    pass


@dataclass
class AgentState:
    """The loop's state, rebuilt from the activity log (so resumed and uninterrupted runs agree)."""

    messages: list[dict[str, Any]]
    turns: int = 0
    usages: list[Usage] = field(default_factory=list)
    # Turns a fork inherited from its parent: they count against limits, not as the fork's own spend.
    inherited_usages: list[Usage] = field(default_factory=list)
    pending: list[tuple[str, ToolCall]] = field(default_factory=list)
    final_answer: str | None = None
    error: str | None = None
    finished: bool = False
    compactions: int = 0

    @classmethod
    def from_log(cls, records: list[ActivityRecord], system: str, prompt: str) -> AgentState:
        state = cls(messages=[{"role": "system", "content": system}, {"role": "user", "content": prompt}])
        for record in records:
            state.apply(record)
        return state

    def apply(self, record: ActivityRecord) -> None:
        """Advance the state by one logged record; the same for a fresh run, a resume and a fork."""
        if record.kind == "model_call" and record.status == "completed":
            turn = ModelTurn.model_validate(record.data["response"])
            self.messages.append(turn.assistant_message())
            spent = self.inherited_usages if record.data.get("inherited") else self.usages
            spent.append(Usage.model_validate(record.data["usage"]))
            self.pending = [(f"{self.turns}.{i}", call) for i, call in enumerate(turn.tool_calls)]
            self.turns += 1
            if not turn.tool_calls:
                self.final_answer = turn.content or ""
                self.finished = True
        elif record.kind == "tool_call" and record.status in ("completed", "interrupted"):
            self.pending = [(key, call) for key, call in self.pending if key != record.id]
            self.messages.append({"role": "tool", "tool_call_id": record.data["call"]["id"],
                                  "content": record.data["observation"]})
            if record.data.get("error"):
                self.error, self.finished = record.data["error"], True
            elif record.data["call"]["name"] == "submit":
                self.final_answer, self.finished = record.data.get("answer", ""), True
        elif record.kind == "compaction" and record.status == "completed":
            start, count = record.data["start"], record.data["count"]
            self.messages[start:start + count] = [{"role": "user", "content": record.data["summary"]}]
            self.compactions += 1
        elif record.kind == "session" and record.status == "completed":
            self.finished = True
            self.error = record.data.get("error")

    @property
    def usage(self) -> Usage:
        """Everything this attempt has spent, inherited turns included (what limits count)."""
        return usage_totals(self.inherited_usages + self.usages)[0]


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


def fingerprint(plan: ExecutionPlan | None, harness: HarnessConfig, model: ModelConfig) -> dict[str, Any]:
    """What must match for a log to be resumed rather than started over (R-RESUME-1)."""
    parts = {"plan": plan.persisted_view() if plan is not None else {}, "harness": harness.model_dump(mode="json"),
             "model": model.model_dump(mode="json")}
    return {name: hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:16]
            for name, part in parts.items()}


class AgentRun:
    """One attempt of the loop against one environment session and one activity log."""

    def __init__(
        self, model: Model, params: ToolAgentParams, env: EnvironmentSession, *, task_id: str, attempt: int,
        prompt: str, durable_dir: Path, fingerprint: dict[str, Any], log_redacted: bool = True,
        on_record: Callable[[ActivityRecord], None] | None = None,
    ) -> None:
        self.model = model
        self.params = params
        self.env = env
        self.task_id = task_id
        self.attempt = attempt
        self.prompt = prompt
        self.dir = durable_dir
        self.fingerprint = fingerprint
        self.log = ActivityLog(durable_dir / ACTIVITY_FILE, redacted=log_redacted)
        self.on_record = on_record
        self.store: Any = None
        # Built from the log once the run starts; every record appended after that advances it, so the
        # state always equals a rebuild from the log without re-reading the whole log at every step.
        self.state: AgentState | None = None
        self.restart_clock(0.0)
        self._safe = [re.compile(p) for p in params.replay_safe_commands]

    # --- the log ---------------------------------------------------------------------------------

    def restart_clock(self, elapsed_before: float) -> None:
        """Count time from now on top of what earlier processes spent on this attempt (R-RESUME-3)."""
        self._elapsed_before, self._started = elapsed_before, time.monotonic()

    def elapsed(self) -> float:
        return self._elapsed_before + time.monotonic() - self._started

    def append(self, record: ActivityRecord) -> ActivityRecord:
        record.elapsed_s = self.elapsed()
        self.log.append(record)
        if self.state is not None:
            self.state.apply(record)
        if self.on_record is not None:
            self.on_record(record)
        return record

    def replay_safe(self, tool: str, command: str | None) -> bool:
        return tool == "submit" or (command is not None and any(p.search(command) for p in self._safe))

    # --- the loop --------------------------------------------------------------------------------

    async def run(self) -> AgentOutcome:
        if self.params.checkpoints and self.env.checkpoint_roots() is not None:
            from agentcompass_dagster.durable.checkpoints import CheckpointStore

            self.store = CheckpointStore(self.dir / "checkpoints")
        resumed = None
        self.restart_clock(self.log.elapsed_s())
        if self.log.records():
            decision = await prepare_resume(self)
            if decision.classification == "busy":
                return self._outcome(AgentState.from_log(self.log.records(), self.params.system_prompt, self.prompt),
                                     error=decision.reason, status="error", resumed="busy")
            if decision.classification == "finished":
                state = AgentState.from_log(self.log.records(), self.params.system_prompt, self.prompt)
                return self._outcome(state, error=state.error, status="completed" if state.error is None else "error",
                                     resumed="finished")
            resumed = decision.classification
        self.append(ActivityRecord(id="session", kind="session", status="in_flight",
                                    data={"fingerprint": self.fingerprint, "handle": self.env.handle(),
                                          "resumed": resumed}))
        self.state = state = AgentState.from_log(self.log.records(), self.params.system_prompt, self.prompt)
        try:
            while not state.finished:
                if state.pending:
                    key, call = state.pending[0]
                    await self._tool_step(key, call, state.turns - 1)
                else:
                    self._check_limits(state)
                    self._maybe_compact(state)
                    await self._model_step(state)
        except AgentFailure as exc:
            state.error = str(exc)
        except ModelError as exc:
            self.append(ActivityRecord(id=f"model-{state.turns}", kind="model_call", status="aborted",
                                        data={"turn": state.turns, "error": str(exc)}))
            state.error = f"model call failed: {exc}"
        status = "completed" if state.error is None else "error"
        self.append(ActivityRecord(id="session", kind="session", status="completed",
                                    data={"status": status, "error": state.error, "final_answer": state.final_answer}))
        return self._outcome(state, error=state.error, status=status, resumed=resumed)

    def _check_limits(self, state: AgentState) -> None:
        p = self.params
        usage = state.usage
        if state.turns >= p.max_turns:
            raise LimitExceeded(f"limit max_turns={p.max_turns} reached after {state.turns} model calls")
        if p.max_tokens is not None and usage.input_tokens + usage.output_tokens >= p.max_tokens:
            raise LimitExceeded(f"limit max_tokens={p.max_tokens} reached "
                                f"({usage.input_tokens + usage.output_tokens} tokens used)")
        spent = sum(u.cost_usd or 0.0 for u in state.inherited_usages + state.usages)
        if p.max_cost_usd is not None and spent >= p.max_cost_usd:
            raise LimitExceeded(f"limit max_cost_usd={p.max_cost_usd} reached (${spent:.4f} spent)")
        if p.max_wall_s is not None and self.elapsed() >= p.max_wall_s:
            raise LimitExceeded(f"limit max_wall_s={p.max_wall_s} reached ({self.elapsed():.1f}s elapsed)")

    async def _model_step(self, state: AgentState) -> None:
        request_id = f"model-{state.turns}"
        self.append(ActivityRecord(id=request_id, kind="model_call", status="in_flight", data={"turn": state.turns}))
        context = CallContext(task_id=self.task_id, attempt=self.attempt, turn=state.turns)
        turn = await asyncio.to_thread(self.model.complete, list(state.messages), TOOLS, context)
        usage = turn_usage(turn.usage, turn.cost_usd, self.model.price)
        self.append(ActivityRecord(id=request_id, kind="model_call", status="completed",
                                    checkpoint_seq=self.log.last_checkpoint_seq(),
                                    data={"turn": state.turns, "response": turn.model_dump(mode="json"),
                                          "usage": usage.model_dump(mode="json")}))

    async def _tool_step(self, key: str, call: ToolCall, turn: int) -> None:
        arguments = call.parsed_arguments()
        command = arguments.get("command") if call.name == "bash" and arguments else None
        self.append(ActivityRecord(id=key, kind="tool_call", status="in_flight",
                                    data={"turn": turn, "call": call.model_dump(), "command": command}))
        data: dict[str, Any] = {"turn": turn, "call": call.model_dump()}
        wanted = TOOL_ARGUMENT.get(call.name)
        if wanted is None:
            data.update(error=f"model called unknown tool {call.name!r} (tools: {', '.join(TOOL_ARGUMENT)})",
                        observation=f"error: unknown tool {call.name!r}")
        elif arguments is None or not isinstance(arguments.get(wanted), str):
            data.update(error=f"model sent malformed arguments for {call.name!r}: {call.arguments[:200]!r} "
                              f"(expected a JSON object with a string {wanted!r})",
                        observation=f"error: malformed arguments for {call.name!r}")
        elif call.name == "submit":
            data.update(answer=arguments["answer"], observation="submitted")
        else:
            data.update(await self.execute(key, arguments["command"]))
        await self.complete_tool(key, data)

    async def execute(self, key: str, command: str) -> dict[str, Any]:
        """Run a bash command so that its output and exit code also land in the environment's commands
        directory. The command runs in a subshell that outlives this process where the environment does
        (local), so a resume in the same environment can wait for it (the session records its process,
        labelled with the call's key) and collect its result, or report the partial output of one that
        was killed (R-RESUME-1). The agent can write that directory: a resume only trusts what it reads
        there after checking it (a number for the exit code, never a symlink)."""
        base = f"{self.env.commands_dir}/{CALLS_DIR}/{key}"
        out, exit_file = (shlex.quote(base + suffix) for suffix in (".out", ".exit"))
        script = (f"mkdir -p {shlex.quote(f'{self.env.commands_dir}/{CALLS_DIR}')}; "
                  f"( bash -c {shlex.quote(command)} > {out} 2>&1 < /dev/null; echo $? > {exit_file}.tmp "
                  f"&& mv {exit_file}.tmp {exit_file} ) & wait $!; cat {out}; exit $(cat {exit_file})")
        result = await self.env.exec(script, timeout_s=self.params.command_timeout_s, label=key)
        output = result.stdout + result.stderr
        if result.timed_out:
            try:
                output = (await self.env.read_file(base + ".out")).decode(errors="replace")
            except OSError:
                output = ""
            output += f"\n[command timed out after {self.params.command_timeout_s}s]"
        return {"command": command, "exit_code": result.exit_code, "output": output,
                "observation": self.observation(result.exit_code, output), "duration_s": result.duration_s}

    def observation(self, exit_code: int | None, output: str) -> str:
        limit = self.params.max_observation_chars
        if len(output) > limit:
            output = output[: limit // 2] + f"\n[... {len(output) - limit} characters cut ...]\n" + output[-limit // 2:]
        return f"exit code: {exit_code}\n{output}"

    async def complete_tool(self, key: str, data: dict[str, Any], status: str = "completed") -> None:
        """R-LOG-1: the checkpoint is saved before the completed record that names it."""
        seq = self.log.next_seq()
        checkpoint_seq = self.log.last_checkpoint_seq()
        if self.store is not None and data.get("command") is not None:
            await asyncio.to_thread(self.store.capture, seq, self.env.checkpoint_roots())
            checkpoint_seq = seq
        self.append(ActivityRecord(id=key, kind="tool_call", status=status, seq=seq,  # type: ignore[arg-type]
                                    checkpoint_seq=checkpoint_seq, data=data))
        if checkpoint_seq == seq:
            await self.env.write_file(f"{self.env.scratch}/{CURSOR_FILE}", str(seq).encode())

    def _maybe_compact(self, state: AgentState) -> None:
        """R-LOG-2: replace older turns by a summary once the context passes its budget; the summary
        and the range it replaces are logged, so a resume rebuilds the compacted context exactly."""
        budget = self.params.compact_at_tokens
        if budget is None or sum(len(json.dumps(m)) for m in state.messages) // 4 <= budget:
            return
        start = 2
        end = len(state.messages) - self.params.keep_recent_messages
        # Never split an assistant turn from its tool results.
        while end > start and state.messages[end]["role"] == "tool":
            end -= 1
        if end - start < 2:
            return
        summary = summarize(state.messages[start:end])
        self.append(ActivityRecord(id=f"compaction-{state.compactions}", kind="compaction", status="completed",
                                    checkpoint_seq=self.log.last_checkpoint_seq(),
                                    data={"start": start, "count": end - start, "summary": summary}))

    # --- the result ------------------------------------------------------------------------------

    def _outcome(self, state: AgentState, *, error: str | None, status: str, resumed: str | None) -> AgentOutcome:
        usage, complete = usage_totals(state.usages)
        records = self.log.records()
        return AgentOutcome(
            status=status,
            final_answer=state.final_answer,
            error=error,
            trajectory=trajectory(records, self.params.system_prompt, self.prompt),
            turns=list(state.usages),
            tool_calls=[r.data for r in records if r.kind == "tool_call" and r.status in ("completed", "interrupted")],
            usage=usage,
            cost_complete=complete,
            duration_s=self.elapsed(),
            resumed=resumed,
            model_ids=[r.data["response"].get("model_id") for r in records
                       if r.kind == "model_call" and r.status == "completed"],
            shared_prefix_usage=usage_totals(state.inherited_usages)[0] if state.inherited_usages else None,
        )


SUMMARY_HEADER = "Summary of earlier turns (older messages were compacted):"
SUMMARY_LINES = 60


def summarize(messages: list[dict[str, Any]]) -> str:
    """A deterministic summary of replaced turns: what was run and how it ended. Deterministic so a
    resumed attempt and an uninterrupted one compact to the same context. An earlier summary among the
    replaced messages is folded in line by line; only the newest lines are kept, so it stays bounded."""
    lines: list[str] = []
    for message in messages:
        content = message.get("content") or ""
        if message["role"] == "user" and content.startswith(SUMMARY_HEADER):
            lines += content.splitlines()[1:]
        elif message["role"] == "assistant":
            for call in message.get("tool_calls") or []:
                lines.append(f"- called {call['function']['name']} {call['function']['arguments'][:300]}")
        elif message["role"] == "tool":
            lines.append("  -> " + " | ".join(content.splitlines()[:3])[:300])
        elif message["role"] == "user":
            lines.append(f"- note: {content[:300]}")
    return "\n".join([SUMMARY_HEADER, *lines[-SUMMARY_LINES:]])


def trajectory(records: list[ActivityRecord], system: str, prompt: str) -> list[dict[str, Any]]:
    """Every message, model call (with usage), tool call (with observation) and compaction, in order."""
    steps: list[dict[str, Any]] = [{"type": "message", "role": "system", "content": system},
                                   {"type": "message", "role": "user", "content": prompt}]
    for record in records:
        if record.status == "in_flight" or record.kind in ("session", "phase"):
            continue
        step = {"type": record.kind, "status": record.status, "seq": record.seq, **record.data}
        if record.kind == "model_call" and "response" in record.data:
            response = record.data["response"]
            step.update(content=response.get("content"), tool_calls=response.get("tool_calls", []),
                        model_id=response.get("model_id"))
            del step["response"]
        steps.append(step)
    return steps


class ToolAgentHarness(AgentHarness):
    params_model = ToolAgentParams
    durable = True
    params: ToolAgentParams

    async def run_task(
        self, prepared: PreparedTask, env: EnvironmentSession, benchmark: Benchmark, plan: ExecutionPlan
    ) -> RunResult:
        durable = plan.private.get("durable_dir")
        directory = Path(durable) if durable else Path(tempfile.mkdtemp(prefix="agentcompass-agent-"))
        try:
            run = AgentRun(self.model_client, self.params, env, task_id=prepared.task.id, attempt=plan.attempt,
                           prompt=prepared.input, durable_dir=directory,
                           fingerprint=fingerprint(plan, self.config, self.model))
            outcome = await run.run()
        finally:
            if not durable:
                shutil.rmtree(directory, ignore_errors=True)
        return outcome_result(outcome)


def outcome_result(outcome: AgentOutcome) -> RunResult:
    return RunResult(
        status="completed" if outcome.error is None else "error",
        final_answer=outcome.final_answer,
        trajectory=outcome.trajectory,
        usage=outcome.usage,
        duration_s=outcome.duration_s,
        error=outcome.error,
        artifacts={"agent": {"turns": len(outcome.turns), "tool_calls": len(outcome.tool_calls),
                             "cost_complete": outcome.cost_complete, "resumed": outcome.resumed,
                             **({"shared_prefix_usage": outcome.shared_prefix_usage.model_dump(mode="json")}
                                if outcome.shared_prefix_usage else {})}},
    )
