"""The `litellm` model: chat completions with tool calls through LiteLLM, so a sweep can name Anthropic,
Gemini, Bedrock, Vertex, Mistral, Ollama, vLLM ... models, not only OpenAI-compatible endpoints.

    model:
      id: claude-sonnet
      provider: litellm
      model: anthropic/claude-sonnet-4-5    # LiteLLM's <provider>/<model>: anthropic/, gemini/, bedrock/,
                                            # vertex_ai/, mistral/, ollama/, hosted_vllm/, openai/ ...
      base_url: null                        # optional: LiteLLM's api_base (a proxy, a local server)
      api_key_env: ANTHROPIC_API_KEY        # optional: the variable that holds the key, read at each call
      params:
        timeout_s: 120                      # per request (a call may take (max_retries + 1) x timeout_s)
        max_retries: 3                      # our retries of 408, 409, 429, 5xx, timeouts, connection errors
        temperature: 0.0
        max_tokens: 4096
        price: {input: 3.0, output: 15.0}   # USD per million tokens; else LiteLLM's own table, else unknown
        extra: {}                           # more arguments of litellm.acompletion (top_p, aws_region_name ...)

The key is read only from the variable ``api_key_env`` names, when a call is made (a process that only
builds the model, such as a Dagster code location, needs none), and registered for redaction. Without
``api_key_env`` LiteLLM finds its provider's credentials itself (ANTHROPIC_API_KEY, the AWS chain, Google's
ADC), except with a ``base_url``: then a placeholder is sent, so that a key of the host's never goes to an
endpoint the declaration names (Bedrock and Vertex, which sign with cloud credentials, excepted).

LiteLLM's own retries are off (ours are recorded as the call's tries), and so are its logging callbacks
and loggers, which would print requests. It is imported at the first build, not with this module: the
import takes seconds (about 3.7 s here), which `agentcompass --help` should not pay.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import logging
import os
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pydantic import Field

from agentcompass_dagster.contracts.declarations import ModelConfig
from agentcompass_dagster.contracts.model import (
    CALL_WATCH,
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
from agentcompass_dagster.plugins.models.usage import flat_usage, turn_usage
from agentcompass_dagster.runtime.store.redact import is_secret_key
from agentcompass_dagster.contracts.validation import validate_declaration

if TYPE_CHECKING:
    from agentcompass_dagster.plugins.models.litellm_failures import Failure

# Arguments of litellm.acompletion the declaration sets elsewhere (or never: the retries are ours).
RESERVED = {
    "model": "model.model",
    "messages": None,
    "tools": None,
    "stream": None,
    "api_base": "model.base_url",
    "base_url": "model.base_url",
    "timeout": "model.params.timeout_s",
    "num_retries": "model.params.max_retries",
    "max_retries": "model.params.max_retries",
    "temperature": "model.params.temperature",
    "max_tokens": "model.params.max_tokens",
}
# Providers that sign requests with cloud credentials: a placeholder key would replace the signature.
CLOUD_SIGNED = frozenset({"bedrock", "bedrock_converse", "sagemaker", "sagemaker_chat", "vertex_ai", "vertex_ai_beta"})
_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


class LiteLLMParams(EndpointParams):
    extra: dict[str, Any] = Field(default_factory=dict)


def load_litellm() -> ModuleType:
    """LiteLLM, imported quietly: its bundled price table instead of one fetched from GitHub at import,
    no debug banners, its loggers off (a debug log prints the request with its key)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.turn_off_message_logging = True
    for name in _LOGGERS:
        logging.getLogger(name).disabled = True
    return litellm


def _unlogged() -> contextlib.AbstractContextManager[None]:
    """A call LiteLLM neither logs nor bills: no success or failure callbacks, no task of its logging
    worker left on the attempt's event loop. Its marker is internal to LiteLLM: older releases lack it."""
    try:
        from litellm._internal_context import internal_sub_call
    except ImportError:
        return contextlib.nullcontext()
    return internal_sub_call()


class LiteLLMModel(Model):
    def __init__(self, config: ModelConfig) -> None:
        refuse_key_param(config.params)
        super().__init__(config)
        self.params = validate_declaration(LiteLLMParams, config.params, config.file, "model.params")
        refuse_credentials(config.base_url)
        _check_extra(self.params.extra, config.file)
        self.litellm = load_litellm()
        self.provider = _provider(config, self.litellm)
        self.priced_by_litellm = self.price is None and _in_price_table(self.litellm, config.model)

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> ModelTurn:
        from agentcompass_dagster.plugins.models.litellm_failures import failure_of

        key = read_key(self.config.api_key_env, self.config.file)
        request = self._request(messages, tools, key)
        started = time.monotonic()
        tries: list[ModelTry] = []
        retry = 0
        while True:
            try_started = time.monotonic()
            try:
                with _unlogged():
                    response = await self.litellm.acompletion(**request)
            except Exception as exc:  # LiteLLM raises its provider's every failure as some exception
                failure = failure_of(exc, self.litellm, self.params.timeout_s)
                tries.append(
                    ModelTry(status=failure.status, error=failure.error, duration_s=time.monotonic() - try_started)
                )
                _mark_answered(failure.status)
                if not failure.transient or retry >= self.params.max_retries:
                    raise self._error(failure, tries, key) from None
                await asyncio.sleep(failure.wait_s(retry))
                retry += 1
                continue
            tries.append(ModelTry(status=200, duration_s=time.monotonic() - try_started))
            _mark_answered(200)
            return self._turn(response, context, time.monotonic() - started, tries)

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], key: str | None) -> dict[str, Any]:
        request: dict[str, Any] = {
            **self.params.extra,
            "model": self.config.model,
            "messages": messages,
            "timeout": self.params.timeout_s,
            "num_retries": 0,
            "max_retries": 0,
        }
        if tools:
            request["tools"] = tools
        if self.config.base_url:
            request["api_base"] = self.config.base_url
        if key is None and self.config.base_url and self.provider not in CLOUD_SIGNED:
            key = PLACEHOLDER_KEY
        if key is not None:
            request["api_key"] = key
        if self.params.temperature is not None:
            request["temperature"] = self.params.temperature
        if self.params.max_tokens is not None:
            request["max_tokens"] = self.params.max_tokens
        return request

    def _turn(self, response: Any, context: CallContext, duration: float, tries: list[ModelTry]) -> ModelTurn:
        if not response.choices:
            raise ModelError(f"{self._where()}: the response has no choices", tries=tries)
        choice = response.choices[0]
        usage = flat_usage(getattr(response, "usage", None))
        return ModelTurn(
            content=choice.message.content,
            tool_calls=[_tool_call(call, i, context) for i, call in enumerate(choice.message.tool_calls or [])],
            usage=usage,
            cost_usd=self._cost(response, usage),
            model_id=response.model or self.config.model,
            stop_reason=choice.finish_reason,
            duration_s=duration,
            tries=tries,
        )

    def _cost(self, response: Any, usage: dict[str, Any]) -> float | None:
        """The declared price's figure, else LiteLLM's price table's when it knows the model, else unknown."""
        if self.price is not None:
            return turn_usage(usage, None, self.price).cost_usd
        if not self.priced_by_litellm:
            return None
        try:
            cost = self.litellm.completion_cost(completion_response=response, model=self.config.model)
        except Exception:  # a response it cannot price is a cost we do not know
            return None
        return float(cost) if isinstance(cost, (int, float)) and cost >= 0 else None

    def _where(self) -> str:
        at = f" at {self.config.base_url}" if self.config.base_url else ""
        return f"model {self.id!r} ({self.config.model}{at})"

    def _error(self, failure: Failure, tries: list[ModelTry], key: str | None) -> ModelError:
        problem = scrub(failure.problem, key)
        if failure.transient and self.params.max_retries:
            problem += f" ({len(tries)} tries: max_retries={self.params.max_retries})"
        hint = ""
        if failure.status in (401, 403) and not self.config.api_key_env:
            hint = " (no api_key_env is declared: LiteLLM looked for its provider's variable)"
        error = ContextOverflow if failure.overflow else ModelError
        return error(f"{self._where()}: {problem}{hint}", status=failure.status, tries=tries)


def _mark_answered(status: int | None) -> None:
    """A response arrived (a 5xx is the server failing, not an answer): see CallWatch."""
    watch = CALL_WATCH.get()
    if watch is not None and status is not None and status < 500:
        watch.answered = True


def _tool_call(call: Any, index: int, context: CallContext) -> ToolCall:
    function = call.function
    arguments = function.arguments
    if not isinstance(arguments, str):
        arguments = "" if arguments is None else json.dumps(arguments)
    # Some local servers send no id; the transcript needs one to pair the tool result with the call.
    return ToolCall(id=call.id or f"call_{context.turn}_{index}", name=function.name or "", arguments=arguments)


def _provider(config: ModelConfig, litellm: ModuleType) -> str:
    """The provider prefix of ``model``, one LiteLLM knows; LiteLLM would otherwise guess one from the name."""
    prefix, slash, name = (config.model or "").partition("/")
    known = [str(getattr(p, "value", p)) for p in litellm.provider_list]
    if slash and name and prefix in known:
        return prefix
    near = difflib.get_close_matches(prefix, known, n=1) if slash else []
    hint = f"; did you mean '{near[0]}/{name}'?" if near else ""
    raise field_error(
        "model.model",
        config.model,
        "provider 'litellm' needs LiteLLM's '<provider>/<model>' with a "
        f"provider it knows (anthropic/, gemini/, bedrock/, vertex_ai/, openai/ ...){hint}",
        config.file,
    )


def _in_price_table(litellm: ModuleType, model: str | None) -> bool:
    """Whether LiteLLM's table prices ``model``: for one it does not know, completion_cost falls back to the
    name the response gives and prices what it cannot find at 0, which would read as free."""
    try:
        info = litellm.get_model_info(model=model)
    except Exception:  # ModelNotMappedError, or any failure of its lookup: not a price we can state
        return False
    return info.get("input_cost_per_token") is not None and info.get("output_cost_per_token") is not None


def _check_extra(extra: dict[str, Any], where: str | None) -> None:
    for name in extra:
        if is_secret_key(name):
            raise field_error(
                f"model.params.extra.{name}",
                "***",
                "credentials are not accepted in declarations, "
                "which are copied into run records; name the key's variable in model.api_key_env",
                where,
            )
        if name in RESERVED:
            owner = RESERVED[name]
            problem = f"set it in {owner}" if owner else "the harness sets it"
            raise field_error(f"model.params.extra.{name}", extra[name], problem, where)
