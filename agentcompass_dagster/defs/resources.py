"""ConfigurableResources for the harness and the environment a sweep runs with.

Their defaults come from the sweep's declarations; a user can override them per run in the Dagster
launchpad (say, a different environment provider), and the run records what it used in run_info.json.
Fields are typed as in the declarations, so the launchpad shows them as structured config.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from agentcompass_dagster.config import EnvironmentConfig, HarnessConfig
from agentcompass_dagster.validation import validate_declaration


class HarnessResource(dg.ConfigurableResource):
    """The harness (agent program) under evaluation: a registered plugin id and its params."""

    id: str
    params: dict[str, Any] = {}

    @classmethod
    def declared(cls, config: HarnessConfig) -> HarnessResource:
        return cls(id=config.id, params=config.params)

    def config(self) -> HarnessConfig:
        return validate_declaration(HarnessConfig, {"id": self.id, "params": self.params}, "harness resource")


class EnvironmentResource(dg.ConfigurableResource):
    """Where task commands run: a declaration name, the provider plugin, params and limits."""

    id: str
    provider: str | None = None
    params: dict[str, Any] = {}
    env: dict[str, str] = {}
    capacity: int = 0
    open_qps: float = 0.0

    @classmethod
    def declared(cls, config: EnvironmentConfig) -> EnvironmentResource:
        return cls(id=config.id, provider=config.provider, params=config.params, env=config.env,
                   capacity=config.capacity, open_qps=config.open_qps)

    def config(self) -> EnvironmentConfig:
        data = {"id": self.id, "provider": self.provider, "params": self.params, "env": self.env,
                "capacity": self.capacity, "open_qps": self.open_qps}
        return validate_declaration(EnvironmentConfig, data, "environment resource")
