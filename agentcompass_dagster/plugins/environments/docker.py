"""The `docker` environment: one container per task attempt on a Docker engine, `docker exec` per command.

    environment:
      id: docker
      params: {image: "python:3.12-slim", memory_mb: 2048, max_processes: 256, disk_mb: 4096, max_files: 200000,
               tmp_mb: 512, cpus: 2, pull: false, mounts: [{source: /data/x, target: /data, read_only: true}]}

A task that asks for its own environment (``TaskSpec.environment``: Harbor's tasks) runs in its own image,
built by the engine from its build context once per digest (environments/images.py) or the prebuilt one it
names, with the image's WORKDIR (or the task's) as the working directory, given to the agent, a writable
filesystem as under Harbor, its directories at their paths owned by whom they are for, its resources over
the declared ones; what was applied is the session's record (``describe``). Any other task runs in the
declared ``image``, read-only, its files in the /work volume. How each container is laid out, and what
bounds the directories the agent writes, is docker_setup.py's; docker_container.py creates it on the engine.
The plan's mounts (a harness's gateway socket, its agent program) are binds of the
container, hidden from the verifier's commands as docker_mounts.py says.

The container runs with the plan's baseline network (`none`, or `host`); a running container cannot
change network, so a plan whose phases differ is refused (R-NET-1). The agent's commands run as ``uid``
(default 65534); the framework's private /scratch (checks, solutions, the verifier's homes) belongs to
the verifier's own user (VERIFIER_UID, never root nor the agent's) with mode 0700, and only commands run
for the reference (as root) or the verifier see it. A verifier's command gets a HOME and TMPDIR made new
for it in /scratch, a PATH of system directories (the task's image's own, where it has one) and Python
without user site-packages: nothing the agent planted in its home runs in the check, and nothing it runs
there runs as root. Every command's output is read as it comes, its head and tail kept
(contracts/capture.py). ``memory_mb`` and ``max_processes`` become the container's memory and pids
limits; a command that hits one, or fills a bounded directory, ends the attempt with a failure naming the
limit (memory and processes read from the container's cgroup where this machine runs the engine). PID 1
is the engine's init, which reaps the agent's orphans; what the agent leaves is stopped as
docker_limits.py says. Containers carry labels naming this process; at the first open, containers left
by a process that no longer runs (a killed run) are removed. Close removes the container and is
idempotent, also after a failed start.
"""

from __future__ import annotations

import asyncio
import io
import os
import secrets
import shlex
import tarfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.contracts.validation import validate_declaration
from agentcompass_dagster.contracts.environment import (
    Caller,
    Environment,
    EnvironmentLimitExceeded,
    EnvironmentSession,
    ExecResult,
    verifier_env,
)
from agentcompass_dagster.plugins.environments.cgroups import Cgroup
from agentcompass_dagster.plugins.environments.docker_exec import run_command
from agentcompass_dagster.plugins.environments.docker_container import create_container, first_line, remove_container
from agentcompass_dagster.plugins.environments.docker_limits import CLEAR, full_mounts, stop
from agentcompass_dagster.plugins.environments.docker_setup import (
    BUILD_LOG,
    COMMANDS,
    HOME,
    started_layout,
    SCRATCH,
    DockerParams,
    Layout,
    Setup,
    plain_setup,
    task_setup,
)
from agentcompass_dagster.plugins.environments.docker_mounts import HiddenMounts
from agentcompass_dagster.plugins.environments.host_mounts import give_writable
from agentcompass_dagster.plugins.environments.leftovers import sweep_dead_containers
from agentcompass_dagster.plugins.environments.images import BuiltImage, ensure_image, prebuilt_image
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.contracts.capture import OUTPUT_LIMIT, READ_CHUNK, Capture
from agentcompass_dagster.contracts.records import ExecutionPlan, NetworkPolicy, TaskSpec

# The most of one file streamed from the engine for read_output (a sparse terabyte costs the agent nothing).
STREAM_LIMIT = 256 * OUTPUT_LIMIT
# After the setup: the container's own command (docker_limits.KEEPER), the one child of its init.
KEEPER_PID = "cat /proc/1/task/1/children"


def _client() -> Any:
    import docker

    return docker.from_env()


class DockerSession(EnvironmentSession):
    scratch = SCRATCH
    commands_dir = COMMANDS

    def __init__(
        self,
        container: Any,
        setup: Setup,
        params: DockerParams,
        layout: Layout,
        keeper: int,
        mounts: HiddenMounts | None = None,
    ) -> None:
        self.container = container
        self.mounts = mounts
        self.params = params
        self.layout = layout
        self.workdir = layout.workdir
        self.env = {"HOME": HOME, "LANG": "C.UTF-8", "TMPDIR": "/tmp", **setup.env}
        self.record = setup.record
        self.keeper = keeper
        self.clear_shared = setup.clear_shared
        # Mounts the agent can fill -> the limit that bounds them.
        self.watched = {**dict.fromkeys(setup.tmpfs, "tmp_mb"), **dict.fromkeys(setup.bounded, "disk_mb")}
        self._closed = False
        self._cgroup = _container_cgroup(container, setup.memory_mb, params.max_processes)

    def describe(self) -> dict[str, Any]:
        return self.record

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
        started = time.monotonic()
        if self.mounts is not None:
            await asyncio.to_thread(self.mounts.show, caller is not Caller.verifier)
        script = f"timeout -s KILL {timeout_s} bash -c {shlex.quote(command)}" if timeout_s else command
        home = self.layout.homes.get(caller.value)
        variables = {**self.env, **({"HOME": home} if home else {}), **(env or {})}
        if caller is Caller.verifier:
            fresh = f"{SCRATCH}/verifier-{secrets.token_hex(6)}"
            # Made by the verifier's own command (it owns /scratch): no extra trip to the engine.
            script = f"mkdir -m 0700 {fresh} {fresh}/home {fresh}/tmp && {script}"
            # The task's own verifier variables may set its PATH; nothing the agent could have written does.
            path = env["PATH"] if env and "PATH" in env else self.layout.verifier_path
            variables = verifier_env({**variables, "PATH": path}, home or f"{fresh}/home", f"{fresh}/tmp")
        user = self.layout.users.of(caller.value)
        exit_code, stdout, stderr = await run_command(
            self.container, ["bash", "-c", script], user, cwd or self.workdir, variables
        )
        timed_out = bool(timeout_s and exit_code == 137 and time.monotonic() - started >= timeout_s)
        hits = await asyncio.to_thread(self._limits_hit)
        if hits:
            raise EnvironmentLimitExceeded("; ".join(hits))
        result = ExecResult.captured(exit_code, stdout, stderr, time.monotonic() - started, timed_out)
        if timed_out:
            result.stderr += f"\n[docker] killed: the command passed its time limit of {timeout_s}s\n"
        return result

    def _limits_hit(self) -> list[str]:
        hits = self._cgroup.limits_hit() if self._cgroup is not None else []
        return hits + full_mounts(self.container, self.watched, self.params)

    async def stop_processes(self) -> None:
        """Everything but the container's init and keeper, killed with bash's builtins (docker_limits.py;
        an image need not have a kill binary: with none, the agent's processes lived on while its work was
        checked); a limit they hit since the agent's last command named (its failure); then /tmp and
        /dev/shm emptied where the verifier would share them with the agent. A process still alive, with
        no limit hit, is an error of the infrastructure."""
        stopped = await asyncio.to_thread(stop, self.container, self.keeper)
        hits = await asyncio.to_thread(self._limits_hit)
        if hits:
            raise EnvironmentLimitExceeded("; ".join(hits))
        _succeeded(stopped, self.container, "stopped")
        if self.clear_shared:
            _succeeded(
                await asyncio.to_thread(self.container.exec_run, CLEAR, user="0:0"),
                self.container,
                "cleared of what they left in /tmp and /dev/shm",
            )

    def _absolute(self, path: str) -> PurePosixPath:
        return PurePosixPath(path) if path.startswith("/") else PurePosixPath(self.workdir) / path

    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        import docker.errors

        target = self._absolute(path)
        roots = [root for root in self.layout.owners if target.is_relative_to(root) and target != PurePosixPath(root)]
        if not roots:
            raise PermissionError(f"{path}: only files under {', '.join(sorted(self.layout.owners))} can be written")
        root = max(roots, key=len)
        owner = self.layout.owners[root]
        buffer = io.BytesIO()
        relative = target.relative_to(root)
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for parent in reversed(relative.parents[:-1]):
                directory = tarfile.TarInfo(str(parent))
                directory.type, directory.mode = tarfile.DIRTYPE, 0o755
                directory.uid, directory.gid = owner
                archive.addfile(directory)
            info = tarfile.TarInfo(str(relative))
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            info.uid, info.gid = owner
            archive.addfile(info, io.BytesIO(data))
        try:
            await asyncio.to_thread(self.container.put_archive, root, buffer.getvalue())
        except docker.errors.APIError:
            # What the agent left filled the directory: its failure, not the framework's.
            hits = await asyncio.to_thread(self._limits_hit)
            if hits:
                raise EnvironmentLimitExceeded("; ".join(hits)) from None
            raise

    async def read_file(self, path: str) -> bytes:
        import docker.errors

        try:
            stream, _ = await asyncio.to_thread(self.container.get_archive, str(self._absolute(path)))
        except docker.errors.NotFound:
            raise FileNotFoundError(path) from None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            member = archive.next()
            extracted = archive.extractfile(member) if member is not None else None
            if extracted is None:
                raise FileNotFoundError(path)
            return extracted.read()

    async def read_output(self, path: str) -> Capture:
        return await asyncio.to_thread(self._read_output, str(self._absolute(path)))

    def _read_output(self, path: str) -> Capture:
        """The file's ends, its archive read as the engine streams it (a link is no file: refused)."""
        import docker.errors

        try:
            chunks, _ = self.container.get_archive(path)
        except docker.errors.NotFound:
            raise FileNotFoundError(path) from None
        with tarfile.open(fileobj=io.BufferedReader(_Chunks(chunks)), mode="r|") as archive:
            member = archive.next()
            extracted = archive.extractfile(member) if member is not None else None
            if member is None or extracted is None:
                raise FileNotFoundError(path)
            capture = Capture()
            while capture.total < STREAM_LIMIT and (chunk := extracted.read(READ_CHUNK)):
                capture.add(chunk)
            # The agent can make the file any size (a sparse terabyte costs it nothing): past the limit the
            # rest is counted, not streamed, and its tail is not kept.
            if member.size > capture.total:
                capture.skip(member.size - capture.total)
                chunks.close()
            return capture

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.shield(asyncio.to_thread(remove_container, self.container))


class _Chunks(io.RawIOBase):
    """The chunks an engine's response yields, as a file read in order."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self._chunks, b"")
            if not chunk:
                return 0
            self._pending = memoryview(chunk)
        count = min(len(buffer), len(self._pending))
        buffer[:count] = self._pending[:count]
        self._pending = self._pending[count:]
        return count


def _container_cgroup(container: Any, memory_mb: int | None, max_processes: int | None) -> Cgroup | None:
    """The container's cgroup, found through its init process on this host (None when the engine runs
    elsewhere): its counters say which limit a command hit."""
    if memory_mb is None and max_processes is None:
        return None
    try:
        container.reload()
        pid = int(container.attrs["State"]["Pid"])
    except (KeyError, ValueError, TypeError):
        return None
    return Cgroup.of_process(pid, container.name, memory_mb, max_processes)


def _succeeded(result: Any, container: Any, what: str) -> None:
    if result.exit_code != 0:
        raise RuntimeError(
            f"the agent's processes in container {container.name} could not be {what}: "
            f"{(result.output or b'').decode(errors='replace').strip()[:300]}"
        )


class DockerEnvironment(Environment):
    supported_policies = frozenset({NetworkPolicy.none, NetworkPolicy.host})
    can_switch_network = False

    def __init__(self, config: EnvironmentConfig) -> None:
        super().__init__(config)
        self.params = validate_declaration(DockerParams, config.params, config.file, "environment.params")
        self._docker: Any = None
        self._cpus: int | None = None

    @property
    def client(self) -> Any:
        """One client (and connection pool) per environment, made on first use."""
        if self._docker is None:
            self._docker = _client()
        return self._docker

    def validate_plan(self, plan: ExecutionPlan) -> None:
        super().validate_plan(plan)
        engine = os.environ.get("DOCKER_HOST", "the default socket")
        if plan.mounts and os.geteuid() != 0:
            raise UserError(
                f"environment.id={self.config.id!r}: harness {plan.harness_id!r} mounts "
                f"{', '.join(m.path for m in plan.mounts)}, which the host hides from the verifier's "
                "commands as root (docker_mounts.py), and this process is not root: run it in sandbox"
            )
        try:
            self.client.ping()
        except Exception as exc:
            raise UserError(
                f"environment.id={self.config.id!r}: no Docker engine answers at {engine}: {first_line(exc)}"
            ) from None
        if self.params.image is None:
            return
        try:
            self.client.images.get(self.params.image)
        except Exception as exc:
            raise UserError(
                f"environment.params.image={self.params.image!r}: not usable on the Docker engine at "
                f"{engine}: {first_line(exc)}"
            ) from None

    def refusal(self, task: TaskSpec) -> str | None:
        """Every task runs here: in its own image (built from its Dockerfile, or the one it names), else
        in the sweep's ``image``, which a task without one of its own needs."""
        if self.params.image is None and (task.environment is None or not task.environment.has_image):
            return (
                f"has no image of its own and environment {self.config.id!r} declares none (environment.params.image)"
            )
        return None

    async def open(self, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
        return await asyncio.to_thread(self._start, plan, task)

    def _start(self, plan: ExecutionPlan, task: TaskSpec) -> DockerSession:
        client = self.client
        sweep_dead_containers(client)
        setup = (
            task_setup(self.params, self.config.env, task.environment, self._image(plan, task), self._engine_cpus())
            if task.environment is not None
            else plain_setup(self.params, self.config.env)
        )
        params = self.params
        name = f"agentcompass-{os.getpid()}-{secrets.token_hex(4)}"
        container = None
        try:
            container = create_container(
                client, params, self.config.id, setup, name, plan.baseline_network_policy, plan.mounts
            )
            container.start()
            prepared = container.exec_run(["sh", "-c", f"{setup.prepare} && {KEEPER_PID}"], user="0:0")
            output = (prepared.output or b"").decode(errors="replace").strip()
            if prepared.exit_code != 0 or not output.rpartition("\n")[2].isdigit():
                raise RuntimeError(f"the container of task {task.id!r} could not be set up: {output[:300]}")
            layout = started_layout(container, setup, homes=task.environment is not None)
            if layout.homes:
                setup.record["homes"] = layout.homes
            give_writable(plan.mounts, layout.owners[HOME])
            return DockerSession(
                container,
                setup,
                params,
                layout,
                int(output.rpartition("\n")[2]),
                HiddenMounts.of(container, plan.mounts),
            )
        except BaseException:
            if container is not None:
                remove_container(container)
            raise

    def _image(self, plan: ExecutionPlan, task: TaskSpec) -> BuiltImage:
        asks = task.environment
        assert asks is not None
        if asks.build_context is not None:
            log = plan.artifacts_dir / BUILD_LOG if plan.artifacts_dir is not None else Path(os.devnull)
            return ensure_image(
                self.client,
                asks.build_context,
                dockerfile=asks.dockerfile,
                timeout_s=asks.build_timeout_s,
                log_path=log,
                name=task.id,
            )
        ref = asks.image or self.params.image
        assert ref is not None
        return prebuilt_image(self.client, ref, pull=self.params.pull and asks.image is not None)

    def _engine_cpus(self) -> int:
        if self._cpus is None:
            self._cpus = int(self.client.info().get("NCPU") or os.cpu_count() or 1)
        return self._cpus
