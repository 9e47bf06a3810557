import torch

from apex_core.kernels import gemm_bf16
from apex_core.tasks import get_task


def test_the_reference_is_the_float64_product_rounded_once_to_bf16():
    x, w = gemm_bf16.make_inputs_torch({"tokens": 7, "k": 300, "n": 50}, "bfloat16", 2, "cpu", {})
    y = gemm_bf16.reference_torch(x, w)
    assert y.shape == (7, 50) and y.dtype == torch.bfloat16
    exact = x.double() @ w.double().T
    torch.testing.assert_close(y.double(), exact, rtol=2**-8, atol=1e-6)


def test_the_reference_ignores_a_reduced_fp32_matmul_precision_and_restores_the_setting():
    x, w = gemm_bf16.make_inputs_torch({"tokens": 4, "k": 64, "n": 16}, "bfloat16", 1, "cpu", {})
    expected = gemm_bf16.reference_torch(x, w)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        assert torch.equal(gemm_bf16.reference_torch(x, w), expected)
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision(previous)


def test_inputs_are_reproducible_and_scaled_like_a_trained_projection():
    first = gemm_bf16.make_inputs_torch({"tokens": 16, "k": 1024, "n": 64}, "bfloat16", 5, "cpu", {})
    again = gemm_bf16.make_inputs_torch({"tokens": 16, "k": 1024, "n": 64}, "bfloat16", 5, "cpu", {})
    other = gemm_bf16.make_inputs_torch({"tokens": 16, "k": 1024, "n": 64}, "bfloat16", 6, "cpu", {})
    assert torch.equal(first[1], again[1]) and not torch.equal(first[1], other[1])
    assert abs(first[1].float().std().item() * 32 - 1.0) < 0.05  # w ~ N(0, 1/k)
    assert 0.8 < gemm_bf16.reference_torch(*first).float().std().item() < 1.2


def test_the_roofline_reads_x_and_w_once_and_writes_y_once():
    model = gemm_bf16.roofline({"tokens": 8192, "k": 4096, "n": 28672}, "bfloat16", {})
    assert model.bytes_moved == (8192 * 4096 + 28672 * 4096 + 8192 * 28672) * 2
    assert model.flops == 2 * 8192 * 28672 * 4096


def test_each_task_is_its_model_s_projection_with_shapes_from_the_registry():
    llama = get_task("llama-3-1-8b-instruct__gemm_bf16")
    assert (llama.test_shapes[0]["k"], llama.test_shapes[0]["n"]) == (4096, 2 * llama.architecture.intermediate_size)
    qwen = get_task("qwen3-5-27b__gemm_bf16")
    assert (qwen.test_shapes[0]["k"], qwen.test_shapes[0]["n"]) == (5120, 2 * qwen.architecture.intermediate_size)
    gpt = get_task("gpt-oss-20b__gemm_bf16").architecture
    qkv = (gpt.num_attention_heads + 2 * gpt.num_key_value_heads) * gpt.head_dim
    assert get_task("gpt-oss-20b__gemm_bf16").test_shapes[0]["n"] == qkv
    deepseek = get_task("deepseek-r1__gemm_bf16")
    o_proj_in = deepseek.architecture.num_attention_heads * deepseek.architecture.extra["v_head_dim"]
    assert (deepseek.test_shapes[0]["k"], deepseek.test_shapes[0]["n"]) == (o_proj_in, 7168)
    for task in (llama, qwen, deepseek):
        largest = max(task.benchmark_shapes, key=lambda s: s["tokens"])
        assert (largest["tokens"] * largest["k"] + largest["n"] * largest["k"]) * 2 < 1e9  # one input set
