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
from pathlib import Path

import dagster as dg

from agentcompass_dagster.config import SweepConfig, load_sweep
from agentcompass_dagster.defs.code_location import set_sweep_files
from agentcompass_dagster.defs.coordination import sweep_lock
from agentcompass_dagster.defs.dagster_internals import daemon_healthy
from agentcompass_dagster.defs.definitions import sweep_definitions
from agentcompass_dagster.defs.instance import PG_URL_ENV, dagster_home, ensure_dagster_home, postgres_url
from agentcompass_dagster.defs.jobs import mounted, same_path_mounts, shared_paths
from agentcompass_dagster.defs.planning import LaunchPlan, fail_run, plan_benchmark
from agentcompass_dagster.defs.sweep import SweepBenchmark, sweep_benchmarks
from agentcompass_dagster.errors import UserError
from agentcompass_dagster.launcher.follow import RunFollower
from agentcompass_dagster.launcher.runs import RunFactory
from agentcompass_dagster.launcher.workers import RunWorkers
from agentcompass_dagster.progress import ProgressBoard
from agentcompass_dagster.runtime.execution.budget import budget_status
from agentcompass_dagster.runtime.execution.interrupts import Interrupts
from agentcompass_dagster.runtime.execution.orchestrator import Orchestrator
from agentcompass_dagster.runtime.store.layout import SUMMARY
from agentcompass_dagster.runtime.store.run_records import ReuseSource
from agentcompass_dagster.runtime.store.records import BudgetStatus

POLL_S = 0.2
QUIET_POLL_S = 1.0
STOP_SLACK_S = 10.0
# How long a worker interrupted twice has to mark its runs cancelled and exit before it is killed.
LAST_WORD_S = 5.0
QUEUE_DAEMON = "QUEUED_RUN_COORDINATOR"
DAEMON_WAIT_S = 10.0


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
    failed: list[str] = field(default_factory=list)
    newest: dict[tuple[str, str], ReuseSource] = field(default_factory=dict)
    # The sweep's budget when the runs ended; partitions not launched because it was spent when planning,
    # and partitions still without a result at the end (what a raised budget would run).
    budget: BudgetStatus | None = None
    budget_refused: int = 0
    without_result: int = 0


def preflight(sweep_benchmark_list: list[SweepBenchmark]) -> None:
    """Every user mistake (plugins, plans, task ids, results dir) stops here, before Dagster runs. The
    plugins and tasks prepared here serve the whole launch."""
    output = sweep_benchmark_list[0].sweep.output
    for field_name in ("run_id", "reuse_run_id"):
        value = getattr(output, field_name)
        if value:
            raise UserError(f"output.{field_name}={value!r}: a sweep run through Dagster names its runs and reuses "
                            "the newest itself; remove it or run with --direct")
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
            raise UserError(f"{sweep_file}: dagster.executor='k8s': step pods share no DAGSTER_HOME; set "
                            f"{PG_URL_ENV} to a PostgreSQL database that every pod reaches")
        field, where = "dagster.k8s.volume_mounts", "the step pods"
        mounts = [Path(str(m["mount_path"])) for m in deployment.k8s.volume_mounts if m.get("mount_path")]
    elif deployment.executor == "docker" and deployment.docker is not None and not engine.startswith("unix://"):
        field, where = "dagster.docker.container_kwargs.volumes", f"the step containers of DOCKER_HOST={engine!r} (not on this host)"
        mounts = same_path_mounts(deployment.docker.container_kwargs.get("volumes"))
    else:
        return
    for what, path in shared_paths(sweep_benchmark).items():
        if not mounted(path, mounts):
            raise UserError(f"{sweep_file}: {field}: {what} {path} would not be shared with {where}; declare a "
                            f"volume they share with this host, mounted at {path}")


def location_results_dir(sweep: SweepConfig, sweep_file: Path) -> Path | None:
    """The results directory the code location runs the sweep's file into, when the command line changed
    it (--results-dir). The location gets it through its environment rather than a copy of the sweep
    written beside the results: such a copy holds the environment's env values, which would sit there in
    plain text, or, redacted like every file written there, run as ``[REDACTED]`` (#36)."""
    declared = load_sweep(sweep_file).output.results_dir
    if Path(declared).resolve() == Path(sweep.output.results_dir).resolve():
        return None
    return Path(sweep.output.results_dir).resolve()


def launch_sweep(sweep: SweepConfig, sweep_file: Path, *, submit: bool = False, board: ProgressBoard | None = None,
                 home: Path | None = None, fresh: bool = False) -> SweepLaunch:
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
        follower = RunFollower(instance, board)
        created: list[dg.DagsterRun] = []
        for sweep_benchmark in sweep_benchmark_list:
            plan, runs = _plan(sweep_benchmark, instance, factory, follower, fresh)
            created += runs
            launch.followed += plan.in_flight
            if plan.budget_spent:
                launch.budget_refused += len(plan.missing)
            else:
                launch.missing += len(plan.missing)
            launch.metrics_runs += plan.metrics_due
        launch.launched = [run.run_id for run in created]
        if submit:
            for run in created:
                instance.submit_run(run.run_id, workspace=None)  # type: ignore[arg-type]
            _wait(instance, follower)
        else:
            _execute(instance, created, follower, sweep)
        for followed in follower.runs:
            if followed.status != dg.DagsterRunStatus.SUCCESS:
                status = followed.status.value if followed.status else "unknown"
                launch.failed.append(f"{followed.sweep_benchmark.job_name} run {followed.run_id}: {status}")
        for sweep_benchmark in sweep_benchmark_list:
            launch.newest.update({(sweep_benchmark.benchmark.id, model): run for model,
                                  run in sweep_benchmark.newest_runs(SUMMARY).items()})
        budget = sweep_benchmark_list[0].budget
        if budget is not None:
            launch.budget = budget_status(budget)
            launch.without_result = sum(_without_result(sweep_benchmark, instance)
                                        for sweep_benchmark in sweep_benchmark_list)
    return launch


def _without_result(sweep_benchmark: SweepBenchmark, instance: dg.DagsterInstance) -> int:
    materialized = instance.get_materialized_partitions(sweep_benchmark.key("attempts"))
    wanted = {f"{model}|{task}" for model in sweep_benchmark.model_keys for task in sweep_benchmark.task_keys}
    return len(wanted - sweep_benchmark.with_result(wanted & set(materialized)))


def _plan(sweep_benchmark: SweepBenchmark, instance: dg.DagsterInstance, factory: RunFactory,
          follower: RunFollower, fresh: bool) -> tuple[LaunchPlan, list[dg.DagsterRun]]:
    """Create the runs a benchmark needs (a fresh round of it with ``fresh``); returns its plan (with the
    runs in flight launched by others) and them."""
    with sweep_lock(sweep_benchmark):
        plan = plan_benchmark(sweep_benchmark, instance, list(sweep_benchmark.task_keys), fresh)
        # Created under the lock: the next planner sees them in flight.
        runs = [factory.create(sweep_benchmark, plan.run_tags(key_range)) for key_range in plan.ranges]
        if plan.metrics_due:
            runs.append(factory.create(sweep_benchmark, {}, {sweep_benchmark.key("metrics"),
                                                             sweep_benchmark.key("comparison")}))
    follower.expect(sweep_benchmark, set() if plan.budget_spent else plan.missing)
    for run_id in [run.run_id for run in runs] + plan.in_flight:
        follower.follow(sweep_benchmark, run_id)
    return plan, runs


def _check_run_queue(instance: dg.DagsterInstance, home: Path) -> None:
    """--submit needs a run queue and a dagster-daemon draining it; a daemon just started gets a moment."""
    if type(instance.run_coordinator).__name__ != "QueuedRunCoordinator":
        raise UserError(f"--submit: the instance in {home} has no run queue; configure run_coordinator: "
                        "QueuedRunCoordinator in its dagster.yaml and run dagster-daemon, or run without --submit")
    deadline = time.monotonic() + DAEMON_WAIT_S
    while not daemon_healthy(instance, QUEUE_DAEMON):
        if time.monotonic() > deadline:
            raise UserError(f"--submit: no dagster-daemon is running for the instance in {home} (none reported in "
                            f"{DAEMON_WAIT_S:.0f} s); start one (`agentcompass ui` or `dagster-daemon run`) or run "
                            "without --submit")
        time.sleep(POLL_S)


def _wait(instance: dg.DagsterInstance, follower: RunFollower) -> None:
    """Follow submitted runs; stop, saying why, when the daemon that should launch them is gone."""
    checked = time.monotonic()
    while follower.poll():
        if time.monotonic() - checked > DAEMON_WAIT_S:
            checked = time.monotonic()
            if not daemon_healthy(instance, QUEUE_DAEMON):
                raise UserError("--submit: the dagster-daemon stopped reporting; the runs stay queued until one "
                                "runs again (follow them in the UI, or run `agentcompass run` again)")
        time.sleep(POLL_S)


def _execute(instance: dg.DagsterInstance, runs: list[dg.DagsterRun], follower: RunFollower,
             sweep: SweepConfig) -> None:
    workers = RunWorkers(instance, sweep.dagster.max_concurrent_runs)
    # A board shows progress a few times a second; without one, the instance is polled once a second
    # (each poll is queries: ~3 ms of CPU a run), and a worker's exit ends the wait at once.
    interval = POLL_S if follower.board is not None else QUIET_POLL_S
    with Interrupts().counted() as interrupts:
        # Submitted with the interrupts counted: a Ctrl-C while the first workers start stops them too.
        workers.submit(runs)
        while not interrupts.count:
            _fail_dead(instance, workers, follower)
            if not (workers.busy | follower.poll()):
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


def _fail_dead(instance: dg.DagsterInstance, workers: RunWorkers, follower: RunFollower) -> None:
    """A launched run whose worker is gone (it could not load the job, it was killed) is failed with what
    the launcher says of it, and what it held is released (a killed worker's pool slot wedged every
    later run of the sweep): what Dagster's run monitoring does when a daemon runs, and more."""
    sweeps = {followed.run_id: followed.sweep_benchmark for followed in follower.runs}
    for run_id, why in workers.poll().items():
        run = instance.get_run_by_id(run_id)
        if run is not None:
            fail_run(sweeps[run_id], instance, run, why)
        workers.forget(run_id)
