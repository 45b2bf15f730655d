"""The 18-task demo through Dagster as a user first meets it: `agentcompass run` and its no-op re-run.

What it measures, --repeat times (default 5), each time in a fresh working directory (so a fresh
``./results``) and a fresh DAGSTER_HOME (``./.dagster`` there, SQLite, the default instance):

* first: ``agentcompass run`` with no sweep named, which runs the embedded default sweep (the
  ``demo`` benchmark's 18 shell tasks, the ``oracle`` harness, the ``local`` environment); where the
  working directory has no ``resources/sweeps/demo.yaml`` the packaged one is used, as the README says.
* rerun: ``agentcompass run`` again, which must launch nothing.

Each is measured as its whole process tree (the CLI and the run-worker processes it starts, which may
outlive its own wait) under ``_tree.py``, a fresh child subreaper that reaps every descendant (see its
docstring): wall seconds until the last process was reaped, user+system CPU seconds, and the peak RSS
of its largest process. Reported: every repetition, and the median of each.

Sanity checks (the exit status is non-zero when one fails): both commands exit 0; the re-run says
"Nothing to run"; the first run's results hold the metrics parquet with accuracy 1.0. Goals,
informational (met / NOT met, never an exit status): median first run < 3.5 s, median re-run < 1.5 s.

Run it from the repository root, with the Python of the project's venv (whose ``agentcompass`` script
it runs):

    python perf/bench_demo.py [--repeat 5] [--results-dir DIR] [--json]

The final figures: ``python perf/bench_demo.py`` on an otherwise idle machine. Without --results-dir
the working directories go to a temp directory that is removed afterwards; with it, they are kept
below DIR.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _bench import (
    EXPECTED_ACCURACY,
    agentcompass_command,
    dagster_env,
    goal,
    measure_tree,
    render_targets,
    report_problems,
    results_root,
)
from _tree import TreeRun

PHASES = ("first", "rerun")
NOTHING_TO_RUN = "Nothing to run"  # what `agentcompass run` prints when it launches no run
EXPECTED_TASKS = 18
TARGET_SECONDS = {"first": 3.5, "rerun": 1.5}  # the median whole-tree wall of each phase


@dataclass
class Repetition:
    """One fresh working directory: the first run and the re-run, each a whole process tree."""

    workdir: str  # the working directory: ./results and ./.dagster
    first: TreeRun
    rerun: TreeRun | None = None  # None when the first run failed
    problems: list[str] = field(default_factory=list)

    def phase(self, name: str) -> TreeRun | None:
        return self.first if name == "first" else self.rerun

    def to_json(self) -> dict[str, Any]:
        # The commands' stdout is left out: 18 tasks' summaries, twice, five times, say nothing measured.
        return {
            name: None
            if (run := self.phase(name)) is None
            else {key: value for key, value in asdict(run).items() if key != "stdout"}
            for name in PHASES
        } | {"workdir": self.workdir, "problems": self.problems}


def check_results(results: Path) -> list[str]:
    """The first run's metrics parquet: one accuracy row, 1.0 (the oracle), over the 18 tasks. Imported
    here, after every measurement's tree has been reaped: pandas is not needed before."""
    from agentcompass_dagster.reporting.results import load_metrics

    metrics = load_metrics(results)
    rows = metrics.loc[metrics["metric"] == "accuracy"]
    accuracy, totals = rows["value"].tolist(), rows["total"].tolist()
    if accuracy != [EXPECTED_ACCURACY["oracle"]] or totals != [EXPECTED_TASKS]:
        return [
            f"the metrics parquet says accuracy {accuracy} over {totals} tasks, "
            f"expected [{EXPECTED_ACCURACY['oracle']}] over [{EXPECTED_TASKS}]"
        ]
    return []


def repeat_once(parent: Path, index: int) -> Repetition:
    """`agentcompass run` twice in a fresh working directory whose ./.dagster is DAGSTER_HOME."""
    workdir = Path(tempfile.mkdtemp(prefix=f"demo-{index}-", dir=parent))
    # DAGSTER_HOME set explicitly: an inherited one would otherwise win over ./.dagster.
    command, env = [*agentcompass_command(), "run"], dagster_env(workdir / ".dagster")
    rep = Repetition(str(workdir), measure_tree(command, env, workdir))
    if rep.first.error or rep.first.returncode != 0:
        rep.problems.append(rep.first.error or f"exited with {rep.first.returncode}: {rep.first.stdout[-500:]}")
        return rep
    rep.rerun = measure_tree(command, env, workdir)
    if rep.rerun.error or rep.rerun.returncode != 0:
        rep.problems.append(
            rep.rerun.error or f"the re-run exited with {rep.rerun.returncode}: {rep.rerun.stdout[-500:]}"
        )
    elif NOTHING_TO_RUN not in rep.rerun.stdout:
        rep.problems.append(
            f"the re-run does not say {NOTHING_TO_RUN!r}, so it launched runs: {rep.rerun.stdout[-500:]}"
        )
    return rep


def medians(reps: list[Repetition]) -> dict[str, dict[str, float]]:
    """Per phase, the median of each figure over the repetitions that have it without a problem."""
    result = {}
    for name in PHASES:
        runs = [run for rep in reps if not rep.problems and (run := rep.phase(name)) is not None]
        if runs:
            result[name] = {
                key: statistics.median(getattr(run, key) for run in runs)
                for key in ("tree_seconds", "seconds", "cpu_seconds", "peak_rss_mb")
            }
    return result


def goal_report(median: dict[str, dict[str, float]]) -> dict[str, Any]:
    return {
        f"median {name} s": goal(
            median[name]["tree_seconds"], f"< {limit:g}", median[name]["tree_seconds"] < limit, EXPECTED_TASKS
        )
        for name, limit in TARGET_SECONDS.items()
        if name in median
    }


def render(reps: list[Repetition], median: dict[str, dict[str, float]]) -> str:
    header = f"{'':<8} {'phase':<6} {'tree s':>8} {'CLI s':>8} {'CPU s':>8} {'peak RSS MB':>12}"
    lines = [header, "-" * len(header)]

    def row(label: str, name: str, figures: dict[str, float]) -> str:
        return (
            f"{label:<8} {name:<6} {figures['tree_seconds']:>8.3f} {figures['seconds']:>8.3f} "
            f"{figures['cpu_seconds']:>8.3f} {figures['peak_rss_mb']:>12.1f}"
        )

    for i, rep in enumerate(reps, 1):
        for name in PHASES:
            if (run := rep.phase(name)) is not None:
                lines.append(row(f"#{i}", name, asdict(run)))
    for name, figures in median.items():
        lines.append(row("median", name, figures))
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="fresh directories to measure in (default 5)")
    parser.add_argument("--results-dir", type=Path, help="keep the working directories below this directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join([sys.executable, *sys.argv])
    reps = []
    with results_root(args.results_dir, "bench-demo-") as parent:
        for i in range(args.repeat):
            reps.append(rep := repeat_once(parent, i))
        # Checked after the last measurement, so that no measured tree starts from this process once
        # it has imported pandas (a child's ru_maxrss counts the memory it was started from).
        for rep in reps:
            if not rep.problems:
                rep.problems += check_results(Path(rep.workdir) / "results")
    problems = [f"repetition {i}: {p}" for i, rep in enumerate(reps, 1) for p in rep.problems]
    median = medians(reps)
    goals = goal_report(median)

    if args.json:
        print(
            json.dumps(
                {
                    "command": command,
                    "repeat": args.repeat,
                    "repetitions": [rep.to_json() for rep in reps],
                    "median": median,
                    "goals": goals,
                    "problems": problems,
                },
                indent=2,
            )
        )
    else:
        print(f"command: {command}")
        print(
            f"`agentcompass run` (the embedded demo sweep, {EXPECTED_TASKS} tasks) and its no-op re-run, "
            f"{args.repeat} times in a fresh directory and SQLite DAGSTER_HOME; whole process trees "
            f"(tree s: until the last process was reaped; CLI s: until the CLI exited)\n"
        )
        print(render(reps, median))
        if goals:
            print("\ngoals (informational):")
            print(render_targets(goals))
        if not problems:
            print(
                "\nsanity checks passed: exit 0 twice, the re-run launched nothing, accuracy 1.0 over 18 tasks "
                "in the metrics parquet"
            )
    return report_problems(problems)


if __name__ == "__main__":
    sys.exit(main())
