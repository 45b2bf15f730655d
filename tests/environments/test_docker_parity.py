"""Docker holds what the sandbox holds, tried as a hostile agent (issue 37, findings 3, 5 and 6): nothing it
leaves behind turns its failure into an error, the verifier's /tmp and /dev/shm are not the ones it wrote,
and its disk, its files, /tmp and /dev/shm are bounded, each limit named when hit (R-LIMIT-1).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import IMAGE, details_by_task, needs_docker, opened_session, write_sweep, write_task

from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.contracts.environment import Caller, EnvironmentLimitExceeded
from agentcompass_dagster.plugins.environments.docker import DockerEnvironment
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate

pytestmark = needs_docker


def docker(**params: Any) -> dict[str, Any]:
    return {"id": "docker", "params": {"image": IMAGE, **params}}


def run(tmp_path: Path, environment: dict[str, Any], harness: Any, benchmark: dict[str, Any]) -> Any:
    sweep = write_sweep(tmp_path, environment=environment, harness=harness, benchmarks=[benchmark])
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    return outcome.result


def run_checked(
    tmp_path: Path, environment: dict[str, Any], check: str, commands: dict[str, str]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Demo tasks of one ``check``, each worked on by the scripted agent's command: the run's metrics and
    each task's first attempt."""
    tasks = tmp_path / "tasks"
    for task in commands:
        write_task(tasks, task, check=check)
    harness = {
        "id": "scripted",
        "params": {"tasks": {t: {"command": c, "answer": "done"} for t, c in commands.items()}},
    }
    result = run(tmp_path, environment, harness, {"id": "demo", "params": {"tasks_dir": str(tasks)}})
    attempts = {task: detail["attempts"]["1"] for task, detail in details_by_task(Path(result.run_dir)).items()}
    return result.metrics.metrics, attempts


def limit_run(tmp_path: Path, environment: dict[str, Any], command: str) -> dict[str, Any]:
    """The one attempt of a synthetic task whose agent runs ``command``."""
    harness = {"id": "scripted", "params": {"default": {"command": command, "answer": "x"}}}
    result = run(tmp_path, environment, harness, {"id": "synthetic", "params": {"n_tasks": 1}})
    (detail,) = details_by_task(Path(result.run_dir)).values()
    attempt: dict[str, Any] = detail["attempts"]["1"]
    return attempt


# Zombies up to the process limit, none of them over it (no fork fails, so no limit is hit while the
# agent runs): their parent exits, they go to the container's PID 1, which (`sleep infinity`) never
# reaped them, and the one slot left was all the framework's stop had.
ZOMBIES = (
    "exec python3 -c \"import os\nfor _ in range(32 - sum(p.isdigit() for p in os.listdir('/proc'))):\n"
    '    os.fork() or os._exit(0)"'
)


def test_zombies_up_to_max_processes_leave_a_scored_failure(tmp_path: Path) -> None:
    """Issue 37, finding 3 (R-LIMIT-1): of two tasks, one solved and one failed, the failed one's agent
    also fills max_processes with zombies. The framework could not start the command that stops the
    agent: that attempt was an error, out of the denominator (accuracy 1.0, error_rate 0.5). Now the
    container's init reaps them and the stop needs no new process: 0.5, no error."""
    metrics, attempts = run_checked(
        tmp_path,
        docker(max_processes=32),
        "grep -qx 4 answer.txt",
        {"solved": "echo 4 > answer.txt", "failed": f"echo 5 > answer.txt; {ZOMBIES}"},
    )
    assert attempts["failed"]["status"] != "error" and not attempts["failed"]["correct"], attempts["failed"]
    assert attempts["solved"]["correct"], attempts["solved"]
    assert (metrics["accuracy"], metrics["error_rate"]) == (0.5, 0.0)


def test_the_stop_holds_while_the_agent_keeps_every_process_slot_taken() -> None:
    """Issue 37, finding 3: a background loop the agent leaves forks until max_processes is reached and
    goes on trying. The framework's stop, which forked (`seq`, `sleep`), found no slot and failed the
    attempt as an error; now it forks nothing and kills them all (naming the limit where the loop hit it
    since the agent's last command), and the verifier runs after it."""
    environment = DockerEnvironment(EnvironmentConfig(**docker(max_processes=32)))
    with opened_session(environment) as (session, loop):
        flood = (
            "(while :; do sleep 1000 & done) >/dev/null 2>&1 & while p=(/proc/[0-9]*); [ ${#p[@]} -lt 32 ]; do :; done"
        )
        # Whether the agent's command sees the limit hit depends on when the loop next forks: not the point.
        with contextlib.suppress(EnvironmentLimitExceeded):
            loop.run_until_complete(session.exec(flood))
        try:
            loop.run_until_complete(session.stop_processes())
        except EnvironmentLimitExceeded as exc:
            # Forks the loop tried after that command failed too: named, the agent's failure (not an error).
            assert str(exc).startswith("max_processes=32: "), exc
        checked = loop.run_until_complete(session.exec("p=(/proc/[0-9]*); echo ${#p[@]}", caller=Caller.verifier))
    # docker-init, the container's command and this one
    assert (checked.exit_code, checked.stdout) == (0, "3\n"), checked


def test_a_file_planted_in_tmp_does_not_pass_a_check(tmp_path: Path) -> None:
    """Issue 37, finding 5 (R-ATT-4): a check writes what it expects to /tmp and /dev/shm and compares the
    answer with it. The agent answered wrong and planted read-only files of its answer there first; the
    check could not replace them and passed. Now /tmp and /dev/shm are emptied once the agent's processes
    are gone (its links there not followed: the honest agent's /work survives them)."""
    check = (
        "echo 4 > /tmp/expected; echo 4 > /dev/shm/expected; "
        "cmp /tmp/expected answer.txt && cmp /dev/shm/expected answer.txt"
    )
    plant = "echo 5 > answer.txt; for d in /tmp /dev/shm; do echo 5 > $d/expected; chmod 444 $d/expected; done"
    links = "echo 4 > answer.txt; ln -s /work /tmp/work; mkdir /dev/shm/d; ln -s /work/answer.txt /dev/shm/d/a"
    _, attempts = run_checked(tmp_path, docker(), check, {"planted": plant, "honest": links})
    assert not attempts["planted"]["correct"], attempts["planted"]
    assert attempts["honest"]["correct"], attempts["honest"]


@pytest.mark.parametrize("target", ["~/big", "/commands/big"])
def test_disk_mb_bounds_every_directory_the_agent_writes(tmp_path: Path, target: str) -> None:
    """Issue 37, finding 6 (R-LIMIT-1): with disk_mb only /work was bounded; the agent's HOME and
    /commands were volumes on the host's disk, 256 MB written there under disk_mb 32 went through and
    nothing was named. Now each stops at disk_mb and the attempt's failure names it."""
    attempt = limit_run(tmp_path, docker(disk_mb=32), f"head -c 256M /dev/zero > {target}; true")
    assert attempt["status"] == "failed" and "disk_mb=32" in attempt["failure"], attempt


def test_a_task_with_setup_files_runs_under_disk_mb(tmp_path: Path) -> None:
    """Issue 37, finding 6: with disk_mb, every demo task with setup/ files was an error (`container
    rootfs is marked read-only`: the engine cannot copy into a tmpfs of a read-only container). Now the
    files arrive and the oracle solves the task."""
    result = run(tmp_path, docker(disk_mb=32), "oracle", {"id": "demo", "tasks": ["count-errors"]})
    detail = details_by_task(Path(result.run_dir))["count-errors"]
    assert detail["correct"], json.dumps(detail)[:2000]


@pytest.mark.parametrize("directory", ["/tmp", "/dev/shm"])
def test_a_full_tmp_is_named_as_tmp_mb(tmp_path: Path, directory: str) -> None:
    """Issue 37, finding 6 (R-LIMIT-1): 64 MB into /tmp or /dev/shm under tmp_mb 16: /tmp stopped at its
    size but no limit was named (/dev/shm, docker's own 64 MB, not even that); now both stop at tmp_mb and
    the attempt's failure names it."""
    attempt = limit_run(tmp_path, docker(tmp_mb=16), f"head -c 64M /dev/zero > {directory}/fill; true")
    assert attempt["status"] == "failed" and "tmp_mb=16" in attempt["failure"], attempt


@pytest.mark.parametrize("directory", [".", "~"])
def test_a_file_count_flood_meets_max_files(tmp_path: Path, directory: str) -> None:
    """Issue 37, finding 6 (R-LIMIT-1): empty files take no bytes, and docker offered no file-count limit
    (200,001 files went through). max_files bounds the files of each directory disk_mb bounds: 2,000
    empty files stop at 500 and the attempt's failure names it."""
    attempt = limit_run(
        tmp_path,
        docker(disk_mb=32, max_files=500),
        f"cd {directory} && for i in $(seq 2000); do : > f$i || break; done; true",
    )
    assert attempt["status"] == "failed" and "max_files=500" in attempt["failure"], attempt


def test_max_files_without_disk_mb_is_refused() -> None:
    """max_files bounds the directories disk_mb makes: declared alone, it is refused, saying so, as in the
    sandbox, instead of running unbounded."""
    with pytest.raises(UserError, match="max_files.*disk_mb"):
        DockerEnvironment(EnvironmentConfig(**docker(max_files=500)))
