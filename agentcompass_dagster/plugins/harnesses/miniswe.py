"""The `miniswe` harness: mini-swe-agent's ``DefaultAgent`` loop over our Model and Environment plugins.

    harness:
      id: miniswe
      params: {config: mini, command_timeout_s: 60}
    execution:
      limits: {max_turns: 30, max_cost_usd: 2.0, max_wall_s: 1800}

mini-swe-agent is an optional dependency (``pip install 'agentcompass-dagster[miniswe]'``), imported
only when an attempt runs. Its templates come from one of its tool-call configs (``config``: a shipped
config name such as ``mini``, or a path, a relative one beside the file that declares the harness). Its
limits are the execution spec's, the same for every agent harness and enforced by the framework (the
session's model and environment), so mini's own (``step_limit``, ``cost_limit``,
``wall_time_limit_seconds``) are switched off: the ``LimitExceeded`` a model call raises becomes mini's
``LimitsExceeded`` exit, named as tool_agent names it.

mini's loop is synchronous, so it runs in a worker thread; its model calls and commands run as
coroutines on the attempt's event loop, so cancelling the attempt (a timeout, Ctrl-C) cancels the call
in flight at once and the thread stops at its next step. Every model call and command goes through the
attempt's activity log and every command through a checkpoint (``DurableSession``, as for tool_agent).
A resumed attempt drives mini's own loop again over the log: recorded model turns are answered from the
log and recorded commands give their recorded outputs, so mini rebuilds its state step by step without
calling the model or running a command twice, and continues live where the log ends.

It submits the way mini's local environment does: a command whose output starts with the line
``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` ends the run, and the rest of that output is the final answer.
The trajectory is in the ``tool_agent`` step format; mini's own serialized run is ``artifacts["miniswe"]``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import yaml
from pydantic import Field

from agentcompass_dagster.contracts.declarations import HarnessConfig
from agentcompass_dagster.contracts.validation import validate_declaration
from agentcompass_dagster.contracts.model import LimitExceeded, ModelError
from agentcompass_dagster.durable.activity import ActivityRecord, open_durations
from agentcompass_dagster.durable.resume import prepare_resume
from agentcompass_dagster.contracts.errors import UserError, field_error
from agentcompass_dagster.plugins.harnesses.durable_agent import (
    DurableAgentHarness,
    DurableAgentParams,
    DurableAgentSession,
    durable_session,
)
from agentcompass_dagster.plugins.harnesses.miniswe_bridge import (
    Bridge,
    MiniEnvironment,
    MiniEnvironmentConfig,
    MiniModel,
    MiniModelConfig,
    Steps,
    limits_exit,
    uname,
)
from agentcompass_dagster.plugins.models.usage import usage_totals
from agentcompass_dagster.contracts.records import AgentLimits, LimitHit, RunResult

DEFAULT_CONFIG = "mini"  # mini's shipped config for tool-calling models
# mini's own limits: off (0), since the framework enforces the execution spec's.
MINI_LIMITS = ("step_limit", "cost_limit", "wall_time_limit_seconds")


class MiniSweParams(DurableAgentParams):
    # Its own former names of the limits, refused with a pointer to execution.limits.
    former_limit_names = set(AgentLimits.model_fields) | set(MINI_LIMITS)

    config: str | None = None
    # None: the config's environment.timeout, else mini's local-environment default.
    command_timeout_s: float | None = Field(default=None, gt=0)


@contextmanager
def quiet_import() -> Iterator[None]:
    """mini-swe-agent prints a banner when imported, creates its per-user config directory and loads the
    ``.env`` there into this process: silence it and point it at an empty temporary directory instead,
    unless the user chose a directory themselves."""
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    if "minisweagent" in sys.modules or "MSWEA_GLOBAL_CONFIG_DIR" in os.environ:
        yield
        return
    with tempfile.TemporaryDirectory(prefix="agentcompass-miniswe-") as empty:
        os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = empty
        try:
            yield
        finally:
            os.environ.pop("MSWEA_GLOBAL_CONFIG_DIR", None)


def load_config(spec: str, declaration: HarnessConfig) -> dict[str, Any]:
    """mini's config ``spec``. A bare name (``mini``) is one of mini's own, even where a file of that name
    lies beside the declaration (a sweep named mini.yaml); a path (a folder in it, or a YAML suffix) is
    beside the declaration, as every path param is, else where mini itself looks (its shipped
    ``benchmarks/...``)."""
    from minisweagent.config import get_config_path

    try:
        beside = declaration.resolve_path(spec)
        is_path = "/" in spec or beside.suffix in (".yaml", ".yml")
        path = beside if is_path and beside.is_file() else get_config_path(spec)
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise field_error("harness.params.config", spec, str(exc), declaration.file) from None
    if not isinstance(data, dict):
        raise field_error(
            "harness.params.config", spec, "not a mapping of agent/environment/model sections", declaration.file
        )
    return data


def mini_trajectory(messages: list[dict[str, Any]], durations: dict[str, float]) -> list[dict[str, Any]]:
    """mini's messages as ``tool_agent`` steps: messages, model calls with usage and duration, and bash
    calls with exit code, output, observation and duration (``durations``: seconds by action key, from
    the activity log), so replay and the analyzers treat both harnesses alike."""
    steps: list[dict[str, Any]] = []
    calls: dict[str, tuple[int, dict[str, Any], str, str]] = {}
    for message in messages:
        role, extra = message.get("role"), message.get("extra") or {}
        # An assistant message, or the feedback to a call mini could not parse, carries our model call.
        if "response" in extra:
            response = extra["response"]
            step = {
                "type": "model_call",
                "status": "completed",
                "turn": extra["turn"],
                "content": response.get("content"),
                "tool_calls": response.get("tool_calls", []),
                "usage": extra["usage"],
                "model_id": response.get("model_id"),
                "duration_s": response.get("duration_s"),
                "tries": response.get("tries", []),
            }
            if extra.get("interrupt_type") == "FormatError":
                # mini could not use the reply (no tool call, bad JSON, unknown tool): its feedback follows.
                step["format_error"] = True
            steps.append(step)
            by_id = {call["id"]: call for call in response.get("tool_calls", [])}
            for action in extra.get("actions", []):
                calls[action["tool_call_id"]] = (
                    extra["turn"],
                    by_id[action["tool_call_id"]],
                    action["command"],
                    action["key"],
                )
        if role in ("system", "user"):
            steps.append({"type": "message", "role": role, "content": message.get("content")})
        elif role in ("tool", "exit") and (call_id := message.get("tool_call_id", extra.get("tool_call_id"))) in calls:
            turn, call, command, key = calls[call_id]
            observation = message["content"] if role == "tool" else "submitted"
            steps.append(
                {
                    "type": "tool_call",
                    "status": "completed",
                    "turn": turn,
                    "call": call,
                    "command": command,
                    "exit_code": extra.get("returncode"),
                    "output": extra.get("raw_output", ""),
                    "observation": observation,
                    "duration_s": durations.get(key),
                }
            )
    return steps


def aborted_calls(records: list[ActivityRecord]) -> list[dict[str, Any]]:
    """The model calls mini's messages leave out: those that failed, a limit cut or a crash interrupted
    (the call that ends an attempt, so they come last), with the time they took; not those the attempt's
    limits refused, which were never made."""
    durations = open_durations(records)
    return [
        {"type": "model_call", "status": "aborted", **record.data, "duration_s": durations.get(record.id)}
        for record in records
        if record.kind == "model_call" and record.status == "aborted" and not record.data.get("refused")
    ]


def durable_agent_class() -> type:
    """mini's DefaultAgent, ending with mini's own limit exit (naming the limit) when the attempt's
    limits refuse or cut a model call."""
    from minisweagent.agents.default import DefaultAgent

    class DurableAgent(DefaultAgent):
        def query(self) -> dict[str, Any]:
            try:
                return super().query()
            except LimitExceeded as exc:
                raise limits_exit(exc.hit) from None

    return DurableAgent


class MiniSweSession(DurableAgentSession):
    harness: MiniSweHarness
    agent: Any = None

    async def run(self) -> RunResult:
        try:
            with quiet_import():
                from minisweagent.environments.local import LocalEnvironmentConfig

                agent_class = durable_agent_class()
        except ImportError as exc:
            raise UserError(
                f"harness {self.harness.id!r} needs mini-swe-agent ({exc}): pip install 'agentcompass-dagster[miniswe]'"
            ) from None
        plan, env = self.plan, self.env
        model_config, env_config, agent_kwargs, timeout = self._configs(
            LocalEnvironmentConfig.model_fields["timeout"].default
        )
        session = durable_session(
            env, self.durable_dir(), self.harness.params, fingerprint=self.fingerprint(), command_timeout_s=timeout
        )
        resumed = None
        if session.log.records():
            decision = await prepare_resume(session)
            if decision.classification == "busy":
                return RunResult(status="error", error=decision.reason)
            resumed = decision.classification
        session.begin(resumed)
        self.session = session
        self.bridge = bridge = Bridge(asyncio.get_running_loop())
        steps = Steps(
            session, bridge, self.model, task_id=self.prepared.task.id, attempt=plan.attempt, budget=plan.budget
        )
        self.agent = agent = agent_class(
            MiniModel(steps, model_config), MiniEnvironment(steps, env_config, await uname(env)), **agent_kwargs
        )
        self.usages = steps.usages
        started = time.monotonic()
        error = None
        try:
            await asyncio.to_thread(agent.run, self.prepared.input)
        except ModelError as exc:
            error = f"model call failed: {exc}"
        except asyncio.CancelledError:
            # The thread cannot be cancelled: its call in flight is, and it stops at its next step.
            bridge.stop()
            raise
        result = self._result(error, time.monotonic() - started)
        session.end(
            result.status, result.error, result.final_answer, result.limit.model_dump() if result.limit else None
        )
        result.artifacts["agent"] = {"turns": len(steps.usages), "resumed": resumed}
        return result

    def _configs(self, default_timeout: float) -> tuple[MiniModelConfig, MiniEnvironmentConfig, dict[str, Any], float]:
        """mini's model and environment configs, its agent's arguments and the commands' timeout, from the
        declared config (``default_timeout``: mini's local environment's, where neither declares one)."""
        params = self.harness.params
        spec = params.config or DEFAULT_CONFIG
        data = load_config(spec, self.harness.config)
        where = f"harness.params.config={spec!r}"
        model_config = validate_declaration(
            MiniModelConfig, {**(data.get("model") or {}), "model_name": self.model.id}, f"{where} model"
        )
        environment = data.get("environment") or {}
        timeout = params.command_timeout_s or environment.get("timeout") or default_timeout
        env_config = validate_declaration(
            MiniEnvironmentConfig, {**environment, "cwd": self.env.workdir, "timeout": timeout}, f"{where} environment"
        )
        agent_kwargs = {**(data.get("agent") or {}), **{mini: 0 for mini in MINI_LIMITS}}
        return model_config, env_config, agent_kwargs, timeout

    def _result(self, error: str | None, duration_s: float) -> RunResult:
        agent = self.agent
        exit_message = agent.messages[-1] if agent.messages else {}
        extra = exit_message.get("extra", {})
        submitted = extra.get("exit_status") == "Submitted"
        limit = LimitHit.model_validate(extra["limit"]) if extra.get("limit") else None
        failure = None
        if error is None and not submitted and limit is None:
            # The model's own failure (format errors in a row, a length cut): scored 0, not an error.
            status = extra.get("exit_status")
            detail = (
                f"{agent.config.max_consecutive_format_errors} replies in a row without a usable tool call"
                if status == "RepeatedFormatError"
                else exit_message.get("content")
            )
            failure = f"mini-swe-agent exited: {status}: {detail}"
        return RunResult(
            status="completed" if error is None else "error",
            final_answer=extra.get("submission") if submitted else None,
            error=error,
            failure=failure,
            limit=limit,
            trajectory=mini_trajectory(
                list(agent.messages),
                {
                    r.id: r.data["duration_s"]
                    for r in self.session.log.records()
                    if r.kind == "tool_call" and "duration_s" in r.data
                },
            )
            + aborted_calls(self.session.log.records()),
            usage=usage_totals(self.usages)[0],
            duration_s=duration_s,
            artifacts={"miniswe": agent.serialize()},
        )

    def stopped(self, error: str) -> RunResult | None:
        if self.agent is None:
            return None
        self.bridge.stop()
        result = self._result(error, self.session.elapsed())
        self.session.end("error", error, None, None)
        return result


class MiniSweHarness(DurableAgentHarness):
    params_model = MiniSweParams
    session_class = MiniSweSession
    params: MiniSweParams
