"""Overhead per command and per environment open/close of the local, sandbox and docker environments,
and the demo sweep's wall time in each.

What it measures, for each environment of --only (default all three):

* ``local``: ``{id: local}`` with the ``host`` network policy in every phase (all it supports);
  ``sandbox``: ``{id: sandbox}`` and ``docker``: ``{id: docker, params: {image: agentcompass-test:bookworm}}``,
  both with the ``none`` policy in every phase.
* open+close: one cold cycle (reported alone: the first open of a process also sweeps what killed
  runs left, task directories or containers, and starts the loop's thread pool), then --n sequential
  cycles of ``environment.open(plan, task)`` followed by ``session.close()`` on one asyncio loop:
  median and p90 of the cycle, and the medians of its open and close halves.
* per command, in one open session: --n times ``session.exec("true")`` (after one unmeasured warm-up
  command), median and p90; then --n times ``write_file`` of a 10 KB file followed by ``read_file`` of
  it, median and p90 of each.
* the demo sweep: the built-in ``demo`` benchmark with the ``oracle`` harness through ``orchestrate``,
  ``execution.limits.task_concurrency = 4``, into a fresh results directory: wall time of the call
  (preflight included) and accuracy. Local commands inherit this process's PATH while the sandbox's
  get /usr/local/bin:/usr/bin:/bin, so the demo's python3 scripts may start different interpreters
  (a pyenv shim costs far more than /usr/bin/python3).

The sandbox is skipped when ``bwrap`` is not installed, docker when no Docker engine answers at
DOCKER_HOST or it lacks the image; the reason is printed. Sanity checks (the exit status is non-zero
when one fails, and only then): every ``true`` exits 0; every file reads back as written; no closed
session leaves its directory (local, sandbox) and no container of this process remains (docker); the
demo sweep completes with accuracy 1.0, one normal detail per demo task and summary counts new ==
total. An environment whose measurement raises is reported as a failure and the others still run.

Run it from the repository root (the Docker engine of .ci/docker.sh listens on the socket below):

    DOCKER_HOST=unix:///var/lib/agentcompass-ci/docker.sock \\
        python perf/bench_environments.py [--n 100] [--only local,sandbox,docker] [--json]

Progress goes to stderr; the demo sweeps' run directories go to a temp directory removed afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from _bench import check_run_dir, report_problems, results_root, run_request

from agentcompass_dagster.declarations import registry
from agentcompass_dagster.plugins.benchmarks.demo import DemoBenchmark
from agentcompass_dagster.contracts.declarations import BenchmarkConfig, EnvironmentConfig, HarnessConfig, ModelConfig
from agentcompass_dagster.contracts.request import (
    ExecutionConfig,
    LimitsConfig,
    NetworkConfig,
    OutputConfig,
    EvalRequest,
)
from agentcompass_dagster.contracts.environment import Environment
from agentcompass_dagster.plugins.environments.hostdir import HostDirSession
from agentcompass_dagster.contracts.records import ExecutionPlan, NetworkPolicy, TaskSpec

Values = dict[str, float | None]  # measurement key (see ROWS) -> value

IMAGE = "agentcompass-test:bookworm"
ENVIRONMENTS: dict[str, tuple[EnvironmentConfig, NetworkPolicy]] = {
    "local": (EnvironmentConfig(id="local"), NetworkPolicy.host),
    "sandbox": (EnvironmentConfig(id="sandbox"), NetworkPolicy.none),
    "docker": (EnvironmentConfig(id="docker", params={"image": IMAGE}), NetworkPolicy.none),
}
HARNESS = "oracle"
DEMO_CONCURRENCY = 4
FILE_NAME = "bench-10k.bin"
FILE_SIZE = 10 * 1024
TASK = TaskSpec(id="bench-environments")
# (key in EnvironmentResult.values, row label of the table)
ROWS = [
    ("open_close_median_ms", "open+close median ms"),
    ("open_close_p90_ms", "open+close p90 ms"),
    ("open_median_ms", "  open median ms"),
    ("close_median_ms", "  close median ms"),
    ("first_open_close_ms", "first (cold) open+close ms"),
    ("exec_median_ms", 'exec("true") median ms'),
    ("exec_p90_ms", 'exec("true") p90 ms'),
    ("write_median_ms", "write_file 10 KB median ms"),
    ("write_p90_ms", "write_file 10 KB p90 ms"),
    ("read_median_ms", "read_file 10 KB median ms"),
    ("read_p90_ms", "read_file 10 KB p90 ms"),
    ("demo_seconds", f"demo sweep s (concurrency {DEMO_CONCURRENCY})"),
    ("demo_accuracy", "demo accuracy"),
]


@dataclass
class EnvironmentResult:
    """The measurements of one environment (see ROWS), or why it was skipped."""

    name: str
    skipped: str = ""
    values: Values = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def percentile(samples: list[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest sample with at least ``fraction`` of them at or below it."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def summarize(key: str, seconds: list[float]) -> Values:
    """``<key>_median_ms`` and ``<key>_p90_ms`` of durations given in seconds."""
    ms = [1000.0 * s for s in seconds]
    return {f"{key}_median_ms": statistics.median(ms), f"{key}_p90_ms": percentile(ms, 0.9)}


def skip_reason(name: str) -> str:
    """Why the environment cannot be measured here, or "" when it can."""
    if name == "sandbox" and shutil.which("bwrap") is None:
        return "bubblewrap (`bwrap`) is not installed"
    if name == "docker":
        try:
            import docker

            client = docker.from_env()
            try:
                client.ping()
                client.images.get(IMAGE)
            finally:
                client.close()
        except Exception as exc:
            where = os.environ.get("DOCKER_HOST", "the default socket (DOCKER_HOST is unset)")
            first_line = (str(exc).splitlines() or [type(exc).__name__])[0]
            return f"no Docker engine with {IMAGE} at {where}: {first_line}"
    return ""


def make_plan(config: EnvironmentConfig, policy: NetworkPolicy) -> ExecutionPlan:
    return ExecutionPlan(
        task_id=TASK.id,
        attempt=1,
        benchmark_id="none",
        harness_id="none",
        environment_id=config.id,
        model_id="none",
        baseline_network_policy=policy,
        run_network_policy=policy,
        evaluation_network_policy=policy,
    )


def leftovers(environment: Environment, roots: list[Path]) -> list[str]:
    """What closed sessions left behind: their directories (local, sandbox) and, for docker, every
    container this process made that still exists."""
    left = [str(root) for root in roots if root.exists()]
    if environment.config.provider_id == "docker":
        import docker

        client = docker.from_env()
        try:
            mine = client.containers.list(all=True, filters={"label": f"agentcompass.pid={os.getpid()}"})
        finally:
            client.close()
        left += [f"container {container.name}" for container in mine]
    return left


async def measure_open_close(environment: Environment, plan: ExecutionPlan, n: int) -> tuple[Values, list[str]]:
    """One cold cycle, then n timed open+close cycles; the values and what the closed sessions left."""
    opens: list[float] = []
    closes: list[float] = []
    roots: list[Path] = []
    for _ in range(n + 1):
        started = time.perf_counter()
        session = await environment.open(plan, TASK)
        opened = time.perf_counter()
        await session.close()
        closed = time.perf_counter()
        opens.append(opened - started)
        closes.append(closed - opened)
        if isinstance(session, HostDirSession):
            roots.append(session.root)
    first = 1000.0 * (opens.pop(0) + closes.pop(0))
    values = {
        "first_open_close_ms": first,
        **summarize("open_close", [o + c for o, c in zip(opens, closes, strict=True)]),
        "open_median_ms": 1000.0 * statistics.median(opens),
        "close_median_ms": 1000.0 * statistics.median(closes),
    }
    return values, leftovers(environment, roots)


async def measure_commands(environment: Environment, plan: ExecutionPlan, n: int) -> tuple[Values, list[str]]:
    """In one open session: n timed ``exec("true")`` after a warm-up one, then n timed writes and reads
    of a 10 KB file; the values and the sanity problems."""
    problems = []
    data = os.urandom(FILE_SIZE)
    execs: list[float] = []
    writes: list[float] = []
    reads: list[float] = []
    failed_execs = mismatched_reads = 0
    session = await environment.open(plan, TASK)
    try:
        warm_up = await session.exec("true")
        if warm_up.exit_code != 0:
            problems.append(f'exec("true") exited with {warm_up.exit_code}: {warm_up.output[-300:]!r}')
        for _ in range(n):
            started = time.perf_counter()
            result = await session.exec("true")
            execs.append(time.perf_counter() - started)
            failed_execs += result.exit_code != 0
        for _ in range(n):
            started = time.perf_counter()
            await session.write_file(FILE_NAME, data)
            written = time.perf_counter()
            back = await session.read_file(FILE_NAME)
            reads.append(time.perf_counter() - written)
            writes.append(written - started)
            mismatched_reads += back != data
    finally:
        await session.close()
    if failed_execs:
        problems.append(f'{failed_execs} of {n} exec("true") exited non-zero')
    if mismatched_reads:
        problems.append(f"{mismatched_reads} of {n} read_file calls did not return the {FILE_SIZE} bytes written")
    return {**summarize("exec", execs), **summarize("write", writes), **summarize("read", reads)}, problems


def run_demo(config: EnvironmentConfig, policy: NetworkPolicy, results_dir: Path) -> tuple[Values, list[str]]:
    """The demo sweep through the runtime into ``results_dir``: its values and the sanity problems."""
    request = EvalRequest(
        name=f"bench-environments-{config.id}",
        benchmark=BenchmarkConfig(id="demo"),
        model=ModelConfig(id="none"),
        harness=HarnessConfig(id=HARNESS),
        environment=config,
        execution=ExecutionConfig(
            network=NetworkConfig(baseline=policy, run=policy, evaluation=policy),
            limits=LimitsConfig(task_concurrency=DEMO_CONCURRENCY),
        ),
        output=OutputConfig(results_dir=results_dir),
    )
    run = run_request(request)
    accuracy = run.metrics.get("accuracy")
    values = {"demo_seconds": run.seconds, "demo_accuracy": accuracy}
    if run.error:
        return values, [f"demo sweep: {run.error}"]
    tasks = len(DemoBenchmark(request.benchmark).load_tasks())
    problems = check_run_dir(Path(run.run_dir), tasks, HARNESS, reused=False, accuracy=accuracy, counts=run.counts)
    return values, [f"demo sweep: {problem}" for problem in problems]


def progress(message: str) -> None:
    print(f"bench_environments: {message}", file=sys.stderr, flush=True)


def measure_environment(name: str, n: int, parent: Path) -> EnvironmentResult:
    """All measurements of one environment, or the reason it is skipped; a failure that raises is
    reported as a problem of this environment."""
    result = EnvironmentResult(name)
    result.skipped = skip_reason(name)
    if result.skipped:
        progress(f"{name}: skipped: {result.skipped}")
        return result
    config, policy = ENVIRONMENTS[name]
    environment: Environment = registry.environments.get(config.provider_id)(config)
    plan = make_plan(config, policy)
    try:
        environment.validate_plan(plan)
        progress(f"{name}: {n + 1} open+close cycles")
        values, left = asyncio.run(measure_open_close(environment, plan, n))
        result.values |= values
        if left:
            result.problems.append(f"{len(left)} closed sessions left something behind, e.g. {left[0]}")
        progress(f"{name}: {n} commands, {n} writes and reads of {FILE_SIZE} bytes")
        values, problems = asyncio.run(measure_commands(environment, plan, n))
        result.values |= values
        result.problems += problems
        progress(f"{name}: demo sweep")
        values, problems = run_demo(config, policy, Path(tempfile.mkdtemp(prefix=f"demo-{name}-", dir=parent)))
        result.values |= values
        result.problems += problems
        if left := leftovers(environment, []):
            result.problems.append(f"{len(left)} containers remain after the demo sweep, e.g. {left[0]}")
    except Exception as exc:
        result.problems.append(f"measurement failed: {type(exc).__name__}: {exc}")
    return result


def render_table(results: list[EnvironmentResult]) -> str:
    measured = [r for r in results if not r.skipped]
    width = max(len(label) for _, label in ROWS)
    header = f"{'':<{width}}" + "".join(f"{r.name:>12}" for r in measured)

    def cell(value: float | None, key: str) -> str:
        if value is None:
            return f"{'-':>12}"
        return f"{value:>12.3f}" if key in ("demo_seconds", "demo_accuracy") else f"{value:>12.2f}"

    rows = [f"{label:<{width}}" + "".join(cell(r.values.get(key), key) for r in measured) for key, label in ROWS]
    return "\n".join([header, "-" * len(header), *rows])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100, help="timed repetitions of each operation (default 100)")
    parser.add_argument(
        "--only",
        default=",".join(ENVIRONMENTS),
        help=f"comma-separated environments to measure (default {','.join(ENVIRONMENTS)})",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be positive")
    args.only = list(dict.fromkeys(name.strip() for name in args.only.split(",") if name.strip()))
    unknown = [name for name in args.only if name not in ENVIRONMENTS]
    if unknown or not args.only:
        parser.error(f"--only takes a comma-separated subset of {','.join(ENVIRONMENTS)}, got {unknown or 'none'}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join([sys.executable, *sys.argv])
    with results_root(None, "bench-environments-") as parent:
        results = [measure_environment(name, args.n, parent) for name in args.only]
    problems = [f"{r.name}: {problem}" for r in results for problem in r.problems]

    if args.json:
        print(
            json.dumps(
                {
                    "command": command,
                    "n": args.n,
                    "docker_host": os.environ.get("DOCKER_HOST"),
                    "environments": [asdict(r) for r in results],
                    "problems": problems,
                },
                indent=2,
            )
        )
    else:
        print(f"command: {command}")
        print(
            f"median/p90 of --n={args.n} sequential operations; demo benchmark, harness={HARNESS}, "
            f"network: local host, sandbox and docker none\n"
        )
        if any(not r.skipped for r in results):
            print(render_table(results))
        for r in results:
            if r.skipped:
                print(f"\n{r.name}: skipped: {r.skipped}")
        if not problems:
            print(
                "\nsanity checks passed: every command exited 0, every file read back as written, nothing left "
                "behind by closed sessions, demo sweep accuracy 1.0 with one detail per task"
            )
    return report_problems(problems)


if __name__ == "__main__":
    sys.exit(main())
