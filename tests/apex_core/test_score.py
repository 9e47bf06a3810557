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


def test_model_reward_mixes_kernel_score_and_the_kernel_gain():
    assert model_reward(1.0, 1.2) == pytest.approx(0.7 + 0.3 * 0.2)
    assert model_reward(0.5, 0.9) == pytest.approx(0.35 - 0.03)


def test_the_throughput_term_is_clipped_so_no_forged_gain_dominates():
    """A forged 13,000x (issue 28) once gave a model reward in the thousands."""
    assert model_reward(1.0, 13_000.0) == pytest.approx(0.7 + 0.3 * 1.0)
    assert model_reward(0.0, 0.01) == pytest.approx(0.3 * -0.5)


def test_an_uncredited_gain_earns_no_throughput_term():
    assert model_reward(0.8, None) == pytest.approx(0.7 * 0.8)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_impossible_speedups_are_rejected(bad):
    with pytest.raises(ValueError):
        speedup_score(bad)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_model_reward_rejects_an_impossible_kernel_gain(bad):
    with pytest.raises(ValueError):
        model_reward(0.5, bad)


@pytest.mark.parametrize(
    ("speedup", "reward"), [(1.0, 0.5), (2.0, 1.0), (8.0, 2.0), (1000.0, 2.0), (0.5, 0.0), (0.01, 0.0), (None, 0.5)]
)
def test_the_rl_reward_of_a_correct_solution_is_clipped_log2_speedup(speedup, reward):
    from apex_core.score import rl_reward

    assert rl_reward("ok", True, speedup) == pytest.approx(reward)


@pytest.mark.parametrize(
    ("outcome", "correct", "reward"),
    [
        ("compile_error", False, -1.0),
        ("wrong_answer", False, -0.5),
        ("timeout", False, -0.8),
        ("crash", False, -0.8),
        ("runtime_error", False, -0.8),
        ("tampering", True, -1.5),
        ("tampering", False, -1.5),
        ("infra_error", False, None),
    ],
)
def test_failures_get_fixed_penalties_and_infra_errors_no_reward(outcome, correct, reward):
    from apex_core.score import rl_reward

    assert rl_reward(outcome, correct, 3.0) == reward


def test_any_failure_scores_below_any_correct_solution():
    from apex_core.score import rl_reward

    worst_correct = rl_reward("ok", True, 0.001)
    assert all(rl_reward(o, False, None) < worst_correct for o in ("compile_error", "wrong_answer", "crash", "tampering"))


def test_a_correct_answer_not_made_by_the_solutions_own_kernel_earns_nothing():
    from apex_core.score import rl_reward

    assert rl_reward("ok", True, 1.5, own_work=False) == 0.0


def test_tampering_scores_nothing_even_when_it_compiled_ran_correctly_and_was_fast():
    caught = kernel_score(compiled=True, correct=True, speedup=3.0, tampering=True)
    assert (caught.total, caught.normalized) == (0.0, 0.0)
    assert caught.total < kernel_score(compiled=False, correct=False, speedup=None).total + 1e-9


@pytest.mark.parametrize("correct", [True, False])
@pytest.mark.parametrize("speedup", [None, 0.5, 1.0, 8.0])
def test_tampering_earns_a_lower_rl_reward_than_every_other_outcome(correct, speedup):
    from apex_core.grader.result import Outcome
    from apex_core.score import rl_reward

    caught = rl_reward("tampering", correct, speedup)
    others = [rl_reward(o.value, c, s) for o in Outcome if o.value not in ("tampering", "infra_error")
              for c in (True, False) for s in (None, 0.001, 1.0)]
    others.append(rl_reward("ok", True, 0.001, own_work=False))
    assert all(caught < other for other in others)
