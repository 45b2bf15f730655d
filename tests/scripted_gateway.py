"""A ModelGateway on a unix socket with a scripted Answer, and the real openai and anthropic SDKs pointed
at it (their httpx transport connects to the socket): what the gateway's tests and the lead's harness
tests drive."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai

from agentcompass_dagster.contracts.model import ModelTurn, ToolCall
from agentcompass_dagster.gateway.calls import GatewayCall
from agentcompass_dagster.gateway.server import ModelGateway

# One bash tool, as each API family declares it.
BASH_ARGS = '{"command": "ls -l"}'
CHAT_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]
RESPONSES_TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "bash",
        "description": "run a command",
        "parameters": CHAT_TOOLS[0]["function"]["parameters"],
    }
]
ANTHROPIC_TOOLS: list[Any] = [
    {"name": "bash", "description": "run a command", "input_schema": CHAT_TOOLS[0]["function"]["parameters"]}
]


def turn(
    content: str | None = None, *calls: tuple[str, str], prompt: int = 11, completion: int = 7, stop: str | None = None
) -> ModelTurn:
    """A model turn: text, tool calls as (name, JSON arguments), usage in OpenAI's keys."""
    return ModelTurn(
        content=content,
        tool_calls=[ToolCall(id=f"call_{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)],
        usage={"prompt_tokens": prompt, "completion_tokens": completion},
        stop_reason=stop,
        model_id="scripted-model",
    )


@dataclass
class Script:
    """An Answer that returns its turns in order (or raises what ``fail`` gives) and keeps every call."""

    turns: list[ModelTurn]
    calls: list[GatewayCall] = field(default_factory=list)
    fail: Callable[[GatewayCall], Exception | None] = lambda call: None

    async def __call__(self, call: GatewayCall) -> ModelTurn:
        self.calls.append(call)
        if (error := self.fail(call)) is not None:
            raise error
        return self.turns[(len(self.calls) - 1) % len(self.turns)]


@asynccontextmanager
async def running_gateway(**bounds: Any) -> AsyncIterator[ModelGateway]:
    """A started gateway in a fresh short directory (a socket path must stay under 108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="gw-") as directory:
        gateway = ModelGateway(Path(directory) / "gateway", **bounds)
        await gateway.start()
        try:
            yield gateway
        finally:
            await gateway.close()


def _http(gateway: ModelGateway) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(uds=str(gateway.socket_path)))


def openai_client(gateway: ModelGateway, token: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=token, base_url="http://gateway/v1", http_client=_http(gateway), max_retries=0)


def anthropic_client(gateway: ModelGateway, token: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key=token, base_url="http://gateway", http_client=_http(gateway), max_retries=0)
