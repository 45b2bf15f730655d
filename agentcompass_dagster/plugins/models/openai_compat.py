"""The `openai_compat` model: chat completions with tool calls through the official `openai` SDK, against
any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp, Ollama).

    model:
      id: qwen-local
      provider: openai_compat
      model: qwen2.5-coder:7b               # the served model name (required)
      base_url: http://127.0.0.1:11434/v1   # optional: else the SDK's default (OPENAI_BASE_URL, else OpenAI)
      api_key_env: OPENAI_API_KEY           # optional: the variable that holds the key
      params:
        timeout_s: 120                      # per HTTP request (a call may take (max_retries + 1) x timeout_s)
        max_retries: 3                      # the SDK's retries of 408, 409, 429, 5xx, timeouts, connection errors
        temperature: 0.0
        max_tokens: 4096
        extra_body: {top_k: 20}             # merged into the request body, for server-specific options
        price: {input: 0.15, output: 0.6}   # USD per million tokens, when the provider reports no cost

The key is read only from the variable ``api_key_env`` names: declarations are copied into run records, so
a key written there would be too. Without ``api_key_env`` a placeholder is sent, as local servers need none.
The key read is registered for redaction, so an endpoint or an agent that echoes it writes it nowhere; a
``base_url`` with credentials in it (``https://user:password@host``) is refused.

Calls go through the SDK's asyncio client, so cancelling the attempt closes the connection of a call in
flight at once. An HTTP 400 that says the context is too long is a ``ContextOverflow``, which a harness
that can compact its context recovers from. An attempt whose time ran out while a call had no response
asks the endpoint for ``GET /models``: no answer to that either (within PROBE_S) makes the attempt an
infrastructure error naming the endpoint; an answer means the model was still generating (a
non-streamed completion has its status line only once it is whole), and the time stays the agent's.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import re
import time
import weakref
from typing import TYPE_CHECKING, Any

from pydantic import Field

from agentcompass_dagster.contracts.declarations import ModelConfig
from agentcompass_dagster.contracts.validation import validate_declaration
from agentcompass_dagster.contracts.model import (
    CallContext,
    ContextOverflow,
    Model,
    ModelError,
    ModelTry,
    ModelTurn,
    ToolCall,
)
from agentcompass_dagster.contracts.errors import field_error
from agentcompass_dagster.plugins.models.endpoint import (
    EndpointParams,
    PLACEHOLDER_KEY,
    read_key,
    refuse_credentials,
    refuse_key_param,
    scrub,
)
from agentcompass_dagster.plugins.models.usage import flat_usage

if TYPE_CHECKING:
    from openai import APIStatusError, AsyncOpenAI
    from openai.types.chat import ChatCompletionMessageToolCallUnion

# How long an endpoint has to answer GET /models once a call of an attempt cut by its time had no response.
PROBE_S = 5.0
# How OpenAI, vLLM, llama.cpp, Ollama and proxies word a 400 for a conversation longer than the context.
OVERFLOW = re.compile(
    r"context[ _-](length|window|size)|maximum context|too many tokens|prompt is too long|"
    r"exceeds? the (available )?context",
    re.IGNORECASE,
)


class OpenAICompatParams(EndpointParams):
    extra_body: dict[str, Any] = Field(default_factory=dict)


class OpenAICompatModel(Model):
    """One SDK client per model, shared by the worker threads that call ``complete``."""

    def __init__(self, config: ModelConfig) -> None:
        refuse_key_param(config.params)
        super().__init__(config)
        self.params = validate_declaration(OpenAICompatParams, config.params, config.file, "model.params")
        if not config.model:
            raise field_error("model.model", config.model, "provider 'openai_compat' needs the served model's name")
        refuse_credentials(config.base_url)
        self._api_key = read_key(config.api_key_env, config.file)
        # One client per event loop: an asyncio client's connections belong to the loop that opened them,
        # and a model built once per process serves the loops of several orchestrations (Dagster steps).
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncOpenAI] = weakref.WeakKeyDictionary()

    @functools.cached_property
    def base_url(self) -> str:
        """The endpoint as the SDK calls it (its default when none is declared), for messages. Not made
        when the model is: what only checks the declaration (the CLI, a step loading tasks) need not
        import the SDK."""
        return str(self._client().base_url)

    def _client(self) -> AsyncOpenAI:
        # Imported here: the SDK takes about half a second to import, which `agentcompass --help` should not pay.
        import openai

        from agentcompass_dagster.plugins.models.transport import RecordingTransport

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        client = self._clients.get(loop) if loop is not None else None
        if client is None:
            client = openai.AsyncOpenAI(
                api_key=self._api_key or PLACEHOLDER_KEY,
                base_url=self.config.base_url,
                timeout=self.params.timeout_s,
                max_retries=self.params.max_retries,
                http_client=openai.DefaultAsyncHttpxClient(transport=RecordingTransport()),
            )
            if loop is not None:
                self._clients[loop] = client
        return client

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> ModelTurn:
        import openai
        from openai.types.chat import ChatCompletion

        from agentcompass_dagster.plugins.models.transport import TRIES

        request: dict[str, Any] = {"model": self.config.model, "messages": messages}
        if tools:
            request["tools"] = tools
        if self.params.temperature is not None:
            request["temperature"] = self.params.temperature
        if self.params.max_tokens is not None:
            request["max_tokens"] = self.params.max_tokens
        if self.params.extra_body:
            request.update(self.params.extra_body)
        started = time.monotonic()
        tries: list[ModelTry] = []
        recording = TRIES.set(tries)
        try:
            # The body is JSON already: posted as it is, without the SDK's walk of every message against
            # its parameter types (chat.completions.create), which costs more CPU than the call itself.
            response = await self._client().post("/chat/completions", body=request, cast_to=ChatCompletion)
        except openai.APITimeoutError:
            raise self._error(
                f"no response within timeout_s={self.params.timeout_s:g}{self._tries()}", tries=tries
            ) from None
        except openai.APIConnectionError:
            raise self._error(f"cannot connect{self._tries()}", tries=tries) from None
        except openai.APIStatusError as exc:
            problem = _status_problem(exc)
            if exc.status_code == 400 and OVERFLOW.search(problem):
                raise self._error(problem, status=400, overflow=True, tries=tries) from None
            transient = exc.status_code in (408, 409, 429) or exc.status_code >= 500
            raise self._error(
                problem + (self._tries() if transient else ""), status=exc.status_code, tries=tries
            ) from None
        except (openai.OpenAIError, ValueError) as exc:
            # ValueError: the SDK lets a body that is not JSON escape as json.JSONDecodeError.
            raise self._error(f"unusable response: {exc}", tries=tries) from None
        finally:
            TRIES.reset(recording)
        duration = time.monotonic() - started
        if not response.choices:
            error = getattr(response, "error", None)
            raise self._error(f"the response has no choices{f': {error}' if error else ''}", tries=tries)
        choice = response.choices[0]
        usage = flat_usage(response.usage)
        return ModelTurn(
            content=choice.message.content,
            tool_calls=[self._tool_call(call, i, context) for i, call in enumerate(choice.message.tool_calls or [])],
            usage=usage,
            cost_usd=_provider_cost(usage),
            model_id=response.model or self.config.model,
            stop_reason=choice.finish_reason,
            duration_s=duration,
            tries=tries,
        )

    async def unresponsive(self, waited_s: float) -> str | None:
        import openai

        try:
            await self._client().with_options(timeout=PROBE_S, max_retries=0).models.list()
        except openai.APIStatusError as exc:
            if exc.status_code < 500:
                return None  # a 404 from a server without the route is an answer all the same
            outcome = f"HTTP {exc.status_code}"
        except openai.APITimeoutError:
            outcome = f"no response within {PROBE_S:g}s"
        except openai.APIConnectionError:
            outcome = "cannot connect"
        except (openai.OpenAIError, ValueError):
            return None  # it answered, with a body the SDK cannot read
        else:
            return None
        return (
            f"model endpoint {self.base_url} gave no response in {waited_s:.1f}s, when the attempt's time ran "
            f"out (model {self.id!r}, {self.config.model}); GET /models: {outcome}"
        )

    def _tool_call(self, call: ChatCompletionMessageToolCallUnion, index: int, context: CallContext) -> ToolCall:
        function = getattr(call, "function", None)
        if function is None:
            raise self._error(
                f"tool call {index} is of type {getattr(call, 'type', None)!r}; only function tools are sent"
            )
        arguments = function.arguments
        if not isinstance(arguments, str):
            # Some servers send the arguments as a JSON object instead of its text.
            arguments = "" if arguments is None else json.dumps(arguments)
        # Some local servers send no id; the transcript needs one to pair the tool result with the call.
        return ToolCall(id=call.id or f"call_{context.turn}_{index}", name=function.name or "", arguments=arguments)

    def _tries(self) -> str:
        """What the SDK's retries added to a call, so a timeout says how long the call really took."""
        retries = self.params.max_retries
        return f" ({retries + 1} tries: max_retries={retries})" if retries else ""

    def _error(
        self, problem: str, *, status: int | None = None, overflow: bool = False, tries: list[ModelTry] | None = None
    ) -> ModelError:
        problem = scrub(problem, self._api_key)
        hint = ""
        if status in (401, 403) and not self.config.api_key_env:
            hint = " (no api_key_env is declared, so no key was sent)"
        error = ContextOverflow if overflow else ModelError
        return error(
            f"model {self.id!r} ({self.config.model} at {self.base_url}): {problem}{hint}", status=status, tries=tries
        )


def _status_problem(exc: APIStatusError) -> str:
    """The status with the server's error message, or with its raw text when the body is not JSON."""
    detail = exc.message.removeprefix(f"Error code: {exc.status_code}").removeprefix(" - ")
    if not detail and isinstance(exc.body, str):
        detail = exc.body.strip()
    return f"HTTP {exc.status_code}: {detail}" if detail else f"HTTP {exc.status_code}"


def _provider_cost(usage: dict[str, Any]) -> float | None:
    cost = usage.get("cost")
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not math.isfinite(cost) or cost < 0:
        return None
    return float(cost)
