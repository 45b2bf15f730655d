"""The `agentcompass` command. Thin: it parses arguments, calls the runtime and prints.

A user mistake is one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from agentcompass_dagster.errors import UserError

DEFAULT_SWEEP = Path("resources/sweeps/demo.yaml")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentcompass", description="Evaluate AI agents: run declared sweeps.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a declared sweep (default: resources/sweeps/demo.yaml)")
    run.add_argument("sweep", nargs="?", type=Path, default=DEFAULT_SWEEP, help="sweep YAML file")
    run.add_argument("--results-dir", type=Path, help="override output.results_dir")
    run.add_argument("--run-id", help="override output.run_id (must not exist yet)")
    run.add_argument("--reuse", action="store_true", help="reuse finished details of the newest earlier run")
    run.add_argument("--reuse-run-id", help="reuse finished details of this earlier run id")
    summary = sub.add_parser("summary", help="re-render summary.md of a run directory from its details")
    summary.add_argument("run_dir", type=Path)
    return parser


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    output: dict[str, Any] = {}
    if args.results_dir is not None:
        output["results_dir"] = args.results_dir
    if args.run_id is not None:
        output["run_id"] = args.run_id
    if args.reuse:
        output["reuse"] = True
    if args.reuse_run_id is not None:
        output["reuse_run_id"] = args.reuse_run_id
    return output


def cmd_run(args: argparse.Namespace) -> int:
    from agentcompass_dagster.config import OutputConfig, load_sweep, validate_declaration
    from agentcompass_dagster.runtime.orchestrator import run_requests

    sweep = load_sweep(args.sweep)
    overrides = _overrides(args)
    if overrides:
        output = validate_declaration(
            OutputConfig, {**sweep.output.model_dump(exclude_unset=True), **overrides}, "command line"
        )
        sweep = sweep.model_copy(update={"output": output})
    if sys.stdout.isatty():
        from agentcompass_dagster.progress import LiveProgress

        with LiveProgress() as progress:
            result = run_requests(sweep.requests(), observer=progress)
    else:
        result = run_requests(sweep.requests())
    for outcome in result.outcomes.values():
        if outcome.result is not None:
            print(outcome.result.summary)
        else:
            print(f"# {outcome.name}: {outcome.status}\n{outcome.error or ''}\n")
        if outcome.paths.get("run_dir"):
            print(f"run directory: {outcome.paths['run_dir']}\n")
    if result.status != "completed":
        print(f"agentcompass: the sweep ended {result.status}", file=sys.stderr)
        return 1
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    from agentcompass_dagster.runtime.finalize import rerender_summary

    _, markdown = rerender_summary(args.run_dir)
    print(markdown)
    print(f"written: {args.run_dir / 'summary.md'}")
    return 0


COMMANDS = {"run": cmd_run, "summary": cmd_summary}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
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
