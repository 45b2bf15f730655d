"""Run workers of `agentcompass run`: each run in a process of its own, started with the command
Dagster's default run launcher gives its run workers (``dagster api execute_run``), at most
``max_concurrent_runs`` at once. The worker loads the job from the run's code origin and executes it
with the job's executor (its steps in-process, in processes, or in containers)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import deque
from pathlib import Path

import dagster as dg
from dagster._grpc.types import ExecuteRunArgs

from agentcompass_dagster.defs.coordination import WORKER_TAG
from agentcompass_dagster.runtime.processes import Worker

LOG_DIR = "run-workers"


class RunWorkers:
    def __init__(self, instance: dg.DagsterInstance, home: Path, max_concurrent: int) -> None:
        self.instance = instance
        self.log_dir = home / LOG_DIR
        self.max_concurrent = max_concurrent
        self.waiting: deque[dg.DagsterRun] = deque()
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        self.exit_codes: dict[str, int] = {}

    def submit(self, runs: list[dg.DagsterRun]) -> None:
        self.waiting.extend(runs)

    def log_path(self, run_id: str) -> Path:
        return self.log_dir / f"{run_id}.log"

    def poll(self) -> bool:
        """Reap finished workers and start waiting runs; True while any run waits or runs."""
        for run_id, proc in list(self.running.items()):
            code = proc.poll()
            if code is not None:
                self.exit_codes[run_id] = code
                del self.running[run_id]
        while self.waiting and len(self.running) < self.max_concurrent:
            self._start(self.waiting.popleft())
        return bool(self.waiting or self.running)

    def _start(self, run: dg.DagsterRun) -> None:
        assert run.job_code_origin is not None
        args = ExecuteRunArgs(job_origin=run.job_code_origin, run_id=run.run_id, instance_ref=self.instance.get_ref(),
                              set_exit_code_on_failure=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path(run.run_id), "ab") as log:
            proc = subprocess.Popen(args.get_command_args(), stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.instance.add_run_tags(run.run_id, {WORKER_TAG: str(Worker.of(proc.pid))})
        self.running[run.run_id] = proc

    def interrupt(self, sig: signal.Signals = signal.SIGINT) -> None:
        """Ask every running worker to stop (Dagster turns SIGINT into a cooperative cancel); runs that
        never started are marked canceled. A run is marked canceling first, as Dagster's own terminate
        does: a worker interrupted while its run is canceling ends it CANCELED, otherwise FAILURE. A
        worker killed outright cannot say so itself: its run is marked canceled here."""
        for run in self.waiting:
            self.instance.report_run_canceled(run, message="agentcompass run was interrupted before it started")
        self.waiting.clear()
        for run_id, proc in self.running.items():
            run = self.instance.get_run_by_id(run_id)
            if run is not None and not run.is_finished and run.status is not dg.DagsterRunStatus.CANCELING:
                self.instance.report_run_canceling(run, message="agentcompass run was interrupted (Ctrl-C or SIGTERM)")
            try:
                os.kill(proc.pid, sig)
            except ProcessLookupError:
                pass
            if sig is signal.SIGKILL:
                proc.wait()
                run = self.instance.get_run_by_id(run_id)
                if run is not None and not run.is_finished:
                    self.instance.report_run_canceled(run, message="its worker was killed after a second interrupt")

    def wait(self, timeout: float) -> bool:
        """Wait for the running workers to end; False when some still run after ``timeout``."""
        deadline = time.monotonic() + timeout
        for proc in self.running.values():
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return False
        self.poll()
        return not self.running
