"""Uncertainty of metrics and paired comparison of models.

Intervals are percentile bootstraps over tasks: with k attempts a task contributes the mean of its
attempts and tasks (not attempts) are resampled, because tasks are the sampled unit. Their memory
does not grow with the task count (see resampled_means). Two models are
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
# Up to this many distinct values the resampled means are drawn exactly (multinomial counts).
MAX_LEVELS = 64
# Indices drawn at once by the general resampler: 8 MB of them, and 8 MB of gathered values.
CHUNK_ELEMENTS = 1 << 20


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


def resampled_means(values: np.ndarray, n_boot: int = N_BOOT, seed: int = SEED) -> np.ndarray:
    """The means of ``n_boot`` resamples (with replacement, of the same size) of ``values``, in memory
    that does not grow with their number beyond ``values`` themselves.

    Scores take few distinct values (0/1, a fraction of k attempts, pass@k): then how often each value
    is drawn is multinomial, and the resampled means are drawn exactly from that, n_boot x levels
    numbers whatever the task count. Otherwise the resamples are drawn in chunks of about a million
    indices, the same stream of draws as one n_boot x N draw would give.
    """
    rng = np.random.default_rng(seed)
    levels, counts = np.unique(values, return_counts=True)
    if len(levels) <= MAX_LEVELS:
        drawn = rng.multinomial(values.size, counts / values.size, size=n_boot)
        means: np.ndarray = drawn @ levels / values.size
        return means
    rows = max(1, CHUNK_ELEMENTS // values.size)
    means = np.empty(n_boot)
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        means[start:stop] = values[rng.integers(0, values.size, size=(stop - start, values.size))].mean(axis=1)
    return means


def bootstrap_mean(values: Sequence[float] | np.ndarray, n_boot: int = N_BOOT, seed: int = SEED) -> Interval | None:
    """Mean of per-task values with its bootstrap standard error and 95% interval (None for no tasks)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return None
    means = resampled_means(data, n_boot, seed)
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
    # Resampling task pairs resamples their differences.
    low, high = _percentiles(resampled_means(x - y, n_boot, seed))
    solved_a, solved_b = x >= 1.0, y >= 1.0
    only_a, only_b = int((solved_a & ~solved_b).sum()), int((solved_b & ~solved_a).sum())
    return Comparison(n=len(common), mean_a=float(x.mean()), mean_b=float(y.mean()), diff=float(x.mean() - y.mean()),
                      ci_low=low, ci_high=high, only_a=only_a, only_b=only_b, p_value=mcnemar_exact(only_a, only_b))
