// Apex: lets a HIP solution build with nvcc on NVIDIA machines (development stand-in for AMD).
// Only on CUDA builds of torch is this directory on the include path; on ROCm the real HIP
// headers are used. It maps the HIP runtime names a kernel solution typically needs onto CUDA.
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define hipStream_t cudaStream_t
#define hipError_t cudaError_t
#define hipSuccess cudaSuccess
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError
#define hipGetErrorString cudaGetErrorString
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemsetAsync cudaMemsetAsync
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipLaunchKernelGGL(kernel, grid, block, shared, stream, ...) \
  kernel<<<(grid), (block), (shared), (stream)>>>(__VA_ARGS__)
#define __hip_bfloat16 __nv_bfloat16
#define __hip_bfloat162 __nv_bfloat162

// HIP's warp shuffles take no lane mask; CUDA's take one (all lanes here).
#define __shfl_xor(value, lane_mask, ...) __shfl_xor_sync(0xffffffffu, (value), (lane_mask), ##__VA_ARGS__)
#define __shfl_down(value, delta, ...) __shfl_down_sync(0xffffffffu, (value), (delta), ##__VA_ARGS__)
#define __shfl_up(value, delta, ...) __shfl_up_sync(0xffffffffu, (value), (delta), ##__VA_ARGS__)
#define __shfl(value, lane, ...) __shfl_sync(0xffffffffu, (value), (lane), ##__VA_ARGS__)
