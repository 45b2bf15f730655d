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


def test_readme_pandas_example_gives_each_sweeps_accuracy(tmp_path: Path) -> None:
    """The README's pandas line, after the demo and demo-nop sweeps ran through Dagster (both with model
    "none"), shows each sweep's own accuracy, 1.0 and 0.0, not their mean."""
    from agentcompass_dagster.results import load_metrics

    from conftest import run_cli

    readme = (REPO / "README.md").read_text()
    line = next(line for line in readme.splitlines() if line.startswith('load_metrics("results", latest=True)'))
    results = tmp_path / "results"
    for name in ("demo", "demo-nop"):
        assert run_cli("run", REPO / "resources" / "sweeps" / f"{name}.yaml", "--results-dir", results) == 0
    table = eval(line.replace('"results"', repr(str(results))), {"load_metrics": load_metrics})  # noqa: S307
    assert table.loc[("demo", "none"), "accuracy"] == 1.0 and table.loc[("demo-nop", "none"), "accuracy"] == 0.0


def test_readme_scale_out_declaration_validates() -> None:
    """The `dagster:` block under "Scale-out" is a valid deployment declaration."""
    import yaml

    from agentcompass_dagster.config import DagsterDeployment

    section = (REPO / "README.md").read_text().split("### Scale-out", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    deployment = DagsterDeployment.model_validate(yaml.safe_load(block.group(1))["dagster"])
    assert (deployment.max_partitions_per_run, deployment.max_concurrent_runs) == (250, 4)
