"""Pydantic models of every declaration (resources/*.yaml) and of the EvalRequest the runtime executes.
Declarations forbid unknown fields (a typo is an error, not an ignored setting); errors are turned into
one line naming the file, the field and the value.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidatorFunctionWrapHandler, field_validator, model_validator

from agentcompass_dagster.contestants import Contestant, contestant_id
from agentcompass_dagster.declaration import Declaration
from agentcompass_dagster.deployment import DagsterDeployment
from agentcompass_dagster.errors import UserError
from agentcompass_dagster.references import (DECLARATION_FILES, check_plugin_ids, declaration_files, default_resources,
                                             load_yaml, read_declaration_files, resolve_reference)
from agentcompass_dagster.validation import validate_declaration
from agentcompass_dagster.contracts.records import AgentLimits, BudgetConfig, EvaluationMode, NetworkPolicy
from agentcompass_dagster.runtime.store.records import Lineage, Strategy, lift_metadata

KINDS = ("models", "harnesses", "environments")


class PluginDeclaration(Declaration):
    """What a plugin is built from. The plugin validates its params only once built, far from the YAML, so
    the declaration keeps the file it was read from for the plugin's errors to name."""

    id: str = Field(min_length=1)
    # resources/<kind>/NAME.yaml, or the sweep that declares it inline; set by load_sweep. Not part of what
    # was declared, so never persisted.
    _file: str | None = PrivateAttr(default=None)

    @property
    def file(self) -> str | None:
        return self._file

    def read_from(self, file: str) -> None:
        self._file = file

    def resolve_path(self, path: str | Path) -> Path:
        """A path one of its params names. A relative one is beside the file that declares it (the sweep, or
        resources/<kind>/NAME.yaml), as docker-compose resolves its paths, so a declaration names the same
        files from any working directory; an absolute one, or one read from no file (the launchpad's, a
        plugin's built in code: relative to the working directory), stays as it is."""
        path = Path(path)
        if path.is_absolute() or self._file is None:
            return path
        return (Path(self._file).parent / path).resolve()

    def __eq__(self, other: object) -> bool:
        # Where a declaration was read from is not part of what it declares: a request read back from
        # run_info.json declares what the sweep's does (a fork compares the two).
        if not isinstance(other, PluginDeclaration):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__


class BenchmarkConfig(PluginDeclaration):
    params: dict[str, Any] = Field(default_factory=dict)
    tasks: list[str] | None = None
    limit: int | None = Field(default=None, ge=1)


class ModelConfig(PluginDeclaration):
    provider: str = "none"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class ProvidedDeclaration(PluginDeclaration):
    """A declaration whose plugin is its ``provider`` (each agent CLI a ``cli_agent``), else its id."""

    provider: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)

    @property
    def provider_id(self) -> str:
        return self.provider or self.id


class HarnessConfig(ProvidedDeclaration):
    """An agent program's declaration (resources/harnesses)."""


class EnvironmentConfig(ProvidedDeclaration):
    env: dict[str, str] = Field(default_factory=dict)
    capacity: int = Field(default=0, ge=0)
    open_qps: float = Field(default=0.0, ge=0)


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


class ScheduleConfig(Declaration):
    """A recurring sweep: every tick runs what is missing, then the metrics; with ``fresh``, every
    tick evaluates every task again (a weekly re-evaluation whose runs the regression check compares).
    Like every Dagster schedule it ticks only while running (turned on in the UI, or declared running
    here)."""

    cron: str | None = None
    default_status: Literal["running", "stopped"] = "stopped"
    fresh: bool = False


class SensorConfig(Declaration):
    """How the code location's new-tasks sensor (one for every sweep: agentcompass_new_tasks) treats this
    sweep: it notices new tasks in a benchmark's source and runs them. "running" by default: its first look
    at a sweep registers the partitions (the UI shows them before the first run) and runs none; "stopped"
    leaves the sweep out of it. It looks at the sweep at most every ``minimum_interval_seconds`` (the
    sensor ticks at the smallest interval of its sweeps)."""

    default_status: Literal["running", "stopped"] = "running"
    minimum_interval_seconds: int = Field(default=300, ge=1)


class AlertsConfig(Declaration):
    """The regression check on each benchmark x model: the newest complete run against the previous one,
    on the tasks both ran, with the paired test of the statistics. It fails when the newest is worse with
    p < ``alpha`` and by more than ``min_drop`` (accuracy points, 0..1); ``blocking`` makes a failure stop
    what depends on the metrics; ``webhook_url`` is called once per failed check."""

    alpha: float = Field(default=0.05, gt=0, lt=1)
    min_drop: float = Field(default=0.0, ge=0, le=1)
    blocking: bool = False
    webhook_url: str | None = None
    # A model the others are checked against on the newest runs: a check per other model fails when it
    # is worse than this one by the same rule.
    baseline_model: str | None = None

    @field_validator("webhook_url")
    @classmethod
    def _http_only(cls, url: str | None) -> str | None:
        # urllib would also "POST" to file: and ftp: URLs.
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return url


# An owner as Dagster accepts one: an email address or team:NAME.
OWNER = re.compile(r"^([^@\s]+@[^@\s]+\.[^@\s]+|team:\S+)$")


class SweepConfig(Declaration):
    """benchmarks x models x harnesses (one, or several: each harness x model a contestant), each run
    with one environment and execution spec."""

    name: str = Field(min_length=1)
    description: str = ""
    benchmarks: list[BenchmarkConfig] = Field(min_length=1)
    models: list[ModelConfig] = Field(min_length=1)
    # Exactly one of the two.
    harness: HarnessConfig | None = None
    harnesses: list[HarnessConfig] | None = Field(default=None, min_length=1)
    environment: EnvironmentConfig
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    sensor: SensorConfig = Field(default_factory=SensorConfig)
    alerts: AlertsConfig = Field(default_factory=AlertsConfig)
    budget: BudgetConfig | None = None
    dagster: DagsterDeployment = Field(default_factory=DagsterDeployment)
    # Who answers for the sweep: the owners of its assets in the Dagster UI.
    owners: list[str] = Field(default_factory=list)
    # The file load_sweep read this from, for errors found only once tasks are loaded.
    _file: str | None = PrivateAttr(default=None)

    @field_validator("owners")
    @classmethod
    def _owners(cls, owners: list[str]) -> list[str]:
        bad = [owner for owner in owners if not OWNER.match(owner)]
        if bad:
            raise ValueError(f"{bad[0]!r} is neither an email address nor a team:NAME")
        return owners

    @model_validator(mode="after")
    def _unique_ids(self) -> SweepConfig:
        if self.harness is None and self.harnesses is None:
            raise ValueError("harness: missing (or harnesses: a list of them)")
        if self.harness is not None and self.harnesses is not None:
            raise ValueError(f"harness={self.harness.id!r} and harnesses={[h.id for h in self.harnesses]!r}: "
                             "declare one of the two")
        for field, ids in (("benchmarks", [b.id for b in self.benchmarks]), ("models", [m.id for m in self.models]),
                           ("harnesses", [h.id for h in self.harnesses or []])):
            seen: set[str] = set()
            for index, item in enumerate(ids):
                if item in seen:
                    raise ValueError(f"{field}[{index}].id {item!r} is declared twice")
                seen.add(item)
        named = [c.id for c in self.contestants()]
        if twice := next((name for i, name in enumerate(named) if name in named[:i]), None):
            raise ValueError(f"harnesses: two harness x model pairs are named {twice!r} (<harness>.<model>); "
                             "rename one")
        baseline = self.alerts.baseline_model
        if baseline is not None and baseline not in {c.id for c in self.contestants()}:
            raise ValueError(f"alerts.baseline_model {baseline!r} is not one of the sweep's "
                             + ("contestants (<harness>.<model>)" if self.several_harnesses else "models"))
        return self

    @property
    def harness_fields(self) -> dict[str, HarnessConfig]:
        """The declared harness, or harnesses, by field."""
        if self.harness is not None:
            return {"harness": self.harness}
        return {f"harnesses[{i}]": harness for i, harness in enumerate(self.harnesses or [])}

    @property
    def harness_list(self) -> list[HarnessConfig]:
        return list(self.harness_fields.values())

    @property
    def several_harnesses(self) -> bool:
        return len(self.harness_list) > 1

    def contestants(self) -> list[Contestant]:
        """Every model x harness, models first (in a sweep of one harness: the models)."""
        return [Contestant(contestant_id(harness.id, model.id, self.several_harnesses), harness, model)
                for model in self.models for harness in self.harness_list]

    def contestant(self, contestant_id: str) -> Contestant:
        return next(c for c in self.contestants() if c.id == contestant_id)

    def declarations(self) -> dict[str, PluginDeclaration]:
        """Each plugin declaration, by its field."""
        return {**{f"benchmarks[{i}]": benchmark for i, benchmark in enumerate(self.benchmarks)},
                **{f"models[{i}]": model for i, model in enumerate(self.models)},
                **self.harness_fields, "environment": self.environment}

    def read_from(self, file: str, files: dict[str, str]) -> None:
        """Note the file the sweep was read from, and each plugin declaration's: the file a name in its field
        resolved to (``files``, by field), else the sweep's."""
        self._file = file
        for field, declaration in self.declarations().items():
            declaration.read_from(files.get(field, file))

    def requests(self) -> list[EvalRequest]:
        """Every benchmark x model x harness, with the declared output (the runtime alone: a new run directory
        each)."""
        output = self.output.model_copy(update={"run_name": self.output.run_name or self.name})
        return [self.request(benchmark, contestant, output)
                for benchmark in self.benchmarks for contestant in self.contestants()]

    def request(
        self,
        benchmark: BenchmarkConfig,
        contestant: Contestant,
        output: OutputConfig,
        *,
        harness: HarnessConfig | None = None,
        environment: EnvironmentConfig | None = None,
        run_only: list[str] | None = None,
        dagster_run_id: str | None = None,
    ) -> EvalRequest:
        """The one place a sweep's EvalRequest is built; the Dagster layer overrides the harness and the
        environment (launchpad resources), says which tasks to run and which Dagster run runs them."""
        index = next((i for i, declared in enumerate(self.benchmarks) if declared.id == benchmark.id), None)
        return EvalRequest(
            name=f"{benchmark.id}/{contestant.id}",
            sweep=self.name,
            benchmark=benchmark,
            model=contestant.model,
            harness=harness or contestant.harness,
            contestant=contestant.id if self.several_harnesses else None,
            environment=environment or self.environment,
            execution=self.execution,
            output=output,
            run_only=run_only,
            dagster_run_id=dagster_run_id,
            budget=self.budget,
            declared_in=f"{self._file}: benchmarks[{index}]" if self._file and index is not None else None,
        )


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
    # The sweep's budget, shared by every request of the sweep (runtime/execution/budget.py).
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
        return {"benchmark": self.benchmark, "model": self.model, "harness": self.harness,
                "environment": self.environment}

    def to_task_payload(self) -> dict[str, Any]:
        """The whole request; run_info.json keeps its redacted form (unset optional fields left out, as
        older versions wrote it), with the file each declaration was read from."""
        empty = {name for name in ("contestant", "run_only", "lineage", "durable_seed", "dagster_run_id", "budget")
                 if not getattr(self, name)}
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
        return self.model_copy(update={
            "name": f"{self.benchmark.id}/{contestant or model.id}", "model": model, "contestant": contestant,
            "benchmark": benchmark,
            "execution": self.execution.model_copy(update={"attempts": attempts}), "output": output,
            "run_only": None, "lineage": lineage, "durable_seed": seed, "dagster_run_id": None,
        })


def load_sweep(path: Path, resources: Path | None = None) -> SweepConfig:
    """Load a sweep file, resolving the names of its models, harness(es) and environment in ``resources`` (default:
    beside the sweep, see _resources_root), then in the project's (./resources, else the package's)."""
    path = Path(path)
    roots = [Path(resources) if resources is not None else _resources_root(path), default_resources()]
    data = load_yaml(path)
    where = str(path)
    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a mapping of sweep fields, got {type(data).__name__}")
    # field -> the declaration file its name resolved to
    files: dict[str, str] = {}
    data.setdefault("name", path.stem)
    for field, kind in (("models", "models"), ("harnesses", "harnesses")):
        if isinstance(data.get(field), list):
            found = [resolve_reference(roots, kind, d, f"{field}[{i}]", where) for i, d in enumerate(data[field])]
            data[field] = [declared for declared, _ in found]
            files.update({f"{field}[{i}]": file for i, (_, file) in enumerate(found) if file})
    for field, kind in (("harness", "harnesses"), ("environment", "environments")):
        if field in data:
            data[field], file = resolve_reference(roots, kind, data[field], field, where)
            if file is not None:
                files[field] = file
    sweep = validate_declaration(SweepConfig, data, where)
    sweep.read_from(where, files)
    check_plugin_ids(sweep, where)
    return sweep


def _resources_root(sweep_path: Path) -> Path:
    parent = sweep_path.resolve().parent
    return parent.parent if parent.name == "sweeps" else parent
