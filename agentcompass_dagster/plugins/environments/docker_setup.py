"""How the container of a docker session is made (environments/docker.py): for a task that asks nothing
of its environment, the sweep's image read-only with the task's files in volumes; for a task that asks for
its own, its image with its working directory and directories. The users: the agent's commands run as
``uid``, the verifier's as VERIFIER_UID, the reference solution's as root.

Where the agent writes, and how much: /tmp and /dev/shm are tmpfs of ``tmp_mb`` each. With ``disk_mb``,
each directory of a read-only container the agent writes (/work, its HOME, /commands) is a volume of its
own, a tmpfs of ``disk_mb`` with at most ``max_files`` files: a volume, not a tmpfs of the container,
because the engine copies files (the task's setup/) only into volumes and its rootfs, read-only here."""

from __future__ import annotations

import re
import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentcompass_dagster.contracts.environment import VERIFIER_PATH
from agentcompass_dagster.contracts.records import TaskEnvironment
from agentcompass_dagster.plugins.environments.images import BuiltImage

WORKDIR, SCRATCH, HOME, COMMANDS = "/work", "/scratch", "/home/agent", "/commands"
# The working directory of a task whose image sets none: Harbor's tasks' own convention.
DEFAULT_TASK_WORKDIR = "/app"
# A task image's build log, in the attempt's files.
BUILD_LOG = "build.log"
# The verifier's user and group: neither root (a file the agent planted, run by the check, would run as
# root) nor the agent's (which would open /scratch to it).
VERIFIER_UID = VERIFIER_GID = 65533


class Mount(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    target: str
    read_only: bool = True


class DockerParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The image of tasks that name none of their own (a task's environment/Dockerfile or docker_image wins).
    image: str | None = None
    # Whether a task's docker_image missing on the engine may be pulled from its registry.
    pull: bool = False
    memory_mb: int | None = Field(default=None, ge=16)
    max_processes: int | None = Field(default=None, ge=8)
    disk_mb: int | None = Field(default=None, ge=16)
    # Files (inodes) in each directory disk_mb bounds, and in /tmp and /dev/shm: empty files take no bytes.
    max_files: int | None = Field(default=None, ge=64)
    tmp_mb: int = Field(default=512, ge=1)
    cpus: float | None = Field(default=None, gt=0)
    uid: int = Field(default=65534, ge=1)
    gid: int = Field(default=65534, ge=1)
    mounts: list[Mount] = Field(default_factory=list)

    @model_validator(mode="after")
    def _not_the_verifiers(self) -> DockerParams:
        if self.uid == VERIFIER_UID or self.gid == VERIFIER_GID:
            raise ValueError(f"uid and gid: {VERIFIER_UID} is the verifier's, which the agent must not share")
        if self.max_files is not None and self.disk_mb is None:
            raise ValueError("max_files bounds the files of the directories disk_mb bounds; declare disk_mb too")
        return self


class Users(BaseModel):
    """Whom each caller's commands run as: users of the image, a name or ``uid:gid``."""

    agent: str
    reference: str
    verifier: str

    def of(self, caller: str) -> str:
        user: str = getattr(self, caller)
        return user


class Layout(BaseModel):
    """Where a session's commands work, as whom, and what the host may write there: each directory the
    host writes into with the owner its files get (the longest that holds a path)."""

    workdir: str
    users: Users
    owners: dict[str, tuple[int, int]]
    verifier_path: str = VERIFIER_PATH
    # caller -> its user's home in a task's own image (HOME of its commands)
    homes: dict[str, str] = Field(default_factory=dict)


class Setup(BaseModel):
    """How a session's container is made: its image, limits, filesystem, users and what runs (as root)
    once it has started; the record of what was applied. ``owners`` names each directory's owner by the
    caller whose user it is."""

    image: str
    memory_mb: int | None = None
    cpus: float | None = None
    storage_mb: int | None = None
    read_only: bool
    volumes: list[str]
    # Volumes that are a tmpfs each: path -> its options (size, files); their limit is disk_mb.
    bounded: dict[str, str] = Field(default_factory=dict)
    # path -> options; their limit is tmp_mb.
    tmpfs: dict[str, str]
    # Whether /tmp and /dev/shm are emptied once the agent's processes are gone, before the verifier runs.
    clear_shared: bool = False
    env: dict[str, str]
    workdir: str
    users: Users
    owners: dict[str, str]
    verifier_path: str = VERIFIER_PATH
    prepare: str
    record: dict[str, Any] = Field(default_factory=dict)


ROOT = "0:0"
# What a root user may be called in an image.
ROOT_NAMES = frozenset({"", "root", "0", "0:0"})


def _owner(user: str) -> str:
    """``user`` as chown takes it: a name with its login group, or uid:gid."""
    return shlex.quote(user if ":" in user else f"{user}:")


def _owned(users: Users, paths: list[tuple[str, str, str | None]]) -> str:
    """A shell line making each directory, owned by the user of the caller given, with its mode."""
    return " && ".join(
        f"mkdir -p {shlex.quote(path)} && chown {_owner(users.of(caller))} {shlex.quote(path)}"
        + (f" && chmod {mode} {shlex.quote(path)}" if mode else "")
        for path, caller, mode in paths
    )


def plain_setup(params: DockerParams, env: dict[str, str]) -> Setup:
    """A task that asks nothing of its environment: the sweep's image, read-only, the directories the agent
    writes in volumes of their own (each a tmpfs of ``disk_mb`` where declared), and /tmp and /dev/shm
    emptied before its work is checked: the verifier's are not the ones the agent wrote (as in the
    sandbox, where each verifier's command gets a /tmp of its own)."""
    assert params.image is not None
    users = Users(agent=f"{params.uid}:{params.gid}", reference=ROOT, verifier=f"{VERIFIER_UID}:{VERIFIER_GID}")
    writable = [WORKDIR, HOME, COMMANDS]
    bounded = dict.fromkeys(writable, _tmpfs(params.disk_mb, "0755", params.max_files)) if params.disk_mb else {}
    return Setup(
        image=params.image,
        memory_mb=params.memory_mb,
        cpus=params.cpus,
        read_only=True,
        volumes=[SCRATCH, *(path for path in writable if path not in bounded)],
        bounded=bounded,
        tmpfs=shared_tmpfs(params),
        clear_shared=True,
        env=dict(env),
        workdir=WORKDIR,
        users=users,
        owners={WORKDIR: "agent", HOME: "agent", COMMANDS: "agent", SCRATCH: "verifier"},
        prepare=_owned(
            users,
            [(WORKDIR, "agent", None), (HOME, "agent", None), (COMMANDS, "agent", None), (SCRATCH, "verifier", "0700")],
        ),
    )


def shared_tmpfs(params: DockerParams) -> dict[str, str]:
    """/tmp and /dev/shm (which would be the engine's own 64 MB otherwise), each of ``tmp_mb``."""
    return dict.fromkeys(["/tmp", "/dev/shm"], _tmpfs(params.tmp_mb, "1777", params.max_files))


def _tmpfs(size_mb: int, mode: str, files: int | None) -> str:
    return f"size={size_mb}m,mode={mode}" + (f",nr_inodes={files}" if files is not None else "")


def task_users(params: DockerParams, asks: TaskEnvironment, image: BuiltImage, record: dict[str, Any]) -> Users:
    """Harbor's users where they keep the agent apart: the agent runs as the task's [agent] user or the
    image's USER when that is not root, else as the sweep's unprivileged ``uid`` (under Harbor it would be
    root, and could then change every tool its verifier runs); its reference solution as the task's agent
    user, else root (as Harbor's oracle runs); the verifier as the task's [verifier] user or the image's
    USER, else root (Harbor's default), and never as the agent."""
    declared = asks.agent_user or image.user
    agent = declared if declared not in ROOT_NAMES else f"{params.uid}:{params.gid}"
    if declared in ROOT_NAMES and asks.agent_user is not None:
        record["agent_user"] = f"{asks.agent_user!r} asked: not applied, the agent never runs as root"
    verifier = asks.verifier_user or image.user or ROOT
    if verifier == agent:
        record["verifier_user"] = f"{verifier!r} is the agent's user: the verifier runs as root instead"
        verifier = ROOT
    return Users(agent=agent, reference=declared or ROOT, verifier=ROOT if verifier in ROOT_NAMES else verifier)


def task_setup(
    params: DockerParams, env: dict[str, str], asks: TaskEnvironment, image: BuiltImage, engine_cpus: int
) -> Setup:
    """A task in the environment it asks for: its own ``image`` (built once per build context), its
    working directory (declared, else the image's WORKDIR, else /app) given to the agent, a writable
    filesystem as under Harbor, its users (task_users), its directories owned by whom they are for, its
    resources (the task's ask wins over the sweep's; CPUs up to the engine's ``engine_cpus``), its
    variables."""
    workdir = asks.workdir or image.workdir or DEFAULT_TASK_WORKDIR
    record: dict[str, Any] = {"image": image.tag, "image_id": image.id, "built": image.built, "workdir": workdir}
    if image.digest is not None:
        record["build_log"] = BUILD_LOG
    users = task_users(params, asks, image, record)
    record["users"] = users.model_dump()
    cpus = asks.cpus or params.cpus
    if cpus is not None and cpus > engine_cpus:
        record["cpus"] = f"{cpus:g} asked, {engine_cpus} given: the engine has no more"
        cpus = float(engine_cpus)
    elif cpus is not None:
        record["cpus"] = f"{cpus:g} ({'the task' if asks.cpus else 'the sweep'})"
    memory = asks.memory_mb or params.memory_mb
    if memory is not None:
        record["memory_mb"] = f"{memory} ({'the task' if asks.memory_mb else 'the sweep'})"
    # The writable filesystem's size, where the engine's storage driver can bound it (docker.py records
    # when it cannot): the task's ask, else the sweep's disk_mb.
    storage = asks.storage_mb or params.disk_mb
    if storage is not None:
        record["storage_mb"] = f"{storage} ({'the task' if asks.storage_mb else 'the sweep, disk_mb'})"
    if params.max_files is not None:
        record["max_files"] = f"{params.max_files}: of /tmp and /dev/shm only, the image's filesystem has no such bound"
    dirs = [(d.path, d.visible_to, "0755" if d.visible_to == "agent" else "0700") for d in asks.dirs]
    return Setup(
        image=image.id,
        memory_mb=memory,
        cpus=cpus,
        storage_mb=storage,
        read_only=False,
        # Not emptied for the verifier: under Harbor it shares the agent's /tmp (a task may hand over there).
        volumes=[SCRATCH, COMMANDS, HOME],
        tmpfs=shared_tmpfs(params),
        env={**env, **asks.env},
        workdir=workdir,
        users=users,
        owners={
            workdir: "agent",
            HOME: "agent",
            COMMANDS: "agent",
            SCRATCH: "verifier",
            **{path: caller for path, caller, _ in dirs},
        },
        verifier_path=image.env.get("PATH") or VERIFIER_PATH,
        record=record,
        # The task's files in its working directory become the agent's, as they are its user's under Harbor.
        prepare=f"mkdir -p {shlex.quote(workdir)} && chown -R {_owner(users.agent)} {shlex.quote(workdir)} && "
        + _owned(users, [(HOME, "agent", None), (COMMANDS, "agent", None), (SCRATCH, "verifier", "0700"), *dirs]),
    )


def started_layout(container: Any, setup: Setup, homes: bool) -> Layout:
    """The layout of a started container: its users' ids for what the host writes, and (``homes``, for a
    task's own image) their homes."""
    return Layout(
        workdir=setup.workdir,
        users=setup.users,
        verifier_path=setup.verifier_path,
        owners={path: _ids(container, setup.users.of(caller)) for path, caller in setup.owners.items()},
        homes=_homes(container, setup.users) if homes else {},
    )


# The home of each user of a task's image, and whether the agent's user may write it: HOME is the user's
# own, as under Harbor (a verifier that sources $HOME/.local/bin/env finds what the image installed there),
# except the verifier's where the agent could have planted something in it.
HOMES = (
    'for u in "$@"; do h=$(getent passwd "${u%%:*}" | cut -d: -f6); '
    'w=$(setpriv --reuid="$AGENT_UID" --regid="$AGENT_GID" --clear-groups '
    'sh -c \'if test -w "$0"; then echo w; else echo r; fi\' "$h" 2>/dev/null); echo "$u ${h:--} ${w:-?}"; done'
)


def _homes(container: Any, users: Users) -> dict[str, str]:
    """caller -> the HOME its commands get: its user's home in the image (the agent's own only where the
    image has one for it); none for the verifier where the agent's user may write it, or for a user the
    image has no home for."""
    agent_uid, agent_gid = _ids(container, users.agent)
    found = container.exec_run(
        ["bash", "-c", HOMES, "homes", *users.model_dump().values()],
        user="0:0",
        environment={"AGENT_UID": str(agent_uid), "AGENT_GID": str(agent_gid)},
    )
    lines = (found.output or b"").decode(errors="replace").splitlines()
    by_user = {parts[0]: (parts[1], parts[2]) for parts in map(str.split, lines) if len(parts) == 3}
    homes = {}
    for caller, user in users.model_dump().items():
        home, writable = by_user.get(user, ("-", "?"))
        # Unknown (an image without setpriv) is as good as writable.
        if home in ("-", "/", "/nonexistent") or (caller == "verifier" and writable != "r"):
            continue
        homes[caller] = home
    return homes


def _ids(container: Any, user: str) -> tuple[int, int]:
    """The uid and gid of a user of the container (its name, or uid:gid)."""
    if re.fullmatch(r"\d+:\d+", user):
        uid, gid = user.split(":")
        return int(uid), int(gid)
    found = container.exec_run(["sh", "-c", 'id -u "$0" && id -g "$0"', user], user="0:0")
    numbers = (found.output or b"").decode(errors="replace").split()
    if found.exit_code != 0 or len(numbers) != 2 or not all(n.isdigit() for n in numbers):
        raise RuntimeError(f"user {user!r} of the task is not a user of its image")
    return int(numbers[0]), int(numbers[1])
