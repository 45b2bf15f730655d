"""The gateway's own converters read requests as LiteLLM's adapters do (issue 38: the gateway dropped
LiteLLM, whose import cost each run process ~165 MB and 2.5 s): a corpus of requests of each API family
(request_corpus.py, written to cover what agent CLIs send, and the real agents' captured requests in
tests/data/agent_requests/) goes through both, and the OpenAI chat messages, the function tools and the
translated parameters must be the same after normalising the differences known to be harmless:

- Fields LiteLLM writes as null, and ``cache_control`` marks, are dropped (an OpenAI endpoint reads a
  null as absent, and ``cache_control`` is Anthropic's; strict endpoints refuse unknown keys).
- ``thinking_blocks`` and ``reasoning_content`` go from assistant messages, and an assistant message left
  with neither text nor tool calls goes (the gateway drops thinking: it is signed for Anthropic's models,
  an OpenAI chat model is not given an earlier turn's reasoning, and an assistant message with neither
  content nor tool calls is invalid in OpenAI's format).
- A mid-conversation Anthropic system message, which LiteLLM turns into a user message opening with its
  "Operator note", is a system message (OpenAI's format allows system messages anywhere; both place it
  after the tool results it interrupted).
- An assistant message's text parts are one string (the same utterance either way).
- ``developer`` is ``system`` (OpenAI documents developer as the system role of newer models; many
  OpenAI-compatible servers refuse ``developer``).
- Empty text parts of a system message are dropped (nothing to read), as are a tool's ``description: ""``
  and ``strict: false`` that LiteLLM adds (the same as none), and the keys of an Anthropic tool beside its
  schema (``defer_loading``, ``eager_input_streaming``) that LiteLLM copies into the JSON schema of its
  parameters, where they are no schema keyword.
- Tools that are not functions (Anthropic server tools, Responses hosted tools) are not compared: LiteLLM
  passes them on verbatim, which an OpenAI-compatible endpoint refuses and no model layer can run; the
  gateway skips them with a log line.
- Parameters are compared on what both translate (max_tokens, temperature, top_p, stop, tool_choice,
  response_format); LiteLLM also passes on what only Anthropic or LiteLLM reads (``user`` from metadata,
  ``reasoning_effort`` from thinking, ``context_management``, ``web_search_options``), which the gateway
  leaves out.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentcompass_dagster.gateway.calls import Api
from agentcompass_dagster.gateway.translate import read_request
from request_corpus import ANTHROPIC, CHAT, RESPONSES

# LiteLLM's price table from the package: no fetch from GitHub at import (the tests run offline).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("litellm", reason="LiteLLM is the reference the converters are checked against")

CAPTURED = Path(__file__).parents[1] / "data" / "agent_requests"
COMPARED_PARAMS = ("max_tokens", "temperature", "top_p", "stop", "tool_choice", "response_format")
_ANTHROPIC_TOOL_KEYS = {"name", "description", "input_schema", "type", "cache_control", "strict"}
_FAMILY = {
    "/v1/chat/completions": "chat_completions",
    "/v1/responses": "responses",
    "/v1/messages": "anthropic_messages",
}


def _captured() -> list[Any]:
    cases = []
    for path in sorted(CAPTURED.glob("*/*.json")):
        request = json.loads(path.read_text())
        api = _FAMILY.get(request["path"].split("?")[0])
        if api is not None:  # gemini-cli speaks Google's API, which the gateway does not serve
            cases.append(pytest.param(api, request["body"], id=f"captured {path.parent.name}/{path.stem}"))
    return cases


CASES = [
    *(pytest.param("anthropic_messages", body, id=f"anthropic {name}") for name, body in ANTHROPIC.items()),
    *(pytest.param("responses", body, id=f"responses {name}") for name, body in RESPONSES.items()),
    *(pytest.param("chat_completions", body, id=f"chat {name}") for name, body in CHAT.items()),
    *_captured(),
]


def litellm_chat(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    """The body as the gateway read it with LiteLLM's adapters before its own converters."""
    from litellm.litellm_core_utils.core_helpers import remove_index_from_tool_calls
    from litellm.llms.anthropic.messages.adapters.transformation import LiteLLMAnthropicMessagesAdapter
    from litellm.responses.litellm_completion_transformation.transformation import (
        LiteLLMCompletionResponsesConfig,
    )

    body = copy.deepcopy(body)
    if api == "chat_completions":
        chat = body
    elif api == "anthropic_messages":
        chat = dict(LiteLLMAnthropicMessagesAdapter().translate_anthropic_to_openai(body)[0])
    else:
        chat = LiteLLMCompletionResponsesConfig.transform_responses_api_request_to_chat_completion_request(
            model=str(body.get("model") or ""),
            input=body["input"],
            stream=body.get("stream") is True,
            responses_api_request={k: v for k, v in body.items() if k not in ("model", "input", "stream")},
        )
    remove_index_from_tool_calls(chat["messages"])
    return chat


def _cleaned(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _cleaned(v) for k, v in value.items() if k != "cache_control" and (v is not None or k == "content")}
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    return value


def _text_parts(content: Any) -> Any:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def normalised_message(message: dict[str, Any]) -> dict[str, Any] | None:
    """One message with the harmless differences (the module's docstring) taken out."""
    message = {k: v for k, v in _cleaned(message).items() if k not in ("thinking_blocks", "reasoning_content")}
    role, content = message["role"], message.get("content")
    if role == "developer":
        message["role"] = "system"
    if (
        role == "user"
        and isinstance(content, list)
        and content
        and str(content[0].get("text", "")).startswith("Operator note (not from the user)")
    ):
        message = {"role": "system", "content": content[1:]}
    if message["role"] == "system":
        message["content"] = [p for p in _text_parts(message["content"]) if p.get("text")]
    elif role == "assistant":
        if isinstance(content, list):
            message["content"] = "".join(p.get("text", "") for p in content)
        if not message.get("content") and not message.get("tool_calls"):
            return None
    return message


def normalised(chat: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    messages = [m for m in map(normalised_message, chat["messages"]) if m is not None]
    tools = [_cleaned(t) for t in chat.get("tools") or [] if t.get("type") == "function" and "function" in t]
    beside_schema = {
        k for tool in body.get("tools") or [] if "input_schema" in tool for k in tool
    } - _ANTHROPIC_TOOL_KEYS
    for tool in tools:
        function = tool["function"]
        for key, default in (("description", ""), ("strict", False)):
            if key in function and function[key] == default:
                del function[key]
        for key in beside_schema:
            function.get("parameters", {}).pop(key, None)
    params = {k: chat[k] for k in COMPARED_PARAMS if chat.get(k) is not None}
    return {"messages": messages, "tools": tools, "params": params}


@pytest.mark.parametrize(("api", "body"), CASES)
def test_the_gateway_reads_a_request_as_litellm_does(api: Api, body: dict[str, Any]) -> None:
    """Issue 38: the gateway's converter and LiteLLM's adapter give the same OpenAI chat messages, function
    tools and parameters for each request of the corpus, up to the harmless differences listed above."""
    read = read_request(api, json.dumps(body).encode()).call
    ours = {**read.params, "messages": read.messages, "tools": read.tools}
    assert normalised(ours, body) == normalised(litellm_chat(api, body), body)
    assert all(t["type"] == "function" for t in read.tools)
