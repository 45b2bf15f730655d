"""One limits vocabulary for every agent harness: the same execution.limits, the same scripted turns,
run once per harness (tool_agent, miniswe). Reaching a limit ends the attempt with the limit recorded
(which, the allowance, the amount used): an outcome that is scored, not an error, so the run exits 0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import details_by_task, run_cli
from scripted_agent import sweep_file

from agentcompass_dagster.durable.activity import read_activity
from agentcompass_dagster.plugins.harnesses.miniswe import quiet_import

with quiet_import():
    pytest.importorskip("minisweagent", reason="mini-swe-agent is not installed (extra 'miniswe')")

HARNESSES = ["tool_agent", "miniswe"]


def bash(command: str, **turn: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}], **turn}


def run_limited(tmp_path: Path, harness: str, turns: list[dict[str, Any]], **limits: Any) -> dict[str, Any]:
    sweep = sweep_file(tmp_path, {"count-errors": turns}, harness=harness, **limits)
    assert run_cli("run", sweep, "--direct") == 0
    detail = details_by_task(tmp_path / "results")["count-errors"]
    assert detail["error"] is None and not detail["correct"]
    attempt = detail["attempts"]["1"]
    assert attempt["run_error"] is None and attempt["status"] == "completed"
    log = read_activity(next((tmp_path / "results").rglob("count-errors@1/activity.jsonl")))
    assert log[-1].kind == "session" and log[-1].data["limit"] == attempt["limit"]
    return attempt


@pytest.mark.parametrize("harness", HARNESSES)
@pytest.mark.parametrize(
    ("turns", "limits", "hit"),
    [
        ([bash("true")] * 5, {"max_turns": 3}, {"limit": "max_turns", "allowance": 3, "used": 3}),
        (
            [bash("true", usage={"prompt_tokens": 600, "completion_tokens": 10})] * 5,
            {"max_tokens": 1000},
            {"limit": "max_tokens", "allowance": 1000, "used": 1220},
        ),
        (
            [bash("true", cost_usd=0.4)] * 5,
            {"max_cost_usd": 1.0},
            {"limit": "max_cost_usd", "allowance": 1.0, "used": 1.2},
        ),
    ],
    ids=["max-turns", "max-tokens", "max-cost"],
)
def test_every_harness_stops_at_the_same_limit(
    tmp_path: Path, harness: str, turns: list[dict[str, Any]], limits: dict[str, Any], hit: dict[str, Any]
) -> None:
    attempt = run_limited(tmp_path, harness, turns, **limits)
    assert attempt["limit"]["limit"] == hit["limit"] and attempt["limit"]["allowance"] == hit["allowance"]
    assert attempt["limit"]["used"] == pytest.approx(hit["used"])
    model_calls = [s for s in attempt["trajectory"] if s["type"] == "model_call"]
    assert len(model_calls) == {"max_turns": 3, "max_tokens": 2, "max_cost_usd": 3}[hit["limit"]]
    if harness == "miniswe":
        exit_message = attempt["artifacts"]["miniswe"]["messages"][-1]
        assert exit_message["extra"]["exit_status"] == "LimitsExceeded"
        assert exit_message["content"].startswith(f"limit {hit['limit']}=")


@pytest.mark.parametrize("harness", HARNESSES)
def test_the_wall_time_limit_bounds_a_model_call_in_flight(tmp_path: Path, harness: str) -> None:
    """A model call that never answers (its gate never opens) is cut at max_wall_s, not left running."""
    never = tmp_path / "never-created"
    attempt = run_limited(tmp_path, harness, [bash("true"), {**bash("true"), "gate": str(never)}], max_wall_s=2)
    assert attempt["limit"]["limit"] == "max_wall_s" and attempt["limit"]["allowance"] == 2
    assert attempt["limit"]["used"] >= 2
    log = read_activity(next((tmp_path / "results").rglob("count-errors@1/activity.jsonl")))
    cut = [r for r in log if r.kind == "model_call"][-1]
    assert cut.status == "aborted" and "max_wall_s=2 reached" in cut.data["error"]


@pytest.mark.parametrize("harness", HARNESSES)
def test_the_wall_time_limit_bounds_a_command_in_flight(tmp_path: Path, harness: str) -> None:
    attempt = run_limited(tmp_path, harness, [bash("sleep 600"), bash("true")], max_wall_s=2)
    assert attempt["limit"]["limit"] == "max_wall_s"
    commands = [s for s in attempt["trajectory"] if s["type"] == "tool_call"]
    assert commands[0]["command"] == "sleep 600"
    # Cut at the wall time the attempt had left, not at the harness's command timeout.
    cut_after = float(commands[0]["output"].rpartition("[command timed out after ")[2].rstrip("s]\n"))
    assert 0 < cut_after < 5


def test_old_harness_limit_params_name_where_limits_went(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import write_sweep

    for harness, name in (("tool_agent", "max_turns"), ("miniswe", "step_limit")):
        sweep = write_sweep(
            tmp_path,
            name=harness,
            harness={"id": harness, "params": {name: 3}},
            models=[{"id": "m", "provider": "scripted"}],
        )
        assert run_cli("run", sweep, "--direct") == 2
        line = capsys.readouterr().err.strip()
        assert len(line.splitlines()) == 1 and name in line and "execution.limits" in line


def test_miniswe_ends_with_its_limit_exit_when_the_limits_refuse_a_command() -> None:
    """#30: a command the attempt's limits refuse (the wall time ran out between the model's reply and the
    command) ends mini's loop with its limit exit naming the limit, as a refused model call does."""
    from minisweagent.exceptions import LimitsExceeded

    from agentcompass_dagster.contracts.model import LimitExceeded
    from agentcompass_dagster.contracts.records import LimitHit
    from agentcompass_dagster.plugins.harnesses.miniswe_bridge import MiniEnvironment, MiniEnvironmentConfig

    hit = LimitHit(limit="max_wall_s", allowance=2, used=2.001)

    class RefusingSteps:
        def command(self, action: dict[str, Any], script: str, timeout: float) -> Any:
            raise LimitExceeded(hit)

    environment = MiniEnvironment(RefusingSteps(), MiniEnvironmentConfig(cwd="/", timeout=5), {})  # type: ignore[arg-type]
    with pytest.raises(LimitsExceeded) as raised:
        environment.execute({"command": "true"})
    (exit_message,) = raised.value.messages
    assert exit_message["content"] == hit.message and exit_message["extra"]["limit"] == hit.model_dump()
