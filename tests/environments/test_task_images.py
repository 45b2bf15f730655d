"""Harbor / Terminal-Bench 2 tasks in docker, each in its own environment (issue #36): the task's image
built from its environment/ by the engine (the fixtures' base is the test image, tagged with the name their
Dockerfiles use: no registry is reached), its WORKDIR the agent's, its files writable by the agent,
Harbor's directories owned by whom they are for, its resources and network applied and recorded, every
verifier file kept; an image built once per build context."""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import HARBOR_LOADED as GOOD
from conftest import FIXTURE_BASE, HARBOR_TASKS, details_by_task, fixture_base, needs_docker, opened_session, run_harbor

from agentcompass_dagster.plugins.benchmarks.harbor.loader import load_task
from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.contracts.environment import Caller, EnvironmentSession
from agentcompass_dagster.contracts.records import TaskEnvironment, TaskSpec
from agentcompass_dagster.plugins.environments.docker import DockerEnvironment

pytestmark = needs_docker
DOCKER: dict[str, Any] = {"id": "docker", "params": {}}


@pytest.fixture(scope="module", name="fixture_base")
def base_image() -> None:
    fixture_base()


def run(tmp_path: Path, harness: str, tasks: Path = HARBOR_TASKS, **fields: Any) -> tuple[Any, Path]:
    return run_harbor(tmp_path, harness, DOCKER, tasks, **fields)


def test_the_oracle_passes_every_task_in_its_own_image_and_nop_none(tmp_path: Path, fixture_base: None) -> None:
    """#36: the reference solutions pass every sound task run unmodified (its image's COPY of input data
    in /app, a Python test reading /tests/data and /app, a Python-shebang verifier, reward.json of two
    metrics, the three env tables, two steps, a Dockerfile that RUNs a command), the solution that outruns
    its [agent] timeout_sec fails at that limit, and nop passes none; each metric lands in the detail,
    task_results.parquet and metrics.parquet; what the verifier wrote is kept, redacted."""
    result, run_dir = run(tmp_path, "oracle")
    details = details_by_task(run_dir)
    assert sorted(details) == GOOD
    assert {t for t, d in details.items() if d["correct"]} == set(GOOD) - {"slow-solution"}
    slow = details["slow-solution"]["attempts"]["1"]
    assert slow["limit"]["limit"] == "max_wall_s" and slow["failure"].startswith("limit max_wall_s=2 reached")
    assert result.metrics.counts.model_dump() == {"total": 7, "evaluated": 7, "error": 0}

    two = details["two-metrics"]["attempts"]["1"]
    assert two["rewards"] == {"correctness": 1.0, "coverage": 1.0}
    rewards = pd.read_parquet(run_dir / "task_results.parquet", columns=["task_id", "rewards"]).set_index("task_id")
    assert dict(rewards.loc["two-metrics", "rewards"]) == {"correctness": 1.0, "coverage": 1.0}
    assert dict(rewards.loc["sum-input", "rewards"]) == {"reward": 1.0}
    metrics = pd.read_parquet(run_dir / "metrics.parquet").set_index("metric")["value"]
    assert metrics["reward.correctness"] == pytest.approx(1 / 7) and metrics["reward.reward"] == pytest.approx(5 / 7)

    files = run_dir / "artifacts"
    assert (files / "sum-input@1" / "verifier" / "test-stdout.txt").read_text() == "expected 50, got 50\n"
    # The task's declared artifacts, a file and a directory, as the agent left them.
    assert (files / "sum-input@1" / "artifacts" / "app" / "total.txt").read_text() == "50\n"
    assert (files / "sum-input@1" / "artifacts" / "app" / "data" / "numbers.csv").read_text().startswith("3\n5\n")
    # The env tables' values ran (the check passed) and no record holds them.
    written = b"".join(p.read_bytes() for p in run_dir.rglob("*") if p.is_file())
    assert not any(value in written for value in (b"forty-two-7f3a", b"fixture-mode", b"open-sesame-42"))
    assert json.loads((files / "two-metrics@1" / "verifier" / "reward.json").read_text())["correctness"] == 1
    stdout = (files / "env-tables@1" / "verifier" / "test-stdout.txt").read_text()
    assert stdout == "answer matches; phrase [REDACTED]\n"
    assert sorted(p.relative_to(files / "two-steps@1").as_posix() for p in (files / "two-steps@1").rglob("*.txt")) == [
        "steps/create/verifier/reward.txt",
        "steps/create/verifier/test-stdout.txt",
        "steps/extend/verifier/reward.txt",
        "steps/extend/verifier/test-stdout.txt",
    ]
    assert [s["name"] for s in details["two-steps"]["attempts"]["1"]["benchmark_fields"]["steps"]] == [
        "create",
        "extend",
    ]

    offline = details["offline-build"]["attempts"]["1"]["meta"]
    plan = offline["resolved_execution_plan"]
    assert {plan[f"{p}_network_policy"] for p in ("baseline", "run", "evaluation")} == {"none"}
    assert plan["benchmark_plan"]["environment"]["network"] == "none"
    record = details["sum-input"]["attempts"]["1"]["meta"]["environment"]
    assert record["workdir"] == "/app" and record["memory_mb"] == "512 (the task)"
    assert record["image"].startswith("agentcompass-task:") and (files / "sum-input@1" / "build.log").is_file()

    nop, nop_dir = run(tmp_path / "nop", "nop")
    nop_details = details_by_task(nop_dir)
    assert sorted(nop_details) == GOOD and not any(d["correct"] for d in nop_details.values())
    assert nop.metrics.counts.model_dump() == {"total": 7, "evaluated": 7, "error": 0}


@pytest.fixture
def task_session(fixture_base: None) -> Iterator[tuple[EnvironmentSession, asyncio.AbstractEventLoop]]:
    task = load_task(HARBOR_TASKS / "sum-input", None)
    assert isinstance(task, TaskSpec) and task.environment is not None
    task.environment = task.environment.model_copy(update={"memory_mb": 300, "cpus": 1.0})
    environment = DockerEnvironment(EnvironmentConfig(id="docker", params={"memory_mb": 2048}))
    with opened_session(environment, task) as opened:
        yield opened


def test_a_task_gets_its_image_its_working_directory_its_directories_and_its_resources(
    task_session: tuple[EnvironmentSession, asyncio.AbstractEventLoop],
) -> None:
    """#36: the container is the task's image with its WORKDIR (/app) as the agent's working directory,
    its COPYed files the agent's to change, a writable filesystem where the agent, unprivileged, changes
    nothing of the system its verifier runs (which runs as root, as under Harbor, and gains nothing from a
    set-user-ID file); /tests, /logs/verifier and /solution out of the agent's reach, /logs/agent
    everyone's; the task's memory and CPUs (its ask wins over the sweep's 2048 MB), and the record says
    where each came from."""
    session, loop = task_session

    def run_as(command: str, caller: Caller) -> tuple[int, str]:
        result = loop.run_until_complete(session.exec(command, caller=caller))
        return result.exit_code, result.stdout + result.stderr

    assert session.workdir == "/app"
    assert run_as(
        "pwd && cat data/numbers.csv | wc -l && echo more >> data/numbers.csv && touch /app/new", Caller.agent
    ) == (0, "/app\n5\n")
    code, out = run_as("ls /tests; ls /logs/verifier; ls /solution; touch /logs/agent/note", Caller.agent)
    assert out.count("Permission denied") == 3 and code == 0, out
    assert run_as("touch /usr/local/bin/tool /etc/x", Caller.agent)[1].count("Permission denied") == 2
    # Harbor's verifier and oracle run as the image's user, here root: test.sh may install what it needs.
    assert run_as("touch /logs/verifier/x /tests/x && ls /logs/agent && id -u", Caller.verifier) == (0, "note\n0\n")
    assert run_as("touch /solution/x /usr/local/bin/tool && id -u", Caller.reference) == (0, "0\n")
    assert run_as("id -u", Caller.agent) == (0, "65534\n")
    # A set-user-ID root shell gives the agent nothing: no exec gains privileges in the container.
    assert (
        run_as("cp /bin/bash /usr/local/bin/rootbash && chmod 4755 /usr/local/bin/rootbash", Caller.reference)[0] == 0
    )
    assert run_as("/usr/local/bin/rootbash -p -c 'id -u; id -u -r'", Caller.agent) == (0, "65534\n65534\n")
    assert session.describe()["users"] == {"agent": "65534:65534", "reference": "0:0", "verifier": "0:0"}
    container = session.container  # type: ignore[attr-defined]
    container.reload()
    host = container.attrs["HostConfig"]
    assert host["Memory"] == 300 * 2**20 and host["NanoCpus"] == 10**9 and not host["ReadonlyRootfs"]
    record = session.describe()
    assert record["memory_mb"] == "300 (the task)" and record["cpus"] == "1 (the task)"


def test_a_task_runs_its_agent_and_oracle_as_the_user_it_names(tmp_path: Path, fixture_base: None) -> None:
    """#36: a task whose image makes a user and whose [agent] user names it (Harbor's hello-user) runs its
    agent and its oracle as that user, owning the working directory; its verifier runs as root, the
    image's default; an [agent] user of root is not applied (the agent never runs as root)."""
    context = tmp_path / "environment"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {FIXTURE_BASE}\nRUN useradd --create-home agent\nWORKDIR /app\n")
    for agent_user, expected in (("agent", "agent"), ("root", "nobody")):
        task = TaskSpec(id="user", environment=TaskEnvironment(build_context=context, agent_user=agent_user))
        environment = DockerEnvironment(EnvironmentConfig(id="docker", params={}))
        with opened_session(environment, task) as (session, loop):

            def who(caller: Caller) -> str:
                return loop.run_until_complete(session.exec("id -un; stat -c %U .", caller=caller)).stdout

            assert who(Caller.agent) == f"{expected}\n{expected}\n"
            assert who(Caller.reference) == f"{agent_user}\n{expected}\n"
            assert who(Caller.verifier) == f"root\n{expected}\n"


def test_the_verifier_gets_its_users_home_unless_the_agent_could_write_it(tmp_path: Path, fixture_base: None) -> None:
    """#36: as under Harbor, a task's verifier and oracle run with their user's own HOME in the image
    (/root: a test.sh that sources what the image installed in $HOME/.local/bin finds it); where the
    image lets the agent write the verifier's home, the verifier gets a fresh HOME instead, so nothing the
    agent planted there runs in the check."""
    for mode, verifier_home in (("0700", "/root"), ("0777", "/scratch/")):
        context = tmp_path / mode / "environment"
        context.mkdir(parents=True)
        (context / "Dockerfile").write_text(f"FROM {FIXTURE_BASE}\nRUN chmod {mode} /root\nWORKDIR /app\n")
        task = TaskSpec(id="home", environment=TaskEnvironment(build_context=context))
        with opened_session(DockerEnvironment(EnvironmentConfig(id="docker", params={})), task) as (session, loop):

            def home(caller: Caller) -> str:
                return loop.run_until_complete(session.exec("echo $HOME", caller=caller)).stdout.strip()

            assert home(Caller.verifier).startswith(verifier_home) and home(Caller.reference) == "/root"
            assert home(Caller.agent) == "/home/agent"


def test_a_task_image_is_built_once_for_k_attempts_and_later_runs(tmp_path: Path, fixture_base: None) -> None:
    """#36: an image is built once per build context: k=3 attempts and a second run of the task (fresh,
    no reuse) all use the one image the first attempt built; the build log is in that attempt's files."""
    import docker

    tasks = tmp_path / "tasks"
    shutil.copytree(HARBOR_TASKS / "sum-input", tasks / "sum-input")
    # A build context no earlier test built: this test's image is new to the engine.
    (tasks / "sum-input" / "environment" / "token.txt").write_text(secrets.token_hex(16))
    runs = [
        run(
            tmp_path / f"run{n}",
            "oracle",
            tasks,
            execution={"attempts": {"k": 3}},
            output={"results_dir": str(tmp_path / f"results{n}")},
        )
        for n in (1, 2)
    ]
    records = [
        d["attempts"][str(i)]["meta"]["environment"]
        for _, run_dir in runs
        for d in details_by_task(run_dir).values()
        for i in (1, 2, 3)
    ]
    try:
        assert [r["built"] for r in records] == [True, False, False, False, False, False]
        assert len({r["image_id"] for r in records}) == 1
        log = runs[0][1] / "artifacts" / "sum-input@1" / "build.log"
        assert "COPY data/numbers.csv /app/data/numbers.csv" in log.read_text()
        assert all(r.metrics.metrics["accuracy"] == 1.0 for r, _ in runs)
    finally:
        docker.from_env().images.remove(records[0]["image_id"], force=True)


def test_a_failed_build_is_an_error_naming_the_task_the_step_and_the_log(tmp_path: Path, fixture_base: None) -> None:
    """#36: a Dockerfile whose step fails is an infrastructure error of that task (not scored), naming
    the task, the failing step and the build log in the run directory, which holds the step's output."""
    tasks = tmp_path / "tasks"
    shutil.copytree(HARBOR_TASKS / "python-verifier", tasks / "broken")
    (tasks / "broken" / "environment" / "Dockerfile").write_text(
        f"FROM {FIXTURE_BASE}\nRUN echo building-{secrets.token_hex(4)} && echo no-such-package >&2 && exit 3\n"
    )
    result, run_dir = run(tmp_path, "oracle", tasks)
    (detail,) = details_by_task(run_dir).values()
    error = detail["attempts"]["1"]["run_error"]
    log = run_dir / "artifacts" / "broken@1" / "build.log"
    assert detail["error"] and result.metrics.counts.error == 1
    assert "broken" in error and "RUN echo building-" in error and str(log) in error, error
    assert "no-such-package" in log.read_text()
