"""A ModelTurn sent back in the API family a request came in: as one JSON body, or, for ``"stream": true``,
as the SSE events that family's SDK parses (the whole turn is known before the first byte is sent, so
the events go out as one body)."""

from __future__ import annotations

from agentcompass_dagster.contracts.model import ModelTurn
from agentcompass_dagster.gateway.anthropic_messages import message_body, message_events
from agentcompass_dagster.gateway.chat_completions import completion_body, completion_events
from agentcompass_dagster.gateway.responses_api import response_body, response_events
from agentcompass_dagster.gateway.translate import ReadRequest


def reply_body(request: ReadRequest, turn: ModelTurn) -> bytes:
    """The non-streaming response body of ``request``'s API."""
    api, model = request.call.api, request.call.requested_model
    if api == "chat_completions":
        return completion_body(turn, model)
    if api == "anthropic_messages":
        return message_body(turn, model, request.tool_names)
    return response_body(turn, request.body)


def reply_stream(request: ReadRequest, turn: ModelTurn) -> bytes:
    """The streaming response body of ``request``'s API: its SSE events, whole."""
    api, model = request.call.api, request.call.requested_model
    if api == "chat_completions":
        return completion_events(turn, model)
    if api == "anthropic_messages":
        return message_events(turn, model, request.tool_names)
    return response_events(turn, request.body)
