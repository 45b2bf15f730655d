"""One redaction used by every writer (R-STORE-4).

Secrets are recognised three ways: by the name that holds them (a record's key such as ``api_key``, or an
assignment in text such as ``password: ...``, ``TOKEN=...``, ``"secret": "..."``), by the shape of the value
(API-key prefixes, bearer and basic credentials, private keys, passwords inside URLs), and by value once
registered. The runtime registers the secrets it holds itself (the model's key, an environment's env values,
URL passwords, the values of the host's variables whose name looks secret); a registered value is scrubbed
from every string written afterwards in this process, in every form it takes (``secret_forms``: reversed,
hex, base64, URL-encoded, spaced out or folded over lines). A value found under a secret-looking key is
scrubbed from its own record only: registering it would let an ordinary value under a key that merely looks
secret vanish from every later write.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from agentcompass_dagster.runtime.store import secret_forms

REDACTED = "[REDACTED]"

# Where a name starts: not inside a word ("oauth", "fortunecookie"), but after "_" or "-"
# (aws_secret_access_key, x-api-key), at a camelCase hump (accessToken) and after a line break or tab as
# escaped text writes it ("...\\npassword: ...", whose "n" is no part of the name).
_ESCAPED_BREAK = r"(?<=\\[nrt])"
_NAME_START = r"(?:(?<![A-Za-z0-9])|" + _ESCAPED_BREAK + r"|(?-i:(?<=[a-z0-9])(?=[A-Z])))"
# Whole names only, so tokenizer, token_type, max_tokens, secretary, pwd and api_key_env are not secrets.
_NAMES = (
    r"(?:(?:api|access|secret|session|private|signing|encryption)[ _-]?key|apikey|secrets?|passw(?:or)?ds?"
    r"|passphrase|token|auth|authorization|auth[ _-]?header|cookies?|credentials?|bearer)"
)
_SECRET_KEY = re.compile(_NAME_START + _NAMES + r"\Z", re.IGNORECASE)
# A secret shape starts at a boundary of its own, never inside a word or a base64url run ("disk-usage").
_SECRET_VALUE = re.compile(
    r"(?:(?<![\w-])|" + _ESCAPED_BREAK + r")(?:sk-(?=[\w-]*[0-9A-Z])[\w-]{16,}"
    r"|sk_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_\w{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}(?![0-9A-Z])"
    r"|hf_(?=[A-Za-z0-9]*[0-9A-Z])[A-Za-z0-9]{20,}"
    r"|AIza[\w-]{30,}"
    r"|eyJ[\w-]{10,}\.[\w-]{10,}\.[\w-]{5,})"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    re.ASCII,
)
# "Bearer" as an HTTP header writes it is followed by a credential, which a plain word ("Bearer tokens",
# "Bearer Authentication") is not. After a lowercase "bearer" or any "basic" only a base64 word with a
# digit, an inner capital or padding counts, so prose ("a basic 1st-grade math") is left alone.
_SCHEME = re.compile(
    r"\b(Bearer|BEARER)\s+(?![A-Za-z][a-z]*+(?![\w~+/=-]|\.\w))[\w.~+/=-]{8,}"
    r"|\b([Bb]earer|[Bb]asic|BASIC)\s+(?=[A-Za-z0-9+/]*(?:\d|[a-z][A-Z]|=))[A-Za-z0-9+/]{8,}+={0,2}+(?![\w~+/=-]|\.\w)",
    re.ASCII,
)
# NAME=value, name = value, name: value, "name": "value" (dotenv, INI, TOML, YAML, JSON, logs, query strings);
# the name and an HTTP scheme stay visible.
_ASSIGNMENT = re.compile(
    _NAME_START + r"(?P<name>" + _NAMES + r")(?![A-Za-z0-9_])[\"']?[ \t]*+[:=][ \t]*+"
    r"(?P<open>[\"'])?(?P<scheme>(?>(?:basic|bearer|token)[ \t]+)?)"
    r"(?(open)(?P<quoted>(?:(?!(?P=open))[^\\\n]|\\.)*+)(?P=open)|(?P<bare>[^\s\"'`,;&<>(){}\[\]]++)(?![(\[]))",
    re.IGNORECASE,
)
# An assigned value is a credential when it has a digit, an inner capital or a symbol that code
# identifiers and paths do not use; a variable reference, a placeholder, a special token ("[MASK]"),
# an attribute path (self.api_key) or a number (max_token=4096) is not.
_CREDENTIAL_HINT = re.compile(r"\d|[a-z][A-Z]|[^\w\s./~:-]")
_NOT_LITERAL = re.compile(r"[$%<{\[]|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\Z|\d+\Z|.*\s")
_HEADER = re.compile(r"authorization|auth[ _-]?header", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]+)@")
# Shorter values cannot be told from ordinary text ("abc", "bob").
_MIN_SECRET = 6
# Every pattern above needs one of these somewhere in the text (a secret name, a key prefix, an HTTP
# scheme, a URL): text without any, most of what a result holds (ids, timestamps, statuses), skips them.
# Searched in lower-cased text: a case-insensitive pattern cannot skip ahead to a possible first character,
# and this search runs on every string written.
_TRIGGER = re.compile(
    r"://|sk[-_]|gh[pousr]_|github_pat_|xox[abposr]-|akia|hf_|aiza|eyj|-----begin|bearer|basic|key|secret|passw"
    r"|passphrase|token|auth|cookie|credential"
)
# The letters the patterns' IGNORECASE takes for "s" and "i" that str.lower leaves as they are.
_FOLD = str.maketrans({"\u017f": "s", "\u0131": "i"})

# A host variable whose name has a secret word among its parts, not only at its end (is_secret_key):
# SECRET_KEY_BASE, GITHUB_TOKEN_READONLY, or ends in _KEY (STRIPE_KEY); TOKENIZERS_PARALLELISM has none.
_SECRET_VARIABLE = re.compile(
    r"(?:^|_)(?:API_?KEY|TOKEN|SECRETS?|PASSW(?:OR)?DS?|PASSPHRASE)(?:_|$)|(?:^|_)KEY$", re.IGNORECASE
)

_known: set[str] = set()
_known_forms: secret_forms.FormFinder | None = None
_lock = threading.Lock()


def register_secret(value: str) -> None:
    """Scrub this value, in every form it takes (``secret_forms``), from everything written from now on in
    this process."""
    global _known_forms
    if not isinstance(value, str) or len(value) < _MIN_SECRET or value == REDACTED:
        return
    with _lock:
        if value in _known:
            return
        _known.add(value)
        _known_forms = secret_forms.FormFinder(_known, _MIN_SECRET)


def register_host_secrets(environ: Mapping[str, str] = os.environ) -> None:
    """Register the values of the host's variables whose name looks secret (OPENAI_API_KEY, GITHUB_TOKEN,
    SECRET_KEY_BASE, DB_PASSWORD, STRIPE_KEY): a model, a tool or a plugin may echo one, by a route no
    declaration names. Other variables are not secrets: registering PATH or HOME would scrub them from every
    page."""
    for name, value in environ.items():
        if is_secret_key(name) or _SECRET_VARIABLE.search(name):
            register_secret(value)


def register_url_passwords(value: Any) -> None:
    """Register the password of every ``scheme://user:password@`` among the strings of a JSON-like value,
    as written and percent-decoded."""
    if isinstance(value, str):
        for match in _URL_PASSWORD.finditer(value):
            register_secret(match["pw"])
            register_secret(unquote(match["pw"]))
    elif isinstance(value, dict):
        for item in value.values():
            register_url_passwords(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            register_url_passwords(item)


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def redact_text(text: str) -> str:
    folded = text.lower()
    if _TRIGGER.search(folded if folded.isascii() else folded.translate(_FOLD)) is None:
        return _known_forms.scrub(text, REDACTED) if _known_forms is not None else text
    # URL passwords first: a registered env value that is such a URL keeps its user and host visible.
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
    if _known_forms is not None:
        text = _known_forms.scrub(text, REDACTED)
    text = _SECRET_VALUE.sub(REDACTED, text)
    text = _ASSIGNMENT.sub(_assigned, text)
    return _SCHEME.sub(lambda m: f"{m.group(1) or m.group(2)} {REDACTED}", text)


def redact(value: Any) -> Any:
    """A redacted copy of a JSON-like value; the input is not modified. A value under a secret key is also
    scrubbed from the rest of this value (a command line that repeats it), and from nothing else."""
    found: set[str] = set()
    _under_secret_keys(value, found, secret=False)
    return _redact(value, _alternation(found) if found else None)


def _alternation(values: set[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))


def _assigned(match: re.Match[str]) -> str:
    group = "bare" if match["open"] is None else "quoted"
    value = match[group]
    if len(value) < _MIN_SECRET or REDACTED in value or _NOT_LITERAL.match(value):
        return match[0]
    # After an Authorization header or an HTTP scheme any literal is a credential.
    if not (match["scheme"] or _HEADER.fullmatch(match["name"]) or _CREDENTIAL_HINT.search(value)):
        return match[0]
    start, end = match.start(group) - match.start(), match.end(group) - match.start()
    return match[0][:start] + REDACTED + match[0][end:]


def _under_secret_keys(value: Any, found: set[str], secret: bool) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _under_secret_keys(item, found, secret or (isinstance(key, str) and is_secret_key(key)))
    elif isinstance(value, (list, tuple)):
        for item in value:
            _under_secret_keys(item, found, secret)
    elif secret and isinstance(value, str) and len(value) >= _MIN_SECRET and value != REDACTED:
        found.add(value)


def _redact(value: Any, local: re.Pattern[str] | None) -> Any:
    if isinstance(value, str):
        return redact_text(local.sub(REDACTED, value) if local is not None else value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and is_secret_key(key) and item not in (None, "", [], {}):
                out[key] = REDACTED if isinstance(item, (str, int, float, bytes)) else _redact_all(item)
            else:
                out[key] = _redact(item, local)
        return out
    if isinstance(value, (list, tuple)):
        return [_redact(item, local) for item in value]
    return value


def _redact_all(value: Any) -> Any:
    """Everything under a secret key is secret, whatever its inner keys are called."""
    if isinstance(value, dict):
        return {key: _redact_all(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact_all(item) for item in value]
    if value in (None, "", True, False):
        return value
    return REDACTED
