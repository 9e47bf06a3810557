"""Baseline fp8 GEMM with DeepSeek's block scales (1x128 activations, 128x128 weights) in Triton.

Written the way vLLM's w8a8_block_fp8_matmul Triton kernel is, with the configuration it uses when
no tuned one exists for the shape: 64x128 tiles, a K step of one 128-wide scale block, group size
32, 4 warps, 2 stages. Each K step multiplies the fp8 tiles with tl.dot, scales the partial
product by the rows' activation scales and the columns' weight-block scales, and adds it to an
fp32 accumulator (which also promotes Hopper's reduced-precision fp8 accumulation every 128 K).
Correct for any M (N and K are padded out with masks), with the headroom of a single
configuration for every token count.
"""

import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 64, 128, 128, 32
SCALE_BLOCK = 128


@triton.jit
def _block_fp8_matmul_kernel(
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
    stride_xs_m,
    stride_ws_n,
    SCALE_BLOCK: tl.constexpr,
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
    x_scale_ptrs = x_scale_ptr + offs_m * stride_xs_m
    w_scale_ptrs = w_scale_ptr + (offs_n // SCALE_BLOCK) * stride_ws_n
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(x_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(w_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        scale_k = (k * BLOCK_K) // SCALE_BLOCK
        a_scale = tl.load(x_scale_ptrs + scale_k)
        b_scale = tl.load(w_scale_ptrs + scale_k)
        acc += tl.dot(a, b) * a_scale[:, None] * b_scale[None, :]
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    y_ptrs = y_ptr + rows[:, None] * stride_ym + cols[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def gemm_fp8(x_q: torch.Tensor, x_scale: torch.Tensor, w_q: torch.Tensor, w_scale: torch.Tensor) -> torch.Tensor:
    m, k = x_q.shape
    n = w_q.shape[0]
    y = torch.empty((m, n), dtype=torch.bfloat16, device=x_q.device)
    if m == 0:
        return y
    x_q = x_q.contiguous()
    w_q = w_q.contiguous()
    x_scale = x_scale.contiguous()
    w_scale = w_scale.contiguous()
    grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
    _block_fp8_matmul_kernel[grid](
        x_q,
        w_q,
        y,
        x_scale,
        w_scale,
        m,
        n,
        k,
        x_q.stride(0),
        w_q.stride(0),
        y.stride(0),
        x_scale.stride(0),
        w_scale.stride(0),
        SCALE_BLOCK=SCALE_BLOCK,
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
        GROUP_M=GROUP_M,
        num_warps=4,
        num_stages=2,
    )
    return y
