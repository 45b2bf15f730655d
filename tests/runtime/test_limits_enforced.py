"""#30: the agent's limits (execution.limits) is the framework's to enforce, not the harness's. Harnesses
that ignore it are stopped at it: one calls the model for ever (through its harness's model, not its
session's) and shrugs off every refusal, one runs ``sleep 1000`` in its environment for ever. Each ends
at max_turns, max_tokens or max_wall_s with that limit in the detail on disk, scored as the agent's
failure that counts in accuracy's denominator. A harness that catches the refusal and returns a result
of its own keeps its trajectory, but cannot erase the limit or turn it into an error to be run again."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import details_by_task, write_sweep

from agentcompass_dagster.declarations import registry
from agentcompass_dagster.contracts.declarations import ModelConfig
from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.contracts.harness import Harness, HarnessSession
from agentcompass_dagster.contracts.model import CallContext, LimitExceeded
from agentcompass_dagster.contracts.records import AgentLimits, LimitHit, RunResult, Usage
from agentcompass_dagster.durable.activity import ACTIVITY_FILE, ActivityLog, ActivityRecord
from agentcompass_dagster.plugins.models.scripted import ScriptedModel
from agentcompass_dagster.runtime.execution.agent_limits import AttemptLimits, LimitedModel
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate
from agentcompass_dagster.runtime.store.run_files import set_aside

pytestmark = pytest.mark.usefixtures("plugin_registries")

TASK = "count-errors"
TURN = {"content": "working on it", "usage": {"prompt_tokens": 600, "completion_tokens": 10}}
# Where harnesses enforced the limits themselves nothing stopped these ones but the attempt timeout:
# the tests then fail on what was recorded instead of hanging.
ATTEMPT_TIMEOUT_S = 20


class ModelLoop(HarnessSession):
    async def run(self) -> RunResult:
        context = CallContext(task_id=self.prepared.task.id, attempt=self.plan.attempt)
        while True:
            try:
                await self.harness.model.complete([{"role": "user", "content": self.prepared.input}], [], context)
            except Exception:  # noqa: BLE001 - it ignores whatever the framework says
                pass
            # A real model call waits on the network; the scripted one answers without yielding.
            await asyncio.sleep(0)


class SleepCommands(HarnessSession):
    async def run(self) -> RunResult:
        while True:
            try:
                await self.env.exec("sleep 1000")
            except Exception:  # noqa: BLE001 - it ignores whatever the framework says
                pass


class OwnResult(HarnessSession):
    """Calls the model until refused, then returns its trajectory as an error of its own, with no limit."""

    async def run(self) -> RunResult:
        trajectory: list[dict[str, Any]] = []
        try:
            while True:
                context = CallContext(task_id=self.prepared.task.id, attempt=self.plan.attempt, turn=len(trajectory))
                turn = await self.model.complete([{"role": "user", "content": self.prepared.input}], [], context)
                trajectory.append({"type": "model_call", "content": turn.content})
        except Exception as exc:  # noqa: BLE001 - a harness's own way of giving up
            return RunResult(status="error", error=f"gave up: {exc}", trajectory=trajectory, limit=None)


def run_harness(tmp_path: Path, session: type[HarnessSession], **limits: Any) -> tuple[dict[str, Any], Any]:
    """A demo task run by a harness of ``session`` with the scripted model; its detail on disk and the
    run's metrics."""
    harness_id = session.__name__.lower()
    registry.harnesses.register(
        harness_id, type(f"{session.__name__}Harness", (Harness,), {"session_class": session, "requires_model": True})
    )
    model = {
        "id": "solver",
        "provider": "scripted",
        "params": {"turns": {TASK: [TURN] * 5}, "record": str(tmp_path / "model-calls.jsonl")},
    }
    sweep = write_sweep(
        tmp_path,
        benchmarks=[{"id": "demo", "tasks": [TASK]}],
        models=[model],
        harness={"id": harness_id},
        environment="local",
        execution={"limits": {"task_concurrency": 1, "attempt_timeout_s": ATTEMPT_TIMEOUT_S, **limits}},
    )
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    return details_by_task(tmp_path / "results")[TASK], outcome.result.metrics


def model_calls(tmp_path: Path) -> int:
    record = tmp_path / "model-calls.jsonl"
    return len(record.read_text().splitlines()) if record.exists() else 0


@pytest.mark.parametrize(
    ("session", "limits", "hit", "calls"),
    [
        (ModelLoop, {"max_turns": 3}, {"limit": "max_turns", "allowance": 3, "used": 3}, 3),
        (ModelLoop, {"max_tokens": 1000}, {"limit": "max_tokens", "allowance": 1000, "used": 1220}, 2),
        (SleepCommands, {"max_wall_s": 2}, {"limit": "max_wall_s", "allowance": 2}, 0),
    ],
    ids=["model-loop-max-turns", "model-loop-max-tokens", "sleep-commands-max-wall-s"],
)
def test_a_harness_that_ignores_the_limits_is_stopped_at_them(
    tmp_path: Path, session: type[HarnessSession], limits: dict[str, Any], hit: dict[str, Any], calls: int
) -> None:
    """#30: the limit is recorded on the attempt (which, allowance, use) and the task is the agent's
    failure: evaluated, scored 0, no error; the model was not called past the limit, and the attempt
    ended at the limit, long before its timeout."""
    detail, metrics = run_harness(tmp_path, session, **limits)
    attempt = detail["attempts"]["1"]
    limit = attempt["limit"]
    assert limit is not None, f"no limit recorded: {attempt['status']}, {attempt['failure'] or attempt['run_error']}"
    assert (limit["limit"], limit["allowance"]) == (hit["limit"], hit["allowance"])
    assert limit["used"] == pytest.approx(hit["used"]) if "used" in hit else limit["used"] >= hit["allowance"]
    message = LimitHit.model_validate(limit).message
    assert (attempt["status"], attempt["run_error"], attempt["failure"]) == ("failed", None, message)
    assert detail["error"] is None and detail["failure"] == message and not detail["correct"]
    assert metrics.counts.model_dump() == {"total": 1, "evaluated": 1, "error": 0}
    assert metrics.metrics["accuracy"] == 0.0 and metrics.metrics["error_rate"] == 0.0
    assert model_calls(tmp_path) == calls
    assert attempt["duration_s"] < ATTEMPT_TIMEOUT_S


def test_a_harness_cannot_erase_the_limit_from_its_own_result(tmp_path: Path) -> None:
    """#30: a harness that catches the refusal and returns an error without a limit keeps its
    trajectory, but the attempt records the limit the limit hit, and the error is its failure (scored,
    not run again), not the infrastructure's."""
    detail, metrics = run_harness(tmp_path, OwnResult, max_turns=2)
    attempt = detail["attempts"]["1"]
    assert attempt["limit"] == {"limit": "max_turns", "allowance": 2.0, "used": 2.0}
    assert attempt["trajectory"] == [{"type": "model_call", "content": "working on it"}] * 2
    assert (attempt["status"], attempt["run_error"]) == ("failed", None)
    assert attempt["failure"] == "gave up: limit max_turns=2 reached: 2 model calls used"
    assert metrics.counts.model_dump() == {"total": 1, "evaluated": 1, "error": 0}
    assert model_calls(tmp_path) == 2


def test_a_resumed_attempt_counts_what_earlier_processes_spent(tmp_path: Path) -> None:
    """#30, R-RESUME-3: the limits count the calls and the time an earlier process recorded in the
    attempt's activity log, but not those of a log the harness set aside to start over before its first
    call (a log of another configuration, or one that ended in an error)."""
    log = tmp_path / "durable" / ACTIVITY_FILE
    usage = Usage(input_tokens=600, output_tokens=10).model_dump(mode="json")
    ActivityLog(log).append(
        ActivityRecord(
            id="model-0",
            kind="model_call",
            status="completed",
            at=time.time() - 60,
            elapsed_s=1.5,
            data={"turn": 0, "usage": usage},
        )
    )
    model = ScriptedModel(ModelConfig(id="m", provider="scripted", params={"turns": {"t": [TURN] * 3}}))

    async def calls(limits: AttemptLimits) -> int:
        limited = LimitedModel(model, limits)
        for turn in range(3):
            try:
                await limited.complete([], [], CallContext(task_id="t", turn=turn))
            except LimitExceeded:
                return turn
        return 3

    resumed = AttemptLimits(AgentLimits(max_turns=2), log)
    assert asyncio.run(calls(resumed)) == 1
    assert resumed.hit == LimitHit(limit="max_turns", allowance=2, used=2) and resumed.elapsed() >= 1.5

    started_over = AttemptLimits(AgentLimits(max_turns=2), log)
    set_aside(log.parent)
    assert asyncio.run(calls(started_over)) == 2 and started_over.elapsed() < 1.5
