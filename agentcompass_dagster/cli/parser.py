"""The argument parser of the `agentcompass` command: its subcommands, their arguments and their help."""

from __future__ import annotations

import argparse
from pathlib import Path

EXIT_CODES = (
    "exit codes: 0 the sweep completed; 3 it completed but tasks ended in error; 1 it could not run to its "
    "end; 2 bad input; 130 interrupted"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentcompass", description="Evaluate AI agents: run declared sweeps.")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    _rerun_parsers(sub)
    dispatch = sub.add_parser(
        "dispatch",
        help="run one prompt through the tool agent, fail-closed: prints the "
        "receipt JSON; exit 0 ok, 2 spec, 3 agent, 4 output, 5 evidence",
    )
    dispatch.add_argument("spec", type=Path, help="dispatch spec YAML file")
    dispatch.add_argument("--run-id", help="override the spec's run_id (must not exist yet)")
    dispatch.add_argument("--runs-dir", type=Path, help="override the spec's runs_dir")
    _reading_parsers(sub)
    _history_parser(sub)
    ui = sub.add_parser(
        "ui",
        help="start the Dagster UI and daemon (dagster dev) on 127.0.0.1, for the project's "
        "workspace.yaml (else the agentcompass code location) or for the sweeps named",
    )
    ui.add_argument(
        "sweeps", nargs="*", type=Path, help="sweep YAML files (default: ./workspace.yaml, else ./resources)"
    )
    ui.add_argument("--port", type=int, default=3000)
    return parser


def _run_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser(
        "run",
        help="run a declared sweep (default: resources/sweeps/demo.yaml) through Dagster, only what is missing",
        epilog=EXIT_CODES,
    )
    run.add_argument(
        "sweep",
        nargs="?",
        type=Path,
        default=None,
        help="sweep YAML file or NAME (resources/sweeps/NAME.yaml here, else packaged; default: demo)",
    )
    run.add_argument("--results-dir", type=Path, help="override output.results_dir")
    run.add_argument(
        "--direct",
        action="store_true",
        help="run with the runtime alone, without Dagster: a new run directory every time",
    )
    run.add_argument("--run-id", help="with --direct: override output.run_id (must not exist yet)")
    run.add_argument("--reuse", action="store_true", help="with --direct: reuse the newest earlier run")
    run.add_argument("--reuse-run-id", help="with --direct: reuse this earlier run id")
    run.add_argument(
        "--submit",
        action="store_true",
        help="hand the runs to the instance's run queue (the daemon launches them), then follow them",
    )
    run.add_argument(
        "--fresh",
        action="store_true",
        help="evaluate every task again, reusing no earlier result (a new run per model; the earlier "
        "runs stay, the regression check compares with them)",
    )


def _rerun_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The commands that make a run again from what a run recorded: resume, fork, replay."""
    resume = sub.add_parser(
        "resume",
        help="continue an interrupted run: finished tasks are kept, unfinished "
        "agent attempts continue from their activity logs and checkpoints",
    )
    resume.add_argument("run_dir", type=Path)
    resume.add_argument("--task", help="resume only this task")
    fork = sub.add_parser(
        "fork",
        help="continue an agent attempt from one of its checkpoints with another "
        "solver model, in a new run (kept out of from-scratch statistics)",
    )
    fork.add_argument("run_dir", type=Path)
    fork.add_argument("--task", required=True)
    fork.add_argument("--checkpoint", type=int, required=True, help="the checkpoint sequence number to fork at")
    fork.add_argument("--model", required=True, help="the new solver model's id, declared in --sweep")
    fork.add_argument("--sweep", type=Path, required=True, help="the sweep file declaring the model")
    fork.add_argument("--attempt", type=int, default=1)
    replay = sub.add_parser(
        "replay",
        help="re-run an attempt's recorded terminal actions in a clean environment "
        "and report the first difference (exit code 1 when there is one)",
    )
    replay.add_argument("run_dir", type=Path)
    replay.add_argument("--task", required=True)
    replay.add_argument("--attempt", type=int, default=1)
    replay.add_argument("--score", action="store_true", help="also evaluate the replayed state")


def _reading_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The commands that read what runs left: show, summary, report."""
    show = sub.add_parser(
        "show",
        help="what a run directory holds: tasks, attempts and their outcome, "
        "checkpoints (which are forkable), replays and lineage",
    )
    show.add_argument("run_dir", type=Path)
    show.add_argument("--task", help="one task, with each attempt's checkpoints and a fork command")
    show.add_argument("--json", action="store_true", help="print the overview as JSON")
    summary = sub.add_parser("summary", help="re-render summary.md of a run directory from its details")
    summary.add_argument("run_dir", type=Path)
    report = sub.add_parser("report", help="write one self-contained HTML report of a results directory")
    report.add_argument("results_dir", type=Path)
    report.add_argument("-o", "--output", type=Path, help="the HTML file (default: RESULTS_DIR/report.html)")


def _history_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    history = sub.add_parser(
        "history",
        help="one line per run of each benchmark x model of a sweep, oldest first: "
        "accuracy with its 95%% interval, cost, the regression check's verdict",
    )
    history.add_argument("sweep", help="the sweep's name, or its YAML file")
    history.add_argument(
        "--results-dir",
        type=Path,
        help="where the runs are (default: the sweep file's output.results_dir, else results)",
    )
    history.add_argument(
        "--format",
        choices=("table", "csv"),
        default="table",
        help="csv: load_history's frame, every column unformatted",
    )
