"""The `local` environment: each command is a subprocess of this machine in a fresh temp directory.

It isolates the tasks' files from each other, and nothing else: commands run as the runtime's own
user, with its rights on the host's files and processes (a command can read this process's
environment through /proc), and the host network. Use `sandbox` or `docker` for an agent you do not
trust. Only the host network policy is offered, so plans that ask for anything else are refused before
they run. Every process a task started is killed when its session ends (through a cgroup where this
process may make one, else its process group); the directories of a run that was killed are
removed by the next run, after a day where a resume could still attach to them.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import tempfile
from pathlib import Path

from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.contracts.environment import Environment, EnvironmentSession
from agentcompass_dagster.plugins.environments.cgroups import Cgroup, CgroupUnavailable, stale
from agentcompass_dagster.plugins.environments.hostdir import HostDirSession
from agentcompass_dagster.plugins.environments.leftovers import sweep_dead_sessions
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.runtime.store.safe_fs import remove_tree
from agentcompass_dagster.contracts.records import ExecutionPlan, TaskSpec

PREFIX = "agentcompass-"
# Its cgroups are named for it, so the sweeps of other kinds leave them alone.
OWNER = "local"


class LocalSession(HostDirSession):
    def __init__(self, root: Path, env: dict[str, str], path: str) -> None:
        # Private to this user; mkdir refuses a path someone planted in the shared temp directory.
        super().__init__(root, env, path, create_root=lambda: root.mkdir(mode=0o700))
        self._tried = False

    def cgroup_fds(self) -> list[int]:
        if not self._tried:
            # Made with the first command: a task that runs none pays nothing for it.
            self._tried = True
            try:
                self.cgroup = Cgroup.create(OWNER, self.root.name[len(PREFIX) :], None, None)
                self._join = self.cgroup.join_fds()
            except CgroupUnavailable:
                pass  # its process group still holds what does not call setsid
        return self._join

    def release_old(self, root: Path) -> list[str]:
        return _release_dead(root)


def _remove_dir(entry: Path) -> list[str]:
    """Only directories: a file of that name in the temp directory is not a session's."""
    return remove_tree(entry) if entry.is_dir() else []


def _release_dead(root: Path) -> list[str]:
    for group in stale(OWNER, root.name[len(PREFIX) :]):
        group.remove()
    return remove_tree(root)


class LocalEnvironment(Environment):
    gives_up = {
        "verifier_context": "the verifier keeps this machine's PATH, whose directories the agent's "
        "commands may write: they run as the same user",
        "verifier_uid": "every command runs as this process's user",
        "scratch_hidden": "the agent's commands run as the user who owns scratch",
    }

    def validate_plan(self, plan: ExecutionPlan) -> None:
        """Also refuses a plan that binds host directories into the environment (a harness's gateway or
        agent program): there is nothing to bind them into, and no verifier they could be hidden from."""
        super().validate_plan(plan)
        if plan.mounts:
            raise UserError(
                f"environment {self.config.id!r} (local) cannot mount {', '.join(m.path for m in plan.mounts)} "
                f"that harness {plan.harness_id!r} needs: run it in sandbox or docker"
            )

    def describe(self) -> str:
        return "local: a temp directory per task, commands as this user (no isolation beyond the files)"

    def __init__(self, config: EnvironmentConfig) -> None:
        super().__init__(config)
        self._base = Path(tempfile.gettempdir())
        self._swept = False

    async def open(self, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
        """A session whose directory is made on first use (no file work, and no thread, before that)."""
        if not self._swept:
            # Temp directories (and cgroups) of killed runs; the cgroups of those a resume may attach to stay.
            await asyncio.to_thread(sweep_dead_sessions, self._base, PREFIX, OWNER, _remove_dir)
            self._swept = True
        return self.new_session()

    def new_session(self) -> LocalSession:
        root = self._base / f"{PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
        return LocalSession(root, self.config.env, os.environ.get("PATH", "/usr/bin:/bin"))
