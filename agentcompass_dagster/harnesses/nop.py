"""The `nop` harness: does nothing. It must score 0%; more means a task passes without any work."""

from __future__ import annotations

from typing import Any

from agentcompass_dagster.harnesses.base import Harness
from agentcompass_dagster.runtime.types import PreparedTask, RunResult


class NopHarness(Harness):
    async def run_task(self, prepared: PreparedTask, env: Any, benchmark: Any, plan: Any) -> RunResult:
        return RunResult()
