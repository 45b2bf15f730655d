"""A pool's slots hold across processes: the claims of Dagster's run workers never share a slot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dagster as dg

from agentcompass_dagster.defs.instance import ensure_dagster_home
from conftest import max_open_at_once

CLAIMER = Path(__file__).with_name("pool_claimer.py")


def test_two_processes_claiming_a_pool_of_one_never_hold_it_at_once(
    tmp_path: Path, dagster_home: Path, instance_kind: str
) -> None:
    """R-LIMIT-1 across processes: two run workers, three attempts each, claim a capacity-1 pool 24
    times each; no two ever hold it at once (Dagster's own claim let both processes take one free slot:
    2 to 3 holders in most rounds, on SQLite and PostgreSQL)."""
    pool = "agentcompass/environment/one-at-a-time"
    ensure_dagster_home(dagster_home)
    with dg.DagsterInstance.get() as instance:
        instance.event_log_storage.set_concurrency_slots(pool, 1)
    spans_files = [tmp_path / f"spans-{run}.json" for run in ("a", "b")]
    workers = [
        subprocess.Popen(
            [sys.executable, str(CLAIMER), str(dagster_home), pool, f"run-{path.stem}", "3", "8", str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for path in spans_files
    ]
    assert [worker.stdout.readline() for worker in workers] == ["ready\n", "ready\n"]  # type: ignore[union-attr]
    for worker in workers:
        worker.stdin.write("go\n")  # type: ignore[union-attr]
        worker.stdin.close()  # type: ignore[union-attr]
    assert [worker.wait(timeout=50) for worker in workers] == [0, 0]
    spans = [tuple(span) for path in spans_files for span in json.loads(path.read_text())]
    assert len(spans) == 48
    assert max_open_at_once(spans) == 1
    with dg.DagsterInstance.get() as instance:
        info = instance.event_log_storage.get_concurrency_info(pool)
    assert (info.slot_count, info.claimed_slots, info.pending_steps) == (1, [], [])
