"""The code location's new-tasks sensor: new tasks in a benchmark's source become partitions and are run
(tasks that ended in error are left to the schedule and to `agentcompass run`, so a failing task is not
retried on every tick).

Its first look at a sweep the instance has never seen only registers the declared tasks: the UI then
shows the sweep's partitions before its first run (instead of none and a box to type keys into), and
opening the UI never launches a whole sweep. Running the declared tasks is what `agentcompass run`, the
schedule and the UI's Materialize are for; a task that appears later is new, and the sensor runs it.

One sensor for every sweep of the location (a sensor per sweep made an idle daemon busy): it ticks at
the smallest ``sensor.minimum_interval_seconds`` of the sweeps, and looks at a sweep only once that
sweep's own interval has passed since it last did (the cursor keeps when, per sweep benchmark); a sweep
declaring ``sensor.default_status: stopped`` is left out.

The sensor asks for the new partitions in its SensorResult instead of adding them itself: Dagster adds
them when it commits the tick, together with the tick's runs, so a tick that fails adds nothing and the
next one sees the same tasks as new."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import dagster as dg

from agentcompass_dagster.defs.coordination import ensure_pool_limits, sweep_lock
from agentcompass_dagster.defs.dagster_internals import UnresolvedAssetJobDefinition
from agentcompass_dagster.defs.planning import plan_runs
from agentcompass_dagster.defs.schedules import budget_reason, run_requests
from agentcompass_dagster.defs.sweep import SweepBenchmark, keys_of

NAME = "agentcompass_new_tasks"
# The daemon ticks a sensor a little later or earlier than its interval; a sweep due within this much
# is looked at now rather than a whole tick later.
EARLY_S = 1.0


@dataclass
class Found:
    """What one tick found over the sweeps it looked at."""

    runs: list[dg.RunRequest] = field(default_factory=list)
    partitions: list[dg.AddDynamicPartitionsRequest] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)


def new_tasks_sensor(
    members: Sequence[SweepBenchmark], jobs: Mapping[str, UnresolvedAssetJobDefinition]
) -> dg.SensorDefinition:
    watched = [member for member in members if member.sweep.sensor.default_status == "running"]
    interval = min((member.sweep.sensor.minimum_interval_seconds for member in watched), default=None)
    left_out = sorted({member.sweep.name for member in members} - {member.sweep.name for member in watched})

    @dg.sensor(
        name=NAME,
        jobs=[jobs[member.job_name] for member in members],
        minimum_interval_seconds=interval,
        default_status=dg.DefaultSensorStatus.RUNNING if watched else dg.DefaultSensorStatus.STOPPED,
        description="Registers the tasks of each sweep as partitions on its first look; then adds a "
        "partition for each new task and runs it. Looks at a sweep every sensor.minimum_interval_seconds "
        "of its own"
        + (
            f"; leaves out the sweeps declaring sensor.default_status stopped: {', '.join(left_out)}."
            if left_out
            else "."
        ),
    )
    def sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        looked: dict[str, float] = json.loads(context.cursor) if context.cursor else {}
        found = Found()
        for member in watched:
            now = time.time()
            if now + EARLY_S - looked.get(member.job_name, 0.0) < member.sweep.sensor.minimum_interval_seconds:
                continue
            try:
                _look(member, context.instance, found)
            except Exception as exc:  # one sweep's broken task source must not keep the others' tasks from running
                context.log.exception("looking at %s failed", member.job_name)
                found.reasons.append(
                    f"{member.sweep.name}/{member.benchmark.id}: failed ({exc}); looked at again next tick"
                )
                continue
            looked[member.job_name] = now
        cursor = json.dumps(looked)
        if found.runs:
            return dg.SensorResult(run_requests=found.runs, dynamic_partitions_requests=found.partitions, cursor=cursor)
        return dg.SensorResult(
            skip_reason="; ".join(found.reasons) or "no sweep due",
            cursor=cursor,
            dynamic_partitions_requests=found.partitions,
        )

    return sensor


def _look(member: SweepBenchmark, instance: dg.DagsterInstance, found: Found) -> None:
    """Add to ``found`` what one sweep benchmark's new tasks need: their partitions, and runs of them
    (none on the first look, which only registers the declared tasks)."""
    what = f"{member.sweep.name}/{member.benchmark.id}"
    tasks_partitions = dg.DynamicPartitionsDefinition(name=member.partitions_name)
    with sweep_lock(member):
        known = set(instance.get_dynamic_partitions(member.partitions_name))
        new = [key for key in keys_of(member.load_tasks()) if key not in known]
        if not new:
            found.reasons.append(f"{what}: no new task")
            return
        found.partitions.append(tasks_partitions.build_add_request(new))
        if not known:
            found.reasons.append(
                f"{what}: registered the {len(new)} declared tasks as partitions; run them with "
                "`agentcompass run`, the schedule or Materialize"
            )
            return
        ensure_pool_limits(member, instance)
        # The runs planned here name the new keys, which the instance does not hold yet: Dagster adds
        # them before it creates the runs, and they come after every known key, so a range over new
        # keys is contiguous in the order the run sees.
        plan = plan_runs(member, instance, new)
    requests = run_requests(member, plan)
    found.runs.extend(requests)
    if not requests:
        found.reasons.append(
            f"{what}: " + (budget_reason(plan) if plan.budget_spent else f"{len(new)} new tasks, all already in runs")
        )
