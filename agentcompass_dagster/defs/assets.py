"""The assets of each benchmark of a sweep: tasks -> attempts (model x task) -> metrics -> comparison.

``attempts`` and ``metrics`` are materialized by one step (a multi-asset that can be subset): the step
evaluates the partitions of its range (of the whole sweep when its run has no partition), materializing
each as its task ends with a normal result (a task that ends in error stays missing, to run again, and
is reported as an observation), and then the metrics when they are selected. A run of a fresh round
(tagged ``FRESH_TAG``, defs/planning.py) evaluates its materialized partitions again too, reusing only
results of its own round. The step works under any
job: the sweep's own, and the asset job that backfills, `dagster asset materialize` and declarative
automation run. When a run of the attempts leaves the metrics out (a backfill of some partitions,
`dagster asset materialize` of the attempts), the metrics, the comparison and the checks carry an
automation condition that the sweep's automation sensor (in the daemon) turns into one run once no
attempts are in progress, so every way of materializing ends with current metrics.
"""

import hashlib
import io
import json
import queue
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import dagster as dg

from agentcompass_dagster.defs.benchmark_metrics import write_metrics
from agentcompass_dagster.defs.coordination import (
    InstancePermits,
    claim_partitions,
    drop_claim,
    ensure_pool_limits,
    record_worker,
)
from agentcompass_dagster.defs.dagster_internals import without_partitioned_provenance
from agentcompass_dagster.defs.partitions import dagster_name, split_key
from agentcompass_dagster.defs.planning import FRESH_TAG, end_evaluation, register_tasks
from agentcompass_dagster.defs.resources import SweepResources
from agentcompass_dagster.defs.sweep import SweepBenchmark
from agentcompass_dagster.defs.task_events import TaskStream
from agentcompass_dagster.contracts.markdown import markdown_table
from agentcompass_dagster.runtime.store.atomic import atomic_write_bytes, atomic_write_text
from agentcompass_dagster.runtime.execution.orchestration_thread import OrchestrationThread
from agentcompass_dagster.runtime.execution.orchestrator import Orchestrator
from agentcompass_dagster.runtime.store.layout import COMPARISON_FILE, COMPARISON_MD, TASK_RESULTS_FILE, TASKS_FILE
from agentcompass_dagster.runtime.results.parquet import read_task_scores
from agentcompass_dagster.runtime.results.regression import finished_scores
from agentcompass_dagster.reporting.report_data import COMPARISON_COLUMNS
from agentcompass_dagster.runtime.results.stats import paired_comparison

# The run tag of every run an asset backfill launches (Dagster's BACKFILL_ID_TAG).
BACKFILL_TAG = "dagster/backfill"


def write_frame(path: Path, frame: Any) -> None:
    """A DataFrame as Parquet, written atomically."""
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    atomic_write_bytes(path, buffer.getvalue())


def tasks_asset(sweep_benchmark: SweepBenchmark) -> dg.AssetsDefinition:
    """An observation, not a materialization: the task list comes from the benchmark's source, not from
    this pipeline. Downstream partitions are evaluated per task and, but by a fresh round, never again once
    materialized, so a materialization of the list on every run would mark every attempts partition
    "Unsynced" for good; an observed source with a data version (a hash of the list) says when the list
    changed and leaves them synced."""

    @dg.multi_observable_source_asset(
        name=dagster_name(sweep_benchmark.sweep.name, sweep_benchmark.benchmark.id, "tasks"),
        specs=[
            dg.AssetSpec(
                sweep_benchmark.key("tasks"),
                group_name=sweep_benchmark.group,
                description=f"The selected tasks of benchmark {sweep_benchmark.benchmark.id!r}; one "
                "attempts partition per task.",
            )
        ],
    )
    def tasks(context: dg.AssetExecutionContext) -> dg.ObserveResult:
        import pandas as pd

        record_worker(context)
        ensure_pool_limits(sweep_benchmark, context.instance)
        keys = sweep_benchmark.task_keys
        _, new = register_tasks(sweep_benchmark, context.instance, list(keys))
        sweep_benchmark.benchmark_dir.mkdir(parents=True, exist_ok=True)
        frame = pd.DataFrame(
            {
                "task_id": [t.id for t in keys.values()],
                "partition_key": list(keys),
                "category": [t.category for t in keys.values()],
            }
        )
        write_frame(sweep_benchmark.benchmark_dir / TASKS_FILE, frame)
        listed = json.dumps(
            [[t.id, t.category, t.input, t.metadata, t.environment, t.agent_timeout_s, t.steps] for t in keys.values()],
            sort_keys=True,
            default=str,
        )
        not_loaded = sweep_benchmark.selection.not_loaded
        return dg.ObserveResult(
            data_version=dg.DataVersion(hashlib.sha256(listed.encode()).hexdigest()[:16]),
            metadata={
                "tasks": len(keys),
                "new partitions": len(new),
                **(
                    {"not loaded": dg.MetadataValue.md("\n".join(f"- `{t.id}`: {t.reason}" for t in not_loaded))}
                    if not_loaded
                    else {}
                ),
                "path": dg.MetadataValue.path(str((sweep_benchmark.benchmark_dir / TASKS_FILE).resolve())),
            },
        )

    return tasks


def _stream(
    context: dg.AssetExecutionContext, orchestration: OrchestrationThread, stream: TaskStream
) -> Iterator[dg.AssetMaterialization | dg.AssetObservation]:
    try:
        while True:
            try:
                yield stream.events.get(timeout=0.2)
            except queue.Empty:
                if orchestration.join(0):
                    break
        while not stream.events.empty():
            yield stream.events.get_nowait()
    except BaseException:
        # The run was asked to stop (terminated in the UI, Ctrl-C, SIGTERM): the runtime cancels its
        # tasks, closes their environments and marks its run directories before the step ends.
        context.log.info("stopping: cancelling the running tasks")
        orchestration.stop()
        raise


def _wanted(context: dg.AssetExecutionContext, sweep_benchmark: SweepBenchmark) -> list[str]:
    """The sweep's partitions this run targets: its partition or range, or every one when it has
    neither (the sweep's job launched without a partition, as launchRun allows)."""
    tasks, models = sweep_benchmark.task_keys, sweep_benchmark.model_keys
    if not (context.has_partition_key or context.has_partition_key_range):
        return [f"{model}|{task}" for model in models for task in tasks]
    wanted = []
    for key in context.partition_keys:
        model_key, task_key = split_key(str(key))
        if task_key in tasks and model_key in models:
            wanted.append(str(key))
    return wanted


def _reused(
    context: dg.AssetExecutionContext, sweep_benchmark: SweepBenchmark, skipped: list[str]
) -> Iterator[dg.AssetMaterialization]:
    """The skipped partitions of a backfill's run that have a result (from an earlier run, or one that
    evaluated them beside this one), reported again with that result's metadata: an asset backfill
    counts a partition done only when a run of its own materializes it, and would otherwise end
    failed without running the metrics and what follows them."""
    attempts = sweep_benchmark.key("attempts")
    done = sweep_benchmark.with_result(set(context.instance.get_materialized_partitions(attempts)) & set(skipped))
    if not done:
        return
    latest: dict[str, Any] = {}
    cursor = None
    while len(latest) < len(done):
        page = context.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=attempts, asset_partitions=sorted(done)), limit=len(done), cursor=cursor
        )
        for record in page.records:  # newest first
            latest.setdefault(str(record.partition_key), record.asset_materialization)
        if not page.has_more:
            break
        cursor = page.cursor
    for key in sorted(done):
        metadata = dict(latest[key].metadata) if key in latest and latest[key] is not None else {}
        yield dg.AssetMaterialization(asset_key=attempts, partition=key, metadata={**metadata, "reused": True})


def _evaluate(context: dg.AssetExecutionContext, sweep_benchmark: SweepBenchmark) -> Generator[Any, None, str | None]:
    """The step's attempts half; returns what failed, if anything, once every event is out."""
    resources = SweepResources.of(context, sweep_benchmark.sweep)
    tasks = sweep_benchmark.task_keys
    wanted = _wanted(context, sweep_benchmark)
    run_id = context.run.run_id
    # A fresh round's run evaluates materialized partitions again, reusing only what its round evaluated.
    fresh_since = context.run.tags.get(FRESH_TAG)
    mine = claim_partitions(sweep_benchmark, context.instance, run_id, wanted, fresh=fresh_since is not None)
    result = None
    try:
        skipped = len(wanted) - len(mine)
        if skipped:
            context.log.info(
                f"{skipped} of {len(wanted)} partitions are "
                f"{'' if fresh_since else 'materialized or '}being evaluated by another run: skipped"
            )
        if mine:
            by_model: dict[str, list[str]] = {}
            for key in mine:
                model_key, task_key = split_key(key)
                by_model.setdefault(sweep_benchmark.model_keys[model_key], []).append(tasks[task_key].id)
            requests = [
                sweep_benchmark.request(model_id, task_ids, resources, run_id, fresh_since)
                for model_id, task_ids in by_model.items()
            ]
            stream = TaskStream(sweep_benchmark, {(m, t) for m, ids in by_model.items() for t in ids})
            permits = InstancePermits(context.instance, run_id, context.op_execution_context.op_handle.name)
            orchestrator = Orchestrator(
                requests, observer=stream, resolved=sweep_benchmark.resolved(requests, resources), permits=permits
            )
            orchestration = OrchestrationThread(orchestrator).start()
            yield from _stream(context, orchestration, stream)
            result = orchestration.result()
            if stopped := sum(len(state.budget_stopped) for state in orchestrator.states):
                context.log.warning(f"budget exhausted: {stopped} tasks not run, left missing until it is raised")
    finally:
        drop_claim(sweep_benchmark, run_id)
    if BACKFILL_TAG in context.run.tags:
        yield from _reused(context, sweep_benchmark, sorted(set(wanted) - set(mine)))
    if result is None:
        return None
    failed = {name: o.error for name, o in result.outcomes.items() if o.status != "completed"}
    if not failed:
        return None
    return "; ".join(
        f"{name}: {str(error).strip().splitlines()[-1][:300] if error else 'failed'}" for name, error in failed.items()
    )


def current_after_deps() -> dg.AutomationCondition:
    """Due when what it is computed from changed after it was last computed or requested, once none of
    that is in progress: the metrics after a run of the attempts that left them out (the comparison
    and the checks follow in the same run, their dependency being requested). A run that computes the
    metrics after its attempts resets it, so runs that include them launch nothing more."""
    return (
        dg.AutomationCondition.any_deps_updated().since(
            dg.AutomationCondition.newly_requested() | dg.AutomationCondition.newly_updated()
        )
        & ~dg.AutomationCondition.any_deps_in_progress()
        & ~dg.AutomationCondition.in_progress()
    )


def backfill_policy(sweep_benchmark: SweepBenchmark) -> dg.BackfillPolicy:
    """A backfill of any set of partitions is one run per range of them, not one per partition (each a
    process starting the runtime); split into runs of at most ``dagster.max_partitions_per_run``
    partitions when the sweep declares it, as its own runs are. Only a single-run policy lets
    `dagster asset materialize --partition-range` run (Dagster's CLI refuses others)."""
    most = sweep_benchmark.sweep.dagster.max_partitions_per_run
    return dg.BackfillPolicy.single_run() if most is None else dg.BackfillPolicy.multi_run(most)


def evaluation_asset(sweep_benchmark: SweepBenchmark) -> dg.AssetsDefinition:
    attempts_key, metrics_key = sweep_benchmark.key("attempts"), sweep_benchmark.key("metrics")

    @dg.multi_asset(
        name=dagster_name(sweep_benchmark.sweep.name, sweep_benchmark.benchmark.id, "evaluate"),
        specs=[
            dg.AssetSpec(
                attempts_key,
                deps=[sweep_benchmark.key("tasks")],
                partitions_def=sweep_benchmark.partitions,
                skippable=True,
                group_name=sweep_benchmark.group,
                description=(
                    f"Every task of {sweep_benchmark.benchmark.id!r} for every model, k attempts each "
                    "(inside the "
                    "task's detail). A partition is materialized when its task ends with a normal "
                    "result; a task that ends in error stays missing and runs again. The detail paths "
                    f"in its metadata are relative to {sweep_benchmark.benchmark_dir}; the trajectory "
                    "pages' are whole, to open in a browser."
                ),
            ),
            dg.AssetSpec(
                metrics_key,
                deps=[attempts_key],
                group_name=sweep_benchmark.group,
                skippable=True,
                automation_condition=current_after_deps(),
                description=(
                    f"Metrics of {sweep_benchmark.benchmark.id!r} per model, from each model's newest complete run."
                ),
            ),
        ],
        can_subset=True,
        pool=sweep_benchmark.pool,
        backfill_policy=backfill_policy(sweep_benchmark),
        required_resource_keys=SweepResources.all_keys(sweep_benchmark.sweep),
    )
    def evaluate(context: dg.AssetExecutionContext) -> Iterator[Any]:
        record_worker(context)
        failure, others = None, []
        if attempts_key in context.selected_asset_keys:
            failure = yield from _evaluate(context, sweep_benchmark)
            others = end_evaluation(sweep_benchmark, context.instance, context.run.run_id)
        if metrics_key in context.selected_asset_keys:
            if others:
                context.log.info(
                    f"metrics left to the run that ends its evaluation last: {len(others)} other run(s) "
                    f"still evaluate this sweep ({', '.join(others)})"
                )
            else:
                if not (context.has_partition_key or context.has_partition_key_range):
                    without_partitioned_provenance(context, attempts_key)
                yield write_metrics(sweep_benchmark, context.run.run_id)
        if failure:
            raise dg.Failure(description=f"requests did not complete: {failure}")

    return evaluate


def comparison_asset(sweep_benchmark: SweepBenchmark) -> dg.AssetsDefinition:
    @dg.asset(
        key=sweep_benchmark.key("comparison"),
        group_name=sweep_benchmark.group,
        deps=[sweep_benchmark.key("metrics")],
        automation_condition=current_after_deps(),
        # A range run of `dagster asset materialize` needs every selected asset to have this policy.
        backfill_policy=dg.BackfillPolicy.single_run(),
        description=f"Every pair of models (of harness x model, with several harnesses) on the "
        f"{sweep_benchmark.benchmark.id!r} tasks both finished: "
        "the difference in "
        "accuracy with a paired bootstrap 95% interval and a paired test (McNemar for k = 1, a sign-flip "
        "permutation test of per-task scores for k > 1).",
    )
    def comparison(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        import pandas as pd

        record_worker(context)
        scores = _task_scores(sweep_benchmark)
        rows = []
        models = [contestant for contestant in sweep_benchmark.model_keys.values() if contestant in scores]
        for index, a in enumerate(models):
            for b in models[index + 1 :]:
                result = paired_comparison(scores[a], scores[b])
                if result is None:
                    continue
                rows.append(
                    {
                        "sweep": sweep_benchmark.sweep.name,
                        "benchmark": sweep_benchmark.benchmark.id,
                        "model_a": a,
                        "model_b": b,
                        "n": result.n,
                        "accuracy_a": result.mean_a,
                        "accuracy_b": result.mean_b,
                        "diff": result.diff,
                        "ci_low": result.ci_low,
                        "ci_high": result.ci_high,
                        "only_a": result.only_a,
                        "only_b": result.only_b,
                        "p_value": result.p_value,
                        "test": result.test,
                        "verdict": result.verdict(a, b),
                    }
                )
        frame = pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
        sweep_benchmark.benchmark_dir.mkdir(parents=True, exist_ok=True)
        write_frame(sweep_benchmark.benchmark_dir / COMPARISON_FILE, frame)
        table = comparison_table(frame)
        atomic_write_text(
            sweep_benchmark.benchmark_dir / COMPARISON_MD,
            f"# {sweep_benchmark.sweep.name} · {sweep_benchmark.benchmark.id}: comparisons\n\n{table}\n",
        )
        return dg.MaterializeResult(metadata={"comparisons": dg.MetadataValue.md(table), "pairs": len(rows)})

    return comparison


def _task_scores(sweep_benchmark: SweepBenchmark) -> dict[str, dict[str, float]]:
    """Contestant -> task -> mean score over attempts (what accuracy averages), for tasks without error."""
    return {
        model: finished_scores(read_task_scores(Path(source.path)))
        for model, source in sweep_benchmark.newest_runs(TASK_RESULTS_FILE).items()
    }


def comparison_table(frame: Any) -> str:
    if frame.empty:
        return "_fewer than two models with finished tasks_"
    headers = [
        "model A",
        "model B",
        "tasks",
        "accuracy A",
        "accuracy B",
        "A - B [95% CI]",
        "A higher",
        "B higher",
        "p (test)",
        "verdict",
    ]
    return markdown_table(
        headers,
        [
            (
                row.model_a,
                row.model_b,
                row.n,
                f"{row.accuracy_a:.4f}",
                f"{row.accuracy_b:.4f}",
                f"{row.diff:+.4f} [{row.ci_low:+.4f}, {row.ci_high:+.4f}]",
                row.only_a,
                row.only_b,
                f"{row.p_value:.4g} ({row.test})",
                row.verdict,
            )
            for row in frame.itertuples()
        ],
    )
