"""The code location's regression-alert sensor: each failed evaluation of a regression check
(defs/asset_checks.py) of any sweep of the location becomes one line of
``<results_dir>/<sweep>/alerts.jsonl`` and, when the sweep declares alerts.webhook_url, one JSON POST
to it (a Slack incoming webhook takes it as is: it reads ``text``).

The sensor reads the checks' executions from the instance, after the id its cursor holds: exactly once
per evaluation, whichever process evaluated the check (a run worker, a step container). An alert is
appended before the cursor moves past it, and an evaluation already in alerts.jsonl is never alerted
again, so a tick that dies between the two repeats nothing."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from agentcompass_dagster.declarations.sweep import AlertsConfig
from agentcompass_dagster.defs.sweep import SweepBenchmark
from agentcompass_dagster.runtime.store.layout import ALERTS_FILE
from agentcompass_dagster.runtime.store.redact import redact, redact_text
from agentcompass_dagster.runtime.results.regression import (
    RegressionAlert,
    RegressionVerdict,
    append_alert,
    read_alerts,
)

NAME = "agentcompass_regression_alerts"
INTERVAL_S = 30
WEBHOOK_TIMEOUT_S = 5.0
PAGE = 100


def regression_alert_sensor(checks: Mapping[dg.AssetCheckKey, SweepBenchmark]) -> dg.SensorDefinition:
    """One sensor over the regression checks of every sweep of the location (check key -> its sweep
    benchmark): execution record ids are the storage's, one order across checks, so one cursor serves
    them all."""
    keys = sorted(checks, key=lambda key: key.to_user_string())

    @dg.sensor(
        name=NAME,
        minimum_interval_seconds=INTERVAL_S,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Each failed regression check of a sweep: a line of <sweep>/{ALERTS_FILE} in its "
        "results directory, and a POST to the sweep's alerts.webhook_url when it declares one.",
    )
    def regression_alerts(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        cursor = int(context.cursor or 0)
        records = sorted(_executions_after(context.instance, keys, cursor), key=lambda record: record.id)
        alerted: dict[Path, set[int]] = {}
        sent = 0
        for record in records:
            status = record.status.value
            if status == "PLANNED":
                run = context.instance.get_run_by_id(record.run_id)
                if run is not None and not run.is_finished:
                    # Not evaluated yet: the cursor waits here, and what follows is read again next tick.
                    break
            elif status == "FAILED" and record.event is not None:
                member = checks[record.key]
                results_dir = Path(member.sweep.output.results_dir)
                sweep_dir = str(member.report_dir.relative_to(results_dir))
                path = results_dir / sweep_dir / ALERTS_FILE
                if path not in alerted:
                    alerted[path] = {a.evaluation_id for a in read_alerts(path)}
                if record.id not in alerted[path]:
                    append_alert(results_dir, sweep_dir, _alert(record, member.sweep.alerts))
                    sent += 1
            context.update_cursor(str(record.id))
        return dg.SkipReason(f"{sent} regression alert(s) sent" if sent else "no new failed regression check")

    return regression_alerts


def _executions_after(instance: dg.DagsterInstance, keys: Sequence[dg.AssetCheckKey], cursor: int) -> Iterator[Any]:
    """Every execution record of these checks with an id above ``cursor`` (Dagster pages them newest first)."""
    for key in keys:
        before = None
        while True:
            page = instance.event_log_storage.get_asset_check_execution_history(key, limit=PAGE, cursor=before)
            newer = [record for record in page if record.id > cursor]
            yield from newer
            if len(newer) < PAGE:
                break
            before = page[-1].id


def _alert(record: Any, alerts: AlertsConfig) -> RegressionAlert:
    evaluation = record.event.asset_check_evaluation
    verdict = RegressionVerdict.model_validate(evaluation.metadata["verdict"].value)
    alert = RegressionAlert(
        **verdict.model_dump(),
        check_name=record.key.name,
        evaluation_id=record.id,
        dagster_run_id=record.run_id,
        alerted_at=time.time(),
        webhook="not declared",
    )
    if alerts.webhook_url:
        error = _post(alerts.webhook_url, alert)
        alert.webhook, alert.webhook_error = ("failed", error) if error else ("delivered", None)
    return alert


def _post(url: str, alert: RegressionAlert) -> str | None:
    """POST the alert; what went wrong, or None. A webhook that fails is recorded, never retried: the
    record in alerts.jsonl is the alert, the webhook a notice of it. The URL is left out of the error, a
    Slack webhook's path being its secret."""
    text = f"Regression in sweep {alert.sweep}, {alert.benchmark}, {alert.model} ({alert.check_name}): {alert.reason}"
    body = json.dumps(
        redact({"text": text, "alert": alert.model_dump(mode="json", exclude={"webhook", "webhook_error"})})
    )
    request = urllib.request.Request(
        url, data=body.encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT_S) as response:
            response.read()
    except Exception as exc:  # any failure of the call is the record's to say, not the tick's
        return redact_text(str(exc).replace(url, "<webhook_url>"))[:500]
    return None
