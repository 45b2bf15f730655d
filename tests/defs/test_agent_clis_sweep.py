"""The acceptance of issue 38 through Dagster: a sweep of two shipped agent CLIs (Claude Code and Codex CLI,
installed from npm) x two models x demo tasks, run by `agentcompass run` on a real instance."""

from __future__ import annotations

import socket
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import yaml
from conftest import REPO, run_cli

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.defs.sweep import sweep_benchmarks

CONTESTANTS = [f"{h}.{m}" for h in ("claude-code", "codex") for m in ("scripted-agents", "scripted-agents-careless")]


def _npm_unreachable() -> str | None:
    try:
        socket.create_connection(("registry.npmjs.org", 443), timeout=5).close()
    except OSError as exc:
        return f"registry.npmjs.org cannot be reached from here ({exc}): the agents cannot be installed"
    return None


@pytest.mark.slow
def test_two_agent_clis_on_two_models_run_through_dagster(
    tmp_path: Path, dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38 acceptance: resources/sweeps/agent-clis.yaml's sweep ({claude-code, codex} x {scripted-agents,
    scripted-agents-careless} x two demo tasks, sandbox) through Dagster: every partition materialized; each
    agent is installed once (its cache holds one installation); the trajectory pages show the agents' own
    tool calls (Bash, exec_command); the careful model solves both tasks with either agent and the careless
    one neither; the comparison names every contestant."""
    problem = _npm_unreachable()
    if problem is not None:
        pytest.skip(problem)
    monkeypatch.setenv("AGENTCOMPASS_AGENT_CACHE", str(tmp_path / "agent-cache"))
    shipped = yaml.safe_load((REPO / "resources" / "sweeps" / "agent-clis.yaml").read_text())
    shipped["output"] = {"results_dir": str(tmp_path / "results")}
    # An agent that hangs fails the test in minutes, not the sweep's ten.
    shipped["execution"]["limits"].update(attempt_timeout_s=150, max_wall_s=120)
    sweep_file = tmp_path / "agent-clis.yaml"
    sweep_file.write_text(yaml.safe_dump(shipped))
    assert run_cli("run", sweep_file) == 0
    (demo,) = sweep_benchmarks(load_sweep(sweep_file))
    partitions = {f"{c}|{t}" for c in CONTESTANTS for t in demo.task_keys}
    with dg.DagsterInstance.get() as instance:
        assert set(instance.get_materialized_partitions(demo.key("attempts"))) == partitions
        pages = {}
        for partition in partitions:
            (record,) = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=demo.key("attempts"), asset_partitions=[partition]), limit=1
            ).records
            assert record.asset_materialization is not None
            pages[partition] = Path(str(record.asset_materialization.metadata["trajectory a1"].value)).read_text()
        comparison = instance.get_latest_materialization_event(demo.key("comparison"))
        assert comparison is not None and comparison.asset_materialization is not None
        table = str(comparison.asset_materialization.metadata["comparisons"].value)
    assert "Bash" in pages["claude-code.scripted-agents|create-hello"]
    assert "exec_command" in pages["codex.scripted-agents|create-hello"]
    assert all(contestant in table for contestant in CONTESTANTS)
    metrics = pd.read_parquet(tmp_path / "results" / "agent-clis" / "demo" / "metrics.parquet")
    accuracy = metrics[metrics["metric"] == "accuracy"].set_index(["harness", "model"])["value"].to_dict()
    assert accuracy == {
        (h, m): 1.0 if m == "scripted-agents" else 0.0
        for h in ("claude-code", "codex")
        for m in ("scripted-agents", "scripted-agents-careless")
    }
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "agent-cache").iterdir() if p.name != ".staging") == [
        "claude",
        "codex",
    ]
