"""`agentcompass run` through Dagster: materialize a sweep in the project's instance, launching only what
is missing, so the UI shows every run afterwards.

Per benchmark: the tasks asset when the task set changed (new partitions), one attempts run per range
of missing partitions, then the metrics asset (with its checks) and the comparison asset when anything
ran or they never did. A sweep whose partitions are all materialized launches nothing.
"""

from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from agentcompass_dagster.config import SweepConfig
from agentcompass_dagster.defs import sweep_definitions
from agentcompass_dagster.defs.automation import missing_run_requests
from agentcompass_dagster.defs.instance import ensure_dagster_home
from agentcompass_dagster.defs.sweep import sweep_benchmarks
from agentcompass_dagster.errors import UserError
from agentcompass_dagster.runtime.orchestrator import Orchestrator
from agentcompass_dagster.runtime.store import ReuseSource

# Failures are reported by the CLI itself; Dagster's console log would repeat them with stack traces.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@dataclass
class SweepLaunch:
    runs: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    newest: dict[tuple[str, str], ReuseSource] = field(default_factory=dict)


def preflight(sweep: SweepConfig) -> None:
    """Every user mistake (plugins, plans, task ids, results dir) stops here, before Dagster runs."""
    for field_name in ("run_id", "reuse_run_id"):
        value = getattr(sweep.output, field_name)
        if value:
            raise UserError(f"output.{field_name}={value!r}: a sweep run through Dagster names its runs and reuses "
                            "the newest itself; remove it or run with --direct")
    for sb in sweep_benchmarks(sweep):
        Orchestrator(sb.requests({model.id: [] for model in sweep.models})).preflight()


def launch_sweep(sweep: SweepConfig, home: Path | None = None) -> tuple[Path, SweepLaunch]:
    """Check the sweep, then materialize it in the instance under DAGSTER_HOME (made if needed)."""
    preflight(sweep)
    home = ensure_dagster_home(home)
    with dg.DagsterInstance.get() as instance:
        return home, materialize_sweep(sweep, instance)


def materialize_sweep(sweep: SweepConfig, instance: dg.DagsterInstance) -> SweepLaunch:
    """Launch what is missing; the sweep must have passed preflight."""
    defs = sweep_definitions(sweep)
    launch = SweepLaunch()
    for sb in sweep_benchmarks(sweep):
        ran = False
        keys = list(sb.task_keys(sb.load_tasks()))
        known = set(instance.get_dynamic_partitions(sb.partitions_name))
        if set(keys) - known or instance.get_latest_materialization_event(sb.key("tasks")) is None:
            _execute(defs, instance, sb.key("tasks"), {}, launch)
        for request in missing_run_requests(sb, instance, keys):
            _execute(defs, instance, sb.key("attempts"), dict(request.tags), launch)
            ran = True
        for kind in ("metrics", "comparison"):
            if ran or instance.get_latest_materialization_event(sb.key(kind)) is None:
                _execute(defs, instance, sb.key(kind), {}, launch)
        launch.newest.update({(sb.benchmark.id, model): source for model, source in sb.newest_runs().items()})
    return launch


def _execute(defs: dg.Definitions, instance: dg.DagsterInstance, key: dg.AssetKey, tags: dict[str, str],
             launch: SweepLaunch) -> None:
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    result = dg.materialize(
        [*assets, *(defs.asset_checks or [])],
        instance=instance,
        selection=[key],
        tags=tags,
        resources=defs.resources,
        run_config=QUIET,
        raise_on_error=False,
    )
    launch.runs.append(result.run_id)
    if not result.success:
        errors = [event.step_failure_data.error for event in result.get_step_failure_events()]
        if any(error is not None and error.cls_name == "KeyboardInterrupt" for error in errors):
            # Ctrl-C inside the run: its cleanup is done, so stop launching and let the CLI exit 130.
            raise KeyboardInterrupt
        launch.failed.append(f"{key.to_user_string()} (dagster run {result.run_id})")


