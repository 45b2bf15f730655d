"""The one budget every agent harness obeys (``execution.limits``: turns, tokens, cost, wall time per
attempt), checked the same way by each, so harnesses under comparison stop at the same allowance."""

from __future__ import annotations

from agentcompass_dagster.models.usage import usage_totals
from agentcompass_dagster.contracts.records import AgentLimits, LimitHit, Usage


class LimitExceeded(Exception):
    """The attempt reached one of its limits: it ends, with the limit recorded."""

    def __init__(self, hit: LimitHit) -> None:
        super().__init__(hit.message)
        self.hit = hit


def check_limits(limits: AgentLimits, usages: list[Usage], elapsed_s: float) -> None:
    """Raise LimitExceeded for the first limit the attempt has reached, given the usage of every model
    call it made (one per turn); harnesses check before each model call, so every harness stops at the
    same budget."""
    total = usage_totals(usages)[0]
    used = {"max_turns": len(usages), "max_tokens": total.input_tokens + total.output_tokens,
            "max_cost_usd": sum(u.cost_usd or 0.0 for u in usages), "max_wall_s": elapsed_s}
    for name, amount in used.items():
        allowance = getattr(limits, name)
        if allowance is not None and amount >= allowance:
            raise LimitExceeded(LimitHit(limit=name, allowance=allowance, used=round(amount, 6)))  # type: ignore[arg-type]


def wall_left(limits: AgentLimits, elapsed_s: float) -> float | None:
    """How long the call or command in flight may take before max_wall_s; None without that limit."""
    return None if limits.max_wall_s is None else max(0.0, limits.max_wall_s - elapsed_s)
