"""Our causal prefill attention: a tuned flash-attention forward over packed prompts.

What it changes from the baseline, and why that is faster:
- Bigger query tiles (128 rows instead of 64) with 8 warps for head_dim 128 and 256: each key and
  value tile loaded into shared memory feeds twice as many rows of the matrix products, halving
  the K/V traffic per FLOP and keeping the matrix cores busier per load; 3-stage pipelining where
  shared memory allows.
- Causal work split in two phases: blocks wholly below the diagonal run without any mask (no
  index compares, no selects, unmasked vector loads); only the diagonal block(s) build the causal
  mask. The baseline masks every block.
- Launch order: query heads vary fastest and query blocks run from the last (longest rows) to the
  first. The heaviest programs start first, so the short ones fill the tail instead of the long
  ones straggling, and the query heads of a GQA group run side by side, reading their shared
  K/V tiles from L2.
- exp2 with the softmax scale folded into log2(e).

Triton's CPU interpreter cannot multiply bf16 (triton-lang/triton#11584), so under
TRITON_INTERPRET=1 the matrix products take fp32 operands; on a GPU they run in bf16.
"""

import os

import torch
import triton
import triton.language as tl

_LOG2E = 1.4426950408889634
_DOT_IN_FP32 = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _attend(
    acc,
    l_i,
    m_i,
    q,
    k_base,
    v_base,
    stride_k_tok,
    stride_v_tok,
    offs_m,
    offs_n,
    offs_d,
    d_ok,
    lo,
    hi,
    seq_len,
    qk_scale,
    MASKED: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
    SOFTCAP2: tl.constexpr,
    PAD_D: tl.constexpr,
):
    """Online softmax over key blocks [lo, hi); MASKED blocks apply the causal mask and the end;
    PAD_D masks the columns past a head dim that is not a power of two."""
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        if PAD_D:
            k = tl.load(k_base + cols[:, None] * stride_k_tok + offs_d[None, :], mask=(cols[:, None] < seq_len) & d_ok[None, :], other=0.0)
        elif MASKED:
            k = tl.load(k_base + cols[:, None] * stride_k_tok + offs_d[None, :], mask=cols[:, None] < seq_len, other=0.0)
        else:
            k = tl.load(k_base + cols[:, None] * stride_k_tok + offs_d[None, :])
        if DOT_IN_FP32:
            k = k.to(tl.float32)
        scores = tl.dot(q, tl.trans(k)) * qk_scale
        if SOFTCAP2 > 0:  # cap * tanh(s / cap) in log2 units: the scale folds in log2(e), so the cap does too
            scores = SOFTCAP2 * (2.0 / (1.0 + tl.exp2(-2.8853900817779268 * scores / SOFTCAP2)) - 1.0)
        if MASKED:
            visible = (cols[None, :] <= offs_m[:, None]) & (cols[None, :] < seq_len)
            scores = tl.where(visible, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if PAD_D:
            v = tl.load(v_base + cols[:, None] * stride_v_tok + offs_d[None, :], mask=(cols[:, None] < seq_len) & d_ok[None, :], other=0.0)
        elif MASKED:
            v = tl.load(v_base + cols[:, None] * stride_v_tok + offs_d[None, :], mask=cols[:, None] < seq_len, other=0.0)
        else:
            v = tl.load(v_base + cols[:, None] * stride_v_tok + offs_d[None, :])
        if DOT_IN_FP32:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _prefill_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    cu_seqlens_ptr,
    qk_scale,
    stride_q_tok,
    stride_q_head,
    stride_k_tok,
    stride_k_head,
    stride_v_tok,
    stride_v_head,
    stride_o_tok,
    stride_o_head,
    num_m_blocks,
    QUERIES_PER_KV: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
    SOFTCAP2: tl.constexpr,
):
    head = tl.program_id(0)
    m_block = num_m_blocks - 1 - tl.program_id(1)  # longest rows first
    seq = tl.program_id(2)
    seq_start = tl.load(cu_seqlens_ptr + seq)
    seq_len = tl.load(cu_seqlens_ptr + seq + 1) - seq_start
    m_start = m_block * BLOCK_M
    if m_start >= seq_len:
        return
    kv_head = head // QUERIES_PER_KV
    offs_m = m_start + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)  # the head dim rounded up to a power of two (Phi-3.5: 96 -> 128)
    d_ok = offs_d < HEAD_DIM
    row_mask = offs_m[:, None] < seq_len
    if BLOCK_D != HEAD_DIM:
        row_mask = row_mask & d_ok[None, :]
    q_rows = q_ptr + (seq_start + offs_m).to(tl.int64)[:, None] * stride_q_tok + head * stride_q_head
    q = tl.load(q_rows + offs_d[None, :], mask=row_mask, other=0.0)
    if DOT_IN_FP32:
        q = q.to(tl.float32)
    k_base = k_ptr + seq_start.to(tl.int64) * stride_k_tok + kv_head * stride_k_head
    v_base = v_ptr + seq_start.to(tl.int64) * stride_v_tok + kv_head * stride_v_head

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    # Blocks left of the diagonal: every key visible, no mask.
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, stride_k_tok, stride_v_tok, offs_m, offs_n, offs_d,
                            d_ok, 0, m_start, seq_len, qk_scale, False, BLOCK_N, DOT_IN_FP32, SOFTCAP2, BLOCK_D != HEAD_DIM)
    # The diagonal block(s): causal mask and the sequence end.
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, stride_k_tok, stride_v_tok, offs_m, offs_n, offs_d,
                            d_ok, m_start, tl.minimum(m_start + BLOCK_M, seq_len), seq_len, qk_scale, True, BLOCK_N, DOT_IN_FP32,
                            SOFTCAP2, BLOCK_D != HEAD_DIM)
    out = acc / l_i[:, None]
    o_rows = out_ptr + (seq_start + offs_m).to(tl.int64)[:, None] * stride_o_tok + head * stride_o_head
    tl.store(o_rows + offs_d[None, :], out.to(out_ptr.dtype.element_ty), mask=row_mask)


def _config(head_dim: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) per head_dim; shared memory stays under 160 KiB."""
    if head_dim <= 128:
        return 128, 64, 8, 3
    return 128, 32, 8, 2


def prefill_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    scale: float,
    sinks: None = None,
    sliding_window: int = 0,
    softcap: float = 0.0,
) -> torch.Tensor:
    """Full causal attention, soft-capped where softcap > 0 (Gemma 2's global layers); no sinks or
    window (GPT-OSS's sliding layers have a solution of their own)."""
    assert sinks is None and sliding_window == 0, "this solution serves full-attention layers"
    _, num_heads, head_dim = q.shape
    num_kv_heads = k.shape[1]
    assert q.stride(-1) == 1 and k.stride(-1) == 1 and v.stride(-1) == 1
    out = torch.empty_like(q)
    block_m, block_n, num_warps, num_stages = _config(head_dim)
    num_seqs = cu_seqlens.shape[0] - 1
    num_m_blocks = triton.cdiv(max_seqlen, block_m)
    _prefill_kernel[(num_heads, num_m_blocks, num_seqs)](
        q,
        k,
        v,
        out,
        cu_seqlens,
        scale * _LOG2E,
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        out.stride(0),
        out.stride(1),
        num_m_blocks,
        QUERIES_PER_KV=num_heads // num_kv_heads,
        HEAD_DIM=head_dim,
        BLOCK_D=triton.next_power_of_2(head_dim),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        DOT_IN_FP32=_DOT_IN_FP32,
        SOFTCAP2=float(softcap) * _LOG2E,
        num_warps=num_warps,
        num_stages=num_stages,
    )
    return out
