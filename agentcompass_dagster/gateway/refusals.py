"""Errors in the shape each API family's SDK reads: OpenAI's ``{"error": {...}}``, Anthropic's
``{"type": "error", "error": {...}}``. The SDKs map the HTTP status to their exception classes (400
BadRequestError, which they do not retry; 401 AuthenticationError; 429 and 5xx, which they retry)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from agentcompass_dagster.gateway.calls import Api

# HTTP status -> (OpenAI error type, Anthropic error type)
_TYPES: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "invalid_request_error"),
    401: ("authentication_error", "authentication_error"),
    404: ("not_found_error", "not_found_error"),
    405: ("invalid_request_error", "invalid_request_error"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("rate_limit_error", "rate_limit_error"),
    500: ("server_error", "api_error"),
    502: ("server_error", "api_error"),
}


def refusal(
    api: Api, status: int, message: str, *, code: str | None = None, headers: dict[str, str] | None = None
) -> web.Response:
    """An error response of ``api``'s family."""
    openai_type, anthropic_type = _TYPES[status]
    body: dict[str, Any]
    if api == "anthropic_messages":
        body = {"type": "error", "error": {"type": anthropic_type, "message": message}}
    else:
        body = {"error": {"message": message, "type": openai_type, "param": None, "code": code}}
    return web.Response(status=status, body=json.dumps(body).encode(), content_type="application/json", headers=headers)
