"""The Model plugin contract."""

from __future__ import annotations

from agentcompass_dagster.config import ModelConfig


class Model:
    def __init__(self, config: ModelConfig) -> None:
        self.config = config


class NoModel(Model):
    """For harnesses that call no model (oracle, nop): the model id only names the results directory."""
