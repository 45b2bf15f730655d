"""The plan's mounts in a docker session (``ExecutionPlan.mounts``): bound when the container is made,
as every bind of a container is, and hidden from the verifier's commands, which ``docker exec`` runs in
the same mount namespace as the agent's.

Nothing in the container may unmount (no CAP_SYS_ADMIN, and root in a task's image may be the
verifier's user), so the host does it: before a verifier's command, a process of the host enters the
container's mount namespace and lays an empty read-only tmpfs over each mount; before the next command
of the agent or the reference, it lifts it. That takes root on the machine that runs the engine, which
validate_plan asks for. The path to each mount is walked without following a symlink."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

from agentcompass_dagster.contracts.records import HostMount

# Run by a fresh interpreter of the host, single-threaded as setns(CLONE_NEWNS) wants it; everything it
# uses is loaded before it enters the container, whose files it then sees.
_SWITCH = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid, action, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, UMOUNT_NOFOLLOW, CLONE_NEWNS = 1, 2, 4, 8, 8, 0x20000
def fail(what):
    sys.exit("%s: %s" % (what, os.strerror(ctypes.get_errno())))
ns = os.open("/proc/%s/ns/mnt" % pid, os.O_RDONLY)
if libc.setns(ns, CLONE_NEWNS) != 0:
    fail("setns")
for path in paths:
    *parents, name = path.strip("/").split("/")
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY)
    for part in parents:
        fd = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    os.fchdir(fd)
    if action == "hide":
        if libc.mount(b"agentcompass-hidden", name.encode(), b"tmpfs",
                      MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=4k,mode=0555") != 0:
            fail("hiding " + path)
    elif libc.umount2(name.encode(), UMOUNT_NOFOLLOW) != 0:
        fail("showing " + path)
"""


class HiddenMounts:
    """The mounts of one container, shown to the agent's and the reference's commands and hidden from
    the verifier's (``show``)."""

    def __init__(self, pid: int, mounts: list[HostMount]) -> None:
        self.pid = pid
        self.paths = [m.path for m in mounts]
        self._hidden = False
        self._lock = threading.Lock()

    @classmethod
    def of(cls, container: Any, mounts: list[HostMount]) -> HiddenMounts | None:
        if not mounts:
            return None
        container.reload()
        return cls(int(container.attrs["State"]["Pid"]), mounts)

    def show(self, visible: bool) -> None:
        """Show the mounts, or hide them; a switch that fails raises, so no verifier's command runs
        while they may be visible."""
        with self._lock:
            if self._hidden is not visible:
                return  # already as asked
            action = "show" if visible else "hide"
            done = subprocess.run(
                [sys.executable, "-c", _SWITCH, str(self.pid), action, *self.paths], capture_output=True, text=True
            )
            if done.returncode != 0:
                raise RuntimeError(
                    f"the host could not {action} the mounts {', '.join(self.paths)} of the container "
                    f"(pid {self.pid}) for the verifier: {done.stderr.strip()[-300:]}"
                )
            self._hidden = not visible
