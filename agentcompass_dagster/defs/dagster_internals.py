"""Every private Dagster API this package uses, and nothing else: the one module a Dagster upgrade can
break. Each name here is used because Dagster offers no public way to do the same (say why beside it),
and each has a test that fails when an upgrade moves or changes it: in tests/defs/test_dagster_internals.py,
and for the backfill helpers (materialization paths, below) in tests/defs/test_materialize_paths.py,
which drives them the way the UI and the daemon do. Nothing outside this module imports ``dagster._``."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import dagster as dg
import sqlalchemy as db
from sqlalchemy.pool import QueuePool

# A run launcher is a plugin of the instance (dagster.yaml `run_launcher:`); its base class, its
# contexts and the configurable-class protocol are what dagster-docker and dagster-k8s build theirs on.
from dagster._core.launcher.base import (
    CheckRunHealthResult,
    LaunchRunContext,
    RunLauncher,
    WorkerStatus,
)
from dagster._serdes import ConfigurableClass
from dagster._serdes.config_class import ConfigurableClassData

# The command Dagster's own launchers give a run worker (`dagster api execute_run ARGS`).
from dagster._grpc.types import ExecuteRunArgs

# What `define_asset_job` returns, for typing the job the schedule and the sensor target.
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

# Raised by context.run when an asset is invoked directly (no run to name).
from dagster._core.errors import DagsterInvalidPropertyError

# A run's code origin that any process can load again (the run worker, a step container): the
# origins the UI's code server would give a run, built without starting a code server.
from dagster._core.code_pointer import ModuleCodePointer
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.definitions.repository_definition.valid_definitions import SINGLETON_REPOSITORY_NAME
from dagster._core.origin import get_python_environment_entry_point
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

# Asset backfills as the UI creates them, and what they target (no public API outside GraphQL).
from dagster._core.definitions.partitions.context import partition_loading_context
from dagster._core.execution.backfill import BulkActionsFilter, BulkActionStatus, PartitionBackfill

# A run's claims of pool slots, in the run worker.
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext

# The event log's own tables and statements, overridden below.
from dagster._core.storage.event_log.schema import ConcurrencySlotsTable, SqlEventLogStorageTable
from dagster._core.storage.event_log.sqlite.consolidated_sqlite_event_log import ConsolidatedSqliteEventLogStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._utils.concurrency import ConcurrencyClaimStatus, ConcurrencySlotStatus

__all__ = [
    "AtomicSlotClaims",
    "BACKFILL_NOT_DONE",
    "backfill_status",
    "backfill_targets",
    "BatchedAssetEvents",
    "CheckRunHealthResult",
    "ConfigurableClass",
    "ConfigurableClassData",
    "ConsolidatedSqliteEventLogStorage",
    "create_asset_backfill",
    "DagsterInvalidPropertyError",
    "DAGSTERS_PENDING_CLAIM_WAIT",
    "execute_run",
    "ExecuteRunArgs",
    "get_python_environment_entry_point",
    "InProcessCodeLocationOrigin",
    "InstanceConcurrencyContext",
    "LaunchRunContext",
    "LoadableTargetOrigin",
    "ModuleCodePointer",
    "pending_claim_wait",
    "pool_postgres_engine",
    "PooledSqliteConnections",
    "ReconstructableRepository",
    "RememberedColumns",
    "RemoteJobOrigin",
    "RemoteRepositoryOrigin",
    "run_daemon",
    "RunLauncher",
    "SINGLETON_REPOSITORY_NAME",
    "UnresolvedAssetJobDefinition",
    "without_partitioned_provenance",
    "WorkerStatus",
]

# The storages the mixins below go into (defs/storage.py, defs/postgres_storage.py), as their base for
# the type checker only, which then knows what their super() is; at run time they stay plain mixins.
if TYPE_CHECKING:
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage as _EventLog

    _SqliteEventLog = ConsolidatedSqliteEventLogStorage
else:
    _EventLog = _SqliteEventLog = object

POOL_SIZE = 4
POOL_RECYCLE_S = 3600


class RememberedColumns(_EventLog):
    """The asset table's columns reflected once per storage, not once per event (its schema changes
    only by migration, which restarts every process)."""

    _columns: dict[str, bool]

    def _has_asset_key_col_on_connection(self, conn: db.Connection, column_name: str) -> bool:
        columns = self.__dict__.setdefault("_columns", {})
        if column_name not in columns:
            columns[column_name] = super()._has_asset_key_col_on_connection(conn, column_name)
        return columns[column_name]


class AtomicSlotClaims(_EventLog):
    """A pool's slot claimed by one statement that takes a slot only while it is free: of two processes
    after the same slot, one updates it and the other finds it taken and stays blocked (it asks again).
    Dagster selects a free row and then updates it by id unconditionally, so two processes that pick the
    same row both hold it.

    A step also waits no longer for an assignment nobody will give it. Dagster decides whether a new
    pending step is assigned a slot before it inserts the step; a slot freed between the two assigns the
    oldest pending step then, which is not this one yet, so the step stays unassigned beside a free slot
    and is assigned only when some later holder frees (never, once the others are done: a run worker
    waited for ever, one time in eight in the two-process test under load). A blocked step that finds a
    slot nobody is assigned to assigns the next pending step in Dagster's order, and asks again."""

    def claim_concurrency_slot(
        self, concurrency_key: str, run_id: str, step_key: str, priority: int | None = None
    ) -> ConcurrencyClaimStatus:
        parent: Any = super()
        status: ConcurrencyClaimStatus = parent.claim_concurrency_slot(concurrency_key, run_id, step_key, priority)
        storage: Any = self
        if not status.is_assigned and storage.has_unassigned_slots(concurrency_key):
            storage.assign_pending_steps([concurrency_key])
            status = parent.claim_concurrency_slot(concurrency_key, run_id, step_key, priority)
        return status

    def _claim_concurrency_slot(self, concurrency_key: str, run_id: str, step_key: str) -> ConcurrencySlotStatus:
        slots = ConcurrencySlotsTable.c
        free = db.and_(slots.concurrency_key == concurrency_key, slots.step_key.is_(None), slots.deleted.is_(False))
        one_free = db.select(slots.id).where(free).limit(1).scalar_subquery()
        with self.index_connection() as conn:
            taken = conn.execute(
                ConcurrencySlotsTable.update()
                .values(run_id=run_id, step_key=step_key)
                .where(db.and_(slots.id == one_free, free))
            ).rowcount
        return ConcurrencySlotStatus.CLAIMED if taken else ConcurrencySlotStatus.BLOCKED


# How long a finished task's event may wait to be written together with the ones after it (the UI and
# `agentcompass run` show the partition that much later), and the most events written at once.
ASSET_EVENT_WAIT_S = 0.25
ASSET_EVENTS_PER_WRITE = 500
# The events a running step reports per partition: a materialization or an observation per task.
BUFFERED_EVENTS = {dg.DagsterEventType.ASSET_MATERIALIZATION, dg.DagsterEventType.ASSET_OBSERVATION}
# What this storage writes together when Dagster hands it a batch (a new run's planned events, one per
# partition, among them): asset events, which need no run-status bookkeeping.
BATCH_WRITTEN = {dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED, *BUFFERED_EVENTS}


class BatchedAssetEvents(_EventLog):
    """A step's asset events written a batch at a time: one transaction, one insert of every event, one
    insert of their tags and one update of each asset's row per batch, instead of two transactions, two
    serialisations of the event and a failed insert then an update of the asset's row per event (the
    SQLite event log's ``store_event``: two thirds of the Dagster side's CPU per task). Dagster batches
    only the events of one output (``DAGSTER_EVENT_BATCH_SIZE``, which defs/instance.py sets, hands them
    to ``store_event_batch``: a new run's planned events, one per partition); a step's own
    materializations, one per finished task, come one ``store_event`` at a time, so they wait here, at
    most ASSET_EVENT_WAIT_S (a timer writes them), until ASSET_EVENTS_PER_WRITE are waiting, or until
    any other event comes, which is stored after them, in order. A process killed with events waiting
    loses them as a kill loses an event Dagster had not written yet: the task's detail file is on disk,
    and the next run reports it from there instead of running it again."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._waiting: list[Any] = []
        self._waiting_lock = threading.RLock()
        self._timer: threading.Timer | None = None
        super().__init__(*args, **kwargs)

    def store_event(self, event: Any) -> None:
        with self._waiting_lock:
            if event.is_dagster_event and event.step_key and event.dagster_event_type in BUFFERED_EVENTS:
                self._waiting.append(event)
                if len(self._waiting) >= ASSET_EVENTS_PER_WRITE:
                    self.write_waiting_events()
                elif self._timer is None:
                    # Not a daemon thread: an interpreter that exits without disposing the storage
                    # still writes what waits.
                    self._timer = threading.Timer(ASSET_EVENT_WAIT_S, self.write_waiting_events)
                    self._timer.start()
                return
            self.write_waiting_events()
            super().store_event(event)

    def store_event_batch(self, events: Sequence[Any]) -> None:
        with self._waiting_lock:
            self.write_waiting_events()
            batched = [event for event in events if event.get_dagster_event().event_type in BATCH_WRITTEN]
            if batched:
                self._write_asset_events(batched)
            for event in events:
                if event.get_dagster_event().event_type not in BATCH_WRITTEN:
                    super().store_event(event)

    def write_waiting_events(self) -> None:
        """Write the events that wait, now (any thread; also what the timer calls)."""
        with self._waiting_lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            events, self._waiting = self._waiting, []
            if events:
                self._write_asset_events(events)

    def _write_asset_events(self, events: Sequence[Any]) -> None:
        storage: Any = self
        with storage.index_transaction() as conn:
            # One statement for all the rows (executemany: Dagster's multi-row insert is compiled anew
            # for every batch size, which costs more than the rows). SQLite numbers the rows one after
            # the other, in order, and no other writer can come between them inside this transaction
            # (SQLAlchemy's RETURNING of the ids in order falls back to an insert per row on SQLite).
            conn.execute(SqlEventLogStorageTable.insert(), [storage._event_to_row(event) for event in events])
            last = conn.exec_driver_sql("SELECT last_insert_rowid()").scalar_one()
            ids = list(range(last - len(events) + 1, last + 1))
            storage._store_asset_event_tags(conn, events, ids)
            # The asset's row keeps the newest of each kind of event (its last materialization, its
            # last run): written for the newest of each, in the order they were stored.
            newest = {
                (event.get_dagster_event().asset_key, event.dagster_event_type): (event_id, event)
                for event_id, event in zip(ids, events)
            }
            for event_id, event in sorted(newest.values(), key=lambda pair: pair[0]):
                storage._store_asset_event(conn, event, event_id)

    def dispose(self) -> None:
        self.write_waiting_events()
        super().dispose()


class PooledSqliteConnections(_SqliteEventLog):
    """Dagster's SQLite storage opens an engine per connection; this keeps one engine with a small pool
    (write-ahead log, ``synchronous=NORMAL``)."""

    _conn_string: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Set before the parent's constructor, which creates the database through _connect.
        self._engine: db.Engine | None = None
        self._engine_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def _pooled_engine(self) -> db.Engine:
        with self._engine_lock:
            if self._engine is None:
                engine = db.create_engine(
                    self._conn_string,
                    poolclass=QueuePool,
                    pool_size=POOL_SIZE,
                    connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
                )
                db.event.listen(engine, "connect", _tune)
                self._engine = engine
            return self._engine

    @contextmanager
    def _connect(self) -> Iterator[db.Connection]:
        with self._pooled_engine().connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        with self._engine_lock:
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None
        super().dispose()


def _tune(connection: Any, record: object) -> None:
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")


# Dagster's own answer, kept for the test that notices when an upgrade fixes it.
DAGSTERS_PENDING_CLAIM_WAIT = InstanceConcurrencyContext.interval_to_next_pending_claim_check


def pending_claim_wait(self: InstanceConcurrencyContext) -> float:
    """How long a step blocked on a pool waits before asking for a slot again. Dagster 1.13 returns
    min(0, ...) here, never more than 0, so a run worker whose step waits for a pool (a run beyond the
    sweep's max_concurrent_runs, a backfill beside a CLI run) asks again at once, for ever: measured,
    half a core for 21 minutes. The run worker uses this instead (execute_run)."""
    waits = [ready_at - time.time() for ready_at in self._pending_timeouts.values()]
    return max(0.0, min(waits)) if self._pending_claims and waits else 0.0


def execute_run(serialized_args: str) -> int:
    """What `dagster api execute_run ARGS` does (load the run's job from its code origin, execute it,
    interrupts as a cooperative cancel), without its list of every event serialized again, which it
    keeps to the end and never reads: a tenth of a run worker's CPU and ~2 KB of its memory a task
    (1 GB at 100,000 tasks)."""
    from dagster._cli.api import _execute_run_command_body
    from dagster._cli.utils import get_instance_for_cli
    from dagster._serdes import deserialize_value
    from dagster._utils.interrupts import capture_interrupts

    # A patch of Dagster's method, on purpose (pending_claim_wait says why); mypy refuses assigning to a method.
    InstanceConcurrencyContext.interval_to_next_pending_claim_check = pending_claim_wait  # type: ignore[method-assign]
    with capture_interrupts():
        args = deserialize_value(serialized_args, ExecuteRunArgs)
        with get_instance_for_cli(instance_ref=args.instance_ref) as instance:
            return _execute_run_command_body(
                args.run_id, instance, lambda event: None, set_exit_code_on_failure=bool(args.set_exit_code_on_failure)
            )


def pool_postgres_engine(storage: Any, token_provider: Any) -> None:
    """Give a dagster-postgres event log a pooled engine: outside the webserver it opens a connection
    (NullPool) for every statement batch."""
    from dagster_postgres.utils import create_pg_engine

    storage._engine.dispose()
    storage._engine = create_pg_engine(
        storage.postgres_url,
        token_provider,
        isolation_level="AUTOCOMMIT",
        pool_size=POOL_SIZE,
        max_overflow=POOL_SIZE,
        pool_recycle=POOL_RECYCLE_S,
        pool_pre_ping=True,
    )


# materialization paths

# A backfill still deciding or launching runs; one canceling still has runs that may evaluate.
BACKFILL_NOT_DONE = [BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING, BulkActionStatus.FAILING]


def create_asset_backfill(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    asset_keys: Sequence[dg.AssetKey],
    partitions: Sequence[str] | None,
) -> str:
    """An asset backfill as the UI's launchPartitionBackfill creates it (``partitions`` None: every
    partition, as "Materialize all" asks); the backfill daemon executes it. Returns its id."""
    backfill_id = uuid.uuid4().hex[:8]
    instance.add_backfill(
        PartitionBackfill.from_asset_partitions(
            backfill_id=backfill_id,
            asset_graph=defs.resolve_asset_graph(),
            partition_names=partitions,
            asset_selection=list(asset_keys),
            backfill_timestamp=time.time(),
            tags={},
            dynamic_partitions_store=instance,
            all_partitions=partitions is None,
            title=None,
            description=None,
            run_config=None,
        )
    )
    return backfill_id


def backfill_status(instance: dg.DagsterInstance, backfill_id: str) -> str | None:
    backfill = instance.get_backfill(backfill_id)
    return backfill.status.value if backfill is not None else None


def backfill_targets(
    instance: dg.DagsterInstance, keys: set[dg.AssetKey], partitioned: dg.AssetKey
) -> list[tuple[str, set[str]]]:
    """Each asset backfill not done yet that targets any of ``keys``: its id and the partitions of
    ``partitioned`` it targets (Dagster exposes neither outside its GraphQL layer)."""
    found = []
    for backfill in instance.get_backfills(filters=BulkActionsFilter(statuses=BACKFILL_NOT_DONE)):
        data = backfill.asset_backfill_data
        if data is None:  # a job backfill, or one stored serialized by an older Dagster: not ours to read
            continue
        target = data.target_subset
        if not keys & set(target.asset_keys):
            continue
        subset = target.partitions_subsets_by_asset_key.get(partitioned)
        with partition_loading_context(dynamic_partitions_store=instance):
            found.append((backfill.backfill_id, set(subset.get_partition_keys()) if subset is not None else set()))
    return found


def without_partitioned_provenance(context: dg.AssetExecutionContext, partitioned: dg.AssetKey) -> None:
    """In a run without a partition, let the step's later outputs record no provenance from
    ``partitioned``, a dependency materialized by the same step: Dagster reads it for the run's
    partition range, which such a run lacks, and fails the step (1.13 has no switch for this)."""
    cache = context.op_execution_context._step_execution_context._data_version_cache  # noqa: SLF001
    cache.input_asset_version_info[partitioned] = None


def run_daemon(argv: Sequence[str], interval_s: int) -> None:
    """`dagster-daemon ARGV` whose loops (the backfill daemon's among them: a backfill advances one
    step per loop) run every ``interval_s`` instead of Dagster's fixed 30 s."""
    import dagster._daemon.controller as controller
    from dagster._daemon.cli import main

    controller.DEFAULT_DAEMON_INTERVAL_SECONDS = interval_s
    sys.argv = ["dagster-daemon", *argv]
    main()
