"""The `scripted` model: declared assistant turns returned in order, for tests, demos and replay.

    model:
      id: scripted-solver
      provider: scripted
      params:
        turns:                    # per task id; "*" answers any task without its own script
          count-errors:
            - content: "Counting."
              tool_calls: [{name: bash, arguments: {command: "awk ... > answer.txt"}}]
              usage: {prompt_tokens: 120, completion_tokens: 30}
            - tool_calls: [{name: submit, arguments: {answer: "done"}}]
        agents:                   # optional: a script per agent CLI, chosen by a tool its requests offer
          Bash: {create-hello: [...]}             # Claude Code's shell tool
          exec_command: {create-hello: [...]}     # Codex CLI's
        price: {input: 1.0, output: 2.0}   # USD per million tokens (optional)
        record: /tmp/model-calls.jsonl      # optional: one line per call, to count repeated calls

Turn ``n`` of an attempt always gets the script's ``n``-th response, so a resumed attempt that re-sends
an interrupted call gets the same answer. ``arguments`` given as a mapping are sent as JSON; given as a
string they are sent verbatim (malformed JSON included). A turn may ``sleep`` first, wait until a ``gate``
file exists (a test holds a call in flight for as long as it needs, whatever the machine's load), or
``fail`` with a ModelError. Past the end of its script a model fails. A relative ``record`` or ``gate`` is
beside the file that declares the model.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentcompass_dagster.contracts.declarations import ModelConfig
from agentcompass_dagster.contracts.validation import validate_declaration
from agentcompass_dagster.contracts.model import (
    CallContext,
    Model,
    ModelError,
    ModelTurn,
    ToolCall,
)
from agentcompass_dagster.contracts.records import Price


class ScriptedToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class ScriptedTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    usage: dict[str, Any] = Field(default_factory=dict)
    cost_usd: float | None = None
    sleep: float = Field(default=0.0, ge=0)
    gate: Path | None = None
    fail: str | None = None


class ScriptedModelParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turns: dict[str, list[ScriptedTurn]] = Field(default_factory=dict)
    agents: dict[str, dict[str, list[ScriptedTurn]]] = Field(default_factory=dict)
    price: Price | None = None
    record: Path | None = None


class ScriptedModel(Model):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.params = validate_declaration(ScriptedModelParams, config.params, config.file, "model.params")

    def script(self, task_id: str, tools: list[dict[str, Any]]) -> list[ScriptedTurn]:
        """The task's script: of the first agent in ``agents`` whose tool the request offers, else ``turns``."""
        offered = {tool.get("function", {}).get("name") for tool in tools}
        turns = next((script for tool, script in self.params.agents.items() if tool in offered), self.params.turns)
        return turns.get(task_id, turns.get("*", []))

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> ModelTurn:
        started = time.monotonic()
        self._record(context)
        script = self.script(context.task_id, tools)
        if context.turn >= len(script):
            raise ModelError(
                f"scripted model {self.id!r} has no turn {context.turn + 1} for task {context.task_id!r} "
                f"(its script has {len(script)})"
            )
        turn = script[context.turn]
        if turn.sleep:
            await asyncio.sleep(turn.sleep)
        gate = None if turn.gate is None else self.config.resolve_path(turn.gate)
        while gate is not None and not gate.exists():
            await asyncio.sleep(0.01)
        if turn.fail is not None:
            raise ModelError(turn.fail)
        calls = [
            ToolCall(
                id=f"call_{context.turn}_{i}",
                name=c.name,
                arguments=c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments),
            )
            for i, c in enumerate(turn.tool_calls)
        ]
        return ModelTurn(
            content=turn.content,
            tool_calls=calls,
            usage=dict(turn.usage),
            cost_usd=turn.cost_usd,
            model_id=self.config.model or self.id,
            stop_reason="tool_calls" if calls else "stop",
            duration_s=time.monotonic() - started,
        )

    def _record(self, context: CallContext) -> None:
        if self.params.record is None:
            return
        line = json.dumps({"model": self.id, **context.model_dump(), "pid": os.getpid(), "at": time.time()})
        # O_APPEND keeps lines whole across processes; the record counts calls, it is not a result.
        fd = os.open(self.config.resolve_path(self.params.record), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
