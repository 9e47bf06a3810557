"""Statistics of timing samples: medians, their uncertainty, a bootstrap interval for speedups,
and an exact interval for the median of a few paired ratios.

GPU event timestamps come in steps (about 32 ns on the H200), so the samples of a 4 us kernel take
a handful of values and a plain median jumps by a whole step (~0.8%) from one grading to the next.
When the samples are quantized like that, the median is the grouped-data median: the step holding
the middle sample, entered in proportion to how many samples lie below it and on it. That is still
the median (of the underlying continuous time), and it moves smoothly with the shares of samples
on each step. Samples that are not quantized (CPU perf_counter_ns) use the ordinary median.
"""

from __future__ import annotations

import math

import numpy as np

QUANTIZED_FRACTION = 0.25
"""Samples with at most this share of distinct values are treated as quantized."""
MIN_STEP_NS = 4.0
"""Differences below this between distinct values are rounding jitter, not the timer's step."""


def timer_step(values: np.ndarray) -> float | None:
    """The timer's step if the samples are quantized, else None."""
    distinct = np.unique(values)
    if distinct.size < 2 or distinct.size > QUANTIZED_FRACTION * values.size:
        return None
    # Values a few ns apart are one timer step seen through rounding jitter: merge them into
    # clusters and take the typical distance between neighbouring clusters.
    starts = np.concatenate(([0], np.nonzero(np.diff(distinct) >= MIN_STEP_NS)[0] + 1))
    centers = np.array([chunk.mean() for chunk in np.split(distinct, starts[1:])])
    if centers.size < 2:
        return None
    return float(np.median(np.diff(centers)))


def _grouped_median(steps: np.ndarray) -> np.ndarray:
    """Grouped-data median of integer step indices, per row: the middle step's lower edge plus
    the fraction of that step needed to reach half of the samples."""
    n = steps.shape[-1]
    middle = np.sort(steps, axis=-1)[..., (n - 1) // 2]
    below = (steps < middle[..., None]).sum(axis=-1)
    on = (steps == middle[..., None]).sum(axis=-1)
    return middle - 0.5 + (n / 2.0 - below) / on


def _on_steps(values: np.ndarray) -> tuple[float, float, np.ndarray] | None:
    """(origin, step, step index of each sample) when the samples are stepped, else None."""
    step = timer_step(values)
    if step is None:
        return None
    origin = float(values.min())
    return origin, step, np.round((values - origin) / step)


def median(samples: list[int]) -> float:
    """The headline time of a list of samples (see the module docstring)."""
    values = np.asarray(samples, dtype=np.float64)
    stepped = _on_steps(values)
    if stepped is None:
        return float(np.median(values))
    origin, step, steps = stepped
    return float(origin + _grouped_median(steps) * step)


def relative_standard_error_of_median(samples: list[int], robust: bool = True) -> float:
    """The median's standard error relative to it.

    ``robust`` (GPU event samples): from order statistics. The distribution-free 95% interval of a
    median runs from the (n/2 - 0.98·√n)-th to the (n/2 + 0.98·√n)-th sample, and half its width
    divided by 1.96 is one standard error. A few samples stretched by the host (preempted between
    the spin and the launch) say nothing about the kernel, and this ignores them; by 1.2533·σ/√n
    they held small shapes to their whole time budget (docs/grader.md, 'Measured reasons'). On a stepped timer it measures the
    median's spread in whole steps.

    Otherwise (CPU samples, timed by the host itself): 1.2533·σ/√n. There the host's load is the
    noise, and it comes in bursts that stretch whole rounds; σ sees them and keeps the rounds
    alternating longer, where the order statistics stopped after 6 rounds and let one burst decide
    (docs/grader.md, 'Measured reasons').
    """
    n = len(samples)
    if n < 3:
        return math.inf
    ordered = np.sort(np.asarray(samples, dtype=np.float64))
    center = float(np.median(ordered))
    if center <= 0:
        return math.inf
    if not robust:
        return 1.2533 * float(np.std(ordered, ddof=1)) / math.sqrt(n) / center
    half_width = 0.98 * math.sqrt(n)
    low = max(0, math.floor(n / 2 - half_width))
    high = min(n - 1, math.ceil(n / 2 + half_width))
    return float(ordered[high] - ordered[low]) / (2 * 1.96) / center


def bootstrap_speedup_draws(baseline: list[int], solution: list[int], draws: int, seed: int) -> np.ndarray:
    """Ratios of resampled medians, baseline over solution."""
    rng = np.random.default_rng(seed)
    b = np.asarray(baseline, dtype=np.float64)
    s = np.asarray(solution, dtype=np.float64)
    b_medians = _resampled_medians(b, rng.integers(0, b.size, size=(draws, b.size)))
    s_medians = _resampled_medians(s, rng.integers(0, s.size, size=(draws, s.size)))
    return b_medians / np.maximum(s_medians, 1e-9)


SHORT_CALL_NS = 20_000
"""Calls shorter than this are dominated by launch latency, where processes differ most."""
BETWEEN_PROCESS_SPREAD_SHORT = 0.019
BETWEEN_PROCESS_SPREAD_LONG = 0.0045
"""Standard deviation of log(speedup) between worker processes, for calls shorter and longer than
SHORT_CALL_NS: the baseline graded against itself on an H200 (docs/grader.md, 'Measured reasons')."""


def with_between_process_spread(draws: np.ndarray, baseline_median_ns: float, seed: int = 0) -> np.ndarray:
    """Bootstrap draws widened by the spread between worker processes.

    Baseline and solution are timed in two processes, and a process shifts a short call's median
    by a percent or two, in a way that resampling one pair of processes' samples cannot see:
    without this term the baseline graded against itself got intervals that excluded 1.0 in most
    gradings, and was credited 0.98x. Each draw is multiplied by a log-normal factor with the
    spread measured for calls of that length.

    The factor belongs to the pair of processes, not to a shape: in the baseline-against-itself
    runs of docs/benchmarks.md the speedups at (256, 4096) and (4, 4096) of one grading moved
    together. So every shape of a grading gets the same normal variates (the same ``seed``), scaled
    by its own spread; independent ones would average out over the shapes and leave the overall
    interval too narrow (docs/grader.md, 'Measured reasons'). Shapes calibrated in the solution's own worker do not take this
    term (``calibration.calibrate``).
    """
    spread = BETWEEN_PROCESS_SPREAD_SHORT if baseline_median_ns < SHORT_CALL_NS else BETWEEN_PROCESS_SPREAD_LONG
    rng = np.random.default_rng([seed, 1])
    return draws * np.exp(rng.normal(0.0, spread, size=draws.shape))


CALIBRATED_RESIDUAL_SPREAD = 0.012
"""Standard deviation of log(speedup) left after the correction by the solution worker's measured
shift (``calibration.calibrate``): a process's shift is not quite the same for two different
kernels, so it is larger than what the baseline against itself leaves (docs/grader.md, 'Measured reasons')."""


def with_process_shift(draws: np.ndarray, shift_draws: np.ndarray, seed: int = 0) -> np.ndarray:
    """Speedup draws corrected by draws of the solution worker's shift, and widened by what that
    correction leaves (the same normal variates for every shape of a grading, as in
    ``with_between_process_spread``)."""
    rng = np.random.default_rng([seed, 2])
    return draws * shift_draws * np.exp(rng.normal(0.0, CALIBRATED_RESIDUAL_SPREAD, size=draws.shape))


def _resampled_medians(values: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """Medians of resamples (rows of indices into ``values``), on the step of ``values``."""
    stepped = _on_steps(values)
    if stepped is None:
        return np.median(values[picks], axis=1)
    origin, step, steps = stepped
    return origin + _grouped_median(steps[picks]) * step


def interval(draws: np.ndarray) -> tuple[float, float]:
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)


def geometric_mean(values: list[float]) -> float:
    return float(math.exp(sum(math.log(v) for v in values) / len(values)))


def order_statistic_confidence(n: int, j: int) -> float:
    """The chance that the median of n independent values lies between their j-th smallest and
    j-th largest: 1 - 2 P(Binomial(n, 1/2) < j), whatever their distribution."""
    return 1.0 - 2.0 * sum(math.comb(n, i) for i in range(j)) / 2.0**n


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """A distribution-free interval for the median of ``values``, and the confidence it really has.

    Order statistics (``order_statistic_confidence``): the narrowest pair of them, the widest j,
    that still reaches ``level`` is used. Below 6 values no j reaches 95%: the
    interval is then the range, with its true confidence (50% for 2 values, 94% for 5), which the
    caller must not call 95%. Why not a bootstrap of the median: with a handful of values its
    percentile interval is the range too, but claims 95% (two pairs both below 1.0 happen half the time
    when nothing changed).
    """
    if not values:
        raise ValueError("median_interval needs at least one value")
    ordered = sorted(values)
    n = len(ordered)
    j = 1
    while j + 1 <= (n + 1) // 2 and order_statistic_confidence(n, j + 1) >= level:
        j += 1
    return ordered[j - 1], ordered[n - j], order_statistic_confidence(n, j)


T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
"""Student's t, 97.5th percentile, by degrees of freedom (any t table; e.g. NIST/SEMATECH
e-Handbook of Statistical Methods, 1.3.6.7.2): the two-sided 95% intervals of 2 to 11 values."""


def log_t_interval(ratios: list[float]) -> tuple[float, float]:
    """95% interval of the geometric mean of 2 to 11 ratios: Student's t on their logarithms.

    For the few pairs an order-statistic interval cannot cover at 95%: it assumes the log-ratios
    are normal, and in exchange the interval widens with the pairs' disagreement (t = 12.7 for two
    pairs), so two pairs 1.19x and 1.21x apart are a clear speedup and 0.96x and 0.90x are not a
    slowdown.
    """
    n = len(ratios)
    if n - 1 not in T_975:
        raise ValueError(f"log_t_interval takes 2 to {max(T_975) + 1} ratios, not {n}")
    logs = np.log(np.asarray(ratios, dtype=np.float64))
    half = T_975[n - 1] * float(np.std(logs, ddof=1)) / math.sqrt(n)
    center = float(np.mean(logs))
    return math.exp(center - half), math.exp(center + half)


def pairs_for_confidence(level: float = 0.95) -> int:
    """The fewest values whose range is a ``level`` interval for the median (6 for 95%)."""
    n = 1
    while order_statistic_confidence(n, 1) < level:
        n += 1
    return n
