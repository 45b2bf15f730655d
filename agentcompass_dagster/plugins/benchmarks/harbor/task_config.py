"""task.toml as Harbor defines it (schema 1.x, Harbor's ``models/task/config.py``), the fields this
benchmark reads; anything else in the file is metadata and kept out of the run. The README's table says
what each field does here."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Harbor's defaults (docs/tasks): the verifier has 600 s; the agent has no bound of its own unless set.
DEFAULT_VERIFIER_TIMEOUT_S = 600.0
DEFAULT_BUILD_TIMEOUT_S = 600.0


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AgentSection(_Section):
    timeout_sec: float | None = Field(default=None, gt=0)
    user: str | int | None = None


class VerifierSection(_Section):
    timeout_sec: float | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    user: str | int | None = None
    environment_mode: Literal["shared", "separate"] | None = None
    environment: dict[str, Any] | None = None


class SolutionSection(_Section):
    env: dict[str, str] = Field(default_factory=dict)


def _megabytes(size: Any) -> int:
    """Harbor's legacy sizes ("4G", "512M", "1024K") in MB."""
    text = str(size).strip().upper()
    units = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}
    if not text or text[-1] not in units:
        raise ValueError(f"{size!r}: a size like '4G' or '512M'")
    return int(float(text[:-1]) * units[text[-1]])


class EnvironmentSection(_Section):
    build_timeout_sec: float = Field(default=DEFAULT_BUILD_TIMEOUT_S, gt=0)
    docker_image: str | None = None
    os: str = "linux"
    cpus: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    storage_mb: int | None = Field(default=None, gt=0)
    gpus: int | None = Field(default=None, ge=0)
    allow_internet: bool | None = None
    network_mode: Literal["public", "no-network", "allowlist"] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    healthcheck: dict[str, Any] | None = None
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _legacy_sizes(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for legacy, field in (("memory", "memory_mb"), ("storage", "storage_mb")):
                if legacy in data:
                    data.setdefault(field, _megabytes(data.pop(legacy)))
        return data

    @field_validator("os")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()

    @property
    def no_network(self) -> bool:
        """Harbor's ``network_mode`` wins over the deprecated ``allow_internet``; an allowlist is held as
        no network (the narrowest policy this framework can hold that still keeps the task off the rest)."""
        if self.network_mode is not None:
            return self.network_mode != "public"
        return self.allow_internet is False


class ArtifactEntry(_Section):
    source: str
    destination: str | None = None


class StepSection(_Section):
    name: str
    agent: AgentSection = Field(default_factory=AgentSection)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    min_reward: float | dict[str, float] | None = None
    artifacts: list[str | ArtifactEntry] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _plain(cls, name: str) -> str:
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"{name!r}: a step's name is a directory name under steps/")
        return name


class TaskConfig(_Section):
    """One task.toml."""

    metadata: dict[str, Any] = Field(default_factory=dict)
    agent: AgentSection = Field(default_factory=AgentSection)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    solution: SolutionSection = Field(default_factory=SolutionSection)
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)
    steps: list[StepSection] | None = None
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    artifacts: list[str | ArtifactEntry] = Field(default_factory=list)
