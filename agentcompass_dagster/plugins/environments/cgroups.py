"""A control group per attempt: memory and process limits that the kernel enforces, counters that say
when one was hit, and a way to kill every process the attempt started (a double fork or ``setsid``
leaves a process group, never its cgroup).

cgroup v2 (one unified hierarchy) and v1 (a ``memory`` and a ``pids`` hierarchy, as on this machine)
are both supported; the attempt's group is made below the cgroup this process is in, so limits set on
the runtime itself still apply. Creating groups needs write access to those hierarchies (root, or a
delegated subtree); where it is missing, ``Cgroup.create`` says why and the environment refuses plans
that declare such limits instead of running them unbounded.
"""

from __future__ import annotations

import errno
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

from agentcompass_dagster.runtime.store.processes import process_alive

ROOT = Path("/sys/fs/cgroup")
PREFIX = "agentcompass"


class CgroupUnavailable(Exception):
    """This process cannot make control groups here; the message says why."""


def _own_path(controller: str, pid: str = "self") -> str:
    """A process's cgroup path in a v1 hierarchy ("memory", "pids") or in v2 (controller "")."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if (controller == "" and names == "") or controller in names.split(","):
            return path
    raise CgroupUnavailable(f"this process is in no {controller or 'v2'} cgroup")


def version() -> int | None:
    """2 where the unified hierarchy is mounted at /sys/fs/cgroup, 1 where the v1 memory and pids
    hierarchies are, else None."""
    if (ROOT / "cgroup.controllers").is_file():
        return 2
    if (ROOT / "memory").is_dir() and (ROOT / "pids").is_dir():
        return 1
    return None


@dataclass
class Cgroup:
    """One attempt's group: in v2 one directory, in v1 one per controller hierarchy."""

    name: str
    dirs: list[Path]
    v2: bool
    memory_mb: int | None = None
    max_processes: int | None = None
    _seen: dict[str, int] = field(default_factory=dict)

    @classmethod
    def create(cls, owner: str, name: str, memory_mb: int | None, max_processes: int | None) -> Cgroup:
        """The group ``name`` (``<pid>-...``) of an environment kind ``owner``: each kind sweeps only
        its own groups (a dead local session's may still hold a command a resume waits for)."""
        kind = version()
        if kind is None:
            raise CgroupUnavailable(f"no cgroup v2 or v1 memory/pids hierarchy under {ROOT}")
        entry = f"{owner}.{name}"
        if kind == 2:
            parent = ROOT / _own_path("").lstrip("/") / PREFIX
            dirs = [parent / entry]
        else:
            dirs = [ROOT / c / _own_path(c).lstrip("/") / PREFIX / entry for c in ("memory", "pids")]
        group = cls(name, dirs, kind == 2, memory_mb, max_processes)
        try:
            for directory in dirs:
                if kind == 2:
                    _enable_controllers(directory.parent)
                directory.mkdir(parents=True)
            group._limit()
        except OSError as exc:
            group.remove()
            raise CgroupUnavailable(f"cannot make cgroup {dirs[0]}: {exc.strerror or exc}") from None
        return group

    @classmethod
    def of_process(cls, pid: int, name: str, memory_mb: int | None, max_processes: int | None) -> Cgroup | None:
        """The existing group a process of this host is in (a container's), to read its counters."""
        kind = version()
        try:
            if kind == 2:
                dirs = [ROOT / _own_path("", str(pid)).lstrip("/")]
            elif kind == 1:
                dirs = [ROOT / c / _own_path(c, str(pid)).lstrip("/") for c in ("memory", "pids")]
            else:
                return None
        except (OSError, CgroupUnavailable):
            return None
        if not all(d.is_dir() for d in dirs):
            return None
        return cls(name, dirs, kind == 2, memory_mb, max_processes)

    def _file(self, v1_controller: str, name: str) -> Path:
        if self.v2:
            return self.dirs[0] / name
        return next(d for d in self.dirs if d.parts[len(ROOT.parts)] == v1_controller) / name

    def _limit(self) -> None:
        if self.memory_mb is not None:
            limit = str(self.memory_mb * 1024 * 1024)
            self._file("memory", "memory.max" if self.v2 else "memory.limit_in_bytes").write_text(limit)
            if self.v2 and (self.dirs[0] / "memory.swap.max").exists():
                (self.dirs[0] / "memory.swap.max").write_text("0")
        if self.max_processes is not None:
            self._file("pids", "pids.max").write_text(str(self.max_processes))

    def join_fds(self) -> list[int]:
        """Descriptors of the groups' cgroup.procs, opened here so that a child can join before it execs
        (writing "0" moves the writer), with nothing to allocate between fork and exec."""
        return [os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for d in self.dirs]

    def _counter(self, v1_controller: str, v2_file: str, v1_file: str, key: str) -> int:
        try:
            text = self._file(v1_controller, v2_file if self.v2 else v1_file).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
        return 0

    def limits_hit(self) -> list[str]:
        """The limits hit since the last call, each named with its allowance."""
        hits = []
        counters = {
            "memory": self._counter("memory", "memory.events", "memory.oom_control", "oom_kill"),
            "pids": self._counter("pids", "pids.events", "pids.events", "max"),
        }
        for key, value in counters.items():
            if value > self._seen.get(key, 0):
                self._seen[key] = value
                if key == "memory" and self.memory_mb is not None:
                    hits.append(
                        f"memory_mb={self.memory_mb}: the attempt's processes needed more than {self.memory_mb} MB "
                        "and the kernel killed one"
                    )
                elif key == "pids" and self.max_processes is not None:
                    hits.append(
                        f"max_processes={self.max_processes}: the attempt tried to run more than "
                        f"{self.max_processes} processes at once"
                    )
        return hits

    def pids(self) -> list[int]:
        found: set[int] = set()
        for directory in self.dirs:
            try:
                found |= {int(p) for p in (directory / "cgroup.procs").read_text().split()}
            except OSError:
                continue
        return sorted(found)

    def kill_all(self) -> None:
        """SIGKILL every process of the group until none is left (new ones may fork meanwhile)."""
        if self.v2 and (self.dirs[0] / "cgroup.kill").exists():
            try:
                (self.dirs[0] / "cgroup.kill").write_text("1")
            except OSError:
                pass
        for _ in range(100):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def remove(self) -> None:
        self.kill_all()
        for directory in self.dirs:
            for _ in range(50):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        break
                    self.kill_all()


def _enable_controllers(parent: Path) -> None:
    """v2: a group gets memory and pids limits only where its parent delegates them."""
    parent.mkdir(parents=True, exist_ok=True)
    enabled = (parent / "cgroup.subtree_control").read_text().split()
    missing = [c for c in ("memory", "pids") if c not in enabled]
    if missing:
        (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))


def stale(owner: str, name: str | None = None) -> list[Cgroup]:
    """The groups of environment kind ``owner`` left by processes that died (named <pid>-...), to be
    removed; only the one called ``name`` if given."""
    hierarchy = version()
    if hierarchy is None:
        return []
    controllers = [""] if hierarchy == 2 else ["memory", "pids"]
    by_name: dict[str, list[Path]] = {}
    for controller in controllers:
        try:
            base = ROOT / controller / _own_path(controller).lstrip("/") / PREFIX
            entries = os.listdir(base)
        except (OSError, CgroupUnavailable):
            continue
        for entry in entries:
            kind, dot, group = entry.partition(".")
            pid = group.partition("-")[0]
            if not dot or kind != owner or (name is not None and group != name):
                continue
            if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
                by_name.setdefault(group, []).append(base / entry)
    return [Cgroup(group, dirs, hierarchy == 2) for group, dirs in by_name.items()]
