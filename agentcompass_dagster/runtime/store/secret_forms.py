"""The forms a registered secret takes in text, and where they are (R-STORE-4).

A secret that reaches an output is rarely kept only as written: an agent or a tool prints it reversed,
hex-encoded, in base64 (alone or inside a longer base64 stream), URL-encoded, spaced out, or folded over
lines (``base64`` wraps at 76 columns; JSON shows a line break as a backslash and an ``n``). Each form is
found with any whitespace, and any escaped line break or tab (``\\n``, ``\\\\n``), between any two of its
characters: text is searched with those removed, and a form found there is scrubbed from the text as
written, with what was removed inside it. Stated limit: a backslash next to a form that is also broken by
escaped line breaks is read as part of the escape ("C:\\\\notebook" is "C:", a break and "otebook").

Lengths: a value is registered from 6 characters on, so its hex form has 12 characters or more and every
base64 form at least 7 (the 6 bytes at an offset of 1 or 2 in a stream fully decide 7 characters): 42 bits
that no prose spells and a random base64 blob holds by chance once in 4 * 10**12 positions.
"""

from __future__ import annotations

import base64
import bisect
import functools
import re
from collections.abc import Callable, Iterable, Iterator
from urllib.parse import quote, quote_plus

_WHITESPACE = re.compile(r"\s+")
# Every character \s (and str.split) takes for whitespace, the last being U+3000, for str.translate.
_NO_WHITESPACE = {code: None for code in range(0x3001) if _WHITESPACE.fullmatch(chr(code))}
# A line break or tab as escaped text writes it, escaped once or more; read after whitespace is removed.
_ESCAPED_BREAKS = re.compile(r"(?:\\+[nrt])+")
_PERCENT_ESCAPE = re.compile(r"%[0-9A-F]{2}")
Encoder = Callable[[bytes], bytes]
Span = tuple[int, int]


def forms(value: str, minimum: int) -> set[str]:
    """Every form of ``value`` to look for, as it reads with no separator; a form shorter than
    ``minimum`` that way (a value that is mostly spaces) is no secret to look for."""
    data = value.encode()
    url = {quote(value, safe=""), quote(value), quote_plus(value)}
    # Encoders differ in the case of their escapes ("%2F", "%2f").
    url |= {_PERCENT_ESCAPE.sub(lambda m: m[0].lower(), form) for form in url}
    written = {value, value[::-1], data.hex(), data.hex().upper(), *url}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        written.add(encode(data).decode())  # padded, when the value ends the stream
        written.update(_base64_cores(data, encode))
    squeezed = (_squeeze(form) for form in written)
    return {form for form in squeezed if len(form) >= minimum}


def _squeeze(text: str) -> str:
    text = text.translate(_NO_WHITESPACE)
    return _ESCAPED_BREAKS.sub("", text) if "\\" in text else text


def _base64_cores(data: bytes, encode: Encoder) -> Iterable[str]:
    """The base64 characters that ``data`` alone decides, at each of the three byte offsets it may have in
    a longer stream: the characters whose 6 bits all fall within it."""
    for offset in range(3):
        encoded = encode(bytes(offset) + data).decode()
        first = -(-8 * offset // 6)  # the first character with no bit of the bytes before
        last = 8 * (offset + len(data)) // 6  # past the last character with no bit of the bytes after
        yield encoded[first:last]


class FormFinder:
    """Every form of some values, found in text. Built when a secret is registered; its patterns are
    compiled at the first search, so registering many values at once compiles once."""

    def __init__(self, values: Iterable[str], minimum: int) -> None:
        self.forms = frozenset(form for value in values for form in forms(value, minimum))

    @functools.cached_property
    def _any(self) -> re.Pattern[str]:
        # A trie, not a list of alternatives: text is tried once per starting character, not once per form,
        # so text without a secret costs little more with ten forms per value than with one.
        return re.compile(_trie(self.forms))

    @functools.cached_property
    def _every(self) -> re.Pattern[str]:
        """The longest form starting at each position, overlapping ones included."""
        return re.compile(f"(?=({self._any.pattern}))")

    def scrub(self, text: str, replacement: str) -> str:
        # Splitting costs least on short text, translating on long text (its table is set up per call).
        squeezed = "".join(text.split()) if len(text) < 2048 else text.translate(_NO_WHITESPACE)
        if self._any.search(squeezed) is None and (
            "\\" not in squeezed or self._any.search(_ESCAPED_BREAKS.sub("", squeezed)) is None
        ):
            return text
        out, done = [], 0
        for start, end in _merged(self._spans(text)):
            out += [text[done:start], replacement]
            done = end
        return "".join(out) + text[done:]

    def _spans(self, text: str) -> Iterator[Span]:
        """Where forms are in ``text``: found with whitespace removed, then also with escaped breaks
        removed, each mapped back to the text as written."""
        squeezed, to_text = _without(_WHITESPACE, text, lambda index: index)
        views = [(squeezed, to_text)]
        if "\\" in squeezed:
            views.append(_without(_ESCAPED_BREAKS, squeezed, to_text))
        for view, to_text in views:
            for match in self._every.finditer(view):
                yield to_text(match.start(1)), to_text(match.end(1) - 1) + 1


def _without(separators: re.Pattern[str], text: str, to_text: Callable[[int], int]) -> tuple[str, Callable[[int], int]]:
    """``text`` with ``separators`` removed, and the map from an index in it to one in the text as written
    (through ``to_text``, the map of ``text`` itself)."""
    kept, starts, shifts, removed, done = [], [0], [0], 0, 0
    for match in separators.finditer(text):
        kept.append(text[done : match.start()])
        removed += match.end() - match.start()
        starts.append(match.end() - removed)
        shifts.append(removed)
        done = match.end()
    kept.append(text[done:])

    def mapped(index: int) -> int:
        return to_text(index + shifts[bisect.bisect_right(starts, index) - 1])

    return "".join(kept), mapped


def _merged(spans: Iterable[Span]) -> Iterator[Span]:
    """Overlapping spans as one; spans that only touch stay apart."""
    current: Span | None = None
    for start, end in sorted(spans):
        if current is not None and start < current[1]:
            current = (current[0], max(current[1], end))
            continue
        if current is not None:
            yield current
        current = (start, end)
    if current is not None:
        yield current


def _trie(all_forms: Iterable[str]) -> str:
    trie: dict[str, dict] = {}
    for form in all_forms:
        node = trie
        for char in form:
            node = node.setdefault(char, {})
        node[""] = {}
    return _alternatives(trie)


def _alternatives(node: dict[str, dict]) -> str:
    """The regex of the longest of ``node``'s continuations. A chain of single children, the bulk of every
    form, is written without recursion; the recursion is as deep as forms branch."""
    branches = []
    for char in sorted(char for char in node if char):
        parts = [re.escape(char)]
        child = node[char]
        while len(child) == 1 and "" not in child:
            ((char, child),) = child.items()
            parts.append(re.escape(char))
        rest = {key: value for key, value in child.items() if key}
        if rest:
            parts.append(f"(?:{_alternatives(rest)})?" if "" in child else _alternatives(rest))
        branches.append("".join(parts))
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
