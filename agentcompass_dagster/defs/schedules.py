"""A sweep's schedule: each tick requests the runs its missing partitions need (never one already
targeted by a run in flight), or, when nothing is missing, a run of the metrics if they are stale; with
the sweep's budget spent it requests none and says so. With ``schedule.fresh`` each tick is a fresh
round instead, every partition evaluated again (a weekly re-evaluation for the regression check),
unless a fresh round of the sweep is still in flight: a slow round is not overlapped by the next."""

import dagster as dg

from agentcompass_dagster.defs.coordination import sweep_lock
from agentcompass_dagster.defs.dagster_internals import UnresolvedAssetJobDefinition
from agentcompass_dagster.defs.planning import LaunchPlan, plan_benchmark
from agentcompass_dagster.defs.sweep import SweepBenchmark, keys_of

STATUS = {"running": dg.DefaultScheduleStatus.RUNNING, "stopped": dg.DefaultScheduleStatus.STOPPED}


def run_requests(sweep_benchmark: SweepBenchmark, plan: LaunchPlan) -> list[dg.RunRequest]:
    # Named job: the location's new-tasks sensor targets every sweep's job.
    job = sweep_benchmark.job_name
    requests = [dg.RunRequest(job_name=job, tags=plan.run_tags(key_range)) for key_range in plan.ranges]
    if plan.metrics_due:
        requests.append(
            dg.RunRequest(
                job_name=job, asset_selection=[sweep_benchmark.key("metrics"), sweep_benchmark.key("comparison")]
            )
        )
    return requests


def budget_reason(plan: LaunchPlan) -> str:
    assert plan.budget is not None
    what = "to evaluate again" if plan.fresh_since is not None else "without a result"
    return (
        f"budget exhausted: {plan.budget.message}; {len(plan.missing)} (model, task) partitions {what} are "
        "not run until the sweep's budget is raised"
    )


def sweep_schedule(sweep_benchmark: SweepBenchmark, job: UnresolvedAssetJobDefinition) -> dg.ScheduleDefinition:
    config = sweep_benchmark.sweep.schedule
    assert config.cron is not None

    @dg.schedule(
        name=sweep_benchmark.name("schedule"),
        cron_schedule=config.cron,
        job=job,
        default_status=STATUS[config.default_status],
        description=f"Run {'every task again' if config.fresh else 'the missing tasks'} of sweep "
        f"{sweep_benchmark.sweep.name!r} on {sweep_benchmark.benchmark.id!r}, then its metrics.",
    )
    def schedule(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest] | dg.SkipReason:
        with sweep_lock(sweep_benchmark):
            plan = plan_benchmark(
                sweep_benchmark, context.instance, list(keys_of(sweep_benchmark.load_tasks())), fresh=config.fresh
            )
        if config.fresh and plan.fresh_in_flight:
            return dg.SkipReason(
                f"a fresh round of the sweep is still in flight ({len(plan.fresh_in_flight)} "
                f"runs: {', '.join(plan.fresh_in_flight)}); the next tick starts another"
            )
        requests = run_requests(sweep_benchmark, plan)
        if requests:
            return requests
        if plan.budget_spent:
            return dg.SkipReason(budget_reason(plan))
        return dg.SkipReason(
            f"nothing to run: every task has a result or is in one of {len(plan.in_flight)} "
            "runs in flight, and the metrics are current"
        )

    return schedule
