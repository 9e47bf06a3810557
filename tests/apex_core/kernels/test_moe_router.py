import math

import pytest
import torch

from apex_core.kernels.moe_router import grouped_topk, softmax_topk
from apex_core.tasks import get_task

DEEPSEEK = {"top_k": 8, "n_group": 8, "topk_group": 4, "routed_scaling_factor": 2.5}


def _softmax_topk_by_hand(row: list[float], top_k: int) -> tuple[list[float], list[int]]:
    order = sorted(range(len(row)), key=lambda e: -row[e])[:top_k]
    exps = [math.exp(row[e] - row[order[0]]) for e in order]
    return [v / sum(exps) for v in exps], order


def _grouped_topk_by_hand(row: list[float], bias: list[float], top_k: int, n_group: int, topk_group: int, scale: float):
    scores = [1.0 / (1.0 + math.exp(-v)) for v in row]
    choice = [s + b for s, b in zip(scores, bias)]
    size = len(row) // n_group
    group_score = [sum(sorted(choice[g * size : (g + 1) * size])[-2:]) for g in range(n_group)]
    kept = sorted(range(n_group), key=lambda g: -group_score[g])[:topk_group]
    candidates = [e for g in kept for e in range(g * size, (g + 1) * size)]
    picked = sorted(candidates, key=lambda e: -choice[e])[:top_k]
    total = sum(scores[e] for e in picked)
    return [scores[e] / total * scale for e in picked], picked


def test_gpt_oss_routing_is_a_softmax_over_the_top_k_logits_best_first():
    logits, top_k = softmax_topk.make_inputs_torch({"tokens": 6, "experts": 32}, "float32", 3, "cpu", {"top_k": 4})
    weights, ids = softmax_topk.reference_torch(logits, top_k)
    assert weights.dtype == torch.float32 and ids.dtype == torch.int32 and ids.shape == (6, 4)
    for t in range(6):
        expected_weights, expected_ids = _softmax_topk_by_hand(logits[t].double().tolist(), top_k)
        assert ids[t].tolist() == expected_ids
        torch.testing.assert_close(weights[t].double(), torch.tensor(expected_weights, dtype=torch.float64), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(6))


def test_deepseek_routing_matches_a_per_token_walk_through_its_rules():
    args = grouped_topk.make_inputs_torch({"tokens": 5, "experts": 256}, "float32", 4, "cpu", DEEPSEEK)
    weights, ids = grouped_topk.reference_torch(*args)
    logits, bias = args[0], args[1]
    for t in range(5):
        expected_weights, expected_ids = _grouped_topk_by_hand(logits[t].double().tolist(), bias.double().tolist(), 8, 8, 4, 2.5)
        assert ids[t].tolist() == expected_ids
        torch.testing.assert_close(weights[t].double(), torch.tensor(expected_weights, dtype=torch.float64), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(weights.sum(dim=-1), torch.full((5,), 2.5))


def test_an_expert_in_a_dropped_group_is_never_picked_even_with_the_best_score():
    logits = torch.full((1, 256), 2.0)
    logits[0, :32] = -10.0
    logits[0, 0] = 10.0  # the best single expert, but group 0's two best sum to about 1.0 < 1.76
    _, ids = grouped_topk.reference_torch(logits, torch.zeros(256), 8, 8, 4, 2.5)
    assert 0 not in ids[0].tolist()


def test_the_bias_steers_the_choice_but_not_the_weights():
    logits = torch.linspace(-3.0, 3.0, 256).reshape(1, 256)
    bias = torch.zeros(256)
    bias[0] = 2.0  # the worst logit becomes the best choice
    weights, ids = grouped_topk.reference_torch(logits, bias, 8, 8, 4, 2.5)
    assert ids[0, 0].item() == 0
    scores = torch.sigmoid(logits[0, ids[0].long()])
    torch.testing.assert_close(weights[0], scores / scores.sum() * 2.5)


@pytest.mark.parametrize(
    ("module", "shape", "params"),
    [
        (softmax_topk, {"tokens": 4096, "experts": 32}, {"top_k": 4}),
        (grouped_topk, {"tokens": 1024, "experts": 256}, DEEPSEEK),
    ],
)
def test_inputs_are_reproducible_and_keep_every_decision_clear_of_ties(module, shape, params):
    first = module.make_inputs_torch(shape, "float32", 11, "cpu", params)
    again = module.make_inputs_torch(shape, "float32", 11, "cpu", params)
    other = module.make_inputs_torch(shape, "float32", 12, "cpu", params)
    assert torch.equal(first[0], again[0]) and not torch.equal(first[0], other[0])
    assert first[0].dtype == torch.float32
    if module is softmax_topk:
        assert not module._near_tie_rows(first[0], 4).any()
    else:
        assert not module._near_tie_rows(first[0], first[1], 8, 8, 4).any()


def test_deepseek_inputs_carry_a_positive_bias_near_five_and_spread_weights():
    logits, bias, *_ = grouped_topk.make_inputs_torch({"tokens": 512, "experts": 256}, "float32", 1, "cpu", DEEPSEEK)
    assert 4.5 < bias.min() and bias.max() < 5.5
    weights, _ = grouped_topk.reference_torch(logits, bias, 8, 8, 4, 2.5)
    assert weights.max() - weights.min() > 0.1  # weights differ, so dropping them would be caught


def test_the_rooflines_count_the_logits_read_and_the_pairs_written():
    gpt = softmax_topk.roofline({"tokens": 1024, "experts": 32}, "float32", {"top_k": 4})
    assert gpt.bytes_moved == 1024 * 32 * 4 + 1024 * 4 * 8
    deepseek = grouped_topk.roofline({"tokens": 1024, "experts": 256}, "float32", DEEPSEEK)
    assert deepseek.bytes_moved == 1024 * 256 * 4 + 256 * 4 + 1024 * 8 * 8


def test_the_router_tasks_take_their_constants_from_the_registry():
    deepseek = get_task("deepseek-r1__moe_router")
    assert deepseek.params == {"top_k": 8, "n_group": 8, "topk_group": 4, "routed_scaling_factor": 2.5}
    assert all(shape["experts"] == 256 for shape in deepseek.test_shapes)
    gpt = get_task("gpt-oss-20b__moe_router")
    assert gpt.params == {"top_k": 4} and gpt.test_shapes[0]["experts"] == 32
    assert gpt.tolerance_for("int32").atol == 0.0  # ids are compared exactly
