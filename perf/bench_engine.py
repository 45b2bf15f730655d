"""Throughput and memory of the execution engine with k attempts per task, measured through the runtime.

What it measures, for every k of --k (default 1 and 3) and N in (1000, --n) (or just --n when it is at
most 1000), so that a flat cost per task is visible:

* one request of the ``synthetic`` benchmark with N no-op tasks through ``orchestrate`` with the
  ``local`` environment (a real temp directory per attempt), the ``oracle`` harness (no subprocess),
  ``execution.attempts = {k, strategy: avg}`` (every attempt runs) and
  ``execution.limits.task_concurrency = --concurrency``. With k > 1 every attempt is checkpointed under
  ``.finished_attempts/`` and the task's checkpoints are deleted once its detail is written.
* wall time, tasks/s, attempts/s (N * k / s), ms/task, and the ms/attempt ratio of the full N to the
  small N for each k;
* CPU ms/task: user+system CPU seconds of the child spent in ``orchestrate`` (every thread);
* peak RSS: every (k, N) runs in a fresh child process (this script re-invoked with a hidden
  ``--child K`` option) that reports its own ``ru_maxrss``;
* the durable-write floor of each (k, N), measured right after its run in a child of its own (see
  ``_bench.add_floor``): N files of the run's median detail size written by --concurrency threads into
  a fresh directory beside the run directory, each as a temp file, fsync, rename, fsync of the
  directory; its wall and CPU seconds, and the run's wall and CPU over the floor's.

Sanity checks (the exit status is non-zero when one fails), besides the run store's (the request
completes, accuracy is the harness's expected one, details/ holds exactly N normal details,
``.summary_counts.json`` says new == N): every detail holds attempts 1..k with attempts_tried == k; the
metrics hold pass@j for j in 1..k of the usual pass@ sizes (pass@1, pass@2, pass@3 for k=3; none for
k=1), each equal to the expected accuracy; and ``.finished_attempts/`` exists when k > 1 but holds
nothing after the run; the floor's directory holds N files and no temp file. Timings are reported
against the design targets (at k=1: >= 1500 tasks/s at N=10,000 with concurrency 8 and wall <= 1.5x the
floor's; CPU <= 1 ms per attempt; peak RSS < 200 MB at N=100,000; ms/attempt flat from N=1,000 to
10,000) but never fail the script.

Run it from the repository root:

    python perf/bench_engine.py [--k 1 3] [--n 10000] [--concurrency 8] [--harness oracle]
                                      [--results-dir DIR] [--json]

The final figures: ``python perf/bench_engine.py --n 10000 --k 1 3`` on an otherwise idle machine.

Without --results-dir the run directories go to a temp directory that is removed afterwards; with it,
each (k, N) gets a fresh ``bench-k<K>-n<N>-*`` directory below DIR that is kept.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from pathlib import Path

from _bench import (
    EXPECTED_ACCURACY,
    Measurement,
    add_common_arguments,
    add_floor,
    build_request,
    check_common_arguments,
    measure,
    normal_details,
    render_floors,
    render_targets,
    report_problems,
    results_root,
    run_child,
    sizes_up_to,
    target_report,
)
from agentcompass_dagster.runtime.results.metrics import PASS_AT
from agentcompass_dagster.runtime.store.layout import FINISHED_ATTEMPTS_DIR

REQUEST_NAME = "bench-engine"
PHASE = "run"


def check_attempts(run_dir: Path, k: int) -> list[str]:
    """Every normal detail holds attempts 1..k, all of them tried (read one at a time)."""
    expected = [str(i) for i in range(1, k + 1)]
    wrong, first = 0, ""
    for path in normal_details(run_dir):
        detail = json.loads(path.read_bytes())
        if detail["k"] != k or detail["attempts_tried"] != k or sorted(detail["attempts"], key=int) != expected:
            wrong += 1
            first = min(first or path.name, path.name)
    return [f"{wrong} details do not hold attempts 1..{k}, e.g. {first}"] if wrong else []


def check_pass_at(m: Measurement, expected: float) -> list[str]:
    """pass@j for the usual j up to k and k itself when k > 1 (none for k = 1), each equal to ``expected``."""
    wanted = {f"pass@{j}" for j in {*PASS_AT, m.k} if j <= m.k} if m.k > 1 else set()
    found = {key for key in m.metrics if key.startswith("pass@")}
    problems = [f"metrics hold {sorted(found)}, expected {sorted(wanted)}"] if found != wanted else []
    return problems + [
        f"{key} = {m.metrics[key]}, expected {expected}" for key in sorted(found & wanted) if m.metrics[key] != expected
    ]


def check_checkpoints(run_dir: Path, k: int) -> list[str]:
    """With k > 1 attempts were checkpointed (so the directory exists); after the run none is left."""
    directory = run_dir / FINISHED_ATTEMPTS_DIR
    if not directory.is_dir():
        return [f"{FINISHED_ATTEMPTS_DIR}/ does not exist: no finished attempt was recorded"] if k > 1 else []
    files = directories = 0
    example: Path | None = None
    for path in directory.rglob("*"):
        if path.is_file():
            files += 1
        else:
            directories += 1
        example = example or path
    if example is None:
        return []
    return [
        (
            f"{FINISHED_ATTEMPTS_DIR}/ still holds {files} files and {directories} directories, "
            f"e.g. {example.relative_to(run_dir)}"
        )
    ]


def measure_child(k: int, n: int, concurrency: int, harness: str, results_dir: Path) -> Measurement:
    """The child's work: run and time the request, then the store's checks and the engine's."""
    m = measure(build_request(REQUEST_NAME, n, concurrency, harness, results_dir, k=k), PHASE)
    if m.run_dir:
        run_dir = Path(m.run_dir)
        m.problems += check_attempts(run_dir, k)
        m.problems += check_pass_at(m, EXPECTED_ACCURACY[harness])
        m.problems += check_checkpoints(run_dir, k)
    return m


def measure_all(ks: list[int], sizes: list[int], concurrency: int, harness: str, parent: Path) -> list[Measurement]:
    """Per (k, N): a fresh results directory, one run in its own child, then its floor in another."""
    measurements = []
    for k in ks:
        for n in sizes:
            results_dir = Path(tempfile.mkdtemp(prefix=f"bench-k{k}-n{n}-", dir=parent))
            args = [
                "--child",
                str(k),
                "--n",
                str(n),
                "--concurrency",
                str(concurrency),
                "--harness",
                harness,
                "--results-dir",
                str(results_dir),
            ]
            measurements.append(add_floor(run_child(__file__, args, n, PHASE, k), concurrency))
    return measurements


def render_table(measurements: list[Measurement]) -> str:
    header = (
        f"{'k':>3} {'N':>7} {'seconds':>9} {'tasks/s':>9} {'attempts/s':>11} {'ms/task':>9} "
        f"{'CPU ms/task':>12} {'peak RSS MB':>12}"
    )
    rows = [
        f"{m.k:>3} {m.n:>7} {m.seconds:>9.3f} {m.tasks_per_s:>9.1f} {m.attempts_per_s:>11.1f} "
        f"{m.ms_per_task:>9.3f} {m.cpu_ms_per_task:>12.3f} {m.peak_rss_mb:>12.1f}"
        for m in measurements
    ]
    return "\n".join([header, "-" * len(header), *rows])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, nargs="+", default=[1, 3], help="attempts per task (default 1 3)")
    add_common_arguments(parser)
    parser.add_argument("--child", type=int, metavar="K", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    check_common_arguments(parser, args)
    if min(args.k) < 1:
        parser.error("--k must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child is not None:
        m = measure_child(args.child, args.n, args.concurrency, args.harness, args.results_dir)
        print(json.dumps(m.to_json()))
        return 0

    command = shlex.join([sys.executable, *sys.argv])
    ks = sorted(set(args.k))
    with results_root(args.results_dir, "bench-engine-") as parent:
        measurements = measure_all(ks, sizes_up_to(args.n), args.concurrency, args.harness, parent)
    problems = [f"k={m.k} N={m.n}: {p}" for m in measurements for p in m.problems]
    targets = {k: target_report([m for m in measurements if m.k == k], args.n) for k in ks}

    if args.json:
        print(
            json.dumps(
                {
                    "command": command,
                    "k": ks,
                    "n": args.n,
                    "concurrency": args.concurrency,
                    "harness": args.harness,
                    "measurements": [m.to_json() for m in measurements],
                    "targets": {f"k={k}": report for k, report in targets.items()},
                    "problems": problems,
                },
                indent=2,
            )
        )
    else:
        print(f"command: {command}")
        print(
            f"synthetic benchmark, harness={args.harness}, environment=local, strategy=avg, "
            f"concurrency={args.concurrency}\n"
        )
        print(render_table(measurements))
        print(
            f"\ndurable-write floor: {args.concurrency} threads, per task a temp file, fsync, rename, fsync of "
            "the directory\n"
        )
        print(render_floors(measurements))
        for k, report in targets.items():
            if report:
                print(f"\ndesign targets at N={args.n}, k={k} (informational):")
                print(render_targets(report))
        if not problems:
            print(
                "\nsanity checks passed: completed, accuracy, N details of k attempts each, summary counts, "
                "pass@j, no leftover finished-attempt records, N floor files"
            )
    return report_problems(problems)


if __name__ == "__main__":
    sys.exit(main())
