"""``receipt.json``: what a dispatch printed and left, for every outcome (R-DISP-4)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class UsageTotals(BaseModel):
    model_config = ConfigDict(extra="forbid")

    inputTokens: int = 0
    outputTokens: int = 0
    cachedTokens: int = 0
    reasoningTokens: int = 0


class Receipt(BaseModel):
    """Identity, status and error are always present; the rest only where they apply (dumped unset-free)."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["completed", "failed"]
    errorCode: str | None
    error: str | None
    runId: str | None
    runDir: str | None
    specPath: str
    requestedModelId: str | None
    specSha256: str | None
    outputSchemaId: str | None
    causeErrorCode: str | None = None
    finalizationErrorTypes: list[str] | None = None
    receiptFileWritten: bool = True
    usage: UsageTotals | None = None
    totalCostUsd: float | None = None
    costComplete: bool | None = None
    turns: int | None = None
    toolCallCount: int | None = None
    modelCallCount: int | None = None
    actualModelIds: list[str | None] | None = None
    finalMessageSha256: str | None = None
    durationMs: int | None = None
