"""The ``cli_agent`` harness: third-party agent CLIs run in the task's environment, their model calls
answered through the framework's model gateway (see ``harness.py``)."""

from agentcompass_dagster.plugins.harnesses.cli_agent.harness import CliAgentHarness

__all__ = ["CliAgentHarness"]
