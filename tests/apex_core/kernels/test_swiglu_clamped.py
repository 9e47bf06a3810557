import math

import torch

from apex_core.kernels import swiglu_clamped
from apex_core.kernels.roofline import dtype_bytes
from apex_core.tasks import get_task

ALPHA, LIMIT = 1.702, 7.0


def _naive(gate: float, linear: float) -> float:
    """openai/gpt-oss's swiglu for one (gate, linear) pair, in float64."""
    gate = min(gate, LIMIT)
    linear = max(-LIMIT, min(linear, LIMIT))
    return gate / (1.0 + math.exp(-ALPHA * gate)) * (linear + 1.0)


def test_the_reference_matches_a_float64_loop_over_interleaved_pairs():
    x, alpha, limit = swiglu_clamped.make_inputs_torch(
        {"tokens": 2, "intermediate": 24}, "bfloat16", 3, "cpu", {"alpha": ALPHA, "limit": LIMIT, "rows_per_token": 4}
    )
    got = swiglu_clamped.reference_torch(x, alpha, limit)
    assert got.shape == (8, 24) and got.dtype == torch.bfloat16
    for row in range(8):
        for col in range(24):
            expected = _naive(float(x[row, 2 * col]), float(x[row, 2 * col + 1]))
            assert abs(float(got[row, col]) - expected) <= 1e-2 + 1.6e-2 * abs(expected)


def test_the_gate_is_clamped_only_from_above_and_the_linear_value_from_both_sides():
    x = torch.tensor([[20.0, 0.0, -20.0, 0.0, 1.0, 30.0, 1.0, -30.0]])
    got = swiglu_clamped.reference_torch(x, ALPHA, LIMIT)[0]
    torch.testing.assert_close(got[0], torch.tensor(_naive(7.0, 0.0), dtype=torch.float32))  # gate 20 acts as 7
    assert abs(float(got[1])) < 1e-12  # gate -20 is not clamped: sigmoid(-34) vanishes
    torch.testing.assert_close(got[2], torch.tensor(_naive(1.0, 7.0), dtype=torch.float32))
    torch.testing.assert_close(got[3], torch.tensor(_naive(1.0, -7.0), dtype=torch.float32))


def test_inputs_are_reproducible_and_some_values_reach_past_the_clamp():
    params = {"alpha": ALPHA, "limit": LIMIT, "rows_per_token": 4}
    first = swiglu_clamped.make_inputs_torch({"tokens": 64, "intermediate": 2880}, "bfloat16", 1, "cpu", params)
    again = swiglu_clamped.make_inputs_torch({"tokens": 64, "intermediate": 2880}, "bfloat16", 1, "cpu", params)
    assert torch.equal(first[0], again[0]) and first[1:] == (ALPHA, LIMIT)
    beyond = (first[0].float().abs() > LIMIT).float().mean().item()
    assert 0.005 < beyond < 0.05


def test_the_task_takes_alpha_limit_and_top_k_from_the_gpt_oss_config():
    task = get_task("gpt-oss-20b__swiglu_clamped")
    model = task.architecture
    assert (task.params["alpha"], task.params["limit"]) == (model.extra["swiglu_alpha"], model.extra["swiglu_limit"]) == (ALPHA, LIMIT)
    assert task.params["rows_per_token"] == model.experts_per_token == 4
    assert all(s["intermediate"] == model.moe_intermediate_size for s in task.test_shapes)


def test_the_roofline_reads_both_columns_of_each_pair_and_writes_one_value():
    model = swiglu_clamped.roofline({"tokens": 8192, "intermediate": 2880}, "bfloat16", {"rows_per_token": 4})
    assert model.bytes_moved == 3 * 8192 * 4 * 2880 * dtype_bytes("bfloat16")
