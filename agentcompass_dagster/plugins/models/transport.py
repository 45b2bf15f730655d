"""The HTTP transport of the openai_compat model's client: it records every request the SDK sends for a
call (its retries included) as a ModelTry, so a call reports each try, its status or error and duration,
and marks the runtime's watch of the call answered when a status line arrives (``CallWatch``).
Imported with the SDK, not with the plugin. The SDK sends through httpx2 (its own fork of httpx), whose
transport this wraps."""

from __future__ import annotations

import time
from contextvars import ContextVar

import httpx2

from agentcompass_dagster.contracts.model import CALL_WATCH, ModelTry

# The tries of the model call running in this task (the call sets a list; the transport appends to it).
TRIES: ContextVar[list[ModelTry] | None] = ContextVar("agentcompass_model_tries", default=None)


class RecordingTransport(httpx2.AsyncBaseTransport):
    """httpx2's transport, recording each request of the current call: its status or error and duration."""

    def __init__(self) -> None:
        # The SDK's own connection limits (openai's DEFAULT_CONNECTION_LIMITS).
        self._inner = httpx2.AsyncHTTPTransport(
            limits=httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        tries, started = TRIES.get(), time.monotonic()
        try:
            response = await self._inner.handle_async_request(request)
        except Exception as exc:
            if tries is not None:
                tries.append(ModelTry(error=type(exc).__name__, duration_s=time.monotonic() - started))
            raise
        if tries is not None:
            tries.append(ModelTry(status=response.status_code, duration_s=time.monotonic() - started))
        # httpx returns once the status line and headers are in: the body may still be on its way.
        watch = CALL_WATCH.get()
        if watch is not None and response.status_code < 500:
            watch.answered = True
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
