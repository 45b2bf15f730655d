"""Sessions whose files live in a directory of this machine: the `local` and `sandbox` environments.

The session's directory holds ``work`` (the agent's working directory), ``home``, ``commands`` (what
command wrappers leave, every command sees it) and ``scratch`` (the framework's private files). Every
host-side file operation resolves its path beneath that directory without following a symlink
(runtime/store/safe_fs.py), since the agent may have planted one anywhere it can write. Commands run as a
process group of their own, killed whole on timeout or cancellation; the host records which process
runs a labelled command in ``scratch/processes/`` (resume trusts that record, not a pid file the agent
could have rewritten).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentcompass_dagster.contracts.environment import Caller, EnvironmentSession, ExecResult, verifier_env
from agentcompass_dagster.contracts.records import TaskDir
from agentcompass_dagster.plugins.environments.cgroups import Cgroup
from agentcompass_dagster.contracts.capture import READ_CHUNK, Capture, capture_file
from agentcompass_dagster.runtime.store.processes import ProcessId, proc_stat
from agentcompass_dagster.runtime.store.safe_fs import (
    makedirs_beneath,
    open_regular_beneath,
    read_beneath,
    relative,
    remove_tree,
    write_beneath,
)

IDENTITY_FILE = ".identity"
MANAGED = ("work", "home")
# Below the session's directory: the task's own directories (TaskEnvironment.dirs), one per index.
TASK_DIRS = "dirs"
PROCESSES = "processes"
# How long a timed-out command's pipes are still read once its process group is killed.
DRAIN_AFTER_KILL_S = 2.0


class HostDirSession(EnvironmentSession):
    def __init__(
        self,
        root: Path,
        extra_env: dict[str, str],
        path: str,
        owner: tuple[int, int] | None = None,
        cgroup: Cgroup | None = None,
        create_root: Callable[[], None] | None = None,
    ) -> None:
        """``create_root`` makes ``root`` on first use (None: it exists already)."""
        self.root = root
        self.owner = owner
        self.cgroup = cgroup
        self._join = cgroup.join_fds() if cgroup is not None else []
        # The working directory's place on this machine; ``workdir`` is where commands see it, the same
        # unless the session maps it (``map_task``).
        self.work = self.workdir = f"{root}/work"
        # Paths commands see -> their place on this machine, for a session that maps a task's paths.
        self.mounts: dict[str, str] = {}
        self.task_dirs: tuple[TaskDir, ...] = ()
        self.scratch = f"{root}/scratch"
        self.home = f"{root}/home"
        self.commands_dir = f"{root}/commands"
        self._create_root = create_root
        self._rooted = False
        self._root_lock = threading.Lock()
        if create_root is None:
            self.ensure_root()
        self._dirs_made = False
        self.env = {"PATH": path, "HOME": self.home, "TMPDIR": self.tmpdir(), "LANG": "C.UTF-8", **extra_env}
        self._closed = False

    def tmpdir(self) -> str:
        return self.scratch

    def _chown(self, path: str) -> None:
        if self.owner is not None:
            os.chown(path, *self.owner, follow_symlinks=False)

    def ensure_root(self) -> None:
        """The session's directory and its work directory, made on first use: a task that touches no
        file and runs no command (a model-only task, most of a large sweep) makes and removes none."""
        if self._rooted:
            return
        with self._root_lock:
            if self._rooted:
                return
            if self._create_root is not None:
                self._create_root()
            os.makedirs(self.work, exist_ok=True)
            self._chown(self.work)
            self._rooted = True

    def make_dirs(self) -> None:
        """Made with the first command: a task that only reads and writes files pays for two
        directories, not five."""
        if self._dirs_made:
            return
        self.ensure_root()
        for directory in (self.scratch, self.home, self.commands_dir, *(self.mounts[d.path] for d in self.task_dirs)):
            os.makedirs(directory, exist_ok=True)
            self._chown(directory)
        self._dirs_made = True

    def map_task(self, workdir: str | None, dirs: tuple[TaskDir, ...]) -> None:
        """Show commands the working directory at ``workdir`` and each task directory at its path, both
        kept below the session's directory (a session whose commands see their own file tree)."""
        if workdir is not None:
            self.workdir = workdir
            self.mounts[workdir] = self.work
        self.task_dirs = dirs
        for index, directory in enumerate(dirs):
            self.mounts[directory.path] = f"{self.root}/{TASK_DIRS}/{index}"

    def host_path(self, path: str) -> str:
        """Where a path a command sees lies on this machine."""
        for inside in sorted(self.mounts, key=len, reverse=True):
            if path == inside or path.startswith(inside + "/"):
                return self.mounts[inside] + path[len(inside) :]
        return path

    def argv(self, command: str, cwd: str, caller: Caller, fds: list[int]) -> list[str]:
        """How to start ``command``, given the descriptors ``child_fds`` opened for it; sessions that
        isolate it wrap it here."""
        return ["bash", "-c", command]

    def child_fds(self) -> list[int]:
        """Descriptors one command's child inherits (made for it, closed once it has started)."""
        return []

    def context(self, caller: Caller, env: Mapping[str, str] | None) -> dict[str, str]:
        """The environment variables of a command run for ``caller`` with ``env`` added. A verifier's HOME
        and TMPDIR are made new for each of its commands in ``scratch``, where no agent's command
        reaches: nothing the agent left in its home (``~/.local/lib/python3*/site-packages/*.pth``,
        ``usercustomize.py``, dotfiles) or its temp directory runs in the check of its work."""
        variables = {**self.env, **env} if env else self.env
        if caller is not Caller.verifier:
            return variables
        fresh = f"scratch/verifier-{secrets.token_hex(6)}"
        for name in ("home", "tmp"):
            makedirs_beneath(self.root, f"{fresh}/{name}", 0o700, self.owner)
        return verifier_env(variables, f"{self.root}/{fresh}/home", self.verifier_tmpdir(f"{self.root}/{fresh}"))

    def verifier_tmpdir(self, fresh: str) -> str:
        """TMPDIR of a verifier's command, given its fresh directory."""
        return f"{fresh}/tmp"

    def cgroup_fds(self) -> list[int]:
        """Open cgroup.procs files the child joins (one per hierarchy), or none."""
        return self._join

    async def stop_processes(self) -> None:
        if self.cgroup is not None:
            await asyncio.to_thread(self.cgroup.kill_all)

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
        self.make_dirs()
        directory = cwd or self.workdir
        # A labelled command waits for a line on its stdin, sent once the host has recorded its process:
        # a crash between spawn and record must not leave a command running that a resume cannot see.
        # If the host dies first, the command gets EOF (and PDEATHSIG) and never starts.
        gated = label is not None
        fds, join = self.child_fds(), self.cgroup_fds()
        try:
            proc = await asyncio.create_subprocess_exec(
                *child_argv(
                    self.argv(f"read -r _ || exit 125; {command}" if gated else command, directory, caller, fds), join
                ),
                cwd=self.host_path(directory),
                env=await asyncio.to_thread(self.context, caller, env)
                if caller is Caller.verifier
                else self.context(caller, env),
                stdin=asyncio.subprocess.PIPE if gated else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                pass_fds=[*fds, *join],
            )
        finally:
            for fd in fds:
                os.close(fd)
        if label is not None:
            await asyncio.to_thread(self._record, label, ProcessId.of(proc.pid))
        stdout, stderr = Capture(), Capture()
        # Read as it comes, never all at once: the host holds the head and tail of each stream, whatever
        # the command writes.
        streams = asyncio.ensure_future(asyncio.gather(_read(proc.stdout, stdout), _read(proc.stderr, stderr)))
        timed_out = False
        try:
            await asyncio.wait_for(_finish(proc, streams, gated), timeout_s)
        except TimeoutError:
            timed_out = True
            await _stop(proc, streams, DRAIN_AFTER_KILL_S)
        except BaseException:
            await _stop(proc, streams, 0)
            raise
        return ExecResult.captured(
            proc.returncode if proc.returncode is not None else -1,
            stdout,
            stderr,
            time.monotonic() - started,
            timed_out,
        )

    def _record(self, label: str, worker: ProcessId) -> None:
        write_beneath(self.root, f"scratch/{PROCESSES}/{_label(label)}", str(worker).encode())

    def _owner_for(self, path: str) -> tuple[int, int] | None:
        """Files the host writes where the agent works, and in the task's directories (which only the
        commands they are for see), belong to the commands' user."""
        parts = relative(self.root, path).parts
        return self.owner if parts and parts[0] in (*MANAGED, "commands", TASK_DIRS) else None

    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        target = self._absolute(path)
        await asyncio.to_thread(self._write, target, data, mode)

    def _write(self, target: str, data: bytes, mode: int) -> None:
        self.ensure_root()
        write_beneath(self.root, target, data, mode, self._owner_for(target))

    async def read_file(self, path: str) -> bytes:
        return await asyncio.to_thread(self._read, self._absolute(path))

    def _read(self, target: str) -> bytes:
        self.ensure_root()
        return read_beneath(self.root, target)

    async def read_output(self, path: str) -> Capture:
        return await asyncio.to_thread(self._read_output, self._absolute(path))

    def _read_output(self, target: str) -> Capture:
        self.ensure_root()
        fd = open_regular_beneath(self.root, target)
        try:
            return capture_file(fd)
        finally:
            os.close(fd)

    def _absolute(self, path: str) -> str:
        return self.host_path(path if os.path.isabs(path) else os.path.join(self.workdir, path))

    def checkpoint_roots(self) -> dict[str, Path] | None:
        self.ensure_root()
        return {"work": Path(self.work), "home": Path(self.home)}

    def file_owner(self) -> tuple[int, int] | None:
        return self.owner

    def handle(self) -> dict[str, Any] | None:
        """The session's directory and a token written into it, so a directory that was removed and
        re-created under the same name is not mistaken for this environment."""
        self.ensure_root()
        try:
            token = read_beneath(self.root, IDENTITY_FILE).decode()
        except FileNotFoundError:
            token = secrets.token_hex(8)
            write_beneath(self.root, IDENTITY_FILE, token.encode())
        return {"kind": "hostdir", "root": str(self.root), "identity": token, "pid": os.getpid()}

    async def adopt(self, handle: dict[str, Any]) -> bool:
        old = Path(handle.get("root", ""))
        if handle.get("kind") != "hostdir" or old == self.root or not probe_hostdir(handle):
            return False
        self.make_dirs()
        for name in MANAGED:
            mine, theirs = self.root / name, old / name
            if theirs.is_dir() and not theirs.is_symlink():
                aside = self.root / f".{name}.replaced"
                try:
                    os.rename(mine, aside)
                    os.rename(theirs, mine)
                except OSError:  # another filesystem (a disk-limited sandbox): set the task up again
                    if aside.exists() and not mine.exists():
                        os.rename(aside, mine)
                    return False
                await asyncio.to_thread(remove_tree, aside)
        await self.discard(handle)
        return True

    async def discard(self, handle: dict[str, Any]) -> None:
        if handle.get("kind") == "hostdir" and probe_hostdir(handle):
            await asyncio.to_thread(self.release_old, Path(handle["root"]))

    def release_old(self, root: Path) -> list[str]:
        """Free what a dead session left at ``root``."""
        return remove_tree(root)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._rooted and self.cgroup is None and not self._join:
            return  # nothing was made: nothing to free, no trip to a thread
        # Shielded: a cancellation arriving now must not drop the removal queued in the thread pool.
        problems = await asyncio.shield(asyncio.to_thread(self.release))
        if problems:
            raise OSError(f"{len(problems)} entries of {self.root} could not be removed: {'; '.join(problems[:3])}")

    def release(self) -> list[str]:
        """Free what the session holds (processes, mounts, files); what could not be removed."""
        for fd in self._join:
            os.close(fd)
        self._join = []
        if self.cgroup is not None:
            self.cgroup.remove()
        return self.remove_files()

    def remove_files(self) -> list[str]:
        return remove_tree(self.root)


def _label(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:120]


def process_of(root: Path, label: str) -> bool | None:
    """Whether the command labelled ``label`` in the session at ``root`` still runs: its process group
    (it led one) has a live member. None when the host recorded no process for it."""
    try:
        worker = ProcessId.parse(read_beneath(root, f"scratch/{PROCESSES}/{_label(label)}").decode())
    except OSError:
        return None
    if worker is None:
        return None
    return _group_alive(worker.pid)


def _group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` runs (zombies have finished)."""
    for entry in os.listdir("/proc"):
        fields = proc_stat(entry) if entry.isdigit() else None
        if fields is not None and len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def probe_hostdir(handle: dict[str, Any]) -> bool:
    """Whether the directory ``handle`` names still holds that environment."""
    try:
        return read_beneath(Path(handle["root"]), IDENTITY_FILE).decode() == handle.get("identity")
    except (KeyError, OSError):
        return False


# Sets the parent-death signal and execs the rest: the kernel kills the command's first process when
# the runtime dies, even by SIGKILL (the sandbox's bwrap then takes its whole namespace down with it).
DEATH_SIGNAL = ["setpriv", "--pdeathsig", "KILL", "--"]


def child_argv(argv: list[str], join: list[int], parent: int | None = None) -> list[str]:
    """``argv`` (``bash -c SCRIPT``) started so that it dies with the runtime (process ``parent``, this
    one by default) and joins the session's cgroup before its script runs, without any code between fork
    and exec: a ``preexec_fn`` makes Python fork the whole runtime with the event loop stopped (~35 ms for
    a 300 MB run worker, every command of every attempt waiting), where without one it uses vfork. A
    runtime killed before the death signal was set sends none, so the shell first checks that its
    parent is still the runtime; then it writes "0" to each cgroup.procs descriptor in ``join``
    (moving itself and all it starts) and closes it, so the command cannot write there."""
    shell, flag, script = argv
    prelude = f'[ "$PPID" = {os.getpid() if parent is None else parent} ] || exit 125; '
    prelude += "".join(f"{{ echo 0 >&{fd} && exec {fd}>&-; }} || exit 125; " for fd in join)
    return [*DEATH_SIGNAL, shell, flag, prelude + script]


async def _read(stream: asyncio.StreamReader | None, capture: Capture) -> None:
    assert stream is not None
    while chunk := await stream.read(READ_CHUNK):
        capture.add(chunk)


async def _finish(proc: asyncio.subprocess.Process, streams: asyncio.Future[Any], gated: bool) -> None:
    """Start a gated command, then wait until it has exited and closed both streams."""
    if gated:
        assert proc.stdin is not None
        try:
            proc.stdin.write(b"\n")
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # it ended before it read the line: its exit code says how
        proc.stdin.close()
    # Shielded: the timeout cancels this wait, not the reading, which goes on for what is left.
    await asyncio.shield(streams)
    await proc.wait()


async def _stop(proc: asyncio.subprocess.Process, streams: asyncio.Future[Any], drain_s: float) -> None:
    """Kill the command's process group, then read what it left in its pipes for ``drain_s`` at most: a
    process that left the group (setsid) holds them open for as long as it lives, and neither a timeout
    nor a cancellation may wait for it."""
    _kill_group(proc.pid)
    try:
        await asyncio.wait_for(asyncio.shield(streams), drain_s)
    except TimeoutError:
        streams.cancel()
        # The cancelled readers' outcome is no one's to see: retrieved, so asyncio does not log it.
        streams.add_done_callback(lambda done: done.cancelled() or done.exception())
        # asyncio's Process closes the pipes' read ends, and lets wait() return, only once every writer
        # has gone: closed here instead (its private transport, which typeshed's stub does not declare).
        proc._transport.close()  # type: ignore[attr-defined]
    await proc.wait()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
