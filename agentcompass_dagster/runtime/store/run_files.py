"""Files moved between run directories without changing the source: hard links for files that are never
rewritten, copies of those that get appended to, and a directory set aside rather than deleted."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path


def link_or_copy(source: Path, target: Path) -> bool:
    """A hard link where the filesystem allows one, else a copy; an existing target is kept. False when
    there is no ``source``."""
    try:
        os.link(source, target)
    except FileExistsError:
        pass
    except FileNotFoundError:
        if not source.exists():
            return False
        shutil.copy2(source, target)
    except OSError:
        shutil.copy2(source, target)
    return True


def set_aside(path: Path) -> Path | None:
    """Rename ``path`` to the first free ``<name>.tryN`` beside it; nothing is deleted."""
    if not path.exists():
        return None
    n = 1
    while (aside := path.with_name(f"{path.name}.try{n}")).exists():
        n += 1
    os.rename(path, aside)
    return aside


def copy_durable(source: Path, target: Path, keep: Callable[[Path], bool] = lambda relative: True) -> None:
    """Copy an attempt's durable directory (the files whose relative path ``keep`` accepts). Checkpoint
    blobs and manifests are never rewritten, so they are hard-linked; everything else (the activity log
    that gets appended to, the checkpoint clock that gets touched) is copied, so the source stays as it was."""
    for directory, _, files in os.walk(source):
        relative = Path(directory).relative_to(source)
        for name in files:
            if not keep(relative / name):
                continue
            (target / relative).mkdir(parents=True, exist_ok=True)
            if {"blobs", "manifests"} & set(relative.parts):
                link_or_copy(Path(directory) / name, target / relative / name)
            else:
                shutil.copy2(Path(directory) / name, target / relative / name)
