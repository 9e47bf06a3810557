"""Baseline zero-centered RMSNorm (Qwen3.5 / Qwen3-Next, Gemma) in Triton, as inference stacks write it.

The checkpoint stores the weight as an offset around 0 and the layer scales by (1 + weight), formed
in fp32. One program per token row loads the whole row, reduces the sum of squares in fp32, and
writes the normalized row scaled by (1 + weight). Correct for any hidden size up to the block
limit; one row per program, Triton's default warps, no tuning.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _zero_centered_rms_norm_row_kernel(
    x_ptr,
    weight_ptr,
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
    mean_square = tl.sum(x * x, axis=0) / n_cols
    inv_rms = 1.0 / tl.sqrt(mean_square + eps)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * inv_rms * (1.0 + weight)
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    hidden = x.shape[-1]
    rows = x.reshape(-1, hidden)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    weight = weight.contiguous()
    y = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    block_size = triton.next_power_of_2(hidden)
    _zero_centered_rms_norm_row_kernel[(rows.shape[0],)](
        rows, weight, y, rows.stride(0), y.stride(0), hidden, eps, BLOCK_SIZE=block_size
    )
    return y.reshape(x.shape)
