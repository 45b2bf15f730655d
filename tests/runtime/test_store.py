"""The RunStore: layout, reservation, artifacts, result layers, metrics validation, reuse, compatibility."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentcompass_dagster.contracts.declarations import BenchmarkConfig, EnvironmentConfig, HarnessConfig, ModelConfig
from agentcompass_dagster.contracts.request import ExecutionConfig, OutputConfig, EvalRequest
from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.runtime.execution.orchestrator import Orchestrator, orchestrate
from agentcompass_dagster.runtime.store.layout import run_root
from agentcompass_dagster.runtime.store.run_store import RunStore, open_run_dir
from agentcompass_dagster.contracts.records import ExecutionPlan, MetricCounts, MetricResult
from agentcompass_dagster.runtime.store.outcomes import OrchestrationResult, RequestResult, TaskDetail

from conftest import run_cli, tree_snapshot, write_sweep, write_task


def synthetic_request(results: Path, name: str = "syn", n: int = 6, **execution: object) -> EvalRequest:
    return EvalRequest(
        name=name,
        benchmark=BenchmarkConfig(id="synthetic", params={"n_tasks": n}),
        model=ModelConfig(id="m"),
        harness=HarnessConfig(id="oracle"),
        environment=EnvironmentConfig(id="local"),
        execution=ExecutionConfig.model_validate(execution),
        output=OutputConfig(results_dir=results, run_name="s"),
    )


def only_result(requests: list[EvalRequest]) -> RequestResult:
    result = orchestrate(requests)
    (outcome,) = result.outcomes.values()
    assert outcome.result is not None, outcome.error
    return outcome.result


def test_run_directory_layout_and_normalisation(tmp_path: Path) -> None:
    """R-STORE-1: <results_dir>/<run_name>/<benchmark>/<model>/<run_id>/ with user parts normalised."""
    results = tmp_path / "results"
    output = OutputConfig(results_dir=results, run_name="../../outside")
    root = run_root(output, "demo", "org/model:v1\x07")
    assert root.resolve().is_relative_to(results.resolve())
    assert root.parts[-1] == "org_model_v1_"
    assert root.parts[-2] == "demo"
    assert ".." not in root.relative_to(results).parts
    long_root = run_root(OutputConfig(results_dir=results, run_name="x" * 500), "demo", "y" * 500)
    assert all(len(part) <= 120 for part in long_root.relative_to(results).parts)
    assert run_root(OutputConfig(results_dir=results, run_name="x" * 500), "demo", "y" * 499) != long_root
    run_dir = RunStore(results).reserve(root, "../../../etc")
    assert run_dir.path.parent == root and run_dir.path.is_dir()


def test_explicit_run_id_refused_when_it_exists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """R-STORE-2: an explicit run_id whose directory exists is refused, and nothing in it changes."""
    sweep = write_sweep(tmp_path, output={"results_dir": str(tmp_path / "results"), "run_id": "r1"})
    assert run_cli("run", sweep, "--direct") == 0
    before = tree_snapshot(tmp_path / "results")
    capsys.readouterr()
    assert run_cli("run", sweep, "--direct") == 2
    err = capsys.readouterr().err.strip()
    assert "output.run_id='r1'" in err and "already exists" in err and len(err.splitlines()) == 1
    assert tree_snapshot(tmp_path / "results") == before


def test_generated_run_ids_are_unique_under_concurrency(tmp_path: Path) -> None:
    """R-STORE-2: timestamp ids increment on collision; concurrent reservations never share a directory."""
    store = RunStore(tmp_path)
    root = tmp_path / "b" / "m"
    reserved: list[Path] = []
    barrier = threading.Barrier(16)

    def reserve() -> None:
        barrier.wait()
        reserved.append(store.reserve(root, None).path)

    threads = [threading.Thread(target=reserve) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(reserved)) == 16
    assert sorted(p.name for p in root.iterdir()) == sorted(p.name for p in reserved)


def test_artifacts_of_a_run(tmp_path: Path) -> None:
    """R-STORE-3: run_info.json, params.json, details (normal and _error_), retry_details/, summary.md,
    .summary_counts.json, and the paths mapping."""
    request = synthetic_request(tmp_path / "results", n=4, max_retries=1, retry_pattern_list=["reference solution"])
    result = only_result([request])
    run_dir = Path(result.run_dir)
    info = json.loads((run_dir / "run_info.json").read_text())
    assert info["schema_version"] == 1 and info["status"] == "completed"
    assert info["started_at"] and info["finished_at"]
    assert info["request"]["benchmark"]["id"] == "synthetic"
    assert set(info["task_plans"]) == {"t0", "t1", "t2", "t3"}
    plan = info["plans"][info["task_plans"]["t0"]["1"]]
    assert plan["harness_id"] == "oracle" and plan["max_retries"] == 1
    assert info["reused_from"] is None
    params = json.loads((run_dir / "params.json").read_text())
    assert set(params) == {"benchmark", "model", "output", "lineage", "dagster_run_id", "started_at"}
    assert "harness" not in params and "execution" not in params
    assert sorted(p.name for p in (run_dir / "details").iterdir()) == [
        "t0_a.json",
        "t1_b.json",
        "t2_c.json",
        "t3_a.json",
    ]
    assert (run_dir / "retry_details").is_dir()
    assert (run_dir / "summary.md").is_file() and (run_dir / ".summary_counts.json").is_file()
    assert result.paths["run_dir"] == str(run_dir)
    assert Path(result.paths["log"]).is_file() and Path(result.paths["summary"]).is_file()


def test_error_details_and_retry_details(tmp_path: Path) -> None:
    """R-STORE-3: a task that ends in error gets an _error_ detail; discarded retries go to retry_details/."""
    write_task(tmp_path / "tasks", "broken", solution="echo failing on purpose; exit 3", check="exit 0")
    sweep = write_sweep(
        tmp_path,
        benchmarks=[{"id": "demo", "params": {"tasks_dir": str(tmp_path / "tasks")}}],
        execution={"max_retries": 2},
    )
    result = only_result(load_sweep(sweep).requests())
    run_dir = Path(result.run_dir)
    assert [p.name for p in (run_dir / "details").iterdir()] == ["_error_broken_files.json"]
    detail = TaskDetail.model_validate_json((run_dir / "details" / "_error_broken_files.json").read_text())
    assert detail.is_error and "exited with 3" in (detail.error or "") and detail.retry_count == 2
    retries = sorted(p.name for p in (run_dir / "retry_details").iterdir())
    assert retries == ["broken__attempt1__retry1.json", "broken__attempt1__retry2.json"]
    assert result.metrics.counts.error == 1 and result.metrics.counts.evaluated == 0


def test_result_layers_are_distinct_types(tmp_path: Path) -> None:
    """R-STORE-5: attempts keyed "1".."k" inside a task detail; request and orchestration results apart."""
    avg = synthetic_request(tmp_path / "r", name="avg", n=3, attempts={"k": 3, "strategy": "avg"})
    pass_ = synthetic_request(tmp_path / "r2", name="pass", n=3, attempts={"k": 3, "strategy": "pass"})
    orchestration = orchestrate([avg, pass_])
    assert isinstance(orchestration, OrchestrationResult)
    assert list(orchestration.outcomes) == ["avg", "pass"]
    avg_result = orchestration.outcomes["avg"].result
    assert isinstance(avg_result, RequestResult) and isinstance(avg_result.metrics, MetricResult)
    details = open_run_dir(Path(avg_result.run_dir)).load_all_details()
    detail = details["t0"]
    assert list(detail.attempts) == ["1", "2", "3"] and detail.k == 3 and detail.attempts_tried == 3
    assert detail.first_correct_attempt == 1 and detail.correct and detail.score == 1.0
    assert detail.attempts["2"].meta["resolved_execution_plan"]["harness_id"] == "oracle"
    pass_details = open_run_dir(Path(orchestration.outcomes["pass"].paths["run_dir"])).load_all_details()
    assert pass_details["t0"].attempts_tried == 1 and list(pass_details["t0"].attempts) == ["1"]


def test_metric_result_is_validated() -> None:
    """R-STORE-7: schema_version, at least one finite metric, counts that fit their denominators."""
    ok = MetricResult(metrics={"accuracy": 0.5, "x": None}, counts=MetricCounts(total=4, evaluated=3, error=1))
    assert ok.schema_version == 1
    with pytest.raises(ValidationError, match="finite"):
        MetricResult(metrics={"accuracy": float("nan")}, counts=MetricCounts(total=1, evaluated=1, error=0))
    with pytest.raises(ValidationError, match="finite"):
        MetricResult(metrics={}, counts=MetricCounts(total=1, evaluated=1, error=0))
    with pytest.raises(ValidationError, match="exceed"):
        MetricCounts(total=2, evaluated=2, error=1)


def test_metric_counts_match_real_denominators(tmp_path: Path) -> None:
    """R-STORE-7: counts.total = selected tasks, evaluated = normal details, error = _error_ details."""
    result = only_result(
        [synthetic_request(tmp_path / "r", n=7).model_copy(update={"harness": HarnessConfig(id="nop")})]
    )
    assert result.metrics.counts.model_dump() == {"total": 7, "evaluated": 7, "error": 0}
    assert result.metrics.metrics["accuracy"] == 0.0
    assert len(list(Path(result.paths["details"]).glob("*.json"))) == 7


def test_reuse_run_id_turns_reuse_on() -> None:
    """R-REUSE-1: reuse and reuse_run_id; a non-empty reuse_run_id turns reuse on."""
    assert OutputConfig(reuse_run_id="abc").reuse is True
    assert OutputConfig(reuse_run_id="").reuse is False
    assert OutputConfig(reuse=True).reuse_run_id is None


def test_reuse_source_frozen_before_reservation(tmp_path: Path) -> None:
    """R-REUSE-2: an implicit reuse source is chosen before any request reserves its directory, so it
    never picks a directory this orchestration just created."""
    results = tmp_path / "results"
    first = only_result([synthetic_request(results, n=3)])
    fresh = synthetic_request(results, name="fresh", n=3)
    fresh = fresh.model_copy(update={"output": fresh.output.model_copy(update={"run_id": "zzz-newest"})})
    reusing = synthetic_request(results, name="reusing", n=3)
    reusing = reusing.model_copy(
        update={"harness": HarnessConfig(id="nop"), "output": reusing.output.model_copy(update={"reuse": True})}
    )
    outcome = orchestrate([fresh, reusing]).outcomes["reusing"]
    info = json.loads(Path(outcome.paths["run_info"]).read_text())
    assert info["reused_from"]["run_id"] == first.run_id


def test_reuse_lookup_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """R-REUSE-3: explicit id must exist; implicit picks the newest run with run_info.json; none found
    runs fresh; implicit reuse shared by two requests on one root is refused as ambiguous."""
    results = tmp_path / "results"
    fresh = only_result(
        [
            synthetic_request(results, n=2).model_copy(
                update={"output": OutputConfig(results_dir=results, run_name="s", reuse=True)}
            )
        ]
    )
    assert json.loads(Path(fresh.paths["run_info"]).read_text())["reused_from"] is None
    second = only_result([synthetic_request(results, n=2)])
    (Path(second.run_dir).parent / "99999999T999999Z-no-info").mkdir()
    store = RunStore(results)
    root = Path(second.run_dir).parent
    assert store.find_reuse_source(root, OutputConfig(reuse=True)).run_id == second.run_id  # type: ignore[union-attr]
    with pytest.raises(UserError, match="output.reuse_run_id='nope'"):
        store.find_reuse_source(root, OutputConfig(reuse_run_id="nope"))
    a = synthetic_request(results, name="a", n=2).model_copy(
        update={"output": OutputConfig(results_dir=results, run_name="s", reuse=True)}
    )
    b = a.model_copy(update={"name": "b", "harness": HarnessConfig(id="nop")})
    with pytest.raises(UserError, match="ambiguous"):
        Orchestrator([a, b]).preflight()


def test_reuse_reruns_exactly_missing_and_error_tasks(tmp_path: Path) -> None:
    """R-REUSE-4, R-REUSE-5: delete two details and turn one into an _error_ file: a reuse run runs
    exactly those three, hard-links the rest, never writes the source, and summarises all tasks."""
    sweep = write_sweep(tmp_path)
    first = only_result(load_sweep(sweep).requests())
    source = Path(first.run_dir)
    details = sorted((source / "details").glob("*.json"))
    details[0].unlink()
    details[1].unlink()
    broken = TaskDetail.model_validate_json(details[2].read_text()).model_copy(update={"error": "boom"})
    (source / "details" / ("_error_" + details[2].name)).write_text(broken.model_dump_json())
    details[2].unlink()
    expected_rerun = {p.name for p in details[:3]}
    before = tree_snapshot(source)

    assert run_cli("run", sweep, "--direct", "--reuse") == 0
    assert tree_snapshot(source) == before
    (new_dir,) = [p for p in source.parent.iterdir() if p != source]
    info = json.loads((new_dir / "run_info.json").read_text())
    assert info["reused_from"]["run_id"] == first.run_id
    assert info["reused_from"]["path"] == str(source)
    assert info["reused_from"]["tasks"] == len(details) - 3
    new_inodes = {p.name: p.stat().st_ino for p in (new_dir / "details").glob("*.json")}
    source_inodes = {p.name: p.stat().st_ino for p in (source / "details").glob("*.json")}
    assert set(new_inodes) == {p.name for p in details}
    linked = {name for name, ino in new_inodes.items() if source_inodes.get(name) == ino}
    assert linked == {p.name for p in details} - expected_rerun
    assert not any(name.startswith("_error_") for name in new_inodes)
    counts = json.loads((new_dir / ".summary_counts.json").read_text())
    assert counts["total"] == counts["evaluated"] == counts["correct"] == len(details)
    assert counts["reused"] == len(details) - 3 and counts["new"] == 3


def test_existing_run_directories_still_load(tmp_path: Path) -> None:
    """R-COMPAT-1: details with unknown (newer) fields and without newer optional fields still load;
    task ids are stable across loads; retry diagnostics stay out of details/."""
    old = {
        "task_id": "a",
        "category": "x",
        "attempts": {"1": {"attempt": 1, "correct": True, "score": 1.0}},
        "correct": True,
        "score": 1.0,
        "future_field": {"anything": 1},
    }
    detail = TaskDetail.model_validate(old)
    assert detail.attempts["1"].usage.input_tokens == 0 and detail.retry_count == 0 and not detail.is_error
    from agentcompass_dagster.plugins.benchmarks.demo import DemoBenchmark

    bench = DemoBenchmark(BenchmarkConfig(id="demo"))
    assert [t.id for t in bench.load_tasks()] == [t.id for t in bench.load_tasks()]


def test_a_fork_written_with_lineage_in_metadata_still_reads_as_a_fork(tmp_path: Path) -> None:
    """R-COMPAT-1, R-FORK-1: older versions kept a request's lineage, durable seed and Dagster run id in
    its ``metadata`` (run_info.json and params.json); such a run still loads with them as fields, is
    shown and summarised as a fork and stays out of the from-scratch statistics."""
    from agentcompass_dagster.reporting.results import load_task_results
    from agentcompass_dagster.reporting.show import overview
    from agentcompass_dagster.runtime.execution.finalize import rerender_summary
    from agentcompass_dagster.runtime.store.run_records import read_params
    from agentcompass_dagster.runtime.store.run_store import load_run_request
    from agentcompass_dagster.contracts.request import Lineage

    run_dir = Path(only_result([synthetic_request(tmp_path / "results", n=2)]).run_dir)
    lineage = {
        "kind": "fork",
        "parent_run_id": "parent-1",
        "parent_run_dir": "/results/parent-1",
        "task_id": "t0",
        "attempt": 1,
        "checkpoint_seq": 3,
        "parent_model": "a",
        "model": "m",
        "forked_at": "2024-01-01",
    }
    metadata = {
        "lineage": lineage,
        "durable_seed": "/results/s.forks/.seeds/f",
        "dagster_run_id": "dg-1",
        "resumed_from": "older",
    }
    info = json.loads((run_dir / "run_info.json").read_text())
    info["request"]["metadata"] = metadata
    (run_dir / "run_info.json").write_text(json.dumps(info))
    params = json.loads((run_dir / "params.json").read_text())
    del params["lineage"], params["dagster_run_id"]
    (run_dir / "params.json").write_text(json.dumps({**params, "metadata": metadata}))

    _, request, _ = load_run_request(run_dir)
    assert request.lineage == Lineage.model_validate(lineage) and request.dagster_run_id == "dg-1"
    assert request.durable_seed == Path(metadata["durable_seed"])
    old_params = read_params(run_dir)
    assert old_params is not None and old_params.lineage == request.lineage and old_params.dagster_run_id == "dg-1"
    assert overview(run_dir).lineage == lineage
    assert rerender_summary(run_dir)[1].startswith("# fork of run parent-1 (task t0, checkpoint 3, model a -> m)")
    assert load_task_results(tmp_path / "results").empty
    assert set(load_task_results(tmp_path / "results", include_forks=True)["run_id"]) == {run_dir.name}


def test_plan_is_persisted_through_an_allow_list() -> None:
    """R-STORE-4: the resolved plan is written as an explicit allow-list view, never a whole dump."""
    plan = ExecutionPlan(
        task_id="t",
        attempt=1,
        benchmark_id="b",
        harness_id="h",
        environment_id="e",
        model_id="m",
        durable_dir=Path("/home/someone/results/run/.durable/t@1"),
    )
    view = plan.persisted_view()
    assert "durable_dir" not in view and "task_id" not in view and "durable_dir" not in plan.model_dump()
    assert list(view) == list(ExecutionPlan.PERSISTED_FIELDS)
    assert "/home/someone" not in json.dumps(view)


def test_the_pandas_api_counts_a_reused_task_once_by_default(tmp_path: Path) -> None:
    """R-FIN-1: a second run that reuses the first lists its tasks again, marked reused; load_task_results
    and load_metrics read the newest run by default, so each task is one row (the run before counted 36
    rows for 18 tasks), and latest=False gives every run's rows."""
    from agentcompass_dagster.reporting.results import load_metrics, load_task_results

    first = write_sweep(tmp_path, name="again")
    orchestrate(load_sweep(first).requests())
    reusing = load_sweep(first)
    orchestrate(reusing.model_copy(update={"output": reusing.output.model_copy(update={"reuse": True})}).requests())
    tasks = load_task_results(tmp_path / "results")
    assert len(tasks) == tasks["task_id"].nunique() == 18 and tasks["reused"].all()
    assert len(load_task_results(tmp_path / "results", latest=False)) == 36
    assert load_metrics(tmp_path / "results")["run_id"].nunique() == 1
    assert load_metrics(tmp_path / "results", latest=False)["run_id"].nunique() == 2


def test_the_attempts_line_says_which_attempts_ran_in_this_run(tmp_path: Path) -> None:
    """R-FIN-1: with k = 2, a run that reuses two tasks of an earlier one and runs a third says
    'Attempts: 6 · 2 run in this run · 4 reused from earlier runs' (it said '6 run' when 2 ran)."""
    tasks = ["count-errors", "create-hello", "crlf-to-lf"]
    execution = {"attempts": {"k": 2}}
    first = load_sweep(
        write_sweep(tmp_path, name="again", benchmarks=[{"id": "demo", "tasks": tasks[:2]}], execution=execution)
    )
    orchestrate(first.requests())
    second = load_sweep(
        write_sweep(
            tmp_path,
            name="again",
            benchmarks=[{"id": "demo", "tasks": tasks}],
            execution=execution,
            output={"results_dir": str(tmp_path / "results"), "reuse": True},
        )
    )
    (outcome,) = orchestrate(second.requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    summary = (Path(outcome.result.run_dir) / "summary.md").read_text()
    assert "Attempts: 6 · 2 run in this run · 4 reused from earlier runs · 6 correct" in summary, summary


def test_appending_lines_leaves_no_file_descriptor_open(tmp_path: Path) -> None:
    """Issue #30 (found while giving each public name one meaning): ``append_line`` and
    ``safe_fs.append_beneath`` close the descriptor they open. A second ``append_to`` had silently
    replaced the closing one, so every line of an activity log, a dispatch ledger or an alerts file
    leaked a descriptor, and a long agent run would end in EMFILE."""
    from agentcompass_dagster.runtime.store.atomic import append_line
    from agentcompass_dagster.runtime.store.safe_fs import append_beneath

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_fds()
    for n in range(50):
        append_line(tmp_path / "log.jsonl", f'{{"n": {n}}}\n'.encode())
        append_beneath(tmp_path, "sub/alerts.jsonl", f'{{"n": {n}}}\n'.encode())
    assert open_fds() == before
    assert len((tmp_path / "log.jsonl").read_bytes().splitlines()) == 50
    assert len((tmp_path / "sub" / "alerts.jsonl").read_bytes().splitlines()) == 50


def test_a_run_read_back_runs_with_the_values_redaction_hid(tmp_path: Path) -> None:
    """#36: run_info.json holds the request redacted; resume, fork and replay read it back and must run
    what the run ran: each hidden value comes back from the file it was declared in (an inline sweep
    declaration here), and a value that file no longer declares stays hidden."""
    from agentcompass_dagster.runtime.store.run_store import load_run_request

    token = "tok-" + "9f3b1c77e2d54a08"
    sweep = write_sweep(tmp_path, environment={"id": "local", "env": {"API_TOKEN": token, "MODE": "plain"}})
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None
    run_path = Path(outcome.result.run_dir)
    assert token not in (run_path / "run_info.json").read_text()
    _, request, _ = load_run_request(run_path)
    assert request.environment.env == {"API_TOKEN": token, "MODE": "plain"}
    sweep.write_text(sweep.read_text().replace(token, "tok-rotated-0000000"))
    _, request, _ = load_run_request(run_path)
    assert request.environment.env["API_TOKEN"] == "tok-rotated-0000000"
    sweep.unlink()
    _, request, _ = load_run_request(run_path)
    assert request.environment.env["API_TOKEN"] == "[REDACTED]"


def test_newest_run_has_one_meaning_for_run_directories_frames_and_plots(tmp_path: Path) -> None:
    """Issue 40: "the newest run" is the one started last, the greater run id between two that started
    together, for the run store (reuse, the Dagster assets), load_metrics and the plots alike. Run a
    started first and was written last; b and c started together. Before: the plots took the run written
    last (a), and load_metrics the first of the two that started last (b)."""
    import pandas as pd

    from agentcompass_dagster.reporting import plots
    from agentcompass_dagster.reporting.results import IDENTITY, newest_runs

    started = {"a": "2026-01-01T10:00:00+00:00", "b": "2026-01-01T11:00:00+00:00", "c": "2026-01-01T11:00:00+00:00"}
    written = {"a": "2026-01-01T12:00:00+00:00", "b": "2026-01-01T11:30:00+00:00", "c": "2026-01-01T11:10:00+00:00"}
    root = tmp_path / "results" / "lab" / "demo" / "m"
    for run_id, at in started.items():
        (root / run_id).mkdir(parents=True)
        (root / run_id / "run_info.json").write_text(json.dumps({"started_at": at}))
    assert [run.run_id for run in RunStore(tmp_path / "results").runs_newest_first(root)] == ["c", "b", "a"]
    metrics = pd.DataFrame(
        {
            "sweep": "lab",
            "benchmark": "demo",
            "model": "m",
            "harness": "h",
            "metric": "accuracy",
            "run_id": list(started),
            "value": [0.1, 0.2, 0.3],
            "started_at": pd.to_datetime(list(started.values())),
            "timestamp": pd.to_datetime(list(written.values())),
        }
    )
    assert newest_runs(metrics, IDENTITY)["run_id"].tolist() == ["c"]
    assert plots._accuracy_rows(metrics) == [("m", 0.3, None, None)]
