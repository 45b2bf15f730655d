"""What a shell command writes, read from its text well enough to flag it (not to run it): the simple
commands it chains, the paths it redirects onto, edits in place, removes, moves or copies onto, and the
text of the files it writes from here-documents."""

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
# Words before the command a simple command runs: wrappers, and the keywords that open the body of a
# loop or a branch (`while true; do cp a b; done` runs cp).
_PREFIXES = {"sudo", "env", "command", "exec", "nohup", "setsid", "time", "do", "then", "else"}
# Commands after which a path is gone: removed, or moved away (every operand of mv but the last).
_REMOVES = {"rm", "unlink", "shred"}
# A here-document: <<WORD, <<-WORD (leading tabs stripped), <<'WORD' or <<"WORD"; not a <<< here-string.
_HEREDOC = re.compile(r"(?<!<)<<(-?)\s*(['\"]?)([\w.-]+)\2")
# Commands that copy their standard input into the files they name: a here-document given to one of them
# is a file's text; given to any other (python3 - <<EOF), it is a script that runs.
_COPIES_STDIN = {"cat", "tee"}


def words(segment: str) -> list[str]:
    """A simple command's words without its leading wrappers, keywords and VAR=value (unbalanced quotes: split
    on blanks)."""
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
    return any(
        word.startswith("--in-place") or (word[:1] == "-" and word[1:2] != "-" and "i" in word) for word in found[1:]
    )


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


def removed(command: str) -> list[str]:
    """The paths ``command`` removes or moves away: what it leaves behind is not there."""
    paths: list[str] = []
    for found in segments(command):
        name = found[0].rsplit("/", 1)[-1]
        if name in _REMOVES:
            paths += _operands(found)
        elif name == "mv":
            paths += _operands(found)[:-1]
    return paths


def _stdin_target(line: str, position: int) -> str | None:
    """The file the simple command around ``position`` of ``line`` copies its standard input into (``cat >
    path``, ``tee path``), or None: it runs its input, prints it, or writes only under /dev."""
    start = max((m.end() for m in _SEPARATOR.finditer(line, 0, position)), default=0)
    end = next((m.start() for m in _SEPARATOR.finditer(line, position)), len(line))
    segment = line[start:end]
    found = words(segment)
    name = found[0].rsplit("/", 1)[-1] if found else None
    if name not in _COPIES_STDIN:
        return None
    named = [word for word in _operands(found) if not word.startswith("<")] if name == "tee" else []
    return next((path for path in named + _REDIRECT.findall(segment) if not path.startswith("/dev/")), None)


def heredoc_files(command: str) -> tuple[str, list[tuple[str, str]]]:
    """The files ``command`` writes from here-documents (``cat > f.py <<'EOF'``), each as (path, text), and
    the command without those texts: what it runs. Other here-documents stay in the command."""
    lines = command.split("\n")
    kept: list[str] = []
    files: list[tuple[str, str]] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        kept.append(line)
        index += 1
        for match in _HEREDOC.finditer(line):
            strip_tabs, delimiter = match.group(1) == "-", match.group(3)
            body: list[str] = []
            while index < len(lines):
                text = lines[index].lstrip("\t") if strip_tabs else lines[index]
                if text == delimiter:
                    break
                body.append(text)
                index += 1
            # The delimiter's line (absent when the here-document runs to the end of the command).
            closing = lines[index : index + 1]
            index += 1
            target = _stdin_target(line, match.start())
            if target is None:
                kept += body + closing
            else:
                files.append((target, "\n".join(body) + "\n"))
                kept += closing
    return "\n".join(kept), files


def command_names(command: str) -> list[str]:
    """The name of each simple command chained in ``command``."""
    return [found[0].rsplit("/", 1)[-1] for found in segments(command)]


def operands_of(command: str, name: str) -> list[str]:
    """The operands of every ``name`` command chained in ``command``."""
    return [word for found in segments(command) if found[0].rsplit("/", 1)[-1] == name for word in _operands(found)]
