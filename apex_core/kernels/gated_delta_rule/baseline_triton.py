"""Baseline gated delta rule in Triton: the token-by-token recurrence, as fused recurrent kernels write it.

One program per (sequence, value head, block of 32 value columns) holds its 128 x 32 slice of the
fp32 state in registers and walks the sequence one token at a time: decay the state, read S^T k,
apply the delta-rule update, read S^T q and store the output row. This is how fla's and vLLM's
fused recurrent gated delta rule kernels run decode, applied to a whole prefill. Correct for any
length, simple, and with the headroom a real kernel leaves: every token is a dependent step of
small vector work and reductions, so a long prompt is a long serial chain per program, with no
matrix-core work at all.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _gated_delta_rule_recurrent_kernel(
    q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, h0_ptr, o_ptr, ht_ptr,
    seqlen, scale,
    KEY_HEADS: tl.constexpr, VALUE_HEADS: tl.constexpr,
    D_K: tl.constexpr, D_V: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):
    v_block = tl.program_id(0)
    batch_head = tl.program_id(1)
    batch = batch_head // VALUE_HEADS
    value_head = batch_head % VALUE_HEADS
    key_head = value_head // (VALUE_HEADS // KEY_HEADS)

    offs_k = tl.arange(0, BLOCK_K)
    offs_v = v_block * BLOCK_V + tl.arange(0, BLOCK_V)
    mask_k = offs_k < D_K
    mask_v = offs_v < D_V
    mask_state = mask_k[:, None] & mask_v[None, :]

    state_offs = batch_head * D_K * D_V + offs_k[:, None] * D_V + offs_v[None, :]
    state = tl.load(h0_ptr + state_offs, mask=mask_state, other=0.0).to(tl.float32)

    p_q = q_ptr + (batch * seqlen * KEY_HEADS + key_head) * D_K + offs_k
    p_k = k_ptr + (batch * seqlen * KEY_HEADS + key_head) * D_K + offs_k
    p_v = v_ptr + (batch * seqlen * VALUE_HEADS + value_head) * D_V + offs_v
    p_o = o_ptr + (batch * seqlen * VALUE_HEADS + value_head) * D_V + offs_v
    p_g = g_ptr + batch * seqlen * VALUE_HEADS + value_head
    p_beta = beta_ptr + batch * seqlen * VALUE_HEADS + value_head

    for _ in range(0, seqlen):
        b_q = tl.load(p_q, mask=mask_k, other=0.0).to(tl.float32) * scale
        b_k = tl.load(p_k, mask=mask_k, other=0.0).to(tl.float32)
        b_v = tl.load(p_v, mask=mask_v, other=0.0).to(tl.float32)
        b_g = tl.load(p_g).to(tl.float32)
        b_beta = tl.load(p_beta).to(tl.float32)
        state = state * tl.exp(b_g)
        b_v = (b_v - tl.sum(state * b_k[:, None], axis=0)) * b_beta
        state = state + b_k[:, None] * b_v[None, :]
        b_o = tl.sum(state * b_q[:, None], axis=0)
        tl.store(p_o, b_o.to(o_ptr.dtype.element_ty), mask=mask_v)
        p_q += KEY_HEADS * D_K
        p_k += KEY_HEADS * D_K
        p_v += VALUE_HEADS * D_V
        p_o += VALUE_HEADS * D_V
        p_g += VALUE_HEADS
        p_beta += VALUE_HEADS

    tl.store(ht_ptr + state_offs, state, mask=mask_state)


def gated_delta_rule(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, initial_state: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    q, k, v, g, beta, h0 = (t.contiguous() for t in (q, k, v, g, beta, initial_state))
    batch, seqlen, key_heads, d_k = q.shape
    value_heads, d_v = v.shape[2], v.shape[3]
    o = torch.empty_like(v)
    final_state = torch.empty(batch, value_heads, d_k, d_v, dtype=torch.float32, device=v.device)
    block_k = triton.next_power_of_2(d_k)
    block_v = min(triton.next_power_of_2(d_v), 32)
    grid = (triton.cdiv(d_v, block_v), batch * value_heads)
    _gated_delta_rule_recurrent_kernel[grid](
        q, k, v, g, beta, h0, o, final_state, seqlen, d_k**-0.5,
        KEY_HEADS=key_heads, VALUE_HEADS=value_heads, D_K=d_k, D_V=d_v, BLOCK_K=block_k, BLOCK_V=block_v,
    )
    return o, final_state
