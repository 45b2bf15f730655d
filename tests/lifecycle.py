"""Test-only plugins that record every lifecycle call, and fail on demand, to prove the order of the
attempt lifecycle, the retry scopes and the cleanup rules without a model.

EVENTS gets one string per call ("plan", "open:1", "policy:1:none", "prepare", "adapt", "start", "run",
"close_session", "collect", "evaluate:1" / "evaluate:none", "close:1", ...). FAULTS maps a site
("open", "prepare", "run", "collect", "evaluate", "evaluate_raise", "close_session", "close") to how
many of its next calls fail. SLEEPS maps a site to seconds it sleeps before doing its work.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentcompass_dagster import registry
from agentcompass_dagster.benchmarks.synthetic import SyntheticBenchmark
from agentcompass_dagster.contracts.environment import EnvironmentSession, ExecResult
from agentcompass_dagster.environments.local import LocalEnvironment
from agentcompass_dagster.harnesses.scripted import ScriptedHarness, ScriptedSession
from agentcompass_dagster.runtime.scores import TaskScores
from agentcompass_dagster.runtime.types import (
    Evaluation,
    ExecutionPlan,
    MetricResult,
    NetworkPolicy,
    PreparedTask,
    RunResult,
    TaskSpec,
)

EVENTS: list[str] = []
FAULTS: dict[str, int] = {}
SLEEPS: dict[str, float] = {}
AGGREGATED: list[list[str]] = []


def reset() -> None:
    EVENTS.clear()
    FAULTS.clear()
    SLEEPS.clear()
    AGGREGATED.clear()


async def _site(name: str) -> None:
    if SLEEPS.get(name):
        await asyncio.sleep(SLEEPS[name])
    if FAULTS.get(name, 0) > 0:
        FAULTS[name] -= 1
        raise RuntimeError(f"injected {name} failure")


class DelegatingSession(EnvironmentSession):
    """An environment session that passes every call to an inner one; tests override what they record."""

    def __init__(self, inner: EnvironmentSession, number: int) -> None:
        self.inner = inner
        self.number = number
        self.workdir = inner.workdir
        self.scratch = inner.scratch
        self.commands_dir = inner.commands_dir

    async def exec(self, command: str, *, timeout_s: float | None = None, cwd: str | None = None,
                   private: bool = False, label: str | None = None) -> ExecResult:
        return await self.inner.exec(command, timeout_s=timeout_s, cwd=cwd, private=private, label=label)

    async def stop_processes(self) -> None:
        await self.inner.stop_processes()

    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        await self.inner.write_file(path, data, mode)

    async def read_file(self, path: str) -> bytes:
        return await self.inner.read_file(path)

    async def set_network_policy(self, policy: NetworkPolicy) -> None:
        await self.inner.set_network_policy(policy)

    async def close(self) -> None:
        await self.inner.close()


class RecordingSession(DelegatingSession):
    async def set_network_policy(self, policy: NetworkPolicy) -> None:
        EVENTS.append(f"policy:{self.number}:{policy.value}")

    async def close(self) -> None:
        EVENTS.append(f"close:{self.number}")
        await self.inner.close()
        await _site("close")


class RecordingEnvironment(LocalEnvironment):
    """A local environment that can (pretend to) switch network policy and records what it does."""

    supported_policies = frozenset(NetworkPolicy)
    can_switch_network = True
    opened = 0

    async def open(self, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
        RecordingEnvironment.opened += 1
        number = RecordingEnvironment.opened
        EVENTS.append(f"open:{number}")
        await _site("open")
        return RecordingSession(await super().open(plan, task), number)


class FaultyBenchmark(SyntheticBenchmark):
    """The synthetic benchmark with every lifecycle method recorded and able to fail."""

    def load_tasks(self) -> list[TaskSpec]:
        EVENTS.append("load_tasks")
        return super().load_tasks()

    def plan(self, task: TaskSpec) -> dict[str, Any]:
        EVENTS.append("plan")
        return {"synthetic": True}

    async def prepare_task(self, task: TaskSpec, session: Any, request: Any, benchmark_plan: dict[str, Any]) -> PreparedTask:
        EVENTS.append("prepare")
        await _site("prepare")
        return await super().prepare_task(task, session, request, benchmark_plan)

    async def collect_artifacts(self, prepared: PreparedTask, result: RunResult, session: Any) -> RunResult:
        EVENTS.append("collect")
        await _site("collect")
        return result

    async def evaluate(self, prepared: PreparedTask, result: RunResult, session: Any) -> Evaluation:
        EVENTS.append(f"evaluate:{'none' if session is None else session.number}")
        await _site("evaluate_raise")
        if FAULTS.get("evaluate", 0) > 0:
            FAULTS["evaluate"] -= 1
            return Evaluation(error="injected evaluate failure")
        return await super().evaluate(prepared, result, session)

    def aggregate_metrics(self, scores: TaskScores, total: int) -> MetricResult:
        AGGREGATED.append(scores.task_ids())
        return super().aggregate_metrics(scores, total)


class RecordingHarness(ScriptedHarness):
    def adapt_input(self, prepared: PreparedTask) -> PreparedTask:
        EVENTS.append("adapt")
        return prepared

    async def start_session(self, prepared: PreparedTask, env: Any, benchmark: Any, plan: ExecutionPlan) -> Any:
        EVENTS.append("start")
        session = await super().start_session(prepared, env, benchmark, plan)
        return RecordingHarnessSession(self, prepared, env, benchmark, plan, session.step)


class RecordingHarnessSession(ScriptedSession):
    async def run(self) -> RunResult:
        EVENTS.append("run")
        await _site("run")
        return await super().run()

    async def close(self) -> None:
        EVENTS.append("close_session")
        await super().close()
        await _site("close_session")


def register() -> None:
    registry.environments.register("recording", RecordingEnvironment)
    registry.benchmarks.register("faulty", FaultyBenchmark)
    registry.harnesses.register("recording", RecordingHarness)
