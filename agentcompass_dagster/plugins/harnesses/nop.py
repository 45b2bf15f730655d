"""The `nop` harness: does nothing. It must score 0%; more means a task passes without any work."""

from __future__ import annotations

from agentcompass_dagster.contracts.harness import Harness, HarnessSession
from agentcompass_dagster.contracts.records import RunResult


class NopSession(HarnessSession):
    async def run(self) -> RunResult:
        return RunResult()


class NopHarness(Harness):
    session_class = NopSession
