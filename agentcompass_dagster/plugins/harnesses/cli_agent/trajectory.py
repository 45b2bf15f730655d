"""An agent CLI attempt's trajectory, from its activity log: the task's instruction, then each model
turn as the gateway answered it, each preceded by the tool results the agent sent back in that request,
then the agent's own process (its command line, exit code and output)."""

from __future__ import annotations

from typing import Any

from agentcompass_dagster.contracts.model import ToolCall
from agentcompass_dagster.durable.activity import ActivityRecord


def current_run(records: list[ActivityRecord]) -> list[ActivityRecord]:
    """The records of the newest run of the attempt (a rerun logs after the crashed run's records)."""
    starts = [i for i, r in enumerate(records) if r.kind == "session" and r.status == "in_flight"]
    return records[starts[-1] :] if starts else records


def cli_trajectory(records: list[ActivityRecord], instruction: str) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": instruction}]
    names: dict[str, dict[str, Any]] = {}
    for record in current_run(records):
        if record.kind != "model_call" or record.status == "in_flight" or record.data.get("refused"):
            continue
        for message in record.data.get("request", []):
            if message.get("role") == "tool":
                call = names.get(str(message.get("tool_call_id")), {"name": "?", "id": message.get("tool_call_id")})
                steps.append(
                    {
                        "type": "tool_call",
                        "turn": record.data.get("turn"),
                        "call": call,
                        "command": _command(call),
                        "output": message.get("content"),
                    }
                )
        step: dict[str, Any] = {
            "type": "model_call",
            "status": record.status,
            "seq": record.seq,
            **{k: v for k, v in record.data.items() if k not in ("response", "request", "digest")},
        }
        response = record.data.get("response")
        if isinstance(response, dict):
            step.update(
                content=response.get("content"),
                tool_calls=response.get("tool_calls", []),
                model_id=response.get("model_id"),
                duration_s=response.get("duration_s"),
                stop_reason=response.get("stop_reason"),
                tries=response.get("tries", []),
            )
            names.update({c["id"]: c for c in response.get("tool_calls", [])})
        steps.append(step)
    return steps


def _command(call: dict[str, Any]) -> str | None:
    """The shell command of a tool call that carries one (Claude Code's Bash, Codex's shell, ...)."""
    arguments = (
        ToolCall.model_validate(
            {"id": str(call.get("id")), "name": str(call.get("name")), "arguments": str(call.get("arguments") or "")}
        ).parsed_arguments()
        or {}
    )
    command = arguments.get("command") or arguments.get("cmd")
    if isinstance(command, list):
        return " ".join(str(part) for part in command)
    return command if isinstance(command, str) else None
