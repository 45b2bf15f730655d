"""The tool agent's state, rebuilt from the activity log, and what the log becomes in a result: the
trajectory, and the summary that replaces compacted turns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentcompass_dagster.contracts.model import ModelTurn, ToolCall
from agentcompass_dagster.durable.activity import ActivityRecord, open_durations
from agentcompass_dagster.durable.session import observation
from agentcompass_dagster.contracts.records import LimitHit, Usage


def tool_observation(data: dict[str, Any]) -> str:
    """What the model was shown for a tool call: recorded as such for errors, submits and interrupted
    commands; for a command, rendered from its exit code and bounded output (stored once)."""
    if "observation" in data:
        return str(data["observation"])
    return observation(data.get("exit_code"), data.get("output", ""))


@dataclass
class AgentState:
    """The loop's state, rebuilt from the activity log (so resumed and uninterrupted runs agree)."""

    messages: list[dict[str, Any]]
    turns: int = 0
    usages: list[Usage] = field(default_factory=list)
    # Turns a fork inherited from its parent: they count against limits, not as the fork's own spend.
    inherited_usages: list[Usage] = field(default_factory=list)
    pending: list[tuple[str, ToolCall]] = field(default_factory=list)
    final_answer: str | None = None
    error: str | None = None
    limit: LimitHit | None = None
    finished: bool = False
    compactions: int = 0

    @classmethod
    def from_log(cls, records: list[ActivityRecord], system: str, prompt: str) -> AgentState:
        state = cls(messages=[{"role": "system", "content": system}, {"role": "user", "content": prompt}])
        for record in records:
            state.apply(record)
        return state

    def apply(self, record: ActivityRecord) -> None:
        """Advance the state by one logged record; the same for a fresh run, a resume and a fork."""
        if record.kind == "model_call" and record.status == "completed":
            turn = ModelTurn.model_validate(record.data["response"])
            self.messages.append(turn.assistant_message())
            spent = self.inherited_usages if record.data.get("inherited") else self.usages
            spent.append(Usage.model_validate(record.data["usage"]))
            self.pending = [(f"{self.turns}.{i}", call) for i, call in enumerate(turn.tool_calls)]
            self.turns += 1
            if not turn.tool_calls and turn.stop_reason == "length":
                # A reply cut at the token limit is not an answer, however it reads (a small model that
                # never stops fills it with text): the attempt ends as the model's failure.
                self.error = (
                    "the model's reply was cut at its token limit (finish_reason 'length') without a "
                    f"tool call; {len(turn.content or '')} characters of text were not taken as the answer"
                )
                self.finished = True
            elif not turn.tool_calls:
                self.final_answer = turn.content or ""
                self.finished = True
        elif record.kind == "tool_call" and record.status in ("completed", "interrupted"):
            self.pending = [(key, call) for key, call in self.pending if key != record.id]
            self.messages.append(
                {"role": "tool", "tool_call_id": record.data["call"]["id"], "content": tool_observation(record.data)}
            )
            if record.data.get("error"):
                self.error, self.finished = record.data["error"], True
            elif record.data["call"]["name"] == "submit":
                self.final_answer, self.finished = record.data.get("answer", ""), True
        elif record.kind == "compaction" and record.status == "completed":
            start, count = record.data["start"], record.data["count"]
            self.messages[start : start + count] = [{"role": "user", "content": record.data["summary"]}]
            self.compactions += 1
        elif record.kind == "session" and record.status == "completed":
            self.finished = True
            self.error = record.data.get("error")
            if record.data.get("limit"):
                self.limit = LimitHit.model_validate(record.data["limit"])


SUMMARY_HEADER = "Summary of earlier turns (older messages were compacted):"
SUMMARY_LINES = 60


def summarize(messages: list[dict[str, Any]]) -> str:
    """A deterministic summary of replaced turns: what was run and how it ended. Deterministic so a
    resumed attempt and an uninterrupted one compact to the same context. An earlier summary among the
    replaced messages is folded in line by line; only the newest lines are kept, so it stays bounded."""
    lines: list[str] = []
    for message in messages:
        content = message.get("content") or ""
        if message["role"] == "user" and content.startswith(SUMMARY_HEADER):
            lines += content.splitlines()[1:]
        elif message["role"] == "assistant":
            for call in message.get("tool_calls") or []:
                lines.append(f"- called {call['function']['name']} {call['function']['arguments'][:300]}")
        elif message["role"] == "tool":
            lines.append("  -> " + " | ".join(content.splitlines()[:3])[:300])
        elif message["role"] == "user":
            lines.append(f"- note: {content[:300]}")
    return "\n".join([SUMMARY_HEADER, *lines[-SUMMARY_LINES:]])


def trajectory(records: list[ActivityRecord], system: str, prompt: str) -> list[dict[str, Any]]:
    """Every message, model call (with usage, duration and stop reason), tool call (with observation) and
    compaction, in order; a call the attempt's limits refused was never made, so it is none of them."""
    steps: list[dict[str, Any]] = [
        {"type": "message", "role": "system", "content": system},
        {"type": "message", "role": "user", "content": prompt},
    ]
    durations = open_durations(records)
    for record in records:
        if record.status == "in_flight" or record.kind in ("session", "phase") or record.data.get("refused"):
            continue
        step = {"type": record.kind, "status": record.status, "seq": record.seq, **record.data}
        if record.kind == "model_call" and record.status == "aborted":
            step["duration_s"] = durations.get(record.id)
        if record.kind == "model_call" and "response" in record.data:
            response = record.data["response"]
            step.update(
                content=response.get("content"),
                tool_calls=response.get("tool_calls", []),
                model_id=response.get("model_id"),
                duration_s=response.get("duration_s"),
                stop_reason=response.get("stop_reason"),
                tries=response.get("tries", []),
            )
            del step["response"]
        elif record.kind == "tool_call" and "call" in record.data:
            step["observation"] = tool_observation(record.data)
        steps.append(step)
    return steps
