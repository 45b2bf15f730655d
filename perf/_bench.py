"""Helpers shared by the by-hand performance scripts in this directory (``bench_store.py``, ``bench_engine.py``,
``bench_dagster.py``, ``bench_environments.py``, ``bench_vs_inspect.py``, ``bench_demo.py``, ``bench_latency.py``).

A measurement is made in a fresh child process (the calling script re-invoked with its hidden ``--child``
option) so that each one reports its own peak RSS; the child prints its result as one JSON object on the
last line of stdout. A Measurement is one ``orchestrate`` call of the ``synthetic`` benchmark with the
``local`` environment: its wall seconds and the user+system CPU seconds spent in that call (threads
included, and any child process it waited for), and the parent adds the whole child's wall and CPU
seconds (interpreter start, imports and the checks included).

A command that starts processes of its own, such as `agentcompass run` with its run workers, is measured
as a whole process tree by ``measure_tree``: it runs under ``_tree.py``, a fresh child subreaper that
reaps every descendant and reports the tree's wall, CPU and largest peak RSS.

The durable-write floor (``add_floor``) puts a run beside the cheapest way to do what it must do per
task at the least: N files of a real detail's size written into one fresh directory on the same
filesystem by --concurrency threads, each the textbook atomic durable write (a temp file in the same
directory, fsync it, rename it to its final name, fsync the directory). It runs in its own child, this
file run as a script:

    python perf/_bench.py --floor DIR --n N --bytes SIZE --threads T
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from itertools import islice
from pathlib import Path
from typing import Any

import yaml
from _tree import TreeRun
from agentcompass_dagster.contracts.request import (
    AttemptsConfig,
    ExecutionConfig,
    LimitsConfig,
    OutputConfig,
    EvalRequest,
)
from agentcompass_dagster.contracts.declarations import BenchmarkConfig, EnvironmentConfig, HarnessConfig, ModelConfig
from agentcompass_dagster.defs.instance import PG_URL_ENV
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate
from agentcompass_dagster.runtime.store.layout import DETAILS, ERROR_PREFIX, SUMMARY_COUNTS

SMALL_N = 1000  # the small size, so that a flat cost per task is visible next to --n
EXPECTED_ACCURACY = {"oracle": 1.0, "nop": 0.0}
FLOOR_SAMPLE = 5  # details whose median size is the floor's file size
TREE_CHILD = Path(__file__).with_name("_tree.py")

# The design targets, each with the N it is set at; informational only, never an exit status.
TARGET_TASKS_PER_S, TARGET_TASKS_PER_S_N = 1500.0, 10_000  # k=1
TARGET_CPU_MS_PER_ATTEMPT = 1.0
TARGET_FLOOR_RATIO, TARGET_FLOOR_RATIO_N = 1.5, 10_000  # runtime wall over the floor's, k=1
TARGET_PEAK_RSS_MB, TARGET_PEAK_RSS_N = 200.0, 100_000
TARGET_REUSE_S, TARGET_REUSE_N = 5.0, 100_000  # bench_store's full-reuse rerun
TARGET_FLATNESS, TARGET_FLATNESS_N = 1.25, 10_000  # ms/attempt at --n over ms/attempt at the small N


@dataclass
class Measurement:
    """One request of N tasks with k attempts each, run and checked by a child process."""

    n: int
    phase: str  # "run", or "reuse" for a full-reuse rerun
    k: int
    seconds: float
    peak_rss_mb: float
    rss_after_import_mb: float
    cpu_seconds: float = 0.0  # spent in orchestrate
    process_seconds: float = 0.0  # the whole child process, timed by the parent
    process_cpu_seconds: float = 0.0
    run_dir: str = ""
    counts: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)
    detail_bytes: int = 0  # the durable-write floor's, from add_floor; 0 when it was not measured
    floor_seconds: float = 0.0
    floor_cpu_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def accuracy(self) -> float | None:
        return self.metrics.get("accuracy")

    @property
    def tasks_per_s(self) -> float:
        return self.n / self.seconds if self.seconds > 0 else float("inf")

    @property
    def attempts_per_s(self) -> float:
        return self.n * self.k / self.seconds if self.seconds > 0 else float("inf")

    @property
    def ms_per_task(self) -> float:
        return 1000.0 * self.seconds / self.n

    @property
    def ms_per_attempt(self) -> float:
        return self.ms_per_task / self.k

    @property
    def cpu_ms_per_task(self) -> float:
        return 1000.0 * self.cpu_seconds / self.n

    @property
    def cpu_ms_per_attempt(self) -> float:
        return self.cpu_ms_per_task / self.k

    @property
    def floor_tasks_per_s(self) -> float | None:
        return self.n / self.floor_seconds if self.floor_seconds > 0 else None

    @property
    def wall_over_floor(self) -> float | None:
        return self.seconds / self.floor_seconds if self.floor_seconds > 0 else None

    @property
    def cpu_over_floor(self) -> float | None:
        return self.cpu_seconds / self.floor_cpu_seconds if self.floor_cpu_seconds > 0 else None

    def to_json(self) -> dict[str, Any]:
        derived = {
            "tasks_per_s": self.tasks_per_s,
            "attempts_per_s": self.attempts_per_s,
            "ms_per_task": self.ms_per_task,
            "ms_per_attempt": self.ms_per_attempt,
            "cpu_ms_per_task": self.cpu_ms_per_task,
            "floor_tasks_per_s": self.floor_tasks_per_s,
            "wall_over_floor": self.wall_over_floor,
            "cpu_over_floor": self.cpu_over_floor,
        }
        return {**asdict(self), **{key: None if value is None else round(value, 4) for key, value in derived.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Measurement:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def max_rss_mb() -> float:
    """This process's peak resident set size so far (ru_maxrss is in KB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cpu_seconds(who: int) -> float:
    """User+system CPU seconds so far of ``resource.RUSAGE_SELF`` (every thread) or of
    ``resource.RUSAGE_CHILDREN`` (the children waited for, and theirs)."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def own_cpu_seconds() -> float:
    """This process's CPU seconds so far, with those of the children it has waited for."""
    return cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(resource.RUSAGE_CHILDREN)


def build_request(
    name: str, n: int, concurrency: int, harness: str, results_dir: Path, *, k: int = 1, reuse: bool = False
) -> EvalRequest:
    """The synthetic benchmark with N tasks, k attempts each (strategy avg: every attempt runs)."""
    return EvalRequest(
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


def normal_details(run_dir: Path) -> Iterator[Path]:
    """Normal detail files in details/ (no ``_error_`` files, no dot-prefixed temp files), one at a
    time: details/ may hold 100,000 of them."""
    with os.scandir(run_dir / DETAILS) as entries:
        for entry in entries:
            if entry.name.endswith(".json") and not entry.name.startswith((".", ERROR_PREFIX)):
                yield Path(entry.path)


def check_run(m: Measurement, harness: str) -> list[str]:
    """What must hold for any measurement to mean anything: accuracy, N normal details, summary counts."""
    return check_run_dir(Path(m.run_dir), m.n, harness, reused=m.phase != "run", accuracy=m.accuracy, counts=m.counts)


def check_run_dir(
    run_dir: Path,
    n: int,
    harness: str,
    *,
    reused: bool,
    accuracy: float | None,
    counts: dict[str, Any],
    expected_accuracy: float | None = None,
) -> list[str]:
    """A finished run directory of N tasks: the harness's expected accuracy (``expected_accuracy`` for a
    harness whose accuracy depends on its model), N normal details in details/, and summary counts that
    say every task was new (or, with ``reused``, every one reused)."""
    problems = []
    if expected_accuracy is None:
        expected_accuracy = EXPECTED_ACCURACY[harness]
    if accuracy != expected_accuracy:
        problems.append(f"accuracy {accuracy} != {expected_accuracy}")
    if (details := sum(1 for _ in normal_details(run_dir))) != n:
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
    cpu_seconds: float
    run_dir: str = ""
    metrics: dict[str, float | None] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    error: str = ""


def run_request(request: EvalRequest) -> RequestRun:
    """Run one request through ``orchestrate`` in this process and time it (wall and CPU); read back
    its metrics and its summary counts."""
    started, cpu_started = time.perf_counter(), own_cpu_seconds()
    result = orchestrate([request])
    seconds, cpu = time.perf_counter() - started, own_cpu_seconds() - cpu_started
    outcome = result.outcomes[request.name]
    if result.status != "completed" or outcome.result is None:
        return RequestRun(
            seconds, cpu, error=f"orchestration {result.status}, request {outcome.status}: {outcome.error}"
        )
    run_dir = outcome.result.run_dir
    return RequestRun(
        seconds,
        cpu,
        run_dir,
        dict(outcome.result.metrics.metrics),
        json.loads((Path(run_dir) / SUMMARY_COUNTS).read_text()),
    )


def run_measurement(request: EvalRequest, phase: str) -> Measurement:
    """Run one request in this process, which must be a fresh child, without checking it."""
    rss_after_import = max_rss_mb()
    run = run_request(request)
    m = Measurement(
        n=request.benchmark.params["n_tasks"],
        phase=phase,
        k=request.execution.attempts.k,
        seconds=run.seconds,
        peak_rss_mb=max_rss_mb(),
        rss_after_import_mb=rss_after_import,
        cpu_seconds=run.cpu_seconds,
        run_dir=run.run_dir,
        metrics=run.metrics,
        counts=run.counts,
    )
    if run.error:
        m.problems.append(run.error)
    return m


def measure(request: EvalRequest, phase: str) -> Measurement:
    """run_measurement, then check_run. The peak RSS is taken before the checks, which read details/."""
    m = run_measurement(request, phase)
    if not m.problems:
        m.problems = check_run(m, request.harness.id)
    return m


@dataclass
class ChildOutput:
    """The JSON object a child printed on its last stdout line (None when it failed: see ``error``)."""

    data: dict[str, Any] | None
    seconds: float  # wall time of the whole child process: interpreter start, imports, work, exit
    cpu_seconds: float  # user+system CPU of the whole child process (and of any child it waited for)
    error: str = ""


def run_child_json(
    script: str,
    child_args: list[str],
    python: str = sys.executable,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> ChildOutput:
    """Run ``script`` with ``child_args`` under ``python`` (in ``env`` and ``cwd``, default this process's), time it,
    and read the JSON object on its last stdout line. The child's stderr is passed through. Its CPU is this
    process's RUSAGE_CHILDREN difference, which is the child's alone as long as no other child ends meanwhile."""
    command = [python, str(Path(script).resolve()), *child_args]
    started, cpu_started = time.perf_counter(), cpu_seconds(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(command, check=False, capture_output=True, text=True, env=env, cwd=cwd)
    seconds, cpu = time.perf_counter() - started, cpu_seconds(resource.RUSAGE_CHILDREN) - cpu_started
    lines = proc.stdout.strip().splitlines()
    if proc.stderr.strip():
        sys.stderr.write(proc.stderr)
    if proc.returncode != 0 or not lines:
        return ChildOutput(None, seconds, cpu, f"child exited with {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return ChildOutput(json.loads(lines[-1]), seconds, cpu)


def run_child(script: str, child_args: list[str], n: int, phase: str, k: int) -> Measurement:
    """Re-invoke ``script`` with ``child_args`` and read its Measurement from the last stdout line."""
    out = run_child_json(script, child_args)
    if out.data is None:
        return Measurement(
            n=n, phase=phase, k=k, seconds=0.0, peak_rss_mb=0.0, rss_after_import_mb=0.0, problems=[out.error]
        )
    m = Measurement.from_json(out.data)
    m.process_seconds, m.process_cpu_seconds = out.seconds, out.cpu_seconds
    return m


def measure_tree(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> TreeRun:
    """Run ``command`` (in ``env`` and ``cwd``) under a fresh ``_tree.py`` child, the subreaper that reaps
    every descendant and reports the whole tree's wall, CPU and largest peak RSS (see its docstring)."""
    out = run_child_json(str(TREE_CHILD), ["--", *command], env=env, cwd=cwd)
    if out.data is None:
        return TreeRun(
            returncode=-1,
            seconds=out.seconds,
            tree_seconds=out.seconds,
            cpu_seconds=out.cpu_seconds,
            peak_rss_mb=0.0,
            stdout="",
            error=out.error,
        )
    return TreeRun(**out.data)


def agentcompass_command() -> list[str]:
    """The `agentcompass` console script of this Python's environment, as a user runs it."""
    script = Path(sys.executable).with_name("agentcompass")
    if not script.is_file():
        raise SystemExit(f"no agentcompass script beside {sys.executable}: pip install -e . into that environment")
    return [str(script)]


def dagster_env(home: Path) -> dict[str, str]:
    """This process's environment pointed at a fresh DAGSTER_HOME of the default kind (SQLite): an
    inherited PostgreSQL URL would otherwise put every measurement's instance on that server."""
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    env.pop(PG_URL_ENV, None)
    return env


def tree_bytes(root: Path) -> int:
    """The sum of the sizes of the regular files below ``root`` (du's apparent size, directories left out)."""
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                total += os.stat(path).st_size
    return total


def write_sweep(
    n: int,
    concurrency: int,
    harness: str,
    workdir: Path,
    *,
    name: str,
    model: str | dict[str, Any],
    runs: int = 1,
    sleep: float = 0.0,
) -> Path:
    """A sweep of the synthetic benchmark with N tasks x one model, ``local``, results in ``workdir/results``,
    as a file ``workdir/<name>.yaml``: run workers load it again, as `agentcompass run` has them. ``model``
    is the model's id (provider none) or its whole declaration. With ``runs`` > 1 it is split into that
    many concurrent runs; with ``sleep`` every task waits that long (as for a model's answer), played by the
    scripted harness."""
    dagster = {"max_partitions_per_run": -(-n // runs), "max_concurrent_runs": runs} if runs > 1 else {}
    declared: str | dict[str, Any] = harness
    if sleep:
        declared = {"id": "scripted", "params": {"default": {"oracle": harness == "oracle", "sleep": sleep}}}
    declared_model = {"id": model, "provider": "none"} if isinstance(model, str) else model
    path = workdir / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "benchmarks": [{"id": "synthetic", "params": {"n_tasks": n}}],
                "models": [declared_model],
                "harness": declared,
                "environment": "local",
                "execution": {"limits": {"task_concurrency": concurrency}},
                "output": {"results_dir": str(workdir / "results")},
                "dagster": dagster,
            }
        )
    )
    return path


@dataclass
class Floor:
    """The durable-write floor of N files, as its child measured it."""

    seconds: float
    cpu_seconds: float
    problems: list[str] = field(default_factory=list)


def detail_size(run_dir: Path) -> int:
    """The median byte size of the first few normal details in details/."""
    sizes = sorted(path.stat().st_size for path in islice(normal_details(run_dir), FLOOR_SAMPLE))
    return sizes[len(sizes) // 2] if sizes else 0


def write_durably(directory: Path, n: int, size: int, threads: int) -> None:
    """N files of ``size`` bytes into ``directory``, thread t writing files t, t + threads, ...; each
    one a temp file, fsync, rename, fsync of the directory."""
    data = b"x" * size
    root = str(directory)

    def worker(first: int) -> None:
        # One directory descriptor per thread: opening it again for every file is not part of the floor.
        dir_fd = os.open(root, os.O_RDONLY)
        try:
            for i in range(first, n, threads):
                final = f"{root}/task-{i}.json"
                tmp = f"{root}/.task-{i}.json.tmp"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.rename(tmp, final)
                os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    with ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(worker, t) for t in range(threads)]:
            future.result()


def measure_floor(directory: Path, n: int, size: int, threads: int) -> Floor:
    """write_durably in this process, which must be a fresh child, timed (wall and CPU) and checked:
    N final files and no temp file left."""
    started, cpu_started = time.perf_counter(), own_cpu_seconds()
    write_durably(directory, n, size, threads)
    floor = Floor(time.perf_counter() - started, own_cpu_seconds() - cpu_started)
    with os.scandir(directory) as entries:
        temps = Counter(entry.name.startswith(".") for entry in entries)
    if temps[False] != n or temps[True]:
        floor.problems.append(
            f"floor: {directory} holds {temps[False]} final files and {temps[True]} temp files, expected {n} and none"
        )
    return floor


def add_floor(m: Measurement, threads: int) -> Measurement:
    """Measure the durable-write floor for m's run in a child (this file run as a script): N files of
    its details' size, in a fresh directory beside its run directory that is removed afterwards."""
    if m.problems or not m.run_dir:
        return m
    run_dir = Path(m.run_dir)
    m.detail_bytes = detail_size(run_dir)
    directory = Path(tempfile.mkdtemp(prefix="durable-write-floor-", dir=run_dir.parent))
    try:
        out = run_child_json(
            __file__,
            ["--floor", str(directory), "--n", str(m.n), "--bytes", str(m.detail_bytes), "--threads", str(threads)],
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if out.data is None:
        m.problems.append(f"floor: {out.error}")
        return m
    floor = Floor(**out.data)
    m.floor_seconds, m.floor_cpu_seconds = floor.seconds, floor.cpu_seconds
    m.problems += floor.problems
    return m


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


def goal(value: float, text: str, met: bool, n: int, goal_n: int | None = None) -> dict[str, Any]:
    """One row of a target report, in the form render_targets prints; ``goal_n`` is the N the target is
    set at, noted when the value was measured at another N."""
    row: dict[str, Any] = {"value": round(value, 3), "target": text, "met": met}
    if goal_n is not None and goal_n != n:
        row["note"] = f"at N={n}; the goal is at N={goal_n}"
    return row


def target_report(measurements: list[Measurement], n: int) -> dict[str, Any]:
    """How the full-size run compares with the design targets (informational, never an exit status).
    ``measurements`` are those of one configuration (one k) at every size; the throughput and floor
    targets are set for k=1 and the CPU and flatness ones per attempt."""
    runs = {m.n: m for m in measurements if m.phase == "run" and not m.problems}
    full = runs.get(n)
    if full is None:
        return {}
    per = "task" if full.k == 1 else "attempt"
    report: dict[str, Any] = {}
    if full.k == 1:
        report["tasks/s"] = goal(
            full.tasks_per_s,
            f">= {TARGET_TASKS_PER_S:g}",
            full.tasks_per_s >= TARGET_TASKS_PER_S,
            n,
            TARGET_TASKS_PER_S_N,
        )
    report[f"CPU ms/{per}"] = goal(
        full.cpu_ms_per_attempt,
        f"<= {TARGET_CPU_MS_PER_ATTEMPT:g}",
        full.cpu_ms_per_attempt <= TARGET_CPU_MS_PER_ATTEMPT,
        n,
    )
    if full.k == 1 and (ratio := full.wall_over_floor) is not None:
        report["wall / floor"] = goal(
            ratio, f"<= {TARGET_FLOOR_RATIO:g}", ratio <= TARGET_FLOOR_RATIO, n, TARGET_FLOOR_RATIO_N
        )
    peak = max(m.peak_rss_mb for m in measurements if m.n == n)
    report["peak RSS MB"] = goal(peak, f"< {TARGET_PEAK_RSS_MB:g}", peak < TARGET_PEAK_RSS_MB, n, TARGET_PEAK_RSS_N)
    reuse = next((m for m in measurements if m.n == n and m.phase == "reuse" and not m.problems), None)
    if reuse is not None:
        report["reuse s"] = goal(
            reuse.seconds, f"< {TARGET_REUSE_S:g}", reuse.seconds < TARGET_REUSE_S, n, TARGET_REUSE_N
        )
    small = min(runs)
    if small != n:
        ratio = full.ms_per_attempt / runs[small].ms_per_attempt
        report[f"ms/{per} ratio"] = goal(
            ratio, f"<= {TARGET_FLATNESS:g} (N={n} vs N={small})", ratio <= TARGET_FLATNESS, n, TARGET_FLATNESS_N
        )
    return report


def render_targets(targets: dict[str, Any]) -> str:
    return "\n".join(
        f"  {name:<18} {t['value']:>9.4g}  target {t['target']:<30} {'met' if t['met'] else 'NOT met'}"
        + (f" ({t['note']})" if "note" in t else "")
        for name, t in targets.items()
    )


def render_floors(measurements: list[Measurement]) -> str:
    """One row per measurement whose durable-write floor was measured."""
    header = (
        f"{'k':>3} {'N':>7} {'detail B':>9} {'floor s':>9} {'floor tasks/s':>14} {'floor CPU s':>12} "
        f"{'wall/floor':>11} {'CPU/floor':>10}"
    )
    rows = [
        f"{m.k:>3} {m.n:>7} {m.detail_bytes:>9} {m.floor_seconds:>9.3f} {m.floor_tasks_per_s or 0.0:>14.1f} "
        f"{m.floor_cpu_seconds:>12.3f} {m.wall_over_floor or 0.0:>11.2f} {m.cpu_over_floor or 0.0:>10.2f}"
        for m in measurements
        if m.floor_seconds > 0
    ]
    return "\n".join([header, "-" * len(header), *rows])


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


def floor_main(argv: list[str]) -> int:
    """The floor's child: measure_floor, printed as one JSON line."""
    parser = argparse.ArgumentParser(description="the durable-write floor, as add_floor runs it in a child")
    parser.add_argument("--floor", type=Path, required=True, metavar="DIR", help="an empty directory")
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--bytes", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    args = parser.parse_args(argv)
    print(json.dumps(asdict(measure_floor(args.floor, args.n, args.bytes, args.threads))))
    return 0


if __name__ == "__main__":
    sys.exit(floor_main(sys.argv[1:]))
