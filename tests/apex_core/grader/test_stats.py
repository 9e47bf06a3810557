import numpy as np
import pytest

from apex_core.grader import stats


def _stepped(center: float, spread: float, n: int, seed: int, step: float = 32.0) -> list[int]:
    """Samples as a stepped GPU timer reports them: a continuous time rounded to the step, ±1 ns jitter."""
    rng = np.random.default_rng(seed)
    return [int(v) for v in np.round(rng.normal(center, spread, n) / step) * step + rng.integers(-1, 2, n)]


def test_continuous_samples_have_their_ordinary_median():
    values = list(np.random.default_rng(0).normal(100.0, 5.0, 2001))
    assert stats.timer_step(np.asarray(values)) is None
    assert stats.median(values) == pytest.approx(float(np.median(values)))


def test_the_timer_step_is_found_despite_rounding_jitter():
    assert stats.timer_step(np.asarray(_stepped(4250, 40, 600, 1), dtype=float)) == pytest.approx(32.0, abs=1.0)


def test_the_median_of_stepped_samples_is_repeatable_to_a_fraction_of_a_step():
    grouped = [stats.median(_stepped(4245, 40, 600, seed)) for seed in range(8)]
    assert max(grouped) - min(grouped) < 12


def test_a_stepped_median_tracks_a_shift_smaller_than_one_step_where_the_plain_median_cannot():
    low = [_stepped(4240, 40, 600, s) for s in range(6)]
    high = [_stepped(4250, 40, 600, s + 100) for s in range(6)]
    shift = np.mean([stats.median(h) for h in high]) - np.mean([stats.median(x) for x in low])
    assert 4 < shift < 16
    plain_shift = np.mean([np.median(h) for h in high]) - np.mean([np.median(x) for x in low])
    assert plain_shift == 0 or abs(plain_shift) >= 15  # the plain median sits on whole steps


def test_the_bootstrap_interval_of_identical_stepped_samples_contains_one():
    samples = _stepped(4250, 40, 600, 3)
    low, high = stats.interval(stats.bootstrap_speedup_draws(samples, samples, 1000, seed=0))
    assert low <= 1.0 <= high and high - low < 0.01


def test_tiny_inputs_have_plain_medians():
    assert stats.median([5]) == 5.0 and stats.median([1, 2]) == 1.5 and stats.median([7] * 10) == 7.0
