"""Requests of the three API families, read into GatewayCalls in the OpenAI chat format with LiteLLM's
maintained adapters (Anthropic Messages: LiteLLMAnthropicMessagesAdapter.translate_anthropic_to_openai;
Responses: LiteLLMCompletionResponsesConfig.transform_responses_api_request_to_chat_completion_request).

LiteLLM takes seconds to import, so it is imported once, on first use: ModelGateway.start does that in a
worker thread so the event loop the attempts run on never waits for it.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from agentcompass_dagster.gateway.calls import Api, GatewayCall, request_digest

# Keys of the translated chat request that are not the model's parameters: the gateway decides how to
# send the answer (stream or not), the model layer which model answers.
_NOT_PARAMS = frozenset({"model", "messages", "tools", "stream", "stream_options"})


class RequestRefused(ValueError):
    """The body is not a request of its API family the gateway can answer (HTTP 400)."""


@dataclass(frozen=True)
class ReadRequest:
    """A request as read: its GatewayCall, and what the reply needs of the original."""

    call: GatewayCall
    body: dict[str, Any]
    # Anthropic tool names LiteLLM shortened to OpenAI's 64 characters, shortened -> original.
    tool_names: dict[str, str] = field(default_factory=dict)


@functools.cache
def litellm_parts() -> SimpleNamespace:
    """The LiteLLM pieces the gateway uses, imported on first call (about 2.5 s)."""
    # The price table is the one shipped in the package: no fetch from GitHub at import (the host may be
    # offline, and a fetch retries for seconds).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm
    from litellm.litellm_core_utils.core_helpers import map_finish_reason, remove_index_from_tool_calls
    from litellm.litellm_core_utils.llm_response_utils.convert_dict_to_response import (
        convert_to_streaming_response_async,
    )
    from litellm.llms.anthropic.messages.adapters.streaming_iterator import AnthropicStreamWrapper
    from litellm.llms.anthropic.messages.adapters.transformation import LiteLLMAnthropicMessagesAdapter
    from litellm.responses.litellm_completion_transformation.transformation import (
        LiteLLMCompletionResponsesConfig,
    )
    from litellm.responses.streaming_iterator import build_synthetic_response_events

    litellm.suppress_debug_info = True  # else an unknown model name prints LiteLLM's provider list
    return SimpleNamespace(
        anthropic=LiteLLMAnthropicMessagesAdapter(), responses=LiteLLMCompletionResponsesConfig,
        model_response=litellm.ModelResponse, stream_frames=convert_to_streaming_response_async,
        anthropic_stream=AnthropicStreamWrapper, responses_events=build_synthetic_response_events,
        finish_reason=map_finish_reason, drop_tool_call_index=remove_index_from_tool_calls,
    )


def read_request(api: Api, raw: bytes) -> ReadRequest:
    """The body of a request of ``api`` as a GatewayCall; RequestRefused when it is not one."""
    try:
        body = json.loads(raw)
    except ValueError as error:
        raise RequestRefused(f"the body is not JSON: {error}") from None
    if not isinstance(body, dict):
        raise RequestRefused("the body is not a JSON object")
    try:
        chat, tool_names = _as_chat(api, body)
        messages = chat.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise RequestRefused("the request has no list of messages")
        litellm_parts().drop_tool_call_index(messages)
        call = GatewayCall(
            api=api, messages=[_without_nulls(m) for m in messages], tools=list(chat.get("tools") or []),
            params={k: v for k, v in chat.items() if k not in _NOT_PARAMS}, stream=body.get("stream") is True,
            digest=request_digest(api, raw),
            requested_model=body["model"] if isinstance(body.get("model"), str) else None,
        )
    except RequestRefused:
        raise
    except Exception as error:  # noqa: BLE001  # the client's body: whatever the adapter trips on is a 400
        raise RequestRefused(f"the request could not be read as {api}: {type(error).__name__}: {error}") from None
    return ReadRequest(call=call, body=body, tool_names=tool_names)


def _as_chat(api: Api, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    if api == "chat_completions":
        return body, {}
    parts = litellm_parts()
    if api == "anthropic_messages":
        chat, tool_names = parts.anthropic.translate_anthropic_to_openai(body)
        return dict(chat), dict(tool_names)
    if body.get("previous_response_id"):
        # LiteLLM resolves it from its own session store, which the gateway does not keep: answering
        # without the earlier turns would be answering another conversation.
        raise RequestRefused("previous_response_id is not supported: send the whole input (store: false)")
    if "input" not in body:
        raise RequestRefused("the request has no input")
    chat = parts.responses.transform_responses_api_request_to_chat_completion_request(
        model=str(body.get("model") or ""), input=body["input"], responses_api_request=responses_options(body),
        stream=body.get("stream") is True,
    )
    return chat, {}


def responses_options(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses request's optional parameters, as LiteLLM's transformation takes them."""
    return {k: v for k, v in body.items() if k not in ("model", "input", "stream")}


def _without_nulls(message: dict[str, Any]) -> dict[str, Any]:
    """The adapters write absent fields as null (``thinking_blocks: null``); strict endpoints refuse
    unknown keys, so they go. ``content`` stays: null content is meaningful beside tool calls."""
    return {k: v for k, v in message.items() if v is not None or k == "content"}
