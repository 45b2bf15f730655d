"""The smallest honest execution path: demo tasks under the oracle (100%) and nop (0%) harnesses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from agentcompass_dagster.plugins.benchmarks.demo import TASKS_DIR
from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate

from conftest import write_sweep


def _run(tmp_path: Path, harness: str):
    sweep = load_sweep(write_sweep(tmp_path, name=f"demo-{harness}", harness=harness))
    result = orchestrate(sweep.requests())
    (outcome,) = result.outcomes.values()
    assert outcome.status == "completed", outcome.error
    assert outcome.result is not None
    return outcome.result


def _summary_table(markdown: str) -> dict[str, float]:
    return {m[1]: float(m[2]) for m in re.finditer(r"^\| ([\w/]+) \| ([0-9.]+) \|$", markdown, re.M)}


def test_demo_has_enough_tasks_of_several_kinds() -> None:
    """The demo benchmark ships at least 12 tasks in at least 3 categories, each with solution and check."""
    metas = [yaml.safe_load((d / "task.yaml").read_text()) for d in sorted(TASKS_DIR.iterdir())]
    assert len(metas) >= 12
    assert len({m["category"] for m in metas}) >= 3
    for task_dir in TASKS_DIR.iterdir():
        assert (task_dir / "solution.sh").is_file() and (task_dir / "check.sh").is_file()


def test_oracle_scores_one_and_all_numbers_agree(tmp_path: Path) -> None:
    """R-FIN-1, R-STORE-7: oracle on demo is 1.0 in the returned metrics, summary.md and .summary_counts.json."""
    result = _run(tmp_path, "oracle")
    run_dir = Path(result.run_dir)
    counts = json.loads((run_dir / ".summary_counts.json").read_text())
    table = _summary_table((run_dir / "summary.md").read_text())
    n_tasks = len(list(TASKS_DIR.iterdir()))
    assert result.metrics.metrics["accuracy"] == 1.0
    assert result.metrics.counts.model_dump() == {"total": n_tasks, "evaluated": n_tasks, "error": 0}
    assert counts["total"] == counts["evaluated"] == counts["correct"] == n_tasks
    assert counts["metrics"] == result.metrics.metrics
    assert table == {k: v for k, v in result.metrics.metrics.items() if v is not None}
    assert len(list((run_dir / "details").glob("*.json"))) == n_tasks


def test_nop_scores_zero(tmp_path: Path) -> None:
    """A harness that does nothing fails every demo task: the checks cannot pass on untouched input."""
    result = _run(tmp_path, "nop")
    counts = json.loads((Path(result.run_dir) / ".summary_counts.json").read_text())
    assert result.metrics.metrics["accuracy"] == 0.0
    assert counts["correct"] == 0 and counts["error"] == 0
    assert _summary_table(result.summary)["accuracy"] == 0.0
