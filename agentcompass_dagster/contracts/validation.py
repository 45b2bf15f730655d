"""A declaration validated into its pydantic model, or one line naming where, the field and the value
(with the nearest field or allowed value for a near miss): how every bad input is reported."""

from __future__ import annotations

import re
import typing
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agentcompass_dagster.contracts.errors import UserError, did_you_mean

T = TypeVar("T", bound=BaseModel)


def _location(loc: tuple[Any, ...], within: str) -> str:
    out = within
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _field_names(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The fields of the declaration at ``loc`` below ``model`` (list indexes and dict keys skipped)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part) if isinstance(current, type) and issubclass(current, BaseModel) else None
        if field is None:
            return []
        nested = [
            t
            for t in (field.annotation, *typing.get_args(field.annotation))
            if isinstance(t, type) and issubclass(t, BaseModel)
        ]
        if not nested:
            args = [a for a in typing.get_args(field.annotation) for a in (a, *typing.get_args(a))]
            nested = [t for t in args if isinstance(t, type) and issubclass(t, BaseModel)]
        if not nested:
            return []
        current = nested[0]
    return list(current.model_fields) if isinstance(current, type) and issubclass(current, BaseModel) else []


def _problem(model: type[BaseModel], error: Any, within: str) -> str:
    """One validation error as ``field=value: problem``, with the nearest name for a near miss."""
    field = _location(tuple(error["loc"]), within)
    if error["type"] == "missing":
        return f"{field}: missing"
    if error["type"] == "extra_forbidden":
        hint = did_you_mean(str(error["loc"][-1]), _field_names(model, error["loc"][:-1]))
        return f"{field}={error['input']!r}: not a field here{hint}"
    if error["type"] in ("literal_error", "enum"):
        # pydantic lists the allowed values as "'a', 'b' or 'c'".
        known = re.findall(r"'([^']*)'", error.get("ctx", {}).get("expected", ""))
        hint = did_you_mean(str(error["input"]), known)
        return f"{field}={error['input']!r}: not one of {', '.join(known)}{hint}"
    message = error["msg"].removeprefix("Value error, ")
    # A check across a declaration's fields names the fields and values itself, not the whole declaration.
    return message if not error["loc"] and not within else f"{field}={error['input']!r}: {message}"


def validate_declaration(model: type[T], data: Any, where: str | None, field: str = "") -> T:
    """Validate ``data`` as ``model``; a failure is one UserError line naming where (when known), field and
    value. ``field`` is where ``data`` is in the declaration (``harness.params``), the start of every field
    named."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [_problem(model, error, field) for error in exc.errors(include_url=False)[:3]]
        more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        raise UserError(("" if where is None else f"{where}: ") + "; ".join(problems) + more) from None
