// Apex HIP-on-CUDA shim: the current-stream call a HIP extension makes, answered by CUDA torch.
#pragma once
#include <ATen/cuda/CUDAContext.h>

namespace c10 {
namespace hip {
// Returns torch's stream object, which converts to the raw stream as the ROCm one does.
inline c10::cuda::CUDAStream getCurrentHIPStream() { return at::cuda::getCurrentCUDAStream(); }
}  // namespace hip
}  // namespace c10
