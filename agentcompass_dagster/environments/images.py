"""A task's own image (issue #36): the digest of the task's build context.

Harbor and Terminal-Bench tasks ship ``environment/Dockerfile`` with a build context whose files the
Dockerfile COPYs and whose setup it RUNs. The digest names the context as the engine is sent it, so one
built once can be found again on every later attempt, run and machine.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile
from pathlib import Path, PurePosixPath
from typing import IO, Any

# What a context may hold once .dockerignore applies: every byte is read for the digest and sent to the
# engine, so a task that forgot to ignore a dataset fails here instead of filling the engine's disk.
MAX_CONTEXT_BYTES = 2 * 1024**3
MAX_CONTEXT_ENTRIES = 100_000
READ_CHUNK = 1 << 20


class TaskImageError(RuntimeError):
    """The task has no image to run in; the message is one line."""


class ImageBuildError(TaskImageError):
    """The task's build context is unusable or the engine could not build it: names the task, the step
    and the build log."""


def context_digest(context: Path, dockerfile: str = "Dockerfile") -> str:
    """The sha256 of what the engine is sent to build ``context``: each entry left by .dockerignore, by
    relative path, type, exec bit, bytes and link target; neither mtimes, owners nor other mode bits
    count (a checkout on another machine has its own), and the archive sent carries none of them."""
    return _pack(context, dockerfile, None)


def _pack(context: Path, dockerfile: str, archive: tarfile.TarFile | None) -> str:
    """The context's digest; with ``archive``, the context is added to it from the same reads."""
    digest = hashlib.sha256(b"agentcompass-context-v1\0" + os.fsencode(dockerfile) + b"\0")
    for relative, status in _entries(context, dockerfile):
        path = context / relative
        name = os.fsencode(relative)
        member = tarfile.TarInfo(relative)
        if stat.S_ISDIR(status.st_mode):
            digest.update(b"d\0" + name + b"\0")
            member.type, member.mode = tarfile.DIRTYPE, 0o755
            if archive is not None:
                archive.addfile(member)
        elif stat.S_ISLNK(status.st_mode):
            target = os.readlink(path)
            digest.update(b"l\0" + name + b"\0" + os.fsencode(target) + b"\0")
            member.type, member.mode, member.linkname = tarfile.SYMTYPE, 0o777, target
            if archive is not None:
                archive.addfile(member)
        else:
            executable = bool(status.st_mode & stat.S_IXUSR)
            digest.update((b"x" if executable else b"f") + b"\0" + name + b"\0" + str(status.st_size).encode() + b"\0")
            member.mode, member.size = (0o755 if executable else 0o644), status.st_size
            _add_file(path, member, digest, archive, context)
    return digest.hexdigest()


def _add_file(path: Path, member: tarfile.TarInfo, digest: Any, archive: tarfile.TarFile | None,
              context: Path) -> None:
    # O_NOFOLLOW: a file swapped for a link after the walk is not followed out of the context.
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as file:
        tee = _Tee(file, digest)
        try:
            if archive is not None:
                archive.addfile(member, tee)
            else:
                while tee.read(READ_CHUNK):
                    pass
        except OSError as exc:
            raise ImageBuildError(f"build context {context}: {member.name} could not be read: {exc}") from exc
        if tee.count != member.size or file.read(1):
            raise ImageBuildError(f"build context {context}: {member.name} changed while it was read")


class _Tee:
    """A file whose bytes also go to a digest as they are read."""

    def __init__(self, file: IO[bytes], digest: Any) -> None:
        self._file = file
        self._digest = digest
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self._file.read(size)
        self._digest.update(data)
        self.count += len(data)
        return data


def _entries(context: Path, dockerfile: str) -> list[tuple[str, os.stat_result]]:
    """The context's entries the engine is sent, sorted by path, each with its lstat; walked without
    following links, with .dockerignore applied as the docker SDK does, and refused past the bounds."""
    from docker.utils.build import PatternMatcher

    _check_dockerfile(context, dockerfile)
    # Like the SDK's exclude_paths (which collects the whole walk first): the engine needs the
    # Dockerfile even when .dockerignore names it.
    matcher = PatternMatcher([*_ignore_patterns(context), f"!{dockerfile}"])
    entries: list[tuple[str, os.stat_result]] = []
    size = 0
    for relative in matcher.walk(str(context)):
        status = os.lstat(context / relative)
        if not (stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode) or stat.S_ISLNK(status.st_mode)):
            raise ImageBuildError(f"build context {context}: {relative} is neither a file, a directory nor a link")
        entries.append((relative, status))
        size += status.st_size if stat.S_ISREG(status.st_mode) else 0
        if len(entries) > MAX_CONTEXT_ENTRIES:
            raise ImageBuildError(f"build context {context}: over {MAX_CONTEXT_ENTRIES} files, directories and "
                                  "links once .dockerignore applies; ignore what the image does not need")
        if size > MAX_CONTEXT_BYTES:
            raise ImageBuildError(f"build context {context}: over {MAX_CONTEXT_BYTES} bytes once .dockerignore "
                                  "applies; ignore what the image does not need")
    return sorted(entries, key=lambda entry: entry[0])


def _check_dockerfile(context: Path, dockerfile: str) -> None:
    relative = PurePosixPath(dockerfile)
    if relative.is_absolute() or ".." in relative.parts:
        raise ImageBuildError(f"dockerfile {dockerfile!r}: not a path inside the build context {context}")
    try:
        regular = stat.S_ISREG(os.lstat(context / relative).st_mode)
    except OSError:
        regular = False
    if not regular:
        raise ImageBuildError(f"no Dockerfile at {context / relative}")


def _ignore_patterns(context: Path) -> list[str]:
    """.dockerignore's patterns, read as the docker SDK's build reads them."""
    path = context / ".dockerignore"
    if not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]
