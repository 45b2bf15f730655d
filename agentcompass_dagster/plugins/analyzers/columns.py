"""How the built-in analyzers make their columns of task_results.parquet (``Analyzer.columns``) from their
results, one per attempt (None where the analyzer did not run on it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Results = list[dict[str, Any] | None]


def field(key: str) -> Callable[[Results], list[Any]]:
    """The column of one field of the results."""
    return lambda results: [None if result is None else result.get(key) for result in results]


def comma_joined(key: str) -> Callable[[Results], list[str | None]]:
    """The column of a list field of the results, as one comma-separated string per attempt."""
    return lambda results: [None if value is None else ",".join(value) for value in field(key)(results)]
