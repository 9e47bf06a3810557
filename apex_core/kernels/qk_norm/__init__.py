"""QK-norm: the per-head RMSNorm of queries and keys before rope (Qwen3.5's q_norm and k_norm).

Qwen3.5's full-attention layers normalize every query head and every key head over head_dim on its
own, right after the q/k projections and before the rotary embedding:
y = x / sqrt(mean(x², head_dim) + eps) · (1 + w), with one weight vector of head_dim for all query
heads and another for all key heads. As every norm of Qwen3.5 (transformers' ``Qwen3_5RMSNorm``) it
is zero-centered: the checkpoint stores w around 0 and the layer scales by (1 + w), formed in fp32,
with one cast of the fp32 result back to the activation dtype. Serving stacks run q and k through
one kernel (SGLang's in-place ``fused_inplace_qknorm``; vLLM fuses it further with rope), which is
the call a task of this family times: ``qk_norm(q, k, q_weight, k_weight, eps) -> (q_out, k_out)``.

It reads q, k and the two weights once and writes q and k once: memory-bound, like RMSNorm, but
over many short (head_dim) rows, which is what makes it a kernel of its own.
"""

from __future__ import annotations

import math
from typing import Any

from apex_core.kernels import seeded
from apex_core.kernels.rms_norm import reference_torch_zero_centered
from apex_core.kernels.roofline import Roofline, dtype_bytes

FLOPS_PER_ELEMENT = 4
"""Square and accumulate (2), the scale by 1/rms and the scale by (1 + w) (2)."""
HEAD_SCALE_RANGE = 4.0
"""Each (token, head) row is drawn with its own scale, log-uniform in [1/4, 4]: projected heads
differ in magnitude (keeping that from reaching the attention logits is what QK-norm is for), and a
kernel that normalizes a whole token row instead of each head then misses by up to 16x."""


def reference_torch(q: Any, k: Any, q_weight: Any, k_weight: Any, eps: float) -> tuple[Any, Any]:
    """Zero-centered RMSNorm of every q and k head over its last dimension, as Qwen3_5RMSNorm does
    it: the rms_norm family's zero-centered reference (fp32, scaled by 1 + weight, one cast back),
    whose last dimension here is head_dim."""
    return reference_torch_zero_centered(q, q_weight, eps), reference_torch_zero_centered(k, k_weight, eps)


def _heads(tokens: int, heads: int, head_dim: int, generator: Any) -> Any:
    """(tokens, heads, head_dim) fp32 values, each head row at its own scale (HEAD_SCALE_RANGE)."""
    import torch

    log_range = math.log(HEAD_SCALE_RANGE)
    scale = torch.exp((2.0 * torch.rand(tokens, heads, 1, generator=generator) - 1.0) * log_range)
    return torch.randn(tokens, heads, head_dim, generator=generator) * scale


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """q (tokens, num_heads, head_dim), k (tokens, num_kv_heads, head_dim), q_weight and k_weight
    (head_dim,) in ``dtype``, and eps.

    The weights are the stored zero-centered offsets, drawn independently around 0 with spread 0.5
    (so 1 + w spreads like a trained norm weight): a kernel that scales by w instead of 1 + w, or
    that swaps the query and key weights, is far off.
    """
    import torch

    if not params.get("zero_centered"):
        raise ValueError("qk_norm has only the zero-centered (1 + w) form: params.zero_centered must be true")
    generator = seeded.generator(seed)
    torch_dtype = getattr(torch, dtype)
    tokens, head_dim = shape["tokens"], int(params["head_dim"])
    q = _heads(tokens, int(params["num_heads"]), head_dim, generator)
    k = _heads(tokens, int(params["num_kv_heads"]), head_dim, generator)
    q_weight = 0.5 * torch.randn(head_dim, generator=generator)
    k_weight = 0.5 * torch.randn(head_dim, generator=generator)
    return (*(t.to(torch_dtype).to(device) for t in (q, k, q_weight, k_weight)), float(params["eps"]))


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read and write every q and k element once, read the two weight vectors once."""
    head_dim = int(params["head_dim"])
    elements = shape["tokens"] * (int(params["num_heads"]) + int(params["num_kv_heads"])) * head_dim
    return Roofline(bytes_moved=(2 * elements + 2 * head_dim) * dtype_bytes(dtype), flops=FLOPS_PER_ELEMENT * elements)
