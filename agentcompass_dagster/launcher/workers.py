"""The runs of `agentcompass run`, launched through the instance's run launcher (as the UI and the
daemon launch theirs: dagster.yaml's RunWorkerLauncher starts each in a run worker process), at most
``max_concurrent_runs`` at once. Dagster's run queue would hold the rest, but only a running daemon
drains it; this holds them itself. Whether a launched run's worker is alive is the follower's to judge
(launcher/follow.py), for these runs and for any other it follows."""

from __future__ import annotations

import os
import signal
import time
from collections import deque
from collections.abc import Callable

import dagster as dg

from agentcompass_dagster.defs.dagster_internals import LaunchRunContext, RunLauncher
from agentcompass_dagster.defs.run_launcher import RunWorkerLauncher
from agentcompass_dagster.defs.run_owners import run_worker

POLL_S = 0.1
EXIT_POLL_S = 0.02


def instance_launcher(instance: dg.DagsterInstance) -> RunLauncher:
    """The instance's run launcher; for an instance configured with Dagster's default one (which needs a
    gRPC code server, as in a dagster.yaml written before agentcompass named its own), ours."""
    if isinstance(instance.run_launcher, dg.DefaultRunLauncher):
        launcher = RunWorkerLauncher()
        launcher.register_instance(instance)
        return launcher
    return instance.run_launcher


class RunWorkers:
    def __init__(self, instance: dg.DagsterInstance, launcher: RunLauncher, max_concurrent: int) -> None:
        self.instance = instance
        self.launcher = launcher
        self.max_concurrent = max_concurrent
        self.waiting: deque[dg.DagsterRun] = deque()
        self.running: list[str] = []

    def submit(self, runs: list[dg.DagsterRun]) -> None:
        self.waiting.extend(runs)

    def poll(self) -> None:
        """Forget runs that ended, start waiting ones."""
        for run_id in list(self.running):
            run = self.instance.get_run_by_id(run_id)
            if run is None or run.is_finished:
                self.running.remove(run_id)
        while self.waiting and len(self.running) < self.max_concurrent:
            self._launch(self.waiting.popleft())

    @property
    def busy(self) -> bool:
        return bool(self.waiting or self.running)

    def _launch(self, run: dg.DagsterRun) -> None:
        if self.launcher is self.instance.run_launcher:
            # Dagster types the workspace as required; the launcher takes None (LaunchRunContext: Optional).
            self.instance.launch_run(run.run_id, workspace=None)  # type: ignore[arg-type]
        else:
            self.launcher.launch_run(LaunchRunContext(dagster_run=run, workspace=None))
        self.running.append(run.run_id)

    def pause(self, timeout: float, interrupted: Callable[[], bool]) -> None:
        """Wait up to ``timeout`` for the next poll, returning early when a worker this process started
        exits (its run has ended, or its worker died) or when ``interrupted`` says so: checking a process
        is a system call, polling the instance is queries, so the instance is asked seldom and an ending
        is still seen at once."""
        deadline = time.monotonic() + timeout
        launcher = self.launcher if isinstance(self.launcher, RunWorkerLauncher) else None
        while time.monotonic() < deadline and not interrupted():
            if launcher is not None and any(launcher.exit_code(run_id) is not None for run_id in self.running):
                return
            time.sleep(EXIT_POLL_S)

    def interrupt(self, sig: signal.Signals = signal.SIGINT) -> None:
        """Ask every running run to stop: the first time through the launcher's terminate (the UI's
        Terminate: the run is marked canceling and its worker cancels its tasks); later, the worker is
        signalled again (SIGINT: it marks its run canceled and exits without waiting for the cleanup),
        or killed, when its run is marked canceled here. Runs that never started are marked canceled."""
        for unstarted in self.waiting:
            self.instance.report_run_canceled(unstarted, message="agentcompass run was interrupted before it started")
        self.waiting.clear()
        for run_id in self.running:
            run = self.instance.get_run_by_id(run_id)
            if run is None or run.is_finished:
                continue
            if run.status != dg.DagsterRunStatus.CANCELING:
                self.launcher.terminate(run_id)
                continue
            worker = run_worker(self.instance, run_id)
            if worker is not None and worker.alive():
                try:
                    os.kill(worker.pid, sig)
                except ProcessLookupError:
                    pass
            if sig is signal.SIGKILL:
                self.instance.report_run_canceled(run, message="its worker was killed after a second interrupt")

    def wait(self, timeout: float, interrupted: Callable[[], bool] = lambda: False) -> bool:
        """Wait for the running runs to end; False when some still run after ``timeout`` or once
        ``interrupted`` says so."""
        deadline = time.monotonic() + timeout
        while True:
            runs = [self.instance.get_run_by_id(run_id) for run_id in self.running]
            if all(run is None or run.is_finished for run in runs):
                self.running.clear()
                return True
            if time.monotonic() > deadline or interrupted():
                return False
            time.sleep(POLL_S)
