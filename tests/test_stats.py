"""Metrics with uncertainty and paired comparisons of models."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from agentcompass_dagster.config import load_sweep
from agentcompass_dagster.results import load_metrics
from agentcompass_dagster.runtime.orchestrator import run_requests
from agentcompass_dagster.runtime.stats import bootstrap_mean, mcnemar_exact, paired_comparison

from conftest import write_sweep


def test_bootstrap_interval_covers_the_truth_about_95_percent() -> None:
    """1,000 simulated benchmarks of 200 Bernoulli(0.6) tasks: the 95% interval covers 0.6 in 93-97%."""
    rng = np.random.default_rng(7)
    covered = 0
    for index in range(1000):
        interval = bootstrap_mean(rng.binomial(1, 0.6, size=200).astype(float), seed=index)
        assert interval is not None
        covered += interval.ci_low <= 0.6 <= interval.ci_high
    assert 930 <= covered <= 970, covered


def test_mcnemar_matches_scipy_binomtest() -> None:
    """McNemar p-values equal scipy.stats.binomtest on the discordant counts."""
    for only_a, only_b in [(3, 10), (0, 6), (7, 7), (25, 12), (1, 0)]:
        assert mcnemar_exact(only_a, only_b) == pytest.approx(binomtest(only_a, only_a + only_b, 0.5).pvalue)
    tasks = [f"t{i}" for i in range(40)]
    a = {t: float(i % 2 == 0 or i < 20) for i, t in enumerate(tasks)}
    b = {t: float(i % 2 == 0) for i, t in enumerate(tasks)}
    comparison = paired_comparison(a, b)
    assert comparison is not None
    assert (comparison.only_a, comparison.only_b) == (10, 0)
    assert comparison.p_value == pytest.approx(binomtest(10, 10, 0.5).pvalue)
    assert comparison.diff == pytest.approx(10 / 40) and comparison.ci_low <= comparison.diff <= comparison.ci_high
    assert comparison.verdict("m1", "m2") == "m1 better"


def test_identical_results_report_no_difference() -> None:
    """A pair with identical results reports a zero difference, p = 1 and no detectable difference."""
    scores = {f"t{i}": float(i % 3 == 0) for i in range(30)}
    comparison = paired_comparison(scores, dict(scores))
    assert comparison is not None
    assert (comparison.diff, comparison.ci_low, comparison.ci_high, comparison.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert comparison.verdict("m1", "m2") == "no detectable difference"
    assert paired_comparison({"a": 1.0}, {"b": 1.0}) is None


def test_metrics_carry_intervals_resampling_tasks_not_attempts(tmp_path: Path) -> None:
    """With k=3 attempts the interval is over tasks (n = tasks, not attempts); metrics.parquet, summary.md,
    .summary_counts.json and the MetricResult carry the same stderr and interval."""
    steps = [{"answer": "x"}, {"oracle": True}, {"oracle": True}]
    sweep = write_sweep(tmp_path, name="ci", benchmarks=[{"id": "synthetic", "params": {"n_tasks": 30}}],
                        harness={"id": "scripted", "params": {"tasks": {f"t{i:02d}": steps for i in range(30)}}},
                        execution={"attempts": {"k": 3}})
    (outcome,) = run_requests(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None
    uncertainty = outcome.result.metrics.details["uncertainty"]
    assert uncertainty["accuracy"]["n"] == 30 and uncertainty["pass@3"]["n"] == 30
    assert uncertainty["accuracy"]["ci_low"] == uncertainty["accuracy"]["ci_high"] == pytest.approx(2 / 3)
    counts = json.loads((Path(outcome.result.run_dir) / ".summary_counts.json").read_text())
    assert counts["uncertainty"] == uncertainty
    row = load_metrics(tmp_path / "results").set_index("metric").loc["accuracy"]
    assert (row["stderr"], row["ci_low"], row["ci_high"]) == pytest.approx(
        (uncertainty["accuracy"]["stderr"], uncertainty["accuracy"]["ci_low"], uncertainty["accuracy"]["ci_high"]))
    assert "| accuracy | 0.0000 | [0.6667, 0.6667] | 30 |" in outcome.result.summary
