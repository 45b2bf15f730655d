"""The steps of an attempt's trajectory (``RunResult.trajectory``), typed: the shapes the analyzers and
the trajectory pages read. A harness builds its steps with these models or as JSON objects of the same
shape (a ``RunResult`` stores either as the object); a step of another ``type`` is kept, and shown as its
JSON. Every step may carry more than its model names (a harness records what else it knows: usage,
tries, sequence numbers, a status), and every field but ``type`` and the one that says what happened may
be left out.

Example::

    trajectory = [
        MessageStep(role="user", content=prompt),
        ModelCallStep(turn=0, content=turn.content, stop_reason=turn.stop_reason, duration_s=turn.duration_s),
        CommandStep(command="ls", exit_code=ran.exit_code, output=ran.output, duration_s=ran.duration_s),
    ]
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class TrajectoryStep(BaseModel):
    """What every step is: a JSON object with a ``type``; the fields a model does not name are kept."""

    model_config = ConfigDict(extra="allow")

    def as_json(self) -> dict[str, Any]:
        """The step as ``RunResult.trajectory`` keeps it: what was set, without the fields left out."""
        return self.model_dump(mode="json", exclude_none=True)


class MessageStep(TrajectoryStep):
    """A message of the conversation the harness did not get from the model: the instructions and the
    task's prompt (the first steps), or a harness's own note."""

    type: Literal["message"] = "message"
    role: str
    content: str | list[Any] | None = None


class ModelCallStep(TrajectoryStep):
    """One call of the model: its reply's text, the tool calls it asked for, why it stopped, how long it
    took. ``turn`` counts the model calls of the attempt from 0."""

    type: Literal["model_call"] = "model_call"
    turn: int | None = None
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    stop_reason: str | None = None
    duration_s: float | None = None


class CommandStep(TrajectoryStep):
    """A command the harness ran in the task's environment without a model's tool call (the oracle's
    solution, a scripted step, an agent CLI's own process)."""

    type: Literal["command"] = "command"
    command: str
    exit_code: int | None = None
    output: str | None = None
    timed_out: bool | None = None
    duration_s: float | None = None


class ToolCallStep(TrajectoryStep):
    """A tool call the model asked for (``call``: its name, id and arguments) and what running it gave: the
    command it ran, its exit code and output, what the model was told (``observation``), or the answer
    a submit carried."""

    type: Literal["tool_call"] = "tool_call"
    turn: int | None = None
    call: dict[str, Any]
    command: str | None = None
    exit_code: int | None = None
    output: str | None = None
    observation: str | None = None
    answer: str | None = None
    duration_s: float | None = None


Step = Annotated[MessageStep | ModelCallStep | CommandStep | ToolCallStep, Field(discriminator="type")]
STEP = TypeAdapter(Step)
STEP_TYPES = ("message", "model_call", "command", "tool_call")


def typed_step(raw: dict[str, Any]) -> Step | None:
    """``raw`` (a step of ``RunResult.trajectory`` or ``EvaluatedAttempt.trajectory``) as its typed step, for
    an analyzer or a report that reads steps by their fields; None for a step of a type this version does
    not know. A step of a known type that does not have its shape raises pydantic's ValidationError."""
    return STEP.validate_python(raw) if raw.get("type") in STEP_TYPES else None
