"""The request that resumes an interrupted run (R-RESUME-3): a new run directory that reuses the old one's
finished details and continues its unfinished attempts, each from its activity log (durable/resume.py)."""

from __future__ import annotations

from pathlib import Path

from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.runtime.store.run_store import load_run_request


def resume_request(path: Path, task_id: str | None = None) -> EvalRequest:
    """The request that resumes an interrupted run: a new run directory reusing the old one's finished
    details (R-RESUME-3) and continuing its unfinished attempts from their activity logs."""
    run_dir, request, results_dir = load_run_request(path)
    assert run_dir.info is not None
    finished = {task for task, detail in run_dir.load_all_details().items() if not detail.is_error}
    unfinished = [task for task in run_dir.info.selected_tasks if task not in finished]
    if task_id is not None and task_id not in run_dir.info.selected_tasks:
        raise UserError(f"--task={task_id!r}: not a task of {path} (it has {len(run_dir.info.selected_tasks)})")
    if not unfinished or (task_id is not None and task_id not in unfinished):
        raise UserError(
            f"RUN_DIR={str(path)!r}: nothing to resume, "
            + (f"task {task_id!r} has finished" if task_id else "every task has finished")
        )
    output = request.output.model_copy(
        update={"results_dir": results_dir, "reuse": True, "reuse_run_id": run_dir.run_id, "run_id": None}
    )
    # A resume is no longer the Dagster run that made the directory: that run's failure must not fail it.
    return request.model_copy(
        update={"output": output, "run_only": [task_id] if task_id else None, "dagster_run_id": None}
    )
