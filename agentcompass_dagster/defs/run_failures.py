"""A sweep's run-failure sensor: when Dagster fails a run of the sweep without our reaper (run monitoring
found its worker dead, the UI marked it failed), the run directories it was writing say so and its
claim is dropped, as when `agentcompass run` reaps a run itself."""

import dagster as dg

from agentcompass_dagster.defs.coordination import drop_claim
from agentcompass_dagster.defs.planning import fail_run_dirs
from agentcompass_dagster.defs.sweep import SweepBenchmark

INTERVAL_S = 5


def run_failure_sensor(sweep_benchmark: SweepBenchmark) -> dg.SensorDefinition:
    @dg.run_failure_sensor(name=sweep_benchmark.name("run_failures"), minimum_interval_seconds=INTERVAL_S,
                           default_status=dg.DefaultSensorStatus.RUNNING,
                           description=f"Marks the run directories of a failed run of sweep {sweep_benchmark.sweep.name!r} "
                           f"on {sweep_benchmark.benchmark.id!r} failed, with Dagster's reason.")
    def released(context: dg.RunFailureSensorContext) -> None:
        run_id = context.dagster_run.run_id
        drop_claim(sweep_benchmark, run_id)
        fail_run_dirs(sweep_benchmark, run_id, context.failure_event.message or "the run failed")

    return released
