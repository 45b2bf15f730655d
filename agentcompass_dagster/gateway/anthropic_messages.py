"""Anthropic Messages: a request read into the OpenAI chat format, and a ModelTurn written back as a
Message or as the SSE events of ``messages.stream``.

What an OpenAI chat model cannot be given is left out: ``thinking`` and ``redacted_thinking`` blocks (the
reasoning of an earlier turn, signed for Anthropic's models only; the model sees the turn's text and tool
calls), ``cache_control`` marks, ``metadata``, the ``thinking`` setting, ``top_k``, server tools (web
search, code execution, computer use: a type and no ``input_schema``, one log line) and documents (one
log line). ``is_error`` of a tool result goes too: an OpenAI tool message has no such flag, and agents
write the error into the result's text. Images become ``image_url`` parts (base64 as data URLs); an image
inside a tool result goes into a user message after the tool messages, since OpenAI tool messages hold
text only.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agentcompass_dagster.contracts.model import ModelTurn
from agentcompass_dagster.gateway.wire import (
    Translated,
    finish_reason,
    new_id,
    reply_model,
    results_after_calls,
    skipped,
    sse,
)
from agentcompass_dagster.plugins.models.usage import turn_usage

_MAX_TOOL_NAME = 64  # OpenAI's bound on a function name; Anthropic allows longer
_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}
_TOOL_CHOICE = {"auto": "auto", "any": "required", "none": "none"}


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "assistant", "system"]
    content: str | list[dict[str, Any]]


class AnthropicRequest(BaseModel):
    """The parts of a Messages request the gateway reads; the rest is ignored."""

    model_config = ConfigDict(extra="ignore")

    messages: list[_Message]
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    max_tokens: int | None = None
    stop_sequences: list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None


def read_anthropic(body: dict[str, Any]) -> Translated:
    """A Messages request as OpenAI chat messages, function tools and parameters."""
    request = AnthropicRequest.model_validate(body)
    tools, names = _tools(request.tools or [])
    messages: list[dict[str, Any]] = []
    if request.system and (system := _system_content(request.system)):
        messages.append({"role": "system", "content": system})
    for message in request.messages:
        if message.role == "system":
            # Claude Code sends reminders as system messages between the turns; OpenAI's format allows them.
            if content := _system_content(message.content):
                messages.append({"role": "system", "content": content})
        elif message.role == "user":
            messages.extend(_user_messages(message.content))
        elif (assistant := _assistant_message(message.content)) is not None:
            messages.append(assistant)
    return Translated(messages=results_after_calls(messages), tools=tools, params=_params(request), tool_names=names)


def _params(request: AnthropicRequest) -> dict[str, Any]:
    params: dict[str, Any] = {
        k: v
        for k, v in (("max_tokens", request.max_tokens), ("temperature", request.temperature), ("top_p", request.top_p))
        if v is not None
    }
    if request.stop_sequences:
        params["stop"] = request.stop_sequences
    choice = request.tool_choice or {}
    if choice.get("type") in _TOOL_CHOICE:
        params["tool_choice"] = _TOOL_CHOICE[choice["type"]]
    elif choice.get("type") == "tool":
        params["tool_choice"] = {"type": "function", "function": {"name": short_tool_name(str(choice.get("name")))}}
    if choice.get("disable_parallel_tool_use") is True:
        params["parallel_tool_calls"] = False
    return params


def short_tool_name(name: str) -> str:
    """``name`` within OpenAI's 64 characters: a longer one keeps 55 and a hash of the whole (LiteLLM's rule,
    so a recorded request reads the same)."""
    if len(name) <= _MAX_TOOL_NAME:
        return name
    return f"{name[: _MAX_TOOL_NAME - 9]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def _tools(tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    translated: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    server_tools: list[str] = []
    for tool in tools:
        if "input_schema" not in tool or tool.get("type") not in (None, "custom"):
            server_tools.append(str(tool.get("type") or tool.get("name")))
            continue
        name = str(tool.get("name") or "")
        if (short := short_tool_name(name)) != name:
            names[short] = name
        function: dict[str, Any] = {"name": short, "parameters": tool["input_schema"]}
        if "description" in tool:
            function["description"] = tool["description"]
        if "strict" in tool:
            function["strict"] = bool(tool["strict"])
        translated.append({"type": "function", "function": function})
    skipped("Anthropic server tools (no input_schema)", server_tools)
    return translated, names


def _system_content(content: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return [
        {"type": "text", "text": block["text"]}
        for block in content
        if block.get("type") == "text" and block.get("text")
    ]


def _image_part(block: dict[str, Any]) -> dict[str, Any] | None:
    source = found if isinstance(found := block.get("source"), dict) else {}
    if source.get("type") == "base64" and source.get("data"):
        url = f"data:{source.get('media_type') or 'image/jpeg'};base64,{source['data']}"
    elif source.get("type") == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        return None
    return {"type": "image_url", "image_url": {"url": url}}


def _user_messages(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One user turn: its tool results first (as tool messages, which must follow the assistant's calls),
    then its text and images as one user message."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}] if content else []
    tool_messages: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    unread: list[str] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": block.get("text") or ""})
        elif kind == "image" and (image := _image_part(block)) is not None:
            parts.append(image)
        elif kind == "tool_result":
            text, images = _tool_result(block.get("content"))
            tool_messages.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id") or ""), "content": text})
            parts.extend(images)
        else:
            unread.append(str(kind))
    skipped("Anthropic content blocks", unread)
    return tool_messages + ([{"role": "user", "content": parts}] if parts else [])


def _tool_result(content: Any) -> tuple[str | list[dict[str, Any]], list[dict[str, Any]]]:
    """A tool result's text (a string, or text parts when it has several) and its images."""
    if isinstance(content, str):
        return content, []
    texts: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for item in content if isinstance(content, list) else []:
        if isinstance(item, str):
            texts.append({"type": "text", "text": item})
        elif isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
            texts.append({"type": "text", "text": item["text"]})
        elif isinstance(item, dict) and item.get("type") == "image" and (image := _image_part(item)):
            images.append(image)
    if not texts:
        return "", images
    return (texts[0]["text"] if len(texts) == 1 else texts), images


def _assistant_message(content: str | list[dict[str, Any]]) -> dict[str, Any] | None:
    """An assistant turn: its text blocks as one string, its tool_use blocks as tool calls; None for a
    turn of thinking only (an assistant message with neither is not valid in OpenAI's format)."""
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts = [block.get("text") or "" for block in content if block.get("type") == "text"]
    calls = [
        {
            "id": str(block.get("id") or ""),
            "type": "function",
            "function": {
                "name": short_tool_name(str(block.get("name") or "")),
                "arguments": json.dumps(block.get("input") or {}),
            },
        }
        for block in content
        if block.get("type") == "tool_use"
    ]
    if not texts and not calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _blocks(turn: ModelTurn, tool_names: dict[str, str]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.content}] if turn.content else []
    for call in turn.tool_calls:
        # Anthropic's input is an object: arguments that are not a JSON object arrive as an empty one.
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": tool_names.get(call.name, call.name),
                "input": call.parsed_arguments() or {},
            }
        )
    return blocks


def _usage(turn: ModelTurn) -> dict[str, int]:
    """Anthropic counts input without the cache reads and writes, which it lists beside it."""
    usage = turn_usage(turn.usage)
    return {
        "input_tokens": usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
    }


def _message(turn: ModelTurn, requested_model: str | None, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": reply_model(turn, requested_model),
        "content": content,
        "stop_reason": _STOP[finish_reason(turn)],
        "stop_sequence": None,
        "usage": _usage(turn),
    }


def message_body(turn: ModelTurn, requested_model: str | None, tool_names: dict[str, str]) -> bytes:
    """The turn as one Message."""
    return json.dumps(_message(turn, requested_model, _blocks(turn, tool_names))).encode()


def message_events(turn: ModelTurn, requested_model: str | None, tool_names: dict[str, str]) -> bytes:
    """The turn as the events of a streamed Message: each block started, given whole in one delta, and
    stopped; then the stop reason and the usage."""
    message = _message(turn, requested_model, [])
    stop_reason, usage = message.pop("stop_reason"), message["usage"]
    events = [
        sse(
            "message_start",
            {
                "type": "message_start",
                "message": {**message, "stop_reason": None, "usage": {**usage, "output_tokens": 0}},
            },
        )
    ]
    for index, block in enumerate(_blocks(turn, tool_names)):
        start: dict[str, Any]
        if block["type"] == "text":
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [
            sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}),
            sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
            sse("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    events += [
        sse(
            "message_delta",
            {"type": "message_delta", "usage": usage, "delta": {"stop_reason": stop_reason, "stop_sequence": None}},
        ),
        sse("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(events)
