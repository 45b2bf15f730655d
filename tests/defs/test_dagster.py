"""The Dagster pipeline on a real SQLite instance in a temp DAGSTER_HOME: the asset graph, reuse as
skipping, partition keys, the schedule, the sensor, checks and the Parquet outputs."""

from __future__ import annotations

import base64
import json
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import dagster as dg
import pytest
import yaml

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.defs.code_location import LOCATION_MODULE, LOCATION_NAME, SWEEPS_ENV, write_workspace
from agentcompass_dagster.defs.coordination import claim_partitions
from agentcompass_dagster.defs.location import sweep_files_definitions
from agentcompass_dagster.defs.instance import ensure_dagster_home
from agentcompass_dagster.defs.partitions import missing_ranges, partition_key
from agentcompass_dagster.defs.run_owners import record_owner
from agentcompass_dagster.defs.sensors import NAME as NEW_TASKS
from agentcompass_dagster.defs.sweep import sweep_benchmarks
from agentcompass_dagster.reporting.results import load_metrics, load_task_results
from agentcompass_dagster.runtime.store.processes import ProcessId
from agentcompass_dagster.runtime.store.redact import register_secret

from conftest import REPO, run_cli, tree_snapshot, write_sweep, write_task

ATTEMPTS = dg.AssetKey(["lab", "demo", "attempts"])


def lab_sweep(tmp_path: Path, models: list[str], tasks_dir: Path | None = None, **fields: Any) -> Path:
    benchmark: dict[str, Any] = {"id": "demo"}
    if tasks_dir is not None:
        benchmark["params"] = {"tasks_dir": str(tasks_dir)}
    return write_sweep(
        tmp_path, name="lab", benchmarks=[benchmark], models=[{"id": m, "provider": "none"} for m in models], **fields
    )


def materialized(home: Path, key: dg.AssetKey = ATTEMPTS) -> set[str]:
    with dg.DagsterInstance.get() as instance:
        return set(instance.get_materialized_partitions(key))


def partition_metadata(partition: str) -> dict[str, Any]:
    with dg.DagsterInstance.get() as instance:
        result = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=ATTEMPTS, asset_partitions=[partition]), limit=1
        )
    (record,) = result.records
    assert record.asset_materialization is not None
    return {name: value.value for name, value in record.asset_materialization.metadata.items()}


def run_count() -> int:
    with dg.DagsterInstance.get() as instance:
        return len(instance.get_runs())


def newest_counts(tmp_path: Path, model: str) -> dict[str, Any]:
    root = tmp_path / "results" / "lab" / "demo" / model
    newest = max(root.iterdir(), key=lambda p: json.loads((p / "run_info.json").read_text())["started_at"])
    return json.loads((newest / ".summary_counts.json").read_text())


def test_definitions_load_with_the_lineage(tmp_path: Path, dagster_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """agentcompass_dagster.definitions and workspace.yaml load; each benchmark has tasks -> attempts ->
    metrics -> comparison, with checks, a job, a sensor and the harness and environment resources."""
    monkeypatch.chdir(REPO)
    defs = runpy.run_module(LOCATION_MODULE)["defs"]
    graph = defs.resolve_asset_graph()
    tasks, attempts, metrics, comparison = (
        dg.AssetKey(["demo", "demo", kind]) for kind in ("tasks", "attempts", "metrics", "comparison")
    )
    assert graph.get(attempts).parent_keys == {tasks}
    assert graph.get(metrics).parent_keys == {attempts}
    assert graph.get(comparison).parent_keys == {metrics}
    assert isinstance(graph.get(attempts).partitions_def, dg.MultiPartitionsDefinition)
    checks = {key.name for key in graph.asset_check_keys if key.asset_key == metrics}
    assert checks == {"counts_match_denominators", "no_secret_in_run_dirs", "no_regression__none"}
    job = defs.resolve_job_def("demo__job")
    assert {node.name for node in job.nodes} >= {"demo__demo__tasks", "demo__demo__evaluate", "demo__demo__comparison"}
    assert job.tags["agentcompass/sweep"] == "demo"
    assert defs.resolve_sensor_def(NEW_TASKS) is not None
    assert {"demo__harness", "demo__environment"} <= set(defs.resources or {})
    ensure_dagster_home(dagster_home)
    validate("-w", "workspace.yaml")


def validate(*target: str) -> None:
    """`dagster definitions validate TARGET` from the repository's root succeeds."""
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("dagster")), "definitions", "validate", *target],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Validation successful" in proc.stderr + proc.stdout


def test_every_client_loads_the_one_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #27: one code location entry point. workspace.yaml (`dagster dev`), the workspace `agentcompass
    ui SWEEP...` writes and the origin of the CLI's runs (run workers, step containers) all name the module
    agentcompass_dagster.definitions as the location `agentcompass`; its sweeps are AGENTCOMPASS_SWEEPS's
    when set, else ./resources's, and, in a directory without resources/, those shipped with the package."""
    entry = {"module_name": LOCATION_MODULE, "attribute": "defs", "location_name": LOCATION_NAME}
    assert yaml.safe_load((REPO / "workspace.yaml").read_text()) == {"load_from": [{"python_module": entry}]}
    monkeypatch.chdir(tmp_path)
    (written,) = json.loads(write_workspace(tmp_path).read_text())["load_from"]
    assert written == {"python_module": {**entry, "working_directory": str(tmp_path)}}
    assert LOCATION_MODULE == "agentcompass_dagster.definitions"

    shipped = runpy.run_module(LOCATION_MODULE)["defs"]
    assert shipped.resolve_job_def("demo__job") is not None
    monkeypatch.setenv(SWEEPS_ENV, str(lab_sweep(tmp_path, ["m1"])))
    chosen = runpy.run_module(LOCATION_MODULE)["defs"]
    assert {key.path[0] for key in chosen.resolve_asset_graph().get_all_asset_keys()} == {"lab"}


def test_the_root_definitions_file_is_the_one_location(dagster_home: Path) -> None:
    """Issue #40: a Dagster user's habit, `dagster dev -f definitions.py` from the repository's root, loads
    the location the CLI runs (the same Definitions object); Dagster itself validates it."""
    # The location as this process's environment makes it, imported here only: a cached one would be
    # the location of every later test of this worker, whatever sweeps it points at.
    cached = sys.modules.pop(LOCATION_MODULE, None)
    try:
        assert runpy.run_path(str(REPO / "definitions.py"))["defs"] is sys.modules[LOCATION_MODULE].defs
    finally:
        sys.modules.pop(LOCATION_MODULE, None)
        if cached is not None:
            sys.modules[LOCATION_MODULE] = cached
    ensure_dagster_home(dagster_home)
    validate("-f", "definitions.py")


class Started:
    """A `dagster dev` that records its command and exits at once."""

    commands: list[list[str]] = []

    def __init__(self, command: list[str], **kwargs: Any) -> None:
        self.commands.append(command)

    def wait(self) -> int:
        return 0


def test_agentcompass_ui_without_a_workspace_file_serves_the_one_location(
    tmp_path: Path, dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #27: with one entry point, `agentcompass ui` needs no workspace.yaml: in a directory without
    one it serves the location agentcompass_dagster.definitions (./resources, else the shipped sweeps), as
    `dagster dev` of that module would; a project's workspace.yaml is still the one it serves there."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("agentcompass_dagster.cli.main.subprocess.Popen", Started)
    Started.commands.clear()
    assert run_cli("ui") == 0
    (tmp_path / "workspace.yaml").write_text((REPO / "workspace.yaml").read_text())
    assert run_cli("ui") == 0

    written, project = (Path(command[command.index("-w") + 1]) for command in Started.commands)
    (entry,) = json.loads(written.read_text())["load_from"]
    assert entry["python_module"]["module_name"] == LOCATION_MODULE and written.is_relative_to(dagster_home)
    assert project == Path("workspace.yaml")


@pytest.mark.slow
def test_reuse_is_skipping(tmp_path: Path, dagster_home: Path) -> None:
    """Two models: one materialization per (model, task) with a normal detail; a second run launches
    nothing; a new model runs only its partitions; a new task runs only itself; a task that ends in error
    is not materialized and is the only one run again."""
    tasks = tmp_path / "tasks"
    for name in ("alpha", "beta", "gamma"):
        write_task(tasks, name, solution="echo ok > out.txt", check="grep -qx ok out.txt")
    flag = tmp_path / "flag"
    write_task(tasks, "flaky", solution=f"test -f {flag} || exit 3\necho ok > out.txt", check="grep -qx ok out.txt")
    sweep = lab_sweep(tmp_path, ["m1", "m2"], tasks)
    assert (
        run_cli("run", sweep) == 3
    )  # a task ending in error is a result (an _error_ detail): exit 3, not a failed run
    done = materialized(dagster_home)
    assert done == {f"{m}|{t}" for m in ("m1", "m2") for t in ("alpha", "beta", "gamma")}
    metadata = partition_metadata("m1|alpha")
    assert metadata["score"] == 1.0 and "task_id" not in metadata  # the partition key is the id

    flag.write_text("")
    runs = run_count()
    assert run_cli("run", sweep) == 0
    assert materialized(dagster_home) == done | {"m1|flaky", "m2|flaky"}
    for model in ("m1", "m2"):
        counts = newest_counts(tmp_path, model)
        assert (counts["new"], counts["reused"], counts["total"], counts["correct"]) == (1, 3, 4, 4)
    assert run_count() > runs

    runs = run_count()
    assert run_cli("run", sweep) == 0
    assert run_count() == runs

    sweep = lab_sweep(tmp_path, ["m1", "m2", "m3"], tasks)
    assert run_cli("run", sweep) == 0
    assert newest_counts(tmp_path, "m3")["new"] == 4
    assert newest_counts(tmp_path, "m1")["new"] == 1  # unchanged: m1 did not run again

    write_task(tasks, "delta", solution="echo ok > out.txt", check="grep -qx ok out.txt")
    assert run_cli("run", sweep) == 0
    for model in ("m1", "m2", "m3"):
        counts = newest_counts(tmp_path, model)
        assert (counts["new"], counts["reused"], counts["total"]) == (1, 4, 5)
    assert len(materialized(dagster_home)) == 15


def test_missing_ranges_are_few_and_never_share_a_model() -> None:
    """A sparse missing set becomes a few runs (one span per model, equal spans merged), never one per
    task; with a bound, no run holds more than that many missing partitions."""
    models, tasks = ["m1", "m2", "m3"], [f"t{i}" for i in range(10)]
    done = {f"{m}|{t}" for m in models for t in tasks} - {"m1|t2", "m1|t7", "m2|t2", "m2|t7", "m3|t9"}
    ranges = missing_ranges(models, tasks, done)
    assert [(r.model_start, r.model_end, r.task_start, r.task_end) for r in ranges] == [
        ("m1", "m2", "t2", "t7"),
        ("m3", "m3", "t9", "t9"),
    ]
    assert missing_ranges(models, tasks, {f"{m}|{t}" for m in models for t in tasks}) == []
    bounded = missing_ranges(["m1"], tasks, set(), max_per_run=4)
    assert [(r.task_start, r.task_end) for r in bounded] == [("t0", "t3"), ("t4", "t7"), ("t8", "t9")]
    split = missing_ranges(models, tasks, done, max_per_run=3)  # m1 and m2 together would hold 4 > 3
    assert [(r.model_start, r.model_end) for r in split] == [("m1", "m1"), ("m2", "m2"), ("m3", "m3")]


def test_sensor_adds_new_tasks_and_requests_them(tmp_path: Path, dagster_home: Path) -> None:
    """The sensor notices a new task in the benchmark's source, asks Dagster to add its partition with the
    tick (not before: a tick that fails adds nothing) and requests it."""
    tasks = tmp_path / "tasks"
    write_task(tasks, "one", solution="echo ok > out.txt", check="grep -qx ok out.txt")
    path = lab_sweep(tmp_path, ["m1"], tasks)
    assert run_cli("run", path) == 0
    write_task(tasks, "two", solution="echo ok > out.txt", check="grep -qx ok out.txt")
    sensor = sweep_files_definitions([path], None).resolve_sensor_def(NEW_TASKS)
    with dg.DagsterInstance.get() as instance, dg.build_sensor_context(instance=instance) as context:
        tick = sensor.evaluate_tick(context)
        (add,) = tick.dynamic_partitions_requests
        assert (add.partitions_def_name, list(add.partition_keys)) == ("tasks__lab__demo", ["two"])
        assert instance.get_dynamic_partitions("tasks__lab__demo") == ["one"]
        assert [{k: v for k, v in r.tags.items() if "range" in k} for r in tick.run_requests] == [
            {"dagster/asset_partition_range_start": "m1|two", "dagster/asset_partition_range_end": "m1|two"}
        ]
        instance.add_dynamic_partitions(add.partitions_def_name, add.partition_keys)  # as the daemon commits the tick
        assert sensor.evaluate_tick(context).skip_message == "lab/demo: no new task"


UNSAFE_IDS = ["a|b", "a,b", "x...y", "with space", "dir/sub/task", "z" * 300, "café", "a~b"]


def test_partition_keys_are_safe_stable_and_distinct() -> None:
    """Task ids with |, ",", "...", spaces, slashes or 300 characters become valid, stable, distinct keys."""
    keys = [partition_key(task_id) for task_id in UNSAFE_IDS]
    assert len(set(keys)) == len(keys)
    assert keys == [partition_key(task_id) for task_id in UNSAFE_IDS]
    for key in keys:
        assert len(key) <= 64 and not any(bad in key for bad in ("|", ",", "...", " ", "/", "\n"))
    assert partition_key("create-hello") == "create-hello"
    assert partition_key("a~b") != "a~b"


def test_unsafe_task_ids_run_through_dagster(tmp_path: Path, dagster_home: Path) -> None:
    """Tasks with unsafe ids run as partitions; the original id stays in the materialization metadata."""
    tasks = tmp_path / "tasks"
    for index, task_id in enumerate(UNSAFE_IDS[:6]):
        write_task(tasks, task_id, solution="echo ok > out.txt", check="grep -qx ok out.txt", dirname=f"d{index}")
    assert run_cli("run", lab_sweep(tmp_path, ["m1"], tasks)) == 0
    done = materialized(dagster_home)
    assert done == {f"m1|{partition_key(t)}" for t in UNSAFE_IDS[:6]}
    assert partition_metadata(f"m1|{partition_key('dir/sub/task')}")["task_id"] == "dir/sub/task"


def test_metrics_asset_parquet_and_checks(tmp_path: Path, dagster_home: Path) -> None:
    """load_metrics() gives the accuracy summary.md shows; Parquet column types are stable; the metrics
    asset shows the markdown table and an accuracy chart inline (the three plots a click away) and its
    checks pass; its "report" path and each attempts partition's "trajectory a1" path are written pages
    (#29: the Dagster UI's way to the report and the trajectories)."""
    sweep = lab_sweep(tmp_path, ["m1", "m2"], harness="oracle")
    assert run_cli("run", sweep) == 0
    (demo,) = sweep_benchmarks(load_sweep(sweep))
    assert materialized(dagster_home) == {f"{m}|{t}" for m in ("m1", "m2") for t in demo.task_keys}
    metrics = load_metrics(tmp_path / "results", latest=True)
    accuracy = metrics[metrics["metric"] == "accuracy"].set_index("model")["value"].to_dict()
    assert accuracy == {"m1": 1.0, "m2": 1.0}
    summary = next((tmp_path / "results" / "lab" / "demo" / "m1").glob("*/summary.md")).read_text()
    assert "| accuracy | 1.0000 |" in summary
    assert {c: str(t) for c, t in metrics.dtypes.items()} == {
        "sweep": "str",
        "benchmark": "str",
        "model": "str",
        "harness": "str",
        "run_id": "str",
        "metric": "str",
        "value": "float64",
        "n": "int64",
        "total": "int64",
        "errors": "int64",
        "timestamp": "datetime64[us, UTC]",
        "stderr": "float64",
        "ci_low": "float64",
        "ci_high": "float64",
        "started_at": "datetime64[us, UTC]",
    }
    tasks = load_task_results(tmp_path / "results")
    assert len(tasks) == 2 * 18 and tasks["correct"].all() and str(tasks["attempt"].dtype) == "int64"
    with dg.DagsterInstance.get() as instance:
        metrics_key = dg.AssetKey(["lab", "demo", "metrics"])
        event = instance.get_latest_materialization_event(metrics_key)
        assert event is not None
        metadata = event.asset_materialization.metadata
        summary_md = metadata["summary"].value
        assert "| m1 |" in summary_md and "| m2 |" in summary_md and "1.0000" in summary_md
        assert metadata["accuracy m1"].value == 1.0
        # Shown inline by the UI (markdown under 1,000 characters): the table and the SVG chart.
        inline = metadata["accuracy per model"].value
        assert len(summary_md) < 1000 and len(inline) < 1000 and inline.startswith("![accuracy](data:image/svg+xml,")
        assert "m1" in unquote(inline) and "m2" in unquote(inline)
        for title in ("accuracy per model", "accuracy per category", "cost against accuracy"):
            plot = metadata[f"plot: {title}"].value
            assert plot.startswith(f"![{title}](data:image/png;base64,")
            png = base64.b64decode(plot.split("base64,", 1)[1].rstrip(")"))
            assert png[:8] == b"\x89PNG\r\n\x1a\n" and 400 <= int.from_bytes(png[16:20], "big") <= 1000
        checks = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [
                dg.AssetCheckKey(metrics_key, "counts_match_denominators"),
                dg.AssetCheckKey(metrics_key, "no_secret_in_run_dirs"),
            ]
        )
        assert len(checks) == 2
        for record in checks.values():
            evaluation = record.event.dagster_event.event_specific_data  # type: ignore[union-attr]
            assert evaluation.passed
    assert (tmp_path / "results" / "lab" / "demo" / "metrics.parquet").is_file()
    # The UI's way to the report and to each attempt's trajectory page (#29): the metrics' "report"
    # path is the sweep's report, which links the page an attempts partition's metadata names.
    report = Path(metadata["report"].value)
    assert report == (tmp_path / "results" / "lab" / "report.html").resolve()
    task = next(iter(demo.task_keys))
    page = Path(partition_metadata(f"m2|{task}")["trajectory a1"])
    assert page.is_file() and page.is_relative_to(report.parent / "trajectories")
    assert f"{demo.task_keys[task].id}" in page.read_text()
    assert f'href="{page.relative_to(report.parent).as_posix()}"' in report.read_text()


def test_dagster_mode_refuses_explicit_run_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through Dagster the runs name themselves: an explicit output.run_id is a clear error, not ignored."""
    sweep = write_sweep(tmp_path, output={"results_dir": str(tmp_path / "results"), "run_id": "fixed"})
    assert run_cli("run", sweep) == 2
    assert "output.run_id='fixed'" in capsys.readouterr().err
    assert not (tmp_path / "results").exists() and not (tmp_path / "dagster_home").exists()


def test_generated_instance_is_sqlite_without_telemetry_with_a_run_queue(tmp_path: Path) -> None:
    """The CLI's DAGSTER_HOME gets a dagster.yaml with telemetry off, one consolidated SQLite event log
    and a run queue; a dagster.yaml that exists is never rewritten."""
    home = ensure_dagster_home(tmp_path / "home")
    config = yaml.safe_load((home / "dagster.yaml").read_text())
    assert config["telemetry"] == {"enabled": False}
    with dg.DagsterInstance.get() as instance:
        assert type(instance.event_log_storage).__name__ == "PooledSqliteEventLogStorage"
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert Path(instance.root_directory) == home
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    ensure_dagster_home(mine)
    assert (mine / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"


def test_comparison_asset_compares_every_pair_of_models(tmp_path: Path, dagster_home: Path) -> None:
    """The comparison asset writes comparison.parquet and a markdown table: a clearly weaker model is
    named, identical models show no difference, p-values are exact McNemar on the discordant tasks."""
    from scipy.stats import binomtest

    from agentcompass_dagster.reporting.results import load_comparisons

    weak = {f"t{i:02d}": {"answer": "wrong"} for i in range(12)}
    sweep = write_sweep(
        tmp_path,
        name="pair",
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 30}}],
        models=[{"id": m, "provider": "none"} for m in ("strong", "twin", "weak")],
        harness={"id": "scripted", "params": {"default": {"oracle": True}, "by_model": {"weak": weak}}},
    )
    assert run_cli("run", sweep) == 0
    frame = load_comparisons(tmp_path / "results").set_index(["model_a", "model_b"])
    strong_weak = frame.loc[("strong", "weak")]
    assert (strong_weak["n"], strong_weak["only_a"], strong_weak["only_b"]) == (30, 12, 0)
    assert strong_weak["p_value"] == pytest.approx(binomtest(12, 12, 0.5).pvalue)
    assert strong_weak["diff"] == pytest.approx(12 / 30) and strong_weak["verdict"] == "strong better"
    twins = frame.loc[("strong", "twin")]
    assert (twins["diff"], twins["p_value"], twins["verdict"]) == (0.0, 1.0, "no detectable difference")
    with dg.DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey(["pair", "synthetic", "comparison"]))
        assert event is not None and "strong better" in event.asset_materialization.metadata["comparisons"].value


def test_environment_env_values_run_as_declared_and_are_written_redacted(tmp_path: Path) -> None:
    """#36: a Dagster run executes with the environment's env values as declared, on a new instance and
    into the results directory the command line gave: a token, the project's directory (which DAGSTER_HOME
    and the results directory lie in) and a path built on it, each compared by the task's check with its
    literal value (accuracy 1.0). What is written stays redacted: no run_info.json, params.json or detail
    holds any of them, and no file of the results directory holds the token."""
    token, project, lib = "s3cr3t-Value-42", str(tmp_path), str(tmp_path / "lib")
    tasks = tmp_path / "tasks"
    write_task(
        tasks,
        "sees-env",
        solution='echo "token $EXPECTED_VALUE"\necho ok > out.txt',
        check=f'test "$EXPECTED_VALUE" = {token} && test "$PROJECT_DIR" = {project} && test "$LIB_DIR" = {lib}',
    )
    sweep = lab_sweep(
        tmp_path,
        ["m1"],
        tasks,
        environment={"id": "local", "env": {"EXPECTED_VALUE": token, "PROJECT_DIR": project, "LIB_DIR": lib}},
    )
    results = tmp_path / "elsewhere"
    assert run_cli("run", sweep, "--results-dir", results) == 0
    metrics = load_metrics(results)
    assert metrics[metrics["metric"] == "accuracy"]["value"].tolist() == [1.0]
    files = [path for path in results.rglob("*") if path.is_file()]
    records = [path for path in files if path.name in ("run_info.json", "params.json") or path.parent.name == "details"]
    assert {path.name for path in records} == {"run_info.json", "params.json", "sees-env_files.json"}
    for path in records:
        text = path.read_text()
        assert [value for value in (token, project, lib) if value in text] == [], path
    for path in files:
        assert token.encode() not in path.read_bytes(), path


@dg.op
def _noop() -> None:
    pass


@dg.job
def _tiny() -> None:
    _noop()


def test_a_claim_holds_a_partition_whose_key_holds_a_registered_secret(tmp_path: Path) -> None:
    """#36: a run's claim is what keeps a second run off its partitions, not a record: a partition whose
    task id holds a registered secret (an environment's env value) stays claimed, and another run that
    wants it does not get it."""
    token = "s3cr3t-Value-42"
    register_secret(token)
    (demo,) = sweep_benchmarks(load_sweep(lab_sweep(tmp_path, ["m1"])))
    key = f"m1|check-{token}"
    ensure_dagster_home(None)
    with dg.DagsterInstance.get() as instance:
        run = instance.create_run_for_job(_tiny, status=dg.DagsterRunStatus.STARTED)
        record_owner(instance, run.run_id, "worker", ProcessId.this())
        assert claim_partitions(demo, instance, run.run_id, [key]) == [key]
        assert claim_partitions(demo, instance, "another-run", [key]) == []


def test_a_new_results_dir_is_a_new_place_to_evaluate_into(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """#36: after a run into the sweep's results directory, `agentcompass run --results-dir OTHER` evaluates
    every task into OTHER (what has a result in another results directory is not done there) and leaves
    the first directory as it was; run again into OTHER, or into the first, it launches nothing."""
    tasks = tmp_path / "tasks"
    for name in ("alpha", "beta"):
        write_task(tasks, name, solution="echo ok > out.txt", check="grep -qx ok out.txt")
    sweep = lab_sweep(tmp_path, ["m1"], tasks)
    assert run_cli("run", sweep) == 0
    first = tree_snapshot(tmp_path / "results")
    other = tmp_path / "other"
    capsys.readouterr()
    assert run_cli("run", sweep, "--results-dir", other) == 0
    assert "Nothing to run" not in capsys.readouterr().out
    (run_dir,) = (other / "lab" / "demo" / "m1").iterdir()
    counts = json.loads((run_dir / ".summary_counts.json").read_text())
    assert (counts["new"], counts["reused"], counts["correct"], counts["total"]) == (2, 0, 2, 2)
    metrics = load_metrics(other)
    assert metrics[metrics["metric"] == "accuracy"]["value"].tolist() == [1.0]
    assert tree_snapshot(tmp_path / "results") == first
    runs = run_count()
    for again in (["--results-dir", other], []):
        assert run_cli("run", sweep, *again) == 0
        assert "Nothing to run" in capsys.readouterr().out
        assert run_count() == runs
