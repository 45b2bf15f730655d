"""A sweep (resources/sweeps/NAME.yaml): benchmarks x models x harnesses in one environment, with its
schedule, sensors, alerts and Dagster deployment; load_sweep reads one, resolving the names it declares.
Errors are one line naming the file, the field and the value."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from agentcompass_dagster.contracts.declarations import (
    BenchmarkConfig,
    Declaration,
    EnvironmentConfig,
    HarnessConfig,
    ModelConfig,
    PluginDeclaration,
)
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.contracts.records import BudgetConfig
from agentcompass_dagster.contracts.validation import validate_declaration
from agentcompass_dagster.declarations.contestants import Contestant
from agentcompass_dagster.declarations.deployment import DagsterDeployment
from agentcompass_dagster.declarations.references import (
    check_plugin_ids,
    default_resources,
    load_yaml,
    resolve_reference,
)
from agentcompass_dagster.contracts.request import EvalRequest, ExecutionConfig, OutputConfig, contestant_id


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
            raise ValueError(
                f"harness={self.harness.id!r} and harnesses={[h.id for h in self.harnesses]!r}: declare one of the two"
            )
        for field, ids in (
            ("benchmarks", [b.id for b in self.benchmarks]),
            ("models", [m.id for m in self.models]),
            ("harnesses", [h.id for h in self.harnesses or []]),
        ):
            seen: set[str] = set()
            for index, item in enumerate(ids):
                if item in seen:
                    raise ValueError(f"{field}[{index}].id {item!r} is declared twice")
                seen.add(item)
        named = [c.id for c in self.contestants()]
        if twice := next((name for i, name in enumerate(named) if name in named[:i]), None):
            raise ValueError(
                f"harnesses: two harness x model pairs are named {twice!r} (<harness>.<model>); rename one"
            )
        baseline = self.alerts.baseline_model
        if baseline is not None and baseline not in {c.id for c in self.contestants()}:
            raise ValueError(
                f"alerts.baseline_model {baseline!r} is not one of the sweep's "
                + ("contestants (<harness>.<model>)" if self.several_harnesses else "models")
            )
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
        return [
            Contestant(contestant_id(harness.id, model.id, self.several_harnesses), harness, model)
            for model in self.models
            for harness in self.harness_list
        ]

    def contestant(self, contestant_id: str) -> Contestant:
        return next(c for c in self.contestants() if c.id == contestant_id)

    def declarations(self) -> dict[str, PluginDeclaration]:
        """Each plugin declaration, by its field."""
        return {
            **{f"benchmarks[{i}]": benchmark for i, benchmark in enumerate(self.benchmarks)},
            **{f"models[{i}]": model for i, model in enumerate(self.models)},
            **self.harness_fields,
            "environment": self.environment,
        }

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
        return [
            self.request(benchmark, contestant, output)
            for benchmark in self.benchmarks
            for contestant in self.contestants()
        ]

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
