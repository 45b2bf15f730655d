"""A regression verdict: a model's newest complete run of a sweep x benchmark against its previous one.

The regression check (defs/asset_checks.py) writes one into the newer run's directory; the history
(`agentcompass history`, results.load_history, the HTML report) reads it back from there, so a run's
verdict travels with the run."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from agentcompass_dagster.runtime.atomic import atomic_write_json

VERDICT_FILE = "regression.json"
VerdictStatus = Literal["passed", "failed", "skipped"]


class RegressionVerdict(BaseModel):
    """``run_id`` is the newer run, ``baseline_run_id`` the one it was compared with (None when skipped:
    ``reason`` says why). Means are per-task scores (the mean over a task's attempts) on the ``n`` tasks
    both runs finished; ``diff`` is newer minus baseline, so a drop is negative."""

    model_config = ConfigDict(extra="forbid")

    sweep: str
    benchmark: str
    model: str
    run_id: str
    baseline_run_id: str | None = None
    status: VerdictStatus
    reason: str
    n: int = 0
    mean_new: float | None = None
    mean_baseline: float | None = None
    diff: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    test: str | None = None
    alpha: float
    min_drop: float
    checked_at: float


def write_verdict(run_dir: Path, verdict: RegressionVerdict) -> None:
    atomic_write_json(run_dir / VERDICT_FILE, verdict.model_dump(mode="json"))


def read_verdict(run_dir: Path) -> RegressionVerdict | None:
    """The run's verdict, or None when it has none (never checked, or a file this version cannot read)."""
    path = run_dir / VERDICT_FILE
    if not path.is_file() or path.is_symlink():
        return None
    try:
        return RegressionVerdict.model_validate_json(path.read_bytes())
    except ValueError:
        return None
