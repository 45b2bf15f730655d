"""A sweep of several harnesses (issue 38): each harness x model a contestant, through the declaration, the
Dagster partitions, the run directories, the metrics, the comparison and the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pytest
import yaml

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.defs.location import sweep_definitions
from agentcompass_dagster.defs.resources import SweepResources
from agentcompass_dagster.defs.sweep import sweep_benchmarks
from agentcompass_dagster.contracts.errors import UserError

from conftest import run_cli, write_sweep

CONTESTANTS = ("oracle.none", "nop.none")


def lab(directory: Path, **fields: Any) -> Path:
    """A sweep named lab of the demo's first three tasks with the model none: ``harnesses`` in place of the
    default harness unless ``harness`` is given too."""
    path = write_sweep(directory, name="lab", benchmarks=[{"id": "demo", "limit": 3}], **fields)
    data = yaml.safe_load(path.read_text())
    if "harnesses" in fields and "harness" not in fields:
        del data["harness"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"harnesses": ["oracle", "nop", "oracle"]}, r"lab.yaml: harnesses\[2\].id 'oracle' is declared twice$"),
        (
            {"harness": "oracle", "harnesses": ["nop"]},
            r"lab.yaml: harness='oracle' and harnesses=\['nop'\]: declare one of the two$",
        ),
        ({"harness": None}, r"lab.yaml: harness: missing \(or harnesses: a list of them\)$"),
        ({"harnesses": []}, r"lab.yaml: harnesses=\[\]: List should have at least 1 item"),
        (
            {"harnesses": ["oracle", "nop"], "alerts": {"baseline_model": "none"}},
            r"lab.yaml: alerts.baseline_model 'none' is not one of the sweep's contestants \(<harness>.<model>\)$",
        ),
        (
            {
                "harnesses": [{"id": "oracle"}, {"id": "oracle.none", "provider": "nop"}],
                "models": [{"id": "none", "provider": "none"}, {"id": "none.none", "provider": "none"}],
            },
            r"lab.yaml: harnesses: two harness x model pairs are named 'oracle.none.none'",
        ),
    ],
)
def test_a_sweep_declares_one_harness_or_several_each_once(tmp_path: Path, fields: dict[str, Any], error: str) -> None:
    """issue 38: `harnesses:` in place of `harness:`, exactly one of the two, each harness once, and no two
    harness x model pairs of one name; alerts.baseline_model names a contestant. Each mistake is one line
    naming the file, the field and the value."""
    with pytest.raises(UserError, match=error) as caught:
        load_sweep(lab(tmp_path, **fields))
    assert len(str(caught.value).splitlines()) == 1


@pytest.mark.parametrize("fields", [{"harness": "oracle"}, {"harnesses": ["oracle"]}])
def test_one_harness_names_its_contestants_by_the_model_as_before(tmp_path: Path, fields: dict[str, Any]) -> None:
    """issue 38: a sweep of one harness, as `harness: oracle` or `harnesses: [oracle]`, keeps the model's id
    as its partition key, request name and run directory, records no contestant in run_info.json, and its
    Dagster harness resource keeps its key."""
    sweep = load_sweep(lab(tmp_path, **fields))
    (request,) = sweep.requests()
    (demo,) = sweep_benchmarks(sweep)
    assert (request.name, request.contestant, request.harness.id) == ("demo/none", None, "oracle")
    assert "contestant" not in request.to_task_payload()
    assert list(demo.model_keys) == ["none"] and demo.root("none") == tmp_path / "results" / "lab" / "demo" / "none"
    assert SweepResources.harness_keys(sweep) == {"oracle": "lab__harness"}


def test_several_harnesses_are_contestants_of_their_own(tmp_path: Path) -> None:
    """issue 38, R-STORE-1: with `harnesses: [oracle, nop]` every benchmark x model x harness is a request,
    named and placed by its contestant `<harness>.<model>` (a run directory per harness, at the depth of a
    model's), with one Dagster harness resource per harness, each building its own harness."""
    sweep = load_sweep(lab(tmp_path, harnesses=["oracle", "nop"]))
    requests = sweep.requests()
    assert [(r.name, r.harness.id, r.model.id, r.contestant) for r in requests] == [
        ("demo/oracle.none", "oracle", "none", "oracle.none"),
        ("demo/nop.none", "nop", "none", "nop.none"),
    ]
    (demo,) = sweep_benchmarks(sweep)
    assert list(demo.model_keys) == list(CONTESTANTS)
    assert demo.root("nop.none") == tmp_path / "results" / "lab" / "demo" / "nop.none"
    keys = SweepResources.harness_keys(sweep)
    assert keys == {"oracle": "lab__harness__0_oracle", "nop": "lab__harness__1_nop"}
    resources = sweep_definitions(sweep).resources or {}
    assert {resources[key].id for key in keys.values()} == {"oracle", "nop"}  # type: ignore[attr-defined]


def test_a_sweep_of_two_harnesses_runs_through_dagster_and_compares_them(tmp_path: Path, dagster_home: Path) -> None:
    """issue 38: `harnesses: [oracle, nop]` x the model none x three demo tasks, run through Dagster on a
    real instance: every contestant x task partition is materialized with its trajectory page, the
    benchmark's metrics.parquet has a row set per harness (oracle passes every task, nop none), the
    summary has a harness column, the comparison names both contestants and the report shows both."""
    sweep_file = lab(tmp_path, harnesses=["oracle", "nop"])
    assert run_cli("run", sweep_file) == 0
    (demo,) = sweep_benchmarks(load_sweep(sweep_file))
    assert len(demo.task_keys) == 3
    partitions = {f"{c}|{t}" for c in CONTESTANTS for t in demo.task_keys}
    with dg.DagsterInstance.get() as instance:
        assert set(instance.get_materialized_partitions(demo.key("attempts"))) == partitions
        for partition in partitions:
            (record,) = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=demo.key("attempts"), asset_partitions=[partition]), limit=1
            ).records
            assert record.asset_materialization is not None
            assert Path(str(record.asset_materialization.metadata["trajectory a1"].value)).is_file()
        comparison = instance.get_latest_materialization_event(demo.key("comparison"))
        assert comparison is not None and comparison.asset_materialization is not None
        table = comparison.asset_materialization.metadata["comparisons"].value
    assert "| oracle.none | nop.none | 3 | 1.0000 | 0.0000 |" in str(table)

    bench = tmp_path / "results" / "lab" / "demo"
    for contestant, harness in zip(CONTESTANTS, ("oracle", "nop")):
        (run_info,) = (bench / contestant).glob("*/run_info.json")
        request = json.loads(run_info.read_text())["request"]
        assert (request["harness"]["id"], request["model"]["id"], request["contestant"]) == (
            harness,
            "none",
            contestant,
        )
    metrics = pd.read_parquet(bench / "metrics.parquet")
    accuracy = metrics[metrics["metric"] == "accuracy"].set_index("harness")[["model", "value"]]
    assert accuracy.to_dict("index") == {
        "oracle": {"model": "none", "value": 1.0},
        "nop": {"model": "none", "value": 0.0},
    }
    summary = (bench / "summary.md").read_text()
    assert summary.splitlines()[2].startswith("| harness | model | accuracy |")
    assert "| oracle | none | 1.0000 |" in summary and "| nop | none | 0.0000 |" in summary
    compared = pd.read_parquet(bench / "comparison.parquet")
    assert compared[["model_a", "model_b"]].values.tolist() == [list(CONTESTANTS)]
    report = (tmp_path / "results" / "lab" / "report.html").read_text()
    assert all(contestant in report for contestant in CONTESTANTS)


def test_a_launchpad_harness_replaces_its_own_harness_only(tmp_path: Path) -> None:
    """issue 38: in a sweep of several harnesses each harness is a resource of its own; configured in the
    launchpad, it replaces that harness for its contestants' partitions and no other, and run_info.json
    records what ran."""
    sweep = load_sweep(lab(tmp_path, harnesses=["oracle", "nop"]))
    (demo,) = sweep_benchmarks(sweep)
    defs = sweep_definitions(sweep)
    (evaluate,) = [
        a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition) and demo.key("attempts") in a.keys
    ]
    (tasks,) = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition) and demo.key("tasks") in a.keys]
    instance = dg.DagsterInstance.ephemeral()
    tasks(dg.build_asset_context(instance=instance))
    task = next(iter(demo.task_keys))
    nop_key = SweepResources.harness_keys(sweep)["nop"]
    result = dg.materialize(
        [evaluate],
        selection=[demo.key("attempts")],
        partition_key=f"nop.none|{task}",
        instance=instance,
        resources=defs.resources,
        run_config={"resources": {nop_key: {"config": {"id": "oracle", "params": {}}}}},
    )
    assert result.success
    (run_info,) = (demo.root("nop.none")).glob("*/run_info.json")
    request = json.loads(run_info.read_text())["request"]
    assert (request["harness"]["id"], request["contestant"]) == ("oracle", "nop.none")
    assert json.loads((run_info.parent / ".summary_counts.json").read_text())["correct"] == 1
    assert not demo.root("oracle.none").exists()
