"""The `sandbox` environment: every command runs under bubblewrap (bwrap), as an unprivileged user.

Each command gets fresh namespaces (mount, pid, ipc, uts; net with the `none` policy: loopback only):
the host's system directories read-only, the task's working dir, home and command-output dirs
read-write, the session's own /tmp, and nothing else of the host's files. When the runtime is root,
the command runs as ``uid`` (default 65534, nobody) with no capability and no_new_privs, so it cannot
mount, open files by handle, read 0600 host files or /etc/shadow, or reach what bwrap's root keeps.
The framework's private files (checks, tests, solutions, rewards: ``scratch``) are visible only to
commands run for the reference solution or the verifier (``Caller``); a verifier's command also gets a
/tmp of its own, not the one the agent's commands shared.

Every command runs under the seccomp filter of environments/seccomp.py (no keyrings, no new user
namespaces, no io_uring, ptrace, perf_event_open or bpf). bwrap's command line is sandbox_bwrap.py's;
the session's disk image and /tmp, and their release, are sandbox_storage.py's.

Limits, enforced by the kernel and fail closed (a plan declaring one this machine cannot enforce is
refused before it runs); hitting one ends the attempt with an error that names it:

    environment: {id: sandbox, params: {memory_mb: 2048, max_processes: 256, disk_mb: 4096, tmp_mb: 512}}

- ``memory_mb``, ``max_processes``: a cgroup per attempt (v2, or v1 memory and pids hierarchies); it
  also holds every process the attempt starts, so all of them are killed when the run phase ends and
  when the session closes (a double fork or ``setsid`` escapes a process group, not a cgroup).
- ``tmp_mb``: the session's /tmp, a tmpfs of that size (shared by the attempt's commands).
- ``disk_mb``: the session's directory is an ext4 image of that size, mounted for the attempt;
  ``max_files`` bounds its inodes (files and directories), so a tree of millions of empty entries,
  which no byte limit stops, fills the image instead of the host's disk.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import platform
import secrets
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.contracts.validation import validate_declaration
from agentcompass_dagster.contracts.environment import (
    Caller,
    Environment,
    EnvironmentLimitExceeded,
    EnvironmentSession,
    ExecResult,
)
from agentcompass_dagster.plugins.environments import seccomp
from agentcompass_dagster.plugins.environments.cgroups import Cgroup, CgroupUnavailable, stale
from agentcompass_dagster.plugins.environments.dockerfile import Expressed, Unsupported, express
from agentcompass_dagster.plugins.environments.host_mounts import give_writable
from agentcompass_dagster.plugins.environments.hostdir import HostDirSession
from agentcompass_dagster.plugins.environments.leftovers import sweep_dead_sessions
from agentcompass_dagster.plugins.environments.sandbox_bwrap import SYSTEM_DIRS, bwrap_command
from agentcompass_dagster.plugins.environments.sandbox_storage import (
    dead_files,
    is_full,
    mount_image,
    mount_tmp,
    release_root,
)
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.runtime.store.safe_fs import write_beneath
from agentcompass_dagster.contracts.records import ExecutionPlan, HostMount, NetworkPolicy, TaskEnvironment, TaskSpec

# Its cgroups are named for it, so the sweeps of other kinds leave them alone.
OWNER = "sandbox"
# The read end of the lifeline of the command exec() is starting (argv).
_LIFELINE: contextvars.ContextVar[int] = contextvars.ContextVar("sandbox_lifeline")


# Where the sessions' directories go unless a declaration says: $AGENTCOMPASS_SANDBOX_ROOT, else this. Not
# under /tmp: the sandbox's /tmp is private, so paths climbing out of the task directory would land in a
# writable tmpfs instead of failing on the read-only root.
ROOT_ENV = "AGENTCOMPASS_SANDBOX_ROOT"
DEFAULT_ROOT = Path("/var/tmp/agentcompass-sandbox")


def _default_root() -> Path:
    return Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT)


class SandboxParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    root_dir: Path = Field(default_factory=_default_root)
    path: str = "/usr/local/bin:/usr/bin:/bin"
    memory_mb: int | None = Field(default=None, ge=16)
    max_processes: int | None = Field(default=None, ge=8)
    disk_mb: int | None = Field(default=None, ge=16)
    max_files: int | None = Field(default=None, ge=64)
    tmp_mb: int = Field(default=512, ge=1)
    uid: int = Field(default=65534, ge=1)
    gid: int = Field(default=65534, ge=1)
    read_only: list[str] = Field(default_factory=list)


def _privileged() -> bool:
    return os.geteuid() == 0


class Applied(BaseModel):
    """What a session gives the task of its asks and the sweep's limits (``describe``)."""

    memory_mb: int | None = None
    disk_mb: int | None = None
    record: dict[str, Any] = Field(default_factory=dict)


class SandboxSession(HostDirSession):
    def __init__(
        self,
        root: Path,
        config: EnvironmentConfig,
        params: SandboxParams,
        policy: NetworkPolicy,
        cgroup: Cgroup | None,
        host_tmp: bool,
        image: Path | None,
        applied: Applied,
        asks: TaskEnvironment | None = None,
        expressed: Expressed | None = None,
        host_mounts: Sequence[HostMount] = (),
    ) -> None:
        self.params = params
        # The plan's host directories, bound into the agent's and the reference's commands only.
        self.host_mounts = tuple(host_mounts)
        self.policy = policy
        # A tmpfs the host mounted at <root>/tmp (as root): the host sees it fill.
        self.host_tmp = host_tmp
        self.image = image
        self.applied = applied
        super().__init__(root, config.env, params.path, (params.uid, params.gid) if _privileged() else None, cgroup)
        if asks is not None:
            self.map_task(asks.workdir or (expressed.workdir if expressed else None), asks.dirs)
            self.env.update({**(expressed.env if expressed else {}), **asks.env})
            applied.record["workdir"] = self.workdir
        self.make_dirs()
        give_writable(self.host_mounts, self.owner)
        for copy in expressed.files if expressed else []:
            write_beneath(
                self.root,
                f"{self.work}/{copy.target}",
                copy.source.read_bytes(),
                copy.source.stat().st_mode & 0o777,
                self.owner,
            )

    def describe(self) -> dict[str, Any]:
        return self.applied.record

    def tmpdir(self) -> str:
        return "/tmp"

    def verifier_tmpdir(self, fresh: str) -> str:
        return "/tmp"

    def child_fds(self) -> list[int]:
        return [seccomp.filter_fd(), os.dup(_LIFELINE.get())]

    def argv(self, command: str, cwd: str, caller: Caller, fds: list[int]) -> list[str]:
        # bwrap's parent-death signals leave two gaps, and a command's lifeline (a pipe only this process
        # holds the write end of, until the command has ended; its read end is fds[1]) closes both:
        # - its outer process, killed with the runtime after it cloned the namespace's first process but
        #   before it let that process go on, leaves that one blocked for good (PPID 1, holding the
        #   session's mounts; CI under load: a killed run's `bwrap` outlived it). A watcher outside the
        #   namespace, which no sandboxed process can see or signal, kills the command's process group
        #   at EOF, which that process is still in (it leaves it, setsid, only once let go);
        # - the namespace sets its own death signal only after that: a runtime killed in between leaves
        #   it running. A watcher inside (bwrap()) kills every process of the namespace at EOF.
        lifeline = fds[1]
        watcher = f"{{ read -r -u {lifeline} _; kill -KILL 0; }} </dev/null >/dev/null 2>&1 & "
        return ["bash", "-c", watcher + f"exec {shlex.join(self.bwrap(command, cwd, caller, fds))}"]

    def bwrap(self, command: str, cwd: str, caller: Caller, fds: list[int]) -> list[str]:
        """bwrap's command line running ``command`` in this session's sandbox (fds: child_fds()), as
        sandbox_bwrap.py builds it."""
        return bwrap_command(self, command, cwd, caller, fds)

    async def exec(
        self,
        command: str,
        *,
        timeout_s: float | None = None,
        cwd: str | None = None,
        caller: Caller = Caller.agent,
        label: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        # The command's lifeline (argv): its write end closes when the command has ended, or when this
        # process dies, however; its read end goes to the child (child_fds, in this task's context).
        read_end, write_end = os.pipe()
        token = _LIFELINE.set(read_end)
        try:
            result = await super().exec(command, timeout_s=timeout_s, cwd=cwd, caller=caller, label=label, env=env)
        finally:
            _LIFELINE.reset(token)
            os.close(read_end)
            os.close(write_end)
        if result.timed_out:
            result.stderr += f"\n[sandbox] killed: the command passed its time limit of {timeout_s}s\n"
        hits = await asyncio.to_thread(self._limits_hit)
        if hits:
            raise EnvironmentLimitExceeded("; ".join(hits))
        return result

    def _limits_hit(self) -> list[str]:
        hits = self.cgroup.limits_hit() if self.cgroup is not None else []
        disk = self.applied.disk_mb
        if disk is not None and is_full(self.root):
            hits.append(f"disk_mb={disk}: the task's files filled all {disk} MB")
        if self.params.max_files is not None and os.statvfs(self.root).f_favail == 0:
            hits.append(f"max_files={self.params.max_files}: the task made all {self.params.max_files} files it may")
        if self.host_tmp and is_full(self.root / "tmp"):
            hits.append(f"tmp_mb={self.params.tmp_mb}: the attempt filled all {self.params.tmp_mb} MB of /tmp")
        return hits

    async def set_network_policy(self, policy: NetworkPolicy) -> None:
        self.policy = policy

    def remove_files(self) -> list[str]:
        return release_root(self.root, self.image)

    def release_old(self, root: Path) -> list[str]:
        return _release_dead(root)


def _release_dead(root: Path) -> list[str]:
    """What a dead session left at ``root``: its cgroup, mounts, directory and disk image."""
    for group in stale(OWNER, root.name):
        group.remove()
    return dead_files(root)


class SandboxEnvironment(Environment):
    supported_policies = frozenset({NetworkPolicy.host, NetworkPolicy.none})
    can_switch_network = True
    gives_up = {"verifier_uid": "every command runs as its one uid (the verifier has its own namespaces, HOME, /tmp)"}
    _probed: dict[tuple[bool, bool], str | None] = {}

    def __init__(self, config: EnvironmentConfig) -> None:
        super().__init__(config)
        self.params = validate_declaration(SandboxParams, config.params, config.file, "environment.params")

    def validate_plan(self, plan: ExecutionPlan) -> None:
        super().validate_plan(plan)
        if shutil.which("bwrap") is None:
            raise UserError(
                f"environment.id={self.config.id!r}: the sandbox needs bubblewrap (`bwrap`), which is "
                "not installed here (Debian: apt-get install bubblewrap)"
            )
        if not seccomp.supported():
            raise UserError(
                f"environment.id={self.config.id!r}: the sandbox's seccomp filter knows x86_64 and "
                f"aarch64, not this machine's {platform.machine()}"
            )
        if _privileged() and shutil.which("setpriv") is None:
            raise UserError(
                f"environment.id={self.config.id!r}: as root the sandbox drops to an unprivileged user "
                "with `setpriv` (util-linux), which is not installed here"
            )
        problem = self._cgroup_problem()
        if problem is not None:
            declared = {k: getattr(self.params, k) for k in ("memory_mb", "max_processes") if getattr(self.params, k)}
            name, value = next(iter(declared.items()))
            raise UserError(f"environment.params.{name}={value!r}: this machine cannot enforce it: {problem}")
        if self.params.max_files is not None and self.params.disk_mb is None:
            raise UserError(
                f"environment.params.max_files={self.params.max_files!r}: bounds the files of the disk "
                "image that disk_mb declares; declare disk_mb too"
            )
        for mount in plan.mounts:
            if mount.path.split("/")[1] in self._taken():
                raise UserError(
                    f"mount {mount.path}: lies over the host's /{mount.path.split('/')[1]}; run it in docker"
                )
        if self.params.disk_mb is not None and not (_privileged() and shutil.which("mkfs.ext4")):
            raise UserError(
                f"environment.params.disk_mb={self.params.disk_mb!r}: this machine cannot enforce it "
                "(it takes root and mkfs.ext4 to mount a disk image per attempt)"
            )

    def _cgroup_problem(self) -> str | None:
        """Whether the declared memory and process limits can be enforced here (probed once)."""
        wanted = (self.params.memory_mb is not None, self.params.max_processes is not None)
        if not any(wanted):
            return None
        if wanted not in self._probed:
            try:
                Cgroup.create(
                    OWNER,
                    f"{os.getpid()}-probe-{secrets.token_hex(3)}",
                    64 if wanted[0] else None,
                    64 if wanted[1] else None,
                ).remove()
                self._probed[wanted] = None
            except CgroupUnavailable as exc:
                self._probed[wanted] = str(exc)
        return self._probed[wanted]

    def describe(self) -> str:
        who = f"uid {self.params.uid} without capabilities" if _privileged() else "this user"
        limits = [f"/tmp {self.params.tmp_mb} MB (tmpfs)"]
        if self.params.memory_mb:
            limits.append(f"memory {self.params.memory_mb} MB (cgroup)")
        if self.params.max_processes:
            limits.append(f"{self.params.max_processes} processes (cgroup)")
        if self.params.disk_mb:
            limits.append(f"disk {self.params.disk_mb} MB (ext4 image)")
        if self.params.max_files:
            limits.append(f"{self.params.max_files} files")
        return f"sandbox: bubblewrap, commands as {who}; limits enforced: {', '.join(limits)}"

    def refusal(self, task: TaskSpec) -> str | None:
        """A task whose environment the sandbox can give it: no image of its own, or a Dockerfile it can
        express (dockerfile.py), and paths that do not lie over the host's system directories."""
        asks = task.environment
        if asks is None:
            return None
        if asks.image is not None:
            return f"needs its own image {asks.image!r} ([environment] docker_image): run it in docker"
        workdir = asks.workdir
        if asks.build_context is not None:
            try:
                workdir = workdir or express(asks.build_context, asks.dockerfile).workdir
            except (Unsupported, OSError, UnicodeDecodeError) as exc:
                return f"needs its own image (environment/{asks.dockerfile}: {exc}): run it in docker"
        taken = self._taken()
        for path in [workdir, *(d.path for d in asks.dirs)]:
            if path is not None and (path == "/" or path.split("/")[1] in taken):
                return f"needs {path}, which lies over the host's /{path.split('/')[1]} here: run it in docker"
        return None

    def _taken(self) -> set[str]:
        """What every command sees of the host (and where the sessions lie): no task path nor mount covers it."""
        return {*SYSTEM_DIRS, "tmp", "proc", "dev", self.params.root_dir.parts[1]}

    async def open(self, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
        return await asyncio.to_thread(self._create, plan.baseline_network_policy, task.environment, plan.mounts)

    def _create(
        self, policy: NetworkPolicy, asks: TaskEnvironment | None, mounts: Sequence[HostMount]
    ) -> SandboxSession:
        params = self.params
        root_dir = params.root_dir
        root_dir.mkdir(parents=True, exist_ok=True)
        sweep_dead_sessions(root_dir, "", OWNER, dead_files)
        name = f"{os.getpid()}-{secrets.token_hex(6)}"
        root = root_dir / name
        root.mkdir(mode=0o711)
        image: Path | None = None
        cgroup: Cgroup | None = None
        expressed = express(asks.build_context, asks.dockerfile) if asks and asks.build_context else None
        applied = self._applied(asks, expressed)
        try:
            if applied.disk_mb is not None:
                image = root_dir / f"{name}.img"
                mount_image(image, root, applied.disk_mb, params.max_files)
                os.chmod(root, 0o711)
            if _privileged():
                mount_tmp(root, params.tmp_mb)
            if applied.memory_mb is not None or params.max_processes is not None:
                try:
                    cgroup = Cgroup.create(OWNER, name, applied.memory_mb, params.max_processes)
                except CgroupUnavailable as exc:
                    if params.memory_mb is not None or params.max_processes is not None:
                        raise  # the sweep's own limit, which validate_plan found enforceable
                    applied.record["memory_mb"] = f"{applied.memory_mb} asked by the task, not enforced here: {exc}"
            return SandboxSession(
                root, self.config, params, policy, cgroup, _privileged(), image, applied, asks, expressed, mounts
            )
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            release_root(root, image)
            raise

    def _applied(self, asks: TaskEnvironment | None, expressed: Expressed | None) -> Applied:
        """The limits of a session: the task's asks where it makes them (its memory, its storage), else
        the sweep's; and the record of where each came from and what the sandbox could not enforce."""
        params = self.params
        if asks is None:
            return Applied(memory_mb=params.memory_mb, disk_mb=params.disk_mb)
        record: dict[str, Any] = {}
        memory = asks.memory_mb or params.memory_mb
        if memory is not None:
            record["memory_mb"] = f"{memory} ({'the task' if asks.memory_mb else 'the sweep'})"
        disk = asks.storage_mb or params.disk_mb
        if asks.storage_mb is not None and params.disk_mb is None and not (_privileged() and shutil.which("mkfs.ext4")):
            record["storage_mb"] = (
                f"{asks.storage_mb} asked by the task, not enforced here (it takes root and mkfs.ext4)"
            )
            disk = None
        elif disk is not None:
            record["storage_mb"] = f"{disk} ({'the task' if asks.storage_mb else 'the sweep'}, an ext4 image)"
        if asks.cpus is not None:
            record["cpus"] = f"{asks.cpus:g} asked by the task, not enforced here (the sandbox bounds no CPU time)"
        if asks.agent_user is not None or asks.verifier_user is not None:
            record["users"] = (
                f"the task's {asks.agent_user!r} and {asks.verifier_user!r} not applied: every command "
                f"runs as the sandbox's uid {params.uid}"
            )
        if expressed is not None:
            record["base_image"] = (
                f"{expressed.base}: the host's system stands in for it (the sandbox builds no "
                "image; its Dockerfile's WORKDIR, ENV and COPY are applied)"
            )
        return Applied(memory_mb=memory, disk_mb=disk, record=record)
