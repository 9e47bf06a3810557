"""Baseline KV-cache write in Triton, written the way inference stacks commonly write it.

A generic "scatter token rows into the paged cache" kernel, launched once for the keys and once
for the values (SGLang's KV pool writes keys and values as two separate stores the same way): one
program per token reads its slot, skips padding (slot -1), and copies the token's
num_kv_heads x head_dim row (contiguous, as vLLM's kernel also assumes) into block
slot // block_size, position slot % block_size. Correct for any token count and block stride, with
the headroom such code leaves: two launches where one would do, and one small row per program.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _store_rows_kernel(
    src_ptr,
    cache_ptr,
    slot_mapping_ptr,
    stride_src_tok,
    stride_cache_block,
    stride_cache_slot,
    ROW: tl.constexpr,
    ROW_PADDED: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    token = tl.program_id(0)
    slot = tl.load(slot_mapping_ptr + token)
    if slot < 0:
        return
    block = slot // BLOCK_SIZE
    offset = slot % BLOCK_SIZE
    cols = tl.arange(0, ROW_PADDED)
    mask = cols < ROW
    row = tl.load(src_ptr + token * stride_src_tok + cols, mask=mask)
    tl.store(cache_ptr + block * stride_cache_block + offset * stride_cache_slot + cols, row, mask=mask)


def _store_rows(src: torch.Tensor, cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    tokens, num_heads, head_dim = src.shape
    # Each token's heads x head_dim row is contiguous, in the source and in every cache slot.
    assert src.stride(-1) == 1 and src.stride(-2) == head_dim and cache.stride(-1) == 1 and cache.stride(-2) == head_dim
    row = num_heads * head_dim
    _store_rows_kernel[(tokens,)](
        src,
        cache,
        slot_mapping,
        src.stride(0),
        cache.stride(0),
        cache.stride(1),
        ROW=row,
        ROW_PADDED=triton.next_power_of_2(row),
        BLOCK_SIZE=cache.shape[1],
    )


def reshape_and_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    _store_rows(key, key_cache, slot_mapping)
    _store_rows(value, value_cache, slot_mapping)
