"""The Benchmark plugin contract: load and select tasks, prepare them, collect artifacts, evaluate,
aggregate. Evaluation is authoritative; harnesses never score."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
from pydantic import BaseModel

from agentcompass_dagster.contracts.records import (
    Evaluation,
    EvaluationMode,
    ExecutionPlan,
    MetricResult,
    NotLoaded,
    PreparedTask,
    RunResult,
    StepOutcome,
    TaskSpec,
    TaskStep,
)

if TYPE_CHECKING:
    from agentcompass_dagster.contracts.declarations import BenchmarkConfig
    from agentcompass_dagster.contracts.request import EvalRequest
    from agentcompass_dagster.contracts.environment import EnvironmentSession


class Scores(Protocol):
    """The finished tasks of one request as ``aggregate_metrics`` reads them: one row per task and one per
    attempt, as numpy columns (``column("score")``, ``column("attempt_correct")``, ...)."""

    tasks: Sequence[TaskSpec]

    def __len__(self) -> int: ...

    def rows(self) -> np.ndarray:
        """The task rows in selected order."""

    def attempt_rows(self) -> np.ndarray:
        """The attempt rows in selected order of their tasks."""

    def column(self, name: str) -> np.ndarray: ...

    def task(self, row: int) -> TaskSpec: ...

    def task_ids(self) -> list[str]: ...


class ReferenceSolution(BaseModel):
    """What the oracle harness runs: a shell script in the task's working directory, or the program
    ``path`` names inside the environment (run as it is, after the host directory ``upload_from`` is
    uploaded to ``upload_to``), with the variables ``env`` adds; or a final answer."""

    script: str | None = None
    path: str | None = None
    upload_from: Path | None = None
    upload_to: str | None = None
    env: dict[str, str] = {}
    answer: str | None = None


class Benchmark(ABC):
    supported_evaluation_modes: ClassVar[frozenset[EvaluationMode]] = frozenset(EvaluationMode)
    # What the verifier executes of what the agent produced, and how (the Caller.verifier context holds
    # the rest off): a benchmark that runs the agent's code says so here, so a reviewer knows what a
    # forged pass would have to get through.
    verifier_executes: ClassVar[str] = "nothing: the final answer is compared as data"

    def __init__(self, config: BenchmarkConfig) -> None:
        self.config = config

    @property
    def id(self) -> str:
        return self.config.id

    @abstractmethod
    def load_tasks(self) -> list[TaskSpec]:
        """Every task of the benchmark, in a stable order, each with an id stable across loads. A task
        that cannot be loaded is left out and named by ``not_loaded``; only a source that cannot be read
        at all (a missing directory) raises.

        Example::

            def load_tasks(self):
                rows = json.loads(self.config.resolve_path(self.config.params["file"]).read_text())
                return [TaskSpec(id=row["id"], category=row["topic"], input=row["question"],
                                 metadata={"answer": row["answer"]}) for row in rows]
        """

    def not_loaded(self) -> list[NotLoaded]:
        """The tasks the last ``load_tasks`` found and could not load, each with the reason: the run
        leaves them out and lists them in its summary."""
        return []

    def select_tasks(self, tasks: list[TaskSpec]) -> list[TaskSpec]:
        """Keep the declared ``tasks`` (in declared order; the runtime has refused an id that the benchmark
        does not have, and leaves out one it could not load) and at most ``limit`` of them."""
        selected = tasks
        if self.config.tasks is not None:
            by_id = {task.id: task for task in tasks}
            selected = [by_id[task_id] for task_id in dict.fromkeys(self.config.tasks) if task_id in by_id]
        if self.config.limit is not None:
            selected = selected[: self.config.limit]
        return selected

    def plan(self, task: TaskSpec) -> dict[str, Any]:
        """Benchmark-specific settings recorded in the execution plan of each attempt."""
        return {}

    async def prepare_task(
        self, task: TaskSpec, session: EnvironmentSession, request: EvalRequest, benchmark_plan: dict[str, Any]
    ) -> PreparedTask:
        return PreparedTask(task=task, input=task.input)

    async def collect_artifacts(
        self, prepared: PreparedTask, result: RunResult, session: EnvironmentSession
    ) -> RunResult:
        return result

    @abstractmethod
    async def evaluate(
        self, prepared: PreparedTask, result: RunResult, session: EnvironmentSession | None
    ) -> Evaluation:
        """The verdict on one attempt: the only scorer. ``result`` is what the harness returned (its final
        answer, trajectory, exit code); ``session`` is the attempt's environment after the agent's
        processes were stopped (mode ``reuse``), a new one of the same task (``fresh``: the result's
        answer and collected artifacts are all of the agent's work it has), or None (``none``: judge the
        answer as data). A command run here must pass ``caller=Caller.verifier``:
        it runs in the framework's context, never the agent's. A failure the agent caused (a wrong file, a
        crash of its code) is ``correct=False``; raise only for the infrastructure's own failures.

        Example::

            async def evaluate(self, prepared, result, session):
                check = await session.exec("python3 check.py", caller=Caller.verifier, timeout_s=60,
                                           cwd=session.scratch)
                return Evaluation(correct=check.exit_code == 0, score=float(check.exit_code == 0),
                                  fields={"check_output": check.stdout[-2000:]})
        """

    def reference_solution(self, task: TaskSpec) -> ReferenceSolution | None:
        """What the oracle runs for ``task`` (for a step of a multi-step task, ``prepare_step`` has made
        the step's the one the prepared task names); None where the benchmark has none."""
        return None

    async def prepare_step(
        self, prepared: PreparedTask, step: TaskStep, session: EnvironmentSession, done: list[StepOutcome]
    ) -> PreparedTask | None:
        """Make ``step`` of a multi-step task ready in the environment the earlier steps (``done``, in
        order) left: its files, its setup; the harness then runs the returned task (its ``input`` is the
        step's instruction) and ``evaluate`` checks it. None ends the attempt before this step (an
        earlier step's result fell short of what the task requires to go on)."""
        return prepared.model_copy(update={"input": step.input, "data": {**prepared.data, "step": step.name}})

    def combine_steps(self, prepared: PreparedTask, done: list[StepOutcome]) -> Evaluation:
        """The attempt's evaluation from its steps' (in order; fewer than the task's when one ended it):
        by default the mean score, correct when every step of the task was run and correct."""
        complete = len(done) == len(prepared.task.steps)
        scores = [outcome.evaluation.score for outcome in done]
        return Evaluation(
            correct=complete and all(o.evaluation.correct for o in done),
            score=sum(scores) / len(prepared.task.steps) if prepared.task.steps else 0.0,
            fields={"steps": [o.model_dump(mode="json") for o in done]},
        )

    def aggregate_metrics(self, scores: Scores, total: int) -> MetricResult | None:
        """Request metrics from the scores of the finished tasks (``scores.rows()`` gives them in selected
        order), or None for the framework's standard ones (accuracy, pass@k, per category). The details
        themselves stay in details/ on disk, so metrics depend only on scores and counts, and their memory
        does not grow with what a detail holds."""
        return None


class HarnessFreeBenchmark(Benchmark):
    """A benchmark that runs its tasks itself; requests name the placeholder harness ``none`` and the
    runtime calls ``run_task`` under the same network-policy boundary as a harness (R-ATT-2)."""

    @abstractmethod
    async def run_task(self, prepared: PreparedTask, session: EnvironmentSession, plan: ExecutionPlan) -> RunResult:
        """Run one prepared task in ``session`` (the run phase's network policy applies) and return what it
        produced, for ``evaluate`` to judge.

        Example::

            async def run_task(self, prepared, session, plan):
                ran = await session.exec(f"./solve {shlex.quote(prepared.input)}", timeout_s=300)
                return RunResult(final_answer=ran.stdout.strip(), artifacts={"exit_code": ran.exit_code})
        """
