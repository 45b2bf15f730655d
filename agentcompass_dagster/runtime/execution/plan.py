"""The Planner: one ExecutionPlan per task attempt, built before its environment opens (R-ATT-1)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.contracts.errors import field_error
from agentcompass_dagster.runtime.store.budget import sweep_budget
from agentcompass_dagster.runtime.execution.plugins import Plugins
from agentcompass_dagster.contracts.records import ExecutionPlan, NetworkPolicy, TaskSpec
from agentcompass_dagster.runtime.store.outcomes import PersistedPlan


class Planner:
    def __init__(self, request: EvalRequest, plugins: Plugins, run_id: str | None = None) -> None:
        """``run_id``: the run directory whose attempts the plans are for (what they spend of the sweep's
        budget is charged to it)."""
        self.request = request
        self.plugins = plugins
        self.budget = sweep_budget(request, run_id)
        # Every plan of a request is this one with its task, attempt and benchmark plan filled in.
        self._template = self._build(TaskSpec(id=""), 1, {})
        self._persisted: dict[str, PersistedPlan] = {}

    def plan(self, task: TaskSpec, attempt: int) -> ExecutionPlan:
        return self._template.model_copy(
            update={
                "task_id": task.id,
                "attempt": attempt,
                "benchmark_plan": self.plugins.benchmark.plan(task),
                "mounts": self.plugins.harness.mounts(task, self.request.environment),
                **self.task_asks(task),
            }
        )

    def task_asks(self, task: TaskSpec) -> dict[str, Any]:
        """What the task narrows of the sweep's plan: no network in any phase where it may reach none
        (the narrower wins), and the agent's wall time bounded by the task's own timeout (the sweep may
        cap it, never extend it)."""
        asks: dict[str, Any] = {}
        if task.environment is not None and task.environment.network is NetworkPolicy.none:
            asks.update(
                baseline_network_policy=NetworkPolicy.none,
                run_network_policy=NetworkPolicy.none,
                evaluation_network_policy=NetworkPolicy.none,
            )
        limits = self._template.agent_limits
        if task.agent_timeout_s is not None and (limits.max_wall_s is None or task.agent_timeout_s < limits.max_wall_s):
            asks["agent_limits"] = limits.model_copy(update={"max_wall_s": task.agent_timeout_s})
        return asks

    def persisted(self, plan: ExecutionPlan) -> PersistedPlan:
        """The plan's persisted view and digest, made once per distinct plan of this request (plans
        differ only in their benchmark plan and what a task narrows, most of them in nothing)."""
        key = json.dumps(
            [
                plan.benchmark_plan,
                plan.baseline_network_policy,
                plan.run_network_policy,
                plan.evaluation_network_policy,
                plan.agent_limits.max_wall_s,
            ],
            sort_keys=True,
            default=str,
        )
        found = self._persisted.get(key)
        if found is None:
            view = plan.persisted_view()
            digest = hashlib.sha256(json.dumps(view, sort_keys=True).encode()).hexdigest()[:16]
            found = self._persisted[key] = PersistedPlan(view, digest)
        return found

    def _build(self, task: TaskSpec, attempt: int, benchmark_plan: dict[str, Any]) -> ExecutionPlan:
        request = self.request
        execution = request.execution
        network = execution.network
        environment = self.plugins.environment
        return ExecutionPlan(
            task_id=task.id,
            attempt=attempt,
            benchmark_id=request.benchmark.id,
            harness_id=request.harness.id,
            environment_id=request.environment.id,
            model_id=request.model.id,
            evaluation_environment_mode=execution.evaluation_environment_mode,
            keep_environment=execution.keep_environment,
            baseline_network_policy=network.baseline or environment.default_policy("baseline"),
            run_network_policy=network.run or environment.default_policy("run"),
            evaluation_network_policy=network.evaluation or environment.default_policy("evaluation"),
            attempt_timeout_s=execution.limits.attempt_timeout_s,
            agent_limits=execution.limits.agent_limits(),
            max_retries=execution.max_retries,
            retry_pattern_list=execution.retry_pattern_list,
            benchmark_plan=benchmark_plan,
            budget=self.budget,
        )

    def preflight(self, probe_task: TaskSpec) -> None:
        """Refuse, before anything runs, a plan the benchmark or environment cannot honour."""
        plan = self._build(probe_task, 1, {}).model_copy(
            update={"mounts": self.plugins.harness.mounts(probe_task, self.request.environment, make=False)}
        )
        modes = self.plugins.benchmark.supported_evaluation_modes
        if plan.evaluation_environment_mode not in modes:
            raise field_error(
                "execution.evaluation_environment_mode",
                plan.evaluation_environment_mode.value,
                f"benchmark {self.request.benchmark.id!r} supports {sorted(m.value for m in modes)}",
            )
        self.plugins.environment.validate_plan(plan)
