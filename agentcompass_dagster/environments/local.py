"""The `local` environment: each command is a subprocess of this machine in a fresh temp directory.

It isolates files between tasks, not processes or the network: only the host network policy is
offered, so plans that ask for anything else are refused before they run.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

from agentcompass_dagster.environments.base import Environment, EnvironmentSession, ExecResult
from agentcompass_dagster.runtime.types import ExecutionPlan, TaskSpec

OUTPUT_LIMIT = 1_000_000


class LocalSession(EnvironmentSession):
    def __init__(self, root: Path, extra_env: dict[str, str]) -> None:
        self.root = root
        self.workdir = str(root / "work")
        self.scratch = str(root / "scratch")
        self.home = str(root / "home")
        os.mkdir(self.workdir)
        self._home_made = False
        self._env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.home,
            "TMPDIR": self.scratch,
            "LANG": "C.UTF-8",
            **extra_env,
        }
        self._closed = False

    def _resolve(self, path: str) -> Path:
        return Path(path) if os.path.isabs(path) else Path(self.workdir) / path

    async def exec(self, command: str, *, timeout_s: float | None = None, cwd: str | None = None) -> ExecResult:
        started = time.monotonic()
        if not self._home_made:
            # Made on first use: a task that runs no command (the common case in large sweeps of
            # model-only tasks) pays for one directory, not three.
            os.makedirs(self.scratch, exist_ok=True)
            os.makedirs(self.home, exist_ok=True)
            self._home_made = True
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=cwd or self.workdir,
            env=self._env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        timed_out = False
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout_s)
        except asyncio.TimeoutError:
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

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Shielded: a cancellation arriving now must not drop the removal queued in the thread pool.
        await asyncio.shield(asyncio.to_thread(shutil.rmtree, self.root, True))


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class LocalEnvironment(Environment):
    async def open(self, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
        return await asyncio.to_thread(self._create)

    def _create(self) -> LocalSession:
        root = Path(tempfile.mkdtemp(prefix="agentcompass-"))
        try:
            return LocalSession(root, self.config.env)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
