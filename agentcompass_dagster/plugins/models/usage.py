"""Token usage and cost over model turns (R-DISP-4).

Providers name usage fields differently (OpenAI ``prompt_tokens`` with ``cached_tokens`` inside it,
Anthropic ``input_tokens`` beside ``cache_read_input_tokens``, pi ``input`` beside ``cacheRead``). Input
totals include cache reads and writes exactly once;
missing, non-numeric and negative values count 0, so one dirty turn cannot poison a total. Cost is the
provider's when it reports one, else the price table's; a turn with neither makes the total incomplete.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from agentcompass_dagster.contracts.records import Price, Usage

_OUTPUT = ("output", "output_tokens", "completion_tokens")
_CACHE_READ = ("cacheRead", "cache_read_input_tokens", "cached_tokens", "cache_read_tokens")
_CACHE_WRITE = ("cacheWrite", "cache_creation_input_tokens", "cache_write_tokens")
_REASONING = ("reasoning", "reasoning_tokens")


def usage_int(usage: Mapping[str, Any], *keys: str) -> int:
    """The first present key's value as a non-negative int; dirty values count 0."""
    for key in keys:
        if key not in usage:
            continue
        value = usage.get(key)
        if isinstance(value, bool):
            return 0
        try:
            return max(0, int(value or 0))
        except (TypeError, ValueError, OverflowError):
            return 0
    return 0


def flat_usage(usage: BaseModel | None) -> dict[str, Any]:
    """An OpenAI-shaped usage object's scalar fields (provider extras such as OpenRouter's ``cost`` and
    LiteLLM's ``cache_creation_input_tokens`` included), with ``cached_tokens``, ``cache_write_tokens`` and
    ``reasoning_tokens`` lifted out of their detail objects for ``turn_usage``."""
    if usage is None:
        return {}
    raw = usage.model_dump(exclude_none=True)
    flat = {key: value for key, value in raw.items() if not isinstance(value, (dict, list))}
    for details, key in (
        ("prompt_tokens_details", "cached_tokens"),
        ("prompt_tokens_details", "cache_write_tokens"),
        ("completion_tokens_details", "reasoning_tokens"),
    ):
        section = raw.get(details)
        if isinstance(section, dict) and section.get(key) is not None:
            flat[key] = section[key]
    return flat


def turn_usage(raw: Mapping[str, Any], cost_usd: float | None = None, price: Price | None = None) -> Usage:
    """One turn's usage; ``cost_usd`` is the provider's figure, else the price table's, else unknown."""
    cache_read = usage_int(raw, *_CACHE_READ)
    cache_write = usage_int(raw, *_CACHE_WRITE)
    if "input" in raw or "input_tokens" in raw:
        fresh_input = usage_int(raw, "input", "input_tokens")
    else:
        # OpenAI's prompt_tokens already contains the cached part; Anthropic's and pi's input does not.
        fresh_input = max(0, usage_int(raw, "prompt_tokens") - cache_read - cache_write)
    usage = Usage(
        input_tokens=fresh_input + cache_read + cache_write,
        output_tokens=usage_int(raw, *_OUTPUT),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=usage_int(raw, *_REASONING),
        cost_usd=None,
    )
    if cost_usd is not None and cost_usd >= 0:
        usage.cost_usd = float(cost_usd)
    elif price is not None:
        usage.cost_usd = (
            fresh_input * price.input
            + cache_read * (price.input if price.cache_read is None else price.cache_read)
            + cache_write * (price.input if price.cache_write is None else price.cache_write)
            + usage.output_tokens * price.output
        ) / 1_000_000
    return usage


def usage_totals(turns: Iterable[Usage]) -> tuple[Usage, bool]:
    """Sum of turn usages and whether the cost is complete: with any turn's cost unknown the total cost
    is None, not a partial sum that would read as the whole (R-DISP-4)."""
    total = Usage(cost_usd=None)
    known = 0.0
    complete = True
    for usage in turns:
        total.input_tokens += usage.input_tokens
        total.output_tokens += usage.output_tokens
        total.cache_read_tokens += usage.cache_read_tokens
        total.cache_write_tokens += usage.cache_write_tokens
        total.reasoning_tokens += usage.reasoning_tokens
        if usage.cost_usd is None:
            complete = False
        else:
            known += usage.cost_usd
    total.cost_usd = known if complete else None
    return total, complete
