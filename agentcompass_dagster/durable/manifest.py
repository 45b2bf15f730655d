"""The manifest of a checkpoint (durable/checkpoints.py), its commit point: each root's files by path
relative to the root (the digest of each one's blob, its permission bits, mtime and the stat it was read
with), the modes of its directories, and what was left out (credential paths, symlinks and special files,
files over checkpoints.MAX_FILE_BYTES); and whether two manifests restore the same trees."""

from __future__ import annotations

from pydantic import Field

from agentcompass_dagster.contracts.records import StoredRecord


class FileEntry(StoredRecord):
    digest: str
    size: int  # bytes stored and restored: after redaction in a redacted root
    mode: int  # permission bits
    mtime_ns: int
    # size, mtime_ns, inode, ctime_ns of the file as it was read: a file still showing them is unchanged
    stat: tuple[int, int, int, int]
    # A sparse file: its data extents (offset, length), stored back to back, and its apparent size; the
    # holes are restored as holes.
    extents: list[tuple[int, int]] | None = None
    apparent_size: int | None = None


class Manifest(StoredRecord):
    seq: int
    created_at: str
    roots: dict[str, dict[str, FileEntry]]  # root name -> path relative to the root -> file
    dirs: dict[str, dict[str, int]] = Field(default_factory=dict)  # root name -> relative path -> mode
    redacted_roots: list[str] = Field(default_factory=list)
    excluded: int = 0  # credential paths and paths naming a secret left out (a directory counts once)
    skipped: int = 0  # symlinks, special files and non-UTF-8 names left out
    too_large: list[str] = Field(default_factory=list)  # files with more than MAX_FILE_BYTES of data, left out
    # The store's filesystem clock once every file was read. A file whose ctime is not older may have
    # changed again within the same clock tick without its stat changing, so the next capture reads it.
    clock_ns: int = 0


def same_files(a: Manifest, b: Manifest) -> bool:
    """Whether two manifests restore the same trees (the stat data their files were read with aside)."""

    def restored(m: Manifest) -> tuple[object, ...]:
        files = {
            name: {
                rel: (e.digest, e.size, e.mode, e.mtime_ns, e.extents, e.apparent_size) for rel, e in entries.items()
            }
            for name, entries in m.roots.items()
        }
        return m.dirs, m.redacted_roots, m.excluded, m.skipped, m.too_large, files

    return restored(a) == restored(b)
