"""Every wait of `agentcompass run` ends, and none ends with a false "done" (issue 39): a run started
while a UI backfill targets the sweep's partitions follows the backfill, names it and ends with every
partition evaluated once; a run following another's run whose worker was SIGKILLed fails that run
(Dagster's run monitoring's judgement) instead of waiting for ever; a sweep split into runs computes
its metrics once."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._daemon.types import DaemonHeartbeat


from conftest import run_cli
from test_dagster_engine import (
    ATTEMPTS,
    METRICS,
    SWEEP,
    cli,
    engine_sweep,
    every,
    finish,
    gated_run,
    harness_calls,
    instance,
    keys,
    materialization_counts,
    stop_group,
)
from test_materialize_paths import _backfill, _register, _start_daemon
from waiting import wait_until

__all__ = ["stop_group"]


def _log(proc_log: Path) -> str:
    return proc_log.read_text(errors="replace")


def _cli_log(tmp_path: Path) -> Path:
    (log,) = sorted(tmp_path.glob("cli-*.log"))
    return log


def test_daemon_alive_reads_fresh_heartbeats_only(tmp_path: Path) -> None:
    """daemon_alive (issue 39): no daemon ever ran: not alive; a fresh heartbeat: alive; a heartbeat
    older than two of Dagster's 30 s intervals (a daemon that was killed): not alive."""
    from agentcompass_dagster.launcher.follow import HEARTBEAT_S, QUEUE_DAEMON, daemon_alive

    with instance() as inst:
        assert daemon_alive(inst, QUEUE_DAEMON) is False
        inst.add_daemon_heartbeat(DaemonHeartbeat(time.time(), QUEUE_DAEMON, "test", errors=[]))
        assert daemon_alive(inst, QUEUE_DAEMON) is True
        inst.add_daemon_heartbeat(DaemonHeartbeat(time.time() - HEARTBEAT_S - 1, QUEUE_DAEMON, "test", errors=[]))
        assert daemon_alive(inst, QUEUE_DAEMON) is False


def test_a_cli_run_during_a_ui_backfill_follows_it_and_never_says_done_early(tmp_path: Path, stop_group: Any) -> None:
    """Issue 39: `agentcompass run` started while a UI backfill targets every partition of the
    sweep, before the backfill's first run exists (no daemon yet): it launches nothing of its own, says
    it waits for that backfill by id, follows it once a daemon runs it, and exits 0 with every task
    evaluated once, every partition materialized once and the metrics current; it never prints
    "Nothing to run"."""
    sweep = engine_sweep(tmp_path)
    _register(6)
    backfill = _backfill(sweep, [ATTEMPTS], None)
    proc = cli(tmp_path, "run", str(sweep))
    stop_group(proc)
    log = _cli_log(tmp_path)
    wait_until(
        lambda: f"backfill {backfill}" in _log(log), "the CLI to name the backfill it waits for", proc=proc, log=log
    )
    with instance() as inst:
        assert inst.get_runs() == []  # the backfill has no run yet, and the CLI launched none
    daemon = _start_daemon(tmp_path, sweep, stop_group)
    assert finish(proc) == 0, _log(log)
    output = _log(log)
    assert "Nothing to run" not in output and f"followed backfill(s) {backfill}" in output
    assert harness_calls(tmp_path) == Counter(every(6))
    assert materialization_counts() == Counter(keys(*every(6)))
    with instance() as inst:
        metrics = inst.fetch_materializations(METRICS, limit=1, ascending=False).records
        newest = inst.fetch_materializations(ATTEMPTS, limit=1, ascending=False).records
        assert metrics and metrics[0].storage_id > newest[0].storage_id
    assert daemon.poll() is None


def test_a_follower_of_a_sigkilled_leader_fails_its_run_and_stops(tmp_path: Path, stop_group: Any) -> None:
    """Issue 39: two `agentcompass run` of one sweep; the second follows the first's run. SIGKILL of the
    first's process group (launcher and run worker) once its worker exists: the second fails that run
    (its worker is gone) and exits non-zero naming it, within 60 s of the kill, instead of waiting for
    ever; the run is FAILURE in Dagster and in its run directory; the next run evaluates once each task
    that had not finished."""
    gate = tmp_path / "gate"
    sweep, leader, run, _ = gated_run(tmp_path, gate, stop_group)
    follower = cli(tmp_path, "run", str(sweep))
    stop_group(follower)
    follower_log = sorted(tmp_path.glob("cli-*.log"))[-1]
    wait_until(
        lambda: f"run {run.run_id}" in _log(follower_log),
        "the follower to name the run it follows",
        proc=follower,
        log=follower_log,
    )
    os.killpg(leader.pid, signal.SIGKILL)
    leader.wait(timeout=30)
    assert finish(follower, timeout=60) != 0
    assert "is gone" in _log(follower_log) and run.run_id in _log(follower_log)
    with instance() as inst:
        assert inst.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE  # type: ignore[union-attr]
        assert len(inst.get_runs()) == 1  # the follower launched nothing of its own
    (run_dir,) = (tmp_path / "results" / SWEEP / "synthetic" / "m1").iterdir()
    assert json.loads((run_dir / "run_info.json").read_text())["status"] == "failed"
    gate.touch()
    assert run_cli("run", sweep) == 0
    calls = harness_calls(tmp_path)
    assert [calls[t] for t in every(6)] == [1, 1, 1, 2, 1, 1]
    assert materialization_counts() == Counter(keys(*every(6)))
