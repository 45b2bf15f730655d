"""The Model plugin contract: one chat-completion turn with tool calls, in the OpenAI message format.

A model is built once per request from its ModelConfig; each attempt's harness session gets it under the
attempt's limits (``execution.limits``), which the framework enforces: ``complete`` raises
``LimitExceeded`` instead of calling the model once a limit is reached. ``complete`` is a
coroutine, awaited on the attempt's event loop, so an attempt timeout, an orchestration timeout or a Ctrl-C
cancels a call in flight at once (a blocking call in a worker thread could not be abandoned: the process
would wait for it to exit). The ``CallContext`` names the task, the attempt and the turn, so a scripted
model can answer deterministically and a resumed attempt gets the same answer for the same turn.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from agentcompass_dagster.contracts.validation import validate_declaration
from agentcompass_dagster.contracts.records import LimitHit, Price

if TYPE_CHECKING:
    from agentcompass_dagster.contracts.declarations import ModelConfig


class ToolCall(BaseModel):
    """A tool call as the model sent it; ``arguments`` stays the raw text so malformed JSON is visible."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: str = ""

    def parsed_arguments(self) -> dict[str, Any] | None:
        """The arguments as a JSON object, or None when the model sent anything else."""
        try:
            value = json.loads(self.arguments or "{}")
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


class ModelTry(BaseModel):
    """One HTTP request of a model call: a client that retries sends several for one call."""

    model_config = ConfigDict(extra="forbid")

    # The HTTP status, or None when no response came (a timeout, a refused connection: ``error`` says).
    status: int | None = None
    error: str | None = None
    duration_s: float = 0.0


class CallWatch(BaseModel):
    """One model call as the runtime follows it: ``answered`` once the endpoint began a response (an HTTP
    status line below 500 arrived; a 5xx is the server failing, not an answer). The runtime sets it in
    ``CALL_WATCH`` around each call; a plugin that talks HTTP marks it. An attempt cut while a call is
    unanswered asks the model whether its endpoint answers at all (``Model.unresponsive``)."""

    started: float = Field(default_factory=time.monotonic)
    answered: bool = False


# The call in flight in this task (None outside a call).
CALL_WATCH: ContextVar[CallWatch | None] = ContextVar("agentcompass_model_call", default=None)


class ModelTurn(BaseModel):
    """One model response. ``usage`` keeps the provider's own keys (see ``models.usage``); ``duration_s``
    is the whole call's, ``tries`` each request it took (empty when the model sends none)."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: dict[str, Any] = Field(default_factory=dict)
    cost_usd: float | None = None
    model_id: str | None = None
    stop_reason: str | None = None
    duration_s: float = 0.0
    tries: list[ModelTry] = Field(default_factory=list)

    def assistant_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


class CallContext(BaseModel):
    """Which call of an attempt this is: ``turn`` counts the attempt's model calls from 0, and a call sent
    again after an interruption keeps its number."""

    task_id: str = ""
    attempt: int = 1
    turn: int = 0


class ModelError(RuntimeError):
    """A model call that failed after the client's own retries; ``status`` is the HTTP status, if any,
    ``tries`` the requests it took."""

    def __init__(self, message: str, *, status: int | None = None, tries: list[ModelTry] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.tries = tries or []


class LimitExceeded(Exception):
    """The attempt reached one of its limits (``execution.limits``): raised by the model the
    framework hands a harness session, instead of a call it refuses or when ``max_wall_s`` cuts one in
    flight (``in_flight``), and by that session's environment for a command once a limit is reached. A
    harness may catch it to keep its trajectory and return its result; the framework records ``hit``
    on that result whatever the harness returns, and stops a harness that keeps going."""

    def __init__(self, hit: LimitHit, *, in_flight: bool = False) -> None:
        super().__init__(hit.message)
        self.hit = hit
        self.in_flight = in_flight


class ContextOverflow(ModelError):
    """The endpoint refused the request because the conversation is longer than the model's context: a
    harness that can compact its context does so and sends the turn again."""


class Model(ABC):
    """Built once per request from its declaration; ``complete`` is the one call a harness makes."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        raw_price = config.params.get("price")
        self.price = (
            None if raw_price is None else validate_declaration(Price, raw_price, config.file, "model.params.price")
        )

    @property
    def id(self) -> str:
        return self.config.id

    @abstractmethod
    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> ModelTurn:
        """One turn: the model's reply to ``messages`` (OpenAI's chat format) offering ``tools`` (OpenAI's
        function tools), for the call ``context`` names. A failure after the client's own retries raises
        ModelError (its ``status`` when the endpoint gave one): an error of the infrastructure, which
        leaves the attempt out of the denominator; ContextOverflow when the conversation is too long.

        Example::

            async def complete(self, messages, tools, context):
                reply = await self.client.chat.completions.create(model=self.config.model, messages=messages,
                                                                  tools=tools or NOT_GIVEN)
                choice = reply.choices[0]
                return ModelTurn(content=choice.message.content, model_id=reply.model,
                                 tool_calls=[ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
                                             for c in choice.message.tool_calls or []],
                                 usage=reply.usage.model_dump(), stop_reason=choice.finish_reason)
        """

    async def unresponsive(self, waited_s: float) -> str | None:
        """Asked when an attempt's time ran out while a call of this model had waited ``waited_s`` with no
        response: why its endpoint is at fault (it does not answer a probe either), an error naming the
        endpoint; None when the endpoint answers (the model is still at work: the agent's time) or when
        there is no endpoint to ask."""
        return None
