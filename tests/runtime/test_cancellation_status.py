"""The status on disk after a stop is how the run ended, whenever the stop lands: during the finalization
of a request, or in a process that exits while its orchestration still runs (R-CLEAN-2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from waiting import wait_until

from agentcompass_dagster.declarations import registry
from agentcompass_dagster.plugins.benchmarks.synthetic import SyntheticBenchmark
from agentcompass_dagster.contracts.declarations import BenchmarkConfig, EnvironmentConfig, HarnessConfig, ModelConfig
from agentcompass_dagster.contracts.request import ExecutionConfig, OutputConfig, EvalRequest
from agentcompass_dagster.runtime.execution.orchestration_thread import OrchestrationThread
from agentcompass_dagster.runtime.execution.orchestrator import Orchestrator
from agentcompass_dagster.runtime.results.scores import TaskScores
from agentcompass_dagster.contracts.records import MetricResult


def request(tmp_path: Path, benchmark: str, step: dict[str, object], record: Path | None = None) -> EvalRequest:
    params: dict[str, object] = {"default": step}
    if record is not None:
        params["record"] = str(record)
    return EvalRequest(
        name="r",
        benchmark=BenchmarkConfig(id=benchmark, params={"n_tasks": 2}),
        model=ModelConfig(id="m"),
        harness=HarnessConfig(id="scripted", params=params),
        environment=EnvironmentConfig(id="local"),
        execution=ExecutionConfig.model_validate({"limits": {"cleanup_grace_seconds": 1}}),
        output=OutputConfig(results_dir=tmp_path / "results", run_name="r"),
    )


def run_info(tmp_path: Path) -> dict[str, object]:
    (run_dir,) = (tmp_path / "results" / "r").glob("*/*/*")
    return json.loads((run_dir / "run_info.json").read_text())


def test_a_stop_during_finalization_leaves_the_run_cancelled_not_running(
    tmp_path: Path, plugin_registries: None
) -> None:
    """R-CLEAN-2: a stop that lands while a request is being finalized (its metrics hang past the cleanup
    grace) writes `cancelled` once the grace is over, while the finalization still runs: a process that
    died then would have left `running` (finalizing requests were skipped). A finalization that completes
    after all writes its own status."""
    entered, release = threading.Event(), threading.Event()

    class HangingMetrics(SyntheticBenchmark):
        def aggregate_metrics(self, scores: TaskScores, total: int) -> MetricResult:
            entered.set()
            release.wait(30)
            return super().aggregate_metrics(scores, total)

    registry.benchmarks.register("hanging-metrics", HangingMetrics)
    orchestration = OrchestrationThread(Orchestrator([request(tmp_path, "hanging-metrics", {"oracle": True})]))
    orchestration.start()
    try:
        wait_until(entered.is_set, "the finalization to compute the metrics", 30)
        orchestration.cancel()
        info = wait_until(lambda: (i := run_info(tmp_path))["status"] != "running" and i, "a terminal status", 30)
        assert (info["status"], bool(info["finished_at"])) == ("cancelled", True), info
    finally:
        release.set()
    with pytest.raises(KeyboardInterrupt):
        orchestration.result()
    assert run_info(tmp_path)["status"] == "completed"


EXITS_WHILE_RUNNING = """
import json, sys, time
from pathlib import Path
from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.runtime.execution.orchestration_thread import OrchestrationThread
from agentcompass_dagster.runtime.execution.orchestrator import Orchestrator

request = EvalRequest.model_validate_json(Path(sys.argv[1]).read_text())
record = Path(sys.argv[2])
OrchestrationThread(Orchestrator([request])).start()
deadline = time.monotonic() + 30
while time.monotonic() < deadline and (not record.exists() or record.read_text().count('"start"') < 2):
    time.sleep(0.02)
sys.exit(3)
"""


def test_a_process_that_exits_while_its_orchestration_runs_leaves_its_runs_cancelled(tmp_path: Path) -> None:
    """R-CLEAN-2: the orchestration thread of a Dagster step is a daemon, and the step that should stop it
    may never resume (Dagster raises an interrupt between two of its events, outside the step's code). A
    process that exits while tasks run (here: its main thread ends while two tasks sleep for 60 s) stops
    the orchestration first: the sessions are closed, the process ends within the cleanup grace, and
    run_info.json says `cancelled` (it said `running`, the daemon thread cut off mid-task)."""
    record = tmp_path / "calls.jsonl"
    spec = tmp_path / "request.json"
    spec.write_text(request(tmp_path, "synthetic", {"sleep": 60}, record).model_dump_json())
    script = tmp_path / "exits.py"
    script.write_text(textwrap.dedent(EXITS_WHILE_RUNNING))
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    done = subprocess.run(
        [sys.executable, str(script), str(spec), str(record)],
        capture_output=True,
        text=True,
        timeout=50,
        env={**os.environ, "TMPDIR": str(tmpdir)},
    )
    assert done.returncode == 3, done.stderr
    events = [json.loads(line) for line in record.read_text().splitlines()]
    assert sorted(e["task"] for e in events if e["event"] == "start") == ["t0", "t1"], events
    info = run_info(tmp_path)
    assert (info["status"], bool(info["finished_at"])) == ("cancelled", True), info
    assert "interrupted" in str(info["error"])
    # The sessions were closed: their directories in the temp dir are gone (the cleanup's threads were
    # refused when it ran from atexit, after concurrent.futures had shut down).
    assert [p.name for p in tmpdir.iterdir()] == [], done.stderr


def test_a_killed_direct_run_is_marked_failed_by_the_next_one(tmp_path: Path) -> None:
    """R-STORE-3: a `--direct` run killed with SIGKILL cannot write its terminal status; the next
    `--direct --reuse` of the same benchmark x model finds its process gone and marks it `failed` (it
    stayed `running` forever), keeps its finished task, and runs the rest."""
    from conftest import write_sweep

    gate = tmp_path / "gate"
    sweep = write_sweep(
        tmp_path,
        name="killed",
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 2}}],
        harness={"id": "scripted", "params": {"tasks": {"t1": {"gate": str(gate)}}}},
        execution={"limits": {"task_concurrency": 2}},
    )
    command = [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", "--direct", str(sweep)]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    details = tmp_path / "results" / "killed" / "synthetic" / "none"
    try:
        wait_until(lambda: list(details.glob("*/details/t0_*.json")), "task t0 to finish while t1 waits", proc=proc)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    (first,) = details.iterdir()
    assert json.loads((first / "run_info.json").read_text())["status"] == "running"
    gate.touch()
    rerun = subprocess.run([*command, "--reuse"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    info = json.loads((first / "run_info.json").read_text())
    assert (
        info["status"] == "failed" and f"its process {proc.pid} on " in info["error"] and "is gone" in info["error"]
    ), info
    assert not (first / ".running").exists()
    (second,) = set(details.iterdir()) - {first}
    assert json.loads((second / "run_info.json").read_text())["reused_from"]["task_ids"] == ["t0"]
