"""The `local` environment: each command is a subprocess of this machine in a fresh temp directory.

It isolates files between tasks, not processes or the network: only the host network policy is
offered, so plans that ask for anything else are refused before they run.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

from agentcompass_dagster.environments.base import Environment, EnvironmentSession
from agentcompass_dagster.environments.hostdir import HostDirSession
from agentcompass_dagster.runtime.types import ExecutionPlan, TaskSpec


class LocalEnvironment(Environment):
    async def open(self, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
        return await asyncio.to_thread(self._create)

    def _create(self) -> HostDirSession:
        root = Path(tempfile.mkdtemp(prefix="agentcompass-"))
        try:
            return HostDirSession(root, self.config.env, os.environ.get("PATH", "/usr/bin:/bin"))
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
