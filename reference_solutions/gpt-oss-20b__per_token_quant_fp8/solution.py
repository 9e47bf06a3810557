"""Our dynamic per-token fp8 quantization for GPT-OSS-20B (hidden 2880, bf16 to e4m3fn).

The bar an agent's solution is measured against.

What it changes from the baseline, and why that is faster:
- num_warps scales with the (padded) row: 16 warps for the 4096-wide block, so each thread holds 8
  values instead of the 32 the default 4 warps leave it. That cuts registers per thread (more rows
  resident per SM, more bytes in flight at prefill sizes) and shortens each thread's serial chain of
  convert, scale and store, which is what a decode-sized call waits on.
- One reciprocal per row and a multiply per value instead of a division per value (an fp32 division
  is a multi-instruction sequence on GPUs). The quotient can differ from the reference's correctly
  rounded x / scale in the last fp32 bit, which moves a value across an e4m3 rounding midpoint at
  most by one e4m3 step: inside the task's tolerance, and the same choice aiter makes.
- Past 2048 rows each program quantizes two rows, halving the programs.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _per_token_quant_fp8_rows(
    x_ptr, q_ptr, scale_ptr, x_row_stride, q_row_stride, n_rows, n_cols,
    FP8_MAX: tl.constexpr, BLOCK_N: tl.constexpr, ROWS: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    row_mask = rows < n_rows
    mask = row_mask[:, None] & (cols < n_cols)[None, :]
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    absmax = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-10)
    # One reciprocal per row and a multiply per value instead of a division per value.
    q = x * (FP8_MAX / absmax)[:, None]
    q = tl.minimum(tl.maximum(q, -FP8_MAX), FP8_MAX)
    tl.store(q_ptr + rows[:, None] * q_row_stride + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(scale_ptr + rows, absmax / FP8_MAX, mask=row_mask)


def per_token_quant_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    hidden = x.shape[-1]
    rows = x.reshape(-1, hidden)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    n_rows = rows.shape[0]
    q = torch.empty(rows.shape, dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((n_rows, 1), dtype=torch.float32, device=x.device)
    block_n = triton.next_power_of_2(hidden)
    rows_per_program = 1 if n_rows <= 2048 else 2
    _per_token_quant_fp8_rows[(triton.cdiv(n_rows, rows_per_program),)](
        rows, q, scales, rows.stride(0), q.stride(0), n_rows, hidden,
        FP8_MAX=448.0, BLOCK_N=block_n, ROWS=rows_per_program, num_warps=max(4, min(16, block_n // 256)),
    )
    return q, scales
