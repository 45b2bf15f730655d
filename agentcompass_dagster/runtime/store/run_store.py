"""The run directories below one results_dir: checking it, reserving new ones (R-STORE-2), finding the
newest and the reuse source (R-REUSE-3), and opening an existing one with the request it ran."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from agentcompass_dagster.contracts.request import OutputConfig, EvalRequest
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.runtime.store.atomic import TMP_SUFFIX, fsync_dir
from agentcompass_dagster.runtime.store.declared import unredacted
from agentcompass_dagster.runtime.store.layout import (
    FINISHED_ATTEMPTS_DIR,
    DETAILS,
    OWNER,
    RETRY_DETAILS,
    RUN_INFO,
    detail_names,
    results_dir_of,
)
from agentcompass_dagster.runtime.store.naming import normalize_component
from agentcompass_dagster.runtime.store.processes import ProcessId
from agentcompass_dagster.runtime.store.run_dir import RunDir
from agentcompass_dagster.runtime.store.run_records import ReuseSource, RunInfo, read_json, run_started_at
from agentcompass_dagster.contracts.records import TaskSpec


class RunStore:
    """All run directories below one results_dir."""

    def __init__(self, results_dir: Path) -> None:
        self.results_dir = Path(results_dir)

    def check_writable(self) -> None:
        """Refuse a results_dir that cannot hold run directories, before anything runs."""
        for path in (self.results_dir, *self.results_dir.parents):
            if path.exists() and not path.is_dir():
                what = "" if path == self.results_dir else f" ({path} is a file)"
                raise UserError(f"output.results_dir={str(self.results_dir)!r}: not a directory{what}")
        try:
            self.results_dir.mkdir(parents=True, exist_ok=True)
            probe = self.results_dir / f".write-probe-{os.getpid()}{TMP_SUFFIX}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise UserError(
                f"output.results_dir={str(self.results_dir)!r}: not writable: {exc.strerror or exc}"
            ) from None

    def check_run_id_free(self, root: Path, run_id: str | None) -> None:
        """R-STORE-2: an explicit run_id whose directory exists is refused."""
        if run_id is None:
            return
        path = root / normalize_component(run_id, "output.run_id")
        if path.exists():
            raise UserError(f"output.run_id={run_id!r}: {path} already exists; choose a new run_id or leave it empty")

    def find_reuse_source(self, root: Path, output: OutputConfig) -> ReuseSource | None:
        """R-REUSE-3: an explicit id must exist; otherwise the newest run with run_info.json, or None."""
        if not output.reuse:
            return None
        if output.reuse_run_id:
            path = root / normalize_component(output.reuse_run_id, "output.reuse_run_id")
            if not (path / RUN_INFO).is_file():
                raise UserError(f"output.reuse_run_id={output.reuse_run_id!r}: no run directory {path}")
            return ReuseSource(run_id=path.name, path=str(path), started_at=run_started_at(path) or "")
        return next(iter(self.runs_newest_first(root)), None)

    def fail_dead_runs(self, root: Path) -> list[str]:
        """Mark failed the runs below ``root`` whose process died before their terminal status (a SIGKILL,
        a crash), so that `show`, `summary` and a resume read what happened instead of `running` forever;
        the ids of those marked. Their finished details stay, for reuse and resume."""
        failed = []
        for candidate in root.iterdir() if root.is_dir() else []:
            try:
                owner = ProcessId.parse((candidate / OWNER).read_text())
            except OSError:
                continue
            if owner is None or owner.alive():
                continue
            run_dir = open_run_dir(candidate)
            if run_dir.record.stop(
                "failed",
                f"its process {owner.pid} on {owner.host} is gone (killed?); marked failed by a "
                "later run, its finished tasks are kept",
            ):
                failed.append(candidate.name)
            (candidate / OWNER).unlink(missing_ok=True)
        return failed

    def runs_newest_first(self, root: Path) -> list[ReuseSource]:
        """Every run directory below ``root`` (one benchmark x model), the one started last first: what
        "newest" means everywhere (reuse, summaries, metrics, reports). Re-rendering a summary later does
        not make a run newer."""
        runs = []
        for candidate in root.iterdir() if root.is_dir() else []:
            started_at = run_started_at(candidate)
            if started_at is not None:
                runs.append(ReuseSource(run_id=candidate.name, path=str(candidate), started_at=started_at))
        return sorted(runs, key=lambda run: (run.started_at, run.run_id), reverse=True)

    def finished(self, root: Path, tasks: list[TaskSpec]) -> set[str]:
        """The ids of ``tasks`` with a normal detail in a run directory below ``root`` (one benchmark x
        model). The newest run holds every task finished before it started, so older runs are listed only
        for what it lacks (a result that runs overlapping it, or a fresh round, left in an earlier one)."""
        missing = {task.id: detail_names(task.id, task.category) for task in tasks}
        for run in self.runs_newest_first(root):
            if not missing:
                break
            try:
                names = set(os.listdir(Path(run.path) / DETAILS))
            except FileNotFoundError:
                continue
            for task_id in [task_id for task_id, candidates in missing.items() if not names.isdisjoint(candidates)]:
                del missing[task_id]
        return {task.id for task in tasks} - set(missing)

    def reserve(self, root: Path, run_id: str | None) -> RunDir:
        """R-STORE-2: reserve a new run directory atomically (mkdir fails if another run took it)."""
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(
                f"output.results_dir={str(self.results_dir)!r}: cannot create {root}: {exc.strerror}"
            ) from None
        if run_id is not None:
            path = root / normalize_component(run_id, "output.run_id")
            try:
                os.mkdir(path)
            except FileExistsError:
                raise UserError(
                    f"output.run_id={run_id!r}: {path} already exists; choose a new run_id or leave it empty"
                ) from None
        else:
            base = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            for n in range(100_000):
                path = root / (base if n == 0 else f"{base}-{n}")
                try:
                    os.mkdir(path)
                    break
                except FileExistsError:
                    continue
            else:
                raise RuntimeError(f"no free run id below {root}")
        os.mkdir(path / DETAILS)
        os.mkdir(path / RETRY_DETAILS)
        os.mkdir(path / FINISHED_ATTEMPTS_DIR)
        fsync_dir(root)
        return RunDir(path, restorable=set(), fresh=True)


def open_run_dir(path: Path) -> RunDir:
    """An existing run directory, read back from its run_info.json (for `summary` and tools)."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"RUN_DIR={str(path)!r}: does not exist")
    if not path.is_dir():
        raise UserError(f"RUN_DIR={str(path)!r}: not a directory")
    data = read_json(path / RUN_INFO)
    if data is None:
        raise UserError(f"RUN_DIR={str(path)!r}: not a run directory (no readable {RUN_INFO} there)")
    run_dir = RunDir(path)
    run_dir.info = RunInfo.model_validate(data)
    return run_dir


def load_run_request(path: Path) -> tuple[RunDir, EvalRequest, Path]:
    """An existing run directory, the request it ran (from run_info.json, what redaction hid there taken
    from the files it was declared in) and its results_dir, so the run can be resumed, forked or
    replayed with the configuration it was made with."""
    run_dir = open_run_dir(path)
    assert run_dir.info is not None
    try:
        request = unredacted(EvalRequest.model_validate(run_dir.info.request))
    except ValidationError as exc:
        raise UserError(
            f"RUN_DIR={str(path)!r}: its run_info.json request cannot be read back: "
            f"{exc.errors(include_url=False)[0]['msg']}"
        ) from None
    return run_dir, request, results_dir_of(path, request.output)
