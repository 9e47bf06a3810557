"""Baseline QK-norm (zero-centered, Qwen3.5) in Triton, written the way a first port commonly is.

One program per (token, head) row: it loads the head_dim values of one query or key head through
the tensor's token and head strides, reduces their sum of squares in fp32, and writes the row
scaled by 1/rms and by (1 + weight), formed in fp32. Queries and keys are two launches of the same
kernel. Correct for any head count, head_dim up to the block limit and any row strides; with the
headroom a real kernel leaves: 256 values per 4-warp program (2 per thread, no wide loads), the
weight reloaded for every row, two launches instead of one.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _qk_norm_head_kernel(
    x_ptr,
    weight_ptr,
    out_ptr,
    x_token_stride,
    x_head_stride,
    out_token_stride,
    out_head_stride,
    head_dim,
    eps,
    BLOCK_SIZE: tl.constexpr,
):
    token = tl.program_id(0)
    head = tl.program_id(1)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < head_dim
    x = tl.load(x_ptr + token * x_token_stride + head * x_head_stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean_square = tl.sum(x * x, axis=0) / head_dim
    inv_rms = 1.0 / tl.sqrt(mean_square + eps)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * inv_rms * (1.0 + weight)
    tl.store(out_ptr + token * out_token_stride + head * out_head_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _normalize(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    tokens, heads, head_dim = x.shape
    if x.stride(-1) != 1:
        x = x.contiguous()
    out = torch.empty((tokens, heads, head_dim), dtype=x.dtype, device=x.device)
    if tokens == 0 or heads == 0:
        return out
    _qk_norm_head_kernel[(tokens, heads)](
        x, weight.contiguous(), out,
        x.stride(0), x.stride(1), out.stride(0), out.stride(1),
        head_dim, eps,
        BLOCK_SIZE=triton.next_power_of_2(head_dim),
    )
    return out


def qk_norm(
    q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    return _normalize(q, q_weight, eps), _normalize(k, k_weight, eps)
