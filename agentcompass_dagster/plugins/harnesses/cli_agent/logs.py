"""The agent's own logs (the declaration's ``logs``), kept as the attempt's files under ``agent/``.

After the agent's run, a command in the environment packs the regular files below the declared paths
into one bounded tar in the commands directory; the host reads it back and unpacks only regular files
of bounded size, under names checked to stay below the attempt's directory (``save_files``). What the
agent left there is its own writing: it is evidence, redacted like every file, never trusted."""

from __future__ import annotations

import io
import shlex
import tarfile

LOGS_TAR = ".agentcompass/agent-logs.tar"
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_TAR_BYTES = 32 * 1024 * 1024


def pack_command(paths: list[str], tar: str) -> str:
    """Bash that writes ``tar`` with the files below ``paths`` (``$HOME`` and other variables expanded:
    the declaration's own text), at most MAX_TAR_BYTES of it."""
    # Each declared path is expanded by the shell on purpose ("$HOME/.claude"), then quoted as a word.
    words = " ".join(f'"{path}"' for path in paths)
    return (
        f'set -- ; for p in {words}; do [ -e "$p" ] && set -- "$@" "$p"; done; '
        f'mkdir -p "$(dirname {shlex.quote(tar)})"; [ $# -gt 0 ] || exit 0; '
        f'find "$@" -type f -size -{MAX_FILE_BYTES // 1024}k -print0 2>/dev/null '
        f"| tar --null -T - -cf - 2>/dev/null | head -c {MAX_TAR_BYTES} > {shlex.quote(tar)}"
    )


def unpack(data: bytes) -> dict[str, bytes]:
    """The regular files of a (possibly cut) tar, by their path below ``agent/``."""
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as archive:
            for member in archive:
                if not member.isreg() or member.size > MAX_FILE_BYTES:
                    continue
                handle = archive.extractfile(member)
                if handle is not None:
                    files["agent/" + member.name.lstrip("/")] = handle.read()
    except (tarfile.TarError, EOFError, OSError):
        pass  # a tar cut at MAX_TAR_BYTES: the files before the cut are kept
    return files
