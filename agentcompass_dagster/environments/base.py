"""The Environment provider and its per-task session."""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from agentcompass_dagster.config import EnvironmentConfig
from agentcompass_dagster.errors import UserError
from agentcompass_dagster.runtime.limits import open_rate_for
from agentcompass_dagster.runtime.types import ExecutionPlan, NetworkPolicy, TaskSpec


class ExecResult(BaseModel):
    exit_code: int
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    timed_out: bool = False

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class EnvironmentSession(ABC):
    """One open environment for one task. ``workdir`` is the agent's working directory; ``scratch`` is
    a framework-private directory (reference solutions, checks) outside it."""

    workdir: str
    scratch: str

    @abstractmethod
    async def exec(self, command: str, *, timeout_s: float | None = None, cwd: str | None = None) -> ExecResult: ...

    @abstractmethod
    async def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None: ...

    @abstractmethod
    async def read_file(self, path: str) -> bytes: ...

    async def upload_dir(self, local: Path, remote: str) -> None:
        for source in sorted(local.rglob("*")):
            if source.is_file():
                rel = source.relative_to(local).as_posix()
                await self.write_file(f"{remote}/{rel}", source.read_bytes(), source.stat().st_mode & 0o777)

    async def set_network_policy(self, policy: NetworkPolicy) -> None:
        """Switch the network policy of later commands; providers that cannot switch refused the plan."""

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

    @abstractmethod
    async def close(self) -> None:
        """Release everything; idempotent and safe after a partial open."""


class Environment(ABC):
    """A provider of task environments, configured by one EnvironmentConfig declaration."""

    supported_policies: ClassVar[frozenset[NetworkPolicy]] = frozenset({NetworkPolicy.host})
    can_switch_network: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Install the provider's open-rate limit (R-LIMIT-1) on every provider's ``open``."""
        super().__init_subclass__(**kwargs)
        if "open" in cls.__dict__ and not getattr(cls.__dict__["open"], "_rate_limited", False):
            cls.open = _rate_limited(cls.__dict__["open"])  # type: ignore[method-assign]

    def __init__(self, config: EnvironmentConfig) -> None:
        self.config = config

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
    async def open(self, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession: ...


def _rate_limited(open_method: Callable[..., Awaitable[EnvironmentSession]]) -> Callable[..., Awaitable[EnvironmentSession]]:
    @functools.wraps(open_method)
    async def open(self: Environment, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
        rate = open_rate_for(self.config.provider_id, self.config.open_qps)
        if rate is not None:
            await rate.wait()
        return await open_method(self, plan, task)

    open._rate_limited = True  # type: ignore[attr-defined]
    return open

