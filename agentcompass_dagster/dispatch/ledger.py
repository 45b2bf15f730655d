"""``events.jsonl``, the dispatch's ledger: one redacted, fsynced line per event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentcompass_dagster.contracts.model import ModelTurn
from agentcompass_dagster.durable.activity import ActivityRecord
from agentcompass_dagster.runtime.store.atomic import append_line
from agentcompass_dagster.runtime.store.redact import redact
from agentcompass_dagster.contracts.records import utcnow


class LedgerEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    event: str
    at: str = Field(default_factory=utcnow)
    status: Literal["ok", "error"]
    details: dict[str, Any] = Field(default_factory=dict)


class LedgerWriteError(Exception):
    """The ledger failed while the agent ran: the run must stop, since its events would go unrecorded."""


class EventLedger:
    """``events.jsonl``: one redacted line per event, fsynced before ``append`` returns."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, event: str, status: Literal["ok", "error"], details: dict[str, Any] | None = None) -> None:
        record = LedgerEvent(event=event, status=status, details=details or {})
        line = json.dumps(redact(record.model_dump(mode="json")), ensure_ascii=False, separators=(",", ":")) + "\n"
        append_line(self.path, line.encode())

    def agent_record(self, record: ActivityRecord) -> None:
        """The ledger's view of one activity record: what happened, not the bulky payload (the
        transcript keeps that)."""
        data = record.data
        details: dict[str, Any] = {"id": record.id, "seq": record.seq}
        details.update({key: data[key] for key in ("turn", "usage", "command", "exit_code", "error") if key in data})
        if "response" in data:
            turn = ModelTurn.model_validate(data["response"])
            details.update(
                model_id=turn.model_id, stop_reason=turn.stop_reason, tool_calls=[call.name for call in turn.tool_calls]
            )
        if "call" in data:
            details["tool"] = data["call"].get("name")
        failed = record.status in ("aborted", "interrupted") or bool(data.get("error"))
        try:
            self.append(f"agent.{record.kind}.{record.status}", "error" if failed else "ok", details)
        except OSError as exc:
            raise LedgerWriteError(f"{self.path.name}: {type(exc).__name__}: {exc.strerror or exc}") from exc
