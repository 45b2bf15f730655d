"""Helpers shared by the by-hand benchmarks in this directory (``bench_store.py``, ``bench_engine.py``,
``bench_dagster.py``, ``bench_environments.py``).

A measurement is made in a fresh child process (the calling script re-invoked with its hidden ``--child``
option) so that each one reports its own peak RSS; the child prints its result as one JSON object on the
last line of stdout. A Measurement is one ``run_requests`` call of the ``synthetic`` benchmark with the
``local`` environment.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from agentcompass_dagster.config import (
    AttemptsConfig,
    BenchmarkConfig,
    EnvironmentConfig,
    ExecutionConfig,
    HarnessConfig,
    LimitsConfig,
    ModelConfig,
    OutputConfig,
    RunRequest,
)
from agentcompass_dagster.runtime.orchestrator import run_requests
from agentcompass_dagster.runtime.store import DETAILS, ERROR_PREFIX, SUMMARY_COUNTS

SMALL_N = 1000  # the small size, so that a flat cost per task is visible next to --n
EXPECTED_ACCURACY = {"oracle": 1.0, "nop": 0.0}
TARGET_TASKS_PER_S = 500.0
TARGET_PEAK_RSS_MB = 200.0
TARGET_FLATNESS = 1.25  # ms/task at --n over ms/task at the small N; informational only


@dataclass
class Measurement:
    """One request of N tasks with k attempts each, run and checked by a child process."""

    n: int
    phase: str  # "run", or "reuse" for a full-reuse rerun
    k: int
    seconds: float
    peak_rss_mb: float
    rss_after_import_mb: float
    run_dir: str = ""
    counts: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def accuracy(self) -> float | None:
        return self.metrics.get("accuracy")

    @property
    def tasks_per_s(self) -> float:
        return self.n / self.seconds if self.seconds > 0 else float("inf")

    @property
    def ms_per_task(self) -> float:
        return 1000.0 * self.seconds / self.n

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "tasks_per_s": round(self.tasks_per_s, 1), "ms_per_task": round(self.ms_per_task, 4)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Measurement:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def max_rss_mb() -> float:
    """This process's peak resident set size so far (ru_maxrss is in KB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def build_request(
    name: str, n: int, concurrency: int, harness: str, results_dir: Path, *, k: int = 1, reuse: bool = False
) -> RunRequest:
    """The synthetic benchmark with N tasks, k attempts each (strategy avg: every attempt runs)."""
    return RunRequest(
        name=name,
        benchmark=BenchmarkConfig(id="synthetic", params={"n_tasks": n}),
        model=ModelConfig(id="none"),
        harness=HarnessConfig(id=harness),
        environment=EnvironmentConfig(id="local"),
        execution=ExecutionConfig(
            attempts=AttemptsConfig(k=k, strategy="avg"),
            limits=LimitsConfig(task_concurrency=concurrency),
        ),
        output=OutputConfig(results_dir=results_dir, reuse=reuse),
    )


def normal_details(run_dir: Path) -> list[Path]:
    """Normal detail files in details/ (no ``_error_`` files, no dot-prefixed temp files)."""
    return [
        path
        for path in (run_dir / DETAILS).iterdir()
        if path.suffix == ".json" and not path.name.startswith((".", ERROR_PREFIX))
    ]


def check_run(m: Measurement, harness: str) -> list[str]:
    """What must hold for any measurement to mean anything: accuracy, N normal details, summary counts."""
    return check_run_dir(Path(m.run_dir), m.n, harness, reused=m.phase != "run", accuracy=m.accuracy, counts=m.counts)


def check_run_dir(run_dir: Path, n: int, harness: str, *, reused: bool, accuracy: float | None,
                  counts: dict[str, Any]) -> list[str]:
    """A finished run directory of N tasks: the harness's expected accuracy, N normal details in
    details/, and summary counts that say every task was new (or, with ``reused``, every one reused)."""
    problems = []
    expected_accuracy = EXPECTED_ACCURACY[harness]
    if accuracy != expected_accuracy:
        problems.append(f"accuracy {accuracy} != {expected_accuracy}")
    if (details := len(normal_details(run_dir))) != n:
        problems.append(f"details/ holds {details} normal details, expected {n}")
    expected = {"total": n, "evaluated": n, "error": 0, "missing": 0}
    expected |= {"new": 0, "reused": n} if reused else {"new": n, "reused": 0}
    for key, value in expected.items():
        if counts.get(key) != value:
            problems.append(f"{SUMMARY_COUNTS}: {key}={counts.get(key)}, expected {value}")
    return problems


@dataclass
class RequestRun:
    """One request run and timed by ``run_request``; ``error`` says why it has no result."""

    seconds: float
    run_dir: str = ""
    metrics: dict[str, float | None] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    error: str = ""


def run_request(request: RunRequest) -> RequestRun:
    """Run one request through ``run_requests`` in this process and time it; read back its metrics and
    its summary counts."""
    started = time.perf_counter()
    result = run_requests([request])
    seconds = time.perf_counter() - started
    outcome = result.outcomes[request.name]
    if result.status != "completed" or outcome.result is None:
        return RequestRun(seconds, error=f"orchestration {result.status}, request {outcome.status}: {outcome.error}")
    run_dir = outcome.result.run_dir
    return RequestRun(seconds, run_dir, dict(outcome.result.metrics.metrics),
                      json.loads((Path(run_dir) / SUMMARY_COUNTS).read_text()))


def measure(request: RunRequest, phase: str) -> Measurement:
    """Run one request in this process, which must be a fresh child, and check it with check_run. The
    peak RSS is taken before the checks, which list details/."""
    rss_after_import = max_rss_mb()
    run = run_request(request)
    m = Measurement(n=request.benchmark.params["n_tasks"], phase=phase, k=request.execution.attempts.k,
                    seconds=run.seconds, peak_rss_mb=max_rss_mb(), rss_after_import_mb=rss_after_import,
                    run_dir=run.run_dir, metrics=run.metrics, counts=run.counts)
    if run.error:
        m.problems.append(run.error)
        return m
    m.problems = check_run(m, request.harness.id)
    return m


@dataclass
class ChildOutput:
    """The JSON object a child printed on its last stdout line (None when it failed: see ``error``)."""

    data: dict[str, Any] | None
    seconds: float  # wall time of the whole child process: interpreter start, imports, work, exit
    error: str = ""


def run_child_json(script: str, child_args: list[str]) -> ChildOutput:
    """Re-invoke ``script`` with ``child_args``, time it, and read the JSON object on its last stdout line.
    The child's stderr is passed through."""
    command = [sys.executable, str(Path(script).resolve()), *child_args]
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    lines = proc.stdout.strip().splitlines()
    if proc.stderr.strip():
        sys.stderr.write(proc.stderr)
    if proc.returncode != 0 or not lines:
        return ChildOutput(None, seconds, f"child exited with {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return ChildOutput(json.loads(lines[-1]), seconds)


def run_child(script: str, child_args: list[str], n: int, phase: str, k: int) -> Measurement:
    """Re-invoke ``script`` with ``child_args`` and read its Measurement from the last stdout line."""
    out = run_child_json(script, child_args)
    if out.data is None:
        return Measurement(n=n, phase=phase, k=k, seconds=0.0, peak_rss_mb=0.0, rss_after_import_mb=0.0,
                           problems=[out.error])
    return Measurement.from_json(out.data)


@contextmanager
def results_root(keep: Path | None, prefix: str) -> Iterator[Path]:
    """Where the run directories go: ``keep`` (kept afterwards), else a temp directory removed afterwards."""
    parent = keep if keep is not None else Path(tempfile.mkdtemp(prefix=prefix))
    parent.mkdir(parents=True, exist_ok=True)
    try:
        yield parent
    finally:
        if keep is None:
            shutil.rmtree(parent, ignore_errors=True)


def sizes_up_to(n: int) -> list[int]:
    """SMALL_N and n, or just n when it is at most SMALL_N."""
    return sorted({min(SMALL_N, n), n})


def target_report(measurements: list[Measurement], n: int) -> dict[str, Any]:
    """How the full-size run compares with the design targets (informational, never an exit status).
    ``measurements`` are those of one configuration (one k) at every size."""
    runs = {m.n: m for m in measurements if m.phase == "run" and not m.problems}
    full = runs.get(n)
    if full is None:
        return {}
    report: dict[str, Any] = {
        "tasks_per_s": {"value": round(full.tasks_per_s, 1), "target": f">= {TARGET_TASKS_PER_S:g}",
                        "met": full.tasks_per_s >= TARGET_TASKS_PER_S},
        "peak_rss_mb": {"value": round(max(m.peak_rss_mb for m in measurements if m.n == n), 1),
                        "target": f"< {TARGET_PEAK_RSS_MB:g}"},
    }
    report["peak_rss_mb"]["met"] = report["peak_rss_mb"]["value"] < TARGET_PEAK_RSS_MB
    small = min(runs)
    if small != n:
        ratio = full.ms_per_task / runs[small].ms_per_task
        report["ms_per_task_ratio"] = {"value": round(ratio, 3), "target": f"<= {TARGET_FLATNESS:g} (N={n} vs N={small})",
                                       "met": ratio <= TARGET_FLATNESS}
    return report


def render_targets(targets: dict[str, Any]) -> str:
    return "\n".join(
        f"  {name:<18} {t['value']:>9}  target {t['target']:<30} {'met' if t['met'] else 'NOT met'}"
        for name, t in targets.items()
    )


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=10_000, help="full number of tasks (default 10000)")
    parser.add_argument("--concurrency", type=int, default=8, help="execution.limits.task_concurrency (default 8)")
    parser.add_argument("--harness", choices=sorted(EXPECTED_ACCURACY), default="oracle")
    parser.add_argument("--results-dir", type=Path, help="keep run directories below this directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


def check_common_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.n < 1 or args.concurrency < 1:
        parser.error("--n and --concurrency must be positive")


def report_problems(problems: list[str]) -> int:
    """Print the sanity failures to stderr; the exit status (1 when there is one)."""
    for problem in problems:
        print(f"SANITY CHECK FAILED: {problem}", file=sys.stderr)
    return 1 if problems else 0
