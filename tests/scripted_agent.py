"""A tool_agent driven by the scripted model: the turns a test declares, per demo task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import write_sweep

from agentcompass_dagster.plugins.benchmarks.demo import TASKS_DIR
from agentcompass_dagster.contracts.records import AgentLimits

SOLUTION = (TASKS_DIR / "count-errors" / "solution.sh").read_text()


def bash(command: str, **turn: Any) -> dict[str, Any]:
    return {
        "tool_calls": [{"name": "bash", "arguments": {"command": command}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10},
        "cost_usd": 0.01,
        **turn,
    }


def submit(answer: str = "done") -> dict[str, Any]:
    return {
        "tool_calls": [{"name": "submit", "arguments": {"answer": answer}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10},
        "cost_usd": 0.01,
    }


def sweep_file(
    tmp_path: Path,
    turns: dict[str, list[dict[str, Any]]],
    name: str = "sweep",
    models: list[dict[str, Any]] | None = None,
    environment: str | dict[str, Any] = "local",
    harness: str = "tool_agent",
    **params: Any,
) -> Path:
    """``params`` are the harness's, except the agent limits (max_turns, ...), which go to execution.limits."""
    record = tmp_path / "model-calls.jsonl"
    model = {"id": "solver-a", "provider": "scripted", "params": {"turns": turns, "record": str(record)}}
    limits = {name: params.pop(name) for name in list(params) if name in AgentLimits.model_fields}
    return write_sweep(
        tmp_path,
        name=name,
        benchmarks=[{"id": "demo", "tasks": sorted(t for t in turns if t != "*")}],
        models=models or [model],
        harness={"id": harness, "params": params},
        environment=environment,
        execution={"limits": {"task_concurrency": 1, **limits}},
    )
