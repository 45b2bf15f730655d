"""The trajectory viewer: one static HTML page per attempt of a run directory.

A page shows the task prompt, each model turn (its text, tool calls with their arguments, token usage,
duration, stop reason and the SDK's tries), each command with its exit code, duration and output, the
limit the attempt hit, the evaluation's verdict and output, the analyzers' findings marked on the steps
they point at, the attempt's checkpoints and files (copied beside it: an agent CLI's logs, what the
verifier left), and for a fork its lineage (for any attempt, its replays).

The pages are GENERATED WITH THE REPORT, as static files next to ``report.html`` (under
``trajectories/``), not served by a command: a report directory then stays self-contained, shareable
and readable from disk without a server. Everything shown is redacted again (``runtime.redact``), like
every artifact, since a page may be read far from the run. A command output longer than
``INLINE_CHARS`` shows its head and tail in a collapsed block, and the whole (redacted) output, from the
activity log's blob where there is one, goes to a text file beside the page, one click away: a page of
300 turns with 10 MB of output stays light. The pages hold no script, and a Content-Security-Policy
forbids them any request.

Every part is optional: a detail without a trajectory, a run without ``run_info.json`` or analysis, a
missing blob or activity log leaves that section out; a step of a shape this version does not know is
shown as its JSON. Blobs and logs are read without following symlinks (``runtime.safe_fs``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError

from agentcompass_dagster.plugins.analyzers.reading import readable
from agentcompass_dagster.plugins.analyzers.loops import LOOP_REPEATS
from agentcompass_dagster.plugins.analyzers.steps import normalized, opening
from agentcompass_dagster.durable.session import BLOBS_DIR
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.reporting.show import Checkpoint, ReplayOverview, attempt_activity, replays_by_task
from agentcompass_dagster.runtime.store.atomic import atomic_write_bytes
from agentcompass_dagster.runtime.store.layout import (
    ANALYSIS_JSON,
    DETAILS,
    ERROR_PREFIX,
    PAGES_DIR,
    REPLAYS_DIR,
    RUN_INFO,
)
from agentcompass_dagster.runtime.store.naming import file_stem, normalize_component
from agentcompass_dagster.runtime.store.redact import redact, redact_text
from agentcompass_dagster.runtime.store.run_dir import RunDir
from agentcompass_dagster.runtime.store.run_records import read_detail, read_json
from agentcompass_dagster.runtime.store.safe_fs import read_beneath
from agentcompass_dagster.contracts.records import EvaluatedAttempt, LimitHit, Usage
from agentcompass_dagster.contracts.request import Lineage, lift_metadata
from agentcompass_dagster.runtime.store.outcomes import TaskDetail

if TYPE_CHECKING:
    import jinja2

# An output up to this many characters is shown whole; a longer one by its head and tail of EDGE_CHARS.
INLINE_CHARS = 4096
EDGE_CHARS = 2048
# A blob larger than this is shown cut: a page's full-output file need not hold gigabytes.
MAX_BLOB_BYTES = 64 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")
# A page is made from its detail file, the run's run_info.json, analysis summary and replays directory
# (a replay report added to it changes the directory's mtime), and by this module and its template: a
# page older than any of them is rendered again. The attempt's activity log (checkpoints, output blobs)
# is complete before its detail is written, so the detail stands for it.
_RENDERER = (Path(__file__), Path(__file__).parents[1] / "templates" / "trajectory.html.j2")


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
class _Run:
    """What every page of a run directory shares, read once."""

    path: Path
    request: dict[str, Any] = field(default_factory=dict)
    flagged: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    replays: dict[str, list[ReplayOverview]] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> _Run:
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


def trajectory_page_path(out_dir: Path, run_dir: Path, task_id: str, attempt: int) -> Path:
    """Where the page of an attempt goes: ``out_dir/trajectories/<sweep>/<benchmark>/<model>/<run_id>/
    <task>__a<N>.html``, the same for the same run directory and task whatever else the report holds.
    Every part is a safe file name, also in a URL: a task id with other characters than ``[A-Za-z0-9._-]``
    (or too long) keeps a readable prefix and gets its hash, so no two ids share a page."""
    return trajectory_pages_dir(out_dir, run_dir) / trajectory_page_name(task_id, attempt)


@functools.lru_cache(maxsize=64)
def trajectory_pages_dir(out_dir: Path, run_dir: Path) -> Path:
    """The directory of a run's pages (see trajectory_page_path), resolved once per run: a report names
    one page per task."""
    parts = [normalize_component(part, "run_dir") for part in Path(run_dir).resolve().parts[-4:]]
    return Path(out_dir) / PAGES_DIR / Path(*parts)


def trajectory_page_name(task_id: str, attempt: int) -> str:
    return f"{_task_slug(task_id)}__a{int(attempt)}.html"


def _task_slug(task_id: str) -> str:
    safe = normalize_component(task_id, "task_id")
    safe = "_" + safe[1:] if safe.startswith("-") else safe  # never read as an option by a shell tool
    if safe == task_id and len(safe) <= 100:
        return safe
    return f"{safe[:100]}-{hashlib.sha256(task_id.encode()).hexdigest()[:16]}"


def load_trajectory(run_dir: Path, task_id: str, attempt: int) -> Trajectory:
    """The page of one attempt of a task with a detail in ``run_dir`` (a normal one, else its error)."""
    run_dir = Path(run_dir)
    detail = _find_detail(run_dir, task_id)
    found = detail.attempts.get(str(attempt)) if detail is not None else None
    if detail is None or found is None:
        raise UserError(f"{run_dir}: no detail of task {task_id!r} with an attempt {attempt}")
    return _trajectory(_Run.read(run_dir), detail, found)


def write_trajectory_pages(run_dir: Path, out_dir: Path, report: Path | None = None) -> dict[tuple[str, int], Path]:
    """Write the page of every attempt with a detail in ``run_dir`` under ``out_dir`` (see
    trajectory_page_path), each with its full-output files (and a link back to ``report``, the page
    that links to them); returns where each (task, attempt) went.
    A page newer than everything it is made from (see _sources) is kept as it is: `agentcompass report`
    run again redacts and rewrites only the pages of what changed. One detail is held at a time, so a
    run of any size fits."""
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    run: _Run | None = None  # read for the first page to render, not for a run whose pages are all kept
    shared = _newest_mtime([run_dir / RUN_INFO, run_dir / ANALYSIS_JSON, run_dir / REPLAYS_DIR, *_RENDERER])
    pages: dict[tuple[str, int], Path] = {}
    for path, detail in _details(run_dir):
        made_from = max(shared, _newest_mtime([path]))
        for attempt in sorted(detail.attempts.values(), key=lambda a: a.attempt):
            page = trajectory_page_path(out_dir, run_dir, detail.task_id, attempt.attempt)
            if _newest_mtime([page]) <= made_from:
                run = run or _Run.read(run_dir)
                _write_page(_trajectory(run, detail, attempt), page, report)
            pages[(detail.task_id, attempt.attempt)] = page
    return pages


def _newest_mtime(paths: list[Path]) -> int:
    """The newest modification time (ns) of those of ``paths`` that exist, -1 when none does."""
    newest = -1
    for path in paths:
        try:
            newest = max(newest, path.stat().st_mtime_ns)
        except OSError:
            continue
    return newest


def _details(run_dir: Path) -> Iterator[tuple[Path, TaskDetail]]:
    """Each task's detail file and detail, one at a time: the normal one, else its ``_error_`` one."""
    seen: set[str] = set()
    paths = sorted((run_dir / DETAILS).glob("*.json"), key=lambda p: (p.name.startswith(ERROR_PREFIX), p.name))
    for path in paths:
        detail = None if path.name.startswith(".") else read_detail(path)
        if detail is not None and detail.task_id not in seen:
            seen.add(detail.task_id)
            yield path, detail


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


def _trajectory(run: _Run, detail: TaskDetail, attempt: EvaluatedAttempt) -> Trajectory:
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


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2  # lazily: the CLI starts without it

    return jinja2.Environment(
        loader=jinja2.PackageLoader("agentcompass_dagster", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _write_page(trajectory: Trajectory, page: Path, report: Path | None) -> None:
    """The page and, for each output too long to show whole, its full text in ``<page stem>/``. Each
    file is written atomically but not fsynced: a report is rebuilt from the run, never the only copy."""
    files = page.parent / page.stem
    links: dict[int, str] = {}
    for step in trajectory.steps:
        if step.output is not None and len(step.output) > INLINE_CHARS:
            target = files / f"output-{step.index}.txt"
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, step.output.encode(), fsync=False)
            links[step.index] = f"{files.name}/{target.name}"
    file_links = {}
    for name in trajectory.files:
        assert trajectory.files_dir is not None
        target = files / "files" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        data = read_beneath(trajectory.files_dir, name, limit=MAX_BLOB_BYTES)
        atomic_write_bytes(target, redact_text(data.decode("latin-1")).encode("latin-1"), fsync=False)
        file_links[name] = f"{files.name}/files/{name}"
    html = (
        _environment()
        .get_template("trajectory.html.j2")
        .render(
            t=trajectory,
            links=links,
            file_links=file_links,
            inline_chars=INLINE_CHARS,
            edge_chars=EDGE_CHARS,
            report_link=os.path.relpath(report, page.parent) if report is not None else None,
        )
    )
    page.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(page, html.encode(), fsync=False)
