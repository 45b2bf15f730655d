"""The sweep as a Dagster user sees it in the UI: its partitions before the first run (registered by the
sensor's first tick, which a real dagster-daemon commits), partitions that stay synced across re-runs,
kinds, owners and tags on the assets, a broken sweep file reported as that sweep's error while the rest
of the location loads, and forks and replays recorded in the sweep's instance."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.defs.code_location import set_sweep_files
from agentcompass_dagster.defs.location import location_definitions, sweep_definitions
from agentcompass_dagster.defs.sensors import NAME as NEW_TASKS
from agentcompass_dagster.contracts.errors import UserError

from conftest import run_cli, write_sweep, write_task
from test_dagster_engine import _daemon, _fast_queue_home, _workspace, instance, stop_group  # noqa: F401
from waiting import wait_until

ATTEMPTS = dg.AssetKey(["lab", "demo", "attempts"])
SENSOR = NEW_TASKS


def demo_tasks(tmp_path: Path, *names: str) -> Path:
    tasks = tmp_path / "tasks"
    for name in names:
        write_task(tasks, name, solution="echo ok > out.txt", check="grep -qx ok out.txt")
    return tasks


def lab(tmp_path: Path, tasks: Path, models: tuple[str, ...] = ("m1", "m2"), **fields: Any) -> Path:
    return write_sweep(
        tmp_path,
        name="lab",
        benchmarks=[{"id": "demo", "params": {"tasks_dir": str(tasks)}}],
        models=[{"id": m, "provider": "none"} for m in models],
        **fields,
    )


def partition_keys_shown(sweep: Path) -> list[str]:
    """The attempts partitions the UI lists: the partitions definition read against the instance."""
    partitions_def = sweep_definitions(load_sweep(sweep)).resolve_assets_def(ATTEMPTS).partitions_def
    assert partitions_def is not None
    with instance() as inst:
        return list(partitions_def.get_partition_keys(dynamic_partitions_store=inst))


def runs() -> list[dg.DagsterRun]:
    with instance() as inst:
        return list(inst.get_runs())


def test_a_daemon_registers_a_fresh_sweeps_partitions_on_the_sensors_first_tick_and_runs_only_new_tasks(
    tmp_path: Path, stop_group: Any
) -> None:
    """A declared sweep never run has its model x task partitions in the UI once the daemon ticked its
    sensor (running by default), without any run launched; a task that appears later is added by the next
    tick and run alone, through the tick's own SensorResult (Dagster adds the partition, then the run)."""
    tasks = demo_tasks(tmp_path, "one", "two")
    sweep = lab(tmp_path, tasks, sensor={"minimum_interval_seconds": 1})
    _fast_queue_home(Path(os.environ["DAGSTER_HOME"]))
    assert partition_keys_shown(sweep) == []  # before: "0 partitions" and a free-text box in the UI
    daemon = _daemon(tmp_path, _workspace(tmp_path, sweep), sweep)
    stop_group(daemon)

    declared = {f"{m}|{t}" for m in ("m1", "m2") for t in ("one", "two")}
    wait_until(
        lambda: set(partition_keys_shown(sweep)) == declared,
        "the first tick to register the partitions",
        proc=daemon,
        log=tmp_path / "daemon.log",
        describe=lambda: partition_keys_shown(sweep),
    )
    assert runs() == []

    demo_tasks(tmp_path, "three")

    def sensor_run_done() -> dg.DagsterRun | None:
        done = [run for run in runs() if run.tags.get("dagster/sensor_name") == SENSOR]
        return done[0] if done and done[0].status == dg.DagsterRunStatus.SUCCESS else None

    run = wait_until(
        sensor_run_done,
        "the sensor's run of the new task to succeed",
        proc=daemon,
        log=tmp_path / "daemon.log",
        describe=lambda: [(r.status, r.tags) for r in runs()],
    )
    assert len(runs()) == 1
    assert set(partition_keys_shown(sweep)) == declared | {"m1|three", "m2|three"}
    with instance() as inst:
        assert set(inst.get_materialized_partitions(ATTEMPTS)) == {"m1|three", "m2|three"}
        assert run.tags["dagster/asset_partition_range_end"] == "m2|three"


STALE_QUERY = """
query Stale {
  attempts: assetNodeOrError(assetKey: {path: ["lab", "demo", "attempts"]}) {
    ... on AssetNode { partitionKeys staleStatusByPartition }
  }
  metrics: assetNodeOrError(assetKey: {path: ["lab", "demo", "metrics"]}) { ... on AssetNode { staleStatus } }
  tasks: assetNodeOrError(assetKey: {path: ["lab", "demo", "tasks"]}) { ... on AssetNode { dataVersion } }
}
"""


def ui_query(
    tmp_path: Path, sweep: Path, query: str, variables: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """A query of the UI's GraphQL API against the sweep's code location, served by a code server as
    `agentcompass ui` serves it."""
    from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

    monkeypatch.setenv("AGENTCOMPASS_SWEEPS", str(sweep))
    with instance() as inst, define_out_of_process_context(str(_workspace(tmp_path, sweep)), None, inst) as context:
        result = execute_dagster_graphql(context, query, variables)
    assert not result.errors, result.errors
    return result.data


def test_a_rerun_leaves_the_attempts_partitions_synced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every attempts partition the UI lists is synced (not "Unsynced") after a second run that only
    evaluates a new task: the task list is observed with a data version (a hash of the tasks), not
    materialized again on every run, so an evaluated partition, never evaluated again, is not stale."""
    tasks = demo_tasks(tmp_path, "one", "two")
    sweep = lab(tmp_path, tasks)
    assert run_cli("run", str(sweep)) == 0
    demo_tasks(tmp_path, "three")
    assert run_cli("run", str(sweep)) == 0

    shown = ui_query(tmp_path, sweep, STALE_QUERY, {}, monkeypatch)
    statuses = dict(zip(shown["attempts"]["partitionKeys"], shown["attempts"]["staleStatusByPartition"]))
    assert statuses == {f"{m}|{t}": "FRESH" for m in ("m1", "m2") for t in ("one", "two", "three")}
    assert shown["metrics"]["staleStatus"] == "FRESH"
    assert shown["tasks"]["dataVersion"]  # the list's hash, shown on the tasks asset


def test_the_assets_carry_kinds_owners_and_the_sweeps_tags(tmp_path: Path) -> None:
    """Every asset of a sweep shows the kinds python and agentcompass, the owners the sweep declares,
    and tags naming the sweep, the benchmark and the harness (what the catalog filters by); an owner
    Dagster would refuse is one error line naming the file, the field and the value."""
    sweep = write_sweep(tmp_path, name="lab", benchmarks=[{"id": "demo"}], owners=["ana@example.org", "team:evals"])
    defs = sweep_definitions(load_sweep(sweep))
    specs = {
        spec.key: spec
        for assets in defs.assets or []
        if isinstance(assets, dg.AssetsDefinition)
        for spec in assets.specs
    }
    assert set(specs) == {dg.AssetKey(["lab", "demo", kind]) for kind in ("tasks", "attempts", "metrics", "comparison")}
    for spec in specs.values():
        assert spec.kinds == {"python", "agentcompass"}
        assert list(spec.owners) == ["ana@example.org", "team:evals"]
        assert {k: v for k, v in spec.tags.items() if k.startswith("agentcompass/")} == {
            "agentcompass/sweep": "lab",
            "agentcompass/benchmark": "demo",
            "agentcompass/harness": "oracle",
        }
    bad = write_sweep(tmp_path, name="bad", owners=["ana"])
    with pytest.raises(UserError, match=r"bad.yaml: owners.*'ana'"):
        load_sweep(bad)


def test_a_broken_sweep_file_is_its_own_error_and_the_rest_of_the_location_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Invalid YAML, an invalid field and a sweep name clashing with an earlier file's each become one
    asset of the group broken_sweeps whose description is the one error line naming the file, the field and
    the value, while the good sweep's assets, job and sensor load (from resources/sweeps and from the
    files the CLI points the location at); `agentcompass run` of a broken file still exits 2 with that line."""
    sweeps = tmp_path / "resources" / "sweeps"
    sweeps.mkdir(parents=True)
    good = write_sweep(sweeps, name="lab")
    (sweeps / "twin.yaml").write_text(good.read_text())
    (sweeps / "field.yaml").write_text(
        good.read_text().replace("name: lab", "name: other") + "execution: {attempts: {k: zero}}\n"
    )
    (sweeps / "yaml.yaml").write_text("name: [unclosed\n")
    expected = {
        "twin": r"twin.yaml: name='lab' clashes with the sweep of .*lab.yaml$",
        "field": r"field.yaml: execution.attempts.k='zero'",
        "yaml": r"yaml.yaml:2:1: invalid YAML",
    }

    monkeypatch.chdir(tmp_path)
    for where, defs in (
        ("resources", location_definitions()),
        ("AGENTCOMPASS_SWEEPS", files_location(monkeypatch, sorted(sweeps.glob("*.yaml")))),
    ):
        assert defs.resolve_job_def("lab__job") is not None and defs.resolve_sensor_def(SENSOR) is not None, where
        graph = defs.resolve_asset_graph()
        assert {key for key in graph.get_all_asset_keys() if key.path[0] == "lab"} == {
            dg.AssetKey(["lab", "demo", kind]) for kind in ("tasks", "attempts", "metrics", "comparison")
        }
        broken = {key.path[1]: graph.get(key) for key in graph.get_all_asset_keys() if key.path[0] == "broken_sweeps"}
        assert set(broken) == set(expected), where
        for name, pattern in expected.items():
            assert broken[name].group_name == "broken_sweeps" and not broken[name].is_executable
            assert re.search(pattern, broken[name].description or ""), (where, broken[name].description)
            assert "\n" not in (broken[name].description or "")

    capsys.readouterr()
    assert run_cli("run", str(sweeps / "field.yaml")) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert re.search(expected["field"], line)


def files_location(monkeypatch: pytest.MonkeyPatch, files: list[Path]) -> dg.Definitions:
    """The location as the CLI's run workers and `agentcompass ui SWEEP...` load it: from AGENTCOMPASS_SWEEPS."""
    set_sweep_files(files)
    monkeypatch.setenv("AGENTCOMPASS_SWEEPS", os.environ["AGENTCOMPASS_SWEEPS"])
    return location_definitions()


def test_a_fork_and_a_replay_of_a_dagster_run_are_observations_of_its_partition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """R-FORK-1, R-REPLAY-1 in Dagster: after `agentcompass run` of a sweep, a fork of one of its attempts
    and a replay of it each leave an observation of that attempt's partition in the sweep's instance,
    whose metadata points at the source run (its directory and Dagster run), the checkpoint and model of
    the fork and the fork's run directory, the replay's status and report; a --direct run's fork, which
    no Dagster run evaluated, records nothing."""
    import json

    from scripted_agent import SOLUTION, bash, submit, sweep_file

    turns = {"count-errors": [bash("echo draft > draft.txt"), bash(SOLUTION), submit()]}
    models = [
        {"id": "solver-a", "provider": "scripted", "params": {"turns": turns}},
        {"id": "solver-b", "provider": "scripted", "params": {"turns": {"count-errors": [submit()] * 3}}},
    ]
    assert run_cli("run", str(sweep_file(tmp_path, turns, name="lab", models=models[:1]))) == 0
    run_dir = next((tmp_path / "results" / "lab").rglob("run_info.json")).parent
    capsys.readouterr()
    assert run_cli("show", str(run_dir), "--task", "count-errors", "--json") == 0
    (task,) = json.loads(capsys.readouterr().out)["tasks"]
    checkpoint = next(c["seq"] for c in task["attempts"][0]["checkpoints"] if c["forkable"])
    both = sweep_file(tmp_path, turns, name="both", models=models)
    assert (
        run_cli(
            "fork",
            str(run_dir),
            "--task",
            "count-errors",
            "--model",
            "solver-b",
            "--sweep",
            str(both),
            "--checkpoint",
            str(checkpoint),
        )
        == 0
    )
    assert run_cli("replay", str(run_dir), "--task", "count-errors") == 0

    key = dg.AssetKey(["lab", "demo", "attempts"])
    with instance() as inst:
        (run,) = inst.get_runs()
        records = inst.fetch_observations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=["solver-a|count-errors"]), limit=10
        ).records
    shown = {
        r.asset_observation.metadata["derived"].value: {n: v.value for n, v in r.asset_observation.metadata.items()}
        for r in records
        if r.asset_observation is not None
    }
    assert set(shown) == {"fork", "replay"}
    fork, replay = shown["fork"], shown["replay"]
    for derived in (fork, replay):
        assert (derived["source run"], derived["source Dagster run"]) == (run_dir.name, run.run_id)
        assert derived["source run dir"] == str(run_dir.resolve())
    assert (fork["checkpoint"], fork["model"], fork["exit code"]) == (checkpoint, "solver-b", 0)
    assert (Path(fork["fork run dir"]) / "run_info.json").is_file() and ".forks" in fork["fork run dir"]
    assert replay["status"] == "matched" and Path(replay["report"]).is_file()

    direct = tmp_path / "direct"
    direct.mkdir()
    assert run_cli("run", str(sweep_file(direct, turns, name="solo", models=models[:1])), "--direct") == 0
    solo_dir = next((direct / "results").rglob("run_info.json")).parent
    assert run_cli("replay", str(solo_dir), "--task", "count-errors") == 0
    with instance() as inst:
        assert inst.fetch_observations(dg.AssetKey(["solo", "demo", "attempts"]), limit=10).records == []
