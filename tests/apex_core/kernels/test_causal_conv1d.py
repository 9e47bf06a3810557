import torch

from apex_core.kernels import causal_conv1d
from apex_core.kernels.roofline import dtype_bytes
from apex_core.tasks import get_task

PARAMS = {"kernel_width": 4}


def test_the_reference_matches_a_float64_grouped_conv1d_with_left_padding():
    x, w = causal_conv1d.make_inputs_torch({"batch": 2, "seqlen": 9, "dim": 6}, "float32", 0, "cpu", PARAMS)
    channels_first = x.to(torch.float64).transpose(1, 2)  # (batch, dim, seqlen)
    conv = torch.nn.functional.conv1d(channels_first, w.to(torch.float64)[:, None, :], padding=3, groups=6)[..., :9]
    expected = torch.nn.functional.silu(conv).transpose(1, 2)
    torch.testing.assert_close(causal_conv1d.reference_torch(x, w).double(), expected, atol=1e-6, rtol=1e-6)


def test_the_convolution_is_causal_and_the_first_token_sees_only_the_last_tap():
    x, w = causal_conv1d.make_inputs_torch({"batch": 1, "seqlen": 8, "dim": 4}, "float32", 1, "cpu", PARAMS)
    later = x.clone()
    later[:, 5:] += 1.0
    before, after = causal_conv1d.reference_torch(x, w), causal_conv1d.reference_torch(later, w)
    assert torch.equal(before[:, :5], after[:, :5]) and not torch.equal(before[:, 5:], after[:, 5:])
    torch.testing.assert_close(before[:, 0], torch.nn.functional.silu(x[:, 0] * w[:, 3]))


def test_inputs_are_reproducible_from_the_seed_and_the_output_has_signal():
    task = get_task("qwen3-5-27b__causal_conv1d")
    shape = {"batch": 1, "seqlen": 3, "dim": 64}
    first = causal_conv1d.make_inputs_torch(shape, "bfloat16", 7, "cpu", task.params)
    again = causal_conv1d.make_inputs_torch(shape, "bfloat16", 7, "cpu", task.params)
    other = causal_conv1d.make_inputs_torch(shape, "bfloat16", 8, "cpu", task.params)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1]) and not torch.equal(first[0], other[0])
    assert first[0].dtype == torch.bfloat16 and first[1].shape == (64, 4)
    assert causal_conv1d.reference_torch(*first).abs().max() > 10 * task.tolerance.atol


def test_the_channels_are_qwen35_q_k_and_v_projections():
    task = get_task("qwen3-5-27b__causal_conv1d")
    extra = task.architecture.extra
    dim = 2 * extra["linear_num_key_heads"] * extra["linear_key_head_dim"] + extra["linear_num_value_heads"] * extra["linear_value_head_dim"]
    assert all(shape["dim"] == dim == 10240 for shape in task.test_shapes + task.hidden_shapes + task.benchmark_shapes)
    assert task.params["kernel_width"] == 4


def test_the_roofline_reads_x_and_the_weights_once_and_writes_out_once():
    model = causal_conv1d.roofline({"batch": 1, "seqlen": 16384, "dim": 10240}, "bfloat16", PARAMS)
    assert model.bytes_moved == (2 * 16384 * 10240 + 10240 * 4) * dtype_bytes("bfloat16")
    assert model.flops == 11 * 16384 * 10240
