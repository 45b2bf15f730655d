"""A run worker killed while its finished tasks' events still wait to be written (the SQLite event log
writes a step's per-task events a batch at a time, defs/dagster_internals.py BatchedAssetEvents): those
events are lost with the process, and the next run reports the tasks from their detail files instead of
running them again (issue 39, "Cost")."""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import run_cli
from test_dagster_engine import cli, engine_sweep, every, harness_calls, keys, materialization_counts, stop_group
from waiting import wait_until

__all__ = ["stop_group"]  # the fixture, shared with test_dagster_engine.py

# Loaded by every Python process of `agentcompass run` (CLI and run worker): the events wait for ever
# unless another event comes, so the kill finds them waiting.
SITECUSTOMIZE = """\
from agentcompass_dagster.defs import dagster_internals
dagster_internals.ASSET_EVENT_WAIT_S = 3600.0
"""


def details(tmp_path: Path) -> set[str]:
    return {path.name.split("_")[0] for path in (tmp_path / "results").glob("lab/synthetic/m1/*/details/t*.json")}


def test_a_kill_loses_waiting_events_and_the_next_run_reports_their_tasks_without_running_them(
    tmp_path: Path, stop_group: Callable[[Any], None]
) -> None:
    """issue 39: SIGKILL of `agentcompass run` (CLI and run worker) once t0-t2 finished, their detail files
    written and their materializations still waiting: none of them is materialized; the next run
    materializes all six tasks, running only those without a detail (t3, cut off, and t4-t5) and
    reporting t0-t2 from their details (the harness started each of them once)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    gate = tmp_path / "gate"
    sweep = engine_sweep(
        tmp_path,
        tasks={f"t{i}": {"oracle": True, "gate": str(gate)} for i in range(3, 6)},
        execution={"limits": {"task_concurrency": 1}},
    )
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    proc = cli(tmp_path, "run", str(sweep), env={"PYTHONPATH": path})
    stop_group(proc)
    wait_until(
        lambda: harness_calls(tmp_path)["t3"] == 1 and details(tmp_path) == {"t0", "t1", "t2"},
        "t3 to start after t0-t2 wrote their details",
        proc=proc,
    )
    assert materialization_counts() == Counter(), "the finished tasks' events were written, not waiting"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert materialization_counts() == Counter()
    gate.touch()
    assert run_cli("run", sweep) == 0
    calls = harness_calls(tmp_path)
    assert [calls[t] for t in every(6)] == [1, 1, 1, 2, 1, 1]
    assert materialization_counts() == Counter(keys(*every(6)))
