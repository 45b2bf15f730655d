"""Forks and replays as Dagster sees them: `agentcompass fork` and `agentcompass replay` of an attempt that
a Dagster run of a sweep evaluated record an observation of that attempt's partition (the sweep's
S/B/attempts, model x task) in the sweep's instance, with the lineage as metadata, so the partition's
history in the UI shows what was derived from it. The results stay in the run directories (params.json
holds a fork's lineage); this is where a UI user finds them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from agentcompass_dagster.defs.instance import dagster_home
from agentcompass_dagster.defs.partitions import asset_key, partition_key
from agentcompass_dagster.runtime.store.run_records import read_params


def report_derived(source_run_dir: Path, task_id: str, attempt: int, kind: str, metadata: dict[str, Any]) -> bool:
    """Record a fork or replay of an attempt in the instance of the Dagster run that evaluated it (Path
    values of ``metadata`` become path metadata the UI links). Returns
    False, recording nothing, when no Dagster run did (a --direct run) or its instance is not here: a
    fork or replay never creates an instance."""
    params = read_params(source_run_dir)
    if params is None or params.dagster_run_id is None or not (dagster_home() / "dagster.yaml").is_file():
        return False
    sweep, benchmark, model = params.output.get("run_name"), params.benchmark.get("id"), params.model.get("id")
    if not (sweep and benchmark and model):
        return False
    lineage = {
        "derived": kind,
        "task_id": task_id,
        "attempt": attempt,
        "source run": Path(source_run_dir).name,
        "source Dagster run": params.dagster_run_id,
        "source run dir": Path(source_run_dir).resolve(),
        **metadata,
    }
    observation = dg.AssetObservation(
        asset_key=asset_key(sweep, benchmark, "attempts"),
        partition=dg.MultiPartitionKey({"model": partition_key(model), "task": partition_key(task_id)}),
        description=f"{kind} of task {task_id!r} attempt {attempt}",
        metadata={
            name: dg.MetadataValue.path(str(value)) if isinstance(value, Path) else value
            for name, value in lineage.items()
        },
    )
    with dg.DagsterInstance.get() as instance:
        instance.report_runless_asset_event(observation)
    return True
