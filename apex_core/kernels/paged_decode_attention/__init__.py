"""Decode attention over a paged KV cache with grouped-query attention (GQA).

One new query token per sequence attends to all of that sequence's cached keys:
out[b, h] = softmax(scale · q[b, h] · K_b[:, h // G]ᵀ) · V_b[:, h // G], with G = query heads per KV
head. Keys and values live in vLLM's paged layout (num_blocks, block_size, num_kv_heads, head_dim)
and are found through a block table. The softmax is computed in fp32, as every inference stack
does. GPT-OSS adds two things on its sliding-window layers: a learned per-head "sink" logit that
joins the softmax denominator only (it absorbs probability mass but contributes no value), and a
128-token window (the query at position p sees keys p-127 … p), as in openai/gpt-oss's reference
``sdpa`` and vLLM's attention with sinks. Gemma 2 soft-caps every scaled logit (cap · tanh(s / cap),
cap 50), scales by query_pre_attn_scalar^-1/2, and gives every other layer a 4096-token window
(``apex_core.kernels.attention_logits``).

Decode reads every cached key and value once per step and does ~4 FLOPs per byte, so it is
memory-bound: its roofline is the KV bytes.
"""

from __future__ import annotations

from typing import Any

from apex_core.kernels.attention_logits import attention_scale, optional_arguments, query_temperature
from apex_core.kernels.paged_decode_attention.paged_cache import (
    attended_lengths,
    build_block_tables,
    cdiv,
    context_lengths,
    live_blocks,
)
from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels import seeded


def reference_torch(
    q: Any,
    key_cache: Any,
    value_cache: Any,
    block_tables: Any,
    seq_lens: Any,
    scale: float,
    sinks: Any = None,
    sliding_window: int = 0,
    softcap: float = 0.0,
) -> Any:
    """fp32 attention of each sequence's query over its own keys, gathered through the block table.

    q: (batch, num_heads, head_dim); key_cache/value_cache: (num_blocks, block_size, num_kv_heads,
    head_dim); block_tables: (batch, max_blocks) int32; seq_lens: (batch,) int32. sinks (num_heads,)
    float32 joins each head's softmax denominator as one extra logit; sliding_window > 0 keeps only
    the last sliding_window keys; softcap > 0 caps each scaled logit to softcap · tanh(logit / softcap).
    Returns (batch, num_heads, head_dim) in q's dtype.
    """
    import torch

    batch, num_heads, head_dim = q.shape
    block_size, num_kv_heads = key_cache.shape[1], key_cache.shape[2]
    group = num_heads // num_kv_heads
    out = torch.empty_like(q)
    for b, seq_len in enumerate(seq_lens.tolist()):
        first = max(0, seq_len - sliding_window) if sliding_window > 0 else 0
        positions = torch.arange(first, seq_len, device=q.device)
        blocks = block_tables[b, positions // block_size].long()
        keys = key_cache[blocks, positions % block_size].float()  # (n, kv_heads, head_dim)
        values = value_cache[blocks, positions % block_size].float()
        query = q[b].float().view(num_kv_heads, group, head_dim)
        scores = torch.einsum("hgd,nhd->hgn", query, keys) * scale
        if softcap > 0:
            scores = softcap * torch.tanh(scores / softcap)
        if sinks is not None:
            sink_logits = sinks.float().view(num_kv_heads, group, 1)
            probs = torch.softmax(torch.cat([scores, sink_logits], dim=-1), dim=-1)[..., :-1]
        else:
            probs = torch.softmax(scores, dim=-1)
        out[b] = torch.einsum("hgn,nhd->hgd", probs, values).reshape(num_heads, head_dim).to(q.dtype)
    return out


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """A decode step of ``batch`` sequences near ``context`` tokens long over a scattered paged cache.

    Keys and values are N(0, 1). Query heads get their own temperature (logit spread 1 to 2.5 standard
    deviations), so some heads attend sharply and others broadly, as trained heads do; with uniform
    random logits a long context would average every output down to noise. Sinks (GPT-OSS) are
    drawn so that they take anywhere from a negligible to a dominant share of a head's mass.
    """
    import torch

    generator = seeded.generator(seed)
    torch_dtype = getattr(torch, dtype)
    batch, context = shape["batch"], shape["context"]
    num_heads, num_kv_heads, head_dim = int(params["num_heads"]), int(params["num_kv_heads"]), int(params["head_dim"])
    block_size = int(params["block_size"])
    window = int(params.get("sliding_window", 0))
    seq_lens = context_lengths(batch, context)
    block_tables, num_blocks = build_block_tables(seq_lens, block_size, generator, window)
    cache_shape = (num_blocks, block_size, num_kv_heads, head_dim)
    key_cache = torch.randn(cache_shape, generator=generator, dtype=torch.float32).to(torch_dtype)
    value_cache = torch.randn(cache_shape, generator=generator, dtype=torch.float32).to(torch_dtype)
    scale, softcap = attention_scale(params), float(params.get("softcap", 0.0))
    temperature = query_temperature(num_heads, head_dim, scale, softcap, generator)
    q = (torch.randn(batch, num_heads, head_dim, generator=generator) * temperature).to(torch_dtype)
    args: list[Any] = [q, key_cache, value_cache, block_tables, torch.tensor(seq_lens, dtype=torch.int32)]
    args = [a.to(device) for a in args] + [scale]
    return tuple(args + optional_arguments(params, num_heads, generator, device))


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Bytes: the attended keys and values, q, out, the live block-table entries and lengths (plus
    the sinks); FLOPs: 2 per multiply-add of q·K and P·V."""
    itemsize = dtype_bytes(dtype)
    batch = shape["batch"]
    num_heads, num_kv_heads, head_dim = int(params["num_heads"]), int(params["num_kv_heads"]), int(params["head_dim"])
    block_size = int(params["block_size"])
    window = int(params.get("sliding_window", 0))
    seq_lens = context_lengths(batch, shape["context"])
    keys = sum(attended_lengths(seq_lens, window))
    table_entries = sum(len(live_blocks(n, block_size, window)) for n in seq_lens)
    kv_bytes = 2 * keys * num_kv_heads * head_dim * itemsize
    q_out_bytes = 2 * batch * num_heads * head_dim * itemsize
    meta_bytes = 4 * (table_entries + batch) + (4 * num_heads if params.get("attention_sinks") else 0)
    return Roofline(bytes_moved=kv_bytes + q_out_bytes + meta_bytes, flops=4 * keys * num_heads * head_dim)


__all__ = ["cdiv", "make_inputs_torch", "reference_torch", "roofline"]
