"""What a trajectory page shows, read from a run directory: the page's model (Trajectory, its steps, tool
calls, flags and findings) and how one attempt's detail, the run's run_info.json, analysis and replays
and the attempt's activity log (checkpoints, output blobs) become it, redacted again. Every part is
optional; a step of a shape this version does not know is shown as its JSON. Blobs are read without
following symlinks."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.contracts.records import EvaluatedAttempt, LimitHit, Usage
from agentcompass_dagster.contracts.request import Lineage, lift_metadata
from agentcompass_dagster.durable.session import BLOBS_DIR
from agentcompass_dagster.plugins.analyzers.loops import LOOP_REPEATS
from agentcompass_dagster.plugins.analyzers.reading import readable
from agentcompass_dagster.plugins.analyzers.steps import normalized, opening
from agentcompass_dagster.reporting.show import Checkpoint, ReplayOverview, attempt_activity, replays_by_task
from agentcompass_dagster.runtime.store.layout import ANALYSIS_JSON, DETAILS, ERROR_PREFIX, REPLAYS_DIR, RUN_INFO
from agentcompass_dagster.runtime.store.naming import file_stem
from agentcompass_dagster.runtime.store.outcomes import TaskDetail
from agentcompass_dagster.runtime.store.redact import redact, redact_text
from agentcompass_dagster.runtime.store.run_dir import RunDir
from agentcompass_dagster.runtime.store.run_records import read_detail, read_json
from agentcompass_dagster.runtime.store.safe_fs import read_beneath

# An output up to this many characters is shown whole; a longer one by its head and tail of EDGE_CHARS.
INLINE_CHARS = 4096
EDGE_CHARS = 2048
# A blob larger than this is shown cut: a page's full-output file need not hold gigabytes.
MAX_BLOB_BYTES = 64 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")


class ToolCallView(BaseModel):
    name: str = "?"
    arguments: str = ""


class StepFlag(BaseModel):
    analyzer: str
    label: str


class Step(BaseModel):
    """One step of the attempt's trajectory, at ``index`` (what the analyzers' evidence points at)."""

    index: int
    kind: str
    status: str | None = None
    turn: int | None = None
    seq: int | None = None
    role: str | None = None
    text: str | None = None
    tool_calls: list[ToolCallView] = Field(default_factory=list)
    usage: Usage | None = None
    duration_s: float | None = None
    stop_reason: str | None = None
    model_id: str | None = None
    tries: list[dict[str, Any]] = Field(default_factory=list)
    tool: str | None = None
    command: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    # The whole output where the log kept it in a blob, else what the record holds.
    output: str | None = None
    answer: str | None = None
    error: str | None = None
    # A fork's step taken over from its parent.
    inherited: bool = False
    checkpoint: Checkpoint | None = None
    flags: list[StepFlag] = Field(default_factory=list)


class Finding(BaseModel):
    analyzer: str
    # Listed among the run's flagged attempts in analysis_summary.json (some flags need the whole run).
    flagged: bool
    summary: str
    steps: list[int] = Field(default_factory=list)


class Trajectory(BaseModel):
    """What one attempt's page shows."""

    task_id: str
    attempt: int
    category: str | None = None
    run_id: str
    benchmark: str | None = None
    model: str | None = None
    harness: str | None = None
    verdict: str  # correct, wrong, failed (the agent's own failure) or error (the infrastructure's)
    status: str
    score: float
    final_answer: str | None = None
    failure: str | None = None
    error: str | None = None
    evaluation: dict[str, Any] = Field(default_factory=dict)
    limit: LimitHit | None = None
    usage: Usage = Field(default_factory=Usage)
    duration_s: float = 0.0
    started_at: str | None = None
    finished_at: str | None = None
    retries: int = 0
    system: str | None = None
    prompt: str | None = None
    steps: list[Step] = Field(default_factory=list)
    answer_flags: list[StepFlag] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    analysis_errors: dict[str, str] = Field(default_factory=dict)
    checkpoints: list[Checkpoint] = Field(default_factory=list)
    lineage: Lineage | None = None
    replays: list[ReplayOverview] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)  # relative to ``files_dir``
    files_dir: Path | None = Field(default=None, exclude=True)


@dataclass
class RunPages:
    """What every page of a run directory shares, read once."""

    path: Path
    request: dict[str, Any] = field(default_factory=dict)
    flagged: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    replays: dict[str, list[ReplayOverview]] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> RunPages:
        info = read_json(path / RUN_INFO) or {}
        request = info.get("request")
        analysis = read_json(path / ANALYSIS_JSON) or {}
        flagged = {
            name: {
                (str(item.get("task")), str(item.get("attempt")))
                for item in summary["flagged"]
                if isinstance(item, dict)
            }
            for name, summary in analysis.items()
            if isinstance(summary, dict) and isinstance(summary.get("flagged"), list)
        }
        return cls(
            path,
            lift_metadata(request) if isinstance(request, dict) else {},
            flagged,
            replays_by_task(path / REPLAYS_DIR),
        )

    def lineage(self) -> Lineage | None:
        try:
            return Lineage.model_validate(self.request["lineage"]) if self.request.get("lineage") else None
        except ValidationError:
            return None  # written by a version whose lineage this one cannot read: left out

    def part(self, name: str) -> str | None:
        value = self.request.get(name)
        return str(value.get("id")) if isinstance(value, dict) else None


def load_trajectory(run_dir: Path, task_id: str, attempt: int) -> Trajectory:
    """The page of one attempt of a task with a detail in ``run_dir`` (a normal one, else its error)."""
    run_dir = Path(run_dir)
    detail = _find_detail(run_dir, task_id)
    found = detail.attempts.get(str(attempt)) if detail is not None else None
    if detail is None or found is None:
        raise UserError(f"{run_dir}: no detail of task {task_id!r} with an attempt {attempt}")
    return attempt_trajectory(RunPages.read(run_dir), detail, found)


def _find_detail(run_dir: Path, task_id: str) -> TaskDetail | None:
    stem = file_stem(task_id)
    candidates = []
    for prefix in ("", ERROR_PREFIX):
        candidates += [
            run_dir / DETAILS / f"{prefix}{stem}.json",
            *sorted((run_dir / DETAILS).glob(f"{prefix}{stem}_*.json")),
        ]
    for path in candidates:
        detail = read_detail(path)
        if detail is not None and detail.task_id == task_id:
            return detail
    return None


def _verdict(attempt: EvaluatedAttempt) -> str:
    if attempt.error:
        return "error"
    if attempt.correct:
        return "correct"
    return "failed" if attempt.failure or attempt.status in ("failed", "timeout") else "wrong"


def attempt_trajectory(run: RunPages, detail: TaskDetail, attempt: EvaluatedAttempt) -> Trajectory:
    record: dict[str, Any] = redact(attempt.model_dump(mode="json"))
    durable = RunDir(run.path).durable_dir(detail.task_id, attempt.attempt)
    activity = attempt_activity(durable)
    checkpoints = {c.seq: c for c in activity.get("checkpoints", [])}
    trajectory = Trajectory(
        task_id=detail.task_id,
        attempt=attempt.attempt,
        category=detail.category,
        run_id=run.path.name,
        benchmark=run.part("benchmark"),
        model=run.part("model"),
        harness=run.part("harness"),
        verdict=_verdict(attempt),
        status=attempt.status,
        score=attempt.score,
        final_answer=record["final_answer"],
        failure=record["failure"],
        error=record["run_error"] or record["eval_error"],
        evaluation=record["benchmark_fields"],
        limit=attempt.limit,
        usage=attempt.usage,
        duration_s=attempt.duration_s,
        started_at=attempt.started_at,
        finished_at=attempt.finished_at,
        retries=attempt.retries,
        analysis_errors=_analysis_errors(record["meta"]),
        checkpoints=list(checkpoints.values()),
        lineage=run.lineage(),
        replays=[r for r in run.replays.get(detail.task_id, []) if r.attempt == attempt.attempt],
        files_dir=(files_dir := RunDir(run.path).attempt_files.dir(detail.task_id, attempt.attempt)),
    )
    trajectory.files = sorted(
        str(p.relative_to(files_dir)) for p in files_dir.rglob("*") if p.is_file() and not p.is_symlink()
    )
    opened = opening(record["trajectory"])
    for index, raw in enumerate(record["trajectory"]):
        if not isinstance(raw, dict):
            continue
        if index < opened:
            setattr(trajectory, "system" if raw["role"] == "system" else "prompt", str(raw.get("content") or ""))
            continue
        step = _step(index, raw, run.path, durable)
        step.checkpoint = checkpoints.get(step.seq) if step.kind == "tool_call" and step.seq is not None else None
        trajectory.steps.append(step)
    _mark_findings(trajectory, record.get("analysis_result") or {}, run.flagged)
    return trajectory


def _step(index: int, raw: dict[str, Any], run_dir: Path, durable: Path) -> Step:
    kind = str(raw.get("type") or "unknown")
    fields: dict[str, Any] = {
        name: raw.get(name)
        for name in (
            "status",
            "turn",
            "seq",
            "role",
            "duration_s",
            "stop_reason",
            "model_id",
            "exit_code",
            "answer",
            "error",
        )
    }
    fields.update(index=index, kind=kind, inherited=bool(raw.get("inherited")), timed_out=bool(raw.get("timed_out")))
    if kind == "message":
        fields["text"] = raw.get("content")
    elif kind == "model_call":
        fields.update(
            text=raw.get("content"),
            usage=raw.get("usage"),
            tries=raw.get("tries") or [],
            tool_calls=[_tool_call(call) for call in raw.get("tool_calls") or [] if isinstance(call, dict)],
        )
    elif kind in ("tool_call", "command"):
        call = found if isinstance(found := raw.get("call"), dict) else {}
        output = raw.get("output")
        if output is None and raw.get("command") is not None:
            output = raw.get("observation")  # an interrupted command: what the model was told instead
        fields.update(
            tool=call.get("name") or "bash",
            command=raw.get("command"),
            output=_full_output(raw.get("output_blob"), run_dir, durable, output),
        )
        if raw.get("command") is None and raw.get("answer") is None and call:
            fields["tool_calls"] = [_tool_call(call)]  # a call the harness could not use: what was sent
    elif kind == "compaction":
        fields["text"] = raw.get("summary")
    else:
        fields["text"] = json.dumps(raw, indent=1, default=str)
    try:
        return Step.model_validate(fields)
    except ValidationError:
        return Step(index=index, kind=kind, text=json.dumps(raw, indent=1, default=str))


def _tool_call(call: dict[str, Any]) -> ToolCallView:
    arguments = call.get("arguments")
    try:
        arguments = (
            json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
            if isinstance(arguments, str)
            else json.dumps(arguments, indent=2, ensure_ascii=False)
        )
    except ValueError:
        pass  # malformed JSON the model sent: shown as sent
    return ToolCallView(name=str(call.get("name") or "?"), arguments=str(arguments))


def _full_output(blob: Any, run_dir: Path, durable: Path, recorded: Any) -> str | None:
    """The whole output from the log's blob (redacted again: a log may be kept unredacted), else the
    recorded one (bounded, with a note of what was cut)."""
    digest = blob.get("sha256") if isinstance(blob, dict) else None
    if isinstance(digest, str) and _SHA256.fullmatch(digest):
        try:
            data = read_beneath(run_dir, durable / BLOBS_DIR / digest, limit=MAX_BLOB_BYTES + 1)
        except OSError:
            data = None
        if data is not None:
            cut = f"\n[... cut at {MAX_BLOB_BYTES} bytes ...]" if len(data) > MAX_BLOB_BYTES else ""
            return redact_text(data[:MAX_BLOB_BYTES].decode(errors="replace")) + cut
    return None if recorded is None else str(recorded)


def _mark_findings(trajectory: Trajectory, analysis: dict[str, Any], flagged: dict[str, set[tuple[str, str]]]) -> None:
    """Put each analyzer's result on the page, and its evidence on the steps it points at: reward
    hacking's step (or the final answer), a loop's repeated command, a tool call the harness could not use."""
    by_index = {step.index: step for step in trajectory.steps}
    marks: dict[str, list[tuple[int | None, str]]] = {}
    hacking = analysis.get("reward_hacking")
    found = hacking.get("evidence") if isinstance(hacking, dict) else None
    for evidence in found if isinstance(found, list) else []:
        if not isinstance(evidence, dict):
            continue
        marks.setdefault("reward_hacking", []).append(
            (evidence.get("step"), f"{evidence.get('pattern')}: {evidence.get('reason') or evidence.get('command')}")
        )
    loops = analysis.get("loops")
    if (
        isinstance(loops, dict)
        and isinstance(loops.get("command"), str)
        and isinstance(loops.get("max_repeats"), int)
        and loops["max_repeats"] >= LOOP_REPEATS
    ):
        label = f"loop: this command ran {loops['max_repeats']} times in a row"
        marks["loops"] = [
            (step.index, label)
            for step in trajectory.steps
            if step.command is not None and normalized(step.command) == loops["command"]
        ]
    if "tool_errors" in analysis:
        marks["tool_errors"] = [
            (step.index, f"unusable tool call: {step.error}")
            for step in trajectory.steps
            if step.kind == "tool_call" and step.error
        ]
    for name, result in analysis.items():
        steps = []
        for index, label in marks.get(name, []):
            flag = StepFlag(analyzer=name, label=label)
            target = by_index.get(index) if isinstance(index, int) else None
            if target is not None:
                target.flags.append(flag)
                steps.append(target.index)
            elif index is None:
                trajectory.answer_flags.append(flag)
        trajectory.findings.append(
            Finding(
                analyzer=name,
                flagged=(trajectory.task_id, str(trajectory.attempt)) in flagged.get(name, set()),
                summary=readable(result),
                steps=sorted(set(steps)),
            )
        )


def _analysis_errors(meta: dict[str, Any]) -> dict[str, str]:
    errors = meta.get("analysis_errors")
    return {str(name): str(error) for name, error in errors.items()} if isinstance(errors, dict) else {}
