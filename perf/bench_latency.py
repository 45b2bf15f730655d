"""Agent workloads at the model's speed: Inspect AI, `agentcompass run --direct` and `agentcompass run`
through Dagster, side by side against one OpenAI-compatible endpoint that answers every call after a set
latency (issue 41).

The endpoint (``_latency_endpoint.py``) runs in a process of its own, started once, so that its CPU is in
no side's measurement and it shares no GIL with a side: an aiohttp server on 127.0.0.1 that answers every
chat completion after --latency seconds, any number of them at once. A conversation with tools (our
``tool_agent``) gets --calls answers: a ``bash`` call of ``echo hi`` for each but the last, then a
``submit`` of the answer the synthetic task asks for; a request without tools (Inspect's ``generate()``)
gets that answer as text. The ideal wall time of N tasks at concurrency C is ceil(N / C) x calls x
latency: the model's time alone, nothing else (our side's commands and Inspect's imports are overhead).

For each point (N tasks, concurrency C: --n and --concurrency, or with --grid an uncontended point of
UNCONTENDED_N tasks at C=1 and then the issue's three, 64x16, 64x64 and 256x64), each side of --sides
(default all three), one after the other, each measured as a whole process tree under ``_tree.py`` (wall
until its last process was reaped, user+system CPU of every process, the largest single peak RSS):

* inspect: ``_inspect_latency.py`` run by the Python of Inspect AI's own venv (--venv, made or reused
  as ``bench_vs_inspect.py`` does, with the project's version of the ``openai`` SDK installed beside
  it, which Inspect's openai provider needs): one eval() of a Task of N samples whose solver is
  --calls ``generate()`` calls in a chain, the model ``openai/latency`` at the endpoint (chat
  completions, not streamed), max_samples = max_connections = C, its log in a temp directory, no
  display. Its eval() call's wall ("run s") is shown beside the process's.
* direct: ``agentcompass run SWEEP --direct``, the sweep (``_bench.write_sweep``) the ``synthetic``
  benchmark with N tasks, one ``openai_compat`` model at the endpoint (its key, a dummy, in an
  environment variable, as a user's would be), the ``tool_agent`` harness, the ``local`` environment
  and task_concurrency = C, its results in a temp directory: the runtime alone.
* dagster: ``agentcompass run SWEEP --fresh`` of the same sweep in a fresh DAGSTER_HOME (SQLite), as a
  user runs it: the CLI registers the partitions and launches the run, a run worker evaluates them.
  For both, "run s" is the run directory's own time (run_info.json's started_at to finished_at); the
  rest of the wall is the processes' start and exit, and through Dagster the launch of the run and
  its worker's start.

Per call, for direct and dagster, from the activity log of every attempt of the run (the accounting of
``bench_agent_turns.py``, per step): a step's span runs from the previous step's completed record (the
session's start for the first) to its own completed record. A model call's overhead is its span less
the model call's own time (what ``openai_compat`` measured around the SDK call), a tool call's its span
less the command's own time (the environment's measure of ``exec``: the durable wrapper script around
``echo hi``, its processes and their output); what is left is the loop's: the activity-log appends
(fsynced), the checkpoint after each command, the agent's state, the event loop, and at concurrency the
wait for the GIL and the CPU. Also shown, per call: the model call's own time over the latency (the SDK,
HTTP and the endpoint), the command's own time, and per attempt the rest of its time (opening the
environment, the submit step, ending the session, scoring, closing); each as median and p90 in ms.
Beside them, ``echo hi`` alone: ``bash -c 'echo hi'`` started by this process, the median of
BASELINE_RUNS.

Sanity checks (the exit status is non-zero when one fails): the endpoint answered N x calls chat
completions to each side and refused none; Inspect's log says success with N of N samples; each of our
commands exits 0 and leaves one run directory whose run_info.json says completed, with N normal details,
accuracy 1.0 and summary counts of N new tasks and no error, and an activity log for every attempt.

Goals, informational (printed as met / NOT met, never an exit status): at C=16 and 64 (and 256 tasks at
C=64), the direct wall <= 1.1x the ideal and through Dagster <= 1.1x the ideal + 2 s; both ahead of
Inspect AI's wall time; the framework overhead per model call <= 3 ms and per tool call <= 5 ms (the
median, above the call's own time), uncontended (C=1), and no more than 2x those at C=16. A wall goal
shown at a point it is not set at says so.

Run it from the repository root, with the Python of the project's venv (whose ``agentcompass`` script
the direct and dagster sides run), on an otherwise idle machine:

    python perf/bench_latency.py [--n 64] [--concurrency 16] [--latency 0.5] [--calls 3] [--grid]
                                 [--sides inspect direct dagster] [--venv DIR] [--results-dir DIR] [--json]

Without --results-dir the run directories, instances and Inspect's logs go to a temp directory that is
removed afterwards; with it, they are kept below DIR.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from _bench import (
    agentcompass_command,
    check_run_dir,
    dagster_env,
    goal,
    measure_tree,
    normal_details,
    render_targets,
    report_problems,
    results_root,
    write_sweep,
)
from _latency_endpoint import COMMAND, MODEL as SERVED_MODEL
from _tree import TreeRun
from bench_vs_inspect import DEFAULT_VENV, Inspect, describe, ensure_inspect
from agentcompass_dagster.durable.activity import ACTIVITY_FILE, ActivityRecord, read_activity
from agentcompass_dagster.runtime.store.layout import RUN_INFO, SUMMARY_COUNTS
from agentcompass_dagster.runtime.store.run_dir import RunDir

SIDES = ("inspect", "direct", "dagster")
ENDPOINT_CHILD = Path(__file__).with_name("_latency_endpoint.py")
INSPECT_CHILD = Path(__file__).with_name("_inspect_latency.py")
HARNESS = "tool_agent"
SWEEP_NAME = "bench_latency"
MODEL_ID = "m1"
KEY_ENV = "BENCH_LATENCY_API_KEY"  # our model's api_key_env; Inspect's key is OPENAI_API_KEY
DUMMY_KEY = "sk-bench-latency-0123456789abcdef0123456789abcdef"  # the endpoint takes any key
DAGSTER_HOME_DIR = "dagster_home"
UNCONTENDED_N = 4
GRID = ((UNCONTENDED_N, 1), (64, 16), (64, 64), (256, 64))  # (N, concurrency): uncontended, then the issue's
BASELINE_RUNS = 20
ENDPOINT_START_S = 30.0

# The goals, informational only (never an exit status).
TARGET_WALL_CONCURRENCY = (16, 64)  # where the wall goals are set
TARGET_DIRECT_OVER_IDEAL = 1.1
TARGET_DAGSTER_OVER_IDEAL, TARGET_DAGSTER_EXTRA_S = 1.1, 2.0
TARGET_MODEL_OVERHEAD_MS, TARGET_TOOL_OVERHEAD_MS = 3.0, 5.0  # median per call, uncontended (C=1)
TARGET_CONTENDED_C, TARGET_CONTENDED_FACTOR = 16, 2.0  # at C=16, no more than 2x those

# Per-call figures from the activity logs, in ms: (key, column title).
FIGURES = (
    ("model_overhead_ms", "model call overhead"),
    ("model_over_latency_ms", "model call - latency"),
    ("tool_overhead_ms", "tool call overhead"),
    ("command_ms", "command (exec)"),
    ("attempt_rest_ms", "rest per attempt"),
)


@dataclass
class Point:
    n: int
    concurrency: int
    latency: float
    calls: int

    @property
    def ideal_seconds(self) -> float:
        """The model's time alone: ceil(N / C) rounds of calls x latency."""
        return math.ceil(self.n / self.concurrency) * self.calls * self.latency

    @property
    def label(self) -> str:
        return f"N={self.n} C={self.concurrency}"


@dataclass
class Side:
    """One side at one point, measured as its whole process tree."""

    side: str  # one of SIDES
    n: int
    concurrency: int
    seconds: float  # until the tree's last process was reaped
    cpu_seconds: float  # user+system of every process of the tree
    peak_rss_mb: float  # the largest single process's
    run_seconds: float | None = None  # the run alone: Inspect's eval() call, our run_info's start to finish
    completions: int = 0  # chat completions the endpoint answered during this side
    max_in_flight: int = 0
    endpoint_extra_ms: float = 0.0  # the most any answer took beyond the latency, at the endpoint
    calls: dict[str, dict[str, float | None]] = field(default_factory=dict)  # FIGURES' keys: median, p90, count
    problems: list[str] = field(default_factory=list)

    def over_ideal(self, point: Point) -> float:
        return self.seconds / point.ideal_seconds if point.ideal_seconds else math.inf

    def to_json(self, point: Point) -> dict[str, Any]:
        return {**asdict(self), "over_ideal": round(self.over_ideal(point), 4)}


class Endpoint:
    """``_latency_endpoint.py`` in a process of its own, started by this one (and ended by ``close``)."""

    def __init__(self, latency: float, calls: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(ENDPOINT_CHILD), "--latency", str(latency), "--calls", str(calls)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # {"port": PORT}, once it listens
        if not line:
            raise SystemExit(f"the endpoint did not start: it exited with {self.proc.wait(ENDPOINT_START_S)}")
        self.port = json.loads(line)["port"]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict[str, Any]:
        """Its counters since the previous call, which resets them."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as response:
            return json.loads(response.read())

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(ENDPOINT_START_S)


@contextmanager
def endpoint_process(latency: float, calls: int) -> Iterator[Endpoint]:
    endpoint = Endpoint(latency, calls)
    try:
        yield endpoint
    finally:
        endpoint.close()


def model_declaration(endpoint: Endpoint) -> dict[str, Any]:
    return {
        "id": MODEL_ID,
        "provider": "openai_compat",
        "model": SERVED_MODEL,
        "base_url": endpoint.base_url,
        "api_key_env": KEY_ENV,
    }


def echo_baseline_ms() -> float:
    """``bash -c 'echo hi'`` alone, started by this process: the median of BASELINE_RUNS, in ms."""
    times = []
    for _ in range(BASELINE_RUNS):
        started = time.perf_counter()
        subprocess.run(["bash", "-c", COMMAND], check=True, stdout=subprocess.DEVNULL)
        times.append(1000.0 * (time.perf_counter() - started))
    return statistics.median(times)


def measured_side(name: str, point: Point, tree: TreeRun, endpoint: Endpoint) -> Side:
    """A Side from its process tree and the endpoint's counters since the side started; checked that
    the command exited 0 and that the endpoint answered N x calls completions and refused none."""
    stats = endpoint.stats()
    side = Side(
        name,
        point.n,
        point.concurrency,
        tree.tree_seconds,
        tree.cpu_seconds,
        tree.peak_rss_mb,
        completions=stats["completions"],
        max_in_flight=stats["max_in_flight"],
        endpoint_extra_ms=stats["max_extra_ms"],
    )
    if tree.error or tree.returncode != 0:
        side.problems.append(tree.error or f"exited with {tree.returncode}: {tree.stdout[-1000:]}")
    expected = point.n * point.calls
    if stats["completions"] != expected or stats["refused"]:
        side.problems.append(
            f"the endpoint answered {stats['completions']} chat completions and refused "
            f"{stats['refused']}, expected {expected} and none"
        )
    return side


def measure_inspect(inspect: Inspect, point: Point, endpoint: Endpoint, parent: Path) -> Side:
    log_dir = Path(tempfile.mkdtemp(prefix=f"inspect-n{point.n}-c{point.concurrency}-", dir=parent))
    command = [
        str(inspect.python),
        str(INSPECT_CHILD),
        "--n",
        str(point.n),
        "--calls",
        str(point.calls),
        "--concurrency",
        str(point.concurrency),
        "--base-url",
        endpoint.base_url,
        "--model",
        SERVED_MODEL,
        "--log-dir",
        str(log_dir),
    ]
    endpoint.stats()
    tree = measure_tree(command, {**os.environ, "OPENAI_API_KEY": DUMMY_KEY})
    side = measured_side("inspect", point, tree, endpoint)
    if not tree.error and tree.returncode == 0 and (lines := tree.stdout.strip().splitlines()):
        data = json.loads(lines[-1])
        side.run_seconds = data["seconds"]
        side.problems += data["problems"]
    return side


def measure_ours(name: str, point: Point, endpoint: Endpoint, parent: Path) -> Side:
    """`agentcompass run SWEEP --direct` (name "direct") or `--fresh` through Dagster (name "dagster"), in a
    fresh directory and DAGSTER_HOME; then its run directory checked and its activity logs read."""
    workdir = Path(tempfile.mkdtemp(prefix=f"{name}-n{point.n}-c{point.concurrency}-", dir=parent))
    sweep = write_sweep(
        point.n, point.concurrency, HARNESS, workdir, name=SWEEP_NAME, model=model_declaration(endpoint)
    )
    command = [*agentcompass_command(), "run", str(sweep), "--direct" if name == "direct" else "--fresh"]
    env = {**dagster_env(workdir / DAGSTER_HOME_DIR), KEY_ENV: DUMMY_KEY}
    endpoint.stats()
    side = measured_side(name, point, measure_tree(command, env), endpoint)
    if side.problems:
        return side
    run_dirs = sorted(path.parent for path in (workdir / "results").glob(f"{SWEEP_NAME}/*/{MODEL_ID}/*/{RUN_INFO}"))
    if len(run_dirs) != 1:
        side.problems.append(f"{len(run_dirs)} run directories below {workdir / 'results'}, expected 1")
        return side
    info = json.loads((run_dirs[0] / RUN_INFO).read_text())
    if info.get("started_at") and info.get("finished_at"):
        finished, started = (datetime.fromisoformat(info[key]) for key in ("finished_at", "started_at"))
        side.run_seconds = (finished - started).total_seconds()
    side.problems += check_ours(run_dirs[0], info, point.n)
    figures, problems = call_figures(run_dirs[0], point.latency)
    side.calls = {key: summary(values) for key, values in figures.items()}
    side.problems += problems
    return side


def check_ours(run_dir: Path, info: dict[str, Any], n: int) -> list[str]:
    """run_info.json (``info``) says completed; N normal details, accuracy 1.0, N new tasks and no error."""
    problems = []
    if (status := info.get("status")) != "completed":
        problems.append(f"{run_dir / RUN_INFO} says status {status}, expected completed")
    counts = json.loads((run_dir / SUMMARY_COUNTS).read_text())
    return problems + check_run_dir(
        run_dir,
        n,
        HARNESS,
        reused=False,
        accuracy=counts["metrics"].get("accuracy"),
        counts=counts,
        expected_accuracy=1.0,
    )


def call_figures(run_dir: Path, latency: float) -> tuple[dict[str, list[float]], list[str]]:
    """FIGURES of every attempt of the run, from its activity log (the module docstring says how), and the
    attempts without one."""
    figures: dict[str, list[float]] = {key: [] for key, _ in FIGURES}
    problems = []
    run = RunDir(run_dir)
    for path in normal_details(run_dir):
        detail = json.loads(path.read_text())
        for attempt, result in detail["attempts"].items():
            log = run.durable_dir(detail["task_id"], int(attempt)) / ACTIVITY_FILE
            if not log.is_file():
                problems.append(f"no activity log for attempt {attempt} of task {detail['task_id']}: {log}")
                continue
            attempt_figures(read_activity(log), result["duration_s"], latency, figures)
    return figures, problems


def attempt_figures(
    records: list[ActivityRecord], attempt_s: float, latency: float, figures: dict[str, list[float]]
) -> None:
    """One attempt's model calls, commands and rest, appended to ``figures`` (ms). Spans are measured on
    the records' ``elapsed_s``, the attempt's monotonic clock."""
    previous: float | None = None  # the previous step's completion, the session's start before the first
    steps_s = 0.0  # the model calls' and commands' spans
    for record in records:
        if record.kind == "session" and record.status == "in_flight":
            previous = record.elapsed_s
        if record.status != "completed" or record.kind not in ("model_call", "tool_call") or previous is None:
            continue
        span, previous = record.elapsed_s - previous, record.elapsed_s
        if record.kind == "model_call":
            own = record.data["response"]["duration_s"]
            figures["model_overhead_ms"].append(1000.0 * (span - own))
            figures["model_over_latency_ms"].append(1000.0 * (own - latency))
        elif record.data.get("command") is not None:
            own = record.data["duration_s"]
            figures["tool_overhead_ms"].append(1000.0 * (span - own))
            figures["command_ms"].append(1000.0 * own)
        else:
            continue  # the submit step: part of the rest
        steps_s += span
    figures["attempt_rest_ms"].append(1000.0 * (attempt_s - steps_s))


def summary(values: list[float]) -> dict[str, float | None]:
    """Median and p90 (nearest rank) of ``values``, and how many there were (None for none)."""
    if not values:
        return {"median": None, "p90": None, "count": 0}
    ordered = sorted(values)
    p90 = ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]
    return {"median": round(statistics.median(ordered), 3), "p90": round(p90, 3), "count": len(ordered)}


def render_point(point: Point, sides: list[Side]) -> str:
    lines = [
        f"{point.label}: latency {point.latency:g} s, {point.calls} calls per task, ideal wall "
        f"{point.ideal_seconds:.3f} s (ceil(N/C) x calls x latency)"
    ]
    header = (
        f"  {'side':<8} {'wall s':>8} {'CPU s':>8} {'peak RSS MB':>12} {'wall/ideal':>11} {'run s':>9} "
        f"{'completions':>12} {'max in flight':>14} {'endpoint late ms':>17}"
    )
    lines += [header, "  " + "-" * (len(header) - 2)]
    for side in sides:
        run_s = "-" if side.run_seconds is None else f"{side.run_seconds:.3f}"
        lines.append(
            f"  {side.side:<8} {side.seconds:>8.3f} {side.cpu_seconds:>8.3f} {side.peak_rss_mb:>12.1f} "
            f"{side.over_ideal(point):>10.3f}x {run_s:>9} {side.completions:>12} {side.max_in_flight:>14} "
            f"{side.endpoint_extra_ms:>17.1f}"
        )
    timed = [side for side in sides if side.calls]
    if timed:
        lines.append("  per call, ms (median / p90), from the activity logs:")
        titles = "".join(f" {title:>22}" for _, title in FIGURES)
        lines.append(f"  {'side':<8}{titles}")
        for side in timed:
            cells = "".join(f" {cell(side.calls[key]):>22}" for key, _ in FIGURES)
            lines.append(f"  {side.side:<8}{cells}")
    return "\n".join(lines)


def cell(figure: dict[str, float | None]) -> str:
    return f"{figure['median']:.1f} / {figure['p90']:.1f} (x{figure['count']})" if figure["count"] else "-"


def goal_report(point: Point, sides: list[Side]) -> dict[str, Any]:
    """The goals at one point (informational), for the sides measured without problems."""
    named = {side.side: side for side in sides if not side.problems}
    inspect = named.get("inspect")
    report: dict[str, Any] = {}
    wall_note = (
        None
        if point.concurrency in TARGET_WALL_CONCURRENCY
        else f"at C={point.concurrency}; the goal is at C={' and '.join(map(str, TARGET_WALL_CONCURRENCY))}"
    )
    if (direct := named.get("direct")) is not None:
        ratio = direct.over_ideal(point)
        report["direct wall/ideal"] = noted(
            goal(ratio, f"<= {TARGET_DIRECT_OVER_IDEAL:g}", ratio <= TARGET_DIRECT_OVER_IDEAL, point.n), wall_note
        )
    if (dagster := named.get("dagster")) is not None:
        limit = TARGET_DAGSTER_OVER_IDEAL * point.ideal_seconds + TARGET_DAGSTER_EXTRA_S
        report["dagster wall s"] = noted(
            goal(
                dagster.seconds,
                f"<= {limit:.3f} ({TARGET_DAGSTER_OVER_IDEAL:g}x ideal + {TARGET_DAGSTER_EXTRA_S:g} s)",
                dagster.seconds <= limit,
                point.n,
            ),
            wall_note,
        )
    for side in (direct, dagster):
        if side is None:
            continue
        if inspect is not None:
            ratio = side.seconds / inspect.seconds
            report[f"{side.side}/Inspect"] = goal(ratio, "< 1 (wall, ahead of Inspect AI)", ratio < 1, point.n)
        factor = {1: 1.0, TARGET_CONTENDED_C: TARGET_CONTENDED_FACTOR}.get(point.concurrency)
        if factor is None:
            continue
        for key, label, limit in (
            ("model_overhead_ms", "model", TARGET_MODEL_OVERHEAD_MS),
            ("tool_overhead_ms", "tool", TARGET_TOOL_OVERHEAD_MS),
        ):
            if (median := side.calls.get(key, {}).get("median")) is not None:
                report[f"{side.side} {label} ms"] = goal(
                    median, f"<= {factor * limit:g} (median overhead/call)", median <= factor * limit, point.n
                )
    return report


def noted(row: dict[str, Any], note: str | None) -> dict[str, Any]:
    return {**row, "note": note} if note else row


def render_text(
    command: str,
    inspect: Inspect | None,
    args: argparse.Namespace,
    baseline_ms: float,
    rows: list[tuple[Point, list[Side]]],
    goals: dict[str, Any],
    passed: bool,
) -> str:
    """The whole report as text: what was run, each point's table, the goals, the sanity checks passed."""
    lines = [
        f"command: {command}",
        *([describe(inspect)] if inspect is not None else []),
        f"endpoint: {ENDPOINT_CHILD.name} in its own process, {args.latency:g} s per call, {args.calls} calls "
        f"per conversation ({args.calls - 1} x bash {COMMAND!r}, then submit)",
        f"{COMMAND!r} alone (bash -c from this process, median of {BASELINE_RUNS}): {baseline_ms:.1f} ms",
        "wall, CPU and peak RSS: each side's whole process tree (imports and startup included); run s: "
        "Inspect's eval() call, our run directory's run_info.json start to finish",
        "",
    ]
    lines += [render_point(point, sides) + "\n" for point, sides in rows]
    if goals:
        lines.append("goals (informational):")
        lines += [f" {label}:\n{render_targets(report)}" for label, report in goals.items()]
    if passed:
        checks = ["the endpoint answered N x calls chat completions to each side and refused none"]
        if "inspect" in args.sides:
            checks.append("Inspect's log success with N of N samples")
        if {"direct", "dagster"} & set(args.sides):
            checks.append(
                "our commands exit 0, one completed run directory each with N details, accuracy 1.0, "
                "N new tasks, no error, an activity log per attempt"
            )
        lines.append("\nsanity checks passed: " + "; ".join(checks))
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=64, help="tasks (default 64)")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=16,
        help="our task_concurrency, Inspect's max_samples and max_connections (default 16)",
    )
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the endpoint takes per call (default 0.5)")
    parser.add_argument(
        "--calls", type=int, default=3, help="model calls per task: calls - 1 commands, then submit (default 3)"
    )
    parser.add_argument(
        "--grid",
        action="store_true",
        help=f"instead of --n and --concurrency: {UNCONTENDED_N} tasks at C=1, then 64x16, 64x64, 256x64",
    )
    parser.add_argument(
        "--sides",
        nargs="+",
        choices=SIDES,
        default=list(SIDES),
        help="which sides to measure (default all: inspect direct dagster)",
    )
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help=f"Inspect AI's venv (default {DEFAULT_VENV})")
    parser.add_argument(
        "--results-dir", type=Path, help="keep run directories, instances and Inspect's logs below this directory"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    args = parser.parse_args(argv)
    if args.n < 1 or args.concurrency < 1 or args.calls < 1 or args.latency < 0:
        parser.error("--n, --concurrency and --calls must be positive, --latency not negative")
    args.sides = [side for side in SIDES if side in args.sides]  # measured in this order, whatever was given
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join([sys.executable, *sys.argv])
    points = [Point(n, c, args.latency, args.calls) for n, c in (GRID if args.grid else [(args.n, args.concurrency)])]
    baseline_ms = echo_baseline_ms()
    # The same SDK on both sides: Inspect's openai provider gets the version our openai_compat model uses.
    inspect = (
        ensure_inspect(args.venv, {"openai": importlib.metadata.version("openai")}) if "inspect" in args.sides else None
    )
    rows: list[tuple[Point, list[Side]]] = []
    with (
        results_root(args.results_dir, "bench-latency-") as parent,
        endpoint_process(args.latency, args.calls) as endpoint,
    ):
        for point in points:
            sides = []
            if inspect is not None:
                sides.append(measure_inspect(inspect, point, endpoint, parent))
            sides += [
                measure_ours(name, point, endpoint, parent) for name in ("direct", "dagster") if name in args.sides
            ]
            rows.append((point, sides))
    problems = [f"{point.label} {side.side}: {p}" for point, sides in rows for side in sides for p in side.problems]
    goals = {point.label: report for point, sides in rows if (report := goal_report(point, sides))}

    if args.json:
        print(
            json.dumps(
                {
                    "command": command,
                    "inspect": None if inspect is None else {"version": inspect.version, "how": inspect.how},
                    "latency": args.latency,
                    "calls": args.calls,
                    "echo_baseline_ms": round(baseline_ms, 3),
                    "points": [
                        {
                            "n": point.n,
                            "concurrency": point.concurrency,
                            "ideal_seconds": round(point.ideal_seconds, 6),
                            "sides": [side.to_json(point) for side in sides],
                        }
                        for point, sides in rows
                    ],
                    "goals": goals,
                    "problems": problems,
                },
                indent=2,
            )
        )
    else:
        print(render_text(command, inspect, args, baseline_ms, rows, goals, passed=not problems))
    return report_problems(problems)


if __name__ == "__main__":
    sys.exit(main())
