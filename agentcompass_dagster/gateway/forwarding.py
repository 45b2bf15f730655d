"""How a command inside a task's environment reaches the model gateway under network ``none``.

The host binds the gateway's directory (its unix socket, and the forwarder scripts ``install_forwarder``
copies there) at GATEWAY_DIR into the commands run for the agent (``ExecutionPlan.mounts``);
``forwarded`` wraps a command so that a forwarder (forward.py, or forward.js where the environment has
node but no python3) listens on the environment's own 127.0.0.1 for as long as the command runs, and
pipes each connection to that socket."""

from __future__ import annotations

import shlex
from pathlib import Path

from agentcompass_dagster.runtime.store.safe_fs import write_beneath

GATEWAY_DIR = "/run/agentcompass/gateway"
# The gateway's socket, as commands inside the environment see it.
GATEWAY_SOCKET = f"{GATEWAY_DIR}/model.sock"
SCRIPTS = ("forward.py", "forward.js")
# The variables the wrapped command finds the forwarder by.
PORT_VARIABLE, URL_VARIABLE = "AGENTCOMPASS_GATEWAY_PORT", "AGENTCOMPASS_GATEWAY_URL"
NO_RUNTIME = "agentcompass: the model gateway's forwarder needs python3 or node in this environment, which has neither"


def install_forwarder(directory: Path) -> None:
    """Copy the forwarder scripts into the gateway's ``directory`` on the host, each whole or not at all
    (temp file and rename, no symlink followed), readable by the environment's unprivileged user."""
    here = Path(__file__).parent
    for name in SCRIPTS:
        write_beneath(directory, name, (here / name).read_bytes(), 0o644)


def forwarded(command: str, *, socket: str = GATEWAY_SOCKET, port: int = 0, wait_s: float = 10.0) -> str:
    """A bash command line that starts the forwarder in the background (python3, else node, else exits
    127 naming what is missing), waits at most ``wait_s`` for it to listen on 127.0.0.1 (``port``, 0: a
    free one), runs ``command`` in a subshell with PORT_VARIABLE and URL_VARIABLE (``http://127.0.0.1:N``)
    set, stops the forwarder, and exits with the command's exit code.

    The forwarder writes its port into a FIFO the line holds open read-write: ``read -t`` returns as
    soon as it listens, and each tenth of a second without a line the line checks the forwarder still
    runs, so one that died (a port taken) ends the wait at once; ``wait_s`` bounds it in any case. A
    timeout can fall between the bytes of the line on a loaded machine (bash reads a FIFO a byte at a
    time and hands back what it read so far): the parts are joined, never taken for the port."""
    here, sock = shlex.quote(GATEWAY_DIR), shlex.quote(socket)
    return "\n".join(
        [
            "__ac_fifo_dir=$(mktemp -d) || exit 1",
            'mkfifo "$__ac_fifo_dir/port" && exec 9<>"$__ac_fifo_dir/port" || exit 1',
            "if command -v python3 >/dev/null 2>&1; then "
            f'python3 {here}/forward.py {sock} {port} "$__ac_fifo_dir/port" 9<&- &',
            "elif command -v node >/dev/null 2>&1; then "
            f'node {here}/forward.js {sock} {port} "$__ac_fifo_dir/port" 9<&- &',
            f'else echo {shlex.quote(NO_RUNTIME)} >&2; rm -rf "$__ac_fifo_dir"; exit 127; fi',
            "__ac_forwarder=$!",
            f"{PORT_VARIABLE}= __ac_listening=",
            f"for ((__ac_tick = 0; __ac_tick < {max(1, round(wait_s * 10))}; __ac_tick++)); do",
            "  read -r -t 0.1 -u 9 __ac_part && __ac_listening=1",
            f"  {PORT_VARIABLE}+=$__ac_part",
            '  [ -n "$__ac_listening" ] && break',
            '  kill -0 "$__ac_forwarder" 2>/dev/null || break',
            "done",
            'if [ -z "$__ac_listening" ]; then',
            f'  echo "agentcompass: the model gateway\'s forwarder ended, or did not listen within {wait_s:g}s" >&2',
            '  kill "$__ac_forwarder" 2>/dev/null; rm -rf "$__ac_fifo_dir"; exit 1',
            "fi",
            'exec 9<&-; rm -rf "$__ac_fifo_dir"',
            f'export {PORT_VARIABLE} {URL_VARIABLE}="http://127.0.0.1:${PORT_VARIABLE}"',
            f"( {command}\n)",
            "__ac_status=$?",
            'kill "$__ac_forwarder" 2>/dev/null; wait "$__ac_forwarder" 2>/dev/null',
            'exit "$__ac_status"',
        ]
    )
