"""agentcompass-dagster: evaluate AI agents as a declarative Dagster pipeline."""

__version__ = "0.1.0"
