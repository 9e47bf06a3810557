"""Baseline causal prefill attention in Triton, written the way inference stacks commonly write it.

A plain flash-attention forward over packed sequences (vLLM's and LightLLM's context-attention
kernels have this shape): one program per (sequence, query head, block of 64 queries) walks the key
blocks up to its diagonal with an online softmax in fp32, applying the causal mask (and the sliding
window, when there is one) to every block, and normalizes at the end. Optional attention sinks join
the denominator. Correct for any lengths and GQA ratio, with the headroom such kernels leave:
modest 64-row tiles, default warps and pipelining, the mask computed on blocks that need none, and
programs launched in an order that leaves the longest rows (the last query blocks) for last.

Triton's CPU interpreter cannot multiply bf16 (triton-lang/triton#11584), so under
TRITON_INTERPRET=1 the two matrix products take fp32 operands; on a GPU they run in bf16.
"""

import os

import torch
import triton
import triton.language as tl

_DOT_IN_FP32 = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _prefill_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    cu_seqlens_ptr,
    sinks_ptr,
    scale,
    stride_q_tok,
    stride_q_head,
    stride_k_tok,
    stride_k_head,
    stride_v_tok,
    stride_v_head,
    stride_o_tok,
    stride_o_head,
    QUERIES_PER_KV: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    USE_SINKS: tl.constexpr,
    SLIDING_WINDOW: tl.constexpr,
    SOFTCAP: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    m_block = tl.program_id(2)
    seq_start = tl.load(cu_seqlens_ptr + seq)
    seq_len = tl.load(cu_seqlens_ptr + seq + 1) - seq_start
    if m_block * BLOCK_M >= seq_len:
        return
    kv_head = head // QUERIES_PER_KV

    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    # BLOCK_D is the head dim rounded up to a power of two (Phi-3.5's 96 -> 128); the padded
    # columns load as zeros, which add nothing to q . k, and are not stored.
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    row_ok = offs_m[:, None] < seq_len
    if BLOCK_D != HEAD_DIM:
        row_ok = row_ok & d_ok[None, :]
    q = tl.load(
        q_ptr + (seq_start + offs_m)[:, None] * stride_q_tok + head * stride_q_head + offs_d[None, :],
        mask=row_ok,
        other=0.0,
    )
    if DOT_IN_FP32:
        q = q.to(tl.float32)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    lo = 0
    if SLIDING_WINDOW > 0:
        lo = tl.maximum(m_block * BLOCK_M - SLIDING_WINDOW + 1, 0) // BLOCK_N * BLOCK_N
    hi = tl.minimum((m_block + 1) * BLOCK_M, seq_len)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        k_ok = cols[None, :] < seq_len
        if BLOCK_D != HEAD_DIM:
            k_ok = k_ok & d_ok[:, None]
        k = tl.load(
            k_ptr + (seq_start + cols)[None, :] * stride_k_tok + kv_head * stride_k_head + offs_d[:, None],
            mask=k_ok,
            other=0.0,
        )
        if DOT_IN_FP32:
            k = k.to(tl.float32)
        scores = tl.dot(q, k) * scale
        if SOFTCAP > 0:  # Gemma 2: cap * tanh(s / cap), tanh written with exp (every backend has it)
            scores = SOFTCAP * (2.0 / (1.0 + tl.exp(-2.0 * scores / SOFTCAP)) - 1.0)
        visible = (cols[None, :] <= offs_m[:, None]) & (cols[None, :] < seq_len)
        if SLIDING_WINDOW > 0:
            visible = visible & (offs_m[:, None] - cols[None, :] < SLIDING_WINDOW)
        scores = tl.where(visible, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        # A row whose window has not started in this block has no visible key yet.
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(scores - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v_ok = cols[:, None] < seq_len
        if BLOCK_D != HEAD_DIM:
            v_ok = v_ok & d_ok[None, :]
        v = tl.load(
            v_ptr + (seq_start + cols)[:, None] * stride_v_tok + kv_head * stride_v_head + offs_d[None, :],
            mask=v_ok,
            other=0.0,
        )
        if DOT_IN_FP32:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    if USE_SINKS:
        sink = tl.load(sinks_ptr + head).to(tl.float32)
        l_i = l_i + tl.exp(sink - m_i)
    acc = acc / l_i[:, None]
    tl.store(
        out_ptr + (seq_start + offs_m)[:, None] * stride_o_tok + head * stride_o_head + offs_d[None, :],
        acc.to(out_ptr.dtype.element_ty),
        mask=row_ok,
    )


def prefill_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    scale: float,
    sinks: torch.Tensor | None = None,
    sliding_window: int = 0,
    softcap: float = 0.0,
) -> torch.Tensor:
    _, num_heads, head_dim = q.shape
    num_kv_heads = k.shape[1]
    assert q.stride(-1) == 1 and k.stride(-1) == 1 and v.stride(-1) == 1
    out = torch.empty_like(q)
    block_m = 64
    block_n = 64 if head_dim <= 128 else 32
    num_seqs = cu_seqlens.shape[0] - 1
    use_sinks = sinks is not None
    grid = (num_seqs, num_heads, triton.cdiv(max_seqlen, block_m))
    _prefill_kernel[grid](
        q,
        k,
        v,
        out,
        cu_seqlens,
        sinks if use_sinks else q,
        scale,
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        out.stride(0),
        out.stride(1),
        QUERIES_PER_KV=num_heads // num_kv_heads,
        HEAD_DIM=head_dim,
        BLOCK_D=triton.next_power_of_2(head_dim),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        USE_SINKS=use_sinks,
        SLIDING_WINDOW=sliding_window,
        SOFTCAP=float(softcap),
        DOT_IN_FP32=_DOT_IN_FP32,
    )
    return out
