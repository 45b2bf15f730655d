"""A sweep's sensor: new tasks in a benchmark's source become partitions and are run (tasks that
ended in error are left to the schedule and to `agentcompass run`, so a failing task is not retried
on every tick)."""

import dagster as dg
from agentcompass_dagster.defs.dagster_internals import UnresolvedAssetJobDefinition

from agentcompass_dagster.defs.coordination import ensure_pool_limits, sweep_lock
from agentcompass_dagster.defs.planning import plan_runs, register_tasks
from agentcompass_dagster.defs.schedules import run_requests
from agentcompass_dagster.defs.sweep import SweepBenchmark, keys_of

STATUS = {"running": dg.DefaultSensorStatus.RUNNING, "stopped": dg.DefaultSensorStatus.STOPPED}


def new_tasks_sensor(sweep_benchmark: SweepBenchmark, job: UnresolvedAssetJobDefinition) -> dg.SensorDefinition:
    config = sweep_benchmark.sweep.sensor

    @dg.sensor(name=sweep_benchmark.name("new_tasks"), job=job,
               minimum_interval_seconds=config.minimum_interval_seconds,
               default_status=STATUS[config.default_status],
               description=f"Adds a partition for each new task of sweep {sweep_benchmark.sweep.name!r} on "
               f"{sweep_benchmark.benchmark.id!r} and runs it.")
    def sensor(context: dg.SensorEvaluationContext) -> list[dg.RunRequest] | dg.SkipReason:
        with sweep_lock(sweep_benchmark):
            _, new = register_tasks(sweep_benchmark, context.instance, list(keys_of(sweep_benchmark.load_tasks())))
            if not new:
                return dg.SkipReason("no new task")
            ensure_pool_limits(sweep_benchmark, context.instance)
            plan = plan_runs(sweep_benchmark, context.instance, new)
        return run_requests(sweep_benchmark, plan) or dg.SkipReason(f"{len(new)} new tasks, all already in runs")

    return sensor
