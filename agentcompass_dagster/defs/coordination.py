"""What keeps two runs of one sweep from evaluating the same task at once, whoever launched them.

Both live in the results directory, which every process, container and host that runs the sweep
shares (its results must land there): a sweep lock (``flock``, released by the kernel when its holder
dies) around deciding what to run, and one claim file per Dagster run listing the partitions it is
evaluating. A run claims, under the lock, the partitions of its range that neither have a result in its
results directory (a fresh round's run evaluates those again) nor are claimed by a live run; it
evaluates only those and removes its claim when it ends. A claim of a run that has ended, or whose
worker process is gone, is void, and the next look at the claims (under the lock) removes it.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import dagster as dg
import sqlalchemy.exc
from agentcompass_dagster.defs.dagster_internals import DagsterInvalidPropertyError
from pydantic import BaseModel

from agentcompass_dagster.defs.run_owners import gone_owner, record_owner, run_owner
from agentcompass_dagster.defs.sweep import SweepBenchmark
from agentcompass_dagster.runtime.store.atomic import atomic_write_bytes
from agentcompass_dagster.runtime.store.layout import CLAIMS_DIR, LOCK_FILE
from agentcompass_dagster.runtime.store.processes import ProcessId


@contextmanager
def sweep_lock(sweep_benchmark: SweepBenchmark) -> Iterator[None]:
    """Exclusive, across processes and containers sharing the results directory, for one sweep."""
    directory = sweep_benchmark.benchmark_dir.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class Claim(BaseModel):
    run_id: str
    worker: str
    partitions: list[str]


def _claims_dir(sweep_benchmark: SweepBenchmark) -> Path:
    return sweep_benchmark.benchmark_dir / CLAIMS_DIR


def record_worker(context: dg.AssetExecutionContext) -> None:
    """Name this process as the run's worker when no launcher did (a run launched by a launcher of
    another kind), so a launcher on this machine can tell a run whose worker was killed from one still
    working. Only where steps execute in the run worker: a step of the multiprocess, docker or k8s
    executor is a process of its own that ends with its step. The run's own job says which: the asset
    job of a backfill may run its steps in processes whatever the sweep declares."""
    try:
        run = context.run
    except DagsterInvalidPropertyError:  # invoked directly (build_asset_context): no run to name
        return
    if context.job_def.executor_def.name != dg.in_process_executor.name:
        return
    owner = run_owner(context.instance, run.run_id)
    if owner is None or owner.role != "worker":
        record_owner(context.instance, run.run_id, "worker", ProcessId.this())


def run_is_live(instance: dg.DagsterInstance, run_id: str) -> bool:
    run = instance.get_run_by_id(run_id)
    return run is not None and gone_owner(instance, run) is None and not run.is_finished


def live_claims(
    sweep_benchmark: SweepBenchmark, instance: dg.DagsterInstance, exclude: str | None = None
) -> dict[str, set[str]]:
    """The partitions claimed by each run still evaluating, by run id (call under the sweep lock). The
    claim file of a run that has ended, or whose worker is gone, is removed: nothing else would (the run
    that wrote it died before dropping it, or was failed by someone else), and `.claims/` would grow."""
    claimed: dict[str, set[str]] = {}
    directory = _claims_dir(sweep_benchmark)
    for name in os.listdir(directory) if directory.is_dir() else []:
        if not name.endswith(".json") or name.startswith("."):
            continue
        try:
            claim = Claim.model_validate_json((directory / name).read_bytes())
        except (OSError, ValueError):
            continue
        if claim.run_id == exclude:
            continue
        worker = ProcessId.parse(claim.worker)
        if (worker is None or worker.alive()) and run_is_live(instance, claim.run_id):
            claimed.setdefault(claim.run_id, set()).update(claim.partitions)
        else:
            (directory / name).unlink(missing_ok=True)
    return claimed


def claimed_partitions(claims: dict[str, set[str]]) -> set[str]:
    return set().union(*claims.values())


def write_claim(sweep_benchmark: SweepBenchmark, run_id: str, partitions: list[str]) -> None:
    directory = _claims_dir(sweep_benchmark)
    directory.mkdir(parents=True, exist_ok=True)
    claim = Claim(run_id=run_id, worker=str(ProcessId.this()), partitions=partitions)
    # Not atomic_write_json: its redaction would rewrite a partition key holding a registered secret (a
    # task id with an env value in it), and the claim would no longer hold that partition (#36).
    atomic_write_bytes(directory / f"{run_id}.json", claim.model_dump_json().encode(), fsync=False)


def drop_claim(sweep_benchmark: SweepBenchmark, run_id: str) -> None:
    (_claims_dir(sweep_benchmark) / f"{run_id}.json").unlink(missing_ok=True)


def claim_partitions(
    sweep_benchmark: SweepBenchmark, instance: dg.DagsterInstance, run_id: str, wanted: list[str], fresh: bool = False
) -> list[str]:
    """Of ``wanted``, the partitions this run may evaluate: not claimed by a live run, and, unless the run
    is ``fresh``, without a result in its results directory. They are claimed for this run before the
    lock is released."""
    with sweep_lock(sweep_benchmark):
        done = (
            set()
            if fresh
            else sweep_benchmark.with_result(
                set(instance.get_materialized_partitions(sweep_benchmark.key("attempts"))) & set(wanted)
            )
        )
        busy = claimed_partitions(live_claims(sweep_benchmark, instance, exclude=run_id))
        mine = [key for key in wanted if key not in done and key not in busy]
        write_claim(sweep_benchmark, run_id, mine)
    return mine


def _set_limit(instance: dg.DagsterInstance, key: str, limit: int) -> None:
    storage = instance.event_log_storage
    for tries_left in (2, 1, 0):
        if storage.get_concurrency_info(key).slot_count == limit:
            return
        try:
            storage.set_concurrency_slots(key, limit)
            return
        except sqlalchemy.exc.IntegrityError:
            # Two processes set a new pool's limit at once: Dagster's upsert inserts in both and one
            # loses; the row is there now, so the next try updates it.
            if not tries_left:
                raise


def ensure_pool_limits(sweep_benchmark: SweepBenchmark, instance: dg.DagsterInstance) -> None:
    """The sweep's pool allows max_concurrent_runs evaluating steps at once, across every run."""
    if instance.event_log_storage.supports_global_concurrency_limits:
        _set_limit(instance, sweep_benchmark.pool, sweep_benchmark.sweep.dagster.max_concurrent_runs)


class InstancePermits:
    """Environment capacity (``capacity: N``) held in the instance's concurrency slots, one pool per
    environment: it holds across runs, processes and hosts that share the instance."""

    POLL_S = (0.05, 1.0)

    def __init__(self, instance: dg.DagsterInstance, run_id: str, step_key: str) -> None:
        self.instance = instance
        self.run_id = run_id
        self.step_key = step_key
        self._limited: set[str] = set()

    @asynccontextmanager
    async def hold(self, environment_id: str, permits: int) -> AsyncIterator[None]:
        storage = self.instance.event_log_storage
        if permits <= 0 or not storage.supports_global_concurrency_limits:
            yield
            return
        pool = f"agentcompass/environment/{environment_id}"
        if pool not in self._limited:
            await asyncio.to_thread(_set_limit, self.instance, pool, permits)
            self._limited.add(pool)
        # One claim per attempt try: a step runs many attempts at once.
        claimer = f"{self.step_key}#{secrets.token_hex(6)}"
        delay, longest = self.POLL_S
        try:
            while not (await asyncio.to_thread(storage.claim_concurrency_slot, pool, self.run_id, claimer)).is_claimed:
                await asyncio.sleep(delay)
                delay = min(2 * delay, longest)
            yield
        finally:
            # Also when cancelled while waiting: the queued claim must not keep its place.
            await asyncio.shield(asyncio.to_thread(storage.free_concurrency_slot_for_step, self.run_id, claimer))
