"""Harbor tasks through Dagster (issue #36): `agentcompass run` of a sweep of the real-format fixtures in
docker runs each task as its own partition in its own image: the oracle passes every sound task, nop
none; the tasks the benchmark could not load have no partition and are named on the tasks asset; the
metrics asset holds every reward."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from conftest import HARBOR_LOADED as GOOD, HARBOR_TASKS as TASKS, fixture_base, needs_docker, run_cli, write_sweep

from agentcompass_dagster.defs.instance import ensure_dagster_home
from agentcompass_dagster.reporting.results import load_metrics

pytestmark = [needs_docker, pytest.mark.slow]


def harbor_sweep(tmp_path: Path, harness: str) -> Path:
    fixture_base()
    sweep = write_sweep(
        tmp_path,
        name=f"tb-{harness}",
        harness=harness,
        environment={"id": "docker", "params": {}},
        benchmarks=[{"id": "harbor", "params": {"tasks_dir": str(TASKS)}}],
    )
    assert run_cli("run", str(sweep)) == 0
    return sweep


def partitions(harness: str) -> set[str]:
    ensure_dagster_home(None)
    with dg.DagsterInstance.get() as instance:
        return instance.get_materialized_partitions(dg.AssetKey([f"tb-{harness}", "harbor", "attempts"]))


def test_the_oracle_passes_every_sound_harbor_task_through_dagster(tmp_path: Path) -> None:
    """#36: through Dagster, the oracle passes every sound fixture task in its own image (the slow
    solution fails at its [agent] timeout_sec); each task is a partition, the two malformed ones are not
    and the tasks asset names them with their reasons; metrics.parquet holds reward.<name> for each
    reward."""
    harbor_sweep(tmp_path, "oracle")
    assert partitions("oracle") == {f"none|{task}" for task in GOOD}
    ensure_dagster_home(None)
    with dg.DagsterInstance.get() as instance:
        observed = instance.fetch_observations(dg.AssetKey(["tb-oracle", "harbor", "tasks"]), limit=1).records
        note = observed[0].asset_observation.metadata["not loaded"].value  # type: ignore[union-attr]
        assert "`malformed`: " in note and "`no-tests`: tests/test.sh is missing" in note
    metrics = load_metrics(tmp_path / "results").set_index("metric")["value"]
    assert metrics["accuracy"] == pytest.approx(6 / 7) and metrics["reward.correctness"] == pytest.approx(1 / 7)


def test_nop_passes_no_harbor_task_through_dagster(tmp_path: Path) -> None:
    """#36: through Dagster, nop, which does nothing, passes none of the fixture tasks (the env-tables
    task's check compares against a variable its [verifier] env sets: unset, nothing would equal it)."""
    harbor_sweep(tmp_path, "nop")
    assert partitions("nop") == {f"none|{task}" for task in GOOD}
    metrics = load_metrics(tmp_path / "results").set_index("metric")["value"]
    assert metrics["accuracy"] == 0.0 and metrics["error_rate"] == 0.0
