"""The model turns of one agent CLI attempt, answered for the gateway: through the attempt's limits, the
sweep's budget and its activity log (``call_model``), or, while the agent repeats a run that a crash cut
short, from that run's record (resume by replay).

A rerun starts the agent over in a fresh environment. Each request byte-identical to the one the earlier
run sent at the same turn (the gateway's digest of the raw body) gets the response recorded then: no
model call, no cost, no budget. The first request that differs goes to the model, and so does every one
after it. The earlier run's spend stays counted against the attempt's limits (its records are the log's),
and the replayed turns are logged again, marked ``replayed``, with no usage.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from agentcompass_dagster.contracts.model import CallContext, Model, ModelError, ModelTurn
from agentcompass_dagster.contracts.records import SweepBudget, Usage
from agentcompass_dagster.durable.activity import ActivityRecord
from agentcompass_dagster.durable.session import DurableSession
from agentcompass_dagster.gateway.calls import GatewayCall
from agentcompass_dagster.plugins.harnesses.durable_agent import call_model

# A model_call record keeps the messages of its request after the last assistant message (the tool
# results, the prompt), each cut to this many characters: the trajectory shows what the agent sent back
# without the whole history.
REQUEST_TAIL_CHARS = 20_000


class Recorded(BaseModel):
    digest: str
    response: dict[str, Any]


class RerunReplay(BaseModel):
    """What a rerun made of the earlier run's record: ``diverged_at`` is the first turn whose request
    differed from the recorded one (None while every request matched; turns past the record go live)."""

    recorded: int
    replayed: int = 0
    diverged_at: int | None = None


def recorded_turns(records: list[ActivityRecord]) -> list[Recorded]:
    """The turns an earlier run completed, in order (those it replayed itself included)."""
    return [
        Recorded(digest=r.data["digest"], response=r.data["response"])
        for r in records
        if r.kind == "model_call" and r.status == "completed" and "digest" in r.data
    ]


def request_tail(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages after the request's last assistant message, each bounded."""
    start = max((i + 1 for i, m in enumerate(messages) if m.get("role") == "assistant"), default=0)
    tail = []
    for message in messages[start:]:
        content = message.get("content")
        text = content if isinstance(content, str) else str(content)
        tail.append({**message, "content": text[:REQUEST_TAIL_CHARS]})
    return tail


class AttemptTurns:
    """The gateway's Answer for one attempt. The gateway hands a token's calls over one at a time, in the
    order they came (``ModelGateway``), so turns are numbered as the agent made them."""

    def __init__(
        self,
        durable: DurableSession,
        model: Model,
        task_id: str,
        attempt: int,
        budget: SweepBudget | None,
        recorded: list[Recorded],
    ) -> None:
        self.durable = durable
        self.model = model
        self.task_id = task_id
        self.attempt = attempt
        self.budget = budget
        self.recorded = recorded
        self.replay = RerunReplay(recorded=len(recorded)) if recorded else None
        self.turns = 0
        # The endpoint's failure the agent was answered with last: the attempt's error, not the agent's.
        self.model_error: str | None = None

    async def __call__(self, call: GatewayCall) -> ModelTurn:
        turn = self.turns
        extra = {"api": call.api, "digest": call.digest, "request": request_tail(call.messages)}
        replayed = self._replayed(turn, call.digest)
        if replayed is not None:
            self.durable.append(
                ActivityRecord(
                    id=f"model-{turn}",
                    kind="model_call",
                    status="completed",
                    data={
                        "turn": turn,
                        "response": replayed.model_dump(mode="json"),
                        "replayed": True,
                        "usage": Usage().model_dump(mode="json"),
                        **extra,
                    },
                )
            )
            self.turns += 1
            return replayed
        context = CallContext(task_id=self.task_id, attempt=self.attempt, turn=turn)
        try:
            reply, _ = await call_model(
                self.durable, self.model, call.messages, call.tools, context, self.budget, record=extra
            )
        except ModelError as exc:
            self.model_error = f"model {self.model.id!r}: {exc}"
            raise
        self.model_error = None
        self.turns += 1
        return reply

    def summary(self) -> dict[str, Any]:
        """What the attempt's result says of its turns: how many, and what a rerun replayed."""
        return {"turns": self.turns, **({"replay": self.replay.model_dump()} if self.replay else {})}

    def _replayed(self, turn: int, digest: str) -> ModelTurn | None:
        """The recorded response of ``turn`` while the rerun has matched the record so far."""
        report = self.replay
        if report is None or report.diverged_at is not None or turn >= len(self.recorded):
            return None
        if self.recorded[turn].digest == digest:
            report.replayed += 1
            return ModelTurn.model_validate(self.recorded[turn].response)
        report.diverged_at = turn
        return None
