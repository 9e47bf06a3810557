import math

import torch

from apex_core.kernels import silu_and_mul
from apex_core.kernels.roofline import dtype_bytes
from apex_core.tasks import get_task


def test_the_reference_matches_a_float64_loop_over_gate_and_up():
    (x,) = silu_and_mul.make_inputs_torch({"tokens": 3, "intermediate": 40}, "bfloat16", 2, "cpu", {})
    got = silu_and_mul.reference_torch(x)
    assert got.shape == (3, 40) and got.dtype == torch.bfloat16
    for row in range(3):
        for col in range(40):
            gate, up = float(x[row, col]), float(x[row, 40 + col])
            expected = gate / (1.0 + math.exp(-gate)) * up
            assert abs(float(got[row, col]) - expected) <= 1e-2 + 1.6e-2 * abs(expected)


def test_the_gate_is_the_first_half_and_the_up_projection_the_second():
    x = torch.tensor([[2.0, -1.0, 3.0, 0.5]])  # gate (2, -1), up (3, 0.5)
    got = silu_and_mul.reference_torch(x)
    silu = lambda g: g / (1 + math.exp(-g))  # noqa: E731
    torch.testing.assert_close(got, torch.tensor([[silu(2.0) * 3.0, silu(-1.0) * 0.5]]))


def test_inputs_are_reproducible_and_moe_tasks_have_one_row_per_selected_expert():
    shape = {"tokens": 3, "intermediate": 16}
    first = silu_and_mul.make_inputs_torch(shape, "bfloat16", 5, "cpu", {})[0]
    assert torch.equal(first, silu_and_mul.make_inputs_torch(shape, "bfloat16", 5, "cpu", {})[0])
    assert not torch.equal(first, silu_and_mul.make_inputs_torch(shape, "bfloat16", 6, "cpu", {})[0])
    routed = silu_and_mul.make_inputs_torch(shape, "bfloat16", 5, "cpu", {"rows_per_token": 8})[0]
    assert first.shape == (3, 32) and routed.shape == (24, 32)


def test_the_deepseek_task_runs_on_top_k_routed_rows_of_the_expert_width():
    task = get_task("deepseek-r1__silu_and_mul")
    model = task.architecture
    assert task.params["rows_per_token"] == model.experts_per_token == 8
    assert all(s["intermediate"] == model.moe_intermediate_size == 2048 for s in task.test_shapes)
    for task_id in ("llama-3-1-8b-instruct__silu_and_mul", "qwen3-5-27b__silu_and_mul"):
        dense = get_task(task_id)
        assert all(s["intermediate"] == dense.architecture.intermediate_size for s in dense.test_shapes)
        assert "rows_per_token" not in dense.params


def test_the_roofline_reads_both_halves_and_writes_one():
    model = silu_and_mul.roofline({"tokens": 8192, "intermediate": 2048}, "bfloat16", {"rows_per_token": 8})
    rows = 8192 * 8
    assert model.bytes_moved == 3 * rows * 2048 * dtype_bytes("bfloat16")
    assert model.flops == silu_and_mul.FLOPS_PER_OUTPUT * rows * 2048


def test_one_timed_input_set_stays_under_a_gigabyte():
    for task_id in ("llama-3-1-8b-instruct__silu_and_mul", "qwen3-5-27b__silu_and_mul", "deepseek-r1__silu_and_mul"):
        task = get_task(task_id)
        largest = max(task.benchmark_shapes, key=lambda s: s["tokens"])
        rows = silu_and_mul.input_rows(largest, task.params)
        assert rows * 2 * largest["intermediate"] * dtype_bytes(task.dtype) < 1e9


CUDA_ONLY = ("cuda", "<<<", "_sync(", "__nv_", "cub::", "cooperative_groups")


def test_the_hip_task_is_the_llama_silu_and_mul_in_hip_with_portable_sources():
    from apex_core.grader.isolation.native import kernel_names
    from apex_core.tasks.reference_solutions import reference_solution_path

    hip, triton_task = get_task("llama-3-1-8b-instruct__silu_and_mul_hip"), get_task("llama-3-1-8b-instruct__silu_and_mul")
    assert (hip.language, hip.solution_filename, hip.cpu_shapes) == ("hip", "solution.hip", [])
    assert (hip.reference, hip.inputs) == (triton_task.reference, triton_task.inputs)
    assert hip.test_shapes == triton_task.test_shapes and hip.benchmark_shapes == triton_task.benchmark_shapes
    for source in (hip.baseline_source, reference_solution_path(hip).read_text()):
        assert 'm.def("silu_and_mul", &silu_and_mul)' in source
        assert not [word for word in CUDA_ONLY if word in source]
        assert kernel_names(source)
