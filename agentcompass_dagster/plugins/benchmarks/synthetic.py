"""The built-in `synthetic` benchmark: N generated question/answer tasks scored in the driver.

It runs no command, so it measures the framework itself (store, scheduling, environments) and gives
tests a benchmark of any size. Params: ``n_tasks`` (default 20), ``categories`` (default a, b, c).
"""

from __future__ import annotations

from typing import Any

from agentcompass_dagster.contracts.benchmark import Benchmark, ReferenceSolution
from agentcompass_dagster.contracts.errors import field_error
from agentcompass_dagster.contracts.records import Evaluation, PreparedTask, RunResult, TaskSpec


class SyntheticBenchmark(Benchmark):
    def __init__(self, config: Any) -> None:
        super().__init__(config)
        n_tasks = self.config.params.get("n_tasks", 20)
        if not isinstance(n_tasks, int) or isinstance(n_tasks, bool) or n_tasks < 1:
            raise field_error("benchmark.params.n_tasks", n_tasks, "must be a positive integer", self.config.file)
        categories = self.config.params.get("categories", ["a", "b", "c"])
        if not isinstance(categories, list) or not categories:
            raise field_error("benchmark.params.categories", categories, "must be a non-empty list", self.config.file)
        self.n_tasks = n_tasks
        self.categories = [str(c) for c in categories]

    def load_tasks(self) -> list[TaskSpec]:
        width = len(str(self.n_tasks))
        return [
            TaskSpec(
                id=f"t{i:0{width}d}",
                category=self.categories[i % len(self.categories)],
                input=f"Reply with answer-{i}.",
            )
            for i in range(self.n_tasks)
        ]

    @staticmethod
    def expected(task: TaskSpec) -> str:
        # Derived from the id rather than kept in each task's metadata: at 100,000 tasks that is 24 MB.
        return f"answer-{int(task.id[1:])}"

    def reference_solution(self, task: TaskSpec) -> ReferenceSolution:
        return ReferenceSolution(answer=self.expected(task))

    async def evaluate(self, prepared: PreparedTask, result: RunResult, session: Any) -> Evaluation:
        correct = (result.final_answer or "").strip() == self.expected(prepared.task)
        return Evaluation(correct=correct, score=float(correct))
