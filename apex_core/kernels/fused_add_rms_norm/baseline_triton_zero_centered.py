"""Baseline fused residual add + zero-centered RMSNorm (Qwen3.5) in Triton, as inference stacks write it.

One program per token row: load x and residual, add them, store the sum (rounded to the model
dtype) as the new residual, reduce its sum of squares in fp32 and write the normalized row scaled by
(1 + weight), formed in fp32: the checkpoint stores the weight as an offset around 0. Correct for
any hidden size up to the block limit; one row per program, Triton's default warps, no tuning.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _fused_add_zero_centered_rms_norm_row_kernel(
    x_ptr,
    residual_ptr,
    weight_ptr,
    out_ptr,
    residual_out_ptr,
    row_stride,
    n_cols,
    eps,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    offsets = row * row_stride + cols
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    residual = tl.load(residual_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    total = (x + residual).to(residual_out_ptr.dtype.element_ty)
    tl.store(residual_out_ptr + offsets, total, mask=mask)
    total = total.to(tl.float32)
    mean_square = tl.sum(total * total, axis=0) / n_cols
    inv_rms = 1.0 / tl.sqrt(mean_square + eps)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    out = total * inv_rms * (1.0 + weight)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    hidden = x.shape[-1]
    x_rows = x.reshape(-1, hidden).contiguous()
    residual_rows = residual.reshape(-1, hidden).contiguous()
    weight = weight.contiguous()
    out = torch.empty_like(x_rows)
    residual_out = torch.empty_like(x_rows)
    block_size = triton.next_power_of_2(hidden)
    _fused_add_zero_centered_rms_norm_row_kernel[(x_rows.shape[0],)](
        x_rows, residual_rows, weight, out, residual_out, x_rows.stride(0), hidden, eps, BLOCK_SIZE=block_size
    )
    return out.reshape(x.shape), residual_out.reshape(x.shape)
