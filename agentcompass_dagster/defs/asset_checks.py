"""Asset checks on a benchmark's metrics: counts agree with their denominators, no secret on disk."""

import json
from pathlib import Path

import dagster as dg

from agentcompass_dagster.defs.assets import current_after_deps
from agentcompass_dagster.defs.sweep import SweepBenchmark
from agentcompass_dagster.runtime.parquet import METRICS_FILE
from agentcompass_dagster.runtime.redact import redact_text
from agentcompass_dagster.runtime.layout import SUMMARY, SUMMARY_COUNTS

MAX_FINDINGS = 20


def counts_check(sweep_benchmark: SweepBenchmark) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=sweep_benchmark.key("metrics"), name="counts_match_denominators",
                    automation_condition=current_after_deps(),
                    description="In each model's newest run: evaluated + errors + missing = selected tasks, and "
                    "every metric row carries those counts (accuracy per category: its category's tasks).")
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
                problems.append(f"{model}: evaluated {counts['evaluated']} + errors {counts['error']} + missing "
                                f"{counts['missing']} != total {counts['total']}")
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
    @dg.asset_check(asset=sweep_benchmark.key("metrics"), name="no_secret_in_run_dirs",
                    automation_condition=current_after_deps(),
                    description="No file of a model's newest run directory holds a secret-looking value.")
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
