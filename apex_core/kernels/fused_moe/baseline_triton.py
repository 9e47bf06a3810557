"""Baseline fused MoE (gate_up grouped GEMM with the routing gather) in Triton, vLLM style.

Two steps, as vLLM's fused_moe does them:
1. Align: sort the (token, slot) rows by expert with torch ops and pad each expert's run to a
   multiple of BLOCK_M, giving the sorted row ids, one expert per block of BLOCK_M rows, and the
   padded total. Rows routed to another rank (-1) form a last run whose blocks write zeros.
2. Grouped GEMM: one program per (block of rows, block of N) gathers its rows of x, multiplies
   them by its expert's weights with tl.dot in fp32 and scatters the results to their slots.

Correct for any token count and size, with the headroom a real kernel leaves: one fixed tile
configuration (vLLM's untuned default) whatever the token count, so decode batches pad every
expert's few rows to 64; and the align step is a dozen small torch kernels.

Under Triton's CPU interpreter (TRITON_INTERPRET=1) only, tiles are upcast to fp32 before tl.dot:
the interpreter of Triton 3.x multiplies bf16 tiles as raw 16-bit integers. On a GPU the flag is
off and the dot runs on bf16 tiles.
"""

import os

import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 64, 64, 32, 8
_UPCAST_DOT = os.environ.get("TRITON_INTERPRET", "0") == "1"


def _moe_align_block_size(topk_ids: torch.Tensor, num_experts: int, block_m: int):
    """Sorted row ids padded per expert, the expert of each block (-1: zero rows), the padded total."""
    flat = topk_ids.reshape(-1).to(torch.int64)
    num_rows = flat.numel()
    device = flat.device
    # Rows for experts on other ranks (-1) go to one more bucket after the local experts.
    bucket = torch.where(flat < 0, torch.full_like(flat, num_experts), flat)
    counts = torch.zeros(num_experts + 1, dtype=torch.int64, device=device)
    counts.scatter_add_(0, bucket, torch.ones_like(bucket))
    padded = (counts + block_m - 1) // block_m * block_m
    padded_end = torch.cumsum(padded, 0)
    padded_start = padded_end - padded
    order = torch.argsort(bucket, stable=True)
    sorted_bucket = bucket[order]
    rank = torch.arange(num_rows, device=device) - (torch.cumsum(counts, 0) - counts)[sorted_bucket]
    max_blocks = triton.cdiv(num_rows + (num_experts + 1) * (block_m - 1), block_m)
    sorted_rows = torch.full((max_blocks * block_m,), num_rows, dtype=torch.int32, device=device)
    sorted_rows[padded_start[sorted_bucket] + rank] = order.to(torch.int32)
    block_start = torch.arange(max_blocks, device=device) * block_m
    block_bucket = torch.searchsorted(padded_end, block_start, right=True)
    block_expert = torch.where(block_bucket < num_experts, block_bucket, torch.full_like(block_bucket, -1))
    return sorted_rows, block_expert.to(torch.int32), padded_end[-1:].to(torch.int32)


@triton.jit
def _fused_moe_kernel(
    x_ptr,
    w_ptr,
    out_ptr,
    sorted_rows_ptr,
    block_expert_ptr,
    padded_total_ptr,
    N,
    K,
    num_rows,
    top_k,
    num_sorted_slots,
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
    # Grouped ordering of the (row block, column block) grid for L2 reuse.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(num_sorted_slots, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    if pid_m * BLOCK_M >= tl.load(padded_total_ptr):
        return

    rows = tl.load(sorted_rows_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    row_mask = rows < num_rows
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    out_ptrs = out_ptr + rows[:, None] * stride_om + offs_n[None, :]
    out_mask = row_mask[:, None] & n_mask[None, :]
    expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    if expert == -1:
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


def fused_moe(x: torch.Tensor, w: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
    tokens, hidden = x.shape
    num_experts, n, _ = w.shape
    top_k = topk_ids.shape[1]
    x = x.contiguous()
    w = w.contiguous()
    out = torch.empty((tokens, top_k, n), dtype=x.dtype, device=x.device)
    if tokens == 0:
        return out
    sorted_rows, block_expert, padded_total = _moe_align_block_size(topk_ids, num_experts, BLOCK_M)
    num_sorted_slots = sorted_rows.numel()
    grid = (triton.cdiv(num_sorted_slots, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
    _fused_moe_kernel[grid](
        x,
        w,
        out,
        sorted_rows,
        block_expert,
        padded_total,
        n,
        hidden,
        tokens * top_k,
        top_k,
        num_sorted_slots,
        x.stride(0),
        w.stride(0),
        w.stride(1),
        out.stride(1),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
        GROUP_M=GROUP_M,
        UPCAST_DOT=_UPCAST_DOT,
    )
    return out
