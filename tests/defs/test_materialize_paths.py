"""Every way a Dagster user materializes a sweep's assets gives the sweep's complete result (DESIGN:
"every way of materializing is the sweep's way"): a UI backfill of some attempts partitions and
"Materialize all" (asset backfills executed by a real backfill daemon), `dagster asset materialize
--partition-range` with and without the metrics, and the sweep's job launched with and without a
partition. Each ends with what it ran materialized, every task evaluated once, the metrics, the
comparison and the checks on the metrics current (materialized after the newest result), and nothing
left in flight that a later `agentcompass run` would wait for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import dagster as dg

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.defs.dagster_internals import backfill_status, create_asset_backfill
from agentcompass_dagster.defs.location import sweep_definitions
from agentcompass_dagster.defs.jobs import AUTOMATION_INTERVAL_ENV

from conftest import run_cli
from test_dagster_engine import (  # noqa: F401 (instance and stop_group are fixtures)
    ATTEMPTS,
    DAGSTER,
    JOB,
    METRICS,
    SWEEP,
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
from waiting import wait_until

COMPARISON = dg.AssetKey([SWEEP, "synthetic", "comparison"])
CHECKS = {"counts_match_denominators", "no_secret_in_run_dirs"}


def _latest(inst: dg.DagsterInstance, key: dg.AssetKey) -> int | None:
    records = inst.fetch_materializations(key, limit=1, ascending=False).records
    return records[0].storage_id if records else None


def stale_results() -> str | None:
    """What is not current: the metrics older than the newest result, the comparison older than the
    metrics, a check not evaluated since; None when everything is current."""
    with instance() as inst:
        attempts, metrics, comparison = _latest(inst, ATTEMPTS), _latest(inst, METRICS), _latest(inst, COMPARISON)
        if metrics is None or (attempts is not None and metrics < attempts):
            return f"metrics {metrics} older than the newest attempts materialization {attempts}"
        if comparison is None or comparison < metrics:
            return f"comparison {comparison} older than metrics {metrics}"
        metrics_time = inst.fetch_materializations(METRICS, limit=1, ascending=False).records[0].timestamp
        checked = set()
        for name in CHECKS:
            history = inst.event_log_storage.get_asset_check_execution_history(dg.AssetCheckKey(METRICS, name), limit=1)
            if (
                history
                and history[0].event is not None
                and history[0].event.timestamp >= metrics_time
                and history[0].status.value in ("SUCCEEDED", "FAILED")
            ):
                checked.add(name)
        if checked != CHECKS:
            return f"checks evaluated after the metrics: {sorted(checked)}"
    return None


def unfinished_runs() -> list[str]:
    with instance() as inst:
        return [f"{run.job_name} {run.run_id} {run.status.value}" for run in inst.get_runs() if not run.is_finished]


def settled() -> bool:
    return stale_results() is None and not unfinished_runs()


def _register(n: int) -> None:
    """The task partitions exist, as the sensor or an earlier run registered them."""
    with instance() as inst:
        inst.add_dynamic_partitions("tasks__lab__synthetic", every(n))


def _start_daemon(tmp_path: Path, sweep: Path, stop_group: Any) -> subprocess.Popen[bytes]:
    """A real dagster-daemon whose backfill loop runs every second (Dagster's is 30 s: a backfill of
    three steps would take over a minute), and whose automation sensor ticks every 2 s (30 s by default:
    the metrics after a backfill would come too late for a bounded wait)."""
    _fast_queue_home(Path(os.environ["DAGSTER_HOME"]))
    log = open(tmp_path / "daemon.log", "wb")
    env = {**os.environ, "AGENTCOMPASS_SWEEPS": str(sweep), AUTOMATION_INTERVAL_ENV: "2"}
    code = (
        "from agentcompass_dagster.defs.dagster_internals import run_daemon; "
        f"run_daemon(['run', '-w', {str(_workspace(tmp_path, sweep))!r}], 1)"
    )
    daemon = subprocess.Popen(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, stdout=log, stderr=log, start_new_session=True
    )
    stop_group(daemon)
    wait_until(_queue_daemon_alive, "the daemon's first heartbeat", proc=daemon, log=tmp_path / "daemon.log")
    return daemon


def _backfill(sweep: Path, asset_keys: list[dg.AssetKey], partitions: list[str] | None) -> str:
    with instance() as inst:
        return create_asset_backfill(inst, sweep_definitions(load_sweep(sweep)), asset_keys, partitions)


def _backfill_done(backfill_id: str) -> str | None:
    with instance() as inst:
        status = backfill_status(inst, backfill_id)
    return status if status not in (None, "REQUESTED") else None


def _describe() -> dict[str, Any]:
    return {"stale": stale_results(), "unfinished": unfinished_runs(), "materialized": sorted(materialization_counts())}


def test_a_ui_backfill_of_some_attempts_partitions_is_few_runs_and_ends_with_current_metrics(
    tmp_path: Path, stop_group: Any
) -> None:
    """A backfill of three attempts partitions (two apart), as the UI creates it, executed by a real
    backfill daemon: it succeeds in at most two runs (the evaluation's backfill policy), evaluates
    each of its tasks once, and the metrics, comparison and checks (not in the backfill) become current
    without anyone asking; a later `agentcompass run` evaluates only the other tasks."""
    sweep = engine_sweep(tmp_path)
    _register(6)
    daemon = _start_daemon(tmp_path, sweep, stop_group)
    backfill = _backfill(sweep, [ATTEMPTS], ["m1|t1", "m1|t2", "m1|t4"])
    status = wait_until(
        lambda: _backfill_done(backfill),
        "the backfill to end",
        proc=daemon,
        log=tmp_path / "daemon.log",
        describe=_describe,
    )
    assert status == "COMPLETED_SUCCESS"
    wait_until(
        settled,
        "the metrics, comparison and checks to be current",
        proc=daemon,
        log=tmp_path / "daemon.log",
        describe=_describe,
    )
    with instance() as inst:
        backfill_runs = inst.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill}))
        assert inst.get_materialized_partitions(ATTEMPTS) == keys("t1", "t2", "t4")
    assert 1 <= len(backfill_runs) <= 2
    assert harness_calls(tmp_path) == Counter(["t1", "t2", "t4"])
    assert run_cli("run", sweep) == 0
    assert harness_calls(tmp_path) == Counter(every(6))
    assert materialization_counts() == Counter(keys(*every(6)))
    assert stale_results() is None


def test_materialize_all_over_a_partly_finished_sweep_succeeds_with_every_result_current(
    tmp_path: Path, stop_group: Any
) -> None:
    """ "Materialize all" (an asset backfill of every materializable asset: every attempts partition,
    the metrics and the comparison; the tasks are an observed source) after `agentcompass run` finished half
    of the tasks: the backfill succeeds, the finished tasks are not evaluated again (reported again, with
    their result's metadata and ``reused``), the others once, and it runs the metrics, comparison and checks
    itself after the last result."""
    assert run_cli("run", engine_sweep(tmp_path, n=3)) == 0
    sweep = engine_sweep(tmp_path)  # the same sweep, its source grown to six tasks
    _register(6)
    daemon = _start_daemon(tmp_path, sweep, stop_group)
    backfill = _backfill(sweep, [ATTEMPTS, METRICS, COMPARISON], None)
    status = wait_until(
        lambda: _backfill_done(backfill),
        "the backfill to end",
        proc=daemon,
        log=tmp_path / "daemon.log",
        describe=_describe,
    )
    assert status == "COMPLETED_SUCCESS"
    wait_until(settled, "every result to be current", proc=daemon, log=tmp_path / "daemon.log", describe=_describe)
    assert harness_calls(tmp_path) == Counter(every(6))
    with instance() as inst:
        assert inst.get_materialized_partitions(ATTEMPTS) == keys(*every(6))
        metrics = inst.get_latest_materialization_event(METRICS)
        assert metrics is not None and inst.get_run_by_id(metrics.run_id).tags.get("dagster/backfill") == backfill  # type: ignore[union-attr]
        (again,) = inst.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=ATTEMPTS, asset_partitions=["m1|t0"]), limit=1
        ).records
        shown = {name: value.value for name, value in again.asset_materialization.metadata.items()}  # type: ignore[union-attr]
        assert inst.get_run_by_id(again.run_id).tags.get("dagster/backfill") == backfill  # type: ignore[union-attr]
        assert shown["reused"] is True and shown["score"] == 1.0 and Path(shown["detail"]).name.startswith("t0")


def _dagster(tmp_path: Path, sweep: Path, *args: str) -> None:
    env = {**os.environ, "AGENTCOMPASS_SWEEPS": str(sweep)}
    proc = subprocess.run(
        [DAGSTER, *args[:2], "-m", "agentcompass_dagster.definitions", "-a", "defs", *args[2:]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=55,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_asset_materialize_of_a_partition_range_with_the_metrics_is_one_complete_run(tmp_path: Path) -> None:
    """`dagster asset materialize --partition-range` of the attempts with the metrics and the comparison
    (Dagster's CLI runs a range only when every selected asset has a single-run backfill policy):
    one run materializes the range and leaves the metrics, comparison and checks current."""
    sweep = engine_sweep(tmp_path)
    _register(6)
    _dagster(
        tmp_path,
        sweep,
        "asset",
        "materialize",
        "--select",
        "lab/synthetic/attempts,lab/synthetic/metrics,lab/synthetic/comparison",
        "--partition-range",
        "m1|t1...m1|t3",
    )
    with instance() as inst:
        assert len(inst.get_runs()) == 1
        assert inst.get_materialized_partitions(ATTEMPTS) == keys("t1", "t2", "t3")
    assert harness_calls(tmp_path) == Counter(["t1", "t2", "t3"])
    assert stale_results() is None


def test_asset_materialize_of_the_attempts_alone_gets_current_metrics_from_the_daemon(
    tmp_path: Path, stop_group: Any
) -> None:
    """`dagster asset materialize --partition-range` of the attempts alone: the metrics are not in
    its run, and the daemon brings them, the comparison and the checks up to date after it."""
    sweep = engine_sweep(tmp_path)
    _register(6)
    daemon = _start_daemon(tmp_path, sweep, stop_group)
    _dagster(
        tmp_path,
        sweep,
        "asset",
        "materialize",
        "--select",
        "lab/synthetic/attempts",
        "--partition-range",
        "m1|t0...m1|t2",
    )
    wait_until(
        settled,
        "the metrics, comparison and checks to be current",
        proc=daemon,
        log=tmp_path / "daemon.log",
        describe=_describe,
    )
    assert harness_calls(tmp_path) == Counter(["t0", "t1", "t2"])
    assert materialization_counts() == Counter(keys("t0", "t1", "t2"))


def test_the_sweeps_job_launched_with_and_without_a_partition_completes_the_sweep(tmp_path: Path) -> None:
    """The sweep's job launched the way a launchRun without a partition selection does (no partition
    tags: the whole sweep) and with one partition (`dagster/partition`): each run succeeds, the first
    evaluates its one task, the second every other one, and each leaves every result current."""
    sweep = engine_sweep(tmp_path)
    _register(6)
    _dagster(tmp_path, sweep, "job", "execute", "-j", JOB, "--tags", json.dumps({"dagster/partition": "m1|t2"}))
    assert materialization_counts() == Counter(keys("t2"))
    assert stale_results() is None
    _dagster(tmp_path, sweep, "job", "execute", "-j", JOB)
    assert harness_calls(tmp_path) == Counter(every(6))
    assert materialization_counts() == Counter(keys(*every(6)))
    assert stale_results() is None
    with instance() as inst:
        assert all(run.status == dg.DagsterRunStatus.SUCCESS for run in inst.get_runs())


def test_agentcompass_run_beside_a_backfill_launches_nothing_the_backfill_covers(
    tmp_path: Path, stop_group: Any
) -> None:
    """While a backfill's run evaluates four tasks (held at a gate), `agentcompass run` of the same
    sweep launches runs only for the two the backfill does not cover, follows the backfill's run to its
    end, and every task is evaluated and materialized once."""
    gate = tmp_path / "gate"
    sweep = engine_sweep(tmp_path, tasks={task: {"oracle": True, "gate": str(gate)} for task in every(6)})
    _register(6)
    daemon = _start_daemon(tmp_path, sweep, stop_group)
    backfill = _backfill(sweep, [ATTEMPTS], [f"m1|{task}" for task in every(4)])
    wait_until(
        lambda: harness_calls(tmp_path)["t0"],
        "the backfill's run to start t0",
        proc=daemon,
        log=tmp_path / "daemon.log",
    )
    proc = cli(tmp_path, "run", str(sweep))
    stop_group(proc)
    wait_until(lambda: harness_calls(tmp_path)["t4"], "the CLI's run to start t4", proc=proc)
    gate.touch()
    assert finish(proc) == 0
    wait_until(lambda: _backfill_done(backfill), "the backfill to end", proc=daemon, log=tmp_path / "daemon.log")
    wait_until(settled, "every result to be current", proc=daemon, log=tmp_path / "daemon.log", describe=_describe)
    assert harness_calls(tmp_path) == Counter(every(6))
    assert materialization_counts() == Counter(keys(*every(6)))
    with instance() as inst:
        cli_runs = inst.get_runs(dg.RunsFilter(job_name=JOB))
    covered = [run.tags for run in cli_runs if run.tags.get("dagster/asset_partition_range_start") == "m1|t0"]
    assert not covered, covered


def test_a_ui_backfill_is_split_into_runs_of_max_partitions_per_run(tmp_path: Path, stop_group: Any) -> None:
    """Issue 39: "Materialize all" of the attempts, as the UI creates it, of a sweep declaring
    max_partitions_per_run 2: the backfill daemon runs 6 partitions as 3 runs of 2 (the evaluation's
    BackfillPolicy.multi_run), not one run of 6; each task evaluated once, the metrics current after."""
    sweep = engine_sweep(tmp_path, dagster={"max_partitions_per_run": 2})
    _register(6)
    daemon = _start_daemon(tmp_path, sweep, stop_group)
    backfill = _backfill(sweep, [ATTEMPTS], None)
    status = wait_until(
        lambda: _backfill_done(backfill),
        "the backfill to end",
        proc=daemon,
        log=tmp_path / "daemon.log",
        describe=_describe,
    )
    assert status == "COMPLETED_SUCCESS"
    with instance() as inst:
        runs = inst.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill}))
        spans = sorted(
            (run.tags["dagster/asset_partition_range_start"], run.tags["dagster/asset_partition_range_end"])
            for run in runs
        )
    assert spans == [("m1|t0", "m1|t1"), ("m1|t2", "m1|t3"), ("m1|t4", "m1|t5")]
    assert harness_calls(tmp_path) == Counter(every(6))
    wait_until(
        settled,
        "the metrics, comparison and checks to be current",
        proc=daemon,
        log=tmp_path / "daemon.log",
        describe=_describe,
    )
