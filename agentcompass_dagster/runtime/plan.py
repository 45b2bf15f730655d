"""The Planner: one ExecutionPlan per task attempt, built before its environment opens (R-ATT-1)."""

from __future__ import annotations

import json
from typing import Any

from agentcompass_dagster.config import RunRequest
from agentcompass_dagster.errors import field_error
from agentcompass_dagster.runtime.components import Components
from agentcompass_dagster.runtime.types import ExecutionPlan, TaskSpec


class Planner:
    def __init__(self, request: RunRequest, components: Components) -> None:
        self.request = request
        self.components = components
        # Every plan of a request is this one with its task, attempt and benchmark plan filled in.
        self._template = self._build(TaskSpec(id=""), 1, {})
        self._persisted: dict[str, ExecutionPlan] = {}

    def plan(self, task: TaskSpec, attempt: int) -> ExecutionPlan:
        benchmark_plan = self.components.benchmark.plan(task)
        plan = self._template.model_copy(update={"task_id": task.id, "attempt": attempt,
                                                 "benchmark_plan": benchmark_plan, "private": {}})
        key = json.dumps(benchmark_plan, sort_keys=True, default=str) if benchmark_plan else ""
        first = self._persisted.setdefault(key, plan)
        if first is not plan:
            plan.share_persisted(first)
        return plan

    def _build(self, task: TaskSpec, attempt: int, benchmark_plan: dict[str, Any]) -> ExecutionPlan:
        request = self.request
        execution = request.execution
        return ExecutionPlan(
            task_id=task.id,
            attempt=attempt,
            benchmark_id=request.benchmark.id,
            harness_id=request.harness.id,
            environment_id=request.environment.id,
            model_id=request.model.id,
            evaluation_environment_mode=execution.evaluation_environment_mode,
            keep_environment=execution.keep_environment,
            baseline_network_policy=execution.network.baseline,
            run_network_policy=execution.network.run,
            evaluation_network_policy=execution.network.evaluation,
            attempt_timeout_s=execution.limits.attempt_timeout_s,
            agent_limits=execution.limits.agent_limits(),
            max_retries=execution.max_retries,
            retry_pattern_list=execution.retry_pattern_list,
            benchmark_plan=benchmark_plan,
        )

    def preflight(self, probe_task: TaskSpec) -> None:
        """Refuse, before anything runs, a plan the benchmark or environment cannot honour."""
        plan = self._build(probe_task, 1, {})
        modes = self.components.benchmark.supported_evaluation_modes
        if plan.evaluation_environment_mode not in modes:
            raise field_error(
                "execution.evaluation_environment_mode",
                plan.evaluation_environment_mode.value,
                f"benchmark {self.request.benchmark.id!r} supports {sorted(m.value for m in modes)}",
            )
        self.components.environment.validate_plan(plan)
