"""Third-party agent CLIs through the model gateway (issue 38): the fake agents of tests/agents, one on
the ``openai`` SDK (Chat Completions and Responses) and one on the ``anthropic`` SDK (Messages, streamed),
installed into the task's environment and run there under network ``none``, every model call answered
by the framework's model layer for its attempt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import IMAGE, REPO, DOCKER_PROBLEM, details_by_task, run_cli, write_sweep
from fake_agents import agent_packages, fake_agent
from fake_openai import FakeOpenAI, fake_openai_server, tool_call  # noqa: F401
from waiting import wait_until

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.contracts.records import BudgetConfig
from agentcompass_dagster.runtime.store.budget import Ledger
from agentcompass_dagster.runtime.execution.orchestrator import Orchestrator, orchestrate
from agentcompass_dagster.reporting.trajectory import write_trajectory_pages

CANARY = "sk-canary-0f6c2b1d9e8a7c6b5a4f3e2d1c0b9a8f"
NEVER_S = 3600.0
ENVIRONMENTS = {
    "sandbox": "sandbox",
    "docker": {"id": "docker", "params": {"image": IMAGE}},
}
DOCKER = pytest.param("docker", marks=pytest.mark.skipif(DOCKER_PROBLEM is not None, reason=str(DOCKER_PROBLEM)))


@pytest.fixture(scope="session")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return agent_packages(tmp_path_factory.mktemp("agent-packages"))


@pytest.fixture(autouse=True)
def agent_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test installs its agents into a cache of its own."""
    cache = tmp_path / "agent-cache"
    monkeypatch.setenv("AGENTCOMPASS_AGENT_CACHE", str(cache))
    return cache


def run_sweep(
    tmp_path: Path, harness: dict[str, Any], environment: Any, tasks: list[str], models: list[Any], **fields: Any
) -> tuple[Any, Path]:
    sweep = write_sweep(
        tmp_path,
        harness=harness,
        environment=environment,
        models=models,
        benchmarks=[{"id": "demo", "tasks": tasks}],
        **fields,
    )
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    return outcome.result, Path(outcome.result.run_dir)


def endpoint(fake: FakeOpenAI, **model: Any) -> dict[str, Any]:
    return {
        "id": "endpoint",
        "provider": "openai_compat",
        "model": "served",
        "base_url": fake.base_url,
        "params": {"timeout_s": 600, "max_retries": 0, "price": {"input": 1.0, "output": 2.0}},
        **model,
    }


def bash(fake: FakeOpenAI, command: str, call_id: str) -> None:
    fake.reply(
        tool_calls=[tool_call("bash", json.dumps({"command": command}), call_id)],
        usage={"prompt_tokens": 100, "completion_tokens": 10},
    )


def submit(fake: FakeOpenAI, answer: str = "done") -> None:
    fake.reply(
        tool_calls=[tool_call("submit", json.dumps({"answer": answer}), "call_submit")],
        usage={"prompt_tokens": 120, "completion_tokens": 5},
    )


@pytest.mark.parametrize("environment", ["sandbox", DOCKER])
@pytest.mark.parametrize("agent", ["fake-chat", "fake-responses", "fake-anthropic"])
def test_a_fake_agent_cli_solves_demo_tasks_through_the_gateway(
    tmp_path: Path, packages: Path, agent: str, environment: str, agent_cache: Path
) -> None:
    """Issue 38: each fake agent CLI, installed once into its environment image (then mounted read-only),
    solves three demo tasks under network `none` against the scripted model: every answer scored correct,
    each model turn in the trajectory with its tool calls and the results the agent sent back, usage and
    cost in the detail, the sweep's budget ledger charged, the agent's own log kept as a file."""
    result, run_dir = run_sweep(
        tmp_path,
        fake_agent(agent, packages),
        ENVIRONMENTS[environment],
        ["create-hello", "count-errors", "sort-unique"],
        ["scripted-demo"],
        execution={"limits": {"task_concurrency": 2}},
        budget={"max_cost_usd": 5.0},
    )
    details = details_by_task(run_dir)
    for task, detail in details.items():
        attempt = detail["attempts"]["1"]
        assert attempt["correct"], (task, attempt["run_error"], attempt["failure"], attempt["trajectory"][-1:])
        calls = [s for s in attempt["trajectory"] if s["type"] == "model_call"]
        assert len(calls) == 2 and calls[0]["tool_calls"][0]["name"] == "bash"
        results = [s for s in attempt["trajectory"] if s["type"] == "tool_call"]
        assert results and results[0]["call"]["name"] == "bash" and "exit code: 0" in results[0]["output"]
        assert attempt["usage"]["input_tokens"] > 0 and attempt["usage"]["cost_usd"] > 0
        assert attempt["artifacts"]["exit_code"] == 0 and attempt["artifacts"]["turns"] == 2
        assert "agent/" in attempt["artifacts"]["agent_logs"][0]
        log = run_dir / "artifacts" / f"{task}@1" / attempt["artifacts"]["agent_logs"][0]
        assert log.read_text().strip(), log
    assert result.metrics.metrics["accuracy"] == 1.0
    pages = write_trajectory_pages(run_dir, tmp_path / "pages")
    page = pages[("create-hello", 1)]
    log_name = details["create-hello"]["attempts"]["1"]["artifacts"]["agent_logs"][0]
    assert f'href="{page.stem}/files/{log_name}"' in page.read_text()
    assert (page.parent / page.stem / "files" / log_name).read_text().strip()
    status = Ledger(tmp_path / "results" / "sweep" / "budget.jsonl").status(BudgetConfig(max_cost_usd=5.0))
    spent = sum(d["attempts"]["1"]["usage"]["cost_usd"] for d in details.values())
    assert status.spent_usd == pytest.approx(spent) and spent > 0
    installed = [p for p in agent_cache.iterdir() if p.name.startswith(agent)]
    assert len(installed) == 1 and any(installed[0].glob("fake_*_agent.py"))


def test_an_anthropic_agent_runs_on_an_openai_compatible_model_and_never_sees_its_key(
    tmp_path: Path, packages: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38: the Anthropic-SDK agent against an OpenAI-compatible endpoint (the gateway translates
    Messages to Chat Completions and back): it solves create-hello; the tool result it sent back reaches
    the endpoint as an OpenAI tool message; the endpoint's real key (a canary) is sent by the host, and
    never appears in the agent's environment (its `env`, /proc, its files) or in any result file."""
    monkeypatch.setenv("CANARY_API_KEY", CANARY)
    bash(
        fake_openai,
        "env; cat /proc/self/environ | tr '\\0' '\\n'; grep -rs sk-canary ~ /tmp .; "
        "mkdir -p out && printf 'hello world\\n' > out/hello.txt",
        "call_1",
    )
    submit(fake_openai)
    _, run_dir = run_sweep(
        tmp_path,
        fake_agent("fake-anthropic", packages),
        "sandbox",
        ["create-hello"],
        [endpoint(fake_openai, api_key_env="CANARY_API_KEY")],
    )
    attempt = details_by_task(run_dir)["create-hello"]["attempts"]["1"]
    assert attempt["correct"], (attempt["benchmark_fields"], attempt["trajectory"])
    assert [r.headers["authorization"] for r in fake_openai.requests] == [f"Bearer {CANARY}"] * 2
    second = fake_openai.requests[1].body["messages"]
    observation = next(m for m in second if m["role"] == "tool")
    assert observation["tool_call_id"] == "call_1" and "AGENTCOMPASS_INSTRUCTION" in str(observation["content"])
    assert CANARY not in json.dumps([r.body for r in fake_openai.requests])
    for path in (tmp_path / "results").rglob("*"):
        assert not path.is_file() or CANARY.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("agent", ["fake-chat", "fake-responses", "fake-anthropic"])
def test_max_turns_refuses_the_third_call_and_the_attempt_is_a_scored_failure(
    tmp_path: Path, packages: Path, agent: str
) -> None:
    """Issue 38: `max_turns: 2` stops each agent at its third call: the gateway answers it with an API
    error naming the limit (the agent sees it and exits), the attempt is a scored failure with the limit
    recorded, never an error."""
    looping = {
        "id": "looping",
        "provider": "scripted",
        "params": {
            "turns": {
                "*": [{"tool_calls": [{"name": "bash", "arguments": {"command": f"echo {n}"}}]} for n in range(5)]
            }
        },
    }
    _, run_dir = run_sweep(
        tmp_path,
        fake_agent(agent, packages),
        "sandbox",
        ["create-hello"],
        [looping],
        execution={"limits": {"max_turns": 2}},
    )
    attempt = details_by_task(run_dir)["create-hello"]["attempts"]["1"]
    assert attempt["limit"]["limit"] == "max_turns" and attempt["limit"]["used"] == 2
    # Evaluated like any attempt that reached a limit (the work it left is checked): not an error.
    assert not attempt["correct"] and attempt["score"] == 0.0 and attempt["run_error"] is None
    assert len([s for s in attempt["trajectory"] if s["type"] == "model_call"]) == 2
    agent_output = attempt["trajectory"][-1]["output"]
    assert "max_turns" in agent_output and attempt["trajectory"][-1]["exit_code"] != 0


def test_a_run_killed_mid_attempt_replays_the_recorded_turns_for_free(
    tmp_path: Path, packages: Path, fake_openai: FakeOpenAI
) -> None:
    """Issue 38 (resume by replay): a run is SIGKILLed while the agent's third model call waits; `agentcompass
    resume` starts the agent over in a fresh environment, the gateway answers its first two requests, byte-
    identical to the recorded ones, with the recorded responses (the endpoint never sees them again, they
    cost nothing), sends the third live, and the attempt completes correct; the detail and the activity log
    say two turns were replayed."""
    bash(fake_openai, "mkdir -p out && printf 'hello world\\n' > out/hello.txt", "call_1")
    bash(fake_openai, "echo two", "call_2")
    fake_openai.reply(content="too late", delay_s=NEVER_S)
    sweep = write_sweep(
        tmp_path,
        harness=fake_agent("fake-chat", packages),
        environment="sandbox",
        models=[endpoint(fake_openai)],
        benchmarks=[{"id": "demo", "tasks": ["create-hello"]}],
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", str(sweep), "--direct"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_until(
            lambda: len(fake_openai.requests) >= 3,
            "the third model call at the endpoint",
            proc=proc,
            interval=0.02,
            describe=lambda: f"{len(fake_openai.requests)} requests",
        )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    third = fake_openai.requests[2].body
    submit(fake_openai)
    (run_dir,) = [p.parent for p in (tmp_path / "results").rglob("run_info.json")]
    assert run_cli("resume", run_dir) == 0
    assert len(fake_openai.requests) == 4 and fake_openai.requests[3].body == third
    resumed = sorted(p.parent for p in (tmp_path / "results").rglob("run_info.json"))[-1]
    attempt = details_by_task(resumed)["create-hello"]["attempts"]["1"]
    assert attempt["correct"], (attempt["benchmark_fields"], attempt["trajectory"])
    assert attempt["artifacts"]["replay"] == {"recorded": 2, "replayed": 2, "diverged_at": None}
    calls = [s for s in attempt["trajectory"] if s["type"] == "model_call"]
    assert [bool(c.get("replayed")) for c in calls] == [True, True, False]
    assert [c["usage"]["input_tokens"] for c in calls] == [0, 0, 120]
    # What the attempt spent: the killed run's two calls and the live third; the replays nothing.
    assert attempt["usage"]["input_tokens"] == 100 + 100 + 120
    summary = (resumed / "summary.md").read_text()
    assert "replayed 2 of 2 recorded turns" in summary


def test_checking_a_sweep_of_an_agent_cli_makes_nothing(
    tmp_path: Path, packages: Path, agent_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38: `agentcompass run` checks every request before Dagster runs it, in a process that runs no
    attempt: that check makes no gateway directory and no staging installation, which nothing would
    remove."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    sweep = write_sweep(
        tmp_path,
        harness=fake_agent("fake-chat", packages),
        environment="sandbox",
        models=["scripted-demo"],
        benchmarks=[{"id": "demo", "tasks": ["create-hello"]}],
    )
    Orchestrator(load_sweep(sweep).requests()).preflight()
    assert list(temporary.iterdir()) == [] and not agent_cache.exists()
