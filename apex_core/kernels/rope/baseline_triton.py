"""Baseline NeoX-style rotary embedding in Triton, written the way inference stacks commonly write it.

One program per (token, head) rotates one head vector: it loads the token's position, the cos and
sin halves of that cache row, the two halves of the head, and writes the rotated halves (and copies
any dims past rotary_dim). Query and key heads are two launches of the same kernel. Correct for any
head count and token count, simple, and with the headroom a real kernel leaves: a 64-element half
per 4-warp program, the cache row reloaded for every head, two launches instead of one.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_neox_head_kernel(
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
    offs = tl.arange(0, BLOCK_HALF)
    mask = offs < HALF
    cos = tl.load(cache_ptr + position * cache_stride + offs, mask=mask, other=0.0)
    sin = tl.load(cache_ptr + position * cache_stride + HALF + offs, mask=mask, other=0.0)

    x_row = x_ptr + token * x_token_stride + head * x_head_stride
    out_row = out_ptr + token * out_token_stride + head * out_head_stride
    x1 = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_row + HALF + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_row + offs, (x1 * cos - x2 * sin).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_row + HALF + offs, (x2 * cos + x1 * sin).to(out_ptr.dtype.element_ty), mask=mask)

    if BLOCK_PASS > 0:
        # Partial rotary: dims past rotary_dim are copied unchanged.
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
    _rope_neox_head_kernel[(tokens, heads)](
        positions, x, out, cache,
        x.stride(0), x.stride(1), out.stride(0), out.stride(1), cache.stride(0),
        HEAD_DIM=head_dim,
        HALF=half,
        BLOCK_HALF=triton.next_power_of_2(half),
        BLOCK_PASS=triton.next_power_of_2(passthrough) if passthrough > 0 else 0,
    )
    return out


def rotary_embedding(
    positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    positions = positions.contiguous()
    cache = cos_sin_cache.contiguous()
    return _apply(positions, q, cache), _apply(positions, k, cache)
