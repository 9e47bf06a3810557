// A C++ RMSNorm for bf16 rows on the CPU with the llama-3-1-8b-instruct__rms_norm_hip contract: the
// shared-library path of the patcher, tested where CI has only a host compiler.
#include <torch/extension.h>
#include <cmath>

torch::Tensor rms_norm(torch::Tensor x, torch::Tensor weight, double eps) {
  auto out = torch::empty_like(x);
  const int64_t rows = x.size(0), width = x.size(1);
  const at::BFloat16* in = x.data_ptr<at::BFloat16>();
  const at::BFloat16* w = weight.data_ptr<at::BFloat16>();
  at::BFloat16* y = out.data_ptr<at::BFloat16>();
  for (int64_t r = 0; r < rows; ++r) {
    float sum = 0.f;
    for (int64_t i = 0; i < width; ++i) { float v = in[r * width + i]; sum += v * v; }
    const float scale = 1.f / std::sqrt(sum / width + static_cast<float>(eps));
    for (int64_t i = 0; i < width; ++i) y[r * width + i] = static_cast<float>(in[r * width + i]) * scale * static_cast<float>(w[i]);
  }
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("rms_norm", &rms_norm); }
