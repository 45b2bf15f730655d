"""What a failed LiteLLM request was, for the `litellm` model's retries: the HTTP status the provider
answered, or the transport error when no response came; whether it is worth another try (408, 409, 429,
5xx, timeouts and connection errors, as the `openai` SDK retries them) and how long to wait first.

LiteLLM maps every provider's errors onto the OpenAI exception classes, with the status on
``status_code`` and the response's headers on ``litellm_response_headers``; a request that got no response
at all keeps the HTTP client's error in its chain of causes.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from types import ModuleType
from typing import Any

import httpx

# A retry-after the provider asks for is honoured up to this long; past it (or without one) the wait
# backs off exponentially, as the `openai` SDK does.
MAX_RETRY_AFTER_S = 60.0
INITIAL_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
# LiteLLM's messages start with the exception classes it went through ("litellm.RateLimitError: ...").
_CLASS_PREFIX = re.compile(r"^(?:(?:litellm\.)?[A-Za-z]+(?:Error|Exception|Timeout): )+")


@dataclass
class Failure:
    status: int | None  # None: no response came (``error`` names the transport error)
    error: str | None
    problem: str
    transient: bool
    overflow: bool = False
    retry_after_s: float | None = None

    def wait_s(self, retry: int) -> float:
        """How long to wait before retry number ``retry`` (from 0)."""
        if self.retry_after_s is not None and 0 < self.retry_after_s <= MAX_RETRY_AFTER_S:
            return self.retry_after_s
        return min(INITIAL_BACKOFF_S * 2**retry, MAX_BACKOFF_S) * (1 - 0.25 * random.random())


def failure_of(exc: Exception, litellm: ModuleType, timeout_s: float) -> Failure:
    """``exc``, raised by ``litellm.acompletion``, as a Failure."""
    if isinstance(exc, litellm.ContextWindowExceededError):
        return Failure(status=400, error=None, problem=f"HTTP 400: {_detail(exc)}", transient=False, overflow=True)
    if isinstance(exc, litellm.Timeout):
        return Failure(
            status=None, error="Timeout", problem=f"no response within timeout_s={timeout_s:g}", transient=True
        )
    transport = _transport_error(exc)
    if transport is not None:
        problem = "cannot connect" if isinstance(transport, httpx.ConnectError) else f"no response: {transport}"
        return Failure(status=None, error=type(transport).__name__, problem=problem, transient=True)
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or isinstance(status, bool):
        return Failure(
            status=None, error=type(exc).__name__, problem=f"unusable response: {_detail(exc)}", transient=False
        )
    headers = _headers(exc)
    should_retry = str(headers.get("x-should-retry", "")).lower()
    transient = status in (408, 409, 429) or status >= 500
    if should_retry in ("true", "false"):
        transient = should_retry == "true"
    return Failure(
        status=status,
        error=None,
        problem=f"HTTP {status}: {_detail(exc)}",
        transient=transient,
        retry_after_s=_retry_after_s(headers),
    )


def _detail(exc: Exception) -> str:
    return _CLASS_PREFIX.sub("", str(exc)).strip()


def _transport_error(exc: BaseException) -> httpx.TransportError | None:
    """The HTTP client's error behind ``exc`` when the request got no response (LiteLLM reports a refused
    connection as a 500 of its own)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, httpx.TransportError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _headers(exc: Exception) -> Any:
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    return headers if hasattr(headers, "get") else {}


def _retry_after_s(headers: Any) -> float | None:
    """``retry-after-ms``, else ``retry-after`` in seconds or as an HTTP date."""
    try:
        return float(headers.get("retry-after-ms")) / 1000
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None
