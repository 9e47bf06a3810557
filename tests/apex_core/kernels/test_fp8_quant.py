import pytest
import torch

from apex_core.grader.compare import compare_outputs
from apex_core.kernels import fp8_quant
from apex_core.kernels.roofline import dtype_bytes
from apex_core.tasks import get_task

PER_TOKEN_TASKS = [
    "llama-3-1-8b-instruct__per_token_quant_fp8",
    "qwen3-5-27b__per_token_quant_fp8",
    "gpt-oss-20b__per_token_quant_fp8",
]
GROUP_TASK = "deepseek-r1__per_token_group_quant_fp8"


def _x(tokens=4, hidden=512, seed=1):
    return fp8_quant.make_inputs_per_token({"tokens": tokens, "hidden": hidden}, "bfloat16", seed, "cpu", {})[0]


def test_each_row_is_scaled_so_that_its_largest_value_becomes_448():
    x = _x()
    q, scales = fp8_quant.reference_per_token(x)
    assert q.dtype == torch.float8_e4m3fn and scales.dtype == torch.float32 and scales.shape == (4, 1)
    absmax = x.double().abs().amax(dim=1, keepdim=True)
    torch.testing.assert_close(scales.double(), absmax / 448.0, rtol=1e-6, atol=0)
    assert torch.equal(q.float().abs().amax(dim=1), torch.full((4,), 448.0))


def test_dequantized_values_are_within_half_an_e4m3_step_of_the_input():
    x = _x()
    q, scales = fp8_quant.reference_per_token(x)
    back = q.double() * scales.double()
    # Half a step is 2^-4 of a normal value; below e4m3's smallest normal (2^-6) the step is 2^-9.
    allowed = x.double().abs() * 2.0**-4 + scales.double() * 2.0**-10 + 1e-12
    assert torch.all((back - x.double()).abs() <= allowed)


def test_group_scales_are_the_per_token_scales_of_each_128_wide_slice():
    x = _x(hidden=384)
    q, scales = fp8_quant.reference_per_token_group(x, 128)
    assert q.shape == x.shape and scales.shape == (4, 3)
    for g in range(3):
        q_slice, s_slice = fp8_quant.reference_per_token(x[:, 128 * g : 128 * (g + 1)])
        assert torch.equal(scales[:, g : g + 1], s_slice)
        assert torch.equal(q[:, 128 * g : 128 * (g + 1)].view(torch.uint8), q_slice.view(torch.uint8))


def test_an_all_zero_row_gets_the_floored_scale_and_zeros_not_nans():
    x = torch.zeros(2, 256, dtype=torch.bfloat16)
    x[1, 5] = 3.0
    q, scales = fp8_quant.reference_per_token(x)
    assert scales[0, 0].item() == pytest.approx(1e-10 / 448.0, rel=1e-6)
    assert not torch.isnan(q.float()).any() and torch.all(q[0].float() == 0)
    q_group, group_scales = fp8_quant.reference_per_token_group(x, 128)
    assert not torch.isnan(q_group.float()).any() and group_scales[1, 0] == pytest.approx(3.0 / 448.0)


@pytest.mark.parametrize(
    ("reference", "one_step", "two_steps"),
    [(1.0, 1.125, 1.25), (128.0, 144.0, 160.0), (448.0, 416.0, 384.0), (0.0, 2.0**-9, 2.0**-7)],
)
def test_the_fp8_tolerance_admits_one_e4m3_step_and_no_more(reference, one_step, two_steps):
    tolerance = get_task(PER_TOKEN_TASKS[0]).tolerance_for("float8_e4m3fn")
    ref = torch.tensor([reference]).to(torch.float8_e4m3fn)
    assert compare_outputs(torch.tensor([one_step]).to(torch.float8_e4m3fn), ref, tolerance).passed
    assert not compare_outputs(torch.tensor([two_steps]).to(torch.float8_e4m3fn), ref, tolerance).passed


def test_inputs_are_reproducible_with_varying_token_norms_and_outlier_channels():
    x, again, other = _x(64, 2048, 3), _x(64, 2048, 3), _x(64, 2048, 4)
    assert torch.equal(x, again) and not torch.equal(x, other)
    norms = x.float().norm(dim=1)
    assert norms.max() > 1.5 * norms.min()
    per_channel = x.float().abs().mean(dim=0)
    assert (per_channel > 5 * per_channel.median()).sum() == fp8_quant.OUTLIER_CHANNELS


def test_the_rooflines_count_a_bf16_read_a_byte_written_per_value_and_the_scales():
    per_token = fp8_quant.roofline_per_token({"tokens": 8192, "hidden": 4096}, "bfloat16", {})
    assert per_token.bytes_moved == 8192 * 4096 * (2 + 1) + 8192 * 4
    group = fp8_quant.roofline_per_token_group({"tokens": 8192, "hidden": 7168}, "bfloat16", {"group_size": 128})
    assert group.bytes_moved == 8192 * 7168 * 3 + 8192 * 56 * dtype_bytes("float32")


def test_the_tasks_follow_the_model_widths_and_deepseeks_128_wide_blocks():
    for task_id in PER_TOKEN_TASKS:
        task = get_task(task_id)
        assert all(s["hidden"] == task.architecture.hidden_size for s in task.test_shapes + task.hidden_shapes)
        assert {"float8_e4m3fn", "float32"} <= set(task.tolerances)
    group = get_task(GROUP_TASK)
    assert group.params["group_size"] == 128 and group.architecture.hidden_size % 128 == 0
    assert all(s["hidden"] % 128 == 0 for s in group.test_shapes + group.hidden_shapes + group.cpu_shapes)
