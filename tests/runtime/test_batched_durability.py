"""R-STORE-6 with batched writes: a task is reported finished only after an fsync of its details
directory that began after its detail's rename has ended, the details that finish together share that
fsync, and a SIGKILL in a burst of finishing tasks loses no task that was reported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.runtime.store import atomic
from agentcompass_dagster.runtime.store import run_dir
from agentcompass_dagster.runtime.store.detail_writer import DetailWriter
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate
from agentcompass_dagster.runtime.execution.request_state import OrchestrationObserver, RequestState
from agentcompass_dagster.runtime.store.outcomes import TaskDetail

CONCURRENCY = 8


def synthetic_request(results_dir: Path, n_tasks: int) -> EvalRequest:
    """No-op tasks: the oracle answers each at once, so the run is all detail writes."""
    return EvalRequest.model_validate(
        {
            "name": "burst",
            "benchmark": {"id": "synthetic", "params": {"n_tasks": n_tasks}},
            "model": {"id": "none"},
            "harness": {"id": "oracle"},
            "environment": {"id": "local"},
            "execution": {"limits": {"task_concurrency": CONCURRENCY}},
            "output": {"results_dir": str(results_dir)},
        }
    )


class Journal:
    """Renames into details/ and fsyncs of it, in the order they happened."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str]] = []

    def add(self, kind: str, what: str) -> None:
        with self.lock:
            self.events.append((kind, what))

    def durable(self, name: str) -> bool:
        """An fsync of details/ began after ``name`` was renamed into it, and has ended."""
        with self.lock:
            events = list(self.events)
        renamed = events.index(("rename", name))
        started = [what for kind, what in events[renamed:] if kind == "fsync-start"]
        ended = {what for kind, what in events if kind == "fsync-end"}
        return any(number in ended for number in started)


def test_a_task_is_reported_only_once_its_directory_entry_is_durable_and_fsyncs_are_shared(
    tmp_path: Path, monkeypatch
) -> None:
    """R-STORE-6: the first fsync of details/ is held until every worker has handed in its finished
    detail; no task is reported finished meanwhile, each report comes after an fsync begun after that
    detail's rename, and the details handed in meanwhile share fsyncs (fewer fsyncs than tasks)."""
    n = 40
    journal = Journal()
    held, released = threading.Event(), threading.Event()
    submitted = threading.Semaphore(0)
    real_fsync, real_rename, real_submit = atomic.DirectorySync._fsync, run_dir.rename_noreplace, DetailWriter.submit
    fsyncs = iter(range(1_000_000))

    def fsync_dir(sync: atomic.DirectorySync) -> None:
        if sync.directory.name != "details":
            return real_fsync(sync)
        number = str(next(fsyncs))
        journal.add("fsync-start", number)
        if not held.is_set():
            held.set()
            assert released.wait(30), "the test never released the first fsync"
        real_fsync(sync)
        journal.add("fsync-end", number)

    def rename(source: Path, target: Path) -> bool:
        done = real_rename(source, target)
        journal.add("rename", target.name)
        return done

    def submit(writer: DetailWriter, detail: TaskDetail):  # type: ignore[no-untyped-def]
        future = real_submit(writer, detail)
        submitted.release()
        return future

    monkeypatch.setattr(atomic.DirectorySync, "_fsync", fsync_dir)
    monkeypatch.setattr(run_dir, "rename_noreplace", rename)
    monkeypatch.setattr(DetailWriter, "submit", submit)
    reported: list[tuple[str, bool, bool]] = []

    class Observer(OrchestrationObserver):
        def task_finished(self, state: RequestState, detail: TaskDetail) -> None:
            assert state.run_dir is not None
            name = state.run_dir.detail_path(detail.task_id, detail.category).name
            reported.append((detail.task_id, released.is_set(), journal.durable(name)))

    request = synthetic_request(tmp_path, n)

    def run() -> None:
        reported.append(("result", orchestrate([request], Observer()).status == "completed", True))

    runner = threading.Thread(target=run)
    runner.start()
    assert held.wait(30), "no detail was written"
    for _ in range(CONCURRENCY):  # every worker finished a task and waits for its detail
        assert submitted.acquire(timeout=30), "the workers did not hand in their details"
    assert reported == [], "a task was reported finished while its directory entry was not durable"
    released.set()
    runner.join(60)
    assert reported[-1] == ("result", True, True)
    tasks = reported[:-1]
    assert len(tasks) == n and all(after and durable for _, after, durable in tasks), tasks
    details_fsyncs = sum(kind == "fsync-start" for kind, _ in journal.events)
    # The details handed in while the first fsync was held went out in one batch at most.
    assert details_fsyncs <= n - (CONCURRENCY - 2), details_fsyncs


CHILD = r"""
import sys

from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate
from agentcompass_dagster.runtime.execution.request_state import OrchestrationObserver


class Report(OrchestrationObserver):
    def task_finished(self, state, detail):
        print("finished", detail.task_id, state.run_dir.detail_path(detail.task_id, detail.category), flush=True)


orchestrate([EvalRequest.model_validate_json(sys.argv[1])], Report())
"""


def test_sigkill_in_a_burst_of_finishing_tasks_loses_no_reported_task(tmp_path: Path) -> None:
    """R-STORE-6: a run of 20,000 no-op tasks is SIGKILLed after 500 were reported finished; every
    reported task has its detail on disk, and every detail file there parses (what the kill cut short
    is a dot-prefixed temp file, never a result)."""
    request = synthetic_request(tmp_path, 20_000)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, request.model_dump_json()], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    reported: dict[str, Path] = {}
    for line in proc.stdout:
        _, task_id, path = line.split()
        reported[task_id] = Path(path)
        if len(reported) == 500:
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, "the run ended before the kill"
    assert len(reported) == 500
    for task_id, path in reported.items():
        detail = TaskDetail.model_validate_json(path.read_bytes())
        assert detail.task_id == task_id and detail.correct
    details = next(iter(reported.values())).parent
    files = [p for p in details.iterdir() if not p.name.startswith(".")]
    assert len(files) >= 500
    for path in files:
        assert json.loads(path.read_bytes())["correct"] is True, path
