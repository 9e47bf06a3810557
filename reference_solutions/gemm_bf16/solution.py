"""Our bf16 GEMM y = x @ w^T: the bar an agent's solution is measured against.

The projections: DeepSeek-R1's attention output projection (K 16384, N 7168), GPT-OSS-20B's fused
QKV projection (K 2880, N 5120), the MLP's fused gate_up projection of Llama-3.1-8B (K 4096,
N 28672) and of Qwen3.5-27B (K 5120, N 34816).

What it changes from the baseline (one 64x64x32 tile, 4 warps, 2 stages for every shape), and why
that is faster:
- Prefill (M > 256): 128x256x64 tiles with 8 warps and 3 stages. Each K step loads 48 KB and does
  4 MFLOP: 5.3x the arithmetic per byte of shared memory of a 64x64x32 tile, so the tensor cores,
  not the loads, set the pace, and 3 stages hide the global-memory latency. Falls back to 128x128
  when the larger tile would leave much of the last wave of SMs idle.
- Decode (M <= 64): 16- to 64-row tiles that cover all tokens, so the weight matrix is streamed
  exactly once, with 128- or 256-wide K steps and 3-4 stages: several 8-32 KB loads in flight per
  SM, which is what HBM bandwidth needs. The column tile shrinks (128 down to 16) until there are
  at least two programs per SM, since a narrow weight (small N) would otherwise leave most SMs idle.
- In between (64 < M <= 256): one row tile of up to 128 and a column tile sized the same way.
- No masks on K when the tile divides K, so every load is a full vector.

Under Triton's CPU interpreter only, tiles are upcast to fp32 before tl.dot (the interpreter
multiplies bf16 tiles as raw integers); on a GPU the dot runs on bf16 tiles. On AMD the prefill
tile is 128x128 with 2 stages (LDS budget and the AMD pipeliner's preference).
"""

import functools
import os

import torch
import triton
import triton.language as tl

_UPCAST_DOT = os.environ.get("TRITON_INTERPRET", "0") == "1"
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
def _matmul_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
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
    UPCAST_DOT: tl.constexpr,
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
        if UPCAST_DOT:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    y_ptrs = y_ptr + rows[:, None].to(tl.int64) * stride_ym + cols[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def _column_tile(m_tiles: int, n: int, widest: int, narrowest: int, programs: int) -> int:
    """The widest column tile that still gives ``programs`` programs (or the narrowest allowed)."""
    block_n = widest
    while block_n > narrowest and m_tiles * triton.cdiv(n, block_n) < programs:
        block_n //= 2
    return block_n


def _wave_efficiency(tiles: int, sms: int) -> float:
    """Share of the launched waves' SM slots that hold a tile."""
    return tiles / (triton.cdiv(tiles, sms) * sms)


def _config(m: int, n: int, k: int, sms: int) -> dict:
    hip = torch.version.hip is not None
    if m <= 64:
        block_m = max(16, triton.next_power_of_2(m))
        block_n = _column_tile(1, n, 128, 16, 2 * sms)
        # Narrow column tiles take longer K steps so each program keeps as many bytes in flight.
        block_k = 256 if block_n <= 32 else 128
        stages = 4 if block_m <= 32 else 3
        config = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": 1, "num_warps": 4, "num_stages": stages}
    elif m <= 256:
        block_m = min(128, triton.next_power_of_2(m))
        block_n = _column_tile(triton.cdiv(m, block_m), n, 128, 32, 2 * sms)
        config = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 4}
    else:
        # 128x256 does ~15% more work per byte than 128x128; take it unless it wastes more of the
        # last wave of tiles.
        wide = _wave_efficiency(triton.cdiv(m, 128) * triton.cdiv(n, 256), sms)
        narrow = _wave_efficiency(triton.cdiv(m, 128) * triton.cdiv(n, 128), sms)
        block_n = 256 if wide >= 0.85 * narrow and not hip else 128
        config = {"BLOCK_M": 128, "BLOCK_N": block_n, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}
    if hip:
        config["num_stages"] = 2
    return config


def gemm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    n = w.shape[0]
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m == 0:
        return y
    x = x if x.stride(1) == 1 else x.contiguous()
    w = w if w.stride(1) == 1 else w.contiguous()
    config = _config(m, n, k, _multiprocessors(x))
    grid = (triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"]),)
    _matmul_kernel[grid](
        x, w, y, m, n, k, x.stride(0), w.stride(0), y.stride(0),
        EVEN_K=k % config["BLOCK_K"] == 0, UPCAST_DOT=_UPCAST_DOT, **config,
    )
    return y
