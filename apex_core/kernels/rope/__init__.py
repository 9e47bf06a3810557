"""Rotary position embedding of the query and key heads, from a precomputed cos/sin cache.

For each token, the cache row at its position holds cos and sin of rotary_dim/2 angles; each pair
(x_a, x_b) of the first rotary_dim dims of every q and k head is rotated by its angle:
(x_a·cos − x_b·sin, x_b·cos + x_a·sin), in fp32, and written back in the input dtype. Dims past
rotary_dim (Qwen3.5's partial rotary) pass through unchanged. Two pairings exist:

- NeoX / half rotation (Llama, Qwen, GPT-OSS): dim i pairs with dim i + rotary_dim/2;
- GPT-J / interleaved (DeepSeek's MLA rope part): dim 2i pairs with dim 2i + 1.

It reads q, k and one cache row per token and writes q and k: memory-bound.
"""

from __future__ import annotations

from typing import Any

import torch

from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels.rope.frequencies import cos_sin_cache
from apex_core.kernels import seeded

DECODE_TOKENS = 256
"""Up to this many tokens a call is a decode batch (one token per sequence, scattered positions);
above it, one prefill chunk (consecutive positions)."""


def reference_neox(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """NeoX-style rope in fp32: dim i pairs with dim i + rotary_dim/2; dims past rotary_dim pass through."""
    rotary_dim = cos_sin_cache.shape[-1]
    half = rotary_dim // 2
    rows = cos_sin_cache.index_select(0, positions).to(torch.float32)
    cos, sin = rows[:, None, :half], rows[:, None, half:]  # (tokens, 1, rotary_dim/2)
    outputs = []
    for x in (q, k):
        x32 = x.to(torch.float32)
        first, second, rest = x32[..., :half], x32[..., half:rotary_dim], x32[..., rotary_dim:]
        rotated = torch.cat((first * cos - second * sin, second * cos + first * sin, rest), dim=-1)
        outputs.append(rotated.to(x.dtype))
    return outputs[0], outputs[1]


def reference_gptj(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT-J-style (interleaved) rope in fp32: dim 2i pairs with dim 2i + 1, over all rotary_dim dims."""
    rotary_dim = cos_sin_cache.shape[-1]
    half = rotary_dim // 2
    rows = cos_sin_cache.index_select(0, positions).to(torch.float32)
    cos, sin = rows[:, None, :half], rows[:, None, half:]
    outputs = []
    for x in (q, k):
        x32 = x.to(torch.float32)
        even, odd = x32[..., 0:rotary_dim:2], x32[..., 1:rotary_dim:2]
        rotated = torch.stack((even * cos - odd * sin, odd * cos + even * sin), dim=-1).flatten(-2)
        outputs.append(torch.cat((rotated, x32[..., rotary_dim:]), dim=-1).to(x.dtype))
    return outputs[0], outputs[1]


def make_positions(tokens: int, max_position: int, generator: torch.Generator) -> torch.Tensor:
    """Distinct int64 positions: scattered for a decode batch, one consecutive run for a prefill chunk.

    Distinct positions make the cache rows a call must read exactly ``tokens`` rows (the roofline).
    """
    if tokens <= DECODE_TOKENS:
        return torch.randperm(max_position, generator=generator)[:tokens].to(torch.int64)
    start = int(torch.randint(0, max_position - tokens + 1, (1,), generator=generator))
    return torch.arange(start, start + tokens, dtype=torch.int64)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """positions (tokens,) int64, q (tokens, num_heads, head_dim), k (tokens, num_kv_heads, head_dim),
    and the model's (max_position, rotary_dim) fp32 cos/sin cache."""
    generator = seeded.generator(seed)
    torch_dtype = getattr(torch, dtype)
    tokens, head_dim = shape["tokens"], int(params["head_dim"])
    positions = make_positions(tokens, int(params["max_position"]), generator)
    # Projected q and k are roughly unit-variance per element.
    q = torch.randn(tokens, int(params["num_heads"]), head_dim, generator=generator)
    k = torch.randn(tokens, int(params["num_kv_heads"]), head_dim, generator=generator)
    cache = cos_sin_cache(params).to(device, copy=True)
    return positions.to(device), q.to(torch_dtype).to(device), k.to(torch_dtype).to(device), cache


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read and write every q and k element, read the positions and one cache row per token;
    6 FLOPs per rotated pair."""
    tokens, head_dim, rotary_dim = shape["tokens"], int(params["head_dim"]), int(params["rotary_dim"])
    heads = int(params["num_heads"]) + int(params["num_kv_heads"])
    elements = tokens * heads * head_dim
    bytes_moved = 2 * elements * dtype_bytes(dtype) + tokens * 8 + tokens * rotary_dim * 4
    return Roofline(bytes_moved=bytes_moved, flops=3 * tokens * heads * rotary_dim)
