"""The `miniswe` harness: mini-swe-agent's ``DefaultAgent`` loop over our Model and Environment plugins.

    harness:
      id: miniswe
      params: {config: mini, step_limit: 30, cost_limit: 2.0, wall_time_limit_seconds: 1800,
               command_timeout_s: 60}

mini-swe-agent is an optional dependency (``pip install 'agentcompass-dagster[miniswe]'``), imported
only when an attempt runs. Its templates and limits come from one of its tool-call configs (``config``:
a shipped config name such as ``mini``, or a path); the other params override that config's limits.

mini's loop is synchronous, so it runs in a worker thread: its model calls go to our model layer with
the ``bash`` tool, its commands go to the task's environment session on the attempt's event loop. It
submits the way mini's local environment does: a command whose output starts with the line
``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` ends the run, and the rest of that output is the final answer.
The trajectory is in the ``tool_agent`` step format; mini's own serialized run is ``artifacts["miniswe"]``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field

from agentcompass_dagster.config import validate_declaration
from agentcompass_dagster.errors import UserError, field_error
from agentcompass_dagster.harnesses.base import AgentHarness
from agentcompass_dagster.harnesses.tool_agent import BASH_TOOL
from agentcompass_dagster.models.base import CallContext, Model, ModelError, ToolCall
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

T = TypeVar("T")
DEFAULT_CONFIG = "mini"  # mini's shipped config for tool-calling models
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
# The keys of mini's messages that are chat messages; "extra" is mini's own bookkeeping.
CHAT_KEYS = ("role", "content", "tool_calls", "tool_call_id")


class MiniSweParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config: str | None = None
    # mini's own config allows unlimited steps and $3 of cost, but a model without a price reports $0,
    # so the step limit is finite by default here (0 = unlimited). None elsewhere keeps the config's value.
    step_limit: int | None = Field(default=100, ge=0)
    cost_limit: float | None = Field(default=None, ge=0)
    wall_time_limit_seconds: int | None = Field(default=None, ge=0)
    # None: the config's environment.timeout, else mini's local-environment default.
    command_timeout_s: float | None = Field(default=None, gt=0)


class MiniModelConfig(BaseModel):
    """The part of a mini config's ``model`` section that our adapter uses (model_kwargs etc. are litellm's)."""

    model_name: str
    observation_template: str
    format_error_template: str


class MiniEnvironmentConfig(BaseModel):
    cwd: str
    env: dict[str, str] = Field(default_factory=dict)
    timeout: float


class Stopped(Exception):
    """The attempt was cancelled or timed out: mini's thread must not call the model or run commands."""


class Bridge:
    """Runs the attempt's coroutines on its event loop from mini's worker thread, until stopped."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.stopped = threading.Event()
        self._pending: concurrent.futures.Future[Any] | None = None

    def check(self) -> None:
        if self.stopped.is_set():
            raise Stopped("the attempt was stopped")

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self.stopped.is_set():
            coroutine.close()  # never scheduled: closed so that Python does not warn it was never awaited
        self.check()
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        self._pending = future
        # stop() may have run between the check and the submission, without seeing this future.
        if self.stopped.is_set():
            future.cancel()
        try:
            return future.result()
        finally:
            self._pending = None

    def stop(self) -> None:
        self.stopped.set()
        pending = self._pending
        if pending is not None:
            pending.cancel()


class MiniModel:
    """mini's model protocol over our Model plugin, in mini's tool-call format."""

    def __init__(self, model: Model, config: MiniModelConfig, bridge: Bridge, *, task_id: str, attempt: int) -> None:
        self.model = model
        self.config = config
        self.bridge = bridge
        self.task_id = task_id
        self.attempt = attempt
        self.usages: list[Usage] = []

    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        from minisweagent.exceptions import FormatError
        from minisweagent.models.utils.actions_toolcall import parse_toolcall_actions

        self.bridge.check()
        turn_index = len(self.usages)
        chat = [{k: v for k, v in m.items() if k in CHAT_KEYS} for m in messages if m.get("role") != "exit"]
        turn = self.model.complete(chat, [BASH_TOOL],
                                   CallContext(task_id=self.task_id, attempt=self.attempt, turn=turn_index))
        usage = turn_usage(turn.usage, turn.cost_usd, self.model.price)
        self.usages.append(usage)
        # mini's limits count cost as a number; an unknown cost counts 0 there and None in our usage.
        extra = {"turn": turn_index, "response": turn.model_dump(mode="json"), "usage": usage.model_dump(mode="json"),
                 "cost": usage.cost_usd or 0.0, "timestamp": time.time()}
        try:
            # mini's own parser, so a bad call gets exactly the feedback mini's toolcall models give.
            actions = parse_toolcall_actions(
                [_as_openai_call(call) for call in turn.tool_calls],
                format_error_template=self.config.format_error_template,
                template_kwargs={"finish_reason": turn.stop_reason},
            )
        except FormatError as exc:
            # Like mini's models: the call and its cost stay on record although it yields no actions.
            exc.messages[0]["extra"].update(extra)
            raise
        return {**turn.assistant_message(), "extra": {"actions": actions, **extra}}

    def format_message(self, **kwargs: Any) -> dict[str, Any]:
        return kwargs

    def format_observation_messages(
        self, message: dict[str, Any], outputs: list[dict[str, Any]], template_vars: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        from minisweagent.models.utils.actions_toolcall import (
            format_toolcall_observation_messages,
        )

        return format_toolcall_observation_messages(
            actions=message.get("extra", {}).get("actions", []),
            outputs=outputs,
            observation_template=self.config.observation_template,
            template_vars=template_vars,
        )

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return self.config.model_dump()

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {"model": self.config.model_dump(mode="json"),
                                    "model_type": f"{__name__}.{type(self).__name__}"}}}


class MiniEnvironment:
    """mini's environment protocol over our environment session."""

    def __init__(self, session: EnvironmentSession, config: MiniEnvironmentConfig, bridge: Bridge,
                 uname: dict[str, str]) -> None:
        self.session = session
        self.config = config
        self.bridge = bridge
        self.uname = uname

    def execute(self, action: dict[str, Any], cwd: str = "", *, timeout: float | None = None) -> dict[str, Any]:
        from minisweagent.exceptions import Submitted

        command = action.get("command", "")
        timeout = timeout or self.config.timeout
        # Merged streams, like mini's local environment, and its config's variables (PAGER=cat etc.).
        exports = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in self.config.env.items())
        result = self.bridge.run(self.session.exec(f"exec 2>&1\n{exports}{command}", timeout_s=timeout,
                                                   cwd=cwd or self.config.cwd))
        output: dict[str, Any] = {"output": result.output, "returncode": result.exit_code, "exception_info": ""}
        if result.timed_out:
            output.update(returncode=-1,
                          exception_info=f"An error occurred while executing the command: timed out after {timeout}s")
        lines = result.output.lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT_MARKER and output["returncode"] == 0:
            submission = "".join(lines[1:])
            # The submitting command gets no observation message; its extra keeps it in the trajectory.
            raise Submitted({"role": "exit", "content": submission,
                             "extra": {"exit_status": "Submitted", "submission": submission,
                                       "tool_call_id": action.get("tool_call_id"), "raw_output": result.output,
                                       "returncode": output["returncode"]}})
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {**self.config.model_dump(), **self.uname, **kwargs}

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {"environment": self.config.model_dump(mode="json"),
                                    "environment_type": f"{__name__}.{type(self).__name__}"}}}


def _as_openai_call(call: ToolCall) -> SimpleNamespace:
    """The attribute shape of an OpenAI SDK tool call, which mini's parser reads."""
    return SimpleNamespace(id=call.id, function=SimpleNamespace(name=call.name, arguments=call.arguments))


async def _uname(session: EnvironmentSession) -> dict[str, str]:
    """The platform fields mini's templates use, from inside the environment rather than this host."""
    result = await session.exec("uname -s; uname -r; uname -v; uname -m", timeout_s=30)
    values = result.stdout.splitlines() if result.exit_code == 0 else []
    return dict(zip(("system", "release", "version", "machine"), values + [""] * 4))


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


def load_config(spec: str) -> dict[str, Any]:
    from minisweagent.config import get_config_path

    try:
        data = yaml.safe_load(get_config_path(spec).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise field_error("harness.params.config", spec, str(exc)) from None
    if not isinstance(data, dict):
        raise field_error("harness.params.config", spec, "not a mapping of agent/environment/model sections")
    return data


def trajectory(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """mini's messages as ``tool_agent`` steps: messages, model calls with usage, and bash calls with exit
    code, output and observation, so replay treats both harnesses alike."""
    steps: list[dict[str, Any]] = []
    calls: dict[str, tuple[int, dict[str, Any], str]] = {}
    for message in messages:
        role, extra = message.get("role"), message.get("extra") or {}
        # An assistant message, or the feedback to a call mini could not parse, carries our model call.
        if "response" in extra:
            response = extra["response"]
            steps.append({"type": "model_call", "status": "completed", "turn": extra["turn"],
                          "content": response.get("content"), "tool_calls": response.get("tool_calls", []),
                          "usage": extra["usage"], "model_id": response.get("model_id")})
            by_id = {call["id"]: call for call in response.get("tool_calls", [])}
            for action in extra.get("actions", []):
                calls[action["tool_call_id"]] = (extra["turn"], by_id[action["tool_call_id"]], action["command"])
        if role in ("system", "user"):
            steps.append({"type": "message", "role": role, "content": message.get("content")})
        elif role in ("tool", "exit") and (call_id := message.get("tool_call_id", extra.get("tool_call_id"))) in calls:
            turn, call, command = calls[call_id]
            observation = message["content"] if role == "tool" else "submitted"
            steps.append({"type": "tool_call", "status": "completed", "turn": turn, "call": call, "command": command,
                          "exit_code": extra.get("returncode"), "output": extra.get("raw_output", ""),
                          "observation": observation})
    return steps


class MiniSweHarness(AgentHarness):
    params_model = MiniSweParams
    params: MiniSweParams

    async def run_task(
        self, prepared: PreparedTask, env: EnvironmentSession, benchmark: Benchmark, plan: ExecutionPlan
    ) -> RunResult:
        try:
            with quiet_import():
                from minisweagent.agents.default import DefaultAgent
                from minisweagent.environments.local import LocalEnvironmentConfig
        except ImportError as exc:
            raise UserError(f"harness {self.id!r} needs mini-swe-agent ({exc}): "
                            "pip install 'agentcompass-dagster[miniswe]'") from None
        started = time.monotonic()
        spec = self.params.config or DEFAULT_CONFIG
        data = load_config(spec)
        where = f"harness.params.config={spec!r}"
        model_config = validate_declaration(MiniModelConfig, {**(data.get("model") or {}), "model_name": self.model.id},
                                            f"{where} model")
        environment = data.get("environment") or {}
        timeout = (self.params.command_timeout_s or environment.get("timeout")
                   or LocalEnvironmentConfig.model_fields["timeout"].default)
        env_config = validate_declaration(MiniEnvironmentConfig, {**environment, "cwd": env.workdir, "timeout": timeout},
                                          f"{where} environment")
        agent_kwargs = {**(data.get("agent") or {}),
                        **self.params.model_dump(include={"step_limit", "cost_limit", "wall_time_limit_seconds"},
                                                 exclude_none=True)}

        bridge = Bridge(asyncio.get_running_loop())
        mini_model = MiniModel(self.model_client, model_config, bridge, task_id=prepared.task.id, attempt=plan.attempt)
        agent = DefaultAgent(mini_model, MiniEnvironment(env, env_config, bridge, await _uname(env)), **agent_kwargs)
        try:
            await asyncio.to_thread(agent.run, prepared.input)
        except ModelError:
            pass  # mini recorded it as its exit message, reported below like any other exit
        except asyncio.CancelledError:
            # The thread cannot be cancelled: it stops at its next model call or command instead.
            bridge.stop()
            raise

        exit_message = agent.messages[-1]
        extra = exit_message.get("extra", {})
        submitted = extra.get("exit_status") == "Submitted"
        return RunResult(
            status="completed" if submitted else "error",
            final_answer=extra.get("submission") if submitted else None,
            error=None if submitted else f"mini-swe-agent exited: {extra.get('exit_status')}: {exit_message.get('content')}",
            trajectory=trajectory(agent.messages),
            usage=usage_totals(mini_model.usages)[0],
            duration_s=time.monotonic() - started,
            artifacts={"miniswe": agent.serialize()},
        )
