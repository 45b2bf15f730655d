"""What a ``cli_agent`` declaration says of its agent program (resources/harnesses/<agent>.yaml)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Api = Literal["chat_completions", "responses", "anthropic_messages"]
# The host's variables that say how it reaches the package registries (a proxy, the certificate authority
# of one that intercepts TLS, a mirror): the install commands get those the host has, the agent none.
REGISTRY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "NPM_CONFIG_REGISTRY",
    "NPM_CONFIG_CAFILE",
    "UV_INDEX_URL",
)
# The placeholders an ``env`` value may hold, filled for each attempt.
PLACEHOLDERS = ("gateway_url", "token", "model")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


class CliAgentParams(BaseModel):
    """``install`` runs once per environment image into $AGENTCOMPASS_AGENT_DIR (from the package
    registries where the baseline network allows it, or from ``packages``, a host directory mounted
    read-only at /opt/agentcompass/packages); ``run`` is the bash command line that runs the agent on
    $AGENTCOMPASS_INSTRUCTION; ``env`` points its SDK at the gateway; ``logs`` are the paths (files or
    directories, ``$HOME`` allowed) of its own logs, kept as the attempt's files."""

    model_config = ConfigDict(extra="forbid")

    # None, with ``unsupported`` saying why, for an agent the gateway cannot serve (Gemini CLI speaks
    # only Google's API): its declaration is kept for what it documents, and a sweep naming it is refused.
    api: Api | None
    unsupported: str | None = None
    run: str = Field(min_length=1)
    install: list[str] = Field(default_factory=list)
    packages: Path | None = None
    env: dict[str, str] = Field(default_factory=dict)
    logs: list[str] = Field(default_factory=list)
    install_timeout_s: float = Field(default=900.0, gt=0)
    install_env: list[str] = Field(default_factory=lambda: list(REGISTRY_VARIABLES))
    # The gateway's bounds on what one attempt's agent may send.
    max_request_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    max_calls_per_s: float = Field(default=20.0, gt=0)

    @field_validator("env")
    @classmethod
    def _known_placeholders(cls, env: dict[str, str]) -> dict[str, str]:
        for name, value in env.items():
            unknown = sorted(set(_PLACEHOLDER.findall(value)) - set(PLACEHOLDERS))
            if unknown:
                raise ValueError(
                    f"env.{name}={value!r}: unknown placeholder {{{unknown[0]}}} "
                    f"(known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)})"
                )
        return env

    @model_validator(mode="after")
    def _servable_or_why_not(self) -> CliAgentParams:
        if self.api is None and not self.unsupported:
            raise ValueError("api: null needs `unsupported` saying why the gateway cannot serve the agent")
        return self

    def agent_env(self, gateway_url: str, token: str, model: str) -> dict[str, str]:
        """``env`` with the attempt's placeholders filled."""
        values = {"gateway_url": gateway_url, "token": token, "model": model}
        return {name: _PLACEHOLDER.sub(lambda m: values[m[1]], value) for name, value in self.env.items()}
