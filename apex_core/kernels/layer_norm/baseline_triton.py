"""Baseline LayerNorm in Triton, written the way inference stacks commonly write it.

One program per token row loads the whole row (padded to the next power of two, masked), reduces
its mean in fp32, then the biased variance of the centred row, and writes the normalized row scaled
by the weight plus the bias. The weight and bias are loaded after both reductions. Correct for any
hidden size up to the block limit; one row per program, Triton's default warps, no tuning: the
headroom a real kernel leaves.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _layer_norm_row_kernel(
    x_ptr,
    weight_ptr,
    bias_ptr,
    y_ptr,
    x_row_stride,
    y_row_stride,
    n_cols,
    eps,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    centred = tl.where(mask, x - mean, 0.0)
    variance = tl.sum(centred * centred, axis=0) / n_cols
    inv_std = 1.0 / tl.sqrt(variance + eps)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = centred * inv_std * weight + bias
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    hidden = x.shape[-1]
    rows = x.reshape(-1, hidden)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    weight = weight.contiguous()
    bias = bias.contiguous()
    y = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    block_size = triton.next_power_of_2(hidden)
    _layer_norm_row_kernel[(rows.shape[0],)](
        rows, weight, bias, y, rows.stride(0), y.stride(0), hidden, eps, BLOCK_SIZE=block_size
    )
    return y.reshape(x.shape)
