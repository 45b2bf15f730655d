"""The one budget every agent harness obeys (``execution.limits``: turns, tokens, cost, wall time per
attempt), checked the same way by each, so harnesses under comparison stop at the same allowance."""

from __future__ import annotations

from agentcompass_dagster.runtime.types import AgentLimits, LimitHit, Usage


class LimitExceeded(Exception):
    """The attempt reached one of its limits: it ends, with the limit recorded."""

    def __init__(self, hit: LimitHit) -> None:
        super().__init__(hit.message)
        self.hit = hit


def check_limits(limits: AgentLimits, turns: int, usage: Usage, spent_usd: float, elapsed_s: float) -> None:
    """Raise LimitExceeded for the first limit the attempt has reached; harnesses check before each
    model call, so every harness stops at the same budget."""
    used = {"max_turns": turns, "max_tokens": usage.input_tokens + usage.output_tokens,
            "max_cost_usd": spent_usd, "max_wall_s": elapsed_s}
    for name, amount in used.items():
        allowance = getattr(limits, name)
        if allowance is not None and amount >= allowance:
            raise LimitExceeded(LimitHit(limit=name, allowance=allowance, used=round(amount, 6)))  # type: ignore[arg-type]
