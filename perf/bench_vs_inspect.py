"""Side by side: this runtime against Inspect AI on a no-op workload, at the same N and concurrency.

What it measures, for every N of --sizes (default 1000 and 10000), each side in a fresh child process:

* Inspect: ``_inspect_noop.py`` run by the Python of Inspect AI's own venv (--venv, default
  ``~/.cache/agentcompass-bench/inspect-venv``, made with ``python -m venv`` and ``pip install
  inspect-ai==0.3.285`` on first use, or the newest inspect-ai when that pin cannot be installed, and
  reused afterwards): one eval() of a Task of N samples (input "Reply with answer-i", target
  "answer-i"), the solver generate(), the scorer includes(), the model mockllm/model,
  max_samples = max_connections = --concurrency, the .eval log in a temp directory, no display. Per
  sample Inspect makes its TaskState, calls the mock model through its model layer (generate config,
  retry wrapper, the model call and its events in the sample's transcript), scores the answer, and
  adds the sample to the log buffer it writes into the log file.
* ours: the ``synthetic`` benchmark with N tasks through ``run_requests`` with the ``oracle`` harness,
  the ``local`` environment and task_concurrency = --concurrency, as bench_store.py runs it. Per task
  the runtime plans it, opens a ``local`` environment session (a temp directory made and removed),
  runs the harness, evaluates the answer, and writes its detail durably (temp file, fsync, rename,
  fsync of details/); the summary and the metrics at the end.
* for each side: the whole child process's wall and user+system CPU seconds (interpreter start and
  imports included; the CPU from this process's RUSAGE_CHILDREN), the wall and CPU seconds of the run
  itself (Inspect's eval() call, our run_requests call), the peak RSS after the run, and ours/Inspect's
  ratio of each.

Sanity checks (the exit status is non-zero when one fails): Inspect's log says success with N of N
samples completed; our run completes with accuracy 1.0, N normal details and summary counts new == N,
checked by this process once the child is gone so that the child's CPU is the run's. The goal, our CPU
<= 0.1x Inspect's at N=1,000 and 10,000, is judged on the whole process and on the run alone, and is
informational.

Run it from the repository root:

    python perf/bench_vs_inspect.py [--sizes 1000 10000 | --n N] [--concurrency 8] [--venv DIR]
                                          [--results-dir DIR] [--json]

The final figures: ``python perf/bench_vs_inspect.py --sizes 1000 10000`` on an otherwise idle
machine. Without --results-dir the run directories and Inspect's logs go to a temp directory that is
removed afterwards; with it, they are kept below DIR.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from _bench import (
    build_request,
    check_run,
    report_problems,
    results_root,
    run_child,
    run_child_json,
    run_measurement,
)

INSPECT_VERSION = "0.3.285"
INSPECT_PIN = f"inspect-ai=={INSPECT_VERSION}"
DEFAULT_VENV = Path.home() / ".cache" / "agentcompass-bench" / "inspect-venv"
INSPECT_CHILD = Path(__file__).with_name("_inspect_noop.py")
HARNESS = "oracle"
REQUEST_NAME = "bench-vs-inspect"
TARGET_CPU_RATIO = 0.1


@dataclass
class Inspect:
    """Inspect AI in its own venv: that venv's Python and the version installed there."""

    python: Path
    version: str
    how: str


@dataclass
class Side:
    """One side's child process at one N."""

    side: str  # "inspect" or "ours"
    n: int
    process_seconds: float
    process_cpu_seconds: float
    seconds: float  # the run alone: Inspect's eval() call, our run_requests call
    cpu_seconds: float
    peak_rss_mb: float
    problems: list[str] = field(default_factory=list)

    @property
    def cpu_ms_per_task(self) -> float:
        return 1000.0 * self.cpu_seconds / self.n

    @property
    def process_cpu_ms_per_task(self) -> float:
        return 1000.0 * self.process_cpu_seconds / self.n


RATIOS = ("process_seconds", "process_cpu_seconds", "seconds", "cpu_seconds", "peak_rss_mb")


def installed_version(python: Path) -> str | None:
    """The inspect-ai version installed for ``python``, None when there is none."""
    proc = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('inspect-ai'))"],
                          check=False, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def ensure_inspect(venv: Path) -> Inspect:
    """Inspect AI in ``venv``: reused when it is there, else the venv made and the pin installed (the
    newest inspect-ai when the pin cannot be). pip's output is shown only when both fail."""
    python = venv / "bin" / "python"
    if python.exists() and (version := installed_version(python)) is not None:
        return Inspect(python, version, f"reused from {venv}")
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    failures = []
    for spec in (INSPECT_PIN, "inspect-ai"):
        print(f"installing {spec} into {venv} ...", file=sys.stderr)
        proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", spec],
                              check=False, capture_output=True, text=True)
        if proc.returncode == 0 and (version := installed_version(python)) is not None:
            return Inspect(python, version, f"installed as {spec} into {venv}")
        failures.append(f"pip install {spec} exited with {proc.returncode}: {proc.stderr.strip()[-1000:]}")
    raise SystemExit("could not install Inspect AI:\n" + "\n".join(failures))


def describe(inspect: Inspect) -> str:
    if inspect.version == INSPECT_VERSION:
        return f"Inspect AI {inspect.version}, the pinned version ({inspect.how})"
    return f"Inspect AI {inspect.version}, not the pinned {INSPECT_VERSION}, which could not be installed ({inspect.how})"


def measure_inspect(inspect: Inspect, n: int, concurrency: int, parent: Path) -> Side:
    log_dir = Path(tempfile.mkdtemp(prefix=f"inspect-n{n}-", dir=parent))
    args = ["--n", str(n), "--concurrency", str(concurrency), "--log-dir", str(log_dir)]
    out = run_child_json(str(INSPECT_CHILD), args, python=str(inspect.python))
    if out.data is None:
        return Side("inspect", n, out.seconds, out.cpu_seconds, 0.0, 0.0, 0.0, [out.error])
    data = out.data
    side = Side("inspect", n, out.seconds, out.cpu_seconds, data["seconds"], data["cpu_seconds"], data["peak_rss_mb"])
    if data["status"] != "success" or data["total_samples"] != n or data["completed_samples"] != n:
        side.problems.append(f"Inspect's log: status {data['status']} {data['error']}, {data['completed_samples']} "
                             f"of {data['total_samples']} samples completed, expected {n} of {n}")
    return side


def measure_ours(n: int, concurrency: int, parent: Path) -> Side:
    results_dir = Path(tempfile.mkdtemp(prefix=f"ours-n{n}-", dir=parent))
    m = run_child(__file__, ["--child", "--n", str(n), "--concurrency", str(concurrency), "--results-dir",
                             str(results_dir)], n, "run", k=1)
    if not m.problems:
        m.problems = check_run(m, HARNESS)
    return Side("ours", n, m.process_seconds, m.process_cpu_seconds, m.seconds, m.cpu_seconds, m.peak_rss_mb,
                m.problems)


def ratios(ours: Side, inspect: Side) -> dict[str, float | None]:
    """ours / Inspect's for each of RATIOS (None where Inspect's is 0: it failed)."""
    return {key: getattr(ours, key) / getattr(inspect, key) if getattr(inspect, key) > 0 else None
            for key in RATIOS}


def render_table(pairs: list[tuple[Side, Side]]) -> str:
    header = (f"{'N':>7}  {'side':<13} {'process s':>10} {'process CPU s':>14} {'run s':>9} {'run CPU s':>10} "
              f"{'run CPU ms/task':>16} {'peak RSS MB':>12}")
    rows = []
    for inspect, ours in pairs:
        for side in (inspect, ours):
            rows.append(f"{side.n:>7}  {side.side:<13} {side.process_seconds:>10.3f} {side.process_cpu_seconds:>14.3f} "
                        f"{side.seconds:>9.3f} {side.cpu_seconds:>10.3f} {side.cpu_ms_per_task:>16.3f} "
                        f"{side.peak_rss_mb:>12.1f}")
        r = {key: "-" if value is None else f"{value:.3f}x" for key, value in ratios(ours, inspect).items()}
        rows.append(f"{ours.n:>7}  {'ours/inspect':<13} {r['process_seconds']:>10} {r['process_cpu_seconds']:>14} "
                    f"{r['seconds']:>9} {r['cpu_seconds']:>10} {'':>16} {r['peak_rss_mb']:>12}")
    return "\n".join([header, "-" * len(header), *rows])


def render_goal(pairs: list[tuple[Side, Side]]) -> str:
    lines = [f"goal: our CPU <= {TARGET_CPU_RATIO:g}x Inspect's at N=1000 and 10000 (informational):"]
    for inspect, ours in pairs:
        r = ratios(ours, inspect)
        verdicts = []
        for label, key in (("whole process", "process_cpu_seconds"), ("the run alone", "cpu_seconds")):
            value = r[key]
            verdict = "-" if value is None else f"{value:.3f}x {'met' if value <= TARGET_CPU_RATIO else 'NOT met'}"
            verdicts.append(f"{label} {verdict}")
        lines.append(f"  N={ours.n:<7} " + "; ".join(verdicts))
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000],
                       help="numbers of tasks (default 1000 10000)")
    sizes.add_argument("--n", type=int, help="one number of tasks, instead of --sizes")
    parser.add_argument("--concurrency", type=int, default=8,
                        help="our task_concurrency, Inspect's max_samples and max_connections (default 8)")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help=f"Inspect AI's venv (default {DEFAULT_VENV})")
    parser.add_argument("--results-dir", type=Path, help="keep run directories and Inspect's logs below this directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.n is not None:
        args.sizes = [args.n]
    if min(args.sizes) < 1 or args.concurrency < 1:
        parser.error("sizes and --concurrency must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        request = build_request(REQUEST_NAME, args.n, args.concurrency, HARNESS, args.results_dir)
        print(json.dumps(run_measurement(request, "run").to_json()))
        return 0

    command = shlex.join([sys.executable, *sys.argv])
    inspect = ensure_inspect(args.venv)
    pairs = []
    with results_root(args.results_dir, "bench-vs-inspect-") as parent:
        for n in args.sizes:
            pairs.append((measure_inspect(inspect, n, args.concurrency, parent),
                          measure_ours(n, args.concurrency, parent)))
    problems = [f"N={side.n} {side.side}: {p}" for pair in pairs for side in pair for p in side.problems]

    if args.json:
        print(json.dumps({
            "command": command,
            "inspect": {"version": inspect.version, "pinned": inspect.version == INSPECT_VERSION, "how": inspect.how},
            "sizes": args.sizes,
            "concurrency": args.concurrency,
            "sides": [{**asdict(side), "cpu_ms_per_task": round(side.cpu_ms_per_task, 4),
                       "process_cpu_ms_per_task": round(side.process_cpu_ms_per_task, 4)}
                      for pair in pairs for side in pair],
            "ratios": {str(ours.n): {key: None if value is None else round(value, 4)
                                     for key, value in ratios(ours, inspect).items()} for inspect, ours in pairs},
            "problems": problems,
        }, indent=2))
    else:
        print(f"command: {command}")
        print(describe(inspect))
        print(f"Inspect: {INSPECT_CHILD.name}, mockllm/model, generate(), includes(), max_samples=max_connections="
              f"{args.concurrency}; ours: synthetic benchmark, harness={HARNESS}, environment=local, "
              f"concurrency={args.concurrency}\n")
        print(render_table(pairs))
        print()
        print(render_goal(pairs))
        if not problems:
            print("\nsanity checks passed: Inspect's log success with N samples completed; our run completed, "
                  "accuracy, N details, summary counts")
    return report_problems(problems)


if __name__ == "__main__":
    sys.exit(main())
