import math

import numpy as np
import torch

from apex_core.kernels import gelu_and_mul
from apex_core.kernels.roofline import dtype_bytes
from apex_core.tasks import get_task

GEMMA_TASKS = ("gemma-2-9b-it__gelu_tanh_and_mul", "gemma-2-27b-it__gelu_tanh_and_mul")


def _gelu_tanh(g: float) -> float:
    return 0.5 * g * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g**3)))


def test_the_reference_matches_a_float64_loop_of_the_tanh_formula():
    (x,) = gelu_and_mul.make_inputs_torch({"tokens": 3, "intermediate": 40}, "bfloat16", 2, "cpu", {})
    got = gelu_and_mul.reference_torch(x)
    assert got.shape == (3, 40) and got.dtype == torch.bfloat16
    for row in range(3):
        for col in range(40):
            expected = _gelu_tanh(float(x[row, col])) * float(x[row, 40 + col])
            assert abs(float(got[row, col]) - expected) <= 1e-2 + 1.6e-2 * abs(expected)


def test_the_gate_is_the_first_half_and_the_numpy_reference_agrees():
    x = torch.tensor([[2.0, -1.0, 3.0, 0.5]])  # gate (2, -1), up (3, 0.5)
    torch.testing.assert_close(gelu_and_mul.reference_torch(x), torch.tensor([[_gelu_tanh(2.0) * 3.0, _gelu_tanh(-1.0) * 0.5]]))
    wide = np.random.default_rng(0).standard_normal((5, 64)).astype(np.float32)
    np.testing.assert_allclose(gelu_and_mul.reference_numpy(wide), gelu_and_mul.reference_torch(torch.from_numpy(wide)).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_the_exp_form_our_kernels_use_is_the_tanh_form():
    g = np.linspace(-8.0, 8.0, 2001)
    z = gelu_and_mul.SQRT_2_OVER_PI * (g + gelu_and_mul.CUBE_COEFFICIENT * g**3)
    np.testing.assert_allclose(g / (1.0 + np.exp(-2.0 * z)), 0.5 * g * (1.0 + np.tanh(z)), rtol=1e-12, atol=1e-12)


def test_the_gemma_tasks_take_their_models_intermediate_size_and_fit_a_timed_input_set_in_a_gigabyte():
    for task_id in GEMMA_TASKS:
        task = get_task(task_id)
        assert all(s["intermediate"] == task.architecture.intermediate_size for s in task.test_shapes)
        assert task.architecture.mlp == "geglu" and task.architecture.extra["hidden_activation"] == "gelu_pytorch_tanh"
        largest = max(task.benchmark_shapes, key=lambda s: s["tokens"])
        assert largest["tokens"] * 2 * largest["intermediate"] * dtype_bytes(task.dtype) < 1e9


def test_the_roofline_reads_both_halves_and_writes_one():
    model = gelu_and_mul.roofline({"tokens": 4096, "intermediate": 36864}, "bfloat16", {})
    assert model.bytes_moved == 3 * 4096 * 36864 * dtype_bytes("bfloat16")
    assert model.flops == gelu_and_mul.FLOPS_PER_OUTPUT * 4096 * 36864
