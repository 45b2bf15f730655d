"""Replay the recorded terminal actions of an attempt in a clean environment (R-REPLAY-1).

No model is asked anything: the bash commands of the attempt's trajectory (tool_agent or miniswe, which
record the same step format) run in order in a fresh environment that the benchmark sets up as for a
new attempt. Each new observation is saved and compared with the recorded one after normalisation
(trailing whitespace, environment paths); the replay stops at the first difference. When every action
matches, the working directory is compared with the attempt's last checkpoint, and the new state may be
scored. The report goes to ``<run_dir>/replays/`` with its lineage; a replay is never a task result, so
it stays out of every statistic.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agentcompass_dagster.contracts.environment import EnvironmentSession
from agentcompass_dagster.durable.activity import ACTIVITY_FILE, read_activity
from agentcompass_dagster.durable.checkpoints import CheckpointStore
from agentcompass_dagster.durable.session import BLOBS_DIR
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.runtime.store.atomic import atomic_write_json
from agentcompass_dagster.runtime.execution.permits import open_session
from agentcompass_dagster.runtime.execution.plugins import resolve_plugins
from agentcompass_dagster.runtime.store.layout import REPLAYS_DIR
from agentcompass_dagster.runtime.store.naming import file_stem
from agentcompass_dagster.runtime.execution.plan import Planner
from agentcompass_dagster.runtime.execution.selection import load_selected_tasks
from agentcompass_dagster.runtime.store.run_store import load_run_request
from agentcompass_dagster.contracts.records import RunResult, utcnow

_ENV_PATH = re.compile(r"/tmp/agentcompass-[A-Za-z0-9_]+")


class ReplayStep(BaseModel):
    index: int
    command: str
    recorded_exit_code: int | None
    actual_exit_code: int | None
    recorded_output: str
    actual_output: str
    matches: bool


class ReplayReport(BaseModel):
    lineage: dict[str, Any]
    status: str = "matched"
    steps: list[ReplayStep] = Field(default_factory=list)
    first_difference: dict[str, Any] | None = None
    artifacts_compared: bool = False
    artifact_differences: list[str] = Field(default_factory=list)
    evaluation: dict[str, Any] | None = None
    path: str | None = None


def normalize(output: str, roots: list[str]) -> str:
    for root in roots:
        if root:
            output = output.replace(root, "<env>")
    output = _ENV_PATH.sub("<env>", output)
    return "\n".join(line.rstrip() for line in output.rstrip().splitlines())


def recorded_actions(trajectory: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        s
        for s in trajectory
        if s.get("type") == "tool_call"
        and s.get("status", "completed") == "completed"
        and isinstance(s.get("command"), str)
    ]


def recorded_output(durable: Path, action: dict[str, Any]) -> str:
    """The whole output a command had: the record keeps it cut to what the model saw, and a longer one
    whole in the attempt's blobs (redacted, as every record)."""
    blob = action.get("output_blob")
    if isinstance(blob, dict) and isinstance(blob.get("sha256"), str) and blob["sha256"].isalnum():
        try:
            return (durable / BLOBS_DIR / blob["sha256"]).read_text(errors="replace")
        except OSError:
            pass
    return str(action.get("output", ""))


def replay(path: Path, task_id: str, attempt: int = 1, score: bool = False) -> ReplayReport:
    return asyncio.run(_replay(Path(path), task_id, attempt, score))


async def _replay(path: Path, task_id: str, attempt: int, score: bool) -> ReplayReport:
    run_dir, request, _ = load_run_request(path)
    plugins = resolve_plugins(request)
    tasks = {t.id: t for t in load_selected_tasks(request, plugins.benchmark).tasks}
    if task_id not in tasks:
        raise UserError(f"--task={task_id!r}: not a task of {path}")
    task = tasks[task_id]
    detail = run_dir.load_detail(task, include_errors=True)
    recorded = detail.attempts.get(str(attempt)) if detail else None
    if recorded is None:
        raise UserError(f"--attempt={attempt}: task {task_id!r} of {path} has no recorded attempt {attempt}")
    actions = recorded_actions(recorded.trajectory)
    if not actions:
        raise UserError(f"--task={task_id!r}: attempt {attempt} recorded no terminal actions to replay")
    durable = run_dir.durable_dir(task_id, attempt)
    report = ReplayReport(
        lineage={
            "kind": "replay",
            "parent_run_id": run_dir.run_id,
            "parent_run_dir": str(path),
            "task_id": task_id,
            "attempt": attempt,
            "replayed_at": utcnow(),
        }
    )
    old_roots = [
        h.get("root", "")
        for r in read_activity(durable / ACTIVITY_FILE)
        if r.kind == "session" and isinstance(h := r.data.get("handle"), dict)
    ]
    plan = Planner(request, plugins).plan(task, attempt)
    session = await open_session(plugins.environment, plan, task)
    try:
        prepared = await plugins.benchmark.prepare_task(task, session, request, plan.benchmark_plan)
        await session.set_network_policy(plan.run_network_policy)
        roots = [*old_roots, str(getattr(session, "root", "")), session.workdir, session.scratch]
        await _replay_actions(session, actions, durable, roots, report)
        if report.first_difference is None:
            differences = await asyncio.to_thread(_compare_artifacts, durable, session)
            report.artifacts_compared = differences is not None
            report.artifact_differences = differences or []
            if report.artifact_differences:
                report.status = "artifacts_differ"
        if score:
            evaluation = await plugins.benchmark.evaluate(
                prepared, RunResult(final_answer=recorded.final_answer), session
            )
            report.evaluation = evaluation.model_dump(mode="json")
    finally:
        await session.close()
    target = run_dir.path / REPLAYS_DIR / f"{file_stem(task_id)}@{attempt}-{utcnow().replace(':', '')}.json"
    report.path = str(target)
    target.parent.mkdir(exist_ok=True)
    atomic_write_json(target, report.model_dump(mode="json"))
    return report


async def _replay_actions(
    session: EnvironmentSession, actions: list[dict[str, Any]], durable: Path, roots: list[str], report: ReplayReport
) -> None:
    """Run each recorded command in ``session`` and compare it with the record (paths of the old and new
    environments normalised); stop at the first difference, which the report then holds."""
    for index, action in enumerate(actions, start=1):
        result = await session.exec(f"bash -c {shlex.quote(action['command'])} 2>&1", timeout_s=600)
        step = ReplayStep(
            index=index,
            command=action["command"],
            recorded_exit_code=action.get("exit_code"),
            actual_exit_code=result.exit_code,
            recorded_output=recorded_output(durable, action),
            actual_output=result.stdout + result.stderr,
            matches=False,
        )
        expected = normalize(step.recorded_output, roots)
        actual = normalize(step.actual_output, roots)
        step.matches = step.recorded_exit_code == step.actual_exit_code and expected == actual
        report.steps.append(step)
        if not step.matches:
            report.status = "diverged"
            report.first_difference = {
                "step": index,
                "command": action["command"],
                "expected": {"exit_code": step.recorded_exit_code, "output": expected},
                "actual": {"exit_code": step.actual_exit_code, "output": actual},
            }
            return


def _compare_artifacts(durable: Path, session: EnvironmentSession) -> list[str] | None:
    """Paths of the working directory whose content differs from the attempt's last checkpoint; None
    when there is nothing to compare (no checkpoint, or files this machine cannot reach)."""
    roots = session.checkpoint_roots()
    # Checked first: opening a store creates its directories, and the recorded run is only read.
    if roots is None or not (durable / "checkpoints").is_dir():
        return None
    store = CheckpointStore(durable / "checkpoints")
    last = store.latest()
    if last is None:
        return None
    recorded = {p: e.digest for p, e in store.manifest(last).roots.get("work", {}).items()}
    with tempfile.TemporaryDirectory() as scratch:
        actual_manifest = CheckpointStore(Path(scratch)).capture(1, {"work": roots["work"]})
    actual = {p: e.digest for p, e in actual_manifest.roots.get("work", {}).items()}
    return sorted(p for p in set(recorded) | set(actual) if recorded.get(p) != actual.get(p))
