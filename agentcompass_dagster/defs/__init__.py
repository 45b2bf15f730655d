"""The Dagster layer: a thin, declarative mapping of the sweeps in resources/ onto Dagster.

For each benchmark B of a sweep S: assets S/B/tasks -> S/B/attempts (partitioned by model x task) ->
S/B/metrics with two asset checks -> S/B/comparison (paired model comparisons); per sweep one job, a schedule when it declares a cron, a sensor for
new tasks, and the harness and environment as ConfigurableResources.
"""

import warnings
from pathlib import Path

import dagster as dg

from agentcompass_dagster.config import SweepConfig, load_sweep
from agentcompass_dagster.defs.assets import attempts_asset, comparison_asset, metrics_asset, tasks_asset
from agentcompass_dagster.defs.automation import new_tasks_sensor, sweep_schedule
from agentcompass_dagster.defs.checks import counts_check, secrets_check
from agentcompass_dagster.defs.partitions import identifier
from agentcompass_dagster.defs.resources import EnvironmentResource, HarnessResource
from agentcompass_dagster.defs.sweep import sweep_benchmarks
from agentcompass_dagster.errors import UserError

warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)


def sweep_definitions(sweep: SweepConfig) -> dg.Definitions:
    assets: list[dg.AssetsDefinition] = []
    checks: list[dg.AssetChecksDefinition] = []
    for sb in sweep_benchmarks(sweep):
        assets += [tasks_asset(sb), attempts_asset(sb), metrics_asset(sb), comparison_asset(sb)]
        checks += [counts_check(sb), secrets_check(sb)]
    first = sweep_benchmarks(sweep)[0]
    job = dg.define_asset_job(
        identifier(sweep.name, "job"),
        selection=dg.AssetSelection.groups(first.group),
        description=f"Materialize sweep {sweep.name!r}.",
        executor_def=_executor(sweep),
    )
    schedules = [sweep_schedule(sweep, job)] if sweep.schedule.cron else []
    return dg.Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=[job],
        schedules=schedules,
        sensors=[new_tasks_sensor(sweep, job)],
        resources={
            first.harness_resource_key: HarnessResource.declared(sweep.harness),
            first.environment_resource_key: EnvironmentResource.declared(sweep.environment),
        },
    )


def _executor(sweep: SweepConfig) -> dg.ExecutorDefinition | None:
    """dagster-docker's docker_executor when the sweep asks for container steps, else Dagster's default."""
    deployment = sweep.dagster
    if deployment.executor != "docker":
        return None
    from dagster_docker import docker_executor

    config: dict[str, object] = {"image": deployment.image, "env_vars": deployment.env_vars}
    if deployment.network:
        config["network"] = deployment.network
    return docker_executor.configured(config, name=identifier(sweep.name, "docker_executor"))


def build_definitions(resources: Path) -> dg.Definitions:
    """Definitions for every sweep in ``resources/sweeps``; an invalid declaration stops loading with
    one message naming the file, the field and the value."""
    sweeps_dir = Path(resources) / "sweeps"
    sweeps = [load_sweep(path, resources) for path in sorted(sweeps_dir.glob("*.yaml"))]
    groups: dict[str, str] = {}
    for sweep in sweeps:
        group = identifier(sweep.name)
        if group in groups:
            raise UserError(f"{sweeps_dir}: sweep name={sweep.name!r} clashes with {groups[group]!r}")
        groups[group] = sweep.name
    return dg.Definitions.merge(*(sweep_definitions(sweep) for sweep in sweeps))
