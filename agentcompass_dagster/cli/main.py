"""The `agentcompass` command. Thin: it parses arguments, calls the runtime or the Dagster layer, prints.

A user mistake is one line on stderr and exit code 2, never a traceback. `run`, `resume` and `fork`
exit with 0 when the sweep completed and every task has a result, 3 when it completed but some tasks
ended in error (their details say why; the summary is printed all the same), 1 when it could not run to
its end (a run failed, timed out or was refused), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentcompass_dagster.cli.parser import build_parser
from agentcompass_dagster.declarations.references import DEFAULT_RESOURCES, PACKAGED_RESOURCES
from agentcompass_dagster.contracts.errors import UserError, did_you_mean

DEFAULT_SWEEP = "demo"


def find_sweep(sweep: Path | None) -> Path:
    """A sweep file as given, or for a bare name (no folder, no .yaml; none: the demo)
    resources/sweeps/NAME.yaml here, else the one shipped with the package."""
    if sweep is not None and (sweep.is_file() or sweep.parent != Path(".") or sweep.suffix in (".yaml", ".yml")):
        return sweep
    name = DEFAULT_SWEEP if sweep is None else str(sweep)
    folders = (DEFAULT_RESOURCES / "sweeps", PACKAGED_RESOURCES / "sweeps")
    places = [folder / f"{name}.yaml" for folder in folders]
    for place in places:
        if place.is_file():
            return place
    known = sorted({path.stem for folder in folders for path in folder.glob("*.yaml")})
    hint = did_you_mean(name, known) or (f"; known sweeps: {', '.join(known)}" if known else "")
    raise UserError(f"sweep {name!r}: no such file, and no {' or '.join(map(str, places))}{hint}")


SUPERSEDED_DEV = "ignore:Function `dev_command` is superseded"
EXIT_OK = 0
EXIT_NOT_COMPLETED = 1
EXIT_TASK_ERRORS = 3


def _load(args: argparse.Namespace) -> Any:
    from agentcompass_dagster.contracts.request import OutputConfig
    from agentcompass_dagster.declarations.sweep import load_sweep
    from agentcompass_dagster.contracts.validation import validate_declaration

    sweep = load_sweep(args.sweep)
    output: dict[str, Any] = {}
    if args.results_dir is not None:
        output["results_dir"] = args.results_dir
    direct_only = {"--run-id": args.run_id, "--reuse": args.reuse or None, "--reuse-run-id": args.reuse_run_id}
    for flag, value in direct_only.items():
        if value is not None and not args.direct:
            raise UserError(f"{flag}={value!r}: applies to --direct runs; through Dagster every run reuses the newest")
        if value is not None and args.fresh and flag != "--run-id":
            raise UserError(f"{flag}={value!r}: --fresh reuses no earlier result; give one or the other")
    if args.run_id is not None:
        output["run_id"] = args.run_id
    if args.reuse:
        output["reuse"] = True
    if args.reuse_run_id is not None:
        output["reuse_run_id"] = args.reuse_run_id
    if args.fresh and args.direct:
        # Whatever the sweep file says: a fresh --direct run reuses nothing.
        output.update(reuse=False, reuse_run_id=None)
    if output:
        merged = {**sweep.output.model_dump(exclude_unset=True), **output}
        sweep = sweep.model_copy(update={"output": validate_declaration(OutputConfig, merged, "command line")})
    return sweep


def _board(running: str = "running") -> Any:
    if not sys.stdout.isatty():
        return None
    from agentcompass_dagster.launcher.progress import ProgressBoard

    return ProgressBoard(running)


def cmd_run(args: argparse.Namespace) -> int:
    args.sweep = find_sweep(args.sweep)
    sweep = _load(args)
    if args.submit and args.direct:
        raise UserError("--submit: hands runs to the Dagster daemon; it does not go with --direct")
    return _run_direct(sweep.requests()) if args.direct else _run_dagster(sweep, args.sweep, args.submit, args.fresh)


def _run_direct(requests: list[Any]) -> int:
    from agentcompass_dagster.launcher.progress import LiveProgress
    from agentcompass_dagster.runtime.execution.orchestrator import orchestrate

    board = _board()
    if board is not None:
        with board:
            result = orchestrate(requests, observer=LiveProgress(board))
    else:
        result = orchestrate(requests)
    errors = 0
    for outcome in result.outcomes.values():
        print(
            outcome.result.summary if outcome.result else f"# {outcome.name}: {outcome.status}\n{outcome.error or ''}\n"
        )
        if outcome.paths.get("run_dir"):
            print(f"run directory: {outcome.paths['run_dir']}\n")
        if outcome.result is not None:
            errors += outcome.result.metrics.counts.error
    if result.status != "completed":
        print(f"agentcompass: the sweep ended {result.status}", file=sys.stderr)
        return EXIT_NOT_COMPLETED
    return _task_errors(errors)


def _task_errors(errors: int) -> int:
    if not errors:
        return EXIT_OK
    print(
        f"agentcompass: the sweep completed, but {errors} task(s) ended in error (see their details; "
        f"`agentcompass run` again re-runs them)",
        file=sys.stderr,
    )
    return EXIT_TASK_ERRORS


def _run_dagster(sweep: Any, sweep_file: Path, submit: bool, fresh: bool) -> int:
    from agentcompass_dagster.defs.run_worker import StandbyWorker

    # Started before Dagster is imported here: the worker's own imports then overlap this command's.
    standby = None if submit else StandbyWorker()
    try:
        from agentcompass_dagster.launcher.launch import launch_sweep

        board = _board("runs in flight")
        if board is not None:
            with board:
                launch = launch_sweep(sweep, sweep_file, submit=submit, board=board, fresh=fresh, standby=standby)
        else:
            launch = launch_sweep(sweep, sweep_file, submit=submit, fresh=fresh, standby=standby)
    finally:
        if standby is not None:
            standby.discard()
    from agentcompass_dagster.runtime.store.layout import SUMMARY, SUMMARY_COUNTS
    from agentcompass_dagster.runtime.results.summary import SummaryCounts

    errors = 0
    if launch.budget_refused and not launch.evaluated:
        assert launch.budget is not None
        print(
            f"Nothing launched: the sweep's budget is exhausted ({launch.budget.message}); "
            f"{launch.budget_refused} (model, task) partition(s) without a result wait for a larger budget. "
            "The newest complete run of each model:\n"
        )
    elif not launch.evaluated:
        # Said first: the summaries below are of earlier runs, whose counts ("18 run in this run") are theirs.
        print(
            "Nothing to run: every task has a result and the metrics are current. "
            "The newest complete run of each model:\n"
        )
    for (benchmark, model), source in sorted(launch.newest.items()):
        print((Path(source.path) / SUMMARY).read_text())
        print(f"run directory: {source.path}\n")
        counts = Path(source.path) / SUMMARY_COUNTS
        if counts.is_file():
            errors += SummaryCounts.model_validate_json(counts.read_text()).error
    print(f"dagster: {_launch_line(launch)} (instance: {launch.home})")
    if launch.budget is not None:
        # A spent budget is an outcome of the sweep, not a failure: the exit code stays that of the tasks.
        print(f"budget: {launch.budget.message}; {launch.without_result} (model, task) partition(s) without a result")
    if launch.failed:
        print(f"agentcompass: failed in Dagster: {'; '.join(launch.failed)}", file=sys.stderr)
        return EXIT_NOT_COMPLETED
    return _task_errors(errors)


def _launch_line(launch: Any) -> str:
    """What the Dagster runs of this command were for: a run evaluates one model's missing tasks in a
    row of partitions (at most ``dagster.max_partitions_per_run``), all writing that model's run directory."""
    parts = []
    evaluating = len(launch.launched) - launch.metrics_runs
    if evaluating:
        what = "again, results or not" if launch.fresh else "without a result"
        parts.append(
            f"launched {evaluating} run(s) evaluating the {launch.missing} (model, task) partition(s) "
            f"{what}, one per row of a model's partitions (at most "
            "dagster.max_partitions_per_run), each writing into that model's run directory"
        )
    if launch.metrics_runs:
        parts.append(f"launched {launch.metrics_runs} run(s) of the metrics alone, older than the newest result")
    if launch.followed:
        parts.append(f"followed {len(launch.followed)} run(s) of this sweep launched elsewhere")
    if launch.backfills:
        parts.append(f"followed backfill(s) {', '.join(launch.backfills)} of this sweep's partitions")
    return "; ".join(parts) or "nothing launched"


def cmd_resume(args: argparse.Namespace) -> int:
    from agentcompass_dagster.reruns.resume import resume_request

    return _run_direct([resume_request(args.run_dir, args.task)])


def cmd_fork(args: argparse.Namespace) -> int:
    from agentcompass_dagster.declarations.sweep import load_sweep
    from agentcompass_dagster.defs.lineage import report_derived
    from agentcompass_dagster.reruns.fork import prepare_fork
    from agentcompass_dagster.runtime.store.layout import request_root

    request = prepare_fork(args.run_dir, args.task, args.checkpoint, args.model, load_sweep(args.sweep), args.attempt)
    fork_run_id = request.output.run_id
    if fork_run_id is None:  # prepare_fork names the fork's run
        raise RuntimeError("the fork's request has no run id")
    code = _run_direct([request])
    fork_dir = request_root(request) / fork_run_id
    report_derived(
        args.run_dir,
        args.task,
        args.attempt,
        "fork",
        {
            "checkpoint": args.checkpoint,
            "model": request.model.id,
            "fork run": fork_run_id,
            "fork run dir": fork_dir.resolve(),
            "exit code": code,
        },
    )
    return code


def cmd_replay(args: argparse.Namespace) -> int:
    from agentcompass_dagster.defs.lineage import report_derived
    from agentcompass_dagster.reruns.replay import replay

    report = replay(args.run_dir, args.task, args.attempt, args.score)
    matched = sum(step.matches for step in report.steps)
    report_derived(
        args.run_dir,
        args.task,
        args.attempt,
        "replay",
        {
            "status": report.status,
            "actions matched": f"{matched}/{len(report.steps)}",
            **({"report": Path(report.path)} if report.path else {}),
            **({"correct": bool(report.evaluation.get("correct"))} if report.evaluation is not None else {}),
        },
    )
    print(
        f"replay of {args.task} attempt {args.attempt}: {report.status}, {matched}/{len(report.steps)} actions matched"
    )
    if report.first_difference:
        diff = report.first_difference
        print(
            f"first difference at step {diff['step']}: {diff['command']}\n"
            f"  expected (exit {diff['expected']['exit_code']}): {diff['expected']['output'][:500]!r}\n"
            f"  actual   (exit {diff['actual']['exit_code']}): {diff['actual']['output'][:500]!r}"
        )
    for path in report.artifact_differences:
        print(f"artifact differs: {path}")
    if report.evaluation is not None:
        print(f"evaluation of the replayed state: correct={report.evaluation.get('correct')}")
    print(f"report: {report.path}")
    return 0 if report.status == "matched" else 1


def cmd_dispatch(args: argparse.Namespace) -> int:
    import json

    from agentcompass_dagster.dispatch import run_dispatch

    receipt, code = run_dispatch(args.spec, run_id=args.run_id, runs_dir=args.runs_dir)
    print(json.dumps(receipt, indent=2, ensure_ascii=False))
    return code


def cmd_summary(args: argparse.Namespace) -> int:
    from agentcompass_dagster.runtime.execution.finalize import rerender_summary
    from agentcompass_dagster.runtime.store.layout import SUMMARY

    _, markdown = rerender_summary(args.run_dir)
    print(markdown)
    print(f"written: {args.run_dir / SUMMARY}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from agentcompass_dagster.reporting.show import overview, render

    run = overview(args.run_dir, args.task)
    print(run.model_dump_json(indent=2) if args.json else render(run, one_task=args.task is not None), end="")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from agentcompass_dagster.reporting.report import write_report

    path = write_report(args.results_dir, args.output)
    print(f"written: {path}")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from agentcompass_dagster.contracts.request import OutputConfig
    from agentcompass_dagster.declarations.sweep import load_sweep
    from agentcompass_dagster.reporting.history import render
    from agentcompass_dagster.reporting.results import load_history

    name, results_dir = args.sweep, OutputConfig().results_dir
    if Path(args.sweep).suffix in (".yaml", ".yml"):
        sweep = load_sweep(Path(args.sweep))
        name, results_dir = sweep.name, sweep.output.results_dir
    results_dir = args.results_dir or results_dir
    if not results_dir.is_dir():
        raise UserError(f"{results_dir}: no such results directory")
    history = load_history(results_dir, name)
    if history.empty:
        known = sorted(load_history(results_dir)["sweep"].unique())
        raise UserError(
            f"sweep {name!r}: no runs in {results_dir} (sweeps with runs there: {', '.join(known) or 'none'})"
        )
    print(history.to_csv(index=False) if args.format == "csv" else render(history), end="")
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    """`dagster dev` in its own process group, so Ctrl-C stops the webserver, the daemon and every code
    server it started."""
    from agentcompass_dagster.declarations.sweep import load_sweep
    from agentcompass_dagster.defs.code_location import set_sweep_files, write_workspace
    from agentcompass_dagster.defs.instance import ensure_dagster_home

    for path in args.sweeps:
        load_sweep(path)
    home = ensure_dagster_home()
    # The project's workspace.yaml, which may list locations of the user's beside ours; else our location
    # alone, holding the sweeps named or, as `dagster dev` of it would, those of ./resources.
    workspace = Path("workspace.yaml")
    if args.sweeps or not workspace.is_file():
        if args.sweeps:
            set_sweep_files(args.sweeps)
        workspace = write_workspace(home)
    dagster = Path(sys.executable).with_name("dagster")
    command = [str(dagster), "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(args.port)]
    # Dagster 1.13 tells `dagster dev` users to use `dg dev`, which this project does not install.
    warnings = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), SUPERSEDED_DEV]))
    proc = subprocess.Popen(command, start_new_session=True, env={**os.environ, "PYTHONWARNINGS": warnings})
    # dagster dev leads its own process group (webserver, daemon, code servers): stop all of it however
    # this process is asked to stop, not only on Ctrl-C (Python's SIGINT handler raises KeyboardInterrupt).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        from agentcompass_dagster.runtime.store.processes import stop_group

        stop_group(proc, ((signal.SIGINT, 20), (signal.SIGTERM, 10), (signal.SIGKILL, 5)))
        return 130


COMMANDS = {
    "run": cmd_run,
    "resume": cmd_resume,
    "fork": cmd_fork,
    "replay": cmd_replay,
    "dispatch": cmd_dispatch,
    "show": cmd_show,
    "summary": cmd_summary,
    "report": cmd_report,
    "history": cmd_history,
    "ui": cmd_ui,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="agentcompass: %(levelname)s: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except UserError as exc:
        print(f"agentcompass: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("agentcompass: interrupted; finished task details are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
