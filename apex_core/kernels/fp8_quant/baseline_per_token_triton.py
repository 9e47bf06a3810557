"""Baseline dynamic per-token fp8 quantization in Triton, written the way inference stacks write it.

One program per token row (as aiter's dynamic_per_token_quant_fp8_i8): load the row, take its
absolute maximum, scale = max(absmax, 1e-10) / 448, store clamp(x / scale, -448, 448) as
float8_e4m3fn and the row's scale. Correct for any hidden size up to the block limit; one row per
program, Triton's default warps, no tuning.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _per_token_quant_fp8_row_kernel(
    x_ptr,
    q_ptr,
    scale_ptr,
    x_row_stride,
    q_row_stride,
    n_cols,
    FP8_MAX: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    absmax = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10)
    scale = absmax / FP8_MAX
    q = tl.minimum(tl.maximum(x / scale, -FP8_MAX), FP8_MAX)
    tl.store(q_ptr + row * q_row_stride + cols, q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(scale_ptr + row, scale)


def per_token_quant_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    hidden = x.shape[-1]
    rows = x.reshape(-1, hidden)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    q = torch.empty(rows.shape, dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((rows.shape[0], 1), dtype=torch.float32, device=x.device)
    _per_token_quant_fp8_row_kernel[(rows.shape[0],)](
        rows, q, scales, rows.stride(0), q.stride(0), hidden,
        FP8_MAX=torch.finfo(torch.float8_e4m3fn).max, BLOCK_SIZE=triton.next_power_of_2(hidden),
    )
    return q, scales
