"""What one request to the gateway becomes, and the Answer it is handed to."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agentcompass_dagster.contracts.model import ModelTurn

Api = Literal["chat_completions", "responses", "anthropic_messages"]


class GatewayCall(BaseModel):
    """One request, translated to the OpenAI chat format the model layer speaks."""

    model_config = ConfigDict(extra="forbid")

    api: Api
    messages: list[dict[str, Any]]  # OpenAI chat messages
    tools: list[dict[str, Any]]  # OpenAI function tools [{"type": "function", "function": {...}}]
    params: dict[str, Any]  # what else the request asked (max_tokens, temperature, ...), as translated
    stream: bool
    digest: str  # sha256 hex of the API and the raw body bytes (replay matches on it)
    requested_model: str | None = None


Answer = Callable[[GatewayCall], Awaitable[ModelTurn]]


def request_digest(api: Api, raw: bytes) -> str:
    """The API family and the exact body bytes: the same request under ``/v1`` or not has one digest, and
    a body that differs in one byte (a re-ordered key, another whitespace) another."""
    return hashlib.sha256(api.encode() + b"\0" + raw).hexdigest()
