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


def test_a_short_call_offset_by_its_process_still_gets_an_interval_containing_one():
    # The same kernel in two processes: the candidate's median 1.5% slower, as measured on an H200.
    baseline = _stepped(6000, 60, 600, 4)
    solution = _stepped(6090, 60, 600, 5)
    within_one_pair = stats.interval(stats.bootstrap_speedup_draws(baseline, solution, 1000, seed=0))
    assert within_one_pair[1] < 1.0  # resampling one pair of processes cannot see the offset
    draws = stats.with_between_process_spread(stats.bootstrap_speedup_draws(baseline, solution, 1000, seed=0), 6000.0, seed=0)
    low, high = stats.interval(draws)
    assert low <= 1.0 <= high


def test_long_calls_are_widened_less_than_short_ones():
    draws = np.ones(4000)
    short = stats.interval(stats.with_between_process_spread(draws, 6_000.0, seed=1))
    long = stats.interval(stats.with_between_process_spread(draws, 40_000.0, seed=1))
    assert short[1] - short[0] == pytest.approx(2 * 1.96 * 0.019, rel=0.1)
    assert long[1] - long[0] == pytest.approx(2 * 1.96 * 0.0045, rel=0.1)


def test_a_real_gain_stays_outside_the_widened_interval():
    baseline = _stepped(6600, 60, 600, 6)
    solution = _stepped(6000, 60, 600, 7)  # 10% faster
    draws = stats.with_between_process_spread(stats.bootstrap_speedup_draws(baseline, solution, 1000, seed=2), 6600.0, seed=2)
    assert stats.interval(draws)[0] > 1.04


def test_the_widening_is_the_same_for_the_same_seed():
    draws = np.full(100, 1.1)
    assert np.array_equal(stats.with_between_process_spread(draws, 6000.0, seed=3), stats.with_between_process_spread(draws, 6000.0, seed=3))


def test_a_few_far_outliers_do_not_make_a_stable_median_look_uncertain():
    rng = np.random.default_rng(3)
    samples = [int(v) for v in rng.normal(6000, 30, size=300)] + [90_000] * 6
    assert stats.relative_standard_error_of_median(samples) < 0.001


def test_a_wide_distribution_still_needs_more_samples():
    rng = np.random.default_rng(4)
    few = [int(v) for v in rng.normal(6000, 900, size=40)]
    assert stats.relative_standard_error_of_median(few) > 0.01
    assert stats.relative_standard_error_of_median(few * 25) < stats.relative_standard_error_of_median(few) / 3


def test_host_timed_samples_keep_the_standard_deviation_so_bursts_of_load_keep_the_rounds_going():
    rng = np.random.default_rng(5)
    samples = [int(v) for v in rng.normal(6000, 30, size=300)] + [90_000] * 6
    assert stats.relative_standard_error_of_median(samples, robust=False) > 0.005


def test_a_corrected_speedup_moves_by_the_shift_and_keeps_a_residual_width():
    rng = np.random.default_rng(5)
    baseline = list(rng.normal(6600, 30, 200).round().astype(int))
    solution = list(rng.normal(6600, 30, 200).round().astype(int))
    draws = stats.bootstrap_speedup_draws(baseline, solution, 2000, seed=0)
    shift = np.full(2000, 1.02)  # the solution's worker ran our baseline 2% slower
    corrected = stats.with_process_shift(draws, shift)
    assert np.median(corrected) == pytest.approx(1.02 * np.median(draws), rel=2e-3)
    low, high = stats.interval(corrected)
    raw_low, raw_high = stats.interval(draws)
    assert high - low > raw_high - raw_low  # the residual spread is added, never removed


def test_the_median_interval_of_a_few_values_is_their_range_with_its_true_confidence():
    assert stats.median_interval([0.961, 0.895]) == (0.895, 0.961, 0.5)
    low, high, confidence = stats.median_interval([1.30, 1.32, 1.29, 1.31, 1.33])
    assert (low, high, confidence) == (1.29, 1.33, pytest.approx(0.9375))


def test_the_median_interval_narrows_to_inner_order_statistics_as_values_accumulate():
    assert stats.median_interval([6.0, 1.0, 5.0, 2.0, 4.0, 3.0])[:2] == (1.0, 6.0)
    assert stats.median_interval([float(v) for v in range(1, 10)])[:2] == (2.0, 8.0)
    low, high, confidence = stats.median_interval([float(v) for v in range(1, 21)])
    assert (low, high) == (6.0, 15.0) and 0.95 < confidence < 0.96  # the textbook table's j = 6 for n = 20


def test_the_median_interval_covers_the_median_as_often_as_it_claims():
    rng = np.random.default_rng(0)
    for n in (2, 4, 6, 11):
        hits, claimed = 0, stats.median_interval([0.0] * n)[2]
        for _ in range(4000):
            low, high, _ = stats.median_interval(list(rng.lognormal(0.0, 0.5, n)))
            hits += low <= 1.0 <= high  # the lognormal's median is 1.0
        assert abs(hits / 4000 - claimed) < 0.03, (n, hits / 4000, claimed)


def test_six_values_are_the_fewest_whose_range_is_a_95_percent_interval():
    assert stats.pairs_for_confidence(0.95) == 6 and stats.pairs_for_confidence(0.99) == 8
