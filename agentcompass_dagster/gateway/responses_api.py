"""The OpenAI Responses API: a request read into the OpenAI chat format, and a ModelTurn written back as a
Response or as the SSE events of ``responses.stream`` / ``create(stream=True)``.

The input is the whole conversation (the gateway keeps no responses: ``previous_response_id`` and
``item_reference`` are refused). ``instructions`` and ``developer`` messages become system messages
(many OpenAI-compatible servers refuse the ``developer`` role); a function_call item joins the assistant
message before it; reasoning items are dropped (the model sees the turns' text and calls). Tools other
than ``function`` (web_search, file_search, local_shell, computer_use, mcp, custom ...) and items of
them are skipped with one log line: the gateway runs no tools.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import BaseModel, ConfigDict

from agentcompass_dagster.contracts.model import ModelTurn
from agentcompass_dagster.gateway.wire import (
    RequestRefused,
    Translated,
    finish_reason,
    new_id,
    reply_model,
    results_after_calls,
    skipped,
    sse,
    text_of,
)
from agentcompass_dagster.plugins.models.usage import turn_usage

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "refusal"})
_SILENTLY_DROPPED = frozenset({"reasoning"})


class ResponsesRequest(BaseModel):
    """The parts of a Responses request the gateway reads; the rest (store, include, reasoning,
    prompt_cache_key, metadata ...) is ignored."""

    model_config = ConfigDict(extra="ignore")

    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    parallel_tool_calls: bool | None = None
    previous_response_id: str | None = None
    text: dict[str, Any] | None = None


def read_responses(body: dict[str, Any]) -> Translated:
    """A Responses request as OpenAI chat messages, function tools and parameters."""
    request = ResponsesRequest.model_validate(body)
    if request.previous_response_id:
        # The gateway keeps no earlier responses: answering without them would answer another conversation.
        raise RequestRefused("previous_response_id is not supported: send the whole input (store: false)")
    messages: list[dict[str, Any]] = (
        [{"role": "system", "content": request.instructions}] if request.instructions else []
    )
    if isinstance(request.input, str):
        messages.append({"role": "user", "content": request.input})
    else:
        messages += _input_messages(request.input)
    return Translated(
        messages=results_after_calls(messages), tools=_tools(request.tools or []), params=_params(request)
    )


def _params(request: ResponsesRequest) -> dict[str, Any]:
    params: dict[str, Any] = {
        k: v
        for k, v in (
            ("max_tokens", request.max_output_tokens),
            ("temperature", request.temperature),
            ("top_p", request.top_p),
            ("parallel_tool_calls", request.parallel_tool_calls),
        )
        if v is not None
    }
    choice = request.tool_choice
    if choice in ("auto", "none", "required"):
        params["tool_choice"] = choice
    elif isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        params["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    text_format = (request.text or {}).get("format") or {}
    if text_format.get("type") == "json_schema":
        params["response_format"] = {
            "type": "json_schema",
            "json_schema": {k: text_format[k] for k in ("name", "schema", "strict", "description") if k in text_format},
        }
    elif text_format.get("type") == "json_object":
        params["response_format"] = {"type": "json_object"}
    return params


def _tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    translated: list[dict[str, Any]] = []
    for tool in tools:
        if tool.get("type") == "function":
            translated.append(
                {
                    "type": "function",
                    "function": {
                        k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None
                    },
                }
            )
    skipped("Responses tools other than function", [str(t.get("type")) for t in tools if t.get("type") != "function"])
    return translated


def _input_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    unread: list[str] = []
    for item in items:
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            messages.append(_message(item))
        elif kind == "function_call":
            call = {
                "id": str(item.get("call_id") or item.get("id") or ""),
                "type": "function",
                "function": {"name": str(item.get("name") or ""), "arguments": str(item.get("arguments") or "")},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append(
                {"role": "tool", "tool_call_id": str(item.get("call_id") or ""), "content": text_of(item.get("output"))}
            )
        elif kind == "item_reference":
            raise RequestRefused("item_reference is not supported: send the items themselves (store: false)")
        elif kind not in _SILENTLY_DROPPED:
            unread.append(str(kind))
    skipped("Responses input items", unread)
    return messages


def _message(item: dict[str, Any]) -> dict[str, Any]:
    role = _ROLES.get(str(item.get("role")))
    if role is None:
        raise RequestRefused(f"an input message has the role {item.get('role')!r}")
    content = item.get("content")
    if isinstance(content, str) or role == "assistant":
        return {"role": role, "content": text_of(content)}
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if part.get("type") in _TEXT_PARTS:
            parts.append({"type": "text", "text": part.get("text") or part.get("refusal") or ""})
        elif part.get("type") == "input_image" and isinstance(part.get("image_url"), str):
            image = {"url": part["image_url"], **({"detail": part["detail"]} if part.get("detail") else {})}
            parts.append({"type": "image_url", "image_url": image})
        else:
            skipped("Responses content parts", [str(part.get("type"))])
    return {"role": role, "content": parts}


def _usage(turn: ModelTurn) -> dict[str, Any]:
    usage = turn_usage(turn.usage)
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def _output(turn: ModelTurn, status: str) -> list[dict[str, Any]]:
    """The turn's output items, complete: its text as one message, each tool call as a function_call."""
    items: list[dict[str, Any]] = []
    if turn.content:
        items.append(
            {
                "type": "message",
                "id": new_id("msg_"),
                "status": status,
                "role": "assistant",
                "content": [{"type": "output_text", "text": turn.content, "annotations": []}],
            }
        )
    items += [
        {
            "type": "function_call",
            "id": new_id("fc_"),
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
            "status": "completed",
        }
        for call in turn.tool_calls
    ]
    return items


def _response(turn: ModelTurn, body: dict[str, Any], output: list[dict[str, Any]], status: str) -> dict[str, Any]:
    """A Response object; the request's settings are echoed as the API does."""
    return {
        "id": new_id("resp_"),
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": reply_model(turn, body.get("model") if isinstance(body.get("model"), str) else None),
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "temperature": body.get("temperature"),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p"),
        "metadata": {},
        "usage": _usage(turn),
    }


def _status(turn: ModelTurn) -> str:
    return "incomplete" if finish_reason(turn) == "length" else "completed"


def response_body(turn: ModelTurn, body: dict[str, Any]) -> bytes:
    """The turn as one Response; cut by the output allowance, it is ``incomplete``."""
    status = _status(turn)
    return json.dumps(_response(turn, body, _output(turn, status), status)).encode()


def response_events(turn: ModelTurn, body: dict[str, Any]) -> bytes:
    """The turn as the events of a streamed Response: created, each output item added, its content given
    whole in one delta, done; then response.completed (or response.incomplete) with the whole Response."""
    status = _status(turn)
    output = _output(turn, status)
    response = _response(turn, body, output, status)
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": {**response, "status": "in_progress", "output": [], "usage": None}}),
        ("response.in_progress", {"response": {**response, "status": "in_progress", "output": [], "usage": None}}),
    ]
    for index, item in enumerate(output):
        events += _item_events(index, item)
    events.append((f"response.{status}", {"response": response}))
    return b"".join(
        sse(kind, {"type": kind, "sequence_number": number, **data}) for number, (kind, data) in enumerate(events)
    )


def _item_events(index: int, item: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    at = {"output_index": index, "item_id": item["id"]}
    if item["type"] == "function_call":
        events = [
            (
                "response.output_item.added",
                {"output_index": index, "item": {**item, "arguments": "", "status": "in_progress"}},
            ),
            ("response.function_call_arguments.delta", {**at, "delta": item["arguments"]}),
            ("response.function_call_arguments.done", {**at, "name": item["name"], "arguments": item["arguments"]}),
        ]
    else:
        (part,) = item["content"]
        text_at = {**at, "content_index": 0}
        events = [
            (
                "response.output_item.added",
                {"output_index": index, "item": {**item, "content": [], "status": "in_progress"}},
            ),
            ("response.content_part.added", {**text_at, "part": {**part, "text": ""}}),
            ("response.output_text.delta", {**text_at, "delta": part["text"], "logprobs": []}),
            ("response.output_text.done", {**text_at, "text": part["text"], "logprobs": []}),
            ("response.content_part.done", {**text_at, "part": part}),
        ]
    return events + [("response.output_item.done", {"output_index": index, "item": item})]
