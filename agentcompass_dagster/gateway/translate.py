"""Requests of the three API families, read into GatewayCalls in the OpenAI chat format by the gateway's
own converters (``chat_completions``, ``responses_api``, ``anthropic_messages``).

Not LiteLLM's adapters, which this module used first: importing LiteLLM cost each run process about
165 MB and 2.5 s, and its stream wrappers 1-3 ms a call, over the issue's 50 MB and 2 ms
(tests/gateway/test_converters_match_litellm.py checks that both read the same requests alike).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agentcompass_dagster.gateway.anthropic_messages import read_anthropic
from agentcompass_dagster.gateway.calls import Api, GatewayCall, request_digest
from agentcompass_dagster.gateway.chat_completions import read_chat
from agentcompass_dagster.gateway.responses_api import read_responses
from agentcompass_dagster.gateway.wire import RequestRefused, Translated

READERS: dict[Api, Callable[[dict[str, Any]], Translated]] = {
    "chat_completions": read_chat,
    "responses": read_responses,
    "anthropic_messages": read_anthropic,
}


@dataclass(frozen=True)
class ReadRequest:
    """A request as read: its GatewayCall, and what the reply needs of the original."""

    call: GatewayCall
    body: dict[str, Any]
    # Anthropic tool names shortened to OpenAI's 64 characters, shortened -> original.
    tool_names: dict[str, str] = field(default_factory=dict)


def read_request(api: Api, raw: bytes) -> ReadRequest:
    """The body of a request of ``api`` as a GatewayCall; RequestRefused when it is not one."""
    try:
        body = json.loads(raw)
    except ValueError as error:
        raise RequestRefused(f"the body is not JSON: {error}") from None
    if not isinstance(body, dict):
        raise RequestRefused("the body is not a JSON object")
    try:
        translated = READERS[api](body)
    except RequestRefused:
        raise
    except ValidationError as error:
        raise RequestRefused(f"the request is not a valid {api} request: {_first_error(error)}") from None
    except Exception as error:  # noqa: BLE001  # the client's body: whatever a converter trips on is a 400
        raise RequestRefused(f"the request could not be read as {api}: {type(error).__name__}: {error}") from None
    call = GatewayCall(
        api=api,
        messages=translated.messages,
        tools=translated.tools,
        params=translated.params,
        stream=body.get("stream") is True,
        digest=request_digest(api, raw),
        requested_model=body["model"] if isinstance(body.get("model"), str) else None,
    )
    return ReadRequest(call=call, body=body, tool_names=translated.tool_names)


def _first_error(error: ValidationError) -> str:
    first = error.errors(include_url=False)[0]
    return f"{'.'.join(str(part) for part in first['loc'])}: {first['msg']}"
