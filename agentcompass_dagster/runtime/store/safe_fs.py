"""Host-side file operations inside a directory tree that an agent could have touched.

An agent under evaluation can plant symlinks anywhere it may write: a host process that opens
``<root>/scratch/check.sh`` or ``<root>/calls/1.out`` by path would follow them to any file of the host.
Every operation here resolves its path *beneath* a root and follows no symlink on the way, including
in the last component: ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`` where the kernel has it (5.6+),
else a walk from the root that opens each component with ``O_NOFOLLOW``. Paths that climb out (``..``)
or name another tree (an absolute path outside the root) are refused, and only regular files are read.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import TypeVar

from agentcompass_dagster.runtime.store.atomic import append_and_close

_SYS_OPENAT2 = 437  # x86_64 and aarch64 alike
_RESOLVE_NO_MAGICLINKS, _RESOLVE_NO_SYMLINKS, _RESOLVE_BENEATH = 0x02, 0x04, 0x08
_libc = ctypes.CDLL(None, use_errno=True)
_openat2_works: bool | None = None
T = TypeVar("T")

# ioctl flags of chattr: an immutable or append-only file cannot be removed, not even by root, until
# they are cleared.
_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS = 0x80086601, 0x40086602
_FS_IMMUTABLE_FL, _FS_APPEND_FL = 0x00000010, 0x00000020


class UnsafePath(OSError):
    """A path that leaves its root, or that leads through or to a symlink or a non-regular file."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def relative(root: Path, path: str | os.PathLike[str]) -> PurePosixPath:
    """``path`` as a path relative to ``root``; absolute paths must lie below root. No ``..``."""
    candidate = PurePosixPath(path)
    if candidate.is_absolute():
        try:
            candidate = candidate.relative_to(PurePosixPath(root))
        except ValueError:
            raise UnsafePath(errno.EXDEV, f"{path} is not below {root}") from None
    if ".." in candidate.parts or not candidate.parts:
        raise UnsafePath(errno.EINVAL, f"{path}: not a path below {root}")
    return candidate


def open_dir(name: str | Path, dir_fd: int | None = None) -> int:
    """A descriptor of the directory ``name`` (relative to ``dir_fd`` if given), never through a symlink
    in its last component."""
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)


def _openat2(dir_fd: int, rel: str, flags: int, mode: int) -> int | None:
    """openat2 beneath dir_fd with no symlink; None where the kernel lacks the call."""
    global _openat2_works
    if _openat2_works is False:
        return None
    # A mode without O_CREAT is EINVAL for openat2.
    how = _OpenHow(
        flags | os.O_CLOEXEC,
        mode if flags & os.O_CREAT else 0,
        _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS,
    )
    fd = _libc.syscall(_SYS_OPENAT2, dir_fd, os.fsencode(rel), ctypes.byref(how), ctypes.sizeof(how))
    if fd >= 0:
        _openat2_works = True
        return int(fd)
    err = ctypes.get_errno()
    if err == errno.ENOSYS and _openat2_works is None:
        _openat2_works = False
        return None
    if err in (errno.ELOOP, errno.EXDEV):
        raise UnsafePath(err, f"{rel}: leads through a symlink or out of its root")
    raise OSError(err, os.strerror(err), rel)


def _walk_open(dir_fd: int, rel: PurePosixPath, flags: int, mode: int) -> int:
    """The O_NOFOLLOW walk for kernels without openat2."""
    current = os.dup(dir_fd)
    try:
        for part in rel.parts[:-1]:
            try:
                nxt = open_dir(part, current)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePath(exc.errno, f"{rel}: leads through a symlink") from None
                raise
            os.close(current)
            current = nxt
        try:
            return os.open(rel.parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=current)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePath(exc.errno, f"{rel}: is a symlink") from None
            raise
    finally:
        os.close(current)


def open_beneath(root: Path, path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """A file descriptor for ``path`` beneath ``root``, following no symlink."""
    rel = relative(root, path)
    root_fd = open_dir(root)
    try:
        fd = _openat2(root_fd, str(rel), flags, mode)
        return fd if fd is not None else _walk_open(root_fd, rel, flags, mode)
    finally:
        os.close(root_fd)


def open_regular_beneath(root: Path, path: str | os.PathLike[str]) -> int:
    """A read-only descriptor for the regular file ``path`` beneath ``root`` (never a FIFO to block on,
    nor a device)."""
    fd = open_beneath(root, path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePath(errno.EINVAL, f"{path}: not a regular file")
    return fd


def read_beneath(root: Path, path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """The bytes of a regular file beneath ``root`` (at most ``limit`` of them)."""
    fd = open_regular_beneath(root, path)
    try:
        chunks, remaining = [], limit
        while remaining is None or remaining > 0:
            chunk = os.read(fd, 1 << 20 if remaining is None else min(1 << 20, remaining))
            if not chunk:
                break
            chunks.append(chunk)
            if remaining is not None:
                remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def makedirs_beneath(
    root: Path, path: str | os.PathLike[str], mode: int = 0o755, owner: tuple[int, int] | None = None
) -> None:
    """Create ``path`` and its missing parents beneath ``root``; an existing symlink on the way is refused."""
    rel = relative(root, path)
    for depth in range(1, len(rel.parts) + 1):
        part = PurePosixPath(*rel.parts[:depth])
        parent_fd = open_beneath(root, part.parent, os.O_RDONLY | os.O_DIRECTORY) if depth > 1 else open_dir(root)
        try:
            try:
                os.mkdir(part.name, mode, dir_fd=parent_fd)
            except FileExistsError:
                info = os.stat(part.name, dir_fd=parent_fd, follow_symlinks=False)
                if not stat.S_ISDIR(info.st_mode):
                    raise UnsafePath(errno.ENOTDIR, f"{part}: exists and is not a directory") from None
                continue
            if owner is not None:
                os.chown(part.name, *owner, dir_fd=parent_fd, follow_symlinks=False)
        finally:
            os.close(parent_fd)


def write_beneath(
    root: Path, path: str | os.PathLike[str], data: bytes, mode: int = 0o644, owner: tuple[int, int] | None = None
) -> None:
    """Write a regular file beneath ``root`` whole: a temp file beside it, renamed over the target (a
    symlink or directory in its place is replaced, never followed). Parents are created as needed."""
    rel = relative(root, path)
    if len(rel.parts) > 1:
        makedirs_beneath(root, rel.parent, owner=owner)
        dir_fd = open_beneath(root, rel.parent, os.O_RDONLY | os.O_DIRECTORY)
    else:
        dir_fd = open_dir(root)
    tmp = f".{rel.name}.{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            if owner is not None:
                os.fchown(fd, *owner)
        finally:
            os.close(fd)
        try:
            os.rename(tmp, rel.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except IsADirectoryError:
            os.unlink(tmp, dir_fd=dir_fd)
            raise UnsafePath(errno.EISDIR, f"{path}: a directory is in the way") from None
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise
    finally:
        os.close(dir_fd)


def append_beneath(root: Path, path: str | os.PathLike[str], line: bytes, mode: int = 0o644) -> None:
    """append_line for a file beneath ``root``, following no symlink: a planted link in its place or on
    its way is refused instead of appended to. Parents are created as needed."""
    rel = relative(root, path)
    if len(rel.parts) > 1:
        makedirs_beneath(root, rel.parent)
    try:
        fd = open_beneath(root, rel, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, mode)
        created = True
    except FileExistsError:
        fd, created = open_beneath(root, rel, os.O_RDWR | os.O_APPEND), False
    append_and_close(fd, line)
    if created:
        dir_fd = open_beneath(root, rel.parent, os.O_RDONLY | os.O_DIRECTORY) if len(rel.parts) > 1 else open_dir(root)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


@contextmanager
def _directory(path: Path) -> Iterator[int]:
    fd = open_dir(path)
    try:
        yield fd
    finally:
        os.close(fd)


def _clear_flags(name: str, dir_fd: int) -> None:
    """Drop the immutable and append-only flags of one entry (directories and regular files only)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return
    try:
        flags = ctypes.c_long(0)
        if fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags) == 0 and flags.value & (_FS_IMMUTABLE_FL | _FS_APPEND_FL):
            flags.value &= ~(_FS_IMMUTABLE_FL | _FS_APPEND_FL)
            fcntl.ioctl(fd, _FS_IOC_SETFLAGS, flags)
    except OSError:
        pass
    finally:
        os.close(fd)


# Directories open at once while a tree is removed; one nested deeper is moved up to the top (a rename,
# which follows nothing) and removed in a later pass, so no depth exhausts the stack or the descriptors.
_MAX_OPEN = 64


def _twice(dir_fd: int, name: str, operation: Callable[[], T], problems: list[str], where: str) -> T | None:
    """``operation`` on the entry ``name`` of ``dir_fd``; where it fails, the entry is unlocked (the agent
    may have set chattr +i or a read-only mode) and it is tried once more. None when it is gone or failed
    twice (then the problem is recorded)."""
    for attempt in (1, 2):
        try:
            return operation()
        except FileNotFoundError:
            return None
        except OSError as exc:
            if attempt == 2:
                problems.append(f"{where}/{name}: {exc.strerror or exc}")
            else:
                _clear_flags(name, dir_fd)
                os.chmod(dir_fd, 0o700)
    return None


def _enter(name: str, dir_fd: int) -> int:
    child = open_dir(name, dir_fd)
    try:
        os.fchmod(child, 0o700)
    except OSError:
        os.close(child)
        raise
    return child


def _moved(name: str, dir_fd: int, new_name: str, new_dir_fd: int) -> bool:
    """``name`` of ``dir_fd`` renamed to ``new_name`` of ``new_dir_fd``: True (for _twice, whose None is a failure)."""
    os.rename(name, new_name, src_dir_fd=dir_fd, dst_dir_fd=new_dir_fd)
    return True


def _listing(dir_fd: int) -> Iterator[os.DirEntry[str]]:
    with os.scandir(dir_fd) as entries:
        return iter(list(entries))


def _empty(top_fd: int, problems: list[str], where: str) -> bool:
    """One depth-first pass emptying the directory open at ``top_fd``; whether it moved a too-deep
    directory up into it (then another pass is due)."""
    moved = False
    # (descriptor, path for messages, name in its parent, entries still to remove)
    stack: list[tuple[int, str, str, Iterator[os.DirEntry[str]]]] = [(top_fd, where, "", _listing(top_fd))]
    try:
        while stack:
            fd, here, name, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                if stack:
                    os.close(fd)
                    parent = stack[-1][0]
                    _twice(parent, name, lambda: os.rmdir(name, dir_fd=parent), problems, stack[-1][1])
                continue
            child_name = entry.name
            if not entry.is_dir(follow_symlinks=False):
                _twice(fd, child_name, lambda: os.unlink(child_name, dir_fd=fd), problems, here)
            elif len(stack) >= _MAX_OPEN:
                aside = f".deep-{secrets.token_hex(8)}"
                done = _twice(fd, child_name, lambda: _moved(child_name, fd, aside, top_fd), problems, here)
                moved = moved or done is not None
            else:
                child = _twice(fd, child_name, lambda: _enter(child_name, fd), problems, here)
                if child is not None:
                    stack.append((child, f"{here}/{child_name}", child_name, _listing(child)))
    finally:
        for fd, *_ in stack[1:]:
            os.close(fd)
    return moved


def _remove_entries(dir_fd: int, problems: list[str], where: str) -> None:
    while _empty(dir_fd, problems, where):
        pass


def remove_tree(path: Path) -> list[str]:
    """Remove ``path`` and everything below it without following symlinks, clearing the immutable and
    append-only flags and read-only modes an agent may have set; returns what could not be removed
    (empty when all of it is gone)."""
    problems: list[str] = []
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return problems
    if not stat.S_ISDIR(info.st_mode):
        try:
            os.unlink(path)
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
        return problems
    try:
        with _directory(path) as fd:
            _remove_entries(fd, problems, str(path))
        for attempt in (1, 2):
            try:
                os.rmdir(path)
                break
            except OSError as exc:
                if attempt == 2:
                    problems.append(f"{path}: {exc.strerror or exc}")
                else:
                    with _directory(path.parent) as parent:
                        _clear_flags(path.name, parent)
    except OSError as exc:
        problems.append(f"{path}: {exc.strerror or exc}")
    return problems
