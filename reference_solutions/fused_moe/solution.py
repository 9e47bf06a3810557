"""Our fused MoE gate_up GEMM (bf16): GPT-OSS-20B (32 experts, top-4, 2880 -> 5760) and DeepSeek-R1
on one rank of 16-way expert parallelism (16 local experts of 256, top-8, 7168 -> 4096; slots routed
to other ranks are -1 and their output rows zero).

What it changes from the baseline, and why that is faster:
- Tile shapes chosen by the rows each expert really gets (tokens x top_k x VALID_SLOT_FRACTION /
  experts) instead of one fixed 64x64x32 tile. For DeepSeek-R1 only about 1.1 of a dispatched
  token's 8 slots are local, so the estimate is tokens x 8 x 0.135 / 16. Decode batches (a row or two per expert) use 16-row tiles, so an expert's weights
  are streamed once with 4x less padded MMA work and long 128-wide K steps with 4 pipeline
  stages keep enough loads in flight to run near HBM bandwidth. Mid-size batches (tens of rows
  per expert, still memory-bound) use a row tile of 1.5x the average rows or more, so most
  experts' weights are read once, not once per 64 rows. Prefill (hundreds of rows per expert)
  uses 128x256x64 tiles with 8 warps: 4x the arithmetic per byte loaded of a 64x64 tile, which
  is what lets the MMA units, not shared-memory traffic, set the pace.
- The align step is three small Triton kernels (per-chunk histogram, one-program scan that also
  writes each block's expert and row count, atomic scatter of row ids) instead of a dozen torch
  kernels (sort, scatter, cumsum, searchsorted, ...): fewer launches, which matters most when the
  GEMM itself takes tens of microseconds.
- Padding slots are never written or read: each block carries the end of its expert's real rows,
  so the GEMM masks by slot instead of by a sentinel row id.

The scatter's atomics order the rows of one expert arbitrarily, but every output row is computed
by the same K loop wherever it sits in its tile, so results do not depend on that order.
Under Triton's CPU interpreter only, tiles are upcast to fp32 before tl.dot (the interpreter
multiplies bf16 tiles as raw integers); on a GPU the dot runs on bf16 tiles.
"""

import os

import torch
import triton
import triton.language as tl

# apex:model-constants
_UPCAST_DOT = os.environ.get("TRITON_INTERPRET", "0") == "1"
_CHUNK = 1024


@triton.jit
def _count_rows(ids_ptr, counts_ptr, num_rows, num_experts, CHUNK: tl.constexpr, NUM_BUCKETS: tl.constexpr):
    offs = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    valid = offs < num_rows
    expert = tl.load(ids_ptr + offs, mask=valid, other=0)
    # Bucket num_experts holds rows for other ranks (-1); the last bucket collects padding lanes.
    bucket = tl.where(expert < 0, num_experts, expert)
    bucket = tl.where(valid, bucket, NUM_BUCKETS - 1)
    tl.atomic_add(counts_ptr + tl.arange(0, NUM_BUCKETS), tl.histogram(bucket, NUM_BUCKETS))


@triton.jit
def _plan_blocks(
    counts_ptr,
    cursor_ptr,
    block_expert_ptr,
    block_rows_end_ptr,
    padded_total_ptr,
    num_experts,
    num_blocks,
    BLOCK_M: tl.constexpr,
    NUM_BUCKETS: tl.constexpr,
    BLOCK_B: tl.constexpr,
):
    buckets = tl.arange(0, NUM_BUCKETS)
    real = buckets <= num_experts
    counts = tl.where(real, tl.load(counts_ptr + buckets), 0)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    padded_end = tl.cumsum(padded, axis=0)
    padded_start = padded_end - padded
    tl.store(cursor_ptr + buckets, padded_start)
    tl.store(padded_total_ptr, tl.sum(padded, axis=0))
    rows_end = padded_start + counts
    for first in range(0, num_blocks, BLOCK_B):
        blocks = first + tl.arange(0, BLOCK_B)
        slot = blocks * BLOCK_M
        # A block's bucket: how many real buckets end at or before its first slot.
        bucket = tl.sum(((padded_end[None, :] <= slot[:, None]) & real[None, :]).to(tl.int32), axis=1)
        end = tl.sum(tl.where(buckets[None, :] == bucket[:, None], rows_end[None, :], 0), axis=1)
        in_range = blocks < num_blocks
        tl.store(block_expert_ptr + blocks, tl.where(bucket < num_experts, bucket, -1), mask=in_range)
        tl.store(block_rows_end_ptr + blocks, end, mask=in_range)


@triton.jit
def _scatter_rows(ids_ptr, cursor_ptr, sorted_rows_ptr, num_rows, num_experts, CHUNK: tl.constexpr):
    offs = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    valid = offs < num_rows
    expert = tl.load(ids_ptr + offs, mask=valid, other=0)
    bucket = tl.where(expert < 0, num_experts, expert)
    slot = tl.atomic_add(cursor_ptr + bucket, 1, mask=valid)
    tl.store(sorted_rows_ptr + slot, offs, mask=valid)


@triton.jit
def _grouped_gemm(
    x_ptr,
    w_ptr,
    out_ptr,
    sorted_rows_ptr,
    block_expert_ptr,
    block_rows_end_ptr,
    padded_total_ptr,
    N,
    K,
    top_k,
    num_blocks,
    stride_xm,
    stride_we,
    stride_wn,
    stride_om,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_blocks - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    if pid_m * BLOCK_M >= tl.load(padded_total_ptr):
        return

    slots = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = slots < tl.load(block_rows_end_ptr + pid_m)
    rows = tl.load(sorted_rows_ptr + slots, mask=row_mask, other=0).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    out_ptrs = out_ptr + rows[:, None] * stride_om + offs_n[None, :]
    out_mask = row_mask[:, None] & n_mask[None, :]
    expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    if expert < 0:
        tl.store(out_ptrs, tl.zeros([BLOCK_M, BLOCK_N], dtype=out_ptr.dtype.element_ty), mask=out_mask)
        return

    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + (rows // top_k)[:, None] * stride_xm + offs_k[None, :]
    w_ptrs = w_ptr + expert * stride_we + offs_n[None, :] * stride_wn + offs_k[:, None]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(x_ptrs, mask=row_mask[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(w_ptrs, mask=(offs_k[:, None] < k_left) & n_mask[None, :], other=0.0)
        if UPCAST_DOT:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=out_mask)


def _config(rows_per_expert: float) -> dict:
    """Tile shape by the rows an expert gets: small tiles for decode, large ones for prefill.

    The row tile is about 1.5x the average rows per expert or more, so most experts fit in one row
    tile and their weights are streamed once while the load is still memory-bound.
    """
    if rows_per_expert <= 12:
        config = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 1, "num_warps": 4, "num_stages": 4}
    elif rows_per_expert <= 24:
        config = {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 4, "num_warps": 4, "num_stages": 4}
    elif rows_per_expert <= 48:
        config = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 4}
    elif rows_per_expert <= 256:
        config = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 4}
    else:
        config = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}
    if torch.version.hip is not None:
        # AMD: two LDS stages is the pipeliner's sweet spot; keep the prefill tile within LDS.
        config["num_stages"] = 2
        config["BLOCK_N"] = min(config["BLOCK_N"], 128)
    return config


def fused_moe(x: torch.Tensor, w: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
    tokens, hidden = x.shape
    num_experts, n, _ = w.shape
    top_k = topk_ids.shape[1]
    x = x.contiguous()
    w = w.contiguous()
    out = torch.empty((tokens, top_k, n), dtype=x.dtype, device=x.device)
    if tokens == 0:
        return out
    config = _config(tokens * top_k * VALID_SLOT_FRACTION / num_experts)
    block_m = config["BLOCK_M"]
    ids = topk_ids.contiguous()
    num_rows = tokens * top_k
    num_buckets = triton.next_power_of_2(num_experts + 2)
    num_blocks = triton.cdiv(num_rows + (num_experts + 1) * (block_m - 1), block_m)
    device = x.device

    counts = torch.zeros(num_buckets, dtype=torch.int32, device=device)
    cursor = torch.empty(num_buckets, dtype=torch.int32, device=device)
    block_expert = torch.empty(num_blocks, dtype=torch.int32, device=device)
    block_rows_end = torch.empty(num_blocks, dtype=torch.int32, device=device)
    padded_total = torch.empty(1, dtype=torch.int32, device=device)
    sorted_rows = torch.empty(num_blocks * block_m, dtype=torch.int32, device=device)
    chunks = triton.cdiv(num_rows, _CHUNK)
    _count_rows[(chunks,)](ids, counts, num_rows, num_experts, CHUNK=_CHUNK, NUM_BUCKETS=num_buckets)
    _plan_blocks[(1,)](
        counts, cursor, block_expert, block_rows_end, padded_total, num_experts, num_blocks,
        BLOCK_M=block_m, NUM_BUCKETS=num_buckets, BLOCK_B=128,
    )
    _scatter_rows[(chunks,)](ids, cursor, sorted_rows, num_rows, num_experts, CHUNK=_CHUNK)

    grid = (num_blocks * triton.cdiv(n, config["BLOCK_N"]),)
    _grouped_gemm[grid](
        x, w, out, sorted_rows, block_expert, block_rows_end, padded_total,
        n, hidden, top_k, num_blocks,
        x.stride(0), w.stride(0), w.stride(1), out.stride(1),
        UPCAST_DOT=_UPCAST_DOT, **config,
    )
    return out
