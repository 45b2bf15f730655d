"""Fault-injection experiments for durable agent attempts (R-FAULT-1): recovery success rate and time.

Every trial runs a one-task sweep as a subprocess (``agentcompass run SWEEP --direct``: the demo task
``count-errors``, the ``tool_agent`` harness, the ``local`` environment and a scripted model), injects a
fault with SIGKILL at the scenario's point, then times ``agentcompass resume RUN_DIR`` (also a subprocess)
and checks the resumed run. The script's turns are --steps bash steps, each appending a unique marker to
its own side-effect file outside the environment and sleeping --command-sleep seconds, then the reference
command ``awk ... > answer.txt`` (declared replay-safe), then ``submit``; every model call first sleeps
--model-sleep seconds.

Scenarios (the kill point is random within the window; "in window" counts the trials that hit it):

* parent-during-model-call: at a random offset inside the sleep of a random turn's model call;
* parent-during-tool-call: at a random offset inside the sleep of a random bash step (the command
  survives the parent, so resume waits for it and collects its result);
* parent-between-steps: right after a random completed record (model call, tool call or session) appears;
* parent-during-checkpoint: after a random bash step's ``.exit`` file exists but before its completed
  record is logged (an early step creates --files files, so the capture in between takes a while);
* environment-lost: at a random time within an uninterrupted run's span, then ``rm -rf`` of the
  environment's directory before resuming;
* tool-interrupted: like parent-during-tool-call, then the surviving command's process group is killed
  too, so it never finishes.

A trial is recovered when resume exits 0, the final detail is correct and its completed steps (model
turns; tool commands, exit codes, outputs, answers) equal those of an uninterrupted baseline run. A
non-replay-safe command that was in flight at the crash and is reported to the model as interrupted is
expected behaviour (R-RESUME-2): it is left out of the comparison. Also counted per scenario: model
calls re-sent because they were in flight at the crash (expected) apart from repeats of turns completed
before it (a bug) and any other repeat; side effects of commands completed before the crash seen twice
(a bug) apart from any other repeated side effect (the marker commands are not replay-safe, so also
unexpected); and the resume classification of the final detail (attached, rebuilt; finished: the agent
had ended before the kill and its outcome is kept; fresh: the log was set aside and the attempt started
over). Recovery time is the resume process's wall time and the time from its start to the resumed
attempt's first new completed (or interrupted) step record.

Run it from the repository root:

    python perf/fault_injection.py [--trials 50] [--scenarios a,b] [--seed 0] [--files 2000]
                                         [--steps 3] [--model-sleep 0.1] [--command-sleep 0.1]
                                         [--dir DIR] [--json PATH]

Without --dir the trials run in a temp directory that is removed afterwards; with it, a fresh
``fault-injection-*`` directory below DIR keeps every trial. The exit status is non-zero when a trial was
not recovered or completed work was repeated.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from _bench import report_problems, results_root

from agentcompass_dagster.plugins.benchmarks.demo import TASKS_DIR
from agentcompass_dagster.durable.activity import ActivityRecord, read_activity
from agentcompass_dagster.durable.session import CALLS_DIR
from agentcompass_dagster.plugins.environments.hostdir import PROCESSES
from agentcompass_dagster.contracts.markdown import markdown_table
from agentcompass_dagster.runtime.store.processes import ProcessId

REPO = Path(__file__).resolve().parent.parent
TASK = "count-errors"
REFERENCE = (TASKS_DIR / TASK / "solution.sh").read_text().strip().splitlines()[-1]
REPLAY_SAFE = ["^awk "]
POLL_S = 0.0005
TIMEOUT_S = 120.0


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentcompass_dagster.cli.main", *args]


@dataclass(frozen=True)
class Script:
    """What the scripted model does; every trial of one Script is compared with one baseline run."""

    steps: int = 3
    files: int = 0
    model_sleep: float = 0.1
    command_sleep: float = 0.1

    def command(self, step: int, side: Path) -> str:
        if step == self.steps:
            return REFERENCE
        make = f"mkdir many && (cd many && seq {self.files} | xargs touch) && " if step == 0 and self.files else ""
        return f"{make}echo m{step} >> {side}/m{step}; sleep {self.command_sleep}; echo step {step}"

    def turns(self, side: Path) -> list[dict[str, Any]]:
        usage = {"prompt_tokens": 100, "completion_tokens": 10}
        bash = [
            {
                "tool_calls": [{"name": "bash", "arguments": {"command": self.command(i, side)}}],
                "usage": usage,
                "sleep": self.model_sleep,
            }
            for i in range(self.steps + 1)
        ]
        return [
            *bash,
            {
                "tool_calls": [{"name": "submit", "arguments": {"answer": "done"}}],
                "usage": usage,
                "sleep": self.model_sleep,
            },
        ]

    @property
    def bash_keys(self) -> list[str]:
        """Tool-call ids of the bash steps, the reference command last (turn n's only call is ``n.0``)."""
        return [f"{i}.0" for i in range(self.steps + 1)]


class Live:
    """One sweep run as a subprocess in its own directory, and what can be read of it from outside."""

    def __init__(self, directory: Path, script: Script) -> None:
        self.dir = directory
        self.side = directory / "side"
        self.side.mkdir(parents=True)
        (directory / "tmp").mkdir()
        self.model_record = directory / "model-calls.jsonl"
        self.results = directory / "results"
        # The environment's directory goes below the trial too, so removing the trial removes it.
        self.env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "DAGSTER_HOME": str(directory / "dagster_home"),
            "TMPDIR": str(directory / "tmp"),
        }
        sweep = {
            "name": "fault",
            "benchmarks": [{"id": "demo", "tasks": [TASK]}],
            "models": [
                {
                    "id": "scripted",
                    "provider": "scripted",
                    "params": {"turns": {TASK: script.turns(self.side)}, "record": str(self.model_record)},
                }
            ],
            "harness": {"id": "tool_agent", "params": {"replay_safe_commands": REPLAY_SAFE}},
            "environment": "local",
            "output": {"results_dir": str(self.results)},
            "execution": {"limits": {"task_concurrency": 1}},
        }
        self.sweep = directory / "sweep.yaml"
        self.sweep.write_text(yaml.safe_dump(sweep, sort_keys=False))
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None
        # Parsed records by log size: polling re-reads the log only after it grew.
        self._parsed: tuple[int, list[ActivityRecord]] = (-1, [])

    def start(self) -> None:
        with open(self.dir / "run.stderr", "wb") as stderr:
            self.proc = subprocess.Popen(
                cli("run", str(self.sweep), "--direct"),
                cwd=self.dir,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def log_path(self) -> Path | None:
        """The first run's activity log (a resumed run appends to its own copy)."""
        if self._log is None:
            self._log = next(self.results.rglob(f"{TASK}@1/activity.jsonl"), None)
        return self._log

    def records(self) -> list[ActivityRecord]:
        path = self.log_path()
        if path is None:
            return []
        size = path.stat().st_size
        if size != self._parsed[0]:
            self._parsed = (size, read_activity(path))
        return self._parsed[1]

    def wait(self, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not condition():
            # Checked again after the exit: the run may have reached the point just before it ended.
            if self.proc is not None and self.proc.poll() is not None and not condition():
                raise TrialError(f"the run exited with {self.proc.returncode} before the kill point")
            if time.monotonic() > deadline:
                raise TrialError("the kill point was not reached")
            time.sleep(POLL_S)

    def wait_record(self, record_id: str, status: str) -> ActivityRecord:
        found: list[ActivityRecord] = []

        def seen() -> bool:
            found[:] = [r for r in self.records() if r.id == record_id and r.status == status]
            return bool(found)

        self.wait(seen)
        return found[0]

    def session(self) -> tuple[ActivityRecord, Path]:
        """The first session record and the directory of its environment."""
        session = self.wait_record("session", "in_flight")
        return session, Path(session.data["handle"]["root"])

    def calls(self) -> Path:
        return self.session()[1] / "commands" / CALLS_DIR

    def process_group(self, key: str) -> int | None:
        """The process group of call ``key``'s command, as the host recorded it."""
        try:
            worker = ProcessId.parse((self.session()[1] / "scratch" / PROCESSES / key).read_text())
        except OSError:
            return None
        return worker.pid if worker is not None else None

    def run_dirs(self) -> list[Path]:
        return sorted(p.parent for p in self.results.rglob("run_info.json"))

    def markers(self) -> dict[int, int]:
        """How often each bash step's side effect happened."""
        return {int(p.name[1:]): len(p.read_text().splitlines()) for p in self.side.glob("m*")}

    def model_calls(self) -> Counter[int]:
        if not self.model_record.exists():
            return Counter()
        return Counter(json.loads(line)["turn"] for line in self.model_record.read_text().splitlines())


class TrialError(Exception):
    """The trial could not be carried out as designed (not a recovery failure)."""


# --- the comparison with an uninterrupted run ----------------------------------------------------------


def completed_steps(detail: dict[str, Any], side: Path) -> tuple[list[tuple[Any, ...]], set[str]]:
    """The attempt's completed steps, normalized (the side-effect directory differs per trial), and the
    commands that ended interrupted."""
    steps: list[tuple[Any, ...]] = []
    interrupted: set[str] = set()
    for step in detail["attempts"]["1"]["trajectory"]:
        command = (step.get("command") or "").replace(str(side), "<side>") or None
        if step["type"] == "model_call" and step["status"] == "completed":
            steps.append(("model_call", step["turn"]))
        elif step["type"] == "tool_call" and step["status"] == "completed":
            steps.append(("tool_call", command, step.get("exit_code"), step.get("output"), step.get("answer")))
        elif step["type"] == "tool_call" and step["status"] == "interrupted" and command is not None:
            interrupted.add(command)
    return steps, interrupted


def final_detail(run_dir: Path) -> dict[str, Any] | None:
    found = next((run_dir / "details").glob(f"*{TASK}*.json"), None)
    return json.loads(found.read_text()) if found is not None else None


@dataclass
class Baseline:
    steps: list[tuple[Any, ...]]
    # Seconds from the session's first record to the submit's completed record.
    span_s: float
    completed_records: int


def run_baseline(directory: Path, script: Script, warm_up: bool = True) -> Baseline:
    """Two uninterrupted runs that must agree; the second, with warm caches, sets the timings. Without
    ``warm_up`` one run (its timings are only where a random kill is aimed, and a scripted run takes the
    same steps every time: a trial that differs from it fails anyway)."""
    found: list[Baseline] = []
    for name in ("warm-up", "baseline") if warm_up else ("baseline",):
        live = Live(directory / name, script)
        live.start()
        assert live.proc is not None
        if live.proc.wait(timeout=TIMEOUT_S) != 0:
            raise TrialError(f"the {name} run failed: {(live.dir / 'run.stderr').read_text()[-2000:]}")
        detail = final_detail(live.run_dirs()[-1])
        if detail is None or not detail["correct"]:
            raise TrialError(f"the {name} run did not solve the task")
        steps, _ = completed_steps(detail, live.side)
        records = live.records()
        submit = next(r for r in records if r.id == f"{script.steps + 1}.0" and r.status == "completed")
        found.append(
            Baseline(
                steps=steps,
                span_s=submit.at - records[0].at,
                completed_records=sum(r.status == "completed" for r in records),
            )
        )
    if found[0].steps != found[-1].steps:
        raise TrialError("two uninterrupted runs of one script took different steps")
    return found[-1]


# --- the scenarios: each waits for its kill point, injects the fault and says if it hit its window ---


def closed(records: list[ActivityRecord], record_id: str) -> bool:
    return any(r.id == record_id and r.status != "in_flight" for r in records)


def kill_during_model_call(live: Live, rng: random.Random, script: Script, baseline: Baseline) -> bool:
    turn = rng.randrange(script.steps + 2)
    started = live.wait_record(f"model-{turn}", "in_flight")
    # Aimed from the record's own timestamp, not from when polling noticed it.
    time.sleep(max(0.0, started.at + rng.uniform(0, script.model_sleep) - time.time()))
    live.kill()
    return not closed(live.records(), f"model-{turn}")


def _kill_inside_command(live: Live, rng: random.Random, script: Script, *, with_command: bool) -> bool:
    """Kill the parent at a random offset inside a random marker step's sleep (with_command: and the
    command's process group right after it); whether that step was still running at the kill."""
    step = rng.randrange(script.steps)
    key, calls, marker = f"{step}.0", live.calls(), live.side / f"m{step}"
    live.wait(marker.exists)
    time.sleep(max(0.0, marker.stat().st_mtime + rng.uniform(0, script.command_sleep) - time.time()))
    live.kill()
    if with_command:
        # The command, its wrapper subshell and its children share the process group of the environment's
        # shell, which died with the parent.
        group = live.process_group(key)
        if group is None:
            return False
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            return False
    try:
        output = (calls / f"{key}.out").read_text()
    except OSError:
        output = ""
    return f"step {step}" not in output and not (calls / f"{key}.exit").exists() and not closed(live.records(), key)


def kill_during_tool_call(live: Live, rng: random.Random, script: Script, baseline: Baseline) -> bool:
    return _kill_inside_command(live, rng, script, with_command=False)


def kill_between_steps(live: Live, rng: random.Random, script: Script, baseline: Baseline) -> bool:
    wanted = rng.randint(1, baseline.completed_records)
    live.wait(lambda: sum(r.status == "completed" for r in live.records()) >= wanted)
    live.kill()
    # A hit leaves that record last: nothing of the next step was logged yet.
    records = live.records()
    return records[-1].status == "completed" and sum(r.status == "completed" for r in records) == wanted


def kill_during_checkpoint(live: Live, rng: random.Random, script: Script, baseline: Baseline) -> bool:
    key = rng.choice(script.bash_keys)
    done = live.calls() / f"{key}.exit"
    live.wait(done.exists)
    live.kill()
    return not closed(live.records(), key)


def lose_environment(live: Live, rng: random.Random, script: Script, baseline: Baseline) -> bool:
    session, root = live.session()
    time.sleep(max(0.0, session.at + rng.uniform(0, baseline.span_s) - time.time()))
    live.kill()
    # A command that survived the parent may still create files while the tree is being removed.
    while root.exists():
        subprocess.run(["rm", "-rf", str(root)], check=False, stderr=subprocess.DEVNULL)
    return not any(r.kind == "session" and r.status == "completed" for r in live.records())


def interrupt_tool(live: Live, rng: random.Random, script: Script, baseline: Baseline) -> bool:
    return _kill_inside_command(live, rng, script, with_command=True)


Kill = Callable[[Live, random.Random, Script, Baseline], bool]
SCENARIOS: dict[str, Kill] = {
    "parent-during-model-call": kill_during_model_call,
    "parent-during-tool-call": kill_during_tool_call,
    "parent-between-steps": kill_between_steps,
    "parent-during-checkpoint": kill_during_checkpoint,
    "environment-lost": lose_environment,
    "tool-interrupted": interrupt_tool,
}
# How resume classified the attempt (artifacts.agent.resumed), in the table's column order.
CLASSIFICATIONS = ("attached", "rebuilt", "finished", "fresh", "busy")
# Only the checkpoint window needs a big working directory: its capture is what the kill must land in.
MANY_FILES = {"parent-during-checkpoint"}


# --- one trial -----------------------------------------------------------------------------------------


@dataclass
class Trial:
    scenario: str
    in_window: bool = False
    # False when the run had finished before the kill: nothing to resume, not a recovery sample.
    resumable: bool = True
    resume_exit: int | None = None
    resume_s: float | None = None
    first_record_s: float | None = None
    correct: bool = False
    steps_match: bool = False
    classification: str | None = None
    # The last record logged before the kill, as "id:status".
    kill_point: str | None = None
    resent_model_calls: int = 0
    repeated_completed_turns: int = 0
    repeated_other_turns: int = 0
    repeated_completed_commands: int = 0
    repeated_other_commands: int = 0
    interrupted_commands: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def recovered(self) -> bool:
        return self.resume_exit == 0 and self.correct and self.steps_match


def run_trial(directory: Path, scenario: str, script: Script, baseline: Baseline, rng: random.Random) -> Trial:
    live = Live(directory, script)
    trial = Trial(scenario)
    live.start()
    try:
        trial.in_window = SCENARIOS[scenario](live, rng, script, baseline)
    finally:
        if live.proc is not None and live.proc.poll() is None:
            live.kill()
    before = live.records()
    trial.kill_point = f"{before[-1].id}:{before[-1].status}" if before else None
    first_run = live.run_dirs()[0]
    if final_detail(first_run) is not None:
        trial.resumable = False
        return trial

    started_wall, started = time.time(), time.perf_counter()
    with open(directory / "resume.stderr", "wb") as stderr:
        trial.resume_exit = subprocess.run(
            cli("resume", str(first_run)),
            check=False,
            cwd=directory,
            env=live.env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            timeout=TIMEOUT_S,
        ).returncode
    trial.resume_s = time.perf_counter() - started
    resumed = [d for d in live.run_dirs() if d != first_run]
    detail = final_detail(resumed[-1]) if resumed else None
    if detail is None:
        trial.problems.append(f"no final detail (resume exited {trial.resume_exit})")
        return trial
    attempt = detail["attempts"]["1"]
    trial.correct = bool(detail["correct"])
    trial.classification = attempt["artifacts"]["agent"]["resumed"]
    if not trial.correct:
        trial.problems.append(f"final detail not correct: {attempt.get('run_error') or detail.get('error')}")

    log = next(resumed[-1].rglob(f"{TASK}@1/activity.jsonl"), None)
    new = read_activity(log) if log is not None else []
    # A fresh start archived the old log and began a new one; otherwise the old records come first.
    new = new if trial.classification == "fresh" else new[len(before) :]
    first = next(
        (r for r in new if r.kind in ("model_call", "tool_call") and r.status in ("completed", "interrupted")), None
    )
    trial.first_record_s = first.at - started_wall if first is not None else None

    in_flight = {r.id for r in before if r.status == "in_flight" and not closed(before, r.id)}
    steps, interrupted = completed_steps(detail, live.side)
    # Only a non-replay-safe command that was running at the crash may end up reported as interrupted.
    allowed = {
        script.command(int(key.split(".")[0]), Path("<side>")) for key in in_flight if key in script.bash_keys[:-1]
    }
    expected = [s for s in baseline.steps if not (s[0] == "tool_call" and s[1] in interrupted)]
    trial.interrupted_commands = len(interrupted)
    trial.steps_match = steps == expected and interrupted <= allowed
    if not trial.steps_match:
        trial.problems.append(f"completed steps differ from the baseline (interrupted: {sorted(interrupted)})")

    completed_before = {r.id for r in before if r.status == "completed"}
    for turn, calls in live.model_calls().items():
        resent = min(calls - 1, 1) if f"model-{turn}" in in_flight else 0
        trial.resent_model_calls += resent
        if f"model-{turn}" in completed_before:
            trial.repeated_completed_turns += calls - 1
        else:
            trial.repeated_other_turns += calls - 1 - resent
    for step, count in live.markers().items():
        if f"{step}.0" in completed_before:
            trial.repeated_completed_commands += count - 1
        else:
            trial.repeated_other_commands += max(0, count - 1)
    repeats = (
        trial.repeated_completed_turns,
        trial.repeated_other_turns,
        trial.repeated_completed_commands,
        trial.repeated_other_commands,
    )
    if any(repeats):
        trial.problems.append(
            "work repeated (completed turns, other turns, completed commands, other commands): "
            f"{repeats}; resumed as {trial.classification}; records before the kill: "
            + ", ".join(f"{r.id}:{r.status}" for r in before)
        )
    return trial


def run_experiment(
    root: Path,
    scenarios: list[str],
    trials: int,
    seed: int,
    script: Script,
    keep: bool,
    on_trial: Callable[[int, Trial], None] | None = None,
    warm_up: bool = True,
) -> list[Trial]:
    """Every trial of every scenario in a directory of its own below ``root``; one baseline per script
    (``script.files`` applies to the scenarios in MANY_FILES only)."""
    rng = random.Random(seed)
    baselines: dict[Script, Baseline] = {}
    results: list[Trial] = []
    for scenario in scenarios:
        current = script if scenario in MANY_FILES else replace(script, files=0)
        if current not in baselines:
            baselines[current] = run_baseline(Path(tempfile.mkdtemp(prefix="baseline-", dir=root)), current, warm_up)
        for n in range(trials):
            directory = Path(tempfile.mkdtemp(prefix=f"{scenario}-{n}-", dir=root))
            try:
                trial = run_trial(directory, scenario, current, baselines[current], rng)
            except TrialError as exc:
                trial = Trial(scenario, problems=[f"trial not carried out: {exc}"])
            results.append(trial)
            if on_trial is not None:
                on_trial(n, trial)
            if not keep:
                shutil.rmtree(directory, ignore_errors=True)
    return results


# --- the report ----------------------------------------------------------------------------------------


def quantiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "p95": None}
    ordered = sorted(values)
    # Nearest rank: the smallest value with at least 95% of the values at or below it.
    return {"median": statistics.median(ordered), "p95": ordered[math.ceil(0.95 * len(ordered)) - 1]}


def summarize(trials: list[Trial]) -> dict[str, Any]:
    resumable = [t for t in trials if t.resumable]
    recovered = sum(t.recovered for t in resumable)
    return {
        "trials": len(trials),
        "in_window": sum(t.in_window for t in trials),
        "finished_before_kill": len(trials) - len(resumable),
        "recovered": recovered,
        "success_rate": recovered / len(resumable) if resumable else None,
        "resume_s": quantiles([t.resume_s for t in resumable if t.resume_s is not None]),
        "first_record_s": quantiles([t.first_record_s for t in resumable if t.first_record_s is not None]),
        "resent_model_calls": sum(t.resent_model_calls for t in trials),
        "repeated_completed_turns": sum(t.repeated_completed_turns for t in trials),
        "repeated_other_turns": sum(t.repeated_other_turns for t in trials),
        "repeated_completed_commands": sum(t.repeated_completed_commands for t in trials),
        "repeated_other_commands": sum(t.repeated_other_commands for t in trials),
        "interrupted_commands": sum(t.interrupted_commands for t in trials),
        "classification": dict(Counter(t.classification or "none" for t in resumable)),
    }


def _seconds(q: dict[str, float | None]) -> str:
    return "-" if q["median"] is None else f"{q['median']:.2f} / {q['p95']:.2f}"


def render(summaries: dict[str, dict[str, Any]]) -> str:
    seen = {c for s in summaries.values() for c in s["classification"]}
    classes = [c for c in CLASSIFICATIONS if c in seen or c in ("attached", "rebuilt")]
    classes += sorted(seen - set(classes))
    headers = [
        "scenario",
        "trials",
        "in window",
        "recovered",
        "success rate",
        "resume s (median / p95)",
        "first new record s (median / p95)",
        "model calls re-sent",
        "completed turns repeated",
        "other turns repeated",
        "completed commands repeated",
        "other commands repeated",
        "interrupted (told model)",
        *classes,
    ]
    rows = []
    for name, s in summaries.items():
        rate = "-" if s["success_rate"] is None else f"{100 * s['success_rate']:.0f}%"
        resumable = s["trials"] - s["finished_before_kill"]
        rows.append(
            [
                name,
                s["trials"],
                s["in_window"],
                f"{s['recovered']}/{resumable}",
                rate,
                _seconds(s["resume_s"]),
                _seconds(s["first_record_s"]),
                s["resent_model_calls"],
                s["repeated_completed_turns"],
                s["repeated_other_turns"],
                s["repeated_completed_commands"],
                s["repeated_other_commands"],
                s["interrupted_commands"],
                *(s["classification"].get(c, 0) for c in classes),
            ]
        )
    return markdown_table(headers, rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=50, help="trials per scenario (default 50)")
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated subset of: {', '.join(SCENARIOS)} (default all)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill points (default 0)")
    parser.add_argument(
        "--files",
        type=int,
        default=2000,
        help="files the first step creates in parent-during-checkpoint (default 2000)",
    )
    default = Script()
    parser.add_argument(
        "--steps",
        type=int,
        default=default.steps,
        help=f"marker steps before the reference command (default {default.steps})",
    )
    parser.add_argument(
        "--model-sleep",
        type=float,
        default=default.model_sleep,
        help=f"seconds every model call sleeps (default {default.model_sleep:g})",
    )
    parser.add_argument(
        "--command-sleep",
        type=float,
        default=default.command_sleep,
        help=f"seconds every marker step sleeps (default {default.command_sleep:g})",
    )
    parser.add_argument("--dir", type=Path, help="keep every trial's directory below this directory")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON to PATH")
    args = parser.parse_args(argv)
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    if unknown := [s for s in scenarios if s not in SCENARIOS]:
        parser.error(f"unknown scenarios {unknown}; choose from {', '.join(SCENARIOS)}")
    if min(args.trials, args.files, args.steps) < 1 or min(args.model_sleep, args.command_sleep) <= 0:
        parser.error("--trials, --files, --steps, --model-sleep and --command-sleep must be positive")
    script = Script(steps=args.steps, files=args.files, model_sleep=args.model_sleep, command_sleep=args.command_sleep)

    command = shlex.join([sys.executable, *sys.argv])
    print(f"command: {command}", file=sys.stderr)

    def progress(n: int, trial: Trial) -> None:
        state = "recovered" if trial.recovered else "finished before kill" if not trial.resumable else "NOT recovered"
        print(f"{trial.scenario} #{n + 1}: {state}" + "".join(f"\n  {p}" for p in trial.problems), file=sys.stderr)

    with results_root(args.dir, "fault-injection-") as parent:
        root = Path(tempfile.mkdtemp(prefix="fault-injection-", dir=parent))
        trials = run_experiment(
            root, scenarios, args.trials, args.seed, script, keep=args.dir is not None, on_trial=progress
        )
    summaries = {name: summarize([t for t in trials if t.scenario == name]) for name in scenarios}
    print(f"command: {command}\n")
    print(render(summaries))
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "command": command,
                    "seed": args.seed,
                    "trials_per_scenario": args.trials,
                    "script": asdict(script),
                    "scenarios": summaries,
                    "trials": [{**asdict(t), "recovered": t.recovered} for t in trials],
                },
                indent=2,
            )
        )
    problems = [f"{t.scenario}: {p}" for t in trials for p in t.problems]
    return report_problems(problems)


if __name__ == "__main__":
    sys.exit(main())
