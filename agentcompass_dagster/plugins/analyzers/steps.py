"""A trajectory as the analyzers read it: the tool calls and the model replies of the step format that
``tool_agent`` and ``miniswe`` record (``harnesses/tool_agent/state.py``, ``harnesses/miniswe.py``), and
the ``command`` steps of the oracle and scripted harnesses.

    {"type": "model_call", "turn": 0, "tool_calls": [...], "duration_s": 0.8, "stop_reason": "tool_calls"}
    {"type": "tool_call", "turn": 0, "call": {"name": "bash", ...}, "command": "ls", "exit_code": 0,
     "output": "...", "duration_s": 0.1}
    {"type": "tool_call", "turn": 1, "call": {"name": "submit", ...}, "answer": "done"}
    {"type": "tool_call", "turn": 2, "call": {...}, "error": "model sent malformed arguments ..."}
    {"type": "command", "command": "bash solution.sh", "exit_code": 0}

A tool_agent call the harness could not use carries ``error``; a miniswe reply mini could not use carries
``format_error``; miniswe submits with a command whose observation is ``submitted``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolStep:
    index: int  # position in the trajectory: what evidence points at
    turn: int | None
    tool: str
    command: str | None  # None: a submit or an unusable call
    exit_code: int | None  # None: not run to its end (interrupted by a crash)
    output: str
    timed_out: bool
    malformed: bool
    submitted: bool
    duration_s: float | None

    @property
    def is_work(self) -> bool:
        """A command the agent ran, other than the one that submits."""
        return self.command is not None and not self.submitted

    @property
    def failed(self) -> bool:
        return self.is_work and (self.timed_out or (self.exit_code is not None and self.exit_code != 0))


@dataclass(frozen=True)
class Reply:
    index: int
    turn: int | None
    tool_calls: int
    unusable: bool  # mini's format error, or a reply cut at the token limit with no tool call
    duration_s: float | None


def tool_steps(trajectory: list[dict[str, Any]]) -> list[ToolStep]:
    steps = []
    for index, step in enumerate(trajectory):
        kind = step.get("type")
        if kind not in ("tool_call", "command"):
            continue
        call = step.get("call") or {}
        tool = str(call.get("name", "bash"))
        command = step.get("command")
        steps.append(
            ToolStep(
                index=index,
                turn=step.get("turn"),
                tool=tool,
                command=command if isinstance(command, str) else None,
                exit_code=step.get("exit_code"),
                output=str(step.get("output") or ""),
                timed_out=bool(step.get("timed_out")),
                malformed=kind == "tool_call" and bool(step.get("error")),
                submitted=tool == "submit" or step.get("observation") == "submitted",
                duration_s=step.get("duration_s"),
            )
        )
    return steps


def replies(trajectory: list[dict[str, Any]]) -> list[Reply]:
    """The model's completed replies (an aborted call has none)."""
    found = []
    for index, step in enumerate(trajectory):
        if step.get("type") != "model_call" or step.get("status", "completed") != "completed":
            continue
        calls = len(step.get("tool_calls") or [])
        cut = step.get("stop_reason") == "length" and not calls
        found.append(
            Reply(
                index=index,
                turn=step.get("turn"),
                tool_calls=calls,
                unusable=bool(step.get("format_error")) or cut,
                duration_s=step.get("duration_s"),
            )
        )
    return found


def normalized(command: str) -> str:
    """A command with its whitespace collapsed: the same command typed twice compares equal."""
    return " ".join(command.split())


def opening(trajectory: list[Any]) -> int:
    """How many of the trajectory's first entries open it rather than being steps: the harness's
    instructions and the task prompt (system and user messages, at most two). The trajectory page shows
    them apart, and ``trajectory_stats`` counts the steps after them, so the two name one number."""
    count = 0
    for raw in trajectory[:2]:
        if not (isinstance(raw, dict) and raw.get("type") == "message" and raw.get("role") in ("system", "user")):
            break
        count += 1
    return count
