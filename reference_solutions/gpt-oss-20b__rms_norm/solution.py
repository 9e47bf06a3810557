"""Our RMSNorm for GPT-OSS-20B (hidden 2880, bf16): the bar an agent's solution is measured against.

What it changes from the baseline, and why that is faster:
- The weight is loaded before the row's sum of squares, not after it. The cross-warp reduction ends
  in a barrier that loads cannot move across, so the baseline waits for two memory round trips per
  row (x, then weight); here both are in flight together. At decode sizes, where a call is a
  handful of rows and pure latency, that round trip is a large share of the time.
- num_warps scales with the (padded) row: 16 warps for the 4096-wide block of a 2880 row, so each
  thread holds 8 elements (one 16-byte load) instead of the 32 the default 4 warps leave it. Fewer
  registers per thread, more rows resident per SM, more bytes in flight.
- Past 2048 rows each program normalizes two rows with one weight load, halving programs and
  weight reads; rsqrt instead of 1/sqrt.
2880 is a multiple of 16, so Triton proves 16-byte alignment of every row and the column mask, and
keeps the accesses vectorized despite the mask.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_rows(
    x_ptr, w_ptr, y_ptr, stride_x, stride_y, n_rows, n_cols, eps,
    BLOCK_N: tl.constexpr, ROWS: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    # Issued first so that its latency overlaps the row's load.
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    rows = pid * ROWS + tl.arange(0, ROWS)
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    y = x * inv_rms[:, None] * w[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    hidden = x.shape[-1]
    rows = x.reshape(-1, hidden)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    y = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    n_rows = rows.shape[0]
    block_n = triton.next_power_of_2(hidden)
    rows_per_program = 1 if n_rows <= 2048 else 2
    _rms_norm_rows[(triton.cdiv(n_rows, rows_per_program),)](
        rows, weight.contiguous(), y, rows.stride(0), y.stride(0), n_rows, hidden, eps,
        BLOCK_N=block_n, ROWS=rows_per_program, num_warps=max(4, min(16, block_n // 256)),
    )
    return y.reshape(x.shape)
