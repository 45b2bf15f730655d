"""The ``cli_agent`` harness: any agent program, installed into the task's environment and run there,
its every model call answered by the framework's model gateway (``gateway/``) for its attempt.

    # resources/harnesses/claude-code.yaml
    id: claude-code
    provider: cli_agent
    params:
      api: anthropic_messages
      install: ['npm install -g --prefix "$AGENTCOMPASS_AGENT_DIR" @anthropic-ai/claude-code@2.0.0']
      run: claude --print --dangerously-skip-permissions "$AGENTCOMPASS_INSTRUCTION"
      env: {ANTHROPIC_BASE_URL: "{gateway_url}", ANTHROPIC_API_KEY: "{token}", ANTHROPIC_MODEL: "{model}"}
      logs: ["$HOME/.claude"]

The agent never holds a credential: its key is a random token of its attempt, which the gateway maps to
that attempt's limits, budget and activity log and refuses once the attempt ends. It reaches the gateway
on its environment's loopback, through a forwarder to the gateway's unix socket, mounted into the
environment: under network ``none`` nothing else answers. See ``params.py`` for the declaration.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from agentcompass_dagster.contracts.declarations import EnvironmentConfig, HarnessConfig
from agentcompass_dagster.contracts.model import Model
from agentcompass_dagster.contracts.records import ExecutionPlan, HostMount, PreparedTask, TaskSpec
from agentcompass_dagster.contracts.errors import field_error
from agentcompass_dagster.gateway.forwarding import GATEWAY_DIR, install_forwarder
from agentcompass_dagster.gateway.server import ModelGateway
from agentcompass_dagster.plugins.harnesses.cli_agent.install import AGENT_DIR, PACKAGES_DIR, InstallCache, cache_root
from agentcompass_dagster.plugins.harnesses.cli_agent.params import CliAgentParams
from agentcompass_dagster.plugins.harnesses.cli_agent.session import CliAgentSession
from agentcompass_dagster.plugins.harnesses.durable_agent import DurableAgentHarness
from agentcompass_dagster.runtime.store.redact import register_url_passwords

if TYPE_CHECKING:
    from agentcompass_dagster.contracts.benchmark import Benchmark
    from agentcompass_dagster.contracts.environment import EnvironmentSession
    from agentcompass_dagster.contracts.harness import HarnessSession


class SharedGateway:
    """The gateway every attempt of the request uses, and its directory, made on first use (building
    a harness to validate a sweep starts nothing)."""

    def __init__(self, params: CliAgentParams) -> None:
        self.params = params
        self.directory: Path | None = None
        self.server: ModelGateway | None = None

    def mount(self) -> HostMount:
        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="agentcompass-gateway-"))
            self.directory.chmod(0o755)
            install_forwarder(self.directory)
            self.server = ModelGateway(
                self.directory,
                max_request_bytes=self.params.max_request_bytes,
                max_calls_per_s=self.params.max_calls_per_s,
            )
        return HostMount(host_path=self.directory, path=GATEWAY_DIR)

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


class CliAgentHarness(DurableAgentHarness):
    session_class: ClassVar[type[CliAgentSession]] = CliAgentSession
    params_model = CliAgentParams
    params: CliAgentParams

    def __init__(self, config: HarnessConfig, model: Model) -> None:
        super().__init__(config, model)
        if self.params.api is None:
            raise field_error(
                "harness.params.api",
                None,
                f"harness {config.id!r} cannot run through the model gateway: {self.params.unsupported}",
                config.file,
            )
        packages = config.resolve_path(self.params.packages) if self.params.packages is not None else None
        if packages is not None and not packages.is_dir():
            raise field_error("harness.params.packages", str(packages), "is not a directory", config.file)
        self.packages = packages
        self.cache = InstallCache(cache_root(), config.id, self.params.install, packages)
        self.shared = SharedGateway(self.params)
        # Staging installations by host path, with their cache keys (shared by the attempts' copies).
        self.staged: dict[Path, str] = {}

    @property
    def gateway(self) -> ModelGateway:
        assert self.shared.server is not None, "mounts() makes the gateway before any session starts"
        return self.shared.server

    def mounts(self, task: TaskSpec, environment: EnvironmentConfig, *, make: bool = True) -> list[HostMount]:
        packages = [HostMount(host_path=self.packages, path=PACKAGES_DIR)] if self.packages is not None else []
        if not make:  # where they would be: a first attempt's installation is writable
            return [
                HostMount(host_path=self.cache.root, path=GATEWAY_DIR),
                HostMount(host_path=self.cache.root, path=AGENT_DIR, read_only=False),
                *packages,
            ]
        key = self.cache.key(environment, task)
        agent = self.cache.mount(key)
        if not agent.read_only:
            self.staged[agent.host_path] = key
        return [self.shared.mount(), agent, *packages]

    def staging(self, plan: ExecutionPlan) -> Path | None:
        """The writable installation this attempt installs into, if it is the first in its image."""
        return next((m.host_path for m in plan.mounts if m.path == AGENT_DIR and not m.read_only), None)

    def cache_key(self, staging: Path) -> str:
        return self.staged[staging]

    def registry_env(self) -> dict[str, str]:
        """The host's variables the install commands get (``install_env``), each a secret to every record:
        a proxy's URL may hold its password."""
        passed = {name: os.environ[name] for name in self.params.install_env if name in os.environ}
        register_url_passwords(passed)
        return passed

    def model_name(self) -> str:
        return self.model.config.model or self.model.id

    def prelude(self) -> str:
        """Bash that gives a command the installation's variables."""
        packages = f" AGENTCOMPASS_PACKAGES={PACKAGES_DIR}" if self.packages is not None else ""
        return f'export AGENTCOMPASS_AGENT_DIR={AGENT_DIR} PATH="{AGENT_DIR}/bin:$PATH"{packages};'

    async def start_session(
        self, prepared: PreparedTask, env: EnvironmentSession, benchmark: Benchmark, plan: ExecutionPlan
    ) -> HarnessSession:
        await self.gateway.start()
        session = CliAgentSession(self, prepared, env, benchmark, plan)
        await session.install()
        await session.check_forwarder()
        return session

    async def close(self) -> None:
        await self.shared.close()
        for staging in list(self.staged):
            self.cache.discard(staging)
        self.staged.clear()
