"""The `scripted` harness: behaviour declared per task and attempt, so every runtime path (answers,
errors, exceptions, timeouts, retries, close failures) can be exercised without a model.

    harness:
      id: scripted
      params:
        default: {answer: "42"}            # what an attempt does unless a task says otherwise
        tasks:
          t1: {raise: "boom"}              # every attempt of t1 raises
          t2: [{answer: "x"}, {sleep: 5}]  # attempt 1 answers, attempt 2 (and later) sleeps
          t3: {succeed_on: 3, oracle: true}  # tries 1-2 return an error, try 3 runs the reference
        by_model: {m2: {t1: {error: x}}}    # optional: per model id, replaces `tasks`
        record: /tmp/calls.jsonl           # optional: one JSON line per call (task, attempt, try, times)

A step may combine: ``sleep`` first, waiting for a ``gate`` file to exist (a test holds a task for as long
as it needs), then ``command`` (run in the environment), then the outcome:
``raise`` (an exception), ``error`` (a returned error), ``oracle`` (the benchmark's reference solution)
or ``answer``. ``succeed_on: n`` makes tries before the n-th (of that task and attempt, counting runtime
retries) return the error ``error`` (default "scripted failure"). ``start_raises`` / ``close_raises``
make the harness session's start or close raise. A relative ``record`` or ``gate`` is beside the file
that declares the harness.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from agentcompass_dagster.contracts.declarations import HarnessConfig
from agentcompass_dagster.contracts.validation import validate_declaration
from agentcompass_dagster.contracts.harness import Harness, HarnessSession
from agentcompass_dagster.contracts.model import Model
from agentcompass_dagster.plugins.harnesses.oracle import run_reference
from agentcompass_dagster.contracts.records import ExecutionPlan, PreparedTask, RunResult, Usage

if TYPE_CHECKING:
    from agentcompass_dagster.contracts.benchmark import Benchmark
    from agentcompass_dagster.contracts.environment import EnvironmentSession


class ScriptStep(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    sleep: float = Field(default=0.0, ge=0)
    gate: Path | None = None
    command: str | None = None
    raise_: str | None = Field(default=None, alias="raise")
    error: str | None = None
    oracle: bool = False
    answer: str | None = None
    succeed_on: int | None = Field(default=None, ge=1)
    start_raises: str | None = None
    close_raises: str | None = None
    close_sleep: float = Field(default=0.0, ge=0)
    trajectory: list[dict[str, Any]] = Field(default_factory=list)
    usage: Usage | None = None


class ScriptedParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default: ScriptStep = Field(default_factory=ScriptStep)
    tasks: dict[str, ScriptStep | list[ScriptStep]] = Field(default_factory=dict)
    # Per model id, steps that replace ``tasks`` (to play two models that differ on the same tasks).
    by_model: dict[str, dict[str, ScriptStep | list[ScriptStep]]] = Field(default_factory=dict)
    record: Path | None = None


class ScriptedHarness(Harness):
    def __init__(self, config: HarnessConfig, model: Model) -> None:
        super().__init__(config, model)
        self.params = validate_declaration(ScriptedParams, config.params, config.file, "harness.params")
        self._tries: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def step(self, task_id: str, attempt: int) -> ScriptStep:
        steps = self.params.by_model.get(self.model.id, self.params.tasks).get(task_id, self.params.default)
        if isinstance(steps, list):
            return steps[min(attempt, len(steps)) - 1] if steps else self.params.default
        return steps

    def next_try(self, task_id: str, attempt: int) -> int:
        with self._lock:
            count = self._tries.get((task_id, attempt), 0) + 1
            self._tries[(task_id, attempt)] = count
            return count

    def record(self, **event: Any) -> None:
        if self.params.record is None:
            return
        line = json.dumps({"time": time.time(), **event}) + "\n"
        with self._lock, open(self.config.resolve_path(self.params.record), "a") as out:
            out.write(line)

    async def start_session(
        self, prepared: PreparedTask, env: EnvironmentSession, benchmark: Benchmark, plan: ExecutionPlan
    ) -> HarnessSession:
        step = self.step(prepared.task.id, plan.attempt)
        if step.start_raises:
            raise RuntimeError(step.start_raises)
        return ScriptedSession(self, prepared, env, benchmark, plan, step)

    async def perform(
        self, step: ScriptStep, tried: int, prepared: PreparedTask, env: EnvironmentSession, benchmark: Benchmark
    ) -> RunResult:
        if step.sleep:
            await asyncio.sleep(step.sleep)
        gate = None if step.gate is None else self.config.resolve_path(step.gate)
        while gate is not None and not gate.exists():
            await asyncio.sleep(0.01)
        trajectory = list(step.trajectory)
        if step.command is not None:
            outcome = await env.exec(step.command)
            trajectory.append(
                {
                    "type": "command",
                    "command": step.command,
                    "exit_code": outcome.exit_code,
                    "output": outcome.output[-4000:],
                }
            )
        usage = step.usage or Usage()
        if step.succeed_on is not None and tried < step.succeed_on:
            return RunResult(status="error", error=step.error or "scripted failure", trajectory=trajectory, usage=usage)
        if step.raise_ is not None:
            raise RuntimeError(step.raise_)
        if step.error is not None and step.succeed_on is None:
            return RunResult(status="error", error=step.error, trajectory=trajectory, usage=usage)
        if step.oracle:
            result = await run_reference(prepared, env, benchmark)
            result.trajectory = trajectory + result.trajectory
            result.usage = usage
            return result
        return RunResult(final_answer=step.answer, trajectory=trajectory, usage=usage)


class ScriptedSession(HarnessSession):
    harness: ScriptedHarness

    def __init__(
        self,
        harness: ScriptedHarness,
        prepared: PreparedTask,
        env: EnvironmentSession,
        benchmark: Benchmark,
        plan: ExecutionPlan,
        step: ScriptStep,
    ) -> None:
        super().__init__(harness, prepared, env, benchmark, plan)
        self.step = step

    async def run(self) -> RunResult:
        harness, task_id, attempt = self.harness, self.prepared.task.id, self.plan.attempt
        tried = harness.next_try(task_id, attempt)
        harness.record(event="start", model=harness.model.id, task=task_id, attempt=attempt, tried=tried)
        try:
            return await harness.perform(self.step, tried, self.prepared, self.env, self.benchmark)
        finally:
            harness.record(event="end", model=harness.model.id, task=task_id, attempt=attempt, tried=tried)

    async def close(self) -> None:
        if self.step.close_sleep:
            await asyncio.sleep(self.step.close_sleep)
        if self.step.close_raises:
            raise RuntimeError(self.step.close_raises)
