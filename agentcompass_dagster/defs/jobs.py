"""The job of each benchmark of a sweep: tasks, the evaluation (attempts and metrics), the comparison
and the checks, with the executor the sweep declares. Every launch (CLI, UI, schedule, sensor, daemon)
runs this job, so every run has the same steps and the sweep's tags."""

from __future__ import annotations

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from agentcompass_dagster.config import DockerConfig
from agentcompass_dagster.defs.partitions import identifier
from agentcompass_dagster.defs.sweep import SweepBenchmark
from agentcompass_dagster.defs.code_location import location_env


def sweep_job(sb: SweepBenchmark) -> UnresolvedAssetJobDefinition:
    return dg.define_asset_job(
        sb.job_name,
        selection=dg.AssetSelection.assets(sb.key("tasks"), sb.key("attempts"), sb.key("metrics"), sb.key("comparison")),
        description=f"Evaluate sweep {sb.sweep.name!r} on benchmark {sb.benchmark.id!r}: the missing tasks of a "
        "partition range, then the metrics, the comparison and their checks.",
        tags=sb.tags,
        executor_def=_executor(sb),
    )


def _executor(sb: SweepBenchmark) -> dg.ExecutorDefinition:
    deployment = sb.sweep.dagster
    if deployment.executor == "multiprocess":
        return dg.multiprocess_executor
    if deployment.executor == "docker":
        assert deployment.docker is not None
        return docker_executor(sb, deployment.docker)
    return dg.in_process_executor


def docker_executor(sb: SweepBenchmark, docker: DockerConfig) -> dg.ExecutorDefinition:
    """dagster-docker's docker_executor: each step in its own container. The code location's own
    environment variables go along, so the step loads the same sweeps the run worker did."""
    from dagster_docker import docker_executor as executor

    config: dict[str, object] = {"image": docker.image, "env_vars": [*docker.env_vars, *location_env()]}
    if docker.network:
        config["network"] = docker.network
    if docker.container_kwargs:
        config["container_kwargs"] = docker.container_kwargs
    return executor.configured(config, name=identifier(sb.sweep.name, sb.benchmark.id, "docker_executor"))
