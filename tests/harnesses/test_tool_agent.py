"""The tool_agent harness driven by the scripted model: solving the demo tasks, failing cleanly, limits,
context compaction, and usage flowing into details, task_results.parquet and the summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import details_by_task, run_cli, write_sweep

from agentcompass_dagster.plugins.benchmarks.demo import TASKS_DIR as DEMO_TASKS_DIR
from agentcompass_dagster.durable.activity import read_activity
from agentcompass_dagster.plugins.harnesses.tool_agent.state import AgentState
from agentcompass_dagster.plugins.harnesses.tool_agent.tools import DEFAULT_SYSTEM_PROMPT
from agentcompass_dagster.reporting.results import load_task_results

DEMO_IDS = sorted(p.name for p in DEMO_TASKS_DIR.iterdir() if (p / "task.yaml").is_file())


def bash(command: str, **turn: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}], **turn}


def submit(answer: str = "done", **turn: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "submit", "arguments": {"answer": answer}}], **turn}


def reference_turns(task_id: str) -> list[dict[str, Any]]:
    solution = (DEMO_TASKS_DIR / task_id / "solution.sh").read_text()
    return [
        bash(solution, usage={"prompt_tokens": 100, "completion_tokens": 20}),
        submit(usage={"prompt_tokens": 150, "completion_tokens": 5, "cached_tokens": 50}),
    ]


def agent_sweep(
    tmp_path: Path,
    turns: dict[str, list[dict[str, Any]]],
    tasks: list[str] | None = None,
    price: dict[str, float] | None = None,
    **params: Any,
) -> Path:
    model: dict[str, Any] = {"id": "scripted", "provider": "scripted", "params": {"turns": turns}}
    if price:
        model["params"]["price"] = price
    return write_sweep(
        tmp_path,
        benchmarks=[{"id": "demo", "tasks": tasks or sorted(turns)}],
        models=[model],
        harness={"id": "tool_agent", "params": params},
        execution={"limits": {"task_concurrency": 4}},
    )


def test_tool_agent_solves_every_demo_task_with_the_reference_commands(tmp_path: Path) -> None:
    """The scripted model issues each task's reference commands through the bash tool, then submits."""
    sweep = agent_sweep(tmp_path, {t: reference_turns(t) for t in DEMO_IDS}, price={"input": 1.0, "output": 2.0})
    assert run_cli("run", sweep, "--direct") == 0
    found = details_by_task(tmp_path / "results")
    assert sorted(found) == DEMO_IDS
    assert all(d["correct"] for d in found.values()), [t for t, d in found.items() if not d["correct"]]
    attempt = found["count-errors"]["attempts"]["1"]
    steps = attempt["trajectory"]
    assert [s["type"] for s in steps] == ["message", "message", "model_call", "tool_call", "model_call", "tool_call"]
    assert steps[0]["content"] == DEFAULT_SYSTEM_PROMPT and "app.log" in steps[1]["content"]
    assert (
        steps[3]["exit_code"] == 0
        and "ERROR" in steps[3]["command"]
        and steps[3]["observation"].startswith("exit code: 0")
    )
    assert steps[5]["answer"] == "done"
    # 100+150 prompt tokens (50 of the second turn cached, counted once); cost at $1/$2 per Mtok.
    assert attempt["usage"]["input_tokens"] == 250 and attempt["usage"]["output_tokens"] == 25
    assert attempt["usage"]["cache_read_tokens"] == 50
    assert attempt["usage"]["cost_usd"] == pytest.approx((250 * 1.0 + 25 * 2.0) / 1e6)
    frame = load_task_results(tmp_path / "results")
    assert len(frame) == len(DEMO_IDS) and (frame["input_tokens"] == 250).all() and (frame["duration_s"] > 0).all()
    assert frame["cost_usd"].sum() == pytest.approx(len(DEMO_IDS) * 300 / 1e6)
    summary = next((tmp_path / "results").rglob("summary.md")).read_text()
    assert f"Usage: {250 * len(DEMO_IDS):,} input tokens · {25 * len(DEMO_IDS):,} output tokens" in summary


@pytest.mark.parametrize(
    ("turns", "error"),
    [
        ([{"tool_calls": [{"name": "bash", "arguments": '{"command": "ls"'}]}], "malformed arguments for 'bash'"),
        (
            [{"tool_calls": [{"name": "bash", "arguments": {"cmd": "ls"}}]}],
            "expected a JSON object with a string 'command'",
        ),
        ([{"tool_calls": [{"name": "python", "arguments": {"code": "1"}}]}], "unknown tool 'python'"),
        ([{"fail": "upstream said no"}], "model call failed: upstream said no"),
    ],
    ids=["malformed-json", "missing-command", "unknown-tool", "model-error"],
)
def test_tool_agent_fails_cleanly(tmp_path: Path, turns: list[dict[str, Any]], error: str) -> None:
    """A broken tool protocol ends the attempt as the model's failure (scored 0, exit 0), a failed model
    call with an error (exit 3: it completed, with a task in error); both name what happened, the detail
    keeps the trajectory up to that point, and the activity log ends with the finished session."""
    sweep = agent_sweep(tmp_path, {"count-errors": turns})
    model_failed = error.startswith("model call failed")
    assert run_cli("run", sweep, "--direct") == (3 if model_failed else 0)
    detail = details_by_task(tmp_path / "results")["count-errors"]
    attempt = detail["attempts"]["1"]
    assert error in attempt["run_error" if model_failed else "failure"] and not detail["correct"]
    assert any(step["type"] == "model_call" for step in attempt["trajectory"]) or "model call failed" in error
    log = read_activity(next((tmp_path / "results").rglob("activity.jsonl")))
    assert log[-1].kind == "session" and log[-1].status == "completed" and error in log[-1].data["error"]


def test_compaction_replaces_older_turns_with_a_recorded_summary(tmp_path: Path) -> None:
    """R-LOG-2: past the token budget, older turns become one summary message; the compaction is logged
    and rebuilding the context from the log gives the summary plus later messages, not the replaced ones."""
    turns = [bash(f"echo step-{i} && printf '%0400d' 0") for i in range(8)] + [submit()]
    sweep = agent_sweep(tmp_path, {"count-errors": turns}, compact_at_tokens=600, keep_recent_messages=4)
    assert run_cli("run", sweep, "--direct") == 0
    attempt = details_by_task(tmp_path / "results")["count-errors"]["attempts"]["1"]
    compactions = [s for s in attempt["trajectory"] if s["type"] == "compaction"]
    assert compactions and "echo step-0" in compactions[0]["summary"]
    records = read_activity(next((tmp_path / "results").rglob("activity.jsonl")))
    state = AgentState.from_log(records, DEFAULT_SYSTEM_PROMPT, "prompt")
    contents = [json.dumps(m) for m in state.messages]
    assert state.messages[2]["content"].startswith("Summary of")
    assert not any("step-0" in c for c in contents[3:]), "a summarised turn came back after the summary"
    assert state.turns == 9 and state.final_answer == "done"


def test_a_retried_attempt_starts_a_fresh_log_and_keeps_the_discarded_one(tmp_path: Path) -> None:
    """A runtime retry of the whole attempt (R-RETRY-3) does not resume the discarded try: its activity
    log is set aside as ``.try1`` and the new try starts from an empty log."""
    sweep = agent_sweep(tmp_path, {"count-errors": [bash("true"), {"fail": "rate limited (HTTP 429)"}]})
    data = yaml.safe_load(sweep.read_text())
    data["execution"]["max_retries"] = 1
    data["execution"]["retry_pattern_list"] = ["rate limited"]
    sweep.write_text(yaml.safe_dump(data))
    assert run_cli("run", sweep, "--direct") == 3
    durable = next((tmp_path / "results").rglob(".durable"))
    assert sorted(p.name for p in durable.iterdir()) == ["count-errors@1", "count-errors@1.try1"]
    for directory in durable.iterdir():
        log = read_activity(directory / "activity.jsonl")
        assert [r.kind for r in log if r.kind == "session"] == ["session", "session"]
        assert sum(r.kind == "tool_call" and r.status == "completed" for r in log) == 1
