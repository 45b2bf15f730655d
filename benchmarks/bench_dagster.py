"""Cost of running a sweep through Dagster (per-task partitions, SQLite): first materialization and re-run.

What it measures, for N in (1000, --n) (or just --n when it is at most 1000) so that a flat cost per task
is visible, with a sweep built in code: the ``synthetic`` benchmark with N no-op tasks x one model
(``provider: none``), the ``oracle`` harness (no subprocess), the ``local`` environment and
``execution.limits.task_concurrency = --concurrency``, its results in a temp directory:

* ``runtime``: the same N tasks through ``run_requests`` alone (bench_store's ``run`` phase), the
  baseline that shows what Dagster adds per task.
* ``first``: ``launch_sweep`` into a fresh DAGSTER_HOME (consolidated SQLite event log): the tasks run
  (adds N dynamic partitions), one attempts run (the runtime, then one AssetMaterialization per task),
  the metrics run. Reports the wall time of the call and ms/task, each Dagster run's time (from the run
  records' start and end), and a split of the attempts run from its event log: step start to the first
  materialization (the runtime inside the op), the materializations the op yields or logs (with
  metadata), any per-partition materializations Dagster itself logs for the step's output (without
  metadata; there should be none), and the rest; the Dagster overhead per task is (first - runtime) / N.
  The timings depend on the disk: every event is a few SQLite commits.
* ``rerun``: ``launch_sweep`` again on the finished sweep (same DAGSTER_HOME): the wall time of the call
  and of the whole process (interpreter start, imports, definitions, instance, launch, exit).
* peak RSS of each phase: every phase runs in a fresh child process (this script re-invoked with a
  hidden ``--child`` option) that reports its own ``ru_maxrss``.

Sanity checks (the exit status is non-zero when one fails): ``first`` launches runs and none fails; the
re-run launches no run; afterwards the instance holds N materialized partitions of the attempts asset,
and the newest run directory holds N normal details, accuracy 1.0 (oracle; 0.0 for nop) and summary
counts new == N; the ``runtime`` phase passes bench_store's checks. Timings are reported against the
design targets (at most 15 ms per task at N=10,000; a re-run under 2 s; flat ms/task) but never fail
the script: this is a report, not a test.

Run it from the repository root:

    python benchmarks/bench_dagster.py [--n 10000] [--concurrency 8] [--harness oracle]
                                       [--results-dir DIR] [--profile DIR] [--json]

Without --results-dir everything (DAGSTER_HOME, run directories) goes to a temp directory that is
removed afterwards; with it, each N gets a fresh ``bench-n<N>-*`` directory below DIR that is kept.
With --profile DIR, the ``launch_sweep`` call of the ``first`` and ``rerun`` phases runs under cProfile
and its stats go to ``DIR/<phase>-n<N>.prof`` (the timings are then inflated by the profiler).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import shlex
import sys
import tempfile
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import dagster as dg
from _bench import (
    TARGET_FLATNESS,
    Measurement,
    add_common_arguments,
    build_request,
    check_common_arguments,
    check_run_dir,
    max_rss_mb,
    measure,
    render_targets,
    report_problems,
    results_root,
    run_child,
    run_child_json,
    sizes_up_to,
)
from agentcompass_dagster.config import (
    BenchmarkConfig,
    EnvironmentConfig,
    ExecutionConfig,
    HarnessConfig,
    LimitsConfig,
    ModelConfig,
    OutputConfig,
    SweepConfig,
)
from agentcompass_dagster.defs.instance import ensure_dagster_home
from agentcompass_dagster.defs.launch import SweepLaunch, launch_sweep
from agentcompass_dagster.defs.sweep import sweep_benchmarks
from agentcompass_dagster.runtime.store import SUMMARY_COUNTS

SWEEP_NAME = "bench"
MODEL_ID = "m"
LAUNCH_PHASES = ("first", "rerun")
CHILD_PHASES = ("runtime", *LAUNCH_PHASES, "check")
TARGET_MS_PER_TASK = 15.0
TARGET_RERUN_S = 2.0


@dataclass
class Segment:
    """A stretch of the attempts run, between two of its event timestamps."""

    name: str
    seconds: float
    events: int = 0  # materialization events inside it, if it is made of them


@dataclass
class LaunchMeasurement:
    """One ``launch_sweep`` call of a sweep of N tasks, made and checked by a child process."""

    n: int
    phase: str  # "first" or "rerun"
    seconds: float  # the launch_sweep call
    peak_rss_mb: float
    rss_after_import_mb: float
    runs: dict[str, float] = field(default_factory=dict)  # asset name -> its run's seconds (start to end)
    attempts_split: list[Segment] = field(default_factory=list)
    process_seconds: float = 0.0  # the whole child process, timed by the parent
    problems: list[str] = field(default_factory=list)

    @property
    def ms_per_task(self) -> float:
        return 1000.0 * self.seconds / self.n

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ms_per_task": round(self.ms_per_task, 4)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LaunchMeasurement:
        known = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        return cls(**{**known, "attempts_split": [Segment(**segment) for segment in data["attempts_split"]]})


@dataclass
class SizeResult:
    """Every phase at one N."""

    n: int
    runtime: Measurement
    launches: list[LaunchMeasurement]
    check_problems: list[str]

    def launch(self, phase: str) -> LaunchMeasurement | None:
        return next((m for m in self.launches if m.phase == phase and not m.problems), None)

    def dagster_overhead_ms_per_task(self) -> float | None:
        first = self.launch("first")
        if first is None or self.runtime.problems:
            return None
        return 1000.0 * (first.seconds - self.runtime.seconds) / self.n

    def problems(self) -> list[str]:
        own = [f"N={self.n} {m.phase}: {p}" for m in [self.runtime, *self.launches] for p in m.problems]
        return own + [f"N={self.n} check: {p}" for p in self.check_problems]

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "runtime": self.runtime.to_json(), "launches": [m.to_json() for m in self.launches],
                "dagster_overhead_ms_per_task": self.dagster_overhead_ms_per_task(),
                "check_problems": self.check_problems}


def build_sweep(n: int, concurrency: int, harness: str, results_dir: Path) -> SweepConfig:
    return SweepConfig(
        name=SWEEP_NAME,
        benchmarks=[BenchmarkConfig(id="synthetic", params={"n_tasks": n})],
        models=[ModelConfig(id=MODEL_ID, provider="none")],
        harness=HarnessConfig(id=harness),
        environment=EnvironmentConfig(id="local"),
        execution=ExecutionConfig(limits=LimitsConfig(task_concurrency=concurrency)),
        output=OutputConfig(results_dir=results_dir),
    )


def dagster_home(workdir: Path) -> Path:
    return workdir / "dagster_home"


def run_asset(instance: dg.DagsterInstance, run_id: str) -> str:
    """The last part of the key of the asset a run materialized, from its planned-materialization event."""
    planned = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
                                           limit=1).records
    key = planned[0].event_log_entry.get_dagster_event().asset_key if planned else None
    return key.path[-1] if key is not None else f"run {run_id}"


def attempts_split(instance: dg.DagsterInstance, record: dg.RunRecord) -> list[Segment]:
    """The attempts run cut at its step start, first materialization, last materialization with
    metadata (from the op) and last one without (logged by Dagster for the step output)."""
    run_id = record.dagster_run.run_id
    starts = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.STEP_START, limit=1).records
    materializations = [
        (r.event_log_entry.timestamp, bool(r.asset_materialization and r.asset_materialization.metadata))
        for r in instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
    ]
    if record.start_time is None or record.end_time is None or not starts or not materializations:
        return []
    by_op = [timestamp for timestamp, with_metadata in materializations if with_metadata]
    by_output = [timestamp for timestamp, with_metadata in materializations if not with_metadata]
    step_start = starts[0].event_log_entry.timestamp
    first = materializations[0][0]
    op_end = max(by_op, default=first)
    output_end = max(by_output, default=op_end)
    return [
        Segment("run start -> step start", step_start - record.start_time),
        Segment("step start -> 1st materialization (runtime in the op)", first - step_start),
        Segment("materializations from the op (with metadata)", op_end - first, len(by_op)),
        Segment("step-output materializations by Dagster (no metadata)", output_end - op_end, len(by_output)),
        Segment("last materialization -> run end", record.end_time - output_end),
    ]


def describe_runs(launch: SweepLaunch, m: LaunchMeasurement) -> None:
    """Fill in each launched run's seconds and the attempts run's split from the instance."""
    if not launch.runs:
        return
    with dg.DagsterInstance.get() as instance:
        for record in instance.get_run_records(filters=dg.RunsFilter(run_ids=launch.runs), ascending=True):
            name = run_asset(instance, record.dagster_run.run_id)
            if record.start_time is not None and record.end_time is not None:
                m.runs[name] = m.runs.get(name, 0.0) + record.end_time - record.start_time
            if name == "attempts":
                m.attempts_split = attempts_split(instance, record)


def measure_launch(phase: str, sweep: SweepConfig, home: Path, profile: Path | None) -> LaunchMeasurement:
    """Time ``launch_sweep`` in this process, which must be a fresh child (its peak RSS is taken before
    the instance is read back), then describe the runs it launched and check what must hold."""
    n = sweep.benchmarks[0].params["n_tasks"]
    rss_after_import = max_rss_mb()
    profiler = cProfile.Profile()
    with profiler if profile is not None else nullcontext():
        started = time.perf_counter()
        _, launch = launch_sweep(sweep, home)
        seconds = time.perf_counter() - started
    m = LaunchMeasurement(n=n, phase=phase, seconds=seconds, peak_rss_mb=max_rss_mb(),
                          rss_after_import_mb=rss_after_import)
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(profile / f"{phase}-n{n}.prof")
    m.problems += [f"run failed: {failure}" for failure in launch.failed]
    if phase == "first":
        if not launch.runs:
            m.problems.append("launched no run into a fresh DAGSTER_HOME")
        describe_runs(launch, m)
    elif launch.runs:
        m.problems.append(f"the re-run of a finished sweep launched {len(launch.runs)} runs: {launch.runs}")
    return m


def check_sweep(sweep: SweepConfig, home: Path, harness: str) -> list[str]:
    """The finished sweep: N materialized attempts partitions in the instance, and a newest run directory
    with N normal details, the harness's expected accuracy and every task new."""
    n = sweep.benchmarks[0].params["n_tasks"]
    sb = sweep_benchmarks(sweep)[0]
    ensure_dagster_home(home)
    with dg.DagsterInstance.get() as instance:
        partitions = len(instance.get_materialized_partitions(sb.key("attempts")))
    problems = []
    if partitions != n:
        problems.append(f"the instance holds {partitions} materialized attempts partitions, expected {n}")
    newest = sb.newest_runs().get(MODEL_ID)
    if newest is None:
        return [*problems, f"no run directory of model {MODEL_ID!r} under {sweep.output.results_dir}"]
    run_dir = Path(newest.path)
    counts = json.loads((run_dir / SUMMARY_COUNTS).read_text())
    return problems + check_run_dir(run_dir, n, harness, reused=False, accuracy=counts["metrics"].get("accuracy"),
                                    counts=counts)


def run_child_phase(args: argparse.Namespace) -> dict[str, Any]:
    """The child's work for ``--child PHASE``; ``--results-dir`` is the directory of this N."""
    workdir: Path = args.results_dir
    if args.child == "runtime":
        request = build_request("bench-dagster-runtime", args.n, args.concurrency, args.harness, workdir / "runtime")
        return measure(request, "run").to_json()
    sweep = build_sweep(args.n, args.concurrency, args.harness, workdir / "results")
    if args.child == "check":
        return {"problems": check_sweep(sweep, dagster_home(workdir), args.harness)}
    return measure_launch(args.child, sweep, dagster_home(workdir), args.profile).to_json()


def child_args(phase: str, n: int, args: argparse.Namespace, workdir: Path) -> list[str]:
    extra = ["--profile", str(args.profile)] if args.profile is not None and phase in LAUNCH_PHASES else []
    return ["--child", phase, "--n", str(n), "--concurrency", str(args.concurrency), "--harness", args.harness,
            "--results-dir", str(workdir), *extra]


def launch_child(phase: str, n: int, args: argparse.Namespace, workdir: Path) -> LaunchMeasurement:
    out = run_child_json(__file__, child_args(phase, n, args, workdir))
    if out.data is None:
        return LaunchMeasurement(n=n, phase=phase, seconds=0.0, peak_rss_mb=0.0, rss_after_import_mb=0.0,
                                 process_seconds=out.seconds, problems=[out.error])
    m = LaunchMeasurement.from_json(out.data)
    m.process_seconds = out.seconds
    return m


def measure_size(n: int, args: argparse.Namespace, parent: Path) -> SizeResult:
    """At one N, in a fresh directory: the runtime alone, then first launch, re-run and check, each in its
    own child; a phase that fails stops the ones that depend on it."""
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-n{n}-", dir=parent))
    runtime = run_child(__file__, child_args("runtime", n, args, workdir), n, "run", k=1)
    result = SizeResult(n=n, runtime=runtime, launches=[], check_problems=[])
    for phase in LAUNCH_PHASES:
        result.launches.append(m := launch_child(phase, n, args, workdir))
        if m.problems:
            return result
    out = run_child_json(__file__, child_args("check", n, args, workdir))
    result.check_problems = out.data["problems"] if out.data is not None else [out.error]
    return result


def target(value: float, text: str, met: bool) -> dict[str, Any]:
    """One row of a target report, in the form render_targets prints."""
    return {"value": round(value, 3), "target": text, "met": met}


def target_report(results: list[SizeResult], n: int) -> dict[str, Any]:
    """How the full-size first launch and re-run compare with the design targets (informational)."""
    full = next(r for r in results if r.n == n)
    report: dict[str, Any] = {}
    if (first := full.launch("first")) is not None:
        report["first ms/task"] = target(first.ms_per_task, f"<= {TARGET_MS_PER_TASK:g}",
                                         first.ms_per_task <= TARGET_MS_PER_TASK)
    if (rerun := full.launch("rerun")) is not None:
        for name, seconds in (("re-run launch s", rerun.seconds), ("re-run process s", rerun.process_seconds)):
            report[name] = target(seconds, f"< {TARGET_RERUN_S:g}", seconds < TARGET_RERUN_S)
    small = min(results, key=lambda r: r.n)
    if small.n != n and first is not None and (small_first := small.launch("first")) is not None:
        ratio = first.ms_per_task / small_first.ms_per_task
        report["first ms/task ratio"] = target(ratio, f"<= {TARGET_FLATNESS:g} (N={n} vs N={small.n})",
                                               ratio <= TARGET_FLATNESS)
    return report


def render_phases(results: list[SizeResult]) -> str:
    """One row per phase; ms/task only where tasks ran, process seconds only where the parent timed a launch."""
    header = (f"{'N':>7}  {'phase':<8} {'seconds':>9} {'ms/task':>9} {'process s':>10} {'peak RSS MB':>12} "
              f"{'RSS after import MB':>20}")
    rows = []
    for r in results:
        phases: list[tuple[str, float, str, str, float, float]] = [
            ("runtime", r.runtime.seconds, f"{r.runtime.ms_per_task:.3f}", "", r.runtime.peak_rss_mb,
             r.runtime.rss_after_import_mb)
        ]
        phases += [(m.phase, m.seconds, f"{m.ms_per_task:.3f}" if m.phase == "first" else "",
                    f"{m.process_seconds:.3f}", m.peak_rss_mb, m.rss_after_import_mb) for m in r.launches]
        rows += [f"{r.n:>7}  {phase:<8} {seconds:>9.3f} {ms:>9} {process:>10} {peak:>12.1f} {after_import:>20.1f}"
                 for phase, seconds, ms, process, peak, after_import in phases]
    return "\n".join([header, "-" * len(header), *rows])


def render_first(results: list[SizeResult]) -> str:
    """Per N: the first launch's runs, the Dagster overhead per task, and the attempts run's split."""
    lines = []
    for r in results:
        if (first := r.launch("first")) is None:
            continue
        runs = ", ".join(f"{name} {seconds:.3f} s" for name, seconds in first.runs.items())
        lines.append(f"N={r.n}: runs {runs}; outside the runs {first.seconds - sum(first.runs.values()):.3f} s")
        if (overhead := r.dagster_overhead_ms_per_task()) is not None:
            lines.append(f"  Dagster overhead over the runtime alone: {overhead:.3f} ms/task")
        lines.append("  attempts run:")
        for segment in first.attempts_split:
            events = (f"  ({segment.events} events, {1000.0 * segment.seconds / segment.events:.3f} ms each)"
                      if segment.events else "")
            lines.append(f"    {segment.name:<55} {segment.seconds:>9.3f} s{events}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="run launch_sweep of the first and rerun phases under cProfile, stats to DIR")
    parser.add_argument("--child", choices=CHILD_PHASES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    check_common_arguments(parser, args)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(run_child_phase(args)))
        return 0

    command = shlex.join([sys.executable, *sys.argv])
    with results_root(args.results_dir, "bench-dagster-") as parent:
        results = [measure_size(n, args, parent) for n in sizes_up_to(args.n)]
    problems = [p for r in results for p in r.problems()]
    targets = target_report(results, args.n)

    if args.json:
        print(json.dumps({
            "command": command,
            "n": args.n,
            "concurrency": args.concurrency,
            "harness": args.harness,
            "sizes": [r.to_json() for r in results],
            "targets": targets,
            "problems": problems,
        }, indent=2))
    else:
        print(f"command: {command}")
        print(f"synthetic benchmark x 1 model, harness={args.harness}, environment=local, "
              f"concurrency={args.concurrency}, Dagster {dg.__version__} on SQLite\n")
        print(render_phases(results))
        print("\nfirst materialization, from the run records and the attempts run's event log:")
        print(render_first(results))
        if targets:
            print("\ndesign targets (informational):")
            print(render_targets(targets))
        if not problems:
            print("\nsanity checks passed: runs launched without failure, the re-run launched none, N materialized "
                  "attempts partitions, N details, expected accuracy, summary counts")
    return report_problems(problems)


if __name__ == "__main__":
    sys.exit(main())
