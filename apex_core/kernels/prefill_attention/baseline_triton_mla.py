"""Baseline MLA prefill attention in Triton, written the way inference stacks commonly write it.

A plain flash-attention forward over packed prompts whose query/key heads (192 wide: nope 128 |
rope 64) are wider than their value heads (128), as the context-attention kernels of serving
stacks handle it: one program per (prompt, head, block of 64 queries) walks the key blocks up to
its diagonal with an online softmax in fp32 and normalizes at the end. 192 is not a power of two,
so the query/key tile is padded to BLOCK_DMODEL = 256 columns, the 64 past the head masked to
zero on load, and the value tile has its own BLOCK_DV = 128. Correct for any prompt lengths, with
the headroom such kernels leave: a quarter of every q·Kᵀ multiply spent on the zero padding,
modest 64 x 32 tiles with default warps and pipelining, the causal mask computed on every block
(also the ones wholly below the diagonal, which need none), and programs launched in an order that
leaves the longest rows (the last query blocks) for last.

Triton's CPU interpreter cannot multiply bf16 (triton-lang/triton#11584), so under
TRITON_INTERPRET=1 the two matrix products take fp32 operands; on a GPU they run in bf16.
"""

import os

import torch
import triton
import triton.language as tl

_DOT_IN_FP32 = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _mla_prefill_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    cu_seqlens_ptr,
    scale,
    stride_q_tok,
    stride_q_head,
    stride_k_tok,
    stride_k_head,
    stride_v_tok,
    stride_v_head,
    stride_o_tok,
    stride_o_head,
    QK_DIM: tl.constexpr,
    V_DIM: tl.constexpr,
    BLOCK_DMODEL: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    m_block = tl.program_id(2)
    seq_start = tl.load(cu_seqlens_ptr + seq)
    seq_len = tl.load(cu_seqlens_ptr + seq + 1) - seq_start
    if m_block * BLOCK_M >= seq_len:
        return

    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_DMODEL)
    d_ok = offs_d < QK_DIM
    offs_dv = tl.arange(0, BLOCK_DV)
    dv_ok = offs_dv < V_DIM
    rows = (seq_start + offs_m).to(tl.int64)
    row_ok = offs_m < seq_len
    q = tl.load(
        q_ptr + rows[:, None] * stride_q_tok + head * stride_q_head + offs_d[None, :],
        mask=row_ok[:, None] & d_ok[None, :],
        other=0.0,
    )
    if DOT_IN_FP32:
        q = q.to(tl.float32)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    hi = tl.minimum((m_block + 1) * BLOCK_M, seq_len)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < seq_len
        keys = (seq_start + cols).to(tl.int64)
        k = tl.load(
            k_ptr + keys[None, :] * stride_k_tok + head * stride_k_head + offs_d[:, None],
            mask=col_ok[None, :] & d_ok[:, None],
            other=0.0,
        )
        if DOT_IN_FP32:
            k = k.to(tl.float32)
        scores = tl.dot(q, k) * scale
        # Key 0 is visible to every row, so no row's maximum stays -inf.
        visible = (cols[None, :] <= offs_m[:, None]) & col_ok[None, :]
        scores = tl.where(visible, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(
            v_ptr + keys[:, None] * stride_v_tok + head * stride_v_head + offs_dv[None, :],
            mask=col_ok[:, None] & dv_ok[None, :],
            other=0.0,
        )
        if DOT_IN_FP32:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    acc = acc / l_i[:, None]
    tl.store(
        out_ptr + rows[:, None] * stride_o_tok + head * stride_o_head + offs_dv[None, :],
        acc.to(out_ptr.dtype.element_ty),
        mask=row_ok[:, None] & dv_ok[None, :],
    )


def mla_prefill_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    scale: float,
) -> torch.Tensor:
    tokens, num_heads, qk_dim = q.shape
    v_dim = v.shape[-1]
    assert k.shape == q.shape and v.shape[:2] == q.shape[:2], "one key and value head per query head"
    assert q.stride(-1) == 1 and k.stride(-1) == 1 and v.stride(-1) == 1
    out = torch.empty((tokens, num_heads, v_dim), dtype=q.dtype, device=q.device)
    block_m, block_n = 64, 32
    num_seqs = cu_seqlens.shape[0] - 1
    grid = (num_seqs, num_heads, triton.cdiv(max_seqlen, block_m))
    _mla_prefill_kernel[grid](
        q,
        k,
        v,
        out,
        cu_seqlens,
        scale,
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        out.stride(0),
        out.stride(1),
        QK_DIM=qk_dim,
        V_DIM=v_dim,
        BLOCK_DMODEL=triton.next_power_of_2(qk_dim),
        BLOCK_DV=triton.next_power_of_2(v_dim),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        DOT_IN_FP32=_DOT_IN_FP32,
    )
    return out
