"""What the runtime executes: one benchmark x model of a sweep (EvalRequest), its execution settings
(attempts, limits, network, retries), where its results go, and the lineage of a forked run. run_info.json
records it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidatorFunctionWrapHandler, field_validator, model_validator

from agentcompass_dagster.contracts.declarations import (
    DECLARATION_FILES,
    BenchmarkConfig,
    Declaration,
    EnvironmentConfig,
    HarnessConfig,
    ModelConfig,
    PluginDeclaration,
    declaration_files,
    read_declaration_files,
)
from agentcompass_dagster.contracts.records import (
    AgentLimits,
    BudgetConfig,
    EvaluationMode,
    NetworkPolicy,
    StoredRecord,
    utcnow,
)


def contestant_id(harness_id: str, model_id: str, several_harnesses: bool) -> str:
    return f"{harness_id}.{model_id}" if several_harnesses else model_id


# How a task's semantic attempts end (R-RETRY-1): ``avg`` runs all k, ``pass`` stops at the first valid success.
Strategy = Literal["avg", "pass"]


class Lineage(StoredRecord):
    """Where a forked run comes from (R-FORK-1): the parent run and attempt, the checkpoint it was cut
    at, and the change of solver model."""

    kind: Literal["fork"] = "fork"
    parent_run_id: str
    parent_run_dir: str
    task_id: str
    attempt: int
    checkpoint_seq: int
    parent_model: str
    model: str
    forked_at: str = Field(default_factory=utcnow)


# What older versions kept in the ``metadata`` mapping of a request and of params.json; fields now.
_METADATA_FIELDS = ("lineage", "durable_seed", "dagster_run_id")


def lift_metadata(data: Any) -> Any:
    """A request or params.json as older versions wrote it (R-COMPAT-1): the lineage, durable seed and
    Dagster run id in its ``metadata`` become fields; the rest of ``metadata`` goes (``resumed_from``
    repeated output.reuse_run_id)."""
    if not isinstance(data, dict) or "metadata" not in data:
        return data
    data = dict(data)
    metadata = data.pop("metadata")
    for name in _METADATA_FIELDS:
        if isinstance(metadata, dict) and metadata.get(name) is not None:
            data.setdefault(name, metadata[name])
    return data


class AttemptsConfig(Declaration):
    k: int = Field(default=1, ge=1, le=1000)
    strategy: Strategy = "avg"


class LimitsConfig(AgentLimits):
    """The agent's budget per attempt (AgentLimits: every agent harness obeys it, and reaching it is
    the attempt's outcome), and the runtime's own bounds: ``attempt_timeout_s`` stops a harness run
    that is still going (recorded as a ``timeout`` error), ``orchestration_timeout_s`` the whole run."""

    task_concurrency: int = Field(default=4, ge=1, le=1024)
    attempt_timeout_s: float | None = Field(default=None, gt=0)
    orchestration_timeout_s: float | None = Field(default=None, gt=0)
    cleanup_grace_seconds: float = Field(default=10.0, ge=0)

    def agent_limits(self) -> AgentLimits:
        return AgentLimits.model_validate(self.model_dump(include=set(AgentLimits.model_fields)))


class NetworkConfig(Declaration):
    """The network of each phase; one left out takes ``Environment.default_policy``."""

    baseline: NetworkPolicy | None = None
    run: NetworkPolicy | None = None
    evaluation: NetworkPolicy | None = None


class ExecutionConfig(Declaration):
    attempts: AttemptsConfig = Field(default_factory=AttemptsConfig)
    max_retries: int = Field(default=0, ge=0, le=100)
    retry_pattern_list: list[str] | None = None
    evaluation_environment_mode: EvaluationMode = EvaluationMode.reuse
    keep_environment: bool = False
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    analyzers: list[str] | None = None

    @field_validator("retry_pattern_list")
    @classmethod
    def _patterns_compile(cls, patterns: list[str] | None) -> list[str] | None:
        for pattern in patterns or []:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
        return patterns


class OutputConfig(Declaration):
    results_dir: Path = Path("results")
    run_name: str | None = None
    run_id: str | None = None
    reuse: bool = False
    reuse_run_id: str | None = None

    @model_validator(mode="after")
    def _reuse_id_turns_reuse_on(self) -> OutputConfig:
        """R-REUSE-1: a non-empty reuse_run_id turns reuse on."""
        if self.reuse_run_id:
            self.reuse = True
        else:
            self.reuse_run_id = None
        return self


class EvalRequest(Declaration):
    """One benchmark x model of a sweep: what the runtime executes and run_info.json records."""

    name: str
    sweep: str = ""
    benchmark: BenchmarkConfig
    model: ModelConfig
    harness: HarnessConfig
    # The harness x model's name in a sweep of several harnesses (Contestant.id): its runs lie under it in
    # place of the model's id, so that the harnesses' runs of a model stay apart.
    contestant: str | None = None
    environment: EnvironmentConfig
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    # Run only these of the selected tasks; the others only carry over from the reuse source. The
    # Dagster layer runs exactly the requested partitions this way while the new run directory still
    # holds every finished detail.
    run_only: list[str] | None = None
    # A fork's parent run and cut (R-FORK-1), and the durable directory its attempt starts from.
    lineage: Lineage | None = None
    durable_seed: Path | None = None
    # The Dagster run executing the request: a run directory it left running is failed with it.
    dagster_run_id: str | None = None
    # The sweep's budget, shared by every request of the sweep (runtime/store/budget.py).
    budget: BudgetConfig | None = None
    # Where the request's benchmark is declared ("<sweep file>: benchmarks[<index>]"), for errors found
    # once its tasks are loaded; it says nothing about what ran, so it is never persisted.
    declared_in: str | None = Field(default=None, exclude=True)

    # Older run_info.json files keep the lineage, seed and Dagster run id in ``metadata`` (R-COMPAT-1).
    _lift_metadata = model_validator(mode="before")(lift_metadata)

    @model_validator(mode="wrap")
    @classmethod
    def _read_declaration_files(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> EvalRequest:
        """A request read back from run_info.json: its declarations note the files they were read from
        again, so that a resume, fork, replay or summary resolves their relative paths as the run did."""
        request: EvalRequest = read_declaration_files(data, handler, "request")
        return request

    def declarations(self) -> dict[str, PluginDeclaration]:
        """Each plugin declaration, by its field."""
        return {
            "benchmark": self.benchmark,
            "model": self.model,
            "harness": self.harness,
            "environment": self.environment,
        }

    def to_task_payload(self) -> dict[str, Any]:
        """The whole request; run_info.json keeps its redacted form (unset optional fields left out, as
        older versions wrote it), with the file each declaration was read from."""
        empty = {
            name
            for name in ("contestant", "run_only", "lineage", "durable_seed", "dagster_run_id", "budget")
            if not getattr(self, name)
        }
        files = declaration_files(self.declarations())
        return {**self.model_dump(mode="json", exclude=empty), DECLARATION_FILES: files}

    @property
    def contestant_id(self) -> str:
        """What the sweep's partitions and run directories name the request's harness x model by."""
        return self.contestant or self.model.id

    def benchmark_field(self, name: str) -> str:
        """A field of the request's benchmark as its declaration names it."""
        return f"{self.declared_in}.{name}" if self.declared_in else f"benchmark.{name}"

    def fork(self, model: ModelConfig, task_id: str, output: OutputConfig, lineage: Lineage, seed: Path) -> EvalRequest:
        """This run's request with the solver model changed, cut down to one attempt of one task that
        starts from ``seed``, the parent's history up to the cut (R-FORK-1)."""
        benchmark = self.benchmark.model_copy(update={"tasks": [task_id]})
        attempts = self.execution.attempts.model_copy(update={"k": 1})
        contestant = contestant_id(self.harness.id, model.id, True) if self.contestant else None
        return self.model_copy(
            update={
                "name": f"{self.benchmark.id}/{contestant or model.id}",
                "model": model,
                "contestant": contestant,
                "benchmark": benchmark,
                "execution": self.execution.model_copy(update={"attempts": attempts}),
                "output": output,
                "run_only": None,
                "lineage": lineage,
                "durable_seed": seed,
                "dagster_run_id": None,
            }
        )
