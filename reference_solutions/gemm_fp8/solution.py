"""Our fp8 w8a8 GEMM with per-token scales: the bar an agent's solution is measured against.

The projection: the MLP's fused gate_up projection, K 4096, N 28672 (Llama-3.1-8B) or K 5120,
N 34816 (Qwen3.5-27B); scales per token for x and per output channel for w.

What it changes from the baseline (one 64x64x64 tile, 4 warps, 2 stages for every shape), and why
that is faster:
- Prefill (M > 256): 128x128x128 tiles with 8 warps and 4 stages. Each K step loads 32 KB and does
  4 MFLOP, 4x the arithmetic per byte of shared memory of the baseline's tile, so the fp8 tensor
  cores set the pace. (A 128x256 tile would need more than 255 registers per thread once the
  promoted fp32 accumulator sits next to the tensor cores' partial one.)
- Decode (M <= 64): 16- to 64-row tiles that cover all tokens, so the weights are streamed exactly
  once, with 256-byte K steps and 3-4 stages to keep enough loads in flight for HBM bandwidth. The
  column tile shrinks (128 down to 16) until there are at least two programs per SM.
- In between (64 < M <= 256): one row tile of up to 128 and a column tile sized the same way.
- No masks on K when the tile divides K, so every load is a full vector.
Like the baseline, partial fp8 products are promoted into the fp32 accumulator once per K step
(Hopper's fp8 tensor cores accumulate with fewer bits; other GPUs ignore the setting).
On AMD the pipeline has 2 stages (the AMD pipeliner's preference).
"""

import functools

import torch
import triton
import triton.language as tl

_DEFAULT_SMS = 132


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _multiprocessors(x: torch.Tensor) -> int:
    if not x.is_cuda:
        return _DEFAULT_SMS
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    return _sm_count(index)


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
    EVEN_K: tl.constexpr,
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
    x_ptrs = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm + offs_k[None, :]
    w_ptrs = w_ptr + offs_n[None, :].to(tl.int64) * stride_wn + offs_k[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(x_ptrs)
            b = tl.load(w_ptrs)
        else:
            a = tl.load(x_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
            b = tl.load(w_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc, max_num_imprecise_acc=BLOCK_K)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K

    y = acc * tl.load(x_scale_ptr + offs_m)[:, None] * tl.load(w_scale_ptr + offs_n)[None, :]
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    y_ptrs = y_ptr + rows[:, None].to(tl.int64) * stride_ym + cols[None, :]
    tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def _column_tile(m_tiles: int, n: int, widest: int, narrowest: int, programs: int) -> int:
    """The widest column tile that still gives ``programs`` programs (or the narrowest allowed)."""
    block_n = widest
    while block_n > narrowest and m_tiles * triton.cdiv(n, block_n) < programs:
        block_n //= 2
    return block_n


def _config(m: int, n: int, k: int, sms: int) -> dict:
    if m <= 64:
        block_m = max(16, triton.next_power_of_2(m))
        block_n = _column_tile(1, n, 128, 16, 2 * sms)
        # The longest K step that divides K (no masks), 256 with masks when neither does.
        block_k = 128 if k % 256 and k % 128 == 0 else 256
        stages = 4 if block_m <= 32 else 3
        config = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": 1, "num_warps": 4, "num_stages": stages}
    elif m <= 256:
        block_m = min(128, triton.next_power_of_2(m))
        block_n = _column_tile(triton.cdiv(m, block_m), n, 128, 32, 2 * sms)
        config = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": 128, "GROUP_M": 8, "num_warps": 4, "num_stages": 4}
    else:
        config = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8, "num_warps": 8, "num_stages": 4}
    if torch.version.hip is not None:
        config["num_stages"] = 2
    return config


def gemm_fp8(x_q: torch.Tensor, x_scale: torch.Tensor, w_q: torch.Tensor, w_scale: torch.Tensor) -> torch.Tensor:
    m, k = x_q.shape
    n = w_q.shape[0]
    y = torch.empty((m, n), dtype=torch.bfloat16, device=x_q.device)
    if m == 0:
        return y
    x_q = x_q if x_q.stride(1) == 1 else x_q.contiguous()
    w_q = w_q if w_q.stride(1) == 1 else w_q.contiguous()
    config = _config(m, n, k, _multiprocessors(x_q))
    grid = (triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"]),)
    _scaled_mm_kernel[grid](
        x_q, w_q, y, x_scale.contiguous(), w_scale.contiguous(), m, n, k,
        x_q.stride(0), w_q.stride(0), y.stride(0),
        EVEN_K=k % config["BLOCK_K"] == 0, **config,
    )
    return y
