"""What a shell command writes, read from its text well enough to flag it (not to run it): the simple
commands it chains, and the paths it redirects onto, edits in place, removes, moves or copies onto."""

from __future__ import annotations

import re
import shlex

# Between simple commands: ;, &&, ||, a pipe, a background &, a newline.
_SEPARATOR = re.compile(r"&&|\|\||[;\n|&]")
# `> path`, `>> path`, `>| path` (not `2>&1`, whose target is a descriptor).
_REDIRECT = re.compile(r">>?\|?\s*['\"]?([^\s'\";|&<>()]+)")
# Python writing a file: open("path", "w"), Path("path").write_text(...).
_PYTHON_WRITE = re.compile(r"open\(\s*['\"]([^'\"]+)['\"]\s*,\s*['\"][wax]|Path\(\s*['\"]([^'\"]+)['\"]\s*\)\.write_")
# Commands that change every path they are given, and those that change only their last one (the
# destination of a copy or a link).
_CHANGES_ALL = {"rm", "unlink", "truncate", "tee", "mv", "shred"}
_CHANGES_LAST = {"cp", "ln", "install", "rsync"}
_IN_PLACE = {"sed", "perl"}
_PREFIXES = {"sudo", "env", "command", "exec", "nohup"}


def words(segment: str) -> list[str]:
    """A simple command's words without a leading sudo or VAR=value (unbalanced quotes: split on blanks)."""
    try:
        found = shlex.split(segment, comments=True)
    except ValueError:
        found = segment.split()
    while found and (found[0] in _PREFIXES or re.fullmatch(r"\w+=.*", found[0])):
        found = found[1:]
    return found


def segments(command: str) -> list[list[str]]:
    """The words of each simple command chained in ``command``."""
    return [found for part in _SEPARATOR.split(command) if (found := words(part))]


def _operands(found: list[str]) -> list[str]:
    return [word for word in found[1:] if not word.startswith("-") and ">" not in word]


def _in_place(found: list[str]) -> bool:
    return any(word.startswith("--in-place") or (word[:1] == "-" and word[1:2] != "-" and "i" in word)
               for word in found[1:])


def _edited_in_place(found: list[str]) -> list[str]:
    """The files `sed -i` or `perl -i` edits: its operands but the script (the first one, unless -e gave it)."""
    files: list[str] = []
    script_given = skip = False
    for word in found[1:]:
        if skip:
            skip = False
        elif word in ("-e", "-E", "--expression"):
            script_given = skip = True
        elif not word.startswith("-"):
            files.append(word)
    return files if script_given else files[1:]


def _edited(found: list[str]) -> list[str]:
    """The paths one simple command changes, by its name and options."""
    name = found[0].rsplit("/", 1)[-1]
    if name in _CHANGES_ALL:
        return _operands(found)
    if name in _CHANGES_LAST:
        return _operands(found)[-1:]
    if name in _IN_PLACE and _in_place(found):
        return _edited_in_place(found)
    if name == "dd":
        return [word[3:] for word in found[1:] if word.startswith("of=")]
    return []


def written(command: str) -> list[str]:
    """Every path ``command`` writes, edits in place, moves, removes or copies onto."""
    paths = _REDIRECT.findall(command)
    paths += [first or second for first, second in _PYTHON_WRITE.findall(command)]
    for found in segments(command):
        paths += _edited(found)
    return paths


def command_names(command: str) -> list[str]:
    """The name of each simple command chained in ``command``."""
    return [found[0].rsplit("/", 1)[-1] for found in segments(command)]


def operands_of(command: str, name: str) -> list[str]:
    """The operands of every ``name`` command chained in ``command``."""
    return [word for found in segments(command) if found[0].rsplit("/", 1)[-1] == name for word in _operands(found)]
