"""The tools the tool agent offers the model, and its params (what is specific to this harness: the
limits of an attempt are the execution spec's ``limits``, the same for every agent harness)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agentcompass_dagster.plugins.harnesses.durable_agent import DurableAgentParams

DEFAULT_SYSTEM_PROMPT = (
    "You are an autonomous agent solving a task in a Linux shell. Use the `bash` tool to run commands "
    "(each runs in a fresh shell in the task's working directory). When the task is done, call `submit` "
    "with your final answer (or a short note if the task asks for files, not an answer)."
)
# Each tool takes one string argument; the schema sent to the model and the check of what it sends
# back both come from here.
TOOL_ARGUMENT = {"bash": "command", "submit": "answer"}


def _tool(name: str, description: str) -> dict[str, Any]:
    argument = TOOL_ARGUMENT[name]
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {argument: {"type": "string"}}, "required": [argument]},
        },
    }


BASH_TOOL = _tool("bash", "Run a bash command in the task's working directory; returns exit code and output.")
SUBMIT_TOOL = _tool("submit", "Finish the task with a final answer.")
TOOLS = [BASH_TOOL, SUBMIT_TOOL]


class ToolAgentParams(DurableAgentParams):
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    command_timeout_s: float = Field(default=120.0, gt=0)
    # Estimated context size (characters / 4) past which older turns are replaced by a summary; an
    # endpoint that refuses the context as too long triggers the same compaction whatever the estimate.
    compact_at_tokens: int | None = Field(default=None, ge=100)
    keep_recent_messages: int = Field(default=6, ge=2)
