"""The profiler checks: a Triton solution's own kernels must do the work, on the timed stream.

Kernel names and stream ids below were recorded on the H200 (2026-11-29) from PyTorch's profiler:
the PyTorch RMSNorm reference's kernels, and a Triton kernel launched on the default stream
(resource id 7) or, by a cheating solution, on a stream of its own (resource id 13). The whole
path, profiler included, runs on the GPU in test_red_team_gpu.py.
"""

import pytest

from apex_core.grader.judge import GradeOptions, _Failed, _Run
from apex_core.grader.result import Outcome
from apex_core.tasks import get_task

DEFAULT_STREAM, SIDE_STREAM = 7, 13
TORCH_RMSNORM = [
    ["void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)", 3.744, DEFAULT_STREAM],
    ["void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::pow_tensor_scalar_kernel_impl<float, float>", 2.144, DEFAULT_STREAM],
    ["void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4> >", 8.992, DEFAULT_STREAM],
    ["void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul> >", 0.96, DEFAULT_STREAM],
    ["void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)", 2.176, DEFAULT_STREAM],
]
BASELINE_TRACE = {"kernels": [["_rms_norm_row_kernel", 2.3, DEFAULT_STREAM]], "own_kernels": ["_rms_norm_row_kernel"]}


def trace(kernels: list, own: list[str]) -> dict:
    return {"ok": True, "kernels": kernels, "own_kernels": own}


@pytest.fixture
def run():
    task = get_task("llama-3-1-8b-instruct__rms_norm")
    return _Run(task, task.baseline_path, GradeOptions(device="cpu"))


def test_a_solution_whose_kernel_does_the_work_passes(run):
    run._check_own_kernels(trace([["_rms_rows", 2.11, DEFAULT_STREAM], ["Memset (Device)", 9.0, DEFAULT_STREAM]], ["_rms_rows"]))
    assert run.no_custom_kernel == ""


def test_a_pure_pytorch_answer_has_no_custom_kernel(run):
    run._check_own_kernels(trace(TORCH_RMSNORM, []))
    assert "defines no GPU kernel of its own" in run.no_custom_kernel


def test_a_ghost_kernel_that_never_runs_is_caught(run):
    run._check_own_kernels(trace(TORCH_RMSNORM, ["_rms_rows"]))
    assert "none of the solution's kernels (_rms_rows) ran" in run.no_custom_kernel


def test_a_token_kernel_beside_library_work_is_caught(run):
    run._check_own_kernels(trace([*TORCH_RMSNORM, ["_tiny_kernel", 0.5, DEFAULT_STREAM]], ["_tiny_kernel"]))
    assert "did 3% of the device time" in run.no_custom_kernel
    assert any(flag.startswith("no_custom_kernel") for flag in run.flags)


def test_kernels_on_a_stream_of_their_own_are_tampering(run):
    side = trace([["_rms_rows", 2.05, SIDE_STREAM]] * 20, ["_rms_rows"])
    with pytest.raises(_Failed) as failed:
        run._check_streams(BASELINE_TRACE, side)
    assert failed.value.outcome is Outcome.tampering and "stream 13" in failed.value.reason


def test_kernels_on_the_timed_stream_pass_the_stream_check(run):
    run._check_streams(BASELINE_TRACE, trace([["_rms_rows", 2.11, DEFAULT_STREAM]], ["_rms_rows"]))


def test_a_task_may_allow_side_streams(run):
    run.task = run.task.model_copy(update={"allow_side_streams": True})
    run._check_streams(BASELINE_TRACE, trace([["_rms_rows", 2.05, SIDE_STREAM]], ["_rms_rows"]))
