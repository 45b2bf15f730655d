"""Side by side: Inspect AI, this runtime, and this runtime through Dagster on a no-op workload, at the
same N and concurrency.

What it measures, for every N of --sizes (default 1000 and 10000), each side of --sides (default all
three: inspect ours dagster) in fresh child processes, one side after the other:

* inspect: ``_inspect_noop.py`` run by the Python of Inspect AI's own venv (--venv, default
  ``~/.cache/agentcompass-bench/inspect-venv``, made with ``python -m venv`` and ``pip install
  inspect-ai==0.3.285`` on first use, or the newest inspect-ai when that pin cannot be installed, and
  reused afterwards): one eval() of a Task of N samples (input "Reply with answer-i", target
  "answer-i"), the solver generate(), the scorer includes(), the model mockllm/model,
  max_samples = max_connections = --concurrency, the .eval log in a temp directory, no display. Per
  sample Inspect makes its TaskState, calls the mock model through its model layer (generate config,
  retry wrapper, the model call and its events in the sample's transcript), scores the answer, and
  adds the sample to the log buffer it writes into the log file.
* ours: the ``synthetic`` benchmark with N tasks through ``orchestrate`` with the ``oracle`` harness,
  the ``local`` environment and task_concurrency = --concurrency, as bench_store.py runs it. Per task
  the runtime plans it, opens a ``local`` environment session (a temp directory made and removed),
  runs the harness, evaluates the answer, and writes its detail durably (temp file, fsync, rename,
  fsync of details/); the summary and the metrics at the end.
* dagster: the same workload as a sweep YAML (the ``synthetic`` benchmark with N tasks, one model
  ``{id: m1, provider: none}``, harness ``oracle``, environment ``local``, task_concurrency =
  --concurrency, its results in a temp directory) run by ``agentcompass run SWEEP`` as a user runs it,
  in a fresh DAGSTER_HOME (SQLite, the default instance): the CLI registers the N task partitions,
  plans and creates the run, and a run-worker process evaluates them (the runtime as in "ours", one
  materialization per task), then the metrics, comparison and checks. The CLI starts processes that may
  outlive its own wait, so it is measured as a whole process tree: under ``_tree.py``, a fresh child
  subreaper that reaps every descendant before it reads RUSAGE_CHILDREN (see its docstring). Then
  ``agentcompass run SWEEP`` again, the no-op re-run, measured the same way: it must launch nothing.
* for each side: the whole child process's wall and user+system CPU seconds (interpreter start and
  imports included; the CPU from this process's RUSAGE_CHILDREN; for dagster, the whole tree's, until
  its last process was reaped), the wall and CPU seconds of the run itself (Inspect's eval() call, our
  orchestrate call; none for dagster, whose run is the whole tree), the peak RSS (for dagster, of the
  largest single process of the tree), and each side's ratio to Inspect's. For dagster also: the no-op
  re-run's whole-tree wall, CPU and peak RSS, and the instance's disk per task (the sizes of the files
  in DAGSTER_HOME after the first run, over N; ``instance_bytes.py`` breaks down an instance kept with
  --results-dir).

Sanity checks (the exit status is non-zero when one fails): Inspect's log says success with N of N
samples completed; our run completes with accuracy 1.0, N normal details and summary counts new == N,
checked by this process once the child is gone so that the child's CPU is the run's; ``agentcompass
run`` exits 0 both times, the re-run says "Nothing to run", and (checked in a child, so that this
process never loads Dagster, whose memory the next sides' children would inherit as their peak) the
results' metrics parquet says accuracy 1.0 and the instance holds N materialized attempts partitions.

Goals, informational (printed as met / NOT met, never an exit status): our CPU <= 0.1x Inspect's at
N=1,000 and 10,000 (the whole process and the run alone); dagster's whole-tree CPU <= 0.25x Inspect's
at N=1,000 and <= 0.12x at N=10,000 (at another N, the goal of the nearer of the two is shown); the peak
RSS of any dagster process (first run or re-run) < 250 MB at N=10,000; the no-op re-run < 1.5 s. The
ratios and the goals on them need the inspect side: with --sides ours dagster they are left out.

Run it from the repository root, with the Python of the project's venv (whose ``agentcompass`` script
the dagster side runs):

    python perf/bench_vs_inspect.py [--sizes 1000 10000 | --n N] [--sides inspect ours dagster]
                                    [--concurrency 8] [--venv DIR] [--results-dir DIR] [--json]

The final figures: ``python perf/bench_vs_inspect.py --sizes 1000 10000`` on an otherwise idle
machine, and ``python perf/bench_vs_inspect.py --sides dagster --n 100000`` for the dagster side at
scale. Without --results-dir the run directories, instances and Inspect's logs go to a temp directory
that is removed afterwards; with it, they are kept below DIR.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _bench import (
    EXPECTED_ACCURACY,
    agentcompass_command,
    build_request,
    check_run,
    dagster_env,
    goal,
    measure_tree,
    render_targets,
    report_problems,
    results_root,
    run_child,
    run_child_json,
    run_measurement,
    tree_bytes,
    write_sweep,
)

INSPECT_VERSION = "0.3.285"
INSPECT_PIN = f"inspect-ai=={INSPECT_VERSION}"
DEFAULT_VENV = Path.home() / ".cache" / "agentcompass-bench" / "inspect-venv"
INSPECT_CHILD = Path(__file__).with_name("_inspect_noop.py")
HARNESS = "oracle"
REQUEST_NAME = "bench-vs-inspect"
SIDES = ("inspect", "ours", "dagster")
SWEEP_NAME = "bench_vs_inspect"
MODEL_ID = "m1"
DAGSTER_HOME_DIR = "dagster_home"
NOTHING_TO_RUN = "Nothing to run"  # what `agentcompass run` prints when it launches no run

# The goals, informational only (never an exit status).
TARGET_CPU_RATIO = 0.1  # ours over Inspect's, at N=1000 and 10000
TARGET_DAGSTER_CPU_RATIO = {1000: 0.25, 10_000: 0.12}  # dagster's whole tree over Inspect's process, by N
TARGET_DAGSTER_PEAK_RSS_MB, TARGET_DAGSTER_PEAK_RSS_N = 250.0, 10_000  # any single process of the tree
TARGET_DAGSTER_RERUN_S = 1.5  # the no-op re-run's whole tree


@dataclass
class Inspect:
    """Inspect AI in its own venv: that venv's Python and the version installed there."""

    python: Path
    version: str
    how: str


@dataclass
class Side:
    """One side at one N: its child process (for dagster, the whole process tree of `agentcompass run`)."""

    side: str  # one of SIDES
    n: int
    process_seconds: float
    process_cpu_seconds: float
    seconds: float | None  # the run alone: Inspect's eval() call, our orchestrate call; None for dagster
    cpu_seconds: float | None
    peak_rss_mb: float  # for dagster, the largest single process of the first run's tree
    rerun_seconds: float | None = None  # dagster: the no-op re-run's whole tree
    rerun_cpu_seconds: float | None = None
    rerun_peak_rss_mb: float | None = None
    instance_bytes: int | None = None  # dagster: the files in DAGSTER_HOME after the first run
    problems: list[str] = field(default_factory=list)

    @property
    def cpu_ms_per_task(self) -> float | None:
        return None if self.cpu_seconds is None else 1000.0 * self.cpu_seconds / self.n

    @property
    def process_cpu_ms_per_task(self) -> float:
        return 1000.0 * self.process_cpu_seconds / self.n

    @property
    def instance_bytes_per_task(self) -> float | None:
        return None if self.instance_bytes is None else self.instance_bytes / self.n

    def to_json(self) -> dict[str, Any]:
        derived = {
            "cpu_ms_per_task": self.cpu_ms_per_task,
            "process_cpu_ms_per_task": self.process_cpu_ms_per_task,
            "instance_bytes_per_task": self.instance_bytes_per_task,
        }
        return {**asdict(self), **{key: None if value is None else round(value, 4) for key, value in derived.items()}}


RATIOS = ("process_seconds", "process_cpu_seconds", "seconds", "cpu_seconds", "peak_rss_mb")


def installed_version(python: Path, package: str = "inspect-ai") -> str | None:
    """The version of ``package`` installed for ``python``, None when there is none."""
    proc = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
        check=False,
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def pip_install(python: Path, spec: str, venv: Path) -> subprocess.CompletedProcess[str]:
    print(f"installing {spec} into {venv} ...", file=sys.stderr)
    return subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", spec],
        check=False,
        capture_output=True,
        text=True,
    )


def ensure_inspect(venv: Path, extras: dict[str, str] | None = None) -> Inspect:
    """Inspect AI in ``venv``: reused when it is there, else the venv made and the pin installed (the
    newest inspect-ai when the pin cannot be). pip's output is shown only when both fail. ``extras``
    (package: version) are installed at that version beside it where the venv has another or none."""
    inspect = find_or_install_inspect(venv)
    for package, version in (extras or {}).items():
        if installed_version(inspect.python, package) == version:
            continue
        proc = pip_install(inspect.python, f"{package}=={version}", venv)
        if proc.returncode != 0:
            raise SystemExit(
                f"could not install {package}=={version} beside Inspect AI: pip exited with "
                f"{proc.returncode}: {proc.stderr.strip()[-1000:]}"
            )
        inspect.how += f", with {package}=={version} installed"
    return inspect


def find_or_install_inspect(venv: Path) -> Inspect:
    python = venv / "bin" / "python"
    if python.exists() and (version := installed_version(python)) is not None:
        return Inspect(python, version, f"reused from {venv}")
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    failures = []
    for spec in (INSPECT_PIN, "inspect-ai"):
        proc = pip_install(python, spec, venv)
        if proc.returncode == 0 and (version := installed_version(python)) is not None:
            return Inspect(python, version, f"installed as {spec} into {venv}")
        failures.append(f"pip install {spec} exited with {proc.returncode}: {proc.stderr.strip()[-1000:]}")
    raise SystemExit("could not install Inspect AI:\n" + "\n".join(failures))


def describe(inspect: Inspect) -> str:
    if inspect.version == INSPECT_VERSION:
        return f"Inspect AI {inspect.version}, the pinned version ({inspect.how})"
    return (
        f"Inspect AI {inspect.version}, not the pinned {INSPECT_VERSION}, which could not be installed ({inspect.how})"
    )


def measure_inspect(inspect: Inspect, n: int, concurrency: int, parent: Path) -> Side:
    log_dir = Path(tempfile.mkdtemp(prefix=f"inspect-n{n}-", dir=parent))
    args = ["--n", str(n), "--concurrency", str(concurrency), "--log-dir", str(log_dir)]
    out = run_child_json(str(INSPECT_CHILD), args, python=str(inspect.python))
    if out.data is None:
        return Side("inspect", n, out.seconds, out.cpu_seconds, 0.0, 0.0, 0.0, problems=[out.error])
    data = out.data
    return Side(
        "inspect",
        n,
        out.seconds,
        out.cpu_seconds,
        data["seconds"],
        data["cpu_seconds"],
        data["peak_rss_mb"],
        problems=data["problems"],
    )


def measure_ours(n: int, concurrency: int, parent: Path) -> Side:
    results_dir = Path(tempfile.mkdtemp(prefix=f"ours-n{n}-", dir=parent))
    m = run_child(
        __file__,
        ["--child", "--n", str(n), "--concurrency", str(concurrency), "--results-dir", str(results_dir)],
        n,
        "run",
        k=1,
    )
    if not m.problems:
        m.problems = check_run(m, HARNESS)
    return Side(
        "ours",
        n,
        m.process_seconds,
        m.process_cpu_seconds,
        m.seconds,
        m.cpu_seconds,
        m.peak_rss_mb,
        problems=m.problems,
    )


def measure_dagster(n: int, concurrency: int, parent: Path) -> Side:
    """`agentcompass run SWEEP` in a fresh directory and DAGSTER_HOME, then again (the no-op re-run), each
    a whole process tree under its own subreaper; then the checks, in a child of this script."""
    workdir = Path(tempfile.mkdtemp(prefix=f"dagster-n{n}-", dir=parent))
    sweep_file = write_sweep(n, concurrency, HARNESS, workdir, name=SWEEP_NAME, model=MODEL_ID)
    home = workdir / DAGSTER_HOME_DIR
    command, env = [*agentcompass_command(), "run", str(sweep_file)], dagster_env(home)
    first = measure_tree(command, env)
    side = Side("dagster", n, first.tree_seconds, first.cpu_seconds, None, None, first.peak_rss_mb)
    if first.error or first.returncode != 0:
        side.problems.append(first.error or f"agentcompass run exited with {first.returncode}: {first.stdout[-500:]}")
        return side
    side.instance_bytes = tree_bytes(home)
    rerun = measure_tree(command, env)
    side.rerun_seconds, side.rerun_cpu_seconds = rerun.tree_seconds, rerun.cpu_seconds
    side.rerun_peak_rss_mb = rerun.peak_rss_mb
    if rerun.error or rerun.returncode != 0:
        side.problems.append(rerun.error or f"the re-run exited with {rerun.returncode}: {rerun.stdout[-500:]}")
    elif NOTHING_TO_RUN not in rerun.stdout:
        side.problems.append(f"the re-run does not say {NOTHING_TO_RUN!r}, so it launched runs: {rerun.stdout[-500:]}")
    out = run_child_json(__file__, ["--dagster-check", "--n", str(n), "--results-dir", str(workdir)])
    side.problems += out.data["problems"] if out.data is not None else [out.error]
    return side


def check_dagster(workdir: Path, n: int) -> list[str]:
    """The finished sweep of measure_dagster: accuracy in the results' metrics parquet, and N materialized
    attempts partitions in its instance. Run in a child: Dagster and pandas are imported here only."""
    import dagster as dg
    from agentcompass_dagster.reporting.results import load_metrics

    problems = []
    metrics = load_metrics(workdir / "results")
    accuracy = metrics.loc[metrics["metric"] == "accuracy", "value"].tolist()
    if accuracy != [EXPECTED_ACCURACY[HARNESS]]:
        problems.append(f"the metrics parquet says accuracy {accuracy}, expected [{EXPECTED_ACCURACY[HARNESS]}]")
    with dg.DagsterInstance.from_config(str(workdir / DAGSTER_HOME_DIR)) as instance:
        key = dg.AssetKey([SWEEP_NAME, "synthetic", "attempts"])
        partitions = len(instance.get_materialized_partitions(key))
    if partitions != n:
        problems.append(f"the instance holds {partitions} materialized attempts partitions, expected {n}")
    return problems


def ratios(side: Side, inspect: Side) -> dict[str, float | None]:
    """side / Inspect's for each of RATIOS (None where a side has none, or Inspect's is 0: it failed)."""
    result: dict[str, float | None] = {}
    for key in RATIOS:
        value, base = getattr(side, key), getattr(inspect, key)
        result[key] = value / base if value is not None and base else None
    return result


def by_side(sides: list[Side]) -> dict[str, Side]:
    return {side.side: side for side in sides}


def render_table(rows: list[list[Side]]) -> str:
    """One row per side and N (dagster's process columns are its whole tree's), then each side's ratio to
    Inspect's where Inspect was measured."""

    def cell(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    header = (
        f"{'N':>7}  {'side':<15} {'process s':>10} {'process CPU s':>14} {'proc CPU ms/task':>17} "
        f"{'run s':>9} {'run CPU s':>10} {'run CPU ms/task':>16} {'peak RSS MB':>12}"
    )
    lines = []
    for sides in rows:
        for side in sides:
            lines.append(
                f"{side.n:>7}  {side.side:<15} {side.process_seconds:>10.3f} {side.process_cpu_seconds:>14.3f} "
                f"{side.process_cpu_ms_per_task:>17.3f} {cell(side.seconds, '.3f'):>9} "
                f"{cell(side.cpu_seconds, '.3f'):>10} {cell(side.cpu_ms_per_task, '.3f'):>16} "
                f"{side.peak_rss_mb:>12.1f}"
            )
        named = by_side(sides)
        if (inspect := named.get("inspect")) is None:
            continue
        for side in sides:
            if side is inspect:
                continue
            r = {
                key: cell(value, ".3f") + ("x" if value is not None else "")
                for key, value in ratios(side, inspect).items()
            }
            lines.append(
                f"{side.n:>7}  {side.side + '/inspect':<15} {r['process_seconds']:>10} "
                f"{r['process_cpu_seconds']:>14} {'':>17} {r['seconds']:>9} {r['cpu_seconds']:>10} {'':>16} "
                f"{r['peak_rss_mb']:>12}"
            )
    return "\n".join([header, "-" * len(header), *lines])


def render_dagster(rows: list[list[Side]]) -> str:
    """The dagster side's figures beyond the table: CPU per task, the no-op re-run, the instance on disk."""
    lines = []
    for sides in rows:
        if (d := by_side(sides).get("dagster")) is None:
            continue
        line = f"  N={d.n:<7} first run {d.process_seconds:.3f} s, {d.process_cpu_ms_per_task:.3f} CPU ms/task"
        if d.rerun_seconds is not None and d.rerun_cpu_seconds is not None:
            line += (
                f"; no-op re-run {d.rerun_seconds:.3f} s, {d.rerun_cpu_seconds:.3f} CPU s, "
                f"peak RSS {d.rerun_peak_rss_mb or 0.0:.1f} MB"
            )
        if d.instance_bytes is not None and d.instance_bytes_per_task is not None:
            line += f"; instance {d.instance_bytes / 2**20:.1f} MB, {d.instance_bytes_per_task:.0f} B/task"
        lines.append(line)
    return "\n".join(lines)


def nearest_goal_n(n: int, goals: dict[int, float]) -> int:
    """The N of ``goals`` nearest ``n`` on a log scale: the goal that applies to a size measured off them."""
    return min(goals, key=lambda goal_n: abs(math.log(n / goal_n)))


def goal_report(sides: list[Side]) -> dict[str, Any]:
    """The goals at one N (informational). The ratio goals need Inspect's side, and a side without problems."""
    named = {side.side: side for side in sides if not side.problems}
    inspect, ours, dagster = named.get("inspect"), named.get("ours"), named.get("dagster")
    report: dict[str, Any] = {}
    if inspect is not None and ours is not None:
        r = ratios(ours, inspect)
        for label, key in (("ours CPU, process", "process_cpu_seconds"), ("ours CPU, run", "cpu_seconds")):
            if (value := r[key]) is not None:
                report[label] = goal(value, f"<= {TARGET_CPU_RATIO:g}x Inspect's", value <= TARGET_CPU_RATIO, ours.n)
    if dagster is None:
        return report
    n = dagster.n
    if inspect is not None and (value := ratios(dagster, inspect)["process_cpu_seconds"]) is not None:
        goal_n = nearest_goal_n(n, TARGET_DAGSTER_CPU_RATIO)
        limit = TARGET_DAGSTER_CPU_RATIO[goal_n]
        report["dagster CPU, tree"] = goal(value, f"<= {limit:g}x Inspect's", value <= limit, n, goal_n)
    peak = max(dagster.peak_rss_mb, dagster.rerun_peak_rss_mb or 0.0)
    report["dagster peak MB"] = goal(
        peak,
        f"< {TARGET_DAGSTER_PEAK_RSS_MB:g} (any process)",
        peak < TARGET_DAGSTER_PEAK_RSS_MB,
        n,
        TARGET_DAGSTER_PEAK_RSS_N,
    )
    if dagster.rerun_seconds is not None:
        report["dagster re-run s"] = goal(
            dagster.rerun_seconds, f"< {TARGET_DAGSTER_RERUN_S:g}", dagster.rerun_seconds < TARGET_DAGSTER_RERUN_S, n
        )
    return report


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument(
        "--sizes", type=int, nargs="+", default=[1000, 10_000], help="numbers of tasks (default 1000 10000)"
    )
    sizes.add_argument("--n", type=int, help="one number of tasks, instead of --sizes")
    parser.add_argument(
        "--sides",
        nargs="+",
        choices=SIDES,
        default=list(SIDES),
        help="which sides to measure (default all: inspect ours dagster); ratios need inspect",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=8,
        help="our task_concurrency, Inspect's max_samples and max_connections (default 8)",
    )
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help=f"Inspect AI's venv (default {DEFAULT_VENV})")
    parser.add_argument(
        "--results-dir", type=Path, help="keep run directories, instances and Inspect's logs below this directory"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dagster-check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.n is not None:
        args.sizes = [args.n]
    if min(args.sizes) < 1 or args.concurrency < 1:
        parser.error("sizes and --concurrency must be positive")
    args.sides = [side for side in SIDES if side in args.sides]  # measured in this order, whatever was given
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        request = build_request(REQUEST_NAME, args.n, args.concurrency, HARNESS, args.results_dir)
        print(json.dumps(run_measurement(request, "run").to_json()))
        return 0
    if args.dagster_check:
        print(json.dumps({"problems": check_dagster(args.results_dir, args.n)}))
        return 0

    command = shlex.join([sys.executable, *sys.argv])
    inspect = ensure_inspect(args.venv) if "inspect" in args.sides else None
    rows: list[list[Side]] = []
    with results_root(args.results_dir, "bench-vs-inspect-") as parent:
        for n in args.sizes:
            sides = []
            if inspect is not None:
                sides.append(measure_inspect(inspect, n, args.concurrency, parent))
            if "ours" in args.sides:
                sides.append(measure_ours(n, args.concurrency, parent))
            if "dagster" in args.sides:
                sides.append(measure_dagster(n, args.concurrency, parent))
            rows.append(sides)
    problems = [f"N={side.n} {side.side}: {p}" for sides in rows for side in sides for p in side.problems]
    goals = {n: report for n, sides in zip(args.sizes, rows) if (report := goal_report(sides))}

    if args.json:
        print(
            json.dumps(
                {
                    "command": command,
                    "inspect": None
                    if inspect is None
                    else {"version": inspect.version, "pinned": inspect.version == INSPECT_VERSION, "how": inspect.how},
                    "sizes": args.sizes,
                    "sides_measured": args.sides,
                    "concurrency": args.concurrency,
                    "sides": [side.to_json() for sides in rows for side in sides],
                    "ratios": {
                        str(sides[0].n): {
                            side.side: {
                                key: None if value is None else round(value, 4)
                                for key, value in ratios(side, named["inspect"]).items()
                            }
                            for side in sides
                            if side.side != "inspect"
                        }
                        for sides in rows
                        if "inspect" in (named := by_side(sides))
                    },
                    "goals": {str(n): report for n, report in goals.items()},
                    "problems": problems,
                },
                indent=2,
            )
        )
    else:
        print(f"command: {command}")
        if inspect is not None:
            print(describe(inspect))
        workload = {
            "inspect": f"Inspect: {INSPECT_CHILD.name}, mockllm/model, generate(), includes(), "
            f"max_samples=max_connections={args.concurrency}",
            "ours": f"ours: synthetic benchmark, harness={HARNESS}, environment=local, concurrency={args.concurrency}",
            "dagster": "dagster: `agentcompass run` of the same as a sweep, fresh SQLite DAGSTER_HOME, its whole "
            "process tree (process columns) and its largest process (peak RSS)",
        }
        print("\n".join(workload[side] for side in args.sides) + "\n")
        print(render_table(rows))
        if "dagster" in args.sides:
            print("\ndagster, whole process tree:")
            print(render_dagster(rows))
        if goals:
            print("\ngoals (informational):")
            for n, report in goals.items():
                print(f" N={n}:")
                print(render_targets(report))
        if not problems:
            print(
                "\nsanity checks passed: "
                + "; ".join(
                    {
                        "inspect": "Inspect's log success with N samples completed",
                        "ours": "our run completed, accuracy, N details, summary counts",
                        "dagster": "agentcompass run exit 0 twice, the re-run launched nothing, accuracy in the "
                        "metrics parquet, N materialized attempts partitions",
                    }[side]
                    for side in args.sides
                )
            )
    return report_problems(problems)


if __name__ == "__main__":
    sys.exit(main())
