"""Following runs of a sweep through the instance, whoever executes them (this CLI's workers, the
daemon, another CLI): which have ended, and, per benchmark x model, how many tasks finished or ended
in error, from the events the runs record as each task ends."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import dagster as dg

from agentcompass_dagster.defs.partitions import split_key
from agentcompass_dagster.defs.sweep import SweepBenchmark
from agentcompass_dagster.progress import ProgressBoard

EVENTS = {dg.DagsterEventType.ASSET_MATERIALIZATION, dg.DagsterEventType.ASSET_OBSERVATION}
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


@dataclass
class Followed:
    sweep_benchmark: SweepBenchmark
    run_id: str
    cursor: str | None = None
    status: dg.DagsterRunStatus | None = None


@dataclass
class RunFollower:
    instance: dg.DagsterInstance
    board: ProgressBoard | None = None
    runs: list[Followed] = field(default_factory=list)
    done: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    expected: Counter[str] = field(default_factory=Counter)

    def follow(self, sweep_benchmark: SweepBenchmark, run_id: str) -> None:
        self.runs.append(Followed(sweep_benchmark, run_id))

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
        """Read what happened since the last poll; True while a followed run has not ended."""
        flying: Counter[str] = Counter()
        for followed in self.runs:
            if followed.status in FINISHED:
                continue
            run = self.instance.get_run_by_id(followed.run_id)
            followed.status = run.status if run is not None else dg.DagsterRunStatus.FAILURE
            if self.board is not None:
                # Only a board shows them; reading every task's event costs the launcher ~1 ms a task.
                self._read_events(followed)
            if followed.status not in FINISHED:
                flying[followed.sweep_benchmark.benchmark.id] += 1
        if self.board is not None:
            for name in self.expected:
                self.board.update(name, done=self.done[name], running=flying[name.split("/")[0]],
                                  errors=self.errors[name])
        return bool(flying)

    def _read_events(self, followed: Followed) -> None:
        attempts = followed.sweep_benchmark.key("attempts")
        while True:
            connection = self.instance.get_records_for_run(followed.run_id, cursor=followed.cursor, of_type=EVENTS,
                                                           limit=1000)
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
