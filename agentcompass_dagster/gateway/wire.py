"""What the three API families' converters share: the translated request, the 400 a body that is not a
request gets, the turn's finish reason in OpenAI's words, ids, and the bytes of an SSE event."""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

from agentcompass_dagster.contracts.model import ModelTurn

log = logging.getLogger("agentcompass_dagster.gateway")

DEFAULT_MODEL = "agentcompass"

# A turn's stop reason in the words of whichever provider gave it, as OpenAI's finish_reason.
_FINISH = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "STOP": "stop",
    "length": "length",
    "max_tokens": "length",
    "MAX_TOKENS": "length",
    "max_output_tokens": "length",
    "tool_calls": "tool_calls",
    "tool_use": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "SAFETY": "content_filter",
}


class RequestRefused(ValueError):
    """The body is not a request of its API family the gateway can answer (HTTP 400)."""


@dataclass(frozen=True)
class Translated:
    """A request in the OpenAI chat format: what GatewayCall holds of it."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    params: dict[str, Any]
    # Tool names shortened to OpenAI's 64 characters, shortened -> original (the reply restores them).
    tool_names: dict[str, str] = field(default_factory=dict)


def finish_reason(turn: ModelTurn) -> str:
    """The turn's stop as OpenAI's finish_reason; a turn with tool calls that says only "stop" asked for
    its tools (some providers say stop whatever the turn holds)."""
    finish = _FINISH.get(turn.stop_reason or "", "stop")
    return "tool_calls" if turn.tool_calls and finish == "stop" else finish


def reply_model(turn: ModelTurn, requested: str | None) -> str:
    return turn.model_id or requested or DEFAULT_MODEL


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


def sse(event: str | None, data: dict[str, Any]) -> bytes:
    """One server-sent event; ``event`` None for Chat Completions, whose events have no name."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def skipped(what: str, names: list[str]) -> None:
    """One log line for what a request asked that no OpenAI chat model can be given."""
    if names:
        log.info("model gateway: skipped %s: %s", what, ", ".join(sorted(set(names))))


def text_of(content: Any) -> str:
    """The text of a content value that is a string or a list of parts with ``text``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content if isinstance(part, dict))
    return ""


def results_after_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each assistant message's tool calls followed at once by their results: OpenAI
    refuses anything between them, and a client may put a reminder there (it moves after the results)."""
    ordered: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    waiting: set[Any] = set()
    for message in messages:
        if message.get("role") == "tool" and message.get("tool_call_id") in waiting:
            ordered.append(message)
            waiting.discard(message["tool_call_id"])
            continue
        if waiting and message.get("role") != "assistant":
            held.append(message)
            continue
        ordered += held
        held, waiting = [], set()
        ordered.append(message)
        if message.get("role") == "assistant":
            waiting = {call.get("id") for call in message.get("tool_calls") or [] if isinstance(call, dict)}
    return ordered + held
