import torch

from apex_core.hardware.specs import GPU_SPECS
from apex_core.kernels.gemm_fp8 import block_scaled, per_token
from apex_core.kernels.gemm_fp8.quantize import FP8_MAX, random_quantized
from apex_core.tasks import get_task


def test_quantization_maps_each_group_s_largest_value_to_448_and_round_trips_within_an_fp8_step():
    generator = torch.Generator().manual_seed(0)
    q, scales = random_quantized(300, 256, 128, 128, generator)
    assert q.dtype == torch.float8_e4m3fn and scales.shape == (3, 2)
    blocks = q.float()[:256].reshape(2, 128, 2, 128).abs().amax(dim=(1, 3))
    assert torch.equal(blocks, torch.full((2, 2), FP8_MAX))
    again = torch.Generator().manual_seed(0)
    original = torch.randn(300, 256, generator=again)
    dequantized = q.float() * scales.repeat_interleave(128, 0)[:300].repeat_interleave(128, 1)
    assert ((dequantized - original).abs() <= 2**-4 * original.abs() + 2**-9 * scales.max()).all()


def test_the_per_token_reference_is_the_exact_scaled_fp8_product_rounded_once():
    x_q, x_s, w_q, w_s = per_token.make_inputs_torch({"tokens": 5, "k": 200, "n": 40}, "float8_e4m3fn", 1, "cpu", {})
    assert (x_s.shape, w_s.shape) == ((5, 1), (40, 1))
    y = per_token.reference_torch(x_q, x_s, w_q, w_s)
    assert y.dtype == torch.bfloat16 and y.shape == (5, 40)
    exact = (x_q.double() @ w_q.double().T) * x_s.double() * w_s.double().T
    torch.testing.assert_close(y.double(), exact, rtol=2**-8, atol=1e-6)


def test_the_block_reference_equals_deepseek_s_sum_of_scaled_128_wide_block_products():
    x_q, x_s, w_q, w_s = block_scaled.make_inputs_torch({"tokens": 3, "k": 384, "n": 200}, "float8_e4m3fn", 2, "cpu", {})
    assert (x_s.shape, w_s.shape) == ((3, 3), (2, 3))
    y = block_scaled.reference_torch(x_q, x_s, w_q, w_s)
    exact = torch.zeros(3, 200, dtype=torch.float64)
    for kb in range(3):
        cols = slice(kb * 128, (kb + 1) * 128)
        partial = x_q[:, cols].double() @ w_q[:, cols].double().T
        weight_scale = w_s[:, kb].double().repeat_interleave(128)[:200]
        exact += partial * x_s[:, kb : kb + 1].double() * weight_scale[None, :]
    torch.testing.assert_close(y.double(), exact, rtol=2**-8, atol=1e-6)


def _bits(tensor):
    return tensor.view(torch.uint8) if tensor.dtype == torch.float8_e4m3fn else tensor


def test_inputs_are_reproducible_and_outputs_are_order_one():
    shape = {"tokens": 8, "k": 512, "n": 64}
    for module in (per_token, block_scaled):
        first = module.make_inputs_torch(shape, "float8_e4m3fn", 3, "cpu", {})
        again = module.make_inputs_torch(shape, "float8_e4m3fn", 3, "cpu", {})
        assert all(torch.equal(_bits(a), _bits(b)) for a, b in zip(first, again))
        assert 0.5 < module.reference_torch(*first).float().std().item() < 3.0


def test_the_rooflines_count_one_byte_per_fp8_element_and_the_fp8_peak_sets_the_floor():
    shape = {"tokens": 8192, "k": 16384, "n": 7168}
    model = block_scaled.roofline(shape, "float8_e4m3fn", {})
    assert model.bytes_moved == 8192 * 16384 + 7168 * 16384 + 2 * 8192 * 7168 + 4 * (8192 * 128 + 56 * 128)
    assert model.flops == 2 * 8192 * 7168 * 16384
    assert per_token.roofline(shape, "float8_e4m3fn", {}).bytes_moved == 8192 * 16384 + 7168 * 16384 + 2 * 8192 * 7168 + 4 * (8192 + 7168)
    mi355x = next(spec for spec in GPU_SPECS if spec.key == "mi355x")
    assert model.floor_seconds(mi355x, "float8_e4m3fn") == model.flops / (mi355x.peak_fp8_tflops * 1e12)


def test_the_fp8_tasks_run_at_the_fp8_rate_and_grade_the_bf16_output_like_a_bf16_gemm():
    for task_id in ("llama-3-1-8b-instruct__gemm_fp8", "qwen3-5-27b__gemm_fp8", "deepseek-r1__gemm_fp8"):
        task = get_task(task_id)
        assert task.dtype == "float8_e4m3fn"
        assert task.tolerance_for("bfloat16") == task.tolerance  # the prompt shows what is applied
    deepseek = get_task("deepseek-r1__gemm_fp8")
    assert all(s["k"] % 128 == 0 and s["n"] % 128 == 0 for s in deepseek.test_shapes + deepseek.benchmark_shapes)
