import math

import pytest

from apex_core.score import kernel_score, model_reward, normalized_score, speedup_score


@pytest.mark.parametrize(("speedup", "points"), [(1.2, 140.0), (2.0, 300.0), (3.0, 500.0), (1.0, 100.0)])
def test_speedup_points_match_the_seeds_worked_examples(speedup, points):
    assert speedup_score(speedup) == pytest.approx(points)


@pytest.mark.parametrize(("speedup", "points"), [(0.9, 40.0), (0.5, 0.0), (0.2, 0.0), (0.75, 25.0)])
def test_slowdowns_lose_points_and_never_go_negative(speedup, points):
    assert speedup_score(speedup) == pytest.approx(points)


def test_a_correct_2x_kernel_scores_the_full_420():
    result = kernel_score(compiled=True, correct=True, speedup=2.0)
    assert result.total == pytest.approx(420.0)
    assert result.normalized == pytest.approx(1.0)


def test_speedup_earns_nothing_unless_the_solution_is_correct():
    assert kernel_score(compiled=True, correct=False, speedup=5.0).total == 20.0
    assert kernel_score(compiled=False, correct=False, speedup=5.0).total == 0.0


def test_normalized_score_is_capped_at_one():
    assert normalized_score(1000.0) == 1.0
    assert normalized_score(210.0) == pytest.approx(0.5)


def test_model_reward_mixes_kernel_score_and_throughput_gain():
    assert model_reward(1.0, 100.0, 120.0) == pytest.approx(0.7 + 0.3 * 0.2)
    assert model_reward(0.5, 100.0, 90.0) == pytest.approx(0.35 - 0.03)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_impossible_speedups_are_rejected(bad):
    with pytest.raises(ValueError):
        speedup_score(bad)


def test_model_reward_rejects_a_zero_baseline_throughput():
    with pytest.raises(ValueError):
        model_reward(0.5, 0.0, 10.0)
