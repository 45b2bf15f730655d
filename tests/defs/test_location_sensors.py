"""The code location's sensors mind their own sweeps (issue 39): one run-failure sensor for every sweep of
the location, acting on a failed run of a sweep (its run directory failed, its claim dropped) and on
nothing else, whichever code location name the run was launched under; and a claim file of a run that
ended, or whose worker is gone, is removed by the next look at the claims."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import dagster as dg

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.defs.coordination import claim_partitions
from agentcompass_dagster.defs.location import sweep_files_definitions
from agentcompass_dagster.defs.instance import ensure_dagster_home, generated_config
from agentcompass_dagster.defs.run_owners import record_owner, run_owner
from agentcompass_dagster.defs.sweep import sweep_benchmarks
from agentcompass_dagster.runtime.store.processes import ProcessId
from agentcompass_dagster.runtime.store.layout import CLAIMS_DIR

from test_dagster_engine import (
    DAGSTER,
    JOB,
    _daemon,
    _fast_queue_home,
    _queue_daemon_alive,
    _workspace,
    cli,
    harness_calls,
    instance,
    stop_group,
)
from test_dagster_internals import tiny
from test_run_launcher import _failure_sensor_ticked, _kill_worker, gated_sweep, the_run
from waiting import wait_until

__all__ = ["stop_group"]  # the fixture, shared with the engine tests


def run_info(results: Path, sweep: str) -> dict[str, Any]:
    (run_dir,) = (results / sweep / "synthetic" / "m1").iterdir()
    return json.loads((run_dir / "run_info.json").read_text())


def claims(results: Path, sweep: str) -> list[str]:
    directory = results / sweep / "synthetic" / CLAIMS_DIR
    return sorted(path.stem for path in directory.glob("*.json")) if directory.is_dir() else []


def only_run(job_name: str) -> dg.DagsterRun:
    with instance() as inst:
        (run,) = inst.get_runs(dg.RunsFilter(job_name=job_name))
    return run


def failure_reactions(
    definitions: dg.Definitions, location: dg.DagsterRun, cursors: dict[str, str | None]
) -> list[tuple[str, str]]:
    """One tick of each run-failure sensor of the location, as the daemon ticks it in the code location
    ``location``'s run was launched from: (sensor, run id) of every run it acted on (the daemon writes
    "acted on" into that run's log); ``cursors`` carry on."""
    assert location.remote_job_origin is not None
    origin = location.remote_job_origin.repository_origin
    acted = []
    for sensor in definitions.get_repository_def().sensor_defs:
        if not isinstance(sensor, dg.RunStatusSensorDefinition):
            continue
        with (
            instance() as inst,
            dg.SensorEvaluationContext(
                instance_ref=None,
                instance=inst,
                cursor=cursors.get(sensor.name),
                sensor_name=sensor.name,
                repository_name=origin.repository_name,
                repository_def=definitions.get_repository_def(),
                code_location_origin=origin.code_location_origin,
            ) as context,
        ):
            tick = sensor.evaluate_tick(context)
        cursors[sensor.name] = tick.cursor
        acted += [
            (sensor.name, reaction.dagster_run.run_id)
            for reaction in tick.dagster_run_reactions
            if reaction.dagster_run is not None
        ]
    return acted


def test_the_failure_sensor_acts_on_a_failed_run_of_its_sweep_and_on_no_other_run(
    tmp_path: Path, stop_group: Any
) -> None:
    """Issue 39, R-STORE-3 (a run's terminal status in run_info.json): two sweeps in one code location,
    each with a run whose `agentcompass run` was SIGKILLed mid-sweep (a run directory `running`, a claim
    on disk). A run of a job of no sweep fails, then the UI
    marks sweep lab's run failed: over every run-failure sensor of the location, exactly one action, on
    lab's run (its run directory says failed with the reason, its claim is gone); sweep other's run
    directory still says running and its claim is untouched, and the foreign run is acted on by none
    (a sensor per sweep, watching every failed run of the location, acted on lab's run once per sweep)."""
    sweeps, procs = {}, {}
    for name in ("lab", "other"):
        (tmp_path / name).mkdir()
        sweeps[name], _ = gated_sweep(tmp_path / name, name=name)
        procs[name] = cli(tmp_path / name, "run", str(sweeps[name]))
        stop_group(procs[name])
    for name, proc in procs.items():
        wait_until(lambda: harness_calls(tmp_path / name)["t3"] == 1, f"{name}'s t3 to start", proc=proc)
        os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its run worker: the run stays STARTED
        proc.wait()
    definitions = sweep_files_definitions(list(sweeps.values()), None)
    lab_run, other_run = only_run("lab__job"), only_run("other__job")
    cursors: dict[str, str | None] = {}
    assert failure_reactions(definitions, lab_run, cursors) == []  # the first tick only sets the cursor
    with instance() as inst:
        foreign = inst.create_run_for_job(tiny, status=dg.DagsterRunStatus.STARTED)
        inst.report_run_failed(foreign, message="a job of another location failed")
        inst.report_run_failed(lab_run, message="marked failed in the UI")
    acted = [reaction for _ in range(3) for reaction in failure_reactions(definitions, lab_run, cursors)]
    assert [run_id for _, run_id in acted] == [lab_run.run_id], acted
    info = run_info(tmp_path / "lab" / "results", "lab")
    assert info["status"] == "failed" and "marked failed in the UI" in info["error"]
    assert claims(tmp_path / "lab" / "results", "lab") == []
    assert run_info(tmp_path / "other" / "results", "other")["status"] == "running"
    assert claims(tmp_path / "other" / "results", "other") == [other_run.run_id]


def test_a_dagster_job_launch_run_whose_worker_is_killed_ends_failed_with_its_claim_gone(
    tmp_path: Path, stop_group: Any
) -> None:
    """Issue 39, R-STORE-3 (a run's terminal status in run_info.json): the sweep's job launched as
    `dagster job launch -m agentcompass_dagster.definitions -a defs` (a code location named apart from the
    workspace's `agentcompass`), dequeued by a real daemon on the generated instance (whose run
    monitoring is on); its run worker SIGKILLed mid-sweep. Run
    monitoring fails the run, and the location's run-failure sensor, which watches runs of every
    location, marks its run directory failed and removes its claim file, acting on it once (it used to
    see no run of another location name: the run directory said `running` and the claim stayed for good)."""
    home = Path(os.environ["DAGSTER_HOME"])
    assert "run_monitoring:\n  enabled: true\n" in generated_config(home)
    _fast_queue_home(home)
    config = (home / "dagster.yaml").read_text()
    (home / "dagster.yaml").write_text(config.replace("poll_interval_seconds: 10", "poll_interval_seconds: 1"))
    sweep, gate = gated_sweep(tmp_path)
    results = tmp_path / "results"
    daemon = _daemon(tmp_path, _workspace(tmp_path, sweep), sweep)
    stop_group(daemon)
    log = tmp_path / "daemon.log"
    wait_until(_queue_daemon_alive, "the daemon's first heartbeat", proc=daemon, log=log)
    with instance() as inst:
        inst.add_dynamic_partitions("tasks__lab__synthetic", [f"t{i}" for i in range(6)])
    run_id = ""
    try:
        env = {**os.environ, "AGENTCOMPASS_SWEEPS": str(sweep)}
        subprocess.run(
            [DAGSTER, "job", "launch", "-m", "agentcompass_dagster.definitions", "-a", "defs", "-j", JOB],
            cwd=tmp_path,
            env=env,
            check=True,
            capture_output=True,
            timeout=55,
        )
        run_id = only_run(JOB).run_id
        wait_until(lambda: harness_calls(tmp_path)["t3"] == 1, "t3 to start in the launched run", proc=daemon, log=log)
        wait_until(_failure_sensor_ticked, "the run-failure sensor's first tick", proc=daemon, log=log)
        assert claims(results, "lab") == [run_id]
        with instance() as inst:
            run = inst.get_run_by_id(run_id)
            owner = run_owner(inst, run_id)
        assert run is not None and run.remote_job_origin is not None
        assert run.remote_job_origin.location_name != "agentcompass"
        assert owner is not None and owner.worker is not None
        os.kill(owner.worker.pid, signal.SIGKILL)

        def handled() -> bool:
            return run_info(results, "lab")["status"] == "failed" and not claims(results, "lab")

        wait_until(
            handled,
            "the run directory to say failed and the claim to be gone",
            proc=daemon,
            log=log,
            describe=lambda: (run_info(results, "lab")["status"], claims(results, "lab")),
        )
        with instance() as inst:
            assert the_run(inst, run_id).status == dg.DagsterRunStatus.FAILURE
            acted = [
                entry
                for entry in inst.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
                if "acted on run status" in (entry.message or "")
            ]
        assert len(acted) == 1, [entry.message for entry in acted]
        assert "Detected run worker status FAILED" in run_info(results, "lab")["error"]
    finally:
        gate.touch()
        if run_id:
            _kill_worker(run_id)


def test_the_next_claim_removes_the_claims_of_finished_runs_and_of_gone_workers(tmp_path: Path) -> None:
    """Issue 39: claim files of a run that ended (failed) and of a run whose worker process is gone are removed
    by the next run's claim (they used to be ignored and left on disk for good), and their partitions
    are that run's; the claim of a live run stays, and its partition stays its own."""
    (tmp_path / "sweeps").mkdir()
    sweep, _ = gated_sweep(tmp_path / "sweeps")
    (member,) = sweep_benchmarks(load_sweep(sweep))
    this = ProcessId.this()
    dead = ProcessId(this.host, this.pid, this.started + 1)  # this pid's earlier owner, gone
    assert not dead.alive()
    ensure_dagster_home(None)
    with dg.DagsterInstance.get() as inst:
        runs = {
            name: inst.create_run_for_job(tiny, status=dg.DagsterRunStatus.STARTED)
            for name in ("finished", "killed", "live", "next")
        }
        for name, key in (("finished", "m1|t0"), ("killed", "m1|t1"), ("live", "m1|t2")):
            record_owner(inst, runs[name].run_id, "worker", ProcessId.this())
            assert claim_partitions(member, inst, runs[name].run_id, [key]) == [key]
        inst.report_run_failed(runs["finished"], message="ended")
        killed_claim = member.benchmark_dir / CLAIMS_DIR / f"{runs['killed'].run_id}.json"
        killed_claim.write_text(killed_claim.read_text().replace(str(this), str(dead)))
        record_owner(inst, runs["next"].run_id, "worker", ProcessId.this())
        mine = claim_partitions(member, inst, runs["next"].run_id, ["m1|t0", "m1|t1", "m1|t2"])
    assert mine == ["m1|t0", "m1|t1"]
    assert claims(tmp_path / "sweeps" / "results", "lab") == sorted([runs["live"].run_id, runs["next"].run_id])
