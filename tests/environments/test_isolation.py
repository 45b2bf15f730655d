"""Real isolation: the bubblewrap sandbox and the Docker environment (R-NET-1, R-LIMIT-1, R-CLEAN-1).

Docker tests talk to the engine at DOCKER_HOST (started by .ci/run through .ci/docker.sh) and use the
locally imported image agentcompass-test:bookworm; they are skipped, with the reason shown, only when no
engine answers or the image is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import IMAGE, needs_docker, processes_with, write_sweep, write_task
from waiting import wait_until

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.runtime.execution.orchestrator import Orchestrator, orchestrate


needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

SANDBOX = {"id": "sandbox"}
DOCKER = {"id": "docker", "params": {"image": IMAGE}}
ALL_NONE = {"baseline": "none", "run": "none", "evaluation": "none"}


def reach(port: int) -> str:
    return f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null"


def run(tmp_path: Path, name: str, environment: dict[str, Any], **fields: Any) -> Any:
    result = orchestrate(load_sweep(write_sweep(tmp_path, name=name, environment=environment, **fields)).requests())
    (outcome,) = result.outcomes.values()
    assert outcome.result is not None, outcome.error
    return outcome.result


def counts(result: Any) -> dict[str, Any]:
    return json.loads((Path(result.run_dir) / ".summary_counts.json").read_text())


@needs_bwrap
def test_sandbox_switches_network_per_phase(tmp_path: Path, host_server: int) -> None:
    """R-NET-1: in the sandbox the run phase (policy none) cannot reach a server on the host's 127.0.0.1,
    and the evaluation phase (policy host) can, within one attempt."""
    write_task(
        tmp_path / "tasks",
        "net",
        solution=f"if {reach(host_server)}; then echo reachable; else echo blocked; fi > net.txt",
        check=f"grep -qx blocked net.txt && {reach(host_server)}",
    )
    result = run(
        tmp_path,
        "net",
        SANDBOX,
        benchmarks=[{"id": "demo", "params": {"tasks_dir": str(tmp_path / "tasks")}}],
        execution={"network": {"baseline": "host", "run": "none", "evaluation": "host"}},
    )
    assert counts(result)["correct"] == 1


@needs_bwrap
def test_sandbox_host_network_reaches_the_host(tmp_path: Path, host_server: int) -> None:
    """R-NET-1: with the host policy in every phase a sandboxed command reaches the host's server."""
    write_task(
        tmp_path / "tasks", "net", solution=f"{reach(host_server)} && echo ok > out.txt", check="grep -qx ok out.txt"
    )
    result = run(
        tmp_path,
        "hostnet",
        SANDBOX,
        benchmarks=[{"id": "demo", "params": {"tasks_dir": str(tmp_path / "tasks")}}],
        execution={"network": {"baseline": "host", "run": "host", "evaluation": "host"}},
    )
    assert counts(result)["correct"] == 1


@needs_docker
def test_docker_none_network_cannot_reach_the_host(tmp_path: Path, host_server: int) -> None:
    """R-NET-1: a container with network none cannot reach a server on the host's 127.0.0.1."""
    write_task(
        tmp_path / "tasks",
        "net",
        solution=f"if {reach(host_server)}; then echo reachable; else echo blocked; fi > net.txt",
        check="grep -qx blocked net.txt",
    )
    result = run(
        tmp_path,
        "dnet",
        DOCKER,
        benchmarks=[{"id": "demo", "params": {"tasks_dir": str(tmp_path / "tasks")}}],
        execution={"network": ALL_NONE},
    )
    assert counts(result)["correct"] == 1


@needs_docker
def test_docker_refuses_a_network_switch(tmp_path: Path) -> None:
    """R-NET-1: a running container cannot change network, so a plan whose phases differ is refused
    before anything runs; it is never widened."""
    sweep = load_sweep(
        write_sweep(
            tmp_path,
            name="switch",
            environment=DOCKER,
            execution={"network": {"baseline": "none", "run": "none", "evaluation": "host"}},
        )
    )
    with pytest.raises(UserError, match="cannot switch network policy"):
        Orchestrator(sweep.requests()).preflight()


@needs_bwrap
def test_demo_passes_with_the_oracle_in_the_sandbox(tmp_path: Path, sandbox_root: Path) -> None:
    """The demo benchmark scores 1.0 with the oracle in the sandbox (network none in every phase), and
    no task directory is left behind."""
    result = run(tmp_path, "sbdemo", SANDBOX, execution={"network": ALL_NONE})
    assert result.metrics.metrics["accuracy"] == 1.0 and result.metrics.counts.evaluated >= 12
    assert [p for p in sandbox_root.iterdir() if p.name.startswith(f"{os.getpid()}-")] == []


@needs_docker
def test_demo_passes_with_the_oracle_in_docker(tmp_path: Path) -> None:
    """The demo benchmark scores 1.0 with the oracle in Docker, and no container is left behind."""
    import docker

    client = docker.from_env()
    # Four containers at a time: their starts and removals wait on the engine, not on this process.
    result = run(tmp_path, "dkdemo", DOCKER, execution={"network": ALL_NONE, "limits": {"task_concurrency": 4}})
    assert result.metrics.metrics["accuracy"] == 1.0
    assert client.containers.list(all=True, filters={"label": f"agentcompass.pid={os.getpid()}"}) == []


ESCAPES = (
    "touch /usr/agentcompass-x; echo $? > codes; touch ~/../../etc/agentcompass-x; echo $? >> codes; "
    "echo x > /etc/agentcompass-x; echo $? >> codes"
)


@pytest.mark.parametrize(
    "environment",
    [pytest.param(SANDBOX, marks=needs_bwrap, id="sandbox"), pytest.param(DOCKER, marks=needs_docker, id="docker")],
)
def test_writes_outside_the_working_directory_fail(tmp_path: Path, environment: dict[str, Any]) -> None:
    """Writes outside the task's directories (/usr/x, ~/../../etc/x, /etc/x) fail inside the environment
    and the host file system is unchanged."""
    write_task(tmp_path / "tasks", "escape", solution=ESCAPES, check="test \"$(cat codes | tr -d '\\n')\" = 111")
    result = run(
        tmp_path,
        f"escape-{environment['id']}",
        environment,
        benchmarks=[{"id": "demo", "params": {"tasks_dir": str(tmp_path / "tasks")}}],
        execution={"network": ALL_NONE},
    )
    assert counts(result)["correct"] == 1
    for path in ("/usr/agentcompass-x", "/etc/agentcompass-x"):
        assert not Path(path).exists()


@needs_bwrap
def test_sandbox_limits_give_clear_errors(tmp_path: Path) -> None:
    """R-LIMIT-1 (per command): a wall time limit ends the command with a message that says so; the
    memory limit (a cgroup) ends the attempt with an error naming the limit and its allowance."""
    import asyncio

    from agentcompass_dagster.contracts.declarations import EnvironmentConfig
    from agentcompass_dagster.contracts.environment import EnvironmentLimitExceeded
    from agentcompass_dagster.plugins.environments.sandbox import SandboxEnvironment
    from agentcompass_dagster.contracts.records import ExecutionPlan, TaskSpec

    environment = SandboxEnvironment(EnvironmentConfig(id="sandbox", params={"memory_mb": 64}))
    plan = ExecutionPlan(
        task_id="t", attempt=1, benchmark_id="b", harness_id="h", environment_id="sandbox", model_id="m"
    )

    async def scenario() -> tuple[Any, Any, str]:
        session = await environment.open(plan, TaskSpec(id="t"))
        try:
            slow = await session.exec("sleep 30", timeout_s=0.5)
            fine = await session.exec("echo fine")
            try:
                await session.exec("python3 -c 'x = bytearray(512 * 1024 * 1024)'")
            except EnvironmentLimitExceeded as exc:
                return slow, fine, str(exc)
            return slow, fine, ""
        finally:
            await session.close()

    slow, fine, hungry = asyncio.run(scenario())
    assert slow.timed_out and "time limit of 0.5s" in slow.stderr
    assert fine.stdout == "fine\n"
    assert hungry.startswith("memory_mb=64: ")


@needs_docker
def test_capacity_two_means_two_containers_at_most(tmp_path: Path) -> None:
    """R-LIMIT-1: provider capacity 2 with 6 workers: never more than 2 containers exist at once."""
    import docker

    client = docker.from_env()
    label = f"agentcompass.environment=cap-{os.getpid()}"
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            # sparse: no per-container inspect, which races with the removal of a finished container.
            seen.append(len(client.containers.list(all=True, sparse=True, filters={"label": label})))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        environment = {**DOCKER, "id": f"cap-{os.getpid()}", "provider": "docker", "capacity": 2}
        result = run(
            tmp_path,
            "cap",
            environment,
            benchmarks=[{"id": "synthetic", "params": {"n_tasks": 6}}],
            harness={"id": "scripted", "params": {"default": {"command": "sleep 1", "oracle": True}}},
            execution={"network": ALL_NONE, "limits": {"task_concurrency": 6}},
        )
    finally:
        stop.set()
        watcher.join()
    assert counts(result)["correct"] == 6
    assert max(seen) == 2


def _start_cli(tmp_path: Path, sweep: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", "--direct", str(sweep)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


@needs_docker
def test_containers_of_a_killed_run_are_removed_by_the_next(tmp_path: Path) -> None:
    """R-CLEAN-1: SIGKILL of the parent leaves its containers; the next run removes them at start, so none
    of the first run's containers exists after the second finishes."""
    import docker

    client = docker.from_env()
    slow = write_sweep(
        tmp_path,
        name="killed",
        environment=DOCKER,
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 2}}],
        harness={"id": "scripted", "params": {"default": {"sleep": 120}}},
        execution={"network": ALL_NONE},
    )
    proc = _start_cli(tmp_path, slow)
    label = f"agentcompass.pid={proc.pid}"
    try:
        wait_until(
            lambda: client.containers.list(all=True, filters={"label": label}),
            "the first run's first container",
            proc=proc,
            interval=0.2,
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert client.containers.list(all=True, filters={"label": label})
    quick = write_sweep(
        tmp_path,
        name="next",
        environment=DOCKER,
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 1}}],
        execution={"network": ALL_NONE},
    )
    second = _start_cli(tmp_path, quick)
    assert second.wait(timeout=120) == 0, second.stderr.read() if second.stderr else ""
    assert client.containers.list(all=True, filters={"label": label}) == []


@needs_bwrap
def test_sandbox_leaves_nothing_after_a_killed_run(tmp_path: Path, sandbox_root: Path) -> None:
    """R-CLEAN-1: a SIGKILLed run's sandboxed commands die with it, and the next run removes its task
    directories."""
    marker = f"sleep 77.{os.getpid()}"
    sweep = write_sweep(
        tmp_path,
        name="sbkill",
        environment=SANDBOX,
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 2}}],
        harness={"id": "scripted", "params": {"default": {"command": marker}}},
    )
    proc = _start_cli(tmp_path, sweep)
    try:
        wait_until(lambda: processes_with(marker), f"the sandboxed `{marker}` to start", proc=proc, interval=0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    wait_until(
        lambda: processes_with(marker) == [],
        f"the sandboxed `{marker}` to die with the run",
        10,
        describe=lambda: (
            subprocess.run(
                ["ps", "-o", "pid,ppid,stat,args", "-p", ",".join(map(str, processes_with(marker) or [1]))],
                capture_output=True,
                text=True,
            ).stdout
        ),
        interval=0.1,
    )
    assert [p for p in sandbox_root.iterdir() if p.name.startswith(f"{proc.pid}-")]
    quick = write_sweep(
        tmp_path, name="after", environment=SANDBOX, benchmarks=[{"id": "synthetic", "params": {"n_tasks": 1}}]
    )
    assert _start_cli(tmp_path, quick).wait(timeout=60) == 0
    assert [p for p in sandbox_root.iterdir() if p.name.startswith(f"{proc.pid}-")] == []


@needs_bwrap
def test_a_bwrap_that_died_with_the_runtime_leaves_no_orphan(tmp_path: Path, sandbox_root: Path) -> None:
    """R-CLEAN-1: bwrap's outer process dies with the runtime (parent-death signal), and a runtime killed
    after it cloned the namespace's first process but before it let it go on left that process blocked
    for good, with PPID 1 (CI under load: a killed run's `bwrap` outlived it). Deterministic stand-in: a
    `bwrap` whose outer process dies with the runtime and whose child, like bwrap's, has no parent-death
    signal and stays in its process group; after the kill nothing of either is left."""
    marker = f"sleep 79.{os.getpid()}"
    sweep = write_sweep(
        tmp_path,
        name="orphan",
        environment=SANDBOX,
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 1}}],
        harness={"id": "scripted", "params": {"default": {"command": "true"}}},
    )
    stuck_child = textwrap.dedent(f"""\
        import sys
        from agentcompass_dagster.cli.main import main
        from agentcompass_dagster.plugins.environments import sandbox
        sandbox.SandboxSession.bwrap = lambda *args: ["bash", "-c", "{marker} & wait"]
        sys.exit(main(["run", "--direct", sys.argv[1]]))
        """)
    proc = subprocess.Popen(
        [sys.executable, "-c", stuck_child, str(sweep)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Both: the stand-in's outer bash (argv holds the marker) and its orphan-to-be `sleep`.
        wait_until(lambda: len(processes_with(marker)) >= 2, f"the stand-in's `{marker}` to start", proc=proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    wait_until(
        lambda: processes_with(marker) == [],
        f"the stand-in's `{marker}` to die with the run",
        10,
        describe=lambda: (
            subprocess.run(
                ["ps", "-o", "pid,ppid,stat,args", "-p", ",".join(map(str, processes_with(marker) or [1]))],
                capture_output=True,
                text=True,
            ).stdout
        ),
        interval=0.1,
    )


@needs_docker
def test_docker_stops_the_agents_processes_before_the_check(tmp_path: Path) -> None:
    """R-ATT-4: a watcher the agent leaves running in its container rewrites answer.txt (4 -> 5) as soon
    as the check starts; the image has no `kill` binary, which stop_processes relied on, so the watcher
    lived on and the check saw 5. It is killed first now: the check sees the 4 the agent left. The check
    signals its start in /tmp: it runs as the verifier's user, who cannot write the agent's /work."""
    watcher = (
        "echo 4 > answer.txt; (while [ ! -e /tmp/started ]; do sleep 0.01; done; echo 5 > answer.txt) >/dev/null 2>&1 &"
    )
    write_task(
        tmp_path / "tasks",
        "watch",
        solution=watcher,
        check="touch /tmp/started && for i in $(seq 50); do sleep 0.02; done && grep -qx 4 answer.txt",
    )
    result = run(
        tmp_path, "watch", DOCKER, benchmarks=[{"id": "demo", "params": {"tasks_dir": str(tmp_path / "tasks")}}]
    )
    assert counts(result)["correct"] == 1


@needs_bwrap
def test_a_sandboxed_command_dies_with_the_runtime_without_any_parent_death_signal(
    tmp_path: Path, sandbox_root: Path
) -> None:
    """R-CLEAN-1: bwrap sets its namespace's parent-death signal only after it has forked, so a runtime
    SIGKILLed in between leaves the namespace running (CI under load: a killed run's `sleep` outlived
    it). The sandbox does not rely on it: with no parent-death signal at all (here the runtime sets none
    and bwrap gets no --die-with-parent), every command of a killed runtime still dies with it."""
    marker = f"sleep 78.{os.getpid()}"
    sweep = write_sweep(
        tmp_path,
        name="lifeline",
        environment=SANDBOX,
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 2}}],
        harness={"id": "scripted", "params": {"default": {"command": f"{marker} & {marker}; wait"}}},
    )
    without_death_signal = textwrap.dedent("""\
        import sys
        from agentcompass_dagster.cli.main import main
        from agentcompass_dagster.plugins.environments import hostdir, sandbox
        hostdir.DEATH_SIGNAL = []
        bwrap = sandbox.SandboxSession.bwrap
        sandbox.SandboxSession.bwrap = lambda *args: [word for word in bwrap(*args) if word != "--die-with-parent"]
        sys.exit(main(["run", "--direct", sys.argv[1]]))
        """)
    proc = subprocess.Popen(
        [sys.executable, "-c", without_death_signal, str(sweep)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: len(processes_with(marker)) >= 2, f"the sandboxed `{marker}`s to start", proc=proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    wait_until(
        lambda: processes_with(marker) == [],
        f"the sandboxed `{marker}`s to die with the run",
        10,
        describe=lambda: processes_with(marker),
        interval=0.1,
    )
