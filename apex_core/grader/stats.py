"""Statistics of timing samples: medians, their uncertainty, and a bootstrap interval for speedups."""

from __future__ import annotations

import math

import numpy as np


def median(samples: list[int]) -> float:
    return float(np.median(np.asarray(samples, dtype=np.float64)))


def relative_standard_error_of_median(samples: list[int]) -> float:
    """≈ 1.2533·σ/√n relative to the median (the asymptotic standard error of a median)."""
    n = len(samples)
    if n < 3:
        return math.inf
    values = np.asarray(samples, dtype=np.float64)
    center = float(np.median(values))
    if center <= 0:
        return math.inf
    return 1.2533 * float(np.std(values, ddof=1)) / math.sqrt(n) / center


def bootstrap_speedup_draws(baseline: list[int], solution: list[int], draws: int, seed: int) -> np.ndarray:
    """Ratios of resampled medians, baseline over solution."""
    rng = np.random.default_rng(seed)
    b = np.asarray(baseline, dtype=np.float64)
    s = np.asarray(solution, dtype=np.float64)
    b_medians = np.median(rng.choice(b, size=(draws, b.size), replace=True), axis=1)
    s_medians = np.median(rng.choice(s, size=(draws, s.size), replace=True), axis=1)
    return b_medians / np.maximum(s_medians, 1e-9)


def interval(draws: np.ndarray) -> tuple[float, float]:
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)


def geometric_mean(values: list[float]) -> float:
    return float(math.exp(sum(math.log(v) for v in values) / len(values)))
