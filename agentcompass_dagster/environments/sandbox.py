"""The `sandbox` environment: every command runs under bubblewrap (bwrap).

Each command gets a fresh set of namespaces: the host's system directories read-only, the task's
directory (working dir, home, scratch) read-write, a private /tmp, nothing else of the host's files, its
own process tree (killed whole when the command ends or times out), and with the `none` policy no
network but loopback. Because every command starts a new namespace, the network policy can change
between phases (baseline, run, evaluation) of one attempt.

    environment: {id: sandbox, params: {memory_mb: 2048, max_processes: 256}}
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import threading
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from agentcompass_dagster.config import EnvironmentConfig, validate_declaration
from agentcompass_dagster.environments.base import Environment, EnvironmentSession, ExecResult
from agentcompass_dagster.runtime.processes import process_alive
from agentcompass_dagster.environments.hostdir import HostDirSession
from agentcompass_dagster.errors import UserError
from agentcompass_dagster.runtime.types import ExecutionPlan, NetworkPolicy, TaskSpec

SYSTEM_DIRS = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64")
MEMORY_SIGNS = ("Cannot allocate memory", "MemoryError", "out of memory")


class SandboxParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Not under /tmp: the sandbox's /tmp is private, so paths climbing out of the task directory would
    # land in a writable tmpfs instead of failing on the read-only root.
    root_dir: Path = Path("/var/tmp/agentcompass-sandbox")
    path: str = "/usr/local/bin:/usr/bin:/bin"
    memory_mb: int | None = Field(default=None, ge=16)
    max_processes: int | None = Field(default=None, ge=1)
    read_only: list[str] = Field(default_factory=list)


class SandboxSession(HostDirSession):
    def __init__(self, root: Path, config: EnvironmentConfig, params: SandboxParams, policy: NetworkPolicy) -> None:
        super().__init__(root, config.env, params.path)
        os.makedirs(self.scratch)
        os.makedirs(self.home)
        self.params = params
        self.policy = policy

    def argv(self, command: str, cwd: str) -> list[str]:
        args = ["bwrap"]
        for name in SYSTEM_DIRS:
            host = Path("/") / name
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), str(host)]
            elif host.is_dir():
                args += ["--ro-bind", str(host), str(host)]
        for path in self.params.read_only:
            args += ["--ro-bind", path, path]
        args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--bind", str(self.root), str(self.root),
                 "--remount-ro", "/", "--chdir", cwd, "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                 "--die-with-parent", "--new-session"]
        if self.policy is NetworkPolicy.none:
            args.append("--unshare-net")
        limits = []
        if self.params.memory_mb:
            limits.append(f"ulimit -v {self.params.memory_mb * 1024}")
        if self.params.max_processes:
            limits.append(f"ulimit -u {self.params.max_processes}")
        script = "; ".join([*limits, command]) if limits else command
        return [*args, "--", "bash", "-c", script]

    async def exec(self, command: str, *, timeout_s: float | None = None, cwd: str | None = None) -> ExecResult:
        result = await super().exec(command, timeout_s=timeout_s, cwd=cwd)
        if result.timed_out:
            result.stderr += f"\n[sandbox] killed: the command passed its time limit of {timeout_s}s\n"
        elif self.params.memory_mb and result.exit_code != 0 and any(s in result.output for s in MEMORY_SIGNS):
            result.stderr += f"\n[sandbox] the command hit its memory limit of {self.params.memory_mb} MB\n"
        return result

    async def set_network_policy(self, policy: NetworkPolicy) -> None:
        self.policy = policy


_swept: set[Path] = set()
_sweep_lock = threading.Lock()


def _remove_stale(root_dir: Path) -> None:
    """Task directories left by a process that died without closing them (SIGKILL): named <pid>-..."""
    with _sweep_lock:
        if root_dir in _swept:
            return
        _swept.add(root_dir)
    for entry in root_dir.iterdir() if root_dir.is_dir() else []:
        pid = entry.name.partition("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


class SandboxEnvironment(Environment):
    supported_policies = frozenset({NetworkPolicy.host, NetworkPolicy.none})
    can_switch_network = True

    def __init__(self, config: EnvironmentConfig) -> None:
        super().__init__(config)
        self.params = validate_declaration(SandboxParams, config.params, "environment.params")

    def validate_plan(self, plan: ExecutionPlan) -> None:
        super().validate_plan(plan)
        if shutil.which("bwrap") is None:
            raise UserError(f"environment.id={self.config.id!r}: the sandbox needs bubblewrap (`bwrap`), which is "
                            "not installed here (Debian: apt-get install bubblewrap)")

    async def open(self, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
        return await asyncio.to_thread(self._create, plan.baseline_network_policy)

    def _create(self, policy: NetworkPolicy) -> SandboxSession:
        root_dir = self.params.root_dir
        root_dir.mkdir(parents=True, exist_ok=True)
        _remove_stale(root_dir)
        root = root_dir / f"{os.getpid()}-{secrets.token_hex(6)}"
        root.mkdir()
        try:
            return SandboxSession(root, self.config, self.params, policy)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
