"""How mini-swe-agent's synchronous loop meets this framework's coroutines (``harnesses/miniswe.py``):
mini's model and environment objects, run in a worker thread, hand each model call and command to the
attempt's event loop through a ``Bridge`` and wait for it there, so cancelling the attempt cancels the
call in flight; ``Steps`` numbers them and plays recorded ones back on resume."""

from __future__ import annotations

import asyncio
import concurrent.futures
import shlex
import threading
import time
from collections.abc import Coroutine
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, Field

from agentcompass_dagster.contracts.model import CallContext, LimitExceeded, Model, ModelTurn, ToolCall
from agentcompass_dagster.durable.activity import ActivityRecord
from agentcompass_dagster.durable.session import DurableSession
from agentcompass_dagster.plugins.harnesses.durable_agent import (
    call_model,
)
from agentcompass_dagster.plugins.harnesses.tool_agent.tools import BASH_TOOL
from agentcompass_dagster.contracts.records import LimitHit, SweepBudget, Usage

if TYPE_CHECKING:
    from agentcompass_dagster.contracts.environment import EnvironmentSession


T = TypeVar("T")
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
# The keys of mini's messages that are chat messages; "extra" is mini's own bookkeeping.
CHAT_KEYS = ("role", "content", "tool_calls", "tool_call_id")


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
        except concurrent.futures.CancelledError:
            raise Stopped("the attempt was stopped") from None
        finally:
            self._pending = None

    def stop(self) -> None:
        self.stopped.set()
        pending = self._pending
        if pending is not None:
            pending.cancel()


def limits_exit(hit: LimitHit) -> Any:
    """mini's own exit for a limit, naming it (mini's says only 'LimitsExceeded')."""
    from minisweagent.exceptions import LimitsExceeded

    return LimitsExceeded(
        {
            "role": "exit",
            "content": hit.message,
            "extra": {"exit_status": "LimitsExceeded", "submission": "", "limit": hit.model_dump()},
        }
    )


class Steps:
    """The attempt's durable steps as mini meets them: recorded ones come back from the log, new ones
    run on the event loop through the DurableSession (so every log write happens on the loop)."""

    def __init__(
        self,
        session: DurableSession,
        bridge: Bridge,
        model: Model,
        *,
        task_id: str,
        attempt: int,
        budget: SweepBudget | None = None,
    ) -> None:
        self.session = session
        self.budget = budget
        self.bridge = bridge
        self.model = model
        self.task_id = task_id
        self.attempt = attempt
        records = session.log.records()
        self.turns = {r.data["turn"]: r for r in records if r.kind == "model_call" and r.status == "completed"}
        self.tools = {r.id: r for r in records if r.kind == "tool_call" and r.status in ("completed", "interrupted")}
        self.usages: list[Usage] = [Usage.model_validate(r.data["usage"]) for r in self.turns.values()]

    def model_turn(self, turn: int, chat: list[dict[str, Any]]) -> tuple[ModelTurn, Usage]:
        record = self.turns.get(turn)
        if record is not None:
            return ModelTurn.model_validate(record.data["response"]), Usage.model_validate(record.data["usage"])
        context = CallContext(task_id=self.task_id, attempt=self.attempt, turn=turn)
        model_turn, usage = self.bridge.run(
            call_model(self.session, self.model, chat, [BASH_TOOL], context, self.budget)
        )
        self.usages.append(usage)
        return model_turn, usage

    def command(self, action: dict[str, Any], script: str, timeout: float) -> tuple[int | None, str, bool]:
        """Exit code, output and whether it timed out, recorded or run now."""
        record = self.tools.get(action["key"])
        if record is None:
            return self.bridge.run(self._command(action, script, timeout))
        data = record.data
        output = data.get("observation", data.get("output", "")) if record.status == "interrupted" else data["output"]
        return data.get("exit_code"), output, bool(data.get("timed_out"))

    async def _command(self, action: dict[str, Any], script: str, timeout: float) -> tuple[int | None, str, bool]:
        key, turn = action["key"], action["turn"]
        call = {"id": action["tool_call_id"], "name": "bash", "arguments": action["arguments"]}
        self.session.append(
            ActivityRecord(
                id=key,
                kind="tool_call",
                status="in_flight",
                data={"turn": turn, "call": call, "command": action["command"]},
            )
        )
        data = await self.session.execute(key, script, timeout)
        # The record names the agent's command; the script is that command with mini's environment setup.
        data["command"] = action["command"]
        await self.session.complete_tool(key, {"turn": turn, "call": call, **data})
        return data["exit_code"], data["output"], data["timed_out"]


class MiniModel:
    """mini's model protocol over our Model plugin, in mini's tool-call format."""

    def __init__(self, steps: Steps, config: MiniModelConfig) -> None:
        self.steps = steps
        self.config = config
        self.queries = 0

    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        from minisweagent.exceptions import FormatError
        from minisweagent.models.utils.actions_toolcall import parse_toolcall_actions

        self.steps.bridge.check()
        turn_index = self.queries
        self.queries += 1
        chat = [{k: v for k, v in m.items() if k in CHAT_KEYS} for m in messages if m.get("role") != "exit"]
        turn, usage = self.steps.model_turn(turn_index, chat)
        # mini counts cost as a number; an unknown cost counts 0 there and None in our usage.
        extra = {
            "turn": turn_index,
            "response": turn.model_dump(mode="json"),
            "usage": usage.model_dump(mode="json"),
            "cost": usage.cost_usd or 0.0,
            "timestamp": time.time(),
        }
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
        by_id = {call.id: call for call in turn.tool_calls}
        for index, action in enumerate(actions):
            action.update(
                key=f"{turn_index}.{index}", turn=turn_index, arguments=by_id[action["tool_call_id"]].arguments
            )
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
        return {
            "info": {
                "config": {
                    "model": self.config.model_dump(mode="json"),
                    "model_type": f"{__name__}.{type(self).__name__}",
                }
            }
        }


class MiniEnvironment:
    """mini's environment protocol over our environment session."""

    def __init__(self, steps: Steps, config: MiniEnvironmentConfig, uname: dict[str, str]) -> None:
        self.steps = steps
        self.config = config
        self.uname = uname

    def execute(self, action: dict[str, Any], cwd: str = "", *, timeout: float | None = None) -> dict[str, Any]:
        from minisweagent.exceptions import Submitted

        command = action.get("command", "")
        timeout = timeout or self.config.timeout
        # Like mini's local environment: its config's variables (PAGER=cat etc.), in its working directory.
        exports = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in self.config.env.items())
        script = f"{exports}cd {shlex.quote(cwd or self.config.cwd)}\n{command}"
        try:
            exit_code, text, timed_out = self.steps.command(action, script, timeout)
        except LimitExceeded as exc:
            # The wall time ran out before the command started: mini ends as for a refused model call.
            raise limits_exit(exc.hit) from None
        output: dict[str, Any] = {"output": text, "returncode": exit_code, "exception_info": ""}
        if timed_out:
            output.update(
                returncode=-1,
                exception_info=f"An error occurred while executing the command: timed out after {timeout}s",
            )
        lines = text.lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT_MARKER and output["returncode"] == 0:
            submission = "".join(lines[1:])
            # The submitting command gets no observation message; its extra keeps it in the trajectory.
            raise Submitted(
                {
                    "role": "exit",
                    "content": submission,
                    "extra": {
                        "exit_status": "Submitted",
                        "submission": submission,
                        "tool_call_id": action.get("tool_call_id"),
                        "raw_output": text,
                        "returncode": output["returncode"],
                    },
                }
            )
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {**self.config.model_dump(), **self.uname, **kwargs}

    def serialize(self) -> dict[str, Any]:
        return {
            "info": {
                "config": {
                    "environment": self.config.model_dump(mode="json"),
                    "environment_type": f"{__name__}.{type(self).__name__}",
                }
            }
        }


def _as_openai_call(call: ToolCall) -> SimpleNamespace:
    """The attribute shape of an OpenAI SDK tool call, which mini's parser reads."""
    return SimpleNamespace(id=call.id, function=SimpleNamespace(name=call.name, arguments=call.arguments))


async def uname(session: EnvironmentSession) -> dict[str, str]:
    """The platform fields mini's templates use, from inside the environment rather than this host."""
    result = await session.exec("uname -s; uname -r; uname -v; uname -m", timeout_s=30)
    values = result.stdout.splitlines() if result.exit_code == 0 else []
    return dict(zip(("system", "release", "version", "machine"), values + [""] * 4))
