"""The plugins one request runs with, resolved and checked against each other before anything runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from agentcompass_dagster.declarations import registry
from agentcompass_dagster.contracts.declarations import EnvironmentConfig, HarnessConfig
from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.contracts import Benchmark, Environment, Harness, HarnessFreeBenchmark, Model
from agentcompass_dagster.contracts.errors import UserError, field_error
from agentcompass_dagster.runtime.store.redact import register_host_secrets, register_secret, register_url_passwords

P = TypeVar("P")
# What builds a request's harness (for its model) and its environment provider in place of its
# declarations: the Dagster layer's resources, which a run may configure apart from the sweep.
HarnessBuilder = Callable[[Model], Harness]
EnvironmentBuilder = Callable[[], Environment]


@dataclass(frozen=True)
class Plugins:
    benchmark: Benchmark
    harness: Harness
    environment: Environment
    model: Model


def construct_plugin(kind: str, cls: Callable[..., P], *args: Any) -> P:
    try:
        return cls(*args)
    except UserError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise UserError(f"{kind}: cannot be configured: {exc}") from None


def register_declared_secrets(env: dict[str, str], *declarations: BaseModel) -> None:
    """R-STORE-4: what a request hands the runtime to pass on, an environment's env values and the
    passwords of its URLs, is scrubbed from everything written, wherever an agent or an endpoint echoes it;
    so are the host's secret-named variables, which reach no command but a model or a plugin may echo.
    Registered before any plugin is built, so that a plugin's own error is scrubbed too."""
    register_host_secrets()
    for value in env.values():
        register_secret(value)
    for declaration in declarations:
        register_url_passwords(declaration.model_dump(mode="json"))


def build_harness(config: HarnessConfig, model: Model) -> Harness:
    """The registered harness of this id, built with its params and the model it drives."""
    harness_cls = registry.harnesses.get(config.provider_id, "harness.provider" if config.provider else "harness.id")
    return construct_plugin(f"harness {config.id!r}", harness_cls, config, model)


def build_environment(config: EnvironmentConfig) -> Environment:
    """The registered environment provider of this declaration, built with its params and limits."""
    environment_cls = registry.environments.get(config.provider_id, "environment.provider")
    return construct_plugin(f"environment {config.id!r}", environment_cls, config)


def resolve_plugins(
    request: EvalRequest, harness: HarnessBuilder | None = None, environment: EnvironmentBuilder | None = None
) -> Plugins:
    """Look every plugin up in its registry and build it; unknown ids, bad params and plugins that do not
    fit together (a model the harness needs, a benchmark that runs itself) are UserErrors. ``harness``
    and ``environment`` build those two instead of the request's declarations, which they must match
    (the request is what run_info.json records)."""
    register_declared_secrets(request.environment.env, request)

    # Every id is looked up before anything is built, so an unknown one is the error whatever else is wrong.
    benchmark_cls = registry.benchmarks.get(request.benchmark.id, "benchmark.id")
    registry.environments.get(request.environment.provider_id, "environment.provider")
    model_cls = registry.models.get(request.model.provider, "model.provider")
    harness_cls = registry.harnesses.get(
        request.harness.provider_id, "harness.provider" if request.harness.provider else "harness.id"
    )
    runs_itself = issubclass(benchmark_cls, HarnessFreeBenchmark)
    if runs_itself != harness_cls.runs_the_benchmark:
        problem = "is harness-free: declare harness none" if runs_itself else "needs a harness"
        raise field_error("harness.id", request.harness.id, f"benchmark {request.benchmark.id!r} {problem}")
    if harness_cls.requires_model and request.model.provider == "none":
        raise field_error("model.provider", request.model.provider, f"harness {request.harness.id!r} needs a model")
    # The one model client of the request: the harness that drives it gets it handed over.
    model = construct_plugin(f"model {request.model.id!r}", model_cls, request.model)
    return Plugins(
        benchmark=construct_plugin(f"benchmark {request.benchmark.id!r}", benchmark_cls, request.benchmark),
        harness=harness(model) if harness else build_harness(request.harness, model),
        environment=environment() if environment else build_environment(request.environment),
        model=model,
    )
