"""Baseline GELU(tanh)-and-mul in Triton, written the way inference stacks commonly write it.

One program per row walks the row's intermediate dimension in blocks of 1024: load the gate and up
blocks, compute gelu_tanh(gate) * up in fp32 (tanh written through exp, as
0.5 * (1 + tanh(z)) = sigmoid(2z)), store. Correct for any width (masked tail); one program per
row, Triton's default warps, no tuning.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _gelu_tanh_and_mul_row_kernel(
    x_ptr,
    out_ptr,
    x_row_stride,
    out_row_stride,
    d,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    for start in range(0, d, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < d
        gate = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        up = tl.load(x_row + d + cols, mask=mask, other=0.0).to(tl.float32)
        z = 0.7978845608028654 * (gate + 0.044715 * gate * gate * gate)
        out = gate / (1.0 + tl.exp(-2.0 * z)) * up
        tl.store(out_row + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def gelu_tanh_and_mul(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    rows = x.reshape(-1, 2 * d)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    out = torch.empty((rows.shape[0], d), dtype=x.dtype, device=x.device)
    _gelu_tanh_and_mul_row_kernel[(rows.shape[0],)](rows, out, rows.stride(0), out.stride(0), d, BLOCK_SIZE=1024)
    return out.reshape(*x.shape[:-1], d)
