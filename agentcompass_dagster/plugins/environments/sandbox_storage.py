"""What a sandbox session (environments/sandbox.py) mounts for its files on the host, and its release: the
ext4 disk image that bounds them (``disk_mb``, ``max_files``), the tmpfs of its /tmp (``tmp_mb``), whether
either is full, and the unmounting and removal of what a session, or a dead one, left."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

from agentcompass_dagster.runtime.store.safe_fs import remove_tree

# A disk image left with less than this free is full: the task wrote all it may.
DISK_FULL_BYTES = 1 << 20


def is_full(mount: Path) -> bool:
    disk = os.statvfs(mount)
    return disk.f_bavail * disk.f_frsize < DISK_FULL_BYTES


def dead_files(entry: Path) -> list[str]:
    """A dead session's directory (with its mounts and disk image), or a disk image whose directory is gone."""
    if entry.name.endswith(".img"):
        if not entry.with_name(entry.name[:-4]).exists():
            entry.unlink(missing_ok=True)
        return []
    image = entry.with_name(f"{entry.name}.img")
    return release_root(entry, image if image.exists() else None)


def release_root(root: Path, image: Path | None) -> list[str]:
    """Unmount what a session mounted below ``root`` (its /tmp, then its disk image), then remove it."""
    for mount in (root / "tmp", root):
        if os.path.ismount(mount):
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)
    problems = remove_tree(root)
    if image is not None:
        image.unlink(missing_ok=True)
    return problems


def mount_image(image: Path, target: Path, size_mb: int, max_files: int | None) -> None:
    """A sparse ext4 image of ``size_mb`` with at most ``max_files`` inodes, mounted at ``target`` (no
    setuid, no devices)."""
    with open(image, "xb") as out:
        out.truncate(size_mb * 1024 * 1024)
    inodes = ["-N", str(max_files)] if max_files is not None else []
    _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "lazy_itable_init=1", *inodes, str(image)])
    _run(["mount", "-o", "loop,nosuid,nodev", str(image), str(target)])


def mount_tmp(root: Path, size_mb: int) -> None:
    """The session's /tmp as a tmpfs of ``size_mb`` the host mounts at <root>/tmp (as root): the host sees
    it fill."""
    (root / "tmp").mkdir()
    _run(
        [
            "mount",
            "-t",
            "tmpfs",
            "-o",
            f"size={size_mb}m,mode=1777,nosuid,nodev",
            "tmpfs",
            str(root / "tmp"),
        ]
    )


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise OSError(errno.EIO, f"{' '.join(command[:2])} failed: {done.stderr.strip()[:300]}")
