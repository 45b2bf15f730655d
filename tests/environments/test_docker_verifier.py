"""Docker: the verifier never runs as root, nor as the agent, and starts in a fresh HOME (R-ATT-4: the
evaluation runs in the framework's context; issue "Scores an agent cannot forge or inflate").

Before, every command run for the verifier in a container ran as 0:0 with the agent's HOME and its
Python's user site-packages on: a ``.pth`` or ``usercustomize.py`` the agent (uid 65534) left in
``~/.local/lib/python3.11/site-packages`` ran as root inside the check and wrote the reward.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import IMAGE, details_by_task, needs_docker, opened_session, write_sweep
from test_verifier_context import SITE, harbor_task

from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.contracts.environment import VERIFIER_PATH, Caller, EnvironmentSession
from agentcompass_dagster.plugins.environments.docker import DockerEnvironment
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate

pytestmark = needs_docker
DOCKER = {"id": "docker", "params": {"image": IMAGE}}
AGENT_UID = 65534
# Code that, once the check's Python loads it, rewrites the reward as that Python exits; in docker the
# reward's path is always the same.
FORGE = 'import atexit\natexit.register(lambda: open("/logs/verifier/reward.txt", "w").write("1"))\n'
PROBES: dict[str, tuple[str, str]] = {
    # probe: (the verifier of test_verifier_context, what the agent plants besides its wrong answer)
    "a .pth file in the user site-packages": (
        "stdlib",
        f"mkdir -p {SITE} && cat > {SITE}/zz_forge.py <<'PY'\n{FORGE}PY\necho 'import zz_forge' > {SITE}/zz.pth",
    ),
    "usercustomize.py in the user site-packages": (
        "stdlib",
        f"mkdir -p {SITE} && cat > {SITE}/usercustomize.py <<'PY'\n{FORGE}PY",
    ),
    "json.py shadows the standard library": ("stdlib", f"cat > json.py <<'PY'\n{FORGE}PY"),
    "unittest/ package run by python3 -m": (
        "module",
        f"mkdir -p unittest && cat > unittest/__init__.py <<'PY'\n{FORGE}PY\n"
        "cp unittest/__init__.py unittest/__main__.py",
    ),
}


@pytest.fixture
def container() -> Iterator[tuple[EnvironmentSession, asyncio.AbstractEventLoop]]:
    with opened_session(DockerEnvironment(EnvironmentConfig(**DOCKER))) as opened:
        yield opened


def test_the_verifier_runs_as_its_own_user_in_a_fresh_home(
    container: tuple[EnvironmentSession, asyncio.AbstractEventLoop],
) -> None:
    """Probe ``id -u`` for the verifier: it was 0. Now its uid and gid are neither root's nor the
    agent's; each of its commands gets a new, empty, writable HOME and TMPDIR under /scratch, a PATH of
    system directories, and a Python without user site-packages or the working directory on sys.path."""
    session, loop = container

    def run(command: str, caller: Caller) -> str:
        result = loop.run_until_complete(session.exec(command, caller=caller))
        assert result.exit_code == 0, result
        return result.stdout

    assert run("id -u", Caller.agent) == f"{AGENT_UID}\n"
    uid, gid = run("id -u; id -g", Caller.verifier).split()
    assert int(uid) not in (0, AGENT_UID) and int(gid) not in (0, AGENT_UID)
    context = (
        'echo "$HOME $TMPDIR $PATH"; ls -A "$HOME" "$TMPDIR"; touch "$HOME/left" "$TMPDIR/left"; '
        'python3 -c "import site, sys; print(site.ENABLE_USER_SITE, sys.flags.safe_path)"'
    )
    first, second = run(context, Caller.verifier), run(context, Caller.verifier)
    home, tmpdir, path = first.split("\n")[0].split()
    assert home.startswith("/scratch/") and tmpdir.startswith("/scratch/") and path == VERIFIER_PATH
    assert "left" not in second and second.split()[0] != home, (first, second)
    assert first.endswith("False True\n")


def test_the_agent_reaches_nothing_in_scratch_the_verifier_uses(
    container: tuple[EnvironmentSession, asyncio.AbstractEventLoop],
) -> None:
    """Probe the agent reading /scratch, or planting the verifier's reward directory there before it
    runs: both fail (as they did while /scratch was root's; it is the verifier's user's now). The
    verifier reads what the framework wrote there and writes its reward."""
    session, loop = container
    loop.run_until_complete(
        session.write_file("/scratch/tests/test.sh", b"echo 1 > /scratch/logs/verifier/reward.txt\n")
    )
    agent = loop.run_until_complete(
        session.exec("cat /scratch/tests/test.sh; ls /scratch; mkdir -p /scratch/logs/verifier", caller=Caller.agent)
    )
    assert agent.exit_code != 0 and agent.stdout == "" and agent.stderr.count("Permission denied") == 3, agent
    verifier = loop.run_until_complete(
        session.exec("mkdir -p /scratch/logs/verifier && bash /scratch/tests/test.sh", caller=Caller.verifier)
    )
    assert verifier.exit_code == 0, verifier
    assert loop.run_until_complete(session.read_file("/scratch/logs/verifier/reward.txt")) == b"1\n"


def test_code_the_agent_planted_never_runs_in_the_docker_verifier(tmp_path: Path) -> None:
    """Probe a wrong answer plus code planted where the check's Python would load it: a ``.pth`` or a
    ``usercustomize.py`` in the agent's ``~/.local/lib/python3.11/site-packages``, a ``json.py`` or a
    ``unittest/`` in its working directory, each rewriting the reward from an atexit hook. In docker
    each forged 1.0 (the verifier ran them as root, with the agent's HOME and the working directory on
    sys.path); now each scores 0, and the same tasks solved score 1 through the same verifiers."""
    tasks = tmp_path / "tasks"
    commands = {}
    for index, (verifier, planted) in enumerate(PROBES.values()):
        harbor_task(tasks, f"forge-{index}", verifier)
        commands[f"forge-{index}"] = f"echo 41 > answer.json\n{planted}"
        harbor_task(tasks, f"solved-{index}", verifier)
        commands[f"solved-{index}"] = "echo 42 > answer.json"
    sweep = write_sweep(
        tmp_path,
        name="probe-docker",
        environment=DOCKER,
        benchmarks=[{"id": "harbor", "params": {"tasks_dir": str(tasks)}}],
        harness={
            "id": "scripted",
            "params": {"tasks": {t: {"command": c, "answer": "done"} for t, c in commands.items()}},
        },
    )
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    rewards = {
        task: detail["attempts"]["1"]["rewards"].get("reward")
        for task, detail in details_by_task(Path(outcome.result.run_dir)).items()
    }
    names = list(PROBES)
    assert {names[int(t[-1])]: r for t, r in rewards.items() if t.startswith("forge")} == dict.fromkeys(PROBES, 0.0)
    assert {t: r for t, r in rewards.items() if t.startswith("solved")} == {
        f"solved-{i}": 1.0 for i in range(len(PROBES))
    }
