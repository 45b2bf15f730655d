"""Asset checks on a benchmark's metrics: counts agree with their denominators, no secret on disk, and
no model got worse (than its previous run, and than the sweep's baseline model)."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

import dagster as dg

from agentcompass_dagster.defs.assets import current_after_deps
from agentcompass_dagster.defs.partitions import dagster_name
from agentcompass_dagster.defs.sweep import SweepBenchmark
from agentcompass_dagster.runtime.store.redact import redact_text
from agentcompass_dagster.runtime.store.layout import METRICS_FILE, SUMMARY, SUMMARY_COUNTS
from agentcompass_dagster.runtime.results.regression import RegressionVerdict, complete_runs, judge, write_verdict

MAX_FINDINGS = 20


def counts_check(sweep_benchmark: SweepBenchmark) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=sweep_benchmark.key("metrics"),
        name="counts_match_denominators",
        automation_condition=current_after_deps(),
        description="In each model's newest run: evaluated + errors + missing = selected tasks, and "
        "every metric row carries those counts (accuracy per category: its category's tasks).",
    )
    def counts_match_denominators() -> dg.AssetCheckResult:
        import pandas as pd

        problems = []
        for model, source in sweep_benchmark.newest_runs(SUMMARY_COUNTS).items():
            run = Path(source.path)
            counts = json.loads((run / SUMMARY_COUNTS).read_text()) if (run / SUMMARY_COUNTS).is_file() else None
            if counts is None:
                problems.append(f"{model}: no {SUMMARY_COUNTS} in {run}")
                continue
            if counts["evaluated"] + counts["error"] + counts["missing"] != counts["total"]:
                problems.append(
                    f"{model}: evaluated {counts['evaluated']} + errors {counts['error']} + missing "
                    f"{counts['missing']} != total {counts['total']}"
                )
            if (run / METRICS_FILE).is_file():
                rows = pd.read_parquet(run / METRICS_FILE).set_index("metric")
                per_category = {f"accuracy/{name}": c["evaluated"] for name, c in counts["categories"].items()}
                expected_n = {"accuracy": counts["evaluated"], **per_category}
                wrong_n = [m for m, n in expected_n.items() if m in rows.index and rows.loc[m, "n"] != n]
                if wrong_n or not ((rows["total"] == counts["total"]) & (rows["errors"] == counts["error"])).all():
                    problems.append(f"{model}: metrics.parquet counts differ from {SUMMARY_COUNTS} ({wrong_n})")
        return dg.AssetCheckResult(passed=not problems, metadata={"problems": dg.MetadataValue.json(problems)})

    return counts_match_denominators


def secrets_check(sweep_benchmark: SweepBenchmark) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=sweep_benchmark.key("metrics"),
        name="no_secret_in_run_dirs",
        automation_condition=current_after_deps(),
        description="No file of a model's newest run directory holds a secret-looking value.",
    )
    def no_secret_in_run_dirs() -> dg.AssetCheckResult:
        findings = []
        scanned = 0
        for source in sweep_benchmark.newest_runs(SUMMARY).values():
            for path in Path(source.path).rglob("*"):
                if not path.is_file() or path.suffix == ".parquet":
                    continue
                scanned += 1
                text = path.read_text(errors="replace")
                if redact_text(text) != text:
                    findings.append(str(path))
                    if len(findings) >= MAX_FINDINGS:
                        break
        return dg.AssetCheckResult(
            passed=not findings,
            metadata={"files scanned": scanned, "files with secrets": dg.MetadataValue.json(findings)},
        )

    return no_secret_in_run_dirs


def regression_check_name(model_id: str) -> str:
    return dagster_name("no_regression", model_id)


def baseline_check_name(model_id: str, baseline: str) -> str:
    return dagster_name(model_id, "not_worse_than", baseline)


COMPLETE_RUN = (
    "A run counts once it is complete: completed, not a fork, with a result for every task it "
    "selected (a run that reused earlier results counts; its reused tasks tie)."
)


def with_the_metrics() -> dg.AutomationCondition:
    """Requested only together with the metrics. A regression check with nothing to compare yields no
    result, so a condition on its own updates (current_after_deps) would stay due after every run that
    skipped it, and the automation sensor would launch a run of the check alone, skipping again."""
    return dg.AutomationCondition.any_deps_match(dg.AutomationCondition.will_be_requested())


class _Identity(TypedDict):
    """The arguments of every regression verdict of a benchmark (judge's keywords)."""

    sweep: str
    benchmark: str
    alpha: float
    min_drop: float


def regression_checks(sweep_benchmark: SweepBenchmark) -> dg.AssetChecksDefinition:
    """Per model, its newest complete run against its previous one; with alerts.baseline_model, per other
    model, its newest complete run against the baseline model's. One step computes them all: each is
    one check in the UI, failing with severity ERROR (blocking what depends on the metrics when
    alerts.blocking), and a check with nothing to compare yet yields no result, which Dagster shows as
    skipped (the reason is in the step's log, and for a run without an earlier one in its regression.json)."""
    sweep, benchmark = sweep_benchmark.sweep, sweep_benchmark.benchmark.id
    alerts = sweep.alerts
    models = list(sweep_benchmark.model_keys.values())  # contestants: the models, with one harness
    rule = f"fails when worse with p < {alerts.alpha} (paired test of per-task scores) and a drop > {alerts.min_drop}"
    baseline = alerts.baseline_model
    others = [model for model in models if baseline is not None and model != baseline]

    # Subsettable, so that a check with nothing to compare may yield nothing (and the UI can run one).
    @dg.multi_asset_check(
        specs=_regression_specs(sweep_benchmark, models, others, rule),
        name=dagster_name(sweep.name, benchmark, "regression"),
        can_subset=True,
        description=f"Regression checks of {benchmark!r}: {rule}.",
    )
    def regression(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        identity: _Identity = {
            "sweep": sweep.name,
            "benchmark": benchmark,
            "alpha": alerts.alpha,
            "min_drop": alerts.min_drop,
        }
        selected = {key.name for key in context.selected_asset_check_keys}
        newest = {}
        for model in models:
            runs = complete_runs(sweep_benchmark.store.runs_newest_first(sweep_benchmark.root(model)))
            new = next(runs, None)
            if new is None:
                context.log.info(f"{model} has no complete run yet: its checks are skipped")
                continue
            newest[model] = (new[0].run_id, new[1])
            if regression_check_name(model) not in selected:
                continue
            old = next(((run.run_id, scores) for run, scores in runs), None)
            verdict = judge(newest[model], old, model=model, **identity)
            write_verdict(Path(new[0].path), verdict)
            yield from _result(context, regression_check_name(model), verdict)
        for model in others:
            assert baseline is not None
            if model not in newest or baseline_check_name(model, baseline) not in selected:
                continue
            verdict = judge(
                newest[model],
                newest.get(baseline),
                model=model,
                baseline_model=baseline,
                missing=f"the baseline model {baseline} has no complete run yet",
                **identity,
            )
            yield from _result(context, baseline_check_name(model, baseline), verdict)

    return regression


def _regression_specs(
    sweep_benchmark: SweepBenchmark, models: list[str], others: list[str], rule: str
) -> list[dg.AssetCheckSpec]:
    """A check per model against its previous run, and one per other model against the baseline model."""
    benchmark, alerts = sweep_benchmark.benchmark.id, sweep_benchmark.sweep.alerts
    metrics = sweep_benchmark.key("metrics")
    specs = [
        dg.AssetCheckSpec(
            regression_check_name(model),
            asset=metrics,
            blocking=alerts.blocking,
            automation_condition=with_the_metrics(),
            description=f"{model}'s newest complete run of {benchmark!r} against its previous one, "
            f"on the tasks both finished: {rule}. {COMPLETE_RUN}",
        )
        for model in models
    ]
    baseline = alerts.baseline_model
    specs += [
        dg.AssetCheckSpec(
            baseline_check_name(model, baseline),
            asset=metrics,
            blocking=alerts.blocking,
            automation_condition=with_the_metrics(),
            description=f"{model}'s newest complete run of {benchmark!r} against the baseline "
            f"model {baseline}'s, on the tasks both finished: {rule}. {COMPLETE_RUN}",
        )
        for model in others
        if baseline is not None
    ]  # (others is empty without a baseline)
    return specs


def _result(
    context: dg.AssetCheckExecutionContext, name: str, verdict: RegressionVerdict
) -> Iterator[dg.AssetCheckResult]:
    if verdict.status == "skipped":
        context.log.info(f"{name} skipped: {verdict.reason}")
        return
    figures = verdict.model_dump(
        include={
            "n",
            "mean_new",
            "mean_baseline",
            "diff",
            "ci_low",
            "ci_high",
            "p_value",
            "test",
            "alpha",
            "min_drop",
            "run_id",
            "baseline_run_id",
        }
    )
    yield dg.AssetCheckResult(
        check_name=name,
        passed=verdict.status == "passed",
        severity=dg.AssetCheckSeverity.ERROR,
        description=verdict.reason,
        metadata={**figures, "verdict": dg.MetadataValue.json(verdict.model_dump(mode="json"))},
    )
