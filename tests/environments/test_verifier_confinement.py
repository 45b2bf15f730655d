"""The code under test cannot decide its own verdict (issue 37, findings 1 and 2): what a check
or a Harbor verifier runs of the agent's code runs confined (judge.py), so it can neither rewrite the
memory of the check's shell (``/proc/PID/mem``) nor signal the judge; a Harbor verifier killed by a
signal, or one that leaves processes behind to rewrite its reward, gives no verdict. Each probe, run as
a hostile agent would, in the sandbox and in docker; an honest solution still passes beside them."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import IMAGE, details_by_task, fixture_base, needs_docker, write_sweep

from agentcompass_dagster.plugins.benchmarks import judge
from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
needs_landlock = pytest.mark.skipif(judge.landlock()[1] < 1, reason="this kernel has no Landlock")

# Walks up its ancestors and, in each whose memory it can write, turns every parsed `exit` into `true`:
# the check's `|| exit 1` then goes on to its `echo OK`. The arithmetic is wrong on purpose.
PATCH_ANCESTORS = textwrap.dedent("""
    import os, re
    def patch(pid):
        try:
            maps = open(f"/proc/{pid}/maps").read()
            mem = open(f"/proc/{pid}/mem", "r+b", buffering=0)
        except OSError:
            return
        for line in maps.splitlines():
            if "[heap]" in line:
                low, high = (int(x, 16) for x in line.split()[0].split("-"))
                mem.seek(low)
                data = mem.read(high - low)
                for found in re.finditer(rb"exit\\x00", data):
                    mem.seek(low + found.start())
                    mem.write(b"true\\x00")
    pid = os.getppid()
    while pid > 1:
        patch(pid)
        pid = int(open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[1])
    def add(a, b): return 0
    def subtract(a, b): return 0
    def multiply(a, b): return 0
    def mean(xs): return 0
""")

ENVIRONMENTS = [
    pytest.param({"id": "sandbox"}, marks=needs_bwrap, id="sandbox"),
    pytest.param({"id": "docker", "params": {"image": IMAGE}}, marks=needs_docker, id="docker"),
]


def run(sweep: Path) -> tuple[Any, dict[str, Any]]:
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    return outcome.result, details_by_task(Path(outcome.result.run_dir))


def writes(path: str, source: str) -> str:
    return f"cat > {path} <<'AGENTCOMPASS_EOF'\n{source}\nAGENTCOMPASS_EOF\n"


@needs_landlock
@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_tested_code_that_rewrites_the_checks_shell_fails(tmp_path: Path, environment: dict[str, Any]) -> None:
    """Issue 37 finding 1: calc.py, imported by fix-calc's check as the verifier's user, patches its
    ancestors' memory so that `|| exit 1` no longer stops the check: the check fails it all the same."""
    harness = {"id": "scripted", "params": {"default": {"command": writes("calc.py", PATCH_ANCESTORS)}}}
    sweep = write_sweep(
        tmp_path, environment=environment, harness=harness, benchmarks=[{"id": "demo", "tasks": ["fix-calc"]}]
    )
    detail = run(sweep)[1]["fix-calc"]
    attempt = detail["attempts"]["1"]
    assert detail["correct"] is False and attempt["score"] == 0.0, attempt
    assert "FAIL: add(2, 3) returned 0" in attempt["benchmark_fields"]["check_output"]
    assert not attempt["benchmark_fields"]["check_output"].rstrip().endswith("OK")


# A Harbor task whose test runs the agent's program, as most real tasks' tests do.
TEST_SH = """#!/bin/bash
out=$(python3 /app/solve.py)
if [ "$out" = "42" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""
HACKS = {
    "honest": "print(42)",
    # Writes the reward itself, then kills every ancestor before the test can write its 0: from the top
    # down, so the test's shell is dead before the subshell it waits on could return to it (killed from
    # the bottom up, a loaded machine let the test write its 0 between two kills: a verdict of 0, no
    # failure, in CI).
    "kill-ancestors": textwrap.dedent("""
        import os, signal
        open("/logs/verifier/reward.txt", "w").write("1")
        ancestors, pid = [], os.getppid()
        while pid > 1:
            ancestors.append(pid)
            pid = int(open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[1])
        for pid in reversed(ancestors):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        print(0)
    """),
    # Issue 37 finding 4: a reward of a sparse gigabyte (no disk used), read as its size only.
    "sparse-reward": textwrap.dedent("""
        import os
        with open("/logs/verifier/reward.txt", "w") as reward:
            reward.truncate(1 << 30)
        print(0)
    """),
    # Answers wrong and leaves a process that keeps writing 1 over the test's 0.
    "linger": textwrap.dedent("""
        import os, time
        if os.fork() == 0:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            end = time.monotonic() + 20
            while time.monotonic() < end:
                try:
                    with open("/logs/verifier/reward.txt", "w") as reward:
                        reward.write("1")
                except OSError:
                    pass
                time.sleep(0.001)
            os._exit(0)
        print(0)
    """),
}


def harbor_tasks(root: Path) -> Path:
    for name in HACKS:
        task = root / name
        (task / "environment").mkdir(parents=True)
        (task / "tests").mkdir()
        (task / "environment" / "Dockerfile").write_text("FROM agentcompass-fixture:bookworm\nWORKDIR /app\n")
        (task / "task.toml").write_text(
            'version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n[agent]\ntimeout_sec = 60.0\n'
        )
        (task / "instruction.md").write_text("Write /app/solve.py, which prints the answer.\n")
        # The sparse reward's task lets the program write the reward, as tests that write it from pytest do.
        (task / "tests" / "test.sh").write_text(
            "#!/bin/bash\npython3 /app/solve.py\n" if name == "sparse-reward" else TEST_SH
        )
    return root


@needs_landlock
@pytest.mark.parametrize(
    "environment",
    [
        pytest.param({"id": "sandbox"}, marks=needs_bwrap, id="sandbox"),
        pytest.param({"id": "docker", "params": {}}, marks=needs_docker, id="docker"),
    ],
)
def test_agent_code_a_harbor_verifier_runs_cannot_write_its_reward(tmp_path: Path, environment: dict[str, Any]) -> None:
    """Issue 37 finding 2: a solve.py that writes reward 1 and kills its ancestors, and one that answers
    wrong but leaves a process rewriting reward.txt with 1, and one that makes reward.txt a sparse gigabyte
    (finding 4: read by its size, never held), score 0 with the cause named (no verdict, the
    agent's failure, not an error); the honest solve.py beside them scores 1 under the same judge."""
    if environment["id"] == "docker":
        fixture_base()
    harness = {
        "id": "scripted",
        "params": {"tasks": {name: {"command": writes("/app/solve.py", source)} for name, source in HACKS.items()}},
    }
    sweep = write_sweep(
        tmp_path,
        environment=environment,
        harness=harness,
        benchmarks=[{"id": "harbor", "params": {"tasks_dir": str(harbor_tasks(tmp_path / "tasks"))}}],
    )
    result, details = run(sweep)
    assert details["honest"]["correct"] is True, details["honest"]
    assert details["honest"]["attempts"]["1"]["benchmark_fields"]["verifier_confined"] is True
    killed, lingered = details["kill-ancestors"]["attempts"]["1"], details["linger"]["attempts"]["1"]
    assert details["kill-ancestors"]["correct"] is False and killed["score"] == 0.0, killed
    assert "the verifier was killed by signal 9: no verdict" in killed["failure"], killed
    assert details["linger"]["correct"] is False and lingered["score"] == 0.0, lingered
    assert "the verifier left 1 process running after it ended: no verdict" in lingered["failure"], lingered
    sparse = details["sparse-reward"]["attempts"]["1"]
    assert sparse["score"] == 0.0 and "reward.txt is 1073741824 bytes, not a reward" in sparse["failure"], sparse
    assert result.metrics.counts.error == 0
