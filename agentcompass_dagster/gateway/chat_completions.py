"""OpenAI Chat Completions, the model layer's own format: a request passes through nearly unchanged, and a
ModelTurn becomes a chat completion, or for ``"stream": true`` its chunks (the whole turn is known, so
one chunk of text, one per tool call, and a last one with the finish reason and the usage)."""

from __future__ import annotations

import json
import time
from typing import Any

from agentcompass_dagster.contracts.model import ModelTurn
from agentcompass_dagster.gateway.wire import RequestRefused, Translated, finish_reason, new_id, reply_model, sse
from agentcompass_dagster.plugins.models.usage import turn_usage

# Keys of a chat request that are not the model's parameters: the gateway decides how to send the answer
# (stream or not), the model layer which model answers.
_NOT_PARAMS = frozenset({"model", "messages", "tools", "stream", "stream_options"})


def read_chat(body: dict[str, Any]) -> Translated:
    """A Chat Completions request as it came, less what a strict endpoint refuses: the ``index`` a client
    echoes in streamed tool calls, and null fields other than ``content`` (null beside tool calls)."""
    if "functions" in body or "function_call" in body:
        # A client that sends the legacy functions reads a legacy ``function_call`` back, which the model
        # layer's tool calls are not.
        raise RequestRefused("the legacy functions/function_call are not supported: send tools/tool_choice")
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise RequestRefused("the request has no list of messages")
    if any(m.get("role") == "function" for m in messages):
        raise RequestRefused("legacy role 'function' messages are not supported: send role 'tool' messages")
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise RequestRefused("tools is not a list of objects")
    return Translated(
        messages=[_cleaned(m) for m in messages],
        tools=list(tools),
        params={k: v for k, v in body.items() if k not in _NOT_PARAMS},
    )


def _cleaned(message: dict[str, Any]) -> dict[str, Any]:
    cleaned = {k: v for k, v in message.items() if v is not None or k == "content"}
    if isinstance(cleaned.get("tool_calls"), list):
        cleaned["tool_calls"] = [
            {k: v for k, v in c.items() if k != "index"} if isinstance(c, dict) else c for c in cleaned["tool_calls"]
        ]
    return cleaned


def _usage(turn: ModelTurn) -> dict[str, Any]:
    usage = turn_usage(turn.usage)
    reply: dict[str, Any] = {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    if usage.cache_read_tokens:
        reply["prompt_tokens_details"] = {"cached_tokens": usage.cache_read_tokens}
    return reply


def completion_body(turn: ModelTurn, requested_model: str | None) -> bytes:
    """The turn as one chat completion (usage in prompt/completion tokens, whatever keys the provider used)."""
    return json.dumps(
        {
            "id": new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply_model(turn, requested_model),
            "choices": [
                {
                    "index": 0,
                    "message": turn.assistant_message(),
                    "finish_reason": finish_reason(turn),
                    "logprobs": None,
                }
            ],
            "usage": _usage(turn),
        }
    ).encode()


def completion_events(turn: ModelTurn, requested_model: str | None) -> bytes:
    """The turn as the chunks of a streamed chat completion, then ``[DONE]``."""
    head = {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": reply_model(turn, requested_model),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        return sse(None, {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})

    events = [chunk({"role": "assistant", "content": turn.content or ""})]
    for index, call in enumerate(turn.tool_calls):
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        }
                    ]
                }
            )
        )
    events.append(chunk({}, finish_reason(turn), usage=_usage(turn)))
    return b"".join(events) + b"data: [DONE]\n\n"
