"""Uncertainty of metrics and paired comparison of models.

Intervals are percentile bootstraps over tasks: with k attempts a task contributes the mean of its
attempts and tasks (not attempts) are resampled, because tasks are the sampled unit. Their memory
does not grow with the task count (see resampled_means). Two models are
compared on the tasks both finished, on each task's score (the mean over its k attempts): the difference
in accuracy with a paired bootstrap interval, and a paired test of it — the exact McNemar test on the
tasks exactly one of them solved when every score is 0 or 1 (k = 1), else the exact sign-flip
permutation test of the per-task differences (k > 1: a task solved in 2 of 3 attempts counts 2/3, not
"unsolved"). A difference is declared only when the test rejects and the interval excludes 0 on the same
side; where they disagree (few tasks: with 5 the sign-flip test cannot go below p = 1/16) the verdict says
so instead of picking one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

N_BOOT = 2000
LEVEL = 0.95
SEED = 20261129
# Up to this many distinct values the resampled means are drawn exactly (multinomial counts).
MAX_LEVELS = 64
# Indices drawn at once by the general resampler: 8 MB of them, and 8 MB of gathered values.
CHUNK_ELEMENTS = 1 << 20
# Up to this many non-zero differences every sign assignment is enumerated (2^16 sums); above it, this
# many random ones are drawn.
EXACT_SIGN_FLIPS = 16
RANDOM_SIGN_FLIPS = 20_000
PairedTest = Literal["mcnemar", "sign-flip"]


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
    # Tasks A scored higher on, and B: with k = 1 the tasks only one of them solved.
    only_a: int
    only_b: int
    p_value: float
    test: PairedTest

    def verdict(self, name_a: str, name_b: str, alpha: float = 0.05) -> str:
        """ "A better" only when the test rejects at ``alpha`` and the interval lies on A's side of 0."""
        rejects = self.p_value < alpha and self.diff != 0
        excludes = self.ci_low > 0 or self.ci_high < 0
        if rejects and excludes:
            return f"{name_a} better" if self.diff > 0 else f"{name_b} better"
        if not rejects and not excludes:
            return "no detectable difference"
        return (
            f"inconclusive: the {self.test} test gives p = {self.p_value:.3g} but the 95% interval "
            f"{'excludes' if excludes else 'includes'} 0 over {self.n} tasks"
        )


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
    return Interval(
        mean=float(data.mean()),
        stderr=float(means.std(ddof=1)) if n_boot > 1 else 0.0,
        ci_low=low,
        ci_high=high,
        n=int(data.size),
    )


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of the discordant counts against 1/2."""
    if only_a + only_b == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def sign_flip_p_value(differences: np.ndarray, seed: int = SEED) -> float:
    """Two-sided p-value of the paired sign-flip permutation test: under "no difference" each task's
    difference is as likely negated, so p is the share of sign assignments whose sum is at least as far
    from 0 as the observed one (exact up to EXACT_SIGN_FLIPS non-zero differences, else RANDOM_SIGN_FLIPS
    random assignments with the observed one counted in)."""
    nonzero = differences[differences != 0]
    if nonzero.size == 0:
        return 1.0
    observed = abs(float(nonzero.sum())) - 1e-9 * nonzero.size
    if nonzero.size <= EXACT_SIGN_FLIPS:
        signs = 1 - 2 * ((np.arange(1 << nonzero.size)[:, None] >> np.arange(nonzero.size)) & 1)
        return float((np.abs(signs @ nonzero) >= observed).mean())
    rng = np.random.default_rng(seed)
    rows = max(1, CHUNK_ELEMENTS // nonzero.size)
    extreme = 0
    for start in range(0, RANDOM_SIGN_FLIPS, rows):
        signs = rng.choice((-1.0, 1.0), size=(min(rows, RANDOM_SIGN_FLIPS - start), nonzero.size))
        extreme += int((np.abs(signs @ nonzero) >= observed).sum())
    return (extreme + 1) / (RANDOM_SIGN_FLIPS + 1)


def paired_comparison(
    a: Mapping[str, float], b: Mapping[str, float], n_boot: int = N_BOOT, seed: int = SEED
) -> Comparison | None:
    """Compare two models' per-task scores (the mean over a task's attempts, 1.0 = every attempt
    solved it) on the tasks both have; None if none."""
    common = sorted(set(a) & set(b))
    if not common:
        return None
    x = np.asarray([a[t] for t in common], dtype=float)
    y = np.asarray([b[t] for t in common], dtype=float)
    differences = x - y
    # Resampling task pairs resamples their differences.
    low, high = _percentiles(resampled_means(differences, n_boot, seed))
    only_a, only_b = int((differences > 0).sum()), int((differences < 0).sum())
    binary = bool(np.isin(x, (0.0, 1.0)).all() and np.isin(y, (0.0, 1.0)).all())
    test: PairedTest = "mcnemar" if binary else "sign-flip"
    p_value = mcnemar_exact(only_a, only_b) if binary else sign_flip_p_value(differences, seed)
    return Comparison(
        n=len(common),
        mean_a=float(x.mean()),
        mean_b=float(y.mean()),
        diff=float(differences.mean()),
        ci_low=low,
        ci_high=high,
        only_a=only_a,
        only_b=only_b,
        p_value=p_value,
        test=test,
    )
