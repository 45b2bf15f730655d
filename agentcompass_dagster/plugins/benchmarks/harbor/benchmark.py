"""The `harbor` benchmark: tasks in the Harbor / Terminal-Bench 2 format, run as their authors wrote them.

    benchmarks: [{id: harbor, params: {tasks_dir: path/to/tasks, reward_key: null, pass_threshold: 1.0,
                                       max_verifier_timeout_s: null}}]

Each task runs in the environment it asks for (``TaskEnvironment``: its image, working directory,
resources, network, variables, and Harbor's directories at their absolute paths, /tests, /solution,
/logs/verifier, /logs/agent, /logs/artifacts); a provider that cannot give it refuses it. The oracle
runs /solution/solve.sh as a program from the working directory with ``[solution] env``; the agent's
processes are gone before the verifier runs; then /tests is uploaded and /tests/test.sh runs as a program
from the working directory, as the verifier's own user, with ``[verifier] env``, within ``[verifier]
timeout_sec``, its output in /logs/verifier/test-stdout.txt. What the verifier left in /logs/verifier,
the agent's /logs/agent and /logs/artifacts and the task's declared ``artifacts`` are kept in the run
directory beside the attempt's detail. The rewards and the correctness rule are rewards.py's.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentcompass_dagster.plugins.benchmarks.harbor import rewards as harbor_rewards
from agentcompass_dagster.plugins.benchmarks.harbor.verifier import run_tests
from agentcompass_dagster.plugins.benchmarks.harbor.loader import (
    AGENT_LOGS,
    ARTIFACT_LOGS,
    SOLUTION,
    TESTS,
    VERIFIER_LOGS,
    TaskFacts,
    load_task,
    task_dirs,
)
from agentcompass_dagster.contracts.benchmark import Benchmark, ReferenceSolution
from agentcompass_dagster.contracts.environment import Caller, EnvironmentSession
from agentcompass_dagster.contracts.records import (
    Evaluation,
    EvaluationMode,
    NotLoaded,
    PreparedTask,
    RunResult,
    StepOutcome,
    TaskSpec,
    TaskStep,
)
from agentcompass_dagster.contracts.errors import field_error
from agentcompass_dagster.contracts.validation import validate_declaration

# What is kept of the files an attempt leaves (a verifier's logs, the agent's): at most this many, each
# at most its first and last half MB.
MAX_KEPT_FILES = 100
KEPT_FILE_BYTES = 1 << 20
# How long listing or clearing a directory of the task's environment may take.
LIST_TIMEOUT_S = 60.0


class HarborParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tasks_dir: str
    # The reward that decides correctness and the score (rewards.py); the threshold it must reach.
    reward_key: str | None = None
    pass_threshold: float = 1.0
    # A cap on every task's [verifier] timeout_sec: the sweep may shorten a task's time, never lengthen it.
    max_verifier_timeout_s: float | None = Field(default=None, gt=0)


def facts(task: TaskSpec) -> TaskFacts:
    return TaskFacts.model_validate(task.metadata["harbor"])


class HarborTasksBenchmark(Benchmark):
    supported_evaluation_modes = frozenset({EvaluationMode.reuse})
    verifier_executes = (
        "the task's tests/test.sh, as a program in the working directory, and whatever of the "
        "agent's work it runs; the reward it writes to /logs/verifier is the score"
    )

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.params = validate_declaration(HarborParams, config.params, config.file, "benchmark.params")
        tasks_dir = self.config.resolve_path(self.params.tasks_dir)
        if not tasks_dir.is_dir():
            raise field_error(
                "benchmark.params.tasks_dir",
                str(tasks_dir),
                "must be a directory of Harbor-format tasks",
                self.config.file,
            )
        self.tasks_dir = tasks_dir
        self._not_loaded: list[NotLoaded] = []

    def load_tasks(self) -> list[TaskSpec]:
        loaded = [load_task(task_dir, self.params.max_verifier_timeout_s) for task_dir in task_dirs(self.tasks_dir)]
        self._not_loaded = [task for task in loaded if isinstance(task, NotLoaded)]
        return [task for task in loaded if isinstance(task, TaskSpec)]

    def not_loaded(self) -> list[NotLoaded]:
        return list(self._not_loaded)

    def plan(self, task: TaskSpec) -> dict[str, Any]:
        """What the task declares of its run, recorded with each attempt's plan: its timeouts, its
        environment's asks, and what it declares that is not applied here."""
        known = facts(task)
        environment = task.environment
        asked = (
            {}
            if environment is None
            else environment.model_dump(
                mode="json",
                include={"image", "build_timeout_s", "workdir", "cpus", "memory_mb", "storage_mb", "network"},
                exclude_none=True,
            )
        )
        return {
            "agent_timeout_s": task.agent_timeout_s,
            "verifier_timeout_s": known.verifier_timeout_s,
            "environment": asked,
            **({"steps": [s.name for s in task.steps]} if task.steps else {}),
            **({"not_applied": known.not_applied} if known.not_applied else {}),
        }

    def reference_solution(self, task: TaskSpec) -> ReferenceSolution | None:
        known = facts(task)
        step = task.metadata.get("step")
        task_dir = Path(task.metadata["dir"])
        directory = task_dir / "steps" / step / "solution" if step else None
        if directory is None or not (directory / "solve.sh").is_file():
            directory = task_dir / "solution"
        if not (directory / "solve.sh").is_file():
            return None
        return ReferenceSolution(
            path=f"{SOLUTION}/solve.sh", upload_from=directory, upload_to=SOLUTION, env=known.solution_env
        )

    async def prepare_step(
        self, prepared: PreparedTask, step: TaskStep, session: EnvironmentSession, done: list[StepOutcome]
    ) -> PreparedTask | None:
        """Harbor's step: stop where the step before fell short of its min_reward or gave no verdict; else
        its workdir/ files into the working directory and its setup.sh run there."""
        known = facts(prepared.task)
        if done:
            before = done[-1]
            if before.failure is not None:
                return None
            minimum = next(s for s in known.steps if s.name == before.name).min_reward
            if minimum is not None and harbor_rewards.short_of(before.evaluation.rewards, minimum) is not None:
                return None
        files = Path(prepared.task.metadata["dir"]) / "steps" / step.name / "workdir"
        if files.is_dir():
            await session.upload_dir(files, session.workdir)
            if (files / "setup.sh").is_file():
                # The task's own setup, not the agent's work: run as the reference runs.
                outcome = await session.exec(
                    f"bash {shlex.quote(session.workdir + '/setup.sh')}",
                    caller=Caller.reference,
                    timeout_s=known.verifier_timeout_s,
                )
                if outcome.exit_code != 0:
                    raise RuntimeError(
                        f"step {step.name!r}: setup.sh exited with {outcome.exit_code}: {outcome.output[-500:]}"
                    )
        task = dataclasses.replace(
            prepared.task, input=step.input, metadata={**prepared.task.metadata, "step": step.name}
        )
        return PreparedTask(task=task, input=step.input, data={**prepared.data, "step": step.name})

    def combine_steps(self, prepared: PreparedTask, done: list[StepOutcome]) -> Evaluation:
        known = facts(prepared.task)
        combined = harbor_rewards.combine([o.evaluation.rewards or None for o in done], known.reward_strategy)
        fields: dict[str, Any] = {
            "steps": [
                {
                    "name": o.name,
                    "rewards": o.evaluation.rewards,
                    "failure": o.failure,
                    **{k: v for k, v in o.evaluation.fields.items() if k != "output"},
                }
                for o in done
            ],
            "reward_strategy": known.reward_strategy,
        }
        if combined is None:
            return Evaluation(failure="no step's verifier wrote a usable reward", fields=fields)
        correct, score = harbor_rewards.verdict(combined, self.params.reward_key, self.params.pass_threshold)
        return Evaluation(correct=correct, score=score, rewards=combined, fields={**fields, "rewards": combined})

    async def evaluate(
        self, prepared: PreparedTask, result: RunResult, session: EnvironmentSession | None
    ) -> Evaluation:
        assert session is not None
        known = facts(prepared.task)
        step_name = prepared.task.metadata.get("step")
        step = next((s for s in known.steps if s.name == step_name), None)
        prefix = f"steps/{step_name}/" if step_name else ""
        files: dict[str, bytes] = {}
        # What the agent left, before anything of the verifier's runs.
        for directory, name in ((AGENT_LOGS, "agent"), (ARTIFACT_LOGS, "artifacts")):
            files.update(await _collect(session, directory, f"{prefix}{name}"))
        for source in step.artifacts if step else known.artifacts:
            files.update(await _collect(session, source, f"{prefix}artifacts{source}"))
        script = await self._upload_tests(session, Path(prepared.task.metadata["dir"]), step_name)
        timeout = step.verifier_timeout_s if step else known.verifier_timeout_s
        run = await run_tests(
            session,
            prepared.task.id,
            script,
            f"{VERIFIER_LOGS}/test-stdout.txt",
            timeout,
            step.verifier_env if step else known.verifier_env,
        )
        read = await _rewards(session)
        kept = await _collect(session, VERIFIER_LOGS, f"{prefix}verifier")
        files.update(kept)
        output = kept.get(f"{prefix}verifier/test-stdout.txt", b"").decode(errors="replace")
        fields: dict[str, Any] = {
            "verifier_exit_code": run.exit_code,
            "verifier_confined": run.confined,
            "output": output[-2000:],
        }
        if run.timed_out:
            # The verifier ran out of its time on what the agent left: no verdict, the agent's failure.
            return Evaluation(
                failure=f"the verifier timed out after {timeout:g}s ([verifier] timeout_sec)",
                fields={**fields, "rewards": None},
                files=files,
            )
        if run.problem is not None:
            # The agent's code, run by the tests, ended the verifier or outlived it: whatever reward is
            # there may be its own. No verdict, the agent's failure.
            return Evaluation(failure=f"{run.problem}: no verdict", fields={**fields, "rewards": read[0]}, files=files)
        rewards, problem = read
        if rewards is None:
            # What the agent left gave the verifier no verdict (it crashed, or found a planted link): the
            # agent's failure, scored 0 — never an error that leaves the denominator.
            return Evaluation(
                failure=f"the verifier wrote no usable reward: {problem}",
                fields={**fields, "rewards": None},
                files=files,
            )
        correct, score = harbor_rewards.verdict(rewards, self.params.reward_key, self.params.pass_threshold)
        return Evaluation(
            correct=correct, score=score, rewards=rewards, fields={**fields, "rewards": rewards}, files=files
        )

    async def _upload_tests(self, session: EnvironmentSession, task_dir: Path, step: str | None) -> str:
        """A clean /tests and /logs/verifier, then the task's tests (a step's over the shared ones, as
        Harbor uploads them); the test script to run, made executable."""
        clear = " ".join(shlex.quote(f"{d}/") + "{*,.[!.]*,..?*}" for d in (TESTS, VERIFIER_LOGS))
        await session.exec(f"rm -rf {clear}", caller=Caller.verifier, timeout_s=LIST_TIMEOUT_S)
        sources = [task_dir / "tests"]
        if step is not None:
            sources.append(task_dir / "steps" / step / "tests")
        for source in sources:
            if source.is_dir():
                await _upload_executable(session, source, TESTS)
        script = f"{TESTS}/test.sh"
        return script


async def _upload_executable(session: EnvironmentSession, local: Path, remote: str) -> None:
    """A directory of scripts uploaded with the executable bits its shell scripts need to run as programs
    (a checkout may have lost them); every other file keeps its mode."""
    for source in sorted(local.rglob("*")):
        if source.is_file():
            mode = source.stat().st_mode & 0o777
            if source.suffix == ".sh":
                mode |= 0o555
            await session.write_file(f"{remote}/{source.relative_to(local).as_posix()}", source.read_bytes(), mode)


async def _rewards(session: EnvironmentSession) -> tuple[dict[str, float] | None, str]:
    """The rewards the verifier wrote, read as Harbor reads them, or None and why there are none."""
    contents: dict[str, bytes | None] = {}
    problems = []
    for name in ("reward.json", "reward.txt"):
        try:
            capture = await session.read_output(f"{VERIFIER_LOGS}/{name}")
        except FileNotFoundError:
            contents[name] = None
            continue
        except OSError as exc:  # a symlink, a directory: not the verifier's own file
            contents[name] = None
            problems.append(f"{name}: {exc}")
            continue
        if capture.total > harbor_rewards.MAX_REWARD_BYTES:
            return None, f"{name} is {capture.total} bytes, not a reward"
        contents[name] = capture.data()
    rewards, problem = harbor_rewards.parse_rewards(contents["reward.json"], contents["reward.txt"])
    if rewards is None and problems:
        problem = "; ".join([*problems, problem])
    return rewards, problem


async def _collect(session: EnvironmentSession, path: str, name: str) -> dict[str, bytes]:
    """The regular files at ``path`` in the environment (a file, or a directory's, links not followed),
    each kept as its head and tail, under ``name``; nothing where there is none."""
    listing = await session.exec(
        f"if [ -d {shlex.quote(path)} ]; then cd {shlex.quote(path)} && find . -type f | head -n {MAX_KEPT_FILES + 1};"
        f" elif [ -f {shlex.quote(path)} ]; then echo .; fi",
        caller=Caller.verifier,
        timeout_s=LIST_TIMEOUT_S,
    )
    entries = [line for line in listing.stdout.splitlines() if line][:MAX_KEPT_FILES]
    kept: dict[str, bytes] = {}
    for entry in entries:
        relative = entry.removeprefix("./")
        source = path if entry == "." else f"{path}/{relative}"
        try:
            capture = await session.read_output(source)
        except OSError:
            continue  # gone, or not a regular file after all
        kept[name if entry == "." else f"{name}/{relative}"] = capture.data()
    return kept
