"""The Definitions of sweeps: per benchmark of a sweep, assets S/B/tasks -> S/B/attempts (model x task)
and S/B/metrics (one step) -> S/B/comparison, checks on the metrics (counts, secrets, regressions), one
job, a schedule when the sweep declares a cron, and the harness and environment as resources; per code
location, one sensor for each concern over all its sweeps (new tasks, automation of the metrics, failed
runs, regression alerts: a sensor per sweep made an idle daemon busy); a sweep file that does not load
is one asset of the group broken_sweeps, described by its error."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path

import dagster as dg

from agentcompass_dagster.declarations.sweep import SweepConfig, load_sweep
from agentcompass_dagster.defs.alerts import regression_alert_sensor
from agentcompass_dagster.defs.asset_checks import counts_check, regression_checks, secrets_check
from agentcompass_dagster.defs.assets import comparison_asset, evaluation_asset, tasks_asset
from agentcompass_dagster.defs.code_location import results_dir_from_env, sweep_files_from_env
from agentcompass_dagster.declarations.references import default_resources
from agentcompass_dagster.defs.dagster_internals import UnresolvedAssetJobDefinition
from agentcompass_dagster.defs.jobs import location_automation, sweep_job
from agentcompass_dagster.defs.partitions import dagster_name
from agentcompass_dagster.defs.run_failures import run_failure_sensor
from agentcompass_dagster.defs.resources import SweepResources
from agentcompass_dagster.defs.schedules import sweep_schedule
from agentcompass_dagster.defs.sensors import new_tasks_sensor
from agentcompass_dagster.defs.sweep import BENCHMARK_TAG, SWEEP_TAG, SweepBenchmark, sweep_benchmarks
from agentcompass_dagster.contracts.errors import UserError

warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)


HARNESS_TAG = "agentcompass/harness"
# Kinds are the icons the UI shows on an asset and filters the catalog by.
KINDS = {"python", "agentcompass"}


def tag_value(text: str) -> str:
    """An asset tag value Dagster accepts: [A-Za-z0-9_.-], at most 63 characters."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:63]


def labelled(sweep_benchmark: SweepBenchmark) -> Callable[[dg.AssetSpec], dg.AssetSpec]:
    """What the catalog shows and filters by on each asset of a benchmark: kinds, the sweep's owners, and
    tags naming the sweep, the benchmark and the harness."""
    sweep = sweep_benchmark.sweep
    tags = {
        SWEEP_TAG: tag_value(sweep.name),
        BENCHMARK_TAG: tag_value(sweep_benchmark.benchmark.id),
        HARNESS_TAG: tag_value("__".join(harness.id for harness in sweep.harness_list)),
    }
    return lambda spec: spec.merge_attributes(kinds=KINDS, owners=sweep.owners, tags=tags)


def benchmark_definitions(sweep_benchmark: SweepBenchmark) -> dg.Definitions:
    job = sweep_job(sweep_benchmark)
    regression = regression_checks(sweep_benchmark)
    assets = [tasks_asset(sweep_benchmark), evaluation_asset(sweep_benchmark), comparison_asset(sweep_benchmark)]
    return dg.Definitions(
        assets=dg.map_asset_specs(labelled(sweep_benchmark), assets),
        asset_checks=[counts_check(sweep_benchmark), secrets_check(sweep_benchmark), regression],
        jobs=[job],
        schedules=[sweep_schedule(sweep_benchmark, job)] if sweep_benchmark.sweep.schedule.cron else [],
    )


def sweep_definitions(sweep: SweepConfig) -> dg.Definitions:
    """One sweep's definitions, without the location's sensors (sweep_files_definitions adds those)."""
    return dg.Definitions.merge(
        *(benchmark_definitions(member) for member in sweep_benchmarks(sweep)),
        dg.Definitions(resources=SweepResources.resource_defs(sweep)),
    )


# The group of the sweeps that do not load: one asset each, whose description is the error.
BROKEN_GROUP = "broken_sweeps"


def broken_sweep(key: str, path: Path, error: str) -> dg.AssetSpec:
    """A sweep file that does not load, as the UI shows it: an asset of the group broken_sweeps whose
    description is the one-line error (file, field, value). An asset, not a sensor or a check, because the
    catalog and the lineage graph show it as soon as the location loads, with nothing to run; and it has
    no materialize function, so nobody launches anything from it."""
    return dg.AssetSpec(
        dg.AssetKey([BROKEN_GROUP, key]),
        group_name=BROKEN_GROUP,
        description=error,
        metadata={"error": error, "file": dg.MetadataValue.path(str(Path(path).resolve()))},
        kinds={"agentcompass"},
    )


def location_sensors(sweeps: list[SweepConfig], jobs: list[UnresolvedAssetJobDefinition]) -> list[dg.SensorDefinition]:
    """The location's sensors, one per concern, over every benchmark of these sweeps (whose ``jobs`` the
    new-tasks sensor targets)."""
    members = [member for sweep in sweeps for member in sweep_benchmarks(sweep)]
    if not members:
        return []
    checks = {key: member for member in members for key in regression_checks(member).check_keys}
    return [
        new_tasks_sensor(members, {job.name: job for job in jobs}),
        location_automation(members),
        run_failure_sensor(members),
        regression_alert_sensor(checks),
    ]


def sweep_files_definitions(
    paths: list[Path], resources: Path | None, results_dir: Path | None = None
) -> dg.Definitions:
    """Definitions of the sweeps of these files, run into ``results_dir`` when given; a file that does
    not load (invalid YAML, an invalid field, a name that clashes with an earlier file's sweep) becomes a
    broken_sweeps asset naming its error, and the other sweeps load: one bad file must not take the whole
    code location down."""
    parts, sweeps, executors = [], [], set()
    groups: dict[str, str] = {}  # a sweep's group -> the file that declares it
    broken: list[dg.AssetSpec] = []
    for path in paths:
        try:
            sweep = load_sweep(path, resources)
            if results_dir is not None:
                output = sweep.output.model_copy(update={"results_dir": results_dir})
                sweep = sweep.model_copy(update={"output": output})
            group = dagster_name(sweep.name)
            if group in groups:
                raise UserError(f"{path}: name={sweep.name!r} clashes with the sweep of {groups[group]}")
            parts.append(sweep_definitions(sweep))
            sweeps.append(sweep)
            groups[group] = str(path)
            executors.add(sweep.dagster.executor)
        except (UserError, dg.DagsterInvalidDefinitionError) as exc:
            error = str(exc).strip().splitlines()[0]
            taken = {spec.key.path[-1] for spec in broken}
            key = dagster_name(Path(path).stem)
            broken.append(
                broken_sweep(
                    key if key not in taken else f"{key}_{len(broken)}",
                    path,
                    error if error.startswith(str(path)) else f"{path}: {error}",
                )
            )
    # The asset job (backfills, `dagster asset materialize`, automation) executes the way the sweeps'
    # own jobs do when they all run their steps in the run worker: one process per run, whose worker
    # the reaper can see, instead of Dagster's default of a process per step.
    in_process = executors == {"in_process"}
    jobs = [job for part in parts for job in part.jobs or [] if isinstance(job, UnresolvedAssetJobDefinition)]
    return dg.Definitions.merge(
        *parts,
        dg.Definitions(
            assets=broken,
            sensors=location_sensors(sweeps, jobs),
            executor=dg.in_process_executor if in_process else None,
        ),
    )


def build_definitions(resources: Path) -> dg.Definitions:
    """Definitions for every sweep in ``resources/sweeps``."""
    return sweep_files_definitions(sorted((Path(resources) / "sweeps").glob("*.yaml")), resources)


def location_definitions() -> dg.Definitions:
    """The code location of defs/code_location.py: the sweeps it was pointed at (with the results
    directory it was given), else those of the default resources."""
    files = sweep_files_from_env()
    if files is None:
        return build_definitions(default_resources())
    return sweep_files_definitions(files, None, results_dir_from_env())
