"""A request read back from run_info.json, which holds it redacted, as it ran: each value redaction hid
there is taken from the file its declaration was read from, where that file still declares a value that
fits what was recorded (the secret parts aside). Resume, fork and replay run what the run ran, never the
literal ``[REDACTED]``; a value the file no longer declares stays hidden."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.contracts.declarations import PluginDeclaration
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.declarations.references import load_yaml
from agentcompass_dagster.runtime.store.redact import REDACTED

# Where a sweep file lists the declarations of each field of a request.
SWEEP_LISTS = {"benchmark": "benchmarks", "model": "models"}


def unredacted(request: EvalRequest) -> EvalRequest:
    """``request`` with every hidden value its declarations' files still declare."""
    updates: dict[str, PluginDeclaration] = {}
    for field, declaration in request.declarations().items():
        declared = _declared_now(field, declaration)
        if declared is None:
            continue
        stored = declaration.model_dump(mode="json")
        merged = _merged(stored, declared)
        if merged != stored:
            restored = type(declaration).model_validate(merged)
            if declaration.file is not None:
                restored.read_from(declaration.file)
            updates[field] = restored
    return request.model_copy(update=updates) if updates else request


def _declared_now(field: str, declaration: PluginDeclaration) -> dict[str, Any] | None:
    """The declaration as its file declares it now: the whole file (resources/<kind>/NAME.yaml), or the
    sweep's entry for it (an inline declaration); None where the file or the entry is gone."""
    if declaration.file is None or not Path(declaration.file).is_file():
        return None
    try:
        data = load_yaml(Path(declaration.file))
    except UserError:
        return None
    if not isinstance(data, dict) or "benchmarks" not in data:
        return data if isinstance(data, dict) else None
    entries = data.get(SWEEP_LISTS[field]) if field in SWEEP_LISTS else [data.get(field)]
    found = [e for e in entries or [] if isinstance(e, dict) and e.get("id") == declaration.id]
    return found[0] if len(found) == 1 else None


def _merged(stored: Any, declared: Any) -> Any:
    """``stored`` with each string that holds REDACTED replaced by the declared string at the same place,
    where that fits it (every REDACTED standing for some text)."""
    if isinstance(stored, dict) and isinstance(declared, dict):
        return {key: _merged(value, declared.get(key)) if key in declared else value for key, value in stored.items()}
    if isinstance(stored, list) and isinstance(declared, list) and len(stored) == len(declared):
        return [_merged(s, d) for s, d in zip(stored, declared)]
    if isinstance(stored, str) and REDACTED in stored and isinstance(declared, str):
        pattern = ".+".join(re.escape(part) for part in stored.split(REDACTED))
        return declared if re.fullmatch(pattern, declared, re.DOTALL) else stored
    return stored
