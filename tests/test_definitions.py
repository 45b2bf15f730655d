"""definitions.py loads the declared sweeps and materialises one on a real SQLite Dagster instance."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import dagster as dg
import pytest

from agentcompass_dagster.defs import build_definitions
from agentcompass_dagster.errors import UserError

from conftest import REPO


def test_definitions_materialise_the_demo_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo sweep's asset runs in a DAGSTER_HOME made here and records accuracy 1.0 as metadata."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    defs = runpy.run_path(str(REPO / "definitions.py"))["defs"]
    key = dg.AssetKey(["demo", "results"])
    assert key in {spec.key for spec in defs.resolve_all_asset_specs()}
    with dg.DagsterInstance.get() as instance:
        result = dg.materialize([defs.get_assets_def(key)], instance=instance)
        assert result.success
        event = instance.get_latest_materialization_event(key)
        assert event is not None
        metadata = event.asset_materialization.metadata
        assert metadata["demo/none accuracy"].value == 1.0
    assert (home / "storage").is_dir() or any(home.rglob("*.db"))
    run_dir = Path(metadata["demo/none run_dir"].value)
    assert json.loads((run_dir / ".summary_counts.json").read_text())["correct"] >= 12


def test_invalid_declaration_stops_loading(tmp_path: Path) -> None:
    """An invalid sweep declaration stops the definitions from loading with one line naming the file."""
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "bad.yaml").write_text("benchmarks: [{id: demo}]\nmodels: [none]\nharness: oracle\n")
    with pytest.raises(UserError, match=r"bad.yaml: environment: missing"):
        build_definitions(tmp_path)
