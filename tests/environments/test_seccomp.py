"""The sandbox's seccomp filter (R-LIMIT-1, R-NET-1): the kernel keyrings, new user namespaces, io_uring,
ptrace, perf_event_open and bpf are denied to every sandboxed command, so nothing an attempt stores in
its user's keyring reaches a later attempt, while ordinary work (Python, threads, fork, pipelines) runs."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.contracts.environment import Caller, ExecResult
from agentcompass_dagster.plugins.environments.sandbox import SandboxEnvironment
from agentcompass_dagster.contracts.records import ExecutionPlan, TaskSpec

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

SYSCALL = "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
# KEY_SPEC_USER_KEYRING = -4: the keyring of the user (uid 65534), shared by every process of that uid.
ADD_KEY = (
    SYSCALL + "r = libc.syscall({nr}, b'user', b'{name}', b'solve.sh: echo 42', 17, -4); print(r, ctypes.get_errno())"
)
FIND_KEY = SYSCALL + "r = libc.syscall({nr}, 10, -4, b'user', b'{name}', 0); print(r, ctypes.get_errno())"
PROBES = {
    # name: python code printing "<return value> <errno>" for the call, x86_64 numbers
    "keyctl": SYSCALL + "print(libc.syscall(250, 0, -4, 0), ctypes.get_errno())",
    "io_uring_setup": SYSCALL
    + "p = ctypes.create_string_buffer(120); print(libc.syscall(425, 4, p), ctypes.get_errno())",
    "ptrace(PTRACE_TRACEME)": SYSCALL + "print(libc.syscall(101, 0, 0, 0, 0), ctypes.get_errno())",
    "perf_event_open": SYSCALL
    + "p = ctypes.create_string_buffer(128); print(libc.syscall(298, p, 0, -1, -1, 0), ctypes.get_errno())",
    "bpf": SYSCALL + "p = ctypes.create_string_buffer(128); print(libc.syscall(321, 0, p, 128), ctypes.get_errno())",
    "unshare(CLONE_NEWUSER)": SYSCALL + "print(libc.unshare(0x10000000), ctypes.get_errno())",
}


def run(commands: list[tuple[str, Caller]]) -> list[ExecResult]:
    """Each command in a session of its own (one attempt each), in order."""

    async def main() -> list[ExecResult]:
        environment = SandboxEnvironment(EnvironmentConfig(id="sandbox", provider="sandbox"))
        plan = ExecutionPlan(
            task_id="t", attempt=1, benchmark_id="b", harness_id="h", environment_id="sandbox", model_id="m"
        )
        results = []
        for command, caller in commands:
            session = await environment.open(plan, TaskSpec(id="t", input="x"))
            try:
                results.append(await session.exec(command, caller=caller))
            finally:
                await session.close()
        return results

    return asyncio.run(main())


def python(code: str) -> str:
    """``code`` (statements joined by "; ") as a Python script on the command's stdin."""
    return "python3 - <<'PY'\nimport os\n" + code.replace("; ", "\n") + "\nPY"


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the probes use x86_64 system call numbers")
def test_the_calls_an_agent_has_no_use_for_fail_with_eperm(sandbox_root: Path) -> None:
    """keyctl, io_uring_setup, ptrace, perf_event_open, bpf and unshare of a user namespace each fail with
    EPERM (1) in the sandbox, for the agent and the verifier alike; `unshare -U` from util-linux too."""
    commands = [(python(code), caller) for code in PROBES.values() for caller in (Caller.agent, Caller.verifier)]
    results = run([*commands, ("unshare -U true", Caller.agent)])
    outcomes = [r.stdout.split() for r in results[:-1]]
    assert outcomes == [["-1", "1"]] * len(commands), dict(zip([c for c, _ in commands], outcomes))
    assert results[-1].exit_code != 0 and "Operation not permitted" in results[-1].stderr


def test_ordinary_work_still_runs(sandbox_root: Path) -> None:
    """Threads, fork, subprocesses, pipelines and Python run as before under the filter."""
    code = (
        "import os, subprocess, threading; t = threading.Thread(target=lambda: None); t.start(); t.join(); "
        "pid = os.fork(); os._exit(7) if pid == 0 else None; print(os.waitpid(pid, 0)[1] >> 8, "
        "subprocess.run(['sh', '-c', 'echo x | tr x y'], capture_output=True, text=True).stdout.strip())"
    )
    (result,) = run([(python(code), Caller.agent)])
    assert result.exit_code == 0 and result.stdout.split() == ["7", "y"], result


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the probes use x86_64 system call numbers")
def test_an_attempt_leaves_nothing_in_the_keyring_for_the_next(sandbox_root: Path) -> None:
    """Attempt 1 stores the solution it saw while the verifier ran in its user's keyring; attempt 2 (same
    uid, no network) looks for it. Without the filter the key outlived attempt 1 and attempt 2 read it
    back (pass@k independence broken, across runs and models); now the store fails and nothing is found."""
    name = f"agentcompass-leak-{os.getpid()}-{id(sandbox_root)}"
    stored, found = run(
        [
            (python(ADD_KEY.format(nr=248, name=name)), Caller.verifier),
            (python(FIND_KEY.format(nr=250, name=name)), Caller.agent),
        ]
    )
    assert stored.stdout.split() == ["-1", "1"], stored
    assert found.stdout.split() == ["-1", "1"], found
