"""bubblewrap's command line for one command of a sandbox session (environments/sandbox.py): the host's
system directories read-only, the session's /tmp, its own directories and the task's paths bound where
its commands see them (the framework's private ones only for the reference and the verifier, the plan's
host mounts never for the verifier), fresh namespaces, the seccomp filter, the drop to the sandbox user
with no capability when the runtime is root, and the lifeline's watcher inside the namespace."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from agentcompass_dagster.contracts.environment import Caller, visible_dirs
from agentcompass_dagster.contracts.records import NetworkPolicy

if TYPE_CHECKING:
    from agentcompass_dagster.plugins.environments.sandbox import SandboxSession

SYSTEM_DIRS = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64")


def bwrap_command(session: SandboxSession, command: str, cwd: str, caller: Caller, fds: list[int]) -> list[str]:
    """bwrap's command line running ``command`` in ``session``'s sandbox (fds: its child_fds())."""
    args = ["bwrap"]
    for name in SYSTEM_DIRS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    args += ["--dev", "/dev", "--proc", "/proc"]
    if session.host_tmp and caller is not Caller.verifier:
        args += ["--bind", str(session.root / "tmp"), "/tmp"]
    else:
        # 1777: bwrap run by root makes it root's, and the command runs as the sandbox user.
        args += ["--perms", "1777", "--size", str(session.params.tmp_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    # After /tmp, which would hide those below it.
    for path in session.params.read_only:
        args += ["--ro-bind", path, path]
    args += _session_binds(session, caller)
    args += [
        "--remount-ro",
        "/",
        "--chdir",
        cwd,
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
    ]
    if session.policy is NetworkPolicy.none:
        args.append("--unshare-net")
    args += ["--seccomp", str(fds[0]), "--"]
    if session.owner is not None:
        # bwrap as root keeps every capability: drop to the sandbox user with none left, for good.
        args += [
            "setpriv",
            f"--reuid={session.params.uid}",
            f"--regid={session.params.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]
    # The lifeline's watcher inside the namespace (see SandboxSession.argv).
    lifeline = f"{{ read -r -u {fds[1]} _; kill -KILL -1; }} </dev/null >/dev/null 2>&1 & exec {fds[1]}<&-; "
    return [*args, "bash", "-c", lifeline + command]


def _session_binds(session: SandboxSession, caller: Caller) -> list[str]:
    """The session's directory and what is bound below it and at the task's paths, for ``caller``."""
    # The session's directory as a plain 0755 directory of the sandbox's root (bwrap makes the parents
    # of a bind 0700 otherwise, closed to the unprivileged user), holding only the binds below.
    args = ["--perms", "0755", "--dir", str(session.root)]
    private = [session.scratch] if caller is not Caller.agent else []
    for directory in (session.home, session.commands_dir, *private):
        args += ["--bind", directory, directory]
    shown = visible_dirs(session.task_dirs, caller)
    mounts = session.host_mounts if caller is not Caller.verifier else ()
    # The parents of the task's paths (/logs of /logs/verifier) and mounts, open like the session's directory.
    for parent in sorted(
        {
            str(p)
            for path in [session.workdir, *(d.path for d in shown), *(m.path for m in mounts)]
            for p in Path(path).parents
            if str(p) != "/"
        }
        - {str(session.root), *map(str, session.root.parents)}
    ):
        args += ["--perms", "0755", "--dir", parent]
    args += ["--bind", session.work, session.workdir]
    for task_dir in shown:
        args += ["--bind", session.mounts[task_dir.path], task_dir.path]
    for mount in mounts:
        args += ["--ro-bind" if mount.read_only else "--bind", str(mount.host_path), mount.path]
    return args
