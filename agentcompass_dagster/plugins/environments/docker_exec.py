"""How one command of a docker session runs in its container: its streams read as they come, and its
processes killed when the call awaiting it is cancelled (the framework's wall limit cuts the agent's
command in flight), which would otherwise leave them running in the container until stop_processes."""

from __future__ import annotations

import asyncio
import secrets
import threading
from typing import Any

from agentcompass_dagster.contracts.capture import Capture

# The variable each command is started with, valued by a token of its own: what finds its processes again
# when its call is cancelled, the background ones and those that left its process group (setsid)
# included; only one that cleared its environment escapes, until stop_processes.
EXEC_VARIABLE = "AGENTCOMPASS_EXEC"
# Kill every process whose environment holds $1 (bash builtins only: an image need not have a kill binary).
KILL_EXEC = r"""for p in /proc/[0-9]*; do
  while IFS= read -r -d '' v; do [ "$v" = "$1" ] && { kill -KILL "${p#/proc/}"; break; }; done < "$p/environ"
done 2>/dev/null; true"""


async def run_command(
    container: Any, argv: list[str], user: str, workdir: str, env: dict[str, str]
) -> tuple[int, Capture, Capture]:
    """Run ``argv`` in ``container`` as ``user``: its exit code and the captures of its streams. Cancelled,
    it kills what the command runs before it lets the cancellation through."""
    token, cancelled = secrets.token_hex(8), threading.Event()
    try:
        return await asyncio.to_thread(_run, container, argv, user, workdir, {**env, EXEC_VARIABLE: token}, cancelled)
    except asyncio.CancelledError:
        cancelled.set()
        # As the command's own user, who may read its processes' environments (root in the container
        # keeps no CAP_SYS_PTRACE).
        await asyncio.to_thread(
            container.exec_run, ["bash", "-c", KILL_EXEC, "kill", f"{EXEC_VARIABLE}={token}"], user=user
        )
        raise


def _run(
    container: Any, argv: list[str], user: str, workdir: str, env: dict[str, str], cancelled: threading.Event
) -> tuple[int, Capture, Capture]:
    """The SDK's exec_run appends each chunk to all it holds (64 MB of output took up to 78 s) and keeps
    every byte: the streams are read here as they come, into captures. Not started once the call is
    ``cancelled``: the kill, run then, would find nothing of a command started after it."""
    api = container.client.api
    exec_id = api.exec_create(container.id, argv, user=user, workdir=workdir, environment=env)["Id"]
    stdout, stderr = Capture(), Capture()
    if cancelled.is_set():
        return -1, stdout, stderr
    stream = api.exec_start(exec_id, stream=True, demux=True)
    try:
        for out, err in stream:
            if out is not None:
                stdout.add(out)
            if err is not None:
                stderr.add(err)
    finally:
        stream.close()
    exit_code = api.exec_inspect(exec_id)["ExitCode"]
    return (exit_code if exit_code is not None else -1), stdout, stderr
