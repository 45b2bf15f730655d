"""Test-only plugins that record every lifecycle call, and fail on demand, to prove the order of the
attempt lifecycle, the retry scopes and the cleanup rules without a model.

There is no module state: ``recording(lifecycle)`` registers subclasses of the plugins below bound to one
``Lifecycle``, the record of one test (the ``recorder`` fixture in conftest.py does this inside
``plugin_registries``, so the ids are gone after the test). ``events`` gets one string per call ("plan",
"open:1", "policy:1:none", "prepare", "adapt", "start", "run", "close_session", "collect",
"evaluate:1" / "evaluate:none", "close:1", ...). ``faults`` maps a site ("open", "prepare", "run",
"collect", "evaluate", "evaluate_raise", "close_session", "close") to how many of its next calls fail.
``sleeps`` maps a site to seconds it sleeps before doing its work. ``aggregated`` gets the task ids each
``aggregate_metrics`` call saw.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentcompass_dagster.declarations import registry
from agentcompass_dagster.plugins.benchmarks.synthetic import SyntheticBenchmark
from agentcompass_dagster.contracts.environment import DelegatingSession, EnvironmentSession
from agentcompass_dagster.plugins.environments.local import LocalEnvironment
from agentcompass_dagster.plugins.harnesses.scripted import ScriptedHarness, ScriptedSession
from agentcompass_dagster.runtime.results.scores import TaskScores
from agentcompass_dagster.contracts.records import (
    Evaluation,
    ExecutionPlan,
    MetricResult,
    NetworkPolicy,
    PreparedTask,
    RunResult,
    TaskSpec,
)


@dataclass
class Lifecycle:
    """What the recording plugins of one test saw, and the faults and sleeps they are told to inject."""

    events: list[str] = field(default_factory=list)
    faults: dict[str, int] = field(default_factory=dict)
    sleeps: dict[str, float] = field(default_factory=dict)
    aggregated: list[list[str]] = field(default_factory=list)
    opened: int = 0

    def clear(self) -> None:
        """Forget what was recorded and injected, between two runs of one test."""
        self.events.clear()
        self.faults.clear()
        self.sleeps.clear()
        self.aggregated.clear()
        self.opened = 0

    def after_load(self) -> list[str]:
        """The events after the (first) load_tasks."""
        return self.events[self.events.index("load_tasks") + 1 :]

    async def site(self, name: str) -> None:
        if self.sleeps.get(name):
            await asyncio.sleep(self.sleeps[name])
        if self.faults.get(name, 0) > 0:
            self.faults[name] -= 1
            raise RuntimeError(f"injected {name} failure")


class NumberedSession(DelegatingSession):
    """A session that passes every call on (contracts.DelegatingSession), numbered in opening order;
    tests override what they record."""

    def __init__(self, inner: EnvironmentSession, number: int) -> None:
        super().__init__(inner)
        self.number = number


class RecordingSession(NumberedSession):
    def __init__(self, inner: EnvironmentSession, number: int, lifecycle: Lifecycle) -> None:
        super().__init__(inner, number)
        self.lifecycle = lifecycle

    async def set_network_policy(self, policy: NetworkPolicy) -> None:
        self.lifecycle.events.append(f"policy:{self.number}:{policy.value}")

    async def close(self) -> None:
        self.lifecycle.events.append(f"close:{self.number}")
        await self.inner.close()
        await self.lifecycle.site("close")


class RecordingEnvironment(LocalEnvironment):
    """A local environment that can (pretend to) switch network policy and records what it does."""

    supported_policies = frozenset(NetworkPolicy)
    can_switch_network = True
    lifecycle: ClassVar[Lifecycle]

    async def open(self, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
        self.lifecycle.opened += 1
        number = self.lifecycle.opened
        self.lifecycle.events.append(f"open:{number}")
        await self.lifecycle.site("open")
        return RecordingSession(await super().open(plan, task), number, self.lifecycle)


class FaultyBenchmark(SyntheticBenchmark):
    """The synthetic benchmark with every lifecycle method recorded and able to fail."""

    lifecycle: ClassVar[Lifecycle]

    def load_tasks(self) -> list[TaskSpec]:
        self.lifecycle.events.append("load_tasks")
        return super().load_tasks()

    def plan(self, task: TaskSpec) -> dict[str, Any]:
        self.lifecycle.events.append("plan")
        return {"synthetic": True}

    async def prepare_task(
        self, task: TaskSpec, session: Any, request: Any, benchmark_plan: dict[str, Any]
    ) -> PreparedTask:
        self.lifecycle.events.append("prepare")
        await self.lifecycle.site("prepare")
        return await super().prepare_task(task, session, request, benchmark_plan)

    async def collect_artifacts(self, prepared: PreparedTask, result: RunResult, session: Any) -> RunResult:
        self.lifecycle.events.append("collect")
        await self.lifecycle.site("collect")
        return result

    async def evaluate(self, prepared: PreparedTask, result: RunResult, session: Any) -> Evaluation:
        self.lifecycle.events.append(f"evaluate:{'none' if session is None else session.number}")
        await self.lifecycle.site("evaluate_raise")
        if self.lifecycle.faults.get("evaluate", 0) > 0:
            self.lifecycle.faults["evaluate"] -= 1
            return Evaluation(error="injected evaluate failure")
        return await super().evaluate(prepared, result, session)

    def aggregate_metrics(self, scores: TaskScores, total: int) -> MetricResult:
        self.lifecycle.aggregated.append(scores.task_ids())
        return super().aggregate_metrics(scores, total)


class RecordingHarness(ScriptedHarness):
    lifecycle: ClassVar[Lifecycle]

    def adapt_input(self, prepared: PreparedTask) -> PreparedTask:
        self.lifecycle.events.append("adapt")
        return prepared

    async def start_session(self, prepared: PreparedTask, env: Any, benchmark: Any, plan: ExecutionPlan) -> Any:
        self.lifecycle.events.append("start")
        session = await super().start_session(prepared, env, benchmark, plan)
        return RecordingHarnessSession(self, prepared, env, benchmark, plan, session.step)


class RecordingHarnessSession(ScriptedSession):
    harness: RecordingHarness

    async def run(self) -> RunResult:
        self.harness.lifecycle.events.append("run")
        await self.harness.lifecycle.site("run")
        return await super().run()

    async def close(self) -> None:
        self.harness.lifecycle.events.append("close_session")
        await super().close()
        await self.harness.lifecycle.site("close_session")


def bound(plugin: type, lifecycle: Lifecycle) -> type:
    """A subclass of ``plugin`` that records into ``lifecycle``."""
    return type(plugin.__name__, (plugin,), {"lifecycle": lifecycle, "__module__": __name__})


def recording(lifecycle: Lifecycle) -> Lifecycle:
    """Register environment "recording", benchmark "faulty" and harness "recording", bound to ``lifecycle``
    (the caller restores the registries afterwards: conftest's ``recorder`` fixture)."""
    registry.environments.register("recording", bound(RecordingEnvironment, lifecycle))
    registry.benchmarks.register("faulty", bound(FaultyBenchmark, lifecycle))
    registry.harnesses.register("recording", bound(RecordingHarness, lifecycle))
    return lifecycle
