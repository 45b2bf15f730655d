"""The generated instance's run launcher (dagster.yaml ``run_launcher:``): each run in a run worker
process of its own on this host, which loads the run's job from its code origin and executes it, as
the command Dagster's launchers give their workers (``dagster api execute_run``) does (defs/run_worker.py).

Dagster's DefaultRunLauncher does the same but only through a running gRPC code server, which
`agentcompass run` would have to start for every launch (seconds of CPU for nothing it needs: the run
worker loads the code location itself). This launcher serves every client alike: `agentcompass run`,
the daemon draining the run queue (runs from the UI, schedules, sensors, backfills), Re-execute. It
supports Dagster's run monitoring: the daemon asks it whether a run's worker is alive, and fails the run
when it is gone; `terminate` (the UI's Terminate) marks the run canceling and interrupts the worker, which
cancels its tasks and ends the run CANCELED. Worker output goes to DAGSTER_HOME/run-workers/RUN_ID.log.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg

from agentcompass_dagster.defs.dagster_internals import (
    CheckRunHealthResult,
    ConfigurableClass,
    ConfigurableClassData,
    ExecuteRunArgs,
    LaunchRunContext,
    RunLauncher,
    WorkerStatus,
)
from agentcompass_dagster.defs.run_owners import gone_owner, record_owner, run_worker
from agentcompass_dagster.defs.run_worker import MODULE, StandbyWorker
from agentcompass_dagster.runtime.store.processes import ProcessId

LOG_DIR = "run-workers"


def worker_log(instance: dg.DagsterInstance, run_id: str) -> Path:
    return Path(instance.root_directory) / LOG_DIR / f"{run_id}.log"


def log_tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def worker_command(executable: str, args: ExecuteRunArgs) -> list[str]:
    """The run worker's command: the code's own interpreter (a daemon started from another environment
    may not have it on PATH) running defs/run_worker.py, Dagster's `api execute_run` without its copy of
    every event."""
    return [executable, "-m", MODULE, dg.serialize_value(args)]


class RunWorkerLauncher(RunLauncher, ConfigurableClass):
    def __init__(self, inst_data: ConfigurableClassData | None = None) -> None:
        self._inst_data = inst_data
        # Workers this process started: reaped here (a daemon or a CLI would otherwise keep zombies),
        # and their exit codes say how they ended.
        self._workers: dict[str, subprocess.Popen[bytes]] = {}
        # A worker started ahead by the process launching through this launcher (`agentcompass run`).
        self.standby: StandbyWorker | None = None
        super().__init__()

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]) -> RunWorkerLauncher:
        return cls(inst_data=inst_data)

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        if run.job_code_origin is None:
            raise ValueError(f"run {run.run_id} has no code origin to load its job from")
        instance = self._instance
        args = ExecuteRunArgs(
            job_origin=run.job_code_origin,
            run_id=run.run_id,
            instance_ref=instance.get_ref(),
            set_exit_code_on_failure=True,
        )
        log_path = worker_log(instance, run.run_id)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        executable = run.job_code_origin.executable_path
        proc = self.standby.take(executable, dg.serialize_value(args), log_path) if self.standby else None
        if proc is None:
            with open(log_path, "ab") as log:
                proc = subprocess.Popen(
                    worker_command(executable, args), stdin=subprocess.DEVNULL, stdout=log, stderr=log
                )
        self._workers[run.run_id] = proc
        record_owner(instance, run.run_id, "worker", ProcessId.of(proc.pid))
        self._reap()

    def _reap(self) -> None:
        for proc in self._workers.values():
            proc.poll()

    def exit_code(self, run_id: str) -> int | None:
        """How a worker this process started ended (None while it runs, or when it is not ours)."""
        proc = self._workers.get(run_id)
        return proc.poll() if proc is not None else None

    def terminate(self, run_id: str) -> bool:
        instance = self._instance
        run = instance.get_run_by_id(run_id)
        worker = run_worker(instance, run_id)
        if run is None or run.is_finished or worker is None or not worker.alive():
            return False
        if run.status != dg.DagsterRunStatus.CANCELING:
            # As Dagster's own terminate does: a worker interrupted while its run is canceling ends it
            # CANCELED, otherwise FAILURE.
            instance.report_run_canceling(
                run, message="Terminating the run: its tasks are cancelled, what finished is kept"
            )
        try:
            # Dagster turns SIGINT into a cooperative cancel of the run's steps.
            os.kill(worker.pid, signal.SIGINT)
        except ProcessLookupError:
            return False
        return True

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        self._reap()
        why = gone_owner(self._instance, run)
        if why is None:
            # Alive, or not ours to judge (another host's worker): run monitoring fails any other answer.
            return CheckRunHealthResult(WorkerStatus.RUNNING)
        code = self.exit_code(run.run_id)
        exited = f"run worker exited with code {code}" if code is not None else why
        return CheckRunHealthResult(
            WorkerStatus.FAILED,
            f"{exited}: {log_tail(worker_log(self._instance, run.run_id))} "
            f"(log: {worker_log(self._instance, run.run_id)})",
        )

    def get_run_worker_debug_info(self, run: dg.DagsterRun, include_container_logs: bool | None = True) -> str | None:
        return f"run worker log: {worker_log(self._instance, run.run_id)}"
