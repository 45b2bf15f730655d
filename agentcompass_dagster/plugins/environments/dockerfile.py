"""What a task's Dockerfile asks, for an environment that cannot build images (the sandbox): the
instructions it can express without running anything, and, for any other, the line that says why not.

Expressed: one ``FROM`` (the host's system stands in for the base image, and the record says so),
``WORKDIR``, ``ENV``, ``COPY`` and ``ADD`` of files of the build context into the final working
directory; ``ARG``, ``LABEL``, ``USER``, ``EXPOSE``, ``VOLUME``, ``CMD``, ``ENTRYPOINT``,
``HEALTHCHECK``, ``STOPSIGNAL`` and ``MAINTAINER`` change nothing a task's commands see here. Anything
else (``RUN``, a second stage, ``COPY --from``, a URL or an archive ``ADD`` unpacks, a destination outside
the working directory, a ``$variable`` to expand) needs a real build.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
import shlex
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

IGNORED = frozenset(
    {"ARG", "LABEL", "USER", "EXPOSE", "VOLUME", "CMD", "ENTRYPOINT", "HEALTHCHECK", "STOPSIGNAL", "MAINTAINER"}
)
ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


class Unsupported(ValueError):
    """The Dockerfile needs a real build; the message says which instruction and why."""


class FileCopy(BaseModel):
    """One file of the build context and where it lands, relative to the working directory."""

    model_config = ConfigDict(frozen=True)

    source: Path
    target: str


class Expressed(BaseModel):
    """A Dockerfile as an environment without images gives it: the base it stands in for, the working
    directory, the variables and the files."""

    base: str
    workdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    files: list[FileCopy] = Field(default_factory=list)


def instructions(text: str) -> list[tuple[str, str]]:
    """(keyword, arguments) of each instruction, continuation lines joined and comments dropped."""
    found: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, arguments = line.partition(" ")
        found.append((keyword.upper(), arguments.strip()))
    if pending.strip():
        keyword, _, arguments = pending.strip().partition(" ")
        found.append((keyword.upper(), arguments.strip()))
    return found


def express(context: Path, dockerfile: str = "Dockerfile") -> Expressed:
    """The Dockerfile in ``context`` as files, variables and a working directory; Unsupported when it
    asks for more."""
    steps = instructions((context / dockerfile).read_text())
    bases = [arguments for keyword, arguments in steps if keyword == "FROM"]
    if len(bases) != 1:
        raise Unsupported(f"{dockerfile} has {len(bases)} FROM instructions (a build of several stages)")
    expressed = Expressed(base=bases[0].split()[0])
    copies: list[tuple[list[str], str, str | None]] = []
    workdir: str | None = None
    for keyword, arguments in steps:
        if keyword in IGNORED or keyword == "FROM":
            continue
        if "$" in arguments and keyword in ("WORKDIR", "COPY", "ADD", "ENV"):
            raise Unsupported(f"{keyword} {arguments}: expands a variable")
        if keyword == "WORKDIR":
            workdir = posixpath.normpath(posixpath.join(workdir or "/", arguments))
        elif keyword == "ENV":
            expressed.env.update(_assignments(arguments))
        elif keyword in ("COPY", "ADD"):
            words = _words(arguments)
            flags = [w for w in words if w.startswith("--")]
            if any(flag.startswith("--from") for flag in flags):
                raise Unsupported(f"{keyword} {arguments}: copies from another image or stage")
            paths = [w for w in words if not w.startswith("--")]
            if len(paths) < 2:
                raise Unsupported(f"{keyword} {arguments}: no destination")
            if keyword == "ADD" and any("://" in p or p.endswith(ARCHIVES) for p in paths[:-1]):
                raise Unsupported(f"ADD {arguments}: fetches a URL or unpacks an archive")
            copies.append((paths[:-1], paths[-1], workdir))
        else:
            raise Unsupported(f"{keyword} {arguments[:80]}: runs or changes what only a build can")
    expressed.workdir = workdir
    for sources, destination, at in copies:
        expressed.files += _files(context, sources, destination, at, workdir)
    return expressed


def _words(arguments: str) -> list[str]:
    if arguments.startswith("["):
        try:
            words = json.loads(arguments)
        except ValueError:
            raise Unsupported(f"{arguments}: not a JSON array") from None
        return [str(w) for w in words]
    return shlex.split(arguments)


def _assignments(arguments: str) -> dict[str, str]:
    words = shlex.split(arguments)
    if words and "=" not in words[0]:
        # The legacy form: ENV NAME the rest of the line.
        return {words[0]: arguments.split(None, 1)[1] if len(words) > 1 else ""}
    return dict(word.split("=", 1) for word in words if "=" in word)


def _files(context: Path, sources: list[str], destination: str, at: str | None, workdir: str | None) -> list[FileCopy]:
    """The files a COPY brings, each with its path relative to the final working directory."""
    target = posixpath.normpath(posixpath.join(at or "/", destination))
    base = workdir or "/"
    if target != base and not target.startswith(base.rstrip("/") + "/"):
        raise Unsupported(f"COPY to {target}: outside the working directory {base}")
    relative = posixpath.relpath(target, base)
    into_dir = destination.endswith("/") or len(sources) > 1
    files: list[FileCopy] = []
    root = context.resolve()
    for pattern in sources:
        matched = sorted(p for p in _glob(root, pattern))
        if not matched:
            raise Unsupported(f"COPY {pattern}: no such file in the build context")
        for source in matched:
            if source.is_dir():
                for file in sorted(f for f in source.rglob("*") if f.is_file() and not f.is_symlink()):
                    files.append(
                        FileCopy(
                            source=file,
                            target=posixpath.normpath(posixpath.join(relative, file.relative_to(source).as_posix())),
                        )
                    )
            elif source.is_file():
                name = posixpath.join(relative, source.name) if into_dir or len(matched) > 1 else relative
                files.append(FileCopy(source=source, target=posixpath.normpath(name)))
    for copy in files:
        if copy.target in (".", "") or copy.target.startswith("../"):
            raise Unsupported(f"COPY to {target}: not a file below the working directory")
    return files


def _glob(root: Path, pattern: str) -> list[Path]:
    """The context's paths ``pattern`` names (Docker's patterns: ``*``, ``?``, ``[...]`` per component),
    never outside the context and never through a link."""
    parts = [p for p in posixpath.normpath(pattern).split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Unsupported(f"COPY {pattern}: outside the build context")
    found = [root]
    for part in parts:
        following = []
        for directory in found:
            if not directory.is_dir() or directory.is_symlink():
                continue
            if re.search(r"[*?\[]", part):
                following += [child for child in directory.iterdir() if fnmatch.fnmatchcase(child.name, part)]
            elif (directory / part).exists():
                following.append(directory / part)
        found = [p for p in following if not p.is_symlink()]
    return found
