"""Runs go through the instance's run launcher (dagster.yaml's RunWorkerLauncher) whoever launches them,
and the instance's own machinery watches them: Dagster's run monitoring (a real daemon) fails a run
whose worker died, Re-execute makes a run that is nobody's dead worker, and a run that was created but
never launched does not block the sweep."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as db

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.defs.code_location import SWEEPS_ENV
from agentcompass_dagster.defs.location import sweep_definitions
from agentcompass_dagster.defs.planning import plan_benchmark
from agentcompass_dagster.defs.run_launcher import RunWorkerLauncher
from agentcompass_dagster.defs.run_owners import ORPHAN_AFTER_S, run_owner
from agentcompass_dagster.defs.sweep import sweep_benchmarks
from agentcompass_dagster.launcher.runs import RunFactory
from agentcompass_dagster.runtime.store.processes import ProcessId

from test_dagster_engine import (
    JOB,
    _daemon,
    _fast_queue_home,
    _queue_daemon_alive,
    _workspace,
    cli,
    engine_sweep,
    every,
    finish,
    harness_calls,
    instance,
    keys,
    materialization_counts,
    stop_group,
)
from conftest import processes_with_env
from waiting import wait_until

__all__ = ["stop_group"]  # the fixture, shared with the engine tests

POOL = "agentcompass/lab/synthetic"


def gated_sweep(tmp_path: Path, **fields: Any) -> tuple[Path, Path]:
    """Six tasks, one at a time; t3-t5 wait for the gate file."""
    gate = tmp_path / "gate"
    sweep = engine_sweep(
        tmp_path,
        tasks={f"t{i}": {"oracle": True, "gate": str(gate)} for i in range(3, 6)},
        execution={"limits": {"task_concurrency": 1}},
        dagster={"max_concurrent_runs": 1},
        **fields,
    )
    return sweep, gate


def the_run(inst: dg.DagsterInstance, run_id: str) -> dg.DagsterRun:
    run = inst.get_run_by_id(run_id)
    assert run is not None
    return run


def test_every_run_goes_through_the_instance_launcher(tmp_path: Path) -> None:
    """The generated instance names RunWorkerLauncher; a CLI run is launched through it (Dagster's
    launch event is in the run's log) and its owner is recorded by run id, not in the run's tags."""
    sweep, gate = gated_sweep(tmp_path)
    gate.touch()
    assert finish(cli(tmp_path, "run", str(sweep))) == 0
    with instance() as inst:
        assert isinstance(inst.run_launcher, RunWorkerLauncher)
        (run,) = inst.get_runs()
        assert inst.all_logs(run.run_id, of_type=dg.DagsterEventType.PIPELINE_STARTING)
        owner = run_owner(inst, run.run_id)
        assert owner is not None and owner.role == "worker"
        assert not any(str(owner.worker.pid) in value for value in run.tags.values())  # type: ignore[union-attr]
        assert not [key for key in run.tags if key.startswith("agentcompass/") and "worker" in key]


def started_at(worker: ProcessId) -> float:
    """When a process of this machine started (epoch seconds, to a clock tick)."""
    # Not /proc/stat's btime: whole seconds.
    boot = time.time() - float(Path("/proc/uptime").read_text().split()[0])
    return boot + worker.started / os.sysconf("SC_CLK_TCK")


def test_a_cli_run_executes_in_a_worker_started_before_the_run_existed(tmp_path: Path) -> None:
    """The command starts its run worker before it imports Dagster, so the worker's imports overlap its
    own: the process that executed the run started before the run was created, and it ran in the
    command's environment as it was at launch (the sweep file and DAGSTER_HOME the command set after the
    worker started: with the environment it started in, it would not find the sweep's job)."""
    sweep, gate = gated_sweep(tmp_path)
    gate.touch()
    assert finish(cli(tmp_path, "run", str(sweep))) == 0
    with instance() as inst:
        (run,) = inst.get_runs()
        assert run.status == dg.DagsterRunStatus.SUCCESS
        record = inst.get_run_record_by_id(run.run_id)
        owner = run_owner(inst, run.run_id)
        assert record is not None and owner is not None and owner.worker is not None
        assert started_at(owner.worker) < record.create_timestamp.timestamp()
    assert sum(harness_calls(tmp_path).values()) == 6


def test_a_worker_started_ahead_that_no_run_takes_is_gone_when_the_command_ends(
    tmp_path: Path, dagster_home: Path
) -> None:
    """A command that launches nothing (every task has a result) stops the worker it started ahead: no
    process of this instance is left once it has returned."""
    sweep, gate = gated_sweep(tmp_path)
    gate.touch()
    assert finish(cli(tmp_path, "run", str(sweep))) == 0
    proc = cli(tmp_path, "run", str(sweep))
    assert finish(proc) == 0
    assert "Nothing to run" in max(tmp_path.glob("cli-*.log"), key=lambda p: p.stat().st_mtime).read_text()
    assert [pid for pid in processes_with_env(f"DAGSTER_HOME={dagster_home}") if standing(pid)] == []


def standing(pid: int) -> bool:
    try:
        return b"--standby" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False  # gone


def test_run_monitoring_fails_a_run_whose_worker_was_killed(tmp_path: Path, stop_group: Any) -> None:
    """A run the daemon launched (`agentcompass run --submit`) whose worker is SIGKILLed is failed by
    Dagster's own run monitoring (a real daemon; nothing of ours polls it), its pool slot is freed by the
    daemon, and the next `agentcompass run` evaluates only the tasks that had not finished."""
    home = Path(os.environ["DAGSTER_HOME"])
    _fast_queue_home(home)
    config = (home / "dagster.yaml").read_text()
    (home / "dagster.yaml").write_text(
        config.replace("poll_interval_seconds: 10", "poll_interval_seconds: 1").replace(
            "free_slots_after_run_end_seconds: 30", "free_slots_after_run_end_seconds: 1"
        )
    )
    sweep, gate = gated_sweep(tmp_path)
    daemon = _daemon(tmp_path, _workspace(tmp_path, sweep), sweep)
    stop_group(daemon)
    wait_until(_queue_daemon_alive, "the daemon's first heartbeat", proc=daemon, log=tmp_path / "daemon.log")
    submitted = cli(tmp_path, "run", str(sweep), "--submit")
    stop_group(submitted)
    wait_until(lambda: harness_calls(tmp_path)["t3"] == 1, "t3 to start", proc=submitted)
    # A run-failure sensor sees failures after its first tick.
    wait_until(_failure_sensor_ticked, "the run-failure sensor's first tick", log=tmp_path / "daemon.log")
    with instance() as inst:
        (run,) = inst.get_runs()
        owner = run_owner(inst, run.run_id)
    assert owner is not None and owner.worker is not None
    # The submitting CLI follows the run and would fail it itself (issue 39): gone first, so that what
    # fails the run is Dagster's run monitoring alone.
    os.killpg(submitted.pid, signal.SIGKILL)
    submitted.wait(timeout=30)
    os.kill(owner.worker.pid, signal.SIGKILL)

    def failed_and_freed() -> bool:
        with instance() as inst:
            return (
                the_run(inst, run.run_id).status == dg.DagsterRunStatus.FAILURE
                and not inst.event_log_storage.get_concurrency_info(POOL).claimed_slots
            )

    wait_until(failed_and_freed, "run monitoring to fail the run and free its slot", log=tmp_path / "daemon.log")
    with instance() as inst:
        failure = inst.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    assert "Detected run worker status FAILED" in str(failure[-1].message), failure[-1].message
    # The sweep's run-failure sensor marks the run directory failed with Dagster's reason.
    (run_dir,) = (tmp_path / "results" / "lab" / "synthetic" / "m1").iterdir()
    info = wait_until(
        lambda: _failed_info(run_dir), "the run directory to be marked failed", log=tmp_path / "daemon.log"
    )
    assert "Detected run worker status FAILED" in info["error"]
    gate.touch()
    assert finish(cli(tmp_path, "run", str(sweep))) == 0
    assert [harness_calls(tmp_path)[t] for t in every(6)] == [1, 1, 1, 2, 1, 1]
    assert materialization_counts() == Counter(keys(*every(6)))


def _kill_worker(run_id: str) -> None:
    """The worker this test's own process launched, if it still runs (a failed test must not leave it)."""
    with instance() as inst:
        owner = run_owner(inst, run_id)
    if owner is not None and owner.worker is not None and owner.worker.alive():
        os.kill(owner.worker.pid, signal.SIGKILL)


def _failure_sensor_ticked() -> bool:
    from dagster._core.definitions.run_request import InstigatorType

    with instance() as inst:
        return any(
            inst.get_ticks(state.instigator_origin_id, state.selector_id, limit=1)
            for state in inst.all_instigator_state(instigator_type=InstigatorType.SENSOR)
            if state.instigator_name.endswith("run_failures")
        )


def _failed_info(run_dir: Path) -> dict[str, Any] | None:
    info = json.loads((run_dir / "run_info.json").read_text())
    return info if info["status"] == "failed" else None


def test_reexecute_of_a_killed_run_is_not_reaped_beside_a_cli_run(
    tmp_path: Path, stop_group: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """UI Re-execute of a run whose worker was killed, made by Dagster's own re-execution with the parent's
    tags: the planning of a concurrent `agentcompass run` neither reaps it nor plans its tasks again
    (the re-run used to carry the dead worker's tag and was reaped as dead while it worked, and its tasks
    evaluated twice); the CLI follows it, and every task ends evaluated once more than the kill cost."""
    from dagster._core.execution.plan.resume_retry import ReexecutionStrategy
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget

    sweep, gate = gated_sweep(tmp_path)
    first = cli(tmp_path, "run", str(sweep))
    stop_group(first)
    wait_until(lambda: harness_calls(tmp_path)["t3"] == 1, "t3 to start", proc=first)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    (sweep_benchmark,) = sweep_benchmarks(load_sweep(sweep))
    # The UI's code server loads the location of this sweep.
    monkeypatch.setenv(SWEEPS_ENV, str(sweep))
    with instance() as inst:
        # The killed run is failed first (as run monitoring or the next planning does), freeing its slot.
        assert plan_benchmark(sweep_benchmark, inst, list(sweep_benchmark.task_keys)).ranges
        (parent,) = inst.get_runs()
        assert parent.status == dg.DagsterRunStatus.FAILURE
        with WorkspaceProcessContext(inst, WorkspaceFileTarget([str(_workspace(tmp_path, sweep))])) as process:
            context = process.create_request_context()
            location = context.get_code_location("agentcompass")
            remote_job = location.get_repository("__repository__").get_full_job(JOB)
            child = inst.create_reexecuted_run(
                request_context=context,
                parent_run=parent,
                code_location=location,
                remote_job=remote_job,
                strategy=ReexecutionStrategy.ALL_STEPS,
                use_parent_run_tags=True,
            )
            inst.launch_run(child.run_id, context)
    try:
        wait_until(lambda: harness_calls(tmp_path)["t3"] == 2, "the re-execution to start t3")
        with instance() as inst:
            plan = plan_benchmark(sweep_benchmark, inst, list(sweep_benchmark.task_keys))
            assert child.run_id in plan.in_flight and not plan.ranges, plan
            assert the_run(inst, child.run_id).status == dg.DagsterRunStatus.STARTED
        gate.touch()
        assert finish(cli(tmp_path, "run", str(sweep))) == 0
    finally:
        _kill_worker(child.run_id)
    with instance() as inst:
        assert the_run(inst, child.run_id).status == dg.DagsterRunStatus.SUCCESS
    assert [harness_calls(tmp_path)[t] for t in every(6)] == [1, 1, 1, 2, 1, 1]
    assert materialization_counts() == Counter(keys(*every(6)))


def test_a_run_created_and_never_launched_does_not_block_the_sweep(tmp_path: Path) -> None:
    """A run of the sweep's job created for every task but never launched, with no owner (a GraphQL
    launch that failed after creating it) and older than the launch window: `agentcompass run` fails it
    with the reason and evaluates the tasks (it used to wait on it for ever)."""
    sweep, gate = gated_sweep(tmp_path)
    gate.touch()
    with instance() as inst:
        (sweep_benchmark,) = sweep_benchmarks(load_sweep(sweep))
        plan = plan_benchmark(sweep_benchmark, inst, list(sweep_benchmark.task_keys))
        (key_range,) = plan.ranges
        orphan = RunFactory(inst, sweep_definitions(load_sweep(sweep))).create(sweep_benchmark, key_range.tags())
        inst.run_storage.set_cursor_values({f"agentcompass/run-owner/{orphan.run_id}": ""})
        storage_url = f"sqlite:///{inst.root_directory}/history/runs.db"
    engine = db.create_engine(storage_url)
    with engine.begin() as conn:
        conn.execute(
            db.text("UPDATE runs SET create_timestamp = :at WHERE run_id = :id"),
            {
                "at": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() - 2 * ORPHAN_AFTER_S)),
                "id": orphan.run_id,
            },
        )
    engine.dispose()
    assert finish(cli(tmp_path, "run", str(sweep))) == 0
    with instance() as inst:
        assert the_run(inst, orphan.run_id).status == dg.DagsterRunStatus.FAILURE
        failure = inst.all_logs(orphan.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    assert "never launched" in str(failure[-1].message)
    assert harness_calls(tmp_path) == Counter(every(6))


def test_terminate_from_the_ui_cancels_the_run_through_the_launcher(tmp_path: Path, stop_group: Any) -> None:
    """The UI's Terminate calls the instance's launcher from another process (the webserver): the run is
    marked canceling, its worker cancels its tasks, and it ends CANCELED with the tasks that finished
    kept; the CLI that launched it ends too."""
    sweep, _ = gated_sweep(tmp_path)
    proc = cli(tmp_path, "run", str(sweep))
    stop_group(proc)
    wait_until(lambda: harness_calls(tmp_path)["t3"] == 1, "t3 to start", proc=proc)
    with instance() as inst:
        (run,) = inst.get_runs()
        assert inst.run_launcher.terminate(run.run_id)
    assert finish(proc) != 0
    with instance() as inst:
        assert the_run(inst, run.run_id).status == dg.DagsterRunStatus.CANCELED
    assert materialization_counts() == Counter(keys("t0", "t1", "t2"))
