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
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from agentcompass_dagster.reporting.trajectory_data import (
    EDGE_CHARS,
    INLINE_CHARS,
    MAX_BLOB_BYTES,
    RunPages,
    Trajectory,
    attempt_trajectory,
)
from agentcompass_dagster.runtime.store.atomic import atomic_write_bytes
from agentcompass_dagster.runtime.store.layout import (
    ANALYSIS_JSON,
    DETAILS,
    ERROR_PREFIX,
    PAGES_DIR,
    REPLAYS_DIR,
    RUN_INFO,
)
from agentcompass_dagster.runtime.store.naming import normalize_component
from agentcompass_dagster.runtime.store.outcomes import TaskDetail
from agentcompass_dagster.runtime.store.redact import redact_text
from agentcompass_dagster.runtime.store.run_records import read_detail
from agentcompass_dagster.runtime.store.safe_fs import read_beneath

if TYPE_CHECKING:
    import jinja2

# A page is made from its detail file, the run's run_info.json, analysis summary and replays directory
# (a replay report added to it changes the directory's mtime), and by these modules and the template: a
# page older than any of them is rendered again. The attempt's activity log (checkpoints, output blobs)
# is complete before its detail is written, so the detail stands for it.
_RENDERER = (
    Path(__file__),
    Path(__file__).with_name("trajectory_data.py"),
    Path(__file__).parents[1] / "templates" / "trajectory.html.j2",
)


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


def write_trajectory_pages(run_dir: Path, out_dir: Path, report: Path | None = None) -> dict[tuple[str, int], Path]:
    """Write the page of every attempt with a detail in ``run_dir`` under ``out_dir`` (see
    trajectory_page_path), each with its full-output files (and a link back to ``report``, the page
    that links to them); returns where each (task, attempt) went.
    A page newer than everything it is made from (see _sources) is kept as it is: `agentcompass report`
    run again redacts and rewrites only the pages of what changed. One detail is held at a time, so a
    run of any size fits."""
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    run: RunPages | None = None  # read for the first page to render, not for a run whose pages are all kept
    shared = _newest_mtime([run_dir / RUN_INFO, run_dir / ANALYSIS_JSON, run_dir / REPLAYS_DIR, *_RENDERER])
    pages: dict[tuple[str, int], Path] = {}
    for path, detail in _details(run_dir):
        made_from = max(shared, _newest_mtime([path]))
        for attempt in sorted(detail.attempts.values(), key=lambda a: a.attempt):
            page = trajectory_page_path(out_dir, run_dir, detail.task_id, attempt.attempt)
            if _newest_mtime([page]) <= made_from:
                run = run or RunPages.read(run_dir)
                _write_page(attempt_trajectory(run, detail, attempt), page, report)
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
