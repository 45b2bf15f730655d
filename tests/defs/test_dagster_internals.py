"""Every private Dagster API the package uses (defs/dagster_internals.py), one test each: what the
package relies on it for, so that a Dagster upgrade that moves, renames or changes one of them fails here
with its name, not somewhere deep in an engine test. And nothing else in the package imports ``dagster._``."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as db
from dagster._core.definitions.reconstruct import ReconstructableJob
from dagster._serdes import deserialize_value
from dagster._utils.concurrency import ConcurrencySlotStatus
from dagster._utils.hosted_user_process import recon_job_from_origin

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.defs import dagster_internals as internals
from agentcompass_dagster.defs.code_location import LOCATION_MODULE, LOCATION_NAME, set_sweep_files
from agentcompass_dagster.defs.location import sweep_definitions
from agentcompass_dagster.defs.instance import ensure_dagster_home
from agentcompass_dagster.defs.jobs import sweep_job
from agentcompass_dagster.defs.run_launcher import RunWorkerLauncher, worker_command
from agentcompass_dagster.defs.run_owners import record_owner
from agentcompass_dagster.defs.sweep import sweep_benchmarks
from agentcompass_dagster.launcher.runs import RunFactory
from agentcompass_dagster.runtime.store.processes import ProcessId

from conftest import REPO, write_sweep

PACKAGE = REPO / "agentcompass_dagster"
INTERNALS = PACKAGE / "defs" / "dagster_internals.py"
YAML_PRIVATE_MODULE = re.compile(r"module:\s*['\"]?dagster\._")


@pytest.fixture
def instance(dagster_home: Path) -> Iterator[dg.DagsterInstance]:
    """The generated instance (dagster.yaml as `agentcompass` writes it) in this test's DAGSTER_HOME."""
    ensure_dagster_home(dagster_home)
    with dg.DagsterInstance.get() as inst:
        yield inst


@dg.op
def noop() -> None:
    pass


@dg.job
def tiny() -> None:
    noop()


def spy(monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> list[tuple[Any, ...]]:
    """Record every call of ``owner.name`` (still calling it): proves Dagster calls the method at all."""
    calls: list[tuple[Any, ...]] = []
    original: Callable[..., Any] = getattr(owner, name)

    def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append((*args, *kwargs.values()))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(owner, name, recorded)
    return calls


def test_nothing_outside_dagster_internals_uses_a_private_dagster_module() -> None:
    """No module of the package but dagster_internals.py imports ``dagster._``, and no YAML it writes
    names a ``dagster._`` module (a plugin class loaded by the instance is an import too)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == INTERNALS:
            continue
        text = path.read_text()
        for node in ast.walk(ast.parse(text, str(path))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            found += [
                f"{path.relative_to(REPO)}:{node.lineno}: import {name}"  # type: ignore[attr-defined]
                for name in names
                if name.startswith("dagster._")
            ]
        found += [f"{path.relative_to(REPO)}: {match.group(0)}" for match in YAML_PRIVATE_MODULE.finditer(text)]
    assert found == [], "private Dagster APIs belong in defs/dagster_internals.py:\n" + "\n".join(found)


def test_the_generated_instance_runs_our_launcher_and_its_health_check_fails_a_dead_worker(
    instance: dg.DagsterInstance,
) -> None:
    """RunLauncher, ConfigurableClass(Data), LaunchRunContext, CheckRunHealthResult, WorkerStatus:
    dagster.yaml's run_launcher loads RunWorkerLauncher as the instance's launcher (bound to it), a run
    whose worker died is FAILED (run monitoring then fails it), one whose worker lives is RUNNING, and
    launch_run reads the run from Dagster's launch context."""
    launcher = instance.run_launcher
    assert isinstance(launcher, RunWorkerLauncher)
    assert isinstance(launcher, internals.RunLauncher) and isinstance(launcher, internals.ConfigurableClass)
    assert isinstance(launcher.inst_data, internals.ConfigurableClassData)
    assert (launcher.inst_data.module_name, launcher.inst_data.class_name) == (
        "agentcompass_dagster.defs.run_launcher",
        "RunWorkerLauncher",
    )
    assert launcher._instance is instance
    assert launcher.supports_check_run_worker_health

    run = instance.create_run_for_job(tiny, status=dg.DagsterRunStatus.STARTED)
    record_owner(instance, run.run_id, "worker", ProcessId.this())
    alive = launcher.check_run_worker_health(run)
    assert isinstance(alive, internals.CheckRunHealthResult) and alive.status == internals.WorkerStatus.RUNNING

    gone = subprocess.Popen(["sleep", "60"])
    record_owner(instance, run.run_id, "worker", ProcessId.of(gone.pid))
    gone.kill()
    gone.wait()
    dead = launcher.check_run_worker_health(run)
    assert dead.status == internals.WorkerStatus.FAILED and dead.msg and "is gone" in dead.msg

    # A run built without a code origin (as here, in-process) is refused by name: the launcher got it
    # from the context's dagster_run.
    with pytest.raises(ValueError, match=f"run {run.run_id} has no code origin"):
        launcher.launch_run(internals.LaunchRunContext(dagster_run=run, workspace=None))  # type: ignore[arg-type]


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    sweep = write_sweep(
        tmp_path,
        name="lab",
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 2}}],
        models=[{"id": "m1", "provider": "none"}],
    )
    set_sweep_files([sweep])
    return sweep


def test_a_run_gets_origins_its_worker_can_load_without_a_code_server(
    instance: dg.DagsterInstance, lab: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LoadableTargetOrigin, InProcessCodeLocationOrigin, RemoteRepositoryOrigin, RemoteJobOrigin,
    SINGLETON_REPOSITORY_NAME, ReconstructableRepository, ModuleCodePointer,
    get_python_environment_entry_point: a run of RunFactory names the `agentcompass` location's job (the
    UI finds it to re-execute) and has a code origin from which Dagster's run worker (`dagster api
    execute_run` loads it with recon_job_from_origin) rebuilds the sweep's job with this interpreter."""
    monkeypatch.setattr(os, "getcwd", lambda: str(lab.parent))
    sweep = load_sweep(lab)
    (benchmark,) = sweep_benchmarks(sweep)
    run = RunFactory(instance, sweep_definitions(sweep)).create(benchmark, {"agentcompass/test": "origins"})
    remote = run.remote_job_origin
    assert remote is not None and isinstance(remote, internals.RemoteJobOrigin)
    assert (remote.location_name, remote.repository_origin.repository_name, remote.job_name) == (
        LOCATION_NAME,
        internals.SINGLETON_REPOSITORY_NAME,
        benchmark.job_name,
    )
    location = remote.repository_origin.code_location_origin
    assert isinstance(location, internals.InProcessCodeLocationOrigin)
    assert isinstance(location.loadable_target_origin, internals.LoadableTargetOrigin)
    assert (location.loadable_target_origin.module_name, location.loadable_target_origin.attribute) == (
        LOCATION_MODULE,
        "defs",
    )

    origin = run.job_code_origin
    assert origin is not None and origin.executable_path == sys.executable
    assert origin.repository_origin.entry_point == [sys.executable, "-m", "dagster"]
    pointer = origin.repository_origin.code_pointer
    assert isinstance(pointer, internals.ModuleCodePointer)
    assert (pointer.module, pointer.fn_name, pointer.working_directory) == (LOCATION_MODULE, "defs", str(lab.parent))
    job = recon_job_from_origin(origin)
    assert isinstance(job, ReconstructableJob) and job.get_definition().name == benchmark.job_name


def test_execute_run_args_and_execute_run_still_run_a_run(instance: dg.DagsterInstance, lab: Path) -> None:
    """ExecuteRunArgs and execute_run: the run worker's command passes Dagster's serialized
    ExecuteRunArgs to defs/run_worker.py with the code's interpreter, and execute_run (what `dagster api
    execute_run` does, through Dagster's private command body) executes the run to SUCCESS."""
    sweep = load_sweep(lab)
    (benchmark,) = sweep_benchmarks(sweep)
    run = RunFactory(instance, sweep_definitions(sweep)).create(benchmark, {}, {benchmark.key("comparison")})
    assert run.job_code_origin is not None
    args = internals.ExecuteRunArgs(
        job_origin=run.job_code_origin,
        run_id=run.run_id,
        instance_ref=instance.get_ref(),
        set_exit_code_on_failure=True,
    )
    command = worker_command(sys.executable, args)
    assert command[:3] == [sys.executable, "-m", "agentcompass_dagster.defs.run_worker"], command
    sent = deserialize_value(command[-1], internals.ExecuteRunArgs)
    assert (sent.run_id, sent.job_origin, sent.set_exit_code_on_failure) == (run.run_id, run.job_code_origin, True)
    assert internals.execute_run(command[-1]) == 0
    finished = instance.get_run_by_id(run.run_id)
    assert finished is not None and finished.status == dg.DagsterRunStatus.SUCCESS


def test_atomic_slot_claims_is_the_claim_dagster_makes(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AtomicSlotClaims (and ConcurrencySlotsTable, ConcurrencySlotStatus): Dagster's
    claim_concurrency_slot still takes the slot through the overridden _claim_concurrency_slot, and on a
    pool of one the first claim holds the slot and the second is blocked."""
    storage = instance.event_log_storage
    assert isinstance(storage, internals.AtomicSlotClaims)
    calls = spy(monkeypatch, internals.AtomicSlotClaims, "_claim_concurrency_slot")
    storage.set_concurrency_slots("one", 1)
    first = storage.claim_concurrency_slot("one", "run-a", "step-a")
    second = storage.claim_concurrency_slot("one", "run-b", "step-b")
    assert calls == [("one", "run-a", "step-a")], "Dagster no longer claims a slot through _claim_concurrency_slot"
    assert first.slot_status == ConcurrencySlotStatus.CLAIMED and first.is_claimed
    assert second.slot_status == ConcurrencySlotStatus.BLOCKED and not second.is_claimed
    assert [slot.run_id for slot in storage.get_concurrency_info("one").claimed_slots] == ["run-a"]
    storage.free_concurrency_slot_for_step("run-a", "step-a")
    assert storage.claim_concurrency_slot("one", "run-b", "step-b").is_claimed


def test_remembered_columns_reflects_the_asset_table_once(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RememberedColumns: Dagster still asks _has_asset_key_col_on_connection on every materialization;
    the override answers from memory after the first reflection of each column."""
    storage = instance.event_log_storage
    assert isinstance(storage, internals.RememberedColumns)
    parent = next(
        cls
        for cls in type(storage).__mro__[1:]
        if cls is not internals.RememberedColumns and "_has_asset_key_col_on_connection" in cls.__dict__
    )
    asked = spy(monkeypatch, internals.RememberedColumns, "_has_asset_key_col_on_connection")
    reflected = spy(monkeypatch, parent, "_has_asset_key_col_on_connection")
    for _ in range(3):
        instance.report_runless_asset_event(dg.AssetMaterialization("remembered"))
    asked_columns = [column for _, column in asked]
    assert len(asked_columns) >= 3, "Dagster no longer asks _has_asset_key_col_on_connection per event"
    assert sorted(column for _, column in reflected) == sorted(set(asked_columns))
    assert instance.get_latest_materialization_event(dg.AssetKey("remembered")) is not None


def test_pooled_sqlite_connections_serve_every_connection_dagster_opens(instance: dg.DagsterInstance) -> None:
    """PooledSqliteConnections (over ConsolidatedSqliteEventLogStorage, with SQLITE_BUSY_TIMEOUT_SECONDS):
    Dagster's storage still opens its connections through _connect, all of them checked out of one pooled
    engine in write-ahead-log mode, never more open than the pool holds; dispose releases the engine."""
    storage = instance.event_log_storage
    assert isinstance(storage, internals.PooledSqliteConnections)
    assert isinstance(storage, internals.ConsolidatedSqliteEventLogStorage)
    engine = storage._pooled_engine()
    checkouts: list[object] = []
    connects: list[object] = []
    db.event.listen(engine, "checkout", lambda *args: checkouts.append(args))
    db.event.listen(engine, "connect", lambda *args: connects.append(args))
    for _ in range(5):
        instance.report_runless_asset_event(dg.AssetMaterialization("pooled"))
    assert instance.get_latest_materialization_event(dg.AssetKey("pooled")) is not None
    assert len(checkouts) >= 5, "Dagster's event log no longer connects through _connect"
    assert len(connects) <= internals.POOL_SIZE
    with storage._connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.engine is engine
    storage.dispose()
    assert storage._engine is None


@pytest.mark.parametrize("instance_kind", ["postgres"], indirect=True)
def test_pool_postgres_engine_gives_dagster_postgres_a_pool(instance_kind: str, instance: dg.DagsterInstance) -> None:
    """pool_postgres_engine: dagster-postgres's event log still keeps its engine in ``_engine``, built by
    create_pg_engine; after the swap every event goes through one QueuePool that keeps its connections."""
    storage = instance.event_log_storage
    engine = storage._engine  # type: ignore[attr-defined]
    assert isinstance(engine.pool, db.pool.QueuePool) and engine.pool.size() == internals.POOL_SIZE
    connects: list[object] = []
    checkouts: list[object] = []
    db.event.listen(engine, "connect", lambda *args: connects.append(args))
    db.event.listen(engine, "checkout", lambda *args: checkouts.append(args))
    for _ in range(5):
        instance.report_runless_asset_event(dg.AssetMaterialization("pooled"))
    assert len(checkouts) >= 5 and len(connects) <= internals.POOL_SIZE


def test_a_directly_built_asset_context_has_no_run() -> None:
    """DagsterInvalidPropertyError: what context.run raises for an asset invoked directly, which
    coordination.py takes as "no run to record a worker for"."""
    with pytest.raises(internals.DagsterInvalidPropertyError):
        dg.build_asset_context().run


def test_define_asset_job_returns_an_unresolved_asset_job(lab: Path) -> None:
    """UnresolvedAssetJobDefinition: what define_asset_job returns (the type of the job the schedule and
    the sensor target), and the sweep's job resolves to its definition's job."""
    (benchmark,) = sweep_benchmarks(load_sweep(lab))
    job = sweep_job(benchmark)
    assert isinstance(job, internals.UnresolvedAssetJobDefinition)
    assert sweep_definitions(load_sweep(lab)).resolve_job_def(job.name).name == benchmark.job_name


def test_a_new_runs_planned_events_are_stored_in_one_batch(
    instance: dg.DagsterInstance, lab: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BatchedAssetEvents: with DAGSTER_EVENT_BATCH_SIZE set (as `agentcompass` sets it), Dagster still
    hands a new run's per-partition planned events to store_event_batch together, and they are all
    stored, one per partition (the UI's Materializing count reads them), the asset's last run is the run."""
    monkeypatch.setenv("DAGSTER_EVENT_BATCH_SIZE", "10000")
    monkeypatch.setattr(os, "getcwd", lambda: str(lab.parent))
    calls = spy(monkeypatch, internals.BatchedAssetEvents, "store_event_batch")
    sweep = load_sweep(lab)
    (benchmark,) = sweep_benchmarks(sweep)
    instance.add_dynamic_partitions(benchmark.partitions_name, list(benchmark.task_keys))
    keys = [f"{model}|{task}" for model in benchmark.model_keys for task in benchmark.task_keys]
    run = RunFactory(instance, sweep_definitions(sweep)).create(
        benchmark, {"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]}
    )
    planned = [
        event.get_dagster_event()
        for event in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED)
    ]
    attempts = [event.partition for event in planned if event.asset_key == benchmark.key("attempts")]
    assert sorted(attempts) == sorted(keys) and len(keys) == 2
    (batch,) = [call[0] for call in calls]
    assert [
        e for e in batch if e.get_dagster_event().event_type == dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED
    ] == instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED)
    assert instance.get_latest_planned_materialization_info(benchmark.key("attempts")).run_id == run.run_id  # type: ignore[union-attr]


def test_a_step_blocked_on_a_pool_waits_before_asking_again(
    instance: dg.DagsterInstance, lab: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """InstanceConcurrencyContext and pending_claim_wait: a step whose pool is full is told to wait
    before it claims again. Dagster 1.13's own answer is never above 0 (a run worker blocked on a pool
    spins, measured at half a core); when an upgrade fixes that, the first assertion fails and the
    run worker's patch can go."""
    monkeypatch.setattr(os, "getcwd", lambda: str(lab.parent))
    sweep = load_sweep(lab)
    (benchmark,) = sweep_benchmarks(sweep)
    run = RunFactory(instance, sweep_definitions(sweep)).create(benchmark, {})
    instance.event_log_storage.set_concurrency_slots("full", 1)
    assert instance.event_log_storage.claim_concurrency_slot("full", "another-run", "its-step").is_claimed
    with internals.InstanceConcurrencyContext(instance, run) as context:
        assert not context.claim("full", "blocked-step")
        assert internals.DAGSTERS_PENDING_CLAIM_WAIT(context) <= 0, "Dagster now waits itself"
        assert 0 < internals.pending_claim_wait(context) <= 15
