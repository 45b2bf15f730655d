"""The `none` model: for harnesses that call no model (oracle, nop, completions); its id only names the
results directory."""

from __future__ import annotations

from typing import Any

from agentcompass_dagster.contracts.model import CallContext, Model, ModelError, ModelTurn


class NoModel(Model):
    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> ModelTurn:
        raise ModelError(f"model {self.id!r} (provider {self.config.provider!r}) cannot be called")
