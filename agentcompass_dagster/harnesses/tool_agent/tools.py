"""The tools the tool agent offers the model, and its params (what is specific to this harness: the
budget of an attempt is the execution spec's ``limits``, the same for every agent harness)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentcompass_dagster.runtime.types import AgentLimits

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
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {argument: {"type": "string"}}, "required": [argument]},
    }}


BASH_TOOL = _tool("bash", "Run a bash command in the task's working directory; returns exit code and output.")
SUBMIT_TOOL = _tool("submit", "Finish the task with a final answer.")
TOOLS = [BASH_TOOL, SUBMIT_TOOL]


def refuse_moved_limits(value: Any, where: str) -> Any:
    """Limits used to be harness params; name where they went instead of a bare 'extra field'."""
    if isinstance(value, dict):
        moved = sorted(set(value) & set(AgentLimits.model_fields))
        if moved:
            raise ValueError(f"{', '.join(moved)}: agent limits are declared once for every harness, in "
                             f"execution.limits ({where} keeps only what is specific to the harness)")
    return value


class ToolAgentParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    command_timeout_s: float = Field(default=120.0, gt=0)
    max_observation_chars: int = Field(default=10_000, ge=100)
    # Estimated context size (characters / 4) past which older turns are replaced by a summary; an
    # endpoint that refuses the context as too long triggers the same compaction whatever the estimate.
    compact_at_tokens: int | None = Field(default=None, ge=100)
    keep_recent_messages: int = Field(default=6, ge=2)
    # Interrupted bash commands matching one of these are re-run on resume; any other is reported to
    # the model as interrupted, since running it twice could repeat a side effect (R-RESUME-2).
    replay_safe_commands: list[str] = Field(default_factory=list)
    checkpoints: bool = True
    # How long a resume waits for a command still running in the old environment (R-RESUME-1).
    resume_wait_s: float = Field(default=30.0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _no_limits(cls, value: Any) -> Any:
        return refuse_moved_limits(value, "harness.params")
