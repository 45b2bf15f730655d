"""README.md stays true: its example sweep is a valid declaration that runs."""

from __future__ import annotations

import re
from pathlib import Path

from agentcompass_dagster.config import load_sweep
from agentcompass_dagster.runtime.orchestrator import run_requests

from conftest import REPO


def test_readme_sweep_example_validates_and_runs(tmp_path: Path) -> None:
    """The sweep under "Declaring a sweep" loads with the repository's resources and runs to the end."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Declaring a sweep", 1)[1]
    example = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert example is not None
    path = tmp_path / "my-sweep.yaml"
    path.write_text(example.group(1).replace("./results", str(tmp_path / "results")))
    sweep = load_sweep(path, REPO / "resources")
    assert sweep.execution.attempts.k == 3 and sweep.benchmarks[0].tasks == ["create-hello", "fix-calc"]
    result = run_requests(sweep.requests())
    (outcome,) = result.outcomes.values()
    assert outcome.result is not None and outcome.result.metrics.metrics["pass@3"] == 1.0
