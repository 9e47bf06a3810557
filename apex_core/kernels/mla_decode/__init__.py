"""DeepSeek multi-head latent attention (MLA) decode in the weight-absorbed form inference stacks run.

DeepSeek-V3/R1 caches one 576-wide latent row per token, shared by all 128 heads: the normalized
KV latent c_kv (kv_lora_rank = 512) followed by the rotary key part k_pe (qk_rope_head_dim = 64).
At decode, stacks (FlashMLA, vLLM, SGLang) absorb the key up-projection into the query, so each
head's query is [q_nope·W_UK (512) | q_pe (64)] and attention runs directly on the latent cache:
scores = scale · q · [c_kv | k_pe]ᵀ, out = softmax(scores) · c_kv (512 wide; the value
up-projection is applied afterwards, outside this kernel). The cache is paged (64-token blocks,
FlashMLA's page size). Softmax in fp32. scale is DeepSeek's: qk_head_dim^-0.5 (192^-0.5) times
the square of the YaRN attention factor 0.1·mscale_all_dim·ln(rope factor) + 1.

With 128 heads sharing every latent row, decode does ~240 FLOPs per cached byte: near the ridge
point of current GPUs, so the roofline counts both the latent bytes and the FLOPs.
"""

from __future__ import annotations

import math
from typing import Any

from apex_core.kernels.paged_decode_attention.paged_cache import build_block_tables, context_lengths, live_blocks
from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels import seeded


def reference_torch(q: Any, kv_cache: Any, block_tables: Any, seq_lens: Any, scale: float, kv_lora_rank: int) -> Any:
    """fp32 attention of each sequence's 128 absorbed queries over its latent rows.

    q: (batch, num_heads, kv_lora_rank + rope_dim); kv_cache: (num_blocks, block_size,
    kv_lora_rank + rope_dim); block_tables: (batch, max_blocks) int32; seq_lens: (batch,) int32.
    Keys are whole latent rows, values their first kv_lora_rank columns. Returns
    (batch, num_heads, kv_lora_rank) in q's dtype.
    """
    import torch

    batch, num_heads, _ = q.shape
    block_size = kv_cache.shape[1]
    out = q.new_empty(batch, num_heads, kv_lora_rank)
    for b, seq_len in enumerate(seq_lens.tolist()):
        positions = torch.arange(seq_len, device=q.device)
        latent = kv_cache[block_tables[b, positions // block_size].long(), positions % block_size].float()
        probs = torch.softmax(q[b].float() @ latent.T * scale, dim=-1)  # (heads, seq_len)
        out[b] = (probs @ latent[:, :kv_lora_rank]).to(q.dtype)
    return out


def softmax_scale(params: dict[str, Any]) -> float:
    """DeepSeek's attention scale: (qk_nope + qk_rope)^-0.5 · (0.1·mscale_all_dim·ln(factor) + 1)²."""
    qk_head_dim = int(params["qk_nope_head_dim"]) + int(params["qk_rope_head_dim"])
    mscale = 0.1 * float(params["mscale_all_dim"]) * math.log(float(params["rope_factor"])) + 1.0
    return qk_head_dim**-0.5 * mscale * mscale


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """A decode step of ``batch`` sequences near ``context`` tokens over a scattered latent cache.

    Latent rows are N(0, 1) (c_kv comes out of an RMSNorm). Each head's query is scaled so its
    logits spread 1 to 2.5 standard deviations (sharp and broad heads; uniform logits would average
    a long context to noise).
    """
    import torch

    generator = seeded.generator(seed)
    torch_dtype = getattr(torch, dtype)
    batch, context = shape["batch"], shape["context"]
    num_heads, rank, rope = int(params["num_heads"]), int(params["kv_lora_rank"]), int(params["qk_rope_head_dim"])
    block_size = int(params["block_size"])
    scale = softmax_scale(params)
    seq_lens = context_lengths(batch, context)
    block_tables, num_blocks = build_block_tables(seq_lens, block_size, generator)
    kv_cache = torch.randn(num_blocks, block_size, rank + rope, generator=generator).to(torch_dtype)
    spread = 1.0 + 1.5 * torch.rand(num_heads, 1, generator=generator)
    q = torch.randn(batch, num_heads, rank + rope, generator=generator) * spread / (scale * math.sqrt(rank + rope))
    tensors = (q.to(torch_dtype), kv_cache, block_tables, torch.tensor(seq_lens, dtype=torch.int32))
    return tuple(t.to(device) for t in tensors) + (scale, rank)


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Bytes: every latent row once, q, out, live block-table entries and lengths. FLOPs: 2 per
    multiply-add of q·[c_kv | k_pe]ᵀ (576 wide) and P·c_kv (512 wide), for every head."""
    itemsize = dtype_bytes(dtype)
    batch = shape["batch"]
    num_heads, rank, rope = int(params["num_heads"]), int(params["kv_lora_rank"]), int(params["qk_rope_head_dim"])
    block_size = int(params["block_size"])
    seq_lens = context_lengths(batch, shape["context"])
    keys = sum(seq_lens)
    table_entries = sum(len(live_blocks(n, block_size)) for n in seq_lens)
    bytes_moved = (keys * (rank + rope) + batch * num_heads * (2 * rank + rope)) * itemsize + 4 * (table_entries + batch)
    return Roofline(bytes_moved=bytes_moved, flops=2 * keys * num_heads * (2 * rank + rope))
