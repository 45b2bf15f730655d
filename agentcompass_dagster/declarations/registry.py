"""Plugin registries of the five kinds: benchmarks, harnesses, environments, models and analyzers.

Built-ins are named by import path and imported on first use, which keeps `agentcompass --help` fast.
Third-party packages add plugins without touching this repository by declaring an entry point in the
group of its kind (``agentcompass.benchmarks``, ``.harnesses``, ``.environments``, ``.models``,
``.analyzers``):

    [project.entry-points."agentcompass.benchmarks"]
    my-bench = "my_package.bench:MyBenchmark"

Entry points are read at a registry's first lookup, never at import. An id two sources declare (a built-in
and an entry point, or two entry points) is an error naming both, never one silently winning.

A declaration may also name a plugin by where its class is, ``package.module:Class`` in place of an id:
imported when the sweep loads, so the module must be importable (installed, or on PYTHONPATH) wherever it
is loaded, Dagster's run workers and step processes included.
"""

from __future__ import annotations

import importlib
import re
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agentcompass_dagster.contracts.errors import UserError, did_you_mean

if TYPE_CHECKING:
    from agentcompass_dagster.contracts import Analyzer, Benchmark, Environment, Harness, Model

T = TypeVar("T")
_NAME = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
CLASS_PATH = re.compile(rf"{_NAME}:{_NAME}")


def is_class_path(value: str) -> bool:
    """``package.module:Class``: a plugin named in a declaration by where its class is, not by an id."""
    return CLASS_PATH.fullmatch(value) is not None


def _entry_point_source(ep: EntryPoint) -> str:
    dist = f"distribution {ep.dist.name} {ep.dist.version}" if ep.dist is not None else "no distribution"
    return f"entry point '{ep.name} = {ep.value}' ({dist})"


class Registry(Generic[T]):
    """Plugin classes by id, each a subclass of the registry's contract (``contract`` is its import path:
    the contracts import the declarations, which use the registries)."""

    def __init__(self, kind: str, group: str, contract: str, builtins: dict[str, str]) -> None:
        self.kind = kind
        self.group = group
        self._contract_path = contract
        self._contract: type[T] | None = None
        self._builtins = dict(builtins)
        self._targets: dict[str, str | type[T]] = dict(builtins)
        self._entry_points_loaded = False

    def register(self, plugin_id: str, target: str | type[T]) -> None:
        self._targets[plugin_id] = target

    def snapshot(self) -> dict[str, str | type[T]]:
        """What is registered now, for ``restore`` (a test that registers plugins of its own)."""
        return dict(self._targets)

    def restore(self, saved: dict[str, str | type[T]]) -> None:
        self._targets = dict(saved)

    def _load_entry_points(self) -> None:
        """Add the entry points of the kind's group. An id declared twice is refused at every lookup, naming
        both sources, rather than one of them silently never running."""
        if self._entry_points_loaded:
            return
        declared: dict[str, str] = {name: f"built in as {target}" for name, target in self._builtins.items()}
        found: dict[str, str] = {}
        for ep in entry_points(group=self.group):
            source = _entry_point_source(ep)
            if ep.name in declared:
                raise UserError(f"{self.kind} id {ep.name!r} is declared by {source} and {declared[ep.name]}")
            declared[ep.name] = source
            found[ep.name] = ep.value
        for name, target in found.items():
            self._targets.setdefault(name, target)  # a plugin a test registered itself stays
        self._entry_points_loaded = True

    def ids(self) -> list[str]:
        self._load_entry_points()
        return sorted(self._targets)

    def unknown(self, plugin_id: str, field: str) -> str:
        """``field=id: unknown kind``, with the nearest known id when one is close, and the known ids."""
        known = self.ids()
        hint = did_you_mean(plugin_id, known)
        return f"{field}={plugin_id!r}: unknown {self.kind}{hint} (known: {', '.join(known)})"

    def _target(self, plugin_id: str) -> str | type[T] | None:
        """What ``plugin_id`` names: a registered plugin (imported or not yet), else the class path itself."""
        self._load_entry_points()
        target = self._targets.get(plugin_id)
        return plugin_id if target is None and is_class_path(plugin_id) else target

    def check(self, plugin_id: str, field: str, where: str) -> None:
        """Refuse an id no plugin has, naming the declaration file, without importing a registered plugin; a
        class path is imported and checked here, so that a bad one is refused naming the file too."""
        target = self._target(plugin_id)
        if target is None:
            raise UserError(f"{where}: {self.unknown(plugin_id, field)}")
        if plugin_id not in self._targets:
            try:
                self.get(plugin_id, field)
            except UserError as exc:
                raise UserError(f"{where}: {exc}") from None

    def get(self, plugin_id: str, field: str | None = None) -> type[T]:
        name = field or f"{self.kind}.id"
        target = self._target(plugin_id)
        if target is None:
            raise UserError(self.unknown(plugin_id, name))
        if isinstance(target, str):
            target = self._import(plugin_id, target, name)
            if plugin_id in self._targets:  # a class path is not an id: ids() lists what is registered
                self._targets[plugin_id] = target
        contract = self.contract()
        if not (isinstance(target, type) and issubclass(target, contract)):
            raise UserError(
                f"{name}={plugin_id!r}: the {self.kind} plugin {target!r} is not a subclass of "
                f"{contract.__module__}.{contract.__name__}"
            )
        return target

    def contract(self) -> type[T]:
        if self._contract is None:
            self._contract = self._import(self.kind, self._contract_path, f"{self.kind} contract")
        return self._contract

    def _import(self, plugin_id: str, target: str, field: str) -> Any:
        module_name, _, attr = target.partition(":")
        named_here = target == plugin_id  # a class path in the declaration, not a registered id
        what = f"the {self.kind} class" if named_here else f"the {self.kind} plugin {target!r}"
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split(".") if attr else []:
                obj = getattr(obj, part)
        except Exception as exc:  # any failure inside a third-party module is that plugin's, not ours
            # The console script puts neither the working directory nor the project on sys.path.
            missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
            unfound = named_here and missing is not None and f"{module_name}.".startswith(f"{missing}.")
            hint = "; is it on PYTHONPATH?" if unfound else ""
            raise UserError(f"{field}={plugin_id!r}: {what} cannot be loaded: {exc}{hint}") from None
        return obj


benchmarks: Registry[Benchmark] = Registry(
    "benchmark",
    "agentcompass.benchmarks",
    "agentcompass_dagster.contracts.benchmark:Benchmark",
    {
        "demo": "agentcompass_dagster.plugins.benchmarks.demo:DemoBenchmark",
        "synthetic": "agentcompass_dagster.plugins.benchmarks.synthetic:SyntheticBenchmark",
        "humaneval": "agentcompass_dagster.plugins.benchmarks.humaneval:HumanEvalBenchmark",
        "harbor": "agentcompass_dagster.plugins.benchmarks.harbor:HarborTasksBenchmark",
    },
)
harnesses: Registry[Harness] = Registry(
    "harness",
    "agentcompass.harnesses",
    "agentcompass_dagster.contracts.harness:Harness",
    {
        "none": "agentcompass_dagster.plugins.harnesses.none:NoHarness",
        "oracle": "agentcompass_dagster.plugins.harnesses.oracle:OracleHarness",
        "nop": "agentcompass_dagster.plugins.harnesses.nop:NopHarness",
        "scripted": "agentcompass_dagster.plugins.harnesses.scripted:ScriptedHarness",
        "completions": "agentcompass_dagster.plugins.harnesses.completions:CompletionsHarness",
        "tool_agent": "agentcompass_dagster.plugins.harnesses.tool_agent:ToolAgentHarness",
        "miniswe": "agentcompass_dagster.plugins.harnesses.miniswe:MiniSweHarness",
        "cli_agent": "agentcompass_dagster.plugins.harnesses.cli_agent:CliAgentHarness",
    },
)
environments: Registry[Environment] = Registry(
    "environment",
    "agentcompass.environments",
    "agentcompass_dagster.contracts.environment:Environment",
    {
        "local": "agentcompass_dagster.plugins.environments.local:LocalEnvironment",
        "sandbox": "agentcompass_dagster.plugins.environments.sandbox:SandboxEnvironment",
        "docker": "agentcompass_dagster.plugins.environments.docker:DockerEnvironment",
    },
)
models: Registry[Model] = Registry(
    "model",
    "agentcompass.models",
    "agentcompass_dagster.contracts.model:Model",
    {
        "none": "agentcompass_dagster.plugins.models.none:NoModel",
        "openai_compat": "agentcompass_dagster.plugins.models.openai_compat:OpenAICompatModel",
        "litellm": "agentcompass_dagster.plugins.models.litellm_model:LiteLLMModel",
        "scripted": "agentcompass_dagster.plugins.models.scripted:ScriptedModel",
    },
)
analyzers: Registry[Analyzer] = Registry(
    "analyzer",
    "agentcompass.analyzers",
    "agentcompass_dagster.contracts.analyzer:Analyzer",
    {
        "error_category": "agentcompass_dagster.plugins.analyzers.error_category:ErrorCategoryAnalyzer",
        "trajectory_stats": "agentcompass_dagster.plugins.analyzers.trajectory_stats:TrajectoryStatsAnalyzer",
        "loops": "agentcompass_dagster.plugins.analyzers.loops:LoopsAnalyzer",
        "tool_errors": "agentcompass_dagster.plugins.analyzers.tool_errors:ToolErrorsAnalyzer",
        "cost_outliers": "agentcompass_dagster.plugins.analyzers.outliers:CostOutliersAnalyzer",
        "time_split": "agentcompass_dagster.plugins.analyzers.time_split:TimeSplitAnalyzer",
        "gave_up": "agentcompass_dagster.plugins.analyzers.gave_up:GaveUpAnalyzer",
        "reward_hacking": "agentcompass_dagster.plugins.analyzers.reward_hacking:RewardHackingAnalyzer",
    },
)

ALL: tuple[Registry[Any], ...] = (benchmarks, harnesses, environments, models, analyzers)
