"""The Environment provider and its per-task session."""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.contracts.capture import Capture
from agentcompass_dagster.contracts.records import ExecutionPlan, NetworkPolicy, TaskDir, TaskSpec

if TYPE_CHECKING:
    from agentcompass_dagster.contracts.declarations import EnvironmentConfig


class ExecResult(BaseModel):
    """A command's outcome. ``stdout`` and ``stderr`` hold at most the head and tail of each stream
    (contracts/capture.py) with a note of how many bytes were left out; ``stdout_bytes`` and
    ``stderr_bytes`` count every byte the command wrote to each."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    timed_out: bool = False
    stdout_bytes: int = 0
    stderr_bytes: int = 0

    @classmethod
    def captured(
        cls, exit_code: int, stdout: Capture, stderr: Capture, duration_s: float, timed_out: bool
    ) -> ExecResult:
        return cls(
            exit_code=exit_code,
            stdout=stdout.text(),
            stderr=stderr.text(),
            duration_s=duration_s,
            timed_out=timed_out,
            stdout_bytes=stdout.total,
            stderr_bytes=stderr.total,
        )

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class Caller(StrEnum):
    """Whom a command runs for, which decides what it sees and in whose context it runs.

    - ``agent``: the agent's commands (and a harness's on its behalf): the working directory, its home
      and temp directory; never the framework's private ``scratch``.
    - ``reference``: a benchmark's reference solution (the oracle): the agent's context, as an agent
      that solved the task would act, plus ``scratch`` for the solution's own files.
    - ``verifier``: a check of the agent's work. The framework's context, none of which the agent could
      have prepared: ``scratch``, a fresh HOME and TMPDIR, a PATH of system directories only, Python
      without the user's site-packages and without the working directory on ``sys.path``; never the
      processes the agent left, never root inside a container. Its working directory is still the
      agent's (that is what it checks), so what it runs from there is what the benchmark declares
      (``Benchmark.verifier_executes``).
    """

    agent = "agent"
    reference = "reference"
    verifier = "verifier"


# What every verifier command gets in its environment, whatever the provider: no user site-packages
# (a planted ~/.local/.../x.pth or usercustomize.py), no working directory or script directory on
# sys.path (a planted json.py or unittest/ in the working directory), and no bytecode left behind.
VERIFIER_PYTHON_ENV = {"PYTHONNOUSERSITE": "1", "PYTHONSAFEPATH": "1", "PYTHONDONTWRITEBYTECODE": "1"}
# The verifier's PATH: system directories only, never a directory the agent could write.
VERIFIER_PATH = "/usr/local/bin:/usr/bin:/bin"


def verifier_env(env: Mapping[str, str], home: str, tmpdir: str) -> dict[str, str]:
    """The environment of a verifier's command, from its session's ``env`` and the variables the
    command was given: a HOME and TMPDIR made new for it, and VERIFIER_PYTHON_ENV, which nothing given
    overrides."""
    return {**env, "HOME": home, "TMPDIR": tmpdir, **VERIFIER_PYTHON_ENV}


# ${VAR} and ${VAR:-default}, Harbor's templates for a value the host supplies.
_HOST_TEMPLATE = re.compile(r"\$\{([^}:]+)(?::-(.*))?\}")


def resolve_host_env(env: Mapping[str, str], host: Mapping[str, str] = os.environ) -> dict[str, str]:
    """``env`` with each value that is a whole ``${VAR}`` or ``${VAR:-default}`` taken from the host's
    environment (its default where the host has no VAR); other values as they are. KeyError names a VAR
    the host lacks that has no default."""
    resolved = {}
    for name, value in env.items():
        match = _HOST_TEMPLATE.fullmatch(value)
        if match is None:
            resolved[name] = value
        elif match[1] in host:
            resolved[name] = host[match[1]]
        elif match[2] is not None:
            resolved[name] = match[2]
        else:
            raise KeyError(f"{name}=${{{match[1]}}}: {match[1]} is not set on this host")
    return resolved


def visible_dirs(dirs: tuple[TaskDir, ...], caller: Caller) -> list[TaskDir]:
    """The task directories a command run for ``caller`` sees."""
    return [d for d in dirs if d.visible_to == Caller.agent or d.visible_to == caller]


class EnvironmentLimitExceeded(RuntimeError):
    """A limit of the environment (memory, processes, disk) was hit: the attempt ends with this error,
    which names the limit and its allowance."""


class EnvironmentSession(ABC):
    """One open environment for one task.

    ``workdir`` is the agent's working directory (the task's own where it names one,
    ``TaskEnvironment.workdir``). ``scratch`` is private to the framework (reference
    solutions, checks, verifier files, rewards): the agent's commands never see it where the
    environment isolates (``sandbox``, ``docker``); only commands run for the ``reference`` or the
    ``verifier`` (``Caller``) do. ``commands_dir`` is where command wrappers leave their output and exit
    code: every command sees it, so whatever the host reads there is untrusted. All three are usable as soon
    as ``Environment.open`` has returned the session: benchmarks and harnesses write files straight into them.

    A relative path given to ``write_file`` or ``read_file`` is the working directory's. ``write_file``
    makes the missing directories above the file (``upload_dir`` relies on it) and gives it ``mode``."""

    workdir: str
    scratch: str
    commands_dir: str

    @abstractmethod
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
        """Run ``command``, a bash command line, for ``caller`` (what it sees, in whose context) in ``cwd``,
        the working directory unless given, with ``env`` added to the session's variables (a verifier's
        HOME, TMPDIR and Python settings stay its own). Past ``timeout_s`` the command is killed and the
        result says ``timed_out``. ``label`` names a command the framework asks about later (which process
        of the host runs it): a provider records that where the agent cannot reach; only a provider that
        can be found again after a crash (``handle``) needs to. A cancelled call ends the command's whole
        process group before the cancellation goes on (the framework's wall limit cancels it).

        Example::

            ran = await session.exec("pytest -q tests", caller=Caller.verifier, timeout_s=600)
            passed = ran.exit_code == 0 and not ran.timed_out
        """

    async def stop_processes(self) -> None:
        """Kill every process the session's commands left running (the agent's background jobs), before
        its work is evaluated."""

    def file_owner(self) -> tuple[int, int] | None:
        """The (uid, gid) that host-side writes into the agent's directories must give their files, so
        the agent's unprivileged commands can change them; None where files stay the host user's."""
        return None

    @abstractmethod
    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write ``data`` to ``path`` (relative: the working directory's) whole, making the missing
        directories above it, with ``mode``; files in the agent's directories get ``file_owner()``. Never
        through a link the agent planted: the write lands at ``path`` or fails.

        Example::

            await session.write_file("tests/test_solution.py", test_source.encode(), 0o644)
            await session.write_file(f"{session.scratch}/expected.json", expected)  # the verifier's only
        """

    @abstractmethod
    async def read_file(self, path: str) -> bytes:
        """The bytes of the regular file at ``path`` (relative: the working directory's); FileNotFoundError
        when there is none. Never through a link the agent planted. A file a command wrote its output
        into may be of any size: read it with ``read_output``.

        Example::

            answer = (await session.read_file("answer.txt")).decode().strip()
        """

    async def read_output(self, path: str) -> Capture:
        """The head and tail of a file a command wrote its output into (under ``commands_dir``), bounded
        like a command's streams: the agent can make that file any size (``truncate -s 768M``). This
        default holds the whole file for a moment; providers override it to read only its ends."""
        capture = Capture()
        capture.add(await self.read_file(path))
        return capture

    async def upload_dir(self, local: Path, remote: str) -> None:
        for source in sorted(local.rglob("*")):
            if source.is_file():
                rel = source.relative_to(local).as_posix()
                await self.write_file(f"{remote}/{rel}", source.read_bytes(), source.stat().st_mode & 0o777)

    async def set_network_policy(self, policy: NetworkPolicy) -> None:
        """Switch the network policy of later commands; providers that cannot switch refused the plan."""

    def describe(self) -> dict[str, Any]:
        """What the session applied of the task's and the sweep's asks (its image, working directory,
        limits and where each came from, what it could not enforce), recorded with the attempt."""
        return {}

    def checkpoint_roots(self) -> dict[str, Path] | None:
        """Host directories that hold the session's managed files (working dir, home), for durable
        checkpoints; None where they are not reachable through this machine's filesystem."""
        return None

    def handle(self) -> dict[str, Any] | None:
        """What a later process needs to find this environment again after a crash (R-RESUME-1)."""
        return None

    async def adopt(self, handle: dict[str, Any]) -> bool:
        """Take over the managed files of the environment ``handle`` names, if it is still there and
        idle; False when it is gone or not this provider's."""
        return False

    async def discard(self, handle: dict[str, Any]) -> None:
        """Remove the environment ``handle`` names, which a resume found but did not adopt."""

    @abstractmethod
    async def close(self) -> None:
        """Release everything; idempotent and safe after a partial open.

        Example::

            async def close(self):
                if self.container is not None:
                    await asyncio.to_thread(self.container.remove, force=True)
                    self.container = None
        """


class DelegatingSession(EnvironmentSession):
    """A session that passes everything on to ``inner``: the base of a wrapper that changes one part of
    a session (the framework's limited session of a harness, a provider that logs what it runs)."""

    def __init__(self, inner: EnvironmentSession) -> None:
        self.inner = inner
        self.workdir, self.scratch, self.commands_dir = inner.workdir, inner.scratch, inner.commands_dir

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
        return await self.inner.exec(command, timeout_s=timeout_s, cwd=cwd, caller=caller, label=label, env=env)

    async def stop_processes(self) -> None:
        await self.inner.stop_processes()

    def file_owner(self) -> tuple[int, int] | None:
        return self.inner.file_owner()

    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        await self.inner.write_file(path, data, mode)

    async def read_file(self, path: str) -> bytes:
        return await self.inner.read_file(path)

    async def read_output(self, path: str) -> Capture:
        return await self.inner.read_output(path)

    async def upload_dir(self, local: Path, remote: str) -> None:
        await self.inner.upload_dir(local, remote)

    async def set_network_policy(self, policy: NetworkPolicy) -> None:
        await self.inner.set_network_policy(policy)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def checkpoint_roots(self) -> dict[str, Path] | None:
        return self.inner.checkpoint_roots()

    def handle(self) -> dict[str, Any] | None:
        return self.inner.handle()

    async def adopt(self, handle: dict[str, Any]) -> bool:
        return await self.inner.adopt(handle)

    async def discard(self, handle: dict[str, Any]) -> None:
        await self.inner.discard(handle)

    async def close(self) -> None:
        await self.inner.close()


class Environment(ABC):
    """A provider of task environments, configured by one EnvironmentConfig declaration."""

    supported_policies: ClassVar[frozenset[NetworkPolicy]] = frozenset({NetworkPolicy.host})
    can_switch_network: ClassVar[bool] = False
    # The promises of the conformance kit (contracts/conformance.py) this provider does not keep, by the
    # check's name, each with why: the kit reports them as given up rather than failed.
    gives_up: ClassVar[Mapping[str, str]] = {}

    def __init__(self, config: EnvironmentConfig) -> None:
        self.config = config

    def default_policy(self, phase: str) -> NetworkPolicy:
        """The policy of a phase (baseline, run, evaluation) that a sweep leaves undeclared: ``none``
        wherever this provider can hold it, so neither the agent nor the programs the verifier runs for
        it reach a network (the host's loopback and the Dagster UI's unauthenticated GraphQL on it
        included) unless a sweep declares one. The baseline phase runs only the framework's setup and
        keeps the host's network where the provider can switch between phases."""
        if NetworkPolicy.none not in self.supported_policies:
            return NetworkPolicy.host
        if phase == "baseline" and self.can_switch_network and NetworkPolicy.host in self.supported_policies:
            return NetworkPolicy.host
        return NetworkPolicy.none

    def describe(self) -> str:
        """What this provider isolates and which limits it enforces, for the run log."""
        return self.config.provider_id

    def refusal(self, task: TaskSpec) -> str | None:
        """Why this provider cannot run ``task`` as it asks (its own image, its directories at absolute
        paths), in one line saying where it can run; None when it can. The runtime asks before opening a
        session and ends each attempt of a refused task with that line, as an error of the setup (not
        scored, never retried): a provider never runs a task in a silently different environment. This
        default refuses every task that asks anything of its environment but a narrower network."""
        asks = task.environment
        if asks is None:
            return None
        wanted = [
            *(["its own image"] if asks.has_image else []),
            *([f"the working directory {asks.workdir}"] if asks.workdir else []),
            *([", ".join(d.path for d in asks.dirs) + " at absolute paths"] if asks.dirs else []),
            *(["its own variables"] if asks.env else []),
            *(["its own resources"] if asks.cpus or asks.memory_mb or asks.storage_mb else []),
        ]
        if not wanted:
            return None  # a narrower network is the plan's, which validate_plan checks
        return (
            f"needs {' and '.join(wanted)}, which environment {self.config.id!r} ({self.config.provider_id}) "
            "cannot give: run it in sandbox or docker"
        )

    def validate_plan(self, plan: ExecutionPlan) -> None:
        """Refuse a plan this provider cannot enforce (R-NET-1): it never grants wider access silently."""
        phases = {
            "baseline": plan.baseline_network_policy,
            "run": plan.run_network_policy,
            "evaluation": plan.evaluation_network_policy,
        }
        for phase, policy in phases.items():
            if policy not in self.supported_policies:
                raise UserError(
                    f"execution.network.{phase}={policy.value!r}: environment {self.config.id!r} "
                    f"({self.config.provider_id}) supports only {sorted(p.value for p in self.supported_policies)}"
                )
        if not self.can_switch_network and len(set(phases.values())) > 1:
            raise UserError(
                f"execution.network={ {k: v.value for k, v in phases.items()} }: environment {self.config.id!r} "
                "cannot switch network policy between phases; declare the same policy for all three"
            )

    @abstractmethod
    async def open(self, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
        """A fresh session for one attempt of ``task`` under ``plan`` (its limits, its mounts, its network
        policies, which ``validate_plan`` has accepted): ``workdir``, ``scratch`` and ``commands_dir``
        usable when it returns. What a failure leaves half made, the provider removes before raising.
        The conformance kit (``contracts/conformance.py``) checks the sessions it opens.

        Example::

            async def open(self, plan, task):
                root = Path(tempfile.mkdtemp(prefix=f"{plan.task_id}-"))
                return MySession(workdir=root / "work", scratch=root / "scratch", commands=root / "commands")
        """
