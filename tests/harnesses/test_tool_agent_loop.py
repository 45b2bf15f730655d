"""The tool agent's loop at its seam: an AgentRun driven directly with the scripted model and a `local`
environment session, no runtime, CLI or Dagster around it (tests/e2e and test_tool_agent.py drive the same
loop through a sweep)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcompass_dagster.contracts.declarations import EnvironmentConfig, HarnessConfig, ModelConfig
from agentcompass_dagster.durable.activity import ACTIVITY_FILE, read_activity
from agentcompass_dagster.plugins.environments.local import LocalEnvironment, LocalSession
from agentcompass_dagster.plugins.harnesses.tool_agent import AgentOutcome, AgentRun, ToolAgentParams, fingerprint
from agentcompass_dagster.plugins.models.scripted import ScriptedModel
from agentcompass_dagster.contracts.records import AgentLimits
from agentcompass_dagster.runtime.execution.agent_limits import AttemptLimits, LimitedEnvironment, LimitedModel

TASK = "make-greeting"
PROMPT = "Write hello into greeting.txt, then submit the word count."


def bash(command: str, **turn: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}], **turn}


def submit(answer: str, **turn: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "submit", "arguments": {"answer": answer}}], **turn}


@pytest.fixture
def session() -> Iterator[LocalSession]:
    """A `local` environment session of its own, closed (its temp directory removed) after the test."""
    env_session = LocalEnvironment(EnvironmentConfig(id="local")).new_session()
    try:
        yield env_session
    finally:
        asyncio.run(env_session.close())


def agent(
    session: LocalSession, durable_dir: Path, turns: list[dict[str, Any]], *, record: Path | None = None, **limits: Any
) -> AgentRun:
    """An AgentRun as dispatch builds one: the scripted model playing ``turns`` for TASK, it and the
    session under the budget ``limits``."""
    model_config = ModelConfig(
        id="scripted",
        provider="scripted",
        params={
            "turns": {TASK: turns},
            "price": {"input": 1.0, "output": 2.0},
            **({"record": str(record)} if record else {}),
        },
    )
    params = ToolAgentParams()
    harness = HarnessConfig(id="tool_agent", params=params.model_dump(mode="json"))
    budget = AttemptLimits(AgentLimits(**limits))
    return AgentRun(
        LimitedModel(ScriptedModel(model_config), budget),
        params,
        LimitedEnvironment(session, budget),
        task_id=TASK,
        attempt=1,
        prompt=PROMPT,
        durable_dir=durable_dir,
        fingerprint=fingerprint(None, harness, model_config),
    )


def run(agent_run: AgentRun) -> AgentOutcome:
    return asyncio.run(agent_run.run())


SOLVE = [
    bash(
        "printf 'hello\\n' > greeting.txt && pwd",
        content="Writing the file.",
        usage={"prompt_tokens": 100, "completion_tokens": 20},
    ),
    bash("wc -w < greeting.txt", usage={"prompt_tokens": 150, "completion_tokens": 10}),
    submit("1", usage={"prompt_tokens": 200, "completion_tokens": 5}),
]


def test_the_loop_runs_the_models_commands_in_the_session_and_ends_with_its_submit(
    session: LocalSession, tmp_path: Path
) -> None:
    """The scripted model's bash calls run in the session's working directory (the file is on disk
    there), each tool result goes back to the model, and its submit is the answer; the trajectory, the
    tool calls and the usage totals (priced at $1/$2 per Mtok) say the same."""
    outcome = run(agent(session, tmp_path / "durable", SOLVE))

    assert (outcome.status, outcome.error, outcome.final_answer, outcome.limit) == ("completed", None, "1", None)
    assert Path(session.workdir, "greeting.txt").read_text() == "hello\n"
    write, count, done = outcome.tool_calls
    assert (write["exit_code"], write["output"].strip()) == (0, session.workdir)
    assert (count["command"], count["exit_code"], count["output"].strip()) == ("wc -w < greeting.txt", 0, "1")
    assert (done["call"]["name"], done["answer"]) == ("submit", "1")

    steps = outcome.trajectory
    assert [s["type"] for s in steps] == ["message", "message", *["model_call", "tool_call"] * 3]
    assert steps[1] == {"type": "message", "role": "user", "content": PROMPT}
    assert steps[2]["content"] == "Writing the file." and steps[2]["model_id"] == "scripted"
    assert steps[5]["observation"].startswith("exit code: 0") and "1" in steps[5]["observation"]

    assert [(u.input_tokens, u.output_tokens) for u in outcome.turns] == [(100, 20), (150, 10), (200, 5)]
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (450, 35)
    assert outcome.usage.cost_usd == pytest.approx((450 * 1.0 + 35 * 2.0) / 1e6) and outcome.cost_complete
    assert outcome.model_ids == ["scripted"] * 3 and outcome.resumed is None


def test_every_model_and_tool_call_is_in_the_activity_log_in_flight_then_completed(
    session: LocalSession, tmp_path: Path
) -> None:
    """R-LOG-1: the attempt's activity.jsonl in its durable directory holds the session and, for every
    model and tool call, an in_flight record written before it and a completed one (with its seq) after
    it; each command's completed record names the checkpoint saved before it (R-CKPT-1), whose manifest
    is on disk, or for a command that changed no file (wc), the checkpoint the files are still at."""
    durable = tmp_path / "durable"
    run(agent(session, durable, SOLVE))

    records = read_activity(durable / ACTIVITY_FILE)
    calls = [
        (turn, kind, f"model-{turn}" if kind == "model_call" else f"{turn}.0")
        for turn in range(3)
        for kind in ("model_call", "tool_call")
    ]
    assert [(r.kind, r.id, r.status) for r in records] == [
        ("session", "session", "in_flight"),
        *[(kind, key, status) for _, kind, key in calls for status in ("in_flight", "completed")],
        ("session", "session", "completed"),
    ]
    assert [r.seq for r in records if r.status == "completed" and r.kind != "session"] == [1, 2, 3, 4, 5, 6]
    assert records[-1].data | {"limit": None} == {
        "status": "completed",
        "error": None,
        "final_answer": "1",
        "limit": None,
    }
    commands = [r for r in records if r.kind == "tool_call" and r.status == "completed" and "exit_code" in r.data]
    assert [(r.data["command"], r.checkpoint_seq) for r in commands] == [
        (SOLVE[0]["tool_calls"][0]["arguments"]["command"], 2),
        ("wc -w < greeting.txt", 2),
    ]
    assert sorted(p.name for p in (durable / "checkpoints" / "manifests").iterdir()) == ["00000002.json"]


def test_a_commands_in_flight_record_is_on_disk_before_the_command_starts(
    session: LocalSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-LOG-1: the log is fsynced with a command's in-flight record before the command runs (a resume
    after a power cut still knows of it), and model calls do not wait for the disk: one fsync per
    command after the log's first."""
    durable = tmp_path / "durable"
    log = durable / ACTIVITY_FILE
    seen: list[tuple[int, bool]] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if Path(os.readlink(f"/proc/self/fd/{fd}")) == log:
            in_flight = [r for r in read_activity(log) if r.kind == "tool_call" and r.status == "in_flight"]
            seen.append((len(in_flight), Path(session.host_path(session.workdir), "greeting.txt").exists()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    run(agent(session, durable, SOLVE))
    assert seen[:2] == [(0, False), (1, False)], "the first command ran before its record was on disk"
    assert len(seen) == 1 + 2


def test_a_finished_log_is_not_run_again(session: LocalSession, tmp_path: Path) -> None:
    """R-RESUME-1: a second AgentRun over the durable directory of a finished attempt returns what the
    log recorded (answer, usage) and asks the model nothing more."""
    durable, record = tmp_path / "durable", tmp_path / "model-calls.jsonl"
    first = run(agent(session, durable, SOLVE, record=record))
    again = run(agent(session, durable, SOLVE, record=record))

    assert again.resumed == "finished" and again.final_answer == first.final_answer == "1"
    assert again.usage == first.usage and again.trajectory == first.trajectory
    assert len(record.read_text().splitlines()) == 3, "one model call per scripted turn, none on the re-run"


def test_max_turns_stops_the_loop_with_the_limit_recorded(session: LocalSession, tmp_path: Path) -> None:
    """An attempt that reaches max_turns ends with that limit (allowance and use), not an error; the
    commands it ran stay in the session and the trajectory; the model is not called past the limit."""
    turns = [bash(f"echo {i} >> count.txt", usage={"prompt_tokens": 10}) for i in range(5)]
    record = tmp_path / "model-calls.jsonl"
    outcome = run(agent(session, tmp_path / "durable", turns, record=record, max_turns=2))

    assert outcome.limit is not None and outcome.limit.limit == "max_turns"
    assert (outcome.limit.allowance, outcome.limit.used) == (2, 2)
    assert outcome.status == "completed" and outcome.error is None and outcome.final_answer is None
    assert Path(session.workdir, "count.txt").read_text() == "0\n1\n"
    assert [s["type"] for s in outcome.trajectory][2:] == ["model_call", "tool_call"] * 2
    assert len(outcome.turns) == 2 and len(record.read_text().splitlines()) == 2
    (end,) = [
        r
        for r in read_activity(tmp_path / "durable" / ACTIVITY_FILE)
        if r.kind == "session" and r.status == "completed"
    ]
    assert end.data["limit"] == {"limit": "max_turns", "allowance": 2.0, "used": 2.0}


def test_a_malformed_tool_call_ends_the_attempt_with_an_error_that_says_which(
    session: LocalSession, tmp_path: Path
) -> None:
    """A model that sends arguments that are not the tool's JSON object ends the attempt with an error
    naming the tool and what was expected; nothing ran in the session."""
    turns = [{"tool_calls": [{"name": "bash", "arguments": '{"command": "touch x'}]}]
    outcome = run(agent(session, tmp_path / "durable", turns))

    assert outcome.status == "error" and outcome.limit is None
    assert outcome.error is not None and "malformed arguments for 'bash'" in outcome.error
    assert "a string 'command'" in outcome.error
    assert not Path(session.workdir, "x").exists()
