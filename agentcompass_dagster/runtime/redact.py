"""One redaction used by every writer (R-STORE-4).

Secrets are recognised three ways: by the name of the key that holds them, by the shape of the value
(API-key prefixes, bearer tokens, private keys, passwords inside URLs), and by value, once a secret has
been seen under a secret-looking key or registered explicitly; a registered value is then scrubbed from
every string written afterwards (a trajectory that echoes an API key, say).
"""

from __future__ import annotations

import re
import threading
from typing import Any

REDACTED = "[REDACTED]"

_SECRET_KEY = re.compile(
    r"(api[_-]?key|apikey|secret|token|passw(or)?d|passwd|pwd|authorization|auth[_-]?header|credential"
    r"|private[_-]?key|access[_-]?key|session[_-]?key|cookie|bearer)",
    re.IGNORECASE,
)
# Keys that contain a secret-looking word but hold counts (token usage) or the *name* of an environment
# variable that holds the secret (api_key_env), never the secret itself.
_NOT_SECRET_KEY = re.compile(r"(tokens|token_(count|budget|limit|usage|in|out|used|total)|_env$|_count$)", re.I)
_SECRET_VALUE = re.compile(
    r"(sk-[A-Za-z0-9_\-]{16,}"
    r"|sk_(live|test)_[A-Za-z0-9]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|hf_[A-Za-z0-9]{20,}"
    r"|AIza[0-9A-Za-z_\-]{30,}"
    r"|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{5,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----)"
)
# "Bearer" as an HTTP header writes it is always followed by a credential; after a lowercase "bearer" or
# any "basic" only a word with a digit, an inner capital or base64 padding counts, so prose ("a basic
# understanding", "bearer tokens") is left alone.
_BEARER = re.compile(r"\b(Bearer|BEARER)\s+[A-Za-z0-9._~+/=\-]{8,}"
                     r"|\b([Bb]earer|[Bb]asic|BASIC)\s+(?=[A-Za-z0-9._~+/=\-]*(\d|[a-z][A-Z]|=))[A-Za-z0-9._~+/=\-]{8,}")
_URL_PASSWORD = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]+)@")
_MIN_REGISTERED = 6

_known: set[str] = set()
_known_pattern: re.Pattern[str] | None = None
_lock = threading.Lock()


def register_secret(value: str) -> None:
    """Scrub this exact value from everything written from now on in this process."""
    global _known_pattern
    if not isinstance(value, str) or len(value) < _MIN_REGISTERED or value == REDACTED:
        return
    with _lock:
        if value in _known:
            return
        _known.add(value)
        ordered = sorted(_known, key=len, reverse=True)
        _known_pattern = re.compile("|".join(re.escape(v) for v in ordered))


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key)) and not _NOT_SECRET_KEY.search(key)


def redact_text(text: str) -> str:
    if _known_pattern is not None:
        text = _known_pattern.sub(REDACTED, text)
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
    text = _SECRET_VALUE.sub(REDACTED, text)
    return _BEARER.sub(lambda m: f"{m.group(1) or m.group(2)} {REDACTED}", text)


def redact(value: Any) -> Any:
    """A redacted copy of a JSON-like value; the input is not modified."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and is_secret_key(key) and item not in (None, "", [], {}):
                if isinstance(item, str):
                    register_secret(item)
                out[key] = REDACTED if isinstance(item, (str, int, float, bytes)) else redact_all(item)
            else:
                out[key] = redact(item)
        return out
    if isinstance(value, (list, tuple)):
        return [redact(item) for item in value]
    return value


def redact_all(value: Any) -> Any:
    """Everything under a secret key is secret, whatever its inner keys are called."""
    if isinstance(value, dict):
        return {key: redact_all(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_all(item) for item in value]
    if value in (None, "", True, False):
        return value
    if isinstance(value, str):
        register_secret(value)
    return REDACTED
