"""Our paged decode attention: split-KV (flash-decoding) with all query heads of a KV group together.

What it changes from the baseline, and why that is faster:
- GQA packing: one program serves every query head of a KV head (4 for Llama, 6 for Qwen3.5, 8 for
  GPT-OSS), so each key and value is read from memory once instead of once per query head, and
  q·Kᵀ and P·V become small matrix products on the matrix cores (tl.dot) instead of vector
  multiply-reductions.
- Wider tiles: 64 keys (four 16-token pages, gathered through the block table row by row) per loop
  step instead of one page, with software pipelining (num_stages), so many more bytes are in
  flight per program, which is what a memory-bound gather needs.
- Split-KV: when batch x KV heads is too small to fill the GPU (single-user or small-batch decode),
  each sequence's keys are cut into even splits processed by separate programs that write partial
  results (output and log-sum-exp); a small second kernel merges them. Large batches use one
  split and skip the merge, writing the final output directly.
- exp2 with the scale folded into log2(e), and the sink (GPT-OSS) and sliding window handled in the
  same code path: the window starts the loop at the window's first key, so a 128-token window is
  two 64-key tiles (or one 128-key tile) whatever the context length.
"""

import os

import torch
import triton
import triton.language as tl

_LOG2E = 1.4426950408889634
# Triton's CPU interpreter stores bf16 as raw 16-bit patterns and cannot multiply it
# (triton-lang/triton#11584), so under TRITON_INTERPRET=1 the matrix products take fp32 operands;
# on a GPU they run in bf16 on the matrix cores.
_DOT_IN_FP32 = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _decode_split_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    seq_lens_ptr,
    sinks_ptr,
    out_ptr,
    part_out_ptr,
    part_lse_ptr,
    qk_scale,
    stride_q_seq,
    stride_q_head,
    stride_o_seq,
    stride_o_head,
    stride_k_block,
    stride_k_slot,
    stride_k_head,
    stride_v_block,
    stride_v_slot,
    stride_v_head,
    stride_table,
    num_heads,
    QUERIES_PER_KV: tl.constexpr,
    BLOCK_G: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    USE_SINKS: tl.constexpr,
    SLIDING_WINDOW: tl.constexpr,
    SOFTCAP2: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
):
    kv_head = tl.program_id(0)
    split = tl.program_id(1)
    seq = tl.program_id(2)
    seq_len = tl.load(seq_lens_ptr + seq)
    first_key = 0
    if SLIDING_WINDOW > 0:
        first_key = tl.maximum(seq_len - SLIDING_WINDOW, 0)
    # Even split of this sequence's keys into NUM_SPLITS runs of whole tiles.
    tiles = tl.cdiv(seq_len - first_key, BLOCK_N)
    tiles_per_split = tl.cdiv(tiles, NUM_SPLITS)
    start = first_key + split * tiles_per_split * BLOCK_N
    end = tl.minimum(start + tiles_per_split * BLOCK_N, seq_len)

    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, BLOCK_D)  # the head dim rounded up to a power of two (Phi-3.5: 96 -> 128)
    offs_n = tl.arange(0, BLOCK_N)
    heads = kv_head * QUERIES_PER_KV + offs_g
    head_mask = offs_g < QUERIES_PER_KV
    rows_ok = head_mask[:, None]
    if BLOCK_D != HEAD_DIM:
        rows_ok = rows_ok & (offs_d < HEAD_DIM)[None, :]
    q = tl.load(q_ptr + seq * stride_q_seq + heads[:, None] * stride_q_head + offs_d[None, :], mask=rows_ok, other=0.0)
    if DOT_IN_FP32:
        q = q.to(tl.float32)

    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    table_row = block_tables_ptr + seq.to(tl.int64) * stride_table
    for tile_start in range(start, end, BLOCK_N):
        positions = tile_start + offs_n
        valid = positions < end
        pages = tl.load(table_row + positions // PAGE_SIZE, mask=valid, other=0).to(tl.int64)
        slots = positions % PAGE_SIZE
        k_rows = k_cache_ptr + pages * stride_k_block + slots * stride_k_slot + kv_head * stride_k_head
        keys_ok = valid[:, None]
        if BLOCK_D != HEAD_DIM:
            keys_ok = keys_ok & (offs_d < HEAD_DIM)[None, :]
        k = tl.load(k_rows[:, None] + offs_d[None, :], mask=keys_ok, other=0.0)
        if DOT_IN_FP32:
            k = k.to(tl.float32)
        scores = tl.dot(q, tl.trans(k)) * qk_scale
        if SOFTCAP2 > 0:  # Gemma 2's cap * tanh(s / cap), in the log2 units the folded scale leaves
            scores = SOFTCAP2 * (2.0 / (1.0 + tl.exp2(-2.8853900817779268 * scores / SOFTCAP2)) - 1.0)
        scores = tl.where(valid[None, :], scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v_rows = v_cache_ptr + pages * stride_v_block + slots * stride_v_slot + kv_head * stride_v_head
        v = tl.load(v_rows[:, None] + offs_d[None, :], mask=keys_ok, other=0.0)
        if DOT_IN_FP32:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    if NUM_SPLITS == 1:
        if USE_SINKS:
            sinks = tl.load(sinks_ptr + heads, mask=head_mask, other=0.0).to(tl.float32)
            l_i = l_i + tl.exp2(sinks * 1.4426950408889634 - m_i)
        out = acc / l_i[:, None]
        tl.store(
            out_ptr + seq * stride_o_seq + heads[:, None] * stride_o_head + offs_d[None, :],
            out.to(out_ptr.dtype.element_ty),
            mask=rows_ok,
        )
    else:
        # Partial result of this split: normalized output and log2-sum-exp2 (-inf when empty).
        has_keys = l_i > 0
        out = tl.where(has_keys[:, None], acc / tl.where(has_keys, l_i, 1.0)[:, None], 0.0)
        lse = tl.where(has_keys, m_i + tl.log2(tl.where(has_keys, l_i, 1.0)), float("-inf"))
        row = (seq * num_heads + heads) * NUM_SPLITS + split
        tl.store(part_out_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], out, mask=rows_ok)
        tl.store(part_lse_ptr + row, lse, mask=head_mask)


@triton.jit
def _decode_merge_kernel(
    part_out_ptr,
    part_lse_ptr,
    sinks_ptr,
    out_ptr,
    stride_o_seq,
    stride_o_head,
    num_heads,
    NUM_SPLITS: tl.constexpr,
    SPLITS_PADDED: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    USE_SINKS: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    offs_s = tl.arange(0, SPLITS_PADDED)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    row = (seq * num_heads + head) * NUM_SPLITS + offs_s
    lse = tl.load(part_lse_ptr + row, mask=offs_s < NUM_SPLITS, other=float("-inf"))
    has_keys = lse > float("-inf")
    m = tl.max(lse, axis=0)
    weights = tl.where(has_keys, tl.exp2(lse - m), 0.0)
    splits_ok = has_keys[:, None]
    if BLOCK_D != HEAD_DIM:
        splits_ok = splits_ok & d_ok[None, :]
    partial = tl.load(part_out_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], mask=splits_ok, other=0.0)
    denominator = tl.sum(weights, axis=0)
    if USE_SINKS:
        denominator += tl.exp2(tl.load(sinks_ptr + head).to(tl.float32) * 1.4426950408889634 - m)
    out = tl.sum(weights[:, None] * partial, axis=0) / denominator
    if BLOCK_D != HEAD_DIM:
        tl.store(out_ptr + seq * stride_o_seq + head * stride_o_head + offs_d, out.to(out_ptr.dtype.element_ty), mask=d_ok)
    else:
        tl.store(out_ptr + seq * stride_o_seq + head * stride_o_head + offs_d, out.to(out_ptr.dtype.element_ty))


def _split_policy(device: torch.device) -> tuple[int, int]:
    """(SMs to fill, fewest keys worth a split of their own). Off the GPU (Triton's CPU interpreter,
    in tests) small numbers that still take the split-and-merge path."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count, 256
    return 64, 16


def _tile_config(head_dim: int, sliding_window: int) -> tuple[int, int, int]:
    """Keys per tile, warps and pipeline stages: ~16 KB of K (and of V) per stage."""
    if 0 < sliding_window <= 128 and head_dim <= 64:
        return 128, 4, 2  # the whole window in one tile
    block_n = max(16, min(64, 8192 // head_dim))
    return block_n, 4, 3


def paged_decode_attention(
    q: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    sinks: torch.Tensor | None = None,
    sliding_window: int = 0,
    softcap: float = 0.0,
) -> torch.Tensor:
    batch, num_heads, head_dim = q.shape
    _, page_size, num_kv_heads, _ = key_cache.shape
    assert key_cache.stride(-1) == 1 and value_cache.stride(-1) == 1
    q = q if q.stride(-1) == 1 else q.contiguous()
    group = num_heads // num_kv_heads
    out = torch.empty_like(q)
    block_n, num_warps, num_stages = _tile_config(head_dim, sliding_window)

    # Enough programs for about two per SM, but no split shorter than min_keys keys.
    num_sms, min_keys = _split_policy(q.device)
    max_keys = block_tables.shape[1] * page_size
    if sliding_window > 0:
        max_keys = min(max_keys, sliding_window)
    programs = batch * num_kv_heads
    num_splits = max(1, min(triton.cdiv(2 * num_sms, programs), max_keys // min_keys, 64))

    use_sinks = sinks is not None
    if num_splits > 1:
        part_out = torch.empty((batch, num_heads, num_splits, head_dim), dtype=torch.float32, device=q.device)
        part_lse = torch.empty((batch, num_heads, num_splits), dtype=torch.float32, device=q.device)
    else:
        part_out = part_lse = out
    _decode_split_kernel[(num_kv_heads, num_splits, batch)](
        q,
        key_cache,
        value_cache,
        block_tables,
        seq_lens,
        sinks if use_sinks else q,
        out,
        part_out,
        part_lse,
        scale * _LOG2E,
        q.stride(0),
        q.stride(1),
        out.stride(0),
        out.stride(1),
        key_cache.stride(0),
        key_cache.stride(1),
        key_cache.stride(2),
        value_cache.stride(0),
        value_cache.stride(1),
        value_cache.stride(2),
        block_tables.stride(0),
        num_heads,
        QUERIES_PER_KV=group,
        BLOCK_G=max(16, triton.next_power_of_2(group)),
        PAGE_SIZE=page_size,
        HEAD_DIM=head_dim,
        BLOCK_D=triton.next_power_of_2(head_dim),
        BLOCK_N=block_n,
        NUM_SPLITS=num_splits,
        USE_SINKS=use_sinks,
        SLIDING_WINDOW=sliding_window,
        SOFTCAP2=float(softcap) * _LOG2E,
        DOT_IN_FP32=_DOT_IN_FP32,
        num_warps=num_warps,
        num_stages=num_stages,
    )
    if num_splits > 1:
        _decode_merge_kernel[(batch, num_heads)](
            part_out,
            part_lse,
            sinks if use_sinks else q,
            out,
            out.stride(0),
            out.stride(1),
            num_heads,
            NUM_SPLITS=num_splits,
            SPLITS_PADDED=triton.next_power_of_2(num_splits),
            HEAD_DIM=head_dim,
        BLOCK_D=triton.next_power_of_2(head_dim),
            USE_SINKS=use_sinks,
            num_warps=4,
        )
    return out
