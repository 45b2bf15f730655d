"""Tasks in the Harbor / Terminal-Bench directory layout:

    <task>/task.toml           metadata ([metadata] category, difficulty; [verifier] timeout_sec)
    <task>/instruction.md      what the agent is asked to do
    <task>/tests/test.sh       the verifier: writes the reward to /logs/verifier/reward.txt (or .json)
    <task>/solution/solve.sh   the reference solution (what the oracle harness runs)
    <task>/environment/...     how the task's container is built (Dockerfile)

The agent works in the environment's working directory. The verifier and the solution run with it as
their current directory; their absolute /tests, /solution and /logs/verifier paths are mapped onto the
task's private scratch directory, so the same task runs in the sandbox and in docker. The agent never
sees that directory (in `sandbox` and `docker`): the solution is there for the oracle only, the tests
are copied in at evaluation, once the agent's processes are gone, and the verifier's reward directory
is made empty just before the verifier runs; the reward is read without following symlinks. The reward
becomes the score; a reward of 1 (or more) is correct; no readable reward is a scored failure (0, counted), never a pass.

    benchmarks: [{id: harbor, params: {tasks_dir: path/to/tasks}}]
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

from agentcompass_dagster.contracts.benchmark import Benchmark, ReferenceSolution
from agentcompass_dagster.contracts.environment import Caller
from agentcompass_dagster.errors import UserError, field_error
from agentcompass_dagster.harnesses.oracle import SCRATCH_VARIABLE
from agentcompass_dagster.contracts.records import Evaluation, EvaluationMode, PreparedTask, TaskSpec

DEFAULT_VERIFIER_TIMEOUT_S = 120.0
MAPPED = ("/logs/verifier", "/solution", "/tests")


def map_paths(script: str, base: str) -> str:
    """Point the layout's absolute paths at ``base`` (the task's scratch directory)."""
    for path in MAPPED:
        script = re.sub(rf"(?<![\w./-]){re.escape(path)}(?=[/\s\"';)]|$)", base + path, script)
    return script


class HarborTasksBenchmark(Benchmark):
    supported_evaluation_modes = frozenset({EvaluationMode.reuse})
    verifier_executes = ("the task's tests/test.sh in the working directory, and whatever of the agent's work it runs; "
                         "the reward it writes to /logs/verifier is the score")

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        tasks_dir = self.config.params.get("tasks_dir")
        if isinstance(tasks_dir, str):
            tasks_dir = str(self.config.resolve_path(tasks_dir))
        if not isinstance(tasks_dir, str) or not Path(tasks_dir).is_dir():
            raise field_error("benchmark.params.tasks_dir", tasks_dir, "must be a directory of Harbor-format tasks",
                              self.config.file)
        self.tasks_dir = Path(tasks_dir)

    def load_tasks(self) -> list[TaskSpec]:
        tasks = []
        for task_dir in sorted(p for p in self.tasks_dir.iterdir() if (p / "task.toml").is_file()):
            try:
                meta = tomllib.loads((task_dir / "task.toml").read_text())
                instruction = (task_dir / "instruction.md").read_text()
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise UserError(f"{task_dir}: not a Harbor task: {exc}") from None
            if not (task_dir / "tests" / "test.sh").is_file():
                raise UserError(f"{task_dir}: not a Harbor task: tests/test.sh is missing")
            metadata = meta.get("metadata", {})
            timeout = meta.get("verifier", {}).get("timeout_sec", DEFAULT_VERIFIER_TIMEOUT_S)
            tasks.append(TaskSpec(id=task_dir.name, category=metadata.get("category"), input=instruction,
                                  metadata={"dir": str(task_dir), "verifier_timeout_s": float(timeout)}))
        return tasks

    def reference_solution(self, task: TaskSpec) -> ReferenceSolution | None:
        solve = Path(task.metadata["dir"]) / "solution" / "solve.sh"
        if not solve.is_file():
            return None
        return ReferenceSolution(script=map_paths(solve.read_text(), f"${{{SCRATCH_VARIABLE}}}"))

    async def prepare_task(self, task: TaskSpec, session: Any, request: Any, benchmark_plan: dict[str, Any]) -> PreparedTask:
        """The solution's files are visible to the oracle at /solution (mapped), never to the agent's workdir."""
        solution = Path(task.metadata["dir"]) / "solution"
        if solution.is_dir():
            await session.upload_dir(solution, f"{session.scratch}/solution")
        return PreparedTask(task=task, input=task.input, data={"scratch": session.scratch})

    async def evaluate(self, prepared: PreparedTask, result: Any, session: Any) -> Evaluation:
        task_dir = Path(prepared.task.metadata["dir"])
        base = session.scratch
        for source in sorted((task_dir / "tests").rglob("*")):
            if source.is_file():
                data = source.read_bytes()
                if source.suffix == ".sh":
                    data = map_paths(data.decode(), base).encode()
                rel = source.relative_to(task_dir / "tests").as_posix()
                await session.write_file(f"{base}/tests/{rel}", data, source.stat().st_mode & 0o777)
        logs = shlex.quote(base + "/logs/verifier")
        await session.exec(f"rm -rf {logs} && mkdir -p {logs}", caller=Caller.verifier)
        outcome = await session.exec(f"bash {shlex.quote(base + '/tests/test.sh')}",
                                     timeout_s=prepared.task.metadata["verifier_timeout_s"], caller=Caller.verifier)
        fields = {"verifier_exit_code": outcome.exit_code, "output": outcome.output[-2000:]}
        reward, problem = await self._reward(session, base)
        if reward is None:
            # What the agent left gave the verifier no verdict (it crashed, timed out, or found a planted
            # link): the agent's failure, scored 0 — never an error that leaves the denominator.
            return Evaluation(failure=f"the verifier wrote no usable reward: {problem}",
                              fields={**fields, "reward": None})
        return Evaluation(correct=reward >= 1.0, score=reward, fields={**fields, "reward": reward})

    @staticmethod
    async def _reward(session: Any, base: str) -> tuple[float | None, str]:
        """The reward the verifier wrote, or None and why there is none."""
        problems = []
        for name in ("reward.txt", "reward.json"):
            try:
                text = (await session.read_file(f"{base}/logs/verifier/{name}")).decode(errors="replace").strip()
            except FileNotFoundError:
                continue
            except OSError as exc:  # a symlink, a directory: not the verifier's own file
                problems.append(f"{name}: {exc}")
                continue
            try:
                value = json.loads(text)
            except ValueError:
                return None, f"{name} holds {text[:80]!r}, not a number"
            if isinstance(value, dict):
                value = value.get("reward")
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None, f"{name} holds {text[:80]!r}, not a number"
            return float(value), ""
        return None, "; ".join(problems) or "no /logs/verifier/reward.txt or reward.json"
