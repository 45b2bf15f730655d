"""Trees of any depth, and what other processes left behind, never fail an attempt: the host removes,
walks and links a tree without recursing per level, and a dead session's leftovers in a shared sandbox
root are cleared (or left, with a warning) without touching the attempt that finds them."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import processes_with
from waiting import wait_until

from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.durable.file_tree import MAX_DEPTH, link_tree, walk
from agentcompass_dagster.plugins.environments.hostdir import child_argv
from agentcompass_dagster.plugins.environments.sandbox import SandboxEnvironment
from agentcompass_dagster.runtime.store.safe_fs import open_dir, remove_tree
from agentcompass_dagster.contracts.records import ExecutionPlan, TaskSpec

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
# Deeper than Python's recursion limit (1,000) and than a path can spell (PATH_MAX 4,096).
DEPTH = 2_500


def deep_tree(root: Path, depth: int = DEPTH) -> None:
    """``depth`` nested directories ``d``, each with a file ``f``; made through descriptors, since the path
    of the deepest is longer than a path may be. The deepest holds a symlink to /etc and is read-only."""
    root.mkdir()
    fd = open_dir(root)
    try:
        for _ in range(depth):
            os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
            os.mkdir("d", dir_fd=fd)
            child = open_dir("d", fd)
            os.close(fd)
            fd = child
        os.symlink("/etc", "link", dir_fd=fd)
        os.fchmod(fd, 0o500)
    finally:
        os.close(fd)


def test_a_tree_deeper_than_the_recursion_limit_is_removed(tmp_path: Path) -> None:
    """A tree of 2,500 levels with a read-only bottom and a symlink out is removed whole (it raised
    RecursionError, and the tree stayed); the symlink's target is untouched."""
    deep_tree(tmp_path / "deep")
    assert remove_tree(tmp_path / "deep") == []
    assert not (tmp_path / "deep").exists()
    assert Path("/etc/passwd").is_file()


def test_a_deep_tree_is_walked_to_its_bound_and_linked_whole(tmp_path: Path) -> None:
    """The checkpoint walk of a 2,500-level tree ends (it raised RecursionError): it yields the levels down
    to MAX_DEPTH, and the directory below is `skipped`, not entered; link_tree (what carries such an entry
    over into a restored tree) recreates all 2,500 levels."""
    deep_tree(tmp_path / "deep")
    kinds = {}
    for rel, _, _, kind in walk(str(tmp_path / "deep")):
        kinds[rel] = kind
    dirs = sorted((rel for rel, kind in kinds.items() if kind == "dir"), key=len)
    assert len(dirs) == MAX_DEPTH - 1
    deepest_skipped = "/".join(["d"] * MAX_DEPTH)
    assert kinds[deepest_skipped] == "skipped"
    assert deepest_skipped + "/f" not in kinds
    link_tree(open_dir(tmp_path / "deep"), str(tmp_path / "linked"))
    fd = open_dir(tmp_path / "linked")
    try:
        for _ in range(DEPTH):
            assert os.stat("f", dir_fd=fd).st_nlink == 2
            child = open_dir("d", fd)
            os.close(fd)
            fd = child
        assert os.readlink("link", dir_fd=fd) == "/etc"
    finally:
        os.close(fd)
    for tree in ("deep", "linked"):
        assert remove_tree(tmp_path / tree) == []


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@needs_bwrap
def test_a_dead_sessions_deep_leftovers_do_not_fail_the_next_attempt(sandbox_root: Path) -> None:
    """R-CLEAN-1: the shared sandbox root holds what a killed process left (its session directory, 2,500
    levels deep, named for its pid): the next process's first sandbox attempt runs and scores as usual
    (it errored with RecursionError on the sweep of dead sessions, in every later process) and the
    leftover is gone. An agent's own deep tree goes with its session when that closes."""
    leftover = sandbox_root / f"{dead_pid()}-0123456789ab"
    deep_tree(leftover)
    environment = SandboxEnvironment(EnvironmentConfig(id="sandbox"))
    plan = ExecutionPlan(
        task_id="t", attempt=1, benchmark_id="b", harness_id="h", environment_id="sandbox", model_id="m"
    )

    async def attempt() -> tuple[str, Path]:
        session = await environment.open(plan, TaskSpec(id="t"))
        try:
            made = await session.exec("python3 -c \"import os\nfor _ in range(1500): os.mkdir('n'); os.chdir('n')\"")
            assert made.exit_code == 0, made.stderr
            done = await session.exec("echo fine")
            return done.stdout, Path(session.workdir)
        finally:
            await session.close()

    stdout, workdir = asyncio.run(attempt())
    assert stdout == "fine\n"
    assert not leftover.exists()
    assert not workdir.exists()
    assert [p.name for p in sandbox_root.iterdir()] == []


def test_a_command_whose_runtime_died_before_it_set_its_death_signal_never_runs(tmp_path: Path) -> None:
    """R-CLEAN-1: the kernel sends no death signal to a child whose parent died before the child asked
    for one (a SIGKILL between fork and exec, likely on a loaded machine), so the child must check. Here
    its parent is already another process than the runtime it was started for (as a re-parented orphan's
    is): the command must not run (a sandboxed `sleep` outlived its killed run in CI). Started for this
    process, the same command runs."""
    ran = tmp_path / "ran"
    argv = ["bash", "-c", f"touch {ran}"]
    orphan = subprocess.run(child_argv(argv, [], parent=os.getpid() + 1), timeout=30)
    assert orphan.returncode == 125 and not ran.exists()
    assert subprocess.run(child_argv(argv, []), timeout=30).returncode == 0 and ran.exists()


def test_a_command_dies_with_its_runtime_killed_by_sigkill(tmp_path: Path) -> None:
    """R-CLEAN-1: the first process of a command started by child_argv gets SIGKILL when the runtime that
    started it is SIGKILLed."""
    marker = f"sleep 79.{os.getpid()}"
    script = f"""
import subprocess, sys
from agentcompass_dagster.plugins.environments.hostdir import child_argv
subprocess.Popen(child_argv(["bash", "-c", "exec sleep " + "{marker.split()[1]}"], []))
print("started", flush=True)
sys.stdin.read()
"""
    runtime = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert runtime.stdout is not None and runtime.stdout.readline() == b"started\n"
        wait_until(lambda: processes_with(marker) != [], f"`{marker}` to start", 30)
    finally:
        runtime.kill()
        runtime.wait(timeout=30)
    wait_until(lambda: processes_with(marker) == [], f"`{marker}` to die with its runtime", 30)
