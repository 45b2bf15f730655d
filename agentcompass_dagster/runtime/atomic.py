"""Atomic, redacted file writes: temp file in the same directory, fsync, rename, fsync the directory.

Readers never see a half-written result: a crash leaves either the old file, the new file, or a
dot-prefixed ``.tmp`` file that no loader takes for a result.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agentcompass_dagster.runtime.redact import redact

TMP_SUFFIX = ".tmp"


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def dumps(value: Any) -> bytes:
    """Redacted, stable JSON bytes."""
    return (json.dumps(redact(to_jsonable(value)), indent=2, ensure_ascii=False, sort_keys=False) + "\n").encode()


def _write_temp(path: Path, data: bytes, durable: bool = True) -> Path:
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}{TMP_SUFFIX}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_line(path: Path, line: bytes, mode: int = 0o644) -> None:
    """Append one newline-terminated line to a JSON-lines log and fsync it (and, for a new file, its
    directory) before returning. A torn last line left by a crashed writer is cut first: readers drop
    it anyway, and a line appended after it would turn it into a corrupt line in the middle."""
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, mode)
    try:
        _drop_torn_tail(fd)
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)


def _drop_torn_tail(fd: int) -> None:
    size = os.fstat(fd).st_size
    if not size or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = max(0, size - (1 << 20))
    cut = os.pread(fd, size - start, start).rfind(b"\n")
    if cut < 0 and start:
        start, cut = 0, os.pread(fd, size, 0).rfind(b"\n")
    os.ftruncate(fd, start + cut + 1)


def atomic_write_bytes(path: Path, data: bytes, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically; ``durable=False`` skips the fsyncs (for caches whose
    loss costs recomputation, never a wrong result)."""
    tmp = _write_temp(path, data, durable)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def atomic_create_bytes(path: Path, data: bytes) -> bool:
    """Create ``path`` atomically unless it exists; False (and nothing written) when it does.

    A hard link of the finished temp file is the no-clobber rename: two writers racing for one name
    cannot both win, and neither overwrites the other.
    """
    tmp = _write_temp(path, data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return True


def atomic_write_json(path: Path, value: Any, durable: bool = True) -> None:
    atomic_write_bytes(path, dumps(value), durable)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, redact(text).encode())
