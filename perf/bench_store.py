"""Throughput, memory and reuse cost of the run store, measured through the real runtime.

What it measures, for N in (1000, --n) (or just --n when it is at most 1000) so that a flat cost per task is visible:

* ``run``: the ``synthetic`` benchmark with N tasks through ``orchestrate`` with the ``local``
  environment (a real temp directory per task), the ``oracle`` harness (no subprocess) and
  ``execution.limits.task_concurrency = --concurrency``. Each detail is written atomically by the store
  and the summary at the end. Reports wall time, tasks/s, ms/task and CPU ms/task (user+system CPU
  seconds of the child spent in ``orchestrate``, every thread).
* the durable-write floor of each run, measured right after it in a child of its own (see
  ``_bench.add_floor``): N files of the run's median detail size written by --concurrency threads into
  a fresh directory beside the run directory, each as a temp file, fsync, rename, fsync of the
  directory; its wall and CPU seconds, and the run's wall and CPU over the floor's.
* ``reuse``: the same request again with ``output.reuse=True``: every detail is hard-linked from the
  finished run and nothing runs.
* peak RSS of each phase: every phase runs in a fresh child process (this script re-invoked with a
  hidden ``--child`` option) and reports its own ``ru_maxrss``, so one phase's memory never pollutes
  the next.

Sanity checks (the exit status is non-zero when one fails): the request completes, accuracy is the
harness's expected one (oracle 1.0, nop 0.0), details/ holds exactly N normal details, and
``.summary_counts.json`` says new == N for ``run`` and reused == N, new == 0 for ``reuse``; the floor's
directory holds N files and no temp file. Timings are reported against the design targets (>= 1500
tasks/s at N=10,000 with concurrency 8, CPU <= 1 ms/task, wall <= 1.5x the floor's at N=10,000, peak RSS
< 200 MB at N=100,000, the full-reuse rerun of N=100,000 under 5 s, flat ms/task) but never fail the
script: this is a report, not a test.

Run it from the repository root:

    python perf/bench_store.py [--n 10000] [--concurrency 8] [--harness oracle]
                                     [--results-dir DIR] [--json]

The final figures: ``python perf/bench_store.py --n 100000`` (and ``--n 10000`` for the throughput
and floor targets, set at N=10,000) on an otherwise idle machine.

Without --results-dir the run directories go to a temp directory that is removed afterwards; with it,
each N gets a fresh ``bench-n<N>-*`` directory below DIR that is kept.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from pathlib import Path

from _bench import (
    Measurement,
    add_common_arguments,
    add_floor,
    build_request,
    check_common_arguments,
    measure,
    render_floors,
    render_targets,
    report_problems,
    results_root,
    run_child,
    sizes_up_to,
    target_report,
)

PHASES = ("run", "reuse")
REQUEST_NAME = "bench-store"


def child_args(phase: str, n: int, concurrency: int, harness: str, results_dir: Path) -> list[str]:
    return [
        "--child",
        phase,
        "--n",
        str(n),
        "--concurrency",
        str(concurrency),
        "--harness",
        harness,
        "--results-dir",
        str(results_dir),
    ]


def measure_all(sizes: list[int], concurrency: int, harness: str, results_parent: Path) -> list[Measurement]:
    """Per N: a fresh results directory, then the run, its floor and the full-reuse rerun, each in its
    own child."""
    measurements = []
    for n in sizes:
        results_dir = Path(tempfile.mkdtemp(prefix=f"bench-n{n}-", dir=results_parent))
        for phase in PHASES:
            m = run_child(__file__, child_args(phase, n, concurrency, harness, results_dir), n, phase, k=1)
            if phase == "run":
                add_floor(m, concurrency)
            measurements.append(m)
            if m.problems:
                break  # a reuse of a broken run measures nothing
    return measurements


def render_table(measurements: list[Measurement]) -> str:
    header = (
        f"{'N':>7}  {'phase':<6} {'seconds':>9} {'tasks/s':>10} {'ms/task':>9} {'CPU ms/task':>12} {'peak RSS MB':>12}"
    )
    rows = [
        f"{m.n:>7}  {m.phase:<6} {m.seconds:>9.3f} {m.tasks_per_s:>10.1f} {m.ms_per_task:>9.3f} "
        f"{m.cpu_ms_per_task:>12.3f} {m.peak_rss_mb:>12.1f}"
        for m in measurements
    ]
    return "\n".join([header, "-" * len(header), *rows])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--child", choices=PHASES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    check_common_arguments(parser, args)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        request = build_request(
            REQUEST_NAME, args.n, args.concurrency, args.harness, args.results_dir, reuse=args.child == "reuse"
        )
        print(json.dumps(measure(request, args.child).to_json()))
        return 0

    command = shlex.join([sys.executable, *sys.argv])
    with results_root(args.results_dir, "bench-store-") as parent:
        measurements = measure_all(sizes_up_to(args.n), args.concurrency, args.harness, parent)
    problems = [f"N={m.n} {m.phase}: {p}" for m in measurements for p in m.problems]
    targets = target_report(measurements, args.n)

    if args.json:
        print(
            json.dumps(
                {
                    "command": command,
                    "n": args.n,
                    "concurrency": args.concurrency,
                    "harness": args.harness,
                    "measurements": [m.to_json() for m in measurements],
                    "targets": targets,
                    "problems": problems,
                },
                indent=2,
            )
        )
    else:
        print(f"command: {command}")
        print(f"synthetic benchmark, harness={args.harness}, environment=local, concurrency={args.concurrency}\n")
        print(render_table(measurements))
        print(
            f"\ndurable-write floor of each run: {args.concurrency} threads, per task a temp file, fsync, "
            "rename, fsync of the directory\n"
        )
        print(render_floors(measurements))
        if targets:
            print("\ndesign targets (informational):")
            print(render_targets(targets))
    return report_problems(problems)


if __name__ == "__main__":
    sys.exit(main())
