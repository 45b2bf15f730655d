"""The container of a docker session (environments/docker.py) on the engine: created from its Setup
(docker_setup.py) under the engine's init, labelled with this process, with its limits, capabilities,
volumes and binds; a storage bound the engine cannot hold recorded instead of enforced; and removed."""

from __future__ import annotations

import os
import socket
from typing import Any

from agentcompass_dagster.contracts.records import HostMount, NetworkPolicy
from agentcompass_dagster.plugins.environments.docker_limits import KEEPER
from agentcompass_dagster.plugins.environments.docker_setup import DockerParams, Setup
from agentcompass_dagster.plugins.environments.leftovers import LABEL

CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "NET_BIND_SERVICE"]


def create_container(
    client: Any,
    params: DockerParams,
    environment_id: str,
    setup: Setup,
    name: str,
    policy: NetworkPolicy,
    binds: list[HostMount],
) -> Any:
    """The container of a session; a storage bound the engine cannot hold (only some storage drivers
    can) is recorded as not enforced instead of failing the task."""
    import docker.errors

    options = container_options(params, environment_id, setup, name, policy, binds)
    if setup.storage_mb is None:
        return client.containers.create(setup.image, **options)
    try:
        return client.containers.create(setup.image, storage_opt={"size": f"{setup.storage_mb}M"}, **options)
    except docker.errors.APIError as exc:
        if "storage" not in str(exc).lower():
            raise
        asked = setup.record.get("storage_mb", setup.storage_mb)
        setup.record["storage_mb"] = (
            f"{asked} asked, not enforced: this engine's storage driver cannot bound "
            f"a container's disk ({first_line(exc)})"
        )
        return client.containers.create(setup.image, **options)


def container_options(
    params: DockerParams,
    environment_id: str,
    setup: Setup,
    name: str,
    policy: NetworkPolicy,
    binds: list[HostMount],
) -> dict[str, Any]:
    """The engine's options of a session's container but its storage bound."""
    from docker.types import DriverConfig, Mount

    return dict(
        # Under the engine's init, which reaps the agent's orphans (docker_limits.py).
        command=KEEPER,
        init=True,
        name=name,
        network_mode=policy.value,
        labels={
            LABEL: "1",
            f"{LABEL}.host": socket.gethostname(),
            f"{LABEL}.pid": str(os.getpid()),
            f"{LABEL}.environment": environment_id,
        },
        mem_limit=f"{setup.memory_mb}m" if setup.memory_mb else None,
        memswap_limit=f"{setup.memory_mb}m" if setup.memory_mb else None,
        nano_cpus=int(setup.cpus * 1e9) if setup.cpus else None,
        pids_limit=params.max_processes,
        read_only=setup.read_only,
        # What root in the container may do: own, read and write any file, run as another user (package
        # managers drop to theirs), kill, bind a low port; nothing more, and nothing gained by exec.
        cap_drop=["ALL"],
        cap_add=CAPABILITIES,
        security_opt=["no-new-privileges"],
        volumes=[
            *setup.volumes,
            *(f"{m.source}:{m.target}:{'ro' if m.read_only else 'rw'}" for m in params.mounts),
        ],
        mounts=[
            *(
                Mount(
                    path,
                    None,
                    type="volume",
                    driver_config=DriverConfig("local", {"type": "tmpfs", "device": "tmpfs", "o": options}),
                )
                for path, options in setup.bounded.items()
            ),
            *(Mount(m.path, str(m.host_path), type="bind", read_only=m.read_only) for m in binds),
        ],
        tmpfs=setup.tmpfs,
        working_dir=setup.workdir,
        environment=setup.env,
    )


def remove_container(container: Any) -> None:
    import docker.errors

    try:
        container.remove(force=True, v=True)
    except docker.errors.NotFound:
        pass


def first_line(exc: BaseException) -> str:
    """An engine's error in a message: its first line, cut short."""
    return (str(exc).strip().splitlines() or [""])[0][:200]
