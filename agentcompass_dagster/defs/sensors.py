"""A sweep's sensor: new tasks in a benchmark's source become partitions and are run (tasks that
ended in error are left to the schedule and to `agentcompass run`, so a failing task is not retried
on every tick).

Its first tick on a sweep the instance has never seen only registers the declared tasks: the UI then
shows the sweep's partitions before its first run (instead of none and a box to type keys into), and
opening the UI never launches a whole sweep. Running the declared tasks is what `agentcompass run`, the
schedule and the UI's Materialize are for; a task that appears later is new, and the sensor runs it.

The sensor asks for the new partitions in its SensorResult instead of adding them itself: Dagster adds
them when it commits the tick, together with the tick's runs, so a tick that fails adds nothing and the
next one sees the same tasks as new."""

import dagster as dg

from agentcompass_dagster.defs.coordination import ensure_pool_limits, sweep_lock
from agentcompass_dagster.defs.dagster_internals import UnresolvedAssetJobDefinition
from agentcompass_dagster.defs.planning import plan_runs
from agentcompass_dagster.defs.schedules import budget_reason, run_requests
from agentcompass_dagster.defs.sweep import SweepBenchmark, keys_of

STATUS = {"running": dg.DefaultSensorStatus.RUNNING, "stopped": dg.DefaultSensorStatus.STOPPED}


def new_tasks_sensor(sweep_benchmark: SweepBenchmark, job: UnresolvedAssetJobDefinition) -> dg.SensorDefinition:
    config = sweep_benchmark.sweep.sensor
    tasks_partitions = dg.DynamicPartitionsDefinition(name=sweep_benchmark.partitions_name)

    @dg.sensor(name=sweep_benchmark.name("new_tasks"), job=job,
               minimum_interval_seconds=config.minimum_interval_seconds,
               default_status=STATUS[config.default_status],
               description=f"Registers the tasks of sweep {sweep_benchmark.sweep.name!r} on "
               f"{sweep_benchmark.benchmark.id!r} as partitions on its first tick; then adds a partition for each "
               "new task and runs it.")
    def sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        with sweep_lock(sweep_benchmark):
            known = set(context.instance.get_dynamic_partitions(sweep_benchmark.partitions_name))
            new = [key for key in keys_of(sweep_benchmark.load_tasks()) if key not in known]
            if not new:
                return dg.SensorResult(skip_reason="no new task")
            add = [tasks_partitions.build_add_request(new)]
            if not known:
                return dg.SensorResult(skip_reason=f"registered the {len(new)} declared tasks as partitions; run "
                                       "them with `agentcompass run`, the schedule or Materialize",
                                       dynamic_partitions_requests=add)
            ensure_pool_limits(sweep_benchmark, context.instance)
            # The runs planned here name the new keys, which the instance does not hold yet: Dagster adds
            # them before it creates the runs, and they come after every known key, so a range over new
            # keys is contiguous in the order the run sees.
            plan = plan_runs(sweep_benchmark, context.instance, new)
        requests = run_requests(sweep_benchmark, plan)
        if requests:
            return dg.SensorResult(run_requests=requests, dynamic_partitions_requests=add)
        reason = budget_reason(plan) if plan.budget_spent else f"{len(new)} new tasks, all already in runs"
        return dg.SensorResult(skip_reason=reason,
                               dynamic_partitions_requests=add)

    return sensor
