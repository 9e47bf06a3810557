"""HIP/CUDA kernels and their launch sites are found in C++ sources by a scanner, without a compiler."""

import pytest

from apex_core.sources.cpp_scan import detect_language, might_hold_device_code, scan_cpp_source, strip_code

ROCM_NORM_HIP = r'''// Copyright (c) example. Kernels: __global__ void fake_in_line_comment(float* x) {}
#include <hip/hip_runtime.h>
#include "norm_common.h"

/* A block comment that mentions
   __global__ void fake_in_block_comment(float* x) { }
   and a launch fake_in_block_comment<<<1, 1>>>(x);
*/
#define DEFINE_COPY_KERNEL(name)                 \
  __global__ void name(float* dst, const float* src) { \
    dst[threadIdx.x] = src[threadIdx.x];         \
  }

namespace apex {
namespace norm {

constexpr int kWarp = 64;

template <typename T, int VEC = 4>
__global__ __launch_bounds__(256) void rms_norm_kernel(T* __restrict__ out,
                                                       const T* __restrict__ in,
                                                       const T* weight, float eps, int hidden) {
  const char* note = "not a launch: fake<<<1, 1>>>(x); {";
  const char brace = '{';
  const int big = 1'000'000;
  float sum = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    sum += float(in[i]) * float(in[i]);
  }
  out[threadIdx.x] = in[threadIdx.x] * weight[threadIdx.x] * rsqrtf(sum / hidden + eps);
}

#if defined(__gfx950__)
__global__ void __launch_bounds__(512) add_residual_kernel(float* x, const float* r, int n) {
#else
__global__ void __launch_bounds__(256) add_residual_kernel(float* x, const float* r, int n) {
#endif
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { x[i] += r[i]; }
}

#if 0
__global__ void disabled_kernel(float* x) { x[0] = 0.f; }
#endif

}  // namespace norm

extern "C" __global__ void
scale_kernel(float* x, float s, int n)
{
  x[blockIdx.x] *= s;
}

static __global__ void copy_kernel(float* dst, const float* src);  // declared only: skipped

namespace {
__global__ void hidden_kernel(int* flag) { *flag = 1; }
}  // namespace

struct NormLauncher {
  void launch(float* out, const float* in, const float* w, int rows, int hidden, hipStream_t stream) {
    hipLaunchKernelGGL((norm::rms_norm_kernel<float, 4>), dim3(rows), dim3(256), 0, stream,
                       out, in, w, 1e-6f, hidden);
    hipLaunchKernelGGL(scale_kernel, dim3(rows), dim3(64), 0, stream, out, 0.5f, hidden);
  }
};

void launch_all(float* x, const float* r, int n, hipStream_t stream) {
  auto run = [&](int m) {
    norm::add_residual_kernel<<<dim3((m + 255) / 256), dim3(256), 0, stream>>>(x, r, m);
  };
  run(n);
  const char* generated = R"src(
      __global__ void fake_in_raw_string(float* x) { x[0] = 1; }
      fake_in_raw_string<<<1, 1>>>(x);
  )src";
  hidden_kernel<<<1, 1>>>(nullptr);
}

}  // namespace apex
'''

CUDA_SOFTMAX_CU = r'''#include <cuda_runtime.h>

namespace demo::softmax {

template <typename scalar_t, int kThreads>
__global__ void softmax_forward_kernel(scalar_t* out, const scalar_t* in, int cols) {
  __shared__ float buffer[kThreads];
  buffer[threadIdx.x] = in[threadIdx.x];
}

class Softmax {
 public:
  void forward(float* out, const float* in, int rows, int cols, cudaStream_t stream);
};

void Softmax::forward(float* out, const float* in, int rows, int cols, cudaStream_t stream) {
  if (cols <= 1024) {
    softmax_forward_kernel<float, 128><<<rows, 128, 0, stream>>>(out, in, cols);
  } else {
    softmax_forward_kernel<float, 1024>
        <<<rows, 1024, cols * sizeof(float), stream>>>(
            out, in, cols);
  }
  void* args[] = {&out, &in, &cols};
  cudaLaunchKernel((void*)softmax_forward_kernel<float, 256>, dim3(rows), dim3(256), args, 0, stream);
}

}  // namespace demo::softmax
'''


def _line(source: str, number: int) -> str:
    return source.splitlines()[number - 1]


def test_kernels_are_found_with_namespaces_templates_and_launch_bounds_and_fakes_are_not():
    scan = scan_cpp_source(ROCM_NORM_HIP, ".hip", "norm.hip")
    assert scan.language == "hip"
    assert [k.qualified_name for k in scan.kernels] == [
        "apex::norm::rms_norm_kernel",
        "apex::norm::add_residual_kernel",
        "apex::scale_kernel",
        "apex::(anonymous namespace)::hidden_kernel",
    ]
    norm = scan.kernels[0]
    assert norm.template_parameters == "typename T, int VEC = 4"
    assert norm.decorators == ("__global__", "__launch_bounds__(256)")
    assert norm.parameters == "T* __restrict__ out, const T* __restrict__ in, const T* weight, float eps, int hidden"
    assert scan.kernels[2].decorators == ('extern "C"', "__global__")


def test_a_kernels_line_is_its_name_and_its_end_line_is_the_closing_brace_of_its_body():
    scan = scan_cpp_source(ROCM_NORM_HIP, ".hip")
    for kernel in scan.kernels:
        assert kernel.name in _line(ROCM_NORM_HIP, kernel.line)
        assert _line(ROCM_NORM_HIP, kernel.end_line).rstrip().endswith("}")
    scale = next(k for k in scan.kernels if k.name == "scale_kernel")
    assert (_line(ROCM_NORM_HIP, scale.line), _line(ROCM_NORM_HIP, scale.end_line)) == ("scale_kernel(float* x, float s, int n)", "}")


def test_of_an_ifdef_that_opens_one_kernel_twice_the_first_opening_is_kept_and_if_0_is_dropped():
    kernels = {k.name: k for k in scan_cpp_source(ROCM_NORM_HIP, ".hip").kernels}
    residual = kernels["add_residual_kernel"]
    assert residual.decorators == ("__global__", "__launch_bounds__(512)")
    assert _line(ROCM_NORM_HIP, residual.end_line + 2) == "#if 0"
    assert "disabled_kernel" not in kernels and "copy_kernel" not in kernels  # dead code; a declaration


def test_hip_launches_name_their_kernel_launcher_configuration_and_arguments():
    launches = {(x.kernel, x.launcher, x.configuration, x.arguments, x.via) for x in scan_cpp_source(ROCM_NORM_HIP, ".hip", "norm.hip").launches}
    assert launches == {
        ("rms_norm_kernel", "apex::NormLauncher::launch", "dim3(rows), dim3(256), 0, stream", "out, in, w, 1e-6f, hidden", "hipLaunchKernelGGL"),
        ("scale_kernel", "apex::NormLauncher::launch", "dim3(rows), dim3(64), 0, stream", "out, 0.5f, hidden", "hipLaunchKernelGGL"),
        ("add_residual_kernel", "apex::launch_all", "dim3((m + 255) / 256), dim3(256), 0, stream", "x, r, m", "<<<>>>"),
        ("hidden_kernel", "apex::launch_all", "1, 1", "nullptr", "<<<>>>"),
    }


def test_cuda_launches_with_template_arguments_split_lines_and_cudalaunchkernel_are_found():
    scan = scan_cpp_source(CUDA_SOFTMAX_CU, ".cu")
    assert scan.language == "cuda"
    assert [(k.qualified_name, k.template_parameters) for k in scan.kernels] == [
        ("demo::softmax::softmax_forward_kernel", "typename scalar_t, int kThreads")]
    launches = [(x.kernel, x.launcher, x.line, x.configuration, x.arguments) for x in scan.launches]
    assert launches == [
        ("softmax_forward_kernel", "demo::softmax::Softmax::forward", 18, "rows, 128, 0, stream", "out, in, cols"),
        ("softmax_forward_kernel", "demo::softmax::Softmax::forward", 20, "rows, 1024, cols * sizeof(float), stream", "out, in, cols"),
        ("softmax_forward_kernel", "demo::softmax::Softmax::forward", 25, "dim3(rows), dim3(256), 0, stream", "args"),
    ]
    assert "softmax_forward_kernel<float, 1024>" in _line(CUDA_SOFTMAX_CU, 20)


def test_long_argument_text_is_shortened():
    source = "__global__ void k(int a) {}\nvoid f() {\n  k<<<1, 1>>>(" + " + ".join(["value"] * 100) + ");\n}\n"
    (launch,) = scan_cpp_source(source, ".cu").launches
    assert len(launch.arguments) == 300 and launch.arguments.endswith("...")


def test_stripping_blanks_comments_and_literals_but_keeps_every_line_and_offset():
    source = 'int a = 1\'000; // c\nchar b = \'"\'; /* x\ny */ auto s = "a\\"b";\nauto r = R"d(\n)"\n)d";\n'
    stripped = strip_code(source)
    assert len(stripped) == len(source) and stripped.count("\n") == source.count("\n")
    assert stripped.split("\n")[0].rstrip() == "int a = 1'000;"
    assert "x" not in stripped and '"' not in stripped and "y" not in stripped
    assert [line.strip() for line in stripped.split("\n")[3:6]] == ["auto r =", "", ";"]  # the raw string spans lines


@pytest.mark.parametrize(
    ("suffix", "text", "language"),
    [
        (".hip", "", "hip"),
        (".cu", "#include <hip/hip_runtime.h>\n", "hip"),
        (".cuh", "#include <cstdint>\n", "cuda"),
        (".h", '#include "cuda_runtime.h"\n', "cuda"),
        (".cpp", "void f() { hipLaunchKernelGGL(k, 1, 1, 0, 0); }\n", "hip"),
    ],
)
def test_the_language_comes_from_the_suffix_then_the_includes(suffix, text, language):
    assert detect_language(suffix, text) == language


def test_a_header_without_device_code_is_not_scanned():
    header = "#pragma once\nnamespace at { void add(int a) { if (a) {} } }\n"
    assert not might_hold_device_code(header)
    scan = scan_cpp_source(header, ".h")
    assert scan.kernels == [] and scan.launches == []


def test_kernels_written_only_inside_macros_or_strings_are_not_reported():
    source = '#define K(name) __global__ void name() {}\nconst char* s = "__global__ void q() {}";\n'
    assert might_hold_device_code(source)
    assert scan_cpp_source(source, ".cu").kernels == []
