"""A directory of Harbor tasks read as TaskSpecs, each as its author wrote it: its own environment
(``environment/`` or ``docker_image``), working directory, resources, network and variables, its
timeouts, its steps. A task that cannot be read is named with the reason and left out; the others load."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from agentcompass_dagster.contracts.environment import resolve_host_env
from agentcompass_dagster.contracts.records import (
    NetworkPolicy,
    NotLoaded,
    TaskDir,
    TaskEnvironment,
    TaskSpec,
    TaskStep,
)
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.plugins.benchmarks.harbor.task_config import (
    DEFAULT_VERIFIER_TIMEOUT_S,
    ArtifactEntry,
    TaskConfig,
)
from agentcompass_dagster.runtime.store.redact import register_secret
from agentcompass_dagster.contracts.validation import validate_declaration

# Harbor's paths inside a task's environment (its ``EnvironmentPaths``): the tests, uploaded for the
# verifier once the agent's processes are gone; the solution, for the oracle only; the verifier's
# rewards and logs; the agent's logs and artifacts, which every command sees.
TESTS, SOLUTION, VERIFIER_LOGS, AGENT_LOGS, ARTIFACT_LOGS = (
    "/tests",
    "/solution",
    "/logs/verifier",
    "/logs/agent",
    "/logs/artifacts",
)
DIRS = (
    TaskDir(path=TESTS, visible_to="verifier"),
    TaskDir(path=VERIFIER_LOGS, visible_to="verifier"),
    TaskDir(path=SOLUTION, visible_to="reference"),
    TaskDir(path=AGENT_LOGS, visible_to="agent"),
    TaskDir(path=ARTIFACT_LOGS, visible_to="agent"),
)
# Harbor's canary lines (HTML or # comments naming a canary) lead some instructions; agents never see them.
_CANARY = re.compile(r"^(<!--.*canary.*-->|#.*canary.*)$", re.IGNORECASE)


class StepFacts(BaseModel):
    """What the benchmark needs of one step when it runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    verifier_timeout_s: float
    verifier_env: dict[str, str]
    min_reward: float | dict[str, float] | None = None
    artifacts: tuple[str, ...] = ()


class TaskFacts(BaseModel):
    """What the benchmark needs of a task when it runs, beyond the TaskSpec: kept in its metadata (beside
    ``dir``, the task's directory, which the reward-hacking analyzer reads too)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verifier_timeout_s: float
    verifier_env: dict[str, str]
    solution_env: dict[str, str]
    artifacts: tuple[str, ...] = ()
    steps: tuple[StepFacts, ...] = ()
    reward_strategy: str = "mean"
    # What task.toml declares that this framework records and does not apply, by field.
    not_applied: dict[str, str] = {}


def instruction(path: Path) -> str:
    """An instruction file without its leading canary lines and the blank lines after them."""
    lines = path.read_text().split("\n")
    start = 0
    while start < len(lines) and _CANARY.match(lines[start].strip()):
        start += 1
    while start < len(lines) and not lines[start].strip():
        start += 1
    return "\n".join(lines[start:])


def task_dirs(tasks_dir: Path) -> list[Path]:
    """The task directories: ``tasks_dir`` itself when it is a task, else each directory in it with a
    task.toml, in name order."""
    if (tasks_dir / "task.toml").is_file():
        return [tasks_dir]
    return sorted(p for p in tasks_dir.iterdir() if p.is_dir() and (p / "task.toml").is_file())


def load_task(task_dir: Path, max_verifier_timeout_s: float | None) -> TaskSpec | NotLoaded:
    """One task directory as a TaskSpec, or why it cannot be one."""
    try:
        return _load(task_dir, max_verifier_timeout_s)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, UserError, KeyError, ValueError) as exc:
        reason = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
        return NotLoaded(id=task_dir.name, reason=reason)


def _load(task_dir: Path, max_verifier_timeout_s: float | None) -> TaskSpec:
    config = validate_declaration(
        TaskConfig, tomllib.loads((task_dir / "task.toml").read_text()), str(task_dir / "task.toml")
    )
    _check_supported(config, task_dir)

    def capped(timeout: float | None) -> float:
        wanted = timeout if timeout is not None else DEFAULT_VERIFIER_TIMEOUT_S
        return min(wanted, max_verifier_timeout_s) if max_verifier_timeout_s is not None else wanted

    steps, step_facts = _steps(config, task_dir, capped)
    if not steps:
        if not (task_dir / "instruction.md").is_file():
            raise ValueError("instruction.md is missing")
        if not (task_dir / "tests" / "test.sh").is_file():
            raise ValueError("tests/test.sh is missing: the task has no verifier")
    facts = TaskFacts(
        verifier_timeout_s=capped(config.verifier.timeout_sec),
        verifier_env=_resolved(config.verifier.env, "verifier.env"),
        solution_env=_resolved(config.solution.env, "solution.env"),
        artifacts=_artifacts(config.artifacts),
        steps=tuple(step_facts),
        reward_strategy=config.multi_step_reward_strategy or "mean",
        not_applied=_not_applied(config),
    )
    category = config.metadata.get("category")
    return TaskSpec(
        id=task_dir.name,
        category=str(category) if category is not None else None,
        input="" if steps else instruction(task_dir / "instruction.md"),
        metadata={"dir": str(task_dir), "harbor": facts.model_dump(mode="json")},
        environment=_environment(config, task_dir),
        agent_timeout_s=None if steps else config.agent.timeout_sec,
        steps=tuple(steps),
    )


def _check_supported(config: TaskConfig, task_dir: Path) -> None:
    """Refuse what no environment here gives a task (it is not loaded, with the reason)."""
    environment = config.environment
    if environment.os != "linux":
        raise ValueError(f"task.toml: environment.os={environment.os!r}: only linux environments run here")
    if environment.gpus:
        raise ValueError(f"task.toml: environment.gpus={environment.gpus}: no GPU is offered here")
    if (task_dir / "environment" / "docker-compose.yaml").is_file() and environment.docker_image is None:
        raise ValueError(
            "environment/docker-compose.yaml: environments of several containers are not supported; "
            "a task runs in the one container its environment/Dockerfile builds"
        )
    verifiers = [config.verifier, *(step.verifier for step in config.steps or [])]
    if any(v.environment is not None or v.environment_mode == "separate" for v in verifiers):
        raise ValueError(
            "task.toml: verifier.environment_mode='separate': a verifier in a container of its own "
            "is not supported; the verifier runs in the task's environment"
        )


def _resolved(table: dict[str, str], where: str) -> dict[str, str]:
    """An env table with the host's values for its templates, each registered as a secret."""
    try:
        values = resolve_host_env(table)
    except KeyError as exc:
        raise ValueError(f"task.toml: [{where}] {exc.args[0]}") from None
    for value in values.values():
        # What runs gets the value; every record written from now on in this process gets [REDACTED].
        register_secret(value)
    return values


def _steps(
    config: TaskConfig,
    task_dir: Path,
    capped: Callable[[float | None], float],
) -> tuple[list[TaskStep], list[StepFacts]]:
    """A multi-step task's steps (none for a task of one), each with its instruction and a test."""
    steps: list[TaskStep] = []
    facts: list[StepFacts] = []
    for step in config.steps or []:
        step_dir = task_dir / "steps" / step.name
        if not (step_dir / "instruction.md").is_file():
            raise ValueError(f"steps/{step.name}/instruction.md is missing")
        if not (step_dir / "tests" / "test.sh").is_file() and not (task_dir / "tests" / "test.sh").is_file():
            raise ValueError(
                f"step {step.name!r} has no test: neither steps/{step.name}/tests/test.sh nor tests/test.sh exists"
            )
        steps.append(
            TaskStep(
                name=step.name,
                input=instruction(step_dir / "instruction.md"),
                agent_timeout_s=step.agent.timeout_sec or config.agent.timeout_sec,
            )
        )
        facts.append(
            StepFacts(
                name=step.name,
                verifier_timeout_s=capped(step.verifier.timeout_sec or config.verifier.timeout_sec),
                verifier_env=_resolved({**config.verifier.env, **step.verifier.env}, f"steps.{step.name}.verifier.env"),
                min_reward=step.min_reward,
                artifacts=_artifacts(step.artifacts),
            )
        )
    if len({s.name for s in steps}) != len(steps):
        raise ValueError("task.toml: [[steps]] names are not unique")
    return steps, facts


def _environment(config: TaskConfig, task_dir: Path) -> TaskEnvironment:
    environment = config.environment
    build_context = task_dir / "environment"
    has_dockerfile = (build_context / "Dockerfile").is_file()
    return TaskEnvironment(
        build_context=build_context if has_dockerfile and environment.docker_image is None else None,
        image=environment.docker_image,
        build_timeout_s=environment.build_timeout_sec,
        workdir=environment.workdir,
        cpus=environment.cpus,
        memory_mb=environment.memory_mb,
        storage_mb=environment.storage_mb,
        network=NetworkPolicy.none if environment.no_network else None,
        env=_resolved(environment.env, "environment.env"),
        dirs=DIRS,
        agent_user=None if config.agent.user is None else str(config.agent.user),
        verifier_user=None if config.verifier.user is None else str(config.verifier.user),
    )


def _artifacts(entries: list[str | ArtifactEntry]) -> tuple[str, ...]:
    sources = tuple(entry if isinstance(entry, str) else entry.source for entry in entries)
    for source in sources:
        if not source.startswith("/") or ".." in source.split("/"):
            raise ValueError(f"task.toml: artifacts: {source!r} is not an absolute path without '..'")
    return sources


def _not_applied(config: TaskConfig) -> dict[str, str]:
    """The fields task.toml sets that this framework records and does not apply, with why."""
    found = {}
    if config.environment.healthcheck is not None:
        found["environment.healthcheck"] = "no readiness check is run before the agent starts"
    if config.environment.mcp_servers:
        found["environment.mcp_servers"] = "MCP servers are not offered to harnesses"
    if config.environment.network_mode == "allowlist":
        found["environment.network_mode"] = "'allowlist' is held as no network"
    return found
