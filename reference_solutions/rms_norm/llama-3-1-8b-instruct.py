"""Our RMSNorm for Llama-3.1-8B (hidden 4096, bf16): the bar an agent's solution is measured against.

What it changes from the baseline: 16 warps per row instead of Triton's default 4, so a 4096-wide
row is loaded with wide vector accesses by enough threads to keep the memory pipeline full; two
rows per program once there are more rows than the GPU can hold at once, halving the programs and
the weight reloads; rsqrt instead of 1/sqrt.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_rows(x_ptr, w_ptr, y_ptr, stride_x, stride_y, n_rows, n_cols, eps, BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    y = x * inv_rms[:, None] * w[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    hidden = x.shape[-1]
    rows = x.reshape(-1, hidden)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    y = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    n_rows = rows.shape[0]
    rows_per_program = 1 if n_rows <= 2048 else 2
    _rms_norm_rows[(triton.cdiv(n_rows, rows_per_program),)](
        rows, weight.contiguous(), y, rows.stride(0), y.stride(0), n_rows, hidden, eps,
        BLOCK_N=triton.next_power_of_2(hidden), ROWS=rows_per_program, num_warps=16,
    )
    return y.reshape(x.shape)
