"""Dagster is the engine: a sweep runs as its own job through the instance, the way Dagster runs it (the
run workers of `agentcompass run`, `dagster job execute`, a real dagster-daemon ticking a schedule or
draining the run queue), on SQLite and on PostgreSQL. Every run is complete (tasks, attempts, metrics,
comparison, checks), reports each task as it ends, never evaluates a task another run evaluates, and a
killed run keeps what finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.defs.location import sweep_definitions
from agentcompass_dagster.defs.run_owners import run_owner
from agentcompass_dagster.runtime.store.processes import ProcessId
from agentcompass_dagster.defs.instance import ensure_dagster_home
from agentcompass_dagster.reporting.results import load_metrics

from conftest import IMAGE, REPO, max_open_at_once, needs_docker, run_cli, write_sweep
from waiting import wait_until

SWEEP = "lab"
ATTEMPTS = dg.AssetKey([SWEEP, "synthetic", "attempts"])
METRICS = dg.AssetKey([SWEEP, "synthetic", "metrics"])
JOB = f"{SWEEP}__job"
DAGSTER = str(Path(sys.executable).with_name("dagster"))


def engine_sweep(
    tmp_path: Path, n: int = 6, tasks: dict[str, Any] | None = None, name: str = SWEEP, **fields: Any
) -> Path:
    """A sweep of the synthetic benchmark whose scripted harness records every call."""
    harness = {
        "id": "scripted",
        "params": {"default": {"oracle": True}, "tasks": tasks or {}, "record": str(tmp_path / "calls.jsonl")},
    }
    return write_sweep(
        tmp_path,
        name=name,
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": n}}],
        models=[{"id": "m1", "provider": "none"}],
        harness=harness,
        **fields,
    )


def harness_calls(tmp_path: Path) -> Counter[str]:
    """How many times the harness started each task."""
    path = tmp_path / "calls.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(event["task"] for event in map(json.loads, lines) if event["event"] == "start")


def keys(*tasks: str) -> set[str]:
    return {f"m1|{task}" for task in tasks}


def every(n: int) -> list[str]:
    """The synthetic benchmark's task ids (zero-padded to the width of n)."""
    width = len(str(n))
    return [f"t{i:0{width}d}" for i in range(n)]


def instance() -> dg.DagsterInstance:
    ensure_dagster_home(None)
    return dg.DagsterInstance.get()


def materialization_counts(key: dg.AssetKey = ATTEMPTS) -> Counter[str]:
    with instance() as inst:
        records = inst.fetch_materializations(key, limit=10_000).records
    return Counter(str(r.partition_key) for r in records)


def step_successes(inst: dg.DagsterInstance, run_id: str) -> set[str]:
    return {str(record.step_key) for record in inst.all_logs(run_id, of_type=dg.DagsterEventType.STEP_SUCCESS)}


def cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`agentcompass` as a process of its own group (its run workers are in the group too)."""
    log = open(tmp_path / f"cli-{time.monotonic_ns()}.log", "wb")
    return subprocess.Popen(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", *args],
        cwd=tmp_path,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen[bytes], timeout: float = 50.0) -> int:
    try:
        return proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture
def stop_group() -> Iterator[Callable[[subprocess.Popen[bytes]], None]]:
    started: list[subprocess.Popen[bytes]] = []

    def track(proc: subprocess.Popen[bytes]) -> None:
        started.append(proc)

    yield track
    for proc in started:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_cli_run_is_the_sweeps_job_with_its_tags_and_every_step(tmp_path: Path, instance_kind: str) -> None:
    """`agentcompass run` runs the sweep's own job (not an ephemeral one) with the sweep's tags, from the
    `agentcompass` code location (so the UI finds the job to re-execute), and the run has every step: a
    task that ends in error stays unmaterialized (observed, with its error) while the metrics, the
    comparison and both checks run anyway. Per-task metadata is numeric. The generated instance keeps its
    event log with pooled connections, in SQLite or PostgreSQL."""
    sweep = engine_sweep(tmp_path, tasks={"t3": {"error": "scripted failure"}})
    assert run_cli("run", sweep) == 3  # t3 ended in error: completed, with a task in error
    with instance() as inst:
        storage = {"sqlite": "PooledSqliteEventLogStorage", "postgres": "PooledPostgresEventLogStorage"}[instance_kind]
        assert type(inst.event_log_storage).__name__ == storage
        (run,) = inst.get_runs()
        assert run.job_name == JOB and run.status == dg.DagsterRunStatus.SUCCESS
        assert (
            run.tags["agentcompass/sweep"],
            run.tags["agentcompass/benchmark"],
            run.tags["agentcompass/models"],
        ) == (SWEEP, "synthetic", "m1")
        assert run.remote_job_origin is not None and run.remote_job_origin.location_name == "agentcompass"
        assert step_successes(inst, run.run_id) == {
            "lab__synthetic__tasks",
            "lab__synthetic__evaluate",
            "lab__synthetic__comparison",
            "lab__synthetic__metrics_counts_match_denominators",
            "lab__synthetic__metrics_no_secret_in_run_dirs",
            "lab__synthetic__regression",
        }
        assert inst.get_materialized_partitions(ATTEMPTS) == keys(*every(6)) - keys("t3")
        metrics = inst.get_latest_materialization_event(METRICS)
        assert metrics is not None and metrics.run_id == run.run_id
        (observed,) = inst.fetch_observations(ATTEMPTS, limit=10).records
        assert observed.partition_key == "m1|t3"
        assert "scripted failure" in observed.asset_observation.metadata["error"].value  # type: ignore[union-attr]
        (record,) = inst.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=ATTEMPTS, asset_partitions=["m1|t0"]), limit=1
        ).records
        metadata = record.asset_materialization.metadata  # type: ignore[union-attr]
        assert isinstance(metadata["score"], dg.FloatMetadataValue) and metadata["score"].value == 1.0
        assert isinstance(metadata["tokens"], dg.FloatMetadataValue)


def test_dagster_job_execute_of_a_range_materializes_it_and_the_metrics_and_checks(tmp_path: Path) -> None:
    """What the daemon and the UI do, done by Dagster's own CLI: `dagster job execute` of the sweep's
    job over a partition range of registered tasks materializes the range (a task ending in error
    excepted), then the metrics, the comparison and the checks."""
    sweep = engine_sweep(tmp_path, tasks={"t2": {"error": "scripted failure"}})
    home = ensure_dagster_home(None)
    with instance() as inst:  # the partitions exist, as the sensor or an earlier run registered them
        inst.add_dynamic_partitions("tasks__lab__synthetic", every(6))
    tags = {"dagster/asset_partition_range_start": "m1|t1", "dagster/asset_partition_range_end": "m1|t4"}
    env = {**os.environ, "AGENTCOMPASS_SWEEPS": str(sweep), "DAGSTER_HOME": str(home)}
    proc = subprocess.run(
        [
            DAGSTER,
            "job",
            "execute",
            "-m",
            "agentcompass_dagster.definitions",
            "-a",
            "defs",
            "-j",
            JOB,
            "--tags",
            json.dumps(tags),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with instance() as inst:
        (run,) = inst.get_runs()
        assert inst.get_materialized_partitions(ATTEMPTS) == keys("t1", "t3", "t4")
        assert {
            "lab__synthetic__evaluate",
            "lab__synthetic__comparison",
            "lab__synthetic__metrics_counts_match_denominators",
        } <= step_successes(inst, run.run_id)
        metrics = inst.get_latest_materialization_event(METRICS)
        assert metrics is not None and metrics.run_id == run.run_id
    assert sorted(harness_calls(tmp_path)) == ["t1", "t2", "t3", "t4"]


def _workspace(tmp_path: Path, sweep: Path) -> Path:
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(
        yaml.safe_dump(
            {
                "load_from": [
                    {
                        "python_module": {
                            "module_name": "agentcompass_dagster.definitions",
                            "attribute": "defs",
                            "location_name": "agentcompass",
                            "working_directory": str(tmp_path),
                        }
                    }
                ]
            }
        )
    )
    return workspace


def _fast_queue_home(home: Path) -> None:
    """The generated dagster.yaml (SQLite, or PostgreSQL where the test's instance is), with a run queue
    checked every second; its storage is created before any daemon opens it, as `agentcompass ui` does."""
    from agentcompass_dagster.defs.instance import ensure_dagster_home, generated_config

    home.mkdir(parents=True, exist_ok=True)
    queue, config = "  class: QueuedRunCoordinator\n", generated_config(home)
    assert queue in config
    (home / "dagster.yaml").write_text(config.replace(queue, queue + "  config:\n    dequeue_interval_seconds: 1\n"))
    ensure_dagster_home(home)


def _queue_daemon_alive() -> bool:
    from agentcompass_dagster.launcher.follow import QUEUE_DAEMON, daemon_alive

    with instance() as inst:
        return daemon_alive(inst, QUEUE_DAEMON)


def _daemon(tmp_path: Path, workspace: Path, sweep: Path) -> subprocess.Popen[bytes]:
    log = open(tmp_path / "daemon.log", "wb")
    env = {**os.environ, "AGENTCOMPASS_SWEEPS": str(sweep), "DAGSTER_HOME": os.environ["DAGSTER_HOME"]}
    return subprocess.Popen(
        [str(Path(sys.executable).with_name("dagster-daemon")), "run", "-w", str(workspace)],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )


def test_a_daemon_ticking_the_schedule_runs_the_missing_tasks_and_the_metrics(tmp_path: Path, stop_group: Any) -> None:
    """A real dagster-daemon ticks the sweep's one-minute schedule (declared running in the YAML): the
    tick's run evaluates the missing tasks and materializes the metrics and the checks. The schedule is
    made to have started 70 s ago, so its tick is due at once instead of at the next minute."""
    from dagster._core.definitions.run_request import InstigatorType
    from dagster._core.remote_origin import RemoteInstigatorOrigin
    from dagster._core.scheduler.instigation import InstigatorState, InstigatorStatus, ScheduleInstigatorData

    from agentcompass_dagster.launcher.runs import RunFactory

    sweep = engine_sweep(tmp_path, schedule={"cron": "* * * * *", "default_status": "running"})
    workspace = _workspace(tmp_path, sweep)
    _fast_queue_home(Path(os.environ["DAGSTER_HOME"]))
    with instance() as inst:
        repository = RunFactory(inst, sweep_definitions(load_sweep(sweep))).repository_origin
        inst.add_instigator_state(
            InstigatorState(
                RemoteInstigatorOrigin(repository, "lab__schedule"),
                InstigatorType.SCHEDULE,
                InstigatorStatus.DECLARED_IN_CODE,
                ScheduleInstigatorData("* * * * *", start_timestamp=time.time() - 70),
            )
        )
    daemon = _daemon(tmp_path, workspace, sweep)
    stop_group(daemon)

    def scheduled_run_done() -> bool:
        with instance() as inst:
            runs = inst.get_runs(dg.RunsFilter(tags={"dagster/schedule_name": "lab__schedule"}))
            return any(run.status == dg.DagsterRunStatus.SUCCESS for run in runs)

    wait_until(scheduled_run_done, "the scheduled run to succeed", proc=daemon, log=tmp_path / "daemon.log")
    with instance() as inst:
        (run,) = inst.get_runs(dg.RunsFilter(tags={"dagster/schedule_name": "lab__schedule"}))
        assert run.job_name == JOB
        assert inst.get_materialized_partitions(ATTEMPTS) == keys(*every(6))
        metrics = inst.get_latest_materialization_event(METRICS)
        assert metrics is not None and metrics.run_id == run.run_id
        assert "lab__synthetic__metrics_counts_match_denominators" in step_successes(inst, run.run_id)
    assert harness_calls(tmp_path) == Counter(every(6))


@pytest.mark.parametrize("home_state", ["fresh", "used"])
def test_two_cli_runs_started_together_evaluate_every_task_once(tmp_path: Path, home_state: str) -> None:
    """Two `agentcompass run` of one sweep started at the same instant: both succeed, the instance stays
    usable (first use is serialised), every task is evaluated once and every partition materialized
    once; the second follows what the first launched instead of launching it again."""
    if home_state == "used":
        other = tmp_path / "other"
        other.mkdir()
        assert run_cli("run", engine_sweep(other, n=2, name="warmup")) == 0
    sweep = engine_sweep(tmp_path, n=12, tasks={task: {"oracle": True, "sleep": 0.1} for task in every(12)})
    first, second = cli(tmp_path, "run", str(sweep)), cli(tmp_path, "run", str(sweep))
    assert (finish(first), finish(second)) == (0, 0)
    assert harness_calls(tmp_path) == Counter(every(12))
    assert materialization_counts() == Counter(keys(*every(12)))
    with instance() as inst:
        runs = inst.get_runs(dg.RunsFilter(job_name=JOB))
        assert runs and all(run.status == dg.DagsterRunStatus.SUCCESS for run in runs)


def test_a_schedule_tick_during_a_run_requests_nothing_that_run_evaluates(tmp_path: Path, stop_group: Any) -> None:
    """While a run evaluates every task (held on a gate), the schedule's tick requests no run: the
    partitions of a run in flight are not missing. Each materialization is reported as its task ends,
    while the run is still going."""
    gate = tmp_path / "gate"
    sweep = engine_sweep(
        tmp_path,
        tasks={"t0": {"oracle": True}, **{f"t{i}": {"oracle": True, "gate": str(gate)} for i in range(1, 6)}},
        schedule={"cron": "0 3 * * *"},
        execution={"limits": {"task_concurrency": 2}},
    )
    proc = cli(tmp_path, "run", str(sweep))
    stop_group(proc)
    wait_until(lambda: materialization_counts() == Counter(keys("t0")), "t0 to be materialized mid-run", proc=proc)
    schedule = sweep_definitions(load_sweep(sweep)).resolve_schedule_def("lab__schedule")
    with instance() as inst, dg.build_schedule_context(instance=inst) as context:
        tick = schedule.evaluate_tick(context)
    assert not tick.run_requests and tick.skip_message and "in flight" in tick.skip_message
    gate.touch()
    assert finish(proc) == 0
    assert harness_calls(tmp_path) == Counter(every(6))
    assert materialization_counts() == Counter(keys(*every(6)))


def test_sigkill_of_a_run_keeps_finished_tasks_and_the_rerun_evaluates_the_rest(tmp_path: Path) -> None:
    """SIGKILL of a Dagster run (its launcher and worker) after some tasks finished: their
    materializations are there; the next `agentcompass run` marks the killed run failed in Dagster and
    in its run_info.json, and evaluates only the tasks that had not finished."""
    gate = tmp_path / "gate"
    sweep = engine_sweep(
        tmp_path,
        tasks={f"t{i}": {"oracle": True, "gate": str(gate)} for i in range(3, 6)},
        execution={"limits": {"task_concurrency": 1}},
    )
    proc = cli(tmp_path, "run", str(sweep))
    # t3 waits at its gate: the kill lands once the three before it are materialized.
    wait_until(
        lambda: harness_calls(tmp_path)["t3"] == 1 and set(materialization_counts()) == keys("t0", "t1", "t2"),
        "t3 to start after t0-t2 materialized",
        proc=proc,
    )
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert set(materialization_counts()) == keys("t0", "t1", "t2")
    with instance() as inst:
        (killed,) = inst.get_runs()
    assert killed.status == dg.DagsterRunStatus.STARTED
    gate.touch()
    assert run_cli("run", sweep) == 0
    with instance() as inst:
        status = inst.get_run_by_id(killed.run_id).status  # type: ignore[union-attr]
    assert status == dg.DagsterRunStatus.FAILURE
    run_dirs = sorted((tmp_path / "results" / SWEEP / "synthetic" / "m1").iterdir())
    infos = [json.loads((d / "run_info.json").read_text()) for d in run_dirs]
    (killed_info,) = [info for info in infos if info["dagster_run_id"] == killed.run_id]
    assert killed_info["status"] == "failed" and "is gone" in killed_info["error"]
    calls = harness_calls(tmp_path)
    assert [calls[t] for t in every(6)] == [1, 1, 1, 2, 1, 1]
    assert materialization_counts() == Counter(keys(*every(6)))


def gated_run(
    tmp_path: Path, gate: Path, stop_group: Callable[[subprocess.Popen[bytes]], None], **sections: Any
) -> tuple[Path, subprocess.Popen[bytes], dg.DagsterRun, ProcessId]:
    """`agentcompass run` of t3..t5, one task at a time, each waiting for ``gate``; returns once its one
    run's worker evaluates t3: the sweep, the CLI, the run and the worker's process."""
    sweep = engine_sweep(
        tmp_path,
        tasks={f"t{i}": {"oracle": True, "gate": str(gate)} for i in range(3, 6)},
        execution={"limits": {"task_concurrency": 1}},
        **sections,
    )
    proc = cli(tmp_path, "run", str(sweep))
    stop_group(proc)
    wait_until(lambda: harness_calls(tmp_path)["t3"] == 1, "t3 to start", proc=proc)
    with instance() as inst:
        (run,) = inst.get_runs()
        owner = run_owner(inst, run.run_id)
    assert owner is not None and owner.role == "worker" and owner.worker is not None
    return sweep, proc, run, owner.worker


def test_sigkill_of_only_the_run_worker_does_not_wedge_the_sweep(tmp_path: Path, stop_group: Any) -> None:
    """SIGKILL of the run worker alone, while its step holds the sweep's pool: the CLI marks the run
    failed and releases its pool slot, its claim and its run directory (it freed none of them, and every
    later `agentcompass run` waited for ever on the pool); the next run evaluates what is left."""
    gate = tmp_path / "gate"
    sweep, proc, run, worker = gated_run(tmp_path, gate, stop_group, dagster={"max_concurrent_runs": 1})
    os.kill(worker.pid, signal.SIGKILL)
    assert finish(proc) != 0
    with instance() as inst:
        assert inst.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE  # type: ignore[union-attr]
        assert inst.event_log_storage.get_concurrency_info(f"agentcompass/{SWEEP}/synthetic").claimed_slots == []
    (run_dir,) = (tmp_path / "results" / SWEEP / "synthetic" / "m1").iterdir()
    assert json.loads((run_dir / "run_info.json").read_text())["status"] == "failed"
    gate.touch()
    assert finish(cli(tmp_path, "run", str(sweep))) == 0
    assert materialization_counts() == Counter(keys(*every(6)))


def _accuracy(results: Path) -> dict[str, float]:
    metrics = load_metrics(results, latest=True)
    return metrics.set_index("metric")["value"].to_dict()


def test_a_sweep_split_into_runs_evaluates_at_most_two_at_once_with_the_same_metrics(tmp_path: Path) -> None:
    """max_partitions_per_run 3 splits 9 tasks into 3 runs; with max_concurrent_runs 2 at most two are
    in progress at any instant; the metrics are computed once (issue 39), and equal one run's, and the newest
    run directory holds every task (the concurrent runs' results are consolidated)."""
    tasks = {"t4": {"answer": "wrong"}, **{f"t{i}": {"oracle": True, "sleep": 0.2} for i in range(9) if i != 4}}
    split = engine_sweep(tmp_path, n=9, tasks=tasks, dagster={"max_partitions_per_run": 3, "max_concurrent_runs": 2})
    assert run_cli("run", split) == 0
    with instance() as inst:
        records = inst.get_run_records(dg.RunsFilter(job_name=JOB))
    assert len(records) == 3 and all(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in records)
    assert max_open_at_once([(r.start_time, r.end_time) for r in records]) <= 2  # type: ignore[misc]
    assert harness_calls(tmp_path) == Counter(every(9))
    # Issue 39: the metrics once, by the run that ended its evaluation last, not once per run.
    assert sum(materialization_counts(METRICS).values()) == 1
    whole = tmp_path / "whole"
    whole.mkdir()
    single = engine_sweep(whole, n=9, tasks=tasks, name="whole")
    assert run_cli("run", single) == 0
    assert _accuracy(tmp_path / "results") == _accuracy(whole / "results")
    newest = max(
        (tmp_path / "results" / SWEEP / "synthetic" / "m1").iterdir(),
        key=lambda d: json.loads((d / "params.json").read_text())["started_at"],
    )
    assert len(list((newest / "details").glob("*.json"))) == 9


@pytest.mark.parametrize("instance_kind", ["postgres"], indirect=True)
def test_submitted_runs_go_through_the_run_queue_one_at_a_time(
    tmp_path: Path, instance_kind: str, stop_group: Any
) -> None:
    """`agentcompass run --submit` queues the runs on the instance's run coordinator; a real daemon
    launches them, one evaluating at a time (the sweep's pool), and the CLI follows them to the end and
    prints the summary. On PostgreSQL: the split test above holds the same limit on SQLite, and a pool
    of one with two runs catches a daemon that ignores it as surely as three runs on a pool of two, with
    a run worker fewer on a loaded machine."""
    _fast_queue_home(Path(os.environ["DAGSTER_HOME"]))
    sweep = engine_sweep(
        tmp_path,
        n=4,
        tasks={f"t{i}": {"oracle": True, "sleep": 0.2} for i in range(4)},
        dagster={"max_partitions_per_run": 2, "max_concurrent_runs": 1},
    )
    daemon = _daemon(tmp_path, _workspace(tmp_path, sweep), sweep)
    stop_group(daemon)
    wait_until(_queue_daemon_alive, "the daemon's first heartbeat", proc=daemon, log=tmp_path / "daemon.log")
    proc = cli(tmp_path, "run", str(sweep), "--submit")
    stop_group(proc)
    assert finish(proc, timeout=55) == 0, (tmp_path / "daemon.log").read_text()[-3000:]
    with instance() as inst:
        assert type(inst.run_storage).__name__ == "PostgresRunStorage"
        records = inst.get_run_records(dg.RunsFilter(job_name=JOB))
        windows = []
        for record in records:
            events = {
                e.dagster_event_type: e.timestamp
                for e in inst.all_logs(
                    record.dagster_run.run_id,
                    of_type={dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS},
                )
                if e.step_key == "lab__synthetic__evaluate"
            }
            windows.append((events[dg.DagsterEventType.STEP_START], events[dg.DagsterEventType.STEP_SUCCESS]))
    assert len(records) == 2 and max_open_at_once(windows) == 1
    assert harness_calls(tmp_path) == Counter(every(4))
    assert _accuracy(tmp_path / "results")["accuracy"] == 1.0


def test_submit_without_a_queue_or_a_daemon_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--submit on an instance without a run queue, or with one but no daemon to drain it, is one clear
    line and exit code 2, and nothing is launched."""
    home = Path(os.environ["DAGSTER_HOME"])
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(
        yaml.safe_dump(
            {
                "telemetry": {"enabled": False},
                "run_coordinator": {"module": "dagster._core.run_coordinator", "class": "DefaultRunCoordinator"},
            }
        )
    )
    assert run_cli("run", engine_sweep(tmp_path), "--submit") == 2
    assert "--submit: the instance" in capsys.readouterr().err
    (home / "dagster.yaml").unlink()
    _fast_queue_home(home)
    assert run_cli("run", engine_sweep(tmp_path), "--submit") == 2
    assert "no dagster-daemon is running" in capsys.readouterr().err
    with instance() as inst:
        assert not inst.get_runs()


@pytest.mark.slow
@needs_docker
def test_a_sweep_runs_its_steps_in_docker_containers_with_results_on_the_host(tmp_path: Path) -> None:
    """executor docker: every step of the sweep's job runs in a container of the CI engine (the image
    gets this project and its Python by read-only mounts, as a team's image would hold them); the
    results directory, the sweep and the instance reach the containers at the host's paths, so the
    details, the metrics and every materialization are on the host."""
    import docker

    python = Path(sys.base_prefix)
    volumes = [f"{REPO}:{REPO}:ro", f"{python}:{python}:ro"]
    sweep = engine_sweep(
        tmp_path,
        n=3,
        tasks={"t1": {"answer": "wrong"}},
        dagster={
            "executor": "docker",
            "docker": {"image": IMAGE, "network": "none", "container_kwargs": {"volumes": volumes}},
        },
    )
    client = docker.from_env()
    before = {c.id for c in client.containers.list(all=True)}
    assert run_cli("run", sweep) == 0
    # Only the step containers: tests running beside this one start environment containers of their own.
    created = [
        c
        for c in client.containers.list(all=True)
        if c.id not in before and "execute_step" in " ".join(c.attrs["Config"]["Cmd"] or [])
    ]
    assert materialization_counts() == Counter(keys(*every(3)))
    assert _accuracy(tmp_path / "results")["accuracy"] == pytest.approx(2 / 3)
    assert len(list((tmp_path / "results" / SWEEP / "synthetic" / "m1").glob("*/details/*.json"))) == 3
    with instance() as inst:
        (run,) = inst.get_runs()
        engine = [e.message for e in inst.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_WORKER_STARTED)]
    # tasks, evaluate, comparison, two checks and the regression checks: each in its container
    assert len(engine) == 6, engine
    assert len(created) == 6 and {c.image.tags[0] for c in created} == {IMAGE}
    for container in created:
        container.remove(force=True)


def test_a_containerised_sweep_whose_results_would_not_be_shared_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a Docker engine on another host (DOCKER_HOST tcp://), a same-path bind of this host's results
    directory would be empty there: the sweep is refused before anything runs, with one line naming the
    file, the field and the directory."""
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.255.255.1:2375")
    sweep = engine_sweep(tmp_path, dagster={"executor": "docker", "docker": {"image": IMAGE}})
    assert run_cli("run", sweep) == 2
    err = capsys.readouterr().err
    assert f"{sweep}: dagster.docker.container_kwargs.volumes: output.results_dir" in err and "tcp://" in err
    assert not (tmp_path / "results").exists()
    with instance() as inst:
        assert not inst.get_runs()


def test_a_sweep_can_run_its_steps_in_kubernetes_pods(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """executor k8s (no cluster here, so checked at the definitions level): the sweep's job gets
    dagster-k8s's k8s_job_executor with the image, namespace, volumes and the code location's
    environment; a sweep whose results directory is on no volume the pods mount, or on a SQLite
    instance (pods share no DAGSTER_HOME), is refused before anything runs."""
    results = tmp_path / "results"
    mounts = [{"name": "evals", "mount_path": str(tmp_path)}]
    volumes = [{"name": "evals", "persistent_volume_claim": {"claim_name": "evals"}}]
    path = engine_sweep(
        tmp_path,
        dagster={
            "executor": "k8s",
            "k8s": {
                "image": "registry.example/agentcompass:1",
                "namespace": "evals",
                "volume_mounts": mounts,
                "volumes": volumes,
                "env_vars": ["OPENAI_API_KEY"],
            },
        },
    )
    monkeypatch.setenv("AGENTCOMPASS_SWEEPS", str(path))
    job = sweep_definitions(load_sweep(path)).resolve_job_def(JOB)
    assert job.executor_def.name == "lab__synthetic__k8s_executor"
    config = job.executor_def.apply_config_mapping({}).value["config"]
    assert (config["job_image"], config["job_namespace"], config["volume_mounts"]) == (
        "registry.example/agentcompass:1",
        "evals",
        mounts,
    )
    assert config["env_vars"] == ["OPENAI_API_KEY", f"AGENTCOMPASS_SWEEPS={path}"]
    assert run_cli("run", path) == 2
    assert "dagster.executor='k8s': step pods share no DAGSTER_HOME" in capsys.readouterr().err
    monkeypatch.setenv("AGENTCOMPASS_DAGSTER_PG_URL", "postgresql+psycopg2://u@db.invalid:5432/dagster")
    unshared = engine_sweep(
        tmp_path,
        dagster={
            "executor": "k8s",
            "k8s": {"image": "x", "volume_mounts": [{"name": "other", "mount_path": "/mnt/other"}]},
        },
    )
    assert run_cli("run", unshared) == 2
    assert f"{unshared}: dagster.k8s.volume_mounts: output.results_dir {results}" in capsys.readouterr().err
    assert not results.exists()


def test_environment_capacity_holds_across_concurrent_runs(tmp_path: Path, stop_group: Any) -> None:
    """R-LIMIT-1 across processes: an environment with capacity 1 lets one attempt run at a time over
    two runs evaluating at once in separate worker processes (each would allow 4): while one run's
    attempt holds the instance's slot, the other run's attempt waits for it, and no two attempts of the
    sweep ever overlap."""
    gate = tmp_path / "gate"
    pool = "agentcompass/environment/one-at-a-time"
    sweep = engine_sweep(
        tmp_path,
        n=6,
        tasks={task: {"oracle": True, "gate": str(gate)} for task in every(6)},
        environment={"id": "one-at-a-time", "provider": "local", "capacity": 1},
        execution={"limits": {"task_concurrency": 4}},
        dagster={"max_partitions_per_run": 3, "max_concurrent_runs": 2},
    )
    proc = cli(tmp_path, "run", str(sweep))
    stop_group(proc)

    def one_holds_the_other_waits() -> bool:
        with instance() as inst:
            info = inst.event_log_storage.get_concurrency_info(pool)
        holders = {slot.run_id for slot in info.claimed_slots}
        return len(info.claimed_slots) == 1 and any(step.run_id not in holders for step in info.pending_steps)

    wait_until(one_holds_the_other_waits, "one run holding the slot while the other waits", proc=proc)
    assert sum(harness_calls(tmp_path).values()) == 1
    gate.touch()
    assert finish(proc) == 0
    events = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    starts = {e["task"]: e["time"] for e in events if e["event"] == "start"}
    ends = {e["task"]: e["time"] for e in events if e["event"] == "end"}
    assert sorted(starts) == every(6) and max_open_at_once([(starts[t], ends[t]) for t in starts]) == 1
