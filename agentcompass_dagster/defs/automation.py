"""A sweep's schedule (its cron asks for the missing partitions) and its sensor (new tasks in a
benchmark's source become partitions and are requested)."""

from typing import Any

import dagster as dg

from agentcompass_dagster.config import SweepConfig
from agentcompass_dagster.defs.partitions import KeyRange, identifier, missing_ranges
from agentcompass_dagster.defs.sweep import SweepBenchmark, sweep_benchmarks


def missing_run_requests(
    sb: SweepBenchmark, instance: dg.DagsterInstance, selected: list[str] | None = None
) -> list[dg.RunRequest]:
    """One run per range of partitions that have no materialization yet, among the selected task keys
    (default: every task partition), in partition order."""
    task_keys = list(instance.get_dynamic_partitions(sb.partitions_name))
    if selected is not None:
        wanted = set(selected)
        task_keys = [key for key in task_keys if key in wanted]
    materialized = set(instance.get_materialized_partitions(sb.key("attempts")))
    return [_attempts_run(sb, r) for r in missing_ranges(list(sb.model_keys), task_keys, materialized)]


def _attempts_run(sb: SweepBenchmark, key_range: KeyRange) -> dg.RunRequest:
    return dg.RunRequest(asset_selection=[sb.key("attempts")], tags=key_range.tags())


def sweep_schedule(sweep: SweepConfig, job: Any) -> dg.ScheduleDefinition:
    @dg.schedule(name=identifier(sweep.name, "schedule"), cron_schedule=sweep.schedule.cron or "", job=job,
                 description=f"Run the missing tasks of sweep {sweep.name!r}.")
    def schedule(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest]:
        return [request for sb in sweep_benchmarks(sweep) for request in missing_run_requests(sb, context.instance)]

    return schedule


def new_tasks_sensor(sweep: SweepConfig, job: Any) -> dg.SensorDefinition:
    @dg.sensor(name=identifier(sweep.name, "new_tasks"), job=job, minimum_interval_seconds=300,
               description=f"Adds a partition for each new task of sweep {sweep.name!r} and runs it.")
    def sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        additions = []
        runs = []
        for sb in sweep_benchmarks(sweep):
            known = set(context.instance.get_dynamic_partitions(sb.partitions_name))
            new = [key for key in sb.task_keys(sb.load_tasks()) if key not in known]
            if not new:
                continue
            additions.append(dg.AddDynamicPartitionsRequest(sb.partitions_name, new))
            models = list(sb.model_keys)
            runs.append(_attempts_run(sb, KeyRange(models[0], models[-1], new[0], new[-1])))
        return dg.SensorResult(run_requests=runs, dynamic_partitions_requests=additions)

    return sensor
