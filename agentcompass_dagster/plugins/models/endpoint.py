"""What the models that call an HTTP API (`openai_compat`, `litellm`) declare alike: their common params,
and how a declaration may and may not carry a key.

A declaration is copied into run records, so a key written there would be too: the key is only ever read
from the host variable ``api_key_env`` names, and registered for redaction as it is read, so an endpoint
or an agent that echoes it writes it nowhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from agentcompass_dagster.contracts.records import Price
from agentcompass_dagster.contracts.errors import UserError, field_error
from agentcompass_dagster.runtime.store.redact import register_secret

# SDKs refuse to send a request without a key; servers that check none accept any.
PLACEHOLDER_KEY = "no-key"
# Long error bodies (a proxy's HTML page) would bury the status line.
MAX_DETAIL = 500


class EndpointParams(BaseModel):
    """``model.params``: each provider adds its own (``extra_body``, ``extra``)."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(default=120.0, gt=0)  # per HTTP request
    max_retries: int = Field(default=3, ge=0)
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    price: Price | None = None  # USD per million tokens, when the provider reports no cost


def refuse_key_param(params: Mapping[str, Any]) -> None:
    if "api_key" in params:
        raise UserError(
            "model.params.api_key: keys are not accepted in declarations, which are copied into "
            "run records; put the key in an environment variable and name it in model.api_key_env"
        )


def refuse_credentials(base_url: str | None) -> None:
    """An HTTP client would turn ``user:password@`` into a Basic header that replaces the key, and an
    endpoint that echoes its request would have the credential stored."""
    parts = urlsplit(base_url or "")
    if "@" not in parts.netloc:
        return
    userinfo, _, host = parts.netloc.rpartition("@")
    user, has_password, _ = userinfo.partition(":")
    # A user without a password may itself be the token (https://TOKEN@host).
    shown = f"{user}:***@{host}" if has_password else f"***@{host}"
    raise field_error(
        "model.base_url",
        parts._replace(netloc=shown).geturl(),
        "credentials in the URL are not accepted: they would be sent instead of the key and stored; "
        "put the key in an environment variable and name it in model.api_key_env",
    )


def read_key(variable: str | None, where: str | None = None) -> str | None:
    """The key in ``variable`` (None when no variable is named), registered for redaction."""
    if not variable:
        return None
    key = os.environ.get(variable, "").strip()
    if not key:
        raise field_error(
            "model.api_key_env", variable, f"the environment variable {variable} is not set or empty", where
        )
    register_secret(key)
    return key


def scrub(problem: str, key: str | None) -> str:
    """An endpoint's error text, cut to MAX_DETAIL and without the key (some servers echo the one they
    rejected)."""
    if len(problem) > MAX_DETAIL:
        problem = problem[:MAX_DETAIL] + "..."
    return problem.replace(key, "***") if key else problem
