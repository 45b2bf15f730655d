"""A sweep's schedule: each tick requests the runs its missing partitions need (never one already
targeted by a run in flight), or, when nothing is missing, a run of the metrics if they are stale."""

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from agentcompass_dagster.defs.coordination import sweep_lock
from agentcompass_dagster.defs.planning import Plan, plan_benchmark
from agentcompass_dagster.defs.sweep import SweepBenchmark, keys_of

STATUS = {"running": dg.DefaultScheduleStatus.RUNNING, "stopped": dg.DefaultScheduleStatus.STOPPED}


def run_requests(sb: SweepBenchmark, plan: Plan) -> list[dg.RunRequest]:
    requests = [dg.RunRequest(tags=key_range.tags()) for key_range in plan.ranges]
    if plan.metrics_due:
        requests.append(dg.RunRequest(asset_selection=[sb.key("metrics"), sb.key("comparison")]))
    return requests


def sweep_schedule(sb: SweepBenchmark, job: UnresolvedAssetJobDefinition) -> dg.ScheduleDefinition:
    config = sb.sweep.schedule
    assert config.cron is not None

    @dg.schedule(name=sb.name("schedule"), cron_schedule=config.cron, job=job, default_status=STATUS[config.default_status],
                 description=f"Run the missing tasks of sweep {sb.sweep.name!r} on {sb.benchmark.id!r}, then its metrics.")
    def schedule(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest] | dg.SkipReason:
        with sweep_lock(sb):
            plan = plan_benchmark(sb, context.instance, list(keys_of(sb.load_tasks())))
        requests = run_requests(sb, plan)
        if requests:
            return requests
        return dg.SkipReason(f"nothing to run: every task has a result or is in one of {len(plan.in_flight)} "
                             "runs in flight, and the metrics are current")

    return schedule
