"""The verifier runs in the framework's context, not the agent's (R-ATT-4, R-NET-1): an agent that
plants code where a verifier would pick it up (a module shadowing the standard library in the working
directory, a package run with ``python3 -m``, a ``.pth`` file or ``usercustomize.py`` in its user
site-packages) cannot turn a failing task into a pass; and an agent reaches no network unless the sweep
declares one.

Each probe is a Harbor task whose verifier fails the agent's work (the answer is wrong) and whose planted
code would write a reward of 1 if the verifier ran it. The control (the same task solved) passes."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import write_sweep, write_task

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate
from agentcompass_dagster.runtime.store.run_store import open_run_dir

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
# Harbor's tasks need their directories at absolute paths, which `local` cannot give (it refuses them:
# test_local_refuses_a_harbor_task); the docker verifier has its own probes (test_docker_verifier.py).
ENVIRONMENTS = [pytest.param("sandbox", marks=needs_bwrap)]

# What the forging code does when it runs inside the verifier: the reward file is the one the verifier
# writes, found through the verifier's own command line.
FORGE = textwrap.dedent("""\
    import atexit, glob, os
    def _forge():
        for path in glob.glob("/proc/*/cmdline"):
            try:
                words = open(path, "rb").read().split(b"\\0")
            except OSError:
                continue
            for word in words:
                if word.endswith(b"/tests/test.sh"):
                    logs = word.decode()[:-len("/tests/test.sh")] + "/logs/verifier"
                    open(logs + "/reward.txt", "w").write("1")
    atexit.register(_forge)
    _forge()
    """)

# The verifier: the answer must be 42; Python reads it, the way many verifiers do.
VERIFIER = {
    "stdlib": "python3 - <<'PY'\nimport json\nok = json.loads(open(\"answer.json\").read()) == 42\n"
    'open("/logs/verifier/reward.txt", "w").write("1" if ok else "0")\nPY\n',
    "module": "cat > /tmp/t.py <<'PY'\nimport json, unittest\nclass T(unittest.TestCase):\n"
    '    def test(self): self.assertEqual(json.load(open("answer.json")), 42)\nPY\n'
    "if python3 -m unittest discover -s /tmp -p t.py; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n",
}
SITE = "$HOME/.local/lib/python3.11/site-packages"
PROBES: dict[str, tuple[str, str]] = {
    # probe: (the verifier, what the agent plants besides its wrong answer)
    "json.py shadows the standard library": ("stdlib", f"cat > json.py <<'PY'\n{FORGE}\nPY"),
    "unittest/ package run by python3 -m": (
        "module",
        f"mkdir -p unittest && cat > unittest/__init__.py <<'PY'\n{FORGE}\nPY\n"
        f"cp unittest/__init__.py unittest/__main__.py",
    ),
    "a .pth file in the user site-packages": (
        "stdlib",
        f"mkdir -p {SITE} && cat > {SITE}/zz_forge.py <<'PY'\n{FORGE}\nPY\necho 'import zz_forge' > {SITE}/zz.pth",
    ),
    "usercustomize.py in the user site-packages": (
        "stdlib",
        f"mkdir -p {SITE} && cat > {SITE}/usercustomize.py <<'PY'\n{FORGE}\nPY",
    ),
}


def harbor_task(tasks: Path, name: str, verifier: str) -> None:
    task = tasks / name
    (task / "tests").mkdir(parents=True)
    (task / "solution").mkdir()
    (task / "task.toml").write_text('[metadata]\ncategory = "probe"\n[verifier]\ntimeout_sec = 60\n')
    (task / "instruction.md").write_text("Write 42 to answer.json.\n")
    (task / "tests" / "test.sh").write_text("#!/bin/bash\n" + VERIFIER[verifier])
    (task / "solution" / "solve.sh").write_text("echo 42 > answer.json\n")


def run_agent(tmp_path: Path, environment: str, tasks: Path, commands: dict[str, str], **fields: Any) -> Any:
    sweep = write_sweep(
        tmp_path,
        name=f"probe-{environment}",
        environment=environment,
        benchmarks=[{"id": "harbor", "params": {"tasks_dir": str(tasks)}}],
        harness={
            "id": "scripted",
            "params": {"tasks": {t: {"command": c, "answer": "done"} for t, c in commands.items()}},
        },
        **fields,
    )
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    return open_run_dir(Path(outcome.result.run_dir)).load_all_details()


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_code_the_agent_planted_for_the_verifier_never_runs_in_it(tmp_path: Path, environment: str) -> None:
    """R-ATT-4: a wrong answer plus code planted where a verifier run in the agent's cwd and HOME would
    load it (json.py, unittest/, a .pth, usercustomize.py) scores 0 — the verifier's Python has no cwd
    on sys.path and no user site, and its HOME is a fresh one; each forged 1.0 before. The control, the
    same task solved, scores 1 through the same verifiers."""
    tasks = tmp_path / "tasks"
    commands = {}
    for index, (probe, (verifier, planted)) in enumerate(PROBES.items()):
        harbor_task(tasks, f"forge-{index}", verifier)
        commands[f"forge-{index}"] = f"echo 41 > answer.json\n{planted}"
        harbor_task(tasks, f"solved-{index}", verifier)
        commands[f"solved-{index}"] = "echo 42 > answer.json"
    details = run_agent(tmp_path, environment, tasks, commands)
    rewards = {task: detail.attempts["1"].rewards.get("reward") for task, detail in details.items()}
    names = list(PROBES)
    assert {names[int(t[-1])]: r for t, r in rewards.items() if t.startswith("forge")} == dict.fromkeys(PROBES, 0.0)
    assert {t: r for t, r in rewards.items() if t.startswith("solved")} == {
        f"solved-{i}": 1.0 for i in range(len(PROBES))
    }


@needs_bwrap
def test_the_verifier_sees_neither_the_agents_home_nor_its_tmp(tmp_path: Path) -> None:
    """R-ATT-4: in the sandbox the verifier's HOME and /tmp are new: files the agent left in its home and
    in the /tmp its commands shared are not there, and its Python has no user site-packages."""
    tasks = tmp_path / "tasks"
    write_task(
        tasks,
        "context",
        solution="true",
        check='[ ! -e "$HOME/left" ] && [ ! -e /tmp/left ] && [ -w "$HOME" ] && [ -w "$TMPDIR" ] && '
        'python3 -c "import site, sys; sys.exit(site.ENABLE_USER_SITE is not False)"',
    )
    sweep = write_sweep(
        tmp_path,
        name="context",
        environment="sandbox",
        benchmarks=[{"id": "demo", "params": {"tasks_dir": str(tasks)}}],
        harness={
            "id": "scripted",
            "params": {"default": {"command": 'touch "$HOME/left" /tmp/left && [ -e /tmp/left ]', "answer": "x"}},
        },
    )
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    detail = open_run_dir(Path(outcome.result.run_dir)).load_all_details()["context"]
    assert detail.correct, detail.attempts["1"].benchmark_fields


def reach(port: int) -> str:
    return f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null"


@needs_bwrap
def test_an_agent_reaches_no_network_unless_the_sweep_declares_one(tmp_path: Path, host_server: int) -> None:
    """R-NET-1: with no execution.network declared, the sandbox's run and evaluation phases cannot reach a
    server on the host's 127.0.0.1 (where a Dagster UI's unauthenticated GraphQL listens); a sweep that
    declares the host network for the run phase reaches it."""
    tasks = tmp_path / "tasks"
    probe = f"if {reach(host_server)}; then echo reachable; else echo blocked; fi"
    write_task(tasks, "net", solution=f"{probe} > net.txt", check=f"grep -qx blocked net.txt && ! {reach(host_server)}")
    for name, network, correct in [("default", None, True), ("declared", {"run": "host"}, False)]:
        sweep = write_sweep(
            tmp_path,
            name=name,
            environment="sandbox",
            benchmarks=[{"id": "demo", "params": {"tasks_dir": str(tasks)}}],
            **({"execution": {"network": network}} if network else {}),
        )
        (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
        assert outcome.result is not None, outcome.error
        detail = open_run_dir(Path(outcome.result.run_dir)).load_all_details()["net"]
        assert detail.correct is correct, (name, detail.attempts["1"].benchmark_fields)
