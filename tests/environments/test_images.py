"""The digest of a task's build context (issue #36: Harbor and Terminal-Bench tasks ship
``environment/Dockerfile`` with files it COPYs and setup it RUNs)."""

from __future__ import annotations

import os
import re
import secrets
import shutil
from pathlib import Path

import pytest
from conftest import needs_docker

from agentcompass_dagster.environments import images
from agentcompass_dagster.environments.images import ImageBuildError, context_digest

pytestmark = needs_docker


def write_context(root: Path, dockerfile: str, files: dict[str, str] | None = None) -> Path:
    """A build context: the Dockerfile, a token that makes its digest this test's own, and ``files``."""
    root.mkdir(parents=True)
    (root / "Dockerfile").write_text(dockerfile)
    (root / "token").write_text(secrets.token_hex(8))
    for name, text in (files or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_digest_follows_bytes_and_exec_bit_not_mtimes_nor_place(tmp_path: Path) -> None:
    """#36: the digest is of what the engine is sent: a byte or an exec bit changes it; mtimes and the
    context's place on disk (another checkout, another machine) do not."""
    context = write_context(tmp_path / "task", "FROM scratch\n", {"data/input.txt": "1 2 3\n", "run.sh": "true\n"})
    first = context_digest(context)
    assert re.fullmatch(r"[0-9a-f]{64}", first)

    for path in [context, *context.rglob("*")]:
        os.utime(path, (1, 1))
    assert context_digest(context) == first
    assert context_digest(shutil.copytree(context, tmp_path / "elsewhere", copy_function=shutil.copy)) == first

    (context / "run.sh").chmod(0o755)
    executable = context_digest(context)
    assert executable != first
    (context / "run.sh").chmod(0o600)
    assert context_digest(context) == first, "only the exec bit of a mode counts"

    (context / "data/input.txt").write_text("1 2 4\n")
    assert context_digest(context) not in (first, executable)


def test_digest_skips_dockerignored_files_and_follows_no_link(tmp_path: Path) -> None:
    """#36: what .dockerignore leaves out is neither sent nor digested (the Dockerfile, always sent,
    always counts); a link counts by its target's name, never by what it points to."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big.bin").write_bytes(b"x" * 1000)
    context = write_context(tmp_path / "task", "FROM scratch\n", {
        ".dockerignore": "# generated files\nsecret.txt\ncache/\nDockerfile\n", "secret.txt": "s", "cache/a": "a"})
    (context / "data").symlink_to(outside)
    first = context_digest(context)

    (context / "secret.txt").write_text("another secret")
    (context / "cache/b").write_text("b")
    (outside / "big.bin").write_bytes(b"y" * 2000)
    assert context_digest(context) == first

    (context / "Dockerfile").write_text("FROM scratch\nCOPY token /\n")
    assert context_digest(context) != first
    relinked = context_digest(context)
    (context / "data").unlink()
    (context / "data").symlink_to(tmp_path)
    assert context_digest(context) != relinked


def test_a_context_without_a_dockerfile_or_past_the_bounds_is_refused(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """#36: a context without its Dockerfile says so; one past the bounds (files or bytes, after
    .dockerignore) is refused before anything is sent."""
    context = write_context(tmp_path / "task", "FROM scratch\n")
    with pytest.raises(ImageBuildError, match=r"no Dockerfile at .*/task/environment/Dockerfile"):
        context_digest(context, "environment/Dockerfile")
    with pytest.raises(ImageBuildError, match="not a path inside the build context"):
        context_digest(context, "../Dockerfile")

    monkeypatch.setattr(images, "MAX_CONTEXT_ENTRIES", 5)
    for index in range(5):
        (context / f"f{index}").write_text("x")
    with pytest.raises(ImageBuildError, match="over 5 files, directories and links"):
        context_digest(context)
    (context / ".dockerignore").write_text("f*\n")
    context_digest(context)

    monkeypatch.setattr(images, "MAX_CONTEXT_BYTES", 100)
    (context / "big").write_bytes(b"x" * 101)
    with pytest.raises(ImageBuildError, match="over 100 bytes"):
        context_digest(context)
