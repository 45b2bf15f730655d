"""The code location's run-failure sensor: when Dagster fails a run of a sweep without our reaper (run
monitoring found its worker dead, the UI marked it failed), the run directories it was writing say so
and its claim is dropped, as when `agentcompass run` reaps a run itself.

One sensor for every sweep of the location, watching the runs of every code location: a run launched
with `dagster job launch -m agentcompass_dagster.definitions -a defs` belongs to a location of another
name than the workspace's, and is a sweep's run all the same. Each failed run is matched to the one
sweep benchmarks it evaluates (SweepBenchmark.owns: one, or several for a run of unpartitioned assets
such as the automation sensor's metrics); a run of no sweep is left alone."""

from collections.abc import Sequence

import dagster as dg

from agentcompass_dagster.defs.coordination import drop_claim
from agentcompass_dagster.defs.planning import fail_run_dirs
from agentcompass_dagster.defs.sweep import SweepBenchmark

NAME = "agentcompass_run_failures"
INTERVAL_S = 5


def run_failure_sensor(members: Sequence[SweepBenchmark]) -> dg.SensorDefinition:
    @dg.run_failure_sensor(
        name=NAME,
        minimum_interval_seconds=INTERVAL_S,
        monitor_all_code_locations=True,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Marks the run directories of a failed run of a sweep failed, with Dagster's "
        "reason, and drops its claim; runs of no sweep of this location are skipped.",
    )
    def released(context: dg.RunFailureSensorContext) -> dg.SkipReason | None:
        run = context.dagster_run
        owners = [member for member in members if member.owns(run)]
        if not owners:
            # A reason, not None: Dagster records "acted on" in a run the sensor returns None for (and
            # ends the tick at a run given a reason: the next run waits for the next tick).
            return dg.SkipReason(f"run {run.run_id} of job {run.job_name} evaluates no sweep of this location")
        for owner in owners:
            drop_claim(owner, run.run_id)
            fail_run_dirs(owner, run.run_id, context.failure_event.message or "the run failed")
        return None

    return released
