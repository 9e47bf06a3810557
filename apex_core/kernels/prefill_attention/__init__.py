"""Causal prefill attention with grouped-query attention (GQA) over packed variable-length sequences.

A prompt of L tokens attends to itself causally: token i of a sequence sees tokens 0 … i of the
same sequence, query head h with KV head h // G. Several prompts are packed back to back along the
token axis and delimited by ``cu_seqlens`` (flash-attention's varlen convention, which vLLM and
SGLang use for prefill). Softmax in fp32. GPT-OSS's sliding layers add a learned per-head sink
logit in the denominator and a 128-token window (token i sees i-127 … i). Gemma 2 soft-caps every
scaled logit, s -> cap · tanh(s / cap) with cap 50, before the mask and the softmax, scales by
query_pre_attn_scalar^-1/2 instead of head_dim^-1/2, and gives every other layer a 4096-token window.

Prefill does about 4·L²/2·heads·head_dim FLOPs against a few bytes per token, so it is
compute-bound except under a short sliding window: its roofline is the causal FLOPs.
"""

from __future__ import annotations

from typing import Any

from apex_core.kernels.attention_logits import attention_scale, optional_arguments, query_temperature
from apex_core.kernels.paged_decode_attention.paged_cache import context_lengths
from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels import seeded

_REFERENCE_CHUNK = 256
"""Queries per reference step: bounds the fp32 score matrix at 16k tokens to a few hundred MB."""


def reference_torch(
    q: Any,
    k: Any,
    v: Any,
    cu_seqlens: Any,
    max_seqlen: int,
    scale: float,
    sinks: Any = None,
    sliding_window: int = 0,
    softcap: float = 0.0,
) -> Any:
    """fp32 causal attention per packed sequence, computed a chunk of queries at a time.

    q: (tokens, num_heads, head_dim); k: (tokens, num_kv_heads, head_dim); v: (tokens,
    num_kv_heads, v_head_dim), where v_head_dim is head_dim for every GQA model and narrower for
    MLA's decompressed values (128 against 192: ``mla.py``); cu_seqlens: (num_seqs + 1,) int32
    offsets of the sequences along the token axis. sinks (num_heads,) float32 joins each head's
    softmax denominator; sliding_window > 0 keeps the last sliding_window keys (the query's own
    included); softcap > 0 caps each scaled logit to softcap · tanh(logit / softcap).
    Returns (tokens, num_heads, v_head_dim) in q's dtype.
    """
    import torch

    _, num_heads, head_dim = q.shape
    num_kv_heads, v_head_dim = k.shape[1], v.shape[-1]
    group = num_heads // num_kv_heads
    out = q.new_empty(q.shape[0], num_heads, v_head_dim)
    bounds = cu_seqlens.tolist()
    for start, end in zip(bounds[:-1], bounds[1:]):
        for q0 in range(start, end, _REFERENCE_CHUNK):
            q1 = min(q0 + _REFERENCE_CHUNK, end)
            k0 = max(start, q0 - sliding_window + 1) if sliding_window > 0 else start
            query = q[q0:q1].float().view(q1 - q0, num_kv_heads, group, head_dim)
            scores = torch.einsum("qhgd,khd->hgqk", query, k[k0:q1].float()) * scale
            if softcap > 0:
                scores = softcap * torch.tanh(scores / softcap)
            q_pos = torch.arange(q0, q1, device=q.device)[:, None]
            k_pos = torch.arange(k0, q1, device=q.device)[None, :]
            visible = k_pos <= q_pos
            if sliding_window > 0:
                visible &= q_pos - k_pos < sliding_window
            scores = scores.masked_fill(~visible, float("-inf"))
            if sinks is not None:
                sink_logits = sinks.float().view(num_kv_heads, group, 1, 1).expand(-1, -1, q1 - q0, 1)
                probs = torch.softmax(torch.cat([scores, sink_logits], dim=-1), dim=-1)[..., :-1]
            else:
                probs = torch.softmax(scores, dim=-1)
            attended = torch.einsum("hgqk,khd->qhgd", probs, v[k0:q1].float())
            out[q0:q1] = attended.reshape(q1 - q0, num_heads, v_head_dim).to(q.dtype)
    return out


def sequence_lengths(shape: dict[str, int]) -> list[int]:
    """The packed prompts' lengths: the first ``seq_len`` long, the others within 3/4 of it; a fixed
    function of the shape, so every input set of a shape does the same work."""
    return context_lengths(shape["seqs"], shape["seq_len"], salt=1)


def packed_offsets(lengths: list[int]) -> Any:
    """``cu_seqlens`` of prompts of ``lengths`` packed back to back: int32 (num_seqs + 1,), prompt i
    at tokens cu_seqlens[i] ... cu_seqlens[i + 1] - 1 (flash-attention's varlen convention)."""
    import torch

    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    return torch.tensor(offsets, dtype=torch.int32)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """Packed prompts with N(0, 1) keys and values and per-head query temperatures.

    Each query head gets a logit spread between 1 and 2.5 standard deviations, so heads range from
    broad to sharp as trained heads do (uniform random logits would average long rows to noise).
    Sinks (GPT-OSS) range from a negligible to a dominant share of a head's softmax mass. Under a
    soft cap (Gemma 2) the logits spread to 0.4-1 times the cap, so the cap bends most of them and a
    kernel that leaves it out fails by far.
    """
    import torch

    generator = seeded.generator(seed)
    torch_dtype = getattr(torch, dtype)
    lengths = sequence_lengths(shape)
    tokens = sum(lengths)
    num_heads, num_kv_heads, head_dim = int(params["num_heads"]), int(params["num_kv_heads"]), int(params["head_dim"])
    scale, softcap = attention_scale(params), float(params.get("softcap", 0.0))
    temperature = query_temperature(num_heads, head_dim, scale, softcap, generator)
    q = (torch.randn(tokens, num_heads, head_dim, generator=generator) * temperature).to(torch_dtype)
    k = torch.randn(tokens, num_kv_heads, head_dim, generator=generator).to(torch_dtype)
    v = torch.randn(tokens, num_kv_heads, head_dim, generator=generator).to(torch_dtype)
    cu_seqlens = packed_offsets(lengths)
    args: list[Any] = [t.to(device) for t in (q, k, v, cu_seqlens)] + [max(lengths), scale]
    return tuple(args + optional_arguments(params, num_heads, generator, device))


def visible_pairs(length: int, sliding_window: int = 0) -> int:
    """(query, key) pairs a causal prompt of ``length`` tokens computes, under an optional window."""
    if sliding_window <= 0 or length <= sliding_window:
        return length * (length + 1) // 2
    return sliding_window * (sliding_window + 1) // 2 + (length - sliding_window) * sliding_window


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """FLOPs: 2 per multiply-add of q·Kᵀ and P·V over the visible pairs; bytes: q, k, v and out once."""
    itemsize = dtype_bytes(dtype)
    lengths = sequence_lengths(shape)
    tokens = sum(lengths)
    num_heads, num_kv_heads, head_dim = int(params["num_heads"]), int(params["num_kv_heads"]), int(params["head_dim"])
    window = int(params.get("sliding_window", 0))
    pairs = sum(visible_pairs(n, window) for n in lengths)
    bytes_moved = (2 * tokens * num_heads + 2 * tokens * num_kv_heads) * head_dim * itemsize + 4 * (len(lengths) + 1)
    if params.get("attention_sinks"):
        bytes_moved += 4 * num_heads
    return Roofline(bytes_moved=bytes_moved, flops=4 * pairs * num_heads * head_dim)
