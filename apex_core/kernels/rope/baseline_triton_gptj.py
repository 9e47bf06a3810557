"""Baseline GPT-J-style (interleaved) rotary embedding in Triton, as inference stacks commonly write it.

DeepSeek's MLA applies rope to the 64-dim positional part of each query head and to its single
shared key head, pairing dims (2i, 2i + 1). One program per (token, head) loads the cache row and
the even and odd elements of one head with stride-2 accesses, rotates them and stores them back
interleaved. Query and key heads are two launches. Correct for any shape, simple, and with the
headroom a real kernel leaves: stride-2 loads and stores, the cache row reloaded for every head,
one small vector per 4-warp program, two launches.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_gptj_head_kernel(
    positions_ptr,
    x_ptr,
    out_ptr,
    cache_ptr,
    x_token_stride,
    x_head_stride,
    out_token_stride,
    out_head_stride,
    cache_stride,
    HEAD_DIM: tl.constexpr,
    HALF: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_PASS: tl.constexpr,
):
    token = tl.program_id(0)
    head = tl.program_id(1)
    position = tl.load(positions_ptr + token)
    pairs = tl.arange(0, BLOCK_HALF)
    mask = pairs < HALF
    cos = tl.load(cache_ptr + position * cache_stride + pairs, mask=mask, other=0.0)
    sin = tl.load(cache_ptr + position * cache_stride + HALF + pairs, mask=mask, other=0.0)

    x_row = x_ptr + token * x_token_stride + head * x_head_stride
    out_row = out_ptr + token * out_token_stride + head * out_head_stride
    even = tl.load(x_row + 2 * pairs, mask=mask, other=0.0).to(tl.float32)
    odd = tl.load(x_row + 2 * pairs + 1, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_row + 2 * pairs, (even * cos - odd * sin).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_row + 2 * pairs + 1, (odd * cos + even * sin).to(out_ptr.dtype.element_ty), mask=mask)

    if BLOCK_PASS > 0:
        pass_offs = 2 * HALF + tl.arange(0, BLOCK_PASS)
        pass_mask = pass_offs < HEAD_DIM
        rest = tl.load(x_row + pass_offs, mask=pass_mask, other=0.0)
        tl.store(out_row + pass_offs, rest, mask=pass_mask)


def _apply(positions: torch.Tensor, x: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
    tokens, heads, head_dim = x.shape
    x = x.contiguous()
    out = torch.empty_like(x)
    half = cache.shape[-1] // 2
    passthrough = head_dim - 2 * half
    if tokens == 0 or heads == 0:
        return out
    _rope_gptj_head_kernel[(tokens, heads)](
        positions, x, out, cache,
        x.stride(0), x.stride(1), out.stride(0), out.stride(1), cache.stride(0),
        HEAD_DIM=head_dim,
        HALF=half,
        BLOCK_HALF=triton.next_power_of_2(half),
        BLOCK_PASS=triton.next_power_of_2(passthrough) if passthrough > 0 else 0,
    )
    return out


def rotary_embedding(
    positions: torch.Tensor, q_pe: torch.Tensor, k_pe: torch.Tensor, cos_sin_cache: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    positions = positions.contiguous()
    cache = cos_sin_cache.contiguous()
    return _apply(positions, q_pe, cache), _apply(positions, k_pe, cache)
