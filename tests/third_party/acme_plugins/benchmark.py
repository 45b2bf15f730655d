"""acme-arith: three questions of arithmetic. The reference solution is the answer, and the final answer
is compared with it as data: nothing the agent produced is run."""

from __future__ import annotations

from agentcompass_dagster.contracts import Benchmark, Evaluation, ReferenceSolution, TaskSpec
from agentcompass_dagster.contracts import EnvironmentSession, PreparedTask, RunResult

# id: (category, question, answer)
QUESTIONS = {
    "sum": ("addition", "2 + 3", "5"),
    "product": ("multiplication", "6 * 7", "42"),
    "difference": ("addition", "10 - 4", "6"),
}


class ArithBenchmark(Benchmark):
    def load_tasks(self) -> list[TaskSpec]:
        return [
            TaskSpec(
                id=task_id,
                category=category,
                input=f"What is {question}? Answer with the number only.",
                metadata={"answer": answer},
            )
            for task_id, (category, question, answer) in QUESTIONS.items()
        ]

    def reference_solution(self, task: TaskSpec) -> ReferenceSolution:
        return ReferenceSolution(answer=task.metadata["answer"])

    async def evaluate(
        self, prepared: PreparedTask, result: RunResult, session: EnvironmentSession | None
    ) -> Evaluation:
        expected = prepared.task.metadata["answer"]
        correct = (result.final_answer or "").strip() == expected
        return Evaluation(correct=correct, score=float(correct), fields={"expected": expected})
