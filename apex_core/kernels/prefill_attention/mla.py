"""Multi-head latent attention (MLA) prefill as serving stacks run it: the latent decompressed into
per-head keys and values, then causal varlen attention whose values are narrower than its keys.

DeepSeek-V3/R1 and Kimi K2 cache one compressed latent row per token, which decode attends over
directly (``mla_decode``). Prefill has as many queries as keys, so vLLM's MLA backends and SGLang
take the compute-friendly path instead: they up-project the latent into a key and a value for
every head and run ordinary causal attention over the packed prompts, one KV head per query head
(MHA). Query and key heads are [nope (qk_nope_head_dim 128) | rope (qk_rope_head_dim 64)], 192
wide, and the key's rope part is the token's one decoupled rope key, the same in every head (vLLM
concatenates it expanded over the heads); value heads are v_head_dim = 128 wide. The softmax scale
is DeepSeek's: 192^-0.5 times the square of YaRN's mscale, 0.1 · mscale_all_dim · ln(factor) + 1.

This is the family's causal varlen attention with a value head dim of its own, so the reference is
the family's ``reference_torch`` (which takes the value head dim from v), and the packing, prompt
lengths and query temperatures are the family's too.

Prefill does 2·(192 + 128) FLOPs per head and visible (query, key) pair against 2·(2·192 + 2·128)
bytes per head and token: compute-bound at every prompt length of the tasks.
"""

from __future__ import annotations

import re
from typing import Any

from apex_core.kernels import seeded
from apex_core.kernels.attention_logits import query_temperature
from apex_core.kernels.mla_decode import softmax_scale as deepseek_softmax_scale
from apex_core.kernels.prefill_attention import packed_offsets, reference_torch as causal_attention
from apex_core.kernels.prefill_attention import sequence_lengths, visible_pairs
from apex_core.kernels.roofline import Roofline, dtype_bytes


def reference_torch(q: Any, k: Any, v: Any, cu_seqlens: Any, max_seqlen: int, scale: float) -> Any:
    """fp32 causal attention within each packed prompt, head h on key and value head h, rounded
    once to q's dtype. q, k: (tokens, heads, 192); v: (tokens, heads, 128) -> (tokens, heads, 128)."""
    return causal_attention(q, k, v, cu_seqlens, max_seqlen, scale)


def yarn_factor(rope_scaling: str) -> float | None:
    """The factor of a registry ``rope_scaling`` text such as 'yarn (factor 40, original 4096, ...)';
    None where the scaling is not YaRN (no mscale then)."""
    match = re.fullmatch(r"\s*yarn\s*\((.*)\)\s*", rope_scaling)
    if match is None:
        return None
    for item in match.group(1).split(","):
        words = item.split()
        if len(words) == 2 and words[0] == "factor":
            return float(words[1])
    raise ValueError(f"YaRN rope scaling without a factor: {rope_scaling!r}")


def softmax_scale(params: dict[str, Any]) -> float:
    """(qk_nope + qk_rope)^-0.5, times YaRN's mscale squared where the model scales its rope with
    YaRN (DeepSeek-V3's inference/model.py, MLA.__init__; transformers' DeepseekV3Attention): the
    scale ``mla_decode`` uses, with the factor read from the registry's rope_scaling text."""
    factor = yarn_factor(str(params["rope_scaling"]))
    if factor is None or factor <= 1:
        return (int(params["qk_nope_head_dim"]) + int(params["qk_rope_head_dim"])) ** -0.5
    return deepseek_softmax_scale({**params, "rope_factor": factor})


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """Packed prompts: q, k (tokens, heads, 192), v (tokens, heads, 128), cu_seqlens, max_seqlen, scale.

    The shape is the family's (``seqs`` prompts, the first ``seq_len`` long) and ``heads``: the
    model's heads in every shape a GPU runs, a few in the interpreter's cpu_shapes, whose cost is
    per head (as fused_moe_shared's cpu_shapes hold a few experts).

    Keys and values are N(0, 1), the key's rope part drawn once per token and shared by every head
    as MLA's is. Each head's queries are scaled so that its logits, under the model's scale, spread
    1 to 2.5 standard deviations (the family's temperatures: broad to sharp heads). The scale's
    mscale² (1.87 for DeepSeek, 2.0 for Kimi K2) and the rope part's third of the logit variance
    are thereby each far more than the tolerance can hide.
    """
    import torch

    generator = seeded.generator(seed)
    torch_dtype = getattr(torch, dtype)
    lengths = sequence_lengths(shape)
    tokens = sum(lengths)
    heads, nope, rope = shape["heads"], int(params["qk_nope_head_dim"]), int(params["qk_rope_head_dim"])
    qk_dim, v_dim = nope + rope, int(params["v_head_dim"])
    scale = softmax_scale(params)
    temperature = query_temperature(heads, qk_dim, scale, 0.0, generator) / (scale * qk_dim**0.5)
    q = (torch.randn(tokens, heads, qk_dim, generator=generator) * temperature).to(torch_dtype)
    k_nope = torch.randn(tokens, heads, nope, generator=generator)
    k_pe = torch.randn(tokens, 1, rope, generator=generator)
    k = torch.cat([k_nope, k_pe.expand(-1, heads, -1)], dim=-1).to(torch_dtype)
    v = torch.randn(tokens, heads, v_dim, generator=generator).to(torch_dtype)
    tensors = (q, k, v, packed_offsets(lengths))
    return (*(t.to(device) for t in tensors), max(lengths), scale)


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """FLOPs: 2 per multiply-add of q·Kᵀ (192 wide) and P·V (128 wide) over the causal pairs, every
    head; bytes: q, k, v and the output once, and cu_seqlens. k counts whole, as it is passed,
    though its rope part repeats across heads."""
    itemsize = dtype_bytes(dtype)
    lengths = sequence_lengths(shape)
    tokens = sum(lengths)
    heads = shape["heads"]
    qk_dim, v_dim = int(params["qk_nope_head_dim"]) + int(params["qk_rope_head_dim"]), int(params["v_head_dim"])
    pairs = sum(visible_pairs(n) for n in lengths)
    bytes_moved = tokens * heads * (2 * qk_dim + 2 * v_dim) * itemsize + 4 * (len(lengths) + 1)
    return Roofline(bytes_moved=bytes_moved, flops=2 * pairs * heads * (qk_dim + v_dim))
