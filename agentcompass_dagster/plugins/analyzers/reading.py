"""How an analyzer's result reads to a person (a trajectory page's findings): "gave up: no", "patterns:
none", "model: 1.97 s", not Python's values."""

from __future__ import annotations

import json
from typing import Any


def readable(result: Any) -> str:
    """An analyzer's result as a reader takes it in: "gave up: no", "patterns: none", not Python's values."""
    if not isinstance(result, dict):
        return _value(result)
    return ", ".join(_field(str(key), value) for key, value in result.items() if key != "evidence")


def _field(key: str, value: Any) -> str:
    """One field: ``duration_s`` 1.5 as "duration: 1.5 s", ``cost_usd`` as dollars."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    for suffix, unit in (("_s", "{:.3g} s"), ("_usd", "${:.4f}")):
        if key.endswith(suffix):
            return f"{key[: -len(suffix)].replace('_', ' ')}: {unit.format(value) if number else _value(value)}"
    return f"{key.replace('_', ' ')}: {_value(value)}"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None or value == []:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (str, int)):
        return str(value)
    if isinstance(value, list) and all(isinstance(item, (str, int, float)) for item in value):
        return ", ".join(map(_value, value))
    return json.dumps(value, default=str)
