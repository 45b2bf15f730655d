"""Content-addressed checkpoints of an attempt's managed roots: working dir, agent home, artifact dirs
(R-CKPT-1, R-CKPT-2).

Layout below the store root::

    blobs/<2 hex>/<62 hex>     zlib-compressed content, named by the SHA-256 of the (filtered) content
    manifests/<seq:08d>.json   one Manifest (durable/manifest.py) per checkpoint
    clock                      a marker touched to read the filesystem clock (Manifest.clock_ns)

A blob is created once (no-clobber link of a finished temp file) and never changed, so checkpoints share
every unchanged file and two files with one content share one blob. The manifest is the commit point: it
is written atomically after every blob it names is durable, so a crash mid-capture leaves at most
unreferenced blobs and dot-prefixed temp files.

Capture cost grows with what changed: a file whose (size, mtime_ns, inode, ctime_ns) equal those in the
reference manifest keeps its digest without being opened. Stated limit: a content change that leaves size,
mtime_ns, inode and ctime_ns all identical is not seen. ctime cannot be set from user space, so that takes
clock tampering or writing to the block device. A change within the same filesystem clock tick as the
capture that read the file is caught by the racy-git rule (Manifest.clock_ns).

Managed files are the regular files below a root minus credential paths, and minus paths that name a secret
(a directory called after a password: its name must not reach a manifest, and a name written redacted could
not be restored). Symlinks and special files are never followed or read (Manifest.skipped); credential paths
are never read (Manifest.excluded); text in redacted roots (the agent's home by default) is stored redacted,
so it is restored redacted. Restore replaces the managed files of each root with the checkpoint's, keeps
unmanaged entries, and swaps the rebuilt tree in with one rename per root.

Other limits: kept per file are content, permission bits and mtime, and per directory its mode (so empty
directories come back); ownership, xattrs, ACLs, hard-link identity and directory mtimes are not. Restore
replaces the root directory's inode (its path and mode stay): a process whose cwd is inside a root must
be restarted. Roots must not nest or contain the store, and each root's parent must be writable and on
the root's filesystem (a root that is a mount point cannot be swapped). A store is used by one thread.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from stat import S_IMODE, S_ISREG
from typing import Final, Literal

from agentcompass_dagster.durable import file_tree
from agentcompass_dagster.durable.file_tree import CHUNK
from agentcompass_dagster.durable.manifest import FileEntry, Manifest, same_files
from agentcompass_dagster.runtime.store.atomic import (
    TMP_SUFFIX,
    atomic_write_bytes,
    fsync_dir,
)
from agentcompass_dagster.contracts.records import utcnow

BLOBS = "blobs"
MANIFESTS = "manifests"
CLOCK = "clock"
# A file with more data than this is left out of checkpoints (an agent can write gigabytes); holes of a
# sparse file do not count.
MAX_FILE_BYTES = 512 << 20
# A checkpoint follows every step, so compression speed matters more than ratio.
COMPRESS_LEVEL = 1


class CheckpointError(Exception):
    """A checkpoint cannot be captured or restored as asked; restore leaves the roots untouched."""


@dataclass
class CaptureStats:
    files_read: int = 0
    files_reused: int = 0  # digest taken from the reference manifest without opening the file
    bytes_read: int = 0
    blobs_written: int = 0
    bytes_written: int = 0  # compressed bytes of the new blobs


class CheckpointStore:
    """Checkpoints below ``root``; see the module docstring for the layout and the guarantees."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._blobs = self.root / BLOBS
        self._manifests = self.root / MANIFESTS
        self._clock_path = self.root / CLOCK
        for directory in (self._blobs, self._manifests):
            directory.mkdir(parents=True, exist_ok=True)
        # Created when missing, never touched here: opening a recorded run's store (replay) must not change it.
        os.close(os.open(self._clock_path, os.O_WRONLY | os.O_CREAT, 0o644))
        # The manifest last captured or restored, with the stat of the files as they are now on disk.
        self._reference: Manifest | None = None
        self.last_capture_stats: CaptureStats | None = None

    def seqs(self) -> list[int]:
        with os.scandir(self._manifests) as entries:
            return sorted(int(e.name[:-5]) for e in entries if e.name.endswith(".json") and e.name[:-5].isdigit())

    def latest(self) -> int | None:
        seqs = self.seqs()
        return seqs[-1] if seqs else None

    def manifest(self, seq: int) -> Manifest:
        try:
            return Manifest.model_validate_json(self._manifest_path(seq).read_bytes())
        except FileNotFoundError:
            raise CheckpointError(f"no checkpoint {seq} in {self.root}") from None

    def stored_bytes(self) -> int:
        """Bytes of all blobs and manifests (apparent sizes; temp files left by a crash not counted)."""
        total = sum(file_tree.sizes(self._manifests))
        with os.scandir(self._blobs) as subdirs:
            for subdir in subdirs:
                if subdir.is_dir(follow_symlinks=False):
                    total += sum(file_tree.sizes(Path(subdir.path)))
        return total

    def capture(
        self, seq: int, roots: dict[str, Path], *, redact_roots: frozenset[str] = frozenset({"home"})
    ) -> Manifest:
        """Save the managed files of ``roots`` as checkpoint ``seq`` (an existing one is replaced).

        Only files whose stat differs from the reference manifest's are read: the reference is the
        manifest this store last captured or restored, else the latest on disk before ``seq``. Any
        manifest is a sound reference, since the stat tuple, not the seq, vouches for a digest.

        Files that restore exactly as the reference's are not saved again: the reference is returned
        (its seq, the stat data of this capture), and no manifest is written, so a step that changed no
        file costs a walk of stats and no write. A manifest already at ``seq`` (left by a process that
        crashed after capturing it) is replaced all the same, so no stale checkpoint outlives it.
        """
        for root in roots.values():
            self._check_disjoint(Path(root))
        reference = self._reference if self._reference is not None else self._latest_before(seq)
        stats = CaptureStats()
        touched: set[Path] = set()
        manifest = Manifest(seq=seq, created_at=utcnow(), roots={}, redacted_roots=sorted(redact_roots & roots.keys()))
        for name, root in roots.items():
            redacted = name in redact_roots
            known: dict[str, FileEntry] = {}
            if reference is not None and (name in reference.redacted_roots) == redacted:
                known = reference.roots.get(name, {})
            clock = reference.clock_ns if reference is not None else 0
            self._capture_root(manifest, name, Path(root), redacted, known, clock, stats, touched)
        manifest.clock_ns = self._clock()
        self.last_capture_stats = stats
        if reference is not None and same_files(manifest, reference) and not self._manifest_path(seq).exists():
            self._reference = manifest.model_copy(update={"seq": reference.seq})
            return self._reference
        for subdir in touched:
            fsync_dir(subdir)
        # Not atomic_write_json: its redaction would rewrite paths and entries whose names look secret
        # (a file called tokenizer.json). File contents are filtered before they are hashed instead.
        atomic_write_bytes(self._manifest_path(seq), manifest.model_dump_json().encode())
        self._reference = manifest
        return manifest

    def _capture_root(
        self,
        manifest: Manifest,
        name: str,
        root: Path,
        redacted: bool,
        known: dict[str, FileEntry],
        clock: int,
        stats: CaptureStats,
        touched: set[Path],
    ) -> None:
        """One root into ``manifest``: a file whose stat matches its ``known`` entry (and is older than
        ``clock``) keeps that entry unread."""
        files: dict[str, FileEntry] = {}
        modes: dict[str, int] = {}
        manifest.roots[name], manifest.dirs[name] = files, modes
        if not os.path.lexists(root):
            return
        if os.path.islink(root):
            # An agent that swapped its working dir for a symlink must not have a host tree saved.
            manifest.skipped += 1
            return
        if not os.path.isdir(root):
            raise CheckpointError(f"root {name} is not a directory: {root}")
        for rel, dir_fd, entry, kind in file_tree.walk(str(root)):
            if kind == "dir":
                modes[rel] = S_IMODE(entry.stat(follow_symlinks=False).st_mode)
            elif kind == "excluded":
                manifest.excluded += 1
            elif kind == "skipped":
                manifest.skipped += 1
            else:
                st = entry.stat(follow_symlinks=False)
                old = known.get(rel)
                if old is not None and old.stat == file_tree.stat_key(st) and old.stat[3] < clock:
                    files[rel] = old
                    stats.files_reused += 1
                elif (new := self._capture_file(dir_fd, entry.name, redacted, stats, touched)) is None:
                    manifest.skipped += 1
                elif new == TOO_LARGE:
                    manifest.too_large.append(f"{name}/{rel}")
                else:
                    files[rel] = new

    def restore(self, seq: int, roots: dict[str, Path], owner: tuple[int, int] | None = None) -> None:
        """Make the managed files of each root exactly those of checkpoint ``seq`` (R-CKPT-2); with
        ``owner`` (uid, gid), what it writes belongs to that user (an unprivileged sandbox user).

        Managed files the checkpoint does not list are removed; unmanaged entries (credential paths,
        symlinks, special files) are kept unless a checkpoint path takes their place, so credentials the
        environment provisioned survive. Each root is rebuilt beside itself and swapped in with
        renameat2(RENAME_EXCHANGE); a missing or corrupt blob raises CheckpointError before any root
        changes. A root that does not exist is created.
        """
        manifest = self.manifest(seq)
        if unknown := sorted(roots.keys() - manifest.roots.keys()):
            raise CheckpointError(f"checkpoint {seq} has no root named {', '.join(unknown)}")
        # Not realpath: a root the agent replaced by a symlink is replaced in turn, never followed.
        targets = {name: Path(os.path.abspath(root)) for name, root in roots.items()}
        for target in targets.values():
            self._check_disjoint(target)
        for name in targets:
            for rel, entry in manifest.roots[name].items():
                if not self._blob_path(entry.digest).is_file():
                    raise CheckpointError(
                        f"checkpoint {seq}: blob {entry.digest} of {name}/{rel} is missing "
                        f"({self._blob_path(entry.digest)})"
                    )
        for name, target in targets.items():
            if os.path.islink(target):
                os.unlink(target)
            elif os.path.lexists(target) and not os.path.isdir(target):
                raise CheckpointError(f"root {name} is not a directory: {target}")
        existed = {name: os.path.isdir(target) for name, target in targets.items()}
        staged: dict[str, Path] = {}
        fresh: dict[str, dict[str, FileEntry]] = {}
        try:
            for name, target in targets.items():
                target.parent.mkdir(parents=True, exist_ok=True)
                staged[name] = target.with_name(f"{target.name}.restore-{secrets.token_hex(4)}")
                os.mkdir(staged[name])
                fresh[name] = self._stage(manifest, name, target, staged[name], owner)
            clock = self._clock()
            swapped: list[str] = []
            try:
                for name, target in targets.items():
                    if existed[name]:
                        file_tree.swap(staged[name], target)
                    else:
                        os.rename(staged[name], target)
                    swapped.append(name)
            except BaseException:
                for name in reversed(swapped):
                    if existed[name]:
                        file_tree.swap(staged[name], targets[name])
                    else:
                        os.rename(targets[name], staged[name])
                raise
        finally:
            # After the swaps these hold the previous trees; after a failure, the unused new ones.
            for path in staged.values():
                if os.path.lexists(path):
                    file_tree.discard_tree(path)
        self._reference = manifest.model_copy(update={"roots": {**manifest.roots, **fresh}, "clock_ns": clock})

    def _latest_before(self, seq: int) -> Manifest | None:
        earlier = [s for s in self.seqs() if s < seq]
        return self.manifest(earlier[-1]) if earlier else None

    def _manifest_path(self, seq: int) -> Path:
        return self._manifests / f"{seq:08d}.json"

    def _blob_path(self, digest: str) -> Path:
        return self._blobs / digest[:2] / digest[2:]

    def _clock(self) -> int:
        """The ctime a file changed at this moment gets: the filesystem's coarse clock, not time.time."""
        os.utime(self._clock_path)
        return os.stat(self._clock_path).st_ctime_ns

    def _check_disjoint(self, root: Path) -> None:
        store, managed = os.path.realpath(self.root), os.path.realpath(root)
        if store == managed or store.startswith(managed + os.sep) or managed.startswith(store + os.sep):
            raise CheckpointError(f"the checkpoint store {self.root} and the managed root {root} overlap")

    def _capture_file(
        self, dir_fd: int, name: str, redacted: bool, stats: CaptureStats, touched: set[Path]
    ) -> FileEntry | Literal["too large"] | None:
        """Store one file's content; None when it vanished or stopped being a regular file since the
        directory was listed, TOO_LARGE when it holds more than MAX_FILE_BYTES of data."""
        try:
            # O_NOFOLLOW and O_NONBLOCK: a symlink or FIFO swapped in after the listing is neither
            # followed nor waited on; it fails the regular-file test below.
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return None
            raise
        with open(fd, "rb", buffering=0) as source:
            st = os.fstat(fd)
            if not S_ISREG(st.st_mode):
                return None
            extents = file_tree.data_extents(fd, st) if st.st_blocks * 512 < st.st_size else None
            data = sum(length for _, length in extents) if extents is not None else st.st_size
            if data > MAX_FILE_BYTES:
                return TOO_LARGE
            content = (
                file_tree.extent_content(fd, extents) if extents is not None else file_tree.content(source, redacted)
            )
            digest, size = self._put(content, stats, touched)
        stats.files_read += 1
        stats.bytes_read += data
        # The stat taken before reading: a write during the read changes it, so the next capture rereads.
        return FileEntry(
            digest=digest,
            size=size,
            mode=S_IMODE(st.st_mode),
            mtime_ns=st.st_mtime_ns,
            stat=file_tree.stat_key(st),
            extents=extents,
            apparent_size=st.st_size if extents is not None else None,
        )

    def _put(self, chunks: Iterable[bytes], stats: CaptureStats, touched: set[Path]) -> tuple[str, int]:
        """Stream content into a blob unless one with its digest exists; (digest, size).

        Streamed through a temp file, so a large file never sits in memory whole.
        """
        digest, packer, size = hashlib.sha256(), zlib.compressobj(COMPRESS_LEVEL), 0
        tmp = self._blobs / f".{secrets.token_hex(8)}{TMP_SUFFIX}"
        try:
            with open(tmp, "xb") as out:
                for chunk in chunks:
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(packer.compress(chunk))
                out.write(packer.flush())
                name = digest.hexdigest()
                blob = self._blob_path(name)
                if blob.exists():
                    return name, size
                out.flush()
                os.fsync(out.fileno())
                written = out.tell()
            if not blob.parent.is_dir():
                blob.parent.mkdir(exist_ok=True)
                fsync_dir(self._blobs)
            try:
                os.link(tmp, blob)  # no clobber: a blob, once named, never changes
            except FileExistsError:
                return name, size
            touched.add(blob.parent)
            stats.blobs_written += 1
            stats.bytes_written += written
            return name, size
        finally:
            tmp.unlink(missing_ok=True)

    def _stage(
        self, manifest: Manifest, name: str, live: Path, staged: Path, owner: tuple[int, int] | None
    ) -> dict[str, FileEntry]:
        """Build root ``name`` of the checkpoint in ``staged`` and carry over ``live``'s unmanaged
        entries; the entries with the stat of the files just written."""
        files, modes = manifest.roots[name], manifest.dirs.get(name, {})
        for rel in modes:
            os.makedirs(staged / rel, exist_ok=True)
            if owner is not None:
                os.chown(staged / rel, *owner)
        if owner is not None:
            os.chown(staged, *owner)
        fresh: dict[str, FileEntry] = {}
        for rel, entry in files.items():  # every parent directory is in modes, made above
            fresh[rel] = self._write(staged / rel, entry, f"{name}/{rel}", owner)
        if os.path.isdir(live):
            file_tree.carry_over(live, staged, files, modes)
        # Deepest first, so a directory that loses its write or search bit no longer needs either.
        for rel in sorted(modes, key=lambda r: r.count("/"), reverse=True):
            os.chmod(staged / rel, modes[rel])
        if os.path.isdir(live):
            os.chmod(staged, S_IMODE(os.stat(live).st_mode))
        return fresh

    def _write(self, path: Path, entry: FileEntry, where: str, owner: tuple[int, int] | None) -> FileEntry:
        digest = hashlib.sha256()
        extents = iter(entry.extents or [])
        with open(path, "xb") as out:
            offset, room = next(extents, (0, 0)) if entry.extents is not None else (0, -1)
            for chunk in self._blob_content(entry.digest, where):
                digest.update(chunk)
                # A sparse file's data goes back to its extents: what lies between stays a hole.
                while chunk and room >= 0:
                    while room == 0:
                        offset, room = next(extents)
                    part, chunk = chunk[:room], chunk[room:]
                    os.pwrite(out.fileno(), part, offset)
                    offset, room = offset + len(part), room - len(part)
                if chunk:
                    out.write(chunk)
            if digest.hexdigest() != entry.digest:
                raise CheckpointError(f"blob {entry.digest} of {where} is corrupt ({self._blob_path(entry.digest)})")
            if entry.apparent_size is not None:
                os.ftruncate(out.fileno(), entry.apparent_size)
            out.flush()  # before utime: a later flush would set the mtime again
            os.fchmod(out.fileno(), entry.mode)
            if owner is not None:
                os.fchown(out.fileno(), *owner)
            os.utime(out.fileno(), ns=(entry.mtime_ns, entry.mtime_ns))
            st = os.fstat(out.fileno())
        return entry.model_copy(update={"stat": file_tree.stat_key(st)})

    def _blob_content(self, digest: str, where: str) -> Iterator[bytes]:
        path = self._blob_path(digest)
        unpacker = zlib.decompressobj()
        try:
            with open(path, "rb") as blob:
                while packed := blob.read(CHUNK):
                    while packed:
                        # Bounded output: a blob of a long run of one byte must not inflate in one go.
                        yield unpacker.decompress(packed, CHUNK)
                        packed = unpacker.unconsumed_tail
            yield unpacker.flush()
        except (OSError, zlib.error) as exc:
            raise CheckpointError(f"blob {digest} of {where} is unreadable ({path}): {exc}") from exc
        if not unpacker.eof or unpacker.unused_data:
            raise CheckpointError(f"blob {digest} of {where} is truncated or has trailing data ({path})")


TOO_LARGE: Final = "too large"
