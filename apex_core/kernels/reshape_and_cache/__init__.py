"""KV-cache write (vLLM's reshape_and_cache_flash): each new token's key and value into its cache slot.

Every attention layer of every step writes the step's new keys and values into the paged cache
before attention reads them: token i goes to slot ``slot_mapping[i]``, i.e. block
``slot // block_size``, position ``slot % block_size``, of caches laid out (num_blocks, block_size,
num_kv_heads, head_dim). Slots are distinct; a slot of -1 marks a padding token (a CUDA-graph
batch padded to a captured size) that must not be written. The call writes the caches in place.

It is a scattered copy: the roofline is the bytes of the rows actually written (read once, written
once) and the slot mapping; the rest of the cache is never touched.
"""

from __future__ import annotations

from typing import Any

from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels import seeded

PAD_SLOT = -1
DECODE_TOKENS = 256
"""Token counts up to this are decode steps (one token per sequence); above, prefill chunks."""


def reference_torch(key: Any, value: Any, key_cache: Any, value_cache: Any, slot_mapping: Any) -> tuple:
    """The caches after the write: rows of key/value at their slots, padding tokens (slot -1) skipped.

    key, value: (tokens, num_kv_heads, head_dim); key_cache, value_cache: (num_blocks, block_size,
    num_kv_heads, head_dim); slot_mapping: (tokens,) int64. Returns (key_cache, value_cache).
    """
    block_size = key_cache.shape[1]
    real = slot_mapping >= 0
    slots = slot_mapping[real]
    key_cache[slots // block_size, slots % block_size] = key[real]
    value_cache[slots // block_size, slots % block_size] = value[real]
    return key_cache, value_cache


def padding_tokens(tokens: int) -> int:
    """Trailing padding tokens of a decode batch (an eighth, as a captured batch size would add)."""
    return tokens // 8 if tokens <= DECODE_TOKENS else 0


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """New keys/values N(0, 1), a cache of stale N(0, 1) data, and slots as a serving engine hands them out.

    Decode (up to 256 tokens): each token is the next position of its own sequence, at a random
    offset of a distinct random block, and an eighth of the batch is trailing padding (slot -1).
    Prefill: the tokens are a prompt written into fresh blocks, taken from the free list in random
    order, position i at block i // block_size, offset i % block_size. The cache holds what the
    tokens need plus about 1/8 spare blocks.
    """
    import torch

    generator = seeded.generator(seed)
    torch_dtype = getattr(torch, dtype)
    tokens = shape["tokens"]
    num_kv_heads, head_dim, block_size = int(params["num_kv_heads"]), int(params["head_dim"]), int(params["block_size"])
    real = tokens - padding_tokens(tokens)
    if tokens <= DECODE_TOKENS:
        needed = real
    else:
        needed = -(-real // block_size)
    num_blocks = needed + needed // 8 + 1
    blocks = torch.randperm(num_blocks, generator=generator)[:needed]
    if tokens <= DECODE_TOKENS:
        offsets = torch.randint(0, block_size, (real,), generator=generator)
        slots = blocks * block_size + offsets
    else:
        positions = torch.arange(real)
        slots = blocks[positions // block_size] * block_size + positions % block_size
    slot_mapping = torch.full((tokens,), PAD_SLOT, dtype=torch.int64)
    slot_mapping[:real] = slots
    key = torch.randn(tokens, num_kv_heads, head_dim, generator=generator).to(torch_dtype)
    value = torch.randn(tokens, num_kv_heads, head_dim, generator=generator).to(torch_dtype)
    cache_shape = (num_blocks, block_size, num_kv_heads, head_dim)
    key_cache = torch.randn(cache_shape, generator=generator).to(torch_dtype)
    value_cache = torch.randn(cache_shape, generator=generator).to(torch_dtype)
    return tuple(t.to(device) for t in (key, value, key_cache, value_cache, slot_mapping))


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read and write each real token's key and value row once, read the slot mapping; no FLOPs."""
    tokens = shape["tokens"]
    real = tokens - padding_tokens(tokens)
    row_bytes = int(params["num_kv_heads"]) * int(params["head_dim"]) * dtype_bytes(dtype)
    return Roofline(bytes_moved=2 * 2 * real * row_bytes + 8 * tokens, flops=0)
