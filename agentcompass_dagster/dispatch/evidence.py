"""What a dispatch derives from its raw transcript: per-turn records, tool-call dependencies, usage
totals, the structured output; and the secret checks the transcript must pass to be kept."""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from pydantic import BaseModel, ConfigDict

from agentcompass_dagster.contracts.model import ModelTurn, ToolCall
from agentcompass_dagster.dispatch.receipt import UsageTotals
from agentcompass_dagster.durable.activity import ActivityRecord
from agentcompass_dagster.plugins.models.usage import usage_totals
from agentcompass_dagster.runtime.store.redact import redact
from agentcompass_dagster.contracts.records import Usage


class TurnRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turn: int
    model_id: str | None
    usage: dict[str, int]
    cost_usd: float | None
    stop_reason: str | None
    duration_s: float


class Dependency(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seq: int
    tool: str
    args: dict[str, Any]
    isError: bool


class OutputInvalid(Exception):
    """The final answer is not the structured output the spec's schema asks for."""


def has_secret(value: Any) -> bool:
    """Whether redaction would change ``value``: the same patterns, so detection never disagrees with
    what the writers scrub."""
    return redact(value) != value


def transcript_has_secret(text: str) -> bool:
    """The raw text and each decoded line: JSON escaping can hide a secret from the text patterns (a
    private key's newlines) and a secret-looking key is only visible once decoded."""
    if has_secret(text):
        return True
    for line in text.splitlines():
        try:
            decoded = json.loads(line)
        except ValueError:
            continue
        if has_secret(decoded):
            return True
    return False


def usage_summary(turns: list[Usage]) -> tuple[UsageTotals, float | None, bool]:
    """Receipt totals over every model turn (R-DISP-4); the arithmetic is models.usage's."""
    total, complete = usage_totals(turns)
    totals = UsageTotals(
        inputTokens=total.input_tokens,
        outputTokens=total.output_tokens,
        cachedTokens=total.cache_read_tokens,
        reasoningTokens=total.reasoning_tokens,
    )
    return totals, total.cost_usd, complete


def turn_records(records: list[ActivityRecord]) -> list[TurnRecord]:
    out = []
    for record in records:
        if record.kind == "model_call" and record.status == "completed":
            turn = ModelTurn.model_validate(record.data["response"])
            usage = Usage.model_validate(record.data["usage"])
            out.append(
                TurnRecord(
                    turn=record.data["turn"] + 1,
                    model_id=turn.model_id,
                    usage=usage.model_dump(exclude={"cost_usd"}),
                    cost_usd=usage.cost_usd,
                    stop_reason=turn.stop_reason,
                    duration_s=turn.duration_s,
                )
            )
    return out


def dependencies(tool_calls: list[dict[str, Any]]) -> list[Dependency]:
    out = []
    for seq, data in enumerate(tool_calls, start=1):
        call = ToolCall.model_validate(data["call"])
        failed = bool(data.get("error")) or data.get("exit_code") not in (None, 0)
        out.append(Dependency(seq=seq, tool=call.name, args=call.parsed_arguments() or {}, isError=failed))
    return out


def structured_output(final_answer: str, schema: Any) -> Any:
    """The final answer as the run's output: its text, or with a schema, its JSON value meeting it."""
    if schema is None:
        return final_answer
    try:
        value = json.loads(final_answer)
    except ValueError as exc:
        raise OutputInvalid(f"the final answer is not JSON: {exc}") from None
    error = best_match(Draft202012Validator(schema).iter_errors(value))
    if error is not None:
        raise OutputInvalid(f"the final answer does not match output_schema at {error.json_path}: {error.message}")
    return value
