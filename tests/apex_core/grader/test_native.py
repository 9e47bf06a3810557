"""Compiled (HIP/CUDA/C++) solutions: building them and reporting compiler errors readably."""

import textwrap

import pytest
import torch

from apex_core.errors import SolutionFileError
from apex_core.grader import check_solution_file
from apex_core.grader.isolation.native import (
    HIP_ON_CUDA_DIR,
    ToolchainMissing,
    build_extension,
    hip_source_for_cuda,
    kernel_names,
    trim_compiler_output,
)
from apex_core.tasks import get_task

CPP_RMS_NORM = (
    "#include <torch/extension.h>\n\n"
    "torch::Tensor rms_norm(torch::Tensor x, torch::Tensor w, double eps) {\n"
    "    auto x32 = x.to(torch::kFloat);\n"
    "    auto inv = torch::rsqrt(x32.pow(2).mean(-1, true) + eps);\n"
    "    return (x32 * inv * w.to(torch::kFloat)).to(x.scalar_type());\n"
    "}\n\n"
    'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("rms_norm", &rms_norm); }\n'
)

# Error lines in the formats nvcc, hipcc (clang) and g++ print them.
NVCC = """/tmp/apex-worker-x/build/solution.cu(14): error: identifier "blockDimx" is undefined
      int i = blockIdx.x * blockDimx + threadIdx.x;
                           ^
1 error detected in the compilation of "/tmp/apex-worker-x/solution.cu".
ninja: build stopped: subcommand failed."""
HIPCC = """/tmp/apex-worker-x/solution.hip:21:5: error: use of undeclared identifier '__shfl_xor_sync'
   21 |     __shfl_xor_sync(0xffffffff, v, 16);
      |     ^
1 error generated when compiling for gfx950."""


def test_nvcc_errors_keep_the_file_and_line():
    message = trim_compiler_output(NVCC, "solution.cu")
    assert message.startswith("compilation failed: solution.cu(14): error: identifier \"blockDimx\" is undefined")
    assert "blockIdx.x * blockDimx" in message


def test_hipcc_errors_keep_the_file_line_and_column():
    assert "solution.hip:21:5: error: use of undeclared identifier '__shfl_xor_sync'" in trim_compiler_output(HIPCC, "solution.hip")


def test_output_without_recognizable_errors_falls_back_to_its_last_lines():
    assert trim_compiler_output("linker exploded\nninja: build stopped", "solution.cu").endswith("ninja: build stopped")


def test_kernel_names_come_from_global_functions():
    source = textwrap.dedent(
        """
        __global__ void rms_norm_kernel(const float* x, float* y) {}
        __global__ __launch_bounds__(256) void rows_kernel(int n) {}
        template <int N> __global__ void tiled(float* a) {}
        __global__ void __launch_bounds__(kMaxThreads) vec_kernel(uint4* __restrict__ out) {}
        __global__ void __launch_bounds__(256, (2)) __attribute__((amdgpu_waves_per_eu(1, 2))) waves(int n) {}
        __device__ float helper(float v) { return v; }
        """
    )
    assert kernel_names(source) == ["rms_norm_kernel", "rows_kernel", "tiled", "vec_kernel", "waves"]


def test_our_hip_solutions_name_every_kernel_they_launch():
    from apex_core.tasks.reference_solutions import reference_solution_path

    for task_id, launched in (("llama-3-1-8b-instruct__rms_norm_hip", "rms_norm_vec_kernel"),
                              ("llama-3-1-8b-instruct__silu_and_mul_hip", None)):
        source = reference_solution_path(get_task(task_id)).read_text()
        names = kernel_names(source)
        assert names and "__launch_bounds__" not in names
        assert launched is None or launched in names


def test_a_hip_task_takes_compiled_sources_and_others_take_python(tmp_path):
    hip_task = get_task("llama-3-1-8b-instruct__rms_norm").model_copy(update={"language": "hip"})
    for suffix in (".hip", ".cu", ".cpp"):
        path = tmp_path / f"solution{suffix}"
        path.write_text("// kernel")
        assert check_solution_file(hip_task, path) == path.resolve()
    with pytest.raises(SolutionFileError, match="must be a .py file"):
        check_solution_file(get_task("llama-3-1-8b-instruct__rms_norm"), tmp_path / "solution.cu")


@pytest.mark.skipif(bool(torch.version.cuda or torch.version.hip), reason="this torch build can compile GPU sources")
def test_gpu_sources_on_a_cpu_only_torch_are_a_missing_toolchain_not_a_compile_error(tmp_path):
    source = tmp_path / "solution.cu"
    source.write_text("__global__ void k() {}\n")
    with pytest.raises(ToolchainMissing, match="neither CUDA nor ROCm"):
        build_extension(source, tmp_path / "build")


def test_a_hip_source_for_nvcc_starts_with_the_shim_and_keeps_its_line_numbers():
    text = hip_source_for_cuda("line one\nline two\n", "solution.hip")
    first, marker, rest = text.split("\n", 2)
    assert first == "#include <hip/hip_runtime.h>" and marker == '#line 1 "solution.hip"'
    assert rest == "line one\nline two\n"
    assert (HIP_ON_CUDA_DIR / "hip" / "hip_runtime.h").is_file() and (HIP_ON_CUDA_DIR / "ATen" / "hip" / "HIPContext.h").is_file()


HIP_SCALE = """#include <hip/hip_runtime.h>
#include <torch/extension.h>
#include <ATen/hip/HIPContext.h>

__global__ void scale_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    float total = v;
    for (int offset = warpSize / 2; offset > 0; offset /= 2) total += __shfl_xor(total, offset);
    if (i < n) y[i] = 2.0f * v + 0.0f * total;
}

torch::Tensor scale(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    hipStream_t stream = c10::hip::getCurrentHIPStream();
    hipLaunchKernelGGL(scale_kernel, dim3((n + 255) / 256), dim3(256), 0, stream, x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale); }
"""


@pytest.mark.gpu
def test_a_hip_source_builds_and_runs_on_this_gpu(tmp_path):
    source = tmp_path / "solution.hip"
    source.write_text(HIP_SCALE)
    module = build_extension(source, tmp_path / "build")
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    torch.testing.assert_close(module.scale(x), 2 * x)


@pytest.mark.slow
def test_a_compiled_solution_is_graded_through_the_worker(tmp_path):
    """A C++ solution builds and runs correctly in the worker; one that does not compile is a
    compile_error whose reason names its file and line. (Each build of a torch extension takes
    30-40 s on the CI machine, so building and its error lines are checked here, once, through the
    worker that runs them for real, and not again through ``build_extension`` alone.)"""
    from apex_core.grader import GradeOptions, Outcome, grade

    task = get_task("llama-3-1-8b-instruct__rms_norm").model_copy(
        update={"language": "hip", "test_shapes": [{"tokens": 3, "hidden": 4096}], "hidden_shapes": []}
    )
    source = tmp_path / "solution.cpp"
    source.write_text(CPP_RMS_NORM)
    result = grade(task, source, GradeOptions(device="cpu", timing=False, timeout_s=300))
    assert result.outcome is Outcome.ok and result.correct, result.reason
    broken = tmp_path / "broken.cpp"
    broken.write_text(source.read_text().replace("return (x32", "return (x33"))
    failed = grade(task, broken, GradeOptions(device="cpu", timing=False, timeout_s=300))
    assert failed.outcome is Outcome.compile_error and "broken.cpp:6:" in failed.reason and "x33" in failed.reason
