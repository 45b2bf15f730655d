"""The job of each benchmark of a sweep: tasks, the evaluation (attempts and metrics), the comparison
and the checks, with the executor the sweep declares. `agentcompass run`, the schedule and the sensor
run this job, so their runs have the same steps and the sweep's tags. What Dagster itself launches
(asset backfills, `dagster asset materialize`) runs the asset job instead; the location's automation
sensor then brings the metrics, comparison and checks up to date after them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from agentcompass_dagster.declarations.deployment import DockerConfig, K8sConfig
from agentcompass_dagster.defs.code_location import location_env, sweep_files_from_env
from agentcompass_dagster.defs.dagster_internals import UnresolvedAssetJobDefinition
from agentcompass_dagster.defs.instance import PG_URL_ENV
from agentcompass_dagster.defs.partitions import dagster_name
from agentcompass_dagster.defs.sweep import SweepBenchmark


def sweep_job(sweep_benchmark: SweepBenchmark) -> UnresolvedAssetJobDefinition:
    return dg.define_asset_job(
        sweep_benchmark.job_name,
        selection=dg.AssetSelection.assets(
            sweep_benchmark.key("tasks"),
            sweep_benchmark.key("attempts"),
            sweep_benchmark.key("metrics"),
            sweep_benchmark.key("comparison"),
        ),
        description=f"Evaluate sweep {sweep_benchmark.sweep.name!r} on benchmark {sweep_benchmark.benchmark.id!r}: "
        "the missing tasks of a "
        "partition range, then the metrics, the comparison and their checks.",
        tags=sweep_benchmark.tags,
        executor_def=_executor(sweep_benchmark),
    )


AUTOMATION_SENSOR = "agentcompass_automation"
# How often the automation conditions are evaluated (Dagster's default): the metrics follow a backfill
# within about this long, and an idle daemon stays idle. AGENTCOMPASS_AUTOMATION_INTERVAL_S changes it.
AUTOMATION_INTERVAL_S = 30
AUTOMATION_INTERVAL_ENV = "AGENTCOMPASS_AUTOMATION_INTERVAL_S"


def location_automation(members: Sequence[SweepBenchmark]) -> dg.AutomationConditionSensorDefinition:
    """Evaluates the automation conditions of every sweep's metrics, comparison and checks, in one sensor
    for the location; running by default, like the daemon that evaluates it (`agentcompass ui` starts
    one). Its runs carry no sweep's tags (one sensor, many sweeps): the planning knows them as a sweep's
    runs by the assets they select (SweepBenchmark.owns)."""
    return dg.AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR,
        target=dg.AssetSelection.assets(
            *(member.key(kind) for member in members for kind in ("metrics", "comparison"))
        ),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=int(os.environ.get(AUTOMATION_INTERVAL_ENV) or AUTOMATION_INTERVAL_S),
        emit_backfills=False,
        description="Brings a sweep's metrics, comparison and checks up to date after a run of its attempts that "
        "left them out (a backfill, `dagster asset materialize`).",
    )


def _executor(sweep_benchmark: SweepBenchmark) -> dg.ExecutorDefinition:
    deployment = sweep_benchmark.sweep.dagster
    if deployment.executor == "multiprocess":
        return dg.multiprocess_executor
    if deployment.executor == "docker":
        assert deployment.docker is not None
        return docker_executor(sweep_benchmark, deployment.docker)
    if deployment.executor == "k8s":
        assert deployment.k8s is not None
        return k8s_executor(sweep_benchmark, deployment.k8s)
    return dg.in_process_executor


def docker_executor(sweep_benchmark: SweepBenchmark, docker: DockerConfig) -> dg.ExecutorDefinition:
    """dagster-docker's docker_executor: each step in its own container, which sees the results
    directory, the sweep files and (SQLite) the instance at the host's paths, and gets the code
    location's own environment, so it loads the same sweeps the run worker did."""
    from dagster_docker import docker_executor as executor

    kwargs = {
        **docker.container_kwargs,
        "volumes": step_volumes(docker.container_kwargs.get("volumes"), shared_paths(sweep_benchmark)),
    }
    config: dict[str, object] = {
        "image": docker.image,
        "env_vars": [*docker.env_vars, *location_env()],
        "container_kwargs": kwargs,
    }
    if docker.network:
        config["network"] = docker.network
    return executor.configured(
        config, name=dagster_name(sweep_benchmark.sweep.name, sweep_benchmark.benchmark.id, "docker_executor")
    )


def k8s_executor(sweep_benchmark: SweepBenchmark, k8s: K8sConfig) -> dg.ExecutorDefinition:
    """dagster-k8s's k8s_job_executor: each step in its own pod, with the declared volumes (the results
    directory and the sweep files on a shared volume, checked before launch) and the code location's
    environment."""
    from dagster_k8s import k8s_job_executor

    config: dict[str, object] = {
        "job_image": k8s.image,
        "job_namespace": k8s.namespace,
        "env_vars": [*k8s.env_vars, *location_env()],
        "volumes": k8s.volumes,
        "volume_mounts": k8s.volume_mounts,
        "load_incluster_config": k8s.load_incluster_config,
    }
    if k8s.service_account_name:
        config["service_account_name"] = k8s.service_account_name
    if k8s.kubeconfig_file:
        config["kubeconfig_file"] = k8s.kubeconfig_file
    return k8s_job_executor.configured(
        config, name=dagster_name(sweep_benchmark.sweep.name, sweep_benchmark.benchmark.id, "k8s_executor")
    )


def shared_paths(sweep_benchmark: SweepBenchmark) -> dict[str, Path]:
    """What a step container must see at the host's path: what it writes there is the result."""
    paths = {"output.results_dir": Path(sweep_benchmark.sweep.output.results_dir).resolve()}
    for index, sweep_file in enumerate(sweep_files_from_env() or []):
        paths[f"sweep file {index + 1}'s directory"] = sweep_file.resolve().parent
    home = os.environ.get("DAGSTER_HOME")
    if home and not os.environ.get(PG_URL_ENV):
        paths["DAGSTER_HOME"] = Path(home).resolve()
    return paths


def same_path_mounts(volumes: Any) -> list[Path]:
    """Host directories that docker's ``volumes`` (a list of host:container[:mode] strings, or a mapping
    of host path to {bind, mode}) mount at the same path in the container."""
    if isinstance(volumes, dict):
        pairs = [(host, spec.get("bind") if isinstance(spec, dict) else None) for host, spec in volumes.items()]
    else:
        pairs = [
            (parts[0], parts[1] if len(parts) > 1 else None) for parts in (str(v).split(":") for v in volumes or [])
        ]
    return [Path(container) for host, container in pairs if container and Path(host).resolve() == Path(container)]


def mounted(path: Path, mounts: list[Path]) -> bool:
    """Whether ``path`` is one of ``mounts`` or lies below one."""
    return any(path == mount or mount in path.parents for mount in mounts)


def step_volumes(declared: Any, needed: dict[str, Path]) -> list[str] | dict[str, Any]:
    """The declared volumes plus a same-path bind for each needed directory they do not cover."""
    covered = same_path_mounts(declared)
    missing = [path for path in needed.values() if not mounted(path, covered)]
    binds = [f"{path}:{path}:rw" for path in dict.fromkeys(missing)]
    if isinstance(declared, dict):
        return {**declared, **{str(path): {"bind": str(path), "mode": "rw"} for path in dict.fromkeys(missing)}}
    return [*(str(v) for v in declared or []), *binds]
