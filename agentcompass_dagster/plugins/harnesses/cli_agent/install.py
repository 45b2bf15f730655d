"""The agent program's installation, made once per environment image and shared read-only.

The first attempt in an environment image whose cache holds no installation gets a writable staging
directory at AGENT_DIR and runs the declaration's ``install`` commands into it before the agent starts
(the baseline phase); the host then copies what they installed into the cache (symlinks copied as links,
never followed) and renames it into place, so the copy is what the commands made, not what the agent
does to its own staging copy afterwards. Every later attempt in that image mounts the cached copy
read-only. Two first attempts at once both install; the first rename wins.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.contracts.records import HostMount, TaskSpec

AGENT_DIR = "/opt/agentcompass/agent"
PACKAGES_DIR = "/opt/agentcompass/packages"
CACHE_ENV = "AGENTCOMPASS_AGENT_CACHE"


def cache_root() -> Path:
    """Where installations are kept: $AGENTCOMPASS_AGENT_CACHE, else ~/.cache/agentcompass/agents."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "agentcompass" / "agents"


class InstallCache:
    def __init__(self, root: Path, agent_id: str, install: list[str], packages: Path | None) -> None:
        self.root = root
        self.agent_id = agent_id
        self.install = install
        self.packages = packages

    def key(self, environment: EnvironmentConfig, task: TaskSpec) -> str:
        """The installation's identity: the agent's install commands and packages, and the environment
        image they ran in (the provider's declaration, and the task's own image where it has one)."""
        image = {
            "provider": environment.provider_id,
            "params": environment.params,
            "task": task.environment.model_dump(mode="json") if task.environment is not None else None,
        }
        text = json.dumps([self.install, str(self.packages), image], sort_keys=True, default=str)
        return f"{self.agent_id}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"

    def mount(self, key: str) -> HostMount:
        """The cached installation read-only, or a new staging directory to install into."""
        ready = self.root / key
        if not self.install or ready.is_dir():
            ready.mkdir(parents=True, exist_ok=True)
            return HostMount(host_path=ready, path=AGENT_DIR, read_only=True)
        staging = self.root / ".staging"
        staging.mkdir(parents=True, exist_ok=True)
        return HostMount(
            host_path=Path(tempfile.mkdtemp(prefix=f"{key}.", dir=staging)), path=AGENT_DIR, read_only=False
        )

    def publish(self, staging: Path, key: str) -> None:
        """Keep what the install commands put in ``staging`` as the image's installation."""
        copy = Path(tempfile.mkdtemp(prefix=f"{key}.publish.", dir=self.root / ".staging"))
        shutil.copytree(staging, copy, symlinks=True, dirs_exist_ok=True)
        copy.chmod(0o755)  # the host's copy, mounted read-only for the environment's unprivileged user
        try:
            copy.rename(self.root / key)
        except OSError:  # another attempt published first
            shutil.rmtree(copy, ignore_errors=True)

    @staticmethod
    def discard(staging: Path) -> None:
        shutil.rmtree(staging, ignore_errors=True)
