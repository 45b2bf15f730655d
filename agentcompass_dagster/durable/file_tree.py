"""The file operations under checkpoints (durable/checkpoints.py): which paths are credentials, walking
a root without following anything, reading files (sparse ones by their data extents, redacted ones as
text), and linking, swapping and discarding whole trees. Every operation works from directory
descriptors and never follows a symlink: the agent may have planted one anywhere in the roots."""

from __future__ import annotations

import codecs
import ctypes
import errno
import io
import logging
import os
import re
import secrets
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from stat import S_IMODE
from typing import Literal

from agentcompass_dagster.runtime.store.redact import redact_text
from agentcompass_dagster.runtime.store.safe_fs import open_dir, remove_tree

log = logging.getLogger(__name__)

CHUNK = 1 << 20

# Credential stores that tools and SDKs keep in a home directory, some also in a checkout. Checkpoints
# outlive the run and are copied into forks, so credentials must never reach one; the environment
# provisions them again when an attempt resumes. A pattern matches the trailing components of a path
# relative to its root (".ssh" at any depth), and "*" never crosses a "/".
CREDENTIAL_DIRS = (".ssh", ".aws", ".gnupg", ".azure", ".kube", ".config/gcloud", ".config/gh")
CREDENTIAL_FILES = (
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".pypirc",
    ".docker/config.json",
    ".env",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
)


def _trailing(patterns: Iterable[str]) -> re.Pattern[str]:
    alternatives = ("[^/]*".join(re.escape(part) for part in pattern.split("*")) for pattern in patterns)
    return re.compile(rf"(?:^|/)(?:{'|'.join(alternatives)})$")


_CREDENTIAL_DIR = _trailing(CREDENTIAL_DIRS)
_CREDENTIAL_FILE = _trailing(CREDENTIAL_FILES)

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)  # glibc >= 2.28
if _renameat2 is not None:
    _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    _renameat2.restype = ctypes.c_int


Kind = Literal["dir", "file", "excluded", "skipped"]


def data_extents(fd: int, st: os.stat_result) -> list[tuple[int, int]]:
    """The (offset, length) runs of a sparse file that hold data."""
    extents, offset = [], 0
    while offset < st.st_size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole is left
                break
            raise
        end = os.lseek(fd, start, os.SEEK_HOLE)
        extents.append((start, end - start))
        offset = end
    return extents


def extent_content(fd: int, extents: list[tuple[int, int]]) -> Iterator[bytes]:
    for start, length in extents:
        done = 0
        while done < length:
            chunk = os.pread(fd, min(CHUNK, length - done), start + done)
            if not chunk:
                return
            done += len(chunk)
            yield chunk


def stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns


def sizes(directory: Path) -> Iterator[int]:
    with os.scandir(directory) as entries:
        for entry in entries:
            if not entry.name.startswith(".") and entry.is_file(follow_symlinks=False):
                yield entry.stat(follow_symlinks=False).st_size


def content(source: io.FileIO, redacted: bool) -> Iterator[bytes]:
    """The content to store: the file's bytes or, in a redacted root, its UTF-8 text redacted."""
    head = source.read(CHUNK)
    if redacted and may_be_text(head):
        whole = head + source.read()
        try:
            text = whole.decode()
        except UnicodeDecodeError:
            yield whole
        else:
            yield redact_text(text).encode()
        return
    yield head
    while chunk := source.read(CHUNK):
        yield chunk


def may_be_text(head: bytes) -> bool:
    """Whether the first chunk decodes as UTF-8, allowing a character cut at its end; binaries in a
    redacted root are then streamed instead of read whole."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def is_utf8(name: str) -> bool:
    if name.isascii():
        return True
    try:
        name.encode()
    except UnicodeEncodeError:  # undecodable bytes, surrogate-escaped by os.scandir; JSON cannot hold them
        return False
    return True


# How deep a walk goes: a directory nested deeper is "skipped" (not entered, carried over as it is), so a
# hostile tree of thousands of levels costs neither the stack nor thousands of descriptors.
MAX_DEPTH = 256


def walk(root: str) -> Iterator[tuple[str, int, os.DirEntry[str], Kind]]:
    """Every entry below ``root`` as (path relative to root, descriptor of its directory, entry, kind),
    parents before children.

    "file" is a managed regular file, "excluded" a credential path or one that names a secret (an
    excluded directory is not entered), "skipped" a symlink, special file, non-UTF-8 name or a directory
    below MAX_DEPTH.
    Directories are opened from their parent's descriptor without following symlinks, so a directory
    swapped for a symlink while the walk runs leads nowhere.
    """
    # (descriptor, path prefix, entries still to yield): the directories being walked, outermost first.
    stack: list[tuple[int, str, Iterator[os.DirEntry[str]]]] = []
    fd = open_dir(root)
    try:
        stack.append((fd, "", _entries(fd)))
        while stack:
            fd, prefix, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                os.close(stack.pop()[0])
                continue
            rel = prefix + entry.name
            kind = _kind(entry, rel, len(stack))
            yield rel, fd, entry, kind
            if kind == "dir":
                try:
                    child = open_dir(entry.name, fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                        continue
                    raise
                stack.append((child, rel + "/", _entries(child)))
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def _entries(fd: int) -> Iterator[os.DirEntry[str]]:
    with os.scandir(fd) as listing:
        return iter(list(listing))


def _kind(entry: os.DirEntry[str], rel: str, depth: int) -> Kind:
    if not is_utf8(entry.name):
        return "skipped"
    if entry.is_dir(follow_symlinks=False):
        if _CREDENTIAL_DIR.search(rel) or names_a_secret(rel):
            return "excluded"
        return "dir" if depth < MAX_DEPTH else "skipped"
    if entry.is_file(follow_symlinks=False):
        return "excluded" if _CREDENTIAL_FILE.search(rel) or names_a_secret(rel) else "file"
    return "skipped"


def names_a_secret(rel: str) -> bool:
    """Whether a path holds a secret redaction scrubs (a directory named after a password): its name must
    not reach a manifest, and a name written redacted could not be restored, so it is left out of
    checkpoints like a credential path."""
    return redact_text(rel) != rel


def link_tree(source_fd: int, dest: str) -> None:
    """Recreate the directory open at ``source_fd`` at dest and hard-link everything else in it;
    nothing is followed. Closes ``source_fd``. Each directory is made relative to its parent's
    descriptor, so no depth is too deep for a path."""
    dest_fd = -1
    try:
        os.mkdir(dest)
        dest_fd = open_dir(dest)
        # (source descriptor, destination descriptor, entries still to link); modes are set on the way out.
        stack = [(source_fd, dest_fd, _entries(source_fd))]
        source_fd = dest_fd = -1
        try:
            while stack:
                source, target, entries = stack[-1]
                entry = next(entries, None)
                if entry is None:
                    stack.pop()
                    os.fchmod(target, S_IMODE(os.fstat(source).st_mode))
                    os.close(source)
                    os.close(target)
                    continue
                if entry.is_dir(follow_symlinks=False):
                    os.mkdir(entry.name, dir_fd=target)
                    child_source = open_dir(entry.name, source)
                    try:
                        child_target = open_dir(entry.name, target)
                    except OSError:
                        os.close(child_source)
                        raise
                    stack.append((child_source, child_target, _entries(child_source)))
                else:
                    os.link(entry.name, entry.name, src_dir_fd=source, dst_dir_fd=target, follow_symlinks=False)
        finally:
            for source, target, _ in stack:
                os.close(source)
                os.close(target)
    finally:
        for fd in (source_fd, dest_fd):
            if fd >= 0:
                os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap a and b in one atomic step; False where the kernel, libc or filesystem cannot."""
    if _renameat2 is None:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def swap(a: Path, b: Path) -> None:
    """Exchange the trees at a and b."""
    if _exchange(a, b):
        return
    # Three renames: not atomic, b is briefly absent. Only where renameat2 is missing.
    aside = b.with_name(f"{b.name}.swap-{secrets.token_hex(4)}")
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)


def discard_tree(path: Path) -> None:
    """Remove a tree, logging rather than raising: a restore has committed or failed by now. The tree
    may be the agent's previous one, locked (chattr +i, read-only directories) however it liked."""
    problems = remove_tree(path)
    if problems:
        log.warning("could not remove %s: %s", path, "; ".join(problems[:3]))


def carry_over(live: Path, staged: Path, files: Collection[str], dirs: Collection[str]) -> None:
    """Hard-link ``live``'s unmanaged entries into ``staged``: a checkpoint neither saves nor removes them.
    Where one collides with a checkpoint path, the checkpoint wins."""
    for rel, dir_fd, entry, kind in walk(str(live)):
        if kind in ("dir", "file") or _collides(rel, files, dirs):
            continue
        dest = staged / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if entry.is_dir(follow_symlinks=False):
            link_tree(open_dir(entry.name, dir_fd), str(dest))
        else:
            os.link(entry.name, dest, src_dir_fd=dir_fd, follow_symlinks=False)


def _collides(rel: str, files: Collection[str], dirs: Collection[str]) -> bool:
    if rel in files or rel in dirs:
        return True
    parent = rel
    while "/" in parent:
        parent = parent.rsplit("/", 1)[0]
        if parent in files:
            return True
    return False
