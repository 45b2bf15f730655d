"""The `tool_agent` harness (see ``loop``): tools and params, the state rebuilt from the activity log,
and the loop. Modules import downwards only: loop -> state, tools."""

from agentcompass_dagster.plugins.harnesses.durable_agent import fingerprint
from agentcompass_dagster.plugins.harnesses.tool_agent.loop import AgentOutcome, AgentRun, ToolAgentHarness
from agentcompass_dagster.plugins.harnesses.tool_agent.tools import BASH_TOOL, TOOLS, ToolAgentParams

__all__ = ["BASH_TOOL", "TOOLS", "AgentOutcome", "AgentRun", "ToolAgentHarness", "ToolAgentParams", "fingerprint"]
