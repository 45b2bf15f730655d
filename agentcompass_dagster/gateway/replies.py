"""A ModelTurn sent back in the API family a request came in: as one JSON body, or, for ``"stream": true``,
as the SSE events that family's SDK parses (the whole turn is known before the first byte is sent, so
the events go out as one body).

The turn becomes a chat completion first, the format LiteLLM's adapters start from. Chat Completions
and Anthropic streams are LiteLLM's replay of a complete response as chunks
(convert_to_streaming_response_async), the latter through the adapter's AnthropicStreamWrapper, without
LiteLLM's CustomStreamWrapper (which logs, prices and calls back per call: milliseconds the gateway does
not need). A Responses stream is the complete Responses reply cut into its events by LiteLLM's
build_synthetic_response_events, a third of the cost of its chunk-by-chunk translator, which rebuilds
and prices the response it was handed whole.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from agentcompass_dagster.contracts.model import ModelTurn
from agentcompass_dagster.gateway.translate import ReadRequest, litellm_parts, responses_options
from agentcompass_dagster.models.usage import turn_usage

_DEFAULT_MODEL = "agentcompass"
_ONE_DELTA = 1 << 30  # characters a text delta of a synthetic Responses stream may hold: all of them


def chat_completion(turn: ModelTurn, model: str | None) -> dict[str, Any]:
    """The turn as an OpenAI chat completion (usage in prompt/completion tokens, whatever keys the
    provider used)."""
    usage = turn_usage(turn.usage)
    stop = turn.stop_reason or ("tool_calls" if turn.tool_calls else "stop")
    finish = "tool_calls" if turn.tool_calls and stop == "stop" else litellm_parts().finish_reason(stop)
    prompt_details = {"cached_tokens": usage.cache_read_tokens} if usage.cache_read_tokens else None
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
        "model": turn.model_id or model or _DEFAULT_MODEL,
        "choices": [{"index": 0, "message": turn.assistant_message(), "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
                  "total_tokens": usage.input_tokens + usage.output_tokens,
                  **({"prompt_tokens_details": prompt_details} if prompt_details else {})},
    }


def reply_body(request: ReadRequest, turn: ModelTurn) -> bytes:
    """The non-streaming response body of ``request``'s API."""
    completion = chat_completion(turn, request.call.requested_model)
    api = request.call.api
    if api == "chat_completions":
        return json.dumps(completion).encode()
    parts = litellm_parts()
    response = parts.model_response(**completion)
    if api == "anthropic_messages":
        return _json(parts.anthropic.translate_openai_response_to_anthropic(response, request.tool_names))
    return _responses_reply(request, response).model_dump_json(by_alias=True).encode()


async def reply_stream(request: ReadRequest, turn: ModelTurn) -> bytes:
    """The streaming response body of ``request``'s API: its SSE events, whole."""
    completion = chat_completion(turn, request.call.requested_model)
    parts = litellm_parts()
    api = request.call.api
    if api == "chat_completions":
        chunks = [f"data: {frame.model_dump_json(exclude_none=True)}\n\n".encode()
                  async for frame in parts.stream_frames(completion)]
        return b"".join(chunks) + b"data: [DONE]\n\n"
    if api == "anthropic_messages":
        wrapper = parts.anthropic_stream(completion_stream=parts.stream_frames(completion), model=completion["model"],
                                         tool_name_mapping=request.tool_names)
        return b"".join([event async for event in wrapper.async_anthropic_sse_wrapper()])
    translated = _responses_reply(request, parts.model_response(**completion))
    events = parts.responses_events(transformed=translated, logging_obj=None, chunk_size=_ONE_DELTA)
    if translated.status == "incomplete":
        # LiteLLM ends a synthetic stream with response.completed whatever the status; the API ends a
        # cut response with response.incomplete, which is what agents check.
        events[-1] = events[-1].model_copy(update={"type": "response.incomplete"})
    return b"".join(_sse(event.type, event.model_dump_json(by_alias=True, exclude_none=True)) for event in events)


def _responses_reply(request: ReadRequest, response: Any) -> Any:
    return litellm_parts().responses.transform_chat_completion_response_to_responses_api_response(
        request_input=request.body["input"], responses_api_request=responses_options(request.body),
        chat_completion_response=response,
    )


def _sse(event: str, data: str) -> bytes:
    return f"event: {event}\ndata: {data}\n\n".encode()


def _json(value: Any) -> bytes:
    return json.dumps(value, default=lambda o: o.model_dump(mode="json", exclude_none=True)).encode()
