"""Throughput, memory and reuse cost of the run store, measured through the real runtime.

What it measures, for N in (1000, --n) (or just --n when it is at most 1000) so that a flat cost per task is visible:

* ``run``: the ``synthetic`` benchmark with N tasks through ``run_requests`` with the ``local``
  environment (a real temp directory per task), the ``oracle`` harness (no subprocess) and
  ``execution.limits.task_concurrency = --concurrency``. Each detail is written atomically by the store
  and the summary at the end. Reports wall time, tasks/s and ms/task.
* ``reuse``: the same request again with ``output.reuse=True``: every detail is hard-linked from the
  finished run and nothing runs.
* peak RSS of each phase: every phase runs in a fresh child process (this script re-invoked with a
  hidden ``--child`` option) and reports its own ``ru_maxrss``, so one phase's memory never pollutes
  the next.

Sanity checks (the exit status is non-zero when one fails): the request completes, accuracy is the
harness's expected one (oracle 1.0, nop 0.0), details/ holds exactly N normal details, and
``.summary_counts.json`` says new == N for ``run`` and reused == N, new == 0 for ``reuse``. Timings are
reported against the design targets (>= 500 tasks/s at N=10,000 with concurrency 8, peak RSS < 200 MB,
flat ms/task) but never fail the script: this is a report, not a test.

Run it from the repository root:

    python benchmarks/bench_store.py [--n 10000] [--concurrency 8] [--harness oracle]
                                     [--results-dir DIR] [--json]

Without --results-dir the run directories go to a temp directory that is removed afterwards; with it,
each N gets a fresh ``bench-n<N>-*`` directory below DIR that is kept.
"""

from __future__ import annotations

import argparse
import json
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentcompass_dagster.config import (
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
PHASES = ("run", "reuse")
EXPECTED_ACCURACY = {"oracle": 1.0, "nop": 0.0}
TARGET_TASKS_PER_S = 500.0
TARGET_PEAK_RSS_MB = 200.0
TARGET_FLATNESS = 1.25  # ms/task at --n over ms/task at the small N; informational only
REQUEST_NAME = "bench-store"


@dataclass
class Measurement:
    """One phase at one N, as measured by a child process."""

    n: int
    phase: str
    seconds: float
    peak_rss_mb: float
    rss_after_import_mb: float
    run_dir: str = ""
    counts: dict[str, Any] = field(default_factory=dict)
    accuracy: float | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def tasks_per_s(self) -> float:
        return self.n / self.seconds if self.seconds > 0 else float("inf")

    @property
    def ms_per_task(self) -> float:
        return 1000.0 * self.seconds / self.n

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "tasks_per_s": round(self.tasks_per_s, 1), "ms_per_task": round(self.ms_per_task, 4)}


def max_rss_mb() -> float:
    """This process's peak resident set size so far (ru_maxrss is in KB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def build_request(n: int, concurrency: int, harness: str, results_dir: Path, reuse: bool) -> RunRequest:
    return RunRequest(
        name=REQUEST_NAME,
        benchmark=BenchmarkConfig(id="synthetic", params={"n_tasks": n}),
        model=ModelConfig(id="none"),
        harness=HarnessConfig(id=harness),
        environment=EnvironmentConfig(id="local"),
        execution=ExecutionConfig(limits=LimitsConfig(task_concurrency=concurrency)),
        output=OutputConfig(results_dir=results_dir, reuse=reuse),
    )


def count_normal_details(run_dir: Path) -> int:
    """Normal detail files in details/ (no ``_error_`` files, no dot-prefixed temp files)."""
    return sum(
        1
        for path in (run_dir / DETAILS).iterdir()
        if path.suffix == ".json" and not path.name.startswith((".", ERROR_PREFIX))
    )


def check_phase(m: Measurement, harness: str) -> list[str]:
    """Everything that must hold for the measurement to mean anything."""
    n, counts = m.n, m.counts
    problems = []
    expected_accuracy = EXPECTED_ACCURACY[harness]
    if m.accuracy != expected_accuracy:
        problems.append(f"accuracy {m.accuracy} != {expected_accuracy}")
    if (details := count_normal_details(Path(m.run_dir))) != n:
        problems.append(f"details/ holds {details} normal details, expected {n}")
    expected = {"total": n, "evaluated": n, "error": 0, "missing": 0}
    expected |= {"new": n, "reused": 0} if m.phase == "run" else {"new": 0, "reused": n}
    for key, value in expected.items():
        if counts.get(key) != value:
            problems.append(f"{SUMMARY_COUNTS}: {key}={counts.get(key)}, expected {value}")
    return problems


def measure_phase(phase: str, n: int, concurrency: int, harness: str, results_dir: Path) -> Measurement:
    """Run one phase in this process and check it; the caller is a fresh child process."""
    rss_after_import = max_rss_mb()
    request = build_request(n, concurrency, harness, results_dir, reuse=phase == "reuse")
    started = time.perf_counter()
    result = run_requests([request])
    seconds = time.perf_counter() - started
    m = Measurement(n=n, phase=phase, seconds=seconds, peak_rss_mb=max_rss_mb(),
                    rss_after_import_mb=rss_after_import)
    outcome = result.outcomes[REQUEST_NAME]
    if result.status != "completed" or outcome.result is None:
        m.problems.append(f"orchestration {result.status}, request {outcome.status}: {outcome.error}")
        return m
    m.run_dir = outcome.result.run_dir
    m.accuracy = outcome.result.metrics.metrics.get("accuracy")
    m.counts = json.loads((Path(m.run_dir) / SUMMARY_COUNTS).read_text())
    m.problems = check_phase(m, harness)
    return m


def run_child(phase: str, n: int, concurrency: int, harness: str, results_dir: Path) -> Measurement:
    """Re-invoke this script for one phase and read its Measurement from the last stdout line."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", phase, "--n", str(n),
               "--concurrency", str(concurrency), "--harness", harness, "--results-dir", str(results_dir)]
    proc = subprocess.run(command, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        sys.stderr.write(proc.stderr)
        return Measurement(n=n, phase=phase, seconds=0.0, peak_rss_mb=0.0, rss_after_import_mb=0.0,
                           problems=[f"child exited with {proc.returncode}: {proc.stderr.strip()[-500:]}"])
    if proc.stderr.strip():
        sys.stderr.write(proc.stderr)
    data = json.loads(lines[-1])
    data.pop("tasks_per_s")
    data.pop("ms_per_task")
    return Measurement(**data)


def measure_all(sizes: list[int], concurrency: int, harness: str, results_parent: Path) -> list[Measurement]:
    """Per N: a fresh results directory, then the run and the full-reuse rerun, each in its own child."""
    measurements = []
    for n in sizes:
        results_dir = Path(tempfile.mkdtemp(prefix=f"bench-n{n}-", dir=results_parent))
        for phase in PHASES:
            m = run_child(phase, n, concurrency, harness, results_dir)
            measurements.append(m)
            if m.problems:
                break  # a reuse of a broken run measures nothing
    return measurements


def render_table(measurements: list[Measurement]) -> str:
    header = f"{'N':>7}  {'phase':<6} {'seconds':>9} {'tasks/s':>10} {'ms/task':>9} {'peak RSS MB':>12}"
    rows = [
        f"{m.n:>7}  {m.phase:<6} {m.seconds:>9.3f} {m.tasks_per_s:>10.1f} {m.ms_per_task:>9.3f} {m.peak_rss_mb:>12.1f}"
        for m in measurements
    ]
    return "\n".join([header, "-" * len(header), *rows])


def target_report(measurements: list[Measurement], n: int) -> dict[str, Any]:
    """How the full-size run compares with the design targets (informational, never an exit status)."""
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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="full number of tasks (default 10000)")
    parser.add_argument("--concurrency", type=int, default=8, help="execution.limits.task_concurrency (default 8)")
    parser.add_argument("--harness", choices=sorted(EXPECTED_ACCURACY), default="oracle")
    parser.add_argument("--results-dir", type=Path, help="keep run directories below this directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--child", choices=PHASES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.n < 1 or args.concurrency < 1:
        parser.error("--n and --concurrency must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        m = measure_phase(args.child, args.n, args.concurrency, args.harness, args.results_dir)
        print(json.dumps(m.to_json()))
        return 0

    command = shlex.join([sys.executable, *sys.argv])
    sizes = sorted({min(SMALL_N, args.n), args.n})
    keep = args.results_dir is not None
    results_parent = args.results_dir if keep else Path(tempfile.mkdtemp(prefix="bench-store-"))
    results_parent.mkdir(parents=True, exist_ok=True)
    try:
        measurements = measure_all(sizes, args.concurrency, args.harness, results_parent)
    finally:
        if not keep:
            shutil.rmtree(results_parent, ignore_errors=True)
    problems = [f"N={m.n} {m.phase}: {p}" for m in measurements for p in m.problems]
    targets = target_report(measurements, args.n)

    if args.json:
        print(json.dumps({
            "command": command,
            "n": args.n,
            "concurrency": args.concurrency,
            "harness": args.harness,
            "measurements": [m.to_json() for m in measurements],
            "targets": targets,
            "problems": problems,
        }, indent=2))
    else:
        print(f"command: {command}")
        print(f"synthetic benchmark, harness={args.harness}, environment=local, concurrency={args.concurrency}\n")
        print(render_table(measurements))
        if targets:
            print("\ndesign targets (informational):")
            for name, t in targets.items():
                print(f"  {name:<18} {t['value']:>9}  target {t['target']:<30} {'met' if t['met'] else 'NOT met'}")
    for problem in problems:
        print(f"SANITY CHECK FAILED: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
