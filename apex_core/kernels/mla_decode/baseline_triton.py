"""Baseline MLA decode in Triton, written the way inference stacks commonly write it.

The grouped decode kernel of vLLM's and SGLang's Triton MLA backends, without splitting the KV
dimension: one program per (sequence, group of 16 heads) walks the sequence's pages 32 latent rows
at a time, scores the rows against the group's absorbed queries (512-wide c_kv part plus 64-wide
rope part, two matrix products), keeps an fp32 online softmax, accumulates P·c_kv, and writes the
normalized output. Correct for any batch and length, with the headroom such kernels leave: a short
batch gives only batch x 8 programs for the whole GPU, every latent row is loaded by all 8 head
groups, and the tiles are the default small ones with default warps.

Triton's CPU interpreter cannot multiply bf16 (triton-lang/triton#11584), so under
TRITON_INTERPRET=1 the matrix products take fp32 operands; on a GPU they run in bf16.
"""

import os

import torch
import triton
import triton.language as tl

_DOT_IN_FP32 = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _mla_decode_kernel(
    q_ptr,
    kv_ptr,
    block_tables_ptr,
    seq_lens_ptr,
    out_ptr,
    scale,
    stride_q_seq,
    stride_q_head,
    stride_kv_block,
    stride_kv_slot,
    stride_table,
    stride_o_seq,
    stride_o_head,
    num_heads,
    KV_LORA_RANK: tl.constexpr,
    ROPE_DIM: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
):
    seq = tl.program_id(0)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    head_mask = heads < num_heads
    offs_c = tl.arange(0, KV_LORA_RANK)
    offs_r = tl.arange(0, ROPE_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    q_rows = q_ptr + seq * stride_q_seq + heads[:, None] * stride_q_head
    q_nope = tl.load(q_rows + offs_c[None, :], mask=head_mask[:, None], other=0.0)
    q_pe = tl.load(q_rows + KV_LORA_RANK + offs_r[None, :], mask=head_mask[:, None], other=0.0)
    if DOT_IN_FP32:
        q_nope = q_nope.to(tl.float32)
        q_pe = q_pe.to(tl.float32)
    seq_len = tl.load(seq_lens_ptr + seq)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, KV_LORA_RANK], tl.float32)
    for start in range(0, seq_len, BLOCK_N):
        positions = start + offs_n
        valid = positions < seq_len
        pages = tl.load(block_tables_ptr + seq * stride_table + positions // PAGE_SIZE, mask=valid, other=0).to(tl.int64)
        rows = kv_ptr + pages * stride_kv_block + (positions % PAGE_SIZE) * stride_kv_slot
        c_kv = tl.load(rows[:, None] + offs_c[None, :], mask=valid[:, None], other=0.0)
        k_pe = tl.load(rows[:, None] + KV_LORA_RANK + offs_r[None, :], mask=valid[:, None], other=0.0)
        if DOT_IN_FP32:
            c_kv = c_kv.to(tl.float32)
            k_pe = k_pe.to(tl.float32)
        scores = tl.dot(q_nope, tl.trans(c_kv))
        scores += tl.dot(q_pe, tl.trans(k_pe))
        scores = tl.where(valid[None, :], scores * scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(c_kv.dtype), c_kv)
        m_i = m_new

    out = acc / l_i[:, None]
    tl.store(
        out_ptr + seq * stride_o_seq + heads[:, None] * stride_o_head + offs_c[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=head_mask[:, None],
    )


def mla_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    kv_lora_rank: int,
) -> torch.Tensor:
    batch, num_heads, head_dim = q.shape
    page_size = kv_cache.shape[1]
    assert q.stride(-1) == 1 and kv_cache.stride(-1) == 1
    out = torch.empty((batch, num_heads, kv_lora_rank), dtype=q.dtype, device=q.device)
    block_h = 16
    _mla_decode_kernel[(batch, triton.cdiv(num_heads, block_h))](
        q,
        kv_cache,
        block_tables,
        seq_lens,
        out,
        scale,
        q.stride(0),
        q.stride(1),
        kv_cache.stride(0),
        kv_cache.stride(1),
        block_tables.stride(0),
        out.stride(0),
        out.stride(1),
        num_heads,
        KV_LORA_RANK=kv_lora_rank,
        ROPE_DIM=head_dim - kv_lora_rank,
        PAGE_SIZE=page_size,
        BLOCK_H=block_h,
        BLOCK_N=32,
        DOT_IN_FP32=_DOT_IN_FP32,
        num_stages=2,
    )
    return out
