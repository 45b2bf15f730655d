"""What sessions of processes that died without closing them (SIGKILL) left on this machine: their
directories and cgroups, removed by the next process that opens a session there, except those a resume
may still attach to (R-RESUME-1); and their containers (with their volumes) on a Docker engine."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentcompass_dagster.plugins.environments.cgroups import stale
from agentcompass_dagster.plugins.environments.hostdir import IDENTITY_FILE
from agentcompass_dagster.runtime.store.processes import process_alive

log = logging.getLogger(__name__)

# How long the directory of a session that died with its process stays for a resume to attach to
# (R-RESUME-1); the next run's sweep removes it after that.
KEEP_FOR_RESUME_S = 24 * 3600
# The label of the docker environment's containers (with .host, .pid and .environment: whose they are).
LABEL = "agentcompass"


_swept: set[Path | str] = set()
_sweep_lock = threading.Lock()


def _first(key: Path | str) -> bool:
    """Whether this is the process's first sweep of ``key``."""
    with _sweep_lock:
        if key in _swept:
            return False
        _swept.add(key)
        return True


def sweep_dead_sessions(directory: Path, prefix: str, owner: str, release: Callable[[Path], list[str]]) -> None:
    """Once per process and directory: what processes that died without closing their sessions
    (SIGKILL) left in ``directory`` (entries named <prefix><pid>-..., each given to ``release``) and
    their cgroups of kind ``owner``; except the sessions a resume may still attach to."""
    if not _first(directory):
        return
    kept, released = set(), set()
    for entry in directory.iterdir() if directory.is_dir() else []:
        name = entry.name[len(prefix) :] if entry.name.startswith(prefix) else ""
        pid = name.partition("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid() or process_alive(int(pid)):
            continue
        if awaits_resume(entry):
            kept.add(name)
            continue
        released.add(name)
        # Another process's leftovers: whatever they hold (a tree too odd to remove, a mount still busy),
        # they must not fail the attempt that happens to find them.
        try:
            problems = release(entry)
        except Exception as exc:
            problems = [f"{type(exc).__name__}: {exc}"]
        if problems:
            log.warning("could not remove what a dead session left at %s: %s", entry, "; ".join(problems[:3]))
    for group in stale(owner):
        # A group whose session is not in this directory (another TMPDIR, another root) may hold the command
        # a resume of that session waits for, which only a sweep of its directory can tell: of those, only
        # groups nothing runs in go (a process with another TMPDIR killed a resumable session's command).
        if group.name in kept or (group.name not in released and group.pids()):
            continue
        try:
            group.remove()
        except Exception as exc:
            log.warning("could not remove the cgroup of a dead session %s: %s", group.name, exc)


def awaits_resume(root: Path) -> bool:
    """Whether the dead session at ``root`` recorded itself for a resume (handle()) recently enough to
    keep its directory: a resume of that run may still attach to it."""
    try:
        return time.time() - os.lstat(root / IDENTITY_FILE).st_mtime < KEEP_FOR_RESUME_S
    except OSError:
        return False


def sweep_dead_containers(client: Any) -> int:
    """Once per process: remove the containers of this host whose owning process is gone (SIGKILLed runs),
    with their volumes. Listed with their labels in one call: the SDK's list inspects each container after,
    and one another process removed in between failed the attempt that happened to sweep."""
    import docker.errors

    if not _first("docker"):
        return 0
    removed = 0
    for container in client.api.containers(all=True, filters={"label": f"{LABEL}.host={socket.gethostname()}"}):
        pid = (container.get("Labels") or {}).get(f"{LABEL}.pid", "")
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            try:
                client.api.remove_container(container["Id"], force=True, v=True)
            except docker.errors.NotFound:
                continue
            removed += 1
    return removed
