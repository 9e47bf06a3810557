"""Baseline MoE layer with a shared expert in Triton, vLLM style: the routed experts through a
grouped GEMM, then the shared expert as a separate dense MLP beside them, then one combine.

Steps, each its own launch (or a dozen small torch kernels for the align):
1. Align: sort the (token, slot) rows by expert and pad each expert's run to BLOCK_M rows.
2. Routed gate_up grouped GEMM -> (tokens * top_k, 2n) bf16; 3. silu(gate) * up -> (.., n);
4. routed down grouped GEMM -> (tokens * top_k, hidden) bf16.
5-7. The shared expert: the same three launches over one "expert" that every token hits.
8. Combine: out[t] = scale * sum_j w[t, j] * y[t, j] + g(t) * shared[t], g(t) = 1, or
   sigmoid(x[t] . shared_gate) for a gated shared expert (Qwen3.5).

Correct for any size, with the headroom a real layer leaves: one fixed 64x64x32 tile whatever the
token count (a decode batch pads each expert's row or two to 64), the gate_up output and the
activation round-trip through memory, the shared expert streams x again in its own launches, and
the align step is many small torch kernels.

Under Triton's CPU interpreter (TRITON_INTERPRET=1) only, tiles are upcast to fp32 before tl.dot:
the interpreter of Triton 3.x multiplies bf16 tiles as raw 16-bit integers. On a GPU the flag is
off and the dot runs on bf16 tiles. Likewise the intermediates (gate_up output, activation, each
slot's down output) are kept in fp32 there: the interpreter casts fp32 to bf16 by truncation, not
to nearest, and four truncations in a row bias the output by more than the tolerance.
"""

import os

import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 64, 64, 32, 8
BLOCK_ELEMENTWISE = 1024
_UPCAST_DOT = os.environ.get("TRITON_INTERPRET", "0") == "1"
_FP32_INTERMEDIATES = _UPCAST_DOT


def _align(topk_ids: torch.Tensor, num_experts: int, block_m: int):
    """Row ids sorted by expert and padded per expert (pad: num_rows), each block's expert, the padded total."""
    flat = topk_ids.reshape(-1).to(torch.int64)
    num_rows = flat.numel()
    device = flat.device
    counts = torch.zeros(num_experts, dtype=torch.int64, device=device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_m - 1) // block_m * block_m
    padded_end = torch.cumsum(padded, 0)
    order = torch.argsort(flat, stable=True)
    sorted_expert = flat[order]
    rank = torch.arange(num_rows, device=device) - (torch.cumsum(counts, 0) - counts)[sorted_expert]
    max_blocks = triton.cdiv(num_rows + num_experts * (block_m - 1), block_m)
    sorted_rows = torch.full((max_blocks * block_m,), num_rows, dtype=torch.int32, device=device)
    sorted_rows[(padded_end - padded)[sorted_expert] + rank] = order.to(torch.int32)
    block_start = torch.arange(max_blocks, device=device) * block_m
    block_expert = torch.searchsorted(padded_end, block_start, right=True).clamp_(max=num_experts - 1)
    return sorted_rows, block_expert.to(torch.int32), padded_end[-1:].to(torch.int32)


@triton.jit
def _grouped_gemm(
    a_ptr, w_ptr, out_ptr, sorted_rows_ptr, block_expert_ptr, padded_total_ptr,
    N, K, num_rows, a_div, num_sorted_slots,
    stride_am, stride_we, stride_wn, stride_om,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):
    """out[row] = a[row // a_div] @ w[expert of row]^T for the sorted rows of one (row, column) tile."""
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
    expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rows // a_div)[:, None] * stride_am + offs_k[None, :]
    w_ptrs = w_ptr + expert * stride_we + offs_n[None, :] * stride_wn + offs_k[:, None]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=row_mask[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(w_ptrs, mask=(offs_k[:, None] < k_left) & n_mask[None, :], other=0.0)
        if UPCAST_DOT:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    out_ptrs = out_ptr + rows[:, None] * stride_om + offs_n[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=row_mask[:, None] & n_mask[None, :])


@triton.jit
def _silu_and_mul(h_ptr, act_ptr, n, BLOCK: tl.constexpr):
    """act[r] = silu(h[r, :n]) * h[r, n:] in fp32, stored in act's dtype; one program per row."""
    row = tl.program_id(0).to(tl.int64)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        gate = tl.load(h_ptr + row * 2 * n + offs, mask=mask, other=0.0).to(tl.float32)
        up = tl.load(h_ptr + row * 2 * n + n + offs, mask=mask, other=0.0).to(tl.float32)
        act = gate / (1.0 + tl.exp(-gate)) * up
        tl.store(act_ptr + row * n + offs, act.to(act_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _combine(
    y_ptr, weights_ptr, shared_ptr, x_ptr, gate_ptr, out_ptr, top_k, hidden, scale,
    HAS_GATE: tl.constexpr, BLOCK: tl.constexpr,
):
    """out[t] = scale * sum_j w[t, j] * y[t, j] + g(t) * shared[t]; one program per token."""
    t = tl.program_id(0).to(tl.int64)
    g = 1.0
    if HAS_GATE:
        dot = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, hidden, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < hidden
            xv = tl.load(x_ptr + t * hidden + offs, mask=mask, other=0.0).to(tl.float32)
            gv = tl.load(gate_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            dot += xv * gv
        g = 1.0 / (1.0 + tl.exp(-tl.sum(dot, axis=0)))
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hidden
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for j in range(top_k):
            w = tl.load(weights_ptr + t * top_k + j)
            acc += w * tl.load(y_ptr + (t * top_k + j) * hidden + offs, mask=mask, other=0.0).to(tl.float32)
        shared = tl.load(shared_ptr + t * hidden + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + t * hidden + offs, (scale * acc + g * shared).to(out_ptr.dtype.element_ty), mask=mask)


def _experts(a: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """(tokens * slots, hidden): each (token, slot) row through its expert's SwiGLU MLP."""
    tokens, slots = ids.shape
    num_experts, two_n, hidden = w13.shape
    n = two_n // 2
    num_rows = tokens * slots
    sorted_rows, block_expert, padded_total = _align(ids, num_experts, BLOCK_M)
    num_sorted_slots = sorted_rows.numel()
    dtype = torch.float32 if _FP32_INTERMEDIATES else a.dtype
    h = torch.empty((num_rows, two_n), dtype=dtype, device=a.device)
    act = torch.empty((num_rows, n), dtype=dtype, device=a.device)
    y = torch.empty((num_rows, hidden), dtype=dtype, device=a.device)
    for src, w, dst, a_div in ((a, w13, h, slots), (act, w2, y, 1)):
        if dst is y:
            _silu_and_mul[(num_rows,)](h, act, n, BLOCK=BLOCK_ELEMENTWISE)
        out_n, k = w.shape[1], w.shape[2]
        grid = (triton.cdiv(num_sorted_slots, BLOCK_M) * triton.cdiv(out_n, BLOCK_N),)
        _grouped_gemm[grid](
            src, w, dst, sorted_rows, block_expert, padded_total,
            out_n, k, num_rows, a_div, num_sorted_slots,
            src.stride(0), w.stride(0), w.stride(1), dst.stride(0),
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, UPCAST_DOT=_UPCAST_DOT,
        )
    return y


def fused_moe_shared(
    x: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor,
    shared_w13: torch.Tensor,
    shared_w2: torch.Tensor,
    shared_gate: torch.Tensor | None,
    routed_scaling_factor: float,
) -> torch.Tensor:
    tokens, hidden = x.shape
    top_k = topk_ids.shape[1]
    out = torch.empty((tokens, hidden), dtype=x.dtype, device=x.device)
    if tokens == 0:
        return out
    x = x.contiguous()
    routed = _experts(x, w13.contiguous(), w2.contiguous(), topk_ids)
    shared_ids = torch.zeros((tokens, 1), dtype=torch.int32, device=x.device)
    shared = _experts(x, shared_w13.contiguous()[None], shared_w2.contiguous()[None], shared_ids)
    gate = shared_gate.contiguous() if shared_gate is not None else x
    _combine[(tokens,)](
        routed, topk_weights.contiguous().to(torch.float32), shared, x, gate, out, top_k, hidden,
        float(routed_scaling_factor), HAS_GATE=shared_gate is not None, BLOCK=BLOCK_ELEMENTWISE,
    )
    return out
