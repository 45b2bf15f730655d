"""The host directories a plan binds into a task's environment (``ExecutionPlan.mounts``, asked of the
harness): the model gateway's socket, the agent program it installed. Bound into the commands run for
the agent and the reference, never into the verifier's."""

from __future__ import annotations

import os
from collections.abc import Iterable

from agentcompass_dagster.contracts.records import HostMount


def give_writable(mounts: Iterable[HostMount], owner: tuple[int, int] | None) -> None:
    """Make each writable mount's directory the environment's agent user's (``owner``; None: commands
    run as this process's user, who can write it already). Its top only, never followed if a link:
    below it is what the agent wrote, where no host-side operation goes."""
    if owner is None:
        return
    for mount in mounts:
        if not mount.read_only:
            os.chown(mount.host_path, *owner, follow_symlinks=False)
