"""A hostile agent, root and scripted: it tries to break out, to read or fake the verdict, to exhaust the
host and to make the host act on what it planted (R-NET-1, R-LIMIT-1, R-CLEAN-1, R-RESUME-1).

Each probe is a command the agent runs in the sandbox (or docker, or local where the probe is about
the host's own file operations); each test checks the host afterwards: the secret unread, the host file
unchanged, no score, the named limit in the attempt's error, no process left. Run as root, as the
runtime runs in CI: that is the case the sandbox must hold (bwrap as root keeps every capability).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    IMAGE,
    REPO,
    details_by_task,
    needs_docker,
    opened_session,
    processes_with,
    run_cli_process,
    write_sweep,
)
from scripted_agent import SOLUTION, bash, submit, sweep_file

from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.contracts.environment import EnvironmentSession, ExecResult
from agentcompass_dagster.durable.checkpoints import CheckpointStore
from agentcompass_dagster.plugins.environments.cgroups import Cgroup, CgroupUnavailable
from agentcompass_dagster.plugins.environments.sandbox import SandboxEnvironment
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate

HARBOR_TASKS = REPO / "resources" / "data" / "harbor_tasks"
SECRET = "TOPSECRET-4f1c9a"

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the probes of a root runtime need root")


def _cgroups_problem() -> str | None:
    try:
        Cgroup.create("test", f"{os.getpid()}-probe", 64, 64).remove()
    except CgroupUnavailable as exc:
        return str(exc)
    return None


CGROUPS_PROBLEM = _cgroups_problem() if os.geteuid() == 0 else "cgroups need root here"
needs_cgroups = pytest.mark.skipif(CGROUPS_PROBLEM is not None, reason=CGROUPS_PROBLEM or "")


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    """A host file only root may read."""
    shared = tmp_path / "shared"
    shared.mkdir()
    secret = shared / "secret.txt"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    return secret


def run_sweep(sweep: Path) -> Path:
    result = orchestrate(load_sweep(sweep).requests())
    (outcome,) = result.outcomes.values()
    assert outcome.result is not None, outcome.error
    return Path(outcome.result.run_dir)


def everything_written(tmp_path: Path) -> bytes:
    """Every byte of every file the runs wrote (results, checkpoints, logs)."""
    return b"".join(
        p.read_bytes() for p in sorted((tmp_path / "results").rglob("*")) if p.is_file() and not p.is_symlink()
    )


def scripted(command: str, **step: Any) -> dict[str, Any]:
    return {"id": "scripted", "params": {"default": {"command": command, **step}}}


# --- escape ----------------------------------------------------------------------------------------

OPEN_BY_HANDLE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
class Handle(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint), ("type", ctypes.c_int), ("data", ctypes.c_ubyte * 128)]
handle, mount_id = Handle(), ctypes.c_int()
handle.size = 128
assert libc.name_to_handle_at(-100, b".", ctypes.byref(handle), ctypes.byref(mount_id), 0) == 0
fd = libc.open_by_handle_at(os.open(".", os.O_RDONLY), ctypes.byref(handle), os.O_RDONLY)
print("ESCAPED" if fd >= 0 else f"held errno={ctypes.get_errno()}")
"""


@pytest.fixture
def sandbox_session(secret_file: Path) -> Iterator[tuple[EnvironmentSession, asyncio.AbstractEventLoop]]:
    """One sandbox session that binds the secret's directory read-only, as a host path it may see."""
    environment = SandboxEnvironment(EnvironmentConfig(id="sandbox", params={"read_only": [str(secret_file.parent)]}))
    with opened_session(environment) as opened:
        yield opened


def probe(session: tuple[EnvironmentSession, asyncio.AbstractEventLoop], command: str) -> ExecResult:
    env, loop = session
    return loop.run_until_complete(env.exec(command, timeout_s=30))


@needs_bwrap
@needs_root
def test_the_sandboxed_command_holds_no_capability(sandbox_session: Any) -> None:
    """R-NET-1: bwrap run by root would keep every capability; the command runs as an unprivileged user
    with none (effective, permitted, bounding) and no_new_privs, so setuid binaries gain nothing."""
    status = probe(sandbox_session, "grep -E '^(Uid|CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status").stdout
    fields = dict(line.split(":\t") for line in status.splitlines())
    assert fields["CapEff"] == fields["CapPrm"] == fields["CapBnd"] == "0000000000000000", status
    assert fields["NoNewPrivs"] == "1" and fields["Uid"].split()[0] != "0"


@needs_bwrap
@needs_root
def test_open_by_handle_is_refused(sandbox_session: Any) -> None:
    """With CAP_DAC_READ_SEARCH a file handle opens any inode of the filesystem, the host's / and /root
    included: the call must be refused (EPERM)."""
    out = probe(sandbox_session, f"python3 - <<'PY'\n{OPEN_BY_HANDLE}\nPY").output
    assert out.strip() == "held errno=1", out


@needs_bwrap
@needs_root
def test_system_directories_cannot_be_remounted_or_written(sandbox_session: Any) -> None:
    """A remount of /etc or /usr read-write, then a write, would change the host's files."""
    for directory in ("/etc", "/usr"):
        marker = Path(directory) / f"agentcompass-probe-{os.getpid()}"
        out = probe(
            sandbox_session,
            f"mount -o remount,bind,rw {directory} 2>/dev/null; touch {marker} 2>/dev/null "
            "&& echo ESCAPED || echo held",
        ).stdout
        assert out == "held\n" and not marker.exists()


@needs_bwrap
@needs_root
def test_a_fresh_procfs_cannot_be_mounted(sandbox_session: Any) -> None:
    """A fresh procfs would expose writable kernel knobs (core_pattern runs a program as host root)."""
    out = probe(
        sandbox_session,
        "mkdir -p /tmp/p && mount -t proc proc /tmp/p 2>/dev/null "
        "&& test -w /tmp/p/sys/kernel/core_pattern && echo ESCAPED || echo held",
    ).stdout
    assert out == "held\n"
    assert (
        probe(sandbox_session, "echo x > /proc/sys/kernel/core_pattern 2>/dev/null && echo ESCAPED || echo held").stdout
        == "held\n"
    )


@needs_bwrap
@needs_root
def test_host_files_stay_unreadable_where_their_mode_says_so(sandbox_session: Any, secret_file: Path) -> None:
    """A 0600 root file in a bound directory and /etc/shadow are unreadable; a hard link to them cannot
    be made (it would carry them into a checkpoint); the runtime's processes are out of reach."""
    env, _ = sandbox_session
    out = probe(
        sandbox_session,
        f"cat {secret_file} /etc/shadow 2>&1; "
        f"ln {secret_file} ./linked 2>/dev/null && echo LINKED; "
        f"ln /etc/shadow ./shadow 2>/dev/null && echo LINKED; "
        f"cat /proc/{os.getpid()}/environ 2>/dev/null && echo ENVIRON; "
        f"kill -9 {os.getpid()} 2>/dev/null && echo KILLED; "
        f"ls {env.scratch} 2>/dev/null && echo SCRATCH; true",
    ).output
    assert SECRET not in out and "root:" not in out
    for word in ("LINKED", "ENVIRON", "KILLED", "SCRATCH"):
        assert word not in out, out
    assert out.count("Permission denied") == 2
    assert not (Path(env.workdir) / "linked").exists() and secret_file.read_text() == SECRET + "\n"


@needs_bwrap
def test_writes_outside_the_binds_land_nowhere_on_the_host(sandbox_session: Any, tmp_path: Path) -> None:
    """Paths the command climbs to from its directory are the sandbox's own (read-only or private)."""
    env, _ = sandbox_session
    out = probe(
        sandbox_session, f"touch {tmp_path}/planted ../planted ../../planted /var/tmp/planted 2>/dev/null; echo done"
    ).stdout
    assert out == "done\n"
    for path in (tmp_path / "planted", Path(env.workdir).parent / "planted", Path("/var/tmp/planted")):
        assert not path.exists(), path


# --- host-side file operations never follow what the agent plants ------------------------------------


@pytest.mark.parametrize("environment", ["local", pytest.param("sandbox", marks=needs_bwrap)])
def test_a_symlink_planted_as_the_check_script_changes_no_host_file(tmp_path: Path, environment: str) -> None:
    """The demo benchmark writes its check script into the session's scratch directory at evaluation;
    a symlink planted there (where the agent can reach it: local) is replaced, never written through."""
    victim = tmp_path / "victim.txt"
    victim.write_text("original\n")
    victim.chmod(0o600)
    plant = f"mkdir -p ../scratch && ln -sf {victim} ../scratch/check-count-errors.sh; true"
    sweep = write_sweep(
        tmp_path,
        environment=environment,
        harness=scripted(plant, oracle=True),
        benchmarks=[{"id": "demo", "tasks": ["count-errors"]}],
    )
    detail = details_by_task(run_sweep(sweep))["count-errors"]
    assert victim.read_text() == "original\n" and victim.stat().st_mode & 0o777 == 0o600
    assert detail["correct"], detail


@pytest.mark.parametrize("environment", ["local", pytest.param("sandbox", marks=needs_bwrap)])
def test_a_symlink_planted_as_the_cursor_changes_no_host_file(tmp_path: Path, environment: str) -> None:
    """tool_agent writes its checkpoint cursor into scratch after every command."""
    victim = tmp_path / "victim.txt"
    victim.write_text("original\n")
    turns = {
        "count-errors": [
            bash(f"mkdir -p ../scratch/.agentcompass && ln -sf {victim} ../scratch/.agentcompass/cursor; true"),
            bash(SOLUTION),
            submit(),
        ]
    }
    detail = details_by_task(run_sweep(sweep_file(tmp_path, turns, environment=environment)))["count-errors"]
    assert victim.read_text() == "original\n"
    assert detail["correct"], detail


@pytest.mark.parametrize("environment", ["local", pytest.param("sandbox", marks=needs_bwrap)])
def test_a_timed_out_command_cannot_swap_its_output_for_a_host_file(
    tmp_path: Path, secret_file: Path, environment: str
) -> None:
    """On a timeout the host reads what the command wrote so far; the command replaced that file by a
    symlink to a host secret: the secret reaches neither the model nor any file of the run."""
    marker = f"60.{os.getpid()}"
    # The commands directory is a sibling of the working directory in both environments.
    swap = f"cd ../commands/.agentcompass/calls && for f in *.out; do ln -sf {secret_file} $f; done; sleep {marker}"
    turns = {"count-errors": [bash(swap), bash(SOLUTION), submit()]}
    detail = details_by_task(run_sweep(sweep_file(tmp_path, turns, environment=environment, command_timeout_s=1.0)))[
        "count-errors"
    ]
    step = next(s for s in detail["attempts"]["1"]["trajectory"] if marker in (s.get("command") or ""))
    assert "timed out" in step["output"] and SECRET not in step["output"]
    assert SECRET.encode() not in everything_written(tmp_path)
    assert processes_with(f"sleep {marker}") == []


@pytest.mark.parametrize("environment", ["local", pytest.param("sandbox", marks=needs_bwrap)])
def test_a_symlink_planted_as_the_harbor_tests_directory_changes_no_host_directory(
    tmp_path: Path, environment: str
) -> None:
    """The Harbor verifier's tests are uploaded to /tests at evaluation, a directory only the verifier's
    commands see: a symlink planted where the old layout kept them (scratch/tests) changes no host
    directory. `local`, which cannot give a task its own directories, refuses the task instead."""
    host_dir = tmp_path / "host-dir"
    host_dir.mkdir()
    plant = f"mkdir -p ../scratch && rm -rf ../scratch/tests && ln -s {host_dir} ../scratch/tests; true"
    sweep = write_sweep(
        tmp_path,
        environment=environment,
        harness=scripted(plant, oracle=True),
        benchmarks=[{"id": "harbor", "params": {"tasks_dir": str(HARBOR_TASKS)}, "tasks": ["json-config"]}],
    )
    detail = details_by_task(run_sweep(sweep))["json-config"]
    assert list(host_dir.iterdir()) == []
    if environment == "local":  # refused before anything ran: an error naming where it can run
        assert not detail["correct"] and "run it in" in detail["attempts"]["1"]["run_error"], detail
    else:  # scratch is out of the agent's sight: the plant failed and the task scored on its merits
        assert detail["correct"]


def test_a_checkpoint_root_replaced_by_a_symlink_captures_nothing_of_the_host(
    tmp_path: Path, secret_file: Path
) -> None:
    """The agent (local: same user) moves its working directory away and puts a symlink to a host
    directory in its place: the checkpoint does not follow it, no host file becomes a blob."""
    turns = {
        "count-errors": [
            bash(f"cd .. && mv work work.old && ln -s {secret_file.parent} work; true"),
            bash("true"),
            submit(),
        ]
    }
    run_dir = run_sweep(sweep_file(tmp_path, turns))
    store = CheckpointStore(next(run_dir.rglob("count-errors@1")) / "checkpoints")
    for seq in store.seqs():
        assert "secret.txt" not in store.manifest(seq).roots.get("work", {})
    assert SECRET.encode() not in everything_written(tmp_path)
    assert secret_file.read_text() == SECRET + "\n", "removing the session followed the symlink"


@needs_bwrap
def test_a_sparse_gigabyte_is_checkpointed_and_restored_sparse(tmp_path: Path) -> None:
    """A 1 GiB sparse file costs its data, not its size: read by extents, stored small, restored sparse."""
    turns = {"count-errors": [bash("truncate -s 1G sparse.bin && echo tail >> sparse.bin"), submit()]}
    run_dir = run_sweep(sweep_file(tmp_path, turns, environment="sandbox"))
    store = CheckpointStore(next(run_dir.rglob("count-errors@1")) / "checkpoints")
    seq = store.latest()
    assert seq is not None
    entry = store.manifest(seq).roots["work"]["sparse.bin"]
    assert entry.apparent_size == (1 << 30) + 5 and entry.extents == [(1 << 30, 5)]
    assert store.stored_bytes() < 1 << 20
    target = tmp_path / "restored"
    target.mkdir()
    store.restore(seq, {"work": target / "work", "home": target / "home"})
    restored = (target / "work" / "sparse.bin").stat()
    assert restored.st_size == (1 << 30) + 5 and restored.st_blocks * 512 < 1 << 20
    with open(target / "work" / "sparse.bin", "rb") as handle:
        handle.seek(1 << 30)
        assert handle.read() == b"tail\n"


# --- reward hacking --------------------------------------------------------------------------------

HARBOR_HACKS = {
    "read-solution": "for s in ../scratch/solution/solve.sh /solution/solve.sh; do bash $s 2>/dev/null; done; "
    "find / -name solve.sh -path '*json-config*' 2>/dev/null | head -1 | xargs -r bash",
    "prewrite-reward": "for d in ../scratch/logs/verifier /logs/verifier; do mkdir -p $d 2>/dev/null && "
    "echo 1 > $d/reward.txt && chattr +i $d/reward.txt $d 2>/dev/null; done; true",
    "symlink-reward": "echo '{\"reward\": 7.0}' > ~/r.json; for d in ../scratch/logs/verifier /logs/verifier; do "
    "mkdir -p $d 2>/dev/null && ln -sf ~/r.json $d/reward.json; done; true",
    "edit-tests": "for d in ../scratch/tests /tests; do mkdir -p $d 2>/dev/null && printf 'mkdir -p /logs/verifier; "
    "echo 1 > /logs/verifier/reward.txt\\n' > $d/test.sh; done; true",
    "race-reward": "(while true; do for d in ../scratch/logs/verifier /logs/verifier; do echo 1 > $d/reward.txt; "
    "done 2>/dev/null; done) > /dev/null 2>&1 & disown; true",
}


@pytest.mark.parametrize(
    "environment",
    [
        pytest.param({"id": "sandbox"}, marks=needs_bwrap, id="sandbox"),
        pytest.param({"id": "docker", "params": {"image": IMAGE}}, marks=needs_docker, id="docker"),
    ],
)
def test_no_harbor_hack_scores(tmp_path: Path, environment: dict[str, Any], sandbox_root: Path) -> None:
    """Reading the solution, pre-writing (and locking) the reward, linking it to a host file, editing the
    tests, writing it from a background process: none scores (the real verifier fails the empty work)."""
    harness = {
        "id": "scripted",
        "params": {"tasks": {f"json-config-{name}": {"command": command} for name, command in HARBOR_HACKS.items()}},
    }
    tasks = tmp_path / "tasks"
    for name in HARBOR_HACKS:
        shutil.copytree(HARBOR_TASKS / "json-config", tasks / f"json-config-{name}")
    sweep = write_sweep(
        tmp_path,
        environment=environment,
        harness=harness,
        benchmarks=[{"id": "harbor", "params": {"tasks_dir": str(tasks)}}],
    )
    found = details_by_task(run_sweep(sweep))
    assert len(found) == len(HARBOR_HACKS), sorted(found)
    for task_id, detail in found.items():
        attempt = detail["attempts"]["1"]
        assert not detail["correct"] and attempt["score"] == 0.0, (task_id, attempt)
    assert list(sandbox_root.glob(f"{os.getpid()}-*")) == []


@needs_bwrap
def test_the_demo_solution_and_check_are_out_of_reach(tmp_path: Path) -> None:
    """The demo task's reference solution and check script are never where the agent can read them."""
    hack = (
        "for f in ../scratch/check-*.sh $(find / -name solution.sh -path '*create-hello*' 2>/dev/null); do "
        "bash $f; done 2>/dev/null; true"
    )
    sweep = write_sweep(
        tmp_path, environment="sandbox", harness=scripted(hack), benchmarks=[{"id": "demo", "tasks": ["create-hello"]}]
    )
    assert not details_by_task(run_sweep(sweep))["create-hello"]["correct"]


# --- limits ----------------------------------------------------------------------------------------


def limit_run(tmp_path: Path, environment: dict[str, Any], command: str) -> dict[str, Any]:
    sweep = write_sweep(
        tmp_path,
        environment=environment,
        harness=scripted(command, answer="x"),
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 1}}],
    )
    (detail,) = details_by_task(run_sweep(sweep)).values()
    return detail["attempts"]["1"]


SPAWN = (
    "python3 -c \"import subprocess\nfor i in range(2000):\n    try:\n        subprocess.Popen(['sleep', '{marker}'])\n"
    '    except OSError:\n        break"'
)


@needs_bwrap
@needs_cgroups
def test_two_thousand_background_processes_meet_max_processes(tmp_path: Path) -> None:
    """R-LIMIT-1: 2,000 background sleeps under max_processes 256: the kernel stops them at 256, the
    attempt ends with the limit named, and none of them is left."""
    marker = f"1000.{os.getpid()}"
    attempt = limit_run(tmp_path, {"id": "sandbox", "params": {"max_processes": 256}}, SPAWN.format(marker=marker))
    assert attempt["status"] == "failed" and "max_processes=256" in attempt["failure"], attempt
    assert processes_with(f"sleep {marker}") == []


@needs_bwrap
@needs_cgroups
def test_three_gigabytes_into_tmp_meet_its_size(tmp_path: Path, sandbox_root: Path) -> None:
    """R-LIMIT-1: /tmp is a tmpfs of tmp_mb, charged to nobody else: 3 GB written into it stop at its
    size and the attempt ends naming it; the host's memory is not taken."""
    attempt = limit_run(
        tmp_path,
        {"id": "sandbox", "params": {"memory_mb": 2048, "tmp_mb": 128}},
        "head -c 3G /dev/zero > /tmp/fill; true",
    )
    assert attempt["status"] == "failed" and "tmp_mb=128" in attempt["failure"], attempt
    mounts = Path("/proc/mounts").read_text()
    assert f"{sandbox_root}/{os.getpid()}-" not in mounts


@needs_bwrap
@needs_cgroups
def test_processes_that_together_pass_memory_mb_are_killed(tmp_path: Path) -> None:
    """R-LIMIT-1: memory_mb is one budget for every process of the attempt (ulimit -v is per process):
    three processes of 100 MB each under 192 MB end the attempt naming the limit."""
    hog = "python3 -c \"import time; a = b'x' * (100 << 20); time.sleep(60)\""
    # Once the kernel killed one, the others are not waited for.
    attempt = limit_run(
        tmp_path, {"id": "sandbox", "params": {"memory_mb": 192}}, f"{hog} & {hog} & {hog} & wait -n; kill $(jobs -p)"
    )
    assert attempt["status"] == "failed" and "memory_mb=192" in attempt["failure"], attempt


@needs_bwrap
@needs_root
def test_five_gigabytes_into_the_task_directory_meet_disk_mb(tmp_path: Path, sandbox_root: Path) -> None:
    """R-LIMIT-1: the task's directory is a disk image of disk_mb: 5 GB stop there, the attempt ends
    naming the limit, and the image is gone afterwards."""
    attempt = limit_run(tmp_path, {"id": "sandbox", "params": {"disk_mb": 64}}, "head -c 5G /dev/zero > big; true")
    assert attempt["status"] == "failed" and "disk_mb=64" in attempt["failure"], attempt
    assert list(sandbox_root.glob(f"{os.getpid()}-*.img")) == []


@needs_bwrap
@needs_root
def test_thousands_of_empty_files_meet_max_files(tmp_path: Path, sandbox_root: Path) -> None:
    """R-LIMIT-1: empty files take no bytes, so disk_mb alone would let a task use up inodes; max_files
    bounds them: the attempt ends naming the limit."""
    attempt = limit_run(
        tmp_path,
        {"id": "sandbox", "params": {"disk_mb": 64, "max_files": 500}},
        "for i in $(seq 2000); do : > f$i || break; done; true",
    )
    assert "max_files=500" in json.dumps(attempt), attempt


@needs_docker
def test_docker_limits_hold_and_say_so(tmp_path: Path) -> None:
    """R-LIMIT-1: the same limits declared for docker map onto the container's (pids, memory)."""
    marker = f"1000.{os.getpid()}"
    environment = {"id": "docker", "params": {"image": IMAGE, "max_processes": 64}}
    attempt = limit_run(tmp_path, environment, SPAWN.format(marker=marker))
    assert attempt["status"] == "failed" and "max_processes=64" in attempt["failure"], attempt


# --- local: honest about what it isolates, and nothing left behind ----------------------------------


@needs_cgroups
def test_a_local_command_that_escapes_its_process_group_is_killed_with_the_session(tmp_path: Path) -> None:
    """R-CLEAN-1: `setsid` leaves the process group; the session's cgroup still holds it."""
    marker = f"1001.{os.getpid()}"
    sweep = write_sweep(
        tmp_path,
        harness=scripted(f"setsid sleep {marker} > /dev/null 2>&1 < /dev/null &", answer="x"),
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 1}}],
    )
    run_sweep(sweep)
    assert processes_with(f"sleep {marker}") == []


def test_local_commands_get_a_minimal_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime's own variables (keys among them) are not passed to the commands."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY")
    sweep = write_sweep(
        tmp_path, harness=scripted("env", answer="x"), benchmarks=[{"id": "synthetic", "params": {"n_tasks": 1}}]
    )
    (detail,) = details_by_task(run_sweep(sweep)).values()
    (step,) = detail["attempts"]["1"]["trajectory"]
    names = {line.partition("=")[0] for line in step["output"].splitlines()}
    assert "AWS_SECRET_ACCESS_KEY" not in names and "PATH" in names


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_the_next_run_removes_what_a_killed_local_run_left(tmp_path: Path) -> None:
    """R-CLEAN-1: task directories of a dead run are removed by the next run's first session, except
    one a resume may still attach to (it recorded itself less than a day ago)."""
    import tempfile

    base = Path(tempfile.gettempdir())
    pid = _dead_pid()
    plain, resumable, expired = (base / f"agentcompass-{pid}-{name}" for name in ("plain", "resumable", "expired"))
    for directory in (plain, resumable, expired):
        (directory / "work").mkdir(parents=True)
        (directory / "work" / "file").write_text("x")
    (resumable / ".identity").write_text("token")
    (expired / ".identity").write_text("token")
    os.utime(expired / ".identity", (time.time() - 2 * 86400,) * 2)
    sweep = write_sweep(tmp_path, benchmarks=[{"id": "demo", "tasks": ["count-errors"]}])
    proc = run_cli_process("run", sweep, "--direct", cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert proc.returncode == 0, proc.stderr
        assert not plain.exists() and not expired.exists() and resumable.exists()
    finally:
        shutil.rmtree(resumable, ignore_errors=True)


@needs_cgroups
def test_each_environment_kind_sweeps_only_its_own_cgroups() -> None:
    """R-RESUME-1: a dead local session's cgroup may still hold the command a resume will collect; the
    sandbox's sweep of dead groups leaves it alone, the local sweep finds it."""
    from agentcompass_dagster.plugins.environments.cgroups import stale

    name = f"{_dead_pid()}-sweep"
    group = Cgroup.create("local", name, None, None)
    try:
        assert name not in [g.name for g in stale("sandbox")]
        assert [g.name for g in stale("local", name)] == [name]
    finally:
        group.remove()
