"""Which process owns each unfinished run, so that any process sharing the instance can tell a run whose
owner died (reap it) from one still working: before it starts, the process that created it and will
launch it; once launched, its run worker.

Kept in the instance's key-value store under the run's id, not in run tags: Re-execute copies a run's
tags to the new run (a copied owner is a dead process, and the new run was reaped as dead while it
worked), and process ids do not belong in the Runs list."""

from __future__ import annotations

import time
from typing import Literal

import dagster as dg
from pydantic import BaseModel

from agentcompass_dagster.runtime.store.processes import ProcessId

KEY = "agentcompass/run-owner/"
# A run created by a process that recorded no owner (the UI, GraphQL) is launched in the same request;
# one still not started after this long never will be (its launch failed).
ORPHAN_AFTER_S = 120.0


class RunOwner(BaseModel):
    role: Literal["launcher", "worker"]
    process: str

    @property
    def worker(self) -> ProcessId | None:
        return ProcessId.parse(self.process)


def record_owner(
    instance: dg.DagsterInstance, run_id: str, role: Literal["launcher", "worker"], process: ProcessId
) -> None:
    instance.run_storage.set_cursor_values({KEY + run_id: RunOwner(role=role, process=str(process)).model_dump_json()})


def run_owner(instance: dg.DagsterInstance, run_id: str) -> RunOwner | None:
    text = instance.run_storage.get_cursor_values({KEY + run_id}).get(KEY + run_id)
    return RunOwner.model_validate_json(text) if text else None


def run_worker(instance: dg.DagsterInstance, run_id: str) -> ProcessId | None:
    """The worker process recorded for a run (None before it was launched, or when none was recorded)."""
    owner = run_owner(instance, run_id)
    return owner.worker if owner is not None and owner.role == "worker" else None


def gone_owner(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str | None:
    """Why an unfinished run will never finish on its own, or None while it may: its owner process is
    gone, or it was created, never launched, and has no owner. A queued run belongs to the daemon's
    queue, and a run whose owner is on another host or unknown to us is left to Dagster's run
    monitoring."""
    if run.is_finished or run.status == dg.DagsterRunStatus.QUEUED:
        return None
    owner = run_owner(instance, run.run_id)
    if owner is None:
        if run.status != dg.DagsterRunStatus.NOT_STARTED:
            return None
        record = instance.get_run_record_by_id(run.run_id)
        age = time.time() - record.create_timestamp.timestamp() if record is not None else 0.0
        if age < ORPHAN_AFTER_S:
            return None
        return f"it was created {age:.0f} s ago and never launched (its launch failed?)"
    if owner.role == "launcher" and run.status != dg.DagsterRunStatus.NOT_STARTED:
        return None  # launched by a launcher that records no worker (a container's, say)
    worker = owner.worker
    if worker is None or worker.alive():
        return None
    return f"its {owner.role} process {worker.pid} on {worker.host} is gone (killed?); its finished tasks are kept"
