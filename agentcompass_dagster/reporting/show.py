"""`agentcompass show RUN_DIR`: what a run directory holds, read without changing it.

Per task: its state (finished, error, unfinished, not started), each attempt's outcome, the durable
activity of agent attempts (records, checkpoints and which of them a fork can start from), and the
replays made of it; per run: status, lineage (fork or consolidation) and reuse. The forkable points are
the ones `agentcompass fork --checkpoint` accepts, so a user finds them here instead of from the error of
a wrong guess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentcompass_dagster.durable.activity import ACTIVITY_FILE, ActivityError, ActivityRecord, read_activity
from agentcompass_dagster.reruns.fork import forkable_cuts
from agentcompass_dagster.reruns.replay import ReplayReport
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.contracts.markdown import markdown_table
from agentcompass_dagster.runtime.store.layout import REPLAYS_DIR
from agentcompass_dagster.runtime.store.run_dir import RunDir
from agentcompass_dagster.runtime.store.run_store import open_run_dir
from agentcompass_dagster.runtime.results.scores import DetailView
from agentcompass_dagster.contracts.request import lift_metadata

TaskState = Literal["finished", "error", "unfinished", "not started"]


class Checkpoint(BaseModel):
    seq: int
    turn: int | None = None
    command: str | None = None
    forkable: bool = False


class AttemptOverview(BaseModel):
    attempt: int
    outcome: str  # correct, wrong, error, running or interrupted, checkpointed (k>1, task unfinished)
    score: float | None = None
    error: str | None = None
    records: int = 0
    checkpoints: list[Checkpoint] = Field(default_factory=list)


class ReplayOverview(BaseModel):
    attempt: int
    status: str
    matched: str
    path: str


class TaskOverview(BaseModel):
    task_id: str
    category: str | None = None
    state: TaskState
    score: float | None = None
    attempts: list[AttemptOverview] = Field(default_factory=list)
    replays: list[ReplayOverview] = Field(default_factory=list)


class RunOverview(BaseModel):
    path: str
    run_id: str
    status: str
    started_at: str
    finished_at: str | None = None
    benchmark: str | None = None
    model: str | None = None
    harness: str | None = None
    lineage: dict[str, Any] | None = None
    reused_from: str | None = None
    merged_from: list[str] = Field(default_factory=list)
    tasks: list[TaskOverview] = Field(default_factory=list)


def overview(path: Path, task_id: str | None = None) -> RunOverview:
    run_dir = open_run_dir(path)
    info = run_dir.info
    assert info is not None
    selected = info.selected_tasks
    if task_id is not None and task_id not in selected:
        raise UserError(
            f"--task={task_id!r}: not a task of {path} (it has {len(selected)}: "
            f"{', '.join(selected[:5])}{', ...' if len(selected) > 5 else ''})"
        )
    request = info.request
    reused = info.reused_from
    run = RunOverview(
        path=str(path),
        run_id=info.run_id,
        status=info.status,
        started_at=info.started_at,
        finished_at=info.finished_at,
        benchmark=_id(request, "benchmark"),
        model=_id(request, "model"),
        harness=_id(request, "harness"),
        lineage=lift_metadata(request).get("lineage"),
        reused_from=(
            f"{reused.run_id} ({len(reused.task_ids)} tasks"
            + (f", {reused.attempts} unfinished attempts carried over" if reused.attempts else "")
            + ")"
        )
        if reused
        else None,
        merged_from=[source.run_id for source in info.merged_from],
    )
    details = run_dir.load_all_details(DetailView)
    replays = replays_by_task(run_dir.path / REPLAYS_DIR)
    k = int(((request.get("execution") or {}).get("attempts") or {}).get("k", 1))
    for task in [task_id] if task_id is not None else selected:
        run.tasks.append(_task(run_dir, task, details.get(task), k, replays.get(task, [])))
    return run


def _id(request: dict[str, Any], part: str) -> str | None:
    value = request.get(part)
    return value.get("id") if isinstance(value, dict) else None


def replays_by_task(directory: Path) -> dict[str, list[ReplayOverview]]:
    found: dict[str, list[ReplayOverview]] = {}
    if not directory.is_dir():
        return found
    for entry in sorted(directory.glob("*.json")):
        try:
            report = ReplayReport.model_validate_json(entry.read_bytes())
            lineage = report.lineage
            found.setdefault(lineage["task_id"], []).append(
                ReplayOverview(
                    attempt=int(lineage["attempt"]),
                    status=report.status,
                    path=str(entry),
                    matched=f"{sum(step.matches for step in report.steps)}/{len(report.steps)} actions matched",
                )
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a report another version wrote, or a torn one: not this command's to judge
    return found


def _task(
    run_dir: RunDir, task_id: str, detail: DetailView | None, k: int, replays: list[ReplayOverview]
) -> TaskOverview:
    if detail is not None:
        task = TaskOverview(
            task_id=task_id,
            category=detail.category,
            state="error" if detail.is_error else "finished",
            score=None if detail.is_error else detail.score,
            replays=replays,
        )
        for attempt in sorted(detail.attempts.values(), key=lambda a: a.attempt):
            error = attempt.error
            task.attempts.append(
                AttemptOverview(
                    attempt=attempt.attempt,
                    outcome="error" if error else ("correct" if attempt.correct else "wrong"),
                    score=None if error else attempt.score,
                    error=error.strip().splitlines()[-1][:200] if error else None,
                    **attempt_activity(run_dir.durable_dir(task_id, attempt.attempt)),
                )
            )
        return task
    attempts = []
    for index in range(1, k + 1):
        durable = run_dir.durable_dir(task_id, index)
        checkpointed = run_dir.finished.file(task_id, index).is_file()
        if checkpointed or durable.is_dir():
            outcome = "checkpointed" if checkpointed else "interrupted"
            attempts.append(AttemptOverview(attempt=index, outcome=outcome, **attempt_activity(durable)))
    return TaskOverview(
        task_id=task_id, state="unfinished" if attempts else "not started", attempts=attempts, replays=replays
    )


def attempt_activity(directory: Path) -> dict[str, Any]:
    """The attempt's activity: how many records, its checkpoints, and which of them a fork accepts."""
    try:
        records = read_activity(directory / ACTIVITY_FILE)
    except (OSError, ActivityError):
        return {}
    cuts = set(forkable_cuts(records))
    return {
        "records": len(records),
        "checkpoints": [
            _checkpoint(r, r.seq in cuts)
            for r in records
            if r.kind == "tool_call" and r.status == "completed" and r.checkpoint_seq is not None
        ],
    }


def _checkpoint(record: ActivityRecord, forkable: bool) -> Checkpoint:
    assert record.seq is not None
    turn = record.data.get("turn")
    command = record.data.get("command")
    return Checkpoint(
        seq=record.seq,
        turn=turn if isinstance(turn, int) else None,
        command=command[:80] if isinstance(command, str) else None,
        forkable=forkable,
    )


def render(run: RunOverview, one_task: bool) -> str:
    lines = [
        f"run {run.run_id} · {run.benchmark} · {run.model} · {run.harness} · status {run.status}",
        f"started {run.started_at}" + (f" · finished {run.finished_at}" if run.finished_at else ""),
        f"directory: {run.path}",
    ]
    if run.lineage:
        lineage = run.lineage
        lines.append(
            f"lineage: {lineage.get('kind')} of run {lineage.get('parent_run_id')} (task "
            f"{lineage.get('task_id')}, attempt {lineage.get('attempt')}, checkpoint "
            f"{lineage.get('checkpoint_seq')}, model {lineage.get('parent_model')} -> {lineage.get('model')}; "
            f"parent directory {lineage.get('parent_run_dir')})"
        )
    if run.reused_from:
        lines.append(f"reused from: {run.reused_from}")
    if run.merged_from:
        lines.append(f"merged from: {', '.join(run.merged_from)}")
    states: dict[str, int] = {}
    for task in run.tasks:
        states[task.state] = states.get(task.state, 0) + 1
    if not one_task:
        lines.append(f"tasks: {len(run.tasks)} · " + " · ".join(f"{n} {state}" for state, n in states.items()))
    rows = []
    for task in run.tasks:
        attempts = ", ".join(f"{a.attempt}: {a.outcome}" for a in task.attempts) or "-"
        forkable = (
            "; ".join(
                f"attempt {a.attempt}, {_checkpoints([c.seq for c in a.checkpoints if c.forkable])}"
                for a in task.attempts
                if any(c.forkable for c in a.checkpoints)
            )
            or "-"
        )
        score = "-" if task.score is None else f"{task.score:.4f}"
        rows.append((task.task_id, task.state, score, attempts, forkable, len(task.replays)))
    lines += ["", markdown_table(["task", "state", "score", "attempts", "a fork can start from", "replays"], rows)]
    if one_task:
        lines += _task_lines(run.tasks[0], run.path)
    return "\n".join(lines) + "\n"


def _checkpoints(seqs: list[int]) -> str:
    """ "checkpoint 2", "checkpoints 0–2" (every one from 0 to 2) or "checkpoints 0, 2, 5"."""
    if len(seqs) == 1:
        return f"checkpoint {seqs[0]}"
    if seqs == list(range(seqs[0], seqs[-1] + 1)):
        return f"checkpoints {seqs[0]}–{seqs[-1]}"
    return f"checkpoints {', '.join(map(str, seqs))}"


def _task_lines(task: TaskOverview, path: str) -> list[str]:
    lines: list[str] = []
    for attempt in task.attempts:
        score = "" if attempt.score is None else f", score {attempt.score:.4f}"
        lines += ["", f"attempt {attempt.attempt}: {attempt.outcome}{score} · {attempt.records} activity records"]
        if attempt.error:
            lines.append(f"  error: {attempt.error}")
        for checkpoint in attempt.checkpoints:
            where = f"after turn {checkpoint.turn}" if checkpoint.turn is not None else "checkpoint"
            command = f": {checkpoint.command}" if checkpoint.command else ""
            mark = " (forkable)" if checkpoint.forkable else ""
            lines.append(f"  checkpoint {checkpoint.seq}{mark} {where}{command}")
        forkable = [c.seq for c in attempt.checkpoints if c.forkable]
        if forkable:
            lines.append(
                f"  fork with: agentcompass fork {path} --task {task.task_id} --attempt {attempt.attempt} "
                f"--checkpoint {forkable[-1]} --model MODEL --sweep SWEEP.yaml"
            )
    for replay in task.replays:
        lines.append(f"replay of attempt {replay.attempt}: {replay.status}, {replay.matched} ({replay.path})")
    return lines
