"""Baseline paged decode attention in Triton, written the way inference stacks commonly write it.

One program per (sequence, query head) walks the sequence's block table one KV block (16 tokens)
at a time with an online softmax in fp32, and writes the normalized output. Optional attention
sinks (a per-head logit in the denominator) and a sliding window follow vLLM's kernels: the loop
starts at the block holding the window's first key. Correct for any batch, length and GQA ratio,
with the headroom such kernels leave: the key dimension is never split (a short batch leaves most
of the GPU idle), each query head re-reads its KV head's data (once per head of the group), and
the dot products are vector multiply-reductions over a small 16-token tile.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _paged_decode_kernel(
    out_ptr,
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    seq_lens_ptr,
    sinks_ptr,
    scale,
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
    QUERIES_PER_KV: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PADDED: tl.constexpr,
    USE_SINKS: tl.constexpr,
    SLIDING_WINDOW: tl.constexpr,
    SOFTCAP: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // QUERIES_PER_KV
    seq_len = tl.load(seq_lens_ptr + seq)

    offs_d = tl.arange(0, HEAD_DIM_PADDED)
    dim_mask = offs_d < HEAD_DIM
    offs_slot = tl.arange(0, BLOCK_SIZE)
    q = tl.load(q_ptr + seq * stride_q_seq + head * stride_q_head + offs_d, mask=dim_mask, other=0.0).to(tl.float32)

    m_i = tl.max(tl.full([BLOCK_SIZE], float("-inf"), tl.float32), axis=0)
    l_i = tl.sum(tl.zeros([BLOCK_SIZE], tl.float32), axis=0)
    acc = tl.zeros([HEAD_DIM_PADDED], tl.float32)

    first_key = 0
    if SLIDING_WINDOW > 0:
        first_key = tl.maximum(seq_len - SLIDING_WINDOW, 0)
    for logical_block in range(first_key // BLOCK_SIZE, tl.cdiv(seq_len, BLOCK_SIZE)):
        physical_block = tl.load(block_tables_ptr + seq * stride_table + logical_block).to(tl.int64)
        positions = logical_block * BLOCK_SIZE + offs_slot
        valid = (positions < seq_len) & (positions >= first_key)
        kv_mask = valid[:, None] & dim_mask[None, :]
        k = tl.load(
            k_cache_ptr + physical_block * stride_k_block + offs_slot[:, None] * stride_k_slot
            + kv_head * stride_k_head + offs_d[None, :],
            mask=kv_mask,
            other=0.0,
        ).to(tl.float32)
        scores = tl.sum(q[None, :] * k, axis=1) * scale
        if SOFTCAP > 0:  # Gemma 2: cap * tanh(s / cap), tanh written with exp (every backend has it)
            scores = SOFTCAP * (2.0 / (1.0 + tl.exp(-2.0 * scores / SOFTCAP)) - 1.0)
        scores = tl.where(valid, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=0))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(scores - m_new)
        v = tl.load(
            v_cache_ptr + physical_block * stride_v_block + offs_slot[:, None] * stride_v_slot
            + kv_head * stride_v_head + offs_d[None, :],
            mask=kv_mask,
            other=0.0,
        ).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        m_i = m_new

    if USE_SINKS:
        sink = tl.load(sinks_ptr + head).to(tl.float32)
        l_i = l_i + tl.exp(sink - m_i)
    out = acc / l_i
    tl.store(out_ptr + seq * stride_o_seq + head * stride_o_head + offs_d, out.to(out_ptr.dtype.element_ty), mask=dim_mask)


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
    _, block_size, num_kv_heads, _ = key_cache.shape
    assert key_cache.stride(-1) == 1 and value_cache.stride(-1) == 1
    q = q if q.stride(-1) == 1 else q.contiguous()
    out = torch.empty_like(q)
    use_sinks = sinks is not None
    _paged_decode_kernel[(batch, num_heads)](
        out,
        q,
        key_cache,
        value_cache,
        block_tables,
        seq_lens,
        sinks if use_sinks else q,
        scale,
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
        QUERIES_PER_KV=num_heads // num_kv_heads,
        BLOCK_SIZE=block_size,
        HEAD_DIM=head_dim,
        HEAD_DIM_PADDED=triton.next_power_of_2(head_dim),
        USE_SINKS=use_sinks,
        SLIDING_WINDOW=sliding_window,
        SOFTCAP=float(softcap),
    )
    return out
