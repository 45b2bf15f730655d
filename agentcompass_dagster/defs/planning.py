"""Which runs a benchmark of a sweep needs now: the one answer that `agentcompass run`, the schedule
and the sensor all use.

A (model, task) partition is busy when it has a result in the sweep's results directory (but in a
fresh round): it is materialized and its task's normal detail is in a run directory there, for Dagster's
one materialization state per partition does not say which results directory the run that made it wrote
into (`agentcompass run --results-dir` runs into another one). It is busy too when targeted by a run
that has not finished (queued ones too) of any job that selects the sweep's attempts (the sweep's job,
or the asset job of a backfill or `dagster asset materialize`), targeted by an asset backfill still in
progress (whose next runs are not launched yet), or claimed by a live run; every other partition is
missing. The missing ones become a few runs (ranges, at most ``max_partitions_per_run`` partitions
each), unless the sweep's budget is spent: then nothing is launched for them, and the plan says why. When
nothing is missing and nothing is in flight (no run, no backfill) but the metrics are older than the newest
result, one run of the metrics (and what follows them) is due. Runs whose worker process is gone are reaped first:
marked failed in Dagster and in their run directories, so their partitions stop counting as busy.

A fresh round (`agentcompass run --fresh`, a schedule with ``fresh: true``) evaluates every partition
again, results or not: only partitions of runs in flight, of backfills and of live claims are busy. Its
runs carry ``FRESH_TAG``, whose value is when the round was planned: their evaluating step then reuses
no result from before it (defs/assets.py), so each model gets a new complete run for the regression
check to compare with the previous one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from agentcompass_dagster.defs.coordination import (
    claimed_partitions,
    drop_claim,
    ensure_pool_limits,
    live_claims,
    sweep_lock,
)
from agentcompass_dagster.defs.dagster_internals import backfill_targets
from agentcompass_dagster.defs.run_owners import gone_owner
from agentcompass_dagster.defs.partitions import RANGE_END, RANGE_START, KeyRange, missing_ranges, range_keys, split_key
from agentcompass_dagster.defs.sweep import SweepBenchmark
from agentcompass_dagster.runtime.store.budget import budget_status
from agentcompass_dagster.runtime.store.run_records import read_params
from agentcompass_dagster.runtime.store.run_store import open_run_dir
from agentcompass_dagster.contracts.records import utcnow
from agentcompass_dagster.runtime.store.outcomes import BudgetStatus

PARTITION = "dagster/partition"
# The run tag of a fresh round's runs; its value is the round's start (UTC, ISO 8601).
FRESH_TAG = "agentcompass/fresh"

NOT_FINISHED = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


@dataclass
class LaunchPlan:
    ranges: list[KeyRange] = field(default_factory=list)
    # The partitions to evaluate: those without a result, or, in a fresh round, every one not busy.
    missing: set[str] = field(default_factory=set)
    metrics_due: bool = False
    in_flight: list[str] = field(default_factory=list)
    # The asset backfills in progress that target the sweep's partitions (their runs may not exist yet).
    backfills: list[str] = field(default_factory=list)
    # The in-flight runs of a fresh round (launched by anyone), whatever this plan is.
    fresh_in_flight: list[str] = field(default_factory=list)
    # The sweep's budget, when it has one, as the ledger said when planning.
    budget: BudgetStatus | None = None
    # A fresh round's start; None for a plan of what is missing.
    fresh_since: str | None = None

    def run_tags(self, key_range: KeyRange) -> dict[str, str]:
        """The tags of the run evaluating a range: the range, and the round when it is fresh."""
        return {**key_range.tags(), **({FRESH_TAG: self.fresh_since} if self.fresh_since is not None else {})}

    @property
    def budget_spent(self) -> bool:
        """Partitions are missing, and the budget that would pay for them is spent."""
        return bool(self.missing) and self.budget is not None and self.budget.exhausted


def register_tasks(
    sweep_benchmark: SweepBenchmark, instance: dg.DagsterInstance, keys: list[str]
) -> tuple[list[str], list[str]]:
    """Add a partition for each new task key. Returns (the keys in partition order, the keys added)."""
    known = instance.get_dynamic_partitions(sweep_benchmark.partitions_name)
    wanted, registered = set(keys), set(known)
    new = [key for key in keys if key not in registered]
    if new:
        instance.add_dynamic_partitions(sweep_benchmark.partitions_name, new)
    return [key for key in [*known, *new] if key in wanted], new


def in_flight_runs(sweep_benchmark: SweepBenchmark, instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    """Unfinished runs of the sweep's job, and of any other job (the asset job) that select its assets."""
    return [run for run in instance.get_runs(dg.RunsFilter(statuses=NOT_FINISHED)) if sweep_benchmark.owns(run)]


def targeted(run: dg.DagsterRun, sweep_benchmark: SweepBenchmark, task_keys: Sequence[str]) -> set[str]:
    """The attempts partitions a run evaluates, from its partition tags; with none, every partition
    (the evaluating step then takes the whole sweep)."""
    if run.asset_selection is not None and sweep_benchmark.key("attempts") not in run.asset_selection:
        return set()
    models = list(sweep_benchmark.model_keys)
    if PARTITION in run.tags:
        return {run.tags[PARTITION]}
    start, end = run.tags.get(RANGE_START), run.tags.get(RANGE_END)
    if not start and not end:
        return {f"{model}|{task}" for model in models for task in task_keys}
    if not start or not end:
        return set()
    (m0, t0), (m1, t1) = split_key(start), split_key(end)
    if not {m0, m1} <= set(models) or not {t0, t1} <= set(task_keys):
        return set()
    return range_keys(KeyRange(m0, m1, t0, t1), models, list(task_keys))


def plan_runs(
    sweep_benchmark: SweepBenchmark, instance: dg.DagsterInstance, task_keys: list[str], fresh: bool = False
) -> LaunchPlan:
    """What to launch for these task keys (in partition order), a fresh round of them with ``fresh``;
    call under the sweep lock."""
    flying = in_flight_runs(sweep_benchmark, instance)
    attempts = sweep_benchmark.key("attempts")
    models = list(sweep_benchmark.model_keys)
    wanted = {f"{m}|{t}" for m in models for t in task_keys}
    busy = claimed_partitions(live_claims(sweep_benchmark, instance))
    if not fresh:
        busy |= sweep_benchmark.with_result(wanted & set(instance.get_materialized_partitions(attempts)))
    order = instance.get_dynamic_partitions(sweep_benchmark.partitions_name)
    for run in flying:
        busy |= targeted(run, sweep_benchmark, order)
    backfills = backfill_targets(instance, sweep_benchmark.asset_keys, attempts)
    for _, partitions in backfills:
        busy |= partitions
    budget = sweep_benchmark.budget
    plan = LaunchPlan(
        missing_ranges(models, task_keys, busy, sweep_benchmark.sweep.dagster.max_partitions_per_run),
        missing=wanted - busy,
        in_flight=[run.run_id for run in flying],
        backfills=[backfill_id for backfill_id, _ in backfills],
        fresh_in_flight=[run.run_id for run in flying if FRESH_TAG in run.tags],
        budget=budget_status(budget) if budget is not None else None,
        fresh_since=utcnow() if fresh else None,
    )
    if plan.budget_spent:
        plan.ranges = []
    # A backfill in progress runs the metrics itself, or the automation sensor does after it.
    if not plan.ranges and not flying and not backfills:
        metrics, newest = (
            _latest_event_id(instance, sweep_benchmark.key("metrics")),
            _latest_event_id(instance, attempts),
        )
        stale = newest is not None and (metrics is None or newest > metrics)
        # With the budget spent before any result, a metrics run would have nothing to aggregate.
        plan.metrics_due = stale or (metrics is None and not plan.budget_spent)
    return plan


# The run tag a run gets when its evaluating step has ended (set under the sweep lock).
EVALUATED_TAG = "agentcompass/evaluated"


def end_evaluation(sweep_benchmark: SweepBenchmark, instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """Mark this run's evaluation ended; return the other live runs of the sweep that will still evaluate
    some of its partitions (every targeting run not so marked: queued, starting, waiting for a slot, or
    evaluating). A run that finds some leaves the metrics to them. Marking and looking under one lock
    means the run that ends its evaluation last finds none: a sweep split into runs gets its metrics
    once, never zero times."""
    with sweep_lock(sweep_benchmark):
        instance.add_run_tags(run_id, {EVALUATED_TAG: utcnow()})
        order = instance.get_dynamic_partitions(sweep_benchmark.partitions_name)
        return [
            run.run_id
            for run in in_flight_runs(sweep_benchmark, instance)
            if run.run_id != run_id
            and EVALUATED_TAG not in run.tags
            and targeted(run, sweep_benchmark, order)
            and gone_owner(instance, run) is None
        ]


def plan_benchmark(
    sweep_benchmark: SweepBenchmark, instance: dg.DagsterInstance, task_keys: list[str], fresh: bool = False
) -> LaunchPlan:
    """What `agentcompass run` and the schedule do before they plan, then the plan; call under the
    sweep lock: dead runs reaped, the pool's limit set, new task keys registered."""
    reap_dead_runs(sweep_benchmark, instance)
    ensure_pool_limits(sweep_benchmark, instance)
    order, _ = register_tasks(sweep_benchmark, instance, task_keys)
    return plan_runs(sweep_benchmark, instance, order, fresh)


def _latest_event_id(instance: dg.DagsterInstance, key: dg.AssetKey) -> int | None:
    records = instance.fetch_materializations(key, limit=1, ascending=False).records
    return records[0].storage_id if records else None


def reap_dead_runs(sweep_benchmark: SweepBenchmark, instance: dg.DagsterInstance) -> list[str]:
    """Mark failed every unfinished run of the sweep's job whose owner process is known to be gone (or
    that was created and never launched); its run directories say so too, and its claim and concurrency
    slots are released. Returns their run ids."""
    reaped = []
    for run in in_flight_runs(sweep_benchmark, instance):
        why = gone_owner(instance, run)
        if why is not None:
            fail_run(sweep_benchmark, instance, run, why)
            reaped.append(run.run_id)
    return reaped


def fail_run(sweep_benchmark: SweepBenchmark, instance: dg.DagsterInstance, run: dg.DagsterRun, message: str) -> None:
    """Mark a run whose worker is gone failed, and release what it held: its concurrency slots (its step
    would otherwise hold the sweep's pool for good), its claim, and its run directories' `running`."""
    current = instance.get_run_by_id(run.run_id)
    if current is not None and not current.is_finished:
        instance.report_run_failed(current, message=message)
    if instance.event_log_storage.supports_global_concurrency_limits:
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
    drop_claim(sweep_benchmark, run.run_id)
    fail_run_dirs(sweep_benchmark, run.run_id, message)


def fail_run_dirs(sweep_benchmark: SweepBenchmark, dagster_run_id: str, message: str) -> None:
    """The run directories a failed Dagster run was writing say that it failed, and why."""
    for contestant in sweep_benchmark.model_keys.values():
        for source in sweep_benchmark.store.runs_newest_first(sweep_benchmark.root(contestant)):
            params = read_params(source.path)
            if params is None or params.dagster_run_id != dagster_run_id:
                continue
            run_dir = open_run_dir(Path(source.path))
            assert run_dir.info is not None
            if run_dir.info.status == "running":
                run_dir.record.write_terminal_status("failed", f"Dagster run {dagster_run_id} failed: {message}")
