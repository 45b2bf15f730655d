"""Agents against an endpoint that misbehaves the way real ones do: a call that never answers, an
endpoint that fails every call and then recovers, a context overflow, outputs larger than the model is
shown. The model is the real `openai_compat` plugin through the SDK, against the fake HTTP server; the
runs are `agentcompass run` processes, synchronised on what the server receives, never on sleeps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, details_by_task, write_sweep
from fake_openai import FakeOpenAI, fake_openai_server, tool_call  # noqa: F401
from waiting import wait_until

from agentcompass_dagster.plugins.benchmarks.demo import TASKS_DIR
from agentcompass_dagster.durable.activity import read_activity
from agentcompass_dagster.plugins.harnesses.miniswe import quiet_import

with quiet_import():
    pytest.importorskip("minisweagent", reason="mini-swe-agent is not installed (extra 'miniswe')")

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
SOLVE = "awk '$3 == \"ERROR\" {n++} END {print n+0}' app.log > answer.txt; cat answer.txt"
NEVER_S = 3600.0


def bash_reply(fake: FakeOpenAI, command: str, call_id: str = "call_1", **fields: Any) -> None:
    fake.reply(
        tool_calls=[tool_call("bash", json.dumps({"command": command}), call_id)],
        usage={"prompt_tokens": 50, "completion_tokens": 5},
        **fields,
    )


def submit_reply(fake: FakeOpenAI, harness: str, answer: str = "5") -> None:
    if harness == "miniswe":
        bash_reply(fake, f"echo {SUBMIT_MARKER}; echo {answer}", "call_s")
    else:
        fake.reply(
            tool_calls=[tool_call("submit", json.dumps({"answer": answer}), "call_s")],
            usage={"prompt_tokens": 50, "completion_tokens": 5},
        )


def endpoint_sweep(
    tmp_path: Path, fake: FakeOpenAI, harness: str, tasks: list[str], *, max_retries: int = 0, **limits: Any
) -> Path:
    model = {
        "id": "endpoint",
        "provider": "openai_compat",
        "model": "served",
        "base_url": fake.base_url,
        "params": {"timeout_s": 600, "max_retries": max_retries},
    }
    return write_sweep(
        tmp_path,
        benchmarks=[{"id": "demo", "tasks": tasks}],
        models=[model],
        harness={"id": harness},
        execution={"limits": {"task_concurrency": 1, **limits}},
    )


def start(tmp_path: Path, sweep: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", str(sweep), *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.mark.parametrize("harness", ["tool_agent", "miniswe"])
def test_a_call_still_unanswered_at_the_attempt_timeout_ends_it(
    tmp_path: Path, fake_openai: FakeOpenAI, harness: str
) -> None:
    """The second model call gets no answer before the attempt ends and the model's timeout_s is 600 with
    retries: attempt_timeout_s: 3 cuts the call in flight. The endpoint answers GET /models (it is alive,
    a model still generating), so the attempt is recorded `timeout` with the trajectory it had, the
    agent's failure (exit 0), within attempt_timeout_s + cleanup_grace_seconds + 5 s of the call. An
    endpoint that does not answer at all is an error: tests/models/test_hung_endpoint.py."""
    bash_reply(fake_openai, "echo first-command")
    fake_openai.reply(content="too late", delay_s=NEVER_S)
    sweep = endpoint_sweep(
        tmp_path, fake_openai, harness, ["count-errors"], max_retries=3, attempt_timeout_s=3, cleanup_grace_seconds=2
    )
    proc = start(tmp_path, sweep, "--direct")
    wait_until(
        lambda: len(fake_openai.requests) >= 2,
        "request 2 at the server",
        proc=proc,
        interval=0.02,
        describe=lambda: f"{len(fake_openai.requests)} requests",
    )
    try:
        out, err = proc.communicate(timeout=3 + 2 + 5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("agentcompass did not exit within attempt_timeout_s + cleanup_grace_seconds + 5 s")
    # Running out of its time is the attempt's own failure: scored 0 and counted, not an error.
    assert proc.returncode == 0, err
    assert "# demo" in out and "1 failed by the agent · 0 errors" in out
    attempt = details_by_task(tmp_path / "results")["count-errors"]["attempts"]["1"]
    assert attempt["status"] == "timeout" and "attempt timed out after 3s" in attempt["failure"]
    assert attempt["run_error"] is None
    commands = [s for s in attempt["trajectory"] if s["type"] == "tool_call"]
    assert [c["command"] for c in commands] == ["echo first-command"] and "first-command" in commands[0]["output"]
    assert len(fake_openai.requests) == 2, "the hung call was retried after the attempt ended"
    assert fake_openai.model_listings == 1


@pytest.mark.parametrize("stop", ["orchestration-timeout", "sigint"])
def test_an_orchestration_timeout_or_ctrl_c_ends_a_hung_call(
    tmp_path: Path, fake_openai: FakeOpenAI, stop: str
) -> None:
    """The same hung call ended by the run's own deadline (exit 1: not completed) or by Ctrl-C (exit 130)."""
    fake_openai.reply(content="too late", delay_s=NEVER_S)
    limits = {"orchestration_timeout_s": 3} if stop == "orchestration-timeout" else {}
    sweep = endpoint_sweep(
        tmp_path, fake_openai, "tool_agent", ["count-errors"], max_retries=3, cleanup_grace_seconds=2, **limits
    )
    proc = start(tmp_path, sweep, "--direct")
    wait_until(
        lambda: len(fake_openai.requests) >= 1,
        "request 1 at the server",
        proc=proc,
        interval=0.02,
        describe=lambda: f"{len(fake_openai.requests)} requests",
    )
    if stop == "sigint":
        os.kill(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=(3 if stop == "orchestration-timeout" else 0) + 2 + 5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"agentcompass did not exit after the {stop}")
    assert proc.returncode == (1 if stop == "orchestration-timeout" else 130), err
    info = json.loads(next((tmp_path / "results").rglob("run_info.json")).read_text())
    assert info["status"] == ("timeout" if stop == "orchestration-timeout" else "cancelled")


@pytest.mark.parametrize("mode", ["dagster", "direct-reuse"])
def test_a_re_run_sends_errored_tasks_again_and_not_finished_ones(
    tmp_path: Path, fake_openai: FakeOpenAI, mode: str
) -> None:
    """The first run solves count-errors; every call of create-hello fails (HTTP 500 after the SDK's
    retries), so it ends in error and the run exits 3. The re-run sends create-hello to the model again
    from the start, where it scores; count-errors is not sent again."""
    bash_reply(fake_openai, SOLVE)
    submit_reply(fake_openai, "tool_agent")
    sweep = endpoint_sweep(tmp_path, fake_openai, "tool_agent", ["count-errors", "create-hello"])
    first = subprocess.run(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", str(sweep), "--direct"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert first.returncode == 3, first.stderr
    details = details_by_task(tmp_path / "results")
    assert details["count-errors"]["correct"] and "HTTP 500" in details["create-hello"]["error"]
    sent = len(fake_openai.requests)

    bash_reply(fake_openai, (TASKS_DIR / "create-hello" / "solution.sh").read_text())
    submit_reply(fake_openai, "tool_agent", "done")
    args = ["--direct", "--reuse"] if mode == "direct-reuse" else []
    second = subprocess.run(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", str(sweep), *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert second.returncode == 0, second.stderr[-3000:]
    resent = fake_openai.requests[sent:]
    assert len(resent) == 2
    prompts = [r.body["messages"][1]["content"] for r in resent]
    assert all("hello.txt" in p for p in prompts) and not any("app.log" in p for p in prompts)
    newest = sorted((tmp_path / "results").rglob("details/*create-hello*.json"), key=lambda p: p.stat().st_mtime)[-1]
    detail = json.loads(newest.read_text())
    assert detail["correct"] and detail["error"] is None
    # The errored attempt's log was set aside, not continued: the new one starts at turn 0.
    durable = newest.parent.parent / ".durable"
    assert sorted(p.name for p in durable.iterdir() if p.name.startswith("create-hello")) == [
        "create-hello@1",
        "create-hello@1.try1",
    ]
    log = read_activity(durable / "create-hello@1" / "activity.jsonl")
    assert [r.data.get("resumed") for r in log if r.kind == "session" and r.status == "in_flight"] == ["errored"]
    assert [r.data["turn"] for r in log if r.kind == "model_call" and r.status == "completed"] == [0, 1]


def test_a_context_overflow_compacts_and_sends_the_turn_again(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    """An HTTP 400 'context length' makes tool_agent compact older turns (whatever its own estimate) and
    send the turn once more; the conversation it sends then carries the summary, not the old turns."""
    for i in range(4):
        bash_reply(fake_openai, f"echo step-{i}", f"call_{i}")
    fake_openai.push(
        400,
        {"error": {"message": "This model's maximum context length is 8192 tokens", "type": "invalid_request_error"}},
    )
    submit_reply(fake_openai, "tool_agent")
    sweep = endpoint_sweep(tmp_path, fake_openai, "tool_agent", ["count-errors"])
    data = json.loads(json.dumps(__import__("yaml").safe_load(sweep.read_text())))
    data["harness"]["params"] = {"keep_recent_messages": 2}
    sweep.write_text(json.dumps(data))
    proc = subprocess.run(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", str(sweep), "--direct"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    attempt = details_by_task(tmp_path / "results")["count-errors"]["attempts"]["1"]
    assert attempt["run_error"] is None and attempt["final_answer"] == "5"
    retried = fake_openai.requests[-1].body["messages"]
    assert retried[2]["content"].startswith("Summary of earlier turns")
    assert not any("step-0" in json.dumps(m) for m in retried[3:])
    assert [s["type"] for s in attempt["trajectory"]].count("compaction") == 1


def test_a_large_output_is_stored_once_and_bounded(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    """An 80 KB output four times: the activity log keeps each output once, cut to what the model is
    shown, and the whole output once in a blob named by its digest."""
    command = "head -c 80000 /dev/zero | tr '\\0' x"
    for i in range(4):
        bash_reply(fake_openai, command, f"call_{i}")
    submit_reply(fake_openai, "tool_agent")
    sweep = endpoint_sweep(tmp_path, fake_openai, "tool_agent", ["count-errors"])
    proc = subprocess.run(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", str(sweep), "--direct"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    durable = next((tmp_path / "results").rglob("count-errors@1"))
    log_size = (durable / "activity.jsonl").stat().st_size
    assert log_size < 4 * 10_000 + 40_000, f"activity.jsonl is {log_size} bytes"
    blobs = list((durable / "blobs").iterdir())
    assert len(blobs) == 1 and blobs[0].read_text() == "x" * 80000
    records = [
        r
        for r in read_activity(durable / "activity.jsonl")
        if r.kind == "tool_call" and r.status == "completed" and r.data.get("command")
    ]
    assert len(records) == 4 and {r.data["output_blob"]["sha256"] for r in records} == {blobs[0].name}
    assert all("characters cut" in r.data["output"] and "observation" not in r.data for r in records)


def test_a_reply_cut_at_the_token_limit_is_not_an_answer(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    """A text reply with finish_reason 'length' (what a small model that never stops sends) ends the
    attempt as the model's failure instead of being scored as a final answer: a scored failure (0,
    counted in accuracy), not an error that would leave the denominator and run again."""
    fake_openai.reply(content="The assistant is a user who is a user of the system." * 20, finish_reason="length")
    sweep = endpoint_sweep(tmp_path, fake_openai, "tool_agent", ["count-errors"])
    proc = subprocess.run(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", str(sweep), "--direct"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    detail = details_by_task(tmp_path / "results")["count-errors"]
    attempt = detail["attempts"]["1"]
    assert attempt["final_answer"] is None and "cut at its token limit" in attempt["failure"]
    assert attempt["status"] == "failed" and detail["error"] is None and detail["score"] == 0.0
