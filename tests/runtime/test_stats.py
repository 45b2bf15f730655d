"""Metrics with uncertainty and paired comparisons of models."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest, permutation_test

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.reporting.results import load_metrics
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate
from agentcompass_dagster.runtime.results.stats import (
    bootstrap_mean,
    mcnemar_exact,
    paired_comparison,
    sign_flip_p_value,
)

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


def _old_bootstrap(values: np.ndarray, seed: int, n_boot: int = 2000) -> tuple[float, float, float]:
    """The bootstrap as it was: one n_boot x N index draw (stderr, 2.5th and 97.5th percentile)."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(n_boot, values.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(means.std(ddof=1)), float(low), float(high)


@pytest.mark.parametrize("kind", ["binary", "thirds", "continuous"])
def test_bootstrap_gives_the_intervals_of_the_full_resampling(kind: str) -> None:
    """The memory-flat bootstrap (exact multinomial draws for few distinct scores, chunked resampling
    otherwise) gives the intervals of the full n_boot x N resampling within Monte-Carlo error, on fixed
    seeds; with continuous scores its chunks replay the very same draws."""
    rng = np.random.default_rng(11)
    for seed in range(5):
        n = int(rng.integers(50, 3000))
        values = {
            "binary": rng.binomial(1, 0.3, size=n).astype(float),
            "thirds": rng.integers(0, 4, size=n) / 3,
            "continuous": rng.gamma(2.0, 1.5, size=n),
        }[kind]
        interval = bootstrap_mean(values, seed=seed)
        assert interval is not None
        stderr, low, high = _old_bootstrap(values, seed)
        if kind == "continuous":
            assert (interval.stderr, interval.ci_low, interval.ci_high) == pytest.approx((stderr, low, high))
            continue
        # The standard error of a bootstrap stderr is about stderr / sqrt(2 * n_boot) (1.6%); of a
        # percentile a few times that.
        assert interval.stderr == pytest.approx(stderr, rel=0.08)
        assert interval.ci_low == pytest.approx(low, abs=0.3 * stderr)
        assert interval.ci_high == pytest.approx(high, abs=0.3 * stderr)
        assert interval.mean == pytest.approx(values.mean())


def test_bootstrap_memory_does_not_grow_with_the_tasks() -> None:
    """The bootstrap allocates a few MB besides the scores, where the full resampling takes
    n_boot x N x 8 bytes twice (3.2 GB for 100,000 0/1 scores, 640 MB for 200,000 continuous ones)."""
    import tracemalloc

    rng = np.random.default_rng(3)
    for values, n_boot in ((rng.binomial(1, 0.5, size=100_000).astype(float), 2000), (rng.random(200_000), 200)):
        tracemalloc.start()
        interval = bootstrap_mean(values, n_boot=n_boot)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert interval is not None and interval.ci_low < values.mean() < interval.ci_high
        assert peak < 4 * values.nbytes + 40_000_000, peak


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
    sweep = write_sweep(
        tmp_path,
        name="ci",
        benchmarks=[{"id": "synthetic", "params": {"n_tasks": 30}}],
        harness={"id": "scripted", "params": {"tasks": {f"t{i:02d}": steps for i in range(30)}}},
        execution={"attempts": {"k": 3}},
    )
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None
    uncertainty = outcome.result.metrics.details["uncertainty"]
    assert uncertainty["accuracy"]["n"] == 30 and uncertainty["pass@3"]["n"] == 30
    assert uncertainty["accuracy"]["ci_low"] == uncertainty["accuracy"]["ci_high"] == pytest.approx(2 / 3)
    counts = json.loads((Path(outcome.result.run_dir) / ".summary_counts.json").read_text())
    assert counts["uncertainty"] == uncertainty
    row = load_metrics(tmp_path / "results").set_index("metric").loc["accuracy"]
    assert (row["stderr"], row["ci_low"], row["ci_high"]) == pytest.approx(
        (uncertainty["accuracy"]["stderr"], uncertainty["accuracy"]["ci_low"], uncertainty["accuracy"]["ci_high"])
    )
    assert "| accuracy | 0.0000 | [0.6667, 0.6667] | 30 |" in outcome.result.summary


def test_with_three_attempts_a_task_counts_its_share_of_solved_attempts() -> None:
    """k = 3, two models, twelve tasks: A solves most attempts, B a third of them. The paired
    test runs on each task's share of solved attempts (sign-flip permutation), not on "every attempt
    solved" (which made the old McNemar see 1 task vs 0 and say p = 1 beside an interval excluding 0);
    test, interval and verdict agree that A is better."""
    a = dict(zip((f"t{i}" for i in range(12)), [1, 1, 2 / 3, 2 / 3, 1, 2 / 3, 1, 1, 2 / 3, 1, 1 / 3, 1]))
    b = dict(zip(a, [1 / 3, 2 / 3, 0, 1 / 3, 1 / 3, 0, 2 / 3, 1 / 3, 0, 1 / 3, 1 / 3, 2 / 3]))
    comparison = paired_comparison(a, b)
    assert comparison is not None and comparison.test == "sign-flip"
    assert (comparison.only_a, comparison.only_b) == (11, 0)
    assert comparison.p_value < 0.05 and comparison.ci_low > 0
    assert comparison.verdict("A", "B") == "A better"


def test_the_verdict_never_contradicts_the_interval() -> None:
    """over random k = 3 score pairs of 5 to 30 tasks, "better" comes only with an interval on
    that side of 0, "no detectable difference" only with an interval holding 0; otherwise the verdict
    says the two disagree. Five tasks all better by 2/3 (interval excluding 0, smallest possible p 1/16)
    are inconclusive, not "no detectable difference"."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(5, 31))
        a = {f"t{i}": rng.integers(0, 4) / 3 for i in range(n)}
        b = {t: min(1.0, max(0.0, v - rng.integers(-1, 3) / 3)) for t, v in a.items()}
        comparison = paired_comparison(a, b)
        assert comparison is not None
        verdict = comparison.verdict("A", "B")
        excludes = comparison.ci_low > 0 or comparison.ci_high < 0
        if verdict == "no detectable difference":
            assert not excludes
        elif verdict.endswith(" better"):
            assert excludes and (comparison.ci_low > 0) == (verdict == "A better")
        else:
            assert verdict.startswith("inconclusive")
    five = paired_comparison({f"t{i}": 1.0 for i in range(5)}, {f"t{i}": 1 / 3 for i in range(5)})
    assert five is not None and five.p_value == pytest.approx(1 / 16) and five.ci_low > 0
    assert five.verdict("A", "B").startswith("inconclusive")


def test_the_sign_flip_test_equals_scipys_exact_permutation_test() -> None:
    """the exact sign-flip p-value equals scipy.stats.permutation_test's (paired samples, all
    permutations) on per-task differences of k = 3 scores; above 16 tasks it is drawn, and close."""
    rng = np.random.default_rng(3)
    for n in (4, 9, 14, 40):
        differences = (rng.integers(0, 4, n) - rng.integers(0, 4, n)) / 3
        expected = permutation_test(
            (differences,),
            np.mean,
            permutation_type="samples",
            n_resamples=np.inf if n <= 16 else 200_000,
            random_state=1,
        ).pvalue
        assert sign_flip_p_value(differences) == pytest.approx(expected, abs=1e-9 if n <= 16 else 0.01)
