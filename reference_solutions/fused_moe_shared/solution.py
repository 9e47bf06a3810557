"""Our MoE layer with a shared expert (bf16): the shared expert fused into the routed grouped GEMMs
as one more, always-selected expert, so the whole layer is five launches.

What it changes from the baseline, and why that is faster:
- The shared expert is expert number E (after the E routed ones), chosen by every token in an
  extra routing slot whose weight is 1, or sigmoid(x . shared_gate) for a gated shared expert,
  and the routed slots' weights carry the scaling factor. One grouped launch per projection then
  serves routed and shared rows alike: no second pass over x, no separate dense launches, and
  at decode sizes the shared expert's weights stream in parallel with the routed ones instead of
  after them. (The shared weights are not copied next to the routed ones: a tile whose expert is
  E reads the shared tensors instead.)
- silu(gate) * up runs in the gate_up GEMM's epilogue (each tile accumulates the gate and the up
  columns of the same outputs), so the (rows, 2n) gate_up output never goes through memory.
- The routing weight is applied in the down GEMM's epilogue, so the combine is a plain sum over
  the top_k + 1 slots.
- Tile shapes follow the rows each expert gets (tokens x top_k / experts): 16-row tiles for
  decode batches, whose experts see a row or two, and large tiles for prefill.
- The align is three small Triton kernels (histogram, a one-program scan that also lays out the
  blocks, an atomic scatter) instead of a dozen torch kernels.

Rows of one expert land in the tiles in an arbitrary (atomic) order, but every output row is
computed by the same K loop wherever it sits, so the result does not depend on it. Under Triton's
CPU interpreter only, tiles are upcast to fp32 before tl.dot (the interpreter multiplies bf16
tiles as raw integers), and the activation and slot outputs are kept in fp32 (its fp32 -> bf16
cast truncates instead of rounding to nearest); on a GPU both are bf16.
"""

import os

import torch
import triton
import triton.language as tl

_UPCAST_DOT = os.environ.get("TRITON_INTERPRET", "0") == "1"
_FP32_INTERMEDIATES = _UPCAST_DOT
_CHUNK = 1024
_BLOCK_H = 1024


@triton.jit
def _route(
    ids_ptr, weights_ptr, x_ptr, gate_ptr, ext_ids_ptr, ext_weights_ptr,
    top_k, hidden, num_experts, scale,
    HAS_GATE: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """Per token: the routed slots with scaled weights, then the shared slot (expert E, weight g)."""
    t = tl.program_id(0).to(tl.int64)
    slots = tl.arange(0, BLOCK_K)
    routed = slots < top_k
    ids = tl.load(ids_ptr + t * top_k + slots, mask=routed, other=0)
    weights = tl.load(weights_ptr + t * top_k + slots, mask=routed, other=0.0).to(tl.float32) * scale
    g = 1.0
    if HAS_GATE:
        dot = tl.zeros([BLOCK_H], dtype=tl.float32)
        for start in range(0, hidden, BLOCK_H):
            offs = start + tl.arange(0, BLOCK_H)
            mask = offs < hidden
            xv = tl.load(x_ptr + t * hidden + offs, mask=mask, other=0.0).to(tl.float32)
            dot += xv * tl.load(gate_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        g = 1.0 / (1.0 + tl.exp(-tl.sum(dot, axis=0)))
    ids = tl.where(routed, ids, num_experts)
    weights = tl.where(routed, weights, g)
    keep = slots <= top_k
    tl.store(ext_ids_ptr + t * (top_k + 1) + slots, ids, mask=keep)
    tl.store(ext_weights_ptr + t * (top_k + 1) + slots, weights, mask=keep)


@triton.jit
def _count_rows(ids_ptr, counts_ptr, num_rows, CHUNK: tl.constexpr, NUM_BUCKETS: tl.constexpr):
    offs = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    valid = offs < num_rows
    # Padding lanes go to the last bucket, which no expert uses.
    bucket = tl.where(valid, tl.load(ids_ptr + offs, mask=valid, other=0), NUM_BUCKETS - 1)
    tl.atomic_add(counts_ptr + tl.arange(0, NUM_BUCKETS), tl.histogram(bucket, NUM_BUCKETS))


@triton.jit
def _plan_blocks(
    counts_ptr, cursor_ptr, block_expert_ptr, block_rows_end_ptr, padded_total_ptr,
    num_buckets_used, num_blocks,
    BLOCK_M: tl.constexpr, NUM_BUCKETS: tl.constexpr, BLOCK_B: tl.constexpr,
):
    """Each expert's first padded slot (the scatter's cursor), each block's expert and real-row end."""
    buckets = tl.arange(0, NUM_BUCKETS)
    real = buckets < num_buckets_used
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
        bucket = tl.sum(((padded_end[None, :] <= slot[:, None]) & real[None, :]).to(tl.int32), axis=1)
        end = tl.sum(tl.where(buckets[None, :] == bucket[:, None], rows_end[None, :], 0), axis=1)
        in_range = blocks < num_blocks
        tl.store(block_expert_ptr + blocks, bucket, mask=in_range)
        tl.store(block_rows_end_ptr + blocks, end, mask=in_range)


@triton.jit
def _scatter_rows(ids_ptr, cursor_ptr, sorted_rows_ptr, num_rows, CHUNK: tl.constexpr):
    offs = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    valid = offs < num_rows
    expert = tl.load(ids_ptr + offs, mask=valid, other=0)
    slot = tl.atomic_add(cursor_ptr + expert, 1, mask=valid)
    tl.store(sorted_rows_ptr + slot, offs, mask=valid)


@triton.jit
def _tile(num_blocks, N, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(row block, column block) of this program, grouped for L2 reuse."""
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_blocks - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _gate_up_act(
    x_ptr, w_ptr, shared_w_ptr, act_ptr, sorted_rows_ptr, block_expert_ptr, block_rows_end_ptr,
    padded_total_ptr, N, K, slots, num_blocks, num_experts,
    stride_xm, stride_we, stride_wn, stride_am,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):
    """act[row, cols] = silu(x[row // slots] @ Wg^T) * (x[row // slots] @ Wu^T) for the tile's expert."""
    pid_m, pid_n = _tile(num_blocks, N, BLOCK_N, GROUP_M)
    if pid_m * BLOCK_M >= tl.load(padded_total_ptr):
        return
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = offs_m < tl.load(block_rows_end_ptr + pid_m)
    rows = tl.load(sorted_rows_ptr + offs_m, mask=row_mask, other=0).to(tl.int64)
    expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    if expert == num_experts:
        w_base = shared_w_ptr
    else:
        w_base = w_ptr + expert * stride_we
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + (rows // slots)[:, None] * stride_xm + offs_k[None, :]
    wg_ptrs = w_base + offs_n[None, :] * stride_wn + offs_k[:, None]
    wu_ptrs = wg_ptrs + N * stride_wn
    acc_g = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc_u = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(x_ptrs, mask=row_mask[:, None] & (offs_k[None, :] < k_left), other=0.0)
        w_mask = (offs_k[:, None] < k_left) & n_mask[None, :]
        bg = tl.load(wg_ptrs, mask=w_mask, other=0.0)
        bu = tl.load(wu_ptrs, mask=w_mask, other=0.0)
        if UPCAST_DOT:
            a = a.to(tl.float32)
            bg = bg.to(tl.float32)
            bu = bu.to(tl.float32)
        acc_g = tl.dot(a, bg, acc_g)
        acc_u = tl.dot(a, bu, acc_u)
        x_ptrs += BLOCK_K
        wg_ptrs += BLOCK_K
        wu_ptrs += BLOCK_K
    act = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    out_ptrs = act_ptr + rows[:, None] * stride_am + offs_n[None, :]
    tl.store(out_ptrs, act.to(act_ptr.dtype.element_ty), mask=row_mask[:, None] & n_mask[None, :])


@triton.jit
def _down_weighted(
    act_ptr, w_ptr, shared_w_ptr, y_ptr, weights_ptr, sorted_rows_ptr, block_expert_ptr,
    block_rows_end_ptr, padded_total_ptr, N, K, num_blocks, num_experts,
    stride_am, stride_we, stride_wn, stride_ym,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):
    """y[row] = weight[row] * (act[row] @ W2^T) for the tile's expert (the shared one for expert E)."""
    pid_m, pid_n = _tile(num_blocks, N, BLOCK_N, GROUP_M)
    if pid_m * BLOCK_M >= tl.load(padded_total_ptr):
        return
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = offs_m < tl.load(block_rows_end_ptr + pid_m)
    rows = tl.load(sorted_rows_ptr + offs_m, mask=row_mask, other=0).to(tl.int64)
    expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    if expert == num_experts:
        w_base = shared_w_ptr
    else:
        w_base = w_ptr + expert * stride_we
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = act_ptr + rows[:, None] * stride_am + offs_k[None, :]
    w_ptrs = w_base + offs_n[None, :] * stride_wn + offs_k[:, None]
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
    acc *= tl.load(weights_ptr + rows, mask=row_mask, other=0.0)[:, None]
    out_ptrs = y_ptr + rows[:, None] * stride_ym + offs_n[None, :]
    tl.store(out_ptrs, acc.to(y_ptr.dtype.element_ty), mask=row_mask[:, None] & n_mask[None, :])


@triton.jit
def _sum_slots(y_ptr, out_ptr, slots, hidden, BLOCK: tl.constexpr):
    """out[t] = sum over the token's slots of its weighted expert outputs, in fp32."""
    t = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < hidden
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for j in range(slots):
        acc += tl.load(y_ptr + (t * slots + j) * hidden + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + t * hidden + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


def _config(rows_per_expert: float, down: bool) -> dict:
    """Tiles by the rows an expert gets. Decode: 16-row tiles, narrow columns so the few experts hit
    still spread their weight streaming over every SM (DeepSeek-R1's 9 experts x 256 / 16 gate_up
    column blocks are 144 programs for 132 SMs). Prefill: large tiles for arithmetic intensity.
    The gate_up kernel holds two accumulators, so its column tile is half the down kernel's."""
    if rows_per_expert <= 12:
        config = {"BLOCK_M": 16, "BLOCK_N": 64 if down else 16, "BLOCK_K": 128, "GROUP_M": 1, "num_warps": 4, "num_stages": 4}
    elif rows_per_expert <= 48:
        config = {"BLOCK_M": 32, "BLOCK_N": 128 if down else 64, "BLOCK_K": 64, "GROUP_M": 4, "num_warps": 4, "num_stages": 4}
    elif rows_per_expert <= 256:
        config = {"BLOCK_M": 64, "BLOCK_N": 128 if down else 64, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 4}
    else:
        config = {"BLOCK_M": 128, "BLOCK_N": 128 if down else 64, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}
    if torch.version.hip is not None:
        config["num_stages"] = 2
    return config


def _align(ext_ids: torch.Tensor, num_buckets_used: int, block_m: int):
    """Rows sorted by expert in blocks of block_m: sorted row ids, each block's expert and real-row end."""
    device = ext_ids.device
    num_rows = ext_ids.numel()
    num_buckets = triton.next_power_of_2(num_buckets_used + 1)
    # Each expert with rows pads its last block: at most cdiv(rows, BLOCK_M) blocks plus one per
    # expert hit, and no more experts are hit than there are rows. A decode batch (9 rows of
    # DeepSeek-R1) launches 10 row blocks, not the 242 of a bound by every expert.
    num_blocks = triton.cdiv(num_rows, block_m) + min(num_buckets_used, num_rows)
    counts = torch.zeros(num_buckets, dtype=torch.int32, device=device)
    cursor = torch.empty(num_buckets, dtype=torch.int32, device=device)
    block_expert = torch.empty(num_blocks, dtype=torch.int32, device=device)
    block_rows_end = torch.empty(num_blocks, dtype=torch.int32, device=device)
    padded_total = torch.empty(1, dtype=torch.int32, device=device)
    sorted_rows = torch.empty(num_blocks * block_m, dtype=torch.int32, device=device)
    chunks = triton.cdiv(num_rows, _CHUNK)
    _count_rows[(chunks,)](ext_ids, counts, num_rows, CHUNK=_CHUNK, NUM_BUCKETS=num_buckets)
    _plan_blocks[(1,)](
        counts, cursor, block_expert, block_rows_end, padded_total, num_buckets_used, num_blocks,
        BLOCK_M=block_m, NUM_BUCKETS=num_buckets, BLOCK_B=128,
    )
    _scatter_rows[(chunks,)](ext_ids, cursor, sorted_rows, num_rows, CHUNK=_CHUNK)
    return sorted_rows, block_expert, block_rows_end, padded_total, num_blocks


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
    num_experts, two_n, _ = w13.shape
    n = two_n // 2
    top_k = topk_ids.shape[1]
    slots = top_k + 1
    out = torch.empty((tokens, hidden), dtype=x.dtype, device=x.device)
    if tokens == 0:
        return out
    # The shared expert joins as expert E only where it is as wide as a routed one (true of every
    # task: DeepSeek's and Kimi's at TP8, Qwen3.5's unsplit); its tensors are read in place.
    assert shared_w13.shape == (two_n, hidden) and shared_w2.shape == (hidden, n)
    x, w13, w2 = x.contiguous(), w13.contiguous(), w2.contiguous()
    shared_w13, shared_w2 = shared_w13.contiguous(), shared_w2.contiguous()
    device = x.device
    num_rows = tokens * slots

    ext_ids = torch.empty((tokens, slots), dtype=torch.int32, device=device)
    ext_weights = torch.empty((tokens, slots), dtype=torch.float32, device=device)
    gate = shared_gate.contiguous() if shared_gate is not None else x
    _route[(tokens,)](
        topk_ids.contiguous(), topk_weights.contiguous(), x, gate, ext_ids, ext_weights,
        top_k, hidden, num_experts, float(routed_scaling_factor),
        HAS_GATE=shared_gate is not None, BLOCK_K=triton.next_power_of_2(slots), BLOCK_H=_BLOCK_H,
    )

    rows_per_expert = tokens * top_k / num_experts
    up_config, down_config = _config(rows_per_expert, down=False), _config(rows_per_expert, down=True)
    block_m = up_config["BLOCK_M"]
    sorted_rows, block_expert, block_rows_end, padded_total, num_blocks = _align(ext_ids, num_experts + 1, block_m)

    between = torch.float32 if _FP32_INTERMEDIATES else x.dtype
    act = torch.empty((num_rows, n), dtype=between, device=device)
    _gate_up_act[(num_blocks * triton.cdiv(n, up_config["BLOCK_N"]),)](
        x, w13, shared_w13, act, sorted_rows, block_expert, block_rows_end, padded_total,
        n, hidden, slots, num_blocks, num_experts,
        x.stride(0), w13.stride(0), w13.stride(1), act.stride(0),
        UPCAST_DOT=_UPCAST_DOT, **up_config,
    )
    y = torch.empty((num_rows, hidden), dtype=between, device=device)
    _down_weighted[(num_blocks * triton.cdiv(hidden, down_config["BLOCK_N"]),)](
        act, w2, shared_w2, y, ext_weights, sorted_rows, block_expert, block_rows_end, padded_total,
        hidden, n, num_blocks, num_experts,
        act.stride(0), w2.stride(0), w2.stride(1), y.stride(0),
        UPCAST_DOT=_UPCAST_DOT, **down_config,
    )
    _sum_slots[(tokens, triton.cdiv(hidden, _BLOCK_H))](y, out, slots, hidden, BLOCK=_BLOCK_H)
    return out
