"""Durable agent attempts: the activity log, resume after kill -9, fork onto another model, replay.

The runs are real: `agentcompass run --direct` as a subprocess, killed with SIGKILL at a chosen or
random moment, then `agentcompass resume`. Side effects of tool calls are counted in files outside the
environment, so a completed call that ran twice would show."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, run_cli, tree_snapshot, write_sweep
from fake_openai import FakeOpenAI, fake_openai_server, tool_call  # noqa: F401
from scripted_agent import SOLUTION, bash, submit, sweep_file
from waiting import wait_until

from agentcompass_dagster.plugins.benchmarks.demo import TASKS_DIR
from agentcompass_dagster.durable.activity import (
    ActivityError,
    ActivityLog,
    ActivityRecord,
    read_activity,
)
from agentcompass_dagster.durable.checkpoints import CheckpointStore


def start(sweep: Path, cwd: Path, *, dagster: bool = False) -> subprocess.Popen[str]:
    """`agentcompass run` in a process group of its own (through Dagster, its run workers are in it)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    mode = [] if dagster else ["--direct"]
    return subprocess.Popen(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", str(sweep), *mode],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def records(tmp_path: Path, task: str = "count-errors") -> list[ActivityRecord]:
    logs = sorted((tmp_path / "results").rglob(f"{task}@1/activity.jsonl"), key=lambda p: p.stat().st_mtime)
    return read_activity(logs[-1]) if logs else []


def has(tmp_path: Path, record_id: str, status: str = "in_flight") -> Callable[[], bool]:
    return lambda: any(r.id == record_id and r.status == status for r in records(tmp_path))


def kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL of the whole process group, as a crash of the machine would end it."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def run_dirs(tmp_path: Path) -> list[Path]:
    return sorted(p.parent for p in (tmp_path / "results").rglob("run_info.json"))


def resume(run_dir: Path, *extra: str) -> int:
    return run_cli("resume", run_dir, *extra)


def final_detail(tmp_path: Path, task: str = "count-errors") -> dict[str, Any]:
    newest = run_dirs(tmp_path)[-1]
    return json.loads(next((newest / "details").glob(f"*{task}*.json")).read_text())


def model_calls(tmp_path: Path) -> list[tuple[str, int]]:
    lines = (tmp_path / "model-calls.jsonl").read_text().splitlines()
    return [(c["task_id"], c["turn"]) for c in map(json.loads, lines)]


# --- the activity log ----------------------------------------------------------------------------


def test_activity_log_orders_in_flight_checkpoint_completed(tmp_path: Path) -> None:
    """R-LOG-1: every model and tool call has an in_flight record before a completed one carrying its
    seq, output and checkpoint_seq; the checkpoint named by a completed record exists on disk; the
    session is logged; the file is append-only JSON lines."""
    sweep = sweep_file(tmp_path, {"count-errors": [bash("echo hi > note.txt"), bash(SOLUTION), submit()]})
    assert run_cli("run", sweep, "--direct") == 0
    log = records(tmp_path)
    store = CheckpointStore(next((tmp_path / "results").rglob("count-errors@1")) / "checkpoints")
    for record in log:
        if record.status == "completed" and record.kind in ("model_call", "tool_call"):
            first = next(i for i, r in enumerate(log) if r.id == record.id)
            assert log[first].status == "in_flight" and first < log.index(record)
            assert record.seq is not None
    tools = [r for r in log if r.kind == "tool_call" and r.status == "completed" and r.data.get("command")]
    assert [r.data["output"] for r in tools][:1] == [""] and tools[1].data["exit_code"] == 0
    for record in tools:
        assert record.checkpoint_seq == record.seq and record.checkpoint_seq in store.seqs()
    assert store.manifest(tools[0].checkpoint_seq).roots["work"]["note.txt"].size == 3
    assert log[0].kind == "session" and log[-1].kind == "session" and log[-1].status == "completed"


def test_appends_wait_for_the_disk_only_for_a_new_log_and_sync_makes_the_rest_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-LOG-1: every record is written before the append returns (a killed process loses none); only a
    new log is fsynced then, and ``sync`` fsyncs what was appended since (once: nothing new, no fsync)."""
    path = tmp_path / "activity.jsonl"
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if Path(os.readlink(f"/proc/self/fd/{fd}")) == path:
            synced.append(len(read_activity(path)))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    log = ActivityLog(path)
    for kind, key, status in [
        ("session", "session", "in_flight"),
        ("model_call", "model-0", "in_flight"),
        ("model_call", "model-0", "completed"),
        ("tool_call", "0.0", "in_flight"),
    ]:
        log.append(ActivityRecord(id=key, kind=kind, status=status))  # type: ignore[arg-type]
    assert synced == [1]
    log.sync()
    log.sync()
    assert synced == [1, 4]
    assert [r.status for r in read_activity(path)] == ["in_flight", "in_flight", "completed", "in_flight"]


def test_torn_last_line_is_dropped_and_a_corrupt_earlier_line_is_an_error(tmp_path: Path) -> None:
    """R-LOG-1: a crash mid-append leaves a torn last line, which reading drops and the next append cuts;
    a damaged line before the end is reported, never skipped."""
    path = tmp_path / "activity.jsonl"
    log = ActivityLog(path)
    log.append(ActivityRecord(id="model-0", kind="model_call", status="in_flight"))
    with path.open("ab") as handle:
        handle.write(b'{"id": "model-0", "kind": "model_c')
    assert [r.id for r in read_activity(path)] == ["model-0"]
    ActivityLog(path).append(ActivityRecord(id="model-0", kind="model_call", status="completed"))
    assert [(r.id, r.status, r.seq) for r in read_activity(path)] == [
        ("model-0", "in_flight", None),
        ("model-0", "completed", 1),
    ]
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0][:10] + b"\n" + lines[1])
    with pytest.raises(ActivityError, match="line 1 is corrupt"):
        read_activity(path)


# --- resume --------------------------------------------------------------------------------------


def test_kill_during_a_tool_call_resume_attaches_and_collects_the_finished_command(tmp_path: Path) -> None:
    """R-RESUME-1 (attached): the parent dies while a command runs; the command finishes in the still
    existing environment; resume waits for it, records its exit code and output and continues — the
    command ran once, earlier calls were not repeated."""
    side, gate = tmp_path / "side.log", tmp_path / "gate"
    # The command cannot finish before the kill, however loaded the machine: it waits for the gate.
    waits = f"while [ ! -e {gate} ]; do sleep 0.05; done"
    turns = {
        "count-errors": [
            bash(f"echo one >> {side}"),
            bash(f"echo two >> {side}; {waits}; echo late-output"),
            bash(SOLUTION),
            submit(),
        ]
    }
    proc = start(sweep_file(tmp_path, turns), tmp_path)
    wait_until(lambda: side.exists() and "two" in side.read_text(), "command two to start", proc=proc, interval=0.01)
    kill(proc)
    gate.touch()
    assert resume(run_dirs(tmp_path)[0]) == 0
    detail = final_detail(tmp_path)
    assert detail["correct"]
    assert side.read_text().splitlines() == ["one", "two"]
    recovered = next(s for s in detail["attempts"]["1"]["trajectory"] if s.get("recovered"))
    assert recovered["output"].strip() == "late-output" and recovered["exit_code"] == 0
    assert detail["attempts"]["1"]["artifacts"]["agent"]["resumed"] == "attached"
    assert model_calls(tmp_path).count(("count-errors", 0)) == 1


def killed_while_a_command_runs(tmp_path: Path) -> tuple[Path, Path]:
    """A run of count-errors killed while its first command runs in a local environment, where it goes on
    until the test opens the gate (however long a resume takes to start); the command's side log and gate."""
    side, gate = tmp_path / "side.log", tmp_path / "gate"
    command = f"echo start >> {side}; while [ ! -e {gate} ]; do sleep 0.05; done; echo end >> {side}"
    turns = {"count-errors": [bash(command), bash(SOLUTION), submit()]}
    proc = start(sweep_file(tmp_path, turns, resume_wait_s=0.3), tmp_path)
    wait_until(lambda: side.exists() and "start" in side.read_text(), "the command to start", proc=proc, interval=0.01)
    kill(proc)
    return side, gate


def test_a_still_busy_environment_stops_the_resume_and_keeps_the_attempt_unfinished(tmp_path: Path) -> None:
    """R-RESUME-1 (busy): a command still running in the old environment past resume_wait_s stops the
    resume without starting a second copy; once it has ended, a later resume attaches."""
    side, gate = killed_while_a_command_runs(tmp_path)
    first = run_dirs(tmp_path)[0]
    # The resume completed with the task in error (busy): exit 3.
    assert resume(first) == 3
    busy = final_detail(tmp_path)
    assert "still runs in the old environment" in busy["error"]
    assert records(tmp_path)[-1].kind != "session" or records(tmp_path)[-1].status != "completed"
    gate.touch()
    wait_until(lambda: "end" in side.read_text(), "the old command to end", 10, interval=0.01)
    assert resume(run_dirs(tmp_path)[-1]) == 0
    detail = final_detail(tmp_path)
    assert detail["correct"] and side.read_text().splitlines() == ["start", "end"]


def test_a_process_with_another_temp_dir_leaves_a_resumable_sessions_command_running(tmp_path: Path) -> None:
    """R-RESUME-1 (busy): a run whose TMPDIR is another directory sweeps the cgroups of dead local sessions
    too; it removed those of sessions it could not see, killing the command a resume of a killed run
    waits for (CI: the resume found it gone and ran on). A session not in its directory keeps its
    running processes: the resume still finds the command busy, and it finishes once let go."""
    side, gate = killed_while_a_command_runs(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "tmp").mkdir(parents=True)
    other = write_sweep(
        elsewhere,
        name="other",
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 1}}],
        harness={"id": "scripted", "params": {"default": {"command": "true"}}},
    )
    done = subprocess.run(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", str(other), "--direct"],
        cwd=elsewhere,
        env={**os.environ, "TMPDIR": str(elsewhere / "tmp")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert resume(run_dirs(tmp_path)[0]) == 3
    assert "still runs in the old environment" in final_detail(tmp_path)["error"]
    gate.touch()
    wait_until(lambda: "end" in side.read_text(), "the old command to end", 10, interval=0.01)


def test_a_labelled_command_starts_only_once_the_host_has_recorded_its_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-RESUME-1 (busy): a command the durable session labels does nothing before the host has recorded
    its process, so a crash between spawn and record cannot leave a command running that a resume takes
    for ended (seen in CI: the resume ran the task on beside it)."""
    import asyncio

    from agentcompass_dagster.contracts.declarations import EnvironmentConfig
    from agentcompass_dagster.plugins.environments.hostdir import HostDirSession
    from agentcompass_dagster.plugins.environments.local import LocalEnvironment

    session = LocalEnvironment(EnvironmentConfig(id="local")).new_session()
    marker, record = tmp_path / "started", session.root / "scratch/processes/call-1"
    record_process = HostDirSession._record

    def late_record(self: HostDirSession, label: str, worker: Any) -> None:
        # Held until the command has begun, or for a second: an ungated command finds no record.
        deadline = time.monotonic() + 1.0
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        record_process(self, label, worker)

    monkeypatch.setattr(HostDirSession, "_record", late_record)

    async def scenario() -> Any:
        try:
            return await session.exec(f"touch {marker}; cat {record}", label="call-1")
        finally:
            await session.close()

    result = asyncio.run(scenario())
    assert result.exit_code == 0, result.stderr
    assert "@" in result.stdout


def endpoint_model(fake: FakeOpenAI) -> list[dict[str, Any]]:
    return [
        {
            "id": "endpoint",
            "provider": "openai_compat",
            "model": "served",
            "base_url": fake.base_url,
            "params": {"max_retries": 0, "timeout_s": 600},
        }
    ]


def reply_bash(fake: FakeOpenAI, command: str, call_id: str, **fields: Any) -> None:
    fake.reply(
        tool_calls=[tool_call("bash", json.dumps({"command": command}), call_id)],
        usage={"prompt_tokens": 100, "completion_tokens": 10},
        **fields,
    )


@pytest.mark.parametrize("harness", ["tool_agent", "miniswe"])
def test_kill_during_a_model_call_marks_it_aborted_and_sends_it_again(
    tmp_path: Path, fake_openai: FakeOpenAI, harness: str
) -> None:
    """R-RESUME-2: an interrupted model call is recorded as aborted and sent again, with the same
    conversation; completed steps before it are never executed again (the loop continues from the log;
    mini-swe-agent's loop is driven over the log step by step)."""
    side = tmp_path / "side.log"
    reply_bash(fake_openai, f"echo one >> {side}", "call_a")
    reply_bash(fake_openai, f"echo two >> {side}", "call_b")
    fake_openai.reply(content="never sent", delay_s=3600)
    proc = start(
        sweep_file(tmp_path, {"count-errors": []}, models=endpoint_model(fake_openai), harness=harness), tmp_path
    )
    # The kill then lands while the model has the call, whatever the machine's load.
    wait_until(lambda: len(fake_openai.requests) >= 3, "request 3 at the endpoint", proc=proc, interval=0.01)
    kill(proc)
    reply_bash(fake_openai, SOLUTION, "call_c")
    if harness == "miniswe":
        reply_bash(fake_openai, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; cat answer.txt", "call_d")
    else:
        fake_openai.reply(
            tool_calls=[tool_call("submit", json.dumps({"answer": "done"}), "call_d")],
            usage={"prompt_tokens": 100, "completion_tokens": 10},
        )
    assert resume(run_dirs(tmp_path)[0]) == 0
    detail = final_detail(tmp_path)
    assert detail["correct"] and side.read_text().splitlines() == ["one", "two"]
    requests = [r.body["messages"] for r in fake_openai.requests]
    assert len(requests) == 5 and requests[3] == requests[2], "the re-sent call differs from the interrupted one"
    log = records(tmp_path)
    aborted = [r for r in log if r.status == "aborted"]
    assert [(r.kind, r.id) for r in aborted] == [("model_call", "model-2")]
    assert [r.data["turn"] for r in log if r.kind == "model_call" and r.status == "completed"] == [0, 1, 2, 3]
    # Usage counts completed turns only: the aborted call returned nothing to pay for.
    assert detail["attempts"]["1"]["usage"]["input_tokens"] == 400


def test_a_killed_miniswe_attempt_resumes_from_its_old_environment_after_a_command(tmp_path: Path) -> None:
    """A miniswe attempt killed while a command runs: the resume waits for it in the old environment,
    collects its result (it ran once) and continues mini's loop from the log."""
    side, gate = tmp_path / "side.log", tmp_path / "gate"
    command = f"echo start >> {side}; while [ ! -e {gate} ]; do sleep 0.05; done; echo end >> {side}"
    turns = {
        "count-errors": [
            bash(command),
            bash(SOLUTION),
            bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; cat answer.txt"),
        ]
    }
    proc = start(sweep_file(tmp_path, turns, harness="miniswe"), tmp_path)
    wait_until(lambda: side.exists() and "start" in side.read_text(), "the command to start", proc=proc, interval=0.01)
    kill(proc)
    gate.touch()
    assert resume(run_dirs(tmp_path)[0]) == 0
    detail = final_detail(tmp_path)
    assert detail["correct"] and side.read_text().splitlines() == ["start", "end"]
    assert model_calls(tmp_path).count(("count-errors", 0)) == 1
    recovered = [r for r in records(tmp_path) if r.kind == "tool_call" and r.data.get("recovered")]
    assert [r.id for r in recovered] == ["0.0"]


def test_a_resumed_attempts_duration_counts_the_killed_process_too(tmp_path: Path) -> None:
    """R-RESUME-3: the duration of a miniswe attempt killed after a command of at least a second and
    resumed is the time of both processes: no less than its activity log's elapsed time (which sums
    them), not the resuming process's alone (it recorded about a third of a second); it started when the
    first process started it."""
    gate = tmp_path / "gate"
    turns = {
        "count-errors": [
            bash("sleep 1"),
            bash(f"while [ ! -e {gate} ]; do sleep 0.05; done"),
            bash(SOLUTION),
            bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; cat answer.txt"),
        ]
    }
    proc = start(sweep_file(tmp_path, turns, harness="miniswe"), tmp_path)
    wait_until(
        lambda: any(r.kind == "tool_call" and r.status == "completed" for r in records(tmp_path)),
        "the one-second command to complete",
        proc=proc,
        interval=0.01,
    )
    kill(proc)
    gate.touch()
    assert resume(run_dirs(tmp_path)[0]) == 0
    attempt = final_detail(tmp_path)["attempts"]["1"]
    elapsed = records(tmp_path)[-1].elapsed_s
    assert 1.0 <= elapsed <= attempt["duration_s"], (elapsed, attempt["duration_s"])
    first = next(r for r in records(tmp_path)).at
    assert abs(datetime.fromisoformat(attempt["started_at"]).timestamp() - first) < 0.01


@pytest.mark.parametrize("replay_safe", [False, True], ids=["reported", "rerun"])
def test_lost_environment_is_rebuilt_from_the_checkpoint(tmp_path: Path, replay_safe: bool) -> None:
    """R-RESUME-1 (rebuild) and R-RESUME-2: with the environment gone, resume sets the task up again and
    restores the latest checkpoint; the interrupted command is re-run only when declared replay-safe,
    otherwise the model is told it was interrupted."""
    side, gate = tmp_path / "side.log", tmp_path / "gate"
    # Held until after the kill: it cannot finish first on a loaded machine.
    turns = {
        "count-errors": [
            bash("echo progress > progress.txt"),
            bash(f"echo slow >> {side}; while [ ! -e {gate} ]; do sleep 0.05; done"),
            bash("cat progress.txt"),
            bash(SOLUTION),
            submit(),
        ]
    }
    params = {"replay_safe_commands": ["^echo slow"]} if replay_safe else {}
    proc = start(sweep_file(tmp_path, turns, **params), tmp_path)
    wait_until(
        lambda: side.exists() and side.read_text() == "slow\n", "the slow command to start", proc=proc, interval=0.01
    )
    handle = next(r.data["handle"] for r in records(tmp_path) if r.kind == "session")
    kill(proc)
    shutil.rmtree(handle["root"])
    gate.touch()
    assert resume(run_dirs(tmp_path)[0]) == 0
    detail = final_detail(tmp_path)
    steps = detail["attempts"]["1"]["trajectory"]
    assert detail["correct"] and detail["attempts"]["1"]["artifacts"]["agent"]["resumed"] == "rebuilt"
    cat = next(s for s in steps if s.get("command") == "cat progress.txt")
    assert cat["output"] == "progress\n", "the checkpointed file was not restored"
    statuses = [s["status"] for s in steps if (s.get("command") or "").startswith("echo slow")]
    if replay_safe:
        assert statuses == ["aborted", "completed"] and side.read_text().splitlines() == ["slow", "slow"]
    else:
        interrupted = next(s for s in steps if s.get("status") == "interrupted")
        assert statuses == ["interrupted"] and "[interrupted" in interrupted["observation"]
        assert side.read_text().splitlines() == ["slow"]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_a_killed_sandbox_attempt_resumes_in_its_old_sandbox(tmp_path: Path) -> None:
    """R-RESUME-1 (attached) in the bubblewrap sandbox: its commands die with the parent, but the next
    run's sweep of dead sandboxes keeps one a resume can attach to; the resume takes over its files
    (at the last checkpoint), reports the killed command as interrupted, and leaves no sandbox behind."""
    turns = {
        "count-errors": [
            bash("echo progress > progress.txt"),
            bash("sleep 30"),
            bash("cat progress.txt"),
            bash(SOLUTION),
            submit(),
        ]
    }
    # The plugin's defaults, not resources/environments/sandbox.yaml (issue #30: names now find it), whose
    # per-attempt disk image a resume rebuilds rather than attaches to.
    proc = start(sweep_file(tmp_path, turns, environment={"id": "sandbox"}), tmp_path)
    wait_until(has(tmp_path, "1.0"), "tool call 1.0 to be in flight", proc=proc, interval=0.01)
    handle = next(r.data["handle"] for r in records(tmp_path) if r.kind == "session")
    kill(proc)
    assert resume(run_dirs(tmp_path)[0]) == 0
    detail = final_detail(tmp_path)
    steps = detail["attempts"]["1"]["trajectory"]
    assert detail["correct"] and detail["attempts"]["1"]["artifacts"]["agent"]["resumed"] == "attached"
    assert next(s for s in steps if s.get("command") == "cat progress.txt")["output"] == "progress\n"
    assert [s["status"] for s in steps if s.get("command") == "sleep 30"] == ["interrupted"]
    assert not Path(handle["root"]).exists()


def test_kill_while_scoring_keeps_the_finished_agent_run(tmp_path: Path) -> None:
    """R-RESUME-1: when the process dies after the agent finished (here while the check runs), resume
    takes the recorded outcome and only scores it: no model call and no command runs again."""
    side = tmp_path / "side.log"
    tasks_dir = tmp_path / "tasks"
    shutil.copytree(TASKS_DIR / "count-errors", tasks_dir / "count-errors")
    check = tasks_dir / "count-errors" / "check.sh"
    check.write_text(check.read_text().replace("set -u", f"set -u\ntest -f {tmp_path}/slow-check && sleep 2"))
    (tmp_path / "slow-check").touch()
    sweep = sweep_file(tmp_path, {"count-errors": [bash(f"echo once >> {side}"), bash(SOLUTION), submit()]})
    data = yaml.safe_load(sweep.read_text())
    data["benchmarks"] = [{"id": "demo", "params": {"tasks_dir": str(tasks_dir)}}]
    sweep.write_text(yaml.safe_dump(data))
    proc = start(sweep, tmp_path)
    wait_until(has(tmp_path, "session", "completed"), "the agent session to complete", proc=proc, interval=0.01)
    kill(proc)
    (tmp_path / "slow-check").unlink()
    assert not any(run_dirs(tmp_path)[0].glob("details/*.json"))
    assert resume(run_dirs(tmp_path)[0]) == 0
    detail = final_detail(tmp_path)
    assert detail["correct"] and detail["attempts"]["1"]["artifacts"]["agent"]["resumed"] == "finished"
    assert side.read_text() == "once\n" and len(model_calls(tmp_path)) == 3


def test_limits_count_what_was_spent_before_the_crash(tmp_path: Path) -> None:
    """R-RESUME-3: turns, tokens, cost and time spent before the crash count against the limits of the
    resumed attempt; finished tasks of the resumed sweep keep their results, and the run says it
    reused one task and carried one unfinished attempt over from the run it resumed (and when that
    started)."""
    gate = tmp_path / "gate"
    turns = {
        "count-errors": [submit()],
        "create-hello": [bash("true"), {**bash("true"), "gate": str(gate)}, bash("true"), bash("true"), submit()],
    }
    proc = start(sweep_file(tmp_path, turns, max_turns=4, max_cost_usd=0.025), tmp_path)
    wait_until(
        lambda: (tmp_path / "model-calls.jsonl").exists() and ("create-hello", 1) in model_calls(tmp_path),
        "model call 1 of create-hello",
        proc=proc,
        interval=0.01,
    )
    pre_crash = records(tmp_path, "create-hello")[-1].elapsed_s
    kill(proc)
    gate.touch()
    first = run_dirs(tmp_path)[0]
    assert [p.name for p in (first / "details").glob("*.json")] == ["count-errors_qa.json"]
    assert resume(first) == 0
    detail = final_detail(tmp_path, "create-hello")
    # Two turns before the crash at $0.01 each plus one after pass max_cost_usd=0.025 before max_turns.
    limit = detail["attempts"]["1"]["limit"]
    assert (limit["limit"], limit["allowance"], limit["used"]) == ("max_cost_usd", 0.025, pytest.approx(0.03))
    log = records(tmp_path, "create-hello")
    resumed_session = [r for r in log if r.kind == "session" and r.status == "in_flight"][-1]
    assert resumed_session.elapsed_s >= pre_crash
    info = json.loads((run_dirs(tmp_path)[-1] / "run_info.json").read_text())
    assert info["reused_from"]["task_ids"] == ["count-errors"]
    # The unfinished attempt's log was carried over too (it said tasks: 0 and nothing of the attempt).
    assert info["reused_from"]["attempts"] == 1
    assert info["reused_from"]["started_at"] == json.loads((first / "params.json").read_text())["started_at"]


def test_random_kill_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    """Acceptance: kill -9 of a running sweep at a random moment, then resume: the final details equal
    an uninterrupted run's with the same scripted model, no completed tool call ran twice, and the
    budget counters include the pre-crash spend."""
    rng = random.Random(os.getpid())

    def script(side: Path) -> dict[str, list[dict[str, Any]]]:
        turns = {}
        for task in ("count-errors", "create-hello", "sort-unique"):
            solution = (TASKS_DIR / task / "solution.sh").read_text()
            turns[task] = [
                bash(f"echo {task}-{i} >> {side}.{task}-{i}; sleep 0.05; echo step {i}", sleep=0.03) for i in range(4)
            ] + [bash(solution), submit()]
        return turns

    def normalized(root: Path) -> dict[str, Any]:
        out = {}
        for path in root.rglob("details/*.json"):
            detail = json.loads(path.read_text())
            attempt = detail["attempts"]["1"]
            steps = [
                (s["type"], s.get("command"), s.get("exit_code"), s.get("output"), s.get("answer"))
                for s in attempt["trajectory"]
                if s.get("status", "completed") == "completed"
            ]
            out[detail["task_id"]] = (detail["correct"], attempt["final_answer"], steps, attempt["usage"])
        return out

    # The demo solutions are idempotent and declared so: one the kill interrupts is run again, as a real
    # agent told "interrupted" would, instead of a scripted agent submitting a half-done task.
    safe = ["^echo ", "^#!/usr/bin/env bash"]
    side = tmp_path / "side"
    baseline_dir = tmp_path / "baseline"
    baseline_dir.mkdir()
    assert run_cli("run", sweep_file(baseline_dir, script(side), replay_safe_commands=safe), "--direct") == 0
    for path in tmp_path.glob("side.*"):
        path.unlink()
    crash_dir = tmp_path / "crash"
    crash_dir.mkdir()
    proc = start(sweep_file(crash_dir, script(side), replay_safe_commands=safe), crash_dir)
    wait_until(
        lambda: any((crash_dir / "results").rglob("activity.jsonl")), "an activity log", proc=proc, interval=0.01
    )
    time.sleep(rng.uniform(0.0, 1.5))
    kill(proc)
    completed_before = {
        r.data["command"].split(" >> ")[0].split()[1]
        for path in (crash_dir / "results").rglob("activity.jsonl")
        for r in read_activity(path)
        if r.kind == "tool_call" and r.status == "completed" and r.data.get("command", "").startswith("echo ")
    }
    newest = run_dirs(crash_dir)[-1]
    if any(newest.glob("details/*.json")) and len(list(newest.glob("details/*.json"))) == 3:
        pytest.skip("the random kill came after the sweep had finished")
    assert resume(newest) == 0
    crashed = normalized(run_dirs(crash_dir)[-1])
    assert crashed.keys() == normalized(baseline_dir / "results").keys()
    for task, (correct, answer, steps, usage) in normalized(baseline_dir / "results").items():
        assert crashed[task][:3] == (correct, answer, steps), task
        assert crashed[task][3]["input_tokens"] == usage["input_tokens"]
    for marker in completed_before:
        assert Path(f"{side}.{marker}").read_text().splitlines() == [marker], f"{marker} ran twice"


def test_re_running_a_killed_dagster_launch_resumes_its_unfinished_attempt(tmp_path: Path) -> None:
    """R-RESUME-3 through Dagster: after the process running a Dagster launch is killed mid-attempt,
    launching the sweep again materialises only the missing partitions, and the unfinished attempt
    resumes from its activity log instead of starting over."""
    import dagster as dg

    from agentcompass_dagster.defs.instance import ensure_dagster_home

    side, gate = tmp_path / "side.log", tmp_path / "gate"
    waits = f"while [ ! -e {gate} ]; do sleep 0.05; done"
    turns = {
        "count-errors": [bash(f"echo one >> {side}"), bash(f"echo two >> {side}; {waits}"), bash(SOLUTION), submit()],
        "create-hello": [submit()],
    }
    sweep = sweep_file(tmp_path, turns)
    proc = start(sweep, tmp_path, dagster=True)
    wait_until(lambda: side.exists() and "two" in side.read_text(), "command two to start", proc=proc, interval=0.01)
    kill(proc)
    gate.touch()
    assert run_cli("run", sweep) == 0
    detail = final_detail(tmp_path)
    assert detail["correct"] and detail["attempts"]["1"]["artifacts"]["agent"]["resumed"] == "attached"
    assert side.read_text().splitlines() == ["one", "two"]
    assert model_calls(tmp_path).count(("count-errors", 0)) == 1
    ensure_dagster_home(None)
    with dg.DagsterInstance.get() as instance:
        done = instance.get_materialized_partitions(dg.AssetKey(["sweep", "demo", "attempts"]))
    assert done == {"solver-a|count-errors", "solver-a|create-hello"}


def test_resume_after_compaction_sends_the_summary_not_the_summarised_turns(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """R-LOG-2 across a crash, against a real endpoint: the resumed attempt rebuilds its context from the
    latest compaction summary plus later messages; the turns the summary replaced are never sent again."""
    steps = [f"echo step-{i}; printf '%0300d' 0" for i in range(4)] + ["echo step-4; sleep 1", SOLUTION]
    for i, command in enumerate(steps):
        fake_openai.reply(tool_calls=[tool_call("bash", json.dumps({"command": command}), f"call_{i}")])
    fake_openai.reply(tool_calls=[tool_call("submit", json.dumps({"answer": "done"}), "call_end")])
    model = {
        "id": "served",
        "provider": "openai_compat",
        "model": "m",
        "base_url": fake_openai.base_url,
        "params": {"max_retries": 0},
    }
    sweep = sweep_file(tmp_path, {"count-errors": []}, models=[model], compact_at_tokens=300, keep_recent_messages=2)
    proc = start(sweep, tmp_path)
    wait_until(has(tmp_path, "4.0"), "tool call 4.0 to be in flight", proc=proc, interval=0.01)
    kill(proc)
    assert any(r.kind == "compaction" for r in records(tmp_path))
    assert resume(run_dirs(tmp_path)[0]) == 0
    assert final_detail(tmp_path)["correct"]
    assert len(fake_openai.requests) == len(steps) + 1, "a completed model call was sent again"
    last = fake_openai.requests[-1].body["messages"]
    summary = last[2]["content"]
    assert last[2]["role"] == "user" and summary.startswith("Summary of")
    assert all(f"echo step-{i}" in summary for i in range(5))
    assert [m["role"] for m in last[3:]] == ["assistant", "tool"], "a summarised turn was sent again"
    assert "awk" in json.dumps(last[3]) and "step-" not in json.dumps(last[3:])


# --- fork ----------------------------------------------------------------------------------------


def test_fork_continues_from_the_checkpoint_with_another_model(tmp_path: Path) -> None:
    """R-FORK-1: the fork gets a fresh environment with the checkpoint's files and the conversation up to
    the cut, continues with the new model, records lineage and the shared prefix's usage apart, and is
    left out of from-scratch statistics; a fork that also changes the harness is refused."""
    from agentcompass_dagster.reporting.results import load_task_results

    a_turns = {"count-errors": [bash("echo draft > draft.txt"), bash("echo wrong > answer.txt"), submit()]}
    # Turn 0 is the shared prefix; the fork asks solver-b from turn 1 on.
    b_turns = {
        "count-errors": [submit("never asked"), bash("cat draft.txt && " + SOLUTION.strip().splitlines()[-1]), submit()]
    }
    models = [
        {"id": "solver-a", "provider": "scripted", "params": {"turns": a_turns}},
        {"id": "solver-b", "provider": "scripted", "params": {"turns": b_turns}},
    ]
    sweep = sweep_file(tmp_path, a_turns, models=models[:1])
    assert run_cli("run", sweep, "--direct") == 0
    parent = run_dirs(tmp_path)[0]
    assert not final_detail(tmp_path)["correct"]
    cut = next(r.seq for r in records(tmp_path) if r.kind == "tool_call" and r.status == "completed")
    both = sweep_file(tmp_path, a_turns, name="both", models=models)
    before = tree_snapshot(parent)
    assert (
        run_cli("fork", parent, "--task", "count-errors", "--checkpoint", cut, "--model", "solver-b", "--sweep", both)
        == 0
    )
    assert tree_snapshot(parent) == before, "the fork changed its parent run"
    fork_dir = next(p for p in run_dirs(tmp_path) if ".forks" in str(p))
    detail = json.loads(next((fork_dir / "details").glob("*.json")).read_text())
    attempt = detail["attempts"]["1"]
    assert detail["correct"]
    draft = next(s for s in attempt["trajectory"] if (s.get("command") or "").startswith("cat draft.txt"))
    assert draft["output"].startswith("draft\n"), "the fork did not get the checkpoint's files"
    assert [s.get("inherited") for s in attempt["trajectory"] if s["type"] == "model_call"] == [True, None, None]
    assert attempt["meta"]["lineage"]["parent_run_id"] == parent.name
    assert attempt["meta"]["lineage"]["checkpoint_seq"] == cut
    assert attempt["artifacts"]["agent"]["shared_prefix_usage"]["input_tokens"] == 100
    assert attempt["usage"]["input_tokens"] == 200
    assert (fork_dir / "summary.md").read_text().startswith(f"# fork of run {parent.name}")
    assert set(load_task_results(tmp_path / "results")["run_id"]) == {parent.name}
    assert fork_dir.name in set(load_task_results(tmp_path / "results", include_forks=True)["run_id"])

    other = yaml.safe_load(both.read_text())
    other["harness"] = {"id": "tool_agent", "params": {"max_turns": 5}}
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(other))
    assert (
        run_cli(
            "fork", parent, "--task", "count-errors", "--checkpoint", cut, "--model", "solver-b", "--sweep", changed
        )
        == 2
    )


def test_a_command_that_changes_no_file_names_the_last_checkpoint_and_a_fork_starts_there(tmp_path: Path) -> None:
    """R-CKPT-1, R-FORK-1: a command that changed no file writes no manifest and leaves the environment's
    cursor alone; its completed record names the checkpoint the files are at, and a fork from it gets them."""
    a_turns = {"count-errors": [bash("echo draft > draft.txt"), bash("ls"), bash("echo wrong > answer.txt"), submit()]}
    b_turns = {
        "count-errors": [
            submit("never asked"),
            submit("never asked"),
            bash("cat draft.txt && " + SOLUTION.strip().splitlines()[-1]),
            submit(),
        ]
    }
    models = [
        {"id": "solver-a", "provider": "scripted", "params": {"turns": a_turns}},
        {"id": "solver-b", "provider": "scripted", "params": {"turns": b_turns}},
    ]
    sweep = sweep_file(tmp_path, a_turns, models=models[:1])
    assert run_cli("run", sweep, "--direct") == 0
    parent = run_dirs(tmp_path)[0]
    tools = [
        r for r in records(tmp_path) if r.kind == "tool_call" and r.status == "completed" and r.data.get("command")
    ]
    assert [r.checkpoint_seq == r.seq for r in tools] == [True, False, True]
    assert tools[1].checkpoint_seq == tools[0].seq
    store = CheckpointStore(next((tmp_path / "results").rglob("count-errors@1")) / "checkpoints")
    assert store.seqs() == [tools[0].seq, tools[2].seq]

    both = sweep_file(tmp_path, a_turns, name="both", models=models)
    assert (
        run_cli(
            "fork",
            parent,
            "--task",
            "count-errors",
            "--checkpoint",
            tools[1].seq,
            "--model",
            "solver-b",
            "--sweep",
            both,
        )
        == 0
    )
    fork_dir = next(p for p in run_dirs(tmp_path) if ".forks" in str(p))
    detail = json.loads(next((fork_dir / "details").glob("*.json")).read_text())
    draft = next(
        s for s in detail["attempts"]["1"]["trajectory"] if (s.get("command") or "").startswith("cat draft.txt")
    )
    assert draft["output"].startswith("draft\n") and detail["correct"]


# --- replay --------------------------------------------------------------------------------------


def test_replay_matches_an_unchanged_task_and_stops_at_the_first_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R-REPLAY-1: the recorded terminal actions re-run in a clean environment; unchanged, every step and
    the artifacts match and the new state can be scored; after a file the task depends on changes, the
    replay stops at the first differing step and reports command, expected and actual output."""
    tasks_dir = tmp_path / "tasks"
    shutil.copytree(TASKS_DIR / "count-errors", tasks_dir / "count-errors")
    turns = {"count-errors": [bash("wc -l < app.log"), bash(SOLUTION), bash("cat answer.txt"), submit()]}
    sweep = sweep_file(tmp_path, turns)
    data = yaml.safe_load(sweep.read_text())
    data["benchmarks"] = [{"id": "demo", "params": {"tasks_dir": str(tasks_dir)}}]
    sweep.write_text(yaml.safe_dump(data))
    assert run_cli("run", sweep, "--direct") == 0
    run_dir = run_dirs(tmp_path)[0]
    assert run_cli("replay", run_dir, "--task", "count-errors", "--score") == 0
    report = json.loads(next((run_dir / "replays").glob("*.json")).read_text())
    assert report["status"] == "matched" and len(report["steps"]) == 3 and report["artifacts_compared"]
    assert report["evaluation"]["correct"] and report["lineage"]["parent_run_id"] == run_dir.name
    log = tasks_dir / "count-errors" / "setup" / "app.log"
    log.write_text(log.read_text() + "2024-03-02 10:00:00 ERROR one more\n")
    capsys.readouterr()
    assert run_cli("replay", run_dir, "--task", "count-errors") == 1
    out = capsys.readouterr().out
    assert "first difference at step 1: wc -l < app.log" in out
    reports = sorted((run_dir / "replays").glob("*.json"))
    diverged = json.loads(reports[-1].read_text()) if len(reports) > 1 else None
    assert diverged is not None and diverged["first_difference"]["step"] == 1
    assert len(diverged["steps"]) == 1


def test_replay_leaves_the_recorded_run_as_it_was(tmp_path: Path) -> None:
    """R-REPLAY-1: replaying (and scoring) a recorded task reads the run it replays and writes only its
    report under replays/: every other file of the run keeps its bytes, mode and mtime (the checkpoint
    clock included)."""
    turns = {"count-errors": [bash("wc -l < app.log"), bash(SOLUTION), submit()]}
    assert run_cli("run", sweep_file(tmp_path, turns), "--direct") == 0
    run_dir = run_dirs(tmp_path)[0]

    def files() -> dict[str, tuple[bytes, int, int]]:
        return {
            str(path.relative_to(run_dir)): (path.read_bytes(), path.lstat().st_mode, path.lstat().st_mtime_ns)
            for path in sorted(run_dir.rglob("*"))
            if path.is_file() and path.relative_to(run_dir).parts[0] != "replays"
        }

    before = files()
    assert any(name.endswith("checkpoints/clock") for name in before), sorted(before)
    assert run_cli("replay", run_dir, "--task", "count-errors", "--score") == 0
    assert list((run_dir / "replays").glob("*.json"))
    after = files()
    assert after.keys() == before.keys()
    assert [name for name in before if before[name] != after[name]] == []


def test_user_mistakes_get_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """R-RESUME-1 needs an unfinished attempt; fork needs a forkable checkpoint; replay a recorded task:
    each mistake is one line naming the argument and value, exit code 2, and nothing is written."""
    sweep = sweep_file(tmp_path, {"count-errors": [bash("echo hi"), submit()]})
    assert run_cli("run", sweep, "--direct") == 0
    run_dir = run_dirs(tmp_path)[0]
    capsys.readouterr()
    cases = [
        (("resume", run_dir), "nothing to resume, every task has finished"),
        (("resume", tmp_path / "nowhere"), "does not exist"),
        (("resume", run_dir, "--task", "no-such-task"), "--task='no-such-task': not a task of"),
        (
            ("fork", run_dir, "--task", "count-errors", "--checkpoint", "99", "--model", "solver-a", "--sweep", sweep),
            "--model='solver-a': the parent ran with this same model",
        ),
        (("replay", run_dir, "--task", "count-errors", "--attempt", "3"), "--attempt=3: task 'count-errors'"),
    ]
    for args, message in cases:
        before = sorted(str(p) for p in tmp_path.rglob("*"))
        assert run_cli(*args) == 2, args
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_a_finished_but_unreaped_command_is_not_busy() -> None:
    """R-RESUME-1: a command that ended but whose zombie nobody has reaped yet (PID 1 reaps orphans late,
    or never in some containers) counts as finished, so resume does not wait for it until its deadline."""
    from agentcompass_dagster.runtime.store.processes import process_alive

    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        wait_until(
            lambda: Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z",
            "the child to be a zombie",
            10,
            interval=0.01,
        )
        assert not process_alive(pid) and process_alive(os.getpid())
    finally:
        os.waitpid(pid, 0)


def test_replay_compares_a_large_output_whole(tmp_path: Path) -> None:
    """R-REPLAY-1: an output longer than the model was shown is kept whole in a blob; replay compares the
    replayed output with all of it, not with the cut record."""
    turns = {"count-errors": [bash("head -c 30000 /dev/zero | tr '\\0' x; echo end"), submit()]}
    assert run_cli("run", sweep_file(tmp_path, turns), "--direct") == 0
    run_dir = run_dirs(tmp_path)[0]
    assert run_cli("replay", run_dir, "--task", "count-errors") == 0
    report = json.loads(next((run_dir / "replays").glob("*.json")).read_text())
    assert report["status"] == "matched" and len(report["steps"][0]["recorded_output"]) == 30004
