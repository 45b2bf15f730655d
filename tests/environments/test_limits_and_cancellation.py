"""R-LIMIT-1 (provider capacity and open rate) and R-CLEAN-2 (timeout and Ctrl-C clean up and keep what
finished).

The limit tests run in-process with a recording `local` environment registered under a unique provider
id (capacity and open rate are process-global, keyed by environment / provider id), whose opens and
closes are timestamped. The cancellation tests run the real CLI in a subprocess with its own TMPDIR and
interrupt it with SIGINT, then look at the run directory, the temp directory and /proc.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import weakref
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from conftest import max_open_at_once, processes_with, write_sweep
from lifecycle import NumberedSession
from waiting import wait_until

from agentcompass_dagster.declarations import registry
from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.contracts.environment import EnvironmentSession
from agentcompass_dagster.plugins.environments.local import LocalEnvironment
from agentcompass_dagster.runtime.execution.interrupts import Interrupts
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate
from agentcompass_dagster.contracts.records import ExecutionPlan, TaskSpec
from agentcompass_dagster.runtime.store.outcomes import TaskDetail

Event = tuple[float, str, int]  # (time.monotonic(), "open" | "close", session number)


@pytest.fixture
def private_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh TMPDIR for the environments opened in this process (the local environment's temp dirs go
    there), so leftovers can be counted and none reach the real /tmp."""
    path = tmp_path / "tmpdir"
    path.mkdir()
    monkeypatch.setenv("TMPDIR", str(path))
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    return path


# A recording environment


class RecordingSession(NumberedSession):
    """Records the moment its close has finished."""

    def __init__(self, inner: EnvironmentSession, events: list[Event], number: int) -> None:
        super().__init__(inner, number)
        self.events = events
        self._closed = False

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self.inner.close()
        self.events.append((time.monotonic(), "close", self.number))


def recording_environment(prefix: str) -> tuple[str, list[Event]]:
    """A LocalEnvironment subclass registered under a fresh provider id (the test's ``plugin_registries``
    removes it afterwards); returns the id and its events.

    ``open`` records the moment it starts doing work, i.e. after the open-rate wait that
    Environment.__init_subclass__ wraps around it. It builds the session itself rather than calling
    ``super().open()``, which is itself rate limited."""
    provider_id = f"{prefix}-{uuid.uuid4().hex[:10]}"
    events: list[Event] = []

    class RecordingLocal(LocalEnvironment):
        async def open(self, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
            number = sum(1 for e in events if e[1] == "open")
            events.append((time.monotonic(), "open", number))
            inner = self.new_session()
            return RecordingSession(inner, events, number)

    registry.environments.register(provider_id, RecordingLocal)
    return provider_id, events


def make_request(
    tmp_path: Path,
    environment: dict[str, Any],
    *,
    n_tasks: int,
    harness: dict[str, Any],
    limits: dict[str, Any],
    name: str = "limits",
) -> EvalRequest:
    return EvalRequest.model_validate(
        {
            "name": name,
            "benchmark": {"id": "synthetic", "params": {"n_tasks": n_tasks}},
            "model": {"id": "none"},
            "harness": {"id": "scripted", "params": harness},
            "environment": environment,
            "execution": {"limits": limits},
            "output": {"results_dir": str(tmp_path / "results")},
        }
    )


def intervals(events: list[Event]) -> list[tuple[float, float]]:
    opened = {n: t for t, kind, n in events if kind == "open"}
    closed = {n: t for t, kind, n in events if kind == "close"}
    assert set(opened) == set(closed), f"every opened session is closed: {sorted(opened)} vs {sorted(closed)}"
    return sorted((opened[n], closed[n]) for n in opened)


# R-LIMIT-1: capacity


def run_capacity(tmp_path: Path, capacity: int) -> list[tuple[float, float]]:
    env_id, events = recording_environment("recording-local-capacity")
    request = make_request(
        tmp_path,
        {"id": env_id, "capacity": capacity},
        n_tasks=6,
        harness={"default": {"sleep": 0.2, "answer": "whatever"}},
        limits={"task_concurrency": 4},
    )
    result = orchestrate([request])
    assert result.status == "completed", result
    spans = intervals(events)
    assert len(spans) == 6, "one environment per task"
    return spans


def test_capacity_one_never_opens_two_environments_at_once(
    tmp_path: Path, private_tmpdir: Path, plugin_registries: None
) -> None:
    """R-LIMIT-1: with capacity 1 and 4 workers, the open..close intervals of the attempts never overlap."""
    spans = run_capacity(tmp_path, capacity=1)
    for (_, previous_close), (next_open, _) in zip(spans, spans[1:]):
        assert next_open >= previous_close, f"an environment opened before the previous one closed: {spans}"
    assert max_open_at_once(spans) == 1


def test_capacity_disabled_lets_environments_overlap(
    tmp_path: Path, private_tmpdir: Path, plugin_registries: None
) -> None:
    """R-LIMIT-1 control: capacity 0 (disabled), same setup: the 4 workers do hold environments at once,
    so the capacity test above can fail."""
    spans = run_capacity(tmp_path, capacity=0)
    assert max_open_at_once(spans) > 1, spans


# R-LIMIT-1: open rate


def test_open_qps_spaces_environment_opens(tmp_path: Path, private_tmpdir: Path, plugin_registries: None) -> None:
    """R-LIMIT-1: open_qps 10 with 8 workers and 20 instant tasks: the 20 opens are spread over at least
    19 / 10 = 1.9 s (first to last open >= 1.8 s); without the limit they took 0.27 s on a busy machine.
    (10/s rather than 5/s: the same 19 spacings in half the time, still well clear of an unlimited run.)"""
    env_id, events = recording_environment("recording-local-qps")
    request = make_request(
        tmp_path,
        {"id": env_id, "open_qps": 10},
        n_tasks=20,
        harness={"default": {"answer": "whatever"}},
        limits={"task_concurrency": 8},
    )
    result = orchestrate([request])
    assert result.status == "completed", result
    opens = sorted(t for t, kind, _ in events if kind == "open")
    assert len(opens) == 20
    assert opens[-1] - opens[0] >= 1.8, f"20 opens at 10/s took only {opens[-1] - opens[0]:.2f}s"


# R-CLEAN-2: orchestration timeout, in-process


def leftover_temp_dirs(tmpdir: Path) -> list[str]:
    return sorted(p.name for p in tmpdir.glob("agentcompass-*"))


def load_details(run_dir: Path) -> dict[str, tuple[str, TaskDetail]]:
    """Every detail file by task id, with its file name; each must parse."""
    details = {}
    for path in sorted((run_dir / "details").glob("*.json")):
        detail = TaskDetail.model_validate_json(path.read_bytes())
        details[detail.task_id] = (path.name, detail)
    return details


def test_orchestration_timeout_stops_tasks_keeps_finished_and_cleans_up(
    tmp_path: Path, private_tmpdir: Path, plugin_registries: None
) -> None:
    """R-CLEAN-2: orchestration_timeout_s stops the 30 s tasks, the run ends `timeout` (result and
    run_info.json with finished_at), the quick tasks' details are kept, and no temp dir is left behind."""
    env_id = f"local-timeout-{uuid.uuid4().hex[:10]}"
    registry.environments.register(env_id, LocalEnvironment)
    # Two workers: t0 finishes at once and its worker takes t2 (quick too), then t3; t1 blocks the other
    # worker; t4 and t5 never start.
    quick = {"command": "pwd"}
    request = make_request(
        tmp_path,
        {"id": env_id},
        n_tasks=6,
        harness={
            "default": {"sleep": 30},
            "tasks": {"t0": {**quick, "answer": "answer-0"}, "t2": {**quick, "answer": "answer-2"}},
        },
        limits={"task_concurrency": 2, "orchestration_timeout_s": 1.5, "cleanup_grace_seconds": 10},
        name="timeout",
    )
    started = time.monotonic()
    result = orchestrate([request])
    elapsed = time.monotonic() - started

    assert elapsed < 20, f"orchestrate returned after {elapsed:.1f}s: the timeout did not stop the 30 s tasks"
    assert result.status == "timeout"
    outcome = result.outcomes["timeout"]
    assert outcome.status == "timeout"
    run_dir = Path(outcome.paths["run_dir"])
    info = json.loads((run_dir / "run_info.json").read_text())
    assert info["status"] == "timeout"
    assert info["finished_at"]

    details = load_details(run_dir)
    assert sorted(details) == ["t0", "t2"], "exactly the tasks that finished have details"
    for task_id in ("t0", "t2"):
        name, detail = details[task_id]
        assert not name.startswith("_error_") and detail.error is None and detail.correct, (name, detail)
        workdir = detail.attempts["1"].trajectory[-1]["output"].strip()
        # The environment really lived in our TMPDIR, so the leftover check below means something.
        environment_root = Path(workdir).parent
        assert environment_root.parent == private_tmpdir and environment_root.name.startswith("agentcompass-")
    assert leftover_temp_dirs(private_tmpdir) == []


def test_timeout_gives_a_slow_environment_close_its_grace(
    tmp_path: Path, private_tmpdir: Path, plugin_registries: None
) -> None:
    """R-CLEAN-2: the cleanup after a timeout is given cleanup_grace_seconds. Two attempts are stopped by
    the timeout; one environment's close is quick, the other's takes 0.5 s of asynchronous teardown (as a
    container provider's would). Both must finish closing, so no temp dir is left behind."""
    events: list[Event] = []

    class SlowTeardownSession(RecordingSession):
        async def close(self) -> None:
            if self.number == 0:
                await asyncio.sleep(0.5)  # e.g. waiting for a container to stop
            await super().close()

    class SlowTeardownLocal(LocalEnvironment):
        async def open(self, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
            number = int(task.id[1:])
            events.append((time.monotonic(), "open", number))
            return SlowTeardownSession(self.new_session(), events, number)

    env_id = f"slow-teardown-local-{uuid.uuid4().hex[:10]}"
    registry.environments.register(env_id, SlowTeardownLocal)
    request = make_request(
        tmp_path,
        {"id": env_id},
        n_tasks=2,
        harness={"default": {"sleep": 30}},
        limits={"task_concurrency": 2, "orchestration_timeout_s": 1.0, "cleanup_grace_seconds": 10},
        name="slow-teardown",
    )
    result = orchestrate([request])
    assert result.status == "timeout"
    closed = sorted(n for _, kind, n in events if kind == "close")
    # The interrupted gather returns once the first worker has cleaned up; the others must still get the
    # grace period instead of a second cancellation in the middle of their teardown.
    assert closed == [0, 1], f"an environment close was cut short by a second cancellation: closed {closed}"
    assert leftover_temp_dirs(private_tmpdir) == []


# R-CLEAN-2: SIGINT to the CLI, in a subprocess


def recorded_tasks(record: Path, event: str = "start") -> set[str]:
    """The tasks the scripted harness recorded ``event`` ("start": its run began, "end": it ended) for."""
    if not record.exists():
        return set()
    events = [json.loads(line) for line in record.read_text().splitlines() if line.endswith("}")]
    return {e["task"] for e in events if e["event"] == event}


def start_cli(tmp_path: Path, sweep: Path, tmpdir: Path, *options: str) -> tuple[subprocess.Popen[bytes], Path]:
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    err = tmp_path / "cli.stderr"
    with open(tmp_path / "cli.stdout", "wb") as out, open(err, "wb") as errors:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", *options, str(sweep)],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=errors,
        )
    return proc, err


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)


def test_sigint_cancels_cleans_up_and_keeps_finished_details(tmp_path: Path) -> None:
    """R-CLEAN-2: one SIGINT to `agentcompass run` while commands run in local environments: exit code
    130, run_info.json `cancelled` with finished_at, Dagster's run CANCELED (it said FAILURE), the
    finished tasks' details intact, no agentcompass-* temp dir and no `sleep` child process left."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    record = tmp_path / "calls.jsonl"
    sleep_command = f"sleep 60.{random.randint(100000, 999999)}"  # unique: found in /proc by this string
    sweep = write_sweep(
        tmp_path,
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 6}}],
        harness={
            "id": "scripted",
            "params": {
                "default": {"command": sleep_command},
                "tasks": {"t0": {"answer": "answer-0"}, "t1": {"answer": "answer-1"}},
                "record": str(record),
            },
        },
        execution={"limits": {"task_concurrency": 4, "cleanup_grace_seconds": 20}},
    )
    sleepers = {"t2", "t3", "t4", "t5"}
    proc, err = start_cli(tmp_path, sweep, tmpdir)
    try:
        wait_until(lambda: sleepers <= recorded_tasks(record), "the sleeping tasks to start", proc=proc, log=err)
        wait_until(
            lambda: len(processes_with(sleep_command)) >= 4, f"4 `{sleep_command}` processes", 30, proc=proc, log=err
        )
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the CLI did not exit within 30s of SIGINT: {err.read_text()}")
    finally:
        stop(proc)
        try:  # SIGKILLed processes take a moment to vanish
            wait_until(
                lambda: not processes_with(sleep_command),
                f"the `{sleep_command}` processes to vanish after the interrupted run",
                5,
                describe=lambda: processes_with(sleep_command),
            )
        finally:
            for pid in processes_with(sleep_command):  # don't leave them behind if they survived
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    stderr = err.read_text()
    assert code == 130, stderr
    assert "stopping: cleaning up" in stderr
    (run_dir,) = (tmp_path / "results" / "sweep" / "synthetic" / "none").iterdir()
    info = json.loads((run_dir / "run_info.json").read_text())
    assert info["status"] == "cancelled", info["status"]
    assert info["finished_at"]
    details = load_details(run_dir)
    assert {"t0", "t1"} <= set(details), sorted(details)
    for task_id in ("t0", "t1"):
        name, detail = details[task_id]
        assert not name.startswith("_error_") and detail.correct and detail.error is None, (name, detail)
        assert detail.attempts["1"].final_answer == f"answer-{task_id[1:]}"
    assert not any(d.correct for task_id, (_, d) in details.items() if task_id in sleepers)
    assert leftover_temp_dirs(tmpdir) == [], "the interrupted tasks' environments were not removed"
    with dg.DagsterInstance.get() as instance:
        assert [run.status for run in instance.get_runs()] == [dg.DagsterRunStatus.CANCELED]


class Collected:
    """An object whose collection runs a weakref callback, as SQLAlchemy's registries do."""


def interrupt_while_collected() -> None:
    """SIGINT to this process from inside a weakref callback: its handler runs there (os.kill checks for
    signals before it returns), the window where the CLI's Ctrl-C was dropped under load."""
    thing = Collected()
    ref = weakref.ref(thing, lambda _: os.kill(os.getpid(), signal.SIGINT))
    assert ref() is thing
    del thing


def test_a_sigint_inside_a_weakref_callback_still_stops_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """R-CLEAN-2: raised as KeyboardInterrupt, a SIGINT that arrives in a weakref callback goes to
    sys.unraisablehook ("Exception ignored in") and no further (the CLI went on as if no Ctrl-C had been
    pressed); counted, as the CLI's waits now count them, it is seen by the wait that checks the count."""
    dropped: list[type[BaseException] | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: dropped.append(unraisable.exc_type))
    interrupt_while_collected()  # Python's default handler: the KeyboardInterrupt does not get out
    assert dropped == [KeyboardInterrupt]
    with Interrupts().counted() as interrupts:
        interrupt_while_collected()
        interrupt_while_collected()
    assert interrupts.count == 2
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "the previous handler was not restored"


@pytest.mark.parametrize("options", [(), ("--direct",)], ids=["dagster", "direct"])
def test_second_sigint_exits_at_once_during_slow_cleanup(tmp_path: Path, options: tuple[str, ...]) -> None:
    """R-CLEAN-2: while the cooperative cleanup after a first SIGINT is slow (a harness session close
    that sleeps 30 s, cleanup grace 60 s), a second SIGINT ends the process with exit code 130 at once
    (bounded wait: 10 s), through Dagster's run workers and with --direct alike; the run directory
    still says `cancelled` (it said `running` when the workers were killed or the process exited), and
    Dagster's run CANCELED."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    record = tmp_path / "calls.jsonl"
    sweep = write_sweep(
        tmp_path,
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 2}}],
        harness={"id": "scripted", "params": {"default": {"sleep": 60, "close_sleep": 30}, "record": str(record)}},
        execution={"limits": {"task_concurrency": 2, "cleanup_grace_seconds": 60}},
    )
    proc, err = start_cli(tmp_path, sweep, tmpdir, *options)
    try:
        wait_until(lambda: recorded_tasks(record) == {"t0", "t1"}, "both tasks to start", proc=proc, log=err)
        proc.send_signal(signal.SIGINT)
        wait_until(lambda: "stopping: cleaning up" in err.read_text(), "the stopping line", 30, proc=proc, log=err)
        # Both runs were cancelled: the cleanup is in the harness sessions' 30 s close.
        wait_until(
            lambda: recorded_tasks(record, "end") == {"t0", "t1"}, "both tasks' runs to end", 30, proc=proc, log=err
        )
        assert proc.poll() is None, "the cleanup (a 30 s close) must still be running at the second SIGINT"
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail(f"a second SIGINT did not end the CLI within 10s: {err.read_text()}")
    finally:
        stop(proc)
    assert code == 130, err.read_text()
    (run_dir,) = (tmp_path / "results" / "sweep" / "synthetic" / "none").iterdir()
    info = json.loads((run_dir / "run_info.json").read_text())
    assert (info["status"], bool(info["finished_at"])) == ("cancelled", True), info
    assert "interrupted" in info["error"], info
    if not options:
        with dg.DagsterInstance.get() as instance:
            assert [run.status for run in instance.get_runs()] == [dg.DagsterRunStatus.CANCELED]
