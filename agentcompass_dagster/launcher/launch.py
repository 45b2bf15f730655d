"""`agentcompass run` through Dagster: the sweep's own job, run through the instance.

Per benchmark of the sweep, under the sweep lock: reap runs whose worker died, register new tasks as
partitions, plan what is missing (never a partition that is materialized or in a run in flight), and
create the runs in the instance (the sweep's job, tags, code origin). Then either execute them in run
workers of this process (at most ``max_concurrent_runs`` at once) or, with ``submit``, hand them to the
instance's run queue for the daemon to launch. Either way the runs are followed through the instance
to their end, together with runs of the sweep that others launched, and the newest complete run of
each model is what the summary shows. A sweep with nothing missing and current metrics launches
nothing; a fresh launch (`--fresh`) evaluates every partition not in a run in flight again.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import dagster as dg

from agentcompass_dagster.declarations.sweep import SweepConfig, load_sweep
from agentcompass_dagster.defs.code_location import set_sweep_files
from agentcompass_dagster.defs.coordination import sweep_lock
from agentcompass_dagster.defs.location import sweep_definitions
from agentcompass_dagster.defs.instance import PG_URL_ENV, dagster_home, ensure_dagster_home, postgres_url
from agentcompass_dagster.defs.jobs import mounted, same_path_mounts, shared_paths
from agentcompass_dagster.defs.planning import LaunchPlan, plan_benchmark, plan_runs
from agentcompass_dagster.defs.sweep import SweepBenchmark, sweep_benchmarks
from agentcompass_dagster.defs.run_launcher import RunWorkerLauncher
from agentcompass_dagster.defs.run_worker import StandbyWorker
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.launcher.follow import DAEMON_WAIT_S, QUEUE_DAEMON, RunFollower, daemon_alive
from agentcompass_dagster.launcher.runs import RunFactory
from agentcompass_dagster.launcher.workers import RunWorkers, instance_launcher
from agentcompass_dagster.launcher.progress import ProgressBoard
from agentcompass_dagster.runtime.store.budget import budget_status
from agentcompass_dagster.runtime.execution.interrupts import Interrupts
from agentcompass_dagster.runtime.execution.orchestrator import Orchestrator
from agentcompass_dagster.runtime.store.layout import SUMMARY
from agentcompass_dagster.runtime.store.run_records import ReuseSource
from agentcompass_dagster.runtime.store.outcomes import BudgetStatus

POLL_S = 0.2
QUIET_POLL_S = 1.0
STOP_SLACK_S = 10.0
# How long a worker interrupted twice has to mark its runs cancelled and exit before it is killed.
LAST_WORD_S = 5.0


def _metrics_assets(sweep_benchmark: SweepBenchmark) -> set[dg.AssetKey]:
    """What a run of the metrics alone materializes."""
    return {sweep_benchmark.key("metrics"), sweep_benchmark.key("comparison")}


@dataclass
class SweepLaunch:
    home: Path
    launched: list[str] = field(default_factory=list)
    # What the launched runs are for: the (model, task) partitions without a result (with ``fresh``,
    # every one evaluated again), and runs of the metrics alone (results all current, metrics older
    # than the newest of them).
    fresh: bool = False
    missing: int = 0
    metrics_runs: int = 0
    followed: list[str] = field(default_factory=list)
    # Asset backfills in progress (from the UI, say) that target partitions this command asked for.
    backfills: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    newest: dict[tuple[str, str], ReuseSource] = field(default_factory=dict)
    # The sweep's budget when the runs ended; partitions not launched because it was spent when planning,
    # and partitions still without a result at the end (what a raised budget would run).
    budget: BudgetStatus | None = None
    budget_refused: int = 0
    without_result: int = 0

    def count(self, plan: LaunchPlan) -> None:
        """Add what a benchmark's plan launches and follows."""
        self.followed += plan.in_flight
        self.backfills += plan.backfills
        if plan.budget_spent:
            self.budget_refused += len(plan.missing)
        else:
            self.missing += len(plan.missing)
        self.metrics_runs += plan.metrics_due

    @property
    def evaluated(self) -> bool:
        """Whether anything evaluated this sweep during the command: runs it launched, runs or backfills it followed."""
        return bool(self.launched or self.followed or self.backfills)


def preflight(sweep_benchmark_list: list[SweepBenchmark]) -> None:
    """Every user mistake (plugins, plans, task ids, results dir) stops here, before Dagster runs. The
    plugins and tasks prepared here serve the whole launch."""
    output = sweep_benchmark_list[0].sweep.output
    for field_name in ("run_id", "reuse_run_id"):
        value = getattr(output, field_name)
        if value:
            raise UserError(
                f"output.{field_name}={value!r}: a sweep run through Dagster names its runs and reuses "
                "the newest itself; remove it or run with --direct"
            )
    postgres_url()
    for sweep_benchmark in sweep_benchmark_list:
        requests = [sweep_benchmark.request(contestant, []) for contestant in sweep_benchmark.model_keys.values()]
        Orchestrator(requests, resolved=sweep_benchmark.resolved(requests)).preflight()


def check_shared_storage(sweep_benchmark: SweepBenchmark, sweep_file: Path) -> None:
    """What a step container or pod writes must land where the host reads results. Step containers of
    a local Docker engine get same-path binds of this host's directories; an engine on another host
    (DOCKER_HOST tcp:// or ssh://) and Kubernetes pods have no such directories, so there the declared
    volumes must mount the results directory and the sweep files at the same paths (and pods need a
    PostgreSQL instance: they share no DAGSTER_HOME). Otherwise the sweep is refused before it runs:
    its steps would lose their results while Dagster marked the tasks done."""
    deployment = sweep_benchmark.sweep.dagster
    engine = os.environ.get("DOCKER_HOST", "unix://")
    if deployment.executor == "k8s" and deployment.k8s is not None:
        if postgres_url() is None:
            raise UserError(
                f"{sweep_file}: dagster.executor='k8s': step pods share no DAGSTER_HOME; set "
                f"{PG_URL_ENV} to a PostgreSQL database that every pod reaches"
            )
        field, where = "dagster.k8s.volume_mounts", "the step pods"
        mounts = [Path(str(m["mount_path"])) for m in deployment.k8s.volume_mounts if m.get("mount_path")]
    elif deployment.executor == "docker" and deployment.docker is not None and not engine.startswith("unix://"):
        field, where = (
            "dagster.docker.container_kwargs.volumes",
            f"the step containers of DOCKER_HOST={engine!r} (not on this host)",
        )
        mounts = same_path_mounts(deployment.docker.container_kwargs.get("volumes"))
    else:
        return
    for what, path in shared_paths(sweep_benchmark).items():
        if not mounted(path, mounts):
            raise UserError(
                f"{sweep_file}: {field}: {what} {path} would not be shared with {where}; declare a "
                f"volume they share with this host, mounted at {path}"
            )


def location_results_dir(sweep: SweepConfig, sweep_file: Path) -> Path | None:
    """The results directory the code location runs the sweep's file into, when the command line changed
    it (--results-dir). The location gets it through its environment rather than a copy of the sweep
    written beside the results: such a copy holds the environment's env values, which would sit there in
    plain text, or, redacted like every file written there, run as ``[REDACTED]`` (#36)."""
    declared = load_sweep(sweep_file).output.results_dir
    if Path(declared).resolve() == Path(sweep.output.results_dir).resolve():
        return None
    return Path(sweep.output.results_dir).resolve()


def launch_sweep(
    sweep: SweepConfig,
    sweep_file: Path,
    *,
    submit: bool = False,
    board: ProgressBoard | None = None,
    home: Path | None = None,
    fresh: bool = False,
    standby: StandbyWorker | None = None,
) -> SweepLaunch:
    set_sweep_files([sweep_file], location_results_dir(sweep, sweep_file))
    dagster_home(home)
    sweep_benchmark_list = sweep_benchmarks(sweep)
    for sweep_benchmark in sweep_benchmark_list:
        check_shared_storage(sweep_benchmark, sweep_file)
    preflight(sweep_benchmark_list)
    home = ensure_dagster_home(home)
    launch = SweepLaunch(home, fresh=fresh)
    with dg.DagsterInstance.get() as instance:
        if submit:
            _check_run_queue(instance, home)
        factory = RunFactory(instance, sweep_definitions(sweep))
        # One launcher for the workers and the follower: it knows how the workers it started exited.
        launcher = instance_launcher(instance)
        if isinstance(launcher, RunWorkerLauncher):
            launcher.standby = standby
        follower = RunFollower(instance, launcher, board)
        created: list[dg.DagsterRun] = []
        for sweep_benchmark in sweep_benchmark_list:
            plan, runs = _plan(sweep_benchmark, instance, factory, follower, fresh)
            created += runs
            launch.count(plan)
        launch.launched = [run.run_id for run in created]
        _say_followed(launch)
        execute = (
            _submitted
            if submit
            else partial(_execute, RunWorkers(instance, launcher, sweep.dagster.max_concurrent_runs), sweep=sweep)
        )
        execute(created, follower)
        if launch.backfills:
            # A backfill of the attempts alone leaves the metrics to the daemon's automation: brought up to
            # date here, so this command ends with the metrics of what it waited for.
            metrics_runs = [
                run
                for sweep_benchmark in sweep_benchmark_list
                for run in _metrics_run(sweep_benchmark, instance, factory, follower)
            ]
            launch.metrics_runs += len(metrics_runs)
            launch.launched += [run.run_id for run in metrics_runs]
            execute(metrics_runs, follower)
        _record_end(launch, sweep_benchmark_list, instance, follower)
    return launch


def _record_end(
    launch: SweepLaunch, sweep_benchmark_list: list[SweepBenchmark], instance: dg.DagsterInstance, follower: RunFollower
) -> None:
    """Record what the followed runs came to: the failed ones, each model's newest complete run, and the
    sweep's budget with the partitions still without a result."""
    launch.failed = follower.failures()
    for sweep_benchmark in sweep_benchmark_list:
        launch.newest.update(
            {(sweep_benchmark.benchmark.id, model): run for model, run in sweep_benchmark.newest_runs(SUMMARY).items()}
        )
    budget = sweep_benchmark_list[0].budget
    if budget is not None:
        launch.budget = budget_status(budget)
        launch.without_result = sum(
            _without_result(sweep_benchmark, instance) for sweep_benchmark in sweep_benchmark_list
        )


def _without_result(sweep_benchmark: SweepBenchmark, instance: dg.DagsterInstance) -> int:
    materialized = instance.get_materialized_partitions(sweep_benchmark.key("attempts"))
    wanted = {f"{model}|{task}" for model in sweep_benchmark.model_keys for task in sweep_benchmark.task_keys}
    return len(wanted - sweep_benchmark.with_result(wanted & set(materialized)))


def _plan(
    sweep_benchmark: SweepBenchmark,
    instance: dg.DagsterInstance,
    factory: RunFactory,
    follower: RunFollower,
    fresh: bool,
) -> tuple[LaunchPlan, list[dg.DagsterRun]]:
    """Create the runs a benchmark needs (a fresh round of it with ``fresh``); returns its plan (with the
    runs in flight launched by others) and them."""
    with sweep_lock(sweep_benchmark):
        plan = plan_benchmark(sweep_benchmark, instance, list(sweep_benchmark.task_keys), fresh)
        # Created under the lock: the next planner sees them in flight.
        runs = [factory.create(sweep_benchmark, plan.run_tags(key_range)) for key_range in plan.ranges]
        if plan.metrics_due:
            runs.append(factory.create(sweep_benchmark, {}, _metrics_assets(sweep_benchmark)))
    follower.expect(sweep_benchmark, set() if plan.budget_spent else plan.missing)
    for run_id in [run.run_id for run in runs] + plan.in_flight:
        follower.follow(sweep_benchmark, run_id)
    for backfill_id in plan.backfills:
        follower.follow_backfill(sweep_benchmark, backfill_id)
    return plan, runs


def _metrics_run(
    sweep_benchmark: SweepBenchmark, instance: dg.DagsterInstance, factory: RunFactory, follower: RunFollower
) -> list[dg.DagsterRun]:
    """A run of the metrics (and what follows them) when they are older than the newest result and
    nothing is in flight to bring them up to date; never an evaluation (a task that ended in error is
    not run again by the same command)."""
    with sweep_lock(sweep_benchmark):
        plan = plan_runs(sweep_benchmark, instance, list(sweep_benchmark.task_keys))
        if not plan.metrics_due:
            return []
        run = factory.create(sweep_benchmark, {}, _metrics_assets(sweep_benchmark))
    follower.follow(sweep_benchmark, run.run_id)
    return [run]


def _say_followed(launch: SweepLaunch) -> None:
    """Name what this command waits for that others launched: a wait says what it waits for."""
    theirs = [f"backfill {backfill_id}" for backfill_id in launch.backfills]
    theirs += [f"run {run_id}" for run_id in launch.followed]
    if theirs:
        print(
            f"agentcompass: waiting for what already evaluates this sweep: {', '.join(theirs)} (follow them in the UI)",
            file=sys.stderr,
        )


def _check_run_queue(instance: dg.DagsterInstance, home: Path) -> None:
    """--submit needs a run queue and a dagster-daemon draining it; a daemon just started gets a moment."""
    if type(instance.run_coordinator).__name__ != "QueuedRunCoordinator":
        raise UserError(
            f"--submit: the instance in {home} has no run queue; configure run_coordinator: "
            "QueuedRunCoordinator in its dagster.yaml and run dagster-daemon, or run without --submit"
        )
    deadline = time.monotonic() + DAEMON_WAIT_S
    while not daemon_alive(instance, QUEUE_DAEMON):
        if time.monotonic() > deadline:
            raise UserError(
                f"--submit: no dagster-daemon is running for the instance in {home} (none reported in "
                f"{DAEMON_WAIT_S:.0f} s); start one (`agentcompass ui` or `dagster-daemon run`) or run "
                "without --submit"
            )
        time.sleep(POLL_S)


def _submitted(runs: list[dg.DagsterRun], follower: RunFollower) -> None:
    """Hand the runs to the run queue and follow them (the follower stops the wait when no daemon is
    there to launch them)."""
    for run in runs:
        # Dagster types the workspace as required; the queued run coordinator never reads it.
        follower.instance.submit_run(run.run_id, workspace=None)  # type: ignore[arg-type]
    while follower.poll():
        time.sleep(POLL_S)


def _execute(workers: RunWorkers, runs: list[dg.DagsterRun], follower: RunFollower, *, sweep: SweepConfig) -> None:
    # A board shows progress a few times a second; without one, the instance is polled once a second
    # (each poll is queries: ~3 ms of CPU a run), and a worker's exit ends the wait at once.
    interval = POLL_S if follower.board is not None else QUIET_POLL_S
    with Interrupts().counted() as interrupts:
        # Submitted with the interrupts counted: a Ctrl-C while the first workers start stops them too.
        workers.submit(runs)
        while not interrupts.count:
            # The follower first: it fails a run whose worker is gone, which frees the worker's place.
            following = follower.poll()
            workers.poll()
            if not (workers.busy or following):
                return
            workers.pause(interval, lambda: interrupts.count > 0)
        # The first Ctrl-C (or SIGTERM): every run cancels its tasks, closes their environments and
        # keeps what finished; a second one kills the workers at once.
        print("agentcompass: stopping: cleaning up (press Ctrl-C again to exit at once)", file=sys.stderr)
        workers.interrupt()
        if not workers.wait(sweep.execution.limits.cleanup_grace_seconds + STOP_SLACK_S, lambda: interrupts.count > 1):
            # Interrupted again (or the cleanup ran past its grace), a worker marks its runs cancelled and
            # exits without waiting for the cleanup; one that cannot even do that in time is killed.
            workers.interrupt()
            if not workers.wait(LAST_WORD_S):
                workers.interrupt(signal.SIGKILL)
    raise KeyboardInterrupt
