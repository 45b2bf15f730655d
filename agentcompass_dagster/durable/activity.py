"""The activity log of one attempt (R-LOG-1, R-LOG-2): ``activity.jsonl``, append-only. Every record
is written before the step goes on, so a killed process loses none; what must also survive a power cut
is fsynced by ``sync``, which the durable session calls before a command starts (durable/session.py).

Every external operation (model call, tool call) gets an ``in_flight`` record before it starts and a
``completed`` record after it, carrying the step's sequence number, its output and the checkpoint saved
for it; the checkpoint is written before the completed record, so a completed step always has its files.
A crash leaves at most one in-flight step without a completion: that is what resume must decide about.
Sessions, phases and context compactions are logged the same way.

Reading tolerates exactly one kind of damage: a torn last line (the crash hit the append). A corrupt
line anywhere before it means the file was damaged some other way and is an error, not something to skip.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentcompass_dagster.runtime.store.atomic import append_line
from agentcompass_dagster.runtime.store.redact import redact

Kind = Literal["session", "phase", "model_call", "tool_call", "compaction"]
Status = Literal["in_flight", "completed", "aborted", "interrupted"]
ACTIVITY_FILE = "activity.jsonl"


class ActivityError(Exception):
    pass


class ActivityRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    kind: Kind
    status: Status
    seq: int | None = None
    checkpoint_seq: int | None = None
    at: float = Field(default_factory=time.time)
    # Time the attempt has been running, summed over every process that worked on it (R-RESUME-3).
    elapsed_s: float = 0.0
    data: dict[str, Any] = Field(default_factory=dict)


class ActivityLog:
    def __init__(self, path: Path, *, redacted: bool = True) -> None:
        self.path = Path(path)
        self.redacted = redacted
        self._records: list[ActivityRecord] | None = None
        # Records appended, and how many of them an fsync has made durable.
        self._appended = self._synced = 0

    def records(self) -> list[ActivityRecord]:
        if self._records is None:
            self._records = read_activity(self.path)
        return self._records

    def append(self, record: ActivityRecord) -> ActivityRecord:
        records = self.records()
        if (
            record.status == "completed"
            and record.kind in ("model_call", "tool_call", "compaction")
            and record.seq is None
        ):
            record.seq = self.next_seq()
        payload = record.model_dump(mode="json")
        if self.redacted:
            payload = redact(payload)
        line = (json.dumps(payload, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        if not records:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # A new log is made durable at once (its directory entry too); records after it by ``sync``.
        append_line(self.path, line, 0o600, fsync=not records)
        records.append(record)
        self._appended += 1
        return record

    def sync(self) -> None:
        """Make every record appended so far survive a power cut (an fsync, when any is not yet)."""
        appended = self._appended
        if self._synced == appended:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._synced = appended

    def next_seq(self) -> int:
        # Seqs are handed out in append order, so the newest one is the largest.
        return 1 + next((r.seq for r in reversed(self.records()) if r.seq is not None), 0)

    def last_checkpoint_seq(self) -> int | None:
        for record in reversed(self.records()):
            if record.checkpoint_seq is not None:
                return record.checkpoint_seq
        return None

    def in_flight(self) -> list[ActivityRecord]:
        """In-flight records of external operations that never got a completed, aborted or interrupted one."""
        closed = {r.id for r in self.records() if r.status != "in_flight"}
        return [
            r
            for r in self.records()
            if r.status == "in_flight" and r.id not in closed and r.kind in ("model_call", "tool_call")
        ]

    def elapsed_s(self) -> float:
        records = self.records()
        return records[-1].elapsed_s if records else 0.0


def open_durations(records: list[ActivityRecord]) -> dict[str, float]:
    """Seconds from each in-flight record to the record that closed it (completed, aborted or
    interrupted), by id: the time of a model call that failed, a limit cut or a crash interrupted, which
    its response cannot report."""
    opened: dict[str, float] = {}
    durations: dict[str, float] = {}
    for record in records:
        if record.status == "in_flight":
            opened[record.id] = record.elapsed_s
        elif record.id in opened:
            durations[record.id] = record.elapsed_s - opened.pop(record.id)
    return durations


def read_activity(path: Path) -> list[ActivityRecord]:
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    lines = raw.split(b"\n")
    records: list[ActivityRecord] = []
    # Only an unterminated last line can be torn; every terminated line was fsynced whole.
    last = len(lines) - 1
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(ActivityRecord.model_validate(json.loads(line)))
        except (ValueError, ValidationError) as exc:
            if number - 1 == last:
                break
            raise ActivityError(
                f"{path}: line {number} is corrupt ({type(exc).__name__}); "
                "the activity log was damaged, not torn by a crash"
            ) from None
    return records
