"""Baseline clamped SwiGLU (GPT-OSS) in Triton, written the way inference stacks commonly write it.

One program per row walks the row's output columns in blocks of 1024. Gate values sit in the even
input columns and linear values in the odd ones, so each block is two stride-2 loads. Clamp, then
x_glu * sigmoid(alpha * x_glu) * (x_linear + 1) in fp32, and store. Correct for any width (masked
tail); one program per row, Triton's default warps, no tuning.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _swiglu_clamped_row_kernel(
    x_ptr,
    out_ptr,
    x_row_stride,
    out_row_stride,
    d,
    alpha,
    limit,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    for start in range(0, d, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < d
        x_glu = tl.load(x_row + 2 * cols, mask=mask, other=0.0).to(tl.float32)
        x_linear = tl.load(x_row + 2 * cols + 1, mask=mask, other=0.0).to(tl.float32)
        x_glu = tl.minimum(x_glu, limit)
        x_linear = tl.minimum(tl.maximum(x_linear, -limit), limit)
        out_glu = x_glu / (1.0 + tl.exp(-alpha * x_glu))
        out = out_glu * (x_linear + 1.0)
        tl.store(out_row + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def swiglu_clamped(x: torch.Tensor, alpha: float, limit: float) -> torch.Tensor:
    d = x.shape[-1] // 2
    rows = x.reshape(-1, 2 * d)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    out = torch.empty((rows.shape[0], d), dtype=x.dtype, device=x.device)
    _swiglu_clamped_row_kernel[(rows.shape[0],)](
        rows, out, rows.stride(0), out.stride(0), d, alpha, limit, BLOCK_SIZE=1024
    )
    return out.reshape(*x.shape[:-1], d)
