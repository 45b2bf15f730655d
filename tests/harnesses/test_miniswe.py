"""The `miniswe` harness: mini-swe-agent's loop over the scripted model and the local environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, tree_snapshot, write_sweep

from agentcompass_dagster.declarations import registry
from agentcompass_dagster.contracts.model import CallContext, ModelTurn
from agentcompass_dagster.plugins.harnesses.miniswe import quiet_import
from agentcompass_dagster.plugins.models.scripted import ScriptedModel

with quiet_import():
    pytest.importorskip("minisweagent", reason="mini-swe-agent is not installed (extra 'miniswe')")


Calls = dict[tuple[str, int], list[dict[str, Any]]]


@pytest.fixture
def model_calls(plugin_registries: None) -> Calls:
    """The scripted model registered as provider "recording-scripted" for this test (the sweep runs in this
    process), keeping the messages of every call by (task, turn)."""
    calls: Calls = {}

    class RecordingModel(ScriptedModel):
        async def complete(
            self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
        ) -> ModelTurn:
            calls[(context.task_id, context.turn)] = messages
            return await super().complete(messages, tools, context)

    registry.models.register("recording-scripted", RecordingModel)
    return calls


SOLVE = "awk '$3 == \"ERROR\" {n++} END {print n+0}' app.log > answer.txt; cat answer.txt"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def _bash(command: str, **turn: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}], **turn}


def _run(
    tmp_path: Path, tasks: list[str], turns: dict[str, list[dict[str, Any]]], exit_code: int = 0
) -> dict[str, dict[str, Any]]:
    sweep = write_sweep(
        tmp_path,
        name="mini",
        benchmarks=[{"id": "demo", "tasks": tasks}],
        models=[
            {
                "id": "scripted-mini",
                "provider": "recording-scripted",
                "params": {"price": {"input": 1.0, "output": 2.0}, "turns": turns},
            }
        ],
        harness={"id": "miniswe"},
        execution={"limits": {"max_turns": 6}},
    )
    assert run_cli("run", str(sweep), "--direct") == exit_code
    details = {}
    for path in (tmp_path / "results").rglob("details/*.json"):
        detail = json.loads(path.read_text())
        details[detail["task_id"]] = detail
    assert sorted(details) == sorted(tasks)
    return details


def test_reference_commands_solve_the_task_and_land_in_the_trajectory(tmp_path: Path, model_calls: Calls) -> None:
    details = _run(
        tmp_path,
        ["count-errors"],
        {
            "count-errors": [
                _bash(
                    SOLVE, content="Counting the ERROR lines.", usage={"prompt_tokens": 100, "completion_tokens": 20}
                ),
                _bash(SUBMIT, usage={"prompt_tokens": 150, "completion_tokens": 5}),
            ]
        },
    )
    detail = details["count-errors"]
    assert detail["error"] is None and detail["correct"] is True
    attempt = detail["attempts"]["1"]
    assert attempt["status"] == "completed" and attempt["run_error"] is None
    assert attempt["final_answer"] == ""

    steps = attempt["trajectory"]
    assert [s["type"] for s in steps] == ["message", "message", "model_call", "tool_call", "model_call", "tool_call"]
    assert [s["role"] for s in steps[:2]] == ["system", "user"]
    assert "How many log lines have the level" in steps[1]["content"]
    first_call, solve, second_call, submit = steps[2:]
    assert first_call["turn"] == 0 and first_call["content"] == "Counting the ERROR lines."
    assert first_call["model_id"] == "scripted-mini"
    assert first_call["tool_calls"] == [{"id": "call_0_0", "name": "bash", "arguments": json.dumps({"command": SOLVE})}]
    assert solve["command"] == SOLVE and solve["exit_code"] == 0 and solve["output"] == "5\n"
    assert solve["call"]["id"] == "call_0_0" and solve["turn"] == 0
    assert '"returncode": 0' in solve["observation"] and '"output": "5\\n"' in solve["observation"]
    assert submit["command"] == SUBMIT and submit["exit_code"] == 0 and submit["turn"] == 1
    assert submit["output"] == "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n"

    # Per-turn usage priced at $1/$2 per million tokens, and the attempt's sum.
    assert first_call["usage"]["input_tokens"] == 100 and first_call["usage"]["cost_usd"] == pytest.approx(140e-6)
    assert second_call["usage"]["output_tokens"] == 5 and second_call["usage"]["cost_usd"] == pytest.approx(160e-6)
    usage = attempt["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (250, 25)
    assert usage["cost_usd"] == pytest.approx(300e-6)

    # The model layer gets plain OpenAI chat messages: mini's "extra" bookkeeping stays with mini.
    second = model_calls[("count-errors", 1)]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id"} for m in second)
    assert second[2]["tool_calls"][0]["function"] == {"name": "bash", "arguments": json.dumps({"command": SOLVE})}
    assert second[3]["tool_call_id"] == "call_0_0" and second[3]["content"] == solve["observation"]

    mini = attempt["artifacts"]["miniswe"]
    assert mini["info"]["exit_status"] == "Submitted"
    assert mini["info"]["model_stats"] == {"instance_cost": pytest.approx(300e-6), "api_calls": 2}
    assert [m["role"] for m in mini["messages"]] == ["system", "user", "assistant", "tool", "assistant", "exit"]
    actions = mini["messages"][2]["extra"]["actions"]
    assert [(a["command"], a["tool_call_id"], a["key"]) for a in actions] == [(SOLVE, "call_0_0", "0.0")]
    assert mini["messages"][3]["extra"]["raw_output"] == "5\n"


def test_malformed_tool_arguments_get_minis_format_error_feedback(tmp_path: Path, model_calls: Calls) -> None:
    """One task recovers after a malformed call; the other sends nothing but malformed calls, and mini
    ends it after its limit of consecutive format errors: both attempts end cleanly with a detail, the
    second as the model's scored failure (0, counted), not an error (the run exits 0)."""
    bad = {"tool_calls": [{"name": "bash", "arguments": '{"command": "ls'}], "usage": {"prompt_tokens": 10}}
    details = _run(
        tmp_path,
        ["count-errors", "create-hello"],
        {
            "count-errors": [bad, _bash(SOLVE), _bash(SUBMIT)],
            "create-hello": [bad, bad, bad],
        },
        exit_code=0,
    )

    recovered = details["count-errors"]
    assert recovered["correct"] is True and recovered["error"] is None
    steps = recovered["attempts"]["1"]["trajectory"]
    assert [s["type"] for s in steps[2:4]] == ["model_call", "message"]
    assert steps[2]["tool_calls"][0]["arguments"] == '{"command": "ls'
    feedback = steps[3]
    assert feedback["role"] == "user" and "Error parsing tool call arguments" in feedback["content"]
    assert [s.get("command") for s in steps if s["type"] == "tool_call"] == [SOLVE, SUBMIT]
    assert recovered["attempts"]["1"]["usage"]["input_tokens"] == 10
    # The unparsable call is not sent back to the model, only mini's feedback on it.
    assert [m["role"] for m in model_calls[("count-errors", 1)]] == ["system", "user", "user"]

    failed = details["create-hello"]
    attempt = failed["attempts"]["1"]
    assert failed["correct"] is False and attempt["status"] == "failed" and failed["error"] is None
    assert (
        failed["failure"]
        == attempt["failure"]
        == ("mini-swe-agent exited: RepeatedFormatError: 3 replies in a row without a usable tool call")
    )
    assert [s["type"] for s in attempt["trajectory"][2:]] == ["model_call", "message"] * 3
    assert attempt["artifacts"]["miniswe"]["info"]["exit_status"] == "RepeatedFormatError"


def test_replay_re_runs_a_miniswe_trajectory(tmp_path: Path, model_calls: Calls) -> None:
    """R-REPLAY-1 for mini-swe-agent trajectories: its recorded commands re-run in a clean environment
    and match, including the submitting command; no model is asked."""
    _run(tmp_path, ["count-errors"], {"count-errors": [_bash("wc -l < app.log"), _bash(SOLVE), _bash(SUBMIT)]})
    run_dir = next((tmp_path / "results").rglob("run_info.json")).parent
    before = tree_snapshot(run_dir)
    calls = len(model_calls)
    assert run_cli("replay", str(run_dir), "--task", "count-errors", "--score") == 0
    report = json.loads(next((run_dir / "replays").glob("*.json")).read_text())
    assert report["status"] == "matched" and len(report["steps"]) == 3 and report["evaluation"]["correct"]
    assert len(model_calls) == calls
    after = tree_snapshot(run_dir)
    assert {k: v for k, v in after.items() if not k.startswith("replays/")} == before, (
        "replay wrote into the recorded run"
    )


def test_a_failed_model_call_is_in_the_trajectory_with_its_time(tmp_path: Path, model_calls: Calls) -> None:
    """A model call that fails after a second (an endpoint that timed out) is the trajectory's last step,
    aborted, with its error and duration, and time_split counts it as the model's time, not the
    framework's (mini's messages leave it out: 240 s of two timed-out calls showed as framework time)."""
    details = _run(
        tmp_path, ["count-errors"], {"count-errors": [_bash(SOLVE), {"sleep": 1.0, "fail": "timed out"}]}, exit_code=3
    )
    attempt = details["count-errors"]["attempts"]["1"]
    last = attempt["trajectory"][-1]
    assert (last["type"], last["status"], last["turn"]) == ("model_call", "aborted", 1) and "timed out" in last["error"]
    assert last["duration_s"] >= 1.0
    from agentcompass_dagster.plugins.analyzers.time_split import TimeSplitAnalyzer
    from agentcompass_dagster.contracts.records import EvaluatedAttempt, TaskSpec

    split = TimeSplitAnalyzer().analyze(TaskSpec(id="count-errors", input=""), EvaluatedAttempt.model_validate(attempt))
    assert split["model_s"] >= 1.0 and split["framework_s"] < attempt["duration_s"] - 1.0


def test_a_config_path_is_beside_the_declaration_and_a_bare_name_is_minis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #36: a ``config`` that is a path is read beside the file that declares the harness, whatever
    the working directory holds; a bare name is one of mini-swe-agent's own configs, even beside a sweep
    named after it (mini.yaml)."""
    from agentcompass_dagster.contracts.declarations import HarnessConfig
    from agentcompass_dagster.plugins.harnesses.miniswe import load_config

    project, cwd = tmp_path / "project", tmp_path / "cwd"
    for folder in (project, cwd):
        (folder / "config").mkdir(parents=True)
        (folder / "config" / "agent.yaml").write_text(f"agent: {{from: {folder.name}}}\n")
    (project / "mini.yaml").write_text("name: mini\n")
    declaration = HarnessConfig(id="miniswe", params={"config": "config/agent.yaml"})
    declaration.read_from(str(project / "mini.yaml"))
    monkeypatch.chdir(cwd)

    assert load_config("config/agent.yaml", declaration) == {"agent": {"from": "project"}}
    assert "system_template" in load_config("mini", declaration)["agent"]
