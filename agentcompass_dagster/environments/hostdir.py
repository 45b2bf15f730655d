"""Sessions whose files live in a directory of this machine: the `local` and `sandbox` environments.

The session's directory holds ``work`` (the agent's working directory), ``home`` and ``scratch`` (the
framework's private files). File operations are plain host file operations; commands run as a process
group of their own, killed whole on timeout or cancellation.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import secrets
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from agentcompass_dagster.environments.base import EnvironmentSession, ExecResult

OUTPUT_LIMIT = 1_000_000
IDENTITY_FILE = ".identity"
MANAGED = ("work", "home")


class HostDirSession(EnvironmentSession):
    def __init__(self, root: Path, extra_env: dict[str, str], path: str) -> None:
        self.root = root
        self.workdir = str(root / "work")
        self.scratch = str(root / "scratch")
        self.home = str(root / "home")
        os.mkdir(self.workdir)
        self._dirs_made = False
        self.env = {"PATH": path, "HOME": self.home, "TMPDIR": self.scratch, "LANG": "C.UTF-8", **extra_env}
        self._closed = False

    def argv(self, command: str, cwd: str) -> list[str]:
        """How to start ``command``; sessions that isolate it wrap it here."""
        return ["bash", "-c", command]

    def _resolve(self, path: str) -> Path:
        return Path(path) if os.path.isabs(path) else Path(self.workdir) / path

    async def exec(self, command: str, *, timeout_s: float | None = None, cwd: str | None = None) -> ExecResult:
        started = time.monotonic()
        if not self._dirs_made:
            # Made on first use: a task that runs no command (the common case in large sweeps of
            # model-only tasks) pays for one directory, not three.
            os.makedirs(self.scratch, exist_ok=True)
            os.makedirs(self.home, exist_ok=True)
            self._dirs_made = True
        directory = cwd or self.workdir
        proc = await asyncio.create_subprocess_exec(
            *self.argv(command, directory),
            cwd=directory,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        timed_out = False
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout_s)
        except TimeoutError:
            timed_out = True
            _kill_group(proc.pid)
            stdout, stderr = await proc.communicate()
        except BaseException:
            _kill_group(proc.pid)
            await proc.wait()
            raise
        return ExecResult(
            exit_code=proc.returncode if proc.returncode is not None else -1,
            stdout=stdout[:OUTPUT_LIMIT].decode(errors="replace"),
            stderr=stderr[:OUTPUT_LIMIT].decode(errors="replace"),
            duration_s=time.monotonic() - started,
            timed_out=timed_out,
        )

    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        target = self._resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(mode)

    async def read_file(self, path: str) -> bytes:
        return self._resolve(path).read_bytes()

    def checkpoint_roots(self) -> dict[str, Path] | None:
        return {"work": Path(self.workdir), "home": Path(self.home)}

    def handle(self) -> dict[str, Any] | None:
        """The session's directory and a token written into it, so a directory that was removed and
        re-created under the same name is not mistaken for this environment."""
        token_path = self.root / IDENTITY_FILE
        try:
            token = token_path.read_text()
        except FileNotFoundError:
            token = secrets.token_hex(8)
            token_path.write_text(token)
        return {"kind": "hostdir", "root": str(self.root), "identity": token, "pid": os.getpid()}

    async def adopt(self, handle: dict[str, Any]) -> bool:
        old = Path(handle.get("root", ""))
        if handle.get("kind") != "hostdir" or old == self.root or not probe_hostdir(handle):
            return False
        os.makedirs(self.home, exist_ok=True)
        for name in MANAGED:
            mine, theirs = self.root / name, old / name
            if theirs.is_dir():
                aside = self.root / f".{name}.replaced"
                os.rename(mine, aside)
                os.rename(theirs, mine)
                shutil.rmtree(aside, ignore_errors=True)
        await asyncio.to_thread(shutil.rmtree, old, True)
        return True

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Shielded: a cancellation arriving now must not drop the removal queued in the thread pool.
        await asyncio.shield(asyncio.to_thread(shutil.rmtree, self.root, True))


def probe_hostdir(handle: dict[str, Any]) -> bool:
    """Whether the directory ``handle`` names still holds that environment."""
    try:
        return (Path(handle["root"]) / IDENTITY_FILE).read_text() == handle.get("identity")
    except (KeyError, OSError):
        return False


def _die_with_parent() -> None:
    """In the child before exec: the kernel kills it when the runtime dies, even by SIGKILL (the
    sandbox's bwrap then takes its whole namespace down with it)."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
