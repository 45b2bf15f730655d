"""A task's own image (issue #36): built by the Docker engine from the task's build context, or named.

Harbor and Terminal-Bench tasks ship ``environment/Dockerfile`` with a build context whose files the
Dockerfile COPYs and whose setup it RUNs. The image is tagged by a digest of the context as the engine is
sent it, so a context built once serves every later attempt, run and process on that engine; a task that
names a prebuilt ``docker_image`` uses the engine's copy. The build is the engine's legacy builder (the
/build API): its log streams into a file of the caller's run directory, and a build past its time limit
is stopped by closing the connection, which makes the engine cancel it and kill the step's container.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile
import tempfile
import threading
import time
from contextlib import suppress
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import IO, Any

from pydantic import BaseModel, ConfigDict

REPOSITORY = "agentcompass-task"
DIGEST_LABEL = "agentcompass.digest"
TASK_LABEL = "agentcompass.task"
# What a context may hold once .dockerignore applies: every byte is read for the digest and sent to the
# engine, so a task that forgot to ignore a dataset fails here instead of filling the engine's disk.
MAX_CONTEXT_BYTES = 2 * 1024**3
MAX_CONTEXT_ENTRIES = 100_000
READ_CHUNK = 1 << 20
# A Dockerfile's step can be a whole script; an error names only its head.
STEP_CHARS = 200


class TaskImageError(RuntimeError):
    """The task has no image to run in; the message is one line."""


class ImageBuildError(TaskImageError):
    """The task's build context is unusable or the engine could not build it: names the task, the step
    and the build log."""


class BuiltImage(BaseModel):
    """The image a task runs in, with what its Dockerfile set that the caller must honour."""

    model_config = ConfigDict(frozen=True)

    id: str
    tag: str
    # The build context's digest; None for an image the task names.
    digest: str | None
    built: bool
    workdir: str
    user: str
    env: dict[str, str]


def context_digest(context: Path, dockerfile: str = "Dockerfile") -> str:
    """The sha256 of what the engine is sent to build ``context``: each entry left by .dockerignore, by
    relative path, type, exec bit, bytes and link target; neither mtimes, owners nor other mode bits
    count (a checkout on another machine has its own), and the archive sent carries none of them."""
    return _pack(context, dockerfile, None)


def ensure_image(
    client: Any, context: Path, *, dockerfile: str = "Dockerfile", timeout_s: float, log_path: Path, name: str
) -> BuiltImage:
    """The image of task ``name``'s build context: the engine's when it has one of this digest, else
    built within ``timeout_s``, the build's log appended to ``log_path`` as it streams. Callers in this
    process with the same context wait for one build and reuse its image (a waiter's time limit starts
    when its turn comes). Raises ImageBuildError for an unusable context, a failed step or the time
    limit."""
    try:
        sent = context_digest(context, dockerfile)
        digest = _with_bases(client, sent, context / dockerfile)
    except ImageBuildError as exc:
        raise ImageBuildError(f"task {name}: {exc}") from exc
    tag = f"{REPOSITORY}:{digest[:24]}"
    with _lock(digest):
        image = _tagged(client, tag, digest)
        if image is not None:
            _note(log_path, f"# {tag} for task {name}: on the engine already, not built\n")
            return _described(image, tag, digest, built=False)
        return _described(
            _build(client, context, dockerfile, tag, (digest, sent), timeout_s, log_path, name), tag, digest, built=True
        )


def image_digest(client: Any, context: Path, dockerfile: str = "Dockerfile") -> str:
    """What an image of ``context`` is tagged and labelled by: its context's digest and its bases' ids."""
    return _with_bases(client, context_digest(context, dockerfile), context / dockerfile)


def _with_bases(client: Any, digest: str, dockerfile: Path) -> str:
    """The context's digest joined with the engine's id of each image the Dockerfile starts FROM: an
    image built on a base that has since changed (a newer python:3.11-slim pulled, a tag moved) is not
    the one this context builds now."""
    import docker.errors

    stages: set[str] = set()
    bases = []
    for line in dockerfile.read_text(errors="replace").splitlines():
        words = line.split()
        if len(words) < 2 or words[0].upper() != "FROM":
            continue
        ref = next((w for w in words[1:] if not w.startswith("--")), "")
        if ref.lower() not in stages:
            try:
                bases.append(client.images.get(ref).id)
            except (docker.errors.ImageNotFound, docker.errors.APIError):
                bases.append(ref)  # the build pulls it, or fails saying so
        if len(words) >= 4 and words[-2].upper() == "AS":
            stages.add(words[-1].lower())
    return hashlib.sha256(" ".join([digest, *bases]).encode()).hexdigest()


def prebuilt_image(client: Any, ref: str, *, pull: bool = False) -> BuiltImage:
    """The image a task names, as the engine has it; pulled first only when ``pull`` allows it."""
    import docker.errors

    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound:
        if not pull:
            raise TaskImageError(f"docker_image {ref!r}: not on the Docker engine, and pulling is off") from None
        try:
            image = client.images.pull(ref)
        except docker.errors.APIError as exc:
            raise TaskImageError(
                f"docker_image {ref!r}: not on the Docker engine, and the pull failed: "
                f"{_one_line(str(exc.explanation or exc))}"
            ) from exc
    return _described(image, ref, None, built=False)


_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock(digest: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(digest, threading.Lock())


def _tagged(client: Any, tag: str, digest: str) -> Any:
    """The engine's image under ``tag`` when it was built from this digest (the tag holds only a prefix
    of it), else None."""
    import docker.errors

    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    return image if image.labels.get(DIGEST_LABEL) == digest else None


def _described(image: Any, tag: str, digest: str | None, built: bool) -> BuiltImage:
    config = image.attrs.get("Config") or {}
    env = dict(entry.partition("=")[::2] for entry in config.get("Env") or [])
    return BuiltImage(
        id=image.id,
        tag=tag,
        digest=digest,
        built=built,
        workdir=config.get("WorkingDir") or "",
        user=config.get("User") or "",
        env=env,
    )


def _note(log_path: Path, text: str) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8") as log:
        log.write(text)


def _build(
    client: Any,
    context: Path,
    dockerfile: str,
    tag: str,
    digests: tuple[str, str],
    timeout_s: float,
    log_path: Path,
    name: str,
) -> Any:
    """``digests``: the image's (its label) and the context's as it was read for it (what is sent must
    still be that)."""
    digest, sent = digests
    deadline = time.monotonic() + timeout_s
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8") as log, tempfile.TemporaryFile() as body:
        progress = _Progress(log)
        progress.write(f"# building {tag} for task {name} from {context}\n")
        try:
            with tarfile.open(fileobj=body, mode="w") as archive:
                packed = _pack(context, dockerfile, archive)
        except ImageBuildError as exc:
            raise ImageBuildError(f"task {name}: {exc}") from exc
        if packed != sent:
            raise ImageBuildError(f"task {name}: the build context {context} changed while it was read")
        body.seek(0)
        failure, fired = _stream(
            client, body, dockerfile, tag, {DIGEST_LABEL: digest, TASK_LABEL: name}, deadline, progress
        )
        failure = progress.error or failure
        image = None if failure else _tagged(client, tag, digest)
        if image is not None:
            return image
        if fired and not progress.error:
            problem = f"build timed out after {timeout_s:g}s (build_timeout_sec) at {progress.where}"
        else:
            problem = f"build failed at {progress.where}: {failure or 'the engine ended it without an image'}"
        progress.write(f"ERROR: {problem}\n")
        raise ImageBuildError(f"task {name}: image {problem}; build log: {log_path}")


def _stream(
    client: Any,
    body: IO[bytes],
    dockerfile: str,
    tag: str,
    labels: dict[str, str],
    deadline: float,
    progress: _Progress,
) -> tuple[str, bool]:
    """Send the context to the engine's builder and follow its messages into ``progress`` until it ends
    or the deadline passes: what failed outside the messages ('' for nothing), and whether the deadline
    passed."""
    import docker.errors
    import requests
    import urllib3

    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return "", True
    watchdog: _Watchdog | None = None
    try:
        stream = client.api.build(
            fileobj=body,
            custom_context=True,
            dockerfile=dockerfile,
            tag=tag,
            labels=labels,
            pull=False,
            rm=True,
            forcerm=True,
            decode=True,
            # Bounds the upload, before the watchdog has a connection to shut down.
            timeout=remaining,
        )
        with _Watchdog(stream, deadline - time.monotonic()) as watchdog:
            for message in watchdog.stream:
                progress.add(message)
    except docker.errors.APIError as exc:
        return _one_line(str(exc.explanation or exc)), False
    except (
        docker.errors.DockerException,
        docker.errors.StreamParseError,
        requests.RequestException,
        urllib3.exceptions.HTTPError,
        OSError,
    ) as exc:
        fired = time.monotonic() >= deadline or (watchdog is not None and watchdog.fired)
        return ("" if fired else _one_line(f"{type(exc).__name__}: {exc}")), fired
    return "", watchdog.fired


class _Progress:
    """The build's messages, written to its log as they come; remembers the step and the error."""

    def __init__(self, log: IO[str]) -> None:
        self._log = log
        self.step = ""
        self.error = ""

    @property
    def where(self) -> str:
        return f'"{self.step}"' if self.step else "its start"

    def write(self, text: str) -> None:
        # Flushed per message: a crashed run leaves the log up to its last line.
        self._log.write(text)
        self._log.flush()

    def add(self, message: dict[str, Any]) -> None:
        if "error" in message:
            detail = message.get("errorDetail") or {}
            self.error = _one_line(str(detail.get("message") or message["error"]))
            self.write(f"ERROR: {self.error}\n")
        elif "stream" in message:
            text = str(message["stream"])
            # The legacy builder streams "Step 3/5 : RUN ..." and its newline as two messages.
            if text.startswith("Step "):
                self.step = _one_line(text.splitlines()[0])[:STEP_CHARS]
            self.write(text)
        elif "status" in message and "progress" not in message:
            # A base image's pull: its states, not its progress bars.
            self.write(f"{message.get('id', '')} {message['status']}".strip() + "\n")


class _Watchdog:
    """Shuts the build's connection down at its deadline: the engine cancels a legacy build whose client
    went away, and only a shutdown wakes a read that waits on a silent step."""

    def __init__(self, stream: Any, seconds: float) -> None:
        from docker.types import CancellableStream

        # client.api.build keeps its HTTP response to itself; the generator it returns holds it.
        self.stream = CancellableStream(stream, stream.gi_frame.f_locals["response"])
        self.fired = False
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        # The stream may end on its own at the same instant; its socket is then closed already.
        with suppress(OSError):
            self.stream.close()

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._timer.cancel()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _pack(context: Path, dockerfile: str, archive: tarfile.TarFile | None) -> str:
    """The context's digest; with ``archive``, the context is added to it from the same reads."""
    digest = hashlib.sha256(b"agentcompass-context-v1\0" + os.fsencode(dockerfile) + b"\0")
    for relative, status in _entries(context, dockerfile):
        path = context / relative
        name = os.fsencode(relative)
        member = tarfile.TarInfo(relative)
        if stat.S_ISDIR(status.st_mode):
            digest.update(b"d\0" + name + b"\0")
            member.type, member.mode = tarfile.DIRTYPE, 0o755
            if archive is not None:
                archive.addfile(member)
        elif stat.S_ISLNK(status.st_mode):
            target = os.readlink(path)
            digest.update(b"l\0" + name + b"\0" + os.fsencode(target) + b"\0")
            member.type, member.mode, member.linkname = tarfile.SYMTYPE, 0o777, target
            if archive is not None:
                archive.addfile(member)
        else:
            executable = bool(status.st_mode & stat.S_IXUSR)
            digest.update((b"x" if executable else b"f") + b"\0" + name + b"\0" + str(status.st_size).encode() + b"\0")
            member.mode, member.size = (0o755 if executable else 0o644), status.st_size
            _add_file(path, member, digest, archive, context)
    return digest.hexdigest()


def _add_file(path: Path, member: tarfile.TarInfo, digest: Any, archive: tarfile.TarFile | None, context: Path) -> None:
    # O_NOFOLLOW: a file swapped for a link after the walk is not followed out of the context.
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as file:
        tee = _Tee(file, digest)
        try:
            if archive is not None:
                archive.addfile(member, tee)
            else:
                while tee.read(READ_CHUNK):
                    pass
        except OSError as exc:
            raise ImageBuildError(f"build context {context}: {member.name} could not be read: {exc}") from exc
        if tee.count != member.size or file.read(1):
            raise ImageBuildError(f"build context {context}: {member.name} changed while it was read")


class _Tee:
    """A file whose bytes also go to a digest as they are read."""

    def __init__(self, file: IO[bytes], digest: Any) -> None:
        self._file = file
        self._digest = digest
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self._file.read(size)
        self._digest.update(data)
        self.count += len(data)
        return data


def _entries(context: Path, dockerfile: str) -> list[tuple[str, os.stat_result]]:
    """The context's entries the engine is sent, sorted by path, each with its lstat; walked without
    following links, with .dockerignore applied as the docker SDK does, and refused past the bounds."""
    from docker.utils.build import PatternMatcher

    _check_dockerfile(context, dockerfile)
    # Like the SDK's exclude_paths (which collects the whole walk first): the engine needs the
    # Dockerfile even when .dockerignore names it.
    matcher = PatternMatcher([*_ignore_patterns(context), f"!{dockerfile}"])
    entries: list[tuple[str, os.stat_result]] = []
    size = 0
    for relative in matcher.walk(str(context)):
        status = os.lstat(context / relative)
        if not (stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode) or stat.S_ISLNK(status.st_mode)):
            raise ImageBuildError(f"build context {context}: {relative} is neither a file, a directory nor a link")
        entries.append((relative, status))
        size += status.st_size if stat.S_ISREG(status.st_mode) else 0
        if len(entries) > MAX_CONTEXT_ENTRIES:
            raise ImageBuildError(
                f"build context {context}: over {MAX_CONTEXT_ENTRIES} files, directories and "
                "links once .dockerignore applies; ignore what the image does not need"
            )
        if size > MAX_CONTEXT_BYTES:
            raise ImageBuildError(
                f"build context {context}: over {MAX_CONTEXT_BYTES} bytes once .dockerignore "
                "applies; ignore what the image does not need"
            )
    return sorted(entries, key=lambda entry: entry[0])


def _check_dockerfile(context: Path, dockerfile: str) -> None:
    relative = PurePosixPath(dockerfile)
    if relative.is_absolute() or ".." in relative.parts:
        raise ImageBuildError(f"dockerfile {dockerfile!r}: not a path inside the build context {context}")
    try:
        regular = stat.S_ISREG(os.lstat(context / relative).st_mode)
    except OSError:
        regular = False
    if not regular:
        raise ImageBuildError(f"no Dockerfile at {context / relative}")


def _ignore_patterns(context: Path) -> list[str]:
    """.dockerignore's patterns, read as the docker SDK's build reads them."""
    path = context / ".dockerignore"
    if not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]
