"""Verdicts from profiler traces: own kernels doing the work, on the timed stream.

Kernel names and stream ids below were recorded on the H200 (2026-11-29) from PyTorch's profiler:
the PyTorch RMSNorm reference's kernels, and a Triton kernel launched on the default stream
(resource id 7) or, by a cheating solution, on a stream of its own (resource id 13). The whole
path, profiler included, runs on the GPU in test_red_team_gpu.py.
"""

from apex_core.grader.trace_checks import own_work_reason, side_stream_reason

DEFAULT_STREAM, SIDE_STREAM = 7, 13
TORCH_RMSNORM = [
    ["void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)", 3.744, DEFAULT_STREAM],
    ["void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::pow_tensor_scalar_kernel_impl<float, float>", 2.144, DEFAULT_STREAM],
    ["void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4> >", 8.992, DEFAULT_STREAM],
    ["void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul> >", 0.96, DEFAULT_STREAM],
    ["void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)", 2.176, DEFAULT_STREAM],
]
BASELINE = {"kernels": [["_rms_norm_row_kernel", 2.3, DEFAULT_STREAM]], "own_kernels": ["_rms_norm_row_kernel"]}


def trace(kernels: list, own: list[str]) -> dict:
    return {"ok": True, "kernels": kernels, "own_kernels": own}


def test_a_solution_whose_kernel_does_the_work_passes():
    assert own_work_reason(trace([["_rms_rows", 2.11, DEFAULT_STREAM], ["Memset (Device)", 9.0, DEFAULT_STREAM]], ["_rms_rows"])) == ""


def test_a_pure_pytorch_answer_has_no_kernel_of_its_own():
    assert "defines no GPU kernel of its own" in own_work_reason(trace(TORCH_RMSNORM, []))


def test_a_ghost_kernel_that_never_runs_is_caught():
    assert "none of the solution's kernels (_rms_rows) ran" in own_work_reason(trace(TORCH_RMSNORM, ["_rms_rows"]))


def test_a_token_kernel_beside_library_work_is_caught():
    reason = own_work_reason(trace([*TORCH_RMSNORM, ["_tiny_kernel", 0.5, DEFAULT_STREAM]], ["_tiny_kernel"]))
    assert "did 3% of the device time" in reason


def test_kernels_on_a_stream_of_their_own_escape_the_timer():
    reason = side_stream_reason(BASELINE, trace([["_rms_rows", 2.05, SIDE_STREAM]] * 20, ["_rms_rows"]))
    assert reason.startswith("20 kernel(s) ran on stream 13")


def test_kernels_on_the_timed_stream_pass():
    assert side_stream_reason(BASELINE, trace([["_rms_rows", 2.11, DEFAULT_STREAM]], ["_rms_rows"])) == ""
