"""A step's per-task asset events, as the generated instance's event log writes them (issue 39, "Cost"):
together, a batch per transaction, in the order the step reported them, and each within a bounded wait,
so that the UI still shows a partition as its task ends (defs/dagster_internals.py BatchedAssetEvents)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as db
from dagster._core.event_api import EventLogRecord
from dagster._serdes import deserialize_value

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.defs import dagster_internals as internals
from agentcompass_dagster.defs.coordination import ensure_pool_limits
from agentcompass_dagster.defs.location import sweep_definitions
from agentcompass_dagster.defs.instance import ensure_dagster_home
from agentcompass_dagster.defs.sweep import sweep_benchmarks

from conftest import write_sweep

TASKS = 300
LAB_TASKS = ["create-hello", "count-errors"]
ASSET = dg.AssetKey(["batched", "attempts"])
# A tag Dagster indexes (a multi-partition dimension's), stored in a table of its own by event id.
TASK_TAG = "dagster/partition/task"
SEEN_WITHIN_S = 30.0  # a bound for a loaded machine; the storage's own wait is ASSET_EVENT_WAIT_S


@pytest.fixture
def instance(dagster_home: Path) -> Iterator[dg.DagsterInstance]:
    ensure_dagster_home(dagster_home)
    with dg.DagsterInstance.get() as inst:
        yield inst


def event_log_inserts(instance: dg.DagsterInstance) -> list[str]:
    """Every INSERT into the event log's table from now on, as the database receives it."""
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO EVENT_LOGS"):
            statements.append(statement)

    db.event.listen(instance.event_log_storage._pooled_engine(), "before_cursor_execute", seen)  # type: ignore[attr-defined]
    return statements


@dg.op
def evaluate_tasks() -> Iterator[Any]:
    for n in range(TASKS):
        yield dg.AssetMaterialization(
            ASSET, partition=f"task-{n}", metadata={"score": float(n % 2)}, tags={TASK_TAG: f"task-{n}"}
        )
    yield dg.Output(None)


@dg.job
def many_tasks() -> None:
    evaluate_tasks()


def test_a_steps_materializations_are_written_together_in_order(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 39: a step that materializes 300 partitions, one per finished task, has them written in one
    insert (the step's next event writes what waits), not one insert and two transactions each; every
    partition is materialized, in the event log in the order reported and before the step's success, and
    the asset's latest materialization is the last one."""
    # No timer in this test: only the step's next event may write what waits.
    monkeypatch.setattr(internals, "ASSET_EVENT_WAIT_S", 600.0, raising=False)
    inserts = event_log_inserts(instance)
    result = many_tasks.execute_in_process(instance=instance)
    assert result.success
    # The run's own events (start, step start, output, success, ...) are a dozen, written one at a time.
    assert len(inserts) <= 20, f"{len(inserts)} inserts into the event log for {TASKS} materializations"
    logged = instance.all_logs(result.run_id)
    kinds = [event.dagster_event_type for event in logged]
    partitions = [
        event.get_dagster_event().partition
        for event in logged
        if event.dagster_event_type == dg.DagsterEventType.ASSET_MATERIALIZATION
    ]
    assert partitions == [f"task-{n}" for n in range(TASKS)]
    assert kinds.index(dg.DagsterEventType.STEP_SUCCESS) > max(
        i for i, kind in enumerate(kinds) if kind == dg.DagsterEventType.ASSET_MATERIALIZATION
    )
    assert instance.get_materialized_partitions(ASSET) == {f"task-{n}" for n in range(TASKS)}
    # Each id stored beside an event (its tags' rows, the asset's last materialization) is that event's.
    with instance.event_log_storage.index_connection() as conn:  # type: ignore[attr-defined]
        partition_of = dict(conn.execute(db.text("SELECT id, partition FROM event_logs")).all())
        tagged = conn.execute(
            db.text("SELECT event_id, value FROM asset_event_tags WHERE key = :key"), {"key": TASK_TAG}
        ).all()
        last = conn.execute(
            db.text("SELECT last_materialization FROM asset_keys WHERE asset_key = :key"), {"key": ASSET.to_string()}
        ).scalar_one()
    assert len(tagged) == TASKS and all(partition_of[event_id] == value for event_id, value in tagged)
    assert partition_of[deserialize_value(last, EventLogRecord).storage_id] == f"task-{TASKS - 1}"
    latest = instance.get_latest_materialization_event(ASSET)
    assert latest is not None and latest.get_dagster_event().partition == f"task-{TASKS - 1}"


RELEASE = threading.Event()


@dg.op
def one_task_then_wait() -> Iterator[Any]:
    yield dg.AssetMaterialization(ASSET, partition="task-0")
    assert RELEASE.wait(SEEN_WITHIN_S), "the test never saw the materialization"
    yield dg.Output(None)


@dg.job
def one_task_running() -> None:
    one_task_then_wait()


def test_a_finished_tasks_partition_shows_while_its_step_still_runs(instance: dg.DagsterInstance) -> None:
    """issue 39: batching keeps the UI live: a task's partition is materialized in the instance while
    its step is still running (waiting here for the test), within the storage's bounded wait."""
    RELEASE.clear()
    outcome: list[bool] = []
    runner = threading.Thread(
        target=lambda: outcome.append(
            one_task_running.execute_in_process(instance=instance, raise_on_error=False).success
        )
    )
    runner.start()
    deadline = time.monotonic() + SEEN_WITHIN_S
    try:
        while "task-0" not in instance.get_materialized_partitions(ASSET) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "task-0" in instance.get_materialized_partitions(ASSET), "not shown while its step runs"
        assert runner.is_alive(), "the step ended before the partition showed"
    finally:
        RELEASE.set()
        runner.join(SEEN_WITHIN_S)
    assert outcome == [True]


def test_the_metrics_record_the_attempts_their_own_step_reported(
    instance: dg.DagsterInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 39: in the step that evaluates a range of partitions and then computes the metrics, the
    metrics' output event (stored before their materialization) writes the attempts' waiting events, so
    the metrics' provenance (what the UI's "unsynced" reads) names the attempts' newest materialization,
    not an older one or none. No timer in this test: only the step's own events may write them."""
    monkeypatch.setattr(internals, "ASSET_EVENT_WAIT_S", 600.0)
    sweep = load_sweep(
        write_sweep(
            tmp_path,
            name="lab",
            benchmarks=[{"id": "demo", "tasks": LAB_TASKS}],
            models=[{"id": "m1", "provider": "none"}],
        )
    )
    (benchmark,) = sweep_benchmarks(sweep)
    defs = sweep_definitions(sweep)
    instance.add_dynamic_partitions(benchmark.partitions_name, list(benchmark.task_keys))
    ensure_pool_limits(benchmark, instance)
    keys = [f"{model}|{task}" for model in benchmark.model_keys for task in benchmark.task_keys]
    evaluate = next(
        a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition) and benchmark.key("metrics") in a.keys
    )
    result = dg.materialize(
        [evaluate],
        selection=[benchmark.key("attempts"), benchmark.key("metrics")],
        instance=instance,
        resources=defs.resources,
        tags={"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]},
    )
    assert result.success
    newest = instance.fetch_materializations(benchmark.key("attempts"), limit=1).records[0]
    metrics = instance.fetch_materializations(benchmark.key("metrics"), limit=1).records[0]
    tags = metrics.asset_materialization.tags or {}  # type: ignore[union-attr]
    pointer = f"dagster/input_event_pointer/{benchmark.key('attempts').to_user_string()}"
    assert tags.get(pointer) == str(newest.storage_id), tags
