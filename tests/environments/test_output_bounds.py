"""A command's output costs the host a bounded amount, whatever the agent makes it write (issue "Scores an
agent cannot forge or inflate"; SPEC.md has no requirement id for it).

The host keeps the head and tail of each stream (contracts/capture.py, OUTPUT_LIMIT bytes of each), counts
every byte, and says in the text how many it left out. Before, ``head -c 2G /dev/zero`` held all 2 GB in
the host's memory (4.1 GB peak: the bytes, then the slice), 64 MB of docker output took 78 s (the SDK
joins its chunks quadratically), and a timed-out command that made its output file 768 MB (sparse) kept
the run busy for four minutes, 2.3 GB in memory and 805 MB written into the results.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import IMAGE, details_by_task, needs_docker, opened_session, processes_with
from scripted_agent import SOLUTION, bash, submit, sweep_file

from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.contracts.environment import EnvironmentSession
from agentcompass_dagster.plugins.environments.docker import DockerEnvironment
from agentcompass_dagster.plugins.environments.local import LocalEnvironment
from agentcompass_dagster.contracts.capture import OUTPUT_LIMIT
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
# What a captured stream may hold beyond OUTPUT_LIMIT bytes: the note of what was left out.
NOTE_ROOM = 100
HOST_ENVIRONMENTS = ["local", pytest.param("sandbox", marks=needs_bwrap)]

# Run in a process of its own, so that its peak memory is this command's alone, not the test session's.
MEASURE = """
import asyncio, json, resource, sys
from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.plugins.environments.local import LocalEnvironment
from agentcompass_dagster.plugins.environments.sandbox import SandboxEnvironment
from agentcompass_dagster.contracts.records import ExecutionPlan, TaskSpec

kind, command = sys.argv[1:]
environment = {"local": LocalEnvironment, "sandbox": SandboxEnvironment}[kind](EnvironmentConfig(id=kind))
plan = ExecutionPlan(task_id="t", attempt=1, benchmark_id="b", harness_id="h", environment_id=kind, model_id="m")

async def main():
    session = await environment.open(plan, TaskSpec(id="t"))
    try:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = await session.exec(command, timeout_s=50)
        grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    finally:
        await session.close()
    print(json.dumps({"grown_mb": grown_kb / 1024, **result.model_dump()}))

asyncio.run(main())
"""


def note(left_out: int) -> str:
    return f"\n[... {left_out} bytes of output left out ...]\n"


@pytest.mark.parametrize("environment", HOST_ENVIRONMENTS)
def test_half_a_gigabyte_of_output_costs_the_host_a_bounded_amount(environment: str) -> None:
    """Probe ``head -c 2G /dev/zero`` as an agent command (local, sandbox): the host's peak memory grew
    by 4.1 GB. Now (with 512 MB) it grows by less than 200 MB, the captured stdout is its first and last
    bytes with a note of the bytes left out, and the exact total is recorded."""
    # 512 MB, not the probe's 2 GB: a host that kept the output (twice over, as it did) would grow by
    # five times the bound, and the host reads every byte through Python (4 times less work).
    size = 512 << 20
    command = f"echo START; head -c {size} /dev/zero; echo END"
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, environment, command], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["exit_code"] == 0 and not result["timed_out"]
    assert result["grown_mb"] < 200, result["grown_mb"]
    total = size + len("START\n") + len("END\n")
    assert result["stdout_bytes"] == total
    stdout = result["stdout"]
    assert len(stdout) <= OUTPUT_LIMIT + NOTE_ROOM
    assert stdout.startswith("START\n\0") and stdout.endswith("\0END\n")
    assert note(total - OUTPUT_LIMIT) in stdout


@pytest.fixture
def local_session() -> Iterator[tuple[EnvironmentSession, asyncio.AbstractEventLoop]]:
    with opened_session(LocalEnvironment(EnvironmentConfig(id="local"))) as opened:
        yield opened


def test_a_timeout_holds_while_a_process_that_left_the_group_keeps_the_pipes(
    local_session: tuple[EnvironmentSession, asyncio.AbstractEventLoop],
) -> None:
    """Probe a timed-out command whose child left its process group (``setsid``) and keeps its stdout:
    the host killed the group, then read the pipes until that child closed them, so the timeout waited
    for it (as long as it lived). Now what is left is read for a short while only: the call returns,
    timed out, with the output written before, while that child still runs."""
    session, loop = local_session
    marker = f"7000.{os.getpid()}"

    def end_the_child() -> None:
        for pid in processes_with(f"sleep {marker}"):
            os.kill(pid, signal.SIGKILL)

    # A safety valve only, long after the timeout: ends the stray child if the call waits for it.
    valve = threading.Timer(50, end_the_child)
    valve.start()
    try:
        result = loop.run_until_complete(session.exec(f"echo before; setsid sleep {marker} & sleep 100", timeout_s=1))
        still_running = processes_with(f"sleep {marker}")
    finally:
        valve.cancel()
        end_the_child()
    assert result.timed_out and result.stdout == "before\n"
    assert still_running, "the call returned only once the child that kept its pipes had ended"


def durable_run(tmp_path: Path, environment: str | dict[str, Any], command: str) -> dict[str, Any]:
    turns = {"count-errors": [bash(command), bash(SOLUTION), submit()]}
    (outcome,) = orchestrate(
        load_sweep(sweep_file(tmp_path, turns, environment=environment, command_timeout_s=3.0)).requests()
    ).outcomes.values()
    assert outcome.result is not None, outcome.error
    return details_by_task(Path(outcome.result.run_dir))["count-errors"]


@pytest.mark.parametrize(
    "environment",
    [*HOST_ENVIRONMENTS, pytest.param({"id": "docker", "params": {"image": IMAGE}}, marks=needs_docker, id="docker")],
)
def test_a_timed_out_command_that_made_its_output_file_huge_writes_little(
    tmp_path: Path, environment: str | dict[str, Any]
) -> None:
    """Probe ``truncate -s 64M /dev/stdout; sleep 100`` with a 3 s command timeout (tool_agent, whose
    commands write their output into a file the host reads when they time out): it ran four minutes
    and wrote 805 MB into the results. Now the command is killed at its timeout, the host reads the
    file's two ends, which carry the note of the 804,306,368 bytes left out, and the results stay small;
    the attempt goes on and solves the task."""
    # 64 MB here: 64 times what the host keeps, so results that took the whole file would break the
    # bound below just as 768 MB would; and the docker session reads the file's ends as the engine
    # streams the whole file (get_archive), which took 768 MB 8 s longer on a busy machine.
    marker = f"100.{os.getpid()}"
    detail = durable_run(tmp_path, environment, f"truncate -s 64M /dev/stdout; sleep {marker}")
    assert detail["correct"], detail
    step = next(s for s in detail["attempts"]["1"]["trajectory"] if marker in (s.get("command") or ""))
    assert "timed out" in step["output"]
    written = sum(p.stat().st_size for p in (tmp_path / "results").rglob("*") if p.is_file())
    assert written < 10 * OUTPUT_LIMIT, written
    # The output as recorded whole (the trajectory holds 10,000 characters of it).
    outputs = [p for p in (tmp_path / "results").rglob(".durable/*/blobs/*") if p.is_file()]
    assert any(note((64 << 20) - OUTPUT_LIMIT).encode() in blob.read_bytes() for blob in outputs), outputs
    assert processes_with(f"sleep {marker}") == []


@needs_docker
def test_sixty_four_megabytes_of_docker_output_are_read_as_they_come() -> None:
    """Probe 64 MB of output from a docker command: the SDK's exec_run joined its chunks quadratically
    (78 s, and 512 MB took over ten minutes) and kept them all. Now each stream is read as it comes:
    its head and tail, the note of the 66,108,864 bytes left out, and the exact total; stderr apart."""
    with opened_session(DockerEnvironment(EnvironmentConfig(id="docker", params={"image": IMAGE}))) as (session, loop):
        result = loop.run_until_complete(session.exec("echo START; head -c 64M /dev/zero; echo END; echo err >&2"))
    total = (64 << 20) + len("START\n") + len("END\n")
    assert result.exit_code == 0 and len(result.stdout) <= OUTPUT_LIMIT + NOTE_ROOM
    assert result.stdout.startswith("START\n\0") and result.stdout.endswith("\0END\n")
    assert note(total - OUTPUT_LIMIT) in result.stdout
    assert result.stdout_bytes == total
    assert result.stderr == "err\n" and result.stderr_bytes == 4
