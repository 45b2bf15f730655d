"""The built-in `demo` benchmark: small shell tasks, each with a reference solution and a check.

Each task is a directory under ``demo_tasks/``: ``task.yaml`` (id, category, instruction), an optional
``setup/`` copied into the working directory, ``solution.sh`` and ``check.sh``. The check runs inside
the task's environment in its working directory, once the agent is done and its processes are gone,
under the framework's judge (judge.py): exit code 0 means solved, reported by the judge's verdict line,
which the checked code cannot write. A check that calls the agent's Python code loads it with the
judge's ``isolated_module`` (in a process of its own), so that code exiting cannot pass the check. The
check script is written to the framework's private scratch directory at evaluation time only, so the
agent never sees it (in `sandbox` and `docker`) and cannot plant anything in its place.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentcompass_dagster.plugins.benchmarks.judging import run_judge
from agentcompass_dagster.contracts.benchmark import Benchmark, ReferenceSolution
from agentcompass_dagster.contracts.errors import UserError, field_error
from agentcompass_dagster.declarations.references import load_yaml
from agentcompass_dagster.runtime.store.naming import file_stem
from agentcompass_dagster.contracts.records import Evaluation, EvaluationMode, PreparedTask, RunResult, TaskSpec

if TYPE_CHECKING:
    from agentcompass_dagster.contracts.request import EvalRequest
    from agentcompass_dagster.contracts.environment import EnvironmentSession

TASKS_DIR = Path(__file__).parent / "demo_tasks"
CHECK_TIMEOUT_S = 60.0


class DemoBenchmark(Benchmark):
    supported_evaluation_modes = frozenset({EvaluationMode.reuse})
    verifier_executes = (
        "check.sh in the working directory under the judge; a check that calls the agent's Python "
        "loads it through isolated_module, one that runs the agent's scripts runs them as commands"
    )

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.tasks_dir = self.config.resolve_path(self.config.params.get("tasks_dir", TASKS_DIR))

    def load_tasks(self) -> list[TaskSpec]:
        if not self.tasks_dir.is_dir():
            raise field_error("benchmark.params.tasks_dir", str(self.tasks_dir), "not a directory", self.config.file)
        tasks = []
        for task_dir in sorted(p for p in self.tasks_dir.iterdir() if (p / "task.yaml").is_file()):
            meta = load_yaml(task_dir / "task.yaml")
            if not isinstance(meta, dict) or "id" not in meta or "instruction" not in meta:
                raise UserError(f"{task_dir / 'task.yaml'}: needs the fields id and instruction")
            tasks.append(
                TaskSpec(
                    id=str(meta["id"]),
                    category=meta.get("category"),
                    input=meta["instruction"],
                    metadata={"dir": str(task_dir)},
                )
            )
        return tasks

    async def prepare_task(
        self, task: TaskSpec, session: EnvironmentSession, request: EvalRequest, benchmark_plan: dict[str, Any]
    ) -> PreparedTask:
        setup = Path(task.metadata["dir"]) / "setup"
        if setup.is_dir():
            await session.upload_dir(setup, session.workdir)
        return PreparedTask(task=task, input=task.input)

    def reference_solution(self, task: TaskSpec) -> ReferenceSolution:
        return ReferenceSolution(script=(Path(task.metadata["dir"]) / "solution.sh").read_text())

    async def evaluate(
        self, prepared: PreparedTask, result: RunResult, session: EnvironmentSession | None
    ) -> Evaluation:
        if session is None:
            return Evaluation(error="the demo check runs inside the task environment; it got none")
        check = (Path(prepared.task.metadata["dir"]) / "check.sh").read_bytes()
        path = f"{session.scratch}/check-{file_stem(prepared.task.id)}.sh"
        await session.write_file(path, check, 0o755)
        verdict = await run_judge(session, prepared.task.id, "check", ["bash", path], CHECK_TIMEOUT_S)
        return Evaluation(
            correct=verdict.passed,
            score=float(verdict.passed),
            fields={"result": verdict.reason, "check_output": verdict.output[-2000:]},
        )
