"""Issue 40: the steps of a trajectory are typed (contracts/trajectory.py): a harness gives them as models
or as objects of their shapes, and every step the built-in harnesses record has its type's shape."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import details_by_task, run_cli
from pydantic import ValidationError
from scripted_agent import SOLUTION, bash, submit, sweep_file

from agentcompass_dagster.contracts import CommandStep, MessageStep, ModelCallStep, RunResult, ToolCallStep
from agentcompass_dagster.contracts.trajectory import typed_step


def test_a_harness_gives_typed_steps_and_the_result_keeps_them_as_json() -> None:
    """A RunResult keeps typed steps as the JSON objects of their shape (what a detail file holds), with
    what a harness added beyond the model's fields; typed_step reads them back, a step of a type this
    version does not know is None, and one of a known type without its shape is refused."""
    result = RunResult(
        trajectory=[
            MessageStep(role="user", content="count the errors"),
            ModelCallStep(turn=0, content=None, tool_calls=[{"name": "bash"}], usage={"input_tokens": 3}),
            ToolCallStep(turn=0, call={"name": "bash", "id": "c1"}, command="grep -c ERROR app.log", exit_code=0),
            CommandStep(command="true", exit_code=0, duration_s=0.5),
            {"type": "note", "text": "kept as it is"},
        ]
    )
    assert result.trajectory[:2] == [
        {"type": "message", "role": "user", "content": "count the errors"},
        {"type": "model_call", "turn": 0, "tool_calls": [{"name": "bash"}], "usage": {"input_tokens": 3}},
    ]
    stored = RunResult.model_validate_json(result.model_dump_json()).trajectory
    assert [type(typed_step(step)) for step in stored] == [
        MessageStep,
        ModelCallStep,
        ToolCallStep,
        CommandStep,
        type(None),
    ]
    with pytest.raises(ValidationError, match="command"):
        typed_step({"type": "command", "exit_code": 0})


@pytest.mark.parametrize("harness", ["oracle", "tool_agent", "miniswe"])
def test_every_step_a_built_in_harness_records_has_its_types_shape(tmp_path: Path, harness: str) -> None:
    """The steps the oracle, tool_agent and miniswe record (through `agentcompass run`) are each of a known
    type and validate as it: the prose of RunResult and the models say what the harnesses write."""
    if harness == "miniswe":
        pytest.importorskip("minisweagent", reason="mini-swe-agent is not installed (extra 'miniswe')")
    # mini ends on the command that prints its submit marker; the tool agent on its submit tool.
    end = bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT") if harness == "miniswe" else submit()
    turns = {"count-errors": [bash("ls"), bash(SOLUTION), end]}
    sweep = sweep_file(tmp_path, turns, harness=harness)
    assert run_cli("run", sweep, "--direct") == 0
    (detail,) = details_by_task(tmp_path / "results").values()
    steps = [step for attempt in detail["attempts"].values() for step in attempt["trajectory"]]
    typed = [typed_step(step) for step in steps]
    assert steps and None not in typed, [step["type"] for step in steps]
    kinds = {step["type"] for step in steps}
    assert kinds == ({"command"} if harness == "oracle" else {"message", "model_call", "tool_call"}), kinds
