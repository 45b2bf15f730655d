"""Each attempt's files beside its detail, in ``<run>/artifacts/<task>@<attempt>/``: a task image's build
log, what the verifier left in /logs/verifier, the agent's logs."""

from __future__ import annotations

import os
from pathlib import Path

from agentcompass_dagster.runtime.store.atomic import atomic_write_bytes
from agentcompass_dagster.runtime.store.layout import ARTIFACTS
from agentcompass_dagster.runtime.store.naming import file_stem
from agentcompass_dagster.runtime.store.redact import redact_text
from agentcompass_dagster.runtime.store.run_files import link_or_copy


def save_files(root: Path, files: dict[str, bytes]) -> list[str]:
    """Files below ``root``, each redacted and replaced atomically under the relative name it was given;
    the names written (ValueError for a name that is not a relative path below ``root``)."""
    written = []
    for name, data in files.items():
        parts = [part for part in name.split("/") if part not in ("", ".")]
        if not parts or ".." in parts or any(not part.isprintable() for part in parts):
            raise ValueError(f"attempt file {name!r}: not a relative path below the attempt's directory")
        path = root.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Latin-1 maps every byte to one character and back: text is redacted, binary kept as it is.
        atomic_write_bytes(path, redact_text(data.decode("latin-1")).encode("latin-1"), fsync=False)
        written.append("/".join(parts))
    return written


class AttemptFiles:
    """The attempt files of one run directory."""

    def __init__(self, run_path: Path) -> None:
        self.root = run_path / ARTIFACTS

    def dir(self, task_id: str, attempt: int) -> Path:
        """Where an attempt's files go (made on first use)."""
        return self.root / f"{file_stem(task_id)}@{attempt}"

    def save(self, task_id: str, attempt: int, files: dict[str, bytes]) -> list[str]:
        """Files of an attempt, each redacted and replaced atomically under the relative name it was given;
        the names written. Without fsync: they are evidence for a reader, the verdict is the detail's,
        which is fsynced."""
        return save_files(self.dir(task_id, attempt), files)

    def link(self, source: AttemptFiles, task_id: str, attempts: int) -> None:
        """A reused task's attempt files from ``source``, hard-linked (they are never rewritten)."""
        for attempt in range(1, attempts + 1):
            origin = source.dir(task_id, attempt)
            for directory, _, files in os.walk(origin):
                target = self.dir(task_id, attempt) / Path(directory).relative_to(origin)
                target.mkdir(parents=True, exist_ok=True)
                for name in files:
                    link_or_copy(Path(directory) / name, target / name)
