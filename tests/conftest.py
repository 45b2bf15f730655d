"""Shared helpers: sweeps written to a temp directory and the CLI run in-process or as a subprocess."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from lifecycle import Lifecycle, recording

from agentcompass_dagster.cli.main import main
from agentcompass_dagster.contracts.environment import Environment, EnvironmentSession
from agentcompass_dagster.contracts.records import TaskSpec

REPO = Path(__file__).resolve().parent.parent
# The Docker test image `.ci/docker.sh` imports into the engine at DOCKER_HOST.
IMAGE = "agentcompass-test:bookworm"
CHROMIUM = Path("/usr/bin/chromium")
# Headless Debian Chromium without its background connections (this machine's network is closed).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _docker_problem() -> str | None:
    try:
        import docker

        client = docker.from_env()
        client.ping()
        client.images.get(IMAGE)
    except Exception as exc:
        return f"no Docker engine with {IMAGE} at {os.environ.get('DOCKER_HOST', 'the default socket')}: {exc}"
    return None


DOCKER_PROBLEM = _docker_problem()
needs_docker = pytest.mark.skipif(DOCKER_PROBLEM is not None, reason=DOCKER_PROBLEM or "")
# The base the Harbor fixture tasks' Dockerfiles name (tests/data/harbor): an image of its own made from
# IMAGE, so that no test changes what IMAGE is called.
FIXTURE_BASE = "agentcompass-fixture:bookworm"


def fixture_base() -> str:
    """FIXTURE_BASE on the engine, made once (no registry is reached)."""
    import io

    import docker

    client = docker.from_env()
    try:
        client.images.get(FIXTURE_BASE)
    except docker.errors.ImageNotFound:
        dockerfile = f"FROM {IMAGE}\nLABEL agentcompass.fixture=base\n".encode()
        client.images.build(fileobj=io.BytesIO(dockerfile), tag=FIXTURE_BASE, pull=False, rm=True)
    return FIXTURE_BASE


def write_sweep(directory: Path, name: str = "sweep", **fields: Any) -> Path:
    """A sweep YAML with demo/oracle/local defaults and results under ``directory/results``."""
    data: dict[str, Any] = {
        "name": name,
        "benchmarks": [{"id": "demo"}],
        "models": ["none"],
        "harness": "oracle",
        "environment": "local",
        "output": {"results_dir": str(directory / "results")},
    }
    data.update(fields)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# The Harbor-format fixture tasks (tests/data/harbor), and those of them that load (not the malformed ones).
HARBOR_TASKS = REPO / "tests" / "data" / "harbor"
HARBOR_LOADED = [
    "env-tables",
    "offline-build",
    "python-verifier",
    "slow-solution",
    "sum-input",
    "two-metrics",
    "two-steps",
]


def run_harbor(
    directory: Path, harness: str, environment: Any, tasks: Path = HARBOR_TASKS, **fields: Any
) -> tuple[Any, Path]:
    """A sweep of the harbor benchmark over ``tasks`` run to its end in this process: its result and run
    directory."""
    from agentcompass_dagster.declarations.sweep import load_sweep
    from agentcompass_dagster.runtime.execution.orchestrator import orchestrate

    directory.mkdir(parents=True, exist_ok=True)
    sweep = write_sweep(
        directory,
        name=f"harbor-{harness}",
        harness=harness,
        environment=environment,
        benchmarks=[{"id": "harbor", "params": {"tasks_dir": str(tasks)}}],
        **fields,
    )
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    return outcome.result, Path(outcome.result.run_dir)


def run_tool_agent_demo(directory: Path, model: dict[str, Any], task: str = "count-errors") -> dict[str, Any]:
    """One demo task solved by tool_agent in the local environment with the model ``model`` declares, run
    by `agentcompass run --direct` (exit 0): the task's detail."""
    sweep = write_sweep(directory, benchmarks=[{"id": "demo", "tasks": [task]}], models=[model], harness="tool_agent")
    assert run_cli("run", sweep, "--direct") == 0
    return json.loads(next((directory / "results").rglob("details/*.json")).read_text())


def files_without(root: Path, secret: str) -> None:
    """No file below ``root`` holds ``secret``."""
    for path in root.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), f"the secret was written to {path}"


def write_task(
    tasks_dir: Path,
    task_id: str,
    solution: str = "true",
    check: str = "true",
    category: str = "files",
    dirname: str | None = None,
) -> Path:
    """One task in the demo benchmark's directory format (use with params.tasks_dir)."""
    task = tasks_dir / (dirname or task_id)
    task.mkdir(parents=True)
    (task / "task.yaml").write_text(yaml.safe_dump({"id": task_id, "category": category, "instruction": "x"}))
    (task / "solution.sh").write_text(solution + "\n")
    (task / "check.sh").write_text(check + "\n")
    return task


def run_cli(*args: str) -> int:
    return main([str(a) for a in args])


def run_cli_process(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def processes_with(needle: str) -> list[int]:
    """Pids of live processes whose command line contains needle."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline.replace(b"\0", b" ").decode(errors="replace"):
            pids.append(int(entry.name))
    return pids


def details_by_task(root: Path) -> dict[str, dict[str, Any]]:
    """Task id -> its detail, for every detail file below ``root`` (a run directory, or results)."""
    found = {}
    for path in root.rglob("details/*.json"):
        data = json.loads(path.read_text())
        found[data["task_id"]] = data
    return found


def max_open_at_once(spans: list[tuple[float, float]]) -> int:
    """The most spans open at one instant; a close at the same instant as an open counts first."""
    points = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    current = peak = 0
    for _, delta in points:
        current += delta
        peak = max(peak, current)
    return peak


def tree_snapshot(root: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file below root with its bytes, inode and mtime: to prove nothing was touched."""
    snap = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            st = path.stat()
            snap[str(path.relative_to(root))] = (path.read_bytes(), st.st_ino, st.st_mtime_ns)
    return snap


@pytest.fixture(autouse=True)
def dagster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own DAGSTER_HOME, so nothing touches the project's .dagster/. Every process
    the test started inherits it, which is how the test's end finds and kills what is left of them (a
    CLI, a daemon, a run worker) however the test ended: failed, timed out (issue 39)."""
    home = tmp_path / "dagster_home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    # `agentcompass run` points the code location at its sweep (and results directory) for the processes
    # it starts.
    monkeypatch.delenv("AGENTCOMPASS_SWEEPS", raising=False)
    monkeypatch.delenv("AGENTCOMPASS_RESULTS_DIR", raising=False)
    yield home
    for pid in processes_with_env(f"DAGSTER_HOME={home}"):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def processes_with_env(entry: str) -> list[int]:
    """Pids of live processes (not this one) whose environment holds ``entry`` (NAME=value)."""
    wanted = entry.encode()
    pids = []
    for path in Path("/proc").iterdir():
        if not path.name.isdigit() or int(path.name) == os.getpid():
            continue
        try:
            environ = (path / "environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0"):
            pids.append(int(path.name))
    return pids


@pytest.fixture(autouse=True)
def sandbox_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own sandbox root (under /var/tmp, as the default is: not under a /tmp the
    sandbox hides), so no test finds another process's sessions; removed, however deep, after it."""
    from agentcompass_dagster.plugins.environments.sandbox import ROOT_ENV
    from agentcompass_dagster.runtime.store.safe_fs import remove_tree

    root = Path(tempfile.mkdtemp(prefix="agentcompass-test-sandbox-", dir="/var/tmp"))
    monkeypatch.setenv(ROOT_ENV, str(root))
    yield root
    for mount in sorted((m for m in _mounts() if m.is_relative_to(root)), key=lambda m: -len(m.parts)):
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
    remove_tree(root)


def _mounts() -> list[Path]:
    return [Path(line.split()[4]) for line in Path("/proc/self/mountinfo").read_text().splitlines()]


@pytest.fixture
def plugin_registries() -> Iterator[None]:
    """Plugins a test registers are gone after it: every registry is restored to what it held."""
    from agentcompass_dagster.declarations import registry

    saved = [(r, r.snapshot()) for r in registry.ALL]
    try:
        yield
    finally:
        for r, targets in saved:
            r.restore(targets)


@pytest.fixture
def recorder(plugin_registries: None) -> Lifecycle:
    """The recording plugins of tests/lifecycle.py (environment "recording", benchmark "faulty", harness
    "recording") registered for this test, bound to a fresh Lifecycle that the test reads and steers."""
    return recording(Lifecycle())


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def host_server() -> Iterator[int]:
    """An HTTP server on the host's 127.0.0.1; yields its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture(params=["sqlite", "postgres"])
def instance_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A Dagster test on a fresh SQLite instance and on a fresh PostgreSQL database (the server
    `.ci/run` starts, AGENTCOMPASS_TEST_PG_URL; skipped with the reason when there is none)."""
    if request.param == "sqlite":
        yield "sqlite"
        return
    base = os.environ.get("AGENTCOMPASS_TEST_PG_URL")
    if not base:
        pytest.skip("no PostgreSQL server: source .ci/postgres.sh (bash .ci/run does) to run the Postgres tests")
    import psycopg2
    from urllib.parse import urlsplit

    name = f"agentcompass_{secrets.token_hex(6)}"
    admin = psycopg2.connect(base.replace("postgresql+psycopg2://", "postgresql://"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    monkeypatch.setenv("AGENTCOMPASS_DAGSTER_PG_URL", urlsplit(base)._replace(path=f"/{name}").geturl())
    try:
        yield "postgres"
    finally:
        admin.cursor().execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()


@contextmanager
def opened_session(
    environment: Environment,
    task: TaskSpec | None = None,
    **plan_fields: Any,
) -> Iterator[tuple[EnvironmentSession, asyncio.AbstractEventLoop]]:
    """A session of ``environment`` for ``task`` (one that asks nothing of it by default), on an event
    loop of its own, its plan given ``plan_fields`` (its mounts, its network); closed after."""
    from agentcompass_dagster.contracts.records import ExecutionPlan

    loop = asyncio.new_event_loop()
    plan = ExecutionPlan(
        task_id="t",
        attempt=1,
        benchmark_id="b",
        harness_id="h",
        environment_id=environment.config.id,
        model_id="m",
        **plan_fields,
    )
    session = loop.run_until_complete(environment.open(plan, task or TaskSpec(id="t")))
    try:
        yield session, loop
    finally:
        loop.run_until_complete(session.close())
        loop.close()


@contextmanager
def offline_page(width: int = 1200, height: int = 900) -> Iterator[tuple[Any, list[str]]]:
    """A page of headless Chromium that loads only file: and data: URLs, and what went wrong on it:
    every other request (blocked), console errors and page errors, one line each. Skips the test when
    Chromium or playwright is missing."""
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} is missing: apt-get install chromium")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright Python package is missing: pip install -e '.[test]'"
    )
    seen: list[str] = []

    def local_only(route: Any) -> None:
        if route.request.url.startswith(("file:", "data:")):
            route.continue_()
        else:
            seen.append(f"request {route.request.method} {route.request.url}")
            route.abort("blockedbyclient")

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": width, "height": height})
            context.route("**/*", local_only)
            page = context.new_page()
            page.set_default_timeout(15_000)
            page.on("console", lambda m: m.type == "error" and seen.append(f"console {m.text}"))
            page.on("pageerror", lambda e: seen.append(f"page error {e}"))
            yield page, seen
            context.close()
        finally:
            browser.close()
