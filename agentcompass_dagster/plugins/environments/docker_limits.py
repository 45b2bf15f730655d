"""What a docker session (environments/docker.py) does about what the agent leaves: the stop of its processes,
which has to work when they hold every process slot of the container, and the fullness of the mounts it
writes, each named as the sandbox names its limits.

A command run in the container (the engine's exec) needs a process slot of its own, and more for the
engine's helper that starts it: with every slot taken, it fails now and then (`read init-p: connection
reset by peer`), and the framework's stop failed the attempt as an error. So the container's own command
is a keeper (KEEPER) that the engine signals from outside (SIGUSR1, through its init, PID 1): it kills
every other process with bash builtins, forking nothing. The exec that follows (STOP, fork-free as well)
checks that none is left, zombies included, and kills what was started in between. The engine's init
reaps the zombies the agent's orphans become (`sleep infinity` never did, and they filled the limit).
"""

from __future__ import annotations

import time
from typing import Any

from agentcompass_dagster.plugins.environments.docker_setup import DockerParams

# A mount with less than this free is full: the agent wrote all it may.
FULL_BYTES = 1 << 20
# How long the exec checking the stop is tried again while the engine cannot start it.
RETRY_S = 10.0

# Kill every process but PID 1 (the engine's init), $1 and this shell, until none is left (5 s at most),
# zombies included: each holds a process slot until the init has reaped it, and the verifier's first fork
# would fail (and name max_processes) while one is left.
KILL = r"""stop() {
  local end=$((SECONDS + 5)) left p n
  while :; do
    left=
    for p in /proc/[0-9]*; do
      n=${p#/proc/}
      [ "$n" = 1 ] || [ "$n" = "$1" ] || [ "$n" = $$ ] || left="$left $n"
    done
    [ -z "$left" ] && return 0
    ((SECONDS < end)) || { echo "still running:$left"; return 1; }
    kill -9 $left 2>/dev/null
  done
}"""
# The container's command: it waits on a pipe it holds both ends of (no `sleep` to fork), and stops every
# other process on SIGUSR1, which only root in the container, or the engine, can send it.
# Each stop done is a line in the container's log, which only the keeper writes: the host waits for it
# before anything else runs in the container, which the keeper's sweep would kill.
KEEPER = [
    "bash",
    "-c",
    KILL + '\ntrap "stop $$; echo stopped" USR1\nexec {hold}<> <(:)\nwhile :; do read -r -u "$hold" _; done',
]
# What the agent left in /tmp and /dev/shm, once nothing of it runs (find -delete follows no link).
CLEAR = ["find", "/tmp", "/dev/shm", "-xdev", "-mindepth", "1", "-delete"]


def stop(container: Any, keeper: int) -> Any:
    """Signal the ``keeper`` (the container's command, whose pid it is) to stop every other process, then
    check in the container that none is left: the check's result (exit code 0 when none is)."""
    done = _stops(container)
    container.kill(signal="SIGUSR1")
    deadline = time.monotonic() + RETRY_S
    while _stops(container) == done and time.monotonic() < deadline:
        time.sleep(0.02)
    while True:
        result = container.exec_run(["bash", "-c", KILL + '\nstop "$1"', "stop", str(keeper)], user="0:0")
        # 126: the engine could not start it; 137: the keeper's sweep, not yet logged, killed it.
        if result.exit_code not in (126, 137) or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


def _stops(container: Any) -> int:
    """How many stops the keeper has logged."""
    return container.logs(stdout=True, stderr=False).count(b"stopped\n")


def full_mounts(container: Any, watched: dict[str, str], params: DockerParams) -> list[str]:
    """The limits the mounts in ``watched`` (path -> the limit bounding it: disk_mb or tmp_mb) were filled
    up to, each named with its allowance; read by one process that forks nothing (`stat -f`). An image
    without `stat` names none."""
    paths = list(watched)
    found = container.exec_run(["stat", "-f", "-c", "%a %S %d", *paths], user="0:0")
    lines = (found.output or b"").decode(errors="replace").splitlines()
    if found.exit_code != 0 or len(lines) != len(paths):
        return []
    hits = []
    for path, line in zip(paths, lines):
        numbers = line.split()
        if len(numbers) != 3 or not all(n.isdigit() for n in numbers):
            continue
        blocks, size, inodes = map(int, numbers)
        if blocks * size < FULL_BYTES:
            hits.append(_filled(watched[path], path, params))
        elif inodes == 0 and params.max_files is not None:
            hits.append(f"max_files={params.max_files}: the task made all {params.max_files} files it may in {path}")
    return hits


def _filled(limit: str, path: str, params: DockerParams) -> str:
    if limit == "disk_mb":
        return f"disk_mb={params.disk_mb}: the task's files filled all {params.disk_mb} MB of {path}"
    return f"tmp_mb={params.tmp_mb}: the attempt filled all {params.tmp_mb} MB of {path}"
