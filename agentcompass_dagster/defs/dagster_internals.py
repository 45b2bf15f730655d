"""The one module that imports Dagster's private API (``dagster._``): what the package needs of Dagster
that has no public form yet. Written against dagster 1.13; each function names what it stands in for,
so an upgrade that breaks one breaks here."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Sequence

import dagster as dg
from dagster._core.definitions.partitions.context import partition_loading_context
from dagster._core.execution.backfill import BulkActionsFilter, BulkActionStatus, PartitionBackfill

# materialization paths

# A backfill still deciding or launching runs; one canceling still has runs that may evaluate.
BACKFILL_NOT_DONE = [BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING, BulkActionStatus.FAILING]


def create_asset_backfill(instance: dg.DagsterInstance, defs: dg.Definitions, asset_keys: Sequence[dg.AssetKey],
                          partitions: Sequence[str] | None) -> str:
    """An asset backfill as the UI's launchPartitionBackfill creates it (``partitions`` None: every
    partition, as "Materialize all" asks); the backfill daemon executes it. Returns its id."""
    backfill_id = uuid.uuid4().hex[:8]
    instance.add_backfill(PartitionBackfill.from_asset_partitions(
        backfill_id=backfill_id, asset_graph=defs.resolve_asset_graph(), partition_names=partitions,
        asset_selection=list(asset_keys), backfill_timestamp=time.time(), tags={}, dynamic_partitions_store=instance,
        all_partitions=partitions is None, title=None, description=None, run_config=None))
    return backfill_id


def backfill_status(instance: dg.DagsterInstance, backfill_id: str) -> str | None:
    backfill = instance.get_backfill(backfill_id)
    return backfill.status.value if backfill is not None else None


def backfill_targets(instance: dg.DagsterInstance, keys: set[dg.AssetKey],
                     partitioned: dg.AssetKey) -> list[tuple[str, set[str]]]:
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
