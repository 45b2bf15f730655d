"""Fork an agent attempt at a checkpoint onto another solver model (R-FORK-1).

The child is a new run with one task and one attempt. Its attempt starts from a *seed*: the parent's
completed activity records up to the cut (marked inherited) and the checkpoints they name. The seed's
session record carries the lineage instead of a configuration fingerprint, so the tool agent treats
the seed as a log to continue, finds no environment to attach to (``handle`` is None: a fork never
touches the parent's environment) and restores the cut's checkpoint into a fresh one.

Only the solver model may differ from the parent's configuration; anything else is refused with the
differing fields named. The inherited turns' usage is kept apart from the child's own, and forks land
under ``<run_name>.forks`` in the results directory, outside the default from-scratch statistics.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.declarations.sweep import SweepConfig
from agentcompass_dagster.durable.activity import (
    ACTIVITY_FILE,
    ActivityLog,
    ActivityRecord,
    read_activity,
)
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.runtime.store.naming import file_stem
from agentcompass_dagster.runtime.store.run_files import copy_durable
from agentcompass_dagster.runtime.store.run_store import load_run_request
from agentcompass_dagster.contracts.request import Lineage

FORKS_SUFFIX = ".forks"
# Fields that name or place a run rather than configure what it does.
_IDENTITY_FIELDS = {
    "name",
    "sweep",
    "model",
    "contestant",
    "output",
    "run_only",
    "lineage",
    "durable_seed",
    "dagster_run_id",
}


def config_differences(parent: EvalRequest, child: EvalRequest) -> list[str]:
    """Dotted paths of every configuration field other than the model that differs."""
    a = parent.model_dump(mode="json", exclude=_IDENTITY_FIELDS)
    b = child.model_dump(mode="json", exclude=_IDENTITY_FIELDS)
    return _diff(a, b, "")


def _diff(a: Any, b: Any, prefix: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        found: list[str] = []
        for key in sorted(set(a) | set(b)):
            found += _diff(a.get(key), b.get(key), f"{prefix}.{key}" if prefix else key)
        return found
    return [] if a == b else [f"{prefix} ({a!r} -> {b!r})"]


def forkable_cuts(records: list[ActivityRecord]) -> list[int]:
    """Sequence numbers of completed tool calls after which every tool call of their turn has finished
    and whose files are in a checkpoint (their own, or the one they left unchanged): the points a new
    model can take over from."""
    cuts = []
    for index, record in enumerate(records):
        if record.kind != "tool_call" or record.status != "completed" or record.checkpoint_seq is None:
            continue
        if record.seq is None:  # the log numbers each completed tool call it writes: no cut without one
            continue
        if record.data.get("error") or record.data["call"]["name"] == "submit":
            continue
        later = records[index + 1 :]
        same_turn_pending = any(r.kind == "tool_call" and r.data.get("turn") == record.data.get("turn") for r in later)
        if not same_turn_pending:
            cuts.append(record.seq)
    return cuts


def prepare_fork(
    parent_dir: Path, task_id: str, checkpoint: int, model_id: str, sweep: SweepConfig, attempt: int = 1
) -> EvalRequest:
    """The child's request, with its durable seed written under the fork results root."""
    run_dir, parent, results_dir = load_run_request(parent_dir)
    assert run_dir.info is not None
    if task_id not in run_dir.info.selected_tasks:
        raise UserError(f"--task={task_id!r}: not a task of {parent_dir}")
    candidates = [r for r in sweep.requests() if r.benchmark.id == parent.benchmark.id and r.model.id == model_id]
    if not candidates:
        raise UserError(
            f"--model={model_id!r}: the sweep declares no model {model_id!r} for benchmark {parent.benchmark.id!r}"
        )
    # In a sweep of several harnesses, the parent's harness with the other model.
    child = next((r for r in candidates if r.harness.id == parent.harness.id), candidates[0])
    if child.model == parent.model:
        raise UserError(f"--model={model_id!r}: the parent ran with this same model; a fork changes the solver model")
    differences = config_differences(parent, child)
    if differences:
        raise UserError(
            "fork refused: only the solver model may differ from the parent run, but these differ too: "
            + "; ".join(differences)
        )
    source = run_dir.durable_dir(task_id, attempt)
    records = read_activity(source / ACTIVITY_FILE)
    cuts = forkable_cuts(records)
    if checkpoint not in cuts:
        raise UserError(
            f"--checkpoint={checkpoint}: not a forkable checkpoint of task {task_id!r} attempt {attempt} "
            f"(forkable: {', '.join(map(str, cuts)) or 'none'})"
        )
    cut = next(i for i, r in enumerate(records) if r.seq == checkpoint)
    inherited = [r for r in records[: cut + 1] if r.kind != "session" and r.status != "in_flight"]
    lineage = Lineage(
        parent_run_id=run_dir.run_id,
        parent_run_dir=str(Path(parent_dir).resolve()),
        task_id=task_id,
        attempt=attempt,
        checkpoint_seq=checkpoint,
        parent_model=parent.model.id,
        model=child.model.id,
    )
    run_name = f"{parent.output.run_name or parent.sweep}{FORKS_SUFFIX}"
    fork_id = f"fork-{file_stem(task_id)}-{checkpoint}-{os.urandom(3).hex()}"
    seed = results_dir / run_name / ".seeds" / fork_id
    _write_seed(seed, source, inherited, checkpoint, lineage)
    output = parent.output.model_copy(
        update={
            "results_dir": results_dir,
            "run_name": run_name,
            "run_id": fork_id,
            "reuse": False,
            "reuse_run_id": None,
        }
    )
    return parent.fork(child.model, task_id, output, lineage, seed)


def _write_seed(seed: Path, source: Path, inherited: list[ActivityRecord], cut: int, lineage: Lineage) -> None:
    """The parent's checkpoints up to the cut, and a new log of the inherited records."""

    def up_to_cut(relative: Path) -> bool:
        parts = relative.parts
        return parts[0] == "checkpoints" and not (parts[1:2] == ("manifests",) and int(relative.stem) > cut)

    seed.mkdir(parents=True)
    copy_durable(source, seed, up_to_cut)
    log = ActivityLog(seed / ACTIVITY_FILE)
    log.append(
        ActivityRecord(
            id="session",
            kind="session",
            status="in_flight",
            data={"seed": True, "lineage": lineage.model_dump(mode="json"), "handle": None},
        )
    )
    for record in inherited:
        log.append(record.model_copy(update={"data": {**record.data, "inherited": True}}))
    log.sync()
