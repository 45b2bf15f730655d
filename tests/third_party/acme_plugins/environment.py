"""acme-local: a fresh temporary directory of this machine per task; nothing isolated but the files, which
it says (``gives_up``): the conformance kit (agentcompass_dagster.contracts.conformance) passes the rest."""

import asyncio
import os
import signal
import tempfile
from pathlib import Path

from agentcompass_dagster.contracts import Caller, Environment, EnvironmentSession, ExecResult, ExecutionPlan, TaskSpec
from agentcompass_dagster.contracts.capture import capture_file
from agentcompass_dagster.contracts.environment import VERIFIER_PATH, verifier_env


class TempDirSession(EnvironmentSession):
    def __init__(self) -> None:
        self.root = tempfile.TemporaryDirectory(prefix="acme-local-", ignore_cleanup_errors=True)
        self.workdir, self.scratch, self.commands_dir = (tempfile.mkdtemp(dir=self.root.name) for _ in range(3))

    async def exec(
        self,
        command: str,
        *,
        timeout_s: float | None = None,
        cwd: str | None = None,
        caller: Caller = Caller.agent,
        label: str | None = None,
        env: dict | None = None,
    ) -> ExecResult:
        variables = {**os.environ, **(env or {})}
        if caller is Caller.verifier:  # a HOME and TMPDIR of its own, where the agent wrote nothing; system PATH
            home, tmp = (tempfile.mkdtemp(dir=self.scratch) for _ in range(2))
            variables = verifier_env({**variables, "PATH": VERIFIER_PATH}, home, tmp)
        with tempfile.TemporaryFile(dir=self.commands_dir) as out, tempfile.TemporaryFile(dir=self.commands_dir) as err:
            # A session of its own: a cancelled command's whole process group can be killed.
            options = dict(cwd=cwd or self.workdir, stdout=out, stderr=err, start_new_session=True, env=variables)
            proc = await asyncio.create_subprocess_exec("bash", "-c", command, **options)
            try:
                done, _ = await asyncio.wait([asyncio.ensure_future(proc.wait())], timeout=timeout_s)
            finally:  # timed out or cancelled: the command's whole process group goes, not only bash
                if proc.returncode is None:
                    os.killpg(proc.pid, signal.SIGKILL)
            return ExecResult.captured(
                await proc.wait(), capture_file(out.fileno()), capture_file(err.fileno()), 0.0, timed_out=not done
            )

    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        (target := Path(self.workdir, path)).parent.mkdir(parents=True, exist_ok=True)  # relative: the workdir's
        target.write_bytes(data)
        target.chmod(mode)

    async def read_file(self, path: str) -> bytes:
        return Path(self.workdir, path).read_bytes()

    async def close(self) -> None:
        self.root.cleanup()


class TempDirEnvironment(Environment):
    gives_up = {
        "verifier_uid": "every command runs as this process's user",
        "scratch_hidden": "the agent's commands run as the user who owns scratch",
        "verifier_context": "run as root, the agent's commands can write the verifier's PATH",
    }

    async def open(self, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
        return TempDirSession()
