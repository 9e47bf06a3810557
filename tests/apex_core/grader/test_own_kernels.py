"""The profiler-based proof that a Triton solution's own kernels did the work.

The traces here use kernel names in the form CUDA reports for PyTorch's elementwise and reduction
kernels; the full path (a real profiler trace) runs on the GPU in test_red_team_gpu.py.
"""


import pytest

from apex_core.grader.judge import GradeOptions, _Run
from apex_core.tasks import get_task

TORCH_RMSNORM_KERNELS = {
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float>>": 3.1,
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>>>": 4.2,
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>": 2.0,
}


class _TracedWorker:
    def __init__(self, kernels: dict[str, float], own: list[str]) -> None:
        self.reply = {"ok": True, "kernels_us": kernels, "own_kernels": own}

    def request(self, header: dict, payload: bytes = b"") -> tuple[dict, bytes]:
        assert header["op"] == "profile"
        return self.reply, b""


@pytest.fixture
def run():
    task = get_task("llama-3-1-8b-instruct__rms_norm")
    return _Run(task, task.baseline_path, GradeOptions(device="cpu"))


def test_a_solution_whose_kernel_does_the_work_passes(run):
    run._check_own_kernels(_TracedWorker({"_rms_norm_rows": 5.0, "Memset (Device)": 9.0}, ["_rms_norm_rows"]))
    assert run.no_custom_kernel == ""


def test_a_pure_pytorch_answer_has_no_custom_kernel(run):
    run._check_own_kernels(_TracedWorker(TORCH_RMSNORM_KERNELS, []))
    assert "defines no Triton kernel" in run.no_custom_kernel


def test_a_ghost_kernel_that_never_runs_is_caught(run):
    run._check_own_kernels(_TracedWorker(TORCH_RMSNORM_KERNELS, ["_ghost_kernel"]))
    assert "none of the solution's kernels (_ghost_kernel) ran" in run.no_custom_kernel


def test_a_token_kernel_beside_library_work_is_caught(run):
    kernels = {**TORCH_RMSNORM_KERNELS, "_tiny_kernel": 0.5}
    run._check_own_kernels(_TracedWorker(kernels, ["_tiny_kernel"]))
    assert "did 5% of the device time" in run.no_custom_kernel
    assert any(flag.startswith("no_custom_kernel") for flag in run.flags)
