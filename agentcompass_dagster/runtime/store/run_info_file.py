"""run_info.json and params.json of a run directory: what the run is (its request, selected tasks,
reuse sources, Dagster run, budget, plans) and how it ended. Each change rewrites run_info.json
atomically and redacted, but the plans, which reach disk with the terminal status."""

from __future__ import annotations

import threading
from pathlib import Path

from agentcompass_dagster.contracts.records import NotLoaded, utcnow
from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.runtime.store.atomic import atomic_write_bytes, atomic_write_json, to_json_bytes
from agentcompass_dagster.runtime.store.layout import OWNER, PARAMS, RUN_INFO
from agentcompass_dagster.runtime.store.outcomes import BudgetOutcome, PersistedPlan, TerminalStatus
from agentcompass_dagster.runtime.store.processes import ProcessId
from agentcompass_dagster.runtime.store.redact import redact, redact_text
from agentcompass_dagster.runtime.store.run_records import ReusedFrom, ReuseSource, RunInfo, RunParams


class RunInfoFile:
    """run_info.json and params.json of one run directory (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.info: RunInfo | None = None
        # task -> its plan's digest when attempt 1 is its only recorded attempt (one shared string, not a
        # dict per task: 18 MB at 100,000 tasks), else attempt -> digest; written out as run_info's
        # task_plans.
        self._plan_refs: dict[str, str | dict[str, str]] = {}
        self._lock = threading.Lock()

    def write(
        self,
        request: EvalRequest,
        selected: list[str],
        paths: dict[str, str],
        not_loaded: list[NotLoaded] | None = None,
    ) -> None:
        self.info = RunInfo(
            run_id=self.path.name,
            request_name=request.name,
            request=request.to_task_payload(),
            selected_tasks=selected,
            paths=paths,
            not_loaded=not_loaded or [],
        )
        self._flush()
        atomic_write_bytes(self.path / OWNER, str(ProcessId.this()).encode())

    def write_params(self, request: EvalRequest) -> None:
        atomic_write_json(self.path / PARAMS, RunParams.of(request, self._require().started_at))

    def set_reused_from(self, source: ReuseSource, task_ids: list[str], attempts: int = 0) -> None:
        """R-REUSE-5: record the source (id, path, start), which tasks came from it and how many
        unfinished tasks' attempts (finished-attempt records, agent attempt logs) it handed on."""
        with self._lock:
            self._require().reused_from = ReusedFrom(
                run_id=source.run_id,
                path=source.path,
                started_at=source.started_at,
                tasks=len(task_ids),
                task_ids=task_ids,
                attempts=attempts,
            )
        self._flush()

    def set_merged_from(self, sources: list[ReuseSource], task_ids: dict[str, list[str]]) -> None:
        with self._lock:
            self._require().merged_from = [
                ReusedFrom(
                    run_id=source.run_id,
                    path=source.path,
                    tasks=len(task_ids[source.run_id]),
                    task_ids=task_ids[source.run_id],
                )
                for source in sources
            ]
        self._flush()

    def set_budget(self, outcome: BudgetOutcome) -> None:
        with self._lock:
            self._require().budget = outcome
        self._flush()

    def set_dagster_run_id(self, run_id: str) -> None:
        with self._lock:
            self._require().dagster_run_id = run_id
        self._flush()

    def keep_plan(self, task_id: str, attempt: int, plan: PersistedPlan) -> None:
        """Keep the plan's allow-listed view for run_info.json. It reaches disk with the terminal status
        (rewriting an O(N) run_info.json per task would make a sweep quadratic); each detail carries its
        own plan as well, so a crash loses none."""
        with self._lock:
            info = self._require()
            if plan.digest not in info.plans:
                info.plans[plan.digest] = plan.view
            known = self._plan_refs.get(task_id)
            if known is None and attempt == 1:
                self._plan_refs[task_id] = plan.digest
            else:
                by_attempt = {"1": known} if isinstance(known, str) else (known or {})
                by_attempt[str(attempt)] = plan.digest
                self._plan_refs[task_id] = by_attempt

    def write_terminal_status(self, status: TerminalStatus, error: str | None = None) -> None:
        with self._lock:
            info = self._require()
            info.status = status
            info.error = error
            info.finished_at = utcnow()
        self._flush()
        (self.path / OWNER).unlink(missing_ok=True)

    def stop(self, status: TerminalStatus, error: str) -> bool:
        """The terminal status of a run that ended before it finished (cancelled, timed out), unless it
        has one already: a finalization that completed meanwhile keeps its own. Safe from any thread."""
        with self._lock:
            if self.info is None or self.info.status != "running":
                return False
            self.info.status, self.info.error, self.info.finished_at = status, error, utcnow()
        self._flush()
        (self.path / OWNER).unlink(missing_ok=True)
        return True

    def _require(self) -> RunInfo:
        if self.info is None:
            raise RuntimeError("run_info.json has not been written yet")
        return self.info

    def _flush(self) -> None:
        with self._lock:
            info = self._require()
            data = redact(info.model_dump(mode="json", exclude={"task_plans"}))
            data["task_plans"] = self._task_plans(info.task_plans)
            atomic_write_bytes(self.path / RUN_INFO, to_json_bytes(data))

    def _task_plans(self, loaded: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        """run_info's task_plans: what the directory held when read back (``loaded``) with this run's plans.
        Kept out of the dump and its redaction, which would copy a dict per task twice (30 MB at 100,000
        tasks): digests need no redaction, each id is redacted on its own, and the tasks whose only
        attempt is attempt 1 share one ``{"1": digest}`` per digest."""
        shared: dict[str, dict[str, str]] = {}
        plans = {redact_text(task_id): refs for task_id, refs in loaded.items() if task_id not in self._plan_refs}
        for task_id, refs in self._plan_refs.items():
            by_attempt = shared.setdefault(refs, {"1": refs}) if isinstance(refs, str) else refs
            plans[redact_text(task_id)] = {**loaded[task_id], **by_attempt} if task_id in loaded else by_attempt
        return plans
