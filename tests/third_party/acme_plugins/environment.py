"""acme-local: a fresh temporary directory of this machine per task; nothing isolated but the files."""

import asyncio, os, signal, tempfile
from pathlib import Path

from agentcompass_dagster.contracts import Caller, Environment, EnvironmentSession, ExecResult, ExecutionPlan, TaskSpec
from agentcompass_dagster.contracts.capture import capture_file


class TempDirSession(EnvironmentSession):
    def __init__(self) -> None:
        self.root = tempfile.TemporaryDirectory(prefix="acme-local-", ignore_cleanup_errors=True)
        self.workdir, self.scratch, self.commands_dir = (tempfile.mkdtemp(dir=self.root.name) for _ in range(3))

    async def exec(self, command: str, *, timeout_s: float | None = None, cwd: str | None = None,
                   caller: Caller = Caller.agent, label: str | None = None, env: dict | None = None) -> ExecResult:
        with tempfile.TemporaryFile(dir=self.commands_dir) as out, tempfile.TemporaryFile(dir=self.commands_dir) as err:
            proc = await asyncio.create_subprocess_exec("bash", "-c", command, cwd=cwd or self.workdir, stdout=out,
                                                        stderr=err, start_new_session=True, env={**os.environ, **(env or {})})
            done, _ = await asyncio.wait([asyncio.ensure_future(proc.wait())], timeout=timeout_s)
            if not done:  # timed out: the command's whole process group goes, not only bash
                os.killpg(proc.pid, signal.SIGKILL)
            return ExecResult.captured(await proc.wait(), capture_file(out.fileno()), capture_file(err.fileno()),
                                       0.0, timed_out=not done)

    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        (target := Path(self.workdir, path)).parent.mkdir(parents=True, exist_ok=True)  # relative: the workdir's
        target.write_bytes(data)
        target.chmod(mode)

    async def read_file(self, path: str) -> bytes:
        return Path(self.workdir, path).read_bytes()

    async def close(self) -> None:
        self.root.cleanup()


class TempDirEnvironment(Environment):
    async def open(self, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
        return TempDirSession()
