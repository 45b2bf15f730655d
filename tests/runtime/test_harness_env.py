"""#30: what a harness is handed of its environment session. The runtime owns the session's network policy
and its end: a harness that closes its session before returning is still evaluated on what it did (it
cannot turn its task into an infrastructure error that leaves the denominator), and one that switches the
network policy is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import details_by_task, write_sweep

from agentcompass_dagster.declarations import registry
from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.contracts import Harness, HarnessSession, NetworkPolicy, RunResult
from agentcompass_dagster.plugins.harnesses.oracle import run_reference
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate

pytestmark = pytest.mark.usefixtures("plugin_registries")

TASK = "count-errors"


class ClosesFirst(HarnessSession):
    """Solves the task with its reference solution, then closes its environment before returning."""

    async def run(self) -> RunResult:
        result = await run_reference(self.prepared, self.env, self.benchmark)
        await self.env.close()
        return result


class OpensTheNetwork(HarnessSession):
    async def run(self) -> RunResult:
        await self.env.set_network_policy(NetworkPolicy.host)
        return RunResult(final_answer="unreachable")


def run_harness(tmp_path: Path, session: type[HarnessSession]) -> dict[str, object]:
    harness_id = session.__name__.lower()
    registry.harnesses.register(harness_id, type(f"{session.__name__}Harness", (Harness,), {"session_class": session}))
    sweep = write_sweep(
        tmp_path,
        benchmarks=[{"id": "demo", "tasks": [TASK]}],
        harness={"id": harness_id},
        environment="local",
        execution={"limits": {"task_concurrency": 1}},
    )
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    return details_by_task(tmp_path / "results")[TASK]


def test_a_harness_that_closes_its_session_is_still_evaluated(tmp_path: Path) -> None:
    """#30: the session a harness closes stays open for its evaluation: the task is solved and scored,
    not an error to run again."""
    detail = run_harness(tmp_path, ClosesFirst)
    assert detail["error"] is None and detail["correct"] is True, detail


def test_a_harness_may_not_switch_the_network_policy(tmp_path: Path) -> None:
    """#30: the network policy of each phase is the runtime's; a harness that switches it is refused."""
    detail = run_harness(tmp_path, OpensTheNetwork)
    attempt = detail["attempts"]["1"]
    assert "PermissionError" in str(attempt) and "network policy" in str(attempt), attempt
