"""Cost of running a sweep through Dagster (per-task partitions) on SQLite or PostgreSQL.

What it measures, for N in (1000, --n) (or just --n when it is at most 1000) so that a flat cost per task
is visible, with a sweep written to a YAML file: the ``synthetic`` benchmark with N no-op tasks x one
model (``provider: none``), the ``oracle`` harness (no subprocess), the ``local`` environment and
``execution.limits.task_concurrency = --concurrency``, its results in a temp directory:

* ``runtime``: the same N tasks through ``orchestrate`` alone (bench_store's ``run`` phase), the
  baseline that shows what Dagster adds per task.
* ``first``: ``launch_sweep`` (what `agentcompass run` does) into a fresh instance: N dynamic partitions,
  one run of the sweep's job created (N planned events) and executed by a run worker process (the
  runtime, one materialization per task as it ends, the metrics, comparison and checks). Reports the
  wall time of the call and ms/task, the run's own time (run record start to end) and a split of its
  evaluating step from the event log: step start to the first materialization (the runtime), the
  materializations, and the rest; the Dagster overhead per task is (first - runtime) / N.
* ``rerun``: ``launch_sweep`` again on the finished sweep: the wall time of the call and of the whole
  process (interpreter start, imports, definitions, instance, planning, exit). It launches nothing.
* peak RSS of each phase: every phase runs in a fresh child process (this script re-invoked with a
  hidden ``--child`` option) that reports its own ``ru_maxrss`` and, for ``first``, its run worker's.
* ``--split M`` (default 4): at N=1000, the same sweep as 1 run and as M concurrent runs
  (``max_partitions_per_run = N / M``, ``max_concurrent_runs = M``), each in a fresh instance: wall
  times side by side.

``--instance sqlite`` (default: the generated dagster.yaml, pooled SQLite event log) or ``--instance
postgresql+psycopg2://user@host:port/db``: each measurement then gets a fresh database on that server.

Sanity checks (the exit status is non-zero when one fails): ``first`` launches runs and none fails; the
re-run launches no run; afterwards the instance holds N materialized partitions of the attempts asset,
and the newest run directory holds N normal details, accuracy 1.0 (oracle; 0.0 for nop) and summary
counts new == N; the ``runtime`` phase passes bench_store's checks. Timings are reported against the
targets (Dagster's overhead over the runtime at most 2 ms per task at N=10,000; a re-run under 2 s in the
process and under 4 s as a whole process; peak RSS under 300 MB) but never fail the script.

Run it from the repository root:

    python perf/bench_dagster.py [--n 10000] [--concurrency 8] [--harness oracle] [--instance URL]
                                       [--split 4] [--results-dir DIR] [--profile DIR] [--json]

Without --results-dir everything (DAGSTER_HOME, run directories) goes to a temp directory that is
removed afterwards; with it, each N gets a fresh ``bench-n<N>-*`` directory below DIR that is kept.
With --profile DIR, the ``launch_sweep`` call of the ``first`` and ``rerun`` phases runs under cProfile
and its stats go to ``DIR/<phase>-n<N>.prof`` (the timings are then inflated by the profiler).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import resource
import secrets
import shlex
import sys
import tempfile
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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
    write_sweep,
)
from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.defs.instance import PG_URL_ENV, ensure_dagster_home
from agentcompass_dagster.defs.sweep import sweep_benchmarks
from agentcompass_dagster.launcher.launch import SweepLaunch, launch_sweep
from agentcompass_dagster.runtime.store.layout import SUMMARY_COUNTS

SWEEP_NAME = "bench"
MODEL_ID = "m"
LAUNCH_PHASES = ("first", "rerun")
CHILD_PHASES = ("runtime", *LAUNCH_PHASES, "check", "split")
SPLIT_N = 1000
TARGET_OVERHEAD_MS_PER_TASK = 2.0
TARGET_RERUN_S = 2.0
TARGET_RERUN_PROCESS_S = 4.0
TARGET_PEAK_RSS_MB = 300.0


@dataclass
class Segment:
    """A stretch of the evaluating step, between two of its event timestamps."""

    name: str
    seconds: float
    events: int = 0  # materialization events inside it, if it is made of them


@dataclass
class LaunchMeasurement:
    """One ``launch_sweep`` call of a sweep of N tasks, made and checked by a child process."""

    n: int
    phase: str  # "first", "rerun" or "split"
    seconds: float  # the launch_sweep call
    peak_rss_mb: float
    rss_after_import_mb: float
    worker_peak_rss_mb: float = 0.0  # the largest run worker it waited for
    runs: dict[str, float] = field(default_factory=dict)  # run id -> its seconds (start to end)
    step_split: list[Segment] = field(default_factory=list)
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
        return cls(**{**known, "step_split": [Segment(**segment) for segment in data["step_split"]]})


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
        return {
            "n": self.n,
            "runtime": self.runtime.to_json(),
            "launches": [m.to_json() for m in self.launches],
            "dagster_overhead_ms_per_task": self.dagster_overhead_ms_per_task(),
            "check_problems": self.check_problems,
        }


def fresh_instance(workdir: Path, instance: str) -> None:
    """Point this process at a new DAGSTER_HOME and, for PostgreSQL, a new database on that server."""
    os.environ["DAGSTER_HOME"] = str(workdir / "dagster_home")
    if instance == "sqlite":
        os.environ.pop(PG_URL_ENV, None)
        return
    import psycopg2

    name = f"bench_{secrets.token_hex(6)}"
    admin = psycopg2.connect(instance.replace("postgresql+psycopg2://", "postgresql://"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    admin.close()
    os.environ[PG_URL_ENV] = urlsplit(instance)._replace(path=f"/{name}").geturl()


def step_split(instance: dg.DagsterInstance, record: dg.RunRecord) -> list[Segment]:
    """The evaluating step cut at its start, its first and last materialization, and its end."""
    run_id = record.dagster_run.run_id
    step = f"{SWEEP_NAME}__synthetic__evaluate"
    events = {
        e.dagster_event_type: e.timestamp
        for e in instance.all_logs(run_id, of_type={dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS})
        if e.step_key == step
    }
    materializations = [
        r.event_log_entry.timestamp
        for r in instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
        if r.event_log_entry.step_key == step
    ]
    if record.start_time is None or record.end_time is None or len(events) < 2 or not materializations:
        return []
    start, end = events[dg.DagsterEventType.STEP_START], events[dg.DagsterEventType.STEP_SUCCESS]
    return [
        Segment("run start -> step start (tasks step, pool)", start - record.start_time),
        Segment("step start -> 1st materialization (runtime)", materializations[0] - start),
        Segment("materializations, as tasks end", materializations[-1] - materializations[0], len(materializations)),
        Segment("last materialization -> step end (metrics)", end - materializations[-1]),
        Segment("step end -> run end (comparison, checks)", record.end_time - end),
    ]


def describe_runs(launch: SweepLaunch, m: LaunchMeasurement) -> None:
    with dg.DagsterInstance.get() as instance:
        for record in instance.get_run_records(filters=dg.RunsFilter(run_ids=launch.launched), ascending=True):
            if record.start_time is not None and record.end_time is not None:
                m.runs[record.dagster_run.run_id] = record.end_time - record.start_time
            if not m.step_split:
                m.step_split = step_split(instance, record)


def measure_launch(phase: str, sweep_file: Path, n: int, profile: Path | None) -> LaunchMeasurement:
    """Time ``launch_sweep`` in this process, which must be a fresh child (its peak RSS is taken before
    the instance is read back), then describe the runs it launched and check what must hold."""
    sweep = load_sweep(sweep_file)
    rss_after_import = max_rss_mb()
    profiler = cProfile.Profile()
    with profiler if profile is not None else nullcontext():
        started = time.perf_counter()
        launch = launch_sweep(sweep, sweep_file)
        seconds = time.perf_counter() - started
    m = LaunchMeasurement(
        n=n,
        phase=phase,
        seconds=seconds,
        peak_rss_mb=max_rss_mb(),
        rss_after_import_mb=rss_after_import,
        worker_peak_rss_mb=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    )
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(profile / f"{phase}-n{n}.prof")
    m.problems += [f"run failed: {failure}" for failure in launch.failed]
    if phase == "rerun":
        if launch.launched:
            m.problems.append(f"the re-run of a finished sweep launched {len(launch.launched)} runs")
    elif not launch.launched:
        m.problems.append("launched no run into a fresh instance")
    else:
        describe_runs(launch, m)
    return m


def check_sweep(sweep_file: Path, n: int, harness: str) -> list[str]:
    """The finished sweep: N materialized attempts partitions in the instance, and a newest run directory
    with N normal details, the harness's expected accuracy and every task new."""
    sweep_benchmark = sweep_benchmarks(load_sweep(sweep_file))[0]
    ensure_dagster_home(None)
    with dg.DagsterInstance.get() as instance:
        partitions = len(instance.get_materialized_partitions(sweep_benchmark.key("attempts")))
    problems = []
    if partitions != n:
        problems.append(f"the instance holds {partitions} materialized attempts partitions, expected {n}")
    newest = sweep_benchmark.newest_runs(SUMMARY_COUNTS).get(MODEL_ID)
    if newest is None:
        return [*problems, f"no finished run directory of model {MODEL_ID!r}"]
    run_dir = Path(newest.path)
    counts = json.loads((run_dir / SUMMARY_COUNTS).read_text())
    return problems + check_run_dir(
        run_dir, n, harness, reused=False, accuracy=counts["metrics"].get("accuracy"), counts=counts
    )


def run_child_phase(args: argparse.Namespace) -> dict[str, Any]:
    """The child's work for ``--child PHASE``; ``--results-dir`` is the directory of this N; the parent
    made the instance (DAGSTER_HOME and, for PostgreSQL, AGENTCOMPASS_DAGSTER_PG_URL are set)."""
    workdir: Path = args.results_dir
    if args.child == "runtime":
        request = build_request("bench-dagster-runtime", args.n, args.concurrency, args.harness, workdir / "runtime")
        return measure(request, "run").to_json()
    sweep_file = workdir / f"{SWEEP_NAME}.yaml"
    if args.child == "check":
        return {"problems": check_sweep(sweep_file, args.n, args.harness)}
    return measure_launch(args.child, sweep_file, args.n, args.profile).to_json()


def child_args(phase: str, n: int, args: argparse.Namespace, workdir: Path) -> list[str]:
    extra = ["--profile", str(args.profile)] if args.profile is not None and phase in LAUNCH_PHASES else []
    return [
        "--child",
        phase,
        "--n",
        str(n),
        "--concurrency",
        str(args.concurrency),
        "--harness",
        args.harness,
        "--results-dir",
        str(workdir),
        *extra,
    ]


def launch_child(phase: str, n: int, args: argparse.Namespace, workdir: Path) -> LaunchMeasurement:
    out = run_child_json(__file__, child_args(phase, n, args, workdir))
    if out.data is None:
        return LaunchMeasurement(
            n=n,
            phase=phase,
            seconds=0.0,
            peak_rss_mb=0.0,
            rss_after_import_mb=0.0,
            process_seconds=out.seconds,
            problems=[out.error],
        )
    m = LaunchMeasurement.from_json(out.data)
    m.process_seconds = out.seconds
    return m


def measure_size(n: int, args: argparse.Namespace, parent: Path) -> SizeResult:
    """At one N, in a fresh directory and instance: the runtime alone, then first launch, re-run and
    check, each in its own child; a phase that fails stops the ones that depend on it."""
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-n{n}-", dir=parent))
    fresh_instance(workdir, args.instance)
    write_sweep(n, args.concurrency, args.harness, workdir, name=SWEEP_NAME, model=MODEL_ID)
    runtime = run_child(__file__, child_args("runtime", n, args, workdir), n, "run", k=1)
    result = SizeResult(n=n, runtime=runtime, launches=[], check_problems=[])
    for phase in LAUNCH_PHASES:
        result.launches.append(m := launch_child(phase, n, args, workdir))
        if m.problems:
            return result
    out = run_child_json(__file__, child_args("check", n, args, workdir))
    result.check_problems = out.data["problems"] if out.data is not None else [out.error]
    return result


def measure_split(args: argparse.Namespace, parent: Path) -> list[LaunchMeasurement]:
    """SPLIT_N tasks as one run and as --split concurrent runs, each in a fresh directory and instance,
    with no-op tasks and with tasks that wait --split-sleep seconds each."""
    measurements = []
    for sleep in (0.0, args.split_sleep):
        for runs in (1, args.split):
            workdir = Path(tempfile.mkdtemp(prefix=f"bench-split{runs}-", dir=parent))
            fresh_instance(workdir, args.instance)
            write_sweep(
                SPLIT_N,
                args.concurrency,
                args.harness,
                workdir,
                name=SWEEP_NAME,
                model=MODEL_ID,
                runs=runs,
                sleep=sleep,
            )
            m = launch_child("split", SPLIT_N, args, workdir)
            m.phase = f"split sleep={sleep:g}"
            if not m.problems and len(m.runs) != runs:
                m.problems.append(f"expected {runs} runs, launched {len(m.runs)}")
            measurements.append(m)
    return measurements


def target(value: float, text: str, met: bool) -> dict[str, Any]:
    """One row of a target report, in the form render_targets prints."""
    return {"value": round(value, 3), "target": text, "met": met}


def target_report(results: list[SizeResult], n: int) -> dict[str, Any]:
    """How the full-size first launch and re-run compare with the targets (informational)."""
    full = next(r for r in results if r.n == n)
    report: dict[str, Any] = {}
    if (overhead := full.dagster_overhead_ms_per_task()) is not None:
        report["Dagster overhead ms/task"] = target(
            overhead, f"<= {TARGET_OVERHEAD_MS_PER_TASK:g}", overhead <= TARGET_OVERHEAD_MS_PER_TASK
        )
    first = full.launch("first")
    if first is not None:
        peak = max(first.peak_rss_mb, first.worker_peak_rss_mb)
        report["first peak RSS MB (launcher, worker)"] = target(
            peak, f"< {TARGET_PEAK_RSS_MB:g}", peak < TARGET_PEAK_RSS_MB
        )
    if (rerun := full.launch("rerun")) is not None:
        report["re-run launch s"] = target(rerun.seconds, f"< {TARGET_RERUN_S:g}", rerun.seconds < TARGET_RERUN_S)
        report["re-run process s"] = target(
            rerun.process_seconds, f"< {TARGET_RERUN_PROCESS_S:g}", rerun.process_seconds < TARGET_RERUN_PROCESS_S
        )
    small = min(results, key=lambda r: r.n)
    if small.n != n and first is not None and (small_first := small.launch("first")) is not None:
        ratio = first.ms_per_task / small_first.ms_per_task
        report["first ms/task ratio"] = target(
            ratio, f"<= {TARGET_FLATNESS:g} (N={n} vs N={small.n})", ratio <= TARGET_FLATNESS
        )
    return report


def render_phases(results: list[SizeResult]) -> str:
    """One row per phase; ms/task only where tasks ran, process seconds only where the parent timed a launch."""
    header = (
        f"{'N':>7}  {'phase':<8} {'seconds':>9} {'ms/task':>9} {'process s':>10} {'peak RSS MB':>12} "
        f"{'worker RSS MB':>14}"
    )
    rows = []
    for r in results:
        rows.append(
            f"{r.n:>7}  {'runtime':<8} {r.runtime.seconds:>9.3f} {r.runtime.ms_per_task:>9.3f} {'':>10} "
            f"{r.runtime.peak_rss_mb:>12.1f} {'':>14}"
        )
        for m in r.launches:
            ms = f"{m.ms_per_task:.3f}" if m.phase == "first" else ""
            worker = f"{m.worker_peak_rss_mb:.1f}" if m.phase == "first" else ""
            rows.append(
                f"{r.n:>7}  {m.phase:<8} {m.seconds:>9.3f} {ms:>9} {m.process_seconds:>10.3f} "
                f"{m.peak_rss_mb:>12.1f} {worker:>14}"
            )
    return "\n".join([header, "-" * len(header), *rows])


def render_first(results: list[SizeResult]) -> str:
    """Per N: the first launch's run, the Dagster overhead per task, and its evaluating step's split."""
    lines = []
    for r in results:
        if (first := r.launch("first")) is None:
            continue
        runs = ", ".join(f"{seconds:.3f} s" for seconds in first.runs.values())
        lines.append(
            f"N={r.n}: run {runs}; outside the run (planning, creating it, the worker's start) "
            f"{first.seconds - sum(first.runs.values()):.3f} s"
        )
        if (overhead := r.dagster_overhead_ms_per_task()) is not None:
            lines.append(f"  Dagster overhead over the runtime alone: {overhead:.3f} ms/task")
        for segment in first.step_split:
            events = (
                f"  ({segment.events} events, {1000.0 * segment.seconds / segment.events:.3f} ms each)"
                if segment.events
                else ""
            )
            lines.append(f"    {segment.name:<48} {segment.seconds:>9.3f} s{events}")
    return "\n".join(lines)


def render_split(measurements: list[LaunchMeasurement]) -> str:
    return "\n".join(f"{SPLIT_N} tasks, {m.phase}: {len(m.runs)} run(s) {m.seconds:.2f} s wall" for m in measurements)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument(
        "--instance",
        default="sqlite",
        help="sqlite (default) or a postgresql+psycopg2:// URL of a server to make databases on",
    )
    parser.add_argument("--split", type=int, default=4, help="concurrent runs of the split comparison (0: skip it)")
    parser.add_argument(
        "--split-sleep",
        type=float,
        default=0.05,
        help="seconds each task waits in the second split comparison, as for a model's answer",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="run launch_sweep of the first and rerun phases under cProfile, stats to DIR",
    )
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
        split = measure_split(args, parent) if args.split > 1 else []
    problems = [p for r in results for p in r.problems()] + [f"split: {p}" for m in split for p in m.problems]
    targets = target_report(results, args.n)
    storage = "SQLite" if args.instance == "sqlite" else f"PostgreSQL at {urlsplit(args.instance).hostname}"

    if args.json:
        print(
            json.dumps(
                {
                    "command": command,
                    "n": args.n,
                    "concurrency": args.concurrency,
                    "harness": args.harness,
                    "instance": storage,
                    "sizes": [r.to_json() for r in results],
                    "split": [m.to_json() for m in split],
                    "targets": targets,
                    "problems": problems,
                },
                indent=2,
            )
        )
    else:
        print(f"command: {command}")
        print(
            f"synthetic benchmark x 1 model, harness={args.harness}, environment=local, "
            f"concurrency={args.concurrency}, Dagster {dg.__version__} on {storage}\n"
        )
        print(render_phases(results))
        print("\nfirst materialization, from the run record and the evaluating step's event log:")
        print(render_first(results))
        if split:
            print("\none run against concurrent runs (processes), same instance kind:")
            print(render_split(split))
        if targets:
            print("\ntargets (informational):")
            print(render_targets(targets))
        if not problems:
            print(
                "\nsanity checks passed: runs launched without failure, the re-run launched none, N materialized "
                "attempts partitions, N details, expected accuracy, summary counts"
            )
    return report_problems(problems)


if __name__ == "__main__":
    sys.exit(main())
