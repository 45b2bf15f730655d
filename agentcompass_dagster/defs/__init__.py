"""The Dagster layer: a thin, declarative mapping of the sweeps in resources/ onto Dagster objects.

For now each sweep is one asset ``<sweep>/results`` that runs the sweep through the runtime and shows
its metrics as metadata; the per-benchmark, per-task partitioned assets build on this.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from agentcompass_dagster.config import SweepConfig, load_sweep
from agentcompass_dagster.errors import UserError


def sweep_asset(sweep: SweepConfig) -> dg.AssetsDefinition:
    @dg.asset(
        key=[sweep.name, "results"],
        group_name=sweep.name.replace("-", "_"),
        description=sweep.description or f"Run the sweep {sweep.name!r} and aggregate its metrics.",
    )
    def _results() -> dg.MaterializeResult:
        from agentcompass_dagster.runtime.orchestrator import run_requests

        result = run_requests(sweep.requests())
        metadata: dict[str, dg.RawMetadataValue] = {"status": result.status}
        for name, outcome in result.outcomes.items():
            if outcome.result is not None:
                metadata[f"{name} accuracy"] = outcome.result.metrics.metrics.get("accuracy")
                metadata[f"{name} run_dir"] = dg.MetadataValue.path(outcome.result.run_dir)
                metadata[f"{name} summary"] = dg.MetadataValue.md(outcome.result.summary)
        if result.status != "completed":
            raise dg.Failure(description=f"sweep {sweep.name!r} ended {result.status}", metadata=metadata)
        return dg.MaterializeResult(metadata=metadata)

    return _results


def build_definitions(resources: Path) -> dg.Definitions:
    """Definitions for every sweep in ``resources/sweeps``; an invalid declaration stops loading with
    one message naming the file, the field and the value."""
    sweeps_dir = Path(resources) / "sweeps"
    sweeps = [load_sweep(path, resources) for path in sorted(sweeps_dir.glob("*.yaml"))]
    names = [s.name for s in sweeps]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise UserError(f"{sweeps_dir}: sweep name={duplicates[0]!r} is declared twice")
    return dg.Definitions(assets=[sweep_asset(s) for s in sweeps])
