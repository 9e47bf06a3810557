// Our RMSNorm in HIP for Llama-3.1-8B (hidden 4096, bf16): the bar an agent's solution is measured against.
//
// What it changes from the baseline, and why that is faster:
// - 16-byte vector accesses: each thread loads its slice of the row as uint4 words (8 bf16 values)
//   instead of one 2-byte element per instruction, a quarter of the memory instructions per byte
//   at full coalescing; bf16 -> fp32 is a 16-bit shift of each half-word.
// - One pass over memory: the row stays in registers between the reduction and the output, so x is
//   read once (the baseline reads it twice), and the weight is loaded together with x before the
//   reduction rather than after it, so its latency hides behind the row's.
// - The block is sized to the row: 512 threads for a 4096-wide row, one uint4 of x and one of the
//   weight per thread, so the reduction, not a strided loop, sets the latency of a decode-sized call.
// - The reduction is warp shuffles plus a single barrier: each warp's partial goes to shared
//   memory and every thread adds the partials itself, instead of a second reduction and broadcast.
// Rows whose width is not a multiple of 8 or whose pointers are not 16-byte aligned take a scalar
// fallback with the baseline's structure, so every shape stays correct. No warp size is assumed
// (warpSize is 64 on AMD, 32 on NVIDIA).
#include <hip/hip_runtime.h>
#include <torch/extension.h>
#include <ATen/hip/HIPContext.h>

#include <algorithm>
#include <cstdint>

namespace {

constexpr int kVec = 8;           // bf16 values per 16-byte word
constexpr int kMaxThreads = 1024;
constexpr int kMaxVecsPerThread = 4;

__device__ __forceinline__ float low_bf16(uint32_t word) { return __uint_as_float(word << 16); }
__device__ __forceinline__ float high_bf16(uint32_t word) { return __uint_as_float(word & 0xffff0000u); }

__device__ __forceinline__ uint32_t pack_bf16(float low, float high) {
  const at::BFloat16 lo(low), hi(high);  // round to nearest even
  return static_cast<uint32_t>(lo.x) | (static_cast<uint32_t>(hi.x) << 16);
}

__device__ __forceinline__ float sum_of_squares(const uint4& v) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float a = low_bf16(words[k]), b = high_bf16(words[k]);
    sum += a * a + b * b;
  }
  return sum;
}

__device__ __forceinline__ uint4 normalize(const uint4& v, const uint4& w, float inv_rms) {
  const uint32_t xs[4] = {v.x, v.y, v.z, v.w};
  const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
  uint32_t out[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    out[k] = pack_bf16(low_bf16(xs[k]) * inv_rms * low_bf16(ws[k]), high_bf16(xs[k]) * inv_rms * high_bf16(ws[k]));
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// Sum over the block with one barrier: warps reduce by shuffles, every thread adds the partials.
__device__ __forceinline__ float block_sum(float value, float* partial) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) value += __shfl_xor(value, offset);
  const int warps = (blockDim.x + warpSize - 1) / warpSize;
  if (threadIdx.x % warpSize == 0) partial[threadIdx.x / warpSize] = value;
  __syncthreads();
  float total = 0.0f;
  for (int k = 0; k < warps; ++k) total += partial[k];
  return total;
}

template <int VECS>
__global__ void __launch_bounds__(kMaxThreads) rms_norm_vec_kernel(uint4* __restrict__ out, const uint4* __restrict__ x,
                                                                  const uint4* __restrict__ weight, int vecs_per_row,
                                                                  float inv_hidden, float eps) {
  __shared__ float partial[kMaxThreads / 32];
  const int64_t offset = static_cast<int64_t>(blockIdx.x) * vecs_per_row;
  uint4 xv[VECS], wv[VECS];
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < VECS; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < vecs_per_row) {
      xv[k] = x[offset + i];
      wv[k] = weight[i];
    } else {
      xv[k] = make_uint4(0u, 0u, 0u, 0u);
      wv[k] = xv[k];
    }
  }
#pragma unroll
  for (int k = 0; k < VECS; ++k) sum += sum_of_squares(xv[k]);
  const float inv_rms = rsqrtf(block_sum(sum, partial) * inv_hidden + eps);
#pragma unroll
  for (int k = 0; k < VECS; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < vecs_per_row) out[offset + i] = normalize(xv[k], wv[k], inv_rms);
  }
}

// Any width, any alignment: the baseline's two passes with scalar accesses.
__global__ void rms_norm_scalar_kernel(at::BFloat16* out, const at::BFloat16* x, const at::BFloat16* weight, int hidden,
                                       float eps) {
  __shared__ float partial[kMaxThreads / 32];
  const int64_t offset = static_cast<int64_t>(blockIdx.x) * hidden;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = static_cast<float>(x[offset + i]);
    sum += v * v;
  }
  const float inv_rms = rsqrtf(block_sum(sum, partial) / hidden + eps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    out[offset + i] = static_cast<at::BFloat16>(static_cast<float>(x[offset + i]) * inv_rms * static_cast<float>(weight[i]));
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <int VECS>
void launch_vec(hipStream_t stream, int64_t rows, int threads, at::BFloat16* out, const at::BFloat16* x,
                const at::BFloat16* w, int hidden, float eps) {
  hipLaunchKernelGGL(rms_norm_vec_kernel<VECS>, dim3(static_cast<unsigned>(rows)), dim3(threads), 0, stream,
                     reinterpret_cast<uint4*>(out), reinterpret_cast<const uint4*>(x), reinterpret_cast<const uint4*>(w),
                     hidden / kVec, 1.0f / hidden, eps);
}

}  // namespace

torch::Tensor rms_norm(torch::Tensor x, torch::Tensor weight, double eps) {
  TORCH_CHECK(x.scalar_type() == at::kBFloat16 && weight.scalar_type() == at::kBFloat16, "expects bfloat16 x and weight");
  auto rows = x.contiguous();
  auto w = weight.contiguous();
  const int hidden = static_cast<int>(rows.size(-1));
  const int64_t n_rows = rows.numel() / hidden;
  auto out = torch::empty_like(rows);
  if (n_rows == 0) return out;
  hipStream_t stream = c10::hip::getCurrentHIPStream();
  auto* out_ptr = out.data_ptr<at::BFloat16>();
  const auto* x_ptr = rows.data_ptr<at::BFloat16>();
  const auto* w_ptr = w.data_ptr<at::BFloat16>();
  const float epsilon = static_cast<float>(eps);
  const int vecs = hidden / kVec;
  const bool vectorizable = hidden % kVec == 0 && aligned16(out_ptr) && aligned16(x_ptr) && aligned16(w_ptr) &&
                            vecs <= kMaxThreads * kMaxVecsPerThread;
  if (!vectorizable) {
    hipLaunchKernelGGL(rms_norm_scalar_kernel, dim3(static_cast<unsigned>(n_rows)), dim3(256), 0, stream, out_ptr, x_ptr,
                       w_ptr, hidden, epsilon);
    return out;
  }
  // One word per thread up to 1024 threads (a multiple of 64, a whole number of warps on either
  // vendor); wider rows give each thread up to four words.
  const int per_thread = (vecs + kMaxThreads - 1) / kMaxThreads;
  const int threads = std::max(64, ((vecs + per_thread - 1) / per_thread + 63) / 64 * 64);
  switch (per_thread) {
    case 1: launch_vec<1>(stream, n_rows, threads, out_ptr, x_ptr, w_ptr, hidden, epsilon); break;
    case 2: launch_vec<2>(stream, n_rows, threads, out_ptr, x_ptr, w_ptr, hidden, epsilon); break;
    case 3: launch_vec<3>(stream, n_rows, threads, out_ptr, x_ptr, w_ptr, hidden, epsilon); break;
    default: launch_vec<4>(stream, n_rows, threads, out_ptr, x_ptr, w_ptr, hidden, epsilon); break;
  }
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("rms_norm", &rms_norm); }
