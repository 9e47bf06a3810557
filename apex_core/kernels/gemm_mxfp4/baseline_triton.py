"""Baseline weight-only MXFP4 GEMM y = x @ dequant(W)^T in Triton: unpack in registers, bf16 dot.

How weight-only MXFP4 runs on a GPU without FP4 matrix instructions (Hopper): each K step of 32
values (one MX block) loads a (BLOCK_N, 16) tile of packed bytes and the block's one E8M0 scale per
row, splits each byte into its low nibble (value 2j) and high nibble (value 2j + 1), decodes the
E2M1 codes by bit arithmetic into fp32, multiplies by 2^(e - 127) (exact) and casts to bf16
(exact), and multiplies with the even and odd columns of x in two bf16 dots with an fp32
accumulator. One configuration for every shape: 32x64 tiles, a 32-wide K step, 4 warps, 2 stages:
at decode it is 90 programs for N 5760 (fewer than the SMs), each streaming 16-byte row pieces, so
the HBM bandwidth is far from used; at prefill the tile is small for the tensor cores.

K must be a multiple of 32 (the MX block). Under the CPU interpreter Apex's interpreter fixes
(apex_core/kernels/interpreter_fixes.py) make the bf16 dot exact.
"""

import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 32, 64, 32


@triton.jit
def _e2m1_to_float(code):
    """4-bit E2M1 code (int32) -> fp32, by building the float's bits: sign, exponent, mantissa."""
    magnitude = code & 7
    exponent = magnitude >> 1
    mantissa = magnitude & 1
    # exponent 0 is the subnormal 0.5 * mantissa (0 or 0.5 = 2^-1); else 2^(exponent-1) * 1.m.
    bits = tl.where(exponent == 0, mantissa * (126 << 23), ((exponent + 126) << 23) | (mantissa << 22))
    bits = bits | ((code >> 3) << 31)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _mxfp4_matmul_kernel(
    x_ptr, w_ptr, s_ptr, y_ptr, M, N, K,
    stride_xm, stride_wn, stride_sn, stride_ym,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_j = tl.arange(0, BLOCK_K // 2)
    mask_m = offs_m < M
    mask_n = offs_n < N
    x_rows = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm
    w_rows = w_ptr + offs_n[:, None].to(tl.int64) * stride_wn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + 2 * offs_j
        x_mask = mask_m[:, None] & (cols[None, :] < K)
        x_even = tl.load(x_rows + cols[None, :], mask=x_mask, other=0.0)
        x_odd = tl.load(x_rows + cols[None, :] + 1, mask=x_mask, other=0.0)
        packed = tl.load(w_rows + (k0 // 2 + offs_j)[None, :], mask=mask_n[:, None] & (cols[None, :] < K), other=0)
        packed = packed.to(tl.int32)
        e8m0 = tl.load(s_ptr + offs_n.to(tl.int64) * stride_sn + k0 // 32, mask=mask_n, other=127)
        scale = (e8m0.to(tl.int32) << 23).to(tl.float32, bitcast=True)
        w_even = (_e2m1_to_float(packed & 15) * scale[:, None]).to(tl.bfloat16)
        w_odd = (_e2m1_to_float(packed >> 4) * scale[:, None]).to(tl.bfloat16)
        acc = tl.dot(x_even, tl.trans(w_even), acc)
        acc = tl.dot(x_odd, tl.trans(w_odd), acc)
    y_ptrs = y_ptr + offs_m[:, None].to(tl.int64) * stride_ym + offs_n[None, :]
    tl.store(y_ptrs, acc.to(tl.bfloat16), mask=mask_m[:, None] & mask_n[None, :])


def gemm_mxfp4(x: torch.Tensor, w_packed: torch.Tensor, w_scale: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    n = w_packed.shape[0]
    assert k % 32 == 0 and w_packed.shape[1] * 2 == k and w_scale.shape == (n, k // 32)
    x = x.contiguous()
    w_packed = w_packed.contiguous()
    w_scale = w_scale.contiguous()
    y = torch.empty((m, n), dtype=torch.bfloat16, device=x.device)
    if m == 0:
        return y
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    _mxfp4_matmul_kernel[grid](
        x, w_packed, w_scale, y, m, n, k,
        x.stride(0), w_packed.stride(0), w_scale.stride(0), y.stride(0),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4, num_stages=2,
    )
    return y
