"""Our fused residual add + zero-centered RMSNorm (1 + w)
as Qwen3.5 and Gemma 2 norm (bf16; written for Qwen3.5-27B's 5120-wide rows).

The bar an agent's solution is measured against.

What it changes from the baseline, and why that is faster:
- The weight is loaded together with x and residual, before the sum of squares. The baseline loads
  it after the cross-warp reduction, whose barrier loads cannot cross, so each row waits for a
  second memory round trip; at decode sizes (a handful of rows, pure latency, caches cold) that is a
  large share of the call.
- The warps per row (4, 8 or 16) are tuned on the device once per power-of-two bucket of the row
  count, outside any timed region. Many warps shorten each thread's serial chain of loads, math
  and stores at decode sizes; a fixed rule (4 warps beyond 1024 rows) tied the baseline at 8192
  rows on an H200 (2026-11-30, 0.998x), where the 8192-wide block of a 5120-wide row is register-
  heavy at 4 warps.
- Prefill sizes are bandwidth-bound: x, residual and their sum held as packed
  bf16 and widened to fp32 by 16-bit shifts where used, so loading the weight early costs no
  residency: as many rows stay in flight per SM as in the baseline (more than an fp32 copy of the
  row would allow), without its serialized weight fetch.
The numerics are the baseline's: the sum is rounded to bf16, stored as residual_out, and the norm is
taken of that rounded sum in fp32.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _widen(v):
    # bf16 -> fp32 by a 16-bit shift: exact, and a different op chain than .to(), so the compiler
    # keeps the operands and the sum as packed bf16 (half the registers) instead of fp32 copies.
    return (v.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)


@triton.autotune(
    configs=[triton.Config({}, num_warps=w) for w in (4, 8, 16)],
    key=["rows_bucket", "n_cols"],
)
@triton.jit
def _fused_add_zero_centered_rms_norm_row(
    x_ptr, residual_ptr, w_ptr, out_ptr, residual_out_ptr, row_stride, n_cols, rows_bucket, eps, BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    offsets = row * row_stride + cols
    # The weight (stored as scale - 1) is issued with the rows, so its latency hides behind theirs.
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    residual = tl.load(residual_ptr + offsets, mask=mask, other=0.0)
    total = (_widen(x) + _widen(residual)).to(residual_out_ptr.dtype.element_ty)
    tl.store(residual_out_ptr + offsets, total, mask=mask)
    total32 = total.to(tl.float32)  # the norm is of the rounded sum, the stream the next layer sees
    inv_rms = tl.rsqrt(tl.sum(total32 * total32, axis=0) / n_cols + eps)
    out = _widen(total) * inv_rms * (1.0 + _widen(w))
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
    _fused_add_zero_centered_rms_norm_row[(n_rows,)](
        x_rows, residual_rows, weight.contiguous(), out, residual_out, x_rows.stride(0), hidden,
        triton.next_power_of_2(n_rows), eps, BLOCK_N=triton.next_power_of_2(hidden),
    )
    return out.reshape(x.shape), residual_out.reshape(x.shape)
