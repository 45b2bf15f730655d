"""Regression alerts (issue #28): the regression check on a benchmark's metrics, run by the sweep's real
job through `agentcompass run` (again with `--fresh`, the recurring re-evaluation), and the sensor that
turns its failures into alert records and webhook calls, ticked the way the daemon ticks it
(evaluate_tick on the instance the runs wrote); a fresh schedule's tick, evaluated the same way."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.defs.alerts import NAME as ALERTS_SENSOR
from agentcompass_dagster.defs.location import sweep_definitions, sweep_files_definitions
from agentcompass_dagster.defs.instance import ensure_dagster_home
from agentcompass_dagster.defs.partitions import RANGE_END, RANGE_START, KeyRange, range_keys, split_key
from agentcompass_dagster.defs.planning import FRESH_TAG, register_tasks
from agentcompass_dagster.defs.sweep import sweep_benchmarks
from agentcompass_dagster.launcher.runs import RunFactory
from agentcompass_dagster.reporting.results import load_alerts
from agentcompass_dagster.runtime.results.regression import read_verdict
from agentcompass_dagster.runtime.store.run_records import RunInfo

from conftest import run_cli, write_sweep

N_TASKS = 20
METRICS = dg.AssetKey(["watch", "synthetic", "metrics"])


class Webhook:
    """A local HTTP endpoint that keeps the JSON bodies POSTed to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        received = self.bodies

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    thread = threading.Thread(target=hook.server.serve_forever, daemon=True)
    thread.start()
    yield hook
    hook.server.shutdown()
    thread.join()


def watch_sweep(
    tmp_path: Path, models: list[str], wrong: dict[str, list[str]], fields: dict[str, Any] | None = None, **alerts: Any
) -> Path:
    """Sweep "watch": the synthetic benchmark, the scripted harness solving every task except, per
    model, the ``wrong`` ones; ``fields`` are more of the sweep's fields (schedule, output)."""
    by_model = {model: {task: {"answer": "wrong"} for task in tasks} for model, tasks in wrong.items()}
    return write_sweep(
        tmp_path,
        name="watch",
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": N_TASKS}}],
        models=[{"id": m, "provider": "none"} for m in models],
        alerts=alerts,
        harness={"id": "scripted", "params": {"default": {"oracle": True}, "by_model": by_model}},
        **(fields or {}),
    )


def newest_run(tmp_path: Path, model: str) -> Path:
    root = tmp_path / "results" / "watch" / "synthetic" / model
    return max(root.iterdir(), key=lambda p: json.loads((p / "params.json").read_text())["started_at"])


def latest_check(name: str) -> tuple[str, Any]:
    """The resolved status of a check's latest execution (SUCCEEDED, FAILED, or SKIPPED for one whose
    run ended without evaluating it) and its evaluation."""
    with dg.DagsterInstance.get() as instance:
        record = instance.event_log_storage.get_latest_asset_check_execution_by_key([dg.AssetCheckKey(METRICS, name)])[
            dg.AssetCheckKey(METRICS, name)
        ]
        status = record.status.value
        if status == "PLANNED":
            run = instance.get_run_by_id(record.run_id)
            assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
            status = "SKIPPED"
        return status, record.event.asset_check_evaluation if record.event is not None else None


def tick(sweep: Path, cursor: str | None) -> str | None:
    """One evaluation of the sweep's alert sensor, as a daemon tick runs it; returns the new cursor."""
    sensor = sweep_files_definitions([sweep], None).resolve_sensor_def(ALERTS_SENSOR)
    with dg.DagsterInstance.get() as instance, dg.build_sensor_context(instance=instance, cursor=cursor) as context:
        return sensor.evaluate_tick(context).cursor


def test_a_regression_fails_its_check_and_alerts_once(tmp_path: Path, webhook: Webhook) -> None:
    """Issue #28 acceptance: a sweep run through its real job, then again with `agentcompass run --fresh`
    (every task evaluated again, as a recurring sweep does) with a model that fails half the tasks it
    passed: the regression check fails with severity ERROR and p in its metadata, and (blocking) keeps
    the comparison from running; a third, fresh run equal to the second passes; the first run's check
    is skipped with its reason. alerts.jsonl and a local webhook receive
    exactly one alert, however often the sensor ticks, even with its cursor lost."""
    half = [f"t{i:02d}" for i in range(0, N_TASKS, 2)]
    sweep = watch_sweep(tmp_path, ["m1"], {}, webhook_url=webhook.url, blocking=True)
    assert run_cli("run", sweep) == 0
    assert latest_check("no_regression__m1")[0] == "SKIPPED"
    first = read_verdict(newest_run(tmp_path, "m1"))
    assert first is not None and (first.status, first.reason) == ("skipped", "no earlier complete run")
    cursor = tick(sweep, None)

    sweep = watch_sweep(tmp_path, ["m1"], {"m1": half}, webhook_url=webhook.url, blocking=True)
    assert run_cli("run", sweep, "--fresh") != 0  # the blocking check failed the run
    status, evaluation = latest_check("no_regression__m1")
    assert status == "FAILED" and evaluation.severity == dg.AssetCheckSeverity.ERROR
    p_value = evaluation.metadata["p_value"].value
    assert p_value == pytest.approx(2 * 0.5**10) and evaluation.metadata["diff"].value == pytest.approx(-0.5)
    second = read_verdict(newest_run(tmp_path, "m1"))
    assert second is not None and second.status == "failed" and second.baseline_run_id == first.run_id
    info = RunInfo.model_validate_json((newest_run(tmp_path, "m1") / "run_info.json").read_text())
    assert info.reused_from is None and not info.merged_from  # every task evaluated again
    with dg.DagsterInstance.get() as instance:
        (failed_run,) = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))
        comparison = instance.get_latest_materialization_event(dg.AssetKey(["watch", "synthetic", "comparison"]))
        assert comparison is not None and comparison.run_id != failed_run.run_id  # blocked by the failed check
    for _ in range(2):
        cursor = tick(sweep, cursor)
    assert tick(sweep, None) is not None  # a lost cursor alerts nothing again

    assert run_cli("run", sweep, "--fresh") == 0
    status, evaluation = latest_check("no_regression__m1")
    assert status == "SUCCEEDED" and evaluation.metadata["p_value"].value == 1.0
    assert evaluation.metadata["baseline_run_id"].value == second.run_id
    # The earlier runs stay as they were: the first still holds every task's detail.
    first_dir = tmp_path / "results" / "watch" / "synthetic" / "m1" / first.run_id
    assert len(list((first_dir / "details").glob("*.json"))) == N_TASKS
    tick(sweep, cursor)

    alerts = load_alerts(tmp_path / "results")
    assert len(alerts) == 1 and len(webhook.bodies) == 1
    alert = alerts.iloc[0]
    assert (alert["sweep"], alert["benchmark"], alert["model"], alert["check_name"]) == (
        "watch",
        "synthetic",
        "m1",
        "no_regression__m1",
    )
    assert alert["p_value"] == pytest.approx(p_value) and alert["webhook"] == "delivered"
    assert alert["run_id"] == second.run_id and alert["dagster_run_id"] == failed_run.run_id
    assert webhook.bodies[0]["alert"]["evaluation_id"] == alert["evaluation_id"]
    assert "no_regression__m1" in webhook.bodies[0]["text"]


def test_models_are_checked_against_the_baseline_model(tmp_path: Path) -> None:
    """Issue #28, alerts.baseline_model: in one run of the real job, a model worse than the baseline model
    on their common tasks fails its check and is alerted; one as good passes; the checks against an
    earlier run are skipped, there being none; a non-blocking failure fails no run. A webhook that
    cannot be reached leaves its error (without the URL, a Slack webhook's secret) in the alert record
    instead of failing the sensor's tick."""
    half = [f"t{i:02d}" for i in range(0, N_TASKS, 2)]
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}/services/T0/B0/secretpath"
    closed.close()  # nothing listens there now
    sweep = watch_sweep(tmp_path, ["base", "weak", "twin"], {"weak": half}, baseline_model="base", webhook_url=url)
    assert run_cli("run", sweep) == 0
    status, evaluation = latest_check("weak__not_worse_than__base")
    assert status == "FAILED" and evaluation.metadata["p_value"].value == pytest.approx(2 * 0.5**10)
    assert latest_check("twin__not_worse_than__base")[0] == "SUCCEEDED"
    assert {latest_check(f"no_regression__{m}")[0] for m in ("base", "weak", "twin")} == {"SKIPPED"}
    tick(sweep, None)
    (alert,) = load_alerts(tmp_path / "results").to_dict("records")
    assert (alert["model"], alert["baseline_model"], alert["check_name"], alert["webhook"]) == (
        "weak",
        "base",
        "weak__not_worse_than__base",
        "failed",
    )
    assert "refused" in alert["webhook_error"] and "secretpath" not in alert["webhook_error"]
    assert alert["run_id"] == newest_run(tmp_path, "weak").name
    assert alert["baseline_run_id"] == newest_run(tmp_path, "base").name


def test_a_fresh_schedule_tick_requests_every_partition_and_skips_while_its_round_is_in_flight(tmp_path: Path) -> None:
    """Issue #28 (a weekly re-evaluation): with `schedule.fresh`, a tick, evaluated as Dagster's daemon
    evaluates it, requests runs of every partition although each is materialized, tagged as a fresh
    round; once such runs exist and have not finished, the next tick requests nothing and says why."""
    sweep = watch_sweep(tmp_path, ["m1", "m2"], {}, {"schedule": {"cron": "0 3 * * 1", "fresh": True}})
    (sweep_benchmark,) = sweep_benchmarks(load_sweep(sweep))
    everything = {f"{m}|{t}" for m in sweep_benchmark.model_keys for t in sweep_benchmark.task_keys}
    ensure_dagster_home(None)
    with dg.DagsterInstance.get() as instance:
        register_tasks(sweep_benchmark, instance, list(sweep_benchmark.task_keys))
        for key in everything:
            model, task = split_key(key)
            instance.report_runless_asset_event(
                dg.AssetMaterialization(
                    sweep_benchmark.key("attempts"), partition=dg.MultiPartitionKey({"model": model, "task": task})
                )
            )
        assert instance.get_materialized_partitions(sweep_benchmark.key("attempts")) == everything
    definitions = sweep_definitions(load_sweep(sweep))
    schedule = definitions.resolve_schedule_def("watch__schedule")
    with dg.DagsterInstance.get() as instance, dg.build_schedule_context(instance=instance) as context:
        tick = schedule.evaluate_tick(context)
        requests = tick.run_requests or []
        requested: set[str] = set()
        for request in requests:
            assert request.tags[FRESH_TAG]
            (m0, t0), (m1, t1) = split_key(request.tags[RANGE_START]), split_key(request.tags[RANGE_END])
            requested |= range_keys(
                KeyRange(m0, m1, t0, t1), list(sweep_benchmark.model_keys), list(sweep_benchmark.task_keys)
            )
        assert requested == everything
        factory = RunFactory(instance, definitions)
        runs = [factory.create(sweep_benchmark, request.tags) for request in requests]
        again = schedule.evaluate_tick(context)
    assert not again.run_requests and again.skip_message is not None
    assert again.skip_message.startswith(f"a fresh round of the sweep is still in flight ({len(runs)} runs: ")


def test_fresh_direct_evaluates_every_task_again_and_bad_flags_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #28: `agentcompass run --direct --fresh` of a sweep declaring output.reuse evaluates every
    task again in a new run (reusing nothing), where a plain --direct run reuses every earlier result;
    --fresh with --reuse is one line of bad input, exit 2."""
    sweep = watch_sweep(tmp_path, ["m1"], {}, {"output": {"results_dir": str(tmp_path / "results"), "reuse": True}})

    def newest_info() -> RunInfo:
        return RunInfo.model_validate_json((newest_run(tmp_path, "m1") / "run_info.json").read_text())

    assert run_cli("run", sweep, "--direct") == 0
    assert run_cli("run", sweep, "--direct") == 0
    reused = newest_info().reused_from
    assert reused is not None and reused.tasks == N_TASKS
    assert run_cli("run", sweep, "--direct", "--fresh") == 0
    fresh = newest_info()
    assert fresh.reused_from is None and fresh.status == "completed"
    assert len(list((newest_run(tmp_path, "m1") / "details").glob("*.json"))) == N_TASKS
    capsys.readouterr()
    assert run_cli("run", sweep, "--direct", "--fresh", "--reuse") == 2
    assert capsys.readouterr().err == (
        "agentcompass: error: --reuse=True: --fresh reuses no earlier result; give one or the other\n"
    )
