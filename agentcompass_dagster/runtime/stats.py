"""Uncertainty of metrics and paired comparison of models.

Intervals are percentile bootstraps over tasks: with k attempts a task contributes the mean of its
attempts and tasks (not attempts) are resampled, because tasks are the sampled unit. Two models are
compared on the tasks both finished: the difference in accuracy with a paired bootstrap interval, and
the exact McNemar test on the discordant pairs (tasks exactly one of them solved).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel

N_BOOT = 2000
LEVEL = 0.95
SEED = 20261129


class Interval(BaseModel):
    mean: float
    stderr: float
    ci_low: float
    ci_high: float
    n: int


class Comparison(BaseModel):
    n: int
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    only_a: int
    only_b: int
    p_value: float

    def verdict(self, name_a: str, name_b: str, alpha: float = 0.05) -> str:
        if self.p_value >= alpha or self.only_a == self.only_b:
            return "no detectable difference"
        return f"{name_a} better" if self.diff > 0 else f"{name_b} better"


def _percentiles(samples: np.ndarray) -> tuple[float, float]:
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_mean(values: Sequence[float], n_boot: int = N_BOOT, seed: int = SEED) -> Interval | None:
    """Mean of per-task values with its bootstrap standard error and 95% interval (None for no tasks)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return None
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(n_boot, data.size))].mean(axis=1)
    low, high = _percentiles(means)
    return Interval(mean=float(data.mean()), stderr=float(means.std(ddof=1)) if n_boot > 1 else 0.0,
                    ci_low=low, ci_high=high, n=int(data.size))


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of the discordant counts against 1/2."""
    if only_a + only_b == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def paired_comparison(
    a: Mapping[str, float], b: Mapping[str, float], n_boot: int = N_BOOT, seed: int = SEED
) -> Comparison | None:
    """Compare two models' per-task scores (1.0 = solved) on the tasks both have; None if none."""
    common = sorted(set(a) & set(b))
    if not common:
        return None
    x = np.asarray([a[t] for t in common], dtype=float)
    y = np.asarray([b[t] for t in common], dtype=float)
    rng = np.random.default_rng(seed)
    index = rng.integers(0, len(common), size=(n_boot, len(common)))
    low, high = _percentiles((x[index] - y[index]).mean(axis=1))
    solved_a, solved_b = x >= 1.0, y >= 1.0
    only_a, only_b = int((solved_a & ~solved_b).sum()), int((solved_b & ~solved_a).sum())
    return Comparison(n=len(common), mean_a=float(x.mean()), mean_b=float(y.mean()), diff=float(x.mean() - y.mean()),
                      ci_low=low, ci_high=high, only_a=only_a, only_b=only_b, p_value=mcnemar_exact(only_a, only_b))
