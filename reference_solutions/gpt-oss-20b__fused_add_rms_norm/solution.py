"""Our fused residual add + RMSNorm for GPT-OSS-20B (hidden 2880, bf16).

The bar an agent's solution is measured against.

What it changes from the baseline, and why that is faster:
- The weight is loaded before the rows' sum of squares, not after it. The cross-warp reduction ends
  in a barrier that loads cannot move across, so the baseline waits for a second memory round trip
  per row; here the weight is in flight with x and residual. At decode sizes, a handful of rows and
  pure latency, that round trip is a large share of the call.
- num_warps scales with the (padded) row: 16 warps for the 4096-wide block, so each thread holds 8
  elements of each operand instead of the 32 the default 4 warps leave it: fewer registers per
  thread, more rows resident per SM, more bytes in flight. This kernel moves twice the bytes of a
  plain RMSNorm per row, so keeping many rows in flight matters even more.
- Past 2048 rows each program handles two rows with one weight load, halving programs and weight
  reads; rsqrt instead of 1/sqrt.
The numerics are the baseline's: the sum is rounded to bf16, stored as residual_out, and the norm is
taken of that rounded sum in fp32.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _fused_add_rms_norm_rows(
    x_ptr, residual_ptr, w_ptr, out_ptr, residual_out_ptr, row_stride, n_rows, n_cols, eps,
    BLOCK_N: tl.constexpr, ROWS: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    # Issued first so that its latency overlaps the rows' loads.
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    rows = pid * ROWS + tl.arange(0, ROWS)
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    offsets = rows[:, None] * row_stride + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    residual = tl.load(residual_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    total = (x + residual).to(residual_out_ptr.dtype.element_ty)
    tl.store(residual_out_ptr + offsets, total, mask=mask)
    total = total.to(tl.float32)  # the norm is of the rounded sum, the stream the next layer sees
    inv_rms = tl.rsqrt(tl.sum(total * total, axis=1) / n_cols + eps)
    out = total * inv_rms[:, None] * w[None, :]
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    hidden = x.shape[-1]
    x_rows = x.reshape(-1, hidden).contiguous()
    residual_rows = residual.reshape(-1, hidden).contiguous()
    out = torch.empty_like(x_rows)
    residual_out = torch.empty_like(x_rows)
    n_rows = x_rows.shape[0]
    block_n = triton.next_power_of_2(hidden)
    rows_per_program = 1 if n_rows <= 2048 else 2
    _fused_add_rms_norm_rows[(triton.cdiv(n_rows, rows_per_program),)](
        x_rows, residual_rows, weight.contiguous(), out, residual_out, x_rows.stride(0), n_rows, hidden, eps,
        BLOCK_N=block_n, ROWS=rows_per_program, num_warps=max(4, min(16, block_n // 256)),
    )
    return out.reshape(x.shape), residual_out.reshape(x.shape)
