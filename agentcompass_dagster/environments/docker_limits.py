"""What a docker session (environments/docker.py) does about what the agent leaves: the stop of its processes,
which has to work when they hold every process slot of the container, and the fullness of the mounts it
writes, each named as the sandbox names its limits.

The stop starts one process, the engine's exec (which joins the container's cgroup by moving there, a move
no process limit refuses), and that process forks nothing: bash builtins only, no `seq`, no `sleep`. A
container left full of processes, or of zombies the agent's orphans became (which the engine's init, PID 1
of every container, reaps), no longer makes the framework's own step fail the attempt as an error.
"""

from __future__ import annotations

from typing import Any

from agentcompass_dagster.environments.docker_setup import DockerParams

# A mount with less than this free is full: the agent wrote all it may.
FULL_BYTES = 1 << 20

# Kill every process but PID 1 (the engine's init), the container's command ($1) and this shell, until none
# but zombies is left (5 s at most). The state of a process is read after the last ") " of its stat: its
# name, which the agent sets, may hold spaces and parentheses.
STOP = r"""keep=$1 end=$((SECONDS + 5))
while :; do
  left=
  for p in /proc/[0-9]*; do
    n=${p#/proc/}
    [ "$n" = 1 ] || [ "$n" = "$keep" ] || [ "$n" = $$ ] || ! read -r stat 2>/dev/null < "$p/stat" ||
      { s=${stat##*") "}; [ "${s%% *}" = Z ] || left="$left $n"; }
  done
  [ -z "$left" ] && exit 0
  ((SECONDS < end)) || { echo "still running:$left"; exit 1; }
  kill -9 $left 2>/dev/null
done"""
# What the agent left in /tmp and /dev/shm, once nothing of it runs (find -delete follows no link).
CLEAR = ["find", "/tmp", "/dev/shm", "-xdev", "-mindepth", "1", "-delete"]


def stop_command(keep: int) -> list[str]:
    """The stop (STOP) of a container whose own command is ``keep``."""
    return ["bash", "-c", STOP, "stop", str(keep)]


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
