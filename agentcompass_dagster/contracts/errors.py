"""Errors a user can fix. The CLI prints them as one line and exits with code 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


class UserError(Exception):
    """A mistake in what the user declared or asked for; never shown with a traceback."""

    exit_code = 2


def field_error(field: str, value: Any, problem: str, where: str | None = None) -> UserError:
    """One line that names where, the field and the offending value."""
    prefix = f"{where}: " if where else ""
    return UserError(f"{prefix}{field}={value!r}: {problem}")


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``; did you mean 'x'?`` naming the known word closest to a near miss, or nothing when none is close."""
    near = difflib.get_close_matches(word, list(known), n=1)
    return f"; did you mean {near[0]!r}?" if near else ""
