"""Following what evaluates a sweep's partitions through the instance, whoever executes it (this CLI's
workers, the daemon, another CLI, a backfill from the UI): which runs and backfills have ended, and, per
benchmark x model, how many tasks finished or ended in error, from the events the runs record as each
task ends.

Every wait here ends: a followed run whose worker is gone is failed as Dagster's run monitoring fails
it (the launcher's own health check), whoever launched it; a run queued or a backfill in progress with
no dagster-daemon to launch it stops the wait, saying so."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import dagster as dg

from agentcompass_dagster.defs.dagster_internals import BACKFILL_NOT_DONE, RunLauncher, WorkerStatus
from agentcompass_dagster.defs.partitions import split_key
from agentcompass_dagster.defs.planning import fail_run
from agentcompass_dagster.defs.sweep import SweepBenchmark
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.launcher.progress import ProgressBoard

EVENTS = {dg.DagsterEventType.ASSET_MATERIALIZATION, dg.DagsterEventType.ASSET_OBSERVATION}
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
DEAD = (WorkerStatus.FAILED, WorkerStatus.NOT_FOUND)
BACKFILL_TAG = "dagster/backfill"
BACKFILL_FAILED = {"FAILED", "CANCELED", "COMPLETED_FAILED"}
# The daemons that launch what is queued and what a backfill asks for.
QUEUE_DAEMON = "QUEUED_RUN_COORDINATOR"
BACKFILL_DAEMON = "BACKFILL"
# A daemon heartbeats every 30 s (Dagster's interval); one silent for two intervals is gone, and a wait
# that needs a daemon goes on this long with none alive (time for one to be started).
HEARTBEAT_S = 60.0
# How long `--submit` waits for a daemon's first heartbeat (one just started reports within seconds).
DAEMON_WAIT_S = 10.0
POLL_DAEMON_S = 5.0


def daemon_alive(instance: dg.DagsterInstance, daemon_type: str) -> bool:
    """Whether a dagster-daemon of this type (QUEUED_RUN_COORDINATOR, BACKFILL, ...) heartbeat lately."""
    heartbeat = instance.get_daemon_heartbeats().get(daemon_type)
    return heartbeat is not None and time.time() - heartbeat.timestamp < HEARTBEAT_S


@dataclass
class Followed:
    sweep_benchmark: SweepBenchmark
    run_id: str
    cursor: str | None = None
    status: dg.DagsterRunStatus | None = None


@dataclass
class FollowedBackfill:
    sweep_benchmark: SweepBenchmark
    backfill_id: str
    status: str | None = None


@dataclass
class RunFollower:
    instance: dg.DagsterInstance
    launcher: RunLauncher
    board: ProgressBoard | None = None
    runs: list[Followed] = field(default_factory=list)
    backfills: list[FollowedBackfill] = field(default_factory=list)
    done: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    expected: Counter[str] = field(default_factory=Counter)
    # Followed runs failed here because their worker was gone, with why.
    reaped: dict[str, str] = field(default_factory=dict)
    # When a daemon this wait needs was last seen healthy, by daemon type.
    _daemon_seen: dict[str, float] = field(default_factory=dict)

    def follow(self, sweep_benchmark: SweepBenchmark, run_id: str) -> None:
        if all(followed.run_id != run_id for followed in self.runs):
            self.runs.append(Followed(sweep_benchmark, run_id))

    def follow_backfill(self, sweep_benchmark: SweepBenchmark, backfill_id: str) -> None:
        self.backfills.append(FollowedBackfill(sweep_benchmark, backfill_id))

    def expect(self, sweep_benchmark: SweepBenchmark, missing: set[str]) -> None:
        """Tasks the runs will evaluate, per bar (benchmark/model)."""
        for key in missing:
            self.expected[self._bar(sweep_benchmark, split_key(key)[0])] += 1
        if self.board is not None:
            for name in sorted(self.expected):
                self.board.add(name, self.expected[name])

    @staticmethod
    def _bar(sweep_benchmark: SweepBenchmark, model_key: str) -> str:
        return f"{sweep_benchmark.benchmark.id}/{sweep_benchmark.model_keys.get(model_key, model_key)}"

    def poll(self) -> bool:
        """Read what happened since the last poll; True while a followed run or backfill has not ended."""
        backfilling = self._poll_backfills()
        flying: Counter[str] = Counter()
        queued = False
        for followed in self.runs:
            if followed.status in FINISHED:
                continue
            run = self.instance.get_run_by_id(followed.run_id)
            if run is not None and not run.is_finished:
                run = self._judge(followed.sweep_benchmark, run)
            followed.status = run.status if run is not None else dg.DagsterRunStatus.FAILURE
            if self.board is not None:
                # Only a board shows them; reading every task's event costs the launcher ~1 ms a task.
                self._read_events(followed)
            if followed.status not in FINISHED:
                flying[followed.sweep_benchmark.benchmark.id] += 1
                queued |= followed.status == dg.DagsterRunStatus.QUEUED
        if queued:
            self._need_daemon(QUEUE_DAEMON, "runs of this sweep are queued")
        if self.board is not None:
            for name in self.expected:
                self.board.update(
                    name, done=self.done[name], running=flying[name.split("/")[0]], errors=self.errors[name]
                )
        return bool(flying) or backfilling

    def _judge(self, sweep_benchmark: SweepBenchmark, run: dg.DagsterRun) -> dg.DagsterRun:
        """The run as it stands, failed first when its worker is gone (the judgement Dagster's run
        monitoring makes with the same launcher's health check)."""
        if run.status == dg.DagsterRunStatus.QUEUED or not self.launcher.supports_check_run_worker_health:
            return run
        health = self.launcher.check_run_worker_health(run)
        if health.status not in DEAD:
            return run
        why = health.msg or health.status.value
        fail_run(sweep_benchmark, self.instance, run, why)
        self.reaped[run.run_id] = why
        return self.instance.get_run_by_id(run.run_id) or run

    def _poll_backfills(self) -> bool:
        """Follow each backfill's runs as they appear; True while one is in progress."""
        busy = False
        for followed in self.backfills:
            if followed.status is not None and followed.status not in {status.value for status in BACKFILL_NOT_DONE}:
                continue
            backfill = self.instance.get_backfill(followed.backfill_id)
            followed.status = backfill.status.value if backfill is not None else "CANCELED"
            for run in self.instance.get_runs(dg.RunsFilter(tags={BACKFILL_TAG: followed.backfill_id})):
                self.follow(followed.sweep_benchmark, run.run_id)
            if backfill is not None and backfill.status in BACKFILL_NOT_DONE:
                busy = True
        if busy:
            self._need_daemon(BACKFILL_DAEMON, "a backfill of this sweep is in progress")
        return busy

    def _need_daemon(self, daemon_type: str, what: str) -> None:
        """Stop the wait when the daemon that would move it on has not reported for HEARTBEAT_S."""
        now = time.monotonic()
        seen = self._daemon_seen.setdefault(daemon_type, now)
        if now - seen < POLL_DAEMON_S:
            return
        if daemon_alive(self.instance, daemon_type):
            self._daemon_seen[daemon_type] = now
        elif now - seen > HEARTBEAT_S:
            raise UserError(
                f"{what}, and no dagster-daemon has reported for {HEARTBEAT_S:.0f} s to launch them; "
                "start one (`agentcompass ui` or `dagster-daemon run`) and run again, or cancel them in "
                "the UI"
            )

    def unfinished(self) -> list[str]:
        """What this follower still waits for, to name it."""
        return [
            f"backfill {b.backfill_id}" for b in self.backfills if b.status in {s.value for s in BACKFILL_NOT_DONE}
        ] + [f"run {r.run_id}" for r in self.runs if r.status not in FINISHED]

    def failures(self) -> list[str]:
        """Each followed run that did not succeed, and each backfill that did not complete."""
        failed = [
            f"{r.sweep_benchmark.job_name} run {r.run_id}: {r.status.value if r.status else 'unknown'}"
            + (f" ({self.reaped[r.run_id]})" if r.run_id in self.reaped else "")
            for r in self.runs
            if r.status != dg.DagsterRunStatus.SUCCESS
        ]
        return failed + [f"backfill {b.backfill_id}: {b.status}" for b in self.backfills if b.status in BACKFILL_FAILED]

    def _read_events(self, followed: Followed) -> None:
        attempts = followed.sweep_benchmark.key("attempts")
        while True:
            connection = self.instance.get_records_for_run(
                followed.run_id, cursor=followed.cursor, of_type=EVENTS, limit=1000
            )
            for record in connection.records:
                event = record.event_log_entry.dagster_event
                if event is None or event.asset_key != attempts or event.partition is None:
                    continue
                name = self._bar(followed.sweep_benchmark, split_key(event.partition)[0])
                self.done[name] += 1
                if event.event_type == dg.DagsterEventType.ASSET_OBSERVATION:
                    self.errors[name] += 1
            followed.cursor = connection.cursor
            if not connection.has_more:
                return
