"""The agent CLIs this project declares (resources/harnesses, issue 38): each declaration builds, the one the
gateway cannot serve is refused with its reason, and real agents, installed from their registries as a
user would, solve a demo task in the sandbox through the model gateway against a scripted model."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml
from conftest import REPO, details_by_task, write_sweep

from agentcompass_dagster.contracts.declarations import HarnessConfig, ModelConfig
from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.plugins.harnesses.cli_agent import CliAgentHarness
from agentcompass_dagster.plugins.models.scripted import ScriptedModel
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate

DECLARATIONS = sorted(
    p
    for p in (REPO / "resources" / "harnesses").glob("*.yaml")
    if yaml.safe_load(p.read_text()).get("provider") == "cli_agent"
)
TURNS = REPO / "tests" / "data" / "agent_turns"
REGISTRIES = {"npm": ("registry.npmjs.org", 443), "pypi": ("pypi.org", 443)}
# The real agents run here: installed from npm and PyPI in the sandbox's baseline phase (its network),
# run under network none in the agent's phase.
REAL = {"claude-code": "npm", "codex": "npm", "mini-swe-agent": "pypi"}


def _unreachable(registry: str) -> str | None:
    host, port = REGISTRIES[registry]
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as exc:
        return f"{host} cannot be reached from here ({exc}): the agent cannot be installed"
    return None


def test_every_shipped_agent_declaration_builds_or_says_why_it_cannot_run() -> None:
    """Issue 38: the eight shipped declarations are cli_agent harnesses that build with a model; Gemini
    CLI, which speaks only Google's API, is refused at build with one line naming the field and why."""
    assert {p.stem for p in DECLARATIONS} >= {
        "claude-code",
        "codex",
        "gemini-cli",
        "aider",
        "goose",
        "opencode",
        "openhands",
        "mini-swe-agent",
    }
    model = ScriptedModel(ModelConfig(id="m", provider="scripted", params={"turns": {}}))
    for path in DECLARATIONS:
        config = HarnessConfig.model_validate(yaml.safe_load(path.read_text()))
        config.read_from(str(path))
        if path.stem == "gemini-cli":
            with pytest.raises(
                UserError,
                match=r"harness.params.api=None: harness 'gemini-cli' cannot run "
                r"through the model gateway: Gemini CLI speaks only Google",
            ):
                CliAgentHarness(config, model)
        else:
            harness = CliAgentHarness(config, model)
            assert harness.params.install and harness.params.api is not None, path


@pytest.mark.slow
@pytest.mark.parametrize("agent", sorted(REAL))
def test_a_real_agent_cli_installed_from_its_registry_solves_a_demo_task(
    tmp_path: Path, agent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38: Claude Code and Codex CLI from npm, mini-swe-agent from PyPI, each installed by its shipped
    declaration into the sandbox and run there under network none against a scripted model (the turns of
    tests/data/agent_turns) through the gateway: create-hello is scored correct, each scripted turn is in
    the trajectory, the agent's own logs are kept."""
    problem = _unreachable(REAL[agent])
    if problem is not None:
        pytest.skip(problem)
    monkeypatch.setenv("AGENTCOMPASS_AGENT_CACHE", str(tmp_path / "agent-cache"))
    turns = yaml.safe_load((TURNS / f"{agent}.yaml").read_text())
    model = {"id": f"scripted-{agent}", "provider": "scripted", "params": {"turns": {"create-hello": turns}}}
    sweep = write_sweep(
        tmp_path,
        harness=agent,
        environment="sandbox",
        models=[model],
        benchmarks=[{"id": "demo", "tasks": ["create-hello"]}],
        execution={"limits": {"attempt_timeout_s": 300}},
    )
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    attempt = details_by_task(Path(outcome.result.run_dir))["create-hello"]["attempts"]["1"]
    assert attempt["correct"], ((attempt["run_error"] or "")[-1500:], attempt["trajectory"][-1:])
    calls = [s for s in attempt["trajectory"] if s["type"] == "model_call"]
    assert len(calls) >= len(turns) and attempt["artifacts"]["exit_code"] == 0
    assert attempt["artifacts"]["agent_logs"], "the agent's own logs were not kept"
