"""The records a plugin receives and returns: a task, its prepared form, the plan of an attempt, the raw
RunResult a harness returns, the Evaluation a benchmark decides, the scored EvaluatedAttempt an analyzer
reads, and the MetricResult a benchmark aggregates.

RunResult (raw, no score) -> Evaluation -> EvaluatedAttempt (authoritative score). The runtime keeps them
in its own records (runtime/store/outcomes.py). Persisted records only grow by fields with defaults
(R-COMPAT-1) and ignore unknown fields, so a run directory written by another version still loads.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from agentcompass_dagster.contracts.trajectory import TrajectoryStep

SCHEMA_VERSION = 1


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class StoredRecord(BaseModel):
    """A persisted record: tolerant of fields added by newer versions."""

    model_config = ConfigDict(extra="ignore")


class NetworkPolicy(str, Enum):
    host = "host"
    none = "none"


class EvaluationMode(str, Enum):
    """Where ``Benchmark.evaluate`` judges an attempt: ``reuse``, in the attempt's own environment once
    the agent's processes are stopped (what a check of files and programs needs); ``none``, with no
    environment (the answer judged as data); ``fresh``, in a new environment of the same task, opened for
    each try of the evaluation: nothing of the agent's environment survives into it, the check sees what
    the ``RunResult`` carries (its answer, the artifacts ``collect_artifacts`` took).
    A benchmark names the modes it supports (``Benchmark.supported_evaluation_modes``)."""

    reuse = "reuse"
    none = "none"
    fresh = "fresh"


class HostMount(StoredRecord):
    """A host directory a harness asks to find inside the task's environment at ``path`` (the model
    gateway's socket, the agent program it installed): bound into every command run for the agent or the
    reference, never into the verifier's; ``read_only`` unless the harness fills it from inside."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host_path: Path
    path: str
    read_only: bool = True

    @field_validator("path")
    @classmethod
    def _absolute(cls, path: str) -> str:
        if not path.startswith("/") or ".." in path.split("/") or path.rstrip("/") in ("", "/"):
            raise ValueError(f"{path!r}: a mount is an absolute path below / without '..'")
        return path


class TaskDir(StoredRecord):
    """A directory a task's commands find at an absolute ``path`` (Harbor's ``/tests``, ``/logs/verifier``),
    empty when the session opens and seen only by the commands run for ``visible_to`` (``Caller``):
    ``agent``, every command, the agent's to write; ``reference``, the reference solution's alone;
    ``verifier``, the verifier's alone. The framework writes into it from the host (``write_file``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    visible_to: Literal["agent", "reference", "verifier"]

    @field_validator("path")
    @classmethod
    def _absolute(cls, path: str) -> str:
        if not path.startswith("/") or ".." in path.split("/") or path.rstrip("/") in ("", "/"):
            raise ValueError(f"{path!r}: a task directory is an absolute path below / without '..'")
        return path.rstrip("/")


class TaskEnvironment(StoredRecord):
    """What a task asks of the environment it runs in, beyond the sweep's declaration: its own image
    (built from the Dockerfile in ``build_context``, or the prebuilt ``image``), its working directory,
    the resources it needs, whether it may reach a network, the variables every command gets, and the
    directories its scripts expect at absolute paths. A provider honours what it can and refuses a task
    it cannot (``Environment.refusal``): it never runs one in a silently different environment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    build_context: Path | None = None
    dockerfile: str = "Dockerfile"
    image: str | None = None
    build_timeout_s: float = Field(default=600.0, gt=0)
    # Absolute; None: the image's WORKDIR where the task has an image, else the provider's own directory.
    workdir: str | None = None
    cpus: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, ge=16)
    storage_mb: int | None = Field(default=None, ge=16)
    # ``none``: the task may reach no network in any phase, whatever the sweep allows (the narrower wins).
    network: NetworkPolicy | None = None
    # Every command's environment variables, as the task declares them (values are secrets in records).
    env: dict[str, str] = Field(default_factory=dict)
    dirs: tuple[TaskDir, ...] = ()
    # Users of the task's own image its agent (and its reference solution) and its verifier run as (a name
    # or uid[:gid]); None: the image's USER. A provider never runs the agent as root, nor as the verifier.
    agent_user: str | None = None
    verifier_user: str | None = None

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, workdir: str | None) -> str | None:
        if workdir is not None and (not workdir.startswith("/") or ".." in workdir.split("/")):
            raise ValueError(f"{workdir!r}: the working directory is an absolute path without '..'")
        return workdir

    @property
    def has_image(self) -> bool:
        return self.build_context is not None or self.image is not None


class TaskStep(StoredRecord):
    """One step of a multi-step task: its own instruction (``input``), run by a new harness session in
    the environment the earlier steps left, then verified on its own; ``agent_timeout_s`` bounds that
    run like ``TaskSpec.agent_timeout_s``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    input: str
    agent_timeout_s: float | None = Field(default=None, gt=0)


class NotLoaded(StoredRecord):
    """A task the benchmark found and could not load (a missing file, a malformed configuration): left
    out of the run, named with the reason in its summary; the other tasks run."""

    id: str
    reason: str


@pydantic_dataclass(slots=True, config=ConfigDict(extra="ignore"))
class TaskSpec:
    """One task as the benchmark loaded it; id is stable across loads (R-COMPAT-1). A validated
    dataclass with slots rather than a model: a run holds every task of its benchmark, and a model's
    __dict__ and fields-set would make each 400 bytes larger (40 MB at 100,000 tasks).

    ``environment``: what the task asks of its environment (None: the sweep's declaration as it is).
    ``agent_timeout_s``: the task's own bound on the agent's wall time; the runtime applies the smaller of
    it and the sweep's ``max_wall_s``. ``steps``: the steps of a multi-step task, run in order in one
    environment, each verified (``Benchmark.prepare_step`` and ``combine_steps``)."""

    id: str
    category: str | None = None
    input: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    environment: TaskEnvironment | None = None
    agent_timeout_s: float | None = Field(default=None, gt=0)
    steps: tuple[TaskStep, ...] = ()


class PreparedTask(StoredRecord):
    """A task made ready inside an open environment session."""

    task: TaskSpec
    input: str
    data: dict[str, Any] = Field(default_factory=dict)


class Usage(StoredRecord):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = 0.0

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost_usd=cost,
        )


class Price(BaseModel):
    """USD per million tokens. Cache prices default to the input price."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


# ``failed``: the agent failed the task in a way of its own (an environment limit hit, a reply its harness
# gives up on): scored 0 like a wrong answer, never an error. ``timeout``: it ran out of its time, also
# scored 0. ``error``: the infrastructure failed (an endpoint, the environment, the framework itself).
RunStatus = Literal["completed", "failed", "error", "timeout", "cancelled"]


class AgentLimits(StoredRecord):
    """The limits of one attempt, the same for every agent harness under comparison: model calls
    (turns), tokens (input + output), cost in USD and wall time in seconds, counted over every process
    that worked on the attempt. None is unlimited."""

    model_config = ConfigDict(extra="forbid")

    max_turns: int | None = Field(default=30, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_wall_s: float | None = Field(default=None, gt=0)


class BudgetConfig(StoredRecord):
    """What the whole sweep may spend across all of its runs, models and workers; checked before each
    model call against a ledger every run of the sweep shares (runtime/store/budget.py)."""

    model_config = ConfigDict(extra="forbid")

    max_cost_usd: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)


class SweepBudget(StoredRecord):
    """A sweep's budget as one of its attempts meets it: the limits, and the ledger file that every
    process running the sweep appends its model calls to."""

    limits: BudgetConfig
    ledger: Path
    # Whose calls these are: ``<benchmark>/<model>/<run_id>``, written with each call's spend.
    run: str | None = None


# The fields of AgentLimits an attempt can reach.
LimitName = Literal["max_turns", "max_tokens", "max_cost_usd", "max_wall_s"]


class LimitHit(StoredRecord):
    """The limit an attempt reached: which, its allowance, and what was used when it stopped. Reaching a
    limit is an outcome of the attempt (it is scored, usually as incorrect), not an error to re-run."""

    limit: LimitName
    allowance: float
    used: float

    @property
    def message(self) -> str:
        units = {"max_turns": " model calls", "max_tokens": " tokens", "max_cost_usd": " USD", "max_wall_s": " s"}
        return f"limit {self.limit}={self.allowance:g} reached: {self.used:g}{units[self.limit]} used"


class RunResult(StoredRecord):
    """Raw outcome of running a harness on a task: no score yet. ``trajectory`` is the attempt's steps in
    order, kept as JSON objects; a harness gives the typed steps of contracts/trajectory.py (MessageStep,
    ModelCallStep, CommandStep, ToolCallStep) or objects of their shapes, which the analyzers and the
    trajectory pages read (a step of another type is kept, and shown as its JSON):

        {"type": "message", "role": "system", "content": "..."}   (the first two: instructions, then prompt)
        {"type": "model_call", "turn": 0, "content": "...", "tool_calls": [...], "stop_reason": "stop"}
        {"type": "command", "command": "ls", "exit_code": 0, "output": "...", "timed_out": false,
         "duration_s": 0.1}
        {"type": "tool_call", "turn": 0, "call": {"name": "bash", ...}, "command": "ls", "exit_code": 0,
         "output": "..."}
    """

    status: RunStatus = "completed"
    final_answer: str | None = None
    trajectory: list[dict[str, Any]] = Field(default_factory=list)
    artifacts: dict[str, Any] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    duration_s: float = 0.0
    error: str | None = None
    # Why the agent failed the task, when the failure is its own (a model reply the harness gives up on):
    # a scored failure, not an error; the attempt is not evaluated.
    failure: str | None = None
    limit: LimitHit | None = None

    @field_validator("trajectory", mode="before")
    @classmethod
    def _steps_as_json(cls, steps: Any) -> Any:
        if not isinstance(steps, list):
            return steps
        return [step.as_json() if isinstance(step, TrajectoryStep) else step for step in steps]


class Evaluation(StoredRecord):
    """What Benchmark.evaluate decides about one attempt. ``failure``: the agent's work gave the verifier
    no verdict (no reward written, a check that timed out on what the agent left): scored 0, with the
    reason. ``error``: the evaluation itself could not run (infrastructure)."""

    correct: bool = False
    score: float = 0.0
    error: str | None = None
    failure: str | None = None
    fields: dict[str, Any] = Field(default_factory=dict)
    # Named numeric results beside the score (Harbor's reward.json metrics): each lands in the detail,
    # task_results.parquet (``rewards``) and metrics.parquet (``reward.<name>``, its mean over tasks).
    rewards: dict[str, float] = Field(default_factory=dict)
    # Files the check left (relative name -> bytes, e.g. ``verifier/test-stdout.txt``): the runtime keeps
    # them, redacted, in the run directory beside the attempt's detail, never in the detail itself.
    files: dict[str, bytes] = Field(default_factory=dict, exclude=True)


class StepOutcome(StoredRecord):
    """What one step of a multi-step task came to: its evaluation, and what the agent's run of it
    returned (status, the limit it hit, its failure)."""

    name: str
    evaluation: Evaluation
    status: RunStatus = "completed"
    failure: str | None = None


class EvaluatedAttempt(StoredRecord):
    """One semantic attempt with its authoritative score, as stored under its index in a detail."""

    attempt: int
    status: RunStatus = "completed"
    correct: bool = False
    score: float = 0.0
    final_answer: str | None = None
    run_error: str | None = None
    eval_error: str | None = None
    # A failure the agent caused (a limit, a timeout, no verdict): counted in accuracy as 0, never re-run.
    failure: str | None = None
    benchmark_fields: dict[str, Any] = Field(default_factory=dict)
    rewards: dict[str, float] = Field(default_factory=dict)
    analysis_result: dict[str, Any] | None = None
    trajectory: list[dict[str, Any]] = Field(default_factory=list)
    artifacts: dict[str, Any] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    duration_s: float = 0.0
    limit: LimitHit | None = None
    retries: int = 0
    started_at: str | None = None
    finished_at: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def error(self) -> str | None:
        return self.run_error or self.eval_error

    @property
    def analysis_errors(self) -> dict[str, str]:
        errors: dict[str, str] = self.meta.get("analysis_errors", {})
        return errors


class MetricCounts(StoredRecord):
    total: int = Field(ge=0)
    evaluated: int = Field(ge=0)
    error: int = Field(ge=0)

    @model_validator(mode="after")
    def _fits(self) -> MetricCounts:
        if self.evaluated + self.error > self.total:
            raise ValueError(
                f"counts.evaluated ({self.evaluated}) + counts.error ({self.error}) exceed counts.total ({self.total})"
            )
        return self


class MetricResult(StoredRecord):
    """Request-level metrics, validated (R-STORE-7)."""

    schema_version: int = SCHEMA_VERSION
    metrics: dict[str, float | None]
    counts: MetricCounts
    details: dict[str, Any] | None = None
    extra: dict[str, Any] | None = None

    @field_validator("metrics")
    @classmethod
    def _has_a_finite_number(cls, metrics: dict[str, float | None]) -> dict[str, float | None]:
        if not any(isinstance(v, (int, float)) and math.isfinite(v) for v in metrics.values()):
            raise ValueError("metrics must hold at least one finite number")
        return metrics


class ExecutionPlan(StoredRecord):
    """How one attempt of one task runs; built and recorded before its environment opens (R-ATT-1)."""

    task_id: str
    attempt: int
    benchmark_id: str
    harness_id: str
    environment_id: str
    model_id: str
    evaluation_environment_mode: EvaluationMode = EvaluationMode.reuse
    keep_environment: bool = False
    baseline_network_policy: NetworkPolicy = NetworkPolicy.host
    run_network_policy: NetworkPolicy = NetworkPolicy.host
    evaluation_network_policy: NetworkPolicy = NetworkPolicy.host
    attempt_timeout_s: float | None = None
    agent_limits: AgentLimits = Field(default_factory=AgentLimits)
    max_retries: int = 0
    retry_pattern_list: list[str] | None = None
    benchmark_plan: dict[str, Any] = Field(default_factory=dict)
    # Where a durable harness keeps the attempt's activity log and checkpoints, set by the runtime just
    # before the harness session starts; a place on this machine, so never persisted (see persisted_view).
    durable_dir: Path | None = Field(default=None, exclude=True)
    # Where the environment and the benchmark leave the attempt's files in its run directory (a task
    # image's build log, the verifier's /logs/verifier): made by the runtime before the environment
    # opens; a place on this machine, never persisted.
    artifacts_dir: Path | None = Field(default=None, exclude=True)
    # The sweep's budget, checked before each model call; set by the planner from the request and never
    # persisted: it says where this machine keeps the ledger, not how the attempt runs.
    budget: SweepBudget | None = Field(default=None, exclude=True)
    # Host directories the harness asks for inside the environment (``Harness.mounts``): places on this
    # machine, never persisted.
    mounts: list[HostMount] = Field(default_factory=list, exclude=True)

    PERSISTED_FIELDS: ClassVar[tuple[str, ...]] = (
        "benchmark_id",
        "harness_id",
        "environment_id",
        "model_id",
        "evaluation_environment_mode",
        "keep_environment",
        "baseline_network_policy",
        "run_network_policy",
        "evaluation_network_policy",
        "attempt_timeout_s",
        "agent_limits",
        "max_retries",
        "retry_pattern_list",
        "benchmark_plan",
    )

    def persisted_view(self) -> dict[str, Any]:
        """The explicit allow-list that run_info.json and details carry (R-STORE-4), never a whole dump."""
        data = self.model_dump(mode="json", include=set(self.PERSISTED_FIELDS))
        return {name: data[name] for name in self.PERSISTED_FIELDS}
