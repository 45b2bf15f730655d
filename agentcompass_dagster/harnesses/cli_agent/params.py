"""What a ``cli_agent`` declaration says of its agent program (resources/harnesses/<agent>.yaml)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Api = Literal["chat_completions", "responses", "anthropic_messages"]
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

    api: Api
    run: str = Field(min_length=1)
    install: list[str] = Field(default_factory=list)
    packages: Path | None = None
    env: dict[str, str] = Field(default_factory=dict)
    logs: list[str] = Field(default_factory=list)
    install_timeout_s: float = Field(default=900.0, gt=0)
    # The gateway's bounds on what one attempt's agent may send.
    max_request_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    max_calls_per_s: float = Field(default=20.0, gt=0)

    @field_validator("env")
    @classmethod
    def _known_placeholders(cls, env: dict[str, str]) -> dict[str, str]:
        for name, value in env.items():
            unknown = sorted(set(_PLACEHOLDER.findall(value)) - set(PLACEHOLDERS))
            if unknown:
                raise ValueError(f"env.{name}={value!r}: unknown placeholder {{{unknown[0]}}} "
                                 f"(known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)})")
        return env

    def agent_env(self, gateway_url: str, token: str, model: str) -> dict[str, str]:
        """``env`` with the attempt's placeholders filled."""
        values = {"gateway_url": gateway_url, "token": token, "model": model}
        return {name: _PLACEHOLDER.sub(lambda m: values[m[1]], value) for name, value in self.env.items()}
