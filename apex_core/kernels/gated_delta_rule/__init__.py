"""The gated delta rule of Qwen3.5's linear-attention (Gated DeltaNet) layers, prefill form.

Each value head keeps a d_k x d_v state S. Per token, with a = exp(g) the decay, beta the write
strength and the query and key L2-normalized:

    S <- a * S                            (forget)
    S <- S + beta * k (v - S^T k)^T       (delta rule: move S^T k toward v)
    o  = S^T q / sqrt(d_k)                (read)

Qwen3.5 has 16 key heads and 48 value heads (grouped value attention): value head h reads query
and key head h // 3. These are fla's ``chunk_gated_delta_rule`` conventions (state (K, V), scale
1/sqrt(d_k)), which vLLM runs for Qwen3-Next and Qwen3.5 with ``use_qk_l2norm_in_kernel``; here q
and k arrive already normalized, as that flag's separate l2norm kernel leaves them. Accumulation
and the state are fp32.

Token by token the rule is a sequential scan; the chunked (WY / UT-transform) form turns each chunk
of 64 tokens into matrix products, which is how fast implementations run it.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels import seeded


def reference_torch(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, initial_state: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The recurrence one token at a time in fp32: returns (o in v's dtype, the final fp32 state)."""
    batch, seqlen, key_heads, d_k = q.shape
    value_heads, d_v = v.shape[2], v.shape[3]
    group = value_heads // key_heads  # value head h reads key head h // group
    q32 = q.to(torch.float32).repeat_interleave(group, dim=2) * d_k**-0.5
    k32 = k.to(torch.float32).repeat_interleave(group, dim=2)
    v32, decay, strength = v.to(torch.float32), torch.exp(g.to(torch.float32)), beta.to(torch.float32)
    state = initial_state.to(torch.float32).clone()  # (batch, value_heads, d_k, d_v)
    out = torch.empty(batch, seqlen, value_heads, d_v, dtype=torch.float32, device=v.device)
    for t in range(seqlen):
        state = state * decay[:, t, :, None, None]
        k_t = k32[:, t, :, :, None]  # (batch, heads, d_k, 1)
        predicted = (state * k_t).sum(dim=2)  # S^T k, (batch, heads, d_v)
        correction = (v32[:, t] - predicted) * strength[:, t, :, None]
        state = state + k_t * correction[:, :, None, :]
        out[:, t] = (state * q32[:, t, :, :, None]).sum(dim=2)
    return out.to(v.dtype), state


def _l2_normalize(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + 1e-6)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """q, k (batch, seqlen, key_heads, d_k), v (batch, seqlen, value_heads, d_v) in ``dtype``; g fp32 and
    beta in ``dtype`` of (batch, seqlen, value_heads); the fp32 initial state (batch, value_heads, d_k, d_v).

    Distributions follow the layer: q, k and v come out of the short conv's SiLU (q and k then
    L2-normalized); g = -A * softplus(a) with a per-head rate A spread log-uniformly over [0.01, 2],
    so some heads remember for hundreds of tokens and some for one; beta = sigmoid(b); the initial
    state has the spread a state reaches after a few hundred tokens (a chunked prefill resuming).
    """
    generator = seeded.generator(seed)
    torch_dtype = getattr(torch, dtype)
    batch, seqlen = shape["batch"], shape["seqlen"]
    key_heads, value_heads = shape["key_heads"], shape["value_heads"]
    d_k, d_v = int(params["head_dim_k"]), int(params["head_dim_v"])
    silu = torch.nn.functional.silu
    q = _l2_normalize(silu(torch.randn(batch, seqlen, key_heads, d_k, generator=generator)))
    k = _l2_normalize(silu(torch.randn(batch, seqlen, key_heads, d_k, generator=generator)))
    v = silu(torch.randn(batch, seqlen, value_heads, d_v, generator=generator))
    rate = torch.exp(torch.empty(value_heads).uniform_(math.log(0.01), math.log(2.0), generator=generator))
    g = -rate * torch.nn.functional.softplus(torch.randn(batch, seqlen, value_heads, generator=generator))
    beta = torch.sigmoid(torch.randn(batch, seqlen, value_heads, generator=generator))
    initial_state = 0.1 * torch.randn(batch, value_heads, d_k, d_v, generator=generator)
    return (
        q.to(torch_dtype).to(device),
        k.to(torch_dtype).to(device),
        v.to(torch_dtype).to(device),
        g.to(torch.float32).to(device),
        beta.to(torch_dtype).to(device),
        initial_state.to(device),
    )


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read q, k, v, g, beta and the initial state, write o and the final state once.

    FLOPs count the three state-sized products every token needs in any formulation (S^T k, the
    rank-1 update, S^T q): 6 d_k d_v per token and value head.
    """
    batch, seqlen = shape["batch"], shape["seqlen"]
    key_heads, value_heads = shape["key_heads"], shape["value_heads"]
    d_k, d_v = int(params["head_dim_k"]), int(params["head_dim_v"])
    itemsize = dtype_bytes(dtype)
    tokens = batch * seqlen
    qk = 2 * tokens * key_heads * d_k * itemsize
    vo = 2 * tokens * value_heads * d_v * itemsize
    gates = tokens * value_heads * (4 + itemsize)
    states = 2 * batch * value_heads * d_k * d_v * 4
    return Roofline(bytes_moved=qk + vo + gates + states, flops=6 * tokens * value_heads * d_k * d_v)
