"""The runtime's own records of how tasks, requests and runs end (R-STORE-5), around the plugins'
(contracts/records.py).

EvaluatedAttempt -> TaskDetail (attempts "1".."k") -> RequestResult (validated metrics) ->
OrchestrationResult (one RequestOutcome per request). Persisted records only grow by fields with defaults
(R-COMPAT-1) and ignore unknown fields, so a run directory written by another version still loads.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from pydantic import Field

from agentcompass_dagster.contracts.records import (
    SCHEMA_VERSION,
    EvaluatedAttempt,
    MetricResult,
    StoredRecord,
    Usage,
)
from agentcompass_dagster.contracts.request import Strategy


# How a request (and the run directory it wrote) ends; before that it is pending, then running.
TerminalStatus = Literal["completed", "failed", "cancelled", "timeout"]
RequestStatus = Literal["pending", "running", TerminalStatus]
# What run_info.json says: a run directory exists once its request runs.
RunDirStatus = Literal["running", TerminalStatus]


class BudgetStatus(StoredRecord):
    """What a sweep's budget allows and what its runs have spent, as the ledger says."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None
    spent_usd: float = 0.0
    spent_tokens: int = 0
    # False once a call's cost was unknown (a model without a price): spent_usd then counts the known ones.
    cost_complete: bool = True

    @property
    def exhausted(self) -> bool:
        return (self.max_cost_usd is not None and self.spent_usd >= self.max_cost_usd) or (
            self.max_tokens is not None and self.spent_tokens >= self.max_tokens
        )

    @property
    def message(self) -> str:
        """ "spent $0.42 of $0.50 (exhausted)", with tokens beside or instead of dollars as declared."""
        parts = []
        if self.max_cost_usd is not None:
            known = "" if self.cost_complete else " known (some calls had no price)"
            parts.append(f"${self.spent_usd:.4g}{known} of ${self.max_cost_usd:g}")
        if self.max_tokens is not None:
            parts.append(f"{self.spent_tokens:,} of {self.max_tokens:,} tokens")
        return f"spent {' and '.join(parts)} ({'exhausted' if self.exhausted else 'left: ' + self._left()})"

    def _left(self) -> str:
        parts = []
        if self.max_cost_usd is not None:
            parts.append(f"${self.max_cost_usd - self.spent_usd:.4g}")
        if self.max_tokens is not None:
            parts.append(f"{self.max_tokens - self.spent_tokens:,} tokens")
        return " and ".join(parts)


class BudgetOutcome(StoredRecord):
    """What the sweep's budget meant for one run (run_info.json): the ledger when the run ended, and the
    tasks it left without a result because the budget was spent (neither failures nor errors: they run
    when the budget is raised)."""

    status: BudgetStatus
    not_run: list[str] = Field(default_factory=list)


class TaskDetail(StoredRecord):
    """A task's terminal record: normal files count in metrics, ``_error_`` files are re-run by reuse."""

    schema_version: int = SCHEMA_VERSION
    task_id: str
    category: str | None = None
    k: int = 1
    strategy: Strategy = "avg"
    attempts: dict[str, EvaluatedAttempt] = Field(default_factory=dict)
    attempts_tried: int = 0
    first_correct_attempt: int | None = None
    correct: bool = False
    score: float = 0.0
    retry_count: int = 0
    error: str | None = None
    # The first attempt's failure the agent caused, when the task has one (see EvaluatedAttempt.failure).
    failure: str | None = None
    finished_at: str | None = None

    @property
    def is_error(self) -> bool:
        return self.error is not None

    @property
    def usage(self) -> Usage:
        total = Usage()
        for attempt in self.attempts.values():
            total = total + attempt.usage
        return total


class RequestResult(StoredRecord):
    name: str
    run_id: str
    run_dir: str
    status: RequestStatus = "completed"
    metadata: dict[str, Any] = Field(default_factory=dict)
    metrics: MetricResult
    summary: str
    paths: dict[str, str] = Field(default_factory=dict)
    applied_recipes: list[str] = Field(default_factory=list)


class RequestOutcome(StoredRecord):
    name: str
    status: RequestStatus
    error: str | None = None
    paths: dict[str, str] = Field(default_factory=dict)
    result: RequestResult | None = None


class OrchestrationResult(StoredRecord):
    id: str
    status: TerminalStatus
    started_at: str
    finished_at: str
    outcomes: dict[str, RequestOutcome] = Field(default_factory=dict)


class PersistedPlan(NamedTuple):
    """What run_info.json and a detail record of a plan: its allow-listed view, and the digest
    run_info.json stores it under."""

    view: dict[str, Any]
    digest: str
