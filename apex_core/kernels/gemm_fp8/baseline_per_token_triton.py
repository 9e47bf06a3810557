"""Baseline fp8 w8a8 GEMM (per-token activation, per-channel weight scales) in Triton.

Written the way vLLM's Triton scaled-mm fallback is: a (BLOCK_M x BLOCK_N) tile per program with
grouped ordering, a K loop of tl.dot on the fp8 tiles into an fp32 accumulator, and the scales
applied once in the epilogue (acc * x_scale[row] * w_scale[col]) before the bf16 store. Correct for
any M, N, K, with the headroom of a single configuration: 64x64x64 tiles, 4 warps, 2 stages for
every shape, too small to feed the fp8 matrix cores at prefill sizes and with too few loads in
flight at decode sizes.

Hopper's fp8 tensor cores accumulate with fewer bits than fp32, so partial products are promoted
into the fp32 accumulator every K step (max_num_imprecise_acc = BLOCK_K; other GPUs ignore it).
"""

import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 64, 64, 64, 8


@triton.jit
def _scaled_mm_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    x_scale_ptr,
    w_scale_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_wn,
    stride_ym,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :]
    w_ptrs = w_ptr + offs_n[None, :] * stride_wn + offs_k[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(x_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(w_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc, max_num_imprecise_acc=BLOCK_K)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K

    x_scale = tl.load(x_scale_ptr + offs_m)
    w_scale = tl.load(w_scale_ptr + offs_n)
    y = acc * x_scale[:, None] * w_scale[None, :]
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    y_ptrs = y_ptr + rows[:, None] * stride_ym + cols[None, :]
    tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def gemm_fp8(x_q: torch.Tensor, x_scale: torch.Tensor, w_q: torch.Tensor, w_scale: torch.Tensor) -> torch.Tensor:
    m, k = x_q.shape
    n = w_q.shape[0]
    y = torch.empty((m, n), dtype=torch.bfloat16, device=x_q.device)
    if m == 0:
        return y
    x_q = x_q.contiguous()
    w_q = w_q.contiguous()
    grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
    _scaled_mm_kernel[grid](
        x_q,
        w_q,
        y,
        x_scale.contiguous(),
        w_scale.contiguous(),
        m,
        n,
        k,
        x_q.stride(0),
        w_q.stride(0),
        y.stride(0),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
        GROUP_M=GROUP_M,
        num_warps=4,
        num_stages=2,
    )
    return y
