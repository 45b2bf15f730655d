"""The Definitions of sweeps: per benchmark of a sweep, assets S/B/tasks -> S/B/attempts (model x task)
and S/B/metrics (one step) -> S/B/comparison, two checks on the metrics, one job, a schedule when the
sweep declares a cron, a sensor for new tasks, and the harness and environment as resources."""

from __future__ import annotations

import warnings
from pathlib import Path

import dagster as dg

from agentcompass_dagster.config import SweepConfig, load_sweep
from agentcompass_dagster.defs.asset_checks import counts_check, secrets_check
from agentcompass_dagster.defs.assets import comparison_asset, evaluation_asset, tasks_asset
from agentcompass_dagster.defs.code_location import DEFAULT_RESOURCES, sweep_files_from_env
from agentcompass_dagster.defs.jobs import sweep_automation, sweep_job
from agentcompass_dagster.defs.partitions import dagster_name
from agentcompass_dagster.defs.resources import EnvironmentResource, HarnessResource
from agentcompass_dagster.defs.schedules import sweep_schedule
from agentcompass_dagster.defs.sensors import new_tasks_sensor
from agentcompass_dagster.defs.sweep import SweepBenchmark, sweep_benchmarks
from agentcompass_dagster.errors import UserError

warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)


def benchmark_definitions(sweep_benchmark: SweepBenchmark) -> dg.Definitions:
    job = sweep_job(sweep_benchmark)
    return dg.Definitions(
        assets=[tasks_asset(sweep_benchmark), evaluation_asset(sweep_benchmark), comparison_asset(sweep_benchmark)],
        asset_checks=[counts_check(sweep_benchmark), secrets_check(sweep_benchmark)],
        jobs=[job],
        schedules=[sweep_schedule(sweep_benchmark, job)] if sweep_benchmark.sweep.schedule.cron else [],
        sensors=[new_tasks_sensor(sweep_benchmark, job), sweep_automation(sweep_benchmark)],
    )


def sweep_definitions(sweep: SweepConfig) -> dg.Definitions:
    resources = {
        dagster_name(sweep.name, "harness"): HarnessResource.declared(sweep.harness),
        dagster_name(sweep.name, "environment"): EnvironmentResource.declared(sweep.environment),
    }
    return dg.Definitions.merge(*(benchmark_definitions(member) for member in sweep_benchmarks(sweep)),
                                dg.Definitions(resources=resources))


def definitions_for(sweeps: list[SweepConfig], where: str) -> dg.Definitions:
    groups: dict[str, str] = {}
    for sweep in sweeps:
        group = dagster_name(sweep.name)
        if group in groups:
            raise UserError(f"{where}: sweep name={sweep.name!r} clashes with {groups[group]!r}")
        groups[group] = sweep.name
    # The asset job (backfills, `dagster asset materialize`, automation) executes the way the sweeps'
    # own jobs do when they all run their steps in the run worker: one process per run, whose worker
    # the reaper can see, instead of Dagster's default of a process per step.
    in_process = all(sweep.dagster.executor == "in_process" for sweep in sweeps)
    return dg.Definitions.merge(*(sweep_definitions(sweep) for sweep in sweeps),
                                dg.Definitions(executor=dg.in_process_executor if in_process else None))


def build_definitions(resources: Path) -> dg.Definitions:
    """Definitions for every sweep in ``resources/sweeps``; an invalid declaration stops loading with
    one message naming the file, the field and the value."""
    sweeps_dir = Path(resources) / "sweeps"
    sweeps = [load_sweep(path, resources) for path in sorted(sweeps_dir.glob("*.yaml"))]
    return definitions_for(sweeps, str(sweeps_dir))


def location_definitions() -> dg.Definitions:
    """The code location of defs/code_location.py: the sweeps it was pointed at, else ./resources."""
    files = sweep_files_from_env()
    if files is None:
        return build_definitions(DEFAULT_RESOURCES)
    return definitions_for([load_sweep(path) for path in files], "AGENTCOMPASS_SWEEPS")
