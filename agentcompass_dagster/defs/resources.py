"""ConfigurableResources for the harness and the environment a sweep runs with: the harness resource
builds the harness plugin for a model, the environment resource builds the environment provider plugin
that opens each attempt's session, and the evaluating step runs its requests with what they build.

Their defaults come from the sweep's declarations; a user can override them per run in the Dagster
launchpad (say, a different environment provider), and the run records what it used in run_info.json.
A sweep of several harnesses has one harness resource per harness, each overriding that harness only.
Fields are typed as in the declarations, so the launchpad shows them as structured config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import dagster as dg

from agentcompass_dagster.contracts.declarations import EnvironmentConfig, HarnessConfig
from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.declarations.sweep import SweepConfig
from agentcompass_dagster.contracts import Environment, Harness, Model
from agentcompass_dagster.defs.partitions import dagster_name
from agentcompass_dagster.runtime.execution.plugins import Plugins, build_environment, build_harness, resolve_plugins
from agentcompass_dagster.contracts.validation import validate_declaration


D = TypeVar("D", HarnessConfig, EnvironmentConfig)


def with_file_of(config: D, declared: D | None) -> D:
    """``config`` read from the file of ``declared`` (the sweep's declaration) when it declares the same: a
    run that left the resource as the sweep declares it resolves the relative paths of its params beside
    that file, as the sweep does. A resource configured otherwise (in the launchpad) was read from no
    file: its paths are relative to the working directory. Dagster rebuilds a resource from its config
    for each run, so the file cannot travel with the resource itself."""
    if declared is not None and declared.file is not None and config == declared:
        config.read_from(declared.file)
    return config


class HarnessResource(dg.ConfigurableResource):
    """The harness (agent program) under evaluation: its id, the plugin that provides it (an agent CLI's
    ``cli_agent``) and its params."""

    id: str
    provider: str | None = None
    params: dict[str, Any] = {}

    @classmethod
    def declared(cls, config: HarnessConfig) -> HarnessResource:
        return cls(id=config.id, provider=config.provider, params=config.params)

    def config(self, declared: HarnessConfig | None = None) -> HarnessConfig:
        """The harness this resource is configured with; read from ``declared``'s file when it declares the
        same (see with_file_of)."""
        provided = {"provider": self.provider} if self.provider is not None else {}
        config = validate_declaration(
            HarnessConfig, {"id": self.id, **provided, "params": self.params}, "harness resource"
        )
        return with_file_of(config, declared)

    def build(self, model: Model, declared: HarnessConfig | None = None) -> Harness:
        """The harness plugin of this id and params, driving ``model``."""
        return build_harness(self.config(declared), model)


class EnvironmentResource(dg.ConfigurableResource):
    """Where task commands run: a declaration name, the provider plugin, params and limits."""

    id: str
    provider: str | None = None
    params: dict[str, Any] = {}
    env: dict[str, str] = {}
    capacity: int = 0
    open_qps: float = 0.0

    @classmethod
    def declared(cls, config: EnvironmentConfig) -> EnvironmentResource:
        return cls(
            id=config.id,
            provider=config.provider,
            params=config.params,
            env=config.env,
            capacity=config.capacity,
            open_qps=config.open_qps,
        )

    def config(self, declared: EnvironmentConfig | None = None) -> EnvironmentConfig:
        """The environment this resource is configured with; read from ``declared``'s file when it declares
        the same (see with_file_of)."""
        data = {
            "id": self.id,
            "provider": self.provider,
            "params": self.params,
            "env": self.env,
            "capacity": self.capacity,
            "open_qps": self.open_qps,
        }
        return with_file_of(validate_declaration(EnvironmentConfig, data, "environment resource"), declared)

    def open_provider(self, declared: EnvironmentConfig | None = None) -> Environment:
        """The environment provider plugin this resource names, built with its params and limits; the
        runtime opens a session of it per attempt."""
        return build_environment(self.config(declared))


@dataclass(frozen=True)
class SweepResources:
    """The harness and environment resources of one sweep. Their keys name the sweep: several sweeps
    share one code location, and Dagster binds a resource key to one definition across a location (its
    asset job holds every asset), so a parameter named ``harness`` could not stand for each sweep's."""

    # By the id of the declared harness each stands for.
    harnesses: dict[str, HarnessResource]
    environment: EnvironmentResource

    @staticmethod
    def keys(sweep_name: str) -> tuple[str, str]:
        """The resource keys of the harness and the environment of a sweep of one harness."""
        return dagster_name(sweep_name, "harness"), dagster_name(sweep_name, "environment")

    @classmethod
    def harness_keys(cls, sweep: SweepConfig) -> dict[str, str]:
        """Declared harness id -> the key of its resource; with several, ``<sweep>__harness__<index>_<id>``
        (the index keeps ids that differ only in characters a key cannot hold apart)."""
        if not sweep.several_harnesses:
            return {sweep.harness_list[0].id: cls.keys(sweep.name)[0]}
        return {
            harness.id: dagster_name(sweep.name, "harness", f"{index}_{harness.id}")
            for index, harness in enumerate(sweep.harness_list)
        }

    @classmethod
    def all_keys(cls, sweep: SweepConfig) -> set[str]:
        return {*cls.harness_keys(sweep).values(), cls.keys(sweep.name)[1]}

    @classmethod
    def resource_defs(cls, sweep: SweepConfig) -> dict[str, dg.ConfigurableResource]:
        """The resources of the sweep's Definitions, by key, from its declarations."""
        keys = cls.harness_keys(sweep)
        return {
            **{keys[harness.id]: HarnessResource.declared(harness) for harness in sweep.harness_list},
            cls.keys(sweep.name)[1]: EnvironmentResource.declared(sweep.environment),
        }

    @classmethod
    def of(cls, context: dg.AssetExecutionContext, sweep: SweepConfig) -> SweepResources:
        """The sweep's resources as this run configured them: the one place a step looks them up by key
        (its required_resource_keys)."""
        found = context.resources.original_resource_dict
        environment_key = cls.keys(sweep.name)[1]
        wrong = [
            f"{key!r} must be a{n} {kind.__name__}, not {type(found[key]).__name__}"
            for key, n, kind in [
                *((k, "", HarnessResource) for k in cls.harness_keys(sweep).values()),
                (environment_key, "n", EnvironmentResource),
            ]
            if not isinstance(found[key], kind)
        ]
        if wrong:
            raise dg.DagsterInvariantViolationError(f"resource {'; '.join(wrong)}")
        return cls({harness: found[key] for harness, key in cls.harness_keys(sweep).items()}, found[environment_key])

    def harness_config(self, declared: HarnessConfig) -> HarnessConfig:
        """The harness the resource standing for ``declared`` is configured with."""
        return self.harnesses[declared.id].config(declared)

    def plugins(self, request: EvalRequest, declared_harness: str) -> Plugins:
        """The plugins of a request whose harness (the one declared as ``declared_harness``) and environment
        are these resources' configs."""
        harness = self.harnesses[declared_harness]
        return resolve_plugins(
            request,
            harness=lambda model: harness.build(model, request.harness),
            environment=lambda: self.environment.open_provider(request.environment),
        )
