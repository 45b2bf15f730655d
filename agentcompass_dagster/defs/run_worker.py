"""A run worker: ``python -m agentcompass_dagster.defs.run_worker ARGS`` executes one Dagster run, as
`dagster api execute_run ARGS` does (ARGS: Dagster's serialized ExecuteRunArgs), without what that
command keeps of every event (defs/dagster_internals.py execute_run).

``python -m agentcompass_dagster.defs.run_worker --standby`` is a worker started before its run exists
(``StandbyWorker``): it imports what every run uses while `agentcompass run` plans, then reads one JSON
line on stdin (``args``, the environment to run in, the log to write to) and executes that run; at end
of input it exits without having run anything. This module imports nothing else, so the command can
start one before it imports Dagster itself."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

MODULE = "agentcompass_dagster.defs.run_worker"

# What every run's steps use, none of which reads the environment when imported: the job's own module
# (the code location) does, so it is loaded only once the run's environment is in place.
WARM_MODULES = (
    "agentcompass_dagster.defs.location",
    "agentcompass_dagster.runtime.execution.orchestrator",
    "agentcompass_dagster.reporting.report",
    "openai",
    "pandas",
    "pyarrow.parquet",
    "matplotlib.backends.backend_agg",
)


def standby() -> int:
    for module in WARM_MODULES:
        # Only a head start: a module that fails here fails again in the run, which logs why.
        with contextlib.suppress(Exception):
            importlib.import_module(module)
    line = sys.stdin.readline()
    if not line:
        return 0
    order = json.loads(line)
    os.environ.clear()
    os.environ.update(order["env"])
    log = os.open(order["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (log, 1), (log, 2)):
        os.dup2(fd, target)
    os.close(log)
    os.close(null)
    from agentcompass_dagster.defs.dagster_internals import execute_run

    return execute_run(order["args"])


class StandbyWorker:
    """A worker process warming up for the first run this process launches: the seconds a new worker
    spends importing overlap the command's own work (loading the sweep, planning, creating the runs)
    instead of following it."""

    def __init__(self, executable: str = sys.executable) -> None:
        self.executable = executable
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [executable, "-m", MODULE, "--standby"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def take(self, executable: str, serialized_args: str, log: Path) -> subprocess.Popen[bytes] | None:
        """The worker, now executing the run of ``serialized_args`` in this process's environment and
        writing to ``log``; None when it cannot (another interpreter, already taken, or it died)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if executable != self.executable or proc.poll() is not None:
            _discard(proc)
            return None
        assert proc.stdin is not None
        order = {"args": serialized_args, "env": dict(os.environ), "log": str(log)}
        try:
            proc.stdin.write(json.dumps(order).encode() + b"\n")
            proc.stdin.close()
        except BrokenPipeError:
            _discard(proc)
            return None
        return proc

    def discard(self) -> None:
        """Stop the worker if no run took it: it has run nothing, so nothing is lost."""
        if self._proc is not None:
            _discard(self._proc)
            self._proc = None


def _discard(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()
    if proc.stdin is not None:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass


if __name__ == "__main__":
    if sys.argv[1:] == ["--standby"]:
        sys.exit(standby())
    from agentcompass_dagster.defs.dagster_internals import execute_run

    sys.exit(execute_run(sys.argv[1]))
