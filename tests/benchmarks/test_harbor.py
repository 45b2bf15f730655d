"""Harbor / Terminal-Bench 2 tasks as their authors wrote them (issue #36): tests/data/harbor holds tasks in
the real format (task.toml, instruction.md, environment/Dockerfile with its build context, tests/test.sh,
solution/solve.sh, steps/): one whose image COPYs input data into /app and whose Python test reads
/tests/data and /app; one whose verifier is a Python program; one with reward.json of two metrics; one
with the three env tables; a multi-step one; one whose solution needs longer than its [agent]
timeout_sec; one whose Dockerfile RUNs a command (the sandbox refuses it) and allows no internet; a
malformed one and one without tests beside the good ones.

Here: what the loader reads of task.toml, how rewards are read and decided, which Dockerfiles the sandbox
expresses, and the sandbox running or refusing each fixture. tests/environments/test_task_images.py runs
them in docker, tests/defs/test_harbor_dagster.py through Dagster."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentcompass_dagster.plugins.benchmarks.harbor.loader import load_task
from agentcompass_dagster.plugins.benchmarks.harbor.rewards import combine, parse_rewards, short_of, verdict
from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.contracts.records import NetworkPolicy, NotLoaded, TaskSpec
from agentcompass_dagster.plugins.environments.dockerfile import Unsupported, express
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate

from conftest import HARBOR_LOADED as GOOD, HARBOR_TASKS as TASKS, details_by_task, run_harbor, write_sweep

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


def loaded(name: str) -> TaskSpec:
    task = load_task(TASKS / name, None)
    assert isinstance(task, TaskSpec), task
    return task


def test_task_toml_is_read_field_by_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """#36: the task's environment (its build context, resources, network, variables, Harbor's
    directories), its timeouts, its steps and its instruction without the canary line come from its own
    files; ${VAR:-default} takes the host's VAR where it is set."""
    task = loaded("sum-input")
    assert task.environment is not None and task.environment.build_context == TASKS / "sum-input" / "environment"
    assert task.environment.memory_mb == 512 and task.environment.build_timeout_s == 300.0
    assert task.agent_timeout_s == 120.0 and task.metadata["harbor"]["verifier_timeout_s"] == 60.0
    assert task.input.startswith("Add up the numbers") and "canary" not in task.input
    assert {d.path: d.visible_to for d in task.environment.dirs} == {
        "/tests": "verifier",
        "/logs/verifier": "verifier",
        "/solution": "reference",
        "/logs/agent": "agent",
        "/logs/artifacts": "agent",
    }

    offline = loaded("offline-build")
    assert offline.environment is not None and offline.environment.network is NetworkPolicy.none
    assert offline.environment.cpus == 1

    tables = loaded("env-tables")
    assert tables.environment is not None
    assert tables.environment.env == {"APP_MODE": "fixture-mode", "SECRET_PHRASE": "open-sesame-42"}
    assert tables.metadata["harbor"]["verifier_env"] == {"EXPECTED": "forty-two-7f3a"}
    assert tables.metadata["harbor"]["solution_env"] == {"ANSWER": "forty-two-7f3a"}
    monkeypatch.setenv("AGENTCOMPASS_FIXTURE_PHRASE", "from-the-host-7")
    tables = loaded("env-tables")
    assert tables.environment is not None and tables.environment.env["SECRET_PHRASE"] == "from-the-host-7"

    steps = loaded("two-steps")
    assert [(s.name, s.agent_timeout_s) for s in steps.steps] == [("create", 60.0), ("extend", 60.0)]
    assert steps.agent_timeout_s is None and steps.metadata["harbor"]["steps"][0]["min_reward"] == 1.0


def test_a_malformed_task_is_named_with_its_reason(tmp_path: Path) -> None:
    """#36: a task.toml with a bad value, a task without tests/test.sh, a step without its instruction,
    an environment of several containers, a ${VAR} the host lacks: each is that task's problem, named."""
    assert load_task(TASKS / "malformed", None) == NotLoaded(
        id="malformed",
        reason=f"{TASKS / 'malformed' / 'task.toml'}: environment.memory_mb='lots': Input should be a "
        "valid integer, unable to parse string as an integer",
    )
    assert load_task(TASKS / "no-tests", None) == NotLoaded(
        id="no-tests", reason="tests/test.sh is missing: the task has no verifier"
    )
    cases = {
        "no-step-instruction": ('[[steps]]\nname = "one"\n', "steps/one/instruction.md is missing"),
        "compose": ("", "environment/docker-compose.yaml: environments of several containers are not supported"),
        "host-var": (
            '[verifier]\nenv = { TOKEN = "${AGENTCOMPASS_NOT_SET_ANYWHERE}" }\n',
            "[verifier.env] TOKEN=${AGENTCOMPASS_NOT_SET_ANYWHERE}: AGENTCOMPASS_NOT_SET_ANYWHERE is not set",
        ),
        "gpus": ("[environment]\ngpus = 2\n", "environment.gpus=2: no GPU is offered here"),
    }
    for name, (toml, reason) in cases.items():
        shutil.copytree(TASKS / "python-verifier", tmp_path / name)
        (tmp_path / name / "task.toml").write_text(toml)
        if name == "compose":
            (tmp_path / name / "environment" / "docker-compose.yaml").write_text("services: {}\n")
        found = load_task(tmp_path / name, None)
        assert isinstance(found, NotLoaded) and reason in found.reason, (name, found)


def test_rewards_are_read_and_decided_as_harbor_does() -> None:
    """#36: reward.json (an object of named numbers; reward.txt's number added as `reward` when it has
    none) wins over reward.txt; anything else gives no verdict, with the reason. The deciding reward is
    `reward`, else the only one; with several and none deciding, every one must reach the threshold.
    Steps' rewards combine by their mean (a step without a verdict counts 0) or the final step's."""
    assert parse_rewards(b'{"correctness": 1, "performance": 0.5, "note": "x", "ok": true}', None) == (
        {"correctness": 1.0, "performance": 0.5},
        "",
    )
    assert parse_rewards(b'{"correctness": 1}', b"0.25\n") == ({"correctness": 1.0, "reward": 0.25}, "")
    assert parse_rewards(None, b" 1\n") == ({"reward": 1.0}, "")
    for json_text, text, problem in [
        (b"1", None, "not an object"),
        (b"", None, "reward.json is empty"),
        (None, b"yes", "not a number"),
        (None, b"nan", "not a finite number"),
        (b'{"a": "1"}', None, "no finite number"),
        (None, None, "no /logs/verifier/reward.txt or reward.json"),
    ]:
        rewards, why = parse_rewards(json_text, text)
        assert rewards is None and problem in why, (json_text, text, why)
    assert verdict({"reward": 1.0, "speed": 0.2}, None, 1.0) == (True, 1.0)
    assert verdict({"coverage": 0.5}, None, 1.0) == (False, 0.5)
    assert verdict({"correctness": 1.0, "performance": 0.5}, None, 1.0) == (False, 0.75)
    assert verdict({"correctness": 1.0, "performance": 0.5}, "correctness", 1.0) == (True, 1.0)
    assert verdict({"correctness": 1.0, "performance": 0.5}, None, 0.5) == (True, 0.75)
    assert combine([{"reward": 1.0}, None, {"reward": 0.5, "x": 1.0}], "mean") == {"reward": 0.5, "x": 1 / 3}
    assert combine([{"reward": 1.0}, {"reward": 0.0}], "final") == {"reward": 0.0}
    assert short_of({"reward": 0.5}, 1.0) == "reward=0.5 below min_reward 1.0"
    assert short_of({"a": 1.0}, {"a": 1.0, "b": 0.5}) == "b=None below min_reward 0.5"
    assert short_of({"reward": 1.0}, 1.0) is None


def test_which_dockerfiles_the_sandbox_expresses(tmp_path: Path) -> None:
    """#36: the sandbox builds no image: a Dockerfile of FROM, WORKDIR, ENV and COPY into the working
    directory is applied (the host's system stands in for the base); one that RUNs a command, has
    several stages, COPYs from another image, ADDs a URL or an archive, copies outside the working
    directory or expands a variable is refused with the instruction that needs a build."""
    expressed = express(TASKS / "sum-input" / "environment")
    assert (expressed.base, expressed.workdir) == ("agentcompass-fixture:bookworm", "/app")
    assert [(f.source.name, f.target) for f in expressed.files] == [("numbers.csv", "data/numbers.csv")]
    context = tmp_path / "context"
    (context / "src").mkdir(parents=True)
    (context / "src" / "a.py").write_text("a")
    (context / "b.txt").write_text("b")
    (context / "Dockerfile").write_text(
        "FROM python:3.13-slim\nLABEL x=y\nWORKDIR /app\nENV MODE=test LEVEL=2\n"
        'COPY src/ ./src/\nCOPY ["b.txt", "/app/data/"]\nUSER agent\nCMD ["bash"]\n'
    )
    expressed = express(context)
    assert expressed.env == {"MODE": "test", "LEVEL": "2"}
    assert sorted(f.target for f in expressed.files) == ["data/b.txt", "src/a.py"]
    refused = {
        "RUN pip install pytest": "RUN pip install pytest",
        "FROM x AS build": "2 FROM instructions",
        "COPY --from=build /out /app/out": "another image or stage",
        "ADD https://example.com/x /app/x": "fetches a URL",
        "ADD data.tar.gz /app/": "unpacks an archive",
        "COPY b.txt /data/b.txt": "outside the working directory /app",
        "COPY $FILE /app/": "expands a variable",
    }
    for line, reason in refused.items():
        (context / "Dockerfile").write_text(f"FROM debian:bookworm-slim\nWORKDIR /app\n{line}\n")
        with pytest.raises(Unsupported, match=reason.replace("$", r"\$")):
            express(context)


@needs_bwrap
def test_the_sandbox_runs_what_it_can_express_and_refuses_the_rest(tmp_path: Path) -> None:
    """#36: in the sandbox, at Harbor's absolute paths (/app, /tests, /logs/verifier), the oracle passes
    every task whose environment the sandbox can give; the task whose Dockerfile RUNs a command is refused
    with one line saying to run it in docker (an error, not a score); the solution that outruns its
    [agent] timeout_sec fails at that limit; the malformed tasks are listed, the others run."""
    result, run_dir = run_harbor(tmp_path, "oracle", "sandbox")
    details = details_by_task(run_dir)
    assert sorted(details) == GOOD
    correct = {task for task, detail in details.items() if detail["correct"]}
    assert correct == {"env-tables", "python-verifier", "sum-input", "two-metrics", "two-steps"}
    refused = details["offline-build"]["attempts"]["1"]
    assert "needs its own image (environment/Dockerfile: RUN mkdir -p /opt/tool" in refused["run_error"]
    assert refused["run_error"].endswith("run it in docker") and details["offline-build"]["error"]
    slow = details["slow-solution"]["attempts"]["1"]
    assert slow["limit"]["limit"] == "max_wall_s" and slow["limit"]["allowance"] == 2.0
    assert slow["status"] == "failed" and not details["slow-solution"]["error"]
    assert result.metrics.counts.model_dump() == {"total": 7, "evaluated": 6, "error": 1}
    assert slow["meta"]["resolved_execution_plan"]["agent_limits"]["max_wall_s"] == 2.0
    summary = (run_dir / "summary.md").read_text()
    assert "## Not loaded" in summary and "- `no-tests`: tests/test.sh is missing" in summary
    assert [t["id"] for t in json.loads((run_dir / "run_info.json").read_text())["not_loaded"]] == [
        "malformed",
        "no-tests",
    ]
    record = details["sum-input"]["attempts"]["1"]["meta"]["environment"]
    assert record["workdir"] == "/app" and "the host's system stands in" in record["base_image"]
    assert (run_dir / "artifacts" / "sum-input@1" / "verifier" / "test-stdout.txt").read_text() == (
        "expected 50, got 50\n"
    )

    nop, nop_dir = run_harbor(tmp_path / "nop", "nop", "sandbox")
    assert nop.metrics.metrics["accuracy"] == 0.0
    assert {t for t, d in details_by_task(nop_dir).items() if not d["error"]} == set(GOOD) - {"offline-build"}


def test_local_refuses_a_harbor_task(tmp_path: Path) -> None:
    """#36: `local` cannot give a task its own directories at absolute paths: each task is refused with
    one line naming what it needs and where it can run, never run with its paths silently elsewhere."""
    sweep = write_sweep(
        tmp_path,
        harness="oracle",
        environment="local",
        benchmarks=[{"id": "harbor", "params": {"tasks_dir": str(TASKS)}, "tasks": ["python-verifier"]}],
    )
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None
    (detail,) = details_by_task(Path(outcome.result.run_dir)).values()
    error = detail["attempts"]["1"]["run_error"]
    assert error.startswith("task 'python-verifier': needs its own image and") and "/logs/verifier" in error
    assert error.endswith("cannot give: run it in sandbox or docker") and detail["attempts"]["1"]["retries"] == 0
