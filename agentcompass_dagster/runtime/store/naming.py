"""Turning user-controlled names into safe path components (R-STORE-1) and task ids into file names."""

from __future__ import annotations

import hashlib
import re

from agentcompass_dagster.contracts.errors import field_error

MAX_COMPONENT = 120
MAX_TASK_ID = 512
_UNSAFE = re.compile(r"[^A-Za-z0-9._\-]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_STEM_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_")


def _bounded(text: str, original: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(original.encode()).hexdigest()[:12]
    return f"{text[: limit - 13]}-{digest}"


def normalize_component(value: str, field: str) -> str:
    """A single safe directory name: no separators, no ``..``, no control characters, bounded length.

    Unsafe characters become ``_`` and leading dots are replaced, so ``../x`` names ``_.._x``-like
    directories below the results root and never escapes it.
    """
    if not isinstance(value, str) or not value.strip():
        raise field_error(field, value, "must be a non-empty name")
    text = _UNSAFE.sub("_", value.strip())
    text = re.sub(r"^\.+", lambda m: "_" * len(m.group(0)), text)
    return _bounded(text, value, MAX_COMPONENT)


def task_id_problem(task_id: object) -> str | None:
    """Why a task id is not well-formed, or None. Ids that look like paths escaping a directory or
    that carry control characters are user mistakes, not something to normalise silently."""
    if not isinstance(task_id, str) or not task_id:
        return "must be a non-empty string"
    if _CONTROL.search(task_id):
        return "contains control characters"
    if task_id != task_id.strip():
        return "has leading or trailing whitespace"
    if task_id.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", task_id):
        return "is an absolute path"
    if any(part in (".", "..") for part in re.split(r"[\\/]", task_id)):
        return "contains a '.' or '..' path segment"
    if len(task_id) > MAX_TASK_ID:
        return f"is longer than {MAX_TASK_ID} characters"
    return None


def file_stem(text: str) -> str:
    """A reversible, collision-free file name for a task id or category: characters outside
    ``[A-Za-z0-9._-]`` (and a leading ``_``, ``.`` or ``-``) are percent-encoded."""
    out = []
    for index, char in enumerate(text):
        if char in _STEM_SAFE and not (index == 0 and char in "_.-"):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode())
    return _bounded("".join(out), text, 200)
