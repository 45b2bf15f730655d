"""Processes of this machine: whether one still runs, an identity that survives pid reuse, and stopping
a process group that a child leads."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path


def proc_stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def process_alive(pid: int) -> bool:
    """Whether a process of this machine still runs: a resource labelled with a dead owner is stale."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie answers signal 0 but has finished; where PID 1 reaps orphans slowly (or never, in some
    # containers) it would look like a command still running.
    fields = proc_stat(pid)
    return fields is None or fields[:1] != ["Z"]


@dataclass(frozen=True)
class ProcessId:
    """A process by host, pid and start time (clock ticks since boot): a later process that got the
    same pid is not mistaken for it."""

    host: str
    pid: int
    started: int

    @classmethod
    def of(cls, pid: int) -> ProcessId:
        fields = proc_stat(pid)
        return cls(socket.gethostname(), pid, int(fields[19]) if fields and len(fields) > 19 else 0)

    @classmethod
    def this(cls) -> ProcessId:
        return cls.of(os.getpid())

    @classmethod
    def parse(cls, text: str) -> ProcessId | None:
        host, _, rest = text.rpartition("@")
        pid, _, started = rest.partition(":")
        if not host or not pid.isdigit() or not started.isdigit():
            return None
        return cls(host, int(pid), int(started))

    def __str__(self) -> str:
        return f"{self.host}@{self.pid}:{self.started}"

    def alive(self) -> bool:
        """False only when this machine knows the process is gone; a process of another host is
        taken to be alive (its own host, or Dagster's run monitoring, knows better)."""
        if self.host != socket.gethostname():
            return True
        return process_alive(self.pid) and ProcessId.of(self.pid).started == self.started


def stop_group(proc: subprocess.Popen[bytes], steps: tuple[tuple[signal.Signals, float], ...]) -> None:
    """Stop the process group ``proc`` leads: each signal in turn, waiting its grace for the leader to exit;
    once it has, what is left of the group is killed."""
    for sig, grace in steps:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            os.killpg(proc.pid, signal.SIGKILL)
            return
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return
