"""The records of a run directory, run_info.json (RunInfo, with the runs it reused) and params.json
(RunParams), and reading them and details back, tolerant of what another version wrote (R-COMPAT-1)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, TypeVar, overload

from pydantic import Field, ValidationError, model_validator

from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.runtime.store.layout import PARAMS, RUN_INFO
from agentcompass_dagster.runtime.results.scores import DetailView
from agentcompass_dagster.contracts.records import SCHEMA_VERSION, NotLoaded, StoredRecord, utcnow
from agentcompass_dagster.runtime.store.outcomes import BudgetOutcome, RunDirStatus, TaskDetail
from agentcompass_dagster.contracts.request import Lineage, lift_metadata

log = logging.getLogger(__name__)

DetailT = TypeVar("DetailT", TaskDetail, DetailView)


class ReuseSource(StoredRecord):
    run_id: str
    path: str
    started_at: str = ""


class ReusedFrom(ReuseSource):
    tasks: int = 0
    task_ids: list[str] = Field(default_factory=list)
    # Unfinished tasks' finished-attempt records and agent attempt logs carried over to finish here.
    attempts: int = 0


class RunInfo(StoredRecord):
    schema_version: int = SCHEMA_VERSION
    run_id: str
    request_name: str
    status: RunDirStatus = "running"
    started_at: str = Field(default_factory=utcnow)
    finished_at: str | None = None
    error: str | None = None
    request: dict[str, Any] = Field(default_factory=dict)
    selected_tasks: list[str] = Field(default_factory=list)
    reused_from: ReusedFrom | None = None
    # A consolidation (several concurrent runs of one benchmark x model merged into one complete run)
    # reuses from the newest run and takes the finished details it lacks from these.
    merged_from: list[ReusedFrom] = Field(default_factory=list)
    # Resolved plans are stored once by content hash; task_plans maps task -> attempt -> hash.
    plans: dict[str, dict[str, Any]] = Field(default_factory=dict)
    task_plans: dict[str, dict[str, str]] = Field(default_factory=dict)
    dagster_run_id: str | None = None
    paths: dict[str, str] = Field(default_factory=dict)
    # The sweep's budget as this run ended, and the tasks it could not run for it.
    budget: BudgetOutcome | None = None
    # The benchmark's tasks it could not load, with why: left out of the run.
    not_loaded: list[NotLoaded] = Field(default_factory=list)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class RunParams(StoredRecord):
    """params.json: what storage and reuse need of a request; small, unlike run_info.json, which grows
    with the tasks."""

    benchmark: dict[str, Any] = Field(default_factory=dict)
    model: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] = Field(default_factory=dict)
    lineage: Lineage | None = None
    dagster_run_id: str | None = None
    started_at: str = ""

    # Older params.json files keep the lineage and the Dagster run id in ``metadata`` (R-COMPAT-1).
    _lift_metadata = model_validator(mode="before")(lift_metadata)

    @classmethod
    def of(cls, request: EvalRequest, started_at: str) -> RunParams:
        return cls(
            benchmark={"id": request.benchmark.id, "params": request.benchmark.params},
            model={"id": request.model.id, "provider": request.model.provider, "model": request.model.model},
            output=request.output.model_dump(mode="json"),
            lineage=request.lineage,
            dagster_run_id=request.dagster_run_id,
            started_at=started_at,
        )


def read_params(run_dir: str | Path) -> RunParams | None:
    """A run's params.json, or None when it is missing or unreadable."""
    data = read_json(Path(run_dir) / PARAMS)
    try:
        return RunParams.model_validate(data) if data is not None else None
    except ValidationError:
        return None


def run_started_at(run_dir: Path) -> str | None:
    """When a run started, from its params.json (older runs: from run_info.json); None when the
    directory is not a run."""
    if not (run_dir / RUN_INFO).is_file():
        return None
    params = read_params(run_dir)
    if params is not None and params.started_at:
        return params.started_at
    info = read_json(run_dir / RUN_INFO)
    return str(info["started_at"]) if info is not None and info.get("started_at") else ""


@overload
def read_detail(path: Path) -> TaskDetail | None: ...


@overload
def read_detail(path: Path, model: type[DetailT]) -> DetailT | None: ...


def read_detail(path: Path, model: type[DetailT] | type[TaskDetail] = TaskDetail) -> DetailT | TaskDetail | None:
    """A detail file (as ``model``), or None (with a warning) when it is unreadable: it is then treated
    as missing."""
    try:
        return model.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError, ValueError) as exc:
        log.warning("ignoring unreadable detail %s: %s", path, str(exc).splitlines()[0])
        return None
