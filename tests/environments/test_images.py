"""A task's own image, built by the engine from its build context (issue #36: Harbor and Terminal-Bench
tasks ship ``environment/Dockerfile`` with files it COPYs and setup it RUNs).

Every test builds from the test image under a base name of its own, with a token in its context so no
two tests (nor runs) share a digest, and removes the images labelled with its task name.
"""

from __future__ import annotations

import os
import re
import io
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
from conftest import IMAGE, needs_docker

from agentcompass_dagster.plugins.environments import images
from agentcompass_dagster.plugins.environments.images import (
    BuiltImage,
    ImageBuildError,
    TaskImageError,
    context_digest,
    ensure_image,
    prebuilt_image,
)

pytestmark = needs_docker


@pytest.fixture
def client() -> Iterator[Any]:
    engine = docker.from_env()
    yield engine
    engine.close()


@pytest.fixture
def task(client: Any) -> Iterator[str]:
    """A task name of this test's own; the images built for it are removed after it."""
    name = f"test-{secrets.token_hex(6)}"
    yield name
    for image in client.images.list(filters={"label": f"{images.TASK_LABEL}={name}"}):
        client.images.remove(image.id, force=True)


@pytest.fixture
def base(client: Any) -> Iterator[str]:
    """The test image under a name of this test's own, as a task's FROM names its base image."""
    repository, tag = "agentcompass-test-base", secrets.token_hex(6)
    client.images.get(IMAGE).tag(repository, tag)
    yield f"{repository}:{tag}"
    client.images.remove(f"{repository}:{tag}")


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
    context = write_context(
        tmp_path / "task",
        "FROM scratch\n",
        {".dockerignore": "# generated files\nsecret.txt\ncache/\nDockerfile\n", "secret.txt": "s", "cache/a": "a"},
    )
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


def test_a_context_without_a_dockerfile_or_past_the_bounds_is_refused(
    tmp_path: Path, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#36: a context without its Dockerfile says so, naming the task; one past the bounds (files or
    bytes, after .dockerignore) is refused before anything is sent."""
    context = write_context(tmp_path / "task", "FROM scratch\n")
    with pytest.raises(ImageBuildError, match=r"task t1: no Dockerfile at .*/task/environment/Dockerfile"):
        ensure_image(
            client,
            context,
            dockerfile="environment/Dockerfile",
            timeout_s=5,
            log_path=tmp_path / "build.log",
            name="t1",
        )
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


def test_copied_files_workdir_and_user_arrive_in_the_image(tmp_path: Path, client: Any, task: str, base: str) -> None:
    """#36: the task's input files COPYed into WORKDIR /app are in the image (an executable stays one,
    an ignored file is not sent), and the image's WORKDIR, USER and ENV are reported for the caller."""
    context = write_context(
        tmp_path / "environment",
        (f"FROM {base}\nWORKDIR /app\nCOPY . ./\nUSER 1234\nENV TASK_INPUT=/app/input.txt\n"),
        {
            "input.txt": "the task's data\n",
            "run.sh": "#!/bin/sh\n",
            ".dockerignore": "secret.txt\n",
            "secret.txt": "not for the image",
        },
    )
    (context / "run.sh").chmod(0o755)
    log_path = tmp_path / "run" / "build.log"

    built = ensure_image(client, context, timeout_s=50, log_path=log_path, name=task)

    digest = images.image_digest(client, context)
    assert digest != context_digest(context)
    assert (built.tag, built.digest, built.built) == (f"agentcompass-task:{digest[:24]}", digest, True)
    assert (built.workdir, built.user, built.env["TASK_INPUT"]) == ("/app", "1234", "/app/input.txt")
    assert client.images.get(built.tag).labels == {images.DIGEST_LABEL: digest, images.TASK_LABEL: task}
    output = client.containers.run(
        built.id,
        ["sh", "-c", "pwd; id -u; cat input.txt; test -x run.sh && echo executable; ls -a"],
        remove=True,
        network_mode="none",
    ).decode()
    assert output.splitlines()[:4] == ["/app", "1234", "the task's data", "executable"]
    assert "secret.txt" not in output.split()
    log = log_path.read_text()
    # The engine counts the labels it adds as steps.
    assert re.search(r"^Step 3/\d+ : COPY \. \./$", log, re.MULTILINE) and f"Successfully tagged {built.tag}" in log


def test_a_second_ensure_image_reuses_the_image_also_from_a_new_client(
    tmp_path: Path, client: Any, task: str, base: str
) -> None:
    """#36: a context built once is not built again: the same image, built=False, also for a client of
    its own (as another process would have), and the caller's log says why nothing was built."""
    context = write_context(tmp_path / "environment", f"FROM {base}\nCOPY token /token\n")
    first = ensure_image(client, context, timeout_s=50, log_path=tmp_path / "1.log", name=task)
    again = ensure_image(client, context, timeout_s=50, log_path=tmp_path / "2.log", name=task)
    other = docker.from_env()
    try:
        from_other = ensure_image(other, context, timeout_s=50, log_path=tmp_path / "3.log", name=task)
    finally:
        other.close()

    assert first.built and not again.built and not from_other.built
    assert first.id == again.id == from_other.id
    assert again == from_other == first.model_copy(update={"built": False})
    assert "on the engine already, not built" in (tmp_path / "2.log").read_text()


def test_a_context_whose_base_has_changed_is_built_again(tmp_path: Path, client: Any, task: str, base: str) -> None:
    """#36: the same build context on a base that is now another image (a newer python:3.11-slim pulled,
    a tag moved) is another image: built again, never the one made on the old base."""
    context = write_context(tmp_path / "environment", f"FROM {base}\nCOPY token /token\n")
    first = ensure_image(client, context, timeout_s=50, log_path=tmp_path / "1.log", name=task)
    newer, _ = client.images.build(
        fileobj=io.BytesIO(f"FROM {IMAGE}\nLABEL newer={task}\n".encode()),
        pull=False,
        rm=True,
        labels={images.TASK_LABEL: task},
    )
    newer.tag(*base.split(":"))
    again = ensure_image(client, context, timeout_s=50, log_path=tmp_path / "2.log", name=task)
    assert first.built and again.built and again.digest != first.digest and again.id != first.id


def test_concurrent_callers_build_once(tmp_path: Path, client: Any, task: str, base: str) -> None:
    """#36: attempts of one task starting together build its image once; the others wait and reuse it."""
    context = write_context(tmp_path / "environment", f"FROM {base}\nCOPY token /token\nRUN cat /token\n")
    callers = 4
    start = threading.Barrier(callers)
    results: list[BuiltImage] = []

    def attempt(index: int) -> None:
        start.wait()
        results.append(ensure_image(client, context, timeout_s=50, log_path=tmp_path / f"{index}.log", name=task))

    threads = [threading.Thread(target=attempt, args=(index,)) for index in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(results) == callers
    assert sorted(result.built for result in results) == [False] * (callers - 1) + [True]
    assert len({result.id for result in results}) == 1
    assert sum("Successfully tagged" in (tmp_path / f"{index}.log").read_text() for index in range(callers)) == 1


def test_a_failing_step_names_the_step_and_the_log(tmp_path: Path, client: Any, task: str, base: str) -> None:
    """#36: a RUN that fails raises one line naming the task, the step, the engine's error and the log;
    the log holds the step's own output."""
    step = "RUN echo computed-$((6 * 7)) && exit 3"
    context = write_context(tmp_path / "environment", f"FROM {base}\n{step}\nRUN echo never\n")
    log_path = tmp_path / "build.log"

    with pytest.raises(ImageBuildError) as raised:
        ensure_image(client, context, timeout_s=50, log_path=log_path, name=task)

    message = str(raised.value)
    assert "\n" not in message
    assert re.fullmatch(
        rf'task {task}: image build failed at "Step 2/\d+ : {re.escape(step)}": The command .* '
        rf"returned a non-zero code: 3; build log: {re.escape(str(log_path))}",
        message,
    )
    log = log_path.read_text()
    assert "computed-42\n" in log and "echo never" not in log
    assert client.images.list(filters={"label": f"{images.TASK_LABEL}={task}"}) == []


@pytest.mark.parametrize(
    "step", ["RUN sleep 30", "RUN for i in $(seq 300); do echo tick $i; sleep 0.1; done"], ids=["silent", "chatty"]
)
def test_a_build_past_its_time_limit_is_cancelled_in_the_engine(
    tmp_path: Path, client: Any, task: str, base: str, step: str
) -> None:
    """#36: a build over its build_timeout_sec raises promptly, naming the step and the log, whether the
    step is silent or prints all along; the engine kills the step's container (long before its 30 s
    would end) and tags no image."""
    context = write_context(tmp_path / "environment", f"FROM {base}\n{step}\n")
    log_path = tmp_path / "build.log"
    started = time.time()

    with pytest.raises(ImageBuildError) as raised:
        ensure_image(client, context, timeout_s=3, log_path=log_path, name=task)

    assert time.time() - started < 3 + 5
    assert re.fullmatch(
        rf"task {task}: image build timed out after 3s \(build_timeout_sec\) at "
        rf'"Step 2/\d+ : {re.escape(step)}"; build log: {re.escape(str(log_path))}',
        str(raised.value),
    )
    log = log_path.read_text()
    step_container = re.search(r"Running in ([0-9a-f]{12})", log)
    assert step_container is not None and "ERROR: build timed out after 3s" in log
    # The engine's record of the step's container: gone, and when (waits for it, up to 25 s after start).
    events = client.events(
        since=int(started) - 1,
        until=int(started) + 25,
        decode=True,
        filters={"container": step_container.group(1), "event": "destroy"},
    )
    try:
        destroyed = next(iter(events), None)
    finally:
        events.close()
    assert destroyed is not None and destroyed["time"] < started + 15
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(f"agentcompass-task:{context_digest(context)[:24]}")
    assert client.images.list(filters={"label": f"{images.TASK_LABEL}={task}"}) == []


def test_a_named_image_is_used_as_the_engine_has_it(client: Any, base: str) -> None:
    """#36: a task's prebuilt docker_image is taken from the engine; one it lacks is an error naming it
    (and nothing is pulled unless asked)."""
    named = prebuilt_image(client, base)
    assert named.id == client.images.get(IMAGE).id
    assert (named.tag, named.digest, named.built) == (base, None, False)

    missing = f"agentcompass-test-missing:{secrets.token_hex(6)}"
    with pytest.raises(TaskImageError, match=f"docker_image '{missing}': not on the Docker engine, and pulling is off"):
        prebuilt_image(client, missing)
