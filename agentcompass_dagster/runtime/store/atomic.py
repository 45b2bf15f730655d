"""Atomic, redacted file writes: temp file in the same directory, fsync, rename, fsync the directory.

Readers never see a half-written result: a crash leaves either the old file, the new file, or a
dot-prefixed ``.tmp`` file that no loader takes for a result.
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import os
import threading
from pathlib import Path
from typing import Any

import pydantic_core
from pydantic import BaseModel

from agentcompass_dagster.runtime.store.redact import redact

TMP_SUFFIX = ".tmp"
# Temp names only need to be unique among this process's writers (O_EXCL guards the rest): a counter
# costs nothing, where a random token reads the kernel's entropy pool once per write.
_serial = itertools.count()
# A forked child keeps this pid and counter: its first clash with the parent's names is an O_EXCL retry.
_PID = os.getpid()


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def dumps(value: Any) -> bytes:
    """Redacted, stable JSON bytes."""
    return to_json_bytes(redact(to_jsonable(value)))


def to_json_bytes(data: Any) -> bytes:
    """JSON of an already redacted value: the same text as ``json.dumps(indent=2, ensure_ascii=False)``,
    made by pydantic-core's serializer, which is ten times faster."""
    return pydantic_core.to_json(data, indent=2) + b"\n"


def open_temp(path: Path, data: bytes) -> tuple[Path, int]:
    """A dot-prefixed temp file beside ``path`` holding ``data``, not yet fsynced, and its open fd."""
    while True:
        tmp = path.parent / f".{path.name}.{_PID}-{next(_serial)}{TMP_SUFFIX}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:  # another process with our pid (another pid namespace) wrote here
            continue
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    return tmp, fd


def _write_temp(path: Path, data: bytes, fsync: bool = True) -> Path:
    tmp, fd = open_temp(path, data)
    try:
        if fsync:
            os.fsync(fd)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)
    return tmp


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_line(path: Path, line: bytes, mode: int = 0o644, fsync: bool = True) -> None:
    """Append one newline-terminated line to a JSON-lines log and, with ``fsync``, fsync it (and, for a new
    file, its directory) before returning. A torn last line left by a crashed writer is cut first:
    readers drop it anyway, and a line appended after it would turn it into a corrupt line in the
    middle. Without ``fsync`` the line survives the writer's crash (it is in the page cache) but not
    the machine's: the next fsynced append to the file fsyncs it too."""
    created = not path.exists()
    append_and_close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, mode), line, fsync)
    if created and fsync:
        fsync_dir(path.parent)


def append_and_close(fd: int, line: bytes, fsync: bool = True) -> None:
    """append_line on a descriptor opened O_RDWR | O_APPEND, which it closes: for callers that open the
    file their own way (safe_fs.append_beneath, which follows no symlink)."""
    try:
        append_to(fd, line, fsync)
    finally:
        os.close(fd)


def append_to(fd: int, line: bytes, fsync: bool = True) -> None:
    """append_line on a file its caller holds open (and locked), O_APPEND: cut a torn tail, write, fsync."""
    _drop_torn_tail(fd)
    os.write(fd, line)
    if fsync:
        os.fsync(fd)


def _drop_torn_tail(fd: int) -> None:
    size = os.fstat(fd).st_size
    if not size or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = max(0, size - (1 << 20))
    cut = os.pread(fd, size - start, start).rfind(b"\n")
    if cut < 0 and start:
        start, cut = 0, os.pread(fd, size, 0).rfind(b"\n")
    os.ftruncate(fd, start + cut + 1)


def atomic_write_bytes(path: Path, data: bytes, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically; ``fsync=False`` skips the fsyncs (for caches whose
    loss costs recomputation, never a wrong result)."""
    tmp = _write_temp(path, data, fsync)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        fsync_dir(path.parent)


class DirectorySync:
    """Group commit of one directory's new entries: a writer whose file is fsynced and renamed into
    place calls ``sync`` and returns once an fsync of the directory that began after its rename has
    ended. Writers that finish while an fsync runs share the next one, so N concurrent writers cost
    far fewer than N directory fsyncs, and none returns before its entry is on disk."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._cond = threading.Condition()
        self._requested = 0
        self._synced = 0
        self._syncing = False
        # Kept open between fsyncs: two syscalls fewer for every one.
        self._fd: int | None = None

    def _fsync(self) -> None:
        if self._fd is None:
            self._fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(self._fd)

    def close(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: not self._syncing)
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def sync(self) -> None:
        with self._cond:
            self._requested += 1
            ticket = self._requested
            while self._synced < ticket:
                if self._syncing:
                    self._cond.wait()
                    continue
                self._syncing = True
                covered = self._requested
                self._cond.release()
                try:
                    self._fsync()
                finally:
                    self._cond.acquire()
                    self._syncing = False
                    self._cond.notify_all()
                self._synced = max(self._synced, covered)


_RENAME_NOREPLACE = 1
_AT_FDCWD = -100
_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)
_noreplace_unsupported = False


def rename_noreplace(source: Path, target: Path) -> bool:
    """Rename unless ``target`` exists (False then, nothing moved). renameat2(RENAME_NOREPLACE) where
    the kernel and filesystem offer it; else a hard link of the source, which fails the same way."""
    global _noreplace_unsupported
    if _renameat2 is not None and not _noreplace_unsupported:
        if _renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), _RENAME_NOREPLACE) == 0:
            return True
        code = ctypes.get_errno()
        if code == errno.EEXIST:
            return False
        if code not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(code, os.strerror(code), str(target))
        _noreplace_unsupported = True
    try:
        os.link(source, target)
    except FileExistsError:
        return False
    os.unlink(source)
    return True


def atomic_write_json(path: Path, value: Any, fsync: bool = True) -> None:
    atomic_write_bytes(path, dumps(value), fsync)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, redact(text).encode())


def atomic_write_config(path: Path, text: str) -> None:
    """A file that configures what runs (an instance's dagster.yaml, a workspace), written as given:
    redaction is for records, and a registered secret that is part of a path in it (an environment's env
    value naming the project's directory) would leave ``[REDACTED]`` where the path was (#36)."""
    atomic_write_bytes(path, text.encode())
